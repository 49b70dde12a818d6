//! The degradation markers: an HTML comment beside every degraded block of
//! a mirrored body, so the loss is visible in the file itself and findable
//! with grep, and counted by kind in the run's stats.
//!
//! ```text
//! <!-- opendoc:degraded kind=whiteboard id=Wb3xK9 -->
//! ```
//!
//! `kind` is a [`DegradationKind`] name; `id` is the block's id, with `%`,
//! spaces, `>`, non-ASCII bytes and the second of two consecutive dashes
//! percent-encoded, so any id fits inside a comment and reads back as it was.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::adapter::{Degradation, DegradationKind};

/// How every degradation marker starts.
pub const MARKER_PREFIX: &str = "<!-- opendoc:degraded ";
const MARKER_SUFFIX: &str = " -->";

/// Characters an id keeps verbatim in a marker.
fn is_verbatim(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"._~:/+=@,-".contains(&byte)
}

fn encode_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut previous = 0u8;
    for &byte in id.as_bytes() {
        // `--` may not appear in an HTML comment.
        if is_verbatim(byte) && !(byte == b'-' && previous == b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
        previous = byte;
    }
    out
}

fn decode_id(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' => {
                let hex = text.get(index + 1..index + 3)?;
                if !hex.bytes().all(|digit| digit.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                index += 3;
            }
            byte => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The marker of one degraded block.
pub fn render(degradation: &Degradation) -> String {
    format!(
        "{MARKER_PREFIX}kind={} id={}{MARKER_SUFFIX}",
        degradation.kind.as_str(),
        encode_id(&degradation.id)
    )
}

/// Reads one marker (the whole comment, nothing around it); `None` if it is
/// not one of ours or names an unknown kind.
pub fn parse(marker: &str) -> Option<Degradation> {
    let inner = marker
        .strip_prefix(MARKER_PREFIX)?
        .strip_suffix(MARKER_SUFFIX)?;
    let (kind, id) = inner.split_once(' ')?;
    let kind = DegradationKind::parse(kind.strip_prefix("kind=")?)?;
    let id = id.strip_prefix("id=")?;
    if id.contains(' ') {
        return None;
    }
    Some(Degradation {
        kind,
        id: decode_id(id)?,
    })
}

/// Every marker in a body, in order (markers of unknown kinds are skipped).
pub fn parse_all(body: &str) -> Vec<Degradation> {
    let mut found = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find(MARKER_PREFIX) {
        let after = &rest[start..];
        let Some(end) = after.find("-->") else {
            break;
        };
        if let Some(degradation) = parse(&after[..end + "-->".len()]) {
            found.push(degradation);
        }
        rest = &after[end + "-->".len()..];
    }
    found
}

/// Degradations counted by kind: a run's stats (`{"whiteboard": 2, …}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DegradationCounts(BTreeMap<DegradationKind, u64>);

impl DegradationCounts {
    /// Counts each degradation under its kind.
    pub fn of<'a>(degradations: impl IntoIterator<Item = &'a Degradation>) -> Self {
        let mut counts = Self::default();
        for degradation in degradations {
            counts.record(degradation.kind);
        }
        counts
    }

    /// One more of `kind`.
    pub fn record(&mut self, kind: DegradationKind) {
        *self.0.entry(kind).or_default() += 1;
    }

    /// Adds another document's (or platform's) counts.
    pub fn merge(&mut self, other: &DegradationCounts) {
        for (kind, count) in &other.0 {
            *self.0.entry(*kind).or_default() += count;
        }
    }

    /// How many of `kind`.
    pub fn get(&self, kind: DegradationKind) -> u64 {
        self.0.get(&kind).copied().unwrap_or(0)
    }

    /// How many in all.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn degradation(kind: DegradationKind, id: &str) -> Degradation {
        Degradation {
            kind,
            id: id.to_owned(),
        }
    }

    #[test]
    fn markers_have_the_documented_shape() {
        let cases = [
            (
                DegradationKind::Whiteboard,
                "Wb3xK9",
                "<!-- opendoc:degraded kind=whiteboard id=Wb3xK9 -->",
            ),
            (
                DegradationKind::UnrenderedBlock,
                "1f2e3d4c-0000-4abc-8def-123456789abc",
                "<!-- opendoc:degraded kind=unrendered_block id=1f2e3d4c-0000-4abc-8def-123456789abc -->",
            ),
            (
                DegradationKind::BitableOversize,
                "bas:tbl_1",
                "<!-- opendoc:degraded kind=bitable_oversize id=bas:tbl_1 -->",
            ),
            (
                DegradationKind::UnknownBlock,
                "a b",
                "<!-- opendoc:degraded kind=unknown_block id=a%20b -->",
            ),
            (
                DegradationKind::UnknownBlock,
                "x-->y",
                "<!-- opendoc:degraded kind=unknown_block id=x-%2D%3Ey -->",
            ),
            (
                DegradationKind::Sheet,
                "100%",
                "<!-- opendoc:degraded kind=sheet id=100%25 -->",
            ),
            (
                DegradationKind::Mindnote,
                "图",
                "<!-- opendoc:degraded kind=mindnote id=%E5%9B%BE -->",
            ),
            (
                DegradationKind::Truncated,
                "",
                "<!-- opendoc:degraded kind=truncated id= -->",
            ),
        ];
        for (kind, id, expected) in cases {
            let marker = render(&degradation(kind, id));
            assert_eq!(marker, expected);
            assert_eq!(parse(&marker), Some(degradation(kind, id)), "{marker}");
        }
    }

    #[test]
    fn foreign_and_malformed_comments_are_not_markers() {
        let cases = [
            "<!-- opendoc:asset-pending -->",
            "<!-- opendoc:degraded kind=nonsense id=x -->",
            "<!-- opendoc:degraded id=x kind=sheet -->",
            "<!-- opendoc:degraded kind=sheet -->",
            "<!-- opendoc:degraded kind=sheet id=a b -->",
            "<!-- opendoc:degraded kind=sheet id=%ZZ -->",
            "<!-- opendoc:degraded kind=sheet id=%FF -->",
            "<!-- opendoc:degraded kind=sheet id=%4 -->",
            "<!-- opendoc:degraded kind=sheet id=%+F -->",
            "<!-- a comment -->",
        ];
        for text in cases {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn every_marker_of_a_body_is_found() {
        let body = format!(
            "# Title\n{}\n![board](https://x/y.png)\ntext <!-- opendoc:asset-pending -->\n{}{}\n<!-- opendoc:degraded kind=nonsense id=q -->\n<!-- opendoc:degraded kind=sheet",
            render(&degradation(DegradationKind::Whiteboard, "w1")),
            render(&degradation(DegradationKind::BitableInline, "b1")),
            render(&degradation(DegradationKind::Whiteboard, "w2")),
        );
        assert_eq!(
            parse_all(&body),
            [
                degradation(DegradationKind::Whiteboard, "w1"),
                degradation(DegradationKind::BitableInline, "b1"),
                degradation(DegradationKind::Whiteboard, "w2"),
            ]
        );
        assert!(parse_all("no markers").is_empty());
    }

    #[test]
    fn counts_by_kind() {
        let found = [
            degradation(DegradationKind::Whiteboard, "w1"),
            degradation(DegradationKind::UnknownBlock, "u1"),
            degradation(DegradationKind::Whiteboard, "w2"),
        ];
        let mut counts = DegradationCounts::of(&found);
        assert_eq!(counts.get(DegradationKind::Whiteboard), 2);
        assert_eq!(counts.get(DegradationKind::UnknownBlock), 1);
        assert_eq!(counts.get(DegradationKind::Sheet), 0);
        assert_eq!(counts.total(), 3);
        let other = DegradationCounts::of(&[degradation(DegradationKind::Sheet, "s")]);
        counts.merge(&other);
        counts.merge(&other);
        assert_eq!(counts.get(DegradationKind::Sheet), 2);
        assert_eq!(counts.total(), 5);
        let json = serde_json::to_string(&counts).expect("serializable");
        assert_eq!(json, r#"{"unknown_block":1,"whiteboard":2,"sheet":2}"#);
        let back: DegradationCounts = serde_json::from_str(&json).expect("readable");
        assert_eq!(back, counts);
    }

    proptest! {
        #[test]
        fn any_id_round_trips_and_stays_inside_its_comment(
            id in any::<String>(),
            kind in prop::sample::select(DegradationKind::ALL.to_vec()),
        ) {
            let marker = render(&Degradation { kind, id: id.clone() });
            // What goes between the prefix and ` -->`: no `--`, `>` or line break.
            let fields = &marker[MARKER_PREFIX.len()..marker.len() - " -->".len()];
            prop_assert!(!fields.contains("--") && !fields.contains('>') && !fields.contains('\n'));
            prop_assert_eq!(parse(&marker), Some(Degradation { kind, id: id.clone() }));
            let body = format!("before\n{marker}\nafter {marker}");
            prop_assert_eq!(parse_all(&body).len(), 2);
        }
    }
}
