//! Feishu's Open API wire shapes (only the fields the mirror reads) and how
//! an answer maps to the adapter's vocabulary.
//!
//! Every answer is an envelope `{"code": 0, "msg": "success", "data": {…}}`;
//! a non-zero `code` is an error whatever the HTTP status (Feishu answers
//! many errors with 400, and some with 200). The token endpoint is the
//! exception: its `tenant_access_token` and `expire` sit at the top level,
//! beside `code`, not under `data`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::docs::adapter::{AdapterError, NodeKind};
use crate::docs::ratelimit::FEISHU_RATE_LIMITED;
use crate::httpc::{FetchError, Fetched, retry};

/// The tenant access token is invalid or expired: renew it once and retry.
pub const TOKEN_INVALID: i64 = 99991663;
/// The request carried no (or a malformed) access token: same remedy.
pub const TOKEN_MISSING: i64 = 99991661;

/// Codes that mean "not allowed" for the object asked about: the app lacks
/// a scope (99991672), or the document, wiki space, drive file or bitable
/// is not shared with it (docx 1770032, wiki 131006, drive 1061004,
/// bitable 91403).
const FORBIDDEN_CODES: [i64; 5] = [99991672, 1770032, 131006, 1061004, 91403];
/// Codes that mean "no such object" (docx 1770002, wiki 131005, drive
/// 1061003 and 1061007, bitable 91402).
const NOT_FOUND_CODES: [i64; 5] = [1770002, 131005, 1061003, 1061007, 91402];

/// The envelope of every answer but the token's.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    pub code: i64,
    #[serde(default)]
    pub msg: String,
    #[serde(default)]
    pub data: Value,
}

/// `POST /open-apis/auth/v3/tenant_access_token/internal`, fields at the top.
#[derive(Debug, Deserialize)]
pub struct TokenAnswer {
    pub code: i64,
    #[serde(default)]
    pub msg: String,
    pub tenant_access_token: Option<String>,
    /// Seconds the token stays valid (about 7,200).
    pub expire: Option<u64>,
}

