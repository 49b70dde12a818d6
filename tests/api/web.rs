//! Serving the web client: the app for client routes, never for API paths;
//! hashed assets cached for good and sent precompressed; the playground as
//! our own page. The server reads a fixture build from `TRELLIS_WEB_DIR`,
//! so these tests hold whether or not `frontend/dist` was built.

use std::path::Path;

use reqwest::{Method, StatusCode, header};
use serde_json::Value;

use crate::{
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
    per_backend,
};

per_backend!(
    [sqlite => Sqlite];
    client_routes_get_the_app_and_api_paths_never_do,
    assets_are_immutable_have_etags_and_come_precompressed,
    the_playground_is_our_own_page,
    root_files_are_revalidated_and_a_missing_build_says_so,
);

const INDEX: &str = "<!doctype html><title>fixture app</title><script type=\"module\" src=\"/assets/app-3f2a.js\"></script>";
const PLAYGROUND: &str = "<!doctype html><title>fixture playground</title>";
const SCRIPT: &str = "console.log('the app');";
// Stand-ins for the precompressed copies: the server sends them as they are.
const SCRIPT_BR: &[u8] = b"brotli bytes";
const SCRIPT_GZ: &[u8] = b"gzip bytes";

/// A built client, as `npm run build` lays it out.
pub fn fixture(dir: &Path) {
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("index.html"), INDEX).unwrap();
    std::fs::write(dir.join("graphiql.html"), PLAYGROUND).unwrap();
    std::fs::write(
        dir.join("sw.js"),
        "self.addEventListener('fetch', () => {});",
    )
    .unwrap();
    std::fs::write(dir.join("assets/app-3f2a.js"), SCRIPT).unwrap();
    std::fs::write(dir.join("assets/app-3f2a.js.br"), SCRIPT_BR).unwrap();
    std::fs::write(dir.join("assets/app-3f2a.js.gz"), SCRIPT_GZ).unwrap();
    std::fs::write(dir.join("assets/app-3f2a.css"), "body{}").unwrap();
}

/// A server that serves the fixture build; the directory lives as long as it.
pub async fn spawn_with_build(backend: Backend) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_WEB_DIR", dir.path().to_str().unwrap()),
    )
    .await;
    (app, dir)
}

/// A client that sees bodies and encodings as sent (no decompression).
fn raw_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_gzip()
        .no_brotli()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

#[derive(serde::Deserialize)]
struct RouteTable {
    routes: Vec<ClientRoute>,
}

#[derive(serde::Deserialize)]
struct ClientRoute {
    path: String,
    example: String,
}

fn assert_is_app(response: &reqwest::Response, what: &str) {
    assert_eq!(response.status(), StatusCode::OK, "{what}");
    let headers = response.headers();
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{what}"
    );
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache", "{what}");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert_strict_csp(csp);
}

/// No inline script or style, no other origin.
fn assert_strict_csp(csp: &str) {
    for directive in csp.split(';').map(str::trim) {
        assert!(!directive.contains("unsafe-inline"), "{csp}");
        assert!(!directive.contains("unsafe-eval"), "{csp}");
        assert!(!directive.contains("http"), "a third-party origin in {csp}");
        assert!(!directive.contains('*'), "a wildcard in {csp}");
    }
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
}

async fn client_routes_get_the_app_and_api_paths_never_do(backend: Backend) {
    let (app, _build) = spawn_with_build(backend).await;
    let client = raw_client();
    let table: RouteTable =
        serde_json::from_str(include_str!("../../frontend/src/routes.json")).unwrap();
    assert!(table.routes.len() >= 10);
    for route in &table.routes {
        for method in [Method::GET, Method::HEAD] {
            let response = client
                .request(method.clone(), app.url(&route.example))
                .header(header::ACCEPT, BROWSER_ACCEPT)
                .send()
                .await
                .unwrap();
            let what = format!("{method} {} ({})", route.example, route.path);
            assert_is_app(&response, &what);
            let body = response.text().await.unwrap();
            if method == Method::GET {
                assert_eq!(body, INDEX, "{what}");
            } else {
                assert!(body.is_empty(), "{what}");
            }
        }
        // A client that does not ask for HTML (fetch, curl) gets the API's 404.
        let json = client
            .get(app.url(&route.example))
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .unwrap();
        if route.example != "/" {
            assert_eq!(json.status(), StatusCode::NOT_FOUND, "{}", route.example);
            let body: Value = json.json().await.unwrap();
            assert_eq!(body["errors"][0]["extensions"]["code"], "NOT_FOUND");
        }
        // Only reads get the app.
        let post = client
            .post(app.url(&route.example))
            .header(header::ACCEPT, BROWSER_ACCEPT)
            .send()
            .await
            .unwrap();
        assert_ne!(post.text().await.unwrap(), INDEX, "POST {}", route.example);
    }
    // Under every API prefix a browser gets the API's answer, never the app.
    for path in [
        "/graphql/nothing",
        "/fever/nothing",
        "/reader/api/0/nothing",
        "/accounts/ClientLogin/nothing",
        "/tasks/nothing/else",
        "/resources/nothing/else",
        "/gateway/oauth/anilist/nothing",
        "/metrics/nothing",
        "/healthz/nothing",
        "/readyz/nothing",
        "/assets/nothing.js",
        "/icons/nothing/else",
        "/mirror/assets/ab/nothing",
    ] {
        let response = client
            .get(app.url(path))
            .header(header::ACCEPT, BROWSER_ACCEPT)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_ne!(body, INDEX, "{path} answered the app");
        assert!(status.is_client_error(), "{path}: {status}");
    }
}

