//! Loopback fakes of Kavita and AniList for the gateway's tests, written
//! from their documented behaviour:
//!
//! - Kavita: `POST /api/Plugin/authenticate?apiKey=…&pluginName=…` answers
//!   a `UserDto` (`username`, `token`: an HS512 JWT valid ten days) or 401
//!   for an unknown key; every other route wants `Authorization: Bearer`
//!   and answers 401 (`WWW-Authenticate: Bearer error="invalid_token"`)
//!   for an expired or foreign token; `GET /api/Series/{id}` is 204 (no
//!   body) for an unknown series.
//! - AniList: one GraphQL endpoint; `X-RateLimit-Limit`/`-Remaining` on
//!   every answer; a bad token fails the whole request with HTTP 400
//!   `Invalid token`, public fields included; an unknown `Media` is 404
//!   `Not Found.`; `POST /api/v2/oauth/token` trades a code (once) for a
//!   token, `invalid_grant` otherwise.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, Uri},
    response::{IntoResponse, Response},
};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::docs_fakes::{Canned, Journal, Served, serve};

fn json_answer(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Canned {
    let mut headers = headers;
    headers.push(("content-type", "application/json".into()));
    Canned(status, headers, body.to_string().into_bytes())
}

// ---------------------------------------------------------------- Kavita

pub struct FakeKavita {
    pub journal: Journal,
    /// API key → user name.
    keys: Mutex<HashMap<String, String>>,
    /// Tokens of older generations are refused (Kavita's key rotated, or
    /// they expired).
    generation: AtomicU64,
    series: HashMap<u64, Value>,
}

impl FakeKavita {
    pub fn new(keys: &[(&str, &str)]) -> Self {
        FakeKavita {
            journal: Journal::default(),
            keys: Mutex::new(
                keys.iter()
                    .map(|(key, user)| (key.to_string(), user.to_string()))
                    .collect(),
            ),
            generation: AtomicU64::new(1),
            series: [
                (
                    1,
                    json!({ "id": 1, "name": "Yotsuba&!", "libraryId": 1, "pages": 2010 }),
                ),
                (
                    2,
                    json!({ "id": 2, "name": "Frieren", "libraryId": 1, "pages": 3300 }),
                ),
            ]
            .into_iter()
            .collect(),
        }
    }

    /// Every token issued so far stops working (as when they expire).
    pub fn expire_tokens(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times a key was traded for a token.
    pub fn authentications(&self) -> Vec<String> {
        self.journal
            .seen("/api/Plugin/authenticate")
            .into_iter()
            .map(|seen| seen.query.get("apiKey").cloned().unwrap_or_default())
            .collect()
    }

    fn token_for(&self, user: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS512","typ":"JWT"}"#);
        let exp = chrono::Utc::now().timestamp() + 10 * 86_400;
        let payload = URL_SAFE_NO_PAD.encode(
            json!({ "nameid": user, "gen": self.generation.load(Ordering::SeqCst), "exp": exp })
                .to_string(),
        );
        format!("{header}.{payload}.fake-signature")
    }

    /// The user a bearer token names, if it is current.
    fn user_of(&self, headers: &HeaderMap) -> Option<String> {
        let token = headers
            .get("authorization")?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        let payload = token.split('.').nth(1)?;
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let current = claims["gen"].as_u64()? == self.generation.load(Ordering::SeqCst);
        let live = claims["exp"].as_i64()? > chrono::Utc::now().timestamp();
        (current && live).then(|| claims["nameid"].as_str().map(str::to_owned))?
    }
}

pub async fn serve_kavita(fake: FakeKavita) -> Served<FakeKavita> {
    serve(fake, |fake| Router::new().fallback(kavita).with_state(fake)).await
}

async fn kavita(
    State(fake): State<Arc<FakeKavita>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = fake.journal.record(&method, &uri, &headers, &body);
    if let Some(canned) = fake.journal.scripted(&seen.path) {
        return canned.into_response();
    }
    if seen.path == "/api/Plugin/authenticate" && method == Method::POST {
        let user = seen
            .query
            .get("apiKey")
            .and_then(|key| fake.keys.lock().unwrap().get(key).cloned());
        return match (user, seen.query.get("pluginName")) {
            (Some(user), Some(_)) => json_answer(
                200,
                vec![],
                json!({
                    "username": user,
                    "email": null,
                    "token": fake.token_for(&user),
                    "refreshToken": "refresh",
                    "apiKey": seen.query["apiKey"],
                    "kavitaVersion": "0.8.6.0",
                }),
            )
            .into_response(),
            (None, Some(_)) => Canned(401, vec![], Vec::new()).into_response(),
            _ => {
                Canned(400, vec![], b"apiKey and pluginName are required".to_vec()).into_response()
            }
        };
    }
    if fake.user_of(&headers).is_none() {
        return Canned(
            401,
            vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())],
            Vec::new(),
        )
        .into_response();
    }
    if let Some(id) = seen.path.strip_prefix("/api/Series/") {
        return match id.parse::<u64>().ok().and_then(|id| fake.series.get(&id)) {
            Some(series) => json_answer(200, vec![], series.clone()).into_response(),
            None => Canned(204, vec![], Vec::new()).into_response(),
        };
    }
    if seen.path == "/api/Search/search" {
        let query = seen
            .query
            .get("queryString")
            .map(|q| q.to_lowercase())
            .unwrap_or_default();
        let series: Vec<Value> = fake
            .series
            .values()
            .filter(|s| s["name"].as_str().unwrap().to_lowercase().contains(&query))
            .cloned()
            .collect();
        return json_answer(200, vec![], json!({ "series": series })).into_response();
    }
    Canned(404, vec![], Vec::new()).into_response()
}

