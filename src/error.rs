//! The one error type of the service layer and how clients see it.
//!
//! Every variant maps to a stable `extensions.code` (SPEC §2). Unexpected
//! failures become `INTERNAL` with an opaque reference; their full cause
//! chain goes to the log under the same reference, never to the client.

use axum::http::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No valid credentials were presented. Client sees `UNAUTHENTICATED`.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// Authenticated, but not allowed. Client sees `FORBIDDEN`.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The named thing does not exist (or is not visible to the caller).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The input is invalid; `field` names the offending argument when known.
    #[error("{message}")]
    BadUserInput {
        message: String,
        field: Option<&'static str>,
    },
    /// The request conflicts with existing state (e.g. a duplicate name).
    #[error("{0}")]
    Conflict(String),
    /// Too many attempts; retry after the given number of seconds.
    #[error("too many attempts, retry in {retry_after} s")]
    RateLimited { retry_after: u64 },
    /// The database is too busy to answer now (locked, out of pooled
    /// connections, a lock or serialization conflict): nothing was done,
    /// and the same request will work shortly. Client sees `UNAVAILABLE`
    /// (HTTP 503 with `Retry-After`).
    #[error("the database is busy, retry in {retry_after} s")]
    Unavailable {
        retry_after: u64,
        #[source]
        cause: anyhow::Error,
    },
    /// An idempotency key was reused with a different payload.
    #[error("idempotency key already used with a different payload")]
    IdempotencyKeyReused,
    /// A third-party service (a provider the gateway reaches) failed or
    /// answered what we cannot use; the message says which and how, never
    /// with a credential. Client sees `UPSTREAM_FAILED` (HTTP 502).
    #[error("{0}")]
    Upstream(String),
    /// The database reached its size budget (`TRELLIS_SQLITE_MAX_BYTES`)
    /// or the disk is full: nothing of the request was written. Client sees
    /// `STORAGE_FULL` (HTTP 507); an operator must make room.
    #[error("the database is full: nothing was written")]
    StorageFull(#[source] anyhow::Error),
    /// Anything unexpected. The client sees only `INTERNAL` and a reference.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

pub type AppResult<T> = Result<T, AppError>;

/// An error and every cause under it on one line (`a: b: c`), for logs:
/// `Display` alone drops the causes (an internal error's is "internal error").
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl AppError {
    pub fn bad_input(field: &'static str, message: impl Into<String>) -> Self {
        AppError::BadUserInput {
            message: message.into(),
            field: Some(field),
        }
    }

    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        AppError::Internal(error.into())
    }

    /// For callers that report rather than answer (a task stage, start-up,
    /// the CLI): an internal error is its cause, chain intact; anything else
    /// is its message.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            AppError::Internal(cause) => cause,
            error => anyhow::Error::new(error),
        }
    }

    /// The stable code clients switch on.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Unauthenticated(_) => "UNAUTHENTICATED",
            AppError::Forbidden(_) => "FORBIDDEN",
            AppError::NotFound(_) => "NOT_FOUND",
            AppError::BadUserInput { .. } => "BAD_USER_INPUT",
            AppError::Conflict(_) => "CONFLICT",
            AppError::RateLimited { .. } => "RATE_LIMITED",
            AppError::Unavailable { .. } => "UNAVAILABLE",
            AppError::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            AppError::Upstream(_) => "UPSTREAM_FAILED",
            AppError::StorageFull(_) => "STORAGE_FULL",
            AppError::Internal(_) => "INTERNAL",
        }
    }

    /// The HTTP status for the plain-HTTP endpoints (`/tasks/{id}`, `/resources`…).
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadUserInput { .. } => StatusCode::BAD_REQUEST,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Upstream(_) => StatusCode::BAD_GATEWAY,
            AppError::StorageFull(_) => StatusCode::INSUFFICIENT_STORAGE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Logs an internal error's cause chain and returns the reference the
    /// client gets instead of the text.
    fn report(&self) -> Option<String> {
        let AppError::Internal(cause) = self else {
            return None;
        };
        let reference = uuid::Uuid::new_v4().simple().to_string();
        tracing::error!(error_ref = %reference, error = ?cause, "internal error");
        Some(reference)
    }

    /// The `extensions` object clients see: `code`, plus `retryAfter`,
    /// `field` or `reference` where they apply. Reports internal errors.
    pub fn extensions(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut extensions = serde_json::Map::new();
        extensions.insert("code".into(), self.code().into());
        match self {
            AppError::RateLimited { retry_after } | AppError::Unavailable { retry_after, .. } => {
                extensions.insert("retryAfter".into(), (*retry_after).into());
            }
            AppError::BadUserInput {
                field: Some(field), ..
            } => {
                extensions.insert("field".into(), (*field).into());
            }
            _ => {}
        }
        if let Some(reference) = self.report() {
            extensions.insert("reference".into(), reference.into());
        }
        extensions
    }

    /// The JSON body for plain-HTTP endpoints, shaped like a GraphQL error.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "errors": [{ "message": self.to_string(), "extensions": self.extensions() }] })
    }
}

/// Seconds a client waits before retrying a busy database.
const BUSY_RETRY_AFTER: u64 = 1;

