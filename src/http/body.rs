//! The JSON body of a plain-HTTP route, checked against the input rules
//! (`crate::input`: no NUL, no overlong string, bounded nesting) before it
//! is decoded into the route's type — the same rules GraphQL applies to
//! its arguments, so both ways in refuse the same values.

use axum::{
    Json,
    extract::{FromRequest, Request},
};
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// A JSON body of type `T` that passed the input rules. Rejections are
/// `BAD_USER_INPUT` (400) with field `body`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, AppError> {
        let Json(value) = Json::<serde_json::Value>::from_request(request, state)
            .await
            .map_err(|rejection| AppError::bad_input("body", rejection.body_text()))?;
        crate::input::check_value(&value)
            .map_err(|error| AppError::bad_input("body", error.describe("the body", "body")))?;
        serde_json::from_value(value)
            .map(JsonBody)
            .map_err(|error| AppError::bad_input("body", format!("invalid body: {error}")))
    }
}
