//! Why: item HTML used to be sanitized on every read (every GraphQL
//! `content`, every Fever and Google Reader page), rebuilding the
//! sanitizer each time. Content is now sanitized once, when it is stored:
//! `items.content_html` and `bookmarks.content_html` hold the sanitized
//! HTML served to clients, beside the raw `content`. Rows stored before
//! this stay NULL and are sanitized when served, until their feed's next
//! pull fills them in.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [Items::Table.into_iden(), Bookmarks::Table.into_iden()] {
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .add_column(text_null(Items::ContentHtml))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [Items::Table.into_iden(), Bookmarks::Table.into_iden()] {
            manager
                .alter_table(
                    Table::alter()
                        .table(table)
                        .drop_column(Items::ContentHtml)
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
    ContentHtml,
}

#[derive(DeriveIden)]
enum Bookmarks {
    Table,
}
