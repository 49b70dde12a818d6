//! Test harness: starts the real `trellis` binary on an ephemeral port
//! against a fresh SQLite file or a fresh PostgreSQL database, and talks to
//! it over HTTP like any client.
//!
//! PostgreSQL is required: `TRELLIS_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) must reach a server that
//! may create databases. There is no skip: a missing backend fails the test.
//! Set `TEST_LOG=1` to see the server's logs.

use std::{net::SocketAddr, path::Path, process::Stdio, time::Duration};

use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

pub const ADMIN_USER: &str = "admin";
pub const ADMIN_PASSWORD: &str = "admin-password-123";
/// Known to the tests so they can mint tokens the server must reject.
pub const JWT_SECRET: &str = "test-secret-0123456789abcdef0123456789abcdef";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite, embedded dispatch.
    Sqlite,
    /// PostgreSQL, embedded dispatch.
    Postgres,
    /// PostgreSQL with Redis dispatch and events (a key prefix per test).
    PostgresRedis,
}

/// Runs each named test body once per listed backend, as `<name>::<fn>`.
#[macro_export]
macro_rules! per_backend {
    ($backends:tt; $($name:ident),* $(,)?) => {
        $( $crate::per_backend!(@one $name $backends); )*
    };
    (@one $name:ident [$($test:ident => $variant:ident),*]) => {
        mod $name {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$name($crate::helpers::Backend::$variant).await
                }
            )*
        }
    };
}

/// Runs a test body on each job-runner configuration: embedded on SQLite,
/// embedded on PostgreSQL, Redis on PostgreSQL.
#[macro_export]
macro_rules! on_every_runner {
    ($($name:ident),* $(,)?) => {
        $crate::per_backend!(
            [sqlite => Sqlite, postgres => Postgres, postgres_redis => PostgresRedis];
            $($name),*
        );
    };
}

/// Runs a test body once per storage backend, as `<name>::sqlite` and `<name>::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $crate::per_backend!([sqlite => Sqlite, postgres => Postgres]; $($name),*);
    };
}

pub fn pg_admin_url() -> String {
    std::env::var("TRELLIS_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub fn redis_url() -> String {
    std::env::var("TRELLIS_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A database made for one test and dropped after it.
pub struct TestDatabase {
    pub url: String,
    pg_name: Option<String>,
}

impl TestDatabase {
    pub async fn create(backend: Backend, dir: &Path) -> Self {
        match backend {
            Backend::Sqlite => TestDatabase {
                url: format!("sqlite://{}?mode=rwc", dir.join("trellis.db").display()),
                pg_name: None,
            },
            Backend::Postgres | Backend::PostgresRedis => {
                let name = format!("trellis_test_{}", uuid::Uuid::new_v4().simple());
                let admin = Database::connect(pg_admin_url()).await.expect(
                    "PostgreSQL must be reachable at TRELLIS_TEST_PG_URL (start it with .ci/run)",
                );
                admin
                    .execute_unprepared(&format!("CREATE DATABASE \"{name}\""))
                    .await
                    .expect("create test database");
                let _ = admin.close().await;
                let base = pg_admin_url();
                let url = match base.rsplit_once('/') {
                    Some((server, _)) => format!("{server}/{name}"),
                    None => panic!("TRELLIS_TEST_PG_URL must name a database"),
                };
                TestDatabase {
                    url,
                    pg_name: Some(name),
                }
            }
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(name) = self.pg_name.take() else {
            return;
        };
        // Drop may run inside a runtime; do the async cleanup on a thread of its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(async {
                if let Ok(admin) = Database::connect(pg_admin_url()).await {
                    let _ = admin
                        .execute_unprepared(&format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        ))
                        .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}

/// A running server.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub child: Child,
    /// The environment it was started with, for `restart`.
    env: Vec<(String, String)>,
    // Held so the data directory and the database live as long as the server.
    _dir: tempfile::TempDir,
    _db: TestDatabase,
}

/// How to start a server; `env` adds or overrides variables.
#[derive(Default, Clone)]
pub struct AppOptions {
    pub env: Vec<(String, String)>,
}

impl AppOptions {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, AppOptions::default()).await
}

pub async fn spawn_app_with(backend: Backend, mut options: AppOptions) -> TestApp {
    if backend == Backend::PostgresRedis {
        let prefix = format!("trellis-test-{}", uuid::Uuid::new_v4().simple());
        options = options
            .env("REDIS_URL", &redis_url())
            .env("TRELLIS_REDIS_PREFIX", &prefix);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = TestDatabase::create(backend, dir.path()).await;
    let command = serve_command(dir.path(), &db.url, &options.env);
    let mut app = TestApp::from_command(command, db, dir).await;
    app.env = options.env;
    app
}

fn serve_command(dir: &Path, database_url: &str, env: &[(String, String)]) -> Command {
    let mut command = trellis_command(dir, database_url);
    command
        .env("TRELLIS_LISTEN", "127.0.0.1:0")
        .env("TRELLIS_ADMIN_USER", ADMIN_USER)
        .env("TRELLIS_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("TRELLIS_JWT_SECRET", JWT_SECRET)
        .arg("serve");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The `trellis` binary with a clean environment: only what the test sets.
pub fn trellis_command(dir: &Path, database_url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
    for (key, _) in std::env::vars() {
        if key.starts_with("TRELLIS_") || key == "DATABASE_URL" || key == "REDIS_URL" {
            command.env_remove(key);
        }
    }
    command
        .current_dir(dir)
        .env("TRELLIS_DATA_DIR", dir)
        .env("DATABASE_URL", database_url)
        .env("TRELLIS_LOG_FORMAT", "json")
        .env("TRELLIS_LOG_LEVEL", "info")
        .kill_on_drop(true);
    command
}

/// Starts the server and waits for its `listening` log line.
async fn start_server(mut command: Command) -> (Child, SocketAddr) {
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn trellis");
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = BufReader::new(stderr).lines();
    let echo = std::env::var_os("TEST_LOG").is_some();
    let mut seen = Vec::new();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if echo {
                eprintln!("{line}");
            }
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["message"] == "listening"
                && let Some(addr) = event["addr"].as_str()
            {
                return Some(addr.parse::<SocketAddr>().expect("listening addr"));
            }
            seen.push(line);
        }
        None
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("server did not start; its output:\n{}", seen.join("\n")));
    // Keep draining the server's output so it never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if echo {
                eprintln!("{line}");
            }
        }
    });
    (child, addr)
}

