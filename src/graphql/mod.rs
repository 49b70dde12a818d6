//! The schema: root objects stitched from the domains with `MergedObject`,
//! plus the shared pieces every domain uses (context, pagination, loaders,
//! the request guard). Domain objects live in their domain's folder.

pub mod context;
pub mod guard;
pub mod http;
pub mod loaders;
pub mod pagination;
pub mod ws;

use async_graphql::{MergedObject, MergedSubscription, Schema, SchemaBuilder};

use crate::{
    auth::graphql::{AuthMutation, AuthQuery},
    config::Introspection,
    feeds::graphql::{FeedsMutation, FeedsQuery, FeedsSubscription},
    jobs::graphql::{JobsMutation, JobsQuery, JobsSubscription},
    nodes::graphql::{NodesMutation, NodesQuery, NodesSubscription},
};

#[derive(MergedObject, Default)]
#[graphql(name = "Query")]
pub struct QueryRoot(AuthQuery, JobsQuery, FeedsQuery, NodesQuery);

#[derive(MergedObject, Default)]
#[graphql(name = "Mutation")]
pub struct MutationRoot(AuthMutation, JobsMutation, FeedsMutation, NodesMutation);

#[derive(MergedSubscription, Default)]
#[graphql(name = "Subscription")]
pub struct SubscriptionRoot(JobsSubscription, FeedsSubscription, NodesSubscription);

pub type TrellisSchema = Schema<QueryRoot, MutationRoot, SubscriptionRoot>;

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
            max_complexity: 2000,
            max_aliases: 30,
            max_fragment_spreads: 100,
            introspection: Introspection::Public,
        }
    }
}

/// The schema with its limits; the caller adds runtime data (services).
pub fn schema_builder(limits: Limits) -> SchemaBuilder<QueryRoot, MutationRoot, SubscriptionRoot> {
    Schema::build(
        QueryRoot::default(),
        MutationRoot::default(),
        SubscriptionRoot::default(),
    )
    // The depth limit is the guard's: it counts through fragments without
    // expanding them, and exempts introspection (whose shape it bounds apart).
    .limit_complexity(limits.max_complexity)
    // Guards the validator's own recursion over selection sets; the
    // guard's pre-scan has already bounded the parser's.
    .limit_recursive_depth(32)
    .limit_directives(10)
    .extension(guard::QueryGuard { limits })
}

/// The SDL that `schema.graphql` must equal (`trellis schema`).
pub fn sdl() -> String {
    schema_builder(Limits::default()).finish().sdl()
}
