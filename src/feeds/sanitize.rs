//! Item HTML as it is served: sanitized (no scripts, no event handlers, no
//! `javascript:` or other non-web URLs, no styles that could hide or overlay
//! content), with relative links and image sources made absolute against the
//! item's (or the feed's) URL. The raw content stays in the database.
//!
//! Items are sanitized once, when they are stored (`content_html`); rows
//! stored before that column existed are sanitized when served
//! ([`served`]) until their feed is pulled again. The sanitizer is built
//! once: the base URL of the document being cleaned reaches its URL
//! rewriter through a thread-local set around the (synchronous) clean.

use std::{borrow::Cow, cell::RefCell, sync::LazyLock};

use ammonia::{Builder, UrlRelative};
use entity::item;
use url::Url;

thread_local! {
    /// The base of the document being cleaned on this thread, if any.
    static BASE: RefCell<Option<Url>> = const { RefCell::new(None) };
}

static SANITIZER: LazyLock<Builder<'static>> = LazyLock::new(|| {
    let mut builder = Builder::default();
    builder
        .link_rel(Some("noopener noreferrer nofollow"))
        .url_relative(UrlRelative::Custom(Box::new(against_base)));
    builder
});

/// A relative URL made absolute against the current base; without one
/// the attribute is dropped.
fn against_base(url: &str) -> Option<Cow<'_, str>> {
    BASE.with_borrow(|base| base.as_ref()?.join(url).ok())
        .map(|absolute| Cow::Owned(absolute.into()))
}

pub fn sanitize_html(html: &str, base: Option<&Url>) -> String {
    BASE.with_borrow_mut(|slot| *slot = base.cloned());
    let clean = SANITIZER.clean(html).to_string();
    BASE.with_borrow_mut(|slot| *slot = None);
    clean
}

/// What to serve for an item or bookmark: its stored sanitized HTML, or —
/// for a row stored before that was kept — its raw content sanitized now
/// against `base()`.
pub fn served(stored: Option<&str>, raw: &str, base: impl FnOnce() -> Option<Url>) -> String {
    match stored {
        Some(html) => html.to_owned(),
        None => sanitize_html(raw, base().as_ref()),
    }
}

/// An item's HTML as every API serves it; an old row's base is the item's
/// link, else `feed_link` (needed only when the item has neither stored
/// HTML nor a link).
pub fn item_html(item: &item::Model, feed_link: Option<&str>) -> String {
    served(item.content_html.as_deref(), &item.content, || {
        item.link
            .as_deref()
            .or(feed_link)
            .and_then(|link| Url::parse(link).ok())
    })
}

/// Whether [`item_html`] needs the feed's link for this item.
pub fn needs_feed_link(item: &item::Model) -> bool {
    item.content_html.is_none() && item.link.is_none()
}

/// A bookmark's HTML (`stored`, else `raw` sanitized now), its base its
/// own link.
pub fn bookmark_html(stored: Option<&str>, raw: &str, link: &str) -> String {
    served(stored, raw, || Url::parse(link).ok())
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

    #[test]
    fn each_document_is_rewritten_against_its_own_base_only() {
        let first = Url::parse("https://one.example/a/").unwrap();
        let html = r#"<a href="x">x</a>"#;
        assert!(sanitize_html(html, Some(&first)).contains("https://one.example/a/x"));
        // The next document has no base: its relative link is dropped, not
        // resolved against the previous document's.
        let clean = sanitize_html(html, None);
        assert!(!clean.contains("one.example"), "{clean}");
        assert!(!clean.contains("href"), "{clean}");
    }

    #[test]
    fn stored_html_is_served_as_stored() {
        let mut asked = false;
        let html = served(Some("<p>kept</p>"), "<script>raw</script>", || {
            asked = true;
            None
        });
        assert_eq!(html, "<p>kept</p>");
        assert!(!asked, "no base needed");
        let html = served(None, "<p onclick=x>old</p>", || None);
        assert_eq!(html, "<p>old</p>");
    }
}
