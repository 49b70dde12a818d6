//! Request-level protection and error typing for every GraphQL operation,
//! over HTTP and WebSocket alike (it is a schema extension, so every
//! execution runs through it).
//!
//! Before the parser runs, [`QueryGuard`] refuses, with
//! `GRAPHQL_PARSE_FAILED`, a document that nests lists, objects or
//! selections more than [`MAX_NESTING`] deep (the parser's recursion is
//! unbounded and would overflow the stack). It then parses the document
//! itself and, before validation, refuses:
//!
//! - values that break the input rules (`crate::input`: NUL, overlong
//!   strings, deep nesting) in variables or written in the document —
//!   `BAD_USER_INPUT`, naming the argument or variable;
//! - with `GRAPHQL_VALIDATION_FAILED`: fragment cycles; more fragment
//!   spreads than `TRELLIS_GRAPHQL_MAX_FRAGMENT_SPREADS` after expansion
//!   (validation expands every spread, so doubling fragments cost
//!   exponential time); more aliases than `TRELLIS_GRAPHQL_MAX_ALIASES`,
//!   counting a fragment's once per spread; selections deeper than
//!   `TRELLIS_GRAPHQL_MAX_DEPTH`; more than [`MAX_EXPANDED_FIELDS`] field
//!   selections after expansion;
//! - introspection beyond its fixed shape (deeper than
//!   [`MAX_INTROSPECTION_DEPTH`] fields or [`MAX_INTROSPECTION_LISTS`]
//!   nested lists; it is exempt from the depth limit, because
//!   graphql-js's standard introspection query is 15 fields deep), and
//!   introspection the caller may not run (`TRELLIS_GRAPHQL_INTROSPECTION`:
//!   `UNAUTHENTICATED` or `FORBIDDEN`; `__typename` always works).
//!
//! Every measure is computed in time linear in the document
//! (`guard::shape`). Then async-graphql validates (complexity →
//! `GRAPHQL_VALIDATION_FAILED`) and executes; argument-coercion errors,
//! which reach the response without a code, get `BAD_USER_INPUT`, and
//! service errors ([`AppError`](crate::error::AppError)) get theirs.
//! Every error a client sees therefore carries a code.

mod arguments;
mod nesting;
mod shape;

use std::{any::TypeId, sync::Arc};

use futures_util::{StreamExt, stream::BoxStream};

use async_graphql::{
    Request, Response, ServerError, ServerResult, ValidationResult, Variables,
    extensions::{
        Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery,
        NextPrepareRequest, NextSubscribe, NextValidation,
    },
    parser::types::ExecutableDocument,
};

use super::Limits;
use crate::{auth::Viewer, config::Introspection, error::annotate_graphql_error, input};

pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";
const BAD_USER_INPUT: &str = "BAD_USER_INPUT";

/// The deepest nesting of `[` and `{` a document may have (values, list
/// types and selection sets together).
pub const MAX_NESTING: usize = input::MAX_NESTING;
/// The deepest `__schema`/`__type` subtree, in fields: graphql-js's
/// standard query (`getIntrospectionQuery`, nine `ofType` levels) is 15.
pub const MAX_INTROSPECTION_DEPTH: u64 = 20;
/// The most nested list fields in an introspection subtree: the standard
/// query's `types { fields { args } }` is 3.
pub const MAX_INTROSPECTION_LISTS: u64 = 3;
/// The most field selections a document may expand to (`__typename`
/// included). Validation and execution walk every one of them, however
/// few spreads it took: one 1 MiB fragment spread 100 times cost seconds.
/// graphql-js's standard introspection query expands to about 300.
pub const MAX_EXPANDED_FIELDS: u64 = 10_000;

/// Each operation of a document (by name) and whether it selects
/// `__schema` or `__type`.
type Introspecting = Vec<(Option<String>, bool)>;

pub struct QueryGuard {
    pub limits: Limits,
}

impl ExtensionFactory for QueryGuard {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(QueryGuardExtension {
            limits: self.limits,
        })
    }
}

struct QueryGuardExtension {
    limits: Limits,
}

/// Service errors get their code from [`AppError`](crate::error::AppError);
/// anything else without a code is an argument the schema could not coerce.
fn annotate(error: ServerError) -> ServerError {
    with_code(annotate_graphql_error(error), BAD_USER_INPUT)
}

/// Adds `code` to an error that has none yet.
pub fn with_code(mut error: ServerError, code: &str) -> ServerError {
    let extensions = error.extensions.get_or_insert_with(Default::default);
    if extensions.get("code").is_none() {
        extensions.set("code", code);
    }
    error
}

fn refuse(code: &str, message: String) -> ServerError {
    with_code(ServerError::new(message, None), code)
}

/// A `BAD_USER_INPUT` naming the offending argument or variable.
fn bad_input(field: &str, message: String, pos: Option<async_graphql::Pos>) -> ServerError {
    let mut error = with_code(ServerError::new(message, pos), BAD_USER_INPUT);
    if let Some(extensions) = &mut error.extensions {
        extensions.set("field", field);
    }
    error
}

fn check_variables(variables: &Variables) -> ServerResult<()> {
    for (name, value) in variables.iter() {
        if let Err(error) = input::check_value(value) {
            let name = format!("${name}");
            let message = error.describe(&format!("variable `{name}`"), &name);
            return Err(bad_input(&name, message, None));
        }
    }
    Ok(())
}

