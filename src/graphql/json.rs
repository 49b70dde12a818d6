//! The `JSON` scalar, with every number kept exactly as it was written.
//!
//! `serde_json` is built with `arbitrary_precision`, so a `Number` holds its
//! text (`100000000000000000000` stays that integer, not `1e20`). Two places
//! in async-graphql do not know that representation, and this module is the
//! one answer to both:
//! - its own `Json<T>` scalar goes through serde's data model, where such a
//!   number is a one-field map (`{"$serde_json::private::Number": "…"}`);
//!   [`Json`] converts between `serde_json::Value` and GraphQL values
//!   directly, number to number (both are `serde_json::Number`);
//! - request variables are read with `deserialize_any`, which hands every
//!   number that is not a 64-bit integer to the same one-field map;
//!   [`restore_numbers`] turns those maps back into numbers before the
//!   request runs (the request guard calls it for every operation).

use async_graphql::{
    InputValueError, InputValueResult, Name, Scalar, ScalarType, Value as GqlValue, Variables,
    indexmap::IndexMap,
};
use serde_json::{Map, Number, Value};

/// The key `serde_json` gives a number on its way through another format.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Any JSON value. Numbers keep their text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Json(pub Value);

/// A scalar that can represent any JSON value.
#[Scalar(name = "JSON")]
impl ScalarType for Json {
    fn parse(value: GqlValue) -> InputValueResult<Self> {
        to_json(value)
            .map(Json)
            .map_err(|text| InputValueError::custom(format!("`{text}` is not a JSON number")))
    }

    fn to_value(&self) -> GqlValue {
        from_json(&self.0)
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Self {
        Json(value)
    }
}

/// A GraphQL value as JSON. The error is a number map whose text is not a
/// JSON number (only a hand-written variable could hold one).
fn to_json(value: GqlValue) -> Result<Value, String> {
    Ok(match value {
        GqlValue::Null => Value::Null,
        GqlValue::Boolean(flag) => Value::Bool(flag),
        GqlValue::Number(number) => Value::Number(number),
        GqlValue::String(text) => Value::String(text),
        GqlValue::Enum(name) => Value::String(name.to_string()),
        GqlValue::Binary(bytes) => Value::Array(bytes.iter().map(|&b| Value::from(b)).collect()),
        GqlValue::List(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        GqlValue::Object(fields) => match number_text(&fields) {
            Some(text) => Value::Number(parse_number(text)?),
            None => Value::Object(
                fields
                    .into_iter()
                    .map(|(name, value)| Ok((name.to_string(), to_json(value)?)))
                    .collect::<Result<Map<_, _>, String>>()?,
            ),
        },
    })
}

/// JSON as a GraphQL value.
fn from_json(value: &Value) -> GqlValue {
    match value {
        Value::Null => GqlValue::Null,
        Value::Bool(flag) => GqlValue::Boolean(*flag),
        Value::Number(number) => GqlValue::Number(number.clone()),
        Value::String(text) => GqlValue::String(text.clone()),
        Value::Array(items) => GqlValue::List(items.iter().map(from_json).collect()),
        Value::Object(fields) => GqlValue::Object(
            fields
                .iter()
                .map(|(name, value)| (Name::new(name), from_json(value)))
                .collect(),
        ),
    }
}

/// Turns the one-field number maps in request variables back into numbers.
/// A map whose text is not a number is left as it is (the field's own
/// input check then refuses it).
pub fn restore_numbers(variables: &mut Variables) {
    for value in variables.values_mut() {
        restore(value);
    }
}

fn restore(value: &mut GqlValue) {
    match value {
        GqlValue::List(items) => items.iter_mut().for_each(restore),
        GqlValue::Object(fields) => {
            if let Some(number) = number_text(fields).and_then(|text| parse_number(text).ok()) {
                *value = GqlValue::Number(number);
            } else {
                fields.values_mut().for_each(restore);
            }
        }
        _ => {}
    }
}

/// The text of a `{"$serde_json::private::Number": "…"}` map.
fn number_text(fields: &IndexMap<Name, GqlValue>) -> Option<&str> {
    match (fields.len(), fields.get(NUMBER_TOKEN)) {
        (1, Some(GqlValue::String(text))) => Some(text),
        _ => None,
    }
}

fn parse_number(text: &str) -> Result<Number, String> {
    serde_json::from_str::<Number>(text).map_err(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCUMENT: &str = r#"{"big": 100000000000000000000, "float": 2.50, "small": -3, "list": [1e400, {"x": 0.1}]}"#;

    #[test]
    fn numbers_cross_the_scalar_with_their_text() {
        let value: Value = serde_json::from_str(DOCUMENT).unwrap();
        let graphql = Json(value.clone()).to_value();
        let back = Json::parse(graphql.clone()).unwrap();
        assert_eq!(back.0, value);
        // What a client reads: the response is written by serde_json (which
        // writes an exponent with its sign; the digits stay as sent).
        let written = serde_json::to_string(&graphql).unwrap();
        assert_eq!(
            written,
            r#"{"big":100000000000000000000,"float":2.50,"list":[1e+400,{"x":0.1}],"small":-3}"#
        );
    }

    #[test]
    fn variables_read_by_async_graphql_get_their_numbers_back() {
        let mut variables: Variables =
            serde_json::from_str(&format!(r#"{{"patch": {DOCUMENT}}}"#)).expect("variables parse");
        // Without the fix a float arrives as a one-field map.
        let patch = variables.get(&Name::new("patch")).unwrap().clone();
        assert!(
            matches!(&patch, GqlValue::Object(fields) if matches!(fields.get("float"), Some(GqlValue::Object(_)))),
            "{patch:?}"
        );
        restore_numbers(&mut variables);
        let patch = variables.get(&Name::new("patch")).unwrap().clone();
        let json = Json::parse(patch).unwrap().0;
        assert_eq!(json["big"].to_string(), "100000000000000000000");
        assert_eq!(json["float"].as_f64(), Some(2.5));
        assert_eq!(json["float"].to_string(), "2.50");
        assert_eq!(json["small"].as_i64(), Some(-3));
        assert_eq!(json["list"][1]["x"].as_f64(), Some(0.1));
    }

    #[test]
    fn an_ordinary_object_with_the_token_among_others_stays_an_object() {
        let mut fields = IndexMap::new();
        fields.insert(Name::new(NUMBER_TOKEN), GqlValue::String("1.5".into()));
        fields.insert(Name::new("other"), GqlValue::Boolean(true));
        let json = Json::parse(GqlValue::Object(fields)).unwrap().0;
        assert_eq!(json[NUMBER_TOKEN], "1.5");
        assert_eq!(json["other"], true);
        let mut lone = IndexMap::new();
        lone.insert(
            Name::new(NUMBER_TOKEN),
            GqlValue::String("not a number".into()),
        );
        assert!(Json::parse(GqlValue::Object(lone)).is_err());
    }
}
