//! Why: an entry whose date is missing or cannot be read takes the time it
//! arrived as its `pub_date`. Nothing said so: such an item looked as new
//! as one published that minute, in lists ordered by date, in retention's
//! horizon and to the reader apps. `items.undated` marks it, so clients can
//! show "date unknown" and the server can tell an arrival time from a
//! publisher's date. Existing rows are left `false` (their origin is not
//! known).

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
                    .add_column(boolean(Items::Undated).default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Items::Table)
                    .drop_column(Items::Undated)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Items {
    Table,
    Undated,
}
