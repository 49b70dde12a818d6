//! The contract between the sync engine and one platform. The engine knows
//! nothing about Notion or Feishu: it drives an [`Adapter`] and probes it for
//! the optional capabilities ([`Adapter::database_expander`],
//! [`Adapter::incremental_enumerator`]). A third platform is a new module
//! implementing this trait plus one registration line where the adapters
//! are built. The comments in this file are the spec; change them with the
//! behaviour, in the same commit.
//!
//! Everything an adapter returns is plain data. It never writes into the
//! mirror, never touches the manifest and never retries on its own beyond
//! what its rate limiter does: it classifies each failure ([`AdapterError`])
//! and the engine decides.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How far before the checkpoint an incremental listing reaches back: the
/// platforms' edit times are coarse (Notion's to the minute) and a document
/// edited while the last run listed could be missed without it. Listing a
/// few unchanged documents again costs one content-hash comparison each.
pub const INCREMENTAL_SAFETY_WINDOW: Duration = Duration::from_secs(5 * 60);

/// A mirrored platform; its id spaces never overlap another's.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    async_graphql::Enum,
)]
#[serde(rename_all = "snake_case")]
#[graphql(name = "DocsPlatform")]
pub enum Platform {
    /// Notion, over its public REST API.
    Notion,
    /// Feishu (Lark), over its Open API.
    Feishu,
}

impl Platform {
    /// Every platform, in the order runs report them.
    pub const ALL: [Platform; 2] = [Platform::Notion, Platform::Feishu];

    /// The stable name: the platform's folder under the mirror root, the
    /// frontmatter's `platform:`, the manifest's `platform` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Notion => "notion",
            Self::Feishu => "feishu",
        }
    }

    /// The platform of a stable name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|platform| platform.as_str() == name)
    }
}

/// What a remote node is, platform-agnostic; decides where it lands in the
/// tree and whether it has a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// An ordinary page with a body (a Notion page).
    Page,
    /// A Feishu docx document.
    Docx,
    /// A database (Notion data source): a folder with `_index.md`, its rows
    /// as files; no body of its own.
    Database,
    /// One row of a database: a page whose properties come from
    /// [`DatabaseExpander::query_rows`].
    Row,
    /// A container without a body (a Feishu drive folder or wiki space).
    Folder,
    /// A Feishu spreadsheet: a placeholder body that degrades to a link.
    Sheet,
    /// A Feishu bitable (multi-dimensional table) as a document of its own.
    Bitable,
    /// A Feishu mind note.
    Mindnote,
    /// A Feishu slides deck.
    Slides,
    /// Any other file or unknown object type: a placeholder, so the tree has
    /// no holes.
    File,
}

impl NodeKind {
    /// Every kind.
    pub const ALL: [NodeKind; 10] = [
        NodeKind::Page,
        NodeKind::Docx,
        NodeKind::Database,
        NodeKind::Row,
        NodeKind::Folder,
        NodeKind::Sheet,
        NodeKind::Bitable,
        NodeKind::Mindnote,
        NodeKind::Slides,
        NodeKind::File,
    ];

    /// The stable name: the frontmatter's `type:` and the manifest's column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Page => "page",
            Self::Docx => "docx",
            Self::Database => "database",
            Self::Row => "row",
            Self::Folder => "folder",
            Self::Sheet => "sheet",
            Self::Bitable => "bitable",
            Self::Mindnote => "mindnote",
            Self::Slides => "slides",
            Self::File => "file",
        }
    }

    /// The kind of a stable name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// A container has no body: the engine makes its folder and skips the
    /// fetch (the processing order's container short-circuit). A database's
    /// `_index.md` is rendered by the engine from its rows.
    pub fn is_container(self) -> bool {
        matches!(self, Self::Database | Self::Folder)
    }
}

/// One node of the listing: metadata only, never a body. Enough to compare
/// with the manifest (edit time) and to place the node in the tree (parent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteNode {
    /// The platform's stable primary id (Notion: the dashed page or data
    /// source id; Feishu: the `obj_token`). The manifest's key.
    pub id: String,
    /// A second id that resolves to the same node, recorded as an alias
    /// before any skip so links to it still resolve (Notion: the undashed
    /// form URLs and bodies use; Feishu: the wiki `node_token`).
    pub alt_id: Option<String>,
    /// What the node is.
    pub kind: NodeKind,
    /// The parent's primary id; `None` at the platform root. A parent the
    /// listing does not contain puts the node under `_orphans/`.
    pub parent_id: Option<String>,
    /// The current remote title, unsanitized (naming is the engine's).
    pub title: String,
    /// The remote last edit. Unchanged since the manifest's → the fetch is
    /// skipped. `None` when the platform does not say: always fetched.
    pub edited_at: Option<DateTime<Utc>>,
    /// The canonical online URL: the frontmatter's `url:`, the jump back.
    pub url: Option<String>,
}

