//! What every benchmark reads from its environment.

/// A knob from the environment, or its default.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The PostgreSQL server's admin URL (benchmarks create their own databases).
pub fn pg_admin() -> String {
    std::env::var("TRELLIS_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}
