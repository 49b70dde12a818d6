//! A Feishu docx document's blocks (as `GET /open-apis/docx/v1/documents/{id}/blocks`
//! lists them, every page concatenated) rendered to Markdown. Pure: what
//! needs more requests (a bitable's rows, a whiteboard's image or texts) is
//! named by [`live_blocks`], fetched by the adapter, and handed back in
//! [`Extras`].
//!
//! Two renders come out of one tree ([`render`]):
//!
//! - the **raw Markdown**, hashed by the engine: every block rendered from
//!   the block tree alone, live blocks (bitables, whiteboards) as their
//!   verbatim tag, so rows edited in a bitable never make the document look
//!   changed;
//! - the **body**, written to the mirror: the same, with each live block
//!   resolved from the [`Extras`] and every degraded block carrying its
//!   marker (`markers.rs`). `None` when nothing was degraded.
//!
//! Block types (Feishu's `BlockType` enum): 1 page (its title becomes the
//! `# ` line), 2 text, 3–11 headings 1–9 (Markdown stops at six: 7–9 are
//! written as level 6), 12 bullet, 13 ordered, 14 code (language enum →
//! name), 15 quote, 17 todo (`style.done`), 18 bitable, 19 callout, 22
//! divider, 23 file (an attachment asset), 24/25 grid and grid column and
//! 33 view (transparent: their children are rendered in place), 26 iframe
//! (its decoded URL), 27 image (an asset keyed by its token), 29 mind note
//! and 30 sheet (degraded to their link), 31 table with its 32 cells, 34
//! quote container (a table that merges cells keeps each merge's content
//! in its first cell, with the document's link and a `merged_cells`
//! marker: Markdown tables cannot span), 43 whiteboard. Any other type (16, which some SDKs
//! call an equation block but the documented list skips — equations come as
//! text runs; 20 chat card, 21 diagram, 28 widget, 35–42, 44+, 999
//! "unsupported") follows the degradation contract: its verbatim tag (type,
//! id and its data as JSON), the document's link and a marker.
//!
//! Text runs carry bold, italic, strikethrough, inline code and links; a
//! link's `url` and a `mention_doc`'s `url` are percent-encoded by Feishu
//! and decoded here exactly once (a `%2F` that was in the original URL
//! stays `%2F`). Document mentions, and links to Feishu documents, become
//! [`DocLink`]s the engine rewrites to relative paths.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::docs::{
    adapter::{AssetRef, Degradation, DegradationKind, DocLink},
    markers,
};

/// The documented block types the renderer knows.
pub mod block_type {
    pub const PAGE: u64 = 1;
    pub const TEXT: u64 = 2;
    pub const HEADING1: u64 = 3;
    pub const HEADING9: u64 = 11;
    pub const BULLET: u64 = 12;
    pub const ORDERED: u64 = 13;
    pub const CODE: u64 = 14;
    pub const QUOTE: u64 = 15;
    pub const TODO: u64 = 17;
    pub const BITABLE: u64 = 18;
    pub const CALLOUT: u64 = 19;
    pub const DIVIDER: u64 = 22;
    pub const FILE: u64 = 23;
    pub const GRID: u64 = 24;
    pub const GRID_COLUMN: u64 = 25;
    pub const IFRAME: u64 = 26;
    pub const IMAGE: u64 = 27;
    pub const MINDNOTE: u64 = 29;
    pub const SHEET: u64 = 30;
    pub const TABLE: u64 = 31;
    pub const TABLE_CELL: u64 = 32;
    pub const VIEW: u64 = 33;
    pub const QUOTE_CONTAINER: u64 = 34;
    pub const BOARD: u64 = 43;
}

/// A bitable embedded in a document, as the adapter fetched it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Bitable {
    /// Small enough: every row, each value as a string, in field order.
    Inline {
        /// The field names, in the table's order.
        fields: Vec<String>,
        /// The rows, one string per field.
        rows: Vec<Vec<String>>,
    },
    /// Over the inline row limit: its schema and row count.
    Oversize {
        /// Each field's name and type name.
        fields: Vec<(String, String)>,
        /// How many rows it has.
        rows: u64,
        /// The inline limit it is over.
        limit: u32,
    },
    /// Its fetch failed; why, for the operator.
    Failed {
        /// The adapter's error.
        reason: String,
    },
}

/// A whiteboard embedded in a document, as the adapter fetched it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Board {
    /// Its image downloaded: the asset to reference.
    Image {
        /// The asset's stable key.
        remote_key: String,
        /// Where the adapter serves it from.
        download_url: String,
    },
    /// No image, but the texts of its nodes.
    Texts {
        /// Each node's text, in the board's order.
        texts: Vec<String>,
    },
    /// Neither: only its id and link remain.
    Failed,
}

/// What the adapter fetched for the live blocks, keyed by their token.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Extras {
    /// Bitables by block token (`<app_token>_<table_id>`).
    #[serde(default)]
    pub bitables: HashMap<String, Bitable>,
    /// Whiteboards by token.
    #[serde(default)]
    pub boards: HashMap<String, Board>,
}

/// A block that needs more requests before the body can be rendered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LiveBlock {
    /// A bitable: its app token and table id.
    Bitable {
        token: String,
        app_token: String,
        table_id: String,
    },
    /// A whiteboard.
    Board { token: String },
}

/// Where the document is, for links and asset URLs.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The document's online URL, the degraded blocks' jump back.
    pub doc_url: Option<&'a str>,
    /// The API's `open-apis` base with a trailing slash
    /// (`https://open.feishu.cn/open-apis/`): media downloads go there.
    pub api_base: &'a str,
}

