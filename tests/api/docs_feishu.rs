//! The Feishu adapter against a loopback fake of Feishu's Open API that
//! answers with the documented shapes: the tenant token at the top level of
//! its answer, every other answer in a `{code, msg, data}` envelope, wiki
//! nodes one level per call (`parent_node_token`, `page_token`/`has_more`),
//! drive folders (`files`, `next_page_token`), `metas/batch_query` (at most
//! 200 objects), docx blocks, bitable fields and records, whiteboards,
//! media downloads that need the tenant token, an expired token (99991663),
//! and rate limits answered with HTTP 400, code 99991400 and
//! `x-ogw-ratelimit-reset`. Waits are recorded by a fake sleeper, never
//! slept. The last test runs the engine through the adapter into a
//! temporary mirror on SQLite.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, Uri},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, TimeZone, Utc};
use migration::{Migrator, MigratorTrait};
use sea_orm::Database;
use serde_json::{Value, json};
use trellis::docs::{
    adapter::{Adapter, AdapterError, AssetRef, DegradationKind, NodeKind, RemoteNode},
    engine::{Clock, Engine, EngineConfig},
    feishu::{FeishuAdapter, FeishuConfig},
};

use crate::{
    docs_fakes::{self, Canned, Journal, Served},
    helpers::{Backend, TestDatabase, trellis_command},
    on_both_backends,
};

on_both_backends!(
    a_full_engine_run_mirrors_the_wiki_to_disk,
    the_cli_syncs_feishu_and_its_doctor_checks_pass,
);

const APP_ID: &str = "cli_a1b2c3";
const APP_SECRET: &str = "s3cr3t-app-secret";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-feishu";

fn json_answer(status: u16, body: Value) -> Canned {
    Canned(
        status,
        vec![("content-type", "application/json; charset=utf-8".into())],
        body.to_string().into_bytes(),
    )
}

fn ok(data: Value) -> Canned {
    json_answer(200, json!({"code": 0, "msg": "success", "data": data}))
}

fn fail(status: u16, code: i64, msg: &str) -> Canned {
    json_answer(status, json!({"code": code, "msg": msg}))
}

fn rate_limited(reset: &str) -> Canned {
    let mut answer = fail(400, 99991400, "request trigger frequency limit");
    answer.1.push(("x-ogw-ratelimit-reset", reset.into()));
    answer
}

#[derive(Default)]
struct Fake {
    /// Wiki spaces: id → name.
    spaces: Vec<(String, String)>,
    /// Wiki nodes by space: (parent node token or "" at the root) → nodes.
    wiki: HashMap<String, HashMap<String, Vec<Value>>>,
    /// A listing (space, parent) whose second page repeats the first's token.
    repeating: Option<(String, String)>,
    /// Drive folders: token → files.
    folders: HashMap<String, Vec<Value>>,
    /// Metas by token: (title, url, latest_modify_time).
    metas: HashMap<String, (String, String, String)>,
    /// Docx blocks by document id.
    documents: HashMap<String, Vec<Value>>,
    /// Bitables by `<app>_<table>`: (fields, records).
    bitables: HashMap<String, (Vec<Value>, Vec<Value>)>,
    /// Whiteboards: token → image bytes (none: the download fails) and texts.
    boards: HashMap<String, (Option<Vec<u8>>, Vec<String>)>,
    /// Media by token.
    media: HashMap<String, Vec<u8>>,
    /// Items per page of every listing.
    page_size: usize,
    /// Seconds each token lives (`expire`); 0 for Feishu's 7,200.
    token_life: u64,
    /// What it saw, and answers scripted before the normal ones.
    journal: Journal,
    /// Tokens issued; the valid ones.
    issued: AtomicUsize,
    valid: Mutex<HashSet<String>>,
}

impl Fake {
    /// Every token issued so far stops working (as after two hours).
    fn expire_tokens(&self) {
        self.valid.lock().unwrap().clear();
    }

    /// A page of `items` from the `page_token` (an index) of `query`.
    fn page<'a>(
        &self,
        items: &'a [Value],
        query: &HashMap<String, String>,
    ) -> (&'a [Value], Option<String>) {
        let start: usize = query
            .get("page_token")
            .map_or(0, |token| token.trim_start_matches('p').parse().unwrap());
        let end = (start + self.page_size).min(items.len());
        let next = (end < items.len()).then(|| format!("p{end}"));
        (&items[start..end], next)
    }
}

async fn feishu(
    State(fake): State<Arc<Fake>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = fake.journal.record(&method, &uri, &headers, &body);
    answer(&fake, method, &seen.path, &seen.query, &headers, &seen.body).into_response()
}

