use sea_orm::entity::prelude::*;

/// A fingerprint reserved before an external write (the seed's
/// `receipt_slots`). With `sent_at` and no receipt, the write's outcome is
/// unknown until a read-back says.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_receipt_slots")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub fingerprint: String,
    pub event_id: Uuid,
    pub user_id: Uuid,
    pub provider: String,
    pub title_id: String,
    pub reserved_at: DateTimeUtc,
    /// When the write was (about to be) sent; null: nothing went out yet.
    pub sent_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
