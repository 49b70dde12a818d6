//! The YAML frontmatter heading every mirrored document, rendered by hand
//! (no YAML library) so its keys come in one fixed order and the same
//! document renders to the same bytes on every run: a sync that changed
//! nothing leaves every file as it was.
//!
//! ```text
//! ---
//! id: "1f2e3d4c-0000-4abc-8def-123456789abc"
//! platform: notion
//! type: row
//! title: "Q3: plan"
//! url: https://www.notion.so/Q3-plan-1f2e3d4c00004abc8def123456789abc
//! edited_at: "2026-12-02T15:04:05.123Z"
//! parent: c0ffee00-0000-4abc-8def-123456789abc
//! properties:
//!   Owner: Ada
//!   Status: "yes"
//! ---
//! ```
//!
//! The keys, always in this order: `id`, `platform`, `type`, `title`,
//! `url`, `edited_at`, `parent` (the last three `null` when unknown or at
//! the root), then `properties` (database rows only, sorted by name). A
//! string is written plain when no YAML 1.1 or 1.2 reader could take it
//! for anything else, else double-quoted with escapes: words like `yes`,
//! `null`, `~`; anything that starts like a number, a date, an indicator
//! (`-`, `#`, `!`, `&`, `*`, `[`, `{`, `"`, `'`, `%`, `@`, …) or space;
//! anything holding `: `, ` #`, a trailing `:`, a quote, a backslash or a
//! character that must be escaped (control characters, NUL, line breaks,
//! U+2028/U+2029, U+FEFF). `edited_at` is RFC 3339 in UTC, as a string.
//!
//! [`parse`] reads back what [`render`] writes, and nothing else.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};

use super::adapter::{NodeKind, Platform};

/// The fence opening and closing a frontmatter block.
pub const FENCE: &str = "---\n";

/// A mirrored document's frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    /// The platform's primary id.
    pub id: String,
    /// The platform.
    pub platform: Platform,
    /// What the node is (`type:`).
    pub kind: NodeKind,
    /// The remote title, as the platform has it.
    pub title: String,
    /// The online URL. Link rewriting never touches it.
    pub url: Option<String>,
    /// The remote last edit.
    pub edited_at: Option<DateTime<Utc>>,
    /// The parent's primary id; `None` at the platform root.
    pub parent: Option<String>,
    /// A database row's properties, by name.
    pub properties: BTreeMap<String, String>,
}

/// Why a text is not a frontmatter block we wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// The text does not start with a fence, or the block never closes.
    #[error("no frontmatter block")]
    Missing,
    /// A line is not the key expected there, in our order.
    #[error("line {line}: expected `{expected}`")]
    UnexpectedLine {
        /// 1-based, counting the opening fence.
        line: usize,
        /// The key expected.
        expected: &'static str,
    },
    /// A value is not a scalar we write.
    #[error("line {line}: {problem}")]
    BadValue {
        /// 1-based, counting the opening fence.
        line: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// Words some YAML reader takes for a boolean or null.
const SPECIAL_WORDS: &[&str] = &[
    "null", "~", "true", "false", "yes", "no", "on", "off", "y", "n",
];

/// Whether a reader must see `c` escaped inside double quotes.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
}

/// Whether `text` can be written as a plain scalar and read back as this
/// same string by YAML 1.1 and 1.2 readers alike.
fn is_plain_safe(text: &str) -> bool {
    let (Some(first), Some(last)) = (text.chars().next(), text.chars().next_back()) else {
        return false;
    };
    let indicator = "-?:,[]{}#&*!|>'\"%@`<=~+.\\";
    if first.is_ascii_digit() || first.is_whitespace() || indicator.contains(first) {
        return false;
    }
    if last.is_whitespace() || last == ':' {
        return false;
    }
    if SPECIAL_WORDS.contains(&text.to_lowercase().as_str()) {
        return false;
    }
    if text.contains(": ") || text.contains(" #") || text.contains(":\t") {
        return false;
    }
    !text.chars().any(|c| {
        needs_escape(c) || (c.is_whitespace() && c != ' ') || matches!(c, '"' | '\'' | '\\')
    })
}

