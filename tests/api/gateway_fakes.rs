//! Loopback fakes of Kavita and AniList for the gateway's tests, written
//! from their documented behaviour:
//!
//! - Kavita: `POST /api/Plugin/authenticate?apiKey=…&pluginName=…` answers
//!   a `UserDto` (`username`, `token`: an HS512 JWT valid ten days) or 401
//!   for an unknown key; every other route wants `Authorization: Bearer`
//!   and answers 401 (`WWW-Authenticate: Bearer error="invalid_token"`)
//!   for an expired or foreign token; `GET /api/Series/{id}` is 204 (no
//!   body) for an unknown series; `POST /api/Reader/progress` wants the
//!   whole `ProgressDto` (400 otherwise) and `get-progress` answers a
//!   zeroed one for a chapter with nothing read.
//! - AniList: one GraphQL endpoint; `X-RateLimit-Limit`/`-Remaining` on
//!   every answer; a bad token fails the whole request with HTTP 400
//!   `Invalid token`, public fields included; an unknown `Media` is 404
//!   `Not Found.`; `POST /api/v2/oauth/token` trades a code (once) for a
//!   token, `invalid_grant` otherwise. The viewer's list: `MediaList(userId,
//!   mediaId)` (404 `Not Found.` for no entry), `SaveMediaListEntry`
//!   (creates or updates; `score` in the user's format),
//!   `DeleteMediaListEntry(id)` — only with a token of that user.
//!
//! Both count personal writes per user and title and notice writes to one
//! title that overlap; both can be told to apply a write and then fail
//! (an ambiguous outcome), and Kavita to answer success while storing
//! nothing (its real quirk).

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Mutex,
        atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering},
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
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::docs_fakes::{Canned, Journal, Served, serve};

