//! Feed icons: found and fetched by the pull worker through the feeds'
//! SSRF-guarded client, kept in `feed_icons`, and served from our own
//! `GET /icons/{feed_id}/{sig}` (GraphQL `Feed.iconUrl`, Google Reader
//! `iconUrl`) or inline (Fever `favicons`), so no client is ever sent to
//! the publisher or a third-party favicon service.
//!
//! The icon URL is a capability: `sig` is an HMAC (under the server key)
//! of the feed id and the icon's hash, handed only to the feed's
//! followers. Reader apps load icons with a plain image request that
//! carries no credential, so the route asks for none; without the
//! signature nobody can fetch an icon, or learn that a feed exists. A new
//! icon has a new hash and so a new URL: what is served is immutable.
//!
//! Finding one: the site page's `<link rel="icon">` (or `shortcut icon`,
//! then `apple-touch-icon`, read by [`super::discover::icon_links`]), else
//! the site's `/favicon.ico`. Only raster images sniffed from the bytes
//! are kept (PNG, ICO, GIF, JPEG, WebP): SVG can carry script, and what a
//! server claims in `Content-Type` is not believed. A failure stores
//! nothing and never fails the pull.

use std::sync::Arc;

use axum::{
    Router,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use chrono::{DateTime, Utc};
use entity::{feed, feed_icon};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect, Set,
    sea_query::{Expr, OnConflict},
};
use url::Url;

use super::discover;
use crate::{
    auth::keys::ServerSecret,
    digest::sha256_hex_bytes,
    domain::PublicUrl,
    error::{AppError, AppResult},
    http::matches_etag,
    httpc::{HttpClient, Patience},
};

/// The largest icon kept, in bytes.
pub const MAX_ICON_BYTES: usize = 64 * 1024;
/// The most of a site page read to find its icon links (they sit in `<head>`).
pub const MAX_PAGE_BYTES: usize = 512 * 1024;
/// How old a stored icon may get before the next pull looks again.
pub const REFRESH_AFTER_DAYS: i64 = 7;
/// How long a look that found no icon is remembered: the site is not
/// asked again on every pull of its feed.
pub const RETRY_MISS_AFTER_HOURS: i64 = 24;
/// Hex digits of the HMAC in an icon URL (128 bits).
const SIG_LEN: usize = 32;
/// Icon URLs tried per refresh, `/favicon.ico` included.
const MAX_CANDIDATES: usize = 3;

/// The image type of `bytes`, sniffed from its magic numbers, when it is
/// one of the raster types kept as icons.
pub fn sniff_icon(bytes: &[u8]) -> Option<&'static str> {
    let kind = infer::get(bytes)?;
    match kind.mime_type() {
        mime @ ("image/png" | "image/gif" | "image/jpeg" | "image/webp") => Some(mime),
        "image/vnd.microsoft.icon" => Some("image/x-icon"),
        _ => None,
    }
}

/// What the last look for a feed's icon left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Looked {
    /// An icon, fetched at this time.
    Found(DateTime<Utc>),
    /// Nothing usable, looked at this time.
    Missed(DateTime<Utc>),
}

/// Whether a feed should look for its icon now: never looked, an icon a
/// week old, or a miss a day old.
pub fn is_due(looked: Option<Looked>, now: DateTime<Utc>) -> bool {
    match looked {
        None => true,
        Some(Looked::Found(at)) => now - at >= chrono::Duration::days(REFRESH_AFTER_DAYS),
        Some(Looked::Missed(at)) => now - at >= chrono::Duration::hours(RETRY_MISS_AFTER_HOURS),
    }
}

/// Where to look for a feed's icon: its site page (when the feed names
/// one), else only the `/favicon.ico` of the feed's own origin — the feed
/// itself is never fetched again for this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IconSource {
    Page(Url),
    Origin(Url),
}

