//! The generated real-world feed corpus (issue 19): the documents in
//! `tests/fixtures/feeds/corpus/`, written with their expectations
//! (`expected.json`) by `generate.py` from the values it put in, so the
//! oracle never comes from the parser under test. Every document is read
//! as the pull worker reads it and compared field by field; every
//! difference is listed at once, by file. Then the whole corpus is served
//! over HTTP and pulled into SQLite and PostgreSQL, and the share of
//! documents with entries that are stored without them is measured.

use std::{collections::BTreeMap, path::PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use trellis::feeds::{mapping::map_entry, parse};
use url::Url;

use crate::{
    feeds::{Reader, app},
    feedserver::{FeedServer, Route},
    helpers::Backend,
    on_both_backends,
};

on_both_backends!(the_whole_corpus_is_stored_with_its_entries);

#[derive(Deserialize)]
struct Corpus {
    /// Relative links are resolved against `base` + the file name.
    base: String,
    documents: BTreeMap<String, Document>,
}

#[derive(Deserialize)]
struct Document {
    kind: String,
    content_type: Option<String>,
    /// Set for a document that is not a feed: it must be refused.
    error: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    items: Vec<ExpectedItem>,
}

#[derive(Deserialize)]
struct ExpectedItem {
    title: String,
    link: Option<String>,
    /// RFC 3339; `None`: undated (dated by its arrival).
    date: Option<String>,
    /// A piece of the stored (raw) content.
    content: String,
    /// Checked when present.
    authors: Option<Vec<String>>,
    enclosures: Option<Vec<ExpectedEnclosure>>,
}

#[derive(Deserialize, Debug, PartialEq)]
struct ExpectedEnclosure {
    url: String,
    #[serde(rename = "type")]
    mime_type: Option<String>,
    length: Option<u64>,
}

fn folder() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/feeds/corpus"
    ))
}

