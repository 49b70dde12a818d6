//! Configuration: `TRELLIS_*` environment variables (plus `DATABASE_URL` and
//! `REDIS_URL`), optionally from a `.env` file, each also settable as a flag.
//! Every knob is listed with its default in `.env.example`.
//!
//! Secrets are held as [`SecretString`], whose `Debug` prints `[REDACTED]`,
//! and clap is told not to echo their values in `--help`.

use std::{net::SocketAddr, path::PathBuf, str::FromStr, time::Duration};

use clap::{Args, ValueEnum};
use ipnet::IpNet;
use secrecy::{ExposeSecret, SecretString};

#[derive(Args, Debug, Clone)]
pub struct Config {
    /// Directory for the embedded database and other local state.
    #[arg(
        long,
        env = "TRELLIS_DATA_DIR",
        default_value = "./data",
        global = true
    )]
    pub data_dir: PathBuf,

    /// Database URL: `sqlite://…` or `postgres://…`. Default: `<data dir>/trellis.db`.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<SecretString>,

    /// Maximum pooled database connections.
    #[arg(
        long,
        env = "TRELLIS_DB_MAX_CONNECTIONS",
        default_value_t = 10,
        global = true
    )]
    pub db_max_connections: u32,

    /// The SQLite database's size budget in bytes (SQLite's
    /// `max_page_count`, counted in its 4 KiB pages). A write past it is
    /// refused with `STORAGE_FULL`, never lost silently. Not a filesystem
    /// quota: the WAL can still grow while readers hold it.
    #[arg(
        long,
        env = "TRELLIS_SQLITE_MAX_BYTES",
        default_value_t = 512 * 1024 * 1024,
        value_parser = clap::value_parser!(u64).range(1024 * 1024..),
        global = true
    )]
    pub sqlite_max_bytes: u64,

    /// Redis URL; when set, jobs and events go through Redis.
    #[arg(long, env = "REDIS_URL", hide_env_values = true, global = true)]
    pub redis_url: Option<SecretString>,

    /// Prefix of every Redis key and channel Trellis uses.
    #[arg(
        long,
        env = "TRELLIS_REDIS_PREFIX",
        default_value = "trellis",
        global = true
    )]
    pub redis_prefix: String,

    /// Address the HTTP server listens on (port 0 picks a free port).
    #[arg(
        long,
        env = "TRELLIS_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,

    /// The URL browsers and providers reach this server at, e.g.
    /// `https://trellis.example.org` (OAuth callbacks, links in answers).
    /// Default: `http://` + the address the listener bound.
    #[arg(long, env = "TRELLIS_PUBLIC_URL", global = true)]
    pub public_url: Option<url::Url>,

    /// Log filter, e.g. `info` or `info,trellis=debug`.
    #[arg(long, env = "TRELLIS_LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "TRELLIS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub log_format: LogFormat,

    /// Username of the first admin, created at start-up when absent.
    #[arg(long, env = "TRELLIS_ADMIN_USER", global = true)]
    pub admin_user: Option<String>,

    /// Password of the first admin (only used when the account is created).
    #[arg(
        long,
        env = "TRELLIS_ADMIN_PASSWORD",
        hide_env_values = true,
        global = true
    )]
    pub admin_password: Option<SecretString>,

    /// The server secret: access tokens' HMAC key, and the key of reader-API tokens and stored Fever keys. Default: generated once into `<data dir>/instance.key`.
    #[arg(
        long,
        env = "TRELLIS_JWT_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub jwt_secret: Option<SecretString>,

    /// Lifetime of an access token, in seconds.
    #[arg(
        long,
        env = "TRELLIS_ACCESS_TOKEN_TTL",
        default_value_t = 900,
        global = true
    )]
    pub access_token_ttl: u64,

    /// Lifetime of a session (cookie and refresh tokens), in seconds.
    #[arg(long, env = "TRELLIS_SESSION_TTL", default_value_t = 30 * 24 * 3600, global = true)]
    pub session_ttl: u64,

    /// Failed logins allowed per client IP and per username within the window.
    #[arg(
        long,
        env = "TRELLIS_LOGIN_MAX_ATTEMPTS",
        default_value_t = 10,
        global = true
    )]
    pub login_max_attempts: u32,

    /// Extra failed logins per window that a blocked username still allows,
    /// all addresses with no recent failures together (0: none).
    #[arg(
        long,
        env = "TRELLIS_LOGIN_FRESH_ADDRESS_ATTEMPTS",
        default_value_t = 3,
        global = true
    )]
    pub login_fresh_address_attempts: u32,

    /// Window over which failed logins are counted, in seconds.
    #[arg(
        long,
        env = "TRELLIS_LOGIN_WINDOW",
        default_value_t = 60,
        global = true
    )]
    pub login_window: u64,

    /// How long a client IP or username stays blocked, in seconds.
    #[arg(
        long,
        env = "TRELLIS_LOGIN_BLOCK",
        default_value_t = 300,
        global = true
    )]
    pub login_block: u64,

    /// Password hashes (argon2id, 19 MiB each) computed at once in this
    /// process. Default: the number of cores.
    #[arg(long, env = "TRELLIS_PASSWORD_HASH_CONCURRENCY", global = true)]
    pub password_hash_concurrency: Option<usize>,

    /// Milliseconds a login waits for a free hashing slot before it is answered `RATE_LIMITED`.
    #[arg(
        long,
        env = "TRELLIS_PASSWORD_HASH_WAIT_MS",
        default_value_t = 2000,
        global = true
    )]
    pub password_hash_wait_ms: u64,

    /// Comma-separated IPs/CIDRs of reverse proxies whose `X-Forwarded-For`
    /// and `X-Forwarded-Proto` are believed.
    #[arg(long, env = "TRELLIS_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_network, global = true)]
    pub trusted_proxies: Vec<IpNet>,

    /// Comma-separated origins allowed to call the API from a browser.
    #[arg(
        long,
        env = "TRELLIS_CORS_ALLOWED_ORIGINS",
        value_delimiter = ',',
        global = true
    )]
    pub cors_allowed_origins: Vec<String>,

    /// Serve the web client from this folder (a built `frontend/dist`)
    /// instead of the copy embedded in the binary: for developing the client.
    #[arg(long, env = "TRELLIS_WEB_DIR", global = true)]
    pub web_dir: Option<std::path::PathBuf>,

    /// Bearer token `GET /metrics` requires (`Authorization: Bearer …`).
    /// Unset: no token, only the address check below.
    #[arg(
        long,
        env = "TRELLIS_METRICS_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub metrics_token: Option<SecretString>,

    /// Comma-separated IPs/CIDRs that may read `GET /metrics` (the client
    /// address, as `TRELLIS_TRUSTED_PROXIES` resolves it).
    #[arg(
        long,
        env = "TRELLIS_METRICS_ALLOW",
        value_delimiter = ',',
        value_parser = parse_network,
        default_value = "127.0.0.0/8,::1/128",
        global = true
    )]
    pub metrics_allow: Vec<IpNet>,

    /// When the session cookie carries `Secure`.
    #[arg(long, env = "TRELLIS_COOKIE_SECURE", value_enum, default_value_t = CookieSecure::Auto, global = true)]
    pub cookie_secure: CookieSecure,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "TRELLIS_MAX_BODY_BYTES", default_value_t = 1024 * 1024, global = true)]
    pub max_body_bytes: usize,

    /// Time limit for one HTTP request, in seconds.
    #[arg(
        long,
        env = "TRELLIS_REQUEST_TIMEOUT",
        default_value_t = 30,
        global = true
    )]
    pub request_timeout: u64,

    /// Seconds a client has to send a request's headers (also how long an
    /// idle kept-alive connection stays open).
    #[arg(long, env = "TRELLIS_HEADER_READ_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub header_read_timeout: u64,

    /// Most client connections open at once, WebSockets included; one more
    /// is answered 503 and closed.
    #[arg(long, env = "TRELLIS_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub max_connections: u64,

    /// Seconds a WebSocket client has to send `connection_init` (then 4408).
    #[arg(long, env = "TRELLIS_WS_INIT_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub ws_init_timeout: u64,

    /// Operations one WebSocket connection may run at once.
    #[arg(
        long,
        env = "TRELLIS_WS_MAX_SUBSCRIPTIONS",
        default_value_t = 100,
        global = true
    )]
    pub ws_max_subscriptions: usize,

    /// Seconds between a signed-in WebSocket connection's checks that its
    /// session is still live (a logout in this process closes it at once).
    #[arg(long, env = "TRELLIS_WS_SESSION_RECHECK", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub ws_session_recheck: u64,

    /// Deepest allowed GraphQL selection (introspection is bounded apart).
    #[arg(
        long,
        env = "TRELLIS_GRAPHQL_MAX_DEPTH",
        default_value_t = 12,
        global = true
    )]
    pub graphql_max_depth: usize,

    /// Highest allowed GraphQL query complexity (about the number of values
    /// an answer may hold; list fields multiply by their page size).
    #[arg(
        long,
        env = "TRELLIS_GRAPHQL_MAX_COMPLEXITY",
        default_value_t = 100_000,
        global = true
    )]
    pub graphql_max_complexity: usize,

    /// Most aliases allowed in one GraphQL document, a fragment's counted once per spread.
    #[arg(
        long,
        env = "TRELLIS_GRAPHQL_MAX_ALIASES",
        default_value_t = 30,
        global = true
    )]
    pub graphql_max_aliases: usize,

    /// Most fragment spreads one GraphQL document may expand to (each counted as often as it is reached).
    #[arg(
        long,
        env = "TRELLIS_GRAPHQL_MAX_FRAGMENT_SPREADS",
        default_value_t = 100,
        global = true
    )]
    pub graphql_max_fragment_spreads: usize,

    /// Who may query the schema (`__schema`, `__type`): everyone, signed-in callers, or nobody.
    #[arg(long, env = "TRELLIS_GRAPHQL_INTROSPECTION", value_enum, default_value_t = Introspection::Public, global = true)]
    pub graphql_introspection: Introspection,

    /// Most operations allowed in one batched GraphQL request.
    #[arg(
        long,
        env = "TRELLIS_GRAPHQL_MAX_BATCH",
        default_value_t = 10,
        global = true
    )]
    pub graphql_max_batch: usize,

    /// Workers for `q:short` (above TRELLIS_PULL_CONCURRENCY, so feed pulls leave room).
    #[arg(
        long,
        env = "TRELLIS_QUEUE_SHORT_CONCURRENCY",
        default_value_t = 16,
        global = true
    )]
    pub queue_short_concurrency: usize,

    /// Workers for `q:medium`.
    #[arg(
        long,
        env = "TRELLIS_QUEUE_MEDIUM_CONCURRENCY",
        default_value_t = 4,
        global = true
    )]
    pub queue_medium_concurrency: usize,

    /// Workers for `q:long`.
    #[arg(
        long,
        env = "TRELLIS_QUEUE_LONG_CONCURRENCY",
        default_value_t = 2,
        global = true
    )]
    pub queue_long_concurrency: usize,

    /// Seconds a worker's lease on a task lasts without a heartbeat.
    #[arg(long, env = "TRELLIS_TASK_LEASE", default_value_t = 30, global = true)]
    pub task_lease: u64,

    /// Attempts a task gets before it is `FAILED`.
    #[arg(
        long,
        env = "TRELLIS_TASK_MAX_ATTEMPTS",
        default_value_t = 5,
        global = true
    )]
    pub task_max_attempts: i32,

    /// First retry delay in milliseconds (doubles per attempt, with jitter).
    #[arg(
        long,
        env = "TRELLIS_TASK_RETRY_BASE_MS",
        default_value_t = 1000,
        global = true
    )]
    pub task_retry_base_ms: u64,

    /// Longest retry delay in seconds.
    #[arg(
        long,
        env = "TRELLIS_TASK_RETRY_MAX",
        default_value_t = 300,
        global = true
    )]
    pub task_retry_max: u64,

    /// Milliseconds between idle workers' checks for due tasks.
    #[arg(
        long,
        env = "TRELLIS_TASK_POLL_MS",
        default_value_t = 500,
        global = true
    )]
    pub task_poll_ms: u64,

    /// Seconds an idempotency key is remembered (at least a day).
    #[arg(
        long,
        env = "TRELLIS_IDEMPOTENCY_TTL",
        default_value_t = 86_400,
        global = true
    )]
    pub idempotency_ttl: u64,

    /// Seconds finished tasks are kept (at least TRELLIS_IDEMPOTENCY_TTL).
    #[arg(long, env = "TRELLIS_TASK_RETENTION", default_value_t = 7 * 86_400, global = true)]
    pub task_retention: u64,

    /// Seconds published outbox events are kept.
    #[arg(long, env = "TRELLIS_OUTBOX_RETENTION", default_value_t = 7 * 86_400, global = true)]
    pub outbox_retention: u64,

    /// This process's name in task leases. Default: host name, process id and a random suffix.
    #[arg(long, env = "TRELLIS_WORKER_ID", global = true)]
    pub worker_id: Option<String>,

    /// Seconds to wait for in-flight requests after SIGTERM/SIGINT.
    #[arg(
        long,
        env = "TRELLIS_SHUTDOWN_GRACE",
        default_value_t = 30,
        global = true
    )]
    pub shutdown_grace: u64,
}