/// The renders of one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The raw Markdown (what the engine hashes).
    pub markdown: String,
    /// The body, when it differs from the raw Markdown.
    pub body: Option<String>,
    /// The assets the body references.
    pub assets: Vec<AssetRef>,
    /// The links to other Feishu documents.
    pub links: Vec<DocLink>,
    /// What the body lost, one per degraded block.
    pub degradations: Vec<Degradation>,
}

/// The blocks of a document by id, with its root (the page block).
struct Tree<'b> {
    by_id: HashMap<&'b str, &'b Value>,
    root: Option<&'b Value>,
}

fn str_field<'v>(value: &'v Value, name: &str) -> Option<&'v str> {
    value.get(name).and_then(Value::as_str)
}

fn kind(block: &Value) -> u64 {
    block.get("block_type").and_then(Value::as_u64).unwrap_or(0)
}

fn id(block: &Value) -> &str {
    str_field(block, "block_id").unwrap_or_default()
}

fn children<'b>(tree: &Tree<'b>, block: &'b Value) -> Vec<&'b Value> {
    block
        .get("children")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .filter_map(|child| tree.by_id.get(child).copied())
                .collect()
        })
        .unwrap_or_default()
}

impl<'b> Tree<'b> {
    fn new(blocks: &'b [Value]) -> Self {
        let by_id: HashMap<&str, &Value> = blocks.iter().map(|block| (id(block), block)).collect();
        // The page block is the root; without one, the first parentless block.
        let root = blocks
            .iter()
            .find(|block| kind(block) == block_type::PAGE)
            .or_else(|| {
                blocks.iter().find(|block| {
                    str_field(block, "parent_id").is_none_or(|parent| parent.is_empty())
                })
            });
        Tree { by_id, root }
    }
}

/// The blocks of `blocks` whose body needs more requests, each once.
pub fn live_blocks(blocks: &[Value]) -> Vec<LiveBlock> {
    let mut seen = HashSet::new();
    let mut live = Vec::new();
    for block in blocks {
        let item = match kind(block) {
            block_type::BITABLE => {
                let Some(token) = block.pointer("/bitable/token").and_then(Value::as_str) else {
                    continue;
                };
                let Some((app_token, table_id)) = token.split_once('_') else {
                    continue;
                };
                LiveBlock::Bitable {
                    token: token.to_owned(),
                    app_token: app_token.to_owned(),
                    table_id: table_id.to_owned(),
                }
            }
            block_type::BOARD => {
                let Some(token) = block.pointer("/board/token").and_then(Value::as_str) else {
                    continue;
                };
                LiveBlock::Board {
                    token: token.to_owned(),
                }
            }
            _ => continue,
        };
        if seen.insert(item.clone()) {
            live.push(item);
        }
    }
    live
}

/// Percent-decodes a URL Feishu encoded, exactly once.
pub fn decode_url(url: &str) -> String {
    percent_encoding::percent_decode_str(url)
        .decode_utf8_lossy()
        .into_owned()
}

/// The token of a Feishu document URL (`https://<tenant>.feishu.cn/docx/<token>`,
/// `/wiki/`, `/sheets/`, `/base/`, `/mindnotes/`, `/docs/`, `/file/`);
/// `None` for any other URL.
pub fn feishu_doc_token(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let feishu = ["feishu.cn", "larksuite.com", "feishu.net", "larkoffice.com"]
        .iter()
        .any(|domain| host == *domain || host.ends_with(&format!(".{domain}")));
    if !feishu {
        return None;
    }
    let mut segments = parsed.path_segments()?;
    let kind = segments.next()?;
    let token = segments.next()?;
    let known = [
        "docx",
        "wiki",
        "sheets",
        "base",
        "mindnotes",
        "docs",
        "doc",
        "file",
        "slides",
    ];
    (known.contains(&kind) && !token.is_empty()).then(|| token.to_owned())
}

/// The origin of the document's URL (`https://tenant.feishu.cn`), for links
/// to embedded objects.
fn origin(doc_url: Option<&str>) -> Option<String> {
    let parsed = url::Url::parse(doc_url?).ok()?;
    Some(parsed.origin().ascii_serialization())
}

/// Feishu's code block language enum → a fence info string.
pub fn language_name(code: u64) -> &'static str {
    const NAMES: [&str; 75] = [
        "", // 1 PlainText
        "abap",
        "ada",
        "apache",
        "apex",
        "assembly",
        "bash",
        "csharp",
        "cpp",
        "c",
        "cobol",
        "css",
        "coffeescript",
        "d",
        "dart",
        "delphi",
        "django",
        "dockerfile",
        "erlang",
        "fortran",
        "foxpro",
        "go",
        "groovy",
        "html",
        "htmlbars",
        "http",
        "haskell",
        "json",
        "java",
        "javascript",
        "julia",
        "kotlin",
        "latex",
        "lisp",
        "logo",
        "lua",
        "matlab",
        "makefile",
        "markdown",
        "nginx",
        "objectivec",
        "openedgeabl",
        "php",
        "perl",
        "postscript",
        "powershell",
        "prolog",
        "protobuf",
        "python",
        "r",
        "rpg",
        "ruby",
        "rust",
        "sas",
        "scss",
        "sql",
        "scala",
        "scheme",
        "scratch",
        "shell",
        "swift",
        "thrift",
        "typescript",
        "vbscript",
        "vbnet",
        "xml",
        "yaml",
        "cmake",
        "diff",
        "gherkin",
        "graphql",
        "glsl",
        "properties",
        "solidity",
        "toml",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|code| code.checked_sub(1))
        .and_then(|index| NAMES.get(index))
        .copied()
        .unwrap_or("")
}

