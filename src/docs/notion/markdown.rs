//! What the adapter reads in a page's enhanced Markdown (as
//! `GET /v1/pages/{id}/markdown` returns it), pure: the `<unknown …/>` tags
//! of blocks Notion did not render, splicing a fetched subtree in place of
//! its tag, the degradation markers for what stays unrendered, the assets
//! (Notion-hosted files behind expiring signed URLs) and the links to other
//! Notion documents.

use std::collections::HashSet;

use url::Url;

use super::api::{dashed, undashed};
use crate::docs::{
    adapter::{AssetRef, Degradation, DegradationKind, DocLink},
    markers,
};

/// One `<unknown url="…" alt="…"/>` tag: a block the endpoint did not
/// render (past the truncation limit, or a type it cannot express).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTag {
    /// Byte range of the whole tag in the body.
    pub start: usize,
    pub end: usize,
    /// The block's URL (its page's URL with the block id as fragment).
    pub url: Option<String>,
    /// The block's type, as Notion names it.
    pub alt: Option<String>,
    /// The block id, undashed, read from the URL.
    pub block_id: Option<String>,
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let needle = format!("{name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].to_owned())
}

/// The last 32-hex run (dashed or not) of a URL: a block id in its
/// fragment, else the page id at the end of its path.
fn id_in(url: &str) -> Option<String> {
    let candidates = url
        .rsplit(['#', '/', '-', '?', '=', '&'])
        .map(str::to_owned)
        .collect::<Vec<_>>();
    // A dashed id is split by the dashes above: try the tail as a whole too.
    let tail = url
        .rsplit(['#', '/', '?', '=', '&'])
        .next()
        .unwrap_or_default();
    std::iter::once(
        tail.get(tail.len().saturating_sub(36)..)
            .unwrap_or(tail)
            .to_owned(),
    )
    .chain(candidates)
    .find_map(|part| dashed(&part).filter(|_| part.len() == 32 || part.len() == 36))
    .map(|id| undashed(&id))
}

/// Every unknown tag of `body`, in order.
pub fn unknown_tags(body: &str) -> Vec<UnknownTag> {
    let mut tags = Vec::new();
    let mut from = 0;
    while let Some(offset) = body[from..].find("<unknown") {
        let start = from + offset;
        let Some(len) = body[start..].find('>') else {
            break;
        };
        let end = start + len + 1;
        let tag = &body[start..end];
        let url = attribute(tag, "url");
        tags.push(UnknownTag {
            start,
            end,
            block_id: url.as_deref().and_then(id_in),
            url,
            alt: attribute(tag, "alt"),
        });
        from = end;
    }
    tags
}

/// `body` with the tag of `block_id` replaced by `subtree`, its lines
/// indented like the tag's; `None` when no tag names that block.
pub fn splice(body: &str, block_id: &str, subtree: &str) -> Option<String> {
    let wanted = undashed(block_id);
    let tag = unknown_tags(body)
        .into_iter()
        .find(|tag| tag.block_id.as_deref() == Some(wanted.as_str()))?;
    let line_start = body[..tag.start].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = body[line_start..tag.start]
        .chars()
        .take_while(|c| *c == '\t' || *c == ' ')
        .collect();
    let subtree = subtree.trim_end_matches('\n');
    let indented = subtree.replace('\n', &format!("\n{indent}"));
    Some(format!(
        "{}{indented}{}",
        &body[..tag.start],
        &body[tag.end..]
    ))
}

/// What stays unrendered after the subtrees were fetched.
#[derive(Debug, Clone, Default)]
pub struct Unrendered<'a> {
    /// Undashed ids of listed unknown blocks whose fetch failed.
    pub failed: HashSet<String>,
    /// Notion said `truncated` and some of the rest is still missing.
    pub truncated: bool,
    /// The page's dashed id and online URL, for the markers and links.
    pub page_id: &'a str,
    pub page_url: Option<&'a str>,
}

