//! Real-world feed documents (issue 19, items 14–21): a corpus of fixture
//! feeds shaped like the public parser test suites' cases
//! (`tests/fixtures/feeds/`), each read by the parser and mapped as the
//! pull worker maps it, with its items' titles, links, dates and content
//! written out here by hand; then the same documents served over HTTP and
//! pulled into SQLite and PostgreSQL.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::json;
use trellis::feeds::{mapping::map_entry, parse};
use url::Url;

use crate::{
    feeds::{Reader, app},
    feedserver::{FeedServer, Route, rss2},
    helpers::Backend,
    on_both_backends,
};

on_both_backends!(
    real_world_documents_are_stored_with_their_entries,
    a_document_whose_entries_cannot_be_read_says_why,
    search_finds_text_not_markup_and_cjk_inside_a_run,
);

/// One expected item: its title, absolute link, date (`None`: undated, so
/// the arrival time) and a piece of its content.
struct Item {
    title: &'static str,
    link: Option<&'static str>,
    date: Option<&'static str>,
    content: &'static str,
}

enum Expect {
    Feed {
        title: Option<&'static str>,
        items: Vec<Item>,
    },
    Error(&'static str),
}

struct Case {
    file: &'static str,
    /// The `Content-Type` it is served with.
    content_type: Option<&'static str>,
    expect: Expect,
}

const fn item(
    title: &'static str,
    link: Option<&'static str>,
    date: Option<&'static str>,
    content: &'static str,
) -> Item {
    Item {
        title,
        link,
        date,
        content,
    }
}

fn feed(file: &'static str, title: Option<&'static str>, items: Vec<Item>) -> Case {
    Case {
        file,
        content_type: None,
        expect: Expect::Feed { title, items },
    }
}

fn served_as(content_type: &'static str, case: Case) -> Case {
    Case {
        content_type: Some(content_type),
        ..case
    }
}

/// One document per encoding: the feed's title and its one item's title.
fn encoded(file: &'static str, title: &'static str, items: Vec<Item>) -> Case {
    feed(file, Some(title), items)
}

const fn enc_item(title: &'static str) -> Item {
    item(title, Some("https://enc.example/1"), None, title)
}

fn cases() -> Vec<Case> {
    const V: Option<&str> = Some("2024-09-02T08:00:00Z");
    vec![
        // Item 14: formats.
        feed(
            "atom03.xml",
            Some("Atom 0.3 & friends"),
            vec![
                item(
                    "First 0.3 entry",
                    Some("http://atom03.example/2005/07/31/first"),
                    Some("2005-07-31T12:29:29Z"),
                    "<p>Escaped <em>HTML</em> body</p>",
                ),
                item(
                    "Second 0.3 entry",
                    Some("https://fixtures.example/2005/07/30/second"),
                    Some("2005-07-30T10:00:00Z"),
                    "<p>Inline <b>XHTML</b></p>",
                ),
            ],
        ),
        feed(
            "rss090_heise.xml",
            Some("heise online News"),
            vec![
                item(
                    "Neue Prozessoren vorgestellt",
                    Some("https://www.heise.de/news/Neue-Prozessoren-1.html"),
                    None,
                    "",
                ),
                item(
                    "Sicherheitslücke geschlossen",
                    Some("https://www.heise.de/news/Sicherheitsluecke-2.html"),
                    None,
                    "",
                ),
                item(
                    "Rechenzentrum eröffnet",
                    Some("https://www.heise.de/news/Rechenzentrum-3.html"),
                    None,
                    "",
                ),
            ],
        ),
        feed(
            "rss10_about_only.xml",
            Some("About-only items"),
            vec![
                item(
                    "Item by about",
                    Some("https://rdf.example/a"),
                    Some("2024-03-01T08:30:00Z"),
                    "<p>Described</p>",
                ),
                item(
                    "Item with link",
                    Some("https://rdf.example/b?from=link"),
                    Some("2024-03-02T09:30:00Z"),
                    "",
                ),
            ],
        ),
        feed(
            "rss2_userland.xml",
            Some("Scripting News"),
            vec![item(
                "UserLand namespace item",
                Some("http://scripting.example/2004/01/01#a"),
                Some("2004-01-01T12:00:00Z"),
                "Hello from the default namespace",
            )],
        ),
        feed(
            "rss_version_none.xml",
            Some("Version none"),
            vec![item(
                "Item of version none",
                Some("https://versions.example/none"),
                V,
                "body none",
            )],
        ),
        feed(
            "rss_version_093.xml",
            Some("Version 0.93"),
            vec![item(
                "Item of version 0.93",
                Some("https://versions.example/0.93"),
                V,
                "body 0.93",
            )],
        ),
        feed(
            "rss_version_094.xml",
            Some("Version 0.94"),
            vec![item(
                "Item of version 0.94",
                Some("https://versions.example/0.94"),
                V,
                "body 0.94",
            )],
        ),
        feed(
            "rss_version_200.xml",
            Some("Version 2.00"),
            vec![item(
                "Item of version 2.00",
                Some("https://versions.example/2.00"),
                V,
                "body 2.00",
            )],
        ),
        feed(
            "rss_version_30.xml",
            Some("Version 3.0"),
            vec![item(
                "Item of version 3.0",
                Some("https://versions.example/3.0"),
                V,
                "body 3.0",
            )],
        ),
        Case {
            file: "error_unknown_namespace.xml",
            content_type: None,
            expect: Expect::Error("the feed has 1 entries but none of them could be read"),
        },
        // Item 17: titles are plain text.
        feed(
            "titles_with_markup.xml",
            Some("Bold feed & name"),
            vec![
                item(
                    "Hello & bye",
                    Some("https://titles.example/1"),
                    Some("2024-05-01T00:00:00Z"),
                    "<p>one</p>",
                ),
                item(
                    "Test: bold end",
                    Some("https://titles.example/2"),
                    Some("2024-05-02T00:00:00Z"),
                    "two",
                ),
            ],
        ),
        feed(
            "rss_title_naked_html.xml",
            Some("Naked"),
            vec![
                item("Test: bold end", Some("https://naked.example/1"), None, "x"),
                item("Café society", Some("https://naked.example/2"), None, "y"),
            ],
        ),
        // Item 15: encodings.
        encoded(
            "enc_iso-8859-1.xml",
            "Café crème",
            vec![enc_item("Élève à l'école")],
        ),
        encoded(
            "enc_windows-1252.xml",
            "“Smart” quotes",
            vec![enc_item("Price: 5 € – cheap")],
        ),
        encoded("enc_koi8-r.xml", "Новости", vec![enc_item("Привет, мир")]),
        encoded(
            "enc_windows-1251.xml",
            "Новини",
            vec![enc_item("Здравей, свят")],
        ),
        encoded(
            "enc_shift_jis.xml",
            "日本のニュース",
            vec![enc_item("こんにちは世界")],
        ),
        encoded("enc_euc-jp.xml", "日本語", vec![enc_item("東京の天気")]),
        encoded("enc_gb2312.xml", "新闻", vec![enc_item("你好世界")]),
        encoded("enc_gbk.xml", "新聞", vec![enc_item("镕铖")]),
        encoded("enc_gb18030.xml", "新闻", vec![enc_item("你好")]),
        encoded("enc_big5.xml", "新聞", vec![enc_item("台北天氣")]),
        encoded("enc_euc-kr.xml", "뉴스", vec![enc_item("안녕하세요")]),
        encoded(
            "enc_utf-16le_bom.xml",
            "Wide LE",
            vec![enc_item("Ünïcode “wide”")],
        ),
        encoded(
            "enc_utf-16be_bom.xml",
            "Wide BE",
            vec![enc_item("日本 wide")],
        ),
        encoded("enc_utf-32le_bom.xml", "Wider", vec![enc_item("Ωmega")]),
        encoded("enc_utf-8_bom.xml", "BOM UTF-8", vec![enc_item("Ärger")]),
        served_as(
            "application/rss+xml; charset=KOI8-R",
            encoded(
                "enc_http_koi8-r.xml",
                "Только HTTP",
                vec![enc_item("Кодировка из заголовка")],
            ),
        ),
        served_as(
            "text/xml; charset=utf-8",
            encoded(
                "enc_http_utf8_prolog_latin1.xml",
                "Déjà vu",
                vec![enc_item("Naïve café")],
            ),
        ),
        served_as(
            "application/xml; charset=utf-8",
            encoded(
                "enc_invalid_byte.xml",
                "Broken \u{FFFD} byte",
                vec![enc_item("Still readable")],
            ),
        ),
        // Item 16: sloppy XML.
        feed(
            "sloppy_bare_ampersand.xml",
            Some("Tom & Jerry"),
            vec![item(
                "Fish & Chips",
                Some("https://sloppy.example/p?id=1&lang=en"),
                None,
                "R&D news",
            )],
        ),
        feed(
            "sloppy_html_entities.xml",
            Some("Entités"),
            vec![item(
                "Café — l’été…",
                Some("https://entities.example/1"),
                None,
                "<p>© 2024</p>",
            )],
        ),
        feed(
            "sloppy_netscape_dtd.xml",
            Some("Netscape & DTD"),
            vec![item(
                "Naïve résumé ½ ©",
                Some("https://dtd.example/1"),
                None,
                "äöü ß",
            )],
        ),
        feed(
            "sloppy_odd_content_types.xml",
            Some("Odd types"),
            vec![
                item(
                    "XHTML by MIME",
                    Some("https://odd.example/1"),
                    Some("2024-01-01T00:00:00Z"),
                    "<p>mime xhtml</p>",
                ),
                item(
                    "Plain text",
                    Some("https://odd.example/2"),
                    Some("2024-01-02T00:00:00Z"),
                    "just text",
                ),
                item(
                    "Octets",
                    Some("https://odd.example/3"),
                    Some("2024-01-03T00:00:00Z"),
                    "octet summary",
                ),
                item(
                    "",
                    Some("https://odd.example/4"),
                    Some("2024-01-04T00:00:00Z"),
                    "bogus summary",
                ),
            ],
        ),
        // Item 18: dates.
        feed(
            "dates_real_world.xml",
            Some("Dates"),
            vec![
                item(
                    "Space and colon offset",
                    Some("https://dates.example/1"),
                    Some("2018-10-23T04:07:42Z"),
                    "",
                ),
                item(
                    "No seconds",
                    Some("https://dates.example/2"),
                    Some("2018-12-12T12:12:00Z"),
                    "",
                ),
                item(
                    "Named zone",
                    Some("https://dates.example/3"),
                    Some("2018-12-26T18:00:54Z"),
                    "",
                ),
                item(
                    "GMT offset",
                    Some("https://dates.example/4"),
                    Some("2020-10-29T14:36:03Z"),
                    "",
                ),
                item(
                    "German",
                    Some("https://dates.example/5"),
                    Some("2018-03-28T22:00:00Z"),
                    "",
                ),
                item(
                    "French",
                    Some("https://dates.example/6"),
                    Some("2020-12-01T16:11:02Z"),
                    "",
                ),
                item(
                    "dcterms created",
                    Some("https://dates.example/7"),
                    Some("2021-06-01T10:00:00Z"),
                    "",
                ),
                item(
                    "dcterms issued",
                    Some("https://dates.example/8"),
                    Some("2021-06-02T10:00:00Z"),
                    "",
                ),
                item(
                    "dcterms modified",
                    Some("https://dates.example/9"),
                    Some("2021-06-03T10:00:00Z"),
                    "",
                ),
                item(
                    "atom published",
                    Some("https://dates.example/10"),
                    Some("2021-06-04T10:00:00Z"),
                    "",
                ),
                item("Unreadable", Some("https://dates.example/11"), None, ""),
                item(
                    "dc date",
                    Some("https://dates.example/12"),
                    Some("2021-06-05T00:00:00Z"),
                    "",
                ),
            ],
        ),
        // Item 19: JSON Feed leniency.
        feed(
            "json_bom_no_title.json",
            None,
            vec![item(
                "",
                Some("https://json.example/42"),
                Some("2024-02-03T04:05:06Z"),
                "numeric id",
            )],
        ),
        feed(
            "json_authors_object.json",
            Some("Authors object"),
            vec![item(
                "By Ada",
                Some("https://json.example/a1"),
                None,
                "<p>hi</p>",
            )],
        ),
        // Item 20: content kept.
        feed(
            "content_youtube_media_group.xml",
            Some("A Channel"),
            vec![item(
                "A video",
                Some("https://www.youtube.com/watch?v=abc123"),
                Some("2024-04-01T10:00:00Z"),
                "What this video is about",
            )],
        ),
        feed(
            "content_itunes_summary.xml",
            Some("A Podcast"),
            vec![item(
                "Episode 1",
                None,
                Some("2024-09-10T06:00:00Z"),
                "Show notes of episode one",
            )],
        ),
        feed(
            "content_naked_html_cdata.xml",
            Some("Naked HTML"),
            vec![item(
                "Mixed",
                Some("https://nakedhtml.example/1"),
                None,
                "<p>Before <b>the</b> section</p><p>inside CDATA</p>",
            )],
        ),
        feed(
            "content_guid_permalink.xml",
            Some("Permalinks"),
            vec![
                item(
                    "Guid is the link",
                    Some("https://perma.example/posts/1"),
                    None,
                    "a",
                ),
                item("Not a permalink", None, None, "b"),
                item("Not a URL", None, None, "c"),
            ],
        ),
    ]
}

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/feeds"))
}

