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
    mapping::{self, Enclosure, RawEntry, absolute_link},
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
        let json = serde_json::from_str::<serde_json::Value>(&decoded).ok();
        let items = json
            .as_ref()
            .and_then(|json| json.get("items")?.as_array().map(Vec::len));
        let versioned = json
            .as_ref()
            .and_then(|json| json.get("version")?.as_str())
            .is_some_and(|version| version.contains("jsonfeed.org"));
        // The parser takes any object for a lenient JSON Feed; an API's
        // answer (`{"status":"ok"}`) names neither a version nor items.
        if json.is_some() && items.is_none() && !versioned {
            return Err(ParseError::Invalid(
                "a JSON document that is not a JSON Feed (no `version`, no `items`)".to_owned(),
            ));
        }
        (decoded, items.unwrap_or(0))
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
    // An entry without an author is by the feed's (Atom's rule; podcasts
    // name theirs once, in the channel's itunes:author).
    let feed_authors: Vec<String> = feed
        .authors
        .iter()
        .filter(|person| matches!(person.role.as_deref(), Some("author" | "creator")))
        .filter_map(person_name)
        .collect();
    let entries = feed
        .entries
        .into_iter()
        .map(|entry| raw_entry(entry, &feed_authors))
        .collect();
    Ok(ParsedFeed {
        // It becomes the feed's name: plain text, made fit for one.
        title: feed
            .title
            .and_then(|title| names::clean(&text::plain_text(&title.content))),
        site_url,
        entries,
    })
}

fn raw_entry(entry: feed_rs::model::Entry, feed_authors: &[String]) -> RawEntry {
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
        authors: entry_authors(&entry, feed_authors),
        enclosures: entry_enclosures(&entry),
    }
}

/// Most authors and enclosures of one entry handed to the mapping, which
/// keeps fewer ([`mapping::MAX_AUTHORS`], [`mapping::MAX_ENCLOSURES`]) once
/// blanks, repeats and unsafe URLs are gone: a hostile entry's thousands
/// are never all converted.
const RAW_AUTHORS: usize = 5 * mapping::MAX_AUTHORS;
const RAW_ENCLOSURES: usize = 5 * mapping::MAX_ENCLOSURES;

/// RSS `author`/`dc:creator`, Atom and JSON Feed authors; else the media's
/// credits (`itunes:author`); else the feed's authors.
fn entry_authors(entry: &feed_rs::model::Entry, feed_authors: &[String]) -> Vec<String> {
    let own: Vec<String> = entry
        .authors
        .iter()
        .take(RAW_AUTHORS)
        .filter_map(person_name)
        .collect();
    if !own.is_empty() {
        return own;
    }
    let credited: Vec<String> = entry
        .media
        .iter()
        .flat_map(|media| &media.credits)
        .take(RAW_AUTHORS)
        .map(|credit| text::plain_text(&credit.entity))
        .collect();
    if credited.iter().any(|name| !name.trim().is_empty()) {
        return credited;
    }
    feed_authors.to_vec()
}

/// A person's name as plain text (RSS's `mail@example.com (Name)` gives
/// `Name`), else their e-mail address.
fn person_name(person: &feed_rs::model::Person) -> Option<String> {
    let name = person
        .name
        .as_deref()
        .map(|name| name.trim().trim_start_matches('(').trim_end_matches(')'))
        .filter(|name| !name.trim().is_empty())
        .or(person.email.as_deref())?;
    Some(text::plain_text(name)).filter(|name| !name.trim().is_empty())
}