/// A GraphQL response, with the HTTP bits tests look at.
#[derive(Debug)]
pub struct GqlResponse {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl GqlResponse {
    /// `extensions.code` of the first error.
    pub fn error_code(&self) -> Option<&str> {
        self.body["errors"][0]["extensions"]["code"].as_str()
    }

    pub fn data(&self) -> &Value {
        assert!(
            self.body.get("errors").is_none(),
            "unexpected errors: {}",
            self.body
        );
        &self.body["data"]
    }

    pub fn set_cookie(&self) -> Option<String> {
        self.headers
            .get(reqwest::header::SET_COOKIE)
            .map(|value| value.to_str().expect("ascii cookie").to_owned())
    }
}

/// A request under construction: headers to add, then `send`.
pub struct Gql<'a> {
    app: &'a TestApp,
    body: Value,
    headers: Vec<(String, String)>,
}

impl Gql<'_> {
    pub fn bearer(mut self, token: &str) -> Self {
        self.headers
            .push(("authorization".into(), format!("Bearer {token}")));
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Names the operation of the document to run (`operationName`).
    pub fn operation(mut self, name: &str) -> Self {
        self.body["operationName"] = json!(name);
        self
    }

    pub async fn send(self) -> GqlResponse {
        let mut request = self
            .app
            .client
            .post(self.app.url("/graphql"))
            .header("content-type", "application/json")
            .body(self.body.to_string());
        for (name, value) in self.headers {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("request reaches the server");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.json().await.expect("JSON response");
        GqlResponse {
            status,
            headers,
            body,
        }
    }
}

pub struct Tokens {
    pub access: String,
    pub refresh: String,
    pub cookie: String,
}

impl TestApp {
    /// A variable the server was started with.
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// Starts a prepared `trellis serve` command and waits until it listens.
    pub async fn from_command(
        command: Command,
        db: TestDatabase,
        dir: tempfile::TempDir,
    ) -> TestApp {
        let (child, addr) = start_server(command).await;
        // reqwest is built without a bundled crypto provider (see Cargo.toml).
        let _ = rustls::crypto::ring::default_provider().install_default();
        TestApp {
            addr,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("http client"),
            child,
            env: Vec::new(),
            _dir: dir,
            _db: db,
        }
    }

    /// SIGKILLs the server: no shutdown, no lease released.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill server");
    }

    /// Starts the server again on the same database and data directory
    /// (after `kill` or `terminate`), optionally with extra variables.
    pub async fn restart(&mut self, extra: &[(&str, &str)]) {
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let command = serve_command(self._dir.path(), &self._db.url, &env);
        let (child, addr) = start_server(command).await;
        self.child = child;
        self.addr = addr;
    }

    /// Starts another process on the same database (and Redis prefix), with
    /// extra variables (e.g. `TRELLIS_ROLE=worker`). Killed when dropped.
    pub async fn sibling(&self, extra: &[(&str, &str)]) -> (Child, SocketAddr) {
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        start_server(serve_command(self._dir.path(), &self._db.url, &env)).await
    }

    /// A direct connection to the server's database, to check effects.
    /// The server's data directory (`TRELLIS_DATA_DIR`).
    pub fn data_dir(&self) -> &Path {
        self._dir.path()
    }

    pub async fn database(&self) -> sea_orm::DatabaseConnection {
        Database::connect(self._db.url.as_str())
            .await
            .expect("connect to the test database")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn gql(&self, query: &str, variables: Value) -> Gql<'_> {
        Gql {
            app: self,
            body: json!({ "query": query, "variables": variables }),
            headers: Vec::new(),
        }
    }

    pub async fn login_response(&self, username: &str, password: &str) -> GqlResponse {
        self.gql(
            "mutation($u: String!, $p: String!) { login(username: $u, password: $p) { accessToken refreshToken expiresAt user { id username role } } }",
            json!({ "u": username, "p": password }),
        )
        .send()
        .await
    }

    /// Logs in and returns the tokens and the `name=value` of the session cookie.
    pub async fn login(&self, username: &str, password: &str) -> Tokens {
        let response = self.login_response(username, password).await;
        let data = response.data();
        let cookie = response
            .set_cookie()
            .expect("login sets a cookie")
            .split(';')
            .next()
            .expect("cookie pair")
            .to_owned();
        Tokens {
            access: data["login"]["accessToken"]
                .as_str()
                .expect("token")
                .to_owned(),
            refresh: data["login"]["refreshToken"]
                .as_str()
                .expect("token")
                .to_owned(),
            cookie,
        }
    }

    pub async fn admin(&self) -> Tokens {
        self.login(ADMIN_USER, ADMIN_PASSWORD).await
    }

    /// Creates a member through the API and logs them in.
    pub async fn member(&self, username: &str) -> Tokens {
        let admin = self.admin().await;
        let password = format!("{username}-password");
        self.gql(
            "mutation($i: CreateUserInput!) { createUser(input: $i) { id } }",
            json!({ "i": { "username": username, "password": password } }),
        )
        .bearer(&admin.access)
        .send()
        .await
        .data();
        self.login(username, &password).await
    }

    /// Sends SIGTERM and waits for the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running child");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("server exits after SIGTERM")
            .expect("wait")
    }
}