fn answer(
    fake: &Fake,
    method: Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Value,
) -> Canned {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if parts.as_slice() == ["open-apis", "auth", "v3", "tenant_access_token", "internal"] {
        assert_eq!(method, Method::POST);
        if body["app_id"] != APP_ID || body["app_secret"] != APP_SECRET {
            return json_answer(200, json!({"code": 10014, "msg": "app secret invalid"}));
        }
        let n = fake.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("t-{n}");
        fake.valid.lock().unwrap().insert(token.clone());
        // The token sits at the top level, not under `data`.
        return json_answer(
            200,
            json!({"code": 0, "msg": "ok", "tenant_access_token": token,
                "expire": if fake.token_life == 0 { 7200 } else { fake.token_life }}),
        );
    }
    let bearer = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match bearer {
        None => return fail(400, 99991661, "Missing access token for authorization."),
        Some(token) if !fake.valid.lock().unwrap().contains(token) => {
            return fail(400, 99991663, "Invalid access token for authorization.");
        }
        Some(_) => {}
    }
    if let Some(answer) = fake.journal.scripted(path) {
        return answer;
    }
    match (method, &parts[1..]) {
        (Method::GET, ["wiki", "v2", "spaces"]) => {
            let spaces: Vec<Value> = fake
                .spaces
                .iter()
                .map(|(id, name)| json!({"space_id": id, "name": name, "space_type": "team", "visibility": "private"}))
                .collect();
            let (items, next) = fake.page(&spaces, query);
            ok(
                json!({"items": items, "page_token": next.clone().unwrap_or_default(), "has_more": next.is_some()}),
            )
        }
        (Method::GET, ["wiki", "v2", "spaces", space]) => {
            match fake.spaces.iter().find(|(id, _)| id.as_str() == *space) {
                Some((id, name)) => ok(json!({"space": {"space_id": id, "name": name}})),
                None => fail(400, 131005, "not found"),
            }
        }
        (Method::GET, ["wiki", "v2", "spaces", space, "nodes"]) => {
            let parent = query.get("parent_node_token").cloned().unwrap_or_default();
            let Some(levels) = fake.wiki.get(*space) else {
                return fail(400, 131006, "permission denied");
            };
            let items = levels.get(&parent).cloned().unwrap_or_default();
            let (page, next) = fake.page(&items, query);
            let repeats = fake.repeating.as_ref() == Some(&(space.to_string(), parent.clone()));
            let next = match (next, repeats, query.get("page_token")) {
                // The server bug: the second page hands out the same token.
                (None, true, Some(token)) => Some(token.clone()),
                (next, _, _) => next,
            };
            ok(
                json!({"items": page, "page_token": next.clone().unwrap_or_default(), "has_more": next.is_some()}),
            )
        }
        (Method::GET, ["drive", "v1", "files"]) => {
            let folder = query.get("folder_token").cloned().unwrap_or_default();
            let Some(files) = fake.folders.get(&folder) else {
                return fail(403, 1061004, "forbidden");
            };
            let (page, next) = fake.page(files, query);
            ok(
                json!({"files": page, "next_page_token": next.clone().unwrap_or_default(), "has_more": next.is_some()}),
            )
        }
        (Method::POST, ["drive", "v1", "metas", "batch_query"]) => {
            let docs = body["request_docs"].as_array().unwrap();
            if docs.len() > 200 || body["with_url"] != true {
                return fail(400, 970002, "invalid param");
            }
            let mut metas = Vec::new();
            let mut failed = Vec::new();
            for doc in docs {
                let token = doc["doc_token"].as_str().unwrap();
                match fake.metas.get(token) {
                    Some((title, url, time)) => metas.push(json!({
                        "doc_token": token, "doc_type": doc["doc_type"], "title": title,
                        "owner_id": "ou_1", "create_time": "1700000000",
                        "latest_modify_user": "ou_1", "latest_modify_time": time, "url": url,
                    })),
                    None => failed.push(json!({"token": token, "code": 970005})),
                }
            }
            ok(json!({"metas": metas, "failed_list": failed}))
        }
        (Method::GET, ["docx", "v1", "documents", id, "blocks"]) => match fake.documents.get(*id) {
            Some(blocks) => {
                let (page, next) = fake.page(blocks, query);
                ok(
                    json!({"items": page, "page_token": next.clone().unwrap_or_default(), "has_more": next.is_some()}),
                )
            }
            None => fail(403, 1770032, "forBidden"),
        },
        (Method::GET, ["bitable", "v1", "apps", app, "tables", table, kind]) => {
            let Some((fields, records)) = fake.bitables.get(&format!("{app}_{table}")) else {
                return fail(403, 91403, "Forbidden");
            };
            let items = if *kind == "fields" { fields } else { records };
            let (page, next) = fake.page(items, query);
            ok(
                json!({"items": page, "page_token": next.clone().unwrap_or_default(), "has_more": next.is_some(), "total": items.len()}),
            )
        }
        (Method::GET, ["board", "v1", "whiteboards", id, "download_as_image"]) => {
            match fake.boards.get(*id) {
                Some((Some(image), _)) => Canned(
                    200,
                    vec![("content-type", "image/png".into())],
                    image.clone(),
                ),
                _ => fail(400, 2890002, "export failed"),
            }
        }
        (Method::GET, ["board", "v1", "whiteboards", id, "nodes"]) => match fake.boards.get(*id) {
            Some((_, texts)) => ok(
                json!({"nodes": texts.iter().enumerate().map(|(i, text)| json!({
                "id": format!("n{i}"), "type": "composite_shape", "text": {"text": text}
            })).collect::<Vec<_>>()}),
            ),
            None => fail(404, 2890003, "not found"),
        },
        (Method::GET, ["drive", "v1", "medias", token, "download"]) => match fake.media.get(*token)
        {
            Some(bytes) => Canned(
                200,
                vec![("content-type", "image/png".into())],
                bytes.clone(),
            ),
            None => fail(404, 1061003, "not found"),
        },
        _ => fail(404, 1254404, "no such route"),
    }
}

