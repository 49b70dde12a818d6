//! The docs mirror end to end: the real server (and the real `trellis`
//! binary for the CLI) against the loopback fake of Notion's API from
//! `docs_notion`. `syncDocs` on `q:long` with its progress over WebSocket,
//! the views (`docTree`, `doc`, `docSyncRuns`, `docsDoctor`) agreeing with
//! the files on disk, members reading but not syncing, and the CLI's exit
//! codes.

use std::collections::HashMap;

use serde_json::{Value, json};
use trellis::jobs::outbox::{self, NewEvent};

use crate::{
    docs_notion::{CHILD, Fake, ROOT, ROW, SOURCE, Setup, TOKEN, serve, workspace},
    helpers::{AppOptions, Backend, TestApp, TestDatabase, spawn_app_with, trellis_command},
    jobs::task,
    on_both_backends,
    websocket::{next, subscribe},
};

on_both_backends!(
    a_sync_mirrors_notion_with_live_progress_and_views_that_agree_with_the_files,
    the_cli_syncs_reports_resolves_and_exits_as_documented,
    a_sync_killed_mid_run_leaves_whole_files_and_the_next_run_completes,
    admins_store_settings_sealed_and_the_next_sync_uses_them,
    a_stored_interval_schedules_syncs_without_a_restart,
    members_read_the_mirrors_files_and_nothing_else,
);

const SYNC: &str = "mutation($p: DocsPlatform, $f: Boolean) { syncDocs(platform: $p, full: $f) { id kind queue status } }";
const PROGRESS: &str =
    "subscription { docsSyncProgress { platform phase done total requests waits errors failed } }";
const TREE: &str = "query($p: DocsPlatform!, $path: String) { docTree(platform: $p, path: $path) { path folder id title kind status } }";
const DOC: &str = "query($id: String, $path: String) { doc(id: $id, path: $path) { id platform kind title url path status parent markdown properties { name value } backlinks { id path } degradations { kind } } }";
const SEARCH: &str = "query($q: String!) { searchDocs(query: $q) { edges { node { id title path kind snippet rank } } } }";
const RUNS: &str = "{ docSyncRuns(first: 10) { totalCount edges { node { id platform mode reason status stats changes { added updated moved trashed } error } } } }";
const DOCTOR: &str = "{ docsDoctor { ok configured checks { code status message } } }";

/// The fake workspace: Root (with Child and the Tasks database, whose one
/// row is Row), each page with a body; Child links to Root.
async fn notion() -> Setup {
    serve(workspace_fake()).await
}

fn workspace_fake() -> Fake {
    let markdown = HashMap::from([
        (ROOT.to_owned(), ("# Root\n\nThe top.\n".to_owned(), false, vec![])),
        (
            CHILD.to_owned(),
            (
                "# Child\n\nUp to [Root](https://www.notion.so/Root-11111111111111111111111111111111).\n\n设计文档 <b>bold</b> & more.\n"
                    .to_owned(),
                false,
                vec![],
            ),
        ),
        (ROW.to_owned(), ("Row body\n".to_owned(), false, vec![])),
    ]);
    let rows = vec![json!({
        "object": "page", "id": ROW, "in_trash": false,
        "parent": {"type": "data_source_id", "data_source_id": SOURCE},
        "properties": {
            "Name": {"id": "title", "type": "title", "title": [{"plain_text": "Row"}]},
            "Points": {"id": "p", "type": "number", "number": 3},
        },
    })];
    Fake {
        objects: workspace(),
        markdown,
        rows: HashMap::from([(SOURCE.to_owned(), rows)]),
        page_size: 2,
        ..Fake::default()
    }
}

fn configured(setup: &Setup) -> Vec<(&'static str, String)> {
    vec![
        ("TRELLIS_NOTION_TOKEN", TOKEN.to_owned()),
        ("TRELLIS_NOTION_API_URL", setup.base.to_string()),
        ("TRELLIS_NOTION_QPS", "1000".to_owned()),
        ("TRELLIS_DOCS_SYNC_INTERVAL", "0".to_owned()),
    ]
}

