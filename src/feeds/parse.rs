//! Bytes → feed. [`super::prepare`] decodes the bytes and repairs sloppy
//! XML, then feed-rs parses them (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, JSON
//! Feed; the copy under `vendor/feed-rs` carries the fixes real feeds need,
//! see `docs/feeds.md`). Only the adapter lives here: what feed-rs parses
//! becomes our [`ParsedFeed`] of [`RawEntry`]s; the identity/content/date
//! fallbacks are [`super::mapping`]'s.
//!
//! A document that holds entries but yields none is an error saying so,
//! never an empty success.
//!
//! The parsers are third-party code fed hostile bytes: a document they
//! panic on is refused like any malformed one, never a crashed worker.

use std::panic::{AssertUnwindSafe, catch_unwind};

use url::Url;

use super::{
    dates,
    mapping::{RawEntry, absolute_link},
    names, prepare, text,
};

/// What the pull worker needs from a fetched document.
#[derive(Debug, Clone, Default)]
pub struct ParsedFeed {
    /// Plain text, cleaned to a name ([`names::clean`]).
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
    /// The document holds entries, but none could be read.
    #[error("the feed has {0} entries but none of them could be read")]
    NoEntries(usize),
    /// The parser panicked on the document (logged with the panic's text).
    #[error("the feed could not be parsed")]
    Panicked,
}

/// Parses `body` fetched from `url` (the base for relative links), served
/// as `content_type` (its charset is honoured). A panic of the parser is
/// caught and answered [`ParseError::Panicked`].
pub fn parse(body: &[u8], content_type: Option<&str>, url: &Url) -> Result<ParsedFeed, ParseError> {
    catch_unwind(AssertUnwindSafe(|| {
        parse_unguarded(body, content_type, url)
    }))
    .unwrap_or_else(|panic| {
        let message = crate::error::panic_text(panic.as_ref());
        tracing::warn!(url = %url, panic = %message, "the feed parser panicked on a document");
        Err(ParseError::Panicked)
    })
}

/// [`parse`] on the blocking pool: parsing a large feed is milliseconds of
/// CPU that must not hold up an async worker.
pub async fn parse_blocking(
    body: Vec<u8>,
    content_type: Option<String>,
    url: Url,
) -> Result<ParsedFeed, ParseError> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        span.in_scope(|| parse(&body, content_type.as_deref(), &url))
    })
    .await
    // The panic is caught inside; this is the runtime shutting down.
    .unwrap_or(Err(ParseError::Panicked))
}

/// The `charset` parameter of a `Content-Type` value.
fn charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']))
    })
}

fn parse_unguarded(
    body: &[u8],
    content_type: Option<&str>,
    url: &Url,
) -> Result<ParsedFeed, ParseError> {
    let decoded = prepare::decode(body, content_type.and_then(charset));
    let (document, expected) = if decoded.trim_start().starts_with('{') {
        let expected = serde_json::from_str::<serde_json::Value>(&decoded)
            .ok()
            .and_then(|json| json.get("items")?.as_array().map(Vec::len))
            .unwrap_or(0);
        (decoded, expected)
    } else {
        let repaired = prepare::repair(&decoded);
        (repaired.text, repaired.entry_tags)
    };
    let feed = feed_rs::parser::Builder::new()
        .base_uri(Some(url.as_str()))
        // No invented ids: an entry without one takes the mapping's fallbacks.
        .id_generator(|_, _, _| String::new())
        .sanitize_content(false)
        // Real-world date strings; one that cannot be read leaves the entry undated.
        .timestamp_parser(dates::parse)
        .build()
        .parse(document.as_bytes())
        .map_err(|error| ParseError::Invalid(error.to_string()))?;
    if feed.entries.is_empty() && expected > 0 {
        return Err(ParseError::NoEntries(expected));
    }
    let site_url = alternate(&feed.links).and_then(|href| absolute_link(href, Some(url)));
    let entries = feed.entries.into_iter().map(raw_entry).collect();
    Ok(ParsedFeed {
        // It becomes the feed's name: plain text, made fit for one.
        title: feed
            .title
            .and_then(|title| names::clean(&text::plain_text(&title.content))),
        site_url,
        entries,
    })
}

fn raw_entry(entry: feed_rs::model::Entry) -> RawEntry {
    // Podcasts (itunes:summary) and YouTube (media:group/media:description)
    // describe an entry in its media only.
    let media_description = || {
        entry
            .media
            .iter()
            .find_map(|media| media.description.as_ref().map(|text| text.content.clone()))
    };
    RawEntry {
        link: alternate(&entry.links).map(str::to_owned),
        guid: Some(entry.id.clone()).filter(|id| !id.trim().is_empty()),
        // Titles are plain text, whatever markup the feed put in them.
        title: entry
            .title
            .as_ref()
            .map(|title| text::plain_text(&title.content)),
        content: entry
            .content
            .as_ref()
            .and_then(|content| content.body.clone()),
        summary: entry
            .summary
            .as_ref()
            .map(|text| text.content.clone())
            .or_else(media_description),
        published: entry.published,
        updated: entry.updated,
    }
}