type Setup = Served<Fake>;

async fn serve(fake: Fake) -> Setup {
    docs_fakes::serve(fake, |fake| Router::new().fallback(feishu).with_state(fake)).await
}

impl Served<Fake> {
    fn config(&self, secret: &str) -> FeishuConfig {
        let mut config =
            FeishuConfig::new(self.base.clone(), APP_ID.into(), secret.to_owned().into());
        // Fast pacing so the test does not wait on the real-time gate; the
        // retry waits go to the recording sleeper.
        config.api_qps = 1000.try_into().unwrap();
        config.asset_qps = 1000.try_into().unwrap();
        config.sleeper = self.sleeper.clone();
        config
    }

    fn adapter_with(&self, config: FeishuConfig) -> FeishuAdapter {
        FeishuAdapter::with_clients(config, self.client(), self.client())
    }

    fn adapter(&self) -> FeishuAdapter {
        self.adapter_with(self.config(APP_SECRET))
    }
}

fn wiki_node(
    token: &str,
    obj: &str,
    obj_type: &str,
    parent: &str,
    title: &str,
    has_child: bool,
) -> Value {
    json!({
        "space_id": "7001", "node_token": token, "obj_token": obj, "obj_type": obj_type,
        "parent_node_token": parent, "node_type": "origin", "origin_node_token": token,
        "origin_space_id": "7001", "has_child": has_child, "title": title,
        "obj_create_time": "1733100000", "obj_edit_time": "1733200000",
        "node_create_time": "1733100000", "creator": "ou_1", "owner": "ou_1",
    })
}

fn text(id: &str, parent: &str, content: Value) -> Value {
    json!({"block_id": id, "block_type": 2, "parent_id": parent, "text": {"elements": content, "style": {}}})
}

fn run(content: &str) -> Value {
    json!({"text_run": {"content": content, "text_element_style": {}}})
}

fn page_block(id: &str, title: &str, children: &[&str]) -> Value {
    json!({"block_id": id, "block_type": 1, "children": children, "page": {"elements": [run(title)], "style": {}}})
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(seconds, 0).single().unwrap()
}

/// A wiki: space 7001 "Engineering" (design doc with a child, a sheet) and
/// space 7002 "Ops" (whose root listing repeats its page token).
fn wiki() -> Fake {
    let mut fake = Fake {
        page_size: 1,
        spaces: vec![
            ("7001".into(), "Engineering".into()),
            ("7002".into(), "Ops".into()),
        ],
        ..Fake::default()
    };
    fake.wiki.insert(
        "7001".into(),
        HashMap::from([
            (
                String::new(),
                vec![
                    wiki_node("wikcnDesign", "doxcnDesign", "docx", "", "Design", true),
                    wiki_node("wikcnBudget", "shtcnBudget", "sheet", "", "Budget", false),
                ],
            ),
            (
                "wikcnDesign".into(),
                vec![wiki_node(
                    "wikcnApi",
                    "doxcnApi",
                    "docx",
                    "wikcnDesign",
                    "API",
                    false,
                )],
            ),
        ]),
    );
    fake.wiki.insert(
        "7002".into(),
        HashMap::from([(
            String::new(),
            vec![
                wiki_node("wikcnRun", "doxcnRun", "docx", "", "Runbook", false),
                wiki_node("wikcnNext", "doxcnNext", "docx", "", "Second page", false),
            ],
        )]),
    );
    fake.repeating = Some(("7002".into(), String::new()));
    for (token, title) in [
        ("doxcnDesign", "Design"),
        ("shtcnBudget", "Budget"),
        ("doxcnApi", "API"),
        ("doxcnRun", "Runbook"),
    ] {
        fake.metas.insert(
            token.into(),
            (
                title.into(),
                format!("https://acme.feishu.cn/docx/{token}"),
                "1733300000".into(),
            ),
        );
    }
    fake
}