impl QueryGuardExtension {
    /// Every check that needs only the request: the text, the variables,
    /// then the parsed document's shape.
    fn check_document(
        &self,
        request: &Request,
    ) -> ServerResult<(ExecutableDocument, Introspecting)> {
        let nesting = nesting::max_nesting(&request.query, MAX_NESTING);
        if nesting > MAX_NESTING {
            return Err(refuse(
                PARSE_FAILED,
                format!(
                    "the document nests lists, objects or selections more than {MAX_NESTING} deep"
                ),
            ));
        }
        check_variables(&request.variables)?;
        let document = async_graphql::parser::parse_query(&request.query)
            .map_err(|error| with_code(ServerError::from(error), PARSE_FAILED))?;
        if let Err(problem) = arguments::check_document(&document) {
            return Err(bad_input(
                &problem.argument,
                problem.message(),
                Some(problem.pos),
            ));
        }
        let introspecting = self.check_shape(&document)?;
        Ok((document, introspecting))
    }

    fn check_shape(&self, document: &ExecutableDocument) -> ServerResult<Introspecting> {
        let limits = &self.limits;
        let measured = shape::measure(document).map_err(|shape::Cycle(fragment)| {
            refuse(
                VALIDATION_FAILED,
                format!("fragment `{fragment}` spreads itself (through a cycle of spreads)"),
            )
        })?;
        let max_spreads = limits.max_fragment_spreads as u64;
        if let Some((name, measure)) = measured
            .fragments
            .iter()
            .find(|(_, measure)| measure.spreads > max_spreads)
        {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "fragment `{name}` expands to {} fragment spreads; the limit is {max_spreads}",
                    measure.spreads
                ),
            ));
        }
        let total = measured.total();
        if total.spreads > max_spreads {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "the document expands to {} fragment spreads; the limit is {max_spreads}",
                    total.spreads
                ),
            ));
        }
        if total.fields > MAX_EXPANDED_FIELDS {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "the document expands to {} fields; the limit is {MAX_EXPANDED_FIELDS}",
                    total.fields
                ),
            ));
        }
        if total.aliases > limits.max_aliases as u64 {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "the document uses {} aliases (a fragment's count once per spread); the limit is {}",
                    total.aliases, limits.max_aliases
                ),
            ));
        }
        if total.depth > limits.max_depth as u64 {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "Query is nested too deep: {} levels; the limit is {}",
                    total.depth, limits.max_depth
                ),
            ));
        }
        if total.introspection_depth > MAX_INTROSPECTION_DEPTH
            || total.introspection_lists > MAX_INTROSPECTION_LISTS
        {
            return Err(refuse(
                VALIDATION_FAILED,
                format!(
                    "introspection is nested too deep: at most {MAX_INTROSPECTION_DEPTH} levels and {MAX_INTROSPECTION_LISTS} nested lists"
                ),
            ));
        }
        Ok(measured
            .operations
            .iter()
            .map(|(name, measure)| (name.map(str::to_owned), measure.introspection))
            .collect())
    }

    /// `TRELLIS_GRAPHQL_INTROSPECTION` for the operation that will run
    /// (every operation, when the request does not single one out).
    fn check_introspection(
        &self,
        ctx: &ExtensionContext<'_>,
        request: &Request,
        introspecting: &Introspecting,
    ) -> ServerResult<()> {
        let selected = introspecting
            .iter()
            .find(|(name, _)| name.as_deref() == request.operation_name.as_deref());
        let introspects = match selected {
            Some((_, introspects)) => *introspects,
            None => introspecting.iter().any(|(_, introspects)| *introspects),
        };
        if !introspects {
            return Ok(());
        }
        match self.limits.introspection {
            Introspection::Public => Ok(()),
            Introspection::Authenticated if viewer(ctx, request).is_some() => Ok(()),
            Introspection::Authenticated => Err(refuse(
                "UNAUTHENTICATED",
                "sign in to query the schema (`__schema`, `__type`)".to_owned(),
            )),
            Introspection::Off => Err(refuse(
                "FORBIDDEN",
                "schema introspection (`__schema`, `__type`) is turned off on this server"
                    .to_owned(),
            )),
        }
    }
}

/// The caller: request data over HTTP, session data over WebSocket.
/// (`prepare_request` runs before the request's data reaches the context.)
fn viewer<'a>(ctx: &ExtensionContext<'a>, request: &'a Request) -> Option<&'a Viewer> {
    request
        .data
        .get(&TypeId::of::<Viewer>())
        .and_then(|data| data.downcast_ref::<Viewer>())
        .or_else(|| ctx.data_opt::<Viewer>())
}

#[async_trait::async_trait]
impl Extension for QueryGuardExtension {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        mut request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        // Numbers in variables keep their text (`graphql::json`).
        super::json::restore_numbers(&mut request.variables);
        let (document, introspecting) = self.check_document(&request)?;
        self.check_introspection(ctx, &request, &introspecting)?;
        // Parsed once: async-graphql uses this document instead of parsing again.
        request.set_parsed_query(document);
        next.run(ctx, request).await
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        // Its own checks (recursion depth, directive count) come with no code.
        next.run(ctx, query, variables)
            .await
            .map_err(|error| with_code(error, PARSE_FAILED))
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
