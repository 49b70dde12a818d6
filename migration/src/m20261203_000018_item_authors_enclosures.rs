//! Why: items kept neither who wrote them nor what was attached to them, so
//! a podcast feed gave the reader apps nothing to download (newsboat's
//! podboat, any app's player) and every app showed items without an
//! author. `items.authors` holds the entry's author names and
//! `items.enclosures` its attached media (`url`, `type`, `length`), each a
//! small JSON array: they are always read with their item and never
//! searched by, so a child table would only add a join to every item page.
//! Both are bounded when mapped (`feeds::mapping`). Rows stored before this
//! read `[]` until their feed rewrites them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Items::Authors, Items::Enclosures] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Items::Table)
                        .add_column(json(column).default("[]"))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Items::Authors, Items::Enclosures] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Items::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Items {
    Table,
    Authors,
    Enclosures,
}
