//! Why: personal actions at a provider (issue 21, seed 003) are events
//! that stay pending until a read-back confirms them, and a confirmed
//! write must never be repeated — across retries, timeouts and restarts.
//!
//! - `gateway_events`: one personal action (progress, rating, want-to-read,
//!   removal) of one user for one title at one provider. `fingerprint` is
//!   the SHA-256 of provider, account, title, action, value and the time
//!   the action happened: the same action submitted twice is one event.
//!   `status` is `PENDING` (a delivery task drives it), `WAITING` (for the
//!   user: the account is not linked or must be linked again), `REVIEW`
//!   (for an operator: a removal precondition failed, the receipt budget
//!   is full) or `CONFIRMED`. Never a permanent error. The id is the
//!   event's stable external id and is never reused (UUIDv7).
//! - `gateway_receipt_slots`: the seed's `receipt_slots`, reserved for an
//!   event's fingerprint before its external write. `sent_at` is set,
//!   durably, just before the write goes out: a slot with `sent_at` and no
//!   receipt is an ambiguous outcome, kept across restarts and verified by
//!   read-back before anything is sent again. Never expires by itself.
//! - `gateway_receipts`: a confirmed completion (the read-back that showed
//!   it). `retention` is `PROTECTED` (never expires by itself) or
//!   `RECONCILED` (a state the provider can be asked about again: expires
//!   after seven days, and only the newest 1,024 survive pressure).
//! - `gateway_title_links`: which AniList media a user's Kavita series is,
//!   for scrobbling. `state` is `CONFIRMED` (from the series' own web
//!   links, or set or confirmed by the user) or `PROPOSED` (from an AniList
//!   title search, waiting for the user).
//! - `gateway_scrobble_marks`: the last value the scrobbler admitted per
//!   user, media and action, so one change in Kavita is one event.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(GatewayEvents::Table)
                    .col(uuid(GatewayEvents::Id).primary_key())
                    .col(uuid(GatewayEvents::UserId))
                    .col(string_len(GatewayEvents::Provider, 16))
                    .col(string_len(GatewayEvents::Action, 16))
                    .col(string_len(GatewayEvents::TitleId, 64))
                    .col(text(GatewayEvents::Value))
                    .col(timestamp_with_time_zone(GatewayEvents::OccurredAt))
                    .col(string_len(GatewayEvents::Fingerprint, 64))
                    .col(string_len(GatewayEvents::Status, 16))
                    .col(text_null(GatewayEvents::Reason))
                    .col(integer(GatewayEvents::Attempts).default(0))
                    .col(uuid_null(GatewayEvents::TaskId))
                    .col(timestamp_with_time_zone(GatewayEvents::CreatedAt))
                    .col(timestamp_with_time_zone(GatewayEvents::UpdatedAt))
                    .col(timestamp_with_time_zone_null(GatewayEvents::ConfirmedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayEvents::Table, GatewayEvents::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_gateway_events_fingerprint")
                    .table(GatewayEvents::Table)
                    .col(GatewayEvents::Fingerprint)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // Listing a user's events, and finding the head of one title's line.
        manager
            .create_index(
                Index::create()
                    .name("idx_gateway_events_user_title")
                    .table(GatewayEvents::Table)
                    .col(GatewayEvents::UserId)
                    .col(GatewayEvents::Provider)
                    .col(GatewayEvents::TitleId)
                    .col(GatewayEvents::Status)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GatewayReceiptSlots::Table)
                    .col(string_len(GatewayReceiptSlots::Fingerprint, 64).primary_key())
                    .col(uuid(GatewayReceiptSlots::EventId))
                    .col(uuid(GatewayReceiptSlots::UserId))
                    .col(string_len(GatewayReceiptSlots::Provider, 16))
                    .col(string_len(GatewayReceiptSlots::TitleId, 64))
                    .col(timestamp_with_time_zone(GatewayReceiptSlots::ReservedAt))
                    .col(timestamp_with_time_zone_null(GatewayReceiptSlots::SentAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayReceiptSlots::Table, GatewayReceiptSlots::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GatewayReceipts::Table)
                    .col(string_len(GatewayReceipts::Fingerprint, 64).primary_key())
                    .col(uuid(GatewayReceipts::EventId))
                    .col(uuid(GatewayReceipts::UserId))
                    .col(string_len(GatewayReceipts::Provider, 16))
                    .col(string_len(GatewayReceipts::Action, 16))
                    .col(string_len(GatewayReceipts::TitleId, 64))
                    .col(text(GatewayReceipts::Response))
                    .col(string_len(GatewayReceipts::Retention, 16))
                    .col(timestamp_with_time_zone(GatewayReceipts::CreatedAt))
                    .col(timestamp_with_time_zone_null(GatewayReceipts::ExpiresAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayReceipts::Table, GatewayReceipts::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_gateway_receipts_user")
                    .table(GatewayReceipts::Table)
                    .col(GatewayReceipts::UserId)
                    .col(GatewayReceipts::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_gateway_receipts_retention")
                    .table(GatewayReceipts::Table)
                    .col(GatewayReceipts::Retention)
                    .col(GatewayReceipts::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GatewayTitleLinks::Table)
                    .col(uuid(GatewayTitleLinks::UserId))
                    .col(string_len(GatewayTitleLinks::SeriesId, 64))
                    .col(text(GatewayTitleLinks::SeriesName))
                    .col(string_len_null(GatewayTitleLinks::MediaId, 64))
                    .col(text_null(GatewayTitleLinks::MediaTitle))
                    .col(string_len(GatewayTitleLinks::State, 16))
                    .col(string_len(GatewayTitleLinks::Source, 16))
                    .col(timestamp_with_time_zone(GatewayTitleLinks::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(GatewayTitleLinks::UserId)
                            .col(GatewayTitleLinks::SeriesId),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayTitleLinks::Table, GatewayTitleLinks::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GatewayScrobbleMarks::Table)
                    .col(uuid(GatewayScrobbleMarks::UserId))
                    .col(string_len(GatewayScrobbleMarks::MediaId, 64))
                    .col(string_len(GatewayScrobbleMarks::Action, 16))
                    .col(text(GatewayScrobbleMarks::Value))
                    .col(timestamp_with_time_zone(GatewayScrobbleMarks::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(GatewayScrobbleMarks::UserId)
                            .col(GatewayScrobbleMarks::MediaId)
                            .col(GatewayScrobbleMarks::Action),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayScrobbleMarks::Table, GatewayScrobbleMarks::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            GatewayScrobbleMarks::Table.into_iden(),
            GatewayTitleLinks::Table.into_iden(),
            GatewayReceipts::Table.into_iden(),
            GatewayReceiptSlots::Table.into_iden(),
            GatewayEvents::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum GatewayEvents {
    Table,
    Id,
    UserId,
    Provider,
    Action,
    TitleId,
    Value,
    OccurredAt,
    Fingerprint,
    Status,
    Reason,
    Attempts,
    TaskId,
    CreatedAt,
    UpdatedAt,
    ConfirmedAt,
}

#[derive(DeriveIden)]
enum GatewayReceiptSlots {
    Table,
    Fingerprint,
    EventId,
    UserId,
    Provider,
    TitleId,
    ReservedAt,
    SentAt,
}

#[derive(DeriveIden)]
enum GatewayReceipts {
    Table,
    Fingerprint,
    EventId,
    UserId,
    Provider,
    Action,
    TitleId,
    Response,
    Retention,
    CreatedAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum GatewayTitleLinks {
    Table,
    UserId,
    SeriesId,
    SeriesName,
    MediaId,
    MediaTitle,
    State,
    Source,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum GatewayScrobbleMarks {
    Table,
    UserId,
    MediaId,
    Action,
    Value,
    UpdatedAt,
}
