//! The feed reader end to end: a loopback publisher serves RSS 2.0, RSS 1.0,
//! Atom and JSON Feed (and misbehaves on purpose), the real server pulls
//! through its job runner, and everything is checked through GraphQL — on
//! SQLite and on PostgreSQL.

mod library;
mod protocols;
mod pull;
mod search;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route},
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
};

/// The app with its SSRF guard opened for the loopback publisher.
pub(crate) async fn app(backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true"),
    )
    .await
}

/// One signed-in user's GraphQL calls.
pub(crate) struct Reader<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) token: String,
}

impl<'a> Reader<'a> {
    pub(crate) async fn new(app: &'a TestApp, username: &str) -> Self {
        Reader {
            app,
            token: app.member(username).await.access,
        }
    }

    pub(crate) async fn raw(&self, query: &str, variables: Value) -> crate::helpers::GqlResponse {
        self.app
            .gql(query, variables)
            .bearer(&self.token)
            .send()
            .await
    }

    pub(crate) async fn data(&self, query: &str, variables: Value) -> Value {
        self.raw(query, variables).await.data().clone()
    }

    pub(crate) async fn follow(&self, link: &str) -> String {
        let data = self
            .data(
                "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
                json!({ "i": { "link": link } }),
            )
            .await;
        data["createFeed"]["id"].as_str().unwrap().to_owned()
    }

    /// Publishes `route` at `path`, follows it and pulls it once; returns the feed id.
    pub(crate) async fn pull_new(&self, server: &FeedServer, path: &str, route: Route) -> String {
        server.set(path, route);
        let feed = self.follow(&server.url(path)).await;
        let task = self.refresh(&feed).await;
        assert_eq!(task["status"], "SUCCEEDED", "{task}");
        feed
    }

    /// Refreshes one feed and waits for its task to end; returns the task.
    pub(crate) async fn refresh(&self, feed: &str) -> Value {
        let data = self
            .data(
                "mutation($id: ID!) { refreshFeed(id: $id) { id } }",
                json!({ "id": feed }),
            )
            .await;
        self.wait(data["refreshFeed"]["id"].as_str().unwrap()).await
    }

    /// Creates `feeds` (`CreateFeedInput`s) and asks for a refresh of each,
    /// without waiting; returns the refresh tasks' ids.
    pub(crate) async fn refresh_each(&self, feeds: Vec<Value>) -> Vec<String> {
        let created = self
            .data(
                "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
                json!({ "i": feeds }),
            )
            .await;
        let mut tasks = Vec::new();
        for feed in created["createFeeds"].as_array().unwrap() {
            let task = self
                .data(
                    "mutation($id: ID!) { refreshFeed(id: $id) { id } }",
                    json!({ "id": feed["id"] }),
                )
                .await;
            tasks.push(task["refreshFeed"]["id"].as_str().unwrap().to_owned());
        }
        tasks
    }

    pub(crate) async fn refresh_all(&self) -> Value {
        let data = self
            .data("mutation { refreshAllFeeds { id } }", json!({}))
            .await;
        self.wait(data["refreshAllFeeds"]["id"].as_str().unwrap())
            .await
    }

    /// Imports an OPML document and waits for its task to end.
    pub(crate) async fn import_opml(&self, opml: &str) -> Value {
        let task = self
            .data(
                "mutation($o: String!) { importOpml(opml: $o) { id } }",
                json!({ "o": opml }),
            )
            .await["importOpml"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.wait(&task).await
    }

    pub(crate) async fn wait(&self, task: &str) -> Value {
        for _ in 0..600 {
            let data = self
                .data(
                    "query($id: ID!) { task(id: $id) { status error result attemptCount } }",
                    json!({ "id": task }),
                )
                .await;
            let status = data["task"]["status"].as_str().unwrap_or_default();
            if !["QUEUED", "RUNNING"].contains(&status) {
                return data["task"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task} did not finish");
    }

    pub(crate) async fn feed(&self, id: &str) -> Value {
        self.data(
            "query($id: ID!) { feed(id: $id) { id name siteUrl unreadCount itemCount
                fetchState { etag lastModified lastCheckedAt nextCheckAt lastHttpStatus retryAfterUntil
                             lastSuccessAt lastError consecutiveFailures } } }",
            json!({ "id": id }),
        )
        .await["feed"]
            .clone()
    }

    pub(crate) async fn items(&self, filter: Value) -> Vec<Value> {
        self.data(
            "query($f: ItemFilter) { items(filter: $f, first: 200) { edges { node {
                id feedId guid title link content rawContent pubDate unread starred } } } }",
            json!({ "f": filter }),
        )
        .await["items"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|edge| edge["node"].clone())
            .collect()
    }
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a timestamp, got {value}"))
        .parse()
        .unwrap()
}

/// POSTs to the Fever endpoint: `flags` in the query string (after `api`),
/// `form` as the urlencoded body.
pub(crate) async fn fever(app: &TestApp, flags: &str, form: &[(&str, &str)]) -> Value {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = app
        .client
        .post(app.url(&format!("/fever/?api&{flags}")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// A Google Reader API client: its token and the server.
pub(crate) struct GReader<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) auth: String,
}

impl<'a> GReader<'a> {
    pub(crate) async fn login(
        app: &'a TestApp,
        username: &str,
        password: &str,
    ) -> Result<Self, (u16, String)> {
        let response = app
            .client
            .post(app.url("/accounts/ClientLogin"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("Email={username}&Passwd={password}"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        if status != 200 {
            return Err((status, body));
        }
        let auth = body
            .lines()
            .find_map(|line| line.strip_prefix("Auth="))
            .expect("an Auth line")
            .to_owned();
        Ok(GReader { app, auth })
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .app
            .client
            .get(self.app.url(&format!("/reader/api/0/{path}")))
            .header("authorization", format!("GoogleLogin auth={}", self.auth))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(crate) async fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let response = self
            .app
            .client
            .post(self.app.url(&format!("/reader/api/0/{path}")))
            .header("authorization", format!("GoogleLogin auth={}", self.auth))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(crate) async fn ids(&self, query: &str) -> (Vec<String>, Option<String>) {
        let body = self.json(&format!("stream/items/ids?{query}")).await;
        let ids = body["itemRefs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        (ids, body["continuation"].as_str().map(str::to_owned))
    }
}