/// Escapes text for an HTML attribute value in double quotes.
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', "&#10;")
}

/// A block kept as its verbatim tag: its type, id and data (the JSON of
/// every field but the tree's own), on one line.
pub fn verbatim_tag(block: &Value) -> String {
    let data: BTreeMap<&str, &Value> = block
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .filter(|(name, _)| {
                    !matches!(
                        name.as_str(),
                        "block_id" | "block_type" | "parent_id" | "children" | "comment_ids"
                    )
                })
                .map(|(name, value)| (name.as_str(), value))
                .collect()
        })
        .unwrap_or_default();
    let data = serde_json::to_string(&data).unwrap_or_default();
    format!(
        "<feishu-block type=\"{}\" id=\"{}\" data=\"{}\"/>",
        kind(block),
        attribute(id(block)),
        attribute(&data)
    )
}

/// Which of the two renders is being made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// From the blocks alone (hashed).
    Raw,
    /// With the extras and the markers (written).
    Body,
}

struct Renderer<'a, 'b> {
    tree: Tree<'b>,
    context: &'a Context<'a>,
    extras: &'a Extras,
    pass: Pass,
    assets: Vec<AssetRef>,
    links: Vec<DocLink>,
    degradations: Vec<Degradation>,
    /// Blocks already rendered: a malformed tree (a cycle, a block listed
    /// twice) renders each block once.
    visited: HashSet<&'b str>,
}

/// Renders a document's blocks (see the module doc). `blocks` is every
/// block of the document, in the order the API listed them.
pub fn render(blocks: &[Value], context: &Context<'_>, extras: &Extras) -> Rendered {
    let raw = Renderer::run(blocks, context, extras, Pass::Raw);
    let body = Renderer::run(blocks, context, extras, Pass::Body);
    Rendered {
        body: (body.markdown != raw.markdown).then_some(body.markdown),
        markdown: raw.markdown,
        assets: body.assets,
        links: body.links,
        degradations: body.degradations,
    }
}

struct Output {
    markdown: String,
    assets: Vec<AssetRef>,
    links: Vec<DocLink>,
    degradations: Vec<Degradation>,
}

/// The list a rendered block belongs to, if it is a list item: an item is
/// joined to a neighbour of the same list by one line break, not a blank
/// line (bullets and to-dos share their `-` list; numbers start another).
fn list_family(block: &Value) -> Option<u8> {
    match kind(block) {
        block_type::BULLET | block_type::TODO => Some(0),
        block_type::ORDERED => Some(1),
        _ => None,
    }
}

