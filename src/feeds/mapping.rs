//! How a parsed feed entry becomes an item (seed 000, SPEC §4): the
//! fallbacks for identity, content and date, and absolute links. Pure; the
//! parser's types are converted into [`RawEntry`] by the caller.

use chrono::{DateTime, Utc};
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
    /// What search indexes ([`super::search::indexable`]): the title, and
    /// the content's text without its markup.
    pub search_title: String,
    pub search_body: String,
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
        guid,
        content_html,
        link,
        search_title: super::search::indexable(&title),
        search_body: super::search::indexable(&super::text::plain_text(&content)),
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