// --------------------------------------------------------------- AniList

pub struct FakeAniList {
    pub journal: Journal,
    pub client_id: String,
    pub client_secret: String,
    /// Authorization code → (user id, name), each usable once.
    codes: Mutex<HashMap<String, (i64, String)>>,
    /// Access token → (user id, name).
    tokens: Mutex<HashMap<String, (i64, String)>>,
    next: AtomicI64,
    media: HashMap<i64, Value>,
    /// What `X-RateLimit-Remaining` says next.
    remaining: AtomicI64,
}

impl FakeAniList {
    pub fn new() -> Self {
        FakeAniList {
            journal: Journal::default(),
            client_id: "4242".into(),
            client_secret: "anilist-client-secret".into(),
            codes: Mutex::default(),
            tokens: Mutex::default(),
            next: AtomicI64::new(1),
            media: [
                (
                    30013,
                    json!({ "id": 30013, "idMal": 13, "type": "MANGA", "format": "MANGA",
                        "status": "RELEASING", "title": { "romaji": "ONE PIECE",
                        "english": "One Piece", "native": "ONE PIECE" }, "synonyms": [],
                        "chapters": null, "volumes": null,
                        "siteUrl": "https://anilist.co/manga/30013",
                        "coverImage": { "large": null } }),
                ),
                (
                    104463,
                    json!({ "id": 104463, "idMal": 104463, "type": "MANGA",
                        "format": "MANGA", "status": "FINISHED",
                        "title": { "romaji": "Yotsuba to!", "english": "Yotsuba&!",
                        "native": "よつばと!" }, "synonyms": [], "chapters": 100,
                        "volumes": 15, "siteUrl": "https://anilist.co/manga/104463",
                        "coverImage": { "large": null } }),
                ),
            ]
            .into_iter()
            .collect(),
            remaining: AtomicI64::new(89),
        }
    }

    /// The user consents on AniList's page: the code the provider sends
    /// back with them.
    pub fn consent(&self, user_id: i64, name: &str) -> String {
        let code = format!("code-{}", self.next.fetch_add(1, Ordering::SeqCst));
        self.codes
            .lock()
            .unwrap()
            .insert(code.clone(), (user_id, name.to_owned()));
        code
    }

    /// Every token issued so far is revoked (as when it expires).
    pub fn revoke_tokens(&self) {
        self.tokens.lock().unwrap().clear();
    }

    /// The GraphQL requests seen (path `/graphql`).
    pub fn graphql_requests(&self) -> Vec<crate::docs_fakes::Seen> {
        self.journal.seen("/graphql")
    }

