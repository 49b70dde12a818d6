//! A fuzz target for the request path (issue 16, "Tests and CI"): property
//! tests generating hostile GraphQL requests against the real schema,
//! sent to one running server per backend. Each case calls a real root
//! field from `schema.graphql` with random argument values — long strings,
//! NUL, huge numbers, random cursors, deep values, junk of the wrong type —
//! inline or through variables, wrapped in random aliases, fragment spreads
//! (doubling chains too) and nesting, as an anonymous caller, a member or
//! an admin, sometimes in a batch. Every answer must be below 500, every
//! error must carry a code, none may be `INTERNAL` (every case is a client
//! mistake), and the process must still serve at the end.
//!
//! The cases come from a fixed seed, so a failure is reproducible; it is
//! printed with the request that caused it. `TRELLIS_FUZZ_CASES` changes
//! the number of cases (default 250 per backend).

use std::{collections::HashMap, sync::Arc};

use async_graphql::parser::types::{BaseType, Type, TypeKind, TypeSystemDefinition};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use proptest::{
    prelude::*,
    strategy::ValueTree,
    test_runner::{Config, RngAlgorithm, TestRng, TestRunner},
};
use serde_json::Value;

use crate::{
    helpers::{Backend, spawn_app},
    on_both_backends,
};

on_both_backends!(hostile_requests_never_crash_the_server_or_leak_internal_errors);

/// The server's default `TRELLIS_MAX_BODY_BYTES`.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Root fields left out: `logout` ends the caller's session (later cases
/// would all be anonymous), `discoverFeeds` fetches the URL it is given.
const SKIPPED: [&str; 2] = ["logout", "discoverFeeds"];