/// The one-letter escapes, both ways: the character and the letter after
/// the backslash.
const SHORT_ESCAPES: &[(char, char)] = &[
    ('"', '"'),
    ('\\', '\\'),
    ('\0', '0'),
    ('\t', 't'),
    ('\n', 'n'),
    ('\r', 'r'),
];

fn push_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if let Some((_, letter)) = SHORT_ESCAPES.iter().find(|(plain, _)| *plain == c) {
            out.push('\\');
            out.push(*letter);
        } else if needs_escape(c) {
            let code = u32::from(c);
            if code <= 0xff {
                let _ = write!(out, "\\x{code:02x}");
            } else {
                let _ = write!(out, "\\u{code:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn push_scalar(out: &mut String, text: &str) {
    if is_plain_safe(text) {
        out.push_str(text);
    } else {
        push_quoted(out, text);
    }
}

fn push_entry(out: &mut String, key: &str, value: Option<&str>) {
    out.push_str(key);
    out.push_str(": ");
    match value {
        Some(value) => push_scalar(out, value),
        None => out.push_str("null"),
    }
    out.push('\n');
}

/// The time as `edited_at:` writes it: RFC 3339, UTC, `Z`, with as many
/// fraction digits as it has (0, 3, 6 or 9).
pub fn format_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The frontmatter block, fences and final line break included.
pub fn render(frontmatter: &Frontmatter) -> String {
    let mut out = String::with_capacity(256);
    out.push_str(FENCE);
    push_entry(&mut out, "id", Some(&frontmatter.id));
    push_entry(&mut out, "platform", Some(frontmatter.platform.as_str()));
    push_entry(&mut out, "type", Some(frontmatter.kind.as_str()));
    push_entry(&mut out, "title", Some(&frontmatter.title));
    push_entry(&mut out, "url", frontmatter.url.as_deref());
    let edited_at = frontmatter.edited_at.map(format_time);
    push_entry(&mut out, "edited_at", edited_at.as_deref());
    push_entry(&mut out, "parent", frontmatter.parent.as_deref());
    if !frontmatter.properties.is_empty() {
        out.push_str("properties:\n");
        for (name, value) in &frontmatter.properties {
            out.push_str("  ");
            push_scalar(&mut out, name);
            out.push_str(": ");
            push_scalar(&mut out, value);
            out.push('\n');
        }
    }
    out.push_str(FENCE);
    out
}

/// A whole mirrored file: the frontmatter, then the body.
pub fn document(frontmatter: &Frontmatter, body: &str) -> String {
    let mut out = render(frontmatter);
    out.push_str(body);
    out
}

/// Splits a file into its frontmatter block (fences included) and its
/// body, without reading the block: link rewriting works on the body alone.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix(FENCE)?;
    let mut offset = FENCE.len();
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line == FENCE {
            return Some(text.split_at(offset));
        }
    }
    None
}

/// A scalar as read: `null`, or a string.
enum Scalar {
    Null,
    Text(String),
}

fn parse_quoted(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    let body = &text[1..];
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[index + 1..])),
            '\\' => {
                let (_, escape) = chars.next()?;
                if let Some((plain, _)) = SHORT_ESCAPES.iter().find(|(_, letter)| *letter == escape)
                {
                    out.push(*plain);
                    continue;
                }
                let width = match escape {
                    'x' => 2,
                    'u' => 4,
                    _ => return None,
                };
                let mut hex = String::with_capacity(width);
                for _ in 0..width {
                    hex.push(chars.next()?.1);
                }
                if !hex.chars().all(|digit| digit.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            c => out.push(c),
        }
    }
    None
}

/// Reads one scalar that fills the rest of a line; `rest` is what follows
/// it on the line (for a property key, the `: value`).
fn parse_scalar(text: &str) -> Option<(Scalar, &str)> {
    if text.starts_with('"') {
        let (value, rest) = parse_quoted(text)?;
        Some((Scalar::Text(value), rest))
    } else if text == "null" {
        Some((Scalar::Null, ""))
    } else if is_plain_safe(text) {
        Some((Scalar::Text(text.to_owned()), ""))
    } else {
        None
    }
}