    fn limits(&self) -> Vec<(&'static str, String)> {
        let remaining = self.remaining.fetch_sub(1, Ordering::SeqCst).max(0);
        vec![
            ("x-ratelimit-limit", "90".into()),
            ("x-ratelimit-remaining", remaining.to_string()),
        ]
    }
}

pub async fn serve_anilist(fake: FakeAniList) -> Served<FakeAniList> {
    serve(fake, |fake| {
        Router::new().fallback(anilist).with_state(fake)
    })
    .await
}

async fn anilist(
    State(fake): State<Arc<FakeAniList>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = fake.journal.record(&method, &uri, &headers, &body);
    if let Some(canned) = fake.journal.scripted(&seen.path) {
        return canned.into_response();
    }
    match (method, seen.path.as_str()) {
        (Method::POST, "/api/v2/oauth/token") => token(&fake, &seen.body).into_response(),
        (Method::POST, "/graphql") => graphql(&fake, &seen).into_response(),
        _ => Canned(404, vec![], Vec::new()).into_response(),
    }
}

fn token(fake: &FakeAniList, body: &Value) -> Canned {
    let client_ok = body["client_id"].as_str() == Some(fake.client_id.as_str())
        && body["client_secret"].as_str() == Some(fake.client_secret.as_str())
        && body["grant_type"] == "authorization_code"
        && body["redirect_uri"].is_string();
    let user = body["code"]
        .as_str()
        .and_then(|code| fake.codes.lock().unwrap().remove(code));
    match (client_ok, user) {
        (true, Some(user)) => {
            let token = format!("anilist-token-{}", fake.next.fetch_add(1, Ordering::SeqCst));
            fake.tokens.lock().unwrap().insert(token.clone(), user);
            json_answer(
                200,
                vec![],
                json!({ "token_type": "Bearer", "expires_in": 31_536_000,
                    "access_token": token, "refresh_token": "unused" }),
            )
        }
        _ => json_answer(
            400,
            vec![],
            json!({ "error": "invalid_grant", "message": "The authorization grant is invalid." }),
        ),
    }
}

fn graphql(fake: &FakeAniList, seen: &crate::docs_fakes::Seen) -> Canned {
    let limits = fake.limits();
    let query = seen.body["query"].as_str().unwrap_or_default();
    let variables = &seen.body["variables"];
    let viewer = match seen.authorization.as_deref() {
        None => None,
        Some(value) => {
            let token = value.strip_prefix("Bearer ").unwrap_or_default();
            match fake.tokens.lock().unwrap().get(token).cloned() {
                Some(user) => Some(user),
                None => {
                    return json_answer(
                        400,
                        limits,
                        json!({ "errors": [{ "message": "Invalid token", "status": 400 }], "data": null }),
                    );
                }
            }
        }
    };
    if query.contains("Viewer") {
        return match viewer {
            Some((id, name)) => json_answer(
                200,
                limits,
                json!({ "data": { "Viewer": { "id": id, "name": name,
                    "mediaListOptions": { "scoreFormat": "POINT_10" } } } }),
            ),
            None => json_answer(
                401,
                limits,
                json!({ "errors": [{ "message": "Unauthorized.", "status": 401 }], "data": { "Viewer": null } }),
            ),
        };
    }
    if query.contains("Media(id") {
        let id = variables["id"].as_i64().unwrap_or_default();
        return match fake.media.get(&id) {
            Some(media) => json_answer(200, limits, json!({ "data": { "Media": media } })),
            None => json_answer(
                404,
                limits,
                json!({ "errors": [{ "message": "Not Found.", "status": 404 }], "data": { "Media": null } }),
            ),
        };
    }
    if query.contains("Page(") {
        let search = variables["search"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase();
        let media: Vec<Value> = fake
            .media
            .values()
            .filter(|media| {
                media["title"].as_object().unwrap().values().any(|title| {
                    title
                        .as_str()
                        .unwrap_or_default()
                        .to_lowercase()
                        .contains(&search)
                })
            })
            .cloned()
            .collect();
        return json_answer(
            200,
            limits,
            json!({ "data": { "Page": { "media": media } } }),
        );
    }
    json_answer(
        400,
        limits,
        json!({ "errors": [{ "message": "Unsupported query in the fake", "status": 400 }], "data": null }),
    )
}
