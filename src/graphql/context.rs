//! What a resolver can ask of its context. Every resolver starts with one of
//! [`ContextExt::viewer`] or [`ContextExt::admin`] unless it is public on
//! purpose (`login`, `refreshToken`, `me`), so authorization is visible at
//! the top of each resolver.

use std::sync::Arc;

use async_graphql::Context;

use super::loaders::Loaders;
use crate::{
    app::Services,
    auth::Viewer,
    error::{AppError, AppResult},
    http::client::RequestMeta,
};

pub trait ContextExt {
    fn services(&self) -> AppResult<&Services>;
    /// The caller, or `UNAUTHENTICATED`.
    fn viewer(&self) -> AppResult<&Viewer>;
    /// The caller if an admin; `FORBIDDEN` for members, `UNAUTHENTICATED` for anonymous.
    fn admin(&self) -> AppResult<&Viewer>;
    /// The caller, if any.
    fn viewer_opt(&self) -> Option<&Viewer>;
    fn request_meta(&self) -> AppResult<&RequestMeta>;
    /// The request's DataLoaders.
    fn loaders(&self) -> AppResult<&Arc<Loaders>>;
}

impl ContextExt for Context<'_> {
    fn services(&self) -> AppResult<&Services> {
        self.data_opt::<Services>()
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("services missing from schema data")))
    }

    fn viewer(&self) -> AppResult<&Viewer> {
        self.viewer_opt()
            .ok_or(AppError::Unauthenticated("sign in to use this field"))
    }

    fn admin(&self) -> AppResult<&Viewer> {
        self.viewer()?.require_admin()
    }

    fn viewer_opt(&self) -> Option<&Viewer> {
        self.data_opt::<Viewer>()
    }

    fn request_meta(&self) -> AppResult<&RequestMeta> {
        self.data_opt::<RequestMeta>()
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("request metadata missing")))
    }

    fn loaders(&self) -> AppResult<&Arc<Loaders>> {
        self.data_opt::<Arc<Loaders>>()
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("loaders missing from request data")))
    }
}
