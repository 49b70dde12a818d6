//! Why: the provider gateway (issue 21, seed 003) links each user's
//! Kavita and AniList accounts, runs OAuth transactions, and keeps provider
//! cooldowns across restarts.
//!
//! - `gateway_links`: one row per user and provider. `credential` is the
//!   user's API key or OAuth token, sealed with the server key (never
//!   stored or returned in the clear). `status` is `LINKED` or
//!   `NEEDS_RELINK` (the provider refused the credential). Deleted with the
//!   user.
//! - `gateway_oauth_states`: a started OAuth link. Keyed by the SHA-256 of
//!   the `state` (the state itself is only in the user's browser), bound
//!   to the user who started it, single use (the row is deleted by the
//!   callback that consumes it), with an expiry. `pkce_verifier` is sealed;
//!   null where the provider has no PKCE.
//! - `cooldowns`: one deadline per upstream host (seed: "fixed upstream
//!   host and wall-clock deadline … no token or account payload").

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(GatewayLinks::Table)
                    .col(uuid(GatewayLinks::UserId))
                    .col(string_len(GatewayLinks::Provider, 16))
                    .col(string_len(GatewayLinks::Status, 16))
                    .col(text(GatewayLinks::Credential))
                    .col(text_null(GatewayLinks::RemoteUserId))
                    .col(text_null(GatewayLinks::RemoteName))
                    .col(timestamp_with_time_zone_null(GatewayLinks::ExpiresAt))
                    .col(timestamp_with_time_zone(GatewayLinks::LinkedAt))
                    .col(timestamp_with_time_zone(GatewayLinks::CheckedAt))
                    .primary_key(
                        Index::create()
                            .col(GatewayLinks::UserId)
                            .col(GatewayLinks::Provider),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayLinks::Table, GatewayLinks::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GatewayOauthStates::Table)
                    .col(string_len(GatewayOauthStates::StateHash, 64).primary_key())
                    .col(uuid(GatewayOauthStates::UserId))
                    .col(string_len(GatewayOauthStates::Provider, 16))
                    .col(text_null(GatewayOauthStates::PkceVerifier))
                    .col(timestamp_with_time_zone(GatewayOauthStates::CreatedAt))
                    .col(timestamp_with_time_zone(GatewayOauthStates::ExpiresAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(GatewayOauthStates::Table, GatewayOauthStates::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_gateway_oauth_states_expires_at")
                    .table(GatewayOauthStates::Table)
                    .col(GatewayOauthStates::ExpiresAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Cooldowns::Table)
                    .col(string_len(Cooldowns::Host, 255).primary_key())
                    .col(timestamp_with_time_zone(Cooldowns::Until))
                    .col(timestamp_with_time_zone(Cooldowns::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            Cooldowns::Table.into_iden(),
            GatewayOauthStates::Table.into_iden(),
            GatewayLinks::Table.into_iden(),
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
enum GatewayLinks {
    Table,
    UserId,
    Provider,
    Status,
    Credential,
    RemoteUserId,
    RemoteName,
    ExpiresAt,
    LinkedAt,
    CheckedAt,
}

#[derive(DeriveIden)]
enum GatewayOauthStates {
    Table,
    StateHash,
    UserId,
    Provider,
    PkceVerifier,
    CreatedAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum Cooldowns {
    Table,
    Host,
    Until,
    UpdatedAt,
}
