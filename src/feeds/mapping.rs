//! How a parsed feed entry becomes an item (seed 000, SPEC §4): the
//! fallbacks for identity, content and date, absolute links, and the
//! bounded lists of authors and enclosures. Pure; the parser's types are
//! converted into [`RawEntry`] by the caller.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
pub use entity::item::Enclosure;
use url::Url;

/// What a feed entry offers, as parsed.
#[derive(Debug, Clone, Default)]
pub struct RawEntry {
    pub guid: Option<String>,
    pub link: Option<String>,
    pub title: Option<String>,
    pub content: Option<String>,
    pub summary: Option<String>,
    pub published: Option<DateTime<Utc>>,
    pub updated: Option<DateTime<Utc>>,
    /// Author names (plain text), in the feed's order.
    pub authors: Vec<String>,
    /// Attached media as the feed gave them (URLs possibly relative).
    pub enclosures: Vec<Enclosure>,
}

/// An item ready to upsert on `(feed, guid)`.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedItem {
    pub guid: String,
    /// Absolute, when the entry had a link.
    pub link: Option<String>,
    pub title: String,
    /// Raw (unsanitized) content, as published.
    pub content: String,
    /// `content` sanitized for serving, links made absolute against the
    /// item's link (else the feed's): sanitized once, here.
    pub content_html: String,
    pub pub_date: DateTime<Utc>,
    /// The entry had no readable date: `pub_date` is its arrival time.
    pub undated: bool,
    /// What search indexes ([`crate::fulltext::indexable`]): the title, and
    /// the content's text without its markup.
    pub search_title: String,
    pub search_body: String,
    /// At most [`MAX_AUTHORS`] distinct names.
    pub authors: Vec<String>,
    /// At most [`MAX_ENCLOSURES`], each an absolute http(s) URL of at most
    /// [`MAX_ENCLOSURE_URL_BYTES`], distinct.
    pub enclosures: Vec<Enclosure>,
}