pub fn source_of(feed: &feed::Model) -> Option<IconSource> {
    let web = |url: &str| {
        Url::parse(url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
    };
    match feed.site_url.as_deref().and_then(web) {
        Some(page) => Some(IconSource::Page(page)),
        None => web(&feed.link).map(IconSource::Origin),
    }
}

/// The URLs to try, best first: what the page declares (when it could be
/// read), then the site's `/favicon.ico`.
pub fn candidates(site: &Url, page_html: Option<&str>) -> Vec<Url> {
    let mut urls = page_html
        .map(|html| discover::icon_links(html, site))
        .unwrap_or_default();
    if let Ok(favicon) = site.join("/favicon.ico")
        && !urls.contains(&favicon)
    {
        urls.push(favicon);
    }
    urls.truncate(MAX_CANDIDATES);
    urls
}

/// What the feeds' GraphQL objects and the reader APIs build icon URLs
/// with, and what the icon route checks them with.
#[derive(Clone)]
pub struct IconLinks {
    pub public_url: PublicUrl,
    pub secret: Arc<ServerSecret>,
}

impl IconLinks {
    fn sig(&self, feed_id: i64, hash: &str) -> String {
        let mut sig = self
            .secret
            .mac_hex("feed-icon", &[&feed_id.to_be_bytes(), hash.as_bytes()]);
        sig.truncate(SIG_LEN);
        sig
    }

    /// The URL of the icon whose hash is `hash`: absolute under the public
    /// URL when it is known, else root-relative.
    pub fn url(&self, feed_id: i64, hash: &str) -> String {
        let path = format!("/icons/{feed_id}/{}", self.sig(feed_id, hash));
        self.public_url
            .join(&path)
            .map_or(path, |url| url.to_string())
    }

    /// Whether `sig` is the signature of this feed's icon `hash`.
    fn verify(&self, feed_id: i64, hash: &str, sig: &str) -> bool {
        crate::digest::constant_time_eq(self.sig(feed_id, hash).as_bytes(), sig.as_bytes())
    }
}

/// Looks for the feed's icon when it has none or it is stale, and stores
/// what it finds. Called after a pull was recorded; what goes wrong is
/// logged, never the pull's failure.
pub async fn refresh_if_due(
    db: &DatabaseConnection,
    http: &HttpClient,
    feed_id: i64,
    now: DateTime<Utc>,
) {
    if let Err(error) = refresh(db, http, feed_id, now).await {
        tracing::warn!(feed_id, error = %crate::error::chain(&error), "storing a feed icon failed");
    }
}

async fn refresh(
    db: &DatabaseConnection,
    http: &HttpClient,
    feed_id: i64,
    now: DateTime<Utc>,
) -> AppResult<()> {
    let looked: Option<(DateTime<Utc>, String)> = feed_icon::Entity::find_by_id(feed_id)
        .select_only()
        .column(feed_icon::Column::FetchedAt)
        .column(feed_icon::Column::Hash)
        .into_tuple()
        .one(db)
        .await?;
    let looked = looked.map(|(at, hash)| {
        if hash.is_empty() {
            Looked::Missed(at)
        } else {
            Looked::Found(at)
        }
    });
    if !is_due(looked, now) {
        return Ok(());
    }
    let Some(feed) = feed::Entity::find_by_id(feed_id).one(db).await? else {
        return Ok(());
    };
    let Some(source) = source_of(&feed) else {
        return Ok(());
    };
    let found = find_icon(http, &source).await;
    if found.is_none() && matches!(looked, Some(Looked::Found(_))) {
        // The site has nothing usable now: the known icon stays, and is
        // looked for again in a week.
        tracing::debug!(
            feed_id,
            ?source,
            "no usable icon found; the known one stays"
        );
        let txn = crate::db::begin_write(db).await?;
        feed_icon::Entity::update_many()
            .col_expr(feed_icon::Column::FetchedAt, Expr::value(now))
            .filter(feed_icon::Column::FeedId.eq(feed_id))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        return Ok(());
    }
    // A miss is kept as a row without bytes (and an empty hash), so the
    // site is not asked again on every pull.
    let (mime_type, data) = found.unwrap_or_else(|| {
        tracing::debug!(feed_id, ?source, "no usable icon found");
        ("", Vec::new())
    });
    let icon = feed_icon::ActiveModel {
        feed_id: Set(feed_id),
        mime_type: Set(mime_type.to_owned()),
        hash: Set(if data.is_empty() {
            String::new()
        } else {
            sha256_hex_bytes(&data)
        }),
        data: Set(data),
        fetched_at: Set(now),
    };
    let txn = crate::db::begin_write(db).await?;
    // The feed may have been deleted meanwhile: then there is nothing to
    // attach the icon to.
    if feed::Entity::find_by_id(feed_id)
        .one(&*txn)
        .await?
        .is_some()
    {
        feed_icon::Entity::insert(icon)
            .on_conflict(
                OnConflict::column(feed_icon::Column::FeedId)
                    .update_columns([
                        feed_icon::Column::MimeType,
                        feed_icon::Column::Data,
                        feed_icon::Column::Hash,
                        feed_icon::Column::FetchedAt,
                    ])
                    .to_owned(),
            )
            .exec(&*txn)
            .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The first acceptable icon among the candidates, with its type. It
/// waits for no turn under the feeds' limits (it runs in the pull's worker
/// slot): a busy host means no icon this time, and the next pull tries again.
async fn find_icon(http: &HttpClient, source: &IconSource) -> Option<(&'static str, Vec<u8>)> {
    let (base, html) = match source {
        IconSource::Page(site) => {
            match http
                .get_capped(
                    Patience::Never,
                    site.as_str(),
                    HeaderMap::new(),
                    MAX_PAGE_BYTES,
                )
                .await
            {
                Ok(page) if page.status.is_success() => (
                    page.url,
                    Some(String::from_utf8_lossy(&page.body).into_owned()),
                ),
                _ => (site.clone(), None),
            }
        }
        IconSource::Origin(origin) => (origin.clone(), None),
    };
    for url in candidates(&base, html.as_deref()) {
        let Ok(fetched) = http
            .get_capped(
                Patience::Never,
                url.as_str(),
                HeaderMap::new(),
                MAX_ICON_BYTES,
            )
            .await
        else {
            continue;
        };
        if !fetched.status.is_success() {
            continue;
        }
        if let Some(mime) = sniff_icon(&fetched.body) {
            return Some((mime, fetched.body));
        }
    }
    None
}

/// What `GET /icons/{feed_id}/{sig}` reads.
#[derive(Clone)]
pub struct IconRoutes {
    pub db: DatabaseConnection,
    pub links: IconLinks,
}

/// `GET /icons/{feed_id}/{sig}`.
pub fn routes(state: IconRoutes) -> Router {
    Router::new()
        .route("/icons/{feed_id}/{sig}", get(serve))
        .with_state(state)
}

/// The icon the signed URL names, cached for good (a new icon has a new
/// URL). A wrong signature, a feed without an icon, a malformed id — the
/// same 404, so nothing tells whether the feed exists.
async fn serve(
    State(state): State<IconRoutes>,
    Path((feed_id, sig)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let not_found = || StatusCode::NOT_FOUND.into_response();
    let Ok(feed_id) = feed_id.parse::<i64>() else {
        return not_found();
    };
    if sig.len() != SIG_LEN {
        return not_found();
    }
    let icon = match feed_icon::Entity::find_by_id(feed_id).one(&state.db).await {
        Ok(Some(icon)) if !icon.data.is_empty() => icon,
        Ok(_) => return not_found(),
        Err(error) => return AppError::from(error).into_response(),
    };
    if !state.links.verify(feed_id, &icon.hash, &sig) {
        return not_found();
    }
    let etag = format!("\"{}\"", icon.hash);
    let cache = [
        (
            header::CACHE_CONTROL,
            "public, max-age=31536000, immutable".to_owned(),
        ),
        (header::ETAG, etag.clone()),
    ];
    if matches_etag(&headers, &etag) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    let mime = HeaderValue::from_str(&icon.mime_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    (
        cache,
        [
            (header::CONTENT_TYPE, mime),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        icon.data,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

    #[test]
    fn only_raster_images_are_kept_as_icons() {
        assert_eq!(sniff_icon(PNG), Some("image/png"));
        assert_eq!(sniff_icon(b"GIF89a\x01\0\x01\0"), Some("image/gif"));
        assert_eq!(
            sniff_icon(b"\0\0\x01\0\x01\0\x10\x10"),
            Some("image/x-icon")
        );
        assert_eq!(sniff_icon(b"<!doctype html><title>x</title>"), None);
        assert_eq!(
            sniff_icon(
                br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#
            ),
            None
        );
        assert_eq!(sniff_icon(b""), None);
    }

    #[test]
    fn an_icon_is_looked_for_when_missing_a_week_old_or_missed_a_day_ago() {
        let now: DateTime<Utc> = "2026-12-03T12:00:00Z".parse().unwrap();
        let days = chrono::Duration::days;
        assert!(is_due(None, now));
        assert!(!is_due(Some(Looked::Found(now - days(6))), now));
        assert!(is_due(Some(Looked::Found(now - days(7))), now));
        assert!(!is_due(
            Some(Looked::Missed(now - chrono::Duration::hours(23))),
            now
        ));
        assert!(is_due(Some(Looked::Missed(now - days(1))), now));
    }

    #[test]
    fn declared_icons_come_before_the_sites_favicon() {
        let site = Url::parse("https://blog.example/about/").unwrap();
        let html = r#"<link rel="icon" href="/i.png"><link rel="apple-touch-icon" href="t.png">"#;
        let urls: Vec<String> = candidates(&site, Some(html))
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(
            urls,
            [
                "https://blog.example/i.png",
                "https://blog.example/about/t.png",
                "https://blog.example/favicon.ico",
            ]
        );
        assert_eq!(
            candidates(&site, None)
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
            ["https://blog.example/favicon.ico"]
        );
    }

    #[test]
    fn icon_urls_are_signed_and_absolute_once_the_public_url_is_known() {
        let secret = Arc::new(ServerSecret::for_tests("icon-test-secret"));
        let links = IconLinks {
            public_url: PublicUrl::new(None),
            secret: secret.clone(),
        };
        let url = links.url(7, "abc");
        let sig = url.strip_prefix("/icons/7/").expect("root-relative");
        assert_eq!(sig.len(), SIG_LEN);
        assert!(sig.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(links.verify(7, "abc", sig));
        // Another feed, another icon, another key: another signature.
        assert!(!links.verify(8, "abc", sig));
        assert!(!links.verify(7, "abd", sig));
        let other = IconLinks {
            public_url: PublicUrl::new(None),
            secret: Arc::new(ServerSecret::for_tests("another-secret")),
        };
        assert!(!other.verify(7, "abc", sig));
        assert!(!links.verify(7, "abc", &sig[..SIG_LEN - 1]));
        let public = IconLinks {
            public_url: PublicUrl::new(Some(Url::parse("https://r.example/trellis/").unwrap())),
            secret,
        };
        assert_eq!(
            public.url(7, "abc"),
            format!("https://r.example/trellis/icons/7/{sig}")
        );
    }
}
