//! Feed discovery: the feeds a page links to with
//! `<link rel="alternate" type="application/rss+xml" href="…">` (and Atom,
//! JSON Feed, RDF), or the URL itself when it already is a feed. The HTML
//! side is pure: html5ever's tokenizer reads the tags (the same HTML parser
//! the sanitizer uses), hrefs are resolved against the page URL or its
//! `<base href>`.

use std::cell::RefCell;

use html5ever::{
    tendril::StrTendril,
    tokenizer::{
        BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
    },
};
use reqwest::header::HeaderMap;
use url::Url;

use super::parse;
use crate::{
    error::{AppError, AppResult},
    httpc::HttpClient,
};

/// A feed a page points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub url: String,
    pub title: Option<String>,
    /// `rss`, `atom`, `json` or `rdf` for a linked feed; `feed` when the URL itself is one.
    pub kind: &'static str,
}

/// The MIME types of feeds and the kind each names.
fn feed_kind(mime: &str) -> Option<&'static str> {
    match mime.trim().to_ascii_lowercase().split(';').next()?.trim() {
        "application/rss+xml" => Some("rss"),
        "application/atom+xml" => Some("atom"),
        "application/feed+json" | "application/json" => Some("json"),
        "application/rdf+xml" => Some("rdf"),
        _ => None,
    }
}

#[derive(Default)]
struct LinkSink {
    /// Attributes of every `<link>` start tag.
    links: RefCell<Vec<Vec<(String, String)>>>,
    base: RefCell<Option<String>>,
}

impl TokenSink for LinkSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        if let Token::TagToken(tag) = token
            && tag.kind == TagKind::StartTag
        {
            let attrs = || {
                tag.attrs
                    .iter()
                    .map(|a| (a.name.local.to_string(), a.value.to_string()))
                    .collect::<Vec<_>>()
            };
            match &*tag.name {
                "link" => self.links.borrow_mut().push(attrs()),
                "base" if self.base.borrow().is_none() => {
                    *self.base.borrow_mut() = attrs()
                        .into_iter()
                        .find(|(name, _)| name == "href")
                        .map(|(_, value)| value);
                }
                _ => {}
            }
        }
        TokenSinkResult::Continue
    }
}

