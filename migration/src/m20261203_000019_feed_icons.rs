//! Why: reader apps show each feed's icon, and the only icons they had
//! were ones they fetched themselves from the publisher (or a third-party
//! favicon service), telling it who reads what. `feed_icons` keeps one
//! small image per feed, fetched by the pull worker through the SSRF guard
//! (`feeds::icons`) and served from our own `/icons/{feed_id}` (Google
//! Reader `iconUrl`, GraphQL `Feed.iconUrl`) and inline as Fever
//! `favicons`. A table beside `feeds`, not columns on it: every feed list
//! reads `feeds`, and none of them should drag image bytes along. 1:1
//! with its feed and deleted with it (CASCADE); `data` is bounded
//! (64 KiB) by the fetcher, `hash` (SHA-256 of `data`) is the ETag, and
//! `fetched_at` says when to look again.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(FeedIcons::Table)
                    .col(big_integer(FeedIcons::FeedId).primary_key())
                    .col(text(FeedIcons::MimeType))
                    .col(blob(FeedIcons::Data))
                    .col(text(FeedIcons::Hash))
                    .col(timestamp_with_time_zone(FeedIcons::FetchedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(FeedIcons::Table, FeedIcons::FeedId)
                            .to(Feeds::Table, Feeds::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(FeedIcons::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum FeedIcons {
    Table,
    FeedId,
    MimeType,
    Data,
    Hash,
    FetchedAt,
}

#[derive(DeriveIden)]
enum Feeds {
    Table,
    Id,
}
