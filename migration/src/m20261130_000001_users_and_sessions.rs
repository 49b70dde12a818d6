//! Why: every domain in Trellis is per-user or role-gated, so accounts and
//! the sessions that authenticate them come first.
//!
//! - `users`: argon2id password hashes only; `username` is stored normalised
//!   (lower case) so `Alice` and `alice` cannot both exist.
//! - `sessions`: one row per login. The browser's HttpOnly cookie carries an
//!   opaque secret whose SHA-256 is `secret_hash`; revoking the row (logout,
//!   refresh-token reuse) ends the cookie, every refresh token of the family
//!   and every access token minted for it, because access tokens name their
//!   session and the server checks it on each request.
//! - `refresh_tokens`: the rotating tokens of a session (its "family"). A
//!   token is single use: `used_at` is set when it is rotated, and presenting
//!   a used token again revokes the whole session (reuse detection).
//! - `instance_secrets`: server-generated secrets shared by every process
//!   that uses this database (the JWT signing key unless
//!   `TRELLIS_JWT_SECRET` is set), so scaled-out API processes agree.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Users::Table)
                    .col(pk_uuid(Users::Id))
                    .col(string_len_uniq(Users::Username, 64))
                    .col(string(Users::PasswordHash))
                    .col(string_len(Users::Role, 16))
                    .col(timestamp_with_time_zone(Users::CreatedAt))
                    .col(timestamp_with_time_zone(Users::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Sessions::Table)
                    .col(pk_uuid(Sessions::Id))
                    .col(uuid(Sessions::UserId))
                    .col(string_len_uniq(Sessions::SecretHash, 64))
                    .col(timestamp_with_time_zone(Sessions::CreatedAt))
                    .col(timestamp_with_time_zone(Sessions::LastUsedAt))
                    .col(timestamp_with_time_zone(Sessions::ExpiresAt))
                    .col(timestamp_with_time_zone_null(Sessions::RevokedAt))
                    .col(string_len_null(Sessions::RevokedReason, 32))
                    .col(string_len_null(Sessions::UserAgent, 256))
                    .col(string_len_null(Sessions::ClientIp, 64))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Sessions::Table, Sessions::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_sessions_user_id")
                    .table(Sessions::Table)
                    .col(Sessions::UserId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(RefreshTokens::Table)
                    .col(pk_uuid(RefreshTokens::Id))
                    .col(uuid(RefreshTokens::SessionId))
                    .col(string_len_uniq(RefreshTokens::TokenHash, 64))
                    .col(timestamp_with_time_zone(RefreshTokens::CreatedAt))
                    .col(timestamp_with_time_zone(RefreshTokens::ExpiresAt))
                    .col(timestamp_with_time_zone_null(RefreshTokens::UsedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(RefreshTokens::Table, RefreshTokens::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_refresh_tokens_session_id")
                    .table(RefreshTokens::Table)
                    .col(RefreshTokens::SessionId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(InstanceSecrets::Table)
                    .col(string_len(InstanceSecrets::Name, 64).primary_key())
                    .col(string(InstanceSecrets::Value))
                    .col(timestamp_with_time_zone(InstanceSecrets::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            InstanceSecrets::Table.into_iden(),
            RefreshTokens::Table.into_iden(),
            Sessions::Table.into_iden(),
            Users::Table.into_iden(),
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
    Username,
    PasswordHash,
    Role,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
    UserId,
    SecretHash,
    CreatedAt,
    LastUsedAt,
    ExpiresAt,
    RevokedAt,
    RevokedReason,
    UserAgent,
    ClientIp,
}

#[derive(DeriveIden)]
enum RefreshTokens {
    Table,
    Id,
    SessionId,
    TokenHash,
    CreatedAt,
    ExpiresAt,
    UsedAt,
}

#[derive(DeriveIden)]
enum InstanceSecrets {
    Table,
    Name,
    Value,
    CreatedAt,
}
