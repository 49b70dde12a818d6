//! The web client (`frontend/`): its build (`frontend/dist`) is embedded in
//! the binary, or read from `TRELLIS_WEB_DIR` in development.
//!
//! - `/assets/…` are content-hashed files: cached for a year (`immutable`)
//!   with an ETag, sent precompressed (`.br`, `.gz` beside them) when the
//!   client accepts it; a missing asset is a 404, never the app.
//! - The app's `index.html` (no-cache, a strict CSP) answers `GET`/`HEAD`
//!   asking for HTML (`Accept: text/html`) on any path outside the API
//!   prefixes, so client routes (`/read/…`, `/live/…`) load the app and
//!   API paths keep their JSON 404s.
//! - `GET /graphql` is the playground's page (`graphiql.html`), same CSP.
//!
//! A Rust-only build (no `frontend/dist`) compiles and serves a page that
//! says how to build the client.

use std::{borrow::Cow, path::PathBuf, sync::Arc};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::headers::accepts_html;

/// The built client, embedded at compile time (read from disk in debug
/// builds). `allow_missing`: a build without `frontend/dist` has no files.
#[derive(rust_embed::Embed)]
#[folder = "frontend/dist/"]
#[allow_missing = true]
struct Dist;

/// Paths that belong to the server's APIs: never answered with the app.
/// Client routes must not start with one (the test below and
/// `tests/api/web.rs` check `frontend/src/routes.json`).
pub const API_PREFIXES: &[&str] = &[
    "/graphql",
    "/fever",
    "/reader",
    "/accounts",
    "/tasks",
    "/resources",
    "/gateway/oauth",
    "/auth/oidc",
    "/metrics",
    "/healthz",
    "/readyz",
    "/assets",
    "/icons",
    "/mirror",
];

/// The policy of the app's and the playground's pages: our own scripts,
/// styles and images only, nothing inline, no other origin. `connect-src
/// 'self'` covers the same-origin WebSocket.
pub const APP_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; font-src 'self' data:; connect-src 'self'; manifest-src 'self'; \
     worker-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Whether `path` is an API path (one of [`API_PREFIXES`] or below it).
pub fn is_api_path(path: &str) -> bool {
    API_PREFIXES.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// One file of the build.
struct File {
    bytes: Cow<'static, [u8]>,
    sha256: [u8; 32],
}

/// Where the client's files come from.
#[derive(Clone, Default)]
pub struct Frontend {
    /// `TRELLIS_WEB_DIR`: serve this folder instead of the embedded build.
    dir: Option<Arc<PathBuf>>,
}

impl Frontend {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Frontend {
            dir: dir.map(Arc::new),
        }
    }

    fn file(&self, path: &str) -> Option<File> {
        // Only plain relative names: no `..`, no absolute paths, no backslashes.
        if path.is_empty()
            || path.starts_with('/')
            || path.contains('\\')
            || path
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return None;
        }
        match &self.dir {
            Some(dir) => {
                let bytes = std::fs::read(dir.join(path)).ok()?;
                let sha256 = Sha256::digest(&bytes).into();
                Some(File {
                    bytes: Cow::Owned(bytes),
                    sha256,
                })
            }
            None => Dist::get(path).map(|file| File {
                sha256: file.metadata.sha256_hash(),
                bytes: file.data,
            }),
        }
    }

    /// `/assets/…` and the root files the app names (`/sw.js`, the icon,
    /// the manifest).
    pub fn routes(&self) -> Router {
        Router::new()
            .route("/assets/{*path}", get(asset))
            .with_state(self.clone())
    }

    /// An HTML page of the build (`index.html`, `graphiql.html`): no-cache,
    /// the app's CSP. Without a build: a page that says how to make one.
    pub fn page(&self, name: &str) -> Response {
        let mut response = match self.file(name) {
            Some(file) => (
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                file.bytes.into_owned(),
            )
                .into_response(),
            None => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                NOT_BUILT,
            )
                .into_response(),
        };
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(APP_CSP),
        );
        response
    }

    /// What the router answers for a path no route matched: the app for a
    /// browser asking for a page outside the API, a root file of the build
    /// (`/sw.js`), else the JSON 404.
    pub fn fallback(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
        let path = uri.path();
        if (method == Method::GET || method == Method::HEAD) && !is_api_path(path) {
            if let Some(name) = root_file_name(path)
                && let Some(file) = self.file(name)
            {
                return root_file(name, file, headers);
            }
            if accepts_html(headers) {
                return self.page("index.html");
            }
        }
        not_found()
    }
}

/// A file directly under the build's root (`/sw.js`), never its pages.
fn root_file_name(path: &str) -> Option<&str> {
    let name = path.strip_prefix('/')?;
    (!name.is_empty() && !name.contains('/') && !name.ends_with(".html")).then_some(name)
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({ "errors": [{ "message": "no such route", "extensions": { "code": "NOT_FOUND" } }] })),
    )
        .into_response()
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next().unwrap_or_default() {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "html" => "text/html; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn etag(sha256: &[u8; 32], encoding: Option<&str>) -> String {
    let hex: String = sha256[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    match encoding {
        Some(encoding) => format!("\"{hex}-{encoding}\""),
        None => format!("\"{hex}\""),
    }
}

/// The encodings the client takes, best first, among those we precompress.
fn accepted_encodings(headers: &HeaderMap) -> Vec<&'static str> {
    let offered: Vec<(String, f32)> = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|part| {
            let mut pieces = part.split(';');
            let name = pieces
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let quality = pieces
                .find_map(|piece| piece.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (name, quality)
        })
        .collect();
    ["br", "gzip"]
        .into_iter()
        .filter(|encoding| {
            offered
                .iter()
                .any(|(name, quality)| name == encoding && *quality > 0.0)
        })
        .collect()
}

