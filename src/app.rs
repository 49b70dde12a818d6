//! The composition root: the domains' settings, building the platform and
//! every domain, the router, and the server's life cycle.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, MatchedPath, Request},
    http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use metrics_exporter_prometheus::PrometheusHandle;
use sea_orm::DatabaseConnection;
use secrecy::ExposeSecret;
use serde_json::json;
use tokio::{net::TcpListener, sync::watch};
use tower_http::{
    catch_panic::CatchPanicLayer,
    compression::CompressionLayer,
    cors::{AllowOrigin, CorsLayer},
    sensitive_headers::SetSensitiveRequestHeadersLayer,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

use crate::{
    auth::{self, service::AuthService},
    config::{Config, ConfigError},
    db, docs,
    domain::{Domain, Platform, PublicUrl, Setup},
    feeds, gateway,
    graphql::{
        Limits,
        http::{Endpoint, RequestData},
    },
    http::{
        Web,
        frontend::Frontend,
        ops::{self, Ops},
    },
    jobs::{self, Jobs},
    nodes, readerapi,
    schema::{self, TrellisSchema},
    telemetry,
};

/// Every domain's settings, flattened into the command line: one line per
/// domain.
#[derive(clap::Args, Debug, Clone)]
pub struct DomainSettings {
    #[command(flatten)]
    pub feeds: feeds::Settings,
    #[command(flatten)]
    pub nodes: nodes::Settings,
    #[command(flatten)]
    pub docs: docs::Settings,
    #[command(flatten)]
    pub gateway: gateway::Settings,
    #[command(flatten)]
    pub oidc: auth::oidc::Settings,
}

impl DomainSettings {
    /// Every domain, set up from its settings: one line per domain.
    fn setups(&self, platform: &Platform) -> anyhow::Result<Vec<Box<dyn Setup>>> {
        Ok(vec![
            feeds::setup(&self.feeds, platform)?,
            nodes::setup(&self.nodes, platform)?,
            readerapi::setup(&self.feeds, platform)?,
            docs::setup(&self.docs, platform)?,
            gateway::setup(&self.gateway, platform)?,
            auth::oidc::setup(&self.oidc, platform)?,
        ])
    }

    /// Checks the relations between knobs that clap cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.feeds.validate()
    }
}

/// The running application: the platform's parts and the built domains.
#[derive(Clone)]
pub struct App {
    pub config: Arc<Config>,
    pub db: DatabaseConnection,
    pub jobs: Jobs,
    pub web: Web,
    pub domains: Vec<Arc<dyn Domain>>,
    pub public_url: PublicUrl,
    pub redis: Option<redis::aio::ConnectionManager>,
    pub schema: TrellisSchema,
    pub metrics: PrometheusHandle,
}

impl App {
    /// Connects to the stores, applies migrations, creates the first admin,
    /// and builds every domain.
    pub async fn build(config: Config, settings: DomainSettings) -> anyhow::Result<Self> {
        let config = Arc::new(config);
        let db = db::connect(&config).await?;
        let auth = Arc::new(AuthService::new(db.clone(), &config).await?);
        if let (Some(user), Some(password)) = (&config.admin_user, &config.admin_password) {
            auth.ensure_admin(user, password.clone()).await?;
        }
        let (redis, backend) = match &config.redis_url {
            Some(url) => {
                let client = redis::Client::open(url.expose_secret())
                    .context("REDIS_URL is not a valid Redis URL")?;
                let manager = redis::aio::ConnectionManager::new(client.clone())
                    .await
                    .context("connecting to Redis (REDIS_URL)")?;
                let backend = jobs::Backend::Redis {
                    client,
                    commands: manager.clone(),
                    prefix: config.redis_prefix.clone(),
                };
                (Some(manager), backend)
            }
            None => (None, jobs::Backend::Embedded),
        };
        let web = Web {
            auth,
            trusted_proxies: config.trusted_proxies.clone().into(),
            allowed_origins: config.cors_allowed_origins.clone().into(),
        };
        let platform = Platform {
            db: db.clone(),
            web: web.clone(),
            secret: web.auth.server_secret(),
            data_dir: config.data_dir.clone(),
            public_url: PublicUrl::new(config.public_url.clone()),
        };
        let setups = settings.setups(&platform)?;
        let public_url = platform.public_url.clone();
        let mut registry = jobs::registry(
            &db,
            jobs::sweep::Retention {
                outbox: Duration::from_secs(config.outbox_retention),
                tasks: Duration::from_secs(config.task_retention),
            },
        );
        for setup in &setups {
            setup.register_tasks(&mut registry);
        }
        let jobs = Jobs::new(db.clone(), config.runner_settings(), registry, backend);
        let domains = setups.into_iter().map(|setup| setup.build(&jobs)).collect();
        let schema = schema::schema_builder(Limits {
            max_depth: config.graphql_max_depth,
            max_complexity: config.graphql_max_complexity,
            max_aliases: config.graphql_max_aliases,
            max_fragment_spreads: config.graphql_max_fragment_spreads,
            introspection: config.graphql_introspection,
        })
        .finish();
        Ok(App {
            config,
            db,
            jobs,
            web,
            domains,
            public_url,
            redis,
            schema,
            metrics: telemetry::metrics_handle()?,
        })
    }