/// Documents that nest a value `levels` deep in every place the GraphQL
/// grammar lets one be written — a list and an object argument, a variable
/// default, a directive argument — and selection sets as deep, each with a
/// name for assertion messages. Unguarded, about 1,500 levels overflow the
/// parser's stack and abort the server (issue 16, item 1); the crash
/// probes send them over HTTP (`limits.rs`) and over the WebSocket.
pub fn deeply_nested_documents(levels: usize) -> Vec<(&'static str, String)> {
    let (open, close) = ("[".repeat(levels), "]".repeat(levels));
    vec![
        (
            "list argument",
            format!("{{ __typename(x: {open}1{close}) }}"),
        ),
        (
            "object argument",
            format!(
                "{{ __typename(x: {}1{}) }}",
                "{a: ".repeat(levels),
                "}".repeat(levels)
            ),
        ),
        (
            "variable default",
            format!("query($v: Int = {open}1{close}) {{ __typename }}"),
        ),
        (
            "directive argument",
            format!("{{ __typename @include(if: {open}true{close}) }}"),
        ),
        (
            "selection sets",
            format!("{}__typename{}", "{ a ".repeat(levels), " }".repeat(levels)),
        ),
    ]
}

impl TestApp {
    /// Asserts the server process is still running and still answering
    /// (after a request that might have crashed it).
    pub async fn assert_serving(&mut self) {
        assert!(
            self.child.try_wait().expect("child status").is_none(),
            "the server process exited"
        );
        let health = self
            .client
            .get(self.url("/healthz"))
            .send()
            .await
            .expect("the server still accepts connections");
        assert_eq!(health.status(), 200);
        let answer = self.gql("{ __typename }", json!({})).send().await;
        assert_eq!(answer.data()["__typename"], "Query");
    }
}
