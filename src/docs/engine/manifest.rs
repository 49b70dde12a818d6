//! The manifest's reads and writes (the `docs_*` tables): every write is
//! one upsert keyed by what identifies the row, so re-running a step is
//! harmless.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::{docs_alias, docs_asset, docs_document, docs_link, docs_sync_run};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, Statement,
};

use crate::docs::adapter::{DocLink, Platform};

/// A document's `status`.
pub const ACTIVE: &str = "active";
/// A document whose body waits for an asset download.
pub const PENDING_ASSETS: &str = "pending_assets";
/// A document deleted remotely, its file in the trash.
pub const TRASHED: &str = "trashed";
/// An asset's `status` once downloaded.
pub const ASSET_OK: &str = "ok";
/// An asset whose download failed, retried next run.
pub const ASSET_PENDING: &str = "pending";

/// Every document of a platform, by primary id.
pub async fn documents(
    db: &DatabaseConnection,
    platform: Platform,
) -> Result<HashMap<String, docs_document::Model>, DbErr> {
    let rows = docs_document::Entity::find()
        .filter(docs_document::Column::Platform.eq(platform.as_str()))
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.remote_id.clone(), row))
        .collect())
}

/// Every document not trashed, of every platform (for `INDEX.md`).
pub async fn live_documents(db: &DatabaseConnection) -> Result<Vec<docs_document::Model>, DbErr> {
    docs_document::Entity::find()
        .filter(docs_document::Column::Status.ne(TRASHED))
        .order_by_asc(docs_document::Column::LocalPath)
        .all(db)
        .await
}

