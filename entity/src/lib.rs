//! SeaORM entities, one file per table. The migrations in `migration/` are
//! the source of truth for the schema; these mirror them for typed queries.

pub mod instance_secret;
pub mod refresh_token;
pub mod session;
pub mod user;
