//! How a remote title becomes a path component of the mirror: the seed's
//! naming rule chain, in the seed's order, as pure functions.
//!
//! 1. **Slug**: strip only the characters no file system takes (`/ \ : * ?
//!    " < > |` and control characters), then trim surrounding whitespace.
//!    CJK text, interior spaces and punctuation stay: they are grep signal.
//! 2. **Empty title** (nothing left, or only dots, which would name `.` or
//!    `..`): `untitled-<id8>`.
//! 3. **Reserved name** ([`RESERVED`], compared case-insensitively): the
//!    `-<id8>` suffix, so a document never shadows a structural file
//!    (`README.md`, `_index.md`) or an agent's instruction file
//!    (`CLAUDE.md`, `AGENTS.md`).
//! 4. **Over [`MAX_COMPONENT_BYTES`]**: truncated on a UTF-8 boundary, with
//!    the `-<id8>` suffix, so the short name stays traceable.
//! 5. **Collision** with a sibling, case-insensitively (macOS and Windows
//!    file systems fold case): the later arrival gets `-<id8>`; the first one
//!    there keeps the clean name.
//! 6. **Numeric fallback**: if even that is taken (two ids sharing their
//!    first eight characters), `-2`, `-3`, ….
//!
//! `<id8>` is the first eight characters of the platform id (of its last
//! `:`-separated segment, for synthetic ids like `feishu:space:7xyz`).
//! Every name this module returns is non-empty, at most
//! [`MAX_COMPONENT_BYTES`] bytes, free of illegal characters, never `.` or
//! `..`, and never a bare reserved name. The extension (`.md`) is the
//! caller's, added after.

use std::collections::HashSet;

/// The byte cap for one path component, extension excluded (file systems
/// allow 255; the rest is room for `.md` and the atomic writer's temp name).
pub const MAX_COMPONENT_BYTES: usize = 200;

/// How many leading characters of the platform id a suffix carries.
pub const ID_PREFIX_CHARS: usize = 8;

/// Base names the mirror's layout uses itself, or that tools load as
/// instructions, compared case-insensitively: a title that slugs to one of
/// these always gets the id suffix.
pub const RESERVED: &[&str] = &[
    "readme",
    "_index",
    "index",
    "assets",
    "_orphans",
    ".internal",
    "claude",
    "agents",
];

/// Whether a file system would refuse `c` in a name (the POSIX and Windows
/// reserved set, plus control characters).
pub fn is_illegal(c: char) -> bool {
    matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|') || c.is_control()
}

/// Step 1: the title with illegal characters dropped and surrounding
/// whitespace trimmed; everything else kept verbatim. May be empty.
pub fn slug(title: &str) -> String {
    let kept: String = title.chars().filter(|c| !is_illegal(*c)).collect();
    kept.trim().to_owned()
}

/// The disambiguating id prefix: the first [`ID_PREFIX_CHARS`] characters
/// of the id's last `:`-separated segment, illegal characters removed.
pub fn id_prefix(id: &str) -> String {
    let native = match id.rsplit_once(':') {
        Some((_, last)) if !last.is_empty() => last,
        _ => id,
    };
    slug(native).chars().take(ID_PREFIX_CHARS).collect()
}

/// `text` cut to at most `max` bytes without splitting a character.
pub fn truncate_to_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The case-insensitive key two sibling names collide on.
pub fn casefold(name: &str) -> String {
    name.to_lowercase()
}

/// Whether `name` is one of [`RESERVED`], case-insensitively.
pub fn is_reserved(name: &str) -> bool {
    let folded = casefold(name);
    RESERVED.contains(&folded.as_str())
}

/// `base` followed by `suffix`, `base` cut (on a character boundary, and
/// without a dangling space) so the whole stays within
/// [`MAX_COMPONENT_BYTES`].
fn with_suffix(base: &str, suffix: &str) -> String {
    let room = MAX_COMPONENT_BYTES.saturating_sub(suffix.len());
    let cut = truncate_to_bytes(base, room).trim_end();
    format!("{cut}{suffix}")
}

/// The name a node wants before looking at its siblings (steps 1–4), and
/// whether the rules already forced the id suffix on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The name, within [`MAX_COMPONENT_BYTES`].
    pub name: String,
    /// The base the id suffix is appended to on a collision.
    base: String,
    /// The `-<id8>` suffix of this node.
    suffix: String,
    /// Whether `name` already carries `suffix` (empty, reserved or too long).
    pub suffixed: bool,
}

