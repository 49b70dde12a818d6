//! Why: a bookmark is a snapshot that outlives its item and feed, but it
//! kept only the title, link and content: a bookmarked podcast episode lost
//! the one thing worth keeping, its audio file, once the feed dropped the
//! item, and every bookmark lost its authors. `bookmarks.authors` and
//! `bookmarks.enclosures` hold what the item had when it was bookmarked,
//! in the items' shape (migration 000018): small JSON arrays, bounded when
//! the item was mapped. Bookmarks made before this read `[]`.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Bookmarks::Authors, Bookmarks::Enclosures] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Bookmarks::Table)
                        .add_column(json(column).default("[]"))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Bookmarks::Authors, Bookmarks::Enclosures] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Bookmarks::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Bookmarks {
    Table,
    Authors,
    Enclosures,
}
