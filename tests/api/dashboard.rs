//! What the web client's pages read beyond the domains' first API: a
//! node's child count and worst child before it is expanded, children
//! worst first / filtered / paged, the status scale, each queue's load,
//! a task's total stages, and items oldest first.

use serde_json::{Value, json};

use crate::{
    feeds::{Reader, app as feeds_app},
    feedserver::{FeedServer, Route, rss2},
    helpers::{AppOptions, Backend, spawn_app, spawn_app_with},
    jobs::wait_terminal,
    on_both_backends,
};

on_both_backends!(
    children_come_counted_worst_first_filtered_and_paged,
    the_status_scale_names_each_value,
    queue_stats_count_waiting_and_running_work_per_audience,
    tasks_say_how_many_stages_they_run,
    items_come_oldest_first_on_request,
);

async fn children_come_counted_worst_first_filtered_and_paged(backend: Backend) {
    let app = spawn_app(backend).await;
    let token = app.member("ops").await.access;
    let data = |query: &'static str, variables: Value| {
        let token = token.clone();
        let app = &app;
        async move { app.gql(query, variables).bearer(&token).send().await }
    };
    // Five instances of one service; their health is their status.
    let healths = [0, 2, 1, 3, 0];
    for (n, health) in healths.iter().enumerate() {
        let attributes = json!({
            "region": "eu", "zone": "a", "cluster": "k1", "namespace": "shop",
            "service": "cart", "instance": format!("i{n}"), "health": health,
        });
        let created = data(
            "mutation($a: JSON!, $k: String!) { createResource(attributes: $a, idempotencyKey: $k) { id } }",
            json!({ "a": attributes, "k": format!("create-{n}") }),
        )
        .await;
        let id = created.data()["createResource"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let task = wait_terminal(&app, &token, &id).await;
        assert_eq!(task["status"], "SUCCEEDED", "{task}");
    }
    let service = data(
        "{ nodes(filter: { class: \"service\" }) { nodes { id childCount worstChildStatus } } }",
        json!({}),
    )
    .await;
    let service = service.data()["nodes"]["nodes"][0].clone();
    assert_eq!(service["childCount"], 5);
    assert_eq!(service["worstChildStatus"], 3);
    let service_id = service["id"].as_str().unwrap().to_owned();

    // The oracle: healths sorted worst first; ties by creation (id) order.
    let mut expected: Vec<(i64, String)> = healths
        .iter()
        .enumerate()
        .map(|(n, health)| (*health, format!("i{n}")))
        .collect();
    expected.sort_by_key(|entry| std::cmp::Reverse(entry.0));

    const PAGE: &str = "query($id: ID!, $after: ID, $min: Int, $order: ChildOrder! = ID) { node(id: $id) { \
        children(first: 2, after: $after, minAggregatedStatus: $min, order: $order) { \
        id positionToken aggregatedStatus childCount worstChildStatus } } }";
    let mut seen = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = data(
            PAGE,
            json!({ "id": service_id, "after": after, "order": "WORST_FIRST" }),
        )
        .await;
        let children = page.data()["node"]["children"].as_array().unwrap().clone();
        if children.is_empty() {
            break;
        }
        assert!(children.len() <= 2);
        for child in &children {
            assert_eq!(child["childCount"], 0, "instances are leaves");
            assert!(child["worstChildStatus"].is_null());
            seen.push((
                child["aggregatedStatus"].as_i64().unwrap(),
                child["positionToken"].as_str().unwrap().to_owned(),
            ));
        }
        after = children.last().unwrap()["id"].clone();
    }
    assert_eq!(seen, expected, "worst first, paged without gaps or repeats");

    let problems = data(
        PAGE.replace("first: 2", "first: 10").leak(),
        json!({ "id": service_id, "min": 1 }),
    )
    .await;
    let tokens: Vec<&str> = problems.data()["node"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|child| child["positionToken"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, ["i1", "i2", "i3"], "status ≥ 1, in id order");

    // `after` must be a child of this node.
    let stranger = data(PAGE, json!({ "id": service_id, "after": service_id })).await;
    assert_eq!(stranger.error_code(), Some("NOT_FOUND"));
}

async fn the_status_scale_names_each_value(backend: Backend) {
    let app = spawn_app(backend).await;
    let token = app.member("ops").await.access;
    let response = app
        .gql("{ nodeConfig { statusScale { value label } } }", json!({}))
        .bearer(&token)
        .send()
        .await;
    assert_eq!(
        response.data()["nodeConfig"]["statusScale"],
        json!([
            { "value": 0, "label": "healthy" },
            { "value": 1, "label": "degraded" },
            { "value": 2, "label": "failing" },
            { "value": 3, "label": "down" },
        ])
    );
}

const STATS: &str = "{ queueStats { queue queued delayed running } }";

