use sea_orm::entity::prelude::*;

/// A user's personal action at a provider, pending until a read-back
/// confirms it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_events")]
pub struct Model {
    /// The event's stable external id (UUIDv7, never reused).
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub user_id: Uuid,
    /// `kavita`, `anilist`.
    pub provider: String,
    /// `PROGRESS`, `RATING`, `WANT_TO_READ`, `REMOVAL`.
    pub action: String,
    /// The provider's title id (Kavita series, AniList media).
    pub title_id: String,
    /// The action's value as JSON text (`{"progress":12}`, `{"rating":4.5}`, `{}`).
    pub value: String,
    pub occurred_at: DateTimeUtc,
    /// SHA-256 of provider, account, title, action, value and `occurred_at`.
    pub fingerprint: String,
    /// `PENDING`, `WAITING`, `REVIEW`, `CONFIRMED`.
    pub status: String,
    /// Why it waits, in words; null once confirmed.
    pub reason: Option<String>,
    /// Delivery attempts that reached the provider or failed on the way.
    pub attempts: i32,
    /// The delivery task driving it, if any.
    pub task_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub confirmed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
