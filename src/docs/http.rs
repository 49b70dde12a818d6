//! `GET /mirror/assets/{bucket}/{file}`: the mirror's downloaded files (the
//! images and attachments a document's body links to), for signed-in
//! members (session cookie or bearer token), as the docs browser shows
//! them.
//!
//! The pool is content-addressed (`assets/<sha[:2]>/<sha><ext>`), so an
//! answer never changes: `private, max-age=31536000, immutable`, and the
//! hash is the ETag. Only names of that exact form are looked up, so no
//! other file under the data directory can be reached. Files are streamed
//! in 64 KiB chunks (an asset may be up to 64 MiB). Every answer carries
//! a sandboxing Content Security Policy: an SVG opened on its own runs no
//! script.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{FromRef, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};

use crate::{
    error::{AppError, AppResult},
    http::{Web, client::RequestMeta, matches_etag, path::PathParam},
};

/// Bytes read from disk at a time.
const CHUNK: usize = 64 * 1024;
/// Chunks read ahead of a slow client.
const AHEAD: usize = 4;
const POLICY: &str = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox";

#[derive(Clone)]
struct AssetsHttp {
    web: Web,
    mirror_root: PathBuf,
}

impl FromRef<AssetsHttp> for Web {
    fn from_ref(state: &AssetsHttp) -> Web {
        state.web.clone()
    }
}

pub fn routes(web: Web, mirror_root: PathBuf) -> Router {
    Router::new()
        .route("/mirror/assets/{bucket}/{file}", get(asset))
        .with_state(AssetsHttp { web, mirror_root })
}

async fn asset(
    State(state): State<AssetsHttp>,
    PathParam((bucket, file)): PathParam<(String, String)>,
    meta: RequestMeta,
    headers: HeaderMap,
) -> Response {
    match serve(&state, &bucket, &file, &meta, &headers).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn serve(
    state: &AssetsHttp,
    bucket: &str,
    file: &str,
    meta: &RequestMeta,
    headers: &HeaderMap,
) -> AppResult<Response> {
    state
        .web
        .viewer(meta, headers, "sign in to see the mirror's files")
        .await?;
    let (sha256, extension) = pool_name(bucket, file).ok_or(AppError::NotFound("asset"))?;
    let etag = format!("\"{sha256}\"");
    let mut answer = HeaderMap::new();
    answer.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=31536000, immutable"),
    );
    answer.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex is a header value"),
    );
    answer.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    if matches_etag(headers, &etag) {
        return Ok((StatusCode::NOT_MODIFIED, answer).into_response());
    }
    let path = state
        .mirror_root
        .join(super::assets::pool_path(sha256, extension));
    let (length, body) = stream(path).await?;
    answer.insert(header::CONTENT_TYPE, content_type(extension));
    answer.insert(header::CONTENT_LENGTH, length.into());
    Ok((answer, body).into_response())
}

/// The hash and extension (with its dot) of a pool file name, if `bucket`
/// and `file` have the pool's exact form.
fn pool_name<'a>(bucket: &str, file: &'a str) -> Option<(&'a str, &'a str)> {
    let hex = |text: &str| {
        text.bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    };
    let sha256 = file.get(..64)?;
    let extension = &file[64..];
    let extension_ok = extension.is_empty()
        || (extension.len() <= 17
            && extension.starts_with('.')
            && !extension[1..].is_empty()
            && extension[1..]
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit()));
    (hex(sha256) && bucket.len() == 2 && sha256.starts_with(bucket) && extension_ok)
        .then_some((sha256, extension))
}

fn content_type(extension: &str) -> HeaderValue {
    let mime = match extension.trim_start_matches('.') {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "svg" => "image/svg+xml",
        "bmp" => "image/bmp",
        "ico" => "image/x-icon",
        "pdf" => "application/pdf",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    HeaderValue::from_static(mime)
}

/// The file's length and a body that reads it chunk by chunk on the
/// blocking pool. A missing file is `NOT_FOUND`.
async fn stream(path: PathBuf) -> AppResult<(u64, Body)> {
    let (opened, file) = tokio::task::spawn_blocking(move || open(&path))
        .await
        .map_err(AppError::internal)??;
    let (sender, receiver) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(AHEAD);
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        loop {
            let mut buffer = vec![0; CHUNK];
            let chunk = match file.read(&mut buffer) {
                Ok(0) => return,
                Ok(read) => {
                    buffer.truncate(read);
                    Ok(Bytes::from(buffer))
                }
                Err(error) => Err(error),
            };
            let failed = chunk.is_err();
            // A client that went away drops the receiver: stop reading.
            if sender.blocking_send(chunk).is_err() || failed {
                return;
            }
        }
    });
    let chunks = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    Ok((opened, Body::from_stream(chunks)))
}

fn open(path: &Path) -> AppResult<(u64, std::fs::File)> {
    let file = std::fs::File::open(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => AppError::NotFound("asset"),
        _ => AppError::internal(error),
    })?;
    let metadata = file.metadata().map_err(AppError::internal)?;
    if !metadata.is_file() {
        return Err(AppError::NotFound("asset"));
    }
    Ok((metadata.len(), file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "ab12000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn only_pool_names_are_looked_up() {
        assert_eq!(pool_name("ab", &format!("{SHA}.png")), Some((SHA, ".png")));
        assert_eq!(pool_name("ab", SHA), Some((SHA, "")));
        for (bucket, file) in [
            ("ac", format!("{SHA}.png")),
            ("..", format!("{SHA}.png")),
            ("ab", format!("{SHA}.PNG")),
            ("ab", format!("{SHA}.")),
            ("ab", format!("{SHA}/../../x")),
            ("ab", format!("{SHA}.png.")),
            ("ab", "ab12".to_owned()),
            ("ab", SHA.to_uppercase()),
            ("ab", format!("{SHA}.{}", "x".repeat(17))),
            ("ab", format!("{SHA}0")),
        ] {
            assert_eq!(pool_name(bucket, &file), None, "{bucket}/{file}");
        }
    }
}
