//! The docs mirror's configuration over GraphQL: admins read every knob,
//! credentials only as "set"; members and anonymous callers are refused.

use serde_json::json;

use crate::helpers::{AppOptions, Backend, spawn_app_with};

const QUERY: &str = "{ docsSettings { notionConfigured notionApiUrl notionQps feishuConfigured \
    feishuAppId feishuApiUrl feishuQps feishuWikiSpaces feishuDriveFolders syncIntervalSeconds \
    reconcileEveryRuns trashKeepDays bitableInlineMaxRows } }";

#[tokio::test]
async fn admins_read_the_docs_settings_without_their_secrets() {
    let app = spawn_app_with(
        Backend::Sqlite,
        AppOptions::default()
            .env("TRELLIS_NOTION_TOKEN", "secret_notion_token_value")
            .env("TRELLIS_NOTION_API_URL", "http://127.0.0.1:9/notion")
            .env("TRELLIS_FEISHU_APP_ID", "cli_app")
            .env("TRELLIS_FEISHU_APP_SECRET", "feishu_secret_value")
            .env("TRELLIS_FEISHU_WIKI_SPACES", "7001,7002")
            .env("TRELLIS_DOCS_SYNC_INTERVAL", "0"),
    )
    .await;
    let admin = app.admin().await;
    let answer = app.gql(QUERY, json!({})).bearer(&admin.access).send().await;
    assert_eq!(
        answer.data()["docsSettings"],
        json!({
            "notionConfigured": true,
            "notionApiUrl": "http://127.0.0.1:9/notion",
            "notionQps": 3,
            "feishuConfigured": true,
            "feishuAppId": "cli_app",
            "feishuApiUrl": "https://open.feishu.cn/",
            "feishuQps": 5,
            "feishuWikiSpaces": ["7001", "7002"],
            "feishuDriveFolders": [],
            "syncIntervalSeconds": 0,
            "reconcileEveryRuns": 10,
            "trashKeepDays": 30,
            "bitableInlineMaxRows": 200,
        })
    );
    let text = answer.body.to_string();
    assert!(
        !text.contains("secret_notion_token_value") && !text.contains("feishu_secret_value"),
        "{text}"
    );

    let member = app.member("mia").await;
    let refused = app
        .gql(QUERY, json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(
        refused.error_code(),
        Some("FORBIDDEN"),
        "{:?}",
        refused.body
    );
    let anonymous = app.gql(QUERY, json!({})).send().await;
    assert_eq!(
        anonymous.error_code(),
        Some("UNAUTHENTICATED"),
        "{:?}",
        anonymous.body
    );
}