/// A page of `GET /open-apis/wiki/v2/spaces`.
#[derive(Debug, Deserialize)]
pub struct SpacePage {
    #[serde(default)]
    pub items: Vec<Space>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A wiki space.
#[derive(Debug, Deserialize)]
pub struct Space {
    pub space_id: String,
    #[serde(default)]
    pub name: String,
}

/// `GET /open-apis/wiki/v2/spaces/{space_id}`.
#[derive(Debug, Deserialize)]
pub struct SpaceAnswer {
    pub space: Space,
}

/// A page of `GET /open-apis/wiki/v2/spaces/{space_id}/nodes` (one level).
#[derive(Debug, Deserialize)]
pub struct NodePage {
    #[serde(default)]
    pub items: Vec<WikiNode>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A wiki node: the wiki's place (`node_token`) of a document (`obj_token`).
#[derive(Debug, Deserialize)]
pub struct WikiNode {
    pub node_token: String,
    pub obj_token: String,
    #[serde(default)]
    pub obj_type: String,
    #[serde(default)]
    pub parent_node_token: String,
    #[serde(default)]
    pub has_child: bool,
    #[serde(default)]
    pub title: String,
    /// Seconds since the epoch, as a string.
    pub obj_edit_time: Option<String>,
}

/// A page of `GET /open-apis/drive/v1/files`.
#[derive(Debug, Deserialize)]
pub struct FilePage {
    #[serde(default)]
    pub files: Vec<DriveFile>,
    pub next_page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A file (or folder) of a drive folder.
#[derive(Debug, Deserialize)]
pub struct DriveFile {
    pub token: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    pub url: Option<String>,
    /// Seconds since the epoch, as a string.
    pub modified_time: Option<String>,
}

/// `POST /open-apis/drive/v1/metas/batch_query`.
#[derive(Debug, Deserialize)]
pub struct MetasAnswer {
    #[serde(default)]
    pub metas: Vec<Meta>,
}

/// One document's metadata.
#[derive(Debug, Deserialize)]
pub struct Meta {
    pub doc_token: String,
    #[serde(default)]
    pub title: String,
    pub url: Option<String>,
    /// Seconds since the epoch, as a string.
    pub latest_modify_time: Option<String>,
}

/// A page of `GET /open-apis/docx/v1/documents/{id}/blocks`.
#[derive(Debug, Deserialize)]
pub struct BlockPage {
    #[serde(default)]
    pub items: Vec<Value>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A page of a bitable table's fields.
#[derive(Debug, Deserialize)]
pub struct FieldPage {
    #[serde(default)]
    pub items: Vec<Field>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A bitable field (column).
#[derive(Debug, Clone, Deserialize)]
pub struct Field {
    pub field_name: String,
    #[serde(rename = "type", default)]
    pub kind: u64,
}

/// A page of a bitable table's records.
#[derive(Debug, Deserialize)]
pub struct RecordPage {
    #[serde(default)]
    pub items: Vec<Record>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
    /// Rows in the whole table.
    pub total: Option<u64>,
}

/// One bitable row.
#[derive(Debug, Deserialize)]
pub struct Record {
    #[serde(default)]
    pub fields: serde_json::Map<String, Value>,
}

/// A page of a bitable app's tables.
#[derive(Debug, Deserialize)]
pub struct TablePage {
    #[serde(default)]
    pub items: Vec<Table>,
    pub page_token: Option<String>,
    #[serde(default)]
    pub has_more: bool,
}

/// A table of a bitable app.
#[derive(Debug, Deserialize)]
pub struct Table {
    pub table_id: String,
    #[serde(default)]
    pub name: String,
}

/// `GET /open-apis/board/v1/whiteboards/{id}/nodes`.
#[derive(Debug, Deserialize)]
pub struct BoardNodes {
    #[serde(default)]
    pub nodes: Vec<Value>,
}

/// A page of one of Feishu's paginated listings.
pub trait Paged: serde::de::DeserializeOwned {
    type Item;
    /// Its items, whether more follow, the next page's token, and the
    /// listing's total when it says.
    fn split(self) -> (Vec<Self::Item>, bool, Option<String>, Option<u64>);
}

macro_rules! paged {
    ($page:ty, $item:ty, $items:ident, $token:ident) => {
        impl Paged for $page {
            type Item = $item;
            fn split(self) -> (Vec<$item>, bool, Option<String>, Option<u64>) {
                (self.$items, self.has_more, self.$token, None)
            }
        }
    };
}

paged!(SpacePage, Space, items, page_token);
paged!(NodePage, WikiNode, items, page_token);
// The drive names its token `next_page_token`.
paged!(FilePage, DriveFile, files, next_page_token);
paged!(BlockPage, Value, items, page_token);
paged!(FieldPage, Field, items, page_token);
paged!(TablePage, Table, items, page_token);

impl Paged for RecordPage {
    type Item = Record;
    fn split(self) -> (Vec<Record>, bool, Option<String>, Option<u64>) {
        (self.items, self.has_more, self.page_token, self.total)
    }
}

/// The kind of a wiki `obj_type` or a drive file `type`; an unknown type is
/// a file placeholder, so the tree has no holes. A legacy `doc` cannot be
/// read through the docx API: a placeholder too.
pub fn kind_of(obj_type: &str) -> NodeKind {
    match obj_type {
        "docx" => NodeKind::Docx,
        "sheet" => NodeKind::Sheet,
        "bitable" => NodeKind::Bitable,
        "mindnote" => NodeKind::Mindnote,
        "slides" => NodeKind::Slides,
        "folder" => NodeKind::Folder,
        _ => NodeKind::File,
    }
}

/// A Feishu time (seconds since the epoch, as a string or a number).
pub fn seconds(text: Option<&str>) -> Option<DateTime<Utc>> {
    let seconds: i64 = text?.trim().parse().ok()?;
    DateTime::from_timestamp(seconds, 0)
}

/// Reads `data` as `T`.
pub fn parse<T: serde::de::DeserializeOwned>(data: Value, what: &str) -> Result<T, AdapterError> {
    serde_json::from_value(data).map_err(|error| AdapterError::Protocol(format!("{what}: {error}")))
}

/// What went wrong with an answer, before the adapter decides.
#[derive(Debug)]
pub enum Failure {
    /// The token was refused (expired, missing): renew and retry once.
    Token,
    /// Anything else, classified.
    Other(AdapterError),
}

/// How a failed request maps.
pub fn transport(error: FetchError) -> AdapterError {
    match error {
        FetchError::Timeout(_) | FetchError::Connect(_) | FetchError::Transport(_) => {
            AdapterError::Transport(error.to_string())
        }
        other => AdapterError::Protocol(other.to_string()),
    }
}

/// The error a non-zero `code` (or a failed HTTP status) means for the
/// object `id`.
pub fn classify_code(
    status: u16,
    code: Option<i64>,
    msg: &str,
    answer: &Fetched,
    id: &str,
) -> Failure {
    if matches!(code, Some(TOKEN_INVALID | TOKEN_MISSING)) {
        return Failure::Token;
    }
    let error = match (code, status) {
        (Some(FEISHU_RATE_LIMITED), _) | (_, 429) => AdapterError::RateLimited {
            retry_after: answer
                .headers
                .get("x-ogw-ratelimit-reset")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map(Duration::from_secs)
                .or_else(|| retry::retry_after(&answer.headers, Utc::now())),
        },
        (Some(code), _) if FORBIDDEN_CODES.contains(&code) => {
            AdapterError::Forbidden { id: id.to_owned() }
        }
        (Some(code), _) if NOT_FOUND_CODES.contains(&code) => {
            AdapterError::NotFound { id: id.to_owned() }
        }
        (_, 401) => AdapterError::Unauthorized,
        (_, 403) => AdapterError::Forbidden { id: id.to_owned() },
        (_, 404) => AdapterError::NotFound { id: id.to_owned() },
        (_, 500..=599) => AdapterError::Server { status },
        (Some(code), _) => AdapterError::Protocol(format!("code {code}: {msg}")),
        (None, _) => AdapterError::Protocol(format!("HTTP {status}")),
    };
    Failure::Other(error)
}

/// A JSON answer's `data`, or what its envelope says went wrong.
pub fn envelope(answer: &Fetched, id: &str) -> Result<Value, Failure> {
    let status = answer.status.as_u16();
    match serde_json::from_slice::<Envelope>(&answer.body) {
        Ok(envelope) if envelope.code == 0 && answer.status.is_success() => Ok(envelope.data),
        Ok(envelope) => Err(classify_code(
            status,
            Some(envelope.code),
            &envelope.msg,
            answer,
            id,
        )),
        Err(_) if answer.status.is_success() => Err(Failure::Other(AdapterError::Protocol(
            format!("{id}: the answer is not a Feishu envelope"),
        ))),
        Err(_) => Err(classify_code(status, None, "", answer, id)),
    }
}

#[cfg(test)]
mod tests {
    use reqwest::{StatusCode, header::HeaderMap};
    use url::Url;