fn stats(data: &Value) -> Vec<(String, i64, i64)> {
    data["queueStats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|stat| {
            (
                stat["queue"].as_str().unwrap().to_owned(),
                stat["queued"].as_i64().unwrap(),
                stat["running"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn queue_stats_count_waiting_and_running_work_per_audience(backend: Backend) {
    // An API-only process: nothing runs, so what is enqueued stays queued.
    let app = spawn_app_with(backend, AppOptions::default().env("TRELLIS_ROLE", "api")).await;
    let admin = app.admin().await.access;
    let member = app.member("ada").await.access;
    // Start-up may have queued instance-wide work of its own: count from here.
    let before = stats(app.gql(STATS, json!({})).bearer(&admin).send().await.data());
    for queue in ["SHORT", "SHORT", "LONG"] {
        let response = app
            .gql(
                &format!("mutation {{ probeTask(input: {{ queue: {queue} }}) {{ id }} }}"),
                json!({}),
            )
            .bearer(&admin)
            .send()
            .await;
        assert!(response.error_code().is_none(), "{:?}", response.data());
    }
    let refresh = app
        .gql("mutation { refreshAllFeeds { id queue } }", json!({}))
        .bearer(&member)
        .send()
        .await;
    assert_eq!(refresh.data()["refreshAllFeeds"]["queue"], "MEDIUM");

    let after = stats(app.gql(STATS, json!({})).bearer(&admin).send().await.data());
    let added: Vec<(String, i64, i64)> = after
        .iter()
        .zip(&before)
        .map(|(now, then)| (now.0.clone(), now.1 - then.1, now.2))
        .collect();
    assert_eq!(
        added,
        [
            ("SHORT".to_owned(), 2, 0),
            ("MEDIUM".to_owned(), 1, 0),
            ("LONG".to_owned(), 1, 0)
        ],
        "queued added per queue, and nothing runs in an API-only process"
    );
    // A member counts only their own tasks.
    let own = app.gql(STATS, json!({})).bearer(&member).send().await;
    assert_eq!(
        stats(own.data()),
        [
            ("SHORT".to_owned(), 0, 0),
            ("MEDIUM".to_owned(), 1, 0),
            ("LONG".to_owned(), 0, 0)
        ]
    );
    assert!(
        own.data()["queueStats"]
            .as_array()
            .unwrap()
            .iter()
            .all(|stat| stat["delayed"] == 0)
    );
    let anonymous = app.gql(STATS, json!({})).send().await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
}

async fn tasks_say_how_many_stages_they_run(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await.access;
    let probe = app
        .gql(
            "mutation { probeTask(input: { stages: 3 }) { id stagesTotal } }",
            json!({}),
        )
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(probe.data()["probeTask"]["stagesTotal"], 3);
    let id = probe.data()["probeTask"]["id"].as_str().unwrap().to_owned();
    wait_terminal(&app, &admin, &id).await;
    let created = app
        .gql(
            "mutation { createResource(attributes: { region: \"eu\", health: 0 }, idempotencyKey: \"k\") { id stagesTotal } }",
            json!({}),
        )
        .bearer(&admin)
        .send()
        .await;
    // The seven stages of the resource pipeline.
    assert_eq!(created.data()["createResource"]["stagesTotal"], 7);
    let listed = app
        .gql(
            "{ tasks(first: 10) { nodes { kind stagesTotal stagesDone status } } }",
            json!({}),
        )
        .bearer(&admin)
        .send()
        .await;
    let probe = listed.data()["tasks"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["kind"] == "system.probe")
        .cloned()
        .unwrap();
    assert_eq!(probe["stagesTotal"], 3);
    assert_eq!(probe["stagesDone"], 3, "{probe}");
}

async fn items_come_oldest_first_on_request(backend: Backend) {
    let app = feeds_app(backend).await;
    let server = FeedServer::start().await;
    let reader = Reader::new(&app, "ada").await;
    let feed = reader
        .pull_new(
            &server,
            "/feed.xml",
            Route::rss(rss2(
                "Dated",
                &[
                    ("a", "First", "1"),
                    ("b", "Second", "2"),
                    ("c", "Third", "3"),
                ],
            )),
        )
        .await;
    let titles = |order: &'static str| {
        let reader = &reader;
        let feed = feed.clone();
        async move {
            let data = reader
                .data(
                    &format!(
                        "query($f: ID!, $after: String) {{ items(filter: {{ feedId: $f }}, order: {order}, first: 2, after: $after) {{ \
                         nodes {{ title }} pageInfo {{ endCursor hasNextPage }} }} }}"
                    ),
                    json!({ "f": feed }),
                )
                .await;
            let mut titles: Vec<String> = data["items"]["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|item| item["title"].as_str().unwrap().to_owned())
                .collect();
            let cursor = data["items"]["pageInfo"]["endCursor"].clone();
            let rest = reader
                .data(
                    &format!(
                        "query($f: ID!, $after: String) {{ items(filter: {{ feedId: $f }}, order: {order}, first: 2, after: $after) {{ nodes {{ title }} }} }}"
                    ),
                    json!({ "f": feed, "after": cursor }),
                )
                .await;
            titles.extend(
                rest["items"]["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|item| item["title"].as_str().unwrap().to_owned()),
            );
            titles
        }
    };
    // rss2 dates item n on the n-th of November: "First" is the oldest.
    assert_eq!(titles("OLDEST_FIRST").await, ["First", "Second", "Third"]);
    assert_eq!(titles("NEWEST_FIRST").await, ["Third", "Second", "First"]);
}
