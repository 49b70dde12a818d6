//! Feed icons: found and fetched by the pull worker through the feeds'
//! SSRF-guarded client, kept in `feed_icons`, and served from our own
//! `GET /icons/{feed_id}` (GraphQL `Feed.iconUrl`, Google Reader
//! `iconUrl`) or inline (Fever `favicons`), so no client is ever sent to
//! the publisher or a third-party favicon service.
//!
//! Finding one: the site page's `<link rel="icon">` (or `shortcut icon`,
//! then `apple-touch-icon`, read by [`super::discover::icon_links`]), else
//! the site's `/favicon.ico`. Only raster images sniffed from the bytes
//! are kept (PNG, ICO, GIF, JPEG, WebP): SVG can carry script, and what a
//! server claims in `Content-Type` is not believed. A failure stores
//! nothing and never fails the pull.

use axum::{
    Router,
    extract::{FromRef, Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use chrono::{DateTime, Utc};
use entity::{feed, feed_icon};
use sea_orm::{DatabaseConnection, EntityTrait, QuerySelect, Set, sea_query::OnConflict};
use url::Url;
use uuid::Uuid;

use super::{discover, reader_auth::ReaderAccounts};
use crate::{
    digest::sha256_hex_bytes,
    domain::PublicUrl,
    error::{AppError, AppResult},
    http::{Web, google_login_token, identify, matches_etag},
    httpc::{HttpClient, Patience},
};

/// The largest icon kept, in bytes.
pub const MAX_ICON_BYTES: usize = 64 * 1024;
/// The most of a site page read to find its icon links (they sit in `<head>`).
pub const MAX_PAGE_BYTES: usize = 512 * 1024;
/// How old a stored icon may get before the next pull looks again.
pub const REFRESH_AFTER_DAYS: i64 = 7;
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

/// Whether a feed whose icon was fetched at `fetched_at` (never: `None`)
/// should look for one now.
pub fn is_due(fetched_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    fetched_at.is_none_or(|at| now - at >= chrono::Duration::days(REFRESH_AFTER_DAYS))
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

/// The URL of a feed's icon route: absolute under the public URL when it is
/// known, else root-relative.
pub fn icon_url(public_url: &PublicUrl, feed_id: i64) -> String {
    let path = format!("/icons/{feed_id}");
    public_url.join(&path).map_or(path, |url| url.to_string())
}

/// What the feeds' GraphQL objects and the reader APIs build icon URLs with.
#[derive(Clone, Debug, Default)]
pub struct IconLinks(pub PublicUrl);

impl IconLinks {
    pub fn url(&self, feed_id: i64) -> String {
        icon_url(&self.0, feed_id)
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
    let fetched_at: Option<DateTime<Utc>> = feed_icon::Entity::find_by_id(feed_id)
        .select_only()
        .column(feed_icon::Column::FetchedAt)
        .into_tuple()
        .one(db)
        .await?;
    if !is_due(fetched_at, now) {
        return Ok(());
    }
    let Some(feed) = feed::Entity::find_by_id(feed_id).one(db).await? else {
        return Ok(());
    };
    let Some(source) = source_of(&feed) else {
        return Ok(());
    };
    let Some((mime_type, data)) = find_icon(http, &source).await else {
        tracing::debug!(feed_id, ?source, "no usable icon found");
        return Ok(());
    };
    let icon = feed_icon::ActiveModel {
        feed_id: Set(feed_id),
        mime_type: Set(mime_type.to_owned()),
        hash: Set(sha256_hex_bytes(&data)),
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

/// What `GET /icons/{feed_id}` reads.
#[derive(Clone)]
pub struct IconRoutes {
    pub web: Web,
    pub db: DatabaseConnection,
    /// Google Reader apps send their `GoogleLogin auth=` token.
    pub accounts: ReaderAccounts,
}

impl FromRef<IconRoutes> for Web {
    fn from_ref(state: &IconRoutes) -> Web {
        state.web.clone()
    }
}

/// `GET /icons/{feed_id}`.
pub fn routes(state: IconRoutes) -> Router {
    Router::new()
        .route("/icons/{feed_id}", get(serve))
        .with_state(state)
}

/// The icon of a feed the caller follows, cacheable for a day and
/// revalidated by its hash. Anyone else — signed out, another user, a
/// feed without an icon — gets the same 404, so nothing tells whether
/// the feed exists.
async fn serve(
    State(state): State<IconRoutes>,
    Path(feed_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let not_found = || StatusCode::NOT_FOUND.into_response();
    let Ok(feed_id) = feed_id.parse::<i64>() else {
        return not_found();
    };
    let Some(user) = caller(&state, &headers).await else {
        return not_found();
    };
    let icon = match owned_icon(&state.db, user, feed_id).await {
        Ok(Some(icon)) => icon,
        Ok(None) => return not_found(),
        Err(error) => return error.into_response(),
    };
    let etag = format!("\"{}\"", icon.hash);
    let cache = [
        (header::CACHE_CONTROL, "public, max-age=86400".to_owned()),
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

/// The signed-in caller: a Google Reader token, else a bearer token or the
/// session cookie. A bad credential is no caller.
async fn caller(state: &IconRoutes, headers: &HeaderMap) -> Option<Uuid> {
    match google_login_token(headers) {
        Some(token) => state.accounts.google_user(token).await.ok(),
        None => identify(&state.web.auth, headers)
            .await
            .ok()
            .flatten()
            .map(|viewer| viewer.user_id),
    }
}

/// The icon of `feed_id` when `user` follows that feed.
async fn owned_icon(
    db: &DatabaseConnection,
    user: Uuid,
    feed_id: i64,
) -> AppResult<Option<feed_icon::Model>> {
    match crate::db::owned::<feed::Entity>(db, user, feed_id).await {
        Ok(_) => Ok(feed_icon::Entity::find_by_id(feed_id).one(db).await?),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
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
    fn an_icon_is_looked_for_when_missing_or_a_week_old() {
        let now: DateTime<Utc> = "2026-12-03T12:00:00Z".parse().unwrap();
        assert!(is_due(None, now));
        assert!(!is_due(Some(now - chrono::Duration::days(6)), now));
        assert!(is_due(Some(now - chrono::Duration::days(7)), now));
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
    fn icon_urls_are_absolute_once_the_public_url_is_known() {
        let public = PublicUrl::new(None);
        assert_eq!(icon_url(&public, 7), "/icons/7");
        let public = PublicUrl::new(Some(Url::parse("https://r.example/trellis/").unwrap()));
        assert_eq!(icon_url(&public, 7), "https://r.example/trellis/icons/7");
    }
}
