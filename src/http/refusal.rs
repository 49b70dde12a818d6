//! A refusal at an address a browser was sent to (the OAuth and OIDC
//! callbacks): a person there would otherwise face a JSON document. A
//! request that asks for HTML gets a small page with the same status, the
//! message and a way back; any other client keeps the JSON error.

use axum::{
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};

use super::headers::accepts_html;
use crate::error::AppError;

/// Where the page's one link leads, and its words.
pub struct Back {
    pub path: &'static str,
    pub label: &'static str,
}

/// `error` as a page for a browser, or as our JSON error for anyone else.
pub fn refusal(headers: &HeaderMap, error: AppError, title: &str, back: Back) -> Response {
    if !accepts_html(headers) {
        return error.into_response();
    }
    let message = error.to_string();
    let code = error.code();
    // The status and any `Retry-After` stay as the JSON answer has them.
    let (mut parts, _) = error.into_response().into_parts();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    let page = page(title, &message, code, &back);
    Response::from_parts(parts, page.into())
}

fn page(title: &str, message: &str, code: &str, back: &Back) -> String {
    let title = ammonia::clean_text(title);
    let message = ammonia::clean_text(message);
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · Trellis</title>\n<main>\n<h1>{title}</h1>\n<p>{message}</p>\n\
         <p>Error code: <code>{code}</code></p>\n<p><a href=\"{path}\">{label}</a></p>\n\
         </main>\n</html>\n",
        path = back.path,
        label = back.label,
    )
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    const BACK: Back = Back {
        path: "/gateway",
        label: "Back to the gateway",
    };

    #[tokio::test]
    async fn a_browser_gets_a_page_with_the_same_status_and_an_escaped_message() {
        let error = AppError::bad_input("state", "<script>alert(1)</script> expired");
        let response = refusal(
            &accept("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
            error,
            "The link was not made",
            BACK,
        );
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(!body.contains("<script>"), "{body}");
        assert!(body.contains("&lt;script&gt;"), "{body}");
        assert!(body.contains("<code>BAD_USER_INPUT</code>"), "{body}");
        assert!(body.contains(r#"<a href="/gateway">Back to the gateway</a>"#));
    }

    #[tokio::test]
    async fn other_clients_keep_the_json_error_and_its_headers() {
        let json = refusal(
            &accept("application/json"),
            AppError::RateLimited { retry_after: 7 },
            "Not signed in",
            BACK,
        );
        assert_eq!(json.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(json.headers()[header::RETRY_AFTER], "7");
        let page = refusal(
            &accept("text/html"),
            AppError::RateLimited { retry_after: 7 },
            "Not signed in",
            BACK,
        );
        assert_eq!(page.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(page.headers()[header::RETRY_AFTER], "7");
    }
}
