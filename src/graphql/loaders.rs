//! DataLoaders: batch the per-row lookups a field would otherwise make
//! (no N+1). One set is created per request, so caches never outlive the
//! request or cross users.
//!
//! Pattern for a domain: write a `Loader<K>` that loads many keys with one
//! `WHERE id IN (…)` query, add it to [`Loaders`], and in the field resolver
//! call `ctx.data::<Arc<Loaders>>()?.<loader>.load_one(key)`.

use std::{collections::HashMap, sync::Arc};

use async_graphql::dataloader::{DataLoader, Loader};
use entity::user;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

/// The loaders of one request.
pub struct Loaders {
    pub users: DataLoader<UserLoader>,
}

impl Loaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(Loaders {
            users: DataLoader::new(UserLoader(db.clone()), tokio::spawn),
        })
    }
}

/// Users by id.
pub struct UserLoader(DatabaseConnection);

impl Loader<Uuid> for UserLoader {
    type Value = user::Model;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, Self::Value>, Self::Error> {
        Ok(user::Entity::find()
            .filter(user::Column::Id.is_in(keys.iter().copied()))
            .all(&self.0)
            .await?
            .into_iter()
            .map(|user| (user.id, user))
            .collect())
    }
}