    /// What every GraphQL operation gets: the platform's services, then
    /// each domain's services and fresh DataLoaders.
    fn request_data(&self) -> RequestData {
        let (jobs, auth, db) = (self.jobs.clone(), self.web.auth.clone(), self.db.clone());
        let domains = self.domains.clone();
        Arc::new(move |data: &mut async_graphql::Data| {
            data.insert(jobs.clone());
            data.insert(jobs::graphql::TaskRows::new(&db));
            data.insert(auth.clone());
            data.insert(db.clone());
            for domain in &domains {
                domain.request_data(data);
            }
        })
    }

    /// Every route: the platform's, then each domain's.
    pub fn router(&self) -> Router {
        let config = &self.config;
        let frontend = Frontend::new(config.web_dir.clone());
        let mut router = Router::new()
            .merge(crate::graphql::http::routes(Endpoint {
                schema: self.schema.clone(),
                web: self.web.clone(),
                request_data: self.request_data(),
                max_body_bytes: config.max_body_bytes,
                max_batch: config.graphql_max_batch,
                ws_limits: config.ws_limits(),
                frontend: frontend.clone(),
            }))
            .merge(frontend.routes())
            .merge(jobs::http::routes(self.web.clone(), self.jobs.clone()))
            .merge(ops::routes(Ops {
                web: self.web.clone(),
                db: self.db.clone(),
                redis: self.redis.clone(),
                metrics: self.metrics.clone(),
                metrics_token: config.metrics_token.clone(),
                metrics_allow: config.metrics_allow.clone(),
            }));
        for domain in &self.domains {
            router = router.merge(domain.routes());
        }
        router
            // The web client for pages outside the API, else a JSON 404.
            .fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
                let frontend = frontend.clone();
                async move { frontend.fallback(&method, &uri, &headers) }
            })
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(config.max_body_bytes))
            .layer(middleware::from_fn(track_http))
            .layer(cors(config))
            .layer(CompressionLayer::new())
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_secs(config.request_timeout),
            ))
            .layer(middleware::from_fn(crate::http::headers::security_headers))
            .layer(middleware::from_fn(
                crate::http::headers::close_after_unread_body,
            ))
            .layer(TraceLayer::new_for_http())
            .layer(SetSensitiveRequestHeadersLayer::new([
                header::AUTHORIZATION,
                header::COOKIE,
            ]))
            .layer(CatchPanicLayer::custom(|panic: Box<dyn std::any::Any + Send>| {
                let message = crate::error::panic_text(panic.as_ref());
                tracing::error!(panic = %message, "a request handler panicked");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({ "errors": [{ "message": "internal error", "extensions": { "code": "INTERNAL" } }] })),
                )
                    .into_response()
            }))
    }
}