/// Prefixes every line of `text` but the first with `indent`.
fn indent_rest(text: &str, indent: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            if index == 0 || line.is_empty() {
                line.to_owned()
            } else {
                format!("{indent}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prefixes every line with `> ` (a blank line with `>`).
fn quoted(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.is_empty() {
                ">".to_owned()
            } else {
                format!("> {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Wraps `text` in `marker` on both sides, keeping surrounding whitespace
/// outside (`** bold**` is not bold in Markdown).
fn wrap(text: &str, marker: &str) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return text.to_owned();
    }
    let start = text.len() - text.trim_start().len();
    let end = text.trim_end().len();
    format!(
        "{}{marker}{trimmed}{marker}{}",
        &text[..start],
        &text[end..]
    )
}

fn style_flag(style: Option<&Value>, name: &str) -> bool {
    style
        .and_then(|style| style.get(name))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

impl<'a, 'b> Renderer<'a, 'b> {
    fn run(
        blocks: &'b [Value],
        context: &'a Context<'a>,
        extras: &'a Extras,
        pass: Pass,
    ) -> Output {
        let mut renderer = Renderer {
            tree: Tree::new(blocks),
            context,
            extras,
            pass,
            assets: Vec::new(),
            links: Vec::new(),
            degradations: Vec::new(),
            visited: HashSet::new(),
        };
        let mut markdown = String::new();
        if let Some(root) = renderer.tree.root {
            renderer.visited.insert(id(root));
            let title = renderer.elements(root.get("page"));
            let top = children(&renderer.tree, root);
            let body = renderer.siblings(&top);
            let parts: Vec<String> = [
                (!title.trim().is_empty()).then(|| format!("# {}", title.trim())),
                (!body.is_empty()).then_some(body),
            ]
            .into_iter()
            .flatten()
            .collect();
            markdown = parts.join("\n\n");
        }
        if !markdown.is_empty() {
            markdown.push('\n');
        }
        Output {
            markdown,
            assets: renderer.assets,
            links: renderer.links,
            degradations: renderer.degradations,
        }
    }

    /// Sibling blocks, in order: list items one line apart, other blocks a
    /// blank line apart; an ordered item's number counts its run.
    fn siblings(&mut self, blocks: &[&'b Value]) -> String {
        let mut out = String::new();
        let mut previous_list = None;
        let mut ordinal = 0u64;
        for block in blocks {
            if !self.visited.insert(id(block)) {
                continue;
            }
            if kind(block) == block_type::ORDERED {
                ordinal += 1;
            } else {
                ordinal = 0;
            }
            let rendered = self.block(block, ordinal);
            if rendered.is_empty() {
                continue;
            }
            let list = list_family(block);
            if !out.is_empty() {
                let same_list = list.is_some() && list == previous_list;
                out.push_str(if same_list { "\n" } else { "\n\n" });
            }
            out.push_str(&rendered);
            previous_list = list;
        }
        out
    }

    /// A block's children, rendered as siblings.
    fn child_blocks(&mut self, block: &'b Value) -> String {
        let kids = children(&self.tree, block);
        self.siblings(&kids)
    }

    /// A list item: its marker, its text, its children indented under it.
    fn list_item(&mut self, block: &'b Value, marker: &str, data: &str) -> String {
        let text = self.elements(block.get(data));
        let mut out = format!("{marker}{text}");
        let kids = children(&self.tree, block);
        // A nested list follows its item directly; a paragraph under an
        // item needs a blank line, or it would continue the item's text.
        let nested_list = kids
            .iter()
            .find(|kid| !self.visited.contains(id(kid)))
            .is_some_and(|kid| list_family(kid).is_some());
        let nested = self.siblings(&kids);
        if !nested.is_empty() {
            let indent = " ".repeat(marker.len());
            out.push_str(if nested_list { "\n" } else { "\n\n" });
            out.push_str(&indent);
            out.push_str(&indent_rest(&nested, &indent));
        }
        out
    }

    /// A block with text and, possibly, children rendered after it.
    fn with_children(&mut self, head: String, block: &'b Value) -> String {
        let rest = self.child_blocks(block);
        match (head.is_empty(), rest.is_empty()) {
            (_, true) => head,
            (true, false) => rest,
            (false, false) => format!("{head}\n\n{rest}"),
        }
    }

    fn block(&mut self, block: &'b Value, ordinal: u64) -> String {
        match kind(block) {
            block_type::TEXT => {
                let text = self.elements(block.get("text"));
                self.with_children(text, block)
            }
            level @ block_type::HEADING1..=block_type::HEADING9 => {
                let level = (level - block_type::HEADING1 + 1).min(6);
                let field = format!("heading{}", kind(block) - block_type::HEADING1 + 1);
                let text = self.elements(block.get(field.as_str()));
                let head = format!("{} {}", "#".repeat(level as usize), text.trim());
                self.with_children(head, block)
            }
            block_type::BULLET => self.list_item(block, "- ", "bullet"),
            block_type::ORDERED => {
                let start = block
                    .pointer("/ordered/style/sequence")
                    .and_then(Value::as_str)
                    .and_then(|sequence| sequence.parse::<u64>().ok());
                let number = start.unwrap_or(ordinal.max(1));
                self.list_item(block, &format!("{number}. "), "ordered")
            }
            block_type::TODO => {
                let done = style_flag(block.pointer("/todo/style"), "done");
                self.list_item(block, if done { "- [x] " } else { "- [ ] " }, "todo")
            }
            block_type::CODE => {
                let code: String = block
                    .pointer("/code/elements")
                    .and_then(Value::as_array)
                    .map(|elements| {
                        elements
                            .iter()
                            .filter_map(|element| element.pointer("/text_run/content"))
                            .filter_map(Value::as_str)
                            .collect()
                    })
                    .unwrap_or_default();
                let language = block
                    .pointer("/code/style/language")
                    .and_then(Value::as_u64)
                    .map_or("", language_name);
                // A fence longer than any backtick run inside.
                let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                let fence = "`".repeat(longest.max(2) + 1);
                format!(
                    "{fence}{language}\n{}\n{fence}",
                    code.trim_end_matches('\n')
                )
            }
            block_type::QUOTE => {
                let text = self.elements(block.get("quote"));
                let rest = self.child_blocks(block);
                let inner = [text, rest]
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n\n");
                quoted(&inner)
            }
            block_type::QUOTE_CONTAINER => {
                let inner = self.child_blocks(block);
                quoted(&inner)
            }
            block_type::CALLOUT => {
                let inner = self.child_blocks(block);
                let inner = if inner.is_empty() {
                    "[!NOTE]".to_owned()
                } else {
                    format!("[!NOTE]\n{inner}")
                };
                quoted(&inner)
            }
            block_type::DIVIDER => "---".to_owned(),
            block_type::GRID
            | block_type::GRID_COLUMN
            | block_type::VIEW
            | block_type::TABLE_CELL => self.child_blocks(block),
            block_type::IMAGE => self.image(block),
            block_type::FILE => self.file(block),
            block_type::IFRAME => {
                let url = block
                    .pointer("/iframe/component/url")
                    .and_then(Value::as_str)
                    .map(decode_url);
                match url {
                    Some(url) => {
                        let link = self.link_text("Embedded page", &url);
                        link.to_string()
                    }
                    None => self.unknown(block),
                }
            }
            block_type::TABLE => self.table(block),
            block_type::SHEET => self.embedded(block, "sheet", "sheets", DegradationKind::Sheet),
            block_type::MINDNOTE => {
                self.embedded(block, "mindnote", "mindnotes", DegradationKind::Mindnote)
            }
            block_type::BITABLE => self.bitable(block),
            block_type::BOARD => self.board(block),
            _ => self.unknown(block),
        }
    }

    fn marker(&mut self, kind: DegradationKind, id: &str) -> String {
        let degradation = Degradation {
            kind,
            id: id.to_owned(),
        };
        let marker = markers::render(&degradation);
        self.degradations.push(degradation);
        marker
    }

    /// The document's own link, for degraded blocks.
    fn doc_link(&self, label: &str) -> Option<String> {
        self.context.doc_url.map(|url| format!("[{label}]({url})"))
    }

    /// An unknown block: its verbatim tag, the document's link, a marker.
    fn unknown(&mut self, block: &Value) -> String {
        let tag = verbatim_tag(block);
        if self.pass == Pass::Raw {
            return tag;
        }
        let link = self.doc_link("Open in Feishu");
        let marker = self.marker(DegradationKind::UnknownBlock, id(block));
        [Some(tag), link, Some(marker)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A sheet or mind note: its link (on the document's tenant) and its
    /// token as the drillable id.
    fn embedded(
        &mut self,
        block: &Value,
        field: &str,
        path: &str,
        degradation: DegradationKind,
    ) -> String {
        let token = block
            .get(field)
            .and_then(|data| str_field(data, "token"))
            .unwrap_or_default();
        if token.is_empty() {
            return self.unknown(block);
        }
        let label = match degradation {
            DegradationKind::Sheet => "Embedded sheet",
            _ => "Embedded mind note",
        };
        // A sheet token is `<spreadsheet>_<sheet id>`.
        let url = match (degradation, token.split_once('_')) {
            (DegradationKind::Sheet, Some((spreadsheet, sheet))) => origin(self.context.doc_url)
                .map(|origin| format!("{origin}/{path}/{spreadsheet}?sheet={sheet}")),
            _ => origin(self.context.doc_url).map(|origin| format!("{origin}/{path}/{token}")),
        };
        let shown = match &url {
            Some(url) => format!("[{label} {token}]({url})"),
            None => format!("{label} {token}"),
        };
        if self.pass == Pass::Raw {
            return shown;
        }
        let marker = self.marker(degradation, token);
        format!("{shown} {marker}")
    }

    fn media_url(&self, token: &str) -> String {
        format!(
            "{}drive/v1/medias/{}/download",
            self.context.api_base,
            percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
        )
    }

    fn image(&mut self, block: &Value) -> String {
        let Some(token) = block.pointer("/image/token").and_then(Value::as_str) else {
            return self.unknown(block);
        };
        let url = self.media_url(token);
        self.assets.push(AssetRef {
            remote_key: token.to_owned(),
            download_url: url.clone(),
            body_url: Some(url.clone()),
            file_name: None,
        });
        format!("![image]({url})")
    }

    fn file(&mut self, block: &Value) -> String {
        let Some(token) = block.pointer("/file/token").and_then(Value::as_str) else {
            return self.unknown(block);
        };
        let name = block
            .pointer("/file/name")
            .and_then(Value::as_str)
            .filter(|name| !name.trim().is_empty())
            .unwrap_or(token);
        let url = self.media_url(token);
        self.assets.push(AssetRef {
            remote_key: token.to_owned(),
            download_url: url.clone(),
            body_url: Some(url.clone()),
            file_name: Some(name.to_owned()),
        });
        format!("[{}]({url})", name.replace(['[', ']'], ""))
    }

    fn table(&mut self, block: &'b Value) -> String {
        let columns = block
            .pointer("/table/property/column_size")
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize;
        let cells: Vec<&str> = block
            .pointer("/table/cells")
            .and_then(Value::as_array)
            .map(|cells| cells.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if columns == 0 || cells.is_empty() {
            return self.unknown(block);
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        for row in cells.chunks(columns) {
            let mut rendered = Vec::with_capacity(columns);
            for cell in row {
                let text = match self.tree.by_id.get(cell).copied() {
                    Some(cell) if self.visited.insert(id(cell)) => self.child_blocks(cell),
                    _ => String::new(),
                };
                rendered.push(table_cell(&text));
            }
            rendered.resize(columns, String::new());
            rows.push(rendered);
        }
        // Cells are rendered through the table, not as the table's children.
        for child in children(&self.tree, block) {
            self.visited.insert(id(child));
        }
        let table = gfm_table(&rows[0], &rows[1..]);
        if self.pass == Pass::Raw || !has_merged_cells(block) {
            return table;
        }
        let link = self.doc_link("Open the table in Feishu");
        let marker = self.marker(DegradationKind::MergedCells, id(block));
        let note = [link, Some(marker)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        format!("{table}\n\n{note}")
    }

    fn bitable(&mut self, block: &Value) -> String {
        let token = block
            .pointer("/bitable/token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some((app_token, table_id)) = token.split_once('_') else {
            return self.unknown(block);
        };
        let tag = verbatim_tag(block);
        if self.pass == Pass::Raw {
            return tag;
        }
        let url = origin(self.context.doc_url)
            .map(|origin| format!("{origin}/base/{app_token}?table={table_id}"));
        let link = |label: &str| match &url {
            Some(url) => format!("[{label}]({url})"),
            None => label.to_owned(),
        };
        match self.extras.bitables.get(token).cloned() {
            Some(Bitable::Inline { fields, rows }) => {
                let table = if fields.is_empty() {
                    String::new()
                } else {
                    let header: Vec<String> = fields.iter().map(|f| table_cell(f)).collect();
                    let rows: Vec<Vec<String>> = rows
                        .iter()
                        .map(|row| {
                            let mut cells: Vec<String> =
                                row.iter().map(|value| table_cell(value)).collect();
                            cells.resize(header.len(), String::new());
                            cells
                        })
                        .collect();
                    format!("{}\n\n", gfm_table(&header, &rows))
                };
                let marker = self.marker(DegradationKind::BitableInline, token);
                format!("{table}{} {marker}", link("Open the bitable in Feishu"))
            }
            Some(Bitable::Oversize {
                fields,
                rows,
                limit,
            }) => {
                let schema = fields
                    .iter()
                    .map(|(name, kind)| format!("- {name} ({kind})"))
                    .collect::<Vec<_>>()
                    .join("\n");
                let marker = self.marker(DegradationKind::BitableOversize, token);
                format!(
                    "Bitable {token}: {rows} rows, over the inline limit of {limit}. Fields:\n\n{schema}\n\n{} {marker}",
                    link("Open the bitable in Feishu")
                )
            }
            Some(Bitable::Failed { .. }) | None => {
                let marker = self.marker(DegradationKind::BitableFailed, token);
                format!("{tag} {} {marker}", link("Open the bitable in Feishu"))
            }
        }
    }

    fn board(&mut self, block: &Value) -> String {
        let token = block
            .pointer("/board/token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if token.is_empty() {
            return self.unknown(block);
        }
        let tag = verbatim_tag(block);
        if self.pass == Pass::Raw {
            return tag;
        }
        let link = self
            .doc_link("Open the whiteboard in Feishu")
            .unwrap_or_else(|| format!("Whiteboard {token}"));
        let shown = match self.extras.boards.get(token).cloned() {
            Some(Board::Image {
                remote_key,
                download_url,
            }) => {
                self.assets.push(AssetRef {
                    remote_key,
                    download_url: download_url.clone(),
                    body_url: Some(download_url.clone()),
                    file_name: None,
                });
                format!("![whiteboard]({download_url})\n\n{link}")
            }
            Some(Board::Texts { texts }) if !texts.is_empty() => {
                let list = texts
                    .iter()
                    .map(|text| format!("- {}", text.replace('\n', " ")))
                    .collect::<Vec<_>>()
                    .join("\n");
                format!("Whiteboard {token}, its texts:\n\n{list}\n\n{link}")
            }
            _ => format!("{tag} {link}"),
        };
        let marker = self.marker(DegradationKind::Whiteboard, token);
        format!("{shown} {marker}")
    }

    /// A Markdown link to `url`, recorded as a document link when it points
    /// at a Feishu document.
    fn link_text(&mut self, text: &str, url: &str) -> String {
        if let Some(token) = feishu_doc_token(url) {
            self.link(token, url);
        }
        format!("[{text}]({url})")
    }

    /// Records a document link, once per target and URL.
    fn link(&mut self, target_id: String, raw_url: &str) {
        let link = DocLink {
            target_id,
            raw_url: raw_url.to_owned(),
        };
        if !self.links.contains(&link) {
            self.links.push(link);
        }
    }

    /// A text block's runs as inline Markdown.
    fn elements(&mut self, data: Option<&Value>) -> String {
        let Some(elements) = data
            .and_then(|data| data.get("elements"))
            .and_then(Value::as_array)
        else {
            return String::new();
        };
        let mut out = String::new();
        for element in elements {
            if let Some(run) = element.get("text_run") {
                let content = str_field(run, "content").unwrap_or_default();
                out.push_str(&self.styled(content, run.get("text_element_style")));
            } else if let Some(mention) = element.get("mention_doc") {
                let title = str_field(mention, "title")
                    .filter(|title| !title.trim().is_empty())
                    .unwrap_or("document");
                let url = str_field(mention, "url").map(decode_url);
                let token = str_field(mention, "token").unwrap_or_default();
                match url {
                    Some(url) => {
                        if !token.is_empty() {
                            self.link(token.to_owned(), &url);
                        }
                        out.push_str(&format!("[{}]({url})", title.replace(['[', ']'], "")));
                    }
                    None => out.push_str(title),
                }
            } else if let Some(mention) = element.get("mention_user") {
                let user = str_field(mention, "user_id").unwrap_or("someone");
                out.push_str(&format!("@{user}"));
            } else if let Some(equation) = element.get("equation") {
                let content = str_field(equation, "content").unwrap_or_default();
                out.push_str(&format!("${}$", content.trim_end_matches('\n')));
            } else if let Some(reminder) = element.get("reminder") {
                let at = reminder
                    .get("notify_time")
                    .or_else(|| reminder.get("expire_time"))
                    .and_then(|time| {
                        time.as_str()
                            .and_then(|t| t.parse::<i64>().ok())
                            .or_else(|| time.as_i64())
                    })
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|at| at.format("%Y-%m-%d %H:%M").to_string());
                out.push_str(&format!("⏰{}", at.unwrap_or_default()));
            }
        }
        out
    }

    /// One text run with its style.
    fn styled(&mut self, content: &str, style: Option<&Value>) -> String {
        if content.is_empty() {
            return String::new();
        }
        let mut text = if style_flag(style, "inline_code") {
            wrap(content, "`")
        } else {
            content.to_owned()
        };
        if style_flag(style, "bold") {
            text = wrap(&text, "**");
        }
        if style_flag(style, "italic") {
            text = wrap(&text, "*");
        }
        if style_flag(style, "strikethrough") {
            text = wrap(&text, "~~");
        }
        let url = style
            .and_then(|style| style.pointer("/link/url"))
            .and_then(Value::as_str)
            .map(decode_url);
        match url {
            Some(url) if !url.is_empty() => self.link_text(&text, &url),
            _ => text,
        }
    }
}

/// A cell's Markdown on one line: line breaks as `<br>`, pipes escaped.
fn table_cell(text: &str) -> String {
    text.trim()
        .replace('|', "\\|")
        .replace("\n\n", "<br>")
        .replace('\n', "<br>")
}

/// A GFM table.
/// Whether a table block merges cells: any `table.property.merge_info`
/// entry (one per cell) spanning more than one row or column.
fn has_merged_cells(block: &Value) -> bool {
    block
        .pointer("/table/property/merge_info")
        .and_then(Value::as_array)
        .is_some_and(|cells| {
            cells.iter().any(|span| {
                ["row_span", "col_span"]
                    .iter()
                    .any(|key| span.get(key).and_then(Value::as_u64).is_some_and(|n| n > 1))
            })
        })
}

fn gfm_table(header: &[String], rows: &[Vec<String>]) -> String {
    let line = |cells: &[String]| format!("| {} |", cells.join(" | "));
    let mut out = vec![
        line(header),
        format!("|{}|", vec![" --- "; header.len()].join("|")),
    ];
    out.extend(rows.iter().map(|row| line(row)));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/docs/feishu")
    }

    /// One golden case: `<name>.json` holds `blocks` (the API's items, every
    /// page), optional `extras` and `doc_url`; `<name>.md` the body, and
    /// `<name>.raw.md` the raw Markdown when it differs. Compared byte for
    /// byte; `UPDATE_GOLDENS=1` rewrites them.
    fn golden(name: &str) -> Rendered {
        let input: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        let blocks = input["blocks"].as_array().unwrap().clone();
        let extras: Extras = input
            .get("extras")
            .map(|extras| serde_json::from_value(extras.clone()).unwrap())
            .unwrap_or_default();
        let context = Context {
            doc_url: input["doc_url"].as_str(),
            api_base: "https://open.feishu.cn/open-apis/",
        };
        let rendered = render(&blocks, &context, &extras);
        if std::env::var_os("UPDATE_GOLDENS").is_some() {
            // Rewrites the expected files; review the diff before committing.
            std::fs::write(fixtures().join(format!("{name}.md")), rendered.body()).unwrap();
            if rendered.body.is_some() {
                std::fs::write(
                    fixtures().join(format!("{name}.raw.md")),
                    &rendered.markdown,
                )
                .unwrap();
            }
        }
        let expected = std::fs::read_to_string(fixtures().join(format!("{name}.md")))
            .unwrap_or_else(|error| panic!("{name}.md: {error} (UPDATE_GOLDENS=1 writes it)"));
        assert_eq!(
            rendered.body(),
            expected,
            "{name}: the body differs from {name}.md"
        );
        let raw = fixtures().join(format!("{name}.raw.md"));
        if raw.exists() {
            assert_eq!(
                rendered.markdown,
                std::fs::read_to_string(raw).unwrap(),
                "{name}: the raw Markdown differs from {name}.raw.md"
            );
        } else {
            assert_eq!(rendered.body, None, "{name}: nothing degraded");
        }
        // Every degradation has its marker in the body, and no other marker.
        assert_eq!(markers::parse_all(rendered.body()), rendered.degradations);
        rendered
    }

    impl Rendered {
        fn body(&self) -> &str {
            self.body.as_deref().unwrap_or(&self.markdown)
        }
    }

    #[test]
    fn text_styles_lists_and_code_match_their_golden() {
        let rendered = golden("basics");
        assert!(rendered.degradations.is_empty());
        assert!(rendered.assets.is_empty());
        assert_eq!(
            rendered.links,
            [DocLink {
                target_id: "doxcnTarget01".into(),
                raw_url: "https://acme.feishu.cn/docx/doxcnTarget01".into(),
            }]
        );
    }

    #[test]
    fn tables_images_and_mentions_match_their_golden() {
        let rendered = golden("tables_and_links");
        let keys: Vec<&str> = rendered
            .assets
            .iter()
            .map(|asset| asset.remote_key.as_str())
            .collect();
        assert_eq!(keys, ["boxcnImage01", "boxcnFile01"]);
        assert_eq!(
            rendered.assets[0].download_url,
            "https://open.feishu.cn/open-apis/drive/v1/medias/boxcnImage01/download"
        );
        assert_eq!(rendered.assets[1].file_name.as_deref(), Some("plan.pdf"));
        let links: Vec<(&str, &str)> = rendered
            .links
            .iter()
            .map(|link| (link.target_id.as_str(), link.raw_url.as_str()))
            .collect();
        assert_eq!(
            links,
            [
                (
                    "wikcnSpec01",
                    "https://acme.feishu.cn/wiki/wikcnSpec01?from=from_copylink"
                ),
                (
                    "doxcnOther02",
                    "https://acme.feishu.cn/docx/doxcnOther02#share-x%2Fy"
                ),
            ]
        );
    }

    #[test]
    fn degraded_blocks_keep_their_content_id_and_link() {
        let rendered = golden("degraded");
        let kinds: Vec<(DegradationKind, &str)> = rendered
            .degradations
            .iter()
            .map(|d| (d.kind, d.id.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                (DegradationKind::Whiteboard, "bdcnImage"),
                (DegradationKind::Whiteboard, "bdcnTexts"),
                (DegradationKind::Whiteboard, "bdcnGone"),
                (DegradationKind::BitableInline, "bascnSmall_tblSmall"),
                (DegradationKind::BitableOversize, "bascnBig_tblBig"),
                (DegradationKind::BitableFailed, "bascnLost_tblLost"),
                (DegradationKind::Sheet, "shtcnSheet_a1b2c3"),
                (DegradationKind::Mindnote, "bmncnMind"),
                (DegradationKind::UnknownBlock, "doxcnChat"),
                (DegradationKind::UnknownBlock, "doxcnFuture"),
            ]
        );
        assert_eq!(
            rendered
                .assets
                .iter()
                .map(|a| a.remote_key.as_str())
                .collect::<Vec<_>>(),
            ["board:bdcnImage"]
        );
    }

    #[test]
    fn a_table_with_merged_cells_keeps_its_content_and_says_so() {
        let table = |merge_info: Value| {
            vec![
                json!({"block_id": "doc", "block_type": 1, "children": ["t"], "page": {"elements": []}}),
                json!({"block_id": "t", "block_type": 31, "parent_id": "doc", "children": ["a", "b", "c", "d"],
                    "table": {"cells": ["a", "b", "c", "d"], "property": {"row_size": 2, "column_size": 2, "merge_info": merge_info}}}),
                json!({"block_id": "a", "block_type": 32, "parent_id": "t", "children": ["at"], "table_cell": {}}),
                json!({"block_id": "at", "block_type": 2, "parent_id": "a", "text": {"elements": [{"text_run": {"content": "Both columns"}}]}}),
                json!({"block_id": "b", "block_type": 32, "parent_id": "t", "children": [], "table_cell": {}}),
                json!({"block_id": "c", "block_type": 32, "parent_id": "t", "children": ["ct"], "table_cell": {}}),
                json!({"block_id": "ct", "block_type": 2, "parent_id": "c", "text": {"elements": [{"text_run": {"content": "x"}}]}}),
                json!({"block_id": "d", "block_type": 32, "parent_id": "t", "children": [], "table_cell": {}}),
            ]
        };
        let context = Context {
            doc_url: Some("https://acme.feishu.cn/docx/doc"),
            api_base: "https://open.feishu.cn/open-apis/",
        };
        let one = json!({"row_span": 1, "col_span": 1});
        let merged = render(
            &table(json!([{"row_span": 1, "col_span": 2}, one, one, one])),
            &context,
            &Extras::default(),
        );
        let body = merged.body.as_deref().expect("a degraded body");
        assert!(body.contains("| Both columns |  |\n"), "{body}");
        assert!(
            body.contains("[Open the table in Feishu](https://acme.feishu.cn/docx/doc)"),
            "{body}"
        );
        assert_eq!(
            merged.degradations,
            [Degradation {
                kind: DegradationKind::MergedCells,
                id: "t".into()
            }]
        );
        assert_eq!(markers::parse_all(body), merged.degradations);
        assert!(
            !merged.markdown.contains("opendoc:"),
            "the raw Markdown has no marker"
        );
        // Without a merge (or without merge_info) nothing is degraded.
        for plain in [json!([one, one, one, one]), Value::Null] {
            let rendered = render(&table(plain), &context, &Extras::default());
            assert_eq!(rendered.body, None);
            assert!(rendered.degradations.is_empty());
        }
    }

    #[test]
    fn live_blocks_are_listed_once_each() {
        let blocks = vec![
            json!({"block_id": "a", "block_type": 18, "bitable": {"token": "bascnA_tblA"}}),
            json!({"block_id": "b", "block_type": 18, "bitable": {"token": "bascnA_tblA"}}),
            json!({"block_id": "c", "block_type": 43, "board": {"token": "bd1"}}),
            json!({"block_id": "d", "block_type": 18, "bitable": {"token": "no-table"}}),
            json!({"block_id": "e", "block_type": 2, "text": {"elements": []}}),
        ];
        assert_eq!(
            live_blocks(&blocks),
            [
                LiveBlock::Bitable {
                    token: "bascnA_tblA".into(),
                    app_token: "bascnA".into(),
                    table_id: "tblA".into(),
                },
                LiveBlock::Board {
                    token: "bd1".into()
                },
            ]
        );
    }

    #[test]
    fn urls_are_decoded_exactly_once() {
        assert_eq!(
            decode_url("https%3A%2F%2Fexample.com%2Fa%3Fq%3D1%2526"),
            "https://example.com/a?q=1%26"
        );
        assert_eq!(decode_url("https://plain.test/"), "https://plain.test/");
        assert_eq!(decode_url("%E4%B8%AD"), "中");
    }

    #[test]
    fn feishu_document_urls_name_their_token() {
        let cases = [
            ("https://acme.feishu.cn/docx/doxcnA", Some("doxcnA")),
            ("https://acme.feishu.cn/wiki/wikcnB?from=x", Some("wikcnB")),
            ("https://acme.larksuite.com/sheets/shtC", Some("shtC")),
            ("https://acme.feishu.cn/drive/folder/fldD", None),
            ("https://feishu.cn.evil.test/docx/doxcnE", None),
            ("https://example.com/docx/doxcnF", None),
            ("not a url", None),
        ];
        for (url, token) in cases {
            assert_eq!(feishu_doc_token(url).as_deref(), token, "{url}");
        }
    }

    #[test]
    fn code_languages_follow_the_enum() {
        assert_eq!(language_name(1), "");
        assert_eq!(language_name(7), "bash");
        assert_eq!(language_name(49), "python");
        assert_eq!(language_name(53), "rust");
        assert_eq!(language_name(63), "typescript");
        assert_eq!(language_name(75), "toml");
        assert_eq!(language_name(0), "");
        assert_eq!(language_name(76), "");
    }

    #[test]
    fn a_malformed_tree_renders_each_block_once() {
        let blocks = vec![
            json!({"block_id": "p", "block_type": 1, "page": {"elements": [{"text_run": {"content": "T"}}]}, "children": ["a", "a", "missing"]}),
            json!({"block_id": "a", "block_type": 12, "parent_id": "p", "bullet": {"elements": [{"text_run": {"content": "loop"}}]}, "children": ["a", "p"]}),
        ];
        let context = Context {
            doc_url: None,
            api_base: "https://open.feishu.cn/open-apis/",
        };
        let rendered = render(&blocks, &context, &Extras::default());
        assert_eq!(rendered.markdown, "# T\n\n- loop\n");
        assert_eq!(render(&[], &context, &Extras::default()).markdown, "");
    }

    #[test]
    fn styles_keep_whitespace_outside_their_markers() {
        assert_eq!(wrap(" bold ", "**"), " **bold** ");
        assert_eq!(wrap("   ", "**"), "   ");
        assert_eq!(wrap("x", "~~"), "~~x~~");
    }
}
