//! Assets as the mirror stores them: content-addressed, one pool for every
//! platform (`assets/<sha[:2]>/<sha><ext>`, `sha` the SHA-256 of the
//! bytes), so a file referenced by many documents, or downloaded under many
//! remote keys, is stored once.
//!
//! The extension comes from the bytes first (magic numbers, the `infer`
//! crate): the platforms' file names and content types are often wrong or
//! missing. Then, for what cannot be sniffed (SVG, plain text, CSV), the
//! file name the platform gave, the URL path's, the response's
//! `Content-Type`; else none.
//!
//! In the body, once an asset is downloaded, the exact URL the adapter
//! reported ([`AssetRef::body_url`](super::adapter::AssetRef)) is replaced by
//! the path relative to the document's folder. When the download failed the
//! body keeps the URL and gets [`ASSET_PENDING_MARKER`] right after the
//! image, once however many runs fail: the body is never lost, the asset is
//! retried next run.

use crate::digest::sha256_hex_bytes;

/// Appended after an image whose download failed (the body keeps the
/// original URL).
pub const ASSET_PENDING_MARKER: &str = "<!-- opendoc:asset-pending -->";

/// The pool's folder, at the mirror root.
pub const POOL_DIR: &str = "assets";

/// The longest extension taken from a name or a URL (`.markdown`).
const MAX_HINT_EXTENSION: usize = 10;

/// Where an asset's bytes live in the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentAddress {
    /// Lower-case hex SHA-256 of the bytes: the second level of dedup.
    pub sha256: String,
    /// The extension with its dot (`.png`), or empty.
    pub extension: String,
    /// The path from the mirror root: `assets/<sha[:2]>/<sha><ext>`.
    pub path: String,
}

/// What is known about an asset besides its bytes, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtensionHints<'a> {
    /// The original file name, when the platform says.
    pub file_name: Option<&'a str>,
    /// The URL it was downloaded from.
    pub url: Option<&'a str>,
    /// The response's `Content-Type`.
    pub content_type: Option<&'a str>,
}

/// The pool path of bytes hashing to `sha256` with `extension` (`.png` or
/// empty).
pub fn pool_path(sha256: &str, extension: &str) -> String {
    let bucket = sha256.get(..2).unwrap_or(sha256);
    format!("{POOL_DIR}/{bucket}/{sha256}{extension}")
}

/// Where `bytes` go in the pool.
pub fn content_address(bytes: &[u8], hints: &ExtensionHints<'_>) -> ContentAddress {
    let sha256 = sha256_hex_bytes(bytes);
    let extension = extension(bytes, hints);
    let path = pool_path(&sha256, &extension);
    ContentAddress {
        sha256,
        extension,
        path,
    }
}

/// The extension (with its dot, lower-case) for an asset whose content
/// starts with `head`: sniffed from the bytes, else from the hints in order,
/// else empty. A sniffed `zip` or `xml` yields to a hint's extension:
/// many formats are zip files underneath (`.xmind`, `.sketch`), and an SVG
/// may start with an XML declaration.
pub fn extension(head: &[u8], hints: &ExtensionHints<'_>) -> String {
    let from_hints = || {
        hints
            .file_name
            .and_then(name_extension)
            .or_else(|| hints.url.and_then(url_extension))
            .or_else(|| {
                hints
                    .content_type
                    .and_then(content_type_extension)
                    .map(str::to_owned)
            })
    };
    let sniffed = infer::get(head).map(|kind| kind.extension());
    let extension = match sniffed {
        Some(generic @ ("zip" | "xml")) => from_hints().or_else(|| Some(generic.to_owned())),
        Some(sniffed) => Some(sniffed.to_owned()),
        None => from_hints(),
    };
    extension.map(|ext| format!(".{ext}")).unwrap_or_default()
}

/// The extension of a file name (`photo.PNG` → `png`), if it has a
/// plausible one.
fn name_extension(name: &str) -> Option<String> {
    let (stem, ext) = name.rsplit_once('.')?;
    let plausible = !stem.is_empty()
        && (1..=MAX_HINT_EXTENSION).contains(&ext.len())
        && ext.bytes().all(|byte| byte.is_ascii_alphanumeric());
    plausible.then(|| ext.to_ascii_lowercase())
}

/// The extension of a URL's last path segment (query and fragment ignored).
fn url_extension(url: &str) -> Option<String> {
    let path = match url::Url::parse(url) {
        Ok(parsed) => parsed.path().to_owned(),
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    };
    name_extension(path.rsplit('/').next().unwrap_or_default())
}

