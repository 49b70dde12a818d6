//! Notion's wire shapes (API version `2025-09-03`), only the fields the
//! mirror reads, and how an answer maps to the adapter's vocabulary: ids in
//! both forms, listed objects to [`RemoteNode`]s, error bodies to
//! [`AdapterError`]s.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::docs::adapter::{AdapterError, NodeKind, RemoteNode};
use crate::httpc::{FetchError, Fetched, retry};

/// The API version every request names (`Notion-Version`).
pub const NOTION_VERSION: &str = "2025-09-03";

/// A page of `POST /v1/search` or `POST /v1/data_sources/{id}/query`.
#[derive(Debug, Deserialize)]
pub struct ListPage {
    pub results: Vec<Object>,
    #[serde(default)]
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// A page or data source as listed (and a row as queried).
#[derive(Debug, Deserialize)]
pub struct Object {
    pub object: String,
    pub id: String,
    pub last_edited_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub in_trash: bool,
    /// The older name of `in_trash`, still sent.
    #[serde(default)]
    pub archived: bool,
    pub parent: Option<Parent>,
    /// A data source's parent is its database; where that database sits.
    pub database_parent: Option<Parent>,
    pub url: Option<String>,
    /// A data source's title.
    #[serde(default)]
    pub title: Vec<RichText>,
    /// A page's property values, or a data source's schema.
    #[serde(default)]
    pub properties: serde_json::Map<String, Value>,
}

/// Where an object sits.
#[derive(Debug, Deserialize)]
pub struct Parent {
    #[serde(rename = "type")]
    pub kind: String,
    pub page_id: Option<String>,
    pub data_source_id: Option<String>,
    pub database_id: Option<String>,
    pub block_id: Option<String>,
}

/// One rich text run; only its plain text matters here.
#[derive(Debug, Deserialize)]
pub struct RichText {
    #[serde(default)]
    pub plain_text: String,
}

/// `GET /v1/pages/{id}/markdown`.
#[derive(Debug, Deserialize)]
pub struct PageMarkdown {
    pub markdown: String,
    #[serde(default)]
    pub truncated: bool,
    #[serde(default)]
    pub unknown_block_ids: Vec<String>,
}

/// Notion's error body: `{"object":"error","status":…,"code":…,"message":…}`.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub code: String,
    #[serde(default)]
    pub message: String,
}

