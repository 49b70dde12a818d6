//! The Notion adapter against a loopback fake of Notion's REST API that
//! answers with the documented shapes: search and data source queries
//! paginated with `has_more`/`next_cursor`, the markdown endpoint with
//! `truncated` and `unknown_block_ids`, Notion's error bodies (401 for a bad
//! token, 400 `missing_version` without `Notion-Version`, 429 with
//! `Retry-After`, 529), and signed file URLs that expire (S3's 403).
//! Waits are recorded by a fake sleeper, never slept.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, Uri},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use trellis::docs::{
    adapter::{Adapter, AdapterError, DegradationKind, NodeKind, RemoteNode},
    notion::{NotionAdapter, NotionConfig},
};

use crate::docs_fakes::{self, Canned, Journal, Seen, Served};

pub(crate) const TOKEN: &str = "ntn_good_token";

fn error(status: u16, code: &str, message: &str) -> Canned {
    Canned(
        status,
        vec![("content-type", "application/json".into())],
        json!({"object": "error", "status": status, "code": code, "message": message})
            .to_string()
            .into(),
    )
}

#[derive(Default)]
pub(crate) struct Fake {
    /// Search results, in the order Notion returns them (newest first).
    pub(crate) objects: Vec<Value>,
    /// Rows of every data source, by data source id.
    pub(crate) rows: HashMap<String, Vec<Value>>,
    /// Page (or block) id as requested → (markdown, truncated, unknown ids).
    pub(crate) markdown: HashMap<String, (String, bool, Vec<String>)>,
    /// File path → (content type, bytes); a path not here has expired.
    pub(crate) files: HashMap<String, (&'static str, Vec<u8>)>,
    pub(crate) page_size: usize,
    /// What it saw, and answers scripted before the normal ones.
    pub(crate) journal: Journal,
    /// A path whose requests never get an answer (a sync stuck there, to
    /// be killed); `held` is told when one arrives.
    pub(crate) hold: Option<String>,
    pub(crate) held: tokio::sync::Notify,
}

impl Fake {
    fn list(&self, items: &[Value], body: &Value) -> Canned {
        let start: usize = body["start_cursor"]
            .as_str()
            .map_or(0, |cursor| cursor.parse().unwrap());
        let end = (start + self.page_size).min(items.len());
        let more = end < items.len();
        Canned(
            200,
            vec![("content-type", "application/json".into())],
            json!({
                "object": "list",
                "results": items[start..end],
                "next_cursor": more.then(|| end.to_string()),
                "has_more": more,
                "type": "page_or_data_source",
                "page_or_data_source": {},
            })
            .to_string()
            .into(),
        )
    }
}

async fn notion(
    State(fake): State<Arc<Fake>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Seen {
        path,
        body: json_body,
        ..
    } = fake.journal.record(&method, &uri, &headers, &body);
    if fake.hold.as_deref() == Some(path.as_str()) {
        fake.held.notify_one();
        return std::future::pending().await;
    }
    if let Some(file) = path.strip_prefix("/files/") {
        let signed = uri.query().is_some_and(|q| q.contains("X-Amz-Signature"));
        return match fake.files.get(file) {
            Some((content_type, bytes)) if signed => {
                ([("content-type", *content_type)], bytes.clone()).into_response()
            }
            _ => Canned(
                403,
                vec![("content-type", "application/xml".into())],
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>".into(),
            )
            .into_response(),
        };
    }
    api(&fake, method, &path, &headers, &json_body).into_response()
}

/// The API's answer to one request.
fn api(fake: &Fake, method: Method, path: &str, headers: &HeaderMap, json_body: &Value) -> Canned {
    // Notion checks the version header first, then the token.
    match headers.get("notion-version").map(|v| v.to_str().unwrap()) {
        None => {
            return error(
                400,
                "missing_version",
                "Notion-Version header failed validation: Notion-Version header should be defined, instead was `undefined`.",
            );
        }
        Some("2025-09-03") => {}
        Some(other) => {
            return error(
                400,
                "validation_error",
                &format!(
                    "Notion-Version header failed validation: {other} is not a supported version."
                ),
            );
        }
    }
    if headers.get("authorization").map(|v| v.to_str().unwrap()) != Some(&format!("Bearer {TOKEN}"))
    {
        return error(401, "unauthorized", "API token is invalid.");
    }
    if let Some(answer) = fake.journal.scripted(path) {
        return answer;
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (Method::GET, ["v1", "users", "me"]) => Canned(
            200,
            vec![("content-type", "application/json".into())],
            json!({"object": "user", "id": "99999999-9999-9999-9999-999999999999",
                   "type": "bot", "name": "Trellis", "bot": {"owner": {"type": "workspace", "workspace": true}}})
            .to_string()
            .into_bytes(),
        ),
        (Method::POST, ["v1", "search"]) => {
            assert_eq!(
                json_body["sort"],
                json!({"direction": "descending", "timestamp": "last_edited_time"})
            );
            fake.list(&fake.objects, json_body)
        }
        (Method::POST, ["v1", "data_sources", id, "query"]) => match fake.rows.get(*id) {
            Some(rows) => fake.list(rows, json_body),
            None => error(
                404,
                "object_not_found",
                &format!("Could not find data_source with ID: {id}."),
            ),
        },
        (Method::GET, ["v1", "pages", id, "markdown"]) => match fake.markdown.get(*id) {
            Some((markdown, truncated, unknown)) => Canned(
                200,
                vec![("content-type", "application/json".into())],
                json!({
                    "object": "page_markdown",
                    "id": id,
                    "markdown": markdown,
                    "truncated": truncated,
                    "unknown_block_ids": unknown,
                })
                .to_string()
                .into(),
            ),
            None => error(
                404,
                "object_not_found",
                &format!(
                    "Could not find block with ID: {id}. Make sure the relevant pages and databases are shared with your integration."
                ),
            ),
        },
        _ => error(400, "invalid_request_url", "Invalid request URL."),
    }
}

pub(crate) type Setup = Served<Fake>;

pub(crate) async fn serve(fake: Fake) -> Setup {
    docs_fakes::serve(fake, |fake| Router::new().fallback(notion).with_state(fake)).await
}

impl Served<Fake> {
    fn adapter_with(&self, token: &str) -> NotionAdapter {
        let mut config = NotionConfig::new(self.base.clone(), token.to_owned().into());
        // Fast pacing so the test does not wait on the real-time gate; the
        // retry waits go to the recording sleeper.
        config.api_qps = 1000.try_into().unwrap();
        config.asset_qps = 1000.try_into().unwrap();
        config.sleeper = self.sleeper.clone();
        NotionAdapter::with_clients(config, self.client(), self.client())
    }

