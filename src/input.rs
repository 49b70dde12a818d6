//! The rules every value a client sends must satisfy, whatever field it is
//! for, checked once where the request enters: GraphQL arguments and
//! variables (in the schema's request guard, `graphql::guard`), the JSON
//! bodies of `/resources…`, and the forms and paths of the reader APIs.
//! A field's own bounds (a name's 255 characters, a URL's 2048) are its
//! service's business; these are the ones no field is exempt from:
//!
//! - **No NUL character.** PostgreSQL cannot store one in `text`,
//!   `varchar` or `jsonb` (SQLite can, so the backends would disagree), and
//!   no client has a reason to send one.
//! - **At most [`MAX_TEXT_BYTES`] per string**, whatever the body limit
//!   allows.
//! - **At most [`MAX_NESTING`] levels of lists and objects**, so no code
//!   that walks a value recursively can run out of stack.
//!
//! Pure: no I/O, so every rule is tested here.

use std::fmt;

/// The longest string accepted anywhere, in bytes (1 MiB: an OPML list of
/// 5,000 feeds fits).
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// The deepest nesting of lists and objects accepted in a value.
pub const MAX_NESTING: usize = 64;

/// What is wrong with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    Nul,
    TooLong,
    TooDeep,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Nul => f.write_str("contains a NUL character"),
            Problem::TooLong => write!(f, "is longer than {MAX_TEXT_BYTES} bytes"),
            Problem::TooDeep => write!(f, "nests lists or objects more than {MAX_NESTING} deep"),
        }
    }
}

/// A problem and where it is inside the value: `""` for the value itself,
/// else a path such as `.tags[2]` (object keys after dots, list indices in
/// brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub problem: Problem,
    pub at: String,
}

impl InputError {
    /// "{subject} contains a NUL character (at `attributes.tags[2]`)",
    /// where `subject` says what the value is ("argument `attributes` of
    /// field `createResource`") and `name` starts the path.
    pub fn describe(&self, subject: &str, name: &str) -> String {
        if self.at.is_empty() {
            format!("{subject} {}", self.problem)
        } else {
            format!("{subject} {} (at `{name}{}`)", self.problem, self.at)
        }
    }
}

/// Checks one string.
pub fn check_text(text: &str) -> Result<(), Problem> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(Problem::TooLong);
    }
    if text.contains('\0') {
        return Err(Problem::Nul);
    }
    Ok(())
}

/// How a value looks to the checks: a string, a container, or anything
/// else (numbers, booleans, null, enum names, variables).
pub enum Shape<'a, T: ?Sized> {
    Text(&'a str),
    Container(Box<dyn Iterator<Item = (Key<'a>, &'a T)> + 'a>),
    Other,
}

/// A child's place in its container.
pub enum Key<'a> {
    Index(usize),
    Name(&'a str),
}

/// A value the checks can walk: JSON and GraphQL values.
pub trait Tree {
    fn shape(&self) -> Shape<'_, Self>;
}

/// Checks every string (object keys included) and the nesting of a value.
pub fn check_value<T: Tree + ?Sized>(value: &T) -> Result<(), InputError> {
    let mut path = Vec::new();
    walk(value, 0, &mut path).map_err(|problem| InputError {
        problem,
        at: path.concat(),
    })
}

/// Depth-first; on error `path` holds the way to the offending value.
fn walk<T: Tree + ?Sized>(value: &T, depth: usize, path: &mut Vec<String>) -> Result<(), Problem> {
    match value.shape() {
        Shape::Text(text) => check_text(text),
        Shape::Other => Ok(()),
        Shape::Container(children) => {
            if depth >= MAX_NESTING {
                return Err(Problem::TooDeep);
            }
            for (key, child) in children {
                let segment = match key {
                    Key::Index(index) => format!("[{index}]"),
                    Key::Name(name) => {
                        if let Err(problem) = check_text(name) {
                            path.push(format!(".{}", name.replace('\0', "\\0")));
                            return Err(problem);
                        }
                        format!(".{name}")
                    }
                };
                path.push(segment);
                walk(child, depth + 1, path)?;
                path.pop();
            }
            Ok(())
        }
    }
}

impl Tree for serde_json::Value {
    fn shape(&self) -> Shape<'_, Self> {
        match self {
            serde_json::Value::String(text) => Shape::Text(text),
            serde_json::Value::Array(items) => Shape::Container(Box::new(
                items.iter().enumerate().map(|(i, v)| (Key::Index(i), v)),
            )),
            serde_json::Value::Object(map) => Shape::Container(Box::new(
                map.iter().map(|(k, v)| (Key::Name(k.as_str()), v)),
            )),
            _ => Shape::Other,
        }
    }
}