/// The id without dashes, lowercase: the form URLs and bodies use.
pub fn undashed(id: &str) -> String {
    id.chars()
        .filter(|c| *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The canonical dashed form (8-4-4-4-12) of a Notion id in either form;
/// `None` if it is not 32 hex digits.
pub fn dashed(id: &str) -> Option<String> {
    let hex = undashed(id);
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

fn canonical(id: &str) -> String {
    dashed(id).unwrap_or_else(|| id.to_owned())
}

fn plain(runs: &[RichText]) -> String {
    runs.iter().map(|run| run.plain_text.as_str()).collect()
}

impl Object {
    /// Trashed objects are not mirrored (the engine trashes them locally
    /// when a full run no longer lists them).
    pub fn is_trashed(&self) -> bool {
        self.in_trash || self.archived
    }

    /// A page's title: its `title`-typed property.
    pub fn page_title(&self) -> String {
        self.properties
            .values()
            .find(|value| value.get("type").and_then(Value::as_str) == Some("title"))
            .and_then(|value| value.get("title"))
            .and_then(|runs| serde_json::from_value::<Vec<RichText>>(runs.clone()).ok())
            .map(|runs| plain(&runs))
            .unwrap_or_default()
    }

    /// The listed node, or `None` for what is not mirrored (trashed, or an
    /// object type other than a page or a data source).
    pub fn to_node(&self) -> Option<RemoteNode> {
        if self.is_trashed() {
            return None;
        }
        let parent = |parent: Option<&Parent>| -> Option<String> {
            let parent = parent?;
            let id = match parent.kind.as_str() {
                "page_id" => parent.page_id.as_deref(),
                "data_source_id" => parent.data_source_id.as_deref(),
                "database_id" => parent.database_id.as_deref(),
                "block_id" => parent.block_id.as_deref(),
                _ => None,
            };
            id.map(canonical)
        };
        let (kind, parent_id, title) = match self.object.as_str() {
            "page" => {
                let in_database = self
                    .parent
                    .as_ref()
                    .is_some_and(|p| p.kind == "data_source_id" || p.kind == "database_id");
                let kind = if in_database {
                    NodeKind::Row
                } else {
                    NodeKind::Page
                };
                (kind, parent(self.parent.as_ref()), self.page_title())
            }
            // A data source lives in a database we do not list: it is placed
            // where the database is.
            "data_source" | "database" => {
                let placed = match &self.parent {
                    Some(p) if p.kind == "database_id" => self.database_parent.as_ref(),
                    other => other.as_ref(),
                };
                (NodeKind::Database, parent(placed), plain(&self.title))
            }
            _ => return None,
        };
        let id = canonical(&self.id);
        Some(RemoteNode {
            alt_id: Some(undashed(&id)).filter(|alt| *alt != id),
            id,
            kind,
            parent_id,
            title,
            edited_at: self.last_edited_time,
            url: self.url.clone(),
        })
    }
}

/// What an answer means: its body when it succeeded, else the typed error.
pub fn classify(answer: Result<Fetched, FetchError>, id: &str) -> Result<Vec<u8>, AdapterError> {
    let answer = answer.map_err(|error| match error {
        FetchError::Timeout(_) | FetchError::Connect(_) | FetchError::Transport(_) => {
            AdapterError::Transport(error.to_string())
        }
        other => AdapterError::Protocol(other.to_string()),
    })?;
    let status = answer.status.as_u16();
    if answer.status.is_success() {
        return Ok(answer.body);
    }
    let body: Option<ErrorBody> = serde_json::from_slice(&answer.body).ok();
    let message = body
        .as_ref()
        .map(|body| format!("{}: {}", body.code, body.message))
        .unwrap_or_else(|| format!("HTTP {status}"));
    Err(match status {
        401 => AdapterError::Unauthorized,
        403 => AdapterError::Forbidden { id: id.to_owned() },
        404 => AdapterError::NotFound { id: id.to_owned() },
        429 => AdapterError::RateLimited {
            retry_after: retry::retry_after(&answer.headers, Utc::now()),
        },
        500..=599 => AdapterError::Server { status },
        _ => AdapterError::Protocol(message),
    })
}

/// Reads a successful body as `T`.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, AdapterError> {
    serde_json::from_slice(body).map_err(|error| AdapterError::Protocol(format!("{what}: {error}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_have_two_forms() {
        let id = "1F2E3D4C00004ABC8DEF123456789ABC";
        assert_eq!(
            dashed(id).as_deref(),
            Some("1f2e3d4c-0000-4abc-8def-123456789abc")
        );
        assert_eq!(dashed(&dashed(id).unwrap()), dashed(id));
        assert_eq!(
            undashed("1f2e3d4c-0000-4abc-8def-123456789abc"),
            id.to_lowercase()
        );
        assert_eq!(dashed("not-an-id"), None);
        assert_eq!(dashed("1f2e3d4c00004abc8def123456789abz"), None);
    }

    fn object(value: Value) -> Object {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn listed_objects_become_nodes() {
        let page = object(json!({
            "object": "page", "id": "11111111-1111-1111-1111-111111111111",
            "last_edited_time": "2026-11-30T12:00:00.000Z",
            "in_trash": false,
            "parent": {"type": "page_id", "page_id": "22222222222222222222222222222222"},
            "url": "https://www.notion.so/Plan-11111111111111111111111111111111",
            "properties": {"Name": {"id": "title", "type": "title", "title": [
                {"type": "text", "plain_text": "Pl"}, {"type": "text", "plain_text": "an"}]}}
        }));
        let node = page.to_node().unwrap();
        assert_eq!(node.id, "11111111-1111-1111-1111-111111111111");
        assert_eq!(
            node.alt_id.as_deref(),
            Some("11111111111111111111111111111111")
        );
        assert_eq!(node.kind, NodeKind::Page);
        assert_eq!(
            node.parent_id.as_deref(),
            Some("22222222-2222-2222-2222-222222222222")
        );
        assert_eq!(node.title, "Plan");
        assert_eq!(
            node.edited_at,
            Some("2026-11-30T12:00:00Z".parse().unwrap())
        );

        let row = object(json!({
            "object": "page", "id": "33333333-3333-3333-3333-333333333333",
            "parent": {"type": "data_source_id", "data_source_id": "44444444-4444-4444-4444-444444444444",
                       "database_id": "55555555-5555-5555-5555-555555555555"},
        }));
        let row = row.to_node().unwrap();
        assert_eq!(
            (row.kind, row.parent_id.as_deref()),
            (NodeKind::Row, Some("44444444-4444-4444-4444-444444444444"))
        );
        assert_eq!(row.title, "");

        let source = object(json!({
            "object": "data_source", "id": "44444444-4444-4444-4444-444444444444",
            "title": [{"plain_text": "Tasks"}],
            "parent": {"type": "database_id", "database_id": "55555555-5555-5555-5555-555555555555"},
            "database_parent": {"type": "page_id", "page_id": "11111111-1111-1111-1111-111111111111"},
        }));
        let source = source.to_node().unwrap();
        assert_eq!(source.kind, NodeKind::Database);
        assert_eq!(source.title, "Tasks");
        assert_eq!(
            source.parent_id.as_deref(),
            Some("11111111-1111-1111-1111-111111111111")
        );

        let at_root = object(
            json!({"object": "page", "id": "66666666-6666-6666-6666-666666666666",
            "parent": {"type": "workspace", "workspace": true}}),
        );
        assert_eq!(at_root.to_node().unwrap().parent_id, None);

        for skipped in [
            json!({"object": "page", "id": "7", "in_trash": true}),
            json!({"object": "page", "id": "7", "archived": true}),
            json!({"object": "block", "id": "7"}),
        ] {
            assert_eq!(object(skipped.clone()).to_node(), None, "{skipped}");
        }
    }
}
