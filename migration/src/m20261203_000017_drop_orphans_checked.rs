//! Why: `resources.orphans_checked` (migration 000013) was to let Topology
//! Sync take only resources whose orphans had been checked since their
//! last change. But the Topology stage deletes orphans itself, in its own
//! transaction, right before it syncs the same marked resources, so every
//! resource it takes was always just checked: the flag decided nothing.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Resources::Table)
                    .drop_column(Resources::OrphansChecked)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Resources::Table)
                    .add_column(boolean(Resources::OrphansChecked).default(false))
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Resources {
    Table,
    OrphansChecked,
}