/// A generated value, rendered as a GraphQL literal or as JSON text.
#[derive(Debug, Clone)]
enum Gen {
    Null,
    Bool(bool),
    /// Number text, possibly beyond any integer type (`1e400`, 40 digits).
    Number(String),
    Str(String),
    Enum(String),
    List(Vec<Gen>),
    Object(Vec<(String, Gen)>),
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Gen {
    fn graphql(&self) -> String {
        match self {
            Gen::Null => "null".into(),
            Gen::Bool(b) => b.to_string(),
            Gen::Number(n) => n.clone(),
            Gen::Str(s) => serde_json::to_string(s).unwrap(),
            Gen::Enum(e) if is_name(e) => e.clone(),
            Gen::Enum(e) => serde_json::to_string(e).unwrap(),
            Gen::List(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Gen::graphql)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            // A GraphQL object literal's keys are names; others only travel as JSON.
            Gen::Object(fields) => format!(
                "{{{}}}",
                fields
                    .iter()
                    .filter(|(key, _)| is_name(key))
                    .map(|(key, value)| format!("{key}: {}", value.graphql()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn json(&self) -> String {
        match self {
            Gen::Null => "null".into(),
            Gen::Bool(b) => b.to_string(),
            Gen::Number(n) => n.clone(),
            Gen::Str(s) | Gen::Enum(s) => serde_json::to_string(s).unwrap(),
            Gen::List(items) => format!(
                "[{}]",
                items.iter().map(Gen::json).collect::<Vec<_>>().join(",")
            ),
            Gen::Object(fields) => format!(
                "{{{}}}",
                fields
                    .iter()
                    .map(|(key, value)| format!(
                        "{}:{}",
                        serde_json::to_string(key).unwrap(),
                        value.json()
                    ))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// What the generator knows of the schema.
struct Catalog {
    roots: Vec<Root>,
    inputs: HashMap<String, Vec<(String, Type)>>,
    enums: HashMap<String, Vec<String>>,
    /// Types a field of which needs a selection set.
    composite: Vec<String>,
}

struct Root {
    operation: &'static str,
    name: String,
    args: Vec<(String, Type)>,
    returns: Type,
}

fn named(ty: &Type) -> &str {
    match &ty.base {
        BaseType::Named(name) => name.as_str(),
        BaseType::List(inner) => named(inner),
    }
}

impl Catalog {
    fn load() -> Catalog {
        let sdl = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql"))
            .expect("schema.graphql");
        let document = async_graphql::parser::parse_schema(&sdl).expect("the schema parses");
        let mut catalog = Catalog {
            roots: Vec::new(),
            inputs: HashMap::new(),
            enums: HashMap::new(),
            composite: Vec::new(),
        };
        for definition in document.definitions {
            let TypeSystemDefinition::Type(definition) = definition else {
                continue;
            };
            let name = definition.node.name.node.to_string();
            match definition.node.kind {
                TypeKind::Object(object) => {
                    let operation = match name.as_str() {
                        "Query" => Some("query"),
                        "Mutation" => Some("mutation"),
                        _ => None,
                    };
                    if let Some(operation) = operation {
                        for field in object.fields {
                            let field = field.node;
                            if SKIPPED.contains(&field.name.node.as_str()) {
                                continue;
                            }
                            catalog.roots.push(Root {
                                operation,
                                name: field.name.node.to_string(),
                                args: field
                                    .arguments
                                    .into_iter()
                                    .map(|a| (a.node.name.node.to_string(), a.node.ty.node))
                                    .collect(),
                                returns: field.ty.node,
                            });
                        }
                    }
                    catalog.composite.push(name);
                }
                TypeKind::Interface(_) | TypeKind::Union(_) => catalog.composite.push(name),
                TypeKind::Enum(enumeration) => {
                    let values = enumeration
                        .values
                        .into_iter()
                        .map(|v| v.node.value.node.to_string())
                        .collect();
                    catalog.enums.insert(name, values);
                }
                TypeKind::InputObject(input) => {
                    let fields = input
                        .fields
                        .into_iter()
                        .map(|f| (f.node.name.node.to_string(), f.node.ty.node))
                        .collect();
                    catalog.inputs.insert(name, fields);
                }
                TypeKind::Scalar => {}
            }
        }
        assert!(
            catalog.roots.len() > 40,
            "the schema's root fields were found"
        );
        catalog
    }
}

fn hostile_string() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "\\PC{0,12}",
        2 => "[a-z0-9 ./:_-]{0,24}",
        2 => "[a-z]{0,6}\\x00[a-z]{0,6}",
        1 => (250usize..260).prop_map(|n| "é".repeat(n)),
        1 => prop_oneof![Just(2049usize), Just(70_000)].prop_map(|n| "x".repeat(n)),
        1 => Just("' OR 1=1 --".to_owned()),
        1 => Just("https://example.invalid/feed.xml".to_owned()),
        1 => Just("user/-/label/\u{0}".to_owned()),
        2 => random_cursor(),
    ]
    .boxed()
}

/// Base64url of a random sort key, shaped like the server's cursors.
fn random_cursor() -> BoxedStrategy<String> {
    let key = prop_oneof![
        any::<i64>().prop_map(|i| format!("{{\"i\":{i}}}")),
        "[a-z\\x00]{0,8}".prop_map(|s| format!("{{\"s\":{}}}", serde_json::to_string(&s).unwrap())),
        prop_oneof![
            Just("2026-11-30T10:00:00Z"),
            Just("0001-01-01T00:00:00Z"),
            Just("+262143-12-31T23:59:59Z"),
            Just("-0001-01-01T00:00:00Z"),
        ]
        .prop_map(|t| format!("{{\"t\":\"{t}\"}}")),
        Just("{\"u\":\"00000000-0000-0000-0000-000000000000\"}".to_owned()),
        Just("{\"x\":1}".to_owned()),
    ];
    prop_oneof![
        proptest::collection::vec(key, 0..4)
            .prop_map(|keys| URL_SAFE_NO_PAD.encode(format!("[{}]", keys.join(",")))),
        "[A-Za-z0-9_-]{0,16}",
    ]
    .boxed()
}

fn hostile_number() -> BoxedStrategy<String> {
    prop_oneof![
        3 => (-5i64..300).prop_map(|n| n.to_string()),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        1 => Just("2147483648".to_owned()),
        1 => Just("99999999999999999999999999999999999999".to_owned()),
        1 => Just("1e400".to_owned()),
        1 => Just("-0.5".to_owned()),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
    ]
    .boxed()
}

/// Anything at all: the wrong type for most arguments.
fn junk() -> BoxedStrategy<Gen> {
    let leaf = prop_oneof![
        Just(Gen::Null),
        any::<bool>().prop_map(Gen::Bool),
        hostile_number().prop_map(Gen::Number),
        hostile_string().prop_map(Gen::Str),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Gen::List),
            proptest::collection::vec(("[a-z]{1,4}|[a-z\\x00]{1,3}", inner), 0..4)
                .prop_map(Gen::Object),
        ]
    })
    .boxed()
}

/// A list nested `levels` deep: refused past 64.
fn deep() -> BoxedStrategy<Gen> {
    (1usize..120)
        .prop_map(|levels| {
            (0..levels).fold(Gen::Number("1".into()), |value, _| Gen::List(vec![value]))
        })
        .boxed()
}

/// A value for an argument of type `ty`: mostly of the right shape,
/// with hostile content, sometimes junk or deep.
fn value(catalog: &Arc<Catalog>, ty: &Type, depth: u32) -> BoxedStrategy<Gen> {
    let shaped = match &ty.base {
        BaseType::List(inner) => proptest::collection::vec(value(catalog, inner, depth + 1), 0..4)
            .prop_map(Gen::List)
            .boxed(),
        BaseType::Named(name) => match name.as_str() {
            "Int" | "Float" => hostile_number().prop_map(Gen::Number).boxed(),
            "Boolean" => any::<bool>().prop_map(Gen::Bool).boxed(),
            "ID" => prop_oneof![
                (-2i64..50).prop_map(|n| n.to_string()),
                Just("99999999999999999999".to_owned()),
                Just("00000000-0000-0000-0000-000000000000".to_owned()),
                hostile_string(),
            ]
            .prop_map(Gen::Str)
            .boxed(),
            "DateTime" => prop_oneof![
                Just("2026-11-30T10:00:00Z".to_owned()),
                Just("0000-01-01T00:00:00Z".to_owned()),
                Just("9999-12-31T23:59:59Z".to_owned()),
                Just("2026-02-30T00:00:00Z".to_owned()),
                hostile_string(),
            ]
            .prop_map(Gen::Str)
            .boxed(),
            "JSON" => prop_oneof![junk(), deep()].boxed(),
            name if catalog.enums.contains_key(name) => {
                let mut values = catalog.enums[name].clone();
                values.push("NOT_A_VALUE".into());
                proptest::sample::select(values).prop_map(Gen::Enum).boxed()
            }
            name if catalog.inputs.contains_key(name) && depth < 4 => {
                let fields: Vec<BoxedStrategy<Option<(String, Gen)>>> = catalog.inputs[name]
                    .iter()
                    .map(|(field, ty)| {
                        proptest::option::weighted(0.7, value(catalog, ty, depth + 1))
                            .prop_map({
                                let field = field.clone();
                                move |v| v.map(|v| (field.clone(), v))
                            })
                            .boxed()
                    })
                    .collect();
                fields
                    .prop_map(|fields| Gen::Object(fields.into_iter().flatten().collect()))
                    .boxed()
            }
            _ => hostile_string().prop_map(Gen::Str).boxed(),
        },
    };
    if ty.nullable {
        prop_oneof![8 => shaped, 1 => junk(), 1 => Just(Gen::Null)].boxed()
    } else {
        prop_oneof![9 => shaped, 1 => junk()].boxed()
    }
}

/// How the field is wrapped in the document.
#[derive(Debug, Clone)]
enum Wrapper {
    Plain,
    Aliases(usize),
    Spreads(usize),
    Doubling(usize),
    Nested(usize),
}

fn wrapper() -> BoxedStrategy<Wrapper> {
    prop_oneof![
        4 => Just(Wrapper::Plain),
        1 => (1usize..40).prop_map(Wrapper::Aliases),
        1 => (1usize..40).prop_map(Wrapper::Spreads),
        1 => (1usize..24).prop_map(Wrapper::Doubling),
        1 => (1usize..80).prop_map(Wrapper::Nested),
    ]
    .boxed()
}

#[derive(Debug, Clone, Copy)]
enum Caller {
    Anonymous,
    Member,
    Admin,
}

/// One operation: a root field, its arguments (name, value, as a
/// variable?) and its wrapping.
#[derive(Debug, Clone)]
struct Operation {
    root: usize,
    args: Vec<(String, Type, Gen, bool)>,
    wrapper: Wrapper,
}

fn operation(catalog: Arc<Catalog>) -> BoxedStrategy<Operation> {
    (0..catalog.roots.len())
        .prop_flat_map(move |root| {
            let args: Vec<_> = catalog.roots[root]
                .args
                .iter()
                .map(|(name, ty)| {
                    let (name, ty) = (name.clone(), ty.clone());
                    proptest::option::weighted(0.85, (value(&catalog, &ty, 0), any::<bool>()))
                        .prop_map(move |v| {
                            v.map(|(value, var)| (name.clone(), ty.clone(), value, var))
                        })
                })
                .collect();
            (Just(root), args, wrapper())
        })
        .prop_map(|(root, args, wrapper)| Operation {
            root,
            args: args.into_iter().flatten().collect(),
            wrapper,
        })
        .boxed()
}

impl Operation {
    /// The request's JSON text: `{"query": …, "variables": {…}}`.
    fn render(&self, catalog: &Catalog) -> String {
        let root = &catalog.roots[self.root];
        let root_type = if root.operation == "query" {
            "Query"
        } else {
            "Mutation"
        };
        let mut declarations = Vec::new();
        let mut variables = Vec::new();
        let mut arguments = Vec::new();
        for (i, (name, ty, value, as_variable)) in self.args.iter().enumerate() {
            if *as_variable {
                declarations.push(format!("$v{i}: {ty}"));
                variables.push(format!("\"v{i}\":{}", value.json()));
                arguments.push(format!("{name}: $v{i}"));
            } else {
                arguments.push(format!("{name}: {}", value.graphql()));
            }
        }
        let arguments = if arguments.is_empty() {
            String::new()
        } else {
            format!("({})", arguments.join(", "))
        };
        let selection = if catalog.composite.iter().any(|t| t == named(&root.returns)) {
            " { __typename }"
        } else {
            ""
        };
        let field = format!("{}{arguments}{selection}", root.name);
        let header = if declarations.is_empty() {
            root.operation.to_owned()
        } else {
            format!("{}({})", root.operation, declarations.join(", "))
        };
        let document = match &self.wrapper {
            Wrapper::Plain => format!("{header} {{ {field} }}"),
            Wrapper::Aliases(n) => {
                let fields: Vec<String> = (0..*n).map(|i| format!("a{i}: {field}")).collect();
                format!("{header} {{ {} }}", fields.join(" "))
            }
            Wrapper::Spreads(n) => format!(
                "{header} {{ {} }} fragment F on {root_type} {{ {field} }}",
                "...F ".repeat(*n)
            ),
            Wrapper::Doubling(levels) => {
                let mut document =
                    format!("{header} {{ ...F{levels} }} fragment F0 on {root_type} {{ {field} }}");
                for i in 1..=*levels {
                    document.push_str(&format!(
                        " fragment F{i} on {root_type} {{ ...F{} ...F{} }}",
                        i - 1,
                        i - 1
                    ));
                }
                document
            }
            Wrapper::Nested(levels) => format!(
                "{header} {{ {}{field}{} }}",
                format!("... on {root_type} {{ ").repeat(*levels),
                " }".repeat(*levels)
            ),
        };
        format!(
            "{{\"query\":{},\"variables\":{{{}}}}}",
            serde_json::to_string(&document).unwrap(),
            variables.join(",")
        )
    }
}

/// One request: one operation, or a batch of a few.
#[derive(Debug, Clone)]
struct Case {
    caller: Caller,
    operations: Vec<Operation>,
}

fn case(catalog: Arc<Catalog>) -> BoxedStrategy<Case> {
    let caller = prop_oneof![
        Just(Caller::Anonymous),
        Just(Caller::Member),
        Just(Caller::Admin),
    ];
    let operations = prop_oneof![
        6 => operation(catalog.clone()).prop_map(|op| vec![op]),
        1 => proptest::collection::vec(operation(catalog), 2..4),
    ];
    (caller, operations)
        .prop_map(|(caller, operations)| Case { caller, operations })
        .boxed()
}

/// Every error in `body` (an answer or a batch of answers) has a code
/// other than `INTERNAL`.
fn check_errors(body: &Value) -> Result<(), String> {
    let answers: Vec<&Value> = match body {
        Value::Array(answers) => answers.iter().collect(),
        answer => vec![answer],
    };
    for answer in answers {
        for error in answer["errors"].as_array().into_iter().flatten() {
            match error["extensions"]["code"].as_str() {
                None => return Err(format!("an error without a code: {error}")),
                Some("INTERNAL") => return Err(format!("an INTERNAL error: {error}")),
                Some(_) => {}
            }
        }
    }
    Ok(())
}

async fn hostile_requests_never_crash_the_server_or_leak_internal_errors(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let admin = app.admin().await.access;
    let member = app.member("ada").await.access;
    app.gql(
        "mutation { createGroup(name: \"Tech\") { id } }",
        serde_json::json!({}),
    )
    .bearer(&member)
    .send()
    .await
    .data();

    let catalog = Arc::new(Catalog::load());
    let cases: u32 = std::env::var("TRELLIS_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(250);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = case(catalog.clone());
    for n in 0..cases {
        let case = strategy
            .new_tree(&mut runner)
            .expect("a case is generated")
            .current();
        let body = match case.operations.as_slice() {
            [one] => one.render(&catalog),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|op| op.render(&catalog))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        let mut request = app
            .client
            .post(app.url("/graphql"))
            .header("content-type", "application/json")
            .body(body.clone());
        match case.caller {
            Caller::Anonymous => {}
            Caller::Member => request = request.bearer_auth(&member),
            Caller::Admin => request = request.bearer_auth(&admin),
        }
        let response = match request.send().await {
            Ok(response) => response,
            // Past the body limit the server answers 413 without reading
            // the rest and closes: the client may fail while still sending.
            Err(_) if body.len() > MAX_BODY_BYTES => {
                app.assert_serving().await;
                continue;
            }
            Err(error) => {
                panic!("case {n}: the server did not answer ({error}); request: {body:.2000}")
            }
        };
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let verdict = if status.is_server_error() {
            Err(format!("status {status}"))
        } else {
            serde_json::from_str::<Value>(&text)
                .map_err(|_| format!("not JSON: {text:.500}"))
                .and_then(|answer| check_errors(&answer))
        };
        if let Err(problem) = verdict {
            panic!(
                "case {n} ({:?}): {problem}\nrequest: {body:.3000}\nanswer: {text:.3000}",
                case.caller
            );
        }
    }
    app.assert_serving().await;
}
