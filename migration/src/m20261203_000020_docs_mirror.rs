//! Why: the docs mirror (issue 20, seed 002) keeps a manifest of what it
//! mirrored, so a run can tell what changed, moved or went away without
//! re-reading the tree, and so links and aliases resolve across runs. The
//! seed kept it in a SQLite file of its own; ours lives in the main
//! database, beside every other domain, on SQLite and PostgreSQL alike.
//!
//! Every table is keyed by what the engine upserts on, so an upsert is one
//! `ON CONFLICT` statement: a document by `(platform, remote_id)`, an asset
//! by `(platform, remote_key)`, a link by `(platform, from_id, raw_url)`, an
//! alias by `(platform, alias_id)`. A document's `local_path` is indexed but
//! not unique: a run that swaps two siblings' names passes through a state
//! where both rows name one path. `docs_settings` holds what admins set
//! over GraphQL (secrets sealed with the server key, `sealed` says which);
//! only the table for now.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(DocsDocuments::Table)
                    .col(string_len(DocsDocuments::Platform, 16))
                    .col(text(DocsDocuments::RemoteId))
                    .col(text_null(DocsDocuments::AltId))
                    .col(string_len(DocsDocuments::Kind, 16))
                    .col(text_null(DocsDocuments::ParentRemoteId))
                    .col(text(DocsDocuments::Title))
                    .col(text_null(DocsDocuments::Url))
                    .col(timestamp_with_time_zone_null(DocsDocuments::EditedAt))
                    .col(text_null(DocsDocuments::ContentHash))
                    .col(text(DocsDocuments::LocalPath))
                    .col(string_len(DocsDocuments::Status, 16))
                    .col(timestamp_with_time_zone_null(DocsDocuments::TrashedAt))
                    .col(timestamp_with_time_zone(DocsDocuments::CreatedAt))
                    .col(timestamp_with_time_zone(DocsDocuments::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(DocsDocuments::Platform)
                            .col(DocsDocuments::RemoteId),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_docs_documents_local_path")
                    .table(DocsDocuments::Table)
                    .col(DocsDocuments::LocalPath)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DocsAssets::Table)
                    .col(string_len(DocsAssets::Platform, 16))
                    .col(text(DocsAssets::RemoteKey))
                    .col(text_null(DocsAssets::Sha256))
                    .col(text_null(DocsAssets::LocalPath))
                    .col(string_len(DocsAssets::Status, 16))
                    .col(text(DocsAssets::OriginalUrl))
                    .col(timestamp_with_time_zone(DocsAssets::CreatedAt))
                    .col(timestamp_with_time_zone(DocsAssets::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(DocsAssets::Platform)
                            .col(DocsAssets::RemoteKey),
                    )
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DocsLinks::Table)
                    .col(string_len(DocsLinks::Platform, 16))
                    .col(text(DocsLinks::FromId))
                    .col(text(DocsLinks::RawUrl))
                    .col(text(DocsLinks::TargetId))
                    .primary_key(
                        Index::create()
                            .col(DocsLinks::Platform)
                            .col(DocsLinks::FromId)
                            .col(DocsLinks::RawUrl),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_docs_links_target")
                    .table(DocsLinks::Table)
                    .col(DocsLinks::Platform)
                    .col(DocsLinks::TargetId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DocsAliases::Table)
                    .col(string_len(DocsAliases::Platform, 16))
                    .col(text(DocsAliases::AliasId))
                    .col(text(DocsAliases::PrimaryId))
                    .primary_key(
                        Index::create()
                            .col(DocsAliases::Platform)
                            .col(DocsAliases::AliasId),
                    )
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DocsSyncRuns::Table)
                    .col(big_integer(DocsSyncRuns::Id).auto_increment().primary_key())
                    .col(string_len(DocsSyncRuns::Platform, 16))
                    .col(string_len(DocsSyncRuns::Mode, 16))
                    .col(string_len(DocsSyncRuns::Reason, 32))
                    .col(string_len(DocsSyncRuns::Status, 16))
                    .col(timestamp_with_time_zone(DocsSyncRuns::StartedAt))
                    .col(timestamp_with_time_zone_null(DocsSyncRuns::FinishedAt))
                    .col(timestamp_with_time_zone_null(DocsSyncRuns::Checkpoint))
                    .col(json(DocsSyncRuns::Stats))
                    .col(json(DocsSyncRuns::Changes))
                    .col(text_null(DocsSyncRuns::Error))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_docs_sync_runs_platform")
                    .table(DocsSyncRuns::Table)
                    .col(DocsSyncRuns::Platform)
                    .col(DocsSyncRuns::Id)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DocsSettings::Table)
                    .col(string_len(DocsSettings::Key, 64).primary_key())
                    .col(text(DocsSettings::Value))
                    .col(boolean(DocsSettings::Sealed).default(false))
                    .col(timestamp_with_time_zone(DocsSettings::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            DocsSettings::Table.into_iden(),
            DocsSyncRuns::Table.into_iden(),
            DocsAliases::Table.into_iden(),
            DocsLinks::Table.into_iden(),
            DocsAssets::Table.into_iden(),
            DocsDocuments::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum DocsDocuments {
    Table,
    Platform,
    RemoteId,
    AltId,
    Kind,
    ParentRemoteId,
    Title,
    Url,
    EditedAt,
    ContentHash,
    LocalPath,
    Status,
    TrashedAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum DocsAssets {
    Table,
    Platform,
    RemoteKey,
    Sha256,
    LocalPath,
    Status,
    OriginalUrl,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum DocsLinks {
    Table,
    Platform,
    FromId,
    RawUrl,
    TargetId,
}

#[derive(DeriveIden)]
enum DocsAliases {
    Table,
    Platform,
    AliasId,
    PrimaryId,
}

#[derive(DeriveIden)]
enum DocsSyncRuns {
    Table,
    Id,
    Platform,
    Mode,
    Reason,
    Status,
    StartedAt,
    FinishedAt,
    Checkpoint,
    Stats,
    Changes,
    Error,
}

#[derive(DeriveIden)]
enum DocsSettings {
    Table,
    Key,
    Value,
    Sealed,
    UpdatedAt,
}