fn non_blank(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Resolves `link` against `base` (the feed's link); absolute links pass
/// through. Only http(s) links are kept: a feed must not be able to plant a
/// `javascript:` or `data:` link in the reader.
pub fn absolute_link(link: &str, base: Option<&Url>) -> Option<String> {
    let url = match Url::parse(link) {
        Ok(url) => url,
        Err(url::ParseError::RelativeUrlWithoutBase) => base?.join(link).ok()?,
        Err(_) => return None,
    };
    matches!(url.scheme(), "http" | "https").then(|| url.to_string())
}

/// The longest guid stored as is; longer ones are stored as their hash (an
/// index entry has a size limit, and no real guid is this long).
pub const MAX_GUID_BYTES: usize = 512;
/// Content beyond this many bytes is cut (at a character boundary).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

/// Text as a database accepts it: no NUL characters (PostgreSQL refuses
/// them in text), at most `max` bytes.
fn storable(text: &str, max: usize) -> String {
    let mut text = text.replace('\0', "");
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Most author names kept per item; further ones are dropped.
pub const MAX_AUTHORS: usize = 10;
/// An author name beyond this many bytes is cut (at a character boundary).
pub const MAX_AUTHOR_BYTES: usize = 200;
/// Most enclosures kept per item (a podcast episode has one; a hostile
/// feed must not store thousands per item).
pub const MAX_ENCLOSURES: usize = 20;
/// An enclosure URL longer than this is dropped (a cut URL is a wrong one).
pub const MAX_ENCLOSURE_URL_BYTES: usize = 2048;
/// A MIME type longer than this, or not shaped `type/subtype`, is no type.
const MAX_MIME_TYPE_BYTES: usize = 255;

/// The entry's author names: trimmed, NUL-free, cut to
/// [`MAX_AUTHOR_BYTES`], blanks and repeats dropped, at most [`MAX_AUTHORS`].
pub fn authors(names: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .iter()
        .map(|name| storable(name.trim(), MAX_AUTHOR_BYTES).trim().to_owned())
        .filter(|name| !name.is_empty() && seen.insert(name.clone()))
        .take(MAX_AUTHORS)
        .collect()
}

/// The entry's enclosures: each URL made absolute against `base` (as links
/// are) and kept only if http(s) and at most [`MAX_ENCLOSURE_URL_BYTES`];
/// repeats of a URL dropped; a malformed MIME type or a zero length (RSS's
/// "unknown") left out; at most [`MAX_ENCLOSURES`].
pub fn enclosures(raw: &[Enclosure], base: Option<&Url>) -> Vec<Enclosure> {
    let mut seen = HashSet::new();
    raw.iter()
        .filter_map(|enclosure| {
            let url = absolute_link(enclosure.url.trim(), base)?;
            (url.len() <= MAX_ENCLOSURE_URL_BYTES).then_some(Enclosure {
                url,
                mime_type: enclosure.mime_type.as_deref().and_then(mime_type),
                length: enclosure.length.filter(|&length| length > 0),
            })
        })
        .filter(|enclosure| seen.insert(enclosure.url.clone()))
        .take(MAX_ENCLOSURES)
        .collect()
}

/// The `type/subtype` of a MIME type (parameters dropped), lower-cased;
/// anything else is no type.
fn mime_type(value: &str) -> Option<String> {
    let essence = value.split(';').next().unwrap_or_default().trim();
    let (kind, subtype) = essence.split_once('/')?;
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    (essence.len() <= MAX_MIME_TYPE_BYTES && token(kind) && token(subtype))
        .then(|| essence.to_ascii_lowercase())
}

/// Maps an entry: guid → link → `generated:sha256(title, content, date)`;
/// content → summary; published → updated → `now`.
pub fn map_entry(entry: &RawEntry, feed_link: Option<&Url>, now: DateTime<Utc>) -> MappedItem {
    let link = non_blank(&entry.link)
        .and_then(|link| absolute_link(link, feed_link))
        .map(|link| storable(&link, MAX_CONTENT_BYTES));
    let title = storable(
        non_blank(&entry.title).unwrap_or_default(),
        MAX_CONTENT_BYTES,
    );
    let content = storable(
        non_blank(&entry.content)
            .or_else(|| non_blank(&entry.summary))
            .unwrap_or_default(),
        MAX_CONTENT_BYTES,
    );
    let dated = entry.published.or(entry.updated);
    let pub_date = dated.unwrap_or(now);
    let guid = non_blank(&entry.guid)
        .map(|guid| guid.replace('\0', ""))
        .or_else(|| link.clone())
        .unwrap_or_else(|| generated_guid(&title, &content, dated));
    let guid = if guid.len() > MAX_GUID_BYTES {
        format!("sha256:{}", crate::digest::sha256_hex(&[&guid]))
    } else {
        guid
    };
    let base = link.as_deref().and_then(|link| Url::parse(link).ok());
    let content_html = super::sanitize::sanitize_html(&content, base.as_ref().or(feed_link));
    MappedItem {
        authors: authors(&entry.authors),
        enclosures: enclosures(&entry.enclosures, feed_link),
        guid,
        content_html,
        link,
        search_title: crate::fulltext::indexable(&title),
        search_body: crate::fulltext::indexable(&super::text::plain_text(&content)),
        title,
        content,
        pub_date,
        undated: dated.is_none(),
    }
}

/// A stable identity for entries with neither guid nor link. The entry's own
/// date (not the fetch time) goes in, so refetching does not duplicate it.
fn generated_guid(title: &str, content: &str, date: Option<DateTime<Utc>>) -> String {
    let date = date.map(|d| d.to_rfc3339()).unwrap_or_default();
    format!(
        "generated:{}",
        crate::digest::sha256_hex(&[title, content, &date])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_entries_are_made_storable() {
        let entry = RawEntry {
            guid: Some("x".repeat(5000)),
            link: Some("javascript:alert(1)".into()),
            title: Some("nul\0here".into()),
            content: Some("é".repeat(MAX_CONTENT_BYTES)),
            ..Default::default()
        };
        let item = map_entry(&entry, None, now());
        assert!(
            item.guid.starts_with("sha256:") && item.guid.len() < 100,
            "{}",
            item.guid
        );
        assert_eq!(item.link, None, "only http(s) links are kept");
        assert_eq!(item.title, "nulhere");
        assert!(item.content.len() <= MAX_CONTENT_BYTES);
        assert!(
            item.content.chars().all(|c| c == 'é'),
            "cut at a character boundary"
        );
        assert_eq!(absolute_link("data:text/html,hi", Some(&base())), None);
    }

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn base() -> Url {
        Url::parse("https://blog.example.com/feed/atom.xml").unwrap()
    }

    #[test]
    fn guid_falls_back_to_link_then_a_stable_hash() {
        let entry = RawEntry {
            guid: Some("  tag:example.com,2026:1 ".into()),
            link: Some("/posts/1".into()),
            ..Default::default()
        };
        assert_eq!(
            map_entry(&entry, Some(&base()), now()).guid,
            "tag:example.com,2026:1"
        );

        let no_guid = RawEntry {
            guid: Some("  ".into()),
            ..entry
        };
        assert_eq!(
            map_entry(&no_guid, Some(&base()), now()).guid,
            "https://blog.example.com/posts/1"
        );

        let bare = RawEntry {
            title: Some("Hello".into()),
            content: Some("<p>Hi</p>".into()),
            ..Default::default()
        };
        let first = map_entry(&bare, None, now()).guid;
        let later = map_entry(&bare, None, now() + chrono::Duration::hours(1)).guid;
        assert!(first.starts_with("generated:") && first.len() == "generated:".len() + 64);
        assert_eq!(
            first, later,
            "refetching an undated entry keeps its identity"
        );
        let other = RawEntry {
            title: Some("Hello!".into()),
            ..bare
        };
        assert_ne!(map_entry(&other, None, now()).guid, first);
    }

    #[test]
    fn content_falls_back_to_summary() {
        let entry = RawEntry {
            summary: Some("short".into()),
            ..Default::default()
        };
        assert_eq!(map_entry(&entry, None, now()).content, "short");
        let both = RawEntry {
            content: Some("long".into()),
            ..entry
        };
        assert_eq!(map_entry(&both, None, now()).content, "long");
    }

    #[test]
    fn date_falls_back_to_updated_then_now() {
        let updated: DateTime<Utc> = "2026-11-01T08:00:00Z".parse().unwrap();
        let published: DateTime<Utc> = "2026-10-01T08:00:00Z".parse().unwrap();
        let entry = RawEntry {
            updated: Some(updated),
            ..Default::default()
        };
        assert_eq!(map_entry(&entry, None, now()).pub_date, updated);
        let both = RawEntry {
            published: Some(published),
            ..entry
        };
        assert_eq!(map_entry(&both, None, now()).pub_date, published);
        assert!(!map_entry(&both, None, now()).undated);
        let undated = map_entry(&RawEntry::default(), None, now());
        assert_eq!(undated.pub_date, now());
        assert!(undated.undated, "an item dated by its arrival says so");
    }

    fn enclosure(url: &str, mime_type: Option<&str>, length: Option<u64>) -> Enclosure {
        Enclosure {
            url: url.into(),
            mime_type: mime_type.map(Into::into),
            length,
        }
    }

    #[test]
    fn authors_are_trimmed_distinct_and_bounded() {
        let mut names = vec![
            "  Ada Lovelace ".to_owned(),
            String::new(),
            "Ada Lovelace".to_owned(),
            "Grace\0 Hopper".to_owned(),
            "é".repeat(MAX_AUTHOR_BYTES),
        ];
        names.extend((0..100).map(|n| format!("Writer {n}")));
        let entry = RawEntry {
            authors: names,
            ..Default::default()
        };
        let kept = map_entry(&entry, None, now()).authors;
        assert_eq!(kept.len(), MAX_AUTHORS);
        assert_eq!(kept[..2], ["Ada Lovelace", "Grace Hopper"]);
        assert!(kept[2].len() <= MAX_AUTHOR_BYTES && kept[2].chars().all(|c| c == 'é'));
        assert_eq!(kept[3], "Writer 0");
        assert!(
            map_entry(&RawEntry::default(), None, now())
                .authors
                .is_empty()
        );
    }

    #[test]
    fn enclosures_are_absolute_http_distinct_and_bounded() {
        let raw = vec![
            enclosure(
                "../episodes/1.mp3",
                Some("Audio/MPEG"),
                Some(12_345_678_901),
            ),
            enclosure("javascript:alert(1)", Some("audio/mpeg"), None),
            enclosure("data:audio/mpeg;base64,AAAA", None, None),
            enclosure("https://blog.example.com/episodes/1.mp3", None, None),
            enclosure(
                "https://cdn.example.net/v.mp4",
                Some("video/mp4; codecs=avc1"),
                Some(0),
            ),
            enclosure("https://cdn.example.net/odd", Some("not a type"), None),
            enclosure(
                &format!(
                    "https://cdn.example.net/{}",
                    "x".repeat(MAX_ENCLOSURE_URL_BYTES)
                ),
                None,
                None,
            ),
        ];
        let kept = enclosures(&raw, Some(&base()));
        assert_eq!(
            kept,
            [
                enclosure(
                    "https://blog.example.com/episodes/1.mp3",
                    Some("audio/mpeg"),
                    Some(12_345_678_901)
                ),
                enclosure("https://cdn.example.net/v.mp4", Some("video/mp4"), None),
                enclosure("https://cdn.example.net/odd", None, None),
            ],
            "relative resolved; script, data and overlong URLs and repeats dropped"
        );

        let many: Vec<Enclosure> = (0..1000)
            .map(|n| enclosure(&format!("https://cdn.example.net/{n}.mp3"), None, None))
            .collect();
        let entry = RawEntry {
            enclosures: many,
            ..Default::default()
        };
        let kept = map_entry(&entry, Some(&base()), now()).enclosures;
        assert_eq!(kept.len(), MAX_ENCLOSURES);
        assert_eq!(kept[0].url, "https://cdn.example.net/0.mp3");
        assert_eq!(
            enclosures(&[enclosure("/relative.mp3", None, None)], None),
            [],
            "nothing to resolve against"
        );
    }

    #[test]
    fn links_are_made_absolute_against_the_feed() {
        assert_eq!(
            absolute_link("../img/a.png", Some(&base())).as_deref(),
            Some("https://blog.example.com/img/a.png")
        );
        assert_eq!(
            absolute_link("https://cdn.example.net/x", Some(&base())).as_deref(),
            Some("https://cdn.example.net/x")
        );
        assert_eq!(
            absolute_link("/relative", None),
            None,
            "nothing to resolve against"
        );
        assert_eq!(absolute_link("http://[broken", Some(&base())), None);
    }
}