fn cors(config: &Config) -> CorsLayer {
    let origins = &config.cors_allowed_origins;
    let base = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            header::HeaderName::from_static("idempotency-key"),
        ])
        .max_age(Duration::from_secs(600));
    if origins.iter().any(|origin| origin == "*") {
        // Any origin, but never with the user's cookie.
        base.allow_origin(AllowOrigin::any())
    } else {
        let list: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|origin| HeaderValue::from_str(origin).ok())
            .collect();
        base.allow_origin(AllowOrigin::list(list))
            .allow_credentials(true)
    }
}

async fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(json!({ "errors": [{ "message": "this route does not answer that method", "extensions": { "code": "METHOD_NOT_ALLOWED" } }] })),
    )
        .into_response()
}

/// Request count and latency per route, labelled by the route template (not
/// the raw path) so the label set stays bounded.
async fn track_http(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("trellis_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("trellis_http_request_duration_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// Which parts of Trellis a process runs (`trellis serve --role`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// API, workers, schedulers and the outbox publisher.
    #[default]
    All,
    /// The API (and the publisher of its own events); no workers.
    Api,
    /// Workers, schedulers and the publisher; the HTTP listener still serves
    /// `/healthz`, `/readyz` and `/metrics`.
    Worker,
}

/// Runs the HTTP server until SIGTERM/SIGINT, then stops accepting, lets
/// in-flight requests finish for up to `TRELLIS_SHUTDOWN_GRACE` seconds and
/// closes the database pool.
pub async fn serve(config: Config, settings: DomainSettings, role: Role) -> anyhow::Result<()> {
    let listen = config.listen;
    let grace = Duration::from_secs(config.shutdown_grace);
    let app = App::build(config, settings).await?;
    // Before any worker starts.
    for domain in &app.domains {
        domain
            .prepare()
            .await
            .with_context(|| format!("preparing the {} domain", domain.name()))?;
    }
    if let Ok(Some(false)) = jobs::analyze::autovacuum_on(&app.db).await {
        tracing::warn!(
            "PostgreSQL's autovacuum is off: Trellis refreshes the planner statistics of \
             changed tables itself every 10 minutes (system.analyze); vacuuming is yours to schedule"
        );
    }
    let db = app.db.clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let background = match role {
        Role::All | Role::Worker => {
            let mut handles = app.jobs.start(stop_rx.clone());
            for domain in &app.domains {
                handles.extend(domain.background(stop_rx.clone()));
            }
            handles
        }
        Role::Api => app.jobs.start_events(stop_rx.clone()),
    };
    tracing::info!(role = ?role, worker_id = %app.jobs.settings().worker_id, "starting");
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen} (TRELLIS_LISTEN)"))?;
    let addr = listener.local_addr()?;
    app.public_url.bound(addr);
    if app.config.public_url.is_none() && addr.ip().is_unspecified() {
        tracing::warn!(
            addr = %addr,
            "listening on every address without TRELLIS_PUBLIC_URL: links and OAuth callbacks \
             will name {addr}; set TRELLIS_PUBLIC_URL to the address clients use"
        );
    }
    tracing::info!(addr = %addr, "listening");

    let mut server_stop = stop_rx.clone();
    let limits = app.config.listener_limits();
    let server = crate::http::serve::serve(listener, app.router(), limits, async move {
        let _ = server_stop.wait_for(|stop| *stop).await;
    });
    let mut server = tokio::spawn(server);

    tokio::select! {
        result = &mut server => {
            let _ = stop_tx.send(true);
            result??;
            return Ok(());
        }
        signal = shutdown_signal() => tracing::info!(signal, "shutting down"),
    }
    let _ = stop_tx.send(true);
    match tokio::time::timeout(grace, &mut server).await {
        Ok(result) => result??,
        Err(_) => {
            tracing::warn!(
                grace_secs = grace.as_secs(),
                "grace period over; closing remaining connections"
            );
            server.abort();
        }
    }
    // Workers release or finish their tasks; the publisher flushes the outbox.
    let _ = tokio::time::timeout(grace, futures_util::future::join_all(background)).await;
    db.close().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() -> &'static str {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
        "SIGTERM"
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<&'static str>();
    tokio::select! {
        name = ctrl_c => name,
        name = terminate => name,
    }
}