/// A downloadable asset (image, attachment) a body references.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AssetRef {
    /// The platform's stable key for the asset (Notion: the file URL's path
    /// without its expiring signature; Feishu: the media token). The
    /// manifest's key and the first level of dedup: a key already
    /// downloaded, whose file is still there, is not fetched again.
    pub remote_key: String,
    /// Where to download it now. Notion's are signed and expire within the
    /// hour: the engine downloads during the same document's processing.
    pub download_url: String,
    /// The exact text of the URL as it appears in the degraded body, which
    /// the engine replaces with the asset's relative path once downloaded
    /// (or after which it appends the pending marker when the download
    /// failed). `None` when the body does not show the asset inline.
    pub body_url: Option<String>,
    /// The original file name, when the platform says: a fallback for the
    /// extension after the bytes themselves.
    pub file_name: Option<String>,
}

/// A link from the fetched document to another document of the platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DocLink {
    /// The target's id as the link names it (primary or alias: the engine
    /// resolves aliases when it rewrites links).
    pub target_id: String,
    /// The link's URL exactly as it appears in the body, replaced with a
    /// relative path when the platform's run is finalized.
    pub raw_url: String,
}

/// What a lossy conversion lost, kept visible and counted: the degradation
/// contract says loss is never silent. Every degraded block keeps at least
/// two of: readable content, this drillable id, a jumpable link; and its
/// marker (`markers::render`) lands in the body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Degradation {
    /// What kind of block lost what.
    pub kind: DegradationKind,
    /// The block's (or table's, or whiteboard's) id, to drill down online.
    pub id: String,
}

/// The kinds of loss, counted by kind in a run's stats. Their names are
/// stable: they appear in markers and in stats JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DegradationKind {
    /// A block no converter knows, kept as its verbatim tag.
    UnknownBlock,
    /// Notion answered `truncated`: the page was too large for one call.
    Truncated,
    /// A block of Notion's `unknown_block_ids` that still failed to render
    /// after fetching its subtree.
    UnrenderedBlock,
    /// A whiteboard, kept as its image or its node texts, plus the link.
    Whiteboard,
    /// A bitable inlined as a GFM table (small enough).
    BitableInline,
    /// A bitable over the inline row limit: schema, row count and link.
    BitableOversize,
    /// A bitable whose fetch failed: its tag and the link.
    BitableFailed,
    /// An embedded sheet: its link.
    Sheet,
    /// An embedded mind note: its link.
    Mindnote,
    /// A database property type rendered lossily (a rollup, a formula): the
    /// string keeps a drill-down clue.
    LossyProperty,
    /// A table with merged cells, which Markdown tables cannot span: each
    /// merge's content stays in its first cell, the cells it covered are
    /// empty, and the document's link is kept.
    MergedCells,
}

impl DegradationKind {
    /// Every kind.
    pub const ALL: [DegradationKind; 11] = [
        DegradationKind::UnknownBlock,
        DegradationKind::Truncated,
        DegradationKind::UnrenderedBlock,
        DegradationKind::Whiteboard,
        DegradationKind::BitableInline,
        DegradationKind::BitableOversize,
        DegradationKind::BitableFailed,
        DegradationKind::Sheet,
        DegradationKind::Mindnote,
        DegradationKind::LossyProperty,
        DegradationKind::MergedCells,
    ];

    /// The stable name, in markers (`kind=…`) and stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownBlock => "unknown_block",
            Self::Truncated => "truncated",
            Self::UnrenderedBlock => "unrendered_block",
            Self::Whiteboard => "whiteboard",
            Self::BitableInline => "bitable_inline",
            Self::BitableOversize => "bitable_oversize",
            Self::BitableFailed => "bitable_failed",
            Self::Sheet => "sheet",
            Self::Mindnote => "mindnote",
            Self::LossyProperty => "lossy_property",
            Self::MergedCells => "merged_cells",
        }
    }

    /// The kind of a stable name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

