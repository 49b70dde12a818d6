//! Why: OIDC login (issue 22, SPEC §2) signs people in through their
//! identity provider.
//!
//! - `oidc_identities`: which account an identity (`issuer` + `subject`,
//!   the id_token's `iss` and `sub`) signs in as. One identity per
//!   account and issuer; deleted with the account. Accounts are never
//!   matched by username or email, only through this table.
//! - `oidc_login_states`: an authorization the browser was sent to the
//!   provider with. Keyed by the SHA-256 of the `state` (the state itself
//!   is only in the browser), single use (the callback deletes the row),
//!   ten minutes from `created_at`. The PKCE verifier is sealed with the
//!   server key; `user_id` is set for a link, deleted with the account.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(OidcIdentities::Table)
                    .col(string_len(OidcIdentities::Issuer, 512))
                    .col(string_len(OidcIdentities::Subject, 255))
                    .col(uuid(OidcIdentities::UserId))
                    .col(timestamp_with_time_zone(OidcIdentities::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(OidcIdentities::Issuer)
                            .col(OidcIdentities::Subject),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(OidcIdentities::Table, OidcIdentities::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_oidc_identities_user_issuer")
                    .table(OidcIdentities::Table)
                    .col(OidcIdentities::UserId)
                    .col(OidcIdentities::Issuer)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(OidcLoginStates::Table)
                    .col(string_len(OidcLoginStates::StateHash, 64).primary_key())
                    .col(text(OidcLoginStates::Nonce))
                    .col(text(OidcLoginStates::PkceVerifier))
                    .col(string_len(OidcLoginStates::Purpose, 8))
                    .col(uuid_null(OidcLoginStates::UserId))
                    .col(text_null(OidcLoginStates::ReturnTo))
                    .col(timestamp_with_time_zone(OidcLoginStates::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(OidcLoginStates::Table, OidcLoginStates::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_oidc_login_states_created_at")
                    .table(OidcLoginStates::Table)
                    .col(OidcLoginStates::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            OidcLoginStates::Table.into_iden(),
            OidcIdentities::Table.into_iden(),
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
enum OidcIdentities {
    Table,
    Issuer,
    Subject,
    UserId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum OidcLoginStates {
    Table,
    StateHash,
    Nonce,
    PkceVerifier,
    Purpose,
    UserId,
    ReturnTo,
    CreatedAt,
}
