//! Logs and metrics.
//!
//! Logs go to stderr, pretty for people or JSON for collectors
//! (`TRELLIS_LOG_FORMAT`), filtered by `TRELLIS_LOG_LEVEL`. Nothing logs
//! request bodies, tokens, cookies or passwords: the HTTP trace marks the
//! `Authorization` and `Cookie` headers sensitive, secrets are `SecretString`,
//! and GraphQL arguments marked `secret` are redacted by async-graphql.

use std::{sync::OnceLock, time::Duration};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::{Config, LogFormat};

pub fn init_logging(config: &Config) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&config.log_level)
        .map_err(|error| anyhow::anyhow!("TRELLIS_LOG_LEVEL `{}`: {error}", config.log_level))?;
    let registry = tracing_subscriber::registry().with(filter);
    let result = match config.log_format {
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Pretty => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .try_init(),
    };
    result.map_err(|error| anyhow::anyhow!("installing the log subscriber: {error}"))
}

/// Installs the process-wide Prometheus recorder (once) and returns its handle.
pub fn metrics_handle() -> anyhow::Result<PrometheusHandle> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ],
        )?
        .install_recorder()?;
    // Histograms are kept in buckets that must be drained periodically.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(HANDLE.get_or_init(|| handle).clone())
}