/// The degraded body: every remaining unknown tag kept verbatim with its
/// marker beside it (`unrendered_block` when it was listed and its fetch
/// failed, `unknown_block` otherwise); a failed block without a tag and a
/// truncation get a line with a link online and their marker at the end.
/// `None` when nothing is degraded.
pub fn degrade(markdown: &str, unrendered: &Unrendered) -> Option<(String, Vec<Degradation>)> {
    let mut body = String::with_capacity(markdown.len());
    let mut degradations = Vec::new();
    let mut at = 0;
    let mut tagged = HashSet::new();
    for tag in unknown_tags(markdown) {
        let kind = match &tag.block_id {
            Some(id) if unrendered.failed.contains(id) => DegradationKind::UnrenderedBlock,
            _ => DegradationKind::UnknownBlock,
        };
        let id = match &tag.block_id {
            Some(id) => {
                tagged.insert(id.clone());
                dashed(id).unwrap_or_else(|| id.clone())
            }
            None => tag.alt.clone().unwrap_or_default(),
        };
        let degradation = Degradation { kind, id };
        body.push_str(&markdown[at..tag.end]);
        body.push(' ');
        body.push_str(&markers::render(&degradation));
        degradations.push(degradation);
        at = tag.end;
    }
    body.push_str(&markdown[at..]);
    let online = |fragment: Option<&str>| match (unrendered.page_url, fragment) {
        (Some(url), Some(fragment)) => format!("{url}#{fragment}"),
        (Some(url), None) => url.to_owned(),
        (None, _) => String::new(),
    };
    let mut missing: Vec<&String> = unrendered
        .failed
        .iter()
        .filter(|id| !tagged.contains(*id))
        .collect();
    missing.sort();
    let mut tail = Vec::new();
    for id in missing {
        let degradation = Degradation {
            kind: DegradationKind::UnrenderedBlock,
            id: dashed(id).unwrap_or_else(|| id.clone()),
        };
        tail.push(format!(
            "[Block {} online]({}) {}",
            degradation.id,
            online(Some(id)),
            markers::render(&degradation)
        ));
        degradations.push(degradation);
    }
    if unrendered.truncated {
        let degradation = Degradation {
            kind: DegradationKind::Truncated,
            id: unrendered.page_id.to_owned(),
        };
        tail.push(format!(
            "[The rest of this page is online]({}) {}",
            online(None),
            markers::render(&degradation)
        ));
        degradations.push(degradation);
    }
    if degradations.is_empty() {
        return None;
    }
    if !tail.is_empty() {
        if !body.ends_with('\n') && !body.is_empty() {
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&tail.join("\n"));
        body.push('\n');
    }
    Some((body, degradations))
}

/// Every URL of the body with its exact text: Markdown link and image
/// targets, and `src`/`url`/`href` attributes of enhanced-Markdown tags.
fn urls(body: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = body[from..].find("](") {
        let start = from + offset + 2;
        let end = body[start..]
            .find([')', ' ', '\n'])
            .map_or(body.len(), |len| start + len);
        found.push((start, &body[start..end]));
        from = end;
    }
    for attribute in ["src=\"", "url=\"", "href=\""] {
        let mut from = 0;
        while let Some(offset) = body[from..].find(attribute) {
            let start = from + offset + attribute.len();
            let Some(len) = body[start..].find('"') else {
                break;
            };
            found.push((start, &body[start..start + len]));
            from = start + len;
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found
}

/// The URL as written in the body, attribute escapes undone.
fn unescape(text: &str) -> String {
    text.replace("&amp;", "&")
}

/// A file Notion hosts: a signed, expiring URL (S3's `X-Amz-*`
/// parameters, or `file.notion.so`'s `expirationTimestamp`/`signature`).
fn is_notion_hosted(url: &Url) -> bool {
    url.query_pairs().any(|(key, _)| {
        let key = key.to_ascii_lowercase();
        key.starts_with("x-amz-") || key == "expirationtimestamp" || key == "signature"
    })
}

/// The Notion-hosted files the body shows (images, files, PDFs, audio,
/// video), each once. Key: the URL without its signature (the query) —
/// the file's place in Notion's storage, stable across runs while the
/// signature changes on every fetch.
pub fn assets(body: &str) -> Vec<AssetRef> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for (_, text) in urls(body) {
        let download = unescape(text);
        let Ok(url) = Url::parse(&download) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https") || !is_notion_hosted(&url) {
            continue;
        }
        if !seen.insert(text) {
            continue;
        }
        let mut key = url.clone();
        key.set_query(None);
        key.set_fragment(None);
        let file_name = url
            .path_segments()
            .and_then(|mut segments| segments.next_back())
            .filter(|name| !name.is_empty())
            .map(|name| {
                percent_encoding::percent_decode_str(name)
                    .decode_utf8_lossy()
                    .into_owned()
            });
        found.push(AssetRef {
            remote_key: key.to_string(),
            download_url: download,
            body_url: Some(text.to_owned()),
            file_name,
        });
    }
    found
}

