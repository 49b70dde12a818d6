//! Where the adapters are built from the settings: one registration line
//! per platform. A platform without credentials is skipped, not failed.

use std::num::NonZeroU32;

use secrecy::SecretString;

use super::adapter::{Adapter, Platform};
use super::feishu::{FeishuAdapter, FeishuConfig};
use super::notion::{NotionAdapter, NotionConfig};
use super::settings::Settings;

/// One platform as a sync sees it: its adapter, or why it is skipped.
pub enum Configured {
    /// Ready to sync.
    Ready(Box<dyn Adapter>),
    /// Skipped, and why (for the run's summary and the doctor).
    Skipped(&'static str),
}

/// The platform's adapter from `settings`.
pub fn adapter(settings: &Settings, platform: Platform) -> anyhow::Result<Configured> {
    match platform {
        Platform::Notion => notion(settings),
        Platform::Feishu => Ok(match FeishuConfig::from_settings(settings) {
            Some(config) => Configured::Ready(Box::new(FeishuAdapter::new(config)?)),
            None => Configured::Skipped("not configured"),
        }),
    }
}

fn notion(settings: &Settings) -> anyhow::Result<Configured> {
    let Some(token) = &settings.notion_token else {
        return Ok(Configured::Skipped("not configured"));
    };
    let mut config = NotionConfig::new(
        settings.notion_api_url.clone(),
        SecretString::from(token.expose().to_owned()),
    );
    config.api_qps = qps(settings.notion_qps);
    config.asset_qps = config.api_qps;
    Ok(Configured::Ready(Box::new(NotionAdapter::new(config)?)))
}

/// A configured rate, at least one request per second.
fn qps(value: u32) -> NonZeroU32 {
    NonZeroU32::new(value).unwrap_or(NonZeroU32::MIN)
}
