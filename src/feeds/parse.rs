//! Bytes → feed, via feed-rs (RSS 0.9x/1.0/2.0, Atom, JSON Feed). Only the
//! adapter lives here: what feed-rs parses becomes our [`ParsedFeed`] of
//! [`RawEntry`]s; the identity/content/date fallbacks are
//! [`super::mapping`]'s.
//!
//! The parsers are third-party code fed hostile bytes: a document they
//! panic on (quick-xml under feed-rs does on UTF-16 XML) is refused like
//! any malformed one, never a crashed worker.

use std::panic::{AssertUnwindSafe, catch_unwind};

use url::Url;

use super::{
    mapping::{RawEntry, absolute_link},
    names,
};

/// What the pull worker needs from a fetched document.
#[derive(Debug, Clone, Default)]
pub struct ParsedFeed {
    /// Cleaned to a name ([`names::clean`]).
    pub title: Option<String>,
    /// The site the feed belongs to (RSS `<link>`, Atom `rel="alternate"`), absolute.
    pub site_url: Option<String>,
    pub entries: Vec<RawEntry>,
}

/// Why a document is not a feed; the text is what `fetchState.lastError` shows.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not a valid RSS, Atom or JSON feed: {0}")]
    Invalid(String),
    /// The parser panicked on the document (logged with the panic's text).
    #[error("the feed could not be parsed")]
    Panicked,
}

/// Parses `body` fetched from `url` (the base for relative links). A panic
/// of the parser is caught and answered [`ParseError::Panicked`].
pub fn parse(body: &[u8], url: &Url) -> Result<ParsedFeed, ParseError> {
    catch_unwind(AssertUnwindSafe(|| parse_unguarded(body, url))).unwrap_or_else(|panic| {
        let message = crate::error::panic_text(panic.as_ref());
        tracing::warn!(url = %url, panic = %message, "the feed parser panicked on a document");
        Err(ParseError::Panicked)
    })
}

/// [`parse`] on the blocking pool: parsing a large feed is milliseconds of
/// CPU that must not hold up an async worker.
pub async fn parse_blocking(body: Vec<u8>, url: Url) -> Result<ParsedFeed, ParseError> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(|| parse(&body, &url)))
        .await
        // The panic is caught inside; this is the runtime shutting down.
        .unwrap_or(Err(ParseError::Panicked))
}

fn parse_unguarded(body: &[u8], url: &Url) -> Result<ParsedFeed, ParseError> {
    let feed = feed_rs::parser::Builder::new()
        .base_uri(Some(url.as_str()))
        // No invented ids: an entry without one takes the mapping's fallbacks.
        .id_generator(|_, _, _| String::new())
        .sanitize_content(false)
        .build()
        .parse(body)
        .map_err(|error| ParseError::Invalid(error.to_string()))?;
    let site_url = alternate(&feed.links).and_then(|href| absolute_link(href, Some(url)));
    let entries = feed
        .entries
        .into_iter()
        .map(|entry| RawEntry {
            link: alternate(&entry.links).map(str::to_owned),
            guid: Some(entry.id).filter(|id| !id.trim().is_empty()),
            title: entry.title.map(|text| text.content),
            content: entry.content.and_then(|content| content.body),
            summary: entry.summary.map(|text| text.content),
            published: entry.published,
            updated: entry.updated,
        })
        .collect();
    Ok(ParsedFeed {
        // It becomes the feed's name: made fit for one.
        title: feed.title.and_then(|text| names::clean(&text.content)),
        site_url,
        entries,
    })
}

/// The `alternate` link (or the first link with no `rel`, as in RSS).
fn alternate(links: &[feed_rs::model::Link]) -> Option<&str> {
    links
        .iter()
        .find(|link| link.rel.as_deref().is_none_or(|rel| rel == "alternate"))
        .map(|link| link.href.as_str())
}

/// Whether `body` looks like a feed document at all (discovery: a page URL
/// may itself be a feed).
pub fn is_feed(body: &[u8], url: &Url) -> bool {
    parse(body, url).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://example.com/blog/feed.xml").unwrap()
    }

    #[test]
    fn rss2_atom_rss1_and_json_feed_parse_into_entries() {
        let rss2 = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>R2</title><link>https://example.com/</link>
            <item><title>One</title><link>/p/1</link><guid>g1</guid><description>&lt;p&gt;Hi&lt;/p&gt;</description><pubDate>Mon, 30 Nov 2026 10:00:00 GMT</pubDate></item>
            <item><title>Two</title><link>https://example.com/p/2</link></item></channel></rss>"#;
        let feed = parse(rss2, &base()).unwrap();
        assert_eq!(feed.title.as_deref(), Some("R2"));
        assert_eq!(feed.site_url.as_deref(), Some("https://example.com/"));
        assert_eq!(feed.entries.len(), 2);
        assert_eq!(feed.entries[0].guid.as_deref(), Some("g1"));
        assert!(feed.entries[0].published.is_some());
        assert_eq!(feed.entries[1].guid, None, "no invented id");

        let atom = br#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>
            <link rel="alternate" href="https://example.com/"/><link rel="self" href="https://example.com/atom"/><id>urn:a</id><updated>2026-11-30T10:00:00Z</updated>
            <entry><title>E</title><id>urn:e1</id><link href="https://example.com/e1"/><updated>2026-11-29T10:00:00Z</updated><content type="html">&lt;b&gt;x&lt;/b&gt;</content></entry></feed>"#;
        let feed = parse(atom, &base()).unwrap();
        assert_eq!(feed.site_url.as_deref(), Some("https://example.com/"));
        assert_eq!(feed.entries[0].content.as_deref(), Some("<b>x</b>"));
        assert!(feed.entries[0].updated.is_some());

        let rss1 = br#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
            <channel rdf:about="https://example.com/"><title>R1</title><link>https://example.com/</link></channel>
            <item rdf:about="https://example.com/r1"><title>R1 item</title><link>https://example.com/r1</link></item></rdf:RDF>"#;
        let feed = parse(rss1, &base()).unwrap();
        assert_eq!(feed.entries.len(), 1);
        assert_eq!(
            feed.entries[0].link.as_deref(),
            Some("https://example.com/r1")
        );

        let json = br#"{"version":"https://jsonfeed.org/version/1.1","title":"J","home_page_url":"https://example.com/",
            "items":[{"id":"j1","url":"https://example.com/j1","title":"J one","content_html":"<p>j</p>","date_published":"2026-11-30T09:00:00Z"}]}"#;
        let feed = parse(json, &base()).unwrap();
        assert_eq!(feed.entries[0].guid.as_deref(), Some("j1"));
        assert_eq!(feed.entries[0].content.as_deref(), Some("<p>j</p>"));
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(parse(b"<rss><channel><item>", &base()).is_err());
        assert!(parse(b"<html><body>hello</body></html>", &base()).is_err());
        assert!(parse(b"", &base()).is_err());
        assert!(!is_feed(b"not xml at all", &base()));
    }

    /// UTF-16BE with a BOM and `encoding="utf-16"`: quick-xml panics on it
    /// inside feed-rs.
    pub fn utf16be_feed() -> Vec<u8> {
        let text = r#"<?xml version="1.0" encoding="utf-16"?><rss version="2.0"><channel><title>Wide</title><item><guid>w1</guid><title>One</title></item></channel></rss>"#;
        let mut bytes = vec![0xFE, 0xFF];
        bytes.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        bytes
    }

    #[test]
    fn a_parser_panic_is_a_parse_error() {
        let error = parse(&utf16be_feed(), &base()).err();
        assert!(error.is_some(), "a UTF-16 document is refused, not a crash");
    }
}
