//! The docs mirror's GraphQL: thin resolvers over [`DocsService`].

use async_graphql::{Context, Object, SimpleObject};

use super::service::{DocsService, SettingsView};
use crate::graphql::context::ContextExt;

#[derive(Default)]
pub struct DocsQuery;

/// The docs mirror's configuration, as admins see it: credentials only as
/// "set" or not, never their values.
#[derive(SimpleObject)]
pub struct DocsSettings {
    /// `TRELLIS_NOTION_TOKEN` is set.
    pub notion_configured: bool,
    pub notion_api_url: String,
    /// Requests per second to Notion's API (and, apart, to its assets).
    pub notion_qps: i32,
    /// `TRELLIS_FEISHU_APP_ID` and `TRELLIS_FEISHU_APP_SECRET` are set.
    pub feishu_configured: bool,
    /// The app id (not a secret; the app secret is never shown).
    pub feishu_app_id: Option<String>,
    pub feishu_api_url: String,
    pub feishu_qps: i32,
    /// The wiki spaces mirrored; null for every space the app can see.
    pub feishu_wiki_spaces: Option<Vec<String>>,
    pub feishu_drive_folders: Vec<String>,
    /// Seconds between scheduled syncs; 0 when they are off.
    pub sync_interval_seconds: i64,
    /// Every how many Notion runs one is full.
    pub reconcile_every_runs: i32,
    pub trash_keep_days: i32,
    pub bitable_inline_max_rows: i32,
}

impl From<SettingsView> for DocsSettings {
    fn from(view: SettingsView) -> Self {
        // The knobs are small (clap parsed them as u32/u64 from the
        // environment); saturate rather than wrap if one is absurd.
        let int = |value: u32| i32::try_from(value).unwrap_or(i32::MAX);
        DocsSettings {
            notion_configured: view.notion_configured,
            notion_api_url: view.notion_api_url,
            notion_qps: int(view.notion_qps),
            feishu_configured: view.feishu_configured,
            feishu_app_id: view.feishu_app_id,
            feishu_api_url: view.feishu_api_url,
            feishu_qps: int(view.feishu_qps),
            feishu_wiki_spaces: view.feishu_wiki_spaces,
            feishu_drive_folders: view.feishu_drive_folders,
            sync_interval_seconds: i64::try_from(view.sync_interval_seconds).unwrap_or(i64::MAX),
            reconcile_every_runs: int(view.reconcile_every_runs),
            trash_keep_days: int(view.trash_keep_days),
            bitable_inline_max_rows: int(view.bitable_inline_max_rows),
        }
    }
}

#[Object]
impl DocsQuery {
    /// The docs mirror's configuration (admins only).
    async fn docs_settings(&self, ctx: &Context<'_>) -> async_graphql::Result<DocsSettings> {
        ctx.admin()?;
        Ok(ctx.service::<DocsService>()?.settings_view().into())
    }
}
