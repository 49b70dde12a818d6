//! The one-way dependency rule, checked by `cargo test`
//! (`docs/architecture.md`, "Domains"): infrastructure never names a domain
//! or a root, and a domain never names another domain (except the one it
//! adapts, [`ADAPTS`]) or a root. Every
//! top-level module must be listed here as one of the three, so a new one
//! cannot slip past the check.
//!
//! The scan reads each source file, drops comments, and collects the
//! crate-level module every path starts from: `crate::x…`, each item of
//! `use crate::{x…, y…}`, and `super::…` chains that climb to the crate
//! root.

#![cfg(test)]

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

/// Compose everything; may name any module.
const ROOTS: &[&str] = &["app", "cli", "schema", "layering"];
/// One folder each; may name infrastructure only.
const DOMAINS: &[&str] = &["feeds", "nodes", "readerapi", "docs", "gateway"];
/// A domain that adapts another (a protocol over its service) may name it.
const ADAPTS: &[(&str, &str)] = &[("readerapi", "feeds")];
/// Shared by every domain; may name infrastructure only.
const INFRASTRUCTURE: &[&str] = &[
    "auth",
    "config",
    "datadir",
    "db",
    "digest",
    "domain",
    "error",
    "fulltext",
    "graphql",
    "http",
    "httpc",
    "input",
    "jobs",
    "ops",
    "telemetry",
];

/// Removes `//` and `/* */` comments, keeping string literals (a `//`
/// inside a string is not a comment).
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut previous = ' ';
                for next in chars.by_ref() {
                    if previous == '*' && next == '/' {
                        break;
                    }
                    previous = next;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first identifier of each top-level item of a `{ … }` group.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (index, c) in group.char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    item_start = true;
                    continue;
                }
            }
            '}' => {
                if depth == 1 {
                    break;
                }
                depth -= 1;
            }
            ',' if depth == 1 => item_start = true,
            c if depth == 1 && item_start && (c.is_alphanumeric() || c == '_') => {
                heads.push(identifier(&group[index..]).to_owned());
                item_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The crate-level modules a file names; `depth` is how many `super::`
/// reach the crate root from it (1 for `src/x.rs` and `src/x/mod.rs`).
fn crate_modules(source: &str, depth: usize) -> BTreeSet<String> {
    let source = strip_comments(source);
    let mut found = BTreeSet::new();
    for (index, _) in source.match_indices("crate::") {
        // `$crate::` in macros names this crate too.
        let before = source[..index].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &source[index + "crate::".len()..];
        if rest.starts_with('{') {
            found.extend(group_heads(rest));
        } else {
            found.insert(identifier(rest).to_owned());
        }
    }
    let mut search = 0;
    while let Some(offset) = source[search..].find("super::") {
        let start = search + offset;
        let before = source[..start].chars().next_back();
        let mut rest = &source[start..];
        let mut climbs = 0;
        while let Some(next) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = next;
        }
        search = source.len() - rest.len();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') || climbs < depth {
            continue;
        }
        if rest.starts_with('{') {
            found.extend(group_heads(rest));
        } else {
            found.insert(identifier(rest).to_owned());
        }
    }
    found.retain(|name| !name.is_empty() && name != "self");
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("a readable entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to, and its depth below the crate.
fn module_of(src: &Path, file: &Path) -> (String, usize) {
    let relative = file.strip_prefix(src).expect("under src");
    let parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let top = parts[0].trim_end_matches(".rs").to_owned();
    let file_name = parts.last().expect("a file name");
    let depth = if file_name == "mod.rs" {
        parts.len() - 1
    } else {
        parts.len()
    };
    (top, depth.max(1))
}

fn violations() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let (module, depth) = module_of(&src, &file);
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let forbidden: Vec<&str> = if INFRASTRUCTURE.contains(&module.as_str()) {
            DOMAINS.iter().chain(ROOTS).copied().collect()
        } else if DOMAINS.contains(&module.as_str()) {
            DOMAINS
                .iter()
                .chain(ROOTS)
                .copied()
                .filter(|other| *other != module && !ADAPTS.contains(&(module.as_str(), *other)))
                .collect()
        } else if ROOTS.contains(&module.as_str()) {
            continue;
        } else {
            problems.push(format!(
                "src/{module} is not classified in src/layering.rs (root, domain or infrastructure)"
            ));
            continue;
        };
        let source = std::fs::read_to_string(&file).expect("a readable source file");
        for named in crate_modules(&source, depth) {
            if forbidden.contains(&named.as_str()) {
                problems.push(format!(
                    "{} ({module}) names crate::{named}",
                    file.strip_prefix(&src).unwrap_or(&file).display()
                ));
            }
        }
    }
    problems
}

#[test]
fn infrastructure_names_no_domain_and_domains_name_no_other() {
    let problems = violations();
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_scan_sees_every_way_a_path_can_name_a_module() {
    let source = r#"
        use crate::{
            error::AppError,
            feeds::{self, service::FeedsService},
        };
        // use crate::gateway::x; (a comment)
        let text = "crate::docs"; // inside a string: still counted, on purpose
        fn f() -> crate::nodes::X { $crate::jobs::y!() }
        use super::super::app::App;
        use super::sibling;
    "#;
    let found = crate_modules(source, 2);
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["app", "docs", "error", "feeds", "jobs", "nodes"]);
    // From a file one level down, one `super::` reaches the crate.
    assert!(crate_modules("use super::feeds::X;", 1).contains("feeds"));
    assert!(crate_modules("use super::feeds::X;", 2).is_empty());
}