/// RSS `<enclosure>`, `media:content` (both media objects to feed-rs), and
/// Atom `rel="enclosure"` links (JSON Feed attachments too: the vendored
/// parser gives them that rel).
fn entry_enclosures(entry: &feed_rs::model::Entry) -> Vec<Enclosure> {
    let media = entry
        .media
        .iter()
        .flat_map(|media| &media.content)
        .filter_map(|content| {
            Some(Enclosure {
                url: content.url.as_ref()?.to_string(),
                mime_type: content.content_type.as_ref().map(ToString::to_string),
                length: content.size,
            })
        });
    let linked = entry
        .links
        .iter()
        .filter(|link| link.rel.as_deref() == Some("enclosure"))
        .map(|link| Enclosure {
            url: link.href.clone(),
            mime_type: link.media_type.clone(),
            length: link.length,
        });
    media.chain(linked).take(RAW_ENCLOSURES).collect()
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
    fn json_that_is_not_a_json_feed_is_refused() {
        for body in [&br#"{"status":"ok","data":[1,2]}"#[..], br#"{}"#] {
            assert!(
                matches!(parse(body, None, &base()), Err(ParseError::Invalid(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // Lenient, but a feed: items without a version, a version without items.
        assert_eq!(
            parse(
                br#"{"items":[{"id":"1","content_text":"x"}]}"#,
                None,
                &base()
            )
            .unwrap()
            .entries
            .len(),
            1
        );
        assert!(
            parse(
                br#"{"version":"https://jsonfeed.org/version/1.1","title":"t"}"#,
                None,
                &base()
            )
            .is_ok()
        );
    }

    #[test]
    fn an_rss_items_lone_media_description_is_its_content() {
        let rss = br#"<?xml version="1.0"?><rss version="2.0" xmlns:media="http://search.yahoo.com/mrss/"><channel><title>M</title>
            <item><guid>1</guid><title>Bare</title><media:description>bare text</media:description></item>
            <item><guid>2</guid><title>Group</title><media:group><media:title>G</media:title><media:description>group text</media:description></media:group></item>
            </channel></rss>"#;
        let feed = parse(rss, None, &base()).unwrap();
        assert_eq!(feed.entries[0].summary.as_deref(), Some("bare text"));
        assert_eq!(feed.entries[1].summary.as_deref(), Some("group text"));
        assert!(feed.entries.iter().all(|entry| entry.enclosures.is_empty()));
    }

    #[test]
    fn authors_and_enclosures_are_read_from_every_format() {
        let rss = br#"<?xml version="1.0"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd">
            <channel><title>Cast</title><itunes:author>The Cast Team</itunes:author>
            <item><guid>e1</guid><title>Episode 1</title><dc:creator>Ada &amp; Grace</dc:creator>
              <enclosure url="media/e1.mp3" type="audio/mpeg" length="12345"/>
              <media:content xmlns:media="http://search.yahoo.com/mrss/" url="https://example.com/cover.jpg" type="image/jpeg"/></item>
            <item><guid>e2</guid><title>Episode 2</title><author>host@example.com (Hedy Lamarr)</author></item>
            <item><guid>e3</guid><title>Episode 3</title><itunes:author>Guest Star</itunes:author></item>
            <item><guid>e4</guid><title>Episode 4</title></item></channel></rss>"#;
        let feed = parse(rss, None, &base()).unwrap();
        let entries = &feed.entries;
        assert_eq!(entries[0].authors, ["Ada & Grace"]);
        assert_eq!(
            entries[0].enclosures,
            [
                Enclosure {
                    url: "https://example.com/cover.jpg".into(),
                    mime_type: Some("image/jpeg".into()),
                    length: None,
                },
                Enclosure {
                    url: "https://example.com/blog/media/e1.mp3".into(),
                    mime_type: Some("audio/mpeg".into()),
                    length: Some(12345),
                }
            ],
            "the enclosure beside media:content, resolved against the feed's URL"
        );
        assert_eq!(entries[1].authors, ["Hedy Lamarr"]);
        assert_eq!(entries[2].authors, ["Guest Star"]);
        assert_eq!(
            entries[3].authors,
            ["The Cast Team"],
            "the channel's author"
        );

        let atom = br#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:a</id>
            <author><name>Feed Writer</name></author>
            <entry><title>E</title><id>urn:e1</id><link href="https://example.com/e1"/><author><name>Entry Writer</name><email>w@example.com</email></author>
              <link rel="enclosure" type="video/mp4" length="999" href="https://cdn.example.com/e1.mp4"/></entry>
            <entry><title>F</title><id>urn:e2</id><link href="https://example.com/e2"/></entry></feed>"#;
        let feed = parse(atom, None, &base()).unwrap();
        assert_eq!(feed.entries[0].authors, ["Entry Writer"]);
        assert_eq!(
            feed.entries[0].link.as_deref(),
            Some("https://example.com/e1")
        );
        assert_eq!(
            feed.entries[0].enclosures,
            [Enclosure {
                url: "https://cdn.example.com/e1.mp4".into(),
                mime_type: Some("video/mp4".into()),
                length: Some(999),
            }]
        );
        assert_eq!(
            feed.entries[1].authors,
            ["Feed Writer"],
            "Atom's inheritance"
        );

        let json = br#"{"version":"https://jsonfeed.org/version/1.1","title":"J",
            "items":[{"id":"j1","title":"J one","content_text":"x","authors":[{"name":"Jo"},{"name":"Al"}],
              "attachments":[{"url":"https://example.com/j1.m4a","mime_type":"audio/x-m4a","size_in_bytes":42}]}]}"#;
        let feed = parse(json, None, &base()).unwrap();
        assert_eq!(feed.entries[0].authors, ["Jo", "Al"]);
        assert_eq!(
            feed.entries[0].link, None,
            "an attachment is not the item's link"
        );
        assert_eq!(
            feed.entries[0].enclosures,
            [Enclosure {
                url: "https://example.com/j1.m4a".into(),
                mime_type: Some("audio/x-m4a".into()),
                length: Some(42),
            }]
        );
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
