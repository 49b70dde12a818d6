//! Path parameters whose rejection is one of our JSON errors: a path that
//! does not decode (`/tasks/%ff%fe` is not UTF-8) is a `400 BAD_USER_INPUT`
//! with a body like every other error, not axum's plain text.

use axum::{
    extract::{FromRequestParts, Path},
    http::request::Parts,
};
use serde::de::DeserializeOwned;

use crate::error::AppError;

pub struct PathParam<T>(pub T);

impl<T, S> FromRequestParts<S> for PathParam<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParam(value)),
            Err(rejection) => Err(AppError::bad_input("path", rejection.body_text())),
        }
    }
}