/// The attributes of every `<link>` of `html` (fetched from `page`), and
/// the URL its relative hrefs resolve against (`<base href>` or the page).
fn page_links(html: &str, page: &Url) -> (Url, Vec<Vec<(String, String)>>) {
    let tokenizer = Tokenizer::new(LinkSink::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let sink = tokenizer.sink;
    let base = sink
        .base
        .borrow()
        .as_deref()
        .and_then(|href| page.join(href).ok())
        .unwrap_or_else(|| page.clone());
    let links = sink.links.take();
    (base, links)
}

/// The value of the attribute `key` of one tag.
fn attr<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// The icons `html` (fetched from `page`) declares, best first: `rel="icon"`
/// and `rel="shortcut icon"` in document order, then `apple-touch-icon`
/// (larger, but made for home screens); absolute `http(s)` URLs only,
/// without duplicates.
pub fn icon_links(html: &str, page: &Url) -> Vec<Url> {
    let (base, links) = page_links(html, page);
    let mut icons = Vec::new();
    let mut touch_icons = Vec::new();
    for attrs in &links {
        let get = |key: &str| attr(attrs, key);
        let (Some(rel), Some(href)) = (get("rel"), get("href")) else {
            continue;
        };
        let Ok(url) = base.join(href.trim()) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let rel = rel.to_ascii_lowercase();
        let tokens: Vec<&str> = rel.split_ascii_whitespace().collect();
        if tokens.contains(&"icon") {
            icons.push(url);
        } else if tokens.contains(&"apple-touch-icon") {
            touch_icons.push(url);
        }
    }
    icons.extend(touch_icons);
    let mut unique: Vec<Url> = Vec::new();
    for url in icons {
        if !unique.contains(&url) {
            unique.push(url);
        }
    }
    unique
}

/// The feeds `html` (fetched from `page`) links to, in document order, without duplicates.
pub fn alternate_links(html: &str, page: &Url) -> Vec<Discovered> {
    let (base, links) = page_links(html, page);
    let mut found: Vec<Discovered> = Vec::new();
    for attrs in &links {
        let get = |key: &str| attr(attrs, key);
        let alternate = get("rel").is_some_and(|rel| {
            rel.split_ascii_whitespace()
                .any(|token| token.eq_ignore_ascii_case("alternate"))
        });
        let (Some(kind), Some(href)) = (get("type").and_then(feed_kind), get("href")) else {
            continue;
        };
        let Ok(url) = base.join(href.trim()) else {
            continue;
        };
        if !alternate || !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let url = url.to_string();
        if found.iter().all(|seen| seen.url != url) {
            found.push(Discovered {
                url,
                title: get("title")
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
                kind,
            });
        }
    }
    found
}

/// Fetches `url` (through the SSRF-guarded client) and returns the feed
/// itself, or the feeds the page links to.
/// Discovery over the feeds' outbound client (the SSRF guard of
/// user-supplied URLs): what resolvers and the reader APIs read from their
/// context.
#[derive(Clone)]
pub struct Discoverer(pub HttpClient);

impl Discoverer {
    pub async fn discover(&self, url: &str) -> AppResult<Vec<Discovered>> {
        discover(&self.0, url).await
    }
}

pub async fn discover(http: &HttpClient, url: &str) -> AppResult<Vec<Discovered>> {
    let fetched = http
        .get(url, HeaderMap::new())
        .await
        .map_err(|error| AppError::bad_input("url", format!("could not fetch {url}: {error}")))?;
    if !fetched.status.is_success() {
        return Err(AppError::bad_input(
            "url",
            format!("could not fetch {url}: HTTP {}", fetched.status.as_u16()),
        ));
    }
    let content_type = fetched
        .headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if let Ok(feed) =
        parse::parse_blocking(fetched.body.clone(), content_type, fetched.url.clone()).await
    {
        return Ok(vec![Discovered {
            url: fetched.url.to_string(),
            title: feed.title,
            kind: "feed",
        }]);
    }
    Ok(alternate_links(
        &String::from_utf8_lossy(&fetched.body),
        &fetched.url,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_feed_links_are_found_and_made_absolute() {
        let page = Url::parse("https://blog.example/posts/hello").unwrap();
        let html = r#"<!doctype html><html><head>
            <link rel="stylesheet" href="/style.css">
            <link rel="alternate" type="application/rss+xml" title="Posts" href="/feed.xml">
            <LINK REL="Alternate feed" TYPE="application/atom+xml; charset=utf-8" href="atom.xml">
            <link rel="alternate" type="application/feed+json" href="https://cdn.example/feed.json">
            <link rel="alternate" type="text/html" hreflang="fr" href="/fr/">
            <link rel="alternate" type="application/rss+xml" href="javascript:alert(1)">
            <link rel="alternate" type="application/rss+xml" title="dup" href="/feed.xml">
            </head><body><link rel="alternate" type="application/rss+xml" href="/late.xml"></body></html>"#;
        let found = alternate_links(html, &page);
        let urls: Vec<&str> = found.iter().map(|f| f.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://blog.example/feed.xml",
                "https://blog.example/posts/atom.xml",
                "https://cdn.example/feed.json",
                "https://blog.example/late.xml",
            ]
        );
        assert_eq!(found[0].title.as_deref(), Some("Posts"));
        assert_eq!(found[1].kind, "atom");
        assert_eq!(found[2].kind, "json");
    }

    #[test]
    fn icon_links_prefer_icons_over_touch_icons() {
        let page = Url::parse("https://blog.example/posts/hello").unwrap();
        let html = r#"<head>
            <link rel="apple-touch-icon" href="/touch.png">
            <link rel="stylesheet" href="/style.css">
            <LINK REL="Shortcut Icon" href="fav.ico">
            <link rel="icon" type="image/png" href="https://cdn.example/icon.png">
            <link rel="icon" href="javascript:alert(1)">
            <link rel="icon" href="fav.ico">
            </head>"#;
        let urls: Vec<String> = icon_links(html, &page)
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(
            urls,
            [
                "https://blog.example/posts/fav.ico",
                "https://cdn.example/icon.png",
                "https://blog.example/touch.png",
            ]
        );
        assert!(icon_links("<p>none</p>", &page).is_empty());
    }

    #[test]
    fn base_href_is_honoured() {
        let page = Url::parse("https://a.example/x/y").unwrap();
        let html = r#"<head><base href="https://static.a.example/root/"><link rel="alternate" type="application/atom+xml" href="feed"></head>"#;
        assert_eq!(
            alternate_links(html, &page)[0].url,
            "https://static.a.example/root/feed"
        );
        assert!(alternate_links("<p>no links</p>", &page).is_empty());
    }
}