/// Steps 1–4 for one node.
pub fn candidate(title: &str, id: &str) -> Candidate {
    let suffix = format!("-{}", id_prefix(id));
    let base = slug(title);
    if base.chars().all(|c| c == '.') {
        // Empty, or `.`/`..`: no signal, and never a path of its own.
        let base = "untitled".to_owned();
        return Candidate {
            name: with_suffix(&base, &suffix),
            base,
            suffix,
            suffixed: true,
        };
    }
    let suffixed = is_reserved(&base) || base.len() > MAX_COMPONENT_BYTES;
    let name = if suffixed {
        with_suffix(&base, &suffix)
    } else {
        base.clone()
    };
    Candidate {
        name,
        base,
        suffix,
        suffixed,
    }
}

impl Candidate {
    /// Whether `name` is one this node could have been given by the rules
    /// (clean, id-suffixed or numbered), whatever its siblings were then.
    fn could_be(&self, name: &str) -> bool {
        if !self.suffixed && name == self.name {
            return true;
        }
        let with_id = with_suffix(&self.base, &self.suffix);
        if name == with_id {
            return true;
        }
        // `<base>-<id8>-<n>`, the base cut to fit: try the number the name
        // ends with.
        let Some((_, number)) = name.rsplit_once('-') else {
            return false;
        };
        match number.parse::<u64>() {
            Ok(n) if n >= 2 && number == n.to_string() => {
                name == with_suffix(&self.base, &format!("{}-{n}", self.suffix))
            }
            _ => false,
        }
    }
}

/// The names already taken in one folder, case-folded. A caller names the
/// children of a folder through one `Siblings`, seeded with the names that
/// are not documents of this run (`assets`, files of another platform):
/// each [`Siblings::claim`] takes the best free name and records it.
#[derive(Debug, Clone, Default)]
pub struct Siblings {
    taken: HashSet<String>,
}

impl Siblings {
    /// A folder where the given names are already taken.
    pub fn with_taken<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            taken: names.into_iter().map(casefold).collect(),
        }
    }

    /// Whether `name` (case-insensitively) is taken.
    pub fn is_taken(&self, name: &str) -> bool {
        self.taken.contains(&casefold(name))
    }

    /// Steps 1–6: the name for the node `id` titled `title`, recorded as
    /// taken.
    pub fn claim(&mut self, title: &str, id: &str) -> String {
        let candidate = candidate(title, id);
        self.claim_candidate(&candidate)
    }

    /// Takes the first free name of the candidate's, in order of
    /// preference: the clean name (unless the rules suffixed it already),
    /// with the id suffix, then the numeric fallback `-2`, `-3`, ….
    fn claim_candidate(&mut self, candidate: &Candidate) -> String {
        if !candidate.suffixed && self.keep(&candidate.name) {
            return candidate.name.clone();
        }
        let with_id = with_suffix(&candidate.base, &candidate.suffix);
        if self.keep(&with_id) {
            return with_id;
        }
        let mut number = 2u64;
        loop {
            let name = with_suffix(&candidate.base, &format!("{}-{number}", candidate.suffix));
            if self.keep(&name) {
                return name;
            }
            number += 1;
        }
    }

    /// Records `name` as taken if it is free; says whether it was.
    fn keep(&mut self, name: &str) -> bool {
        self.taken.insert(casefold(name))
    }
}

/// One child of a folder to name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sibling<'a> {
    /// The platform id.
    pub id: &'a str,
    /// The remote title.
    pub title: &'a str,
    /// The name it has in the mirror now (from the manifest), if any.
    pub current: Option<&'a str>,
}

