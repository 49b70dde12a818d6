//! Why: the feed reader (SPEC §4, seed 000) keeps per-user groups, feeds,
//! items, bookmarks and settings; nothing crosses users, so every table
//! carries (or reaches through its feed) a `user_id` that cascades with the
//! account.
//!
//! - `feed_groups`: unique name per user; exactly one `is_default` group per
//!   user (a partial unique index), which the app never deletes — deleting
//!   another group moves its feeds there first.
//! - `feeds`: unique `(user_id, link)`. `group_id` is `NO ACTION`: the
//!   seed's RESTRICT safety net (a group with feeds cannot be deleted), but
//!   checked at the end of the statement, so deleting a user still cascades
//!   through both tables. `refresh_interval_seconds` NULL = the global
//!   interval.
//! - `feed_fetch_state`: the pull worker's runtime state, 1:1 with a feed and
//!   deleted with it (CASCADE); `next_check_at` is indexed for the scheduler's
//!   "earliest due" query. NULL `next_check_at` means due now.
//! - `items`: unique `(feed_id, guid)`; `user_id` is denormalised so a
//!   user's timeline (`pub_date desc, id desc`) and unread/starred views are
//!   single index scans. Integer ids, because SQLite's FTS5 external-content
//!   table needs a stable integer rowid. CASCADE from the feed is the
//!   safety net under the app's explicit delete.
//! - Full-text search: SQLite gets an FTS5 table over `items(title,
//!   content)` kept in sync by triggers; PostgreSQL a stored, generated
//!   `tsvector` (markup stripped, title weighted above content) with a GIN
//!   index. The `simple` configuration: feeds come in every language.
//! - `bookmarks`: content snapshots that must outlive their sources, so
//!   `item_id` and `feed_id` are SET NULL soft links; unique link per user.
//! - `feed_settings`: one row per user; every preference is nullable, NULL
//!   meaning "never chosen" (the app applies the default). Validation lives
//!   in the service, not in CHECKs, so a new value needs no migration.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(FeedGroups::Table)
                    .col(big_pk_auto(FeedGroups::Id))
                    .col(uuid(FeedGroups::UserId))
                    .col(string_len(FeedGroups::Name, 255))
                    .col(boolean(FeedGroups::IsDefault).default(false))
                    .col(timestamp_with_time_zone(FeedGroups::CreatedAt))
                    .col(timestamp_with_time_zone(FeedGroups::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (FeedGroups::Table, FeedGroups::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        unique_index(
            manager,
            "uq_feed_groups_user_name",
            FeedGroups::Table,
            &[FeedGroups::UserId, FeedGroups::Name],
        )
        .await?;
        let db = manager.get_connection();
        db.execute_unprepared(
            "CREATE UNIQUE INDEX uq_feed_groups_one_default ON feed_groups (user_id) WHERE is_default",
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(Feeds::Table)
                    .col(big_pk_auto(Feeds::Id))
                    .col(uuid(Feeds::UserId))
                    .col(big_integer(Feeds::GroupId))
                    .col(string_len(Feeds::Name, 255))
                    .col(text(Feeds::Link))
                    .col(text_null(Feeds::SiteUrl))
                    .col(boolean(Feeds::Suspended).default(false))
                    .col(integer_null(Feeds::RefreshIntervalSeconds))
                    .col(timestamp_with_time_zone(Feeds::CreatedAt))
                    .col(timestamp_with_time_zone(Feeds::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (Feeds::Table, Feeds::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut foreign_key(
                        (Feeds::Table, Feeds::GroupId),
                        (FeedGroups::Table, FeedGroups::Id),
                        ForeignKeyAction::NoAction,
                    ))
                    .to_owned(),
            )
            .await?;
        unique_index(
            manager,
            "uq_feeds_user_link",
            Feeds::Table,
            &[Feeds::UserId, Feeds::Link],
        )
        .await?;
        index(manager, "idx_feeds_group", Feeds::Table, &[Feeds::GroupId]).await?;

        manager
            .create_table(
                Table::create()
                    .table(FeedFetchState::Table)
                    .col(big_integer(FeedFetchState::FeedId).primary_key())
                    .col(text_null(FeedFetchState::Etag))
                    .col(text_null(FeedFetchState::LastModified))
                    .col(text_null(FeedFetchState::CacheControl))
                    .col(timestamp_with_time_zone_null(FeedFetchState::ExpiresAt))
                    .col(timestamp_with_time_zone_null(FeedFetchState::LastCheckedAt))
                    .col(timestamp_with_time_zone_null(FeedFetchState::NextCheckAt))
                    .col(integer_null(FeedFetchState::LastHttpStatus))
                    .col(timestamp_with_time_zone_null(
                        FeedFetchState::RetryAfterUntil,
                    ))
                    .col(timestamp_with_time_zone_null(FeedFetchState::LastSuccessAt))
                    .col(timestamp_with_time_zone_null(FeedFetchState::LastErrorAt))
                    .col(text_null(FeedFetchState::LastError))
                    .col(integer(FeedFetchState::ConsecutiveFailures).default(0))
                    .col(timestamp_with_time_zone(FeedFetchState::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (FeedFetchState::Table, FeedFetchState::FeedId),
                        (Feeds::Table, Feeds::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "idx_feed_fetch_state_next_check",
            FeedFetchState::Table,
            &[FeedFetchState::NextCheckAt],
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(Items::Table)
                    .col(big_pk_auto(Items::Id))
                    .col(uuid(Items::UserId))
                    .col(big_integer(Items::FeedId))
                    .col(text(Items::Guid))
                    .col(text_null(Items::Link))
                    .col(text(Items::Title))
                    .col(text(Items::Content))
                    .col(string_len(Items::ContentHash, 64))
                    .col(timestamp_with_time_zone(Items::PubDate))
                    .col(boolean(Items::Unread).default(true))
                    .col(boolean(Items::Starred).default(false))
                    .col(timestamp_with_time_zone(Items::CreatedAt))
                    .col(timestamp_with_time_zone(Items::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (Items::Table, Items::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut foreign_key(
                        (Items::Table, Items::FeedId),
                        (Feeds::Table, Feeds::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        unique_index(
            manager,
            "uq_items_feed_guid",
            Items::Table,
            &[Items::FeedId, Items::Guid],
        )
        .await?;
        index(
            manager,
            "idx_items_user_timeline",
            Items::Table,
            &[Items::UserId, Items::PubDate, Items::Id],
        )
        .await?;
        index(
            manager,
            "idx_items_feed_timeline",
            Items::Table,
            &[Items::FeedId, Items::PubDate, Items::Id],
        )
        .await?;
        index(
            manager,
            "idx_items_feed_unread",
            Items::Table,
            &[Items::FeedId, Items::Unread],
        )
        .await?;
        db.execute_unprepared(
            "CREATE INDEX idx_items_user_unread ON items (user_id, pub_date, id) WHERE unread",
        )
        .await?;
        db.execute_unprepared(
            "CREATE INDEX idx_items_user_starred ON items (user_id, pub_date, id) WHERE starred",
        )
        .await?;
        match manager.get_database_backend() {
            DatabaseBackend::Sqlite => {
                for statement in SQLITE_FTS {
                    db.execute_unprepared(statement).await?;
                }
            }
            _ => {
                for statement in POSTGRES_FTS {
                    db.execute_unprepared(statement).await?;
                }
            }
        }

        manager
            .create_table(
                Table::create()
                    .table(Bookmarks::Table)
                    .col(big_pk_auto(Bookmarks::Id))
                    .col(uuid(Bookmarks::UserId))
                    .col(big_integer_null(Bookmarks::ItemId))
                    .col(big_integer_null(Bookmarks::FeedId))
                    .col(text(Bookmarks::Link))
                    .col(text(Bookmarks::Title))
                    .col(text(Bookmarks::Content))
                    .col(timestamp_with_time_zone_null(Bookmarks::PubDate))
                    .col(text_null(Bookmarks::FeedName))
                    .col(timestamp_with_time_zone(Bookmarks::CreatedAt))
                    .col(timestamp_with_time_zone(Bookmarks::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (Bookmarks::Table, Bookmarks::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut foreign_key(
                        (Bookmarks::Table, Bookmarks::ItemId),
                        (Items::Table, Items::Id),
                        ForeignKeyAction::SetNull,
                    ))
                    .foreign_key(&mut foreign_key(
                        (Bookmarks::Table, Bookmarks::FeedId),
                        (Feeds::Table, Feeds::Id),
                        ForeignKeyAction::SetNull,
                    ))
                    .to_owned(),
            )
            .await?;
        unique_index(
            manager,
            "uq_bookmarks_user_link",
            Bookmarks::Table,
            &[Bookmarks::UserId, Bookmarks::Link],
        )
        .await?;
        index(
            manager,
            "idx_bookmarks_item",
            Bookmarks::Table,
            &[Bookmarks::ItemId],
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(FeedSettings::Table)
                    .col(uuid(FeedSettings::UserId).primary_key())
                    .col(integer_null(FeedSettings::RetentionDays))
                    .col(boolean_null(FeedSettings::UnreadOnly))
                    .col(boolean_null(FeedSettings::OldestFirst))
                    .col(boolean_null(FeedSettings::MarkReadOnScroll))
                    .col(timestamp_with_time_zone(FeedSettings::UpdatedAt))
                    .foreign_key(&mut foreign_key(
                        (FeedSettings::Table, FeedSettings::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Sqlite {
            manager
                .get_connection()
                .execute_unprepared("DROP TABLE IF EXISTS items_fts")
                .await?;
        }
        for table in [
            FeedSettings::Table.into_iden(),
            Bookmarks::Table.into_iden(),
            Items::Table.into_iden(),
            FeedFetchState::Table.into_iden(),
            Feeds::Table.into_iden(),
            FeedGroups::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

/// FTS5 over `items(title, content)` as an external-content table: the
/// text lives once, in `items`; the triggers keep the index in step with
/// every insert, update and delete.
const SQLITE_FTS: [&str; 4] = [
    "CREATE VIRTUAL TABLE items_fts USING fts5(title, content, content='items', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
        INSERT INTO items_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
     END",
    "CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, title, content) VALUES ('delete', old.id, old.title, old.content);
     END",
    "CREATE TRIGGER items_fts_update AFTER UPDATE OF title, content ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, title, content) VALUES ('delete', old.id, old.title, old.content);
        INSERT INTO items_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
     END",
];

/// A generated `tsvector` (markup stripped; title weighted A, content B;
/// only the first 200,000 characters of content, so no item can exceed
/// the 1 MB tsvector limit) and its GIN index.
const POSTGRES_FTS: [&str; 2] = [
    "ALTER TABLE items ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', regexp_replace(left(coalesce(content, ''), 200000), '<[^>]*>', ' ', 'g')), 'B')
     ) STORED",
    "CREATE INDEX idx_items_search ON items USING GIN (search)",
];

/// `from` references `to`, with `on_delete`.
fn foreign_key(
    from: (impl IntoIden, impl IntoIden),
    to: (impl IntoIden, impl IntoIden),
    on_delete: ForeignKeyAction,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(from.0, from.1)
        .to(to.0, to.1)
        .on_delete(on_delete)
        .to_owned()
}

async fn index<T: IntoIden + Copy + 'static, C: IntoIden + Copy + 'static>(
    manager: &SchemaManager<'_>,
    name: &str,
    table: T,
    columns: &[C],
) -> Result<(), DbErr> {
    manager
        .create_index(index_statement(name, table, columns))
        .await
}

async fn unique_index<T: IntoIden + Copy + 'static, C: IntoIden + Copy + 'static>(
    manager: &SchemaManager<'_>,
    name: &str,
    table: T,
    columns: &[C],
) -> Result<(), DbErr> {
    manager
        .create_index(index_statement(name, table, columns).unique().to_owned())
        .await
}

fn index_statement<T: IntoIden + Copy + 'static, C: IntoIden + Copy + 'static>(
    name: &str,
    table: T,
    columns: &[C],
) -> IndexCreateStatement {
    let mut statement = Index::create();
    statement.name(name).table(table);
    for column in columns {
        statement.col(*column);
    }
    statement
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden, Clone, Copy)]
enum FeedGroups {
    Table,
    Id,
    UserId,
    Name,
    IsDefault,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum Feeds {
    Table,
    Id,
    UserId,
    GroupId,
    Name,
    Link,
    SiteUrl,
    Suspended,
    RefreshIntervalSeconds,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum FeedFetchState {
    Table,
    FeedId,
    Etag,
    LastModified,
    CacheControl,
    ExpiresAt,
    LastCheckedAt,
    NextCheckAt,
    LastHttpStatus,
    RetryAfterUntil,
    LastSuccessAt,
    LastErrorAt,
    LastError,
    ConsecutiveFailures,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum Items {
    Table,
    Id,
    UserId,
    FeedId,
    Guid,
    Link,
    Title,
    Content,
    ContentHash,
    PubDate,
    Unread,
    Starred,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum Bookmarks {
    Table,
    Id,
    UserId,
    ItemId,
    FeedId,
    Link,
    Title,
    Content,
    PubDate,
    FeedName,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden, Clone, Copy)]
enum FeedSettings {
    Table,
    UserId,
    RetentionDays,
    UnreadOnly,
    OldestFirst,
    MarkReadOnScroll,
    UpdatedAt,
}