async fn assets_are_immutable_have_etags_and_come_precompressed(backend: Backend) {
    let (app, _build) = spawn_with_build(backend).await;
    let client = raw_client();
    let url = app.url("/assets/app-3f2a.js");

    let plain = client.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), StatusCode::OK);
    assert_eq!(
        plain.headers()[header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    assert!(
        plain.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
    let etag = plain.headers()[header::ETAG].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert_eq!(plain.text().await.unwrap(), SCRIPT);

    let brotli = client
        .get(&url)
        .header(header::ACCEPT_ENCODING, "gzip, deflate, br, zstd")
        .send()
        .await
        .unwrap();
    assert_eq!(brotli.headers()[header::CONTENT_ENCODING], "br");
    assert_eq!(brotli.headers()[header::VARY], "accept-encoding");
    let brotli_etag = brotli.headers()[header::ETAG].to_str().unwrap().to_owned();
    assert_ne!(brotli_etag, etag, "each encoding has its own tag");
    assert_eq!(brotli.bytes().await.unwrap().as_ref(), SCRIPT_BR);

    let gzip = client
        .get(&url)
        .header(header::ACCEPT_ENCODING, "gzip, br;q=0")
        .send()
        .await
        .unwrap();
    assert_eq!(gzip.headers()[header::CONTENT_ENCODING], "gzip");
    assert_eq!(gzip.bytes().await.unwrap().as_ref(), SCRIPT_GZ);

    let revalidated = client
        .get(&url)
        .header(header::IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), StatusCode::NOT_MODIFIED);
    assert!(revalidated.bytes().await.unwrap().is_empty());
    let stale = client
        .get(&url)
        .header(header::IF_NONE_MATCH, "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::OK);

    // A file the server compresses on the fly still gets the asset headers.
    let css = client
        .get(app.url("/assets/app-3f2a.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    assert!(
        css.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );

    // A missing asset is a 404, never the app, even for a browser.
    for missing in ["/assets/app-0000.js", "/assets/", "/assets/sub/app-3f2a.js"] {
        let response = client
            .get(app.url(missing))
            .header(header::ACCEPT, BROWSER_ACCEPT)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{missing}");
        assert_ne!(response.text().await.unwrap(), INDEX, "{missing}");
    }
}

async fn the_playground_is_our_own_page(backend: Backend) {
    let (app, _build) = spawn_with_build(backend).await;
    let response = raw_client().get(app.url("/graphql")).send().await.unwrap();
    assert_is_app(&response, "GET /graphql");
    assert_eq!(response.headers()["x-frame-options"], "DENY");
    assert_eq!(response.text().await.unwrap(), PLAYGROUND);
}

async fn root_files_are_revalidated_and_a_missing_build_says_so(backend: Backend) {
    let (app, _build) = spawn_with_build(backend).await;
    let client = raw_client();
    let worker = client.get(app.url("/sw.js")).send().await.unwrap();
    assert_eq!(worker.status(), StatusCode::OK);
    assert_eq!(worker.headers()[header::CACHE_CONTROL], "no-cache");
    assert!(
        worker.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let etag = worker.headers()[header::ETAG].clone();
    let again = client
        .get(app.url("/sw.js"))
        .header(header::IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // Pages are only served as the app's routes, not by their file names.
    let named = client
        .get(app.url("/graphiql.html"))
        .header(header::ACCEPT, "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), StatusCode::NOT_FOUND);

    // A server whose build is missing says how to make one.
    let empty = tempfile::tempdir().unwrap();
    let bare = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_WEB_DIR", empty.path().to_str().unwrap()),
    )
    .await;
    let page = client
        .get(bare.url("/read"))
        .header(header::ACCEPT, BROWSER_ACCEPT)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_strict_csp(
        page.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap(),
    );
    assert!(page.text().await.unwrap().contains("npm --prefix frontend"));
}
