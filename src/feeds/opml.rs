//! OPML import and export (pure). Import reads every outline with an
//! `xmlUrl` as a feed; the top-level outline it sits under (if any) names
//! its group — deeper folders are flattened into their top-level one, as
//! groups do not nest. Export writes one outline per group with its feeds.

use opml::{Body, Head, OPML, Outline};
use serde::{Deserialize, Serialize};

/// A feed found in an OPML document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpmlFeed {
    pub link: String,
    pub name: Option<String>,
    pub site_url: Option<String>,
    /// `None`: the default group.
    pub group: Option<String>,
}

/// An import creates at most this many feeds.
pub const MAX_FEEDS: usize = 5000;

#[derive(Debug, thiserror::Error)]
pub enum OpmlError {
    #[error("the OPML document lists more than {MAX_FEEDS} feeds")]
    TooMany,
    #[error("not a valid OPML document: {0}")]
    Invalid(String),
    #[error("the OPML document lists no feeds")]
    Empty,
}

pub fn parse(text: &str) -> Result<Vec<OpmlFeed>, OpmlError> {
    let document = OPML::from_str(text).map_err(|error| OpmlError::Invalid(error.to_string()))?;
    let mut feeds = Vec::new();
    for outline in &document.body.outlines {
        collect(outline, None, &mut feeds);
    }
    if feeds.is_empty() {
        return Err(OpmlError::Empty);
    }
    if feeds.len() > MAX_FEEDS {
        return Err(OpmlError::TooMany);
    }
    Ok(feeds)
}

fn collect(outline: &Outline, group: Option<&str>, feeds: &mut Vec<OpmlFeed>) {
    let label = non_blank(outline.title.as_deref()).or(non_blank(Some(&outline.text)));
    match non_blank(outline.xml_url.as_deref()) {
        Some(link) => feeds.push(OpmlFeed {
            link: link.to_owned(),
            name: label.map(str::to_owned),
            site_url: non_blank(outline.html_url.as_deref()).map(str::to_owned),
            group: group.map(str::to_owned),
        }),
        None => {
            let group = group.or(label);
            for child in &outline.outlines {
                collect(child, group, feeds);
            }
        }
    }
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|value| !value.is_empty())
}

/// A group and its feeds, for export.
pub struct ExportGroup {
    pub name: String,
    pub feeds: Vec<ExportFeed>,
}

pub struct ExportFeed {
    pub name: String,
    pub link: String,
    pub site_url: Option<String>,
}

pub fn render(title: &str, groups: Vec<ExportGroup>) -> Result<String, OpmlError> {
    let outlines = groups
        .into_iter()
        .map(|group| Outline {
            text: group.name.clone(),
            title: Some(group.name),
            outlines: group
                .feeds
                .into_iter()
                .map(|feed| Outline {
                    text: feed.name.clone(),
                    title: Some(feed.name),
                    r#type: Some("rss".into()),
                    xml_url: Some(feed.link),
                    html_url: feed.site_url,
                    ..Outline::default()
                })
                .collect(),
            ..Outline::default()
        })
        .collect();
    let document = OPML {
        version: "2.0".into(),
        head: Some(Head {
            title: Some(title.to_owned()),
            ..Head::default()
        }),
        body: Body { outlines },
    };
    document
        .to_string()
        .map_err(|error| OpmlError::Invalid(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outlines_become_feeds_in_their_top_level_group() {
        let text = r#"<?xml version="1.0"?><opml version="2.0"><head><title>x</title></head><body>
            <outline text="Loose" type="rss" xmlUrl="https://a.example/feed"/>
            <outline text="Tech">
              <outline text="Rust" title="Rust Blog" type="rss" xmlUrl="https://blog.rust-lang.org/feed.xml" htmlUrl="https://blog.rust-lang.org/"/>
              <outline text="Deeper"><outline text="Inner" xmlUrl="https://c.example/rss"/></outline>
            </outline>
            <outline text="Empty folder"/>
        </body></opml>"#;
        let feeds = parse(text).unwrap();
        assert_eq!(feeds.len(), 3);
        assert_eq!(feeds[0].group, None);
        assert_eq!(feeds[1].name.as_deref(), Some("Rust Blog"));
        assert_eq!(feeds[1].group.as_deref(), Some("Tech"));
        assert_eq!(
            feeds[1].site_url.as_deref(),
            Some("https://blog.rust-lang.org/")
        );
        assert_eq!(
            feeds[2].group.as_deref(),
            Some("Tech"),
            "nested folders flatten"
        );
    }

    #[test]
    fn invalid_or_empty_documents_are_errors() {
        assert!(matches!(parse("not xml"), Err(OpmlError::Invalid(_))));
        assert!(
            parse(r#"<opml version="2.0"><body><outline text="folder"/></body></opml>"#).is_err()
        );
    }

    #[test]
    fn export_round_trips() {
        let text = render(
            "Trellis feeds",
            vec![ExportGroup {
                name: "News & more".into(),
                feeds: vec![ExportFeed {
                    name: "A <b>".into(),
                    link: "https://a.example/feed?x=1&y=2".into(),
                    site_url: None,
                }],
            }],
        )
        .unwrap();
        let feeds = parse(&text).unwrap();
        assert_eq!(
            feeds,
            vec![OpmlFeed {
                link: "https://a.example/feed?x=1&y=2".into(),
                name: Some("A <b>".into()),
                site_url: None,
                group: Some("News & more".into()),
            }]
        );
    }
}
