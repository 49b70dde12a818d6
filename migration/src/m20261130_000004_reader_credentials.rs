//! Why: mobile reader apps (Reeder, NetNewsWire, Read You…) speak the Fever
//! and Google Reader APIs (SPEC §4), which authenticate with a password of
//! their own — never the account password, because Fever sends
//! `md5(username:password)` on every request.
//!
//! - `reader_credentials`: one row per user who enabled the reader APIs.
//!   `fever_key_hash` is the SHA-256 of the Fever API key (itself
//!   `md5(username:password)`), so a key is looked up without being stored;
//!   `password_hash` is the argon2id hash of the same password, for the
//!   Google Reader API's login. Deleted with the user.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ReaderCredentials::Table)
                    .col(uuid(ReaderCredentials::UserId).primary_key())
                    .col(string_len_uniq(ReaderCredentials::FeverKeyHash, 64))
                    .col(string(ReaderCredentials::PasswordHash))
                    .col(timestamp_with_time_zone(ReaderCredentials::CreatedAt))
                    .col(timestamp_with_time_zone(ReaderCredentials::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ReaderCredentials::Table, ReaderCredentials::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ReaderCredentials::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum ReaderCredentials {
    Table,
    UserId,
    FeverKeyHash,
    PasswordHash,
    CreatedAt,
    UpdatedAt,
}
