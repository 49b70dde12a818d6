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
    /// Raw (unsanitized) content; sanitizing happens when it is served.
    pub content: String,
    pub pub_date: DateTime<Utc>,
}

fn non_blank(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Resolves `link` against `base` (the feed's link); absolute links pass
/// through, unresolvable ones are dropped.
pub fn absolute_link(link: &str, base: Option<&Url>) -> Option<String> {
    match Url::parse(link) {
        Ok(url) => Some(url.to_string()),
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            base?.join(link).ok().map(|url| url.to_string())
        }
        Err(_) => None,
    }
}

/// Maps an entry: guid → link → `generated:sha256(title, content, date)`;
/// content → summary; published → updated → `now`.
pub fn map_entry(entry: &RawEntry, feed_link: Option<&Url>, now: DateTime<Utc>) -> MappedItem {
    let link = non_blank(&entry.link).and_then(|link| absolute_link(link, feed_link));
    let title = non_blank(&entry.title).unwrap_or_default().to_owned();
    let content = non_blank(&entry.content)
        .or_else(|| non_blank(&entry.summary))
        .unwrap_or_default()
        .to_owned();
    let dated = entry.published.or(entry.updated);
    let pub_date = dated.unwrap_or(now);
    let guid = non_blank(&entry.guid)
        .map(str::to_owned)
        .or_else(|| link.clone())
        .unwrap_or_else(|| generated_guid(&title, &content, dated));
    MappedItem {
        guid,
        link,
        title,
        content,
        pub_date,
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
        assert_eq!(map_entry(&RawEntry::default(), None, now()).pub_date, now());
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