#[tokio::test]
async fn wiki_trees_are_listed_one_level_per_call_and_a_repeated_page_token_stops() {
    let setup = serve(wiki()).await;
    let adapter = setup.adapter();
    let nodes = adapter.enumerate().await.unwrap();
    type Summary<'a> = (&'a str, Option<&'a str>, NodeKind, Option<&'a str>, &'a str);
    let summary: Vec<Summary> = nodes
        .iter()
        .map(|n| {
            (
                n.id.as_str(),
                n.alt_id.as_deref(),
                n.kind,
                n.parent_id.as_deref(),
                n.title.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("7001", None, NodeKind::Folder, None, "Engineering"),
            (
                "doxcnDesign",
                Some("wikcnDesign"),
                NodeKind::Docx,
                Some("7001"),
                "Design"
            ),
            (
                "shtcnBudget",
                Some("wikcnBudget"),
                NodeKind::Sheet,
                Some("7001"),
                "Budget"
            ),
            (
                "doxcnApi",
                Some("wikcnApi"),
                NodeKind::Docx,
                Some("doxcnDesign"),
                "API"
            ),
            ("7002", None, NodeKind::Folder, None, "Ops"),
            (
                "doxcnRun",
                Some("wikcnRun"),
                NodeKind::Docx,
                Some("7002"),
                "Runbook"
            ),
            (
                "doxcnNext",
                Some("wikcnNext"),
                NodeKind::Docx,
                Some("7002"),
                "Second page"
            ),
        ],
        "the second page of Ops repeats the first's token: its items are kept, the listing stops"
    );
    // URLs and edit times come from the metas, over the listing's.
    let design = &nodes[1];
    assert_eq!(
        design.url.as_deref(),
        Some("https://acme.feishu.cn/docx/doxcnDesign")
    );
    assert_eq!(design.edited_at, Some(at(1_733_300_000)));
    assert_eq!(adapter.stats().repeated_page_tokens(), 1);

    // One level per call: the root of each space, then each parent with
    // children, each page after the first with its page token.
    let calls: Vec<(Option<String>, Option<String>)> = setup
        .fake
        .journal
        .seen("/open-apis/wiki/v2/spaces/7001/nodes")
        .into_iter()
        .map(|seen| {
            (
                seen.query.get("parent_node_token").cloned(),
                seen.query.get("page_token").cloned(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (None, None),
            (None, Some("p1".into())),
            (Some("wikcnDesign".into()), None),
        ]
    );
    assert_eq!(
        setup
            .fake
            .journal
            .seen("/open-apis/wiki/v2/spaces/7002/nodes")
            .len(),
        2
    );
    let spaces = setup.fake.journal.seen("/open-apis/wiki/v2/spaces");
    assert_eq!(spaces.len(), 2, "the space list is paginated too");
    assert!(
        spaces
            .iter()
            .all(|seen| seen.query.get("page_size").map(String::as_str) == Some("50"))
    );
    let metas = setup
        .fake
        .journal
        .seen("/open-apis/drive/v1/metas/batch_query");
    assert_eq!(metas.len(), 1);
    let asked: Vec<(&str, &str)> = metas[0].body["request_docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|doc| {
            (
                doc["doc_token"].as_str().unwrap(),
                doc["doc_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            ("doxcnDesign", "docx"),
            ("shtcnBudget", "sheet"),
            ("doxcnApi", "docx"),
            ("doxcnRun", "docx"),
            ("doxcnNext", "docx"),
        ],
        "spaces are not drive objects"
    );
    assert_eq!(
        adapter.stats().token_fetches(),
        1,
        "one token for the whole listing"
    );

    // Configured spaces are looked up by id, not listed.
    let mut config = setup.config(APP_SECRET);
    config.wiki_spaces = Some(vec!["7001".into()]);
    let nodes = setup.adapter_with(config).enumerate().await.unwrap();
    assert_eq!(nodes.len(), 4);
    assert_eq!(
        setup
            .fake
            .journal
            .seen("/open-apis/wiki/v2/spaces/7001")
            .len(),
        1
    );
}

#[tokio::test]
async fn drive_folders_are_listed_recursively_and_metas_go_in_batches_of_200() {
    let mut fake = Fake {
        page_size: 100,
        ..Fake::default()
    };
    let mut files: Vec<Value> = (0..250)
        .map(|i| {
            json!({"token": format!("doxcnF{i:03}"), "name": format!("Doc {i}"), "type": "docx",
            "parent_token": "fldRoot", "url": format!("https://acme.feishu.cn/docx/doxcnF{i:03}"),
            "created_time": "1733000000", "modified_time": "1733000000", "owner_id": "ou_1"})
        })
        .collect();
    files.push(
        json!({"token": "fldSub", "name": "Archive", "type": "folder", "parent_token": "fldRoot",
        "url": "https://acme.feishu.cn/drive/folder/fldSub"}),
    );
    fake.folders.insert("fldRoot".into(), files);
    fake.folders.insert(
        "fldSub".into(),
        vec![json!({"token": "bascnOld", "name": "Old table", "type": "bitable", "parent_token": "fldSub",
            "modified_time": "1733000001"})],
    );
    fake.metas.insert(
        "fldRoot".into(),
        (
            "Team drive".into(),
            "https://acme.feishu.cn/drive/folder/fldRoot".into(),
            "1733000000".into(),
        ),
    );
    let setup = serve(fake).await;
    let mut config = setup.config(APP_SECRET);
    config.wiki_spaces = Some(Vec::new());
    config.drive_folders = vec!["fldRoot".into()];
    let adapter = setup.adapter_with(config);
    let nodes = adapter.enumerate().await.unwrap();
    assert_eq!(nodes.len(), 1 + 250 + 1 + 1);
    assert_eq!(
        (nodes[0].id.as_str(), nodes[0].kind, nodes[0].title.as_str()),
        ("fldRoot", NodeKind::Folder, "Team drive"),
        "the folder's name comes from its metas"
    );
    let old = nodes.iter().find(|node| node.id == "bascnOld").unwrap();
    assert_eq!(
        (old.kind, old.parent_id.as_deref(), old.edited_at),
        (NodeKind::Bitable, Some("fldSub"), Some(at(1_733_000_001))),
        "a file without metas keeps its listing's data"
    );
    let listings: Vec<(String, Option<String>)> = setup
        .fake
        .journal
        .seen("/open-apis/drive/v1/files")
        .into_iter()
        .map(|seen| {
            (
                seen.query["folder_token"].clone(),
                seen.query.get("page_token").cloned(),
            )
        })
        .collect();
    assert_eq!(
        listings,
        [
            ("fldRoot".into(), None),
            ("fldRoot".into(), Some("p100".into())),
            ("fldRoot".into(), Some("p200".into())),
            ("fldSub".into(), None),
        ]
    );
    let batches: Vec<usize> = setup
        .fake
        .journal
        .seen("/open-apis/drive/v1/metas/batch_query")
        .iter()
        .map(|seen| seen.body["request_docs"].as_array().unwrap().len())
        .collect();
    assert_eq!(batches, [200, 53]);
    assert!(
        setup
            .fake
            .journal
            .seen("/open-apis/wiki/v2/spaces")
            .is_empty()
    );
}

fn simple_document(id: &str, title: &str, body: &str) -> Vec<Value> {
    vec![
        page_block(id, title, &["p1"]),
        text("p1", id, json!([run(body)])),
    ]
}

fn node(id: &str, kind: NodeKind, url: Option<&str>) -> RemoteNode {
    RemoteNode {
        id: id.into(),
        alt_id: None,
        kind,
        parent_id: None,
        title: "T".into(),
        edited_at: None,
        url: url.map(str::to_owned),
    }
}

#[tokio::test]
async fn an_expired_token_is_renewed_once_and_the_call_sent_again() {
    let mut fake = Fake {
        page_size: 100,
        ..Fake::default()
    };
    fake.documents
        .insert("doxcnA".into(), simple_document("doxcnA", "A", "hello"));
    let setup = serve(fake).await;
    let adapter = setup.adapter();
    let doc = adapter
        .fetch_markdown(&node("doxcnA", NodeKind::Docx, None))
        .await
        .unwrap();
    assert_eq!(doc.markdown, "# A\n\nhello\n");
    // Two hours later, mid-run: the token is refused (99991663).
    setup.fake.expire_tokens();
    let doc = adapter
        .fetch_markdown(&node("doxcnA", NodeKind::Docx, None))
        .await
        .unwrap();
    assert_eq!(doc.markdown, "# A\n\nhello\n");
    let blocks = setup
        .fake
        .journal
        .seen("/open-apis/docx/v1/documents/doxcnA/blocks");
    assert_eq!(blocks.len(), 3, "fetched, refused, sent again");
    assert!(blocks.iter().all(|seen| seen.query["page_size"] == "500"));
    assert_eq!(adapter.stats().token_fetches(), 2);
    let tokens = setup
        .fake
        .journal
        .seen("/open-apis/auth/v3/tenant_access_token/internal");
    assert_eq!(tokens.len(), 2);
    assert_eq!(
        tokens[1].body,
        json!({"app_id": APP_ID, "app_secret": APP_SECRET})
    );
    assert!(
        setup.waits().is_empty(),
        "a refused token is not a rate limit"
    );

    // A wrong secret is refused once, not retried: the run stops.
    let refused = setup
        .adapter_with(setup.config("wrong"))
        .fetch_markdown(&node("doxcnA", NodeKind::Docx, None))
        .await
        .unwrap_err();
    assert_eq!(refused, AdapterError::Unauthorized);
    assert_eq!(
        setup
            .fake
            .journal
            .seen("/open-apis/auth/v3/tenant_access_token/internal")
            .len(),
        3
    );
    // A document not shared with the app fails alone, typed.
    let forbidden = adapter
        .fetch_markdown(&node("doxcnHidden", NodeKind::Docx, None))
        .await
        .unwrap_err();
    assert_eq!(
        forbidden,
        AdapterError::Forbidden {
            id: "doxcnHidden".into()
        }
    );
    assert!(!forbidden.is_retryable());
}

#[tokio::test]
async fn a_token_about_to_expire_is_renewed_before_it_is_used() {
    let mut fake = Fake {
        page_size: 100,
        token_life: 120,
        ..Fake::default()
    };
    fake.documents
        .insert("doxcnA".into(), simple_document("doxcnA", "A", "hello"));
    let setup = serve(fake).await;
    let adapter = setup.adapter();
    for _ in 0..2 {
        let doc = adapter
            .fetch_markdown(&node("doxcnA", NodeKind::Docx, None))
            .await
            .unwrap();
        assert_eq!(doc.markdown, "# A\n\nhello\n");
    }
    // Two minutes left is inside the five-minute margin: a new token before
    // each call, and no call refused.
    assert_eq!(adapter.stats().token_fetches(), 2);
    assert_eq!(
        setup
            .fake
            .journal
            .seen("/open-apis/docx/v1/documents/doxcnA/blocks")
            .len(),
        2
    );
}

#[tokio::test]
async fn rate_limits_answered_with_http_400_wait_for_the_reset_header() {
    let mut fake = Fake {
        page_size: 1,
        ..Fake::default()
    };
    fake.documents
        .insert("doxcnB".into(), simple_document("doxcnB", "B", "paged"));
    let setup = serve(fake).await;
    let path = "/open-apis/docx/v1/documents/doxcnB/blocks";
    setup
        .fake
        .journal
        .script(path, vec![rate_limited("2"), rate_limited("3")]);
    let adapter = setup.adapter();
    let doc = adapter
        .fetch_markdown(&node("doxcnB", NodeKind::Docx, None))
        .await
        .unwrap();
    assert_eq!(doc.markdown, "# B\n\npaged\n");
    assert_eq!(
        setup.waits(),
        [Duration::from_secs(2), Duration::from_secs(3)],
        "x-ogw-ratelimit-reset says how long"
    );
    let pages: Vec<Option<String>> = setup
        .fake
        .journal
        .seen(path)
        .into_iter()
        .map(|seen| seen.query.get("page_token").cloned())
        .collect();
    assert_eq!(
        pages,
        [None, None, None, Some("p1".into())],
        "two refusals, then two pages"
    );
    assert_eq!(adapter.api_stats().retries(), 2);

    // Always limited: three retries, then a typed, retryable error.
    setup
        .fake
        .journal
        .script(path, (0..10).map(|_| rate_limited("1")).collect());
    let spent = adapter
        .fetch_markdown(&node("doxcnB", NodeKind::Docx, None))
        .await
        .unwrap_err();
    assert_eq!(
        spent,
        AdapterError::RateLimited {
            retry_after: Some(Duration::from_secs(1))
        }
    );
    assert!(spent.is_retryable());
    assert_eq!(setup.fake.journal.seen(path).len(), 4 + 4);
}

#[tokio::test]
async fn media_are_downloaded_from_the_api_with_the_tenant_token() {
    let mut fake = Fake {
        page_size: 100,
        ..Fake::default()
    };
    fake.media.insert("boxcnPic".into(), PNG.to_vec());
    let setup = serve(fake).await;
    let adapter = setup.adapter();
    let url = format!("{}open-apis/drive/v1/medias/boxcnPic/download", setup.base);
    let asset = AssetRef {
        remote_key: "boxcnPic".into(),
        download_url: url.clone(),
        body_url: Some(url),
        file_name: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("pic");
    let downloaded = adapter.download_asset(&asset, &dest).await.unwrap();
    assert_eq!(downloaded.bytes, PNG.len() as u64);
    assert_eq!(downloaded.content_type.as_deref(), Some("image/png"));
    assert_eq!(std::fs::read(&dest).unwrap(), PNG);
    assert_eq!(adapter.media_stats().requests(), 1);
    // The fake refuses a download without the tenant token: it was sent.
    assert_eq!(
        setup
            .fake
            .journal
            .seen("/open-apis/drive/v1/medias/boxcnPic/download")
            .len(),
        1
    );

    let missing = AssetRef {
        remote_key: "boxcnGone".into(),
        download_url: format!("{}open-apis/drive/v1/medias/boxcnGone/download", setup.base),
        body_url: None,
        file_name: None,
    };
    let error = adapter
        .download_asset(&missing, &dir.path().join("gone"))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        AdapterError::NotFound {
            id: "boxcnGone".into()
        }
    );
    assert!(!dir.path().join("gone").exists());
}

fn bitable_fields() -> Vec<Value> {
    vec![
        json!({"field_id": "fld1", "field_name": "Task", "type": 1, "is_primary": true}),
        json!({"field_id": "fld2", "field_name": "Points", "type": 2}),
    ]
}

fn records(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            json!({"record_id": format!("rec{i}"), "fields": {
            "Task": [{"type": "text", "text": format!("Task {i}")}], "Points": i}})
        })
        .collect()
}

/// A document with every live block: bitables small and large (and one not
/// shared), whiteboards with an image and with texts only.
fn rich_fake() -> Fake {
    let mut fake = Fake {
        page_size: 100,
        ..Fake::default()
    };
    let doc = "doxcnRich";
    fake.documents.insert(
        doc.into(),
        vec![
            page_block(doc, "Rich", &["small", "big", "hidden", "board1", "board2"]),
            json!({"block_id": "small", "block_type": 18, "parent_id": doc, "bitable": {"token": "bascnS_tblS", "view_type": 1}}),
            json!({"block_id": "big", "block_type": 18, "parent_id": doc, "bitable": {"token": "bascnL_tblL", "view_type": 1}}),
            json!({"block_id": "hidden", "block_type": 18, "parent_id": doc, "bitable": {"token": "bascnH_tblH", "view_type": 1}}),
            json!({"block_id": "board1", "block_type": 43, "parent_id": doc, "board": {"token": "bdImage"}}),
            json!({"block_id": "board2", "block_type": 43, "parent_id": doc, "board": {"token": "bdTexts"}}),
        ],
    );
    fake.bitables
        .insert("bascnS_tblS".into(), (bitable_fields(), records(2)));
    fake.bitables
        .insert("bascnL_tblL".into(), (bitable_fields(), records(3)));
    fake.boards
        .insert("bdImage".into(), (Some(PNG.to_vec()), vec![]));
    fake.boards.insert(
        "bdTexts".into(),
        (None, vec!["Client".into(), "Server".into()]),
    );
    fake
}

#[tokio::test]
async fn bitables_and_whiteboards_are_fetched_and_degraded_visibly() {
    let setup = serve(rich_fake()).await;
    let mut config = setup.config(APP_SECRET);
    config.bitable_inline_max_rows = 2;
    let adapter = setup.adapter_with(config);
    let url = "https://acme.feishu.cn/docx/doxcnRich";
    let doc = adapter
        .fetch_markdown(&node("doxcnRich", NodeKind::Docx, Some(url)))
        .await
        .unwrap();
    let kinds: Vec<(DegradationKind, &str)> = doc
        .degradations
        .iter()
        .map(|d| (d.kind, d.id.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (DegradationKind::BitableInline, "bascnS_tblS"),
            (DegradationKind::BitableOversize, "bascnL_tblL"),
            (DegradationKind::BitableFailed, "bascnH_tblH"),
            (DegradationKind::Whiteboard, "bdImage"),
            (DegradationKind::Whiteboard, "bdTexts"),
        ]
    );
    let body = doc.body.as_deref().unwrap();
    assert!(
        body.contains("| Task | Points |\n| --- | --- |\n| Task 0 | 0 |\n| Task 1 | 1 |"),
        "{body}"
    );
    assert!(body.contains("Bitable bascnL_tblL: 3 rows, over the inline limit of 2. Fields:\n\n- Task (text)\n- Points (number)"), "{body}");
    assert!(body.contains("[Open the bitable in Feishu](https://acme.feishu.cn/base/bascnH?table=tblH) <!-- opendoc:degraded kind=bitable_failed id=bascnH_tblH -->"), "{body}");
    assert!(body.contains("- Client\n- Server"), "{body}");
    // The raw Markdown has none of the live data: row edits never make the
    // document look changed.
    assert!(!doc.markdown.contains("Task 0") && !doc.markdown.contains("Client"));
    // The whiteboard image was downloaded once, while fetching, and the
    // engine's download is served from it.
    assert_eq!(doc.assets.len(), 1);
    let board = &doc.assets[0];
    assert!(
        board.remote_key.starts_with("board:bdImage:"),
        "keyed by the board and its bytes: {}",
        board.remote_key
    );
    assert!(body.contains(&format!("![whiteboard]({})", board.download_url)));
    let image_path = "/open-apis/board/v1/whiteboards/bdImage/download_as_image";
    assert_eq!(setup.fake.journal.seen(image_path).len(), 1);
    let dir = tempfile::tempdir().unwrap();
    adapter
        .download_asset(board, &dir.path().join("board"))
        .await
        .unwrap();
    assert_eq!(std::fs::read(dir.path().join("board")).unwrap(), PNG);
    assert_eq!(
        setup.fake.journal.seen(image_path).len(),
        1,
        "served from memory"
    );
    // Three records over a limit of two: the first page (limit + 1) is enough.
    let large = setup
        .fake
        .journal
        .seen("/open-apis/bitable/v1/apps/bascnL/tables/tblL/records");
    assert_eq!(large.len(), 1);
    assert_eq!(large[0].query["page_size"], "3");
}

struct FixedClock(DateTime<Utc>);

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// One space: Design (an image, a mention of API through its wiki token)
/// with API under it, and the Budget sheet.
fn design_wiki() -> Fake {
    let mut fake = wiki();
    fake.page_size = 100;
    fake.repeating = None;
    fake.wiki.remove("7002");
    fake.spaces.truncate(1);
    fake.documents.insert(
        "doxcnDesign".into(),
        vec![
            page_block("doxcnDesign", "Design", &["d1", "d2"]),
            text(
                "d1",
                "doxcnDesign",
                json!([run("See "), {"mention_doc": {"token": "wikcnApi", "obj_type": 16,
                    "url": "https%3A%2F%2Facme.feishu.cn%2Fwiki%2FwikcnApi", "title": "the API"}}, run(".")]),
            ),
            json!({"block_id": "d2", "block_type": 27, "parent_id": "doxcnDesign", "image": {"token": "boxcnArch", "width": 10, "height": 10}}),
        ],
    );
    fake.documents.insert(
        "doxcnApi".into(),
        simple_document("doxcnApi", "API", "Endpoints."),
    );
    fake.media.insert("boxcnArch".into(), PNG.to_vec());
    fake
}

async fn a_full_engine_run_mirrors_the_wiki_to_disk(backend: Backend) {
    let setup = serve(design_wiki()).await;
    let adapter = setup.adapter();

    let dir = tempfile::tempdir().unwrap();
    let database = TestDatabase::create(backend, dir.path()).await;
    let db = Database::connect(&database.url).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    let config = EngineConfig::new(dir.path().join("mirror"));
    let clock = FixedClock(at(1_733_400_000));
    let engine = Engine::new(&db, &config, &clock);
    let report = engine.sync_platform(&adapter, false).await.unwrap();
    engine.finalize_mirror().await.unwrap();
    assert_eq!(report.stats.mode, "full", "Feishu is always full");
    assert_eq!(report.stats.errors, 0, "{:?}", report.stats.failures);
    assert_eq!(report.stats.assets_downloaded, 1);
    assert_eq!(report.stats.degradations.get(DegradationKind::Sheet), 1);

    let files = files_under(&config.mirror_root);
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    let asset = paths
        .iter()
        .find(|path| path.starts_with("assets/") && path.ends_with(".png"))
        .copied()
        .unwrap_or_else(|| panic!("no asset in {paths:?}"));
    assert_eq!(files[asset], PNG);
    for expected in [
        "INDEX.md",
        "feishu/Engineering/Design/README.md",
        "feishu/Engineering/Design/API.md",
        "feishu/Engineering/Budget.md",
    ] {
        assert!(files.contains_key(expected), "{expected} not in {paths:?}");
    }
    let design = String::from_utf8(files["feishu/Engineering/Design/README.md"].clone()).unwrap();
    assert!(design.contains("id: doxcnDesign"), "{design}");
    assert!(
        design.contains("url: https://acme.feishu.cn/docx/doxcnDesign"),
        "{design}"
    );
    assert!(
        design.contains("# Design\n\nSee [the API](API.md)."),
        "the mention, through the wiki alias: {design}"
    );
    assert!(
        design.contains(&format!("![image](../../../{asset})")),
        "{design}"
    );
    let api = String::from_utf8(files["feishu/Engineering/Design/API.md"].clone()).unwrap();
    assert!(api.ends_with("# API\n\nEndpoints.\n"), "{api}");
    let budget = String::from_utf8(files["feishu/Engineering/Budget.md"].clone()).unwrap();
    assert!(
        budget.contains("Feishu spreadsheet: [Budget](https://acme.feishu.cn/docx/shtcnBudget) <!-- opendoc:degraded kind=sheet id=shtcnBudget -->"),
        "{budget}"
    );

    // A second run changes nothing on disk.
    let again = engine.sync_platform(&adapter, false).await.unwrap();
    assert_eq!(again.stats.documents_written, 0, "{:?}", again.stats);
    assert_eq!(files_under(&config.mirror_root), files);
}

/// The real binary with Feishu configured: the doctor's Feishu checks
/// pass, `trellis docs sync --platform feishu` mirrors the wiki, and
/// `resolve` finds a document by its wiki token (an alias).
async fn the_cli_syncs_feishu_and_its_doctor_checks_pass(backend: Backend) {
    let setup = serve(design_wiki()).await;
    let dir = tempfile::tempdir().unwrap();
    let database = TestDatabase::create(backend, dir.path()).await;
    let run = |args: &'static [&'static str]| {
        let mut command = trellis_command(dir.path(), &database.url);
        command
            .env("TRELLIS_FEISHU_APP_ID", APP_ID)
            .env("TRELLIS_FEISHU_APP_SECRET", APP_SECRET)
            .env("TRELLIS_FEISHU_API_URL", setup.base.as_str())
            .env("TRELLIS_FEISHU_QPS", "1000")
            .arg("docs")
            .args(args);
        async move {
            let output = command.output().await.unwrap();
            (
                output.status.code().unwrap(),
                String::from_utf8(output.stdout).unwrap(),
                String::from_utf8(output.stderr).unwrap(),
            )
        }
    };
    let (code, stdout, stderr) = run(&["doctor", "--json"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let feishu: Vec<(&str, &str)> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| check["code"].as_str().unwrap().starts_with('F'))
        .map(|check| {
            (
                check["code"].as_str().unwrap(),
                check["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        feishu,
        [
            ("F1", "ok"),
            ("F2", "ok"),
            ("F3", "ok"),
            ("F4", "ok"),
            ("F5", "ok")
        ],
        "{stdout}"
    );
    assert!(!stdout.contains(APP_SECRET) && !stderr.contains(APP_SECRET));

    let (code, stdout, stderr) = run(&["sync", "--platform", "feishu"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.starts_with("feishu: full run"), "{stdout}");
    assert!(!stdout.contains(APP_SECRET) && !stderr.contains(APP_SECRET));
    let api = dir.path().join("mirror/feishu/Engineering/Design/API.md");
    assert!(api.is_file());
    let (code, stdout, _) = run(&["resolve", "wikcnApi"]).await;
    assert_eq!(code, 0);
    assert_eq!(stdout.trim_end(), api.display().to_string());
}
