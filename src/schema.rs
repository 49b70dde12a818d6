//! The schema's roots, stitched from the domains with `MergedObject`: one
//! entry per domain in each root (`docs/architecture.md`, "Domains").

use async_graphql::{MergedObject, MergedSubscription, Schema, SchemaBuilder};

use crate::{
    auth::{
        graphql::{AuthMutation, AuthQuery},
        oidc::graphql::{OidcMutation, OidcQuery},
    },
    docs::graphql::{DocsMutation, DocsQuery, DocsSubscription},
    feeds::graphql::{FeedsMutation, FeedsQuery, FeedsSubscription},
    gateway::graphql::{GatewayMutation, GatewayQuery, GatewaySubscription},
    graphql::{Limits, with_limits},
    jobs::graphql::{JobsMutation, JobsQuery, JobsSubscription},
    nodes::graphql::{NodesMutation, NodesQuery, NodesSubscription},
};

#[derive(MergedObject, Default)]
#[graphql(name = "Query")]
pub struct QueryRoot(
    AuthQuery,
    OidcQuery,
    JobsQuery,
    FeedsQuery,
    NodesQuery,
    DocsQuery,
    GatewayQuery,
);

#[derive(MergedObject, Default)]
#[graphql(name = "Mutation")]
pub struct MutationRoot(
    AuthMutation,
    OidcMutation,
    JobsMutation,
    FeedsMutation,
    NodesMutation,
    DocsMutation,
    GatewayMutation,
);

#[derive(MergedSubscription, Default)]
#[graphql(name = "Subscription")]
pub struct SubscriptionRoot(
    JobsSubscription,
    FeedsSubscription,
    NodesSubscription,
    DocsSubscription,
    GatewaySubscription,
);

pub type TrellisSchema = Schema<QueryRoot, MutationRoot, SubscriptionRoot>;

/// The schema with its limits; the services come with each request
/// (`graphql::http::RequestData`).
pub fn schema_builder(limits: Limits) -> SchemaBuilder<QueryRoot, MutationRoot, SubscriptionRoot> {
    with_limits(
        Schema::build(
            QueryRoot::default(),
            MutationRoot::default(),
            SubscriptionRoot::default(),
        ),
        limits,
    )
}

/// The SDL that `schema.graphql` must equal (`trellis schema`).
pub fn sdl() -> String {
    schema_builder(Limits::default()).finish().sdl()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use async_graphql::{
        ServerResult, Variables,
        extensions::{Extension, ExtensionContext, ExtensionFactory, NextParseQuery},
        parser::types::{BaseType, ExecutableDocument, Type, TypeKind, TypeSystemDefinition},
    };

    use super::*;

    /// Keeps what a logging extension would print of each document.
    #[derive(Clone, Default)]
    struct Printed(Arc<Mutex<Vec<String>>>);

    impl ExtensionFactory for Printed {
        fn create(&self) -> Arc<dyn Extension> {
            Arc::new(self.clone())
        }
    }

    #[async_trait::async_trait]
    impl Extension for Printed {
        async fn parse_query(
            &self,
            ctx: &ExtensionContext<'_>,
            query: &str,
            variables: &Variables,
            next: NextParseQuery<'_>,
        ) -> ServerResult<ExecutableDocument> {
            let document = next.run(ctx, query, variables).await?;
            let printed = ctx.stringify_execute_doc(&document, variables);
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(printed);
            Ok(document)
        }
    }

    fn looks_secret(name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        ["password", "token", "secret", "apikey"]
            .iter()
            .any(|word| name.contains(word))
    }

    fn named(ty: &Type) -> &str {
        match &ty.base {
            BaseType::Named(name) => name.as_str(),
            BaseType::List(inner) => named(inner),
        }
    }

    /// Every root-field argument (or input-object field of one) whose name
    /// says it carries a password or token is `#[graphql(secret)]`: what
    /// async-graphql prints of a document for logs shows `"<secret>"`.
    #[tokio::test]
    async fn password_and_token_arguments_never_reach_a_printed_document() {
        let sdl = sdl();
        let schema_doc = async_graphql::parser::parse_schema(&sdl).expect("our SDL parses");
        let mut inputs = std::collections::HashMap::new();
        let mut roots = Vec::new();
        for definition in &schema_doc.definitions {
            let TypeSystemDefinition::Type(ty) = definition else {
                continue;
            };
            let name = ty.node.name.node.as_str();
            match &ty.node.kind {
                TypeKind::InputObject(input) => {
                    let secret: Vec<String> = input
                        .fields
                        .iter()
                        .map(|f| f.node.name.node.to_string())
                        .filter(|f| looks_secret(f))
                        .collect();
                    inputs.insert(name.to_owned(), secret);
                }
                TypeKind::Object(object)
                    if matches!(name, "Query" | "Mutation" | "Subscription") =>
                {
                    let operation = match name {
                        "Query" => "query",
                        "Mutation" => "mutation",
                        _ => "subscription",
                    };
                    for field in &object.fields {
                        for arg in &field.node.arguments {
                            roots.push((
                                operation,
                                field.node.name.node.to_string(),
                                arg.node.name.node.to_string(),
                                named(&arg.node.ty.node).to_owned(),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut documents = Vec::new();
        for (operation, field, arg, ty) in roots {
            if looks_secret(&arg) {
                documents.push(format!(
                    "{operation} {{ {field}({arg}: \"SECRET-MARK\") {{ __typename }} }}"
                ));
            }
            for input_field in inputs.get(&ty).into_iter().flatten() {
                documents.push(format!(
                    "{operation} {{ {field}({arg}: {{ {input_field}: \"SECRET-MARK\" }}) {{ __typename }} }}"
                ));
            }
        }
        assert!(
            documents.len() >= 7,
            "found too few secret arguments: {documents:#?}"
        );

        let printed = Printed::default();
        let schema = schema_builder(Limits::default())
            .extension(printed.clone())
            .finish();
        for document in &documents {
            // Execution fails without services; printing happens before.
            let _ = schema.execute(document.as_str()).await;
        }
        let printed = printed.0.lock().unwrap().clone();
        assert_eq!(printed.len(), documents.len(), "every document was parsed");
        for (document, printed) in documents.iter().zip(&printed) {
            assert!(
                !printed.contains("SECRET-MARK") && printed.contains("<secret>"),
                "{document} printed as {printed}"
            );
        }
    }
}