/// Names every child of one folder, stably across runs: a child whose
/// current name is still one the rules could give it keeps it (so the first
/// one there keeps the clean name, and a suffixed one is not renamed when
/// the clean one leaves); the others claim names in the order given, which
/// the caller keeps deterministic (enumeration order, or by id). `taken`
/// holds the folder's names that are not among `children`. The result is
/// in the order of `children`.
pub fn name_siblings(taken: &Siblings, children: &[Sibling<'_>]) -> Vec<String> {
    let mut folder = taken.clone();
    let candidates: Vec<Candidate> = children
        .iter()
        .map(|child| candidate(child.title, child.id))
        .collect();
    let mut names: Vec<Option<String>> = children
        .iter()
        .zip(&candidates)
        .map(|(child, candidate)| {
            child
                .current
                .filter(|current| candidate.could_be(current) && folder.keep(current))
                .map(str::to_owned)
        })
        .collect();
    for (name, candidate) in names.iter_mut().zip(&candidates) {
        if name.is_none() {
            *name = Some(folder.claim_candidate(candidate));
        }
    }
    names.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "1a2b3c4d5e6f7a8b9c0d";

    #[test]
    fn the_rule_chain_in_order() {
        let long_ascii = "a".repeat(250);
        let cases: &[(&str, &str, &str)] = &[
            ("plain title", "Weekly notes", "Weekly notes"),
            ("CJK and spaces kept", "设计 文档 v2", "设计 文档 v2"),
            ("full-width colon is legal", "会议：周报", "会议：周报"),
            (
                "illegal characters stripped",
                "a/b\\c:d*e?f\"g<h>i|j",
                "abcdefghij",
            ),
            (
                "control characters stripped",
                "tab\there\nnew\u{0}line",
                "tabherenewline",
            ),
            ("surrounding whitespace trimmed", "  padded  ", "padded"),
            ("interior spaces kept", "a   b", "a   b"),
            ("empty title", "", "untitled-1a2b3c4d"),
            ("whitespace title", " \t\u{3000} ", "untitled-1a2b3c4d"),
            ("only illegal characters", "///???", "untitled-1a2b3c4d"),
            (
                "a dot would name the folder itself",
                ".",
                "untitled-1a2b3c4d",
            ),
            (
                "two dots would name the parent",
                " .. ",
                "untitled-1a2b3c4d",
            ),
            ("dots with text are kept", "v1.2.", "v1.2."),
            ("reserved readme", "README", "README-1a2b3c4d"),
            ("reserved case-insensitively", "ReadMe", "ReadMe-1a2b3c4d"),
            ("reserved _index", "_index", "_index-1a2b3c4d"),
            ("reserved index", "Index", "Index-1a2b3c4d"),
            ("reserved claude", "CLAUDE", "CLAUDE-1a2b3c4d"),
            ("reserved agents", "agents", "agents-1a2b3c4d"),
            ("reserved assets", "Assets", "Assets-1a2b3c4d"),
            ("reserved _orphans", "_orphans", "_orphans-1a2b3c4d"),
            ("reserved after the slug", " readme ", "readme-1a2b3c4d"),
            ("not reserved as a part", "readme notes", "readme notes"),
            ("exactly at the cap", &long_ascii[..200], &long_ascii[..200]),
        ];
        for (why, title, expected) in cases {
            let mut folder = Siblings::default();
            assert_eq!(folder.claim(title, ID), *expected, "{why}");
        }
        let mut folder = Siblings::default();
        let name = folder.claim(&long_ascii, ID);
        assert_eq!(name, format!("{}-1a2b3c4d", "a".repeat(191)), "too long");
        assert_eq!(name.len(), MAX_COMPONENT_BYTES);
    }

    #[test]
    fn truncation_never_splits_a_character() {
        // 3-byte characters: 66 of them are 198 bytes, 67 are 201.
        let title = "文".repeat(67);
        let name = Siblings::default().claim(&title, ID);
        // 200 − 9 (suffix) = 191 bytes of room: 63 characters (189 bytes).
        assert_eq!(name, format!("{}-1a2b3c4d", "文".repeat(63)));
        assert!(name.len() <= MAX_COMPONENT_BYTES);
        // 4-byte characters: one fits in bytes 187–190, the next would
        // straddle the cut at 191.
        let title = format!("{}{}", "a".repeat(187), "😀".repeat(5));
        let name = Siblings::default().claim(&title, ID);
        assert_eq!(name, format!("{}😀-1a2b3c4d", "a".repeat(187)));
        assert_eq!(name.len(), 200);
        assert_eq!(truncate_to_bytes("a😀", 2), "a");
        assert_eq!(truncate_to_bytes("a😀", 5), "a😀");
        assert_eq!(truncate_to_bytes("", 0), "");
    }

    #[test]
    fn a_cut_does_not_leave_a_space_before_the_suffix() {
        let title = format!("{} tail{}", "a".repeat(190), "b".repeat(20));
        let name = Siblings::default().claim(&title, ID);
        assert_eq!(name, format!("{}-1a2b3c4d", "a".repeat(190)));
    }

    #[test]
    fn id_prefixes() {
        assert_eq!(id_prefix("1a2b3c4d-5e6f"), "1a2b3c4d");
        assert_eq!(id_prefix("short"), "short");
        assert_eq!(id_prefix("feishu:space:7123456789"), "71234567");
        assert_eq!(id_prefix("trailing:"), "trailing");
        assert_eq!(id_prefix("wiki/ab:cd"), "cd");
        assert_eq!(id_prefix("a/b\\c?d*e|f"), "abcdef");
    }

    #[test]
    fn collisions_suffix_the_later_arrival_case_insensitively() {
        let mut folder = Siblings::default();
        assert_eq!(folder.claim("Plan", "aaaaaaaa1"), "Plan");
        assert_eq!(folder.claim("plan", "bbbbbbbb2"), "plan-bbbbbbbb");
        assert_eq!(folder.claim("PLAN", "cccccccc3"), "PLAN-cccccccc");
        // Same title, same first eight id characters: the numeric fallback.
        assert_eq!(folder.claim("Plan", "bbbbbbbb9"), "Plan-bbbbbbbb-2");
        assert_eq!(folder.claim("plan", "bbbbbbbb7"), "plan-bbbbbbbb-3");
        // Reserved and colliding: the suffixed name, then the fallback.
        assert_eq!(folder.claim("readme", "dddddddd"), "readme-dddddddd");
        assert_eq!(folder.claim("README", "dddddddd"), "README-dddddddd-2");
        // Empty titles of ids sharing a prefix.
        assert_eq!(folder.claim("", "eeeeeeee1"), "untitled-eeeeeeee");
        assert_eq!(folder.claim(" ", "eeeeeeee2"), "untitled-eeeeeeee-2");
    }

    #[test]
    fn names_taken_by_others_in_the_folder_count() {
        let mut folder = Siblings::with_taken(["Notes", "assets"]);
        assert!(folder.is_taken("NOTES"));
        assert_eq!(folder.claim("notes", "12345678x"), "notes-12345678");
        assert!(folder.is_taken("Notes-12345678"));
        assert!(!folder.is_taken("other"));
    }

    #[test]
    fn numbered_names_stay_within_the_cap() {
        let title = "x".repeat(200);
        let mut folder = Siblings::default();
        assert_eq!(folder.claim(&title, "ab"), title);
        let second = folder.claim(&title, "ab");
        assert_eq!(second, format!("{}-ab", "x".repeat(197)));
        let third = folder.claim(&title, "ab");
        assert_eq!(third, format!("{}-ab-2", "x".repeat(195)));
    }

    #[test]
    fn the_first_one_there_keeps_the_clean_name_across_runs() {
        let none = Siblings::default();
        // Run 1: only A.
        let run1 = name_siblings(
            &none,
            &[Sibling {
                id: "aaaaaaaa",
                title: "Plan",
                current: None,
            }],
        );
        assert_eq!(run1, ["Plan"]);
        // Run 2: B arrives and is enumerated first; A keeps "Plan".
        let run2 = name_siblings(
            &none,
            &[
                Sibling {
                    id: "bbbbbbbb",
                    title: "plan",
                    current: None,
                },
                Sibling {
                    id: "aaaaaaaa",
                    title: "Plan",
                    current: Some("Plan"),
                },
            ],
        );
        assert_eq!(run2, ["plan-bbbbbbbb", "Plan"]);
        // Run 3: order flips again; nobody moves.
        let run3 = name_siblings(
            &none,
            &[
                Sibling {
                    id: "aaaaaaaa",
                    title: "Plan",
                    current: Some("Plan"),
                },
                Sibling {
                    id: "bbbbbbbb",
                    title: "plan",
                    current: Some("plan-bbbbbbbb"),
                },
            ],
        );
        assert_eq!(run3, ["Plan", "plan-bbbbbbbb"]);
        // Run 4: A is gone; B keeps its name rather than moving.
        let run4 = name_siblings(
            &none,
            &[Sibling {
                id: "bbbbbbbb",
                title: "plan",
                current: Some("plan-bbbbbbbb"),
            }],
        );
        assert_eq!(run4, ["plan-bbbbbbbb"]);
    }

    #[test]
    fn a_renamed_node_takes_its_new_name() {
        let run = name_siblings(
            &Siblings::default(),
            &[Sibling {
                id: "aaaaaaaa",
                title: "New title",
                current: Some("Old title"),
            }],
        );
        assert_eq!(run, ["New title"]);
    }

    #[test]
    fn a_numbered_name_is_kept_across_runs() {
        let children = [
            Sibling {
                id: "bbbbbbbb9",
                title: "Plan",
                current: Some("Plan-bbbbbbbb-2"),
            },
            Sibling {
                id: "bbbbbbbb2",
                title: "plan",
                current: Some("plan-bbbbbbbb"),
            },
            Sibling {
                id: "aaaaaaaa",
                title: "Plan",
                current: Some("Plan"),
            },
        ];
        let names = name_siblings(&Siblings::default(), &children);
        assert_eq!(names, ["Plan-bbbbbbbb-2", "plan-bbbbbbbb", "Plan"]);
    }

    #[test]
    fn a_current_name_another_sibling_already_kept_is_not_shared() {
        // Two nodes both claim "Plan" from a corrupted manifest.
        let children = [
            Sibling {
                id: "aaaaaaaa",
                title: "Plan",
                current: Some("Plan"),
            },
            Sibling {
                id: "bbbbbbbb",
                title: "Plan",
                current: Some("plan"),
            },
        ];
        let names = name_siblings(&Siblings::default(), &children);
        assert_eq!(names, ["Plan", "Plan-bbbbbbbb"]);
    }

    /// The oracle: what a legal name is, written apart from the rules.
    fn assert_legal(name: &str) {
        assert!(!name.is_empty());
        assert!(name.len() <= MAX_COMPONENT_BYTES, "{} bytes", name.len());
        assert!(name != "." && name != "..");
        for c in name.chars() {
            assert!(
                !"/\\:*?\"<>|".contains(c) && !c.is_control(),
                "{c:?} in {name:?}"
            );
        }
        assert!(
            !RESERVED.iter().any(|r| name.to_lowercase() == *r),
            "{name:?}"
        );
    }

    proptest! {
        #[test]
        fn any_title_gives_a_legal_name(title in any::<String>(), id in "[a-z0-9:-]{0,24}") {
            let name = Siblings::default().claim(&title, &id);
            assert_legal(&name);
        }

        #[test]
        fn long_multibyte_titles_give_legal_names(
            title in "[a文😀 ./:]{150,260}",
            id in "[a-f0-9]{32}",
        ) {
            let name = Siblings::default().claim(&title, &id);
            assert_legal(&name);
        }

        #[test]
        fn siblings_never_share_a_name(
            children in prop::collection::vec(("[aAbB .]{0,3}", "[ab]{1,9}"), 1..24),
        ) {
            let mut folder = Siblings::default();
            let mut seen = HashSet::new();
            for (title, id) in &children {
                let name = folder.claim(title, id);
                assert_legal(&name);
                prop_assert!(seen.insert(name.to_lowercase()), "{} twice", name);
            }
        }

        #[test]
        fn naming_twice_from_the_first_result_changes_nothing(
            children in prop::collection::vec(("[aAbB]{0,2}", "[a-c]{1,9}"), 1..12),
        ) {
            let mut ids = HashSet::new();
            let children: Vec<(String, String)> = children
                .into_iter()
                .filter(|(_, id)| ids.insert(id.clone()))
                .collect();
            let first: Vec<Sibling<'_>> = children
                .iter()
                .map(|(title, id)| Sibling { id, title, current: None })
                .collect();
            let names = name_siblings(&Siblings::default(), &first);
            // The next run sees the same children in reverse order.
            let again: Vec<Sibling<'_>> = children
                .iter()
                .zip(&names)
                .map(|((title, id), name)| Sibling { id, title, current: Some(name.as_str()) })
                .rev()
                .collect();
            let mut renamed = name_siblings(&Siblings::default(), &again);
            renamed.reverse();
            prop_assert_eq!(renamed, names);
        }
    }
}