fn corpus() -> Corpus {
    let text = std::fs::read_to_string(folder().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn body(file: &str) -> Vec<u8> {
    std::fs::read(folder().join(file)).unwrap()
}

/// The arrival time the corpus maps with: an undated item gets it.
fn now() -> DateTime<Utc> {
    "2026-12-02T00:00:00Z".parse().unwrap()
}

/// Every difference between what `file` is read as and what it should be.
fn check(base: &str, file: &str, document: &Document) -> Vec<String> {
    let url = Url::parse(&format!("{base}{file}")).unwrap();
    let parsed = parse::parse(&body(file), document.content_type.as_deref(), &url);
    let feed = match (&document.error, parsed) {
        (Some(_), Err(error)) if !error.to_string().trim().is_empty() => return vec![],
        (Some(_), Err(_)) => return vec!["refused without saying why".to_owned()],
        (Some(_), Ok(feed)) => {
            return vec![format!(
                "not a feed, yet read as one with {} entries",
                feed.entries.len()
            )];
        }
        (None, Err(error)) => return vec![format!("refused: {error}")],
        (None, Ok(feed)) => feed,
    };
    let mut wrong = Vec::new();
    if feed.title != document.title {
        wrong.push(format!(
            "feed title {:?}, expected {:?}",
            feed.title, document.title
        ));
    }
    let mapped: Vec<_> = feed
        .entries
        .iter()
        .map(|entry| map_entry(entry, Some(&url), now()))
        .collect();
    if mapped.len() != document.items.len() {
        wrong.push(format!(
            "{} items, expected {}",
            mapped.len(),
            document.items.len()
        ));
    }
    for (at, (got, want)) in mapped.iter().zip(&document.items).enumerate() {
        let mut differ = |field: &str, got: String, want: String| {
            wrong.push(format!("item {at}: {field} {got}, expected {want}"));
        };
        if got.title != want.title {
            differ(
                "title",
                format!("{:?}", got.title),
                format!("{:?}", want.title),
            );
        }
        if got.link != want.link {
            differ(
                "link",
                format!("{:?}", got.link),
                format!("{:?}", want.link),
            );
        }
        let date = want
            .date
            .as_deref()
            .map(|date| date.parse::<DateTime<Utc>>().unwrap());
        let got_date = (!got.undated).then_some(got.pub_date);
        if got_date != date || (got.undated && got.pub_date != now()) {
            differ(
                "date",
                format!("{got_date:?} (undated: {})", got.undated),
                format!("{date:?}"),
            );
        }
        if !got.content.contains(&want.content) {
            let mut shown: String = got.content.chars().take(120).collect();
            if shown.len() < got.content.len() {
                shown.push('…');
            }
            differ(
                "content",
                format!("{shown:?}"),
                format!("{:?} in it", want.content),
            );
        }
        if let Some(authors) = &want.authors
            && &got.authors != authors
        {
            differ(
                "authors",
                format!("{:?}", got.authors),
                format!("{authors:?}"),
            );
        }
        if let Some(enclosures) = &want.enclosures {
            let got: Vec<ExpectedEnclosure> = got
                .enclosures
                .iter()
                .map(|enclosure| ExpectedEnclosure {
                    url: enclosure.url.clone(),
                    mime_type: enclosure.mime_type.clone(),
                    length: enclosure.length,
                })
                .collect();
            if &got != enclosures {
                differ("enclosures", format!("{got:?}"), format!("{enclosures:?}"));
            }
        }
    }
    wrong
}

/// Every generated document, every expected field; the failures name the
/// file, the item and the field.
#[test]
fn the_generated_corpus_is_read_as_expected() {
    let corpus = corpus();
    let mut failures = Vec::new();
    let mut files: Vec<String> = std::fs::read_dir(folder())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|file| file != "generate.py" && file != "expected.json")
        .collect();
    files.sort();
    for file in &files {
        let Some(document) = corpus.documents.get(file) else {
            failures.push(format!("{file}: not in expected.json"));
            continue;
        };
        failures.extend(
            check(&corpus.base, file, document)
                .into_iter()
                .map(|why| format!("{file} [{}]: {why}", document.kind)),
        );
    }
    for file in corpus.documents.keys() {
        if !files.contains(file) {
            failures.push(format!("{file}: the document is missing"));
        }
    }
    assert!(
        corpus.documents.len() >= 300,
        "the corpus holds {} documents",
        corpus.documents.len()
    );
    assert!(
        failures.is_empty(),
        "{} differences in {} documents:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// The whole corpus served with its content types and pulled by one
/// reader: a document with entries must be stored with them (fewer than
/// 1 % may not be), and one stored without must say why in `lastError`;
/// a document that is not a feed fails, with its reason.
async fn the_whole_corpus_is_stored_with_its_entries(backend: Backend) {
    let corpus = corpus();
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let mut inputs = Vec::new();
    for (file, document) in &corpus.documents {
        // `Route` keeps a `&'static str`: the few distinct types are leaked once.
        let content_type: &'static str = Box::leak(
            document
                .content_type
                .clone()
                .unwrap_or_else(|| "application/xml".to_owned())
                .into_boxed_str(),
        );
        let path = format!("/{file}");
        server.set(&path, Route::ok(content_type, body(file)));
        inputs.push(json!({ "link": server.url(&path) }));
    }
    let created = ada
        .data(
            "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
            json!({ "i": inputs }),
        )
        .await;
    assert_eq!(
        created["createFeeds"].as_array().map(Vec::len),
        Some(corpus.documents.len())
    );
    let task = ada.refresh_all().await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    let feeds = ada
        .data(
            "{ feeds { link itemCount fetchState { lastError } } }",
            json!({}),
        )
        .await;
    let mut with_entries = 0;
    let mut stored_empty = Vec::new();
    let mut problems = Vec::new();
    for feed in feeds["feeds"].as_array().unwrap() {
        let link = feed["link"].as_str().unwrap();
        let file = link.rsplit('/').next().unwrap();
        let document = &corpus.documents[file];
        let stored = feed["itemCount"].as_u64().unwrap() as usize;
        let error = feed["fetchState"]["lastError"].as_str();
        if document.error.is_some() {
            if error.is_none_or(|error| error.trim().is_empty()) {
                problems.push(format!("{file}: not a feed, yet no lastError"));
            }
            continue;
        }
        if document.items.is_empty() {
            continue;
        }
        with_entries += 1;
        if stored == 0 {
            stored_empty.push(file.to_owned());
            if error.is_none() {
                problems.push(format!("{file}: stored empty, silently"));
            }
        } else if stored != document.items.len() {
            problems.push(format!(
                "{file}: {stored} items stored, expected {}",
                document.items.len()
            ));
        }
    }
    println!(
        "corpus: {} documents, {with_entries} with entries, {} stored empty{}",
        corpus.documents.len(),
        stored_empty.len(),
        if stored_empty.is_empty() {
            String::new()
        } else {
            format!(" ({})", stored_empty.join(", "))
        }
    );
    assert!(problems.is_empty(), "{backend:?}:\n{}", problems.join("\n"));
    assert!(
        stored_empty.len() * 100 < with_entries,
        "{backend:?}: {} of {with_entries} documents with entries stored empty: {stored_empty:?}",
        stored_empty.len()
    );
}
