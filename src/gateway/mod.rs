//! The provider gateway (SPEC §7, seed 003, issue 21): a user's reading on
//! the instance's Kavita reaches AniList without Kavita's paid relay, and
//! public metadata is read without leaking anyone's account.
//!
//! Built so far, each part with its tests:
//!
//! - [`provider`]: the contract every provider implements (a third one is
//!   a module plus one line in [`service::Providers::new`]); [`kavita`]
//!   and [`anilist`] implement it.
//! - [`upstream`]: one provider endpoint through the one outbound client
//!   (`httpc`: exactly the configured origin, redirects off it refused),
//!   with the host's [`cooldown`] enforced and recorded.
//! - [`cache`]: the public metadata cache (normalized fingerprints; 1024
//!   entries and 32 MiB, least recently used out).
//! - [`links`]: linked accounts (credentials sealed with the server key)
//!   and OAuth transactions (single use, bound to the user, ten minutes).
//! - [`action`]: personal actions and the pure decisions about them
//!   (fingerprints, what a read-back must show, the removal precondition's
//!   inputs, backoff, receipt retention); [`events`] stores events, receipt
//!   slots and receipts; [`delivery`] is the runner task that delivers one
//!   event, confirmed only by a read-back.
//! - [`scrobble`] (pure: chapters read, AniList ids in web links, which
//!   events a change makes) and [`scrobbler`] (the periodic job and title
//!   links): Kavita reading → AniList events.
//! - [`saved`]: `independent-actions.json`, the HMAC-authenticated last
//!   valid manifest that admission reads.
//! - [`service`]: the per-user operations, the capability manifest;
//!   [`graphql`] and [`http`] (the OAuth callback) are thin layers over it.
//!
//! `docs/gateway.md` describes what is built and what is not yet.

pub mod action;
pub mod anilist;
pub mod cache;
pub mod cooldown;
pub mod delivery;
mod domain;
pub mod events;
pub mod graphql;
pub mod http;
pub mod kavita;
pub mod links;
pub mod provider;
pub mod saved;
pub mod scrobble;
pub mod scrobbler;
pub mod service;
pub mod settings;
pub mod sweep;
pub mod upstream;

pub use domain::setup;
pub use settings::Settings;