/// A busy database is the client's cue to retry (`UNAVAILABLE`); any other
/// database failure is `INTERNAL`.
impl From<sea_orm::DbErr> for AppError {
    fn from(error: sea_orm::DbErr) -> Self {
        if database_busy(&error) {
            tracing::warn!(error = %error, "the database is busy");
            AppError::Unavailable {
                retry_after: BUSY_RETRY_AFTER,
                cause: error.into(),
            }
        } else if database_full(&error) {
            tracing::error!(error = %error, "the database is full: a write was refused");
            metrics::counter!("trellis_storage_full_total").increment(1);
            AppError::StorageFull(error.into())
        } else {
            AppError::Internal(error.into())
        }
    }
}

/// Whether the database refused for now rather than for good: SQLite busy
/// or locked (codes 5, 6 and their extended 261, 517, 262), PostgreSQL's
/// serialization failure, deadlock, lock not available or too many
/// connections, or no pooled connection within the acquire timeout.
pub fn database_busy(error: &sea_orm::DbErr) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    let sqlx_error = match error {
        DbErr::ConnectionAcquire(_) => return true,
        DbErr::Conn(RuntimeErr::SqlxError(error))
        | DbErr::Exec(RuntimeErr::SqlxError(error))
        | DbErr::Query(RuntimeErr::SqlxError(error)) => error,
        _ => return false,
    };
    match sqlx_error.as_ref() {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(database) => matches!(
            database.code().as_deref(),
            Some("5" | "6" | "261" | "262" | "517" | "40001" | "40P01" | "55P03" | "53300")
        ),
        _ => false,
    }
}

/// Whether the database refused a write for want of room: SQLite's
/// `SQLITE_FULL` (13: the page budget `max_page_count`, or the disk),
/// PostgreSQL's disk full (53100).
pub fn database_full(error: &sea_orm::DbErr) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match error {
        DbErr::Conn(RuntimeErr::SqlxError(error))
        | DbErr::Exec(RuntimeErr::SqlxError(error))
        | DbErr::Query(RuntimeErr::SqlxError(error)) => matches!(
            error.as_ref(),
            sqlx::Error::Database(database) if matches!(database.code().as_deref(), Some("13" | "53100"))
        ),
        _ => false,
    }
}

/// Resolvers return `AppError` through `?`: async-graphql's blanket
/// conversion keeps it as the error's `source`, and the schema's
/// [`QueryGuard`](crate::graphql::guard::QueryGuard) calls this to turn it
/// into `extensions` — one place, so no resolver can forget the code.
pub fn annotate_graphql_error(mut error: async_graphql::ServerError) -> async_graphql::ServerError {
    let Some(app_extensions) = error.source::<AppError>().map(AppError::extensions) else {
        return error;
    };
    let extensions = error.extensions.get_or_insert_with(Default::default);
    for (key, value) in app_extensions {
        if let Ok(value) = async_graphql::Value::from_json(value) {
            extensions.set(key, value);
        }
    }
    error
}

impl axum::response::IntoResponse for AppError {
    fn into_response(self) -> axum::response::Response {
        let mut response = (self.status(), axum::Json(self.to_json())).into_response();
        if let AppError::RateLimited { retry_after } | AppError::Unavailable { retry_after, .. } =
            self
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after.into());
        }
        response
    }
}

/// The text a panic was raised with (for the log; never for clients).
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_every_cause() {
        let cause =
            anyhow::Error::new(std::io::Error::other("disk full")).context("writing the item");
        assert_eq!(
            chain(&AppError::internal(cause)),
            "internal error: writing the item: disk full"
        );
    }

    #[test]
    fn internal_errors_never_carry_their_cause_to_the_client() {
        let error = AppError::internal(anyhow::anyhow!("password=hunter2 at db.internal:5432"));
        let body = error.to_json().to_string();
        assert!(!body.contains("hunter2"));
        assert!(body.contains("\"INTERNAL\""));
        assert!(body.contains("reference"));
        let gql = annotate_graphql_error(
            async_graphql::Error::from(error).into_server_error(Default::default()),
        );
        assert_eq!(gql.message, "internal error");
        assert_eq!(
            gql.extensions.unwrap().get("code"),
            Some(&async_graphql::Value::from("INTERNAL"))
        );
    }

    #[test]
    fn a_busy_database_is_a_retry_not_an_internal_error() {
        use sea_orm::{DbErr, RuntimeErr};
        let timeout = AppError::from(DbErr::ConnectionAcquire(
            sea_orm::error::ConnAcquireErr::Timeout,
        ));
        assert_eq!(timeout.code(), "UNAVAILABLE");
        assert_eq!(timeout.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(timeout.extensions()["retryAfter"], 1);
        let pool = DbErr::Exec(RuntimeErr::SqlxError(std::sync::Arc::new(
            sea_orm::sqlx::Error::PoolTimedOut,
        )));
        assert_eq!(AppError::from(pool).code(), "UNAVAILABLE");
        let other = DbErr::Custom("no such table: users".into());
        assert_eq!(AppError::from(other).code(), "INTERNAL");
    }

    #[test]
    fn rate_limited_carries_retry_after() {
        let gql = annotate_graphql_error(
            async_graphql::Error::from(AppError::RateLimited { retry_after: 42 })
                .into_server_error(Default::default()),
        );
        let ext = gql.extensions.expect("extensions");
        assert_eq!(
            ext.get("code"),
            Some(&async_graphql::Value::from("RATE_LIMITED"))
        );
        assert_eq!(
            ext.get("retryAfter"),
            Some(&async_graphql::Value::from(42u64))
        );
    }
}