/// The fake workspace and a server configured for it (no schedule).
async fn configured_app(backend: Backend) -> (Setup, TestApp) {
    let setup = notion().await;
    let mut options = AppOptions::default();
    for (key, value) in configured(&setup) {
        options = options.env(key, &value);
    }
    let app = spawn_app_with(backend, options).await;
    (setup, app)
}

/// Two fields of each object of a list.
fn pairs(list: &Value, a: &str, b: &str) -> Vec<(Value, Value)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry[a].clone(), entry[b].clone()))
        .collect()
}

/// Runs `syncDocs` as `token` and follows the task to its end over
/// WebSocket; the finished task.
async fn sync(app: &TestApp, token: &str, variables: Value) -> Value {
    let response = app.gql(SYNC, variables).bearer(token).send().await;
    let queued = &response.data()["syncDocs"];
    assert_eq!(queued["kind"], "docs.sync");
    assert_eq!(queued["queue"], "LONG");
    let id = queued["id"].as_str().unwrap().to_owned();
    let mut socket = subscribe(
        app,
        token,
        "t",
        "subscription($id: ID!) { taskUpdated(id: $id) { status } }",
        json!({ "id": id }),
    )
    .await;
    while let Some(message) = next(&mut socket).await {
        if message["type"] == "complete" {
            break;
        }
    }
    task(app, token, &id).await
}

