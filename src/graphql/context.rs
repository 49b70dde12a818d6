//! What a resolver can ask of its context. Every resolver starts with one of
//! [`ContextExt::viewer`] or [`ContextExt::admin`] unless it is public on
//! purpose (`login`, `refreshToken`, `me`), so authorization is visible at
//! the top of each resolver. Then it reads the typed service it calls
//! ([`ContextExt::service`]), which its domain put in the request's data.

use std::any::{Any, type_name};

use async_graphql::Context;

use crate::{
    auth::Viewer,
    error::{AppError, AppResult},
    http::client::RequestMeta,
};

pub trait ContextExt {
    /// A service (or a domain's DataLoaders) from the request's data, e.g.
    /// `ctx.service::<FeedsService>()`.
    fn service<T: Any + Send + Sync>(&self) -> AppResult<&T>;
    /// The caller, or `UNAUTHENTICATED`.
    fn viewer(&self) -> AppResult<&Viewer>;
    /// The caller if an admin; `FORBIDDEN` for members, `UNAUTHENTICATED` for anonymous.
    fn admin(&self) -> AppResult<&Viewer>;
    /// The caller, if any.
    fn viewer_opt(&self) -> Option<&Viewer>;
    fn request_meta(&self) -> AppResult<&RequestMeta>;
}

impl ContextExt for Context<'_> {
    fn service<T: Any + Send + Sync>(&self) -> AppResult<&T> {
        self.data_opt::<T>().ok_or_else(|| {
            AppError::internal(anyhow::anyhow!(
                "{} missing from the request's data",
                type_name::<T>()
            ))
        })
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
        self.service::<RequestMeta>()
    }
}