/// One fetched document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedDoc {
    /// The body as the platform produced it, before any degradation, asset
    /// or link rewriting: what `content_hash` is computed on, so neither
    /// degraded output (which may read live data, like a bitable's rows)
    /// nor rewriting ever makes a document look changed.
    pub markdown: String,
    /// The degraded body, ready for asset and link rewriting; `None` when
    /// the adapter degraded nothing (the body is then `markdown`).
    pub body: Option<String>,
    /// The assets the body references, each with its stable key.
    pub assets: Vec<AssetRef>,
    /// The links to other documents of the platform.
    pub links: Vec<DocLink>,
    /// What the conversion lost, one entry per degraded block, for the run's
    /// counters (by kind).
    pub degradations: Vec<Degradation>,
}

impl FetchedDoc {
    /// The body to write: the degraded one, else the raw Markdown.
    pub fn body(&self) -> &str {
        self.body.as_deref().unwrap_or(&self.markdown)
    }
}

/// One database row's rendered properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowProperties {
    /// Property name → its value as a plain, grep-able string (see the
    /// adapter's mapping of property types). Sorted by name, so the
    /// frontmatter and `_index.md` render byte-stably.
    pub values: BTreeMap<String, String>,
    /// What rendering the properties lost (lossy types).
    pub degradations: Vec<Degradation>,
}

impl RowProperties {
    /// The canonical serialization folded into the row's `content_hash`, so
    /// an edit of a property alone makes the row dirty: the sorted map as
    /// JSON (unambiguous for any name and value).
    pub fn canonical(&self) -> String {
        // A map of strings always serializes; the fallback is unreachable.
        serde_json::to_string(&self.values).unwrap_or_default()
    }
}

/// What one download wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownloadedAsset {
    /// The response's `Content-Type`, a late fallback for the extension.
    pub content_type: Option<String>,
    /// How many bytes were written.
    pub bytes: u64,
}

/// An incremental listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncrementalListing {
    /// The nodes edited at or after `checkpoint − INCREMENTAL_SAFETY_WINDOW`.
    pub nodes: Vec<RemoteNode>,
    /// The checkpoint to store: the latest edit time seen, never before the
    /// one passed in.
    pub checkpoint: DateTime<Utc>,
}

/// Why an adapter call failed, classified so the engine knows whether a
/// retry can help ([`AdapterError::is_retryable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    /// The platform asked us to slow down (HTTP 429, Notion's 529, Feishu's
    /// code 99991400). Retryable, after `retry_after` when it said.
    #[error("rate limited by the platform")]
    RateLimited {
        /// The platform's `Retry-After` (or `x-ogw-ratelimit-reset`).
        retry_after: Option<Duration>,
    },
    /// The platform failed (5xx). Retryable.
    #[error("the platform failed (HTTP {status})")]
    Server {
        /// The HTTP status.
        status: u16,
    },
    /// The request did not complete (connection, timeout). Retryable.
    #[error("the request did not complete: {0}")]
    Transport(String),
    /// The credentials were refused (HTTP 401, an invalid token). Permanent:
    /// the whole platform's run stops.
    #[error("the platform refused the credentials")]
    Unauthorized,
    /// The object is not shared with us (HTTP 403, a missing scope).
    /// Permanent for this object.
    #[error("not allowed to read {id}")]
    Forbidden {
        /// What was refused.
        id: String,
    },
    /// The object does not exist (any more). Permanent.
    #[error("{id} was not found")]
    NotFound {
        /// What was missing.
        id: String,
    },
    /// The answer did not have the documented shape. Permanent: retrying
    /// gets the same answer.
    #[error("unexpected answer from the platform: {0}")]
    Protocol(String),
    /// Writing the download failed locally.
    #[error("could not write the download: {0}")]
    Io(String),
}

impl AdapterError {
    /// Whether the same call may succeed later in this run.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Transport(_)
        )
    }

    /// How long the platform asked us to wait, if it did: wins over the
    /// computed backoff.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// A platform, as the engine drives it.
#[async_trait::async_trait]
pub trait Adapter: Send + Sync {
    /// Which platform this is.
    fn platform(&self) -> Platform;

    /// The whole authorized inventory, metadata only (no bodies), in a
    /// deterministic order (the platform's). The engine rebuilds the tree
    /// from the parent ids. Only called on full runs when the adapter is
    /// incremental-capable; on every run otherwise.
    async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError>;

