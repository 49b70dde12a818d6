use sea_orm::entity::prelude::*;

/// A confirmed completion: the write was answered with success and a
/// read-back showed its value.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_receipts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub fingerprint: String,
    pub event_id: Uuid,
    pub user_id: Uuid,
    pub provider: String,
    pub action: String,
    pub title_id: String,
    /// The confirming read-back, as JSON text.
    pub response: String,
    /// `PROTECTED` (kept until an operator removes it) or `RECONCILED`
    /// (expires; evicted first under pressure).
    pub retention: String,
    pub created_at: DateTimeUtc,
    pub expires_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