/// A property line's key and value: `  <key>: <value>`.
fn parse_property(line: &str) -> Option<(String, String)> {
    let line = line.strip_prefix("  ")?;
    let (key, value) = if line.starts_with('"') {
        let (key, rest) = parse_quoted(line)?;
        (key, rest.strip_prefix(": ")?)
    } else {
        let (key, value) = line.split_once(": ")?;
        if !is_plain_safe(key) {
            return None;
        }
        (key.to_owned(), value)
    };
    match parse_scalar(value)? {
        (Scalar::Text(value), "") => Some((key, value)),
        _ => None,
    }
}

/// Reads a file this module wrote: its frontmatter and its body.
pub fn parse(text: &str) -> Result<(Frontmatter, &str), FrontmatterError> {
    let (block, body) = split(text).ok_or(FrontmatterError::Missing)?;
    let inner = &block[FENCE.len()..block.len() - FENCE.len()];
    let mut lines = inner
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 2, line));
    let mut field = |expected: &'static str| -> Result<(usize, Scalar), FrontmatterError> {
        let (line, text) = lines
            .next()
            .ok_or(FrontmatterError::UnexpectedLine { line: 0, expected })?;
        let value = text
            .strip_prefix(expected)
            .and_then(|rest| rest.strip_prefix(": "))
            .ok_or(FrontmatterError::UnexpectedLine { line, expected })?;
        match parse_scalar(value) {
            Some((scalar, "")) => Ok((line, scalar)),
            _ => Err(FrontmatterError::BadValue {
                line,
                problem: "not a scalar we write",
            }),
        }
    };
    let text = |(line, scalar): (usize, Scalar)| match scalar {
        Scalar::Text(text) => Ok(text),
        Scalar::Null => Err(FrontmatterError::BadValue {
            line,
            problem: "may not be null",
        }),
    };
    let optional = |(_, scalar): (usize, Scalar)| match scalar {
        Scalar::Text(text) => Some(text),
        Scalar::Null => None,
    };
    let id = text(field("id")?)?;
    let (line, platform) = field("platform")?;
    let platform = match platform {
        Scalar::Text(name) => Platform::parse(&name),
        Scalar::Null => None,
    }
    .ok_or(FrontmatterError::BadValue {
        line,
        problem: "not a platform",
    })?;
    let (line, kind) = field("type")?;
    let kind = match kind {
        Scalar::Text(name) => NodeKind::parse(&name),
        Scalar::Null => None,
    }
    .ok_or(FrontmatterError::BadValue {
        line,
        problem: "not a node type",
    })?;
    let title = text(field("title")?)?;
    let url = optional(field("url")?);
    let (line, edited_at) = field("edited_at")?;
    let edited_at = match edited_at {
        Scalar::Null => None,
        Scalar::Text(at) => Some(
            DateTime::parse_from_rfc3339(&at)
                .map_err(|_| FrontmatterError::BadValue {
                    line,
                    problem: "not an RFC 3339 time",
                })?
                .with_timezone(&Utc),
        ),
    };
    let parent = optional(field("parent")?);
    let mut properties = BTreeMap::new();
    let mut remaining = inner.lines().enumerate().skip(7);
    if let Some((index, line)) = remaining.next() {
        if line != "properties:" {
            return Err(FrontmatterError::UnexpectedLine {
                line: index + 2,
                expected: "properties",
            });
        }
        for (index, line) in remaining {
            let (name, value) = parse_property(line).ok_or(FrontmatterError::BadValue {
                line: index + 2,
                problem: "not a property we write",
            })?;
            properties.insert(name, value);
        }
    }
    let frontmatter = Frontmatter {
        id,
        platform,
        kind,
        title,
        url,
        edited_at,
        parent,
        properties,
    };
    Ok((frontmatter, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use yaml_rust2::{Yaml, YamlLoader};

    fn row() -> Frontmatter {
        Frontmatter {
            id: "1f2e3d4c-0000-4abc-8def-123456789abc".into(),
            platform: Platform::Notion,
            kind: NodeKind::Row,
            title: "Q3: plan".into(),
            url: Some("https://www.notion.so/Q3-plan-1f2e3d4c00004abc8def123456789abc".into()),
            edited_at: Some(
                DateTime::parse_from_rfc3339("2026-12-02T15:04:05.123Z")
                    .expect("a test time")
                    .with_timezone(&Utc),
            ),
            parent: Some("c0ffee00-0000-4abc-8def-123456789abc".into()),
            properties: [("Status", "yes"), ("Owner", "Ada"), ("状态", "进行中")]
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect(),
        }
    }

    #[test]
    fn the_golden_example_byte_for_byte() {
        let expected = "---\n\
            id: \"1f2e3d4c-0000-4abc-8def-123456789abc\"\n\
            platform: notion\n\
            type: row\n\
            title: \"Q3: plan\"\n\
            url: https://www.notion.so/Q3-plan-1f2e3d4c00004abc8def123456789abc\n\
            edited_at: \"2026-12-02T15:04:05.123Z\"\n\
            parent: c0ffee00-0000-4abc-8def-123456789abc\n\
            properties:\n  \
            Owner: Ada\n  \
            Status: \"yes\"\n  \
            状态: 进行中\n\
            ---\n";
        assert_eq!(render(&row()), expected);
    }

    #[test]
    fn a_root_page_without_properties_or_times() {
        let page = Frontmatter {
            id: "doxcnAbc".into(),
            platform: Platform::Feishu,
            kind: NodeKind::Docx,
            title: "设计文档".into(),
            url: None,
            edited_at: None,
            parent: None,
            properties: BTreeMap::new(),
        };
        let expected = "---\nid: doxcnAbc\nplatform: feishu\ntype: docx\ntitle: 设计文档\nurl: null\nedited_at: null\nparent: null\n---\n";
        assert_eq!(render(&page), expected);
        let file = document(&page, "# 设计文档\n");
        assert_eq!(parse(&file), Ok((page, "# 设计文档\n")));
    }

    #[test]
    fn strings_are_quoted_when_a_reader_could_misread_them() {
        let cases: &[(&str, &str)] = &[
            ("Weekly notes", "Weekly notes"),
            ("设计 文档", "设计 文档"),
            ("C# tips", "C# tips"),
            ("a,b [c] {d}", "a,b [c] {d}"),
            ("https://x.test/a?b=c#d", "https://x.test/a?b=c#d"),
            ("Q3: plan", "\"Q3: plan\""),
            ("ends with:", "\"ends with:\""),
            ("a #comment", "\"a #comment\""),
            ("- item", "\"- item\""),
            ("-1", "\"-1\""),
            ("# heading", "\"# heading\""),
            ("'single'", "\"'single'\""),
            ("say \"hi\"", "\"say \\\"hi\\\"\""),
            ("back\\slash", "\"back\\\\slash\""),
            ("line\nbreak", "\"line\\nbreak\""),
            ("cr\rtab\t", "\"cr\\rtab\\t\""),
            ("nul\0", "\"nul\\0\""),
            ("bell\u{7}", "\"bell\\x07\""),
            ("del\u{7f}", "\"del\\x7f\""),
            ("next\u{85}line", "\"next\\x85line\""),
            ("sep\u{2028}", "\"sep\\u2028\""),
            ("\u{feff}bom", "\"\\ufeffbom\""),
            ("", "\"\""),
            (" padded", "\" padded\""),
            ("padded ", "\"padded \""),
            ("yes", "\"yes\""),
            ("No", "\"No\""),
            ("NULL", "\"NULL\""),
            ("~", "\"~\""),
            ("on", "\"on\""),
            ("Y", "\"Y\""),
            ("true", "\"true\""),
            ("123", "\"123\""),
            ("1.5", "\"1.5\""),
            ("0x1F", "\"0x1F\""),
            ("1e3", "\"1e3\""),
            (".inf", "\".inf\""),
            ("+1", "\"+1\""),
            ("2026-12-02", "\"2026-12-02\""),
            ("12:30", "\"12:30\""),
            ("*alias", "\"*alias\""),
            ("&anchor", "\"&anchor\""),
            ("!tag", "\"!tag\""),
            ("|", "\"|\""),
            (">folded", "\">folded\""),
            ("%directive", "\"%directive\""),
            ("@at", "\"@at\""),
            ("`tick", "\"`tick\""),
            ("[list", "\"[list\""),
            ("{map", "\"{map\""),
            ("?key", "\"?key\""),
            ("<<", "\"<<\""),
            ("tab\tinside", "\"tab\\tinside\""),
            ("ideographic\u{3000}space", "\"ideographic\u{3000}space\""),
        ];
        for (text, expected) in cases {
            let mut out = String::new();
            push_scalar(&mut out, text);
            assert_eq!(out, *expected, "{text:?}");
            // The independent oracle reads back the same string.
            let yaml = YamlLoader::load_from_str(&format!("k: {out}\n")).expect("valid YAML");
            assert_eq!(yaml[0]["k"].as_str(), Some(*text), "{out}");
        }
    }

    #[test]
    fn rendering_is_byte_stable_whatever_the_insertion_order() {
        let mut shuffled = row();
        shuffled.properties = [("状态", "进行中"), ("Owner", "Ada"), ("Status", "yes")]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
        let first = render(&row());
        assert_eq!(render(&shuffled), first);
        // What we read back renders to the same bytes again.
        let (read, _) = parse(&first).expect("ours");
        assert_eq!(render(&read), first);
    }

    #[test]
    fn the_body_is_split_off_after_the_closing_fence() {
        let file = document(&row(), "---\nnot frontmatter\n---\nbody\n");
        let (block, body) = split(&file).expect("a block");
        assert_eq!(block, render(&row()));
        assert_eq!(body, "---\nnot frontmatter\n---\nbody\n");
        assert_eq!(split("no fence\n"), None);
        assert_eq!(split("---\nid: x\n"), None);
        assert_eq!(split("---\n---\n"), Some(("---\n---\n", "")));
    }

    #[test]
    fn what_we_do_not_write_is_refused() {
        use FrontmatterError::{BadValue, Missing, UnexpectedLine};
        let good = render(&row());
        let title = "title: \"Q3: plan\"";
        let cases: Vec<(String, FrontmatterError)> = vec![
            ("no frontmatter".into(), Missing),
            ("---\nid: x\n".into(), Missing),
            (
                "---\nid: x\n---\n".into(),
                UnexpectedLine {
                    line: 0,
                    expected: "platform",
                },
            ),
            (
                good.replace("platform: notion", "platform: confluence"),
                BadValue {
                    line: 3,
                    problem: "not a platform",
                },
            ),
            (
                good.replace("type: row", "kind: row"),
                UnexpectedLine {
                    line: 4,
                    expected: "type",
                },
            ),
            (
                good.replace(title, "title: Q3: plan"),
                BadValue {
                    line: 5,
                    problem: "not a scalar we write",
                },
            ),
            (
                good.replace(title, "title: \"Q3\\q\""),
                BadValue {
                    line: 5,
                    problem: "not a scalar we write",
                },
            ),
            (
                good.replace(title, "title: \"Q3\\x+F\""),
                BadValue {
                    line: 5,
                    problem: "not a scalar we write",
                },
            ),
            (
                good.replace(title, "title: null"),
                BadValue {
                    line: 5,
                    problem: "may not be null",
                },
            ),
            (
                good.replace("\"2026-12-02T15:04:05.123Z\"", "\"yesterday\""),
                BadValue {
                    line: 7,
                    problem: "not an RFC 3339 time",
                },
            ),
            (
                good.replace("properties:", "props:"),
                UnexpectedLine {
                    line: 9,
                    expected: "properties",
                },
            ),
            (
                good.replace("  Owner: Ada", "  Owner: 'Ada'"),
                BadValue {
                    line: 10,
                    problem: "not a property we write",
                },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(&text).map(|(fm, _)| fm), Err(expected), "{text}");
        }
    }

    fn instant() -> impl Strategy<Value = DateTime<Utc>> {
        // Whole seconds, or milliseconds, micro- or nanoseconds.
        (0i64..4_102_444_800, 0u32..4, 0u32..1_000_000_000).prop_map(|(secs, digits, nanos)| {
            let nanos = match digits {
                0 => 0,
                1 => nanos / 1_000_000 * 1_000_000,
                2 => nanos / 1_000 * 1_000,
                _ => nanos,
            };
            DateTime::from_timestamp(secs, nanos).unwrap_or_default()
        })
    }

    fn frontmatter() -> impl Strategy<Value = Frontmatter> {
        (
            any::<String>(),
            prop::sample::select(Platform::ALL.to_vec()),
            prop::sample::select(NodeKind::ALL.to_vec()),
            any::<String>(),
            prop::option::of(any::<String>()),
            prop::option::of(instant()),
            prop::option::of(any::<String>()),
            prop::collection::btree_map(any::<String>(), any::<String>(), 0..5),
        )
            .prop_map(
                |(id, platform, kind, title, url, edited_at, parent, properties)| Frontmatter {
                    id,
                    platform,
                    kind,
                    title,
                    url,
                    edited_at,
                    parent,
                    properties,
                },
            )
    }

    /// What the oracle reads from a rendered block.
    fn oracle_string(yaml: &Yaml) -> Option<String> {
        yaml.as_str().map(str::to_owned)
    }

    proptest! {
        #[test]
        fn any_frontmatter_round_trips(frontmatter in frontmatter(), body in any::<String>()) {
            let file = document(&frontmatter, &body);
            let (read, rest) = parse(&file).expect("we read what we write");
            prop_assert_eq!(&read, &frontmatter);
            prop_assert_eq!(rest, body.as_str());
            prop_assert_eq!(render(&read), render(&frontmatter));
        }

        #[test]
        fn an_independent_yaml_reader_sees_the_same_values(frontmatter in frontmatter()) {
            let block = render(&frontmatter);
            let yaml_text = &block[FENCE.len()..block.len() - FENCE.len()];
            let docs = YamlLoader::load_from_str(yaml_text).expect("valid YAML");
            let doc = &docs[0];
            prop_assert_eq!(oracle_string(&doc["id"]), Some(frontmatter.id.clone()));
            prop_assert_eq!(oracle_string(&doc["platform"]), Some(frontmatter.platform.as_str().to_owned()));
            prop_assert_eq!(oracle_string(&doc["type"]), Some(frontmatter.kind.as_str().to_owned()));
            prop_assert_eq!(oracle_string(&doc["title"]), Some(frontmatter.title.clone()));
            prop_assert_eq!(oracle_string(&doc["url"]), frontmatter.url.clone());
            prop_assert_eq!(doc["url"].is_null(), frontmatter.url.is_none());
            prop_assert_eq!(oracle_string(&doc["edited_at"]), frontmatter.edited_at.map(format_time));
            prop_assert_eq!(oracle_string(&doc["parent"]), frontmatter.parent.clone());
            if frontmatter.properties.is_empty() {
                prop_assert!(doc["properties"].is_badvalue());
            } else {
                let Some(map) = doc["properties"].as_hash() else {
                    return Err(TestCaseError::fail("properties is not a map"));
                };
                let read: BTreeMap<String, String> = map
                    .iter()
                    .filter_map(|(key, value)| Some((oracle_string(key)?, oracle_string(value)?)))
                    .collect();
                prop_assert_eq!(read, frontmatter.properties.clone());
            }
        }

        #[test]
        fn plain_scalars_are_only_what_the_oracle_reads_as_that_string(text in "[a-zA-Z0-9 :#\\-.~'\"!&*?|>%@,\\[\\]{}<=+]{1,8}") {
            let mut out = String::new();
            push_scalar(&mut out, &text);
            let yaml = YamlLoader::load_from_str(&format!("k: {out}\n")).expect("valid YAML");
            prop_assert_eq!(yaml[0]["k"].as_str(), Some(text.as_str()), "{}", out);
        }
    }
}