    /// One document's body. The whole node is passed so degraded blocks can
    /// link to its online URL. Not called for containers.
    async fn fetch_markdown(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError>;

    /// Downloads `asset` into `dest` (a temporary file the engine then
    /// hashes and moves into the pool). Download URLs are short-lived: the
    /// engine calls this right after the fetch that returned them.
    async fn download_asset(
        &self,
        asset: &AssetRef,
        dest: &Path,
    ) -> Result<DownloadedAsset, AdapterError>;

    /// The database expansion capability, if the platform has databases
    /// whose rows carry properties (Notion).
    fn database_expander(&self) -> Option<&dyn DatabaseExpander> {
        None
    }

    /// The incremental enumeration capability, if the platform can list
    /// only what changed (Notion). Without it every run is full.
    fn incremental_enumerator(&self) -> Option<&dyn IncrementalEnumerator> {
        None
    }

    /// The requests sent so far and the waits a busy platform imposed
    /// (rate-limit answers, retries), for a run's progress.
    fn traffic(&self) -> Traffic {
        Traffic::default()
    }

    /// The platform's own checks for `trellis docs doctor`: credentials
    /// accepted, scopes granted, answers shaped as documented. Each has a
    /// stable code (`N2`, `F3`…, documented in `docs/docs-mirror.md`);
    /// read-only, a few requests.
    async fn probes(&self) -> Vec<Probe> {
        Vec::new()
    }
}

/// One check of the doctor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// Its stable code.
    pub code: String,
    /// Whether it passed.
    pub ok: bool,
    /// What was found, or what to do about it.
    pub message: String,
}

impl Probe {
    /// A passed check.
    pub fn pass(code: &str, message: impl Into<String>) -> Self {
        Probe {
            code: code.to_owned(),
            ok: true,
            message: message.into(),
        }
    }

    /// A failed check.
    pub fn fail(code: &str, message: impl Into<String>) -> Self {
        Probe {
            code: code.to_owned(),
            ok: false,
            message: message.into(),
        }
    }
}

/// What an adapter has sent: its requests (retries included) and the
/// waits it took before trying again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    /// Requests sent.
    pub requests: u64,
    /// Retries after a rate-limit answer or a failure.
    pub waits: u64,
}

/// Fetches every row's properties of a database in one query, instead of
/// one request per row. The engine calls it once per database node per run
/// (on incremental runs, only for databases with an edited row).
#[async_trait::async_trait]
pub trait DatabaseExpander: Send + Sync {
    /// Each row's rendered properties, keyed by the row's primary id (the id
    /// its [`RemoteNode`] carries). `titles` maps every listed node's id to
    /// its title, so a relation can show its target's title; an unknown
    /// target shows its id.
    async fn query_rows(
        &self,
        database: &RemoteNode,
        titles: &HashMap<String, String>,
    ) -> Result<HashMap<String, RowProperties>, AdapterError>;
}

