//! The schema: root objects stitched from the domains with `MergedObject`,
//! plus the shared pieces every domain uses (context, pagination, loaders,
//! the request guard). Domain objects live in their domain's folder.

pub mod context;
pub mod guard;
pub mod http;
pub mod loaders;
pub mod pagination;

use async_graphql::{MergedObject, MergedSubscription, Schema, SchemaBuilder};

use crate::{
    auth::graphql::{AuthMutation, AuthQuery},
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

/// Static limits applied to every operation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
    pub max_aliases: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 12,
            max_complexity: 2000,
            max_aliases: 30,
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
    .limit_depth(limits.max_depth)
    .limit_complexity(limits.max_complexity)
    // Guards the parser's and validator's own recursion (deeply nested
    // lists and input objects), not just field depth.
    .limit_recursive_depth(32)
    .limit_directives(10)
    .extension(guard::QueryGuard {
        max_aliases: limits.max_aliases,
    })
}

/// The SDL that `schema.graphql` must equal (`trellis schema`).
pub fn sdl() -> String {
    schema_builder(Limits::default()).finish().sdl()
}