    fn adapter(&self) -> NotionAdapter {
        self.adapter_with(TOKEN)
    }
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

pub(crate) fn page(id: &str, title: &str, edited: &str, parent: Value) -> Value {
    json!({
        "object": "page", "id": id, "created_time": edited, "last_edited_time": edited,
        "in_trash": false, "archived": false, "parent": parent,
        "url": format!("https://www.notion.so/{}-{}", title, id.replace('-', "")),
        "properties": {"title": {"id": "title", "type": "title", "title": [
            {"type": "text", "text": {"content": title}, "plain_text": title}]}},
    })
}

pub(crate) const ROOT: &str = "11111111-1111-1111-1111-111111111111";
pub(crate) const CHILD: &str = "22222222-2222-2222-2222-222222222222";
pub(crate) const SOURCE: &str = "33333333-3333-3333-3333-333333333333";
pub(crate) const DATABASE: &str = "44444444-4444-4444-4444-444444444444";
pub(crate) const ROW: &str = "55555555-5555-5555-5555-555555555555";
pub(crate) const TRASHED: &str = "66666666-6666-6666-6666-666666666666";

pub(crate) fn workspace() -> Vec<Value> {
    let mut trashed = page(
        TRASHED,
        "Old",
        "2026-11-30T11:00:00.000Z",
        json!({"type": "workspace", "workspace": true}),
    );
    trashed["in_trash"] = json!(true);
    vec![
        page(
            ROW,
            "Row",
            "2026-11-30T12:00:00.000Z",
            json!({"type": "data_source_id", "data_source_id": SOURCE, "database_id": DATABASE}),
        ),
        page(
            CHILD,
            "Child",
            "2026-11-30T11:58:00.000Z",
            json!({"type": "page_id", "page_id": ROOT}),
        ),
        trashed,
        json!({
            "object": "data_source", "id": SOURCE, "last_edited_time": "2026-11-30T10:00:00.000Z",
            "title": [{"plain_text": "Tasks"}], "in_trash": false,
            "parent": {"type": "database_id", "database_id": DATABASE},
            "database_parent": {"type": "page_id", "page_id": ROOT},
            "properties": {},
        }),
        page(
            ROOT,
            "Root",
            "2026-11-29T09:00:00.000Z",
            json!({"type": "workspace", "workspace": true}),
        ),
    ]
}

#[tokio::test]
async fn enumeration_follows_search_pagination_and_skips_trashed_objects() {
    let setup = serve(Fake {
        objects: workspace(),
        page_size: 2,
        ..Fake::default()
    })
    .await;
    let nodes = setup.adapter().enumerate().await.unwrap();
    let summary: Vec<(&str, NodeKind, Option<&str>, &str)> = nodes
        .iter()
        .map(|n| {
            (
                n.id.as_str(),
                n.kind,
                n.parent_id.as_deref(),
                n.title.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (ROW, NodeKind::Row, Some(SOURCE), "Row"),
            (CHILD, NodeKind::Page, Some(ROOT), "Child"),
            (SOURCE, NodeKind::Database, Some(ROOT), "Tasks"),
            (ROOT, NodeKind::Page, None, "Root"),
        ]
    );
    assert_eq!(
        nodes[1].alt_id.as_deref(),
        Some("22222222222222222222222222222222")
    );
    assert_eq!(
        nodes[1].url.as_deref(),
        Some("https://www.notion.so/Child-22222222222222222222222222222222")
    );
    let searches = setup.fake.journal.seen("/v1/search");
    let cursors: Vec<&Value> = searches.iter().map(|s| &s.body["start_cursor"]).collect();
    assert_eq!(cursors, [&Value::Null, &json!("2"), &json!("4")]);
    assert!(
        searches
            .iter()
            .all(|s| s.method == Method::POST && s.body["page_size"] == 100)
    );
}

#[tokio::test]
async fn an_incremental_listing_stops_past_the_checkpoint_less_five_minutes() {
    let setup = serve(Fake {
        objects: workspace(),
        page_size: 2,
        ..Fake::default()
    })
    .await;
    let adapter = setup.adapter();
    let incremental = adapter.incremental_enumerator().unwrap();
    // 12:00 and 11:58 are within 11:59 − 5 min; 11:00 is not: the listing
    // stops there, on the second page, and never asks for the third.
    let listing = incremental
        .enumerate_since(at("2026-11-30T11:59:00Z"))
        .await
        .unwrap();
    let ids: Vec<&str> = listing.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, [ROW, CHILD]);
    assert_eq!(listing.checkpoint, at("2026-11-30T12:00:00Z"));
    assert_eq!(setup.fake.journal.seen("/v1/search").len(), 2);
    // Nothing newer: the checkpoint stays, one search page is enough.
    let listing = incremental
        .enumerate_since(at("2026-12-01T00:00:00Z"))
        .await
        .unwrap();
    assert!(listing.nodes.is_empty());
    assert_eq!(listing.checkpoint, at("2026-12-01T00:00:00Z"));
    assert_eq!(setup.fake.journal.seen("/v1/search").len(), 3);
}

fn node(id: &str, kind: NodeKind) -> RemoteNode {
    RemoteNode {
        id: id.to_owned(),
        alt_id: None,
        kind,
        parent_id: None,
        title: "T".into(),
        edited_at: None,
        url: Some(format!("https://www.notion.so/T-{}", id.replace('-', ""))),
    }
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_after_the_wait_notion_asks_for() {
    let markdown = HashMap::from([
        (ROOT.to_owned(), ("# Root\n".to_owned(), false, vec![])),
        (CHILD.to_owned(), ("# Child\n".to_owned(), false, vec![])),
    ]);
    let setup = serve(Fake {
        markdown,
        page_size: 100,
        ..Fake::default()
    })
    .await;
    let root_path = format!("/v1/pages/{ROOT}/markdown");
    let child_path = format!("/v1/pages/{CHILD}/markdown");
    let limited = || {
        let mut answer = error(
            429,
            "rate_limited",
            "You have been rate limited. Please try again in a few minutes.",
        );
        answer.1.push(("retry-after", "7".into()));
        answer
    };
    setup.fake.journal.script(&root_path, vec![limited()]);
    setup.fake.journal.script(
        &child_path,
        vec![error(529, "service_unavailable", "Notion is overloaded.")],
    );
    let adapter = setup.adapter();

    let root = adapter
        .fetch_markdown(&node(ROOT, NodeKind::Page))
        .await
        .unwrap();
    assert_eq!(root.markdown, "# Root\n");
    assert_eq!(
        setup.fake.journal.seen(&root_path).len(),
        2,
        "the 429, then the retry"
    );
    assert_eq!(setup.waits(), [Duration::from_secs(7)], "Retry-After wins");

    let child = adapter
        .fetch_markdown(&node(CHILD, NodeKind::Page))
        .await
        .unwrap();
    assert_eq!(child.markdown, "# Child\n");
    assert_eq!(
        setup.fake.journal.seen(&child_path).len(),
        2,
        "the 529, then the retry"
    );
    let waits = setup.waits();
    assert_eq!(waits.len(), 2);
    assert!(
        waits[1] >= Duration::from_secs(1) && waits[1] < Duration::from_secs(7),
        "the backoff's first step: {waits:?}"
    );

    // Always limited: three retries, then a typed, retryable error.
    setup
        .fake
        .journal
        .script(&root_path, (0..10).map(|_| limited()).collect());
    let spent = adapter
        .fetch_markdown(&node(ROOT, NodeKind::Page))
        .await
        .unwrap_err();
    assert_eq!(
        spent,
        AdapterError::RateLimited {
            retry_after: Some(Duration::from_secs(7))
        }
    );
    assert!(spent.is_retryable());
    assert_eq!(setup.fake.journal.seen(&root_path).len(), 2 + 4);
    assert_eq!(adapter.api_stats().requests(), 2 + 2 + 4);
}

#[tokio::test]
async fn a_truncated_page_gets_its_missing_subtrees_and_degrades_what_still_fails() {
    let b1 = "aaaaaaaa-0000-4000-8000-000000000001";
    let b2 = "aaaaaaaa-0000-4000-8000-000000000002";
    let b3 = "aaaaaaaa-0000-4000-8000-000000000003";
    let tag = |id: &str, alt: &str| {
        format!(
            "<unknown url=\"https://www.notion.so/T-{}#{}\" alt=\"{alt}\"/>",
            ROOT.replace('-', ""),
            id.replace('-', "")
        )
    };
    let markdown = HashMap::from([
        (
            ROOT.to_owned(),
            (
                format!(
                    "# Big\n- item\n\t{}\n{}\n{}\n",
                    tag(b1, "toggle"),
                    tag(b2, "column_list"),
                    tag("aaaaaaaa-0000-4000-8000-0000000000ff", "ai_block")
                ),
                true,
                vec![b1.to_owned(), b2.to_owned()],
            ),
        ),
        (
            b1.to_owned(),
            (
                format!("toggle text\n{}\n", tag(b3, "paragraph")),
                false,
                vec![b3.to_owned()],
            ),
        ),
        (b3.to_owned(), ("deep text\n".to_owned(), false, vec![])),
    ]);
    let setup = serve(Fake {
        markdown,
        page_size: 100,
        ..Fake::default()
    })
    .await;
    let doc = setup
        .adapter()
        .fetch_markdown(&node(ROOT, NodeKind::Page))
        .await
        .unwrap();
    // b1 and, through it, b3 spliced in place (indented like b1's tag); b2
    // is not found and stays a verbatim tag, like the block no one listed.
    assert_eq!(
        doc.markdown,
        format!(
            "# Big\n- item\n\ttoggle text\n\tdeep text\n{}\n{}\n",
            tag(b2, "column_list"),
            tag("aaaaaaaa-0000-4000-8000-0000000000ff", "ai_block")
        )
    );
    let kinds: Vec<(DegradationKind, &str)> = doc
        .degradations
        .iter()
        .map(|d| (d.kind, d.id.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (DegradationKind::UnrenderedBlock, b2),
            (
                DegradationKind::UnknownBlock,
                "aaaaaaaa-0000-4000-8000-0000000000ff"
            ),
            (DegradationKind::Truncated, ROOT),
        ]
    );
    let body = doc.body.as_deref().unwrap();
    assert!(
        body.contains(&format!(
            "{} <!-- opendoc:degraded kind=unrendered_block id={b2} -->",
            tag(b2, "column_list")
        )),
        "{body}"
    );
    assert!(body.contains(&format!("[The rest of this page is online](https://www.notion.so/T-{}) <!-- opendoc:degraded kind=truncated id={ROOT} -->", ROOT.replace('-', ""))), "{body}");
    let fetched: HashSet<String> = setup.fake.journal.paths().into_iter().collect();
    for id in [ROOT, b1, b2, b3] {
        assert!(
            fetched.contains(&format!("/v1/pages/{id}/markdown")),
            "{id}"
        );
    }
    assert_eq!(
        fetched.len(),
        4,
        "the unlisted unknown block is not fetched"
    );
}

#[tokio::test]
async fn a_data_source_query_renders_every_property_of_every_row() {
    let row = |id: &str, properties: Value| json!({"object": "page", "id": id, "in_trash": false, "parent": {"type": "data_source_id", "data_source_id": SOURCE}, "properties": properties});
    let mut trashed = row(TRASHED, json!({}));
    trashed["in_trash"] = json!(true);
    let rows = vec![
        row(
            ROW,
            json!({
                "Name": {"id": "title", "type": "title", "title": [{"plain_text": "Launch"}]},
                "Notes": {"id": "n", "type": "rich_text", "rich_text": [{"plain_text": "go"}]},
                "Points": {"id": "p", "type": "number", "number": 3},
                "Priority": {"id": "s", "type": "select", "select": {"name": "High"}},
                "Tags": {"id": "t", "type": "multi_select", "multi_select": [{"name": "web"}, {"name": "api"}]},
                "State": {"id": "st", "type": "status", "status": {"name": "Doing"}},
                "Due": {"id": "d", "type": "date", "date": {"start": "2026-12-24", "end": null, "time_zone": null}},
                "Owner": {"id": "o", "type": "people", "people": [{"object": "user", "id": "u1", "name": "Ada"}]},
                "Spec": {"id": "f", "type": "files", "files": [{"name": "spec.pdf", "type": "file", "file": {"url": "https://s3/spec.pdf?X-Amz-Signature=x", "expiry_time": "2026-12-01T13:00:00.000Z"}}]},
                "Done": {"id": "c", "type": "checkbox", "checkbox": false},
                "Link": {"id": "l", "type": "url", "url": "https://x.test"},
                "Mail": {"id": "m", "type": "email", "email": "ada@x.test"},
                "Phone": {"id": "ph", "type": "phone_number", "phone_number": "+33 1"},
                "Score": {"id": "fo", "type": "formula", "formula": {"type": "number", "number": 9}},
                "Parent": {"id": "r", "type": "relation", "relation": [{"id": CHILD}], "has_more": false},
                "Total": {"id": "ro", "type": "rollup", "rollup": {"type": "number", "number": 12, "function": "sum"}},
                "Created": {"id": "ct", "type": "created_time", "created_time": "2026-11-01T08:00:00.000Z"},
                "Author": {"id": "cb", "type": "created_by", "created_by": {"object": "user", "id": "u2"}},
                "Edited": {"id": "et", "type": "last_edited_time", "last_edited_time": "2026-11-30T12:00:00.000Z"},
                "Editor": {"id": "eb", "type": "last_edited_by", "last_edited_by": {"object": "user", "id": "u1", "name": "Ada"}},
                "Key": {"id": "k", "type": "unique_id", "unique_id": {"prefix": "T", "number": 7}},
                "Checked": {"id": "v", "type": "verification", "verification": {"state": "unverified", "verified_by": null, "date": null}},
                "Run": {"id": "b", "type": "button", "button": {}},
            }),
        ),
        trashed,
        row(
            ROOT,
            json!({"Name": {"id": "title", "type": "title", "title": [{"plain_text": "Second"}]}}),
        ),
    ];
    let setup = serve(Fake {
        rows: HashMap::from([(SOURCE.to_owned(), rows)]),
        page_size: 2,
        ..Fake::default()
    })
    .await;
    let adapter = setup.adapter();
    let titles = HashMap::from([(CHILD.to_owned(), "Child page".to_owned())]);
    let rows = adapter
        .database_expander()
        .unwrap()
        .query_rows(&node(SOURCE, NodeKind::Database), &titles)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "the trashed row is skipped");
    let launch = &rows[ROW];
    let expected = [
        ("Author", "u2"),
        ("Checked", "unverified"),
        ("Created", "2026-11-01T08:00:00.000Z"),
        ("Done", "false"),
        ("Due", "2026-12-24"),
        ("Edited", "2026-11-30T12:00:00.000Z"),
        ("Editor", "Ada"),
        ("Key", "T-7"),
        ("Link", "https://x.test"),
        ("Mail", "ada@x.test"),
        ("Name", "Launch"),
        ("Notes", "go"),
        ("Owner", "Ada"),
        ("Parent", "Child page"),
        ("Phone", "+33 1"),
        ("Points", "3"),
        ("Priority", "High"),
        ("Run", ""),
        ("Score", "9 (formula)"),
        ("Spec", "spec.pdf (files)"),
        ("State", "Doing"),
        ("Tags", "api, web"),
        ("Total", "12 (rollup)"),
    ];
    let actual: Vec<(&str, &str)> = launch
        .values
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(actual, expected);
    let lossy: Vec<&str> = launch.degradations.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        lossy,
        [
            format!("{ROW}:Score"),
            format!("{ROW}:Spec"),
            format!("{ROW}:Total")
        ]
    );
    assert_eq!(rows[ROOT].values["Name"], "Second");
    assert_eq!(
        setup
            .fake
            .journal
            .seen(&format!("/v1/data_sources/{SOURCE}/query"))
            .len(),
        2
    );
}

#[tokio::test]
async fn signed_files_are_downloaded_at_once_and_an_expired_one_is_a_typed_error() {
    let setup = serve(Fake {
        page_size: 100,
        files: HashMap::from([(
            "ws/f1/chart.png".to_owned(),
            ("image/png", b"\x89PNG fake".to_vec()),
        )]),
        ..Fake::default()
    })
    .await;
    let fresh = format!(
        "{}files/ws/f1/chart.png?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc",
        setup.base
    );
    let late = format!(
        "{}files/ws/f2/old.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&amp;X-Amz-Signature=old",
        setup.base
    );
    let markdown = format!("![chart]({fresh})\n<pdf src=\"{late}\">Old</pdf>\n");
    // The file URLs name the fake's port: the body is scripted once it is known.
    setup.fake.journal.script(
        &format!("/v1/pages/{ROOT}/markdown"),
        vec![Canned(200, vec![], json!({"object": "page_markdown", "id": ROOT, "markdown": markdown, "truncated": false, "unknown_block_ids": []}).to_string().into())],
    );
    let adapter = setup.adapter();
    let doc = adapter
        .fetch_markdown(&node(ROOT, NodeKind::Page))
        .await
        .unwrap();
    assert_eq!(doc.assets.len(), 2);
    assert_eq!(
        doc.assets[0].remote_key,
        format!("{}files/ws/f1/chart.png", setup.base)
    );
    assert_eq!(doc.assets[0].body_url.as_deref(), Some(fresh.as_str()));
    assert_eq!(doc.assets[1].body_url.as_deref(), Some(late.as_str()));
    assert_eq!(doc.assets[1].download_url, late.replace("&amp;", "&"));

    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("chart");
    let downloaded = adapter.download_asset(&doc.assets[0], &dest).await.unwrap();
    assert_eq!(downloaded.content_type.as_deref(), Some("image/png"));
    assert_eq!(downloaded.bytes, 9);
    assert_eq!(std::fs::read(&dest).unwrap(), b"\x89PNG fake");
    // Fetched too late, the signature has expired: a typed, permanent error
    // the engine turns into a pending asset; nothing is written.
    let expired = adapter
        .download_asset(&doc.assets[1], &dir.path().join("old"))
        .await
        .unwrap_err();
    assert_eq!(
        expired,
        AdapterError::Forbidden {
            id: format!("{}files/ws/f2/old.pdf", setup.base)
        }
    );
    assert!(!dir.path().join("old").exists());
    assert!(setup.waits().is_empty(), "a 403 is not retried");
}

#[tokio::test]
async fn a_bad_token_is_refused_like_notion_does_and_stops_with_a_typed_error() {
    let setup = serve(Fake {
        objects: workspace(),
        page_size: 2,
        ..Fake::default()
    })
    .await;
    let refused = setup
        .adapter_with("ntn_wrong")
        .enumerate()
        .await
        .unwrap_err();
    assert_eq!(refused, AdapterError::Unauthorized);
    assert!(!refused.is_retryable());
    assert_eq!(
        setup.fake.journal.seen("/v1/search").len(),
        1,
        "a 401 is not retried"
    );
    // The fake answers like Notion: version first, then the token.
    let client = reqwest::Client::new();
    let search = setup.base.join("v1/search").unwrap();
    let answer = client
        .post(search.clone())
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        (body["object"].as_str(), body["code"].as_str()),
        (Some("error"), Some("missing_version"))
    );
    let answer = client
        .post(search)
        .header("Notion-Version", "2025-09-03")
        .bearer_auth("ntn_wrong")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["code"], "unauthorized");
}
