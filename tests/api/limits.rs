//! The GraphQL document limits (issue 16, items 1, 2 and 16): nesting that
//! would crash the parser, fragment spreads that would explode validation,
//! aliases counted through fragments, depth, and introspection — which real
//! tools must be able to run, within bounds and by the configured policy.

use serde_json::{Value, json};

use crate::{
    helpers::{
        AppOptions, Backend, GqlResponse, TestApp, deeply_nested_documents, spawn_app,
        spawn_app_with,
    },
    on_both_backends,
};

on_both_backends!(
    deeply_nested_documents_are_refused_and_the_server_keeps_serving,
    deeply_nested_variables_are_refused,
    doubling_fragments_are_refused_before_validation,
    wide_fragments_are_refused_by_their_expanded_size,
    aliases_count_once_per_fragment_spread,
    fragment_cycles_are_refused,
    depth_counts_through_fragments,
    standard_introspection_queries_are_answered,
    introspection_beyond_its_shape_is_refused,
    introspection_can_require_sign_in,
    introspection_can_be_turned_off,
);

fn message(response: &GqlResponse) -> &str {
    response.body["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
}

/// The request was refused with `code`, and the message says `says`.
fn assert_refused(response: &GqlResponse, code: &str, says: &str) {
    assert_eq!(response.error_code(), Some(code), "{}", response.body);
    assert!(message(response).contains(says), "{}", response.body);
}

async fn deeply_nested_documents_are_refused_and_the_server_keeps_serving(backend: Backend) {
    let mut app = spawn_app(backend).await;
    // Well past the ~1,500 levels that overflowed the parser's stack.
    for (place, document) in deeply_nested_documents(5_000) {
        let response = app.gql(&document, json!({})).send().await;
        assert_eq!(
            response.error_code(),
            Some("GRAPHQL_PARSE_FAILED"),
            "{place}: {}",
            response.body
        );
        assert!(
            message(&response).contains("nests"),
            "{place}: {}",
            response.body
        );
        app.assert_serving().await;
    }
    // Within 64 levels the document is not refused for its nesting.
    let (_, document) = &deeply_nested_documents(60)[0];
    let response = app.gql(document, json!({})).send().await;
    assert_ne!(
        response.error_code(),
        Some("GRAPHQL_PARSE_FAILED"),
        "{}",
        response.body
    );
}

async fn deeply_nested_variables_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut value = json!(1);
    for _ in 0..100 {
        value = json!([value]);
    }
    let response = app
        .gql("query($v: JSON) { __typename }", json!({ "v": value }))
        .send()
        .await;
    assert_eq!(
        response.error_code(),
        Some("BAD_USER_INPUT"),
        "{}",
        response.body
    );
    assert_eq!(response.body["errors"][0]["extensions"]["field"], "$v");
}

/// The 903-byte document of the issue: `F_i` spreads `F_{i-1}` twice.
fn doubling_fragments(levels: usize) -> String {
    let mut document = format!("{{ ...F{levels} }} fragment F0 on Query {{ __typename }}");
    for i in 1..=levels {
        document.push_str(&format!(
            " fragment F{i} on Query {{ ...F{} ...F{} }}",
            i - 1,
            i - 1
        ));
    }
    document
}

async fn doubling_fragments_are_refused_before_validation(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let response = app.gql(&doubling_fragments(22), json!({})).send().await;
    assert_refused(
        &response,
        "GRAPHQL_VALIDATION_FAILED",
        "fragment spreads; the limit is 100",
    );
    app.assert_serving().await;
    // Within the limit, fragments work as usual: 2 + 4 + … + 64 = 126 > 100,
    // 2 + … + 32 = 62 is fine.
    let response = app.gql(&doubling_fragments(5), json!({})).send().await;
    assert_eq!(response.data()["__typename"], "Query");
    let response = app.gql(&doubling_fragments(6), json!({})).send().await;
    assert_eq!(response.error_code(), Some("GRAPHQL_VALIDATION_FAILED"));
}