/// Accepts a network (`10.0.0.0/8`) or a single address (`127.0.0.1`).
/// An IP address or a CIDR network, as the `*_PROXIES` and `*_NETWORKS` lists take them.
pub fn parse_network(value: &str) -> Result<IpNet, String> {
    let value = value.trim();
    value
        .parse::<IpNet>()
        .or_else(|_| value.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{value}` is neither an IP address nor a CIDR network"))
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// Who may run GraphQL introspection (`__schema`, `__type`); `__typename`
/// always works.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Introspection {
    /// Everyone: the schema is published with the source (`schema.graphql`).
    Public,
    /// Signed-in callers; anonymous ones get `UNAUTHENTICATED`.
    Authenticated,
    /// Nobody: `FORBIDDEN`.
    Off,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieSecure {
    /// Secure when the request came over HTTPS (directly or via a trusted proxy).
    Auto,
    Always,
    Never,
}

/// Which database a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Config {
    /// The database URL to connect to, defaulting to the embedded SQLite file.
    pub fn database_url(&self) -> SecretString {
        match &self.database_url {
            Some(url) => url.clone(),
            None => {
                let path = self.data_dir.join("trellis.db");
                SecretString::from(format!("sqlite://{}?mode=rwc", path.display()))
            }
        }
    }

    /// The SQLite database file, when the database is one (not in memory).
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        let url = self.database_url();
        let rest = url.expose_secret().strip_prefix("sqlite:")?;
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let path = rest.split('?').next().unwrap_or_default();
        (!path.is_empty() && !path.starts_with(":memory:") && !path.starts_with("file:"))
            .then(|| PathBuf::from(path))
    }

    pub fn backend(&self) -> Result<Backend, ConfigError> {
        Backend::from_str(self.database_url().expose_secret())
    }

    pub fn access_token_ttl(&self) -> Duration {
        Duration::from_secs(self.access_token_ttl)
    }

    pub fn session_ttl(&self) -> Duration {
        Duration::from_secs(self.session_ttl)
    }

    /// How much argon2 work may run at once, and how long a caller waits for it.
    pub fn hashing_settings(&self) -> crate::auth::password::HashingSettings {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        crate::auth::password::HashingSettings {
            concurrency: self.password_hash_concurrency.unwrap_or(cores).max(1),
            wait: Duration::from_millis(self.password_hash_wait_ms),
        }
    }

    /// The HTTP listener's limits.
    pub fn listener_limits(&self) -> crate::http::serve::ListenerLimits {
        crate::http::serve::ListenerLimits {
            header_read_timeout: Duration::from_secs(self.header_read_timeout),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        }
    }

    /// The GraphQL WebSocket's limits.
    pub fn ws_limits(&self) -> crate::graphql::ws::WsLimits {
        crate::graphql::ws::WsLimits {
            init_timeout: Duration::from_secs(self.ws_init_timeout),
            max_subscriptions: self.ws_max_subscriptions,
            session_recheck: Duration::from_secs(self.ws_session_recheck),
        }
    }

    /// The job runner's settings.
    pub fn runner_settings(&self) -> crate::jobs::runner::RunnerSettings {
        let worker_id = self.worker_id.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname")
                .map(|name| name.trim().to_owned())
                .unwrap_or_else(|_| "trellis".to_owned());
            let suffix: u32 = rand::random();
            format!("{host}-{}-{suffix:08x}", std::process::id())
        });
        crate::jobs::runner::RunnerSettings {
            worker_id,
            concurrency_short: self.queue_short_concurrency,
            concurrency_medium: self.queue_medium_concurrency,
            concurrency_long: self.queue_long_concurrency,
            lease: Duration::from_secs(self.task_lease),
            max_attempts: self.task_max_attempts,
            retry_base: Duration::from_millis(self.task_retry_base_ms),
            retry_max: Duration::from_secs(self.task_retry_max),
            idempotency_ttl: Duration::from_secs(self.idempotency_ttl),
            poll_interval: Duration::from_millis(self.task_poll_ms.max(10)),
        }
    }

    /// Checks the relations between knobs that clap cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.backend()?;
        if self.access_token_ttl == 0 || self.session_ttl == 0 {
            return Err(ConfigError::Invalid(
                "TRELLIS_ACCESS_TOKEN_TTL and TRELLIS_SESSION_TTL must be positive".into(),
            ));
        }
        if self.access_token_ttl > self.session_ttl {
            return Err(ConfigError::Invalid(
                "TRELLIS_ACCESS_TOKEN_TTL must not exceed TRELLIS_SESSION_TTL".into(),
            ));
        }
        if self.password_hash_concurrency == Some(0) {
            return Err(ConfigError::Invalid(
                "TRELLIS_PASSWORD_HASH_CONCURRENCY must be at least 1".into(),
            ));
        }
        if self.login_max_attempts == 0 {
            return Err(ConfigError::Invalid(
                "TRELLIS_LOGIN_MAX_ATTEMPTS must be at least 1".into(),
            ));
        }
        if let Some(secret) = &self.jwt_secret
            && secret.expose_secret().len() < 32
        {
            return Err(ConfigError::Invalid(
                "TRELLIS_JWT_SECRET must be at least 32 bytes".into(),
            ));
        }
        if let Some(url) = &self.public_url
            && (!matches!(url.scheme(), "http" | "https") || url.host().is_none())
        {
            return Err(ConfigError::Invalid(
                "TRELLIS_PUBLIC_URL must be an http:// or https:// URL with a host".into(),
            ));
        }
        for origin in &self.cors_allowed_origins {
            if origin != "*" && !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return Err(ConfigError::Invalid(format!(
                    "TRELLIS_CORS_ALLOWED_ORIGINS: `{origin}` is not an http(s) origin"
                )));
            }
        }
        if self.idempotency_ttl < 86_400 {
            return Err(ConfigError::Invalid(
                "TRELLIS_IDEMPOTENCY_TTL must be at least 86400 (keys are kept for 24 h)".into(),
            ));
        }
        if self.task_retention < self.idempotency_ttl {
            return Err(ConfigError::Invalid(
                "TRELLIS_TASK_RETENTION must be at least TRELLIS_IDEMPOTENCY_TTL (a replayed key must find its task)".into(),
            ));
        }
        if self.task_lease == 0 || self.task_max_attempts < 1 {
            return Err(ConfigError::Invalid(
                "TRELLIS_TASK_LEASE and TRELLIS_TASK_MAX_ATTEMPTS must be at least 1".into(),
            ));
        }
        if self.admin_user.is_some() != self.admin_password.is_some() {
            return Err(ConfigError::Invalid(
                "TRELLIS_ADMIN_USER and TRELLIS_ADMIN_PASSWORD must be set together".into(),
            ));
        }
        // It names leases (128 characters at most) and Redis keys, and
        // heads each Redis message of events up to a line break.
        if let Some(id) = &self.worker_id
            && (id.is_empty()
                || id.chars().count() > 128
                || id.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(ConfigError::Invalid(
                "TRELLIS_WORKER_ID must be 1-128 characters without spaces or control characters"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl FromStr for Backend {
    type Err = ConfigError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(ConfigError::Invalid(
                "DATABASE_URL must start with sqlite:, postgres:// or postgresql://".into(),
            ))
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        config: Config,
    }

    fn parse(args: &[&str]) -> Config {
        let mut argv = vec!["trellis"];
        argv.extend_from_slice(args);
        Wrapper::try_parse_from(argv)
            .expect("arguments parse")
            .config
    }

    #[test]
    fn a_worker_id_must_fit_leases_and_messages() {
        assert!(parse(&["--worker-id", "api-1"]).validate().is_ok());
        for bad in ["", "two words", "line\nbreak", &"w".repeat(129)] {
            assert!(
                parse(&["--worker-id", bad]).validate().is_err(),
                "{bad:?} is refused"
            );
        }
    }

    #[test]
    fn defaults_use_embedded_sqlite_under_data_dir() {
        let config = parse(&["--data-dir", "/srv/trellis"]);
        assert_eq!(config.backend().unwrap(), Backend::Sqlite);
        assert_eq!(
            config.database_url().expose_secret(),
            "sqlite:///srv/trellis/trellis.db?mode=rwc"
        );
        assert_eq!(
            config.sqlite_path(),
            Some(PathBuf::from("/srv/trellis/trellis.db"))
        );
        let memory = parse(&["--database-url", "sqlite::memory:"]);
        assert_eq!(memory.sqlite_path(), None);
        let postgres = parse(&["--database-url", "postgres://db/trellis"]);
        assert_eq!(postgres.sqlite_path(), None);
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let config = parse(&[
            "--database-url",
            "postgres://app:hunter2@db/trellis",
            "--jwt-secret",
            "0123456789abcdef0123456789abcdef-secret",
            "--admin-user",
            "root",
            "--admin-password",
            "correct-horse",
        ]);
        let debug = format!("{config:?}");
        for secret in ["hunter2", "abcdef-secret", "correct-horse"] {
            assert!(!debug.contains(secret), "{secret} leaked into {debug}");
        }
    }

    #[test]
    fn rejects_unknown_database_scheme_and_half_admin() {
        assert!(parse(&["--database-url", "mysql://x"]).validate().is_err());
        assert!(parse(&["--admin-user", "root"]).validate().is_err());
        assert!(parse(&["--jwt-secret", "short"]).validate().is_err());
        assert!(
            parse(&["--cors-allowed-origins", "example.com"])
                .validate()
                .is_err()
        );
        assert!(parse(&[]).validate().is_ok());
    }

    #[test]
    fn trusted_proxies_accept_addresses_and_networks() {
        let config = parse(&["--trusted-proxies", "10.0.0.0/8, 127.0.0.1"]);
        assert_eq!(config.trusted_proxies.len(), 2);
        assert!(
            config.trusted_proxies[1].contains(&"127.0.0.1".parse::<std::net::IpAddr>().unwrap())
        );
    }
}