/// Lists only what changed since a checkpoint (Notion: search sorted by
/// last edit, descending, stopping past `checkpoint −
/// INCREMENTAL_SAFETY_WINDOW`).
///
/// Having it changes the engine's contract: on an incremental run, "not
/// listed" does not mean "deleted", so delete and move detection are off,
/// and listed nodes are placed against the manifest (their ancestors may
/// not be listed).
#[async_trait::async_trait]
pub trait IncrementalEnumerator: Send + Sync {
    /// The nodes edited since `checkpoint` (minus the safety window) and the
    /// next checkpoint. Only called when the last run left one.
    async fn enumerate_since(
        &self,
        checkpoint: DateTime<Utc>,
    ) -> Result<IncrementalListing, AdapterError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_names_round_trip() {
        for platform in Platform::ALL {
            assert_eq!(Platform::parse(platform.as_str()), Some(platform));
            let json = serde_json::to_string(&platform).expect("serializable");
            assert_eq!(json, format!("\"{}\"", platform.as_str()));
        }
        for kind in NodeKind::ALL {
            assert_eq!(NodeKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).expect("serializable");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        for kind in DegradationKind::ALL {
            assert_eq!(DegradationKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).expect("serializable");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(Platform::parse("Notion"), None);
        assert_eq!(NodeKind::parse("db"), None);
        assert_eq!(DegradationKind::parse(""), None);
    }

    #[test]
    fn only_folders_and_databases_are_containers() {
        let containers: Vec<NodeKind> = NodeKind::ALL
            .into_iter()
            .filter(|kind| kind.is_container())
            .collect();
        assert_eq!(containers, [NodeKind::Database, NodeKind::Folder]);
    }

    #[test]
    fn retryable_failures_are_told_from_permanent_ones() {
        let cases = [
            (
                AdapterError::RateLimited {
                    retry_after: Some(Duration::from_secs(7)),
                },
                true,
                Some(Duration::from_secs(7)),
            ),
            (AdapterError::RateLimited { retry_after: None }, true, None),
            (AdapterError::Server { status: 502 }, true, None),
            (AdapterError::Transport("reset".into()), true, None),
            (AdapterError::Unauthorized, false, None),
            (AdapterError::Forbidden { id: "p".into() }, false, None),
            (AdapterError::NotFound { id: "p".into() }, false, None),
            (AdapterError::Protocol("no results".into()), false, None),
            (AdapterError::Io("disk full".into()), false, None),
        ];
        for (error, retryable, wait) in cases {
            assert_eq!(error.is_retryable(), retryable, "{error}");
            assert_eq!(error.retry_after(), wait, "{error}");
        }
    }

    #[test]
    fn the_body_falls_back_to_the_raw_markdown() {
        let mut doc = FetchedDoc {
            markdown: "raw".into(),
            ..FetchedDoc::default()
        };
        assert_eq!(doc.body(), "raw");
        doc.body = Some("degraded".into());
        assert_eq!(doc.body(), "degraded");
    }

    #[test]
    fn the_canonical_properties_are_order_free_and_unambiguous() {
        let mut a = RowProperties::default();
        a.values.insert("Status".into(), "Done".into());
        a.values.insert("Owner".into(), "Ada".into());
        let mut b = RowProperties::default();
        b.values.insert("Owner".into(), "Ada".into());
        b.values.insert("Status".into(), "Done".into());
        assert_eq!(a.canonical(), b.canonical());
        assert_eq!(a.canonical(), r#"{"Owner":"Ada","Status":"Done"}"#);
        // A separator inside a value cannot fake another split.
        let mut c = RowProperties::default();
        c.values.insert("a".into(), "b\",\"c\":\"d".into());
        let mut d = RowProperties::default();
        d.values.insert("a".into(), "b".into());
        d.values.insert("c".into(), "d".into());
        assert_ne!(c.canonical(), d.canonical());
    }

    /// The optional capabilities are probed, not required: an adapter
    /// without them says `None`, one with them hands itself out.
    struct Plain;
    struct Incremental;

    #[async_trait::async_trait]
    impl Adapter for Plain {
        fn platform(&self) -> Platform {
            Platform::Feishu
        }
        async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError> {
            Ok(Vec::new())
        }
        async fn fetch_markdown(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
            Err(AdapterError::NotFound {
                id: node.id.clone(),
            })
        }
        async fn download_asset(
            &self,
            _: &AssetRef,
            _: &Path,
        ) -> Result<DownloadedAsset, AdapterError> {
            Err(AdapterError::Io("no disk".into()))
        }
    }

    #[async_trait::async_trait]
    impl Adapter for Incremental {
        fn platform(&self) -> Platform {
            Platform::Notion
        }
        async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError> {
            Ok(Vec::new())
        }
        async fn fetch_markdown(&self, _: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
            Ok(FetchedDoc::default())
        }
        async fn download_asset(
            &self,
            _: &AssetRef,
            _: &Path,
        ) -> Result<DownloadedAsset, AdapterError> {
            Ok(DownloadedAsset::default())
        }
        fn incremental_enumerator(&self) -> Option<&dyn IncrementalEnumerator> {
            Some(self)
        }
    }

    #[async_trait::async_trait]
    impl IncrementalEnumerator for Incremental {
        async fn enumerate_since(
            &self,
            checkpoint: DateTime<Utc>,
        ) -> Result<IncrementalListing, AdapterError> {
            Ok(IncrementalListing {
                nodes: Vec::new(),
                checkpoint,
            })
        }
    }

    #[tokio::test]
    async fn capabilities_are_probed() {
        let adapters: Vec<Box<dyn Adapter>> = vec![Box::new(Plain), Box::new(Incremental)];
        let capable: Vec<bool> = adapters
            .iter()
            .map(|adapter| adapter.incremental_enumerator().is_some())
            .collect();
        assert_eq!(capable, [false, true]);
        assert!(
            adapters
                .iter()
                .all(|adapter| adapter.database_expander().is_none())
        );
        let checkpoint = DateTime::<Utc>::UNIX_EPOCH;
        let Some(incremental) = adapters[1].incremental_enumerator() else {
            panic!("probed above");
        };
        let listing = incremental
            .enumerate_since(checkpoint)
            .await
            .expect("the fake lists");
        assert_eq!(listing.checkpoint, checkpoint);
        let missing = adapters[0]
            .fetch_markdown(&RemoteNode {
                id: "x".into(),
                alt_id: None,
                kind: NodeKind::Docx,
                parent_id: None,
                title: "X".into(),
                edited_at: None,
                url: None,
            })
            .await;
        assert_eq!(missing, Err(AdapterError::NotFound { id: "x".into() }));
    }
}