/// The extension of a media type (parameters and case ignored).
fn content_type_extension(content_type: &str) -> Option<&'static str> {
    let essence = content_type.split(';').next()?.trim().to_ascii_lowercase();
    Some(match essence.as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" | "image/pjpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "image/tiff" => "tif",
        "image/avif" => "avif",
        "image/heic" => "heic",
        "image/x-icon" | "image/vnd.microsoft.icon" => "ico",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "application/json" => "json",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => "pptx",
        "text/plain" => "txt",
        "text/csv" => "csv",
        "text/markdown" => "md",
        "text/html" => "html",
        "video/mp4" => "mp4",
        "video/quicktime" => "mov",
        "video/webm" => "webm",
        "audio/mpeg" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        _ => return None,
    })
}

/// The path of `target` relative to the folder of the document `from`, both
/// given from the mirror root with `/` separators: what a Markdown link in
/// `from` must say to reach `target`.
pub fn relative_path(from: &str, target: &str) -> String {
    let parts = |path: &str| -> Vec<String> {
        path.split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .map(str::to_owned)
            .collect()
    };
    let from = parts(from);
    let target = parts(target);
    let folder = &from[..from.len().saturating_sub(1)];
    let target_folder = &target[..target.len().saturating_sub(1)];
    let common = folder
        .iter()
        .zip(target_folder)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<&str> = vec![".."; folder.len() - common];
    out.extend(target[common..].iter().map(String::as_str));
    out.join("/")
}

/// Whether `c` could continue a URL (so a match ending before it is only a
/// prefix of a longer URL, not the one reported).
fn continues_url(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&*+,;=%".contains(c)
}

/// The byte offsets where `url` appears in `body` as a whole URL.
fn occurrences<'a>(body: &'a str, url: &'a str) -> impl Iterator<Item = usize> + 'a {
    body.match_indices(url).filter_map(move |(start, _)| {
        let next = body[start + url.len()..].chars().next();
        (!url.is_empty() && !next.is_some_and(continues_url)).then_some(start)
    })
}

/// The body with every occurrence of `body_url` (as a whole URL) replaced by
/// `replacement` (the asset's relative path).
pub fn replace_url(body: &str, body_url: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut copied = 0;
    for start in occurrences(body, body_url) {
        out.push_str(&body[copied..start]);
        out.push_str(replacement);
        copied = start + body_url.len();
    }
    out.push_str(&body[copied..]);
    out
}

/// Where the image or link whose URL ends at `end` closes: after `)` of
/// Markdown (`![](url)`, `![](url "title")`, `![](<url>)`), after `>` of an
/// HTML tag (`<img src="url" …>`), else right after the URL.
fn reference_end(body: &str, end: usize) -> usize {
    let after = &body[end..];
    let line = &after[..after.find('\n').unwrap_or(after.len())];
    let close = |delimiter: char| line.find(delimiter).map(|at| end + at + 1);
    if line.starts_with(')') {
        end + 1
    } else if line.starts_with(">)") {
        end + 2
    } else if line.starts_with(" \"") || line.starts_with(" '") {
        close(')').unwrap_or(end)
    } else if line.starts_with('"') || line.starts_with('\'') {
        close('>').unwrap_or(end)
    } else {
        end
    }
}