async fn wide_fragments_are_refused_by_their_expanded_size(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let document = |spreads: usize, fields: usize| {
        format!(
            "{{ {} }} fragment F on Query {{ {} }}",
            "...F ".repeat(spreads),
            "__typename ".repeat(fields)
        )
    };
    // 100 spreads (the limit) of 200 fields walk 20,000 fields.
    let response = app.gql(&document(100, 200), json!({})).send().await;
    assert_refused(
        &response,
        "GRAPHQL_VALIDATION_FAILED",
        "expands to 20000 fields; the limit is 10000",
    );
    app.assert_serving().await;
    let response = app.gql(&document(50, 199), json!({})).send().await;
    assert_eq!(response.data()["__typename"], "Query");
}

async fn aliases_count_once_per_fragment_spread(backend: Backend) {
    let app = spawn_app(backend).await;
    let query = |spreads: usize| {
        format!(
            "{{ ...{} }} fragment Two on Query {{ a: __typename b: __typename }}",
            vec!["Two"; spreads].join(" ...")
        )
    };
    // 2 aliases × 20 spreads = 40 > 30.
    let response = app.gql(&query(20), json!({})).send().await;
    assert_refused(&response, "GRAPHQL_VALIDATION_FAILED", "uses 40 aliases");
    // 2 × 15 = 30 is the limit itself.
    let response = app.gql(&query(15), json!({})).send().await;
    assert_eq!(response.data()["a"], "Query");
}

async fn fragment_cycles_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let response = app
        .gql(
            "{ ...A } fragment A on Query { ...B ...B } fragment B on Query { __typename ...A ...A }",
            json!({}),
        )
        .send()
        .await;
    assert_refused(&response, "GRAPHQL_VALIDATION_FAILED", "cycle");
}

async fn depth_counts_through_fragments(backend: Backend) {
    let app = spawn_app(backend).await;
    // `node`, then `parent { parent { … } }` per fragment: depth 1 + 2n + 1
    // (single objects, so the complexity limit stays out of it).
    let chain = |fragments: usize| {
        let mut query = String::from("{ node(id: \"1\") { ...G0 } }");
        for i in 0..fragments {
            let next = if i + 1 == fragments {
                "id".to_owned()
            } else {
                format!("...G{}", i + 1)
            };
            query.push_str(&format!(
                " fragment G{i} on Node {{ parent {{ parent {{ {next} }} }} }}"
            ));
        }
        query
    };
    let deep = app.gql(&chain(6), json!({})).send().await;
    assert_refused(
        &deep,
        "GRAPHQL_VALIDATION_FAILED",
        "nested too deep: 14 levels; the limit is 12",
    );
    // Depth 12 passes the limits (and then needs a signed-in caller).
    let within = app.gql(&chain(5), json!({})).send().await;
    assert_eq!(
        within.error_code(),
        Some("UNAUTHENTICATED"),
        "{}",
        within.body
    );
}

/// graphql-js 16's `getIntrospectionQuery(options)` — what GraphiQL's docs
/// explorer, code generators and schemathesis send — rebuilt here from
/// `src/utilities/getIntrospectionQuery.ts` (v16: nine levels of `ofType`).
fn introspection_query(all_options: bool) -> String {
    let on = |text: &'static str| if all_options { text } else { "" };
    let descriptions = "description";
    let input_deprecation = on("(includeDeprecated: true)");
    let mut type_ref = String::from("kind\n      name");
    let mut close = String::new();
    for _ in 0..9 {
        type_ref.push_str("\n      ofType {\n        kind\n        name");
        close.push_str("\n      }");
    }
    format!(
        r#"
    query IntrospectionQuery {{
      __schema {{
        {schema_description}
        queryType {{ name }}
        mutationType {{ name }}
        subscriptionType {{ name }}
        types {{
          ...FullType
        }}
        directives {{
          name
          {descriptions}
          {is_repeatable}
          locations
          args{input_deprecation} {{
            ...InputValue
          }}
        }}
      }}
    }}

    fragment FullType on __Type {{
      kind
      name
      {descriptions}
      {specified_by_url}
      fields(includeDeprecated: true) {{
        name
        {descriptions}
        args{input_deprecation} {{
          ...InputValue
        }}
        type {{
          ...TypeRef
        }}
        isDeprecated
        deprecationReason
      }}
      inputFields{input_deprecation} {{
        ...InputValue
      }}
      interfaces {{
        ...TypeRef
      }}
      enumValues(includeDeprecated: true) {{
        name
        {descriptions}
        isDeprecated
        deprecationReason
      }}
      possibleTypes {{
        ...TypeRef
      }}
    }}

    fragment InputValue on __InputValue {{
      name
      {descriptions}
      type {{ ...TypeRef }}
      defaultValue
      {is_deprecated}
      {deprecation_reason}
    }}

    fragment TypeRef on __Type {{
      {type_ref}{close}
    }}
  "#,
        schema_description = on("description"),
        is_repeatable = on("isRepeatable"),
        specified_by_url = on("specifiedByURL"),
        is_deprecated = on("isDeprecated"),
        deprecation_reason = on("deprecationReason"),
    )
}

