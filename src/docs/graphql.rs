//! The docs mirror's GraphQL: thin resolvers over [`DocsService`].

use async_graphql::{Context, Object};

use super::service::{DocsService, DocsSettings};
use crate::graphql::context::ContextExt;

#[derive(Default)]
pub struct DocsQuery;

#[Object]
impl DocsQuery {
    /// The docs mirror's configuration (admins only).
    async fn docs_settings(&self, ctx: &Context<'_>) -> async_graphql::Result<DocsSettings> {
        ctx.admin()?;
        Ok(ctx.service::<DocsService>()?.settings_view())
    }
}