    use super::*;

    fn answer(status: u16, headers: &[(&'static str, &str)], body: &str) -> Fetched {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.parse().unwrap());
        }
        Fetched {
            status: StatusCode::from_u16(status).unwrap(),
            headers: map,
            url: Url::parse("https://open.feishu.cn/").unwrap(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn error_of(answer: &Fetched) -> AdapterError {
        match envelope(answer, "doxcnA") {
            Err(Failure::Other(error)) => error,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn envelopes_map_to_data_or_typed_errors() {
        let ok = answer(200, &[], r#"{"code":0,"msg":"success","data":{"x":1}}"#);
        assert_eq!(envelope(&ok, "a").unwrap(), serde_json::json!({"x": 1}));
        for code in [TOKEN_INVALID, TOKEN_MISSING] {
            let body =
                format!(r#"{{"code":{code},"msg":"Invalid access token for authorization."}}"#);
            assert!(matches!(
                envelope(&answer(400, &[], &body), "a"),
                Err(Failure::Token)
            ));
        }
        let cases = [
            (
                answer(
                    400,
                    &[("x-ogw-ratelimit-reset", "3")],
                    r#"{"code":99991400,"msg":"request trigger frequency limit"}"#,
                ),
                AdapterError::RateLimited {
                    retry_after: Some(Duration::from_secs(3)),
                },
            ),
            (
                answer(403, &[], r#"{"code":1770032,"msg":"forBidden"}"#),
                AdapterError::Forbidden {
                    id: "doxcnA".into(),
                },
            ),
            (
                answer(400, &[], r#"{"code":131006,"msg":"permission denied"}"#),
                AdapterError::Forbidden {
                    id: "doxcnA".into(),
                },
            ),
            (
                answer(404, &[], r#"{"code":1770002,"msg":"not found"}"#),
                AdapterError::NotFound {
                    id: "doxcnA".into(),
                },
            ),
            (
                answer(400, &[], r#"{"code":1770001,"msg":"invalid param"}"#),
                AdapterError::Protocol("code 1770001: invalid param".into()),
            ),
            (
                answer(200, &[], r#"{"code":1254000,"msg":"WrongRequestJson"}"#),
                AdapterError::Protocol("code 1254000: WrongRequestJson".into()),
            ),
            (
                answer(502, &[], "<html>bad gateway</html>"),
                AdapterError::Server { status: 502 },
            ),
            (answer(401, &[], ""), AdapterError::Unauthorized),
            (
                answer(200, &[], "not json"),
                AdapterError::Protocol("doxcnA: the answer is not a Feishu envelope".into()),
            ),
        ];
        for (answer, expected) in cases {
            assert_eq!(error_of(&answer), expected, "{}", answer.status);
        }
    }

    #[test]
    fn object_types_and_times_map() {
        assert_eq!(kind_of("docx"), NodeKind::Docx);
        assert_eq!(kind_of("sheet"), NodeKind::Sheet);
        assert_eq!(kind_of("bitable"), NodeKind::Bitable);
        assert_eq!(kind_of("mindnote"), NodeKind::Mindnote);
        assert_eq!(kind_of("slides"), NodeKind::Slides);
        assert_eq!(kind_of("folder"), NodeKind::Folder);
        assert_eq!(kind_of("doc"), NodeKind::File);
        assert_eq!(kind_of("shortcut"), NodeKind::File);
        assert_eq!(
            seconds(Some("1733212800")),
            DateTime::from_timestamp(1_733_212_800, 0)
        );
        assert_eq!(seconds(Some("soon")), None);
        assert_eq!(seconds(None), None);
    }
}
