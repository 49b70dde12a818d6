//! Why: the reader apps' time bounds — Fever's `before`, Google Reader's
//! `ts` and `ot`/`nt`, GraphQL's `markAllRead(before:)` — ask "what had the
//! app (or the user) already received by then?". That is the time an item
//! reached Trellis, not the time its publisher claims: an item published
//! twenty minutes before an app's last sync but pulled after it must stay
//! unread (the Fever spec: `before` exists "to prevent marking new,
//! unreceived items as read"). `items.arrived_at` records it, set once when
//! the item is first stored and never rewritten by a later pull.
//!
//! Existing rows are backfilled from `created_at`, which until now was set
//! at the same moment and never changed: the best record of arrival there
//! is. The constant default only lets SQLite add a NOT NULL column; every
//! insert sets the column. Indexed per user and per feed, the way the
//! bounds are asked (`mark all read in a feed up to T`, `ot` per user).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Items::Table)
                    .add_column(
                        timestamp_with_time_zone(Items::ArrivedAt).default("1970-01-01T00:00:00Z"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::update()
                    .table(Items::Table)
                    .value(Items::ArrivedAt, Expr::col(Items::CreatedAt))
                    .to_owned(),
            )
            .await?;
        for (name, columns) in [
            ("idx_items_user_arrival", [Items::UserId, Items::ArrivedAt]),
            ("idx_items_feed_arrival", [Items::FeedId, Items::ArrivedAt]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Items::Table);
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in ["idx_items_user_arrival", "idx_items_feed_arrival"] {
            manager
                .drop_index(Index::drop().name(name).table(Items::Table).to_owned())
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(Items::Table)
                    .drop_column(Items::ArrivedAt)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Items {
    Table,
    UserId,
    FeedId,
    CreatedAt,
    ArrivedAt,
}
