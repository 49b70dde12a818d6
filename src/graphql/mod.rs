//! The shared pieces of the GraphQL API every domain uses: context,
//! pagination, loaders, subscriptions, the request guard, the endpoints.
//! The roots are stitched from the domains in `crate::schema`; domain
//! objects live in their domain's folder.

pub mod context;
pub mod guard;
pub mod http;
pub mod json;
pub mod loaders;
pub mod pagination;
pub mod subscription;
pub mod ws;

use async_graphql::SchemaBuilder;

use crate::config::Introspection;

/// Static limits applied to every operation (`docs/architecture.md`,
/// "Request limits").
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest selection; introspection is bounded apart (`guard`).
    pub max_depth: usize,
    pub max_complexity: usize,
    /// Aliases per document, a fragment's counted once per spread.
    pub max_aliases: usize,
    /// Fragment spreads per document after expansion.
    pub max_fragment_spreads: usize,
    /// Who may query `__schema` and `__type`.
    pub introspection: Introspection,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 12,
            max_complexity: 100_000,
            max_aliases: 30,
            max_fragment_spreads: 100,
            introspection: Introspection::Public,
        }
    }
}

/// A schema with our limits and request guard.
pub fn with_limits<Q, M, S>(
    builder: SchemaBuilder<Q, M, S>,
    limits: Limits,
) -> SchemaBuilder<Q, M, S> {
    builder
        // The depth limit is the guard's: it counts through fragments without
        // expanding them, and exempts introspection (whose shape it bounds apart).
        .limit_complexity(limits.max_complexity)
        // Guards the validator's own recursion over selection sets; the
        // guard's pre-scan has already bounded the parser's.
        .limit_recursive_depth(32)
        .limit_directives(10)
        .extension(guard::QueryGuard { limits })
}
