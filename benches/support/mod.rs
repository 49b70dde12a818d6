//! What every benchmark reads from its environment.

/// A knob from the environment, or its default.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The PostgreSQL server's admin URL (benchmarks create their own databases).
/// The default speaks plain TCP over loopback, as a co-located deployment
/// would (and as BullMQ talks to Redis): with the server's TLS on, sqlx
/// would otherwise encrypt every statement, which measured 6–10% of the
/// job benchmark's CPU.
pub fn pg_admin() -> String {
    std::env::var("TRELLIS_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable".into())
}

/// A database made for one benchmark run: an SQLite file in `dir`, or a
/// fresh PostgreSQL database (dropped by [`BenchDatabase::drop_now`]).
pub struct BenchDatabase {
    pub url: String,
    pg_name: Option<String>,
}

impl BenchDatabase {
    pub async fn create(postgres: bool, dir: &std::path::Path) -> BenchDatabase {
        if !postgres {
            return BenchDatabase {
                url: format!("sqlite://{}?mode=rwc", dir.join("bench.db").display()),
                pg_name: None,
            };
        }
        use sea_orm::ConnectionTrait;
        let name = format!("trellis_bench_{}", uuid::Uuid::new_v4().simple());
        let admin = sea_orm::Database::connect(pg_admin())
            .await
            .expect("PostgreSQL reachable at TRELLIS_TEST_PG_URL");
        admin
            .execute_unprepared(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create the bench database");
        let admin_url = pg_admin();
        let (base, query) = admin_url
            .split_once('?')
            .unwrap_or((admin_url.as_str(), ""));
        let (server, _) = base
            .rsplit_once('/')
            .expect("TRELLIS_TEST_PG_URL names a database");
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        BenchDatabase {
            url: format!("{server}/{name}{query}"),
            pg_name: Some(name),
        }
    }

    /// Drops a PostgreSQL bench database (SQLite files go with their dir).
    pub async fn drop_now(self) {
        use sea_orm::ConnectionTrait;
        if let Some(name) = self.pg_name
            && let Ok(admin) = sea_orm::Database::connect(pg_admin()).await
        {
            let _ = admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await;
        }
    }
}