fn json_answer(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Canned {
    let mut headers = headers;
    headers.push(("content-type", "application/json".into()));
    Canned(status, headers, body.to_string().into_bytes())
}

/// Personal writes a fake saw: per user and title, how many, and whether
/// two for one title were ever in flight at once.
#[derive(Default)]
pub struct Writes {
    counts: Mutex<HashMap<(String, String), u32>>,
    in_flight: Mutex<HashSet<(String, String)>>,
    now: AtomicU32,
    /// The most writes in flight at once, any titles.
    pub most_at_once: AtomicU32,
    /// Writes that started while another for the same title was in flight.
    pub overlaps: AtomicU32,
    /// How long each write takes (to let overlaps show).
    pub delay_ms: AtomicU64,
    /// The next this many writes are applied and then answered 500.
    pub fail_after_apply: AtomicU32,
}

impl Writes {
    /// Writes seen for `user` and `title`.
    pub fn count(&self, user: &str, title: &str) -> u32 {
        self.counts
            .lock()
            .unwrap()
            .get(&(user.to_owned(), title.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    pub fn total(&self) -> u32 {
        self.counts.lock().unwrap().values().sum()
    }

    async fn begin(&self, user: &str, title: &str) {
        let key = (user.to_owned(), title.to_owned());
        *self.counts.lock().unwrap().entry(key.clone()).or_default() += 1;
        if !self.in_flight.lock().unwrap().insert(key) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            // Simulated upstream latency, so concurrent writes overlap.
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }

    fn end(&self, user: &str, title: &str) {
        self.in_flight
            .lock()
            .unwrap()
            .remove(&(user.to_owned(), title.to_owned()));
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether this (applied) write answers 500 instead of success.
    fn fails_after_apply(&self) -> bool {
        self.fail_after_apply
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

// ---------------------------------------------------------------- Kavita

/// A chapter's number, pages and pages read.
type ChapterRead = (f64, u32, u32);

pub struct FakeKavita {
    pub journal: Journal,
    /// API key → user name.
    keys: Mutex<HashMap<String, String>>,
    /// Tokens of older generations are refused (Kavita's key rotated, or
    /// they expired).
    generation: AtomicU64,
    series: HashMap<u64, Value>,
    /// (user, series) on Want to Read.
    pub want_to_read: Mutex<HashSet<(String, u64)>>,
    /// (user, series) → rating.
    pub ratings: Mutex<HashMap<(String, u64), f64>>,
    pub writes: Writes,
    /// The next this many writes answer 200 `true` and store nothing.
    pub ignore_writes: AtomicU32,
    /// (user, series) → chapters of volume 1.
    reading: Mutex<HashMap<(String, u64), Vec<ChapterRead>>>,
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
                (
                    3,
                    json!({ "id": 3, "name": "One Piece", "libraryId": 1, "pages": 20000 }),
                ),
            ]
            .into_iter()
            .collect(),
            want_to_read: Mutex::default(),
            ratings: Mutex::default(),
            writes: Writes::default(),
            ignore_writes: AtomicU32::new(0),
            reading: Mutex::default(),
        }
    }

    /// `user` has read chapters 1..=`through` of `series` (of `chapters`,
    /// ten pages each), and chapter `through + 1` halfway.
    pub fn read(&self, user: &str, series: u64, chapters: u32, through: u32) {
        let list = (1..=chapters)
            .map(|n| {
                let read = match n {
                    n if n <= through => 10,
                    n if n == through + 1 => 5,
                    _ => 0,
                };
                (f64::from(n), 10, read)
            })
            .collect();
        self.reading
            .lock()
            .unwrap()
            .insert((user.to_owned(), series), list);
    }

    /// A Kavita `SeriesDto` as `user` sees it.
    fn series_for(&self, user: &str, id: u64) -> Option<Value> {
        let mut series = self.series.get(&id)?.clone();
        let read: u32 = self
            .reading
            .lock()
            .unwrap()
            .get(&(user.to_owned(), id))
            .map(|chapters| chapters.iter().map(|(_, _, read)| read).sum())
            .unwrap_or(0);
        let rating = self
            .ratings
            .lock()
            .unwrap()
            .get(&(user.to_owned(), id))
            .copied();
        series["pagesRead"] = json!(read);
        series["userRating"] = json!(rating.unwrap_or(0.0));
        series["hasUserRated"] = json!(rating.is_some());
        Some(series)
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
    let Some(user) = fake.user_of(&headers) else {
        return Canned(
            401,
            vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())],
            Vec::new(),
        )
        .into_response();
    };
    if let Some(answer) = kavita_personal(&fake, &user, &method, &seen).await {
        return answer.into_response();
    }
    if let Some(answer) = kavita_progress(&fake, &user, &method, &seen).await {
        return answer.into_response();
    }
    if let Some(answer) = kavita_library(&fake, &user, &method, &seen) {
        return answer.into_response();
    }
    if let Some(id) = seen.path.strip_prefix("/api/Series/") {
        return match id
            .parse::<u64>()
            .ok()
            .and_then(|id| fake.series_for(&user, id))
        {
            Some(series) => json_answer(200, vec![], series).into_response(),
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

/// The library as `user` reads it: series lists (paged by `PageNumber` and
/// `PageSize`), volumes with pages read, metadata with web links.
fn kavita_library(
    fake: &FakeKavita,
    user: &str,
    method: &Method,
    seen: &crate::docs_fakes::Seen,
) -> Option<Canned> {
    let page = |all: Vec<Value>| {
        let number: usize = seen
            .query
            .get("PageNumber")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let size: usize = seen
            .query
            .get("PageSize")
            .and_then(|n| n.parse().ok())
            .unwrap_or(50);
        let items: Vec<Value> = all
            .into_iter()
            .skip((number.max(1) - 1) * size)
            .take(size)
            .collect();
        json_answer(200, vec![], json!(items))
    };
    let mut ids: Vec<u64> = fake.series.keys().copied().collect();
    ids.sort();
    match (method.clone(), seen.path.as_str()) {
        (Method::POST, "/api/Series/all-v2") => Some(page(
            ids.iter()
                .filter_map(|id| fake.series_for(user, *id))
                .collect(),
        )),
        (Method::POST, "/api/want-to-read/v2") => {
            let wanted = fake.want_to_read.lock().unwrap().clone();
            Some(page(
                ids.iter()
                    .filter(|id| wanted.contains(&(user.to_owned(), **id)))
                    .filter_map(|id| fake.series_for(user, *id))
                    .collect(),
            ))
        }
        (Method::GET, "/api/Series/volumes") => {
            let id: u64 = seen.query.get("seriesId")?.parse().ok()?;
            let chapters = fake
                .reading
                .lock()
                .unwrap()
                .get(&(user.to_owned(), id))
                .cloned()
                .unwrap_or_default();
            let chapters: Vec<Value> = chapters
                .iter()
                .map(|(number, pages, read)| {
                    json!({ "id": chapter_id(id, *number), "volumeId": id * 100,
                        "minNumber": number, "maxNumber": number, "range": number.to_string(),
                        "pages": pages, "pagesRead": read, "isSpecial": false })
                })
                .collect();
            Some(json_answer(
                200,
                vec![],
                json!([{ "id": id * 100, "minNumber": 1, "maxNumber": 1, "name": "1",
                    "chapters": chapters }]),
            ))
        }
        (Method::GET, "/api/Series/metadata") => {
            let id: u64 = seen.query.get("seriesId")?.parse().ok()?;
            let links = match id {
                1 => {
                    "https://mangadex.org/title/yotsuba,https://anilist.co/manga/104463/Yotsuba-to"
                }
                _ => "",
            };
            Some(json_answer(
                200,
                vec![],
                json!({ "seriesId": id, "webLinks": links }),
            ))
        }
        _ => None,
    }
}

/// The id the fake gives chapter `number` of `series` (its only volume is
/// `series * 100`).
pub fn chapter_id(series: u64, number: f64) -> u64 {
    series * 1000 + number as u64
}

/// `POST /api/Reader/progress` (Kavita's `ProgressDto`: `volumeId`,
/// `chapterId`, `pageNum`, `seriesId`, `libraryId`, all required, else
/// 400): sets the chapter's pages read (at most its pages) and answers
/// `true` — also when told to store nothing. `GET /api/Reader/get-progress
/// ?chapterId=`: the chapter's `ProgressDto`, zeroed when nothing is read.
async fn kavita_progress(
    fake: &FakeKavita,
    user: &str,
    method: &Method,
    seen: &crate::docs_fakes::Seen,
) -> Option<Canned> {
    let find = |series: u64, chapter: u64| {
        let reading = fake.reading.lock().unwrap();
        let chapters = reading.get(&(user.to_owned(), series))?;
        chapters
            .iter()
            .position(|(number, _, _)| chapter_id(series, *number) == chapter)
    };
    match (method.clone(), seen.path.as_str()) {
        (Method::POST, "/api/Reader/progress") => {
            let field = |name: &str| seen.body.get(name).and_then(Value::as_u64);
            let (Some(volume), Some(chapter), Some(page), Some(series), Some(library)) = (
                field("volumeId"),
                field("chapterId"),
                field("pageNum"),
                field("seriesId"),
                field("libraryId"),
            ) else {
                return Some(json_answer(
                    400,
                    vec![],
                    json!({ "errors": { "ProgressDto": ["volumeId, chapterId, pageNum, seriesId and libraryId are required"] } }),
                ));
            };
            let known = fake
                .series
                .get(&series)
                .and_then(|s| s["libraryId"].as_u64());
            let Some(index) =
                find(series, chapter).filter(|_| volume == series * 100 && known == Some(library))
            else {
                return Some(Canned(400, vec![], b"Could not find Chapter".to_vec()));
            };
            fake.writes.begin(user, &series.to_string()).await;
            let ignored = fake
                .ignore_writes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !ignored {
                let mut reading = fake.reading.lock().unwrap();
                let entry = &mut reading.get_mut(&(user.to_owned(), series))?[index];
                entry.2 = u32::try_from(page).unwrap_or(u32::MAX).min(entry.1);
            }
            let failed = fake.writes.fails_after_apply();
            fake.writes.end(user, &series.to_string());
            Some(if failed {
                Canned(500, vec![], b"Internal Server Error".to_vec())
            } else {
                json_answer(200, vec![], json!(true))
            })
        }
        (Method::GET, "/api/Reader/get-progress") => {
            let chapter: u64 = seen.query.get("chapterId")?.parse().ok()?;
            let series = chapter / 1000;
            let read = find(series, chapter).and_then(|index| {
                let reading = fake.reading.lock().unwrap();
                let (_, _, read) = reading.get(&(user.to_owned(), series))?[index];
                (read > 0).then_some(read)
            });
            Some(json_answer(
                200,
                vec![],
                match read {
                    Some(page) => json!({ "volumeId": series * 100, "chapterId": chapter,
                        "pageNum": page, "seriesId": series, "libraryId": 1,
                        "bookScrollId": null, "lastModifiedUtc": "2026-12-01T00:00:00Z" }),
                    None => json!({ "volumeId": 0, "chapterId": 0, "pageNum": 0,
                        "seriesId": 0, "libraryId": 0, "bookScrollId": null,
                        "lastModifiedUtc": "0001-01-01T00:00:00" }),
                },
            ))
        }
        _ => None,
    }
}

impl FakeKavita {
    /// The pages `user` has read of each chapter of `series`, in order.
    pub fn pages_read(&self, user: &str, series: u64) -> Vec<u32> {
        self.reading
            .lock()
            .unwrap()
            .get(&(user.to_owned(), series))
            .map(|chapters| chapters.iter().map(|(_, _, read)| *read).collect())
            .unwrap_or_default()
    }
}

/// Kavita's Want to Read and rating routes, for `user`.
async fn kavita_personal(
    fake: &FakeKavita,
    user: &str,
    method: &Method,
    seen: &crate::docs_fakes::Seen,
) -> Option<Canned> {
    match (method.clone(), seen.path.as_str()) {
        (Method::GET, "/api/want-to-read") => {
            let series: u64 = seen.query.get("seriesId")?.parse().ok()?;
            let listed = fake
                .want_to_read
                .lock()
                .unwrap()
                .contains(&(user.to_owned(), series));
            Some(json_answer(200, vec![], json!(listed)))
        }
        (Method::POST, "/api/want-to-read/add-series" | "/api/want-to-read/remove-series")
        | (Method::POST, "/api/Series/update-rating") => {
            let series: Vec<u64> = match seen.path.as_str() {
                "/api/Series/update-rating" => vec![seen.body["seriesId"].as_u64()?],
                _ => serde_json::from_value(seen.body["seriesIds"].clone()).ok()?,
            };
            for id in &series {
                fake.writes.begin(user, &id.to_string()).await;
            }
            let ignored = fake
                .ignore_writes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !ignored {
                for id in &series {
                    let key = (user.to_owned(), *id);
                    match seen.path.as_str() {
                        "/api/want-to-read/add-series" => {
                            fake.want_to_read.lock().unwrap().insert(key);
                        }
                        "/api/want-to-read/remove-series" => {
                            fake.want_to_read.lock().unwrap().remove(&key);
                        }
                        _ => {
                            let rating = seen.body["userRating"].as_f64()?;
                            fake.ratings.lock().unwrap().insert(key, rating);
                        }
                    }
                }
            }
            let failed = fake.writes.fails_after_apply();
            for id in &series {
                fake.writes.end(user, &id.to_string());
            }
            Some(if failed {
                Canned(500, vec![], b"Internal Server Error".to_vec())
            } else {
                // Kavita answers success whether or not it stored anything.
                json_answer(200, vec![], json!(true))
            })
        }
        _ => None,
    }
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
    /// (user id, media id) → the list entry's fields.
    pub entries: Mutex<HashMap<(i64, i64), Value>>,
    pub writes: Writes,
    /// Each user's score format.
    pub score_format: Mutex<String>,
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
            entries: Mutex::default(),
            writes: Writes::default(),
            score_format: Mutex::new("POINT_10".into()),
        }
    }

    /// Puts an entry on `user`'s list (as if made on AniList's site).
    pub fn put_entry(&self, user: i64, media: i64, mut fields: Value) {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1000;
        fields["id"] = json!(id);
        fields["mediaId"] = json!(media);
        self.entries.lock().unwrap().insert((user, media), fields);
    }

    pub fn entry(&self, user: i64, media: i64) -> Option<Value> {
        self.entries.lock().unwrap().get(&(user, media)).cloned()
    }

    /// The user a bearer token belongs to, if any.
    fn user_of(&self, seen: &crate::docs_fakes::Seen) -> Option<i64> {
        let token = seen.authorization.as_deref()?.strip_prefix("Bearer ")?;
        self.tokens.lock().unwrap().get(token).map(|(id, _)| *id)
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
        (Method::POST, "/graphql") => {
            let query = seen.body["query"].as_str().unwrap_or_default().to_owned();
            let write =
                query.contains("SaveMediaListEntry") || query.contains("DeleteMediaListEntry");
            match (write, fake.user_of(&seen)) {
                (true, Some(user)) => {
                    let media = write_target(&fake, user, &seen.body["variables"]);
                    fake.writes.begin(&user.to_string(), &media).await;
                    let mut answer = graphql(&fake, &seen);
                    if answer.0 == 200 && fake.writes.fails_after_apply() {
                        answer = json_answer(
                            500,
                            vec![],
                            json!({ "errors": [{ "message": "Internal Server Error", "status": 500 }], "data": null }),
                        );
                    }
                    fake.writes.end(&user.to_string(), &media);
                    answer.into_response()
                }
                _ => graphql(&fake, &seen).into_response(),
            }
        }
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
    if let Some(answer) = personal(
        fake,
        viewer.as_ref().map(|(id, _)| *id),
        query,
        variables,
        &limits,
    ) {
        return answer;
    }
    if query.contains("Viewer") {
        let format = fake.score_format.lock().unwrap().clone();
        return match viewer {
            Some((id, name)) => json_answer(
                200,
                limits,
                json!({ "data": { "Viewer": { "id": id, "name": name,
                    "mediaListOptions": { "scoreFormat": format } } } }),
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

/// The media a write names (Delete names the entry's id).
fn write_target(fake: &FakeAniList, user: i64, variables: &Value) -> String {
    if let Some(media) = variables["mediaId"].as_i64() {
        return media.to_string();
    }
    let id = variables["id"].as_i64().unwrap_or_default();
    fake.entries
        .lock()
        .unwrap()
        .iter()
        .find(|((owner, _), entry)| *owner == user && entry["id"] == id)
        .map(|((_, media), _)| media.to_string())
        .unwrap_or_default()
}

/// The list operations, for the token's user only.
fn personal(
    fake: &FakeAniList,
    viewer: Option<i64>,
    query: &str,
    variables: &Value,
    limits: &[(&'static str, String)],
) -> Option<Canned> {
    let unauthorized = || {
        json_answer(
            401,
            limits.to_vec(),
            json!({ "errors": [{ "message": "Unauthorized.", "status": 401 }], "data": null }),
        )
    };
    let not_found = |field: &str| {
        let mut data = serde_json::Map::new();
        data.insert(field.to_owned(), Value::Null);
        json_answer(
            404,
            limits.to_vec(),
            json!({ "errors": [{ "message": "Not Found.", "status": 404 }], "data": data }),
        )
    };
    if query.contains("SaveMediaListEntry") {
        let Some(user) = viewer else {
            return Some(unauthorized());
        };
        let media = variables["mediaId"].as_i64()?;
        if !fake.media.contains_key(&media) {
            return Some(not_found("SaveMediaListEntry"));
        }
        let mut entries = fake.entries.lock().unwrap();
        let next = fake.next.fetch_add(1, Ordering::SeqCst) + 1000;
        let entry = entries.entry((user, media)).or_insert_with(|| {
            json!({ "id": next, "mediaId": media, "status": "CURRENT", "progress": 0,
                "score": 0, "notes": null })
        });
        for field in ["progress", "score", "status"] {
            if !variables[field].is_null() {
                entry[field] = variables[field].clone();
            }
        }
        if query.contains("status: PLANNING") {
            entry["status"] = json!("PLANNING");
        }
        let answer = entry.clone();
        return Some(json_answer(
            200,
            limits.to_vec(),
            json!({ "data": { "SaveMediaListEntry": answer } }),
        ));
    }
    if query.contains("DeleteMediaListEntry") {
        let Some(user) = viewer else {
            return Some(unauthorized());
        };
        let id = variables["id"].as_i64()?;
        let mut entries = fake.entries.lock().unwrap();
        let key = entries
            .iter()
            .find(|((owner, _), entry)| *owner == user && entry["id"] == id)
            .map(|(key, _)| *key);
        let deleted = key.and_then(|key| entries.remove(&key)).is_some();
        return Some(json_answer(
            200,
            limits.to_vec(),
            json!({ "data": { "DeleteMediaListEntry": { "deleted": deleted } } }),
        ));
    }
    if query.contains("MediaList(") {
        let Some(viewer) = viewer else {
            return Some(unauthorized());
        };
        let user = variables["userId"].as_i64()?;
        let media = variables["mediaId"].as_i64()?;
        // A list is public on AniList, but the fake only serves its owner.
        if user != viewer {
            return Some(not_found("MediaList"));
        }
        return Some(match fake.entries.lock().unwrap().get(&(user, media)) {
            Some(entry) => json_answer(
                200,
                limits.to_vec(),
                json!({ "data": { "MediaList": entry } }),
            ),
            None => not_found("MediaList"),
        });
    }
    None
}
