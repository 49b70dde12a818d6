//! Document-link rewriting, the second phase (the first, asset URLs, runs
//! at write time): at a platform's finalization, over the whole links
//! table, each link's platform URL in a body becomes the target's path
//! relative to the linking document; links already rewritten on an earlier
//! run are fixed up when either end moved. Pure: the caller reads and
//! writes the files, and only ever passes the body (the frontmatter, with
//! its `url:`, is split off first and never rewritten).

use crate::docs::assets::{relative_path, replace_url};

/// One link of a document, resolved against the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedLink<'a> {
    /// The URL as the fetched body wrote it.
    pub raw_url: &'a str,
    /// The target's path now.
    pub target_path: &'a str,
    /// The target's path before this run moved it, if it did.
    pub target_moved_from: Option<&'a str>,
}

/// The body of the document at `from_path` (moved this run from
/// `from_moved_from`, if it was) with its links rewritten.
pub fn rewrite(
    body: &str,
    from_path: &str,
    from_moved_from: Option<&str>,
    links: &[ResolvedLink<'_>],
) -> String {
    let mut out = body.to_owned();
    for link in links {
        let now = relative_path(from_path, link.target_path);
        if from_moved_from.is_some() || link.target_moved_from.is_some() {
            let before = relative_path(
                from_moved_from.unwrap_or(from_path),
                link.target_moved_from.unwrap_or(link.target_path),
            );
            if before != now {
                out = replace_link_target(&out, &before, &now);
            }
        }
        out = replace_url(&out, link.raw_url, &now);
    }
    out
}

/// The body with every Markdown link or image whose target is exactly
/// `before` (`](before)` or `](before "title")`) pointing at `after`
/// instead. Matching the `](` keeps `../a.md` from matching inside
/// `../../a.md`.
pub fn replace_link_target(body: &str, before: &str, after: &str) -> String {
    let mut out = body.to_owned();
    for close in [")", " "] {
        out = out.replace(&format!("]({before}{close}"), &format!("]({after}{close}"));
    }
    out
}

/// A moved document's body with its asset paths re-aimed: they are
/// relative to the document's folder, which changed depth.
pub fn refit_asset_paths(body: &str, from: &str, to: &str) -> String {
    let before = asset_prefix(from);
    let after = asset_prefix(to);
    if before == after {
        return body.to_owned();
    }
    body.replace(&format!("]({before}"), &format!("]({after}"))
        .replace(&format!("src=\"{before}"), &format!("src=\"{after}"))
}

/// How a document at `path` reaches the asset pool: `../../assets/`.
fn asset_prefix(path: &str) -> String {
    let mut prefix = relative_path(path, "assets/x");
    prefix.pop();
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_urls_become_relative_paths() {
        let body = "See [B](https://notion.so/b1) and [B again](https://notion.so/b1).\n\
                    Not [C](https://notion.so/b1x).\n";
        let links = [ResolvedLink {
            raw_url: "https://notion.so/b1",
            target_path: "notion/B/README.md",
            target_moved_from: None,
        }];
        let out = rewrite(body, "notion/A.md", None, &links);
        assert_eq!(
            out,
            "See [B](B/README.md) and [B again](B/README.md).\n\
             Not [C](https://notion.so/b1x).\n"
        );
        // Rewriting again changes nothing.
        assert_eq!(rewrite(&out, "notion/A.md", None, &links), out);
    }

    #[test]
    fn rewritten_links_follow_a_moved_target_or_a_moved_source() {
        let body = "[B](B.md) [deep](../../a.md)";
        let links = [ResolvedLink {
            raw_url: "https://notion.so/b1",
            target_path: "notion/X/B.md",
            target_moved_from: Some("notion/B.md"),
        }];
        assert_eq!(
            rewrite(body, "notion/A.md", None, &links),
            "[B](X/B.md) [deep](../../a.md)"
        );
        let links = [ResolvedLink {
            raw_url: "https://notion.so/b1",
            target_path: "notion/B.md",
            target_moved_from: None,
        }];
        assert_eq!(
            rewrite(body, "notion/Y/A.md", Some("notion/A.md"), &links),
            "[B](../B.md) [deep](../../a.md)"
        );
    }

    #[test]
    fn asset_paths_follow_the_document_depth() {
        let body = "![x](../assets/ab/abc.png) <img src=\"../assets/cd/cd.png\">";
        assert_eq!(
            refit_asset_paths(body, "notion/a.md", "notion/A/B/a.md"),
            "![x](../../../assets/ab/abc.png) <img src=\"../../../assets/cd/cd.png\">"
        );
        assert_eq!(refit_asset_paths(body, "notion/a.md", "notion/b.md"), body);
    }
}
