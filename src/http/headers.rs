//! Response headers. Security: every answer says `nosniff` and sends no referrer;
//! every HTML answer also refuses to be framed and carries a Content
//! Security Policy (its own, or a default that allows nothing).

use axum::{
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::Response,
};
use base64::Engine;
use sha2::{Digest, Sha256};

/// The policy of an HTML answer that did not set its own.
const DEFAULT_HTML_CSP: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("no-referrer"));
    let html = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("text/html"));
    if html {
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers
            .entry(header::CONTENT_SECURITY_POLICY)
            .or_insert(HeaderValue::from_static(DEFAULT_HTML_CSP));
    }
    response
}

/// Whether the request names `text/html` among the types it accepts (a
/// browser navigating; `*/*` alone is not enough).
pub fn accepts_html(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|range| {
            range
                .split(';')
                .next()
                .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("text/html"))
        })
}

/// A request refused for its size (413) was not read to its end, so its
/// connection cannot carry another request: the answer says it closes, and
/// a client does not send its next request into a socket being closed.
pub async fn close_after_unread_body(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The CSP source expressions (`'sha256-…'`) for the inline elements
/// `<tag>…</tag>` of a page (those without a `src`), so a page we render
/// ourselves can run its own inline code and nothing injected.
pub fn inline_hashes(html: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut hashes = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(head_end) = after.find('>') else {
            break;
        };
        let attributes = &after[..head_end];
        // `<scripts…` or `<styled…` are other tags: look on after the name.
        if !(attributes.is_empty() || attributes.starts_with(char::is_whitespace)) {
            rest = after;
            continue;
        }
        let body = &after[head_end + 1..];
        let Some(body_end) = body.find(&close) else {
            break;
        };
        // With a `src`, the element is not inline.
        if !attributes.contains("src=") {
            let digest = Sha256::digest(&body.as_bytes()[..body_end]);
            let encoded = base64::engine::general_purpose::STANDARD.encode(digest);
            hashes.push(format!("'sha256-{encoded}'"));
        }
        rest = &body[body_end + close.len()..];
    }
    hashes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_only_inline_elements_of_the_tag() {
        let page = "<style>a{}</style><script src=\"x.js\"></script>\
                    <script>go()</script><scripts>no</scripts><script type=\"module\">m()</script>";
        // sha256("go()") and sha256("m()"), computed with `printf %s go\(\) | sha256sum | xxd -r -p | base64`.
        assert_eq!(
            inline_hashes(page, "script"),
            vec![
                "'sha256-5KYv+PUboo5h+0+YAtGRPbwv5d/QxzHslP4YGnUaxRw='".to_owned(),
                "'sha256-ZRcerlEd5oXh7oyPxtNBWYVOIBP573H/0mkZtACTtRY='".to_owned(),
            ]
        );
        assert_eq!(inline_hashes(page, "style").len(), 1);
        assert!(inline_hashes("<script>unclosed", "script").is_empty());
    }
}