/// Inserts or replaces a document's row (its `created_at` kept).
pub async fn upsert_document(
    db: &DatabaseConnection,
    row: docs_document::Model,
) -> Result<(), DbErr> {
    use docs_document::Column as C;
    let active: docs_document::ActiveModel = row.into();
    docs_document::Entity::insert(active)
        .on_conflict(
            OnConflict::columns([C::Platform, C::RemoteId])
                .update_columns([
                    C::AltId,
                    C::Kind,
                    C::ParentRemoteId,
                    C::Title,
                    C::Url,
                    C::EditedAt,
                    C::ContentHash,
                    C::LocalPath,
                    C::Status,
                    C::TrashedAt,
                    C::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Records `alias` as another id of `primary`.
pub async fn upsert_alias(
    db: &DatabaseConnection,
    platform: Platform,
    alias: &str,
    primary: &str,
) -> Result<(), DbErr> {
    docs_alias::Entity::insert(docs_alias::ActiveModel {
        platform: Set(platform.as_str().to_owned()),
        alias_id: Set(alias.to_owned()),
        primary_id: Set(primary.to_owned()),
    })
    .on_conflict(
        OnConflict::columns([docs_alias::Column::Platform, docs_alias::Column::AliasId])
            .update_column(docs_alias::Column::PrimaryId)
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// Alias id → primary id, for a platform.
pub async fn aliases(
    db: &DatabaseConnection,
    platform: Platform,
) -> Result<HashMap<String, String>, DbErr> {
    let rows = docs_alias::Entity::find()
        .filter(docs_alias::Column::Platform.eq(platform.as_str()))
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.alias_id, row.primary_id))
        .collect())
}

/// Replaces the links of the document `from` with those of its new body.
pub async fn replace_links(
    db: &DatabaseConnection,
    platform: Platform,
    from: &str,
    links: &[DocLink],
) -> Result<(), DbErr> {
    docs_link::Entity::delete_many()
        .filter(docs_link::Column::Platform.eq(platform.as_str()))
        .filter(docs_link::Column::FromId.eq(from))
        .exec(db)
        .await?;
    let mut rows: HashMap<&str, &str> = HashMap::new();
    for link in links {
        rows.entry(&link.raw_url).or_insert(&link.target_id);
    }
    if rows.is_empty() {
        return Ok(());
    }
    docs_link::Entity::insert_many(rows.into_iter().map(|(raw_url, target)| {
        docs_link::ActiveModel {
            platform: Set(platform.as_str().to_owned()),
            from_id: Set(from.to_owned()),
            raw_url: Set(raw_url.to_owned()),
            target_id: Set(target.to_owned()),
        }
    }))
    .on_conflict(
        OnConflict::columns([
            docs_link::Column::Platform,
            docs_link::Column::FromId,
            docs_link::Column::RawUrl,
        ])
        .update_column(docs_link::Column::TargetId)
        .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// Every link of a platform.
pub async fn links(
    db: &DatabaseConnection,
    platform: Platform,
) -> Result<Vec<docs_link::Model>, DbErr> {
    docs_link::Entity::find()
        .filter(docs_link::Column::Platform.eq(platform.as_str()))
        .order_by_asc(docs_link::Column::FromId)
        .order_by_asc(docs_link::Column::RawUrl)
        .all(db)
        .await
}

/// An asset's row, by its remote key.
pub async fn asset(
    db: &DatabaseConnection,
    platform: Platform,
    remote_key: &str,
) -> Result<Option<docs_asset::Model>, DbErr> {
    docs_asset::Entity::find_by_id((platform.as_str().to_owned(), remote_key.to_owned()))
        .one(db)
        .await
}

/// Inserts or replaces an asset's row (its `created_at` kept).
pub async fn upsert_asset(db: &DatabaseConnection, row: docs_asset::Model) -> Result<(), DbErr> {
    use docs_asset::Column as C;
    let active: docs_asset::ActiveModel = row.into();
    docs_asset::Entity::insert(active)
        .on_conflict(
            OnConflict::columns([C::Platform, C::RemoteKey])
                .update_columns([
                    C::Sha256,
                    C::LocalPath,
                    C::Status,
                    C::OriginalUrl,
                    C::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Stores a written document's searchable text (`docs_search`, which the
/// full-text index follows): its title and `body` as
/// [`crate::docs::search::indexed_body`] made it.
pub async fn index_text(
    db: &DatabaseConnection,
    platform: Platform,
    remote_id: &str,
    title: &str,
    body: &str,
) -> Result<(), DbErr> {
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "INSERT INTO docs_search (platform, remote_id, search_title, search_body) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (platform, remote_id) DO UPDATE \
         SET search_title = excluded.search_title, search_body = excluded.search_body",
        [
            platform.as_str().into(),
            remote_id.into(),
            crate::fulltext::indexable(title).into(),
            body.into(),
        ],
    ))
    .await?;
    Ok(())
}

/// A platform's finished runs that succeeded, newest first.
pub async fn recent_runs(
    db: &DatabaseConnection,
    platform: Platform,
    limit: u64,
) -> Result<Vec<docs_sync_run::Model>, DbErr> {
    docs_sync_run::Entity::find()
        .filter(docs_sync_run::Column::Platform.eq(platform.as_str()))
        .filter(docs_sync_run::Column::Status.eq("succeeded"))
        .order_by_desc(docs_sync_run::Column::Id)
        .limit(limit)
        .all(db)
        .await
}

/// Opens a run's row (`running`); returns its id.
pub async fn start_run(
    db: &DatabaseConnection,
    platform: Platform,
    mode: &str,
    reason: &str,
    started_at: DateTime<Utc>,
) -> Result<i64, DbErr> {
    let inserted = docs_sync_run::Entity::insert(docs_sync_run::ActiveModel {
        platform: Set(platform.as_str().to_owned()),
        mode: Set(mode.to_owned()),
        reason: Set(reason.to_owned()),
        status: Set("running".to_owned()),
        started_at: Set(started_at),
        finished_at: Set(None),
        checkpoint: Set(None),
        stats: Set(serde_json::json!({})),
        changes: Set(serde_json::json!({})),
        error: Set(None),
        ..Default::default()
    })
    .exec(db)
    .await?;
    Ok(inserted.last_insert_id)
}

/// Closes the platform's runs left `running` by a process that died (the
/// caller holds the platform's lock, so none of them is still going), as
/// `interrupted`; returns how many.
pub async fn close_interrupted(
    db: &DatabaseConnection,
    platform: Platform,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let closed = docs_sync_run::Entity::update_many()
        .col_expr(docs_sync_run::Column::Status, Expr::value("interrupted"))
        .col_expr(docs_sync_run::Column::FinishedAt, Expr::value(now))
        .col_expr(
            docs_sync_run::Column::Error,
            Expr::value("the process stopped before the run finished"),
        )
        .filter(docs_sync_run::Column::Platform.eq(platform.as_str()))
        .filter(docs_sync_run::Column::Status.eq("running"))
        .exec(db)
        .await?;
    Ok(closed.rows_affected)
}

/// What a finished run records.
pub struct RunOutcome {
    /// `succeeded` or `failed`.
    pub status: &'static str,
    /// When it finished.
    pub finished_at: DateTime<Utc>,
    /// The next incremental run's checkpoint.
    pub checkpoint: Option<DateTime<Utc>>,
    /// The stats JSON.
    pub stats: serde_json::Value,
    /// The changes JSON.
    pub changes: serde_json::Value,
    /// Why it failed.
    pub error: Option<String>,
}

/// Closes a run's row.
pub async fn finish_run(
    db: &DatabaseConnection,
    id: i64,
    outcome: RunOutcome,
) -> Result<(), DbErr> {
    docs_sync_run::Entity::update(docs_sync_run::ActiveModel {
        id: Set(id),
        status: Set(outcome.status.to_owned()),
        finished_at: Set(Some(outcome.finished_at)),
        checkpoint: Set(outcome.checkpoint),
        stats: Set(outcome.stats),
        changes: Set(outcome.changes),
        error: Set(outcome.error),
        ..Default::default()
    })
    .exec(db)
    .await?;
    Ok(())
}