/// The arrival time the corpus maps with: an undated item gets it.
fn now() -> DateTime<Utc> {
    "2026-12-02T00:00:00Z".parse().unwrap()
}

/// What one case got wrong (empty: nothing).
fn check(case: &Case, body: &[u8]) -> Vec<String> {
    let base = Url::parse(&format!("https://fixtures.example/{}", case.file)).unwrap();
    let (title, expected, feed) = match (&case.expect, parse::parse(body, case.content_type, &base))
    {
        (Expect::Error(expected), Err(error)) if error.to_string() == *expected => return vec![],
        (Expect::Error(expected), Err(error)) => {
            return vec![format!("error {error:?}, expected {expected:?}")];
        }
        (Expect::Error(expected), Ok(feed)) => {
            return vec![format!(
                "parsed ({} entries), expected the error {expected:?}",
                feed.entries.len()
            )];
        }
        (Expect::Feed { .. }, Err(error)) => return vec![format!("refused: {error}")],
        (Expect::Feed { title, items }, Ok(feed)) => (title, items, feed),
    };
    let mut wrong = Vec::new();
    if feed.title.as_deref() != *title {
        wrong.push(format!("feed title {:?}, expected {title:?}", feed.title));
    }
    let mapped: Vec<_> = feed
        .entries
        .iter()
        .map(|entry| map_entry(entry, Some(&base), now()))
        .collect();
    if mapped.len() != expected.len() {
        wrong.push(format!(
            "{} items, expected {}: {:?}",
            mapped.len(),
            expected.len(),
            mapped.iter().map(|item| &item.title).collect::<Vec<_>>()
        ));
        return wrong;
    }
    for (at, (got, want)) in mapped.iter().zip(expected.iter()).enumerate() {
        if got.title != want.title {
            wrong.push(format!(
                "item {at}: title {:?}, expected {:?}",
                got.title, want.title
            ));
        }
        if got.link.as_deref() != want.link {
            wrong.push(format!(
                "item {at}: link {:?}, expected {:?}",
                got.link, want.link
            ));
        }
        let date = want
            .date
            .map(|date| date.parse::<DateTime<Utc>>().unwrap())
            .unwrap_or_else(now);
        if got.pub_date != date {
            wrong.push(format!("item {at}: date {}, expected {date}", got.pub_date));
        }
        if got.undated != want.date.is_none() {
            wrong.push(format!("item {at}: undated is {}", got.undated));
        }
        if !got.content.contains(want.content) {
            wrong.push(format!(
                "item {at}: content {:?} lacks {:?}",
                got.content, want.content
            ));
        }
    }
    wrong
}

