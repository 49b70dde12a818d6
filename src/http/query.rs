//! A route's query string, checked like every input, and what an OAuth or
//! OIDC callback (`…/callback?code&state`, or `?error&state` when the
//! provider declined) carries in it.

use axum::http::Uri;

use crate::{
    error::{AppError, AppResult},
    input,
};

/// The pairs of a query string, checked like every input.
pub struct Query {
    pairs: Vec<(String, String)>,
}

/// Why a callback carries no code.
pub enum Declined {
    /// The provider's `error` (for instance `access_denied`), reduced to
    /// `A-Z a-z 0-9 _`, at most 64 characters: safe to repeat.
    Denied(String),
    /// Neither a code nor an error.
    NoCode,
}

impl Declined {
    /// The `BAD_USER_INPUT` a callback answers; `denied` words a refusal.
    pub fn error(self, denied: impl FnOnce(&str) -> String) -> AppError {
        match self {
            Declined::Denied(why) => AppError::bad_input("code", denied(&why)),
            Declined::NoCode => AppError::bad_input("code", "the callback has no code"),
        }
    }
}

impl Query {
    /// `BAD_USER_INPUT` when a pair is not acceptable input.
    pub fn parse(uri: &Uri) -> AppResult<Self> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        input::check_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(
            |(name, problem)| AppError::bad_input("query", format!("`{name}` {problem}")),
        )?;
        Ok(Query { pairs })
    }

    /// The first non-empty value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    /// A callback's `state`.
    pub fn state(&self) -> AppResult<&str> {
        self.get("state")
            .ok_or(AppError::bad_input("state", "the callback has no state"))
    }

    /// A callback's `code`, or why there is none.
    pub fn code(&self) -> Result<&str, Declined> {
        if let Some(denied) = self.get("error") {
            return Err(Declined::Denied(
                denied
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(64)
                    .collect(),
            ));
        }
        self.get("code").ok_or(Declined::NoCode)
    }
}
