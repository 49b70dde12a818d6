//! The docs mirror's service: what resolvers, the CLI and the sync task
//! call. Instance-wide: admins configure and sync, members read.

use std::sync::Arc;

use super::settings::Settings;

#[derive(Clone)]
pub struct DocsService {
    settings: Arc<Settings>,
}

/// The configuration as admins may see it: every knob, and for each
/// credential only whether it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsView {
    pub notion_configured: bool,
    pub notion_api_url: String,
    pub notion_qps: u32,
    pub feishu_configured: bool,
    pub feishu_app_id: Option<String>,
    pub feishu_api_url: String,
    pub feishu_qps: u32,
    /// `None`: every space the app can see.
    pub feishu_wiki_spaces: Option<Vec<String>>,
    pub feishu_drive_folders: Vec<String>,
    pub sync_interval_seconds: u64,
    pub reconcile_every_runs: u32,
    pub trash_keep_days: u32,
    pub bitable_inline_max_rows: u32,
}

impl DocsService {
    pub fn new(settings: Arc<Settings>) -> Self {
        DocsService { settings }
    }

    /// The settings without their secrets (callers check the admin).
    pub fn settings_view(&self) -> SettingsView {
        let s = &self.settings;
        SettingsView {
            notion_configured: s.notion_configured(),
            notion_api_url: s.notion_api_url.to_string(),
            notion_qps: s.notion_qps,
            feishu_configured: s.feishu_configured(),
            feishu_app_id: s.feishu_app_id.clone(),
            feishu_api_url: s.feishu_api_url.to_string(),
            feishu_qps: s.feishu_qps,
            feishu_wiki_spaces: s.wiki_spaces(),
            feishu_drive_folders: s.drive_folders(),
            sync_interval_seconds: s.docs_sync_interval,
            reconcile_every_runs: s.docs_reconcile_every_runs,
            trash_keep_days: s.docs_trash_keep_days,
            bitable_inline_max_rows: s.docs_bitable_inline_max_rows,
        }
    }
}