/// Every fixture file has its case, and every case holds.
#[test]
fn the_corpus_is_read_as_expected() {
    let cases = cases();
    let mut failures = Vec::new();
    // The generated corpus (`corpus/`) has its own test, `crate::corpus`.
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    for file in &files {
        let Some(case) = cases.iter().find(|case| case.file == file) else {
            failures.push(format!("{file}: no expectation written for it"));
            continue;
        };
        let body = std::fs::read(fixtures().join(file)).unwrap();
        failures.extend(
            check(case, &body)
                .into_iter()
                .map(|why| format!("{file}: {why}")),
        );
    }
    for case in &cases {
        if !files.iter().any(|file| file == case.file) {
            failures.push(format!("{}: the fixture is missing", case.file));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

fn fixture(file: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(file)).unwrap()
}

/// A few documents of each kind, served with their content types, pulled
/// and read back through GraphQL.
async fn real_world_documents_are_stored_with_their_entries(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let cases: [(&str, &'static str, &[&str]); 5] = [
        (
            "atom03.xml",
            "application/atom+xml",
            &["First 0.3 entry", "Second 0.3 entry"],
        ),
        (
            "rss090_heise.xml",
            "application/rdf+xml",
            &[
                "Neue Prozessoren vorgestellt",
                "Sicherheitslücke geschlossen",
                "Rechenzentrum eröffnet",
            ],
        ),
        (
            "enc_http_koi8-r.xml",
            "application/rss+xml; charset=KOI8-R",
            &["Кодировка из заголовка"],
        ),
        (
            "titles_with_markup.xml",
            "application/atom+xml",
            &["Hello & bye", "Test: bold end"],
        ),
        (
            "sloppy_html_entities.xml",
            "application/rss+xml",
            &["Café — l’été…"],
        ),
    ];
    for (file, content_type, titles) in cases {
        let path = format!("/{file}");
        let feed = ada
            .pull_new(&server, &path, Route::ok(content_type, fixture(file)))
            .await;
        let mut got: Vec<String> = ada
            .items(json!({ "feedId": feed }))
            .await
            .iter()
            .map(|item| item["title"].as_str().unwrap().to_owned())
            .collect();
        got.sort();
        let mut want: Vec<&str> = titles.to_vec();
        want.sort();
        assert_eq!(got, want, "{file}");
        let state = ada.feed(&feed).await;
        assert_eq!(
            state["fetchState"]["lastError"],
            serde_json::Value::Null,
            "{file}: {state}"
        );
    }
    // An entry whose date cannot be read keeps its arrival time and says so.
    let dates = ada
        .pull_new(
            &server,
            "/dates.xml",
            Route::rss(fixture("dates_real_world.xml")),
        )
        .await;
    let data = ada
        .data(
            "query($f: ItemFilter) { items(filter: $f, first: 50) { edges { node { title pubDate undated createdAt } } } }",
            json!({ "f": { "feedId": dates } }),
        )
        .await;
    let items = data["items"]["edges"].as_array().unwrap();
    assert_eq!(items.len(), 12);
    for edge in items {
        let node = &edge["node"];
        let unreadable = node["title"] == "Unreadable";
        assert_eq!(node["undated"], unreadable, "{node}");
        if unreadable {
            assert_eq!(node["pubDate"], node["createdAt"], "{node}");
        }
    }
    let named = items
        .iter()
        .find(|edge| edge["node"]["title"] == "Named zone")
        .unwrap();
    assert_eq!(
        named["node"]["pubDate"]
            .as_str()
            .unwrap()
            .parse::<DateTime<Utc>>()
            .unwrap(),
        "2018-12-26T18:00:54Z".parse::<DateTime<Utc>>().unwrap()
    );

    // The feed's name is plain text too.
    let feed = ada
        .pull_new(
            &server,
            "/named.xml",
            Route::ok("application/atom+xml", fixture("titles_with_markup.xml")),
        )
        .await;
    assert_eq!(ada.feed(&feed).await["name"], "Bold feed & name");
}

async fn a_document_whose_entries_cannot_be_read_says_why(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    server.set(
        "/hidden.xml",
        Route::rss(fixture("error_unknown_namespace.xml")),
    );
    let feed = ada.follow(&server.url("/hidden.xml")).await;
    let task = ada.refresh(&feed).await;
    assert_eq!(task["status"], "FAILED", "{task}");
    let state = ada.feed(&feed).await["fetchState"].clone();
    assert_eq!(
        state["lastError"], "the feed has 1 entries but none of them could be read",
        "{state}"
    );
    assert_eq!(
        state["consecutiveFailures"].as_i64().map(|n| n >= 1),
        Some(true),
        "{state}"
    );
}

/// Item 21: search reads the text, not the markup, and finds a Chinese or
/// Japanese word inside a run of characters — on both backends, by the
/// filtered list and by the ranked search.
async fn search_finds_text_not_markup_and_cjk_inside_a_run(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    ada.pull_new(
        &server,
        "/search.xml",
        Route::rss(rss2(
            "Mixed",
            &[
                (
                    "m1",
                    "Linked",
                    r#"<p style="color:red">A&nbsp;<a href="https://x.example/">link</a> <img src="a.png"> <b>T</b>rellis</p>"#,
                ),
                ("m2", "天気予報", "<p>今日は東京の天気が良い</p>"),
                ("m3", "한국 뉴스", "<p>안녕하세요 여러분</p>"),
            ],
        )),
    )
    .await;
    let titles = |items: Vec<serde_json::Value>| -> Vec<String> {
        items
            .iter()
            .map(|item| item["title"].as_str().unwrap().to_owned())
            .collect()
    };
    for markup in ["href", "src", "style", "nbsp", "color", "png"] {
        assert!(
            ada.items(json!({ "query": markup })).await.is_empty(),
            "{markup} is markup, not text"
        );
    }
    assert_eq!(
        titles(ada.items(json!({ "query": "link" })).await),
        ["Linked"]
    );
    assert_eq!(
        titles(ada.items(json!({ "query": "trellis" })).await),
        ["Linked"],
        "a tag inside a word does not split it"
    );
    for (query, title) in [
        ("東京", "天気予報"),
        ("天気", "天気予報"),
        ("予報", "天気予報"),
        ("하세", "한국 뉴스"),
    ] {
        assert_eq!(
            titles(ada.items(json!({ "query": query })).await),
            [title],
            "{query}"
        );
        let ranked = ada
            .data(
                "query($q: String!) { search(query: $q) { items { title } } }",
                json!({ "q": query }),
            )
            .await;
        assert_eq!(
            ranked["search"]["items"][0]["title"], title,
            "{query}: {ranked}"
        );
    }
    assert!(
        ada.items(json!({ "query": "東天" })).await.is_empty(),
        "characters must be adjacent"
    );
}