fn assert_full_schema(response: &GqlResponse) {
    let types = response.data()["__schema"]["types"]
        .as_array()
        .unwrap_or_else(|| panic!("no types: {}", response.body));
    assert!(
        types.iter().any(|t| t["name"] == "Feed"),
        "{}",
        response.body
    );
    let node = types.iter().find(|t| t["name"] == "Query").unwrap();
    assert!(node["fields"].as_array().is_some_and(|f| !f.is_empty()));
}

async fn standard_introspection_queries_are_answered(backend: Backend) {
    let app = spawn_app(backend).await;
    for all_options in [false, true] {
        let response = app
            .gql(&introspection_query(all_options), json!({}))
            .send()
            .await;
        assert_full_schema(&response);
    }
    // GraphiQL names the operation.
    let named = app
        .gql(&introspection_query(false), json!({}))
        .operation("IntrospectionQuery")
        .send()
        .await;
    assert_full_schema(&named);
}

async fn introspection_beyond_its_shape_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    // Four nested lists multiply the answer: refused.
    let response = app
        .gql(
            "{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }",
            json!({}),
        )
        .send()
        .await;
    assert_refused(&response, "GRAPHQL_VALIDATION_FAILED", "introspection");
    // Three are the standard query's `types { fields { args } }`.
    let response = app
        .gql(
            "{ __schema { types { fields { args { name } } } } }",
            json!({}),
        )
        .send()
        .await;
    assert!(response.data()["__schema"]["types"].is_array());
}

async fn introspection_can_require_sign_in(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_GRAPHQL_INTROSPECTION", "authenticated"),
    )
    .await;
    let anonymous = app.gql(&introspection_query(true), json!({})).send().await;
    assert_eq!(
        anonymous.error_code(),
        Some("UNAUTHENTICATED"),
        "{}",
        anonymous.body
    );
    assert!(anonymous.body["data"].is_null(), "{}", anonymous.body);
    let by_type = app
        .gql("{ __type(name: \"User\") { name } }", json!({}))
        .send()
        .await;
    assert_eq!(by_type.error_code(), Some("UNAUTHENTICATED"));
    assert_typename_works(&app).await;

    let member = app.member("ada").await;
    let signed_in = app
        .gql(&introspection_query(true), json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_full_schema(&signed_in);
}

async fn introspection_can_be_turned_off(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_GRAPHQL_INTROSPECTION", "off"),
    )
    .await;
    let admin = app.admin().await;
    let response = app
        .gql(&introspection_query(false), json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        response.error_code(),
        Some("FORBIDDEN"),
        "{}",
        response.body
    );
    // Hidden behind a fragment is still introspection.
    let hidden = app
        .gql(
            "{ ...S } fragment S on Query { __schema { queryType { name } } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(hidden.error_code(), Some("FORBIDDEN"), "{}", hidden.body);
    assert_typename_works(&app).await;
    // Another operation of the same document is not refused for it.
    let other = app
        .gql(
            "query Schema { __schema { queryType { name } } } query Me { me { username } }",
            json!({}),
        )
        .bearer(&admin.access)
        .operation("Me")
        .send()
        .await;
    assert_eq!(other.data()["me"]["username"], "admin");
}

async fn assert_typename_works(app: &TestApp) {
    let response = app
        .gql("{ __typename me { __typename } }", json!({}))
        .send()
        .await;
    assert_eq!(
        response.data(),
        &json!({ "__typename": "Query", "me": Value::Null })
    );
}