/// The links to Notion documents (`notion.so` and `*.notion.site` URLs, in
/// Markdown links, page and database tags and mentions), each once. The
/// target is the id the URL names, undashed: the engine resolves it
/// through the aliases.
pub fn links(body: &str) -> Vec<DocLink> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for (_, text) in urls(body) {
        let Ok(url) = Url::parse(&unescape(text)) else {
            continue;
        };
        let host = url.host_str().unwrap_or_default();
        let notion =
            host == "notion.so" || host.ends_with(".notion.so") || host.ends_with(".notion.site");
        if !notion || host.starts_with("file.") || !seen.insert(text) {
            continue;
        }
        // A peek link (`?p=<id>`) names the page it opens; otherwise the
        // path's last segment ends with the id.
        let peek = url
            .query_pairs()
            .find(|(key, _)| key == "p")
            .and_then(|(_, id)| dashed(&id));
        let in_path = url
            .path_segments()
            .and_then(|mut segments| segments.next_back())
            .and_then(|last| {
                let tail = &last[last.len().saturating_sub(32)..];
                dashed(tail).or_else(|| dashed(last))
            });
        if let Some(id) = peek.or(in_path) {
            found.push(DocLink {
                target_id: undashed(&id),
                raw_url: text.to_owned(),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: &str = "1f2e3d4c00004abc8def123456789abc";

    #[test]
    fn unknown_tags_name_their_block() {
        let body = format!(
            "# T\n\t<unknown url=\"https://www.notion.so/Page-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa#{BLOCK}\" alt=\"toggle\"/>\n<unknown alt=\"ai_block\"/>\n"
        );
        let tags = unknown_tags(&body);
        assert_eq!(tags.len(), 2);
        assert_eq!(tags[0].block_id.as_deref(), Some(BLOCK));
        assert_eq!(tags[0].alt.as_deref(), Some("toggle"));
        assert_eq!(
            &body[tags[0].start..tags[0].end],
            &format!(
                "<unknown url=\"https://www.notion.so/Page-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa#{BLOCK}\" alt=\"toggle\"/>"
            )
        );
        assert_eq!(tags[1].block_id, None);
        assert_eq!(tags[1].alt.as_deref(), Some("ai_block"));
    }

    #[test]
    fn a_fetched_subtree_takes_its_tags_place_and_indent() {
        let body = format!(
            "- item\n\t<unknown url=\"https://www.notion.so/p#{BLOCK}\" alt=\"toggle\"/>\nafter\n"
        );
        let spliced = splice(
            &body,
            "1f2e3d4c-0000-4abc-8def-123456789abc",
            "line 1\nline 2\n",
        )
        .unwrap();
        assert_eq!(spliced, "- item\n\tline 1\n\tline 2\nafter\n");
        assert_eq!(splice(&body, "ffffffffffffffffffffffffffffffff", "x"), None);
    }

    #[test]
    fn what_stays_unrendered_is_marked_and_linked() {
        let other = "2f2e3d4c00004abc8def123456789abc";
        let body = format!(
            "a\n<unknown url=\"https://www.notion.so/p#{BLOCK}\" alt=\"toggle\"/>\n<unknown url=\"https://www.notion.so/p#{other}\" alt=\"form\"/>\n"
        );
        let unrendered = Unrendered {
            failed: HashSet::from([
                BLOCK.to_owned(),
                "3f2e3d4c00004abc8def123456789abc".to_owned(),
            ]),
            truncated: true,
            page_id: "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
            page_url: Some("https://www.notion.so/p"),
        };
        let (degraded, degradations) = degrade(&body, &unrendered).unwrap();
        assert_eq!(
            degraded,
            format!(
                "a\n<unknown url=\"https://www.notion.so/p#{BLOCK}\" alt=\"toggle\"/> <!-- opendoc:degraded kind=unrendered_block id=1f2e3d4c-0000-4abc-8def-123456789abc -->\n\
                 <unknown url=\"https://www.notion.so/p#{other}\" alt=\"form\"/> <!-- opendoc:degraded kind=unknown_block id=2f2e3d4c-0000-4abc-8def-123456789abc -->\n\
                 \n[Block 3f2e3d4c-0000-4abc-8def-123456789abc online](https://www.notion.so/p#3f2e3d4c00004abc8def123456789abc) <!-- opendoc:degraded kind=unrendered_block id=3f2e3d4c-0000-4abc-8def-123456789abc -->\n\
                 [The rest of this page is online](https://www.notion.so/p) <!-- opendoc:degraded kind=truncated id=aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa -->\n"
            )
        );
        let kinds: Vec<_> = degradations.iter().map(|d| d.kind).collect();
        assert_eq!(
            kinds,
            [
                DegradationKind::UnrenderedBlock,
                DegradationKind::UnknownBlock,
                DegradationKind::UnrenderedBlock,
                DegradationKind::Truncated
            ]
        );
        assert_eq!(markers::parse_all(&degraded), degradations);
        assert!(degrade("plain\n", &Unrendered::default()).is_none());
    }

    #[test]
    fn signed_files_are_assets_keyed_without_their_signature() {
        let image = "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws/f1/chart%20v2.png?X-Amz-Algorithm=AWS4&amp;X-Amz-Signature=abc";
        let body = format!(
            "![Chart]({image})\n<pdf src=\"https://file.notion.so/f/f/ws/f2/spec.pdf?table=block&amp;id=x&amp;expirationTimestamp=1&amp;signature=s\">Spec</pdf>\n![external](https://example.com/a.png)\n![again]({image})\n"
        );
        let found = assets(&body);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].remote_key,
            "https://prod-files-secure.s3.us-west-2.amazonaws.com/ws/f1/chart%20v2.png"
        );
        assert_eq!(found[0].body_url.as_deref(), Some(image));
        assert_eq!(found[0].download_url, image.replace("&amp;", "&"));
        assert_eq!(found[0].file_name.as_deref(), Some("chart v2.png"));
        assert_eq!(
            found[1].remote_key,
            "https://file.notion.so/f/f/ws/f2/spec.pdf"
        );
        assert_eq!(found[1].file_name.as_deref(), Some("spec.pdf"));
    }

    #[test]
    fn links_to_notion_documents_name_their_target() {
        let body = "See [plan](https://www.notion.so/acme/Plan-11111111111111111111111111111111) and \
            <mention-page url=\"https://www.notion.so/22222222222222222222222222222222\">Spec</mention-page>, \
            <database url=\"https://www.notion.so/33333333-3333-3333-3333-333333333333\">Tasks</database> \
            [peek](https://www.notion.so/acme/44444444444444444444444444444444?p=55555555555555555555555555555555&pm=s) \
            [site](https://acme.notion.site/Docs-66666666666666666666666666666666#77777777777777777777777777777777) \
            [web](https://example.com/88888888888888888888888888888888)";
        let found: Vec<(String, String)> = links(body)
            .into_iter()
            .map(|link| (link.target_id, link.raw_url))
            .collect();
        assert_eq!(
            found,
            [
                ("11111111111111111111111111111111".into(), "https://www.notion.so/acme/Plan-11111111111111111111111111111111".into()),
                ("22222222222222222222222222222222".into(), "https://www.notion.so/22222222222222222222222222222222".into()),
                ("33333333333333333333333333333333".into(), "https://www.notion.so/33333333-3333-3333-3333-333333333333".into()),
                ("55555555555555555555555555555555".into(), "https://www.notion.so/acme/44444444444444444444444444444444?p=55555555555555555555555555555555&pm=s".into()),
                ("66666666666666666666666666666666".into(), "https://acme.notion.site/Docs-66666666666666666666666666666666#77777777777777777777777777777777".into()),
            ]
        );
    }
}
