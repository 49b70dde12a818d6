//! The gateway's settings (`TRELLIS_KAVITA_*`, `TRELLIS_ANILIST_*`,
//! `TRELLIS_GATEWAY_*`), flattened into the command line by the app. Each
//! is in `.env.example`. Endpoints are reached exactly as configured (even
//! on a private network); redirects off them are refused.

use crate::auth::keys::Credential;

#[derive(clap::Args, Debug, Clone)]
#[group(id = "gateway_settings")]
#[command(next_help_heading = "Provider gateway")]
pub struct Settings {
    /// The instance's Kavita server (e.g. `http://kavita.lan:5000`).
    /// Without it, Kavita is not configured.
    #[arg(long, env = "TRELLIS_KAVITA_URL", global = true)]
    pub kavita_url: Option<url::Url>,

    /// The API key of a dedicated Kavita account, used only for public
    /// catalog reads (never for a user's own actions).
    #[arg(
        long,
        env = "TRELLIS_KAVITA_CATALOG_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub kavita_catalog_api_key: Option<Credential>,

    /// AniList's GraphQL API.
    #[arg(
        long,
        env = "TRELLIS_ANILIST_API_URL",
        default_value = "https://graphql.anilist.co",
        global = true
    )]
    pub anilist_api_url: url::Url,

    /// AniList's site, where OAuth authorizes and issues tokens.
    #[arg(
        long,
        env = "TRELLIS_ANILIST_OAUTH_URL",
        default_value = "https://anilist.co",
        global = true
    )]
    pub anilist_oauth_url: url::Url,

    /// The AniList API client's id (anilist.co/settings/developer). Without
    /// it and the secret, users cannot link AniList.
    #[arg(long, env = "TRELLIS_ANILIST_CLIENT_ID", global = true)]
    pub anilist_client_id: Option<String>,

    /// The AniList API client's secret.
    #[arg(
        long,
        env = "TRELLIS_ANILIST_CLIENT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub anilist_client_secret: Option<Credential>,

    /// Requests per minute to AniList (it documents 90 and serves 30 while
    /// degraded; its `X-RateLimit-*` answers are obeyed either way).
    #[arg(
        long,
        env = "TRELLIS_ANILIST_REQUESTS_PER_MINUTE",
        default_value_t = 30,
        value_parser = clap::value_parser!(u32).range(1..=600),
        global = true
    )]
    pub anilist_requests_per_minute: u32,

    /// Seconds between scrobbling runs (Kavita reading → AniList events)
    /// for every user with both accounts linked; 0 turns the schedule off
    /// (`scrobbleKavita` still runs one user's on request).
    #[arg(
        long,
        env = "TRELLIS_GATEWAY_SCROBBLE_INTERVAL",
        default_value_t = 900,
        value_parser = clap::value_parser!(u64).range(0..=604_800),
        global = true
    )]
    pub gateway_scrobble_interval: u64,
}

impl Settings {
    /// Kavita's URL when it is configured.
    pub fn kavita(&self) -> Option<&url::Url> {
        self.kavita_url.as_ref()
    }
}
