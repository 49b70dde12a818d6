//! The feeds domain's settings (`TRELLIS_PULL_*`, `TRELLIS_SEARCH_*` and
//! the outbound guard of user-supplied URLs), flattened into the command
//! line by the app.

use std::time::Duration;

use ipnet::IpNet;

use super::pull::PullSettings;
use crate::{
    config::ConfigError,
    fulltext::SearchLimits,
    httpc::{Destination, HttpSettings, guard::AddressPolicy},
};

#[derive(clap::Args, Debug, Clone)]
#[group(id = "feeds_settings")]
#[command(next_help_heading = "Feeds")]
pub struct Settings {
    /// Seconds between pulls of a feed without its own interval (seed 000's default).
    #[arg(
        long,
        env = "TRELLIS_PULL_INTERVAL",
        default_value_t = 1800,
        global = true
    )]
    pub pull_interval: u64,

    /// Seconds a feed fetch may take in total.
    #[arg(
        long,
        env = "TRELLIS_PULL_TIMEOUT",
        default_value_t = 30,
        global = true
    )]
    pub pull_timeout: u64,

    /// Feed fetches (pulls, discovery) in flight at once in this process (at most 2 per host on top).
    #[arg(
        long,
        env = "TRELLIS_PULL_CONCURRENCY",
        default_value_t = 10,
        global = true
    )]
    pub pull_concurrency: usize,

    /// How long one ranked search (`search`) may run, in milliseconds; then
    /// it is stopped and answered `BAD_USER_INPUT`.
    #[arg(
        long,
        env = "TRELLIS_SEARCH_TIMEOUT_MS",
        default_value_t = 2000,
        global = true
    )]
    pub search_timeout_ms: u64,

    /// Ranked searches running at once in this process (each holds a
    /// database connection); more wait up to the search timeout, then
    /// `RATE_LIMITED`. Keep it well under TRELLIS_DB_MAX_CONNECTIONS.
    #[arg(
        long,
        env = "TRELLIS_SEARCH_CONCURRENCY",
        default_value_t = 4,
        global = true
    )]
    pub search_concurrency: usize,

    /// Upper bound, in seconds, on the delay before a feed's next check.
    #[arg(
        long,
        env = "TRELLIS_PULL_MAX_BACKOFF",
        default_value_t = 172_800,
        global = true
    )]
    pub pull_max_backoff: u64,

    /// Let outbound fetches reach loopback and private networks (off: SSRF guard).
    #[arg(
        long,
        env = "TRELLIS_ALLOW_PRIVATE_FEEDS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        global = true
    )]
    pub allow_private_feeds: bool,

    /// Networks outbound fetches may reach even with the SSRF guard on (comma-separated CIDRs).
    #[arg(long, env = "TRELLIS_ALLOW_PRIVATE_NETWORKS", value_delimiter = ',', value_parser = crate::config::parse_network, global = true)]
    pub allow_private_networks: Vec<IpNet>,

    /// Largest response body an outbound fetch accepts, in bytes (after decompression).
    #[arg(
        long,
        env = "TRELLIS_FETCH_MAX_BYTES",
        default_value_t = 15 * 1024 * 1024,
        global = true
    )]
    pub fetch_max_bytes: usize,
}

impl Settings {
    /// The ranked search's bounds.
    pub fn search_limits(&self) -> SearchLimits {
        SearchLimits {
            timeout: Duration::from_millis(self.search_timeout_ms),
            concurrency: self.search_concurrency,
        }
    }

    /// The outbound HTTP settings of user-supplied URLs (feed pulls,
    /// discovery, favicons): the SSRF guard with the instance's exceptions.
    pub fn http_settings(&self) -> HttpSettings {
        HttpSettings {
            destination: Destination::Guarded(AddressPolicy {
                allow_private: self.allow_private_feeds,
                allowed_networks: self.allow_private_networks.clone(),
            }),
            timeout: Duration::from_secs(self.pull_timeout),
            max_body_bytes: self.fetch_max_bytes,
            limits: super::pull::limits(self.pull_concurrency),
            ..Default::default()
        }
    }

    /// The feed pull worker's settings.
    pub fn pull_settings(&self) -> PullSettings {
        PullSettings {
            interval: Duration::from_secs(self.pull_interval),
            max_backoff: Duration::from_secs(self.pull_max_backoff),
            concurrency: self.pull_concurrency,
        }
    }

    /// Checks the relations between knobs that clap cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.search_timeout_ms == 0 || self.search_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "TRELLIS_SEARCH_TIMEOUT_MS and TRELLIS_SEARCH_CONCURRENCY must be at least 1"
                    .into(),
            ));
        }
        if self.pull_interval == 0 || self.pull_timeout == 0 || self.pull_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "TRELLIS_PULL_INTERVAL, TRELLIS_PULL_TIMEOUT and TRELLIS_PULL_CONCURRENCY must be at least 1".into(),
            ));
        }
        if self.pull_max_backoff < self.pull_interval {
            return Err(ConfigError::Invalid(
                "TRELLIS_PULL_MAX_BACKOFF must not be below TRELLIS_PULL_INTERVAL".into(),
            ));
        }
        Ok(())
    }
}