/// The `alternate` link (or the first link with no `rel`, as in RSS).
fn alternate(links: &[feed_rs::model::Link]) -> Option<&str> {
    links
        .iter()
        .find(|link| {
            link.target.is_none() && link.rel.as_deref().is_none_or(|rel| rel == "alternate")
        })
        .map(|link| link.href.as_str())
}

/// Whether `body` looks like a feed document at all (discovery: a page URL
/// may itself be a feed).
pub fn is_feed(body: &[u8], content_type: Option<&str>, url: &Url) -> bool {
    parse(body, content_type, url).is_ok()
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
        let feed = parse(rss2, None, &base()).unwrap();
        assert_eq!(feed.title.as_deref(), Some("R2"));
        assert_eq!(feed.site_url.as_deref(), Some("https://example.com/"));
        assert_eq!(feed.entries.len(), 2);
        assert_eq!(feed.entries[0].guid.as_deref(), Some("g1"));
        assert!(feed.entries[0].published.is_some());
        assert_eq!(feed.entries[1].guid, None, "no invented id");

        let atom = br#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>
            <link rel="alternate" href="https://example.com/"/><link rel="self" href="https://example.com/atom"/><id>urn:a</id><updated>2026-11-30T10:00:00Z</updated>
            <entry><title>E</title><id>urn:e1</id><link href="https://example.com/e1"/><updated>2026-11-29T10:00:00Z</updated><content type="html">&lt;b&gt;x&lt;/b&gt;</content></entry></feed>"#;
        let feed = parse(atom, None, &base()).unwrap();
        assert_eq!(feed.site_url.as_deref(), Some("https://example.com/"));
        assert_eq!(feed.entries[0].content.as_deref(), Some("<b>x</b>"));
        assert!(feed.entries[0].updated.is_some());

        let rss1 = br#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
            <channel rdf:about="https://example.com/"><title>R1</title><link>https://example.com/</link></channel>
            <item rdf:about="https://example.com/r1"><title>R1 item</title><link>https://example.com/r1</link></item></rdf:RDF>"#;
        let feed = parse(rss1, None, &base()).unwrap();
        assert_eq!(feed.entries.len(), 1);
        assert_eq!(
            feed.entries[0].link.as_deref(),
            Some("https://example.com/r1")
        );

        let json = br#"{"version":"https://jsonfeed.org/version/1.1","title":"J","home_page_url":"https://example.com/",
            "items":[{"id":"j1","url":"https://example.com/j1","title":"J one","content_html":"<p>j</p>","date_published":"2026-11-30T09:00:00Z"}]}"#;
        let feed = parse(json, None, &base()).unwrap();
        assert_eq!(feed.entries[0].guid.as_deref(), Some("j1"));
        assert_eq!(feed.entries[0].content.as_deref(), Some("<p>j</p>"));
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(parse(b"<rss><channel><item>", None, &base()).is_err());
        assert!(parse(b"<html><body>hello</body></html>", None, &base()).is_err());
        assert!(parse(b"", None, &base()).is_err());
        assert!(!is_feed(b"not xml at all", None, &base()));
    }

    /// UTF-16BE with a BOM and `encoding="utf-16"` (quick-xml under feed-rs
    /// panicked on it before it was decoded first).
    fn utf16be_feed() -> Vec<u8> {
        let text = r#"<?xml version="1.0" encoding="utf-16"?><rss version="2.0"><channel><title>Wide</title><item><guid>w1</guid><title>One</title></item></channel></rss>"#;
        let mut bytes = vec![0xFE, 0xFF];
        bytes.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        bytes
    }

    #[test]
    fn a_utf16_document_with_a_bom_is_read() {
        let feed = parse(&utf16be_feed(), None, &base()).unwrap();
        assert_eq!(feed.title.as_deref(), Some("Wide"));
        assert_eq!(feed.entries[0].title.as_deref(), Some("One"));
    }

    #[test]
    fn entries_that_exist_but_cannot_be_read_are_an_error() {
        // An <item> outside any channel of a format we read.
        let doc = br#"<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://example.com/unknown/"><channel><title>X</title></channel><item><title>Lost</title></item></rdf:RDF>"#;
        let error = parse(doc, None, &base()).unwrap_err();
        assert!(matches!(error, ParseError::NoEntries(1)), "{error}");
        assert_eq!(
            error.to_string(),
            "the feed has 1 entries but none of them could be read"
        );
        // An empty feed is simply empty.
        let empty = br#"<rss version="2.0"><channel><title>Quiet</title></channel></rss>"#;
        assert!(parse(empty, None, &base()).unwrap().entries.is_empty());
    }

    #[test]
    fn the_content_type_charset_is_honoured() {
        let mut doc =
            br#"<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Caf"#
                .to_vec();
        doc.push(0xE9);
        doc.extend(br#"</title><item><guid>1</guid><title>x</title></item></channel></rss>"#);
        let feed = parse(&doc, Some("text/xml; charset=\"ISO-8859-1\""), &base()).unwrap();
        assert_eq!(feed.title.as_deref(), Some("Café"));
        assert_eq!(
            charset("application/rss+xml;charset=koi8-r"),
            Some("koi8-r")
        );
        assert_eq!(charset("application/rss+xml"), None);
    }
}
