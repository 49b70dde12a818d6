//! Request-level protection and error typing for every GraphQL operation.
//!
//! - Documents with more aliases than `TRELLIS_GRAPHQL_MAX_ALIASES` are
//!   refused before validation (aliases multiply work without adding depth).
//! - Parse errors get `extensions.code = GRAPHQL_PARSE_FAILED`, validation
//!   errors (including the depth, complexity and recursion limits)
//!   `GRAPHQL_VALIDATION_FAILED`, and argument-coercion errors, which reach
//!   the response without a code, `BAD_USER_INPUT`; service errors
//!   ([`AppError`](crate::error::AppError)) get theirs. Every error a client
//!   sees therefore carries a code.

use std::sync::Arc;

use futures_util::{StreamExt, stream::BoxStream};

use async_graphql::{
    Response, ServerError, ServerResult, ValidationResult, Variables,
    extensions::{
        Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery, NextSubscribe,
        NextValidation,
    },
    parser::types::{ExecutableDocument, Selection, SelectionSet},
};

use crate::error::annotate_graphql_error;

pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";

pub struct QueryGuard {
    pub max_aliases: usize,
}

impl ExtensionFactory for QueryGuard {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(QueryGuardExtension {
            max_aliases: self.max_aliases,
        })
    }
}

struct QueryGuardExtension {
    max_aliases: usize,
}

/// Service errors get their code from [`AppError`](crate::error::AppError);
/// anything else without a code is an argument the schema could not coerce.
fn annotate(error: ServerError) -> ServerError {
    with_code(annotate_graphql_error(error), "BAD_USER_INPUT")
}

/// Adds `code` to an error that has none yet.
pub fn with_code(mut error: ServerError, code: &str) -> ServerError {
    let extensions = error.extensions.get_or_insert_with(Default::default);
    if extensions.get("code").is_none() {
        extensions.set("code", code);
    }
    error
}

fn count_aliases(set: &SelectionSet) -> usize {
    set.items
        .iter()
        .map(|selection| match &selection.node {
            Selection::Field(field) => {
                usize::from(field.node.alias.is_some())
                    + count_aliases(&field.node.selection_set.node)
            }
            Selection::InlineFragment(fragment) => count_aliases(&fragment.node.selection_set.node),
            Selection::FragmentSpread(_) => 0,
        })
        .sum()
}

fn document_aliases(document: &ExecutableDocument) -> usize {
    let operations: usize = document
        .operations
        .iter()
        .map(|(_, op)| count_aliases(&op.node.selection_set.node))
        .sum();
    let fragments: usize = document
        .fragments
        .values()
        .map(|fragment| count_aliases(&fragment.node.selection_set.node))
        .sum();
    operations + fragments
}

#[async_trait::async_trait]
impl Extension for QueryGuardExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next
            .run(ctx, query, variables)
            .await
            .map_err(|error| with_code(error, PARSE_FAILED))?;
        let aliases = document_aliases(&document);
        if aliases > self.max_aliases {
            return Err(with_code(
                ServerError::new(
                    format!(
                        "query uses {aliases} aliases; the limit is {}",
                        self.max_aliases
                    ),
                    None,
                ),
                VALIDATION_FAILED,
            ));
        }
        Ok(document)
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await.map_err(|errors| {
            errors
                .into_iter()
                .map(|error| with_code(error, VALIDATION_FAILED))
                .collect()
        })
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let mut response = next.run(ctx, operation_name).await;
        response.errors = std::mem::take(&mut response.errors)
            .into_iter()
            .map(annotate)
            .collect();
        response
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        next.run(ctx, stream)
            .map(|mut response| {
                response.errors = std::mem::take(&mut response.errors)
                    .into_iter()
                    .map(annotate)
                    .collect();
                response
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_counted_in_operations_and_fragments() {
        let document = async_graphql::parser::parse_query(
            "query { a: me { id } b: me { x: id } ...F } fragment F on Query { c: me { id } }",
        )
        .unwrap();
        assert_eq!(document_aliases(&document), 4);
    }
}