/// `GET /assets/{*path}`.
async fn asset(
    State(frontend): State<Frontend>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let name = format!("assets/{path}");
    let Some(file) = frontend.file(&name) else {
        return not_found();
    };
    let mime = content_type(&name);
    let mut chosen = (file, None);
    for encoding in accepted_encodings(&headers) {
        let suffix = if encoding == "br" { "br" } else { "gz" };
        if let Some(compressed) = frontend.file(&format!("{name}.{suffix}")) {
            chosen = (compressed, Some(encoding));
            break;
        }
    }
    let (file, encoding) = chosen;
    let tag = etag(&file.sha256, encoding);
    let mut response = if super::matches_etag(&headers, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, mime)], file.bytes.into_owned()).into_response()
    };
    let out = response.headers_mut();
    out.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(value) = HeaderValue::from_str(&tag) {
        out.insert(header::ETAG, value);
    }
    if let Some(encoding) = encoding {
        out.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    response
}

/// A root file (`/sw.js`, `/favicon.svg`): not hashed, so revalidated on
/// every use (`no-cache` + ETag).
fn root_file(name: &str, file: File, headers: &HeaderMap) -> Response {
    let tag = etag(&file.sha256, None);
    let mut response = if super::matches_etag(headers, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, content_type(name))],
            file.bytes.into_owned(),
        )
            .into_response()
    };
    let out = response.headers_mut();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&tag) {
        out.insert(header::ETAG, value);
    }
    response
}

const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>Trellis</title>\
<h1>The web client is not built</h1>\
<p>This server was built without <code>frontend/dist</code>. Build the client first \
(<code>npm --prefix frontend ci &amp;&amp; npm --prefix frontend run build</code>), then the server, \
or point <code>TRELLIS_WEB_DIR</code> at a built <code>frontend/dist</code>.</p>\
<p>The GraphQL API answers at <code>POST /graphql</code> and <code>/graphql/ws</code>.</p>";

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct RouteTable {
        routes: Vec<ClientRoute>,
    }

    #[derive(serde::Deserialize)]
    struct ClientRoute {
        path: String,
        example: String,
    }

    fn client_routes() -> Vec<ClientRoute> {
        let table: RouteTable =
            serde_json::from_str(include_str!("../../frontend/src/routes.json"))
                .expect("frontend/src/routes.json is the client's route table");
        table.routes
    }

    #[test]
    fn no_client_route_lies_under_an_api_prefix() {
        let routes = client_routes();
        assert!(routes.len() >= 10, "the table lists the client's pages");
        for route in routes {
            // The pattern's fixed part (up to its first parameter) and the example.
            let fixed: String = route
                .path
                .split('/')
                .take_while(|part| !part.starts_with(':') && *part != "*")
                .collect::<Vec<_>>()
                .join("/");
            let example = route.example.split('?').next().unwrap_or_default();
            for path in [fixed.as_str(), example] {
                assert!(
                    !is_api_path(if path.is_empty() { "/" } else { path }),
                    "client route {} ({path}) is under an API prefix",
                    route.path
                );
            }
            // A parameter right under a prefix's parent could take the
            // prefix's next segment (`/gateway/:x` would match `/gateway/oauth`).
            for prefix in API_PREFIXES {
                let (parent, _) = prefix.rsplit_once('/').unwrap_or_default();
                if parent.is_empty() {
                    continue;
                }
                let pattern_under_parent = route
                    .path
                    .strip_prefix(parent)
                    .and_then(|rest| rest.strip_prefix('/'))
                    .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('*'));
                assert!(
                    !pattern_under_parent,
                    "client route {} could match {prefix}",
                    route.path
                );
            }
        }
    }

    #[test]
    fn api_paths_are_matched_by_whole_segments() {
        assert!(is_api_path("/graphql"));
        assert!(is_api_path("/graphql/ws"));
        assert!(is_api_path("/gateway/oauth/anilist/callback"));
        assert!(is_api_path("/assets/missing.js"));
        assert!(!is_api_path("/read"), "`/read` is not `/reader`");
        assert!(!is_api_path("/gateway"));
        assert!(!is_api_path("/graphqlx"));
        assert!(!is_api_path("/"));
    }

    #[test]
    fn only_plain_relative_names_are_read_from_disk() {
        let dir = std::env::temp_dir().join(format!("trellis-web-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/a.js"), "x").unwrap();
        let frontend = Frontend::new(Some(dir.clone()));
        assert!(frontend.file("assets/a.js").is_some());
        for bad in [
            "../Cargo.toml",
            "assets/../../x",
            "/etc/passwd",
            "assets//a.js",
            "assets\\a.js",
            "",
        ] {
            assert!(frontend.file(bad).is_none(), "{bad} must not be read");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn encodings_follow_the_clients_accept_encoding() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip, deflate, br;q=0"),
        );
        assert_eq!(accepted_encodings(&headers), vec!["gzip"]);
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("br, gzip"),
        );
        assert_eq!(accepted_encodings(&headers), vec!["br", "gzip"]);
        headers.remove(header::ACCEPT_ENCODING);
        assert!(accepted_encodings(&headers).is_empty());
    }

    #[test]
    fn html_is_asked_for_by_media_range() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
        );
        assert!(accepts_html(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!accepts_html(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(
            !accepts_html(&headers),
            "only an explicit text/html gets the app"
        );
    }
}