impl Tree for async_graphql::Value {
    fn shape(&self) -> Shape<'_, Self> {
        match self {
            async_graphql::Value::String(text) => Shape::Text(text),
            async_graphql::Value::List(items) => Shape::Container(Box::new(
                items.iter().enumerate().map(|(i, v)| (Key::Index(i), v)),
            )),
            async_graphql::Value::Object(map) => Shape::Container(Box::new(
                map.iter().map(|(k, v)| (Key::Name(k.as_str()), v)),
            )),
            _ => Shape::Other,
        }
    }
}

impl Tree for async_graphql_value::Value {
    fn shape(&self) -> Shape<'_, Self> {
        use async_graphql_value::Value;
        match self {
            Value::String(text) => Shape::Text(text),
            Value::List(items) => Shape::Container(Box::new(
                items.iter().enumerate().map(|(i, v)| (Key::Index(i), v)),
            )),
            Value::Object(map) => Shape::Container(Box::new(
                map.iter().map(|(k, v)| (Key::Name(k.as_str()), v)),
            )),
            _ => Shape::Other,
        }
    }
}

/// Checks a decoded form or query string (every name and every value).
pub fn check_pairs<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), (String, Problem)> {
    for (name, value) in pairs {
        check_text(name).map_err(|problem| (name.replace('\0', "\\0"), problem))?;
        check_text(value).map_err(|problem| (name.to_owned(), problem))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_without_nul_within_the_bound_passes() {
        assert_eq!(check_text("plain ünïcode"), Ok(()));
        assert_eq!(check_text(&"x".repeat(MAX_TEXT_BYTES)), Ok(()));
        assert_eq!(check_text("a\0b"), Err(Problem::Nul));
        assert_eq!(
            check_text(&"x".repeat(MAX_TEXT_BYTES + 1)),
            Err(Problem::TooLong)
        );
    }

    #[test]
    fn the_path_names_the_offending_string() {
        let value = json!({ "name": "ok", "tags": ["a", "b\u{0}"] });
        let error = check_value(&value).unwrap_err();
        assert_eq!(error.problem, Problem::Nul);
        assert_eq!(error.at, ".tags[1]");
        assert_eq!(
            error.describe("`attributes`", "attributes"),
            "`attributes` contains a NUL character (at `attributes.tags[1]`)"
        );
        assert_eq!(
            check_value(&json!("a\u{0}"))
                .unwrap_err()
                .describe("argument `name`", "name"),
            "argument `name` contains a NUL character"
        );
    }

    #[test]
    fn object_keys_are_checked_too() {
        let error = check_value(&json!({ "ok": { "bad\u{0}key": 1 } })).unwrap_err();
        assert_eq!(error.problem, Problem::Nul);
        assert_eq!(error.at, ".ok.bad\\0key");
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |levels: usize| {
            let mut value = json!(1);
            for _ in 0..levels {
                value = json!([value]);
            }
            value
        };
        assert_eq!(check_value(&nested(MAX_NESTING)), Ok(()));
        assert_eq!(
            check_value(&nested(MAX_NESTING + 1)).unwrap_err().problem,
            Problem::TooDeep
        );
    }

    #[test]
    fn graphql_values_are_walked_like_json() {
        let value = async_graphql::Value::from_json(json!({ "a": ["x", "y\u{0}"] })).unwrap();
        assert_eq!(check_value(&value).unwrap_err().at, ".a[1]");
        let document =
            async_graphql::parser::parse_query(r#"{ f(x: {a: ["ok", "\u0000"]}) }"#).unwrap();
        let async_graphql::parser::types::DocumentOperations::Single(operation) =
            &document.operations
        else {
            panic!("one operation");
        };
        let async_graphql::parser::types::Selection::Field(field) =
            &operation.node.selection_set.node.items[0].node
        else {
            panic!("a field");
        };
        let (_, argument) = &field.node.arguments[0];
        assert_eq!(check_value(&argument.node).unwrap_err().at, ".a[1]");
    }

    #[test]
    fn form_pairs_name_the_parameter() {
        assert_eq!(check_pairs([("a", "1"), ("s", "user/-/label/x")]), Ok(()));
        assert_eq!(
            check_pairs([("a", "1"), ("dest", "x\0")]),
            Err(("dest".to_owned(), Problem::Nul))
        );
    }
}
