//! Item HTML as it is served: sanitized (no scripts, no event handlers, no
//! `javascript:` or other non-web URLs, no styles that could hide or overlay
//! content), with relative links and image sources made absolute against the
//! item's (or the feed's) URL. The raw content stays in the database.

use ammonia::{Builder, UrlRelative};
use url::Url;

pub fn sanitize_html(html: &str, base: Option<&Url>) -> String {
    let mut builder = Builder::default();
    builder
        .link_rel(Some("noopener noreferrer nofollow"))
        .url_relative(match base {
            Some(base) => UrlRelative::RewriteWithBase(base.clone()),
            None => UrlRelative::Deny,
        });
    builder.clean(html).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_handlers_and_javascript_urls_are_removed() {
        let dirty = r#"<p onclick="steal()">Hi<script>alert(1)</script></p><a href="javascript:alert(1)">x</a><img src="x.png" onerror="boom()"><iframe src="https://evil"></iframe>"#;
        let clean = sanitize_html(dirty, None);
        assert!(!clean.contains("script"), "{clean}");
        assert!(!clean.contains("onclick"), "{clean}");
        assert!(!clean.contains("onerror"), "{clean}");
        assert!(!clean.contains("javascript:"), "{clean}");
        assert!(!clean.contains("iframe"), "{clean}");
        assert!(clean.contains("<p>Hi</p>"), "{clean}");
    }

    #[test]
    fn relative_links_and_images_become_absolute() {
        let base = Url::parse("https://example.com/blog/post-1").unwrap();
        let clean = sanitize_html(
            r#"<a href="/about">a</a><img src="img/cat.png"><a href="https://other.org/x">b</a>"#,
            Some(&base),
        );
        assert!(
            clean.contains(r#"href="https://example.com/about""#),
            "{clean}"
        );
        assert!(
            clean.contains(r#"src="https://example.com/blog/img/cat.png""#),
            "{clean}"
        );
        assert!(clean.contains(r#"href="https://other.org/x""#), "{clean}");
        assert!(clean.contains("noopener"), "{clean}");
    }
}