async fn a_sync_mirrors_notion_with_live_progress_and_views_that_agree_with_the_files(
    backend: Backend,
) {
    let (_workspace, app) = configured_app(backend).await;
    let admin = app.admin().await;
    let member = app.member("reader").await;

    // Members read; only admins sync and run the doctor.
    let refused = app
        .gql(SYNC, json!({"p": "NOTION"}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));
    let refused = app
        .gql(DOCTOR, json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));

    // A member follows the progress; the subscription is live once an
    // event written after it arrives.
    let mut progress = subscribe(&app, &member.access, "p", PROGRESS, json!({})).await;
    let db = app.database().await;
    let ready = json!({"platform": "feishu", "phase": "listing", "done": 0, "total": 0,
                       "requests": 0, "waits": 0, "errors": 0, "failed": false});
    outbox::emit(
        &db,
        vec![NewEvent {
            topic: "docs.sync.progress",
            aggregate_id: "feishu".into(),
            owner_id: None,
            payload: ready,
        }],
    )
    .await
    .unwrap();
    loop {
        let message = next(&mut progress).await.unwrap();
        if message["payload"]["data"]["docsSyncProgress"]["platform"] == "FEISHU" {
            break;
        }
    }

    let first = sync(&app, &admin.access, json!({"p": "NOTION"})).await;
    assert_eq!(first["status"], "SUCCEEDED", "{first}");
    let result = &first["result"]["platforms"];
    assert_eq!(result.as_array().unwrap().len(), 1, "only Notion was asked");
    assert_eq!(result[0]["platform"], "notion");
    assert_eq!(result[0]["outcome"], "succeeded");
    assert_eq!(result[0]["stats"]["mode"], "full");
    assert_eq!(result[0]["stats"]["documents_written"], 4);

    // The progress ends with Notion's run finished: every node done.
    let mut phases = Vec::new();
    let last = loop {
        let message = next(&mut progress).await.unwrap();
        let step = message["payload"]["data"]["docsSyncProgress"].clone();
        phases.push(step["phase"].as_str().unwrap().to_owned());
        if step["phase"] == "FINISHED" {
            break step;
        }
    };
    assert_eq!(last["platform"], "NOTION");
    assert_eq!(
        (last["done"].as_u64(), last["total"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(last["failed"], false);
    assert_eq!(last["errors"], 0);
    // listing, search pages, one markdown per page, one query.
    assert!(last["requests"].as_u64().unwrap() >= 6, "{last}");
    assert_eq!(
        phases.first().map(String::as_str),
        Some("LISTING"),
        "{phases:?}"
    );

    // The tree on disk and the views agree.
    let mirror = app.data_dir().join("mirror");
    for file in [
        "notion/Root/README.md",
        "notion/Root/Child.md",
        "notion/Root/Tasks/_index.md",
        "notion/Root/Tasks/Row.md",
        "INDEX.md",
    ] {
        assert!(mirror.join(file).is_file(), "{file} is on disk");
    }
    let root = app
        .gql(TREE, json!({"p": "NOTION"}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(
        root.data()["docTree"],
        json!([{"path": "notion/Root", "folder": true, "id": ROOT, "title": "Root", "kind": "page", "status": "active"}])
    );
    let inside = app
        .gql(TREE, json!({"p": "NOTION", "path": "notion/Root"}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(
        pairs(&inside.data()["docTree"], "path", "folder"),
        [
            (json!("notion/Root/Tasks"), json!(true)),
            (json!("notion/Root/Child.md"), json!(false))
        ]
    );
    let climbing = app
        .gql(TREE, json!({"p": "NOTION", "path": "notion/../.."}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(climbing.error_code(), Some("BAD_USER_INPUT"));

    let by_path = app
        .gql(DOC, json!({"path": "notion/Root"}))
        .bearer(&member.access)
        .send()
        .await;
    let doc = &by_path.data()["doc"];
    assert_eq!(doc["id"], ROOT);
    assert_eq!(doc["platform"], "NOTION");
    assert_eq!(doc["path"], "notion/Root/README.md");
    let on_disk = std::fs::read_to_string(mirror.join("notion/Root/README.md")).unwrap();
    let body = doc["markdown"].as_str().unwrap();
    assert!(
        on_disk.ends_with(body),
        "the body is the file's after the frontmatter"
    );
    assert!(body.contains("The top."));
    assert_eq!(
        doc["backlinks"],
        json!([{"id": CHILD, "path": "notion/Root/Child.md"}]),
        "Child links to Root"
    );
    // By the undashed id of a URL, as links carry it.
    let by_url = app
        .gql(
            DOC,
            json!({"id": "https://www.notion.so/Row-55555555555555555555555555555555"}),
        )
        .bearer(&member.access)
        .send()
        .await;
    let row = &by_url.data()["doc"];
    assert_eq!(row["id"], ROW);
    assert_eq!(row["parent"], SOURCE);
    assert!(
        row["properties"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "Points", "value": "3"})),
        "{row}"
    );
    // Full-text search: titles, bodies, properties, CJK; snippets escaped
    // and marked.
    let search = |query: &'static str| {
        let app = &app;
        let token = member.access.clone();
        async move {
            app.gql(SEARCH, json!({"q": query}))
                .bearer(&token)
                .send()
                .await
                .data()["searchDocs"]
                .clone()
        }
    };
    let found = search("top").await;
    assert_eq!(found["edges"][0]["node"]["id"], ROOT, "{found}");
    assert_eq!(found["edges"][0]["node"]["path"], "notion/Root/README.md");
    assert!(
        found["edges"][0]["node"]["snippet"]
            .as_str()
            .unwrap()
            .contains("<mark>top</mark>"),
        "{found}"
    );
    let cjk = search("文档").await;
    let hit = &cjk["edges"][0]["node"];
    assert_eq!(hit["id"], CHILD, "{cjk}");
    let snippet = hit["snippet"].as_str().unwrap();
    assert!(snippet.contains("设计<mark>文档</mark>"), "{snippet}");
    // Nothing of the document's markup gets through unescaped.
    let unmarked = snippet.replace("<mark>", "").replace("</mark>", "");
    assert!(
        !unmarked.contains('<') && unmarked.contains("&amp; more"),
        "{snippet}"
    );
    // A row's property, and its database's table that shows it.
    let property = search("points").await;
    let mut ids: Vec<&str> = property["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| edge["node"]["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [SOURCE, ROW], "{property}");
    assert_eq!(search("zzzunmatched").await["edges"], json!([]));
    // "root": Root's title (first: titles weigh more), Child's link.
    const PAGE: &str = "query($a: String) { searchDocs(query: \"root\", first: 1, after: $a) { pageInfo { hasNextPage endCursor } edges { node { id } } } }";
    let first = app.gql(PAGE, json!({})).bearer(&member.access).send().await;
    let first = &first.data()["searchDocs"];
    assert_eq!(first["edges"], json!([{"node": {"id": ROOT}}]));
    assert_eq!(first["pageInfo"]["hasNextPage"], true);
    let second = app
        .gql(PAGE, json!({"a": first["pageInfo"]["endCursor"]}))
        .bearer(&member.access)
        .send()
        .await;
    let second = &second.data()["searchDocs"];
    assert_eq!(second["edges"], json!([{"node": {"id": CHILD}}]));
    assert_eq!(second["pageInfo"]["hasNextPage"], false);
    let missing = app
        .gql(DOC, json!({"id": "nothing-here"}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(missing.data()["doc"], Value::Null);

    // A second sync is incremental: only what changed since the
    // checkpoint is listed, nothing is rewritten.
    let second = sync(&app, &admin.access, json!({})).await;
    assert_eq!(second["status"], "SUCCEEDED", "{second}");
    let runs = app.gql(RUNS, json!({})).bearer(&member.access).send().await;
    let runs = &runs.data()["docSyncRuns"];
    assert_eq!(runs["totalCount"], 2);
    let newest = &runs["edges"][0]["node"];
    let oldest = &runs["edges"][1]["node"];
    assert_eq!(newest["mode"], "incremental", "{newest}");
    assert_eq!(newest["status"], "succeeded");
    assert_eq!(newest["changes"]["updated"], json!([]));
    assert_eq!(oldest["mode"], "full");
    let mut added: Vec<&str> = oldest["changes"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    added.sort();
    let mut expected = vec![ROOT, CHILD, SOURCE, ROW];
    expected.sort();
    assert_eq!(added, expected);
    // The unconfigured platform was skipped, not failed.
    assert_eq!(second["result"]["platforms"][1]["platform"], "feishu");
    assert_eq!(second["result"]["platforms"][1]["outcome"], "skipped");

    let doctor = || async {
        app.gql(DOCTOR, json!({}))
            .bearer(&admin.access)
            .send()
            .await
            .data()["docsDoctor"]
            .clone()
    };
    let report = doctor().await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["configured"], true);
    let statuses: Vec<(Value, Value)> = pairs(&report["checks"], "code", "status");
    assert_eq!(
        statuses,
        [
            (json!("G0"), json!("OK")),
            (json!("G1"), json!("OK")),
            (json!("G2"), json!("OK")),
            (json!("N1"), json!("OK")),
            (json!("N2"), json!("OK")),
            (json!("N3"), json!("OK")),
            (json!("F1"), json!("SKIPPED")),
            (json!("F2"), json!("SKIPPED")),
            (json!("F3"), json!("SKIPPED")),
            (json!("F4"), json!("SKIPPED")),
            (json!("F5"), json!("SKIPPED")),
        ]
    );
    // A file deleted behind the mirror's back is what G2 reports.
    std::fs::remove_file(mirror.join("notion/Root/Child.md")).unwrap();
    let report = doctor().await;
    assert_eq!(report["ok"], false);
    assert_eq!(report["checks"][2]["status"], "FAILED");
    assert!(
        report["checks"][2]["message"]
            .as_str()
            .unwrap()
            .contains("notion/Root/Child.md")
    );
}

/// One `trellis docs …` run: its exit code, stdout and stderr.
async fn docs(
    dir: &std::path::Path,
    database: &TestDatabase,
    env: &[(&str, String)],
    args: &[&str],
) -> (i32, String, String) {
    let mut command = trellis_command(dir, &database.url);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.arg("docs").args(args).output().await.unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

async fn the_cli_syncs_reports_resolves_and_exits_as_documented(backend: Backend) {
    let setup = notion().await;
    let dir = tempfile::tempdir().unwrap();
    let database = TestDatabase::create(backend, dir.path()).await;
    let env = configured(&setup);

    // Nothing configured: 3, the doctor's whole report first.
    let (code, _, stderr) = docs(dir.path(), &database, &[], &["sync"]).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("TRELLIS_NOTION_TOKEN"));
    let (code, stdout, _) = docs(dir.path(), &database, &[], &["doctor"]).await;
    assert_eq!(code, 3);
    for code in ["G0", "G1", "G2", "N1", "F1"] {
        assert!(stdout.contains(code), "{code} in {stdout}");
    }
    let (code, _, _) = docs(dir.path(), &database, &[], &["status"]).await;
    assert_eq!(code, 3);
    // Usage: 2.
    let (code, _, _) = docs(dir.path(), &database, &env, &["sync", "--platform", "wiki"]).await;
    assert_eq!(code, 2);
    let (code, _, _) = docs(dir.path(), &database, &env, &["resolve"]).await;
    assert_eq!(code, 2);

    // A sync in the foreground: progress on stderr, one line on stdout.
    let (code, stdout, stderr) = docs(dir.path(), &database, &env, &["sync", "--full"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("notion: full run, 4 listed, 3 fetched, 4 written"),
        "{stdout}"
    );
    assert!(
        stdout.contains("feishu: skipped (not configured)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("notion: Finished 4/4 documents"),
        "{stderr}"
    );
    assert!(dir.path().join("mirror/notion/Root/Child.md").is_file());

    let (code, stdout, _) = docs(dir.path(), &database, &env, &["status"]).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains("notion: configured, 4 documents, last run #1 full succeeded"),
        "{stdout}"
    );
    assert!(
        stdout.contains("feishu: not configured, 0 documents, never synced"),
        "{stdout}"
    );

    // resolve: 0 found (by id, undashed id, URL, path), 1 not found.
    let child = dir.path().join("mirror/notion/Root/Child.md");
    for target in [
        CHILD.to_owned(),
        CHILD.replace('-', ""),
        "https://www.notion.so/Child-22222222222222222222222222222222".to_owned(),
        "notion/Root/Child.md".to_owned(),
    ] {
        let (code, stdout, stderr) = docs(dir.path(), &database, &env, &["resolve", &target]).await;
        assert_eq!(code, 0, "{target}: {stderr}");
        assert_eq!(stdout.trim_end(), child.display().to_string());
    }
    let (code, stdout, _) = docs(dir.path(), &database, &env, &["resolve", "notion/Nope.md"]).await;
    assert_eq!((code, stdout.as_str()), (1, ""));

    let (code, stdout, _) = docs(dir.path(), &database, &env, &["doctor", "--json"]).await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["configured"], true);
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|check| check["code"] == "N2" && check["status"] == "ok")
    );

    // A refused token: the platform's run fails, exit 1.
    let mut refused = env.clone();
    refused[0].1 = "ntn_revoked".to_owned();
    let (code, stdout, _) = docs(dir.path(), &database, &refused, &["sync"]).await;
    assert_eq!(code, 1);
    assert!(stdout.starts_with("notion: failed"), "{stdout}");
    let (code, stdout, _) = docs(dir.path(), &database, &refused, &["doctor"]).await;
    assert_eq!(code, 1);
    assert!(stdout.contains("N2 FAIL"), "{stdout}");
}

/// The same workspace, every page edited since (a later edit time, a new
/// last line in each body).
fn edited_fake() -> Fake {
    let mut fake = workspace_fake();
    for object in &mut fake.objects {
        object["last_edited_time"] = json!("2026-12-02T08:00:00.000Z");
    }
    for (markdown, _, _) in fake.markdown.values_mut() {
        markdown.push_str("\nEdited.\n");
    }
    fake
}

/// Every Markdown file of the mirror: path → text.
fn markdown_files(root: &std::path::Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                found.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    found.sort();
    found
}

/// A `trellis docs sync --full` SIGKILLed while it waits on Row (after it
/// wrote Root and Child anew): every file is whole — old or new, no
/// temporary file left — and the next run closes the killed run as
/// `interrupted` and completes.
async fn a_sync_killed_mid_run_leaves_whole_files_and_the_next_run_completes(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let database = TestDatabase::create(backend, dir.path()).await;
    let env_for = |setup: &Setup| configured(setup);
    let first = notion().await;
    let (code, stdout, stderr) = docs(dir.path(), &database, &env_for(&first), &["sync"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");

    let mut held = edited_fake();
    held.hold = Some(format!("/v1/pages/{ROW}/markdown"));
    let held = serve(held).await;
    let mut command = trellis_command(dir.path(), &database.url);
    for (key, value) in env_for(&held) {
        command.env(key, value);
    }
    let mut child = command
        .args(["docs", "sync", "--full"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        held.fake.held.notified(),
    )
    .await
    .expect("the sync reaches Row");
    child.kill().await.unwrap();

    let mirror = dir.path().join("mirror");
    let files = markdown_files(&mirror);
    assert!(
        files.iter().all(|(path, _)| !path.ends_with(".tmp")),
        "{files:?}"
    );
    let text = |path: &str| {
        files
            .iter()
            .find(|(name, _)| name == path)
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| panic!("{path} in {files:?}"))
    };
    for path in ["notion/Root/README.md", "notion/Root/Child.md"] {
        let new = text(path);
        assert!(
            new.starts_with("---\nid: ") && new.ends_with("Edited.\n"),
            "{path}: {new}"
        );
    }
    let old = text("notion/Root/Tasks/Row.md");
    assert!(
        old.starts_with("---\nid: ") && old.ends_with("Row body\n"),
        "{old}"
    );

    let resumed = serve(edited_fake()).await;
    let (code, stdout, stderr) = docs(dir.path(), &database, &env_for(&resumed), &["sync"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(text_of(&mirror, "notion/Root/Tasks/Row.md").ends_with("Edited.\n"));
    let (_, status, _) = docs(dir.path(), &database, &env_for(&resumed), &["status"]).await;
    assert!(
        status.contains("last run #3 ") && status.contains(" succeeded at "),
        "{status}"
    );
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    use sea_orm::{EntityTrait, QueryOrder};
    let runs = entity::docs_sync_run::Entity::find()
        .order_by_asc(entity::docs_sync_run::Column::Id)
        .all(&db)
        .await
        .unwrap();
    let statuses: Vec<&str> = runs.iter().map(|run| run.status.as_str()).collect();
    assert_eq!(statuses, ["succeeded", "interrupted", "succeeded"]);
}

fn text_of(root: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap()
}

const UPDATE: &str = "mutation($i: DocsSettingsInput!) { updateDocsSettings(input: $i) { notionConfigured notionApiUrl notionQps trashKeepDays } }";

/// `updateDocsSettings`: an invalid value is refused naming it and stores
/// nothing; the token is stored sealed (not in the database's text, never
/// in an answer) and the next sync uses it; `null` falls back to the
/// environment (here: no token). Members are refused.
async fn admins_store_settings_sealed_and_the_next_sync_uses_them(backend: Backend) {
    let setup = notion().await;
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_DOCS_SYNC_INTERVAL", "0"),
    )
    .await;
    let admin = app.admin().await;
    let member = app.member("reader").await;
    let token_input = json!({"i": {"notionToken": TOKEN, "notionApiUrl": setup.base.as_str(), "notionQps": 1000}});

    let refused = app
        .gql(UPDATE, token_input.clone())
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));
    let invalid = app
        .gql(UPDATE, json!({"i": {"notionToken": TOKEN, "notionQps": 0}}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(invalid.error_code(), Some("BAD_USER_INPUT"));
    assert!(
        format!("{:?}", invalid).contains("notion_qps"),
        "{invalid:?}"
    );

    let stored = app
        .gql(UPDATE, token_input)
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        stored.data()["updateDocsSettings"],
        json!({"notionConfigured": true, "notionApiUrl": setup.base.as_str(), "notionQps": 1000, "trashKeepDays": 30})
    );
    let db = app.database().await;
    use sea_orm::EntityTrait;
    let rows = entity::docs_setting::Entity::find().all(&db).await.unwrap();
    let token_row = rows.iter().find(|row| row.key == "notion_token").unwrap();
    assert!(token_row.sealed);
    assert!(!token_row.value.contains(TOKEN), "sealed at rest");
    assert_eq!(rows.len(), 3, "the refused update stored nothing");

    let task = sync(&app, &admin.access, json!({"p": "NOTION"})).await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    assert_eq!(task["result"]["platforms"][0]["outcome"], "succeeded");
    assert!(!task.to_string().contains(TOKEN));

    let cleared = app
        .gql(UPDATE, json!({"i": {"notionToken": null}}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        cleared.data()["updateDocsSettings"]["notionConfigured"],
        false
    );
    let skipped = sync(&app, &admin.access, json!({"p": "NOTION"})).await;
    assert_eq!(skipped["result"]["platforms"][0]["outcome"], "skipped");
}

/// The schedule follows `syncIntervalSeconds` stored over GraphQL at once:
/// with the environment's interval at 0 nothing syncs by itself; after an
/// admin stores one, scheduled syncs run without a restart.
async fn a_stored_interval_schedules_syncs_without_a_restart(backend: Backend) {
    let (_workspace, app) = configured_app(backend).await;
    let admin = app.admin().await;
    let runs = || async {
        app.gql(RUNS, json!({}))
            .bearer(&admin.access)
            .send()
            .await
            .data()["docSyncRuns"]
            .clone()
    };
    assert_eq!(runs().await["totalCount"], 0);

    let stored = app
        .gql(
            "mutation { updateDocsSettings(input: { syncIntervalSeconds: 1 }) { syncIntervalSeconds } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        stored.data()["updateDocsSettings"]["syncIntervalSeconds"],
        1
    );
    // Bounded: the schedule is looked at every 15 s.
    let mut seen = Value::Null;
    for _ in 0..600 {
        seen = runs().await;
        let finished = seen["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|edge| edge["node"]["status"] == "succeeded");
        if finished {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let first = &seen["edges"][0]["node"];
    assert_eq!(first["status"], "succeeded", "{seen}");
    assert_eq!(first["platform"], "NOTION");
}

/// `GET /mirror/assets/…`: a pool file for a signed-in member (cookie or
/// bearer), streamed whole with its type and immutable caching; signed
/// out 401; a name not of the pool's form, or missing, 404.
async fn members_read_the_mirrors_files_and_nothing_else(backend: Backend) {
    let (_setup, app) = configured_app(backend).await;
    let member = app.member("reader").await;
    // 200 kB of bytes no earlier chunk repeats, so a short or reordered
    // stream shows.
    let bytes: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let sha = trellis::digest::sha256_hex_bytes(&bytes);
    let bucket = app.data_dir().join("mirror/assets").join(&sha[..2]);
    std::fs::create_dir_all(&bucket).unwrap();
    std::fs::write(bucket.join(format!("{sha}.png")), &bytes).unwrap();
    std::fs::write(app.data_dir().join("mirror/INDEX.md"), "secret").unwrap();
    let url = app.url(&format!("/mirror/assets/{}/{sha}.png", &sha[..2]));

    let by_cookie = app
        .client
        .get(&url)
        .header("cookie", &member.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(by_cookie.status(), 200);
    let headers = by_cookie.headers().clone();
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["etag"], format!("\"{sha}\"").as_str());
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    assert_eq!(by_cookie.bytes().await.unwrap().as_ref(), bytes.as_slice());
    let by_bearer = app
        .client
        .get(&url)
        .bearer_auth(&member.access)
        .header("if-none-match", format!("\"{sha}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(by_bearer.status(), 304);

    let signed_out = app.client.get(&url).send().await.unwrap();
    assert_eq!(signed_out.status(), 401);
    for path in [
        format!("/mirror/assets/{}/{sha}.jpg", &sha[..2]),
        format!("/mirror/assets/00/{sha}.png"),
        "/mirror/assets/..%2F/INDEX.md".to_owned(),
        "/mirror/assets/IN/INDEX.md".to_owned(),
    ] {
        let response = app
            .client
            .get(app.url(&path))
            .bearer_auth(&member.access)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert!(!response.text().await.unwrap().contains("secret"));
    }
}