/// The body with [`ASSET_PENDING_MARKER`] right after each image that shows
/// `body_url`, unless it is there already: marking twice changes nothing.
pub fn mark_pending(body: &str, body_url: &str) -> String {
    let mut out = String::with_capacity(body.len() + ASSET_PENDING_MARKER.len());
    let mut copied = 0;
    let mut marked_at = None;
    for start in occurrences(body, body_url) {
        let at = reference_end(body, start + body_url.len());
        // Two URLs of one line may close at the same place: one marker.
        if at < copied || marked_at == Some(at) {
            continue;
        }
        out.push_str(&body[copied..at]);
        if !body[at..].starts_with(ASSET_PENDING_MARKER) {
            out.push_str(ASSET_PENDING_MARKER);
        }
        copied = at;
        marked_at = Some(at);
    }
    out.push_str(&body[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0";
    const PDF: &[u8] = b"%PDF-1.7\n";
    const ZIP: &[u8] = b"PK\x03\x04\x14\0\0\0\0\0";
    const SVG: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>";
    const XML_SVG: &[u8] =
        b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>";

    fn hints<'a>(
        file_name: Option<&'a str>,
        url: Option<&'a str>,
        content_type: Option<&'a str>,
    ) -> ExtensionHints<'a> {
        ExtensionHints {
            file_name,
            url,
            content_type,
        }
    }

    #[test]
    fn the_pool_path_is_the_hash_bucketed_by_its_first_two_characters() {
        let address = content_address(PNG, &ExtensionHints::default());
        assert_eq!(address.sha256, sha256_hex_bytes(PNG));
        assert_eq!(address.extension, ".png");
        assert_eq!(
            address.path,
            format!("assets/{}/{}.png", &address.sha256[..2], address.sha256)
        );
        assert_eq!(
            pool_path(
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                ""
            ),
            "assets/ba/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // The same bytes under other names share one file.
        let again = content_address(PNG, &hints(Some("x.jpg"), Some("https://h/y.gif"), None));
        assert_eq!(again, address);
    }

    #[test]
    fn the_extension_comes_from_the_bytes_then_the_hints() {
        let s3 = "https://prod-files-secure.s3.amazonaws.com/a/b/Screen%20Shot.PNG?X-Amz-Signature=abc.def";
        let cases: &[(&str, &[u8], ExtensionHints<'_>, &str)] = &[
            ("sniffed png", PNG, ExtensionHints::default(), ".png"),
            (
                "sniffed over a wrong name",
                PNG,
                hints(Some("photo.gif"), None, Some("image/gif")),
                ".png",
            ),
            ("sniffed jpeg", JPEG, ExtensionHints::default(), ".jpg"),
            (
                "sniffed pdf",
                PDF,
                hints(None, Some("https://h/file"), None),
                ".pdf",
            ),
            (
                "svg from the file name",
                SVG,
                hints(Some("diagram.SVG"), Some("https://h/x.png"), None),
                ".svg",
            ),
            (
                "svg from the url, query ignored",
                SVG,
                hints(None, Some("https://h/a/d.svg?sig=x.png"), None),
                ".svg",
            ),
            (
                "url path, case folded",
                b"text",
                hints(None, Some(s3), None),
                ".png",
            ),
            (
                "not a url: still a path",
                b"text",
                hints(None, Some("/local/notes.txt#frag"), None),
                ".txt",
            ),
            (
                "content type last",
                SVG,
                hints(
                    None,
                    Some("https://h/media/123"),
                    Some("image/svg+xml; charset=utf-8"),
                ),
                ".svg",
            ),
            (
                "content type case and spaces",
                b"a,b",
                hints(None, None, Some(" Text/CSV ")),
                ".csv",
            ),
            (
                "no extension in a dotted folder",
                b"text",
                hints(None, Some("https://h/v1.2/raw"), None),
                "",
            ),
            (
                "a hidden name has no extension",
                b"text",
                hints(Some(".env"), None, None),
                "",
            ),
            (
                "an implausible extension",
                b"text",
                hints(Some("a.b c"), None, None),
                "",
            ),
            (
                "an overlong extension",
                b"text",
                hints(Some("a.abcdefghijk"), None, None),
                "",
            ),
            (
                "octet-stream says nothing",
                b"text",
                hints(None, None, Some("application/octet-stream")),
                "",
            ),
            ("nothing known", b"", ExtensionHints::default(), ""),
            (
                "zip yields to a name",
                ZIP,
                hints(Some("map.xmind"), None, None),
                ".xmind",
            ),
            (
                "zip yields to a url",
                ZIP,
                hints(None, Some("https://h/d.sketch"), None),
                ".sketch",
            ),
            ("zip otherwise", ZIP, ExtensionHints::default(), ".zip"),
            (
                "an svg with an xml declaration",
                XML_SVG,
                hints(Some("d.svg"), None, None),
                ".svg",
            ),
            ("xml otherwise", XML_SVG, ExtensionHints::default(), ".xml"),
        ];
        for (why, bytes, hints, expected) in cases {
            assert_eq!(extension(bytes, hints), *expected, "{why}");
        }
    }

    #[test]
    fn relative_paths_from_the_document_folder() {
        let cases = [
            ("README.md", "assets/ab/ab12.png", "assets/ab/ab12.png"),
            (
                "notion/Page.md",
                "assets/ab/ab12.png",
                "../assets/ab/ab12.png",
            ),
            (
                "notion/设计 文档/子页.md",
                "assets/ab/ab12.png",
                "../../assets/ab/ab12.png",
            ),
            ("notion/A/B.md", "notion/A/C.md", "C.md"),
            ("notion/A/B.md", "notion/A/D/E.md", "D/E.md"),
            ("notion/A/B/c.md", "notion/X/y.md", "../../X/y.md"),
            ("notion/A/B.md", "notion/A.md", "../A.md"),
            ("/notion//A/./B.md", "notion/A/C.md", "C.md"),
        ];
        for (from, target, expected) in cases {
            assert_eq!(relative_path(from, target), expected, "{from} → {target}");
        }
    }

    #[test]
    fn the_exact_url_is_replaced_and_only_as_a_whole() {
        let url = "https://files.test/a.png?sig=1";
        let body = format!(
            "![one]({url})\n<img src=\"{url}\" alt=\"x\">\n![other]({url}&extra=2)\n[link]({url} \"title\")\n"
        );
        let replaced = replace_url(&body, url, "../assets/ab/ab.png");
        assert_eq!(
            replaced,
            "![one](../assets/ab/ab.png)\n<img src=\"../assets/ab/ab.png\" alt=\"x\">\n![other](https://files.test/a.png?sig=1&extra=2)\n[link](../assets/ab/ab.png \"title\")\n"
        );
        assert_eq!(replace_url(&body, "", "x"), body);
        assert_eq!(replace_url("no url", url, "x"), "no url");
    }

    #[test]
    fn a_failed_download_keeps_the_url_and_is_marked_once() {
        let url = "https://files.test/a.png?sig=1";
        let m = ASSET_PENDING_MARKER;
        let cases = [
            (format!("![a]({url})"), format!("![a]({url}){m}")),
            (
                format!("![a]({url} \"t\") more"),
                format!("![a]({url} \"t\"){m} more"),
            ),
            (format!("![a](<{url}>)"), format!("![a](<{url}>){m}")),
            (
                format!("<img src=\"{url}\" width=3>x"),
                format!("<img src=\"{url}\" width=3>{m}x"),
            ),
            (format!("bare {url} text"), format!("bare {url}{m} text")),
            (
                format!("![a]({url})\n\n![b]({url})\n"),
                format!("![a]({url}){m}\n\n![b]({url}){m}\n"),
            ),
            (format!("![a]({url}&v=2)"), format!("![a]({url}&v=2)")),
            ("nothing here".to_owned(), "nothing here".to_owned()),
        ];
        for (body, expected) in cases {
            let marked = mark_pending(&body, url);
            assert_eq!(marked, expected, "{body}");
            assert_eq!(mark_pending(&marked, url), marked, "idempotent: {body}");
            // The original URL stays in the body.
            assert_eq!(marked.matches(url).count(), body.matches(url).count());
        }
    }

    proptest! {
        #[test]
        fn marking_is_idempotent_and_loses_nothing(
            before in "[a-z !()\\[\\]<>\"\n]{0,12}",
            // What follows the URL ends it (else it is a longer URL).
            after in "[) \"\n<>'][a-z !()\\[\\]<>\"\n]{0,11}",
            copies in 1usize..4,
        ) {
            let url = "https://h/x.png";
            let body: String = (0..copies).map(|_| format!("{before}{url}{after}")).collect();
            let marked = mark_pending(&body, url);
            prop_assert_eq!(mark_pending(&marked, url), marked.clone());
            // Removing the markers gives the body back.
            prop_assert_eq!(marked.replace(ASSET_PENDING_MARKER, ""), body.clone());
            prop_assert!(marked.matches(ASSET_PENDING_MARKER).count() <= copies);
            prop_assert!(marked.matches(ASSET_PENDING_MARKER).count() >= 1);
        }

        #[test]
        fn a_relative_path_resolves_back_to_its_target(
            from in prop::collection::vec("[a-c]{1,2}", 1..5),
            target in prop::collection::vec("[a-c]{1,2}", 1..5),
        ) {
            let from_path = from.join("/");
            let target_path = target.join("/");
            let relative = relative_path(&from_path, &target_path);
            // Resolve it from the document's folder, the way a viewer would.
            let mut resolved: Vec<&str> = from[..from.len() - 1].iter().map(String::as_str).collect();
            for part in relative.split('/') {
                if part == ".." {
                    prop_assert!(resolved.pop().is_some());
                } else {
                    resolved.push(part);
                }
            }
            prop_assert_eq!(resolved.join("/"), target_path);
        }
    }
}
