//! The resource operations clients request, their task kinds and queues,
//! and their validation (pure). What each costs, and so its queue:
//!
//! - **Create** (`q:short`): one new resource, a handful of new nodes on
//!   one chain.
//! - **Update A** (`q:short`): a merge patch of attributes no position
//!   template reads. The resource cannot move, so only its own chain's
//!   properties (and their dependents) are recomputed.
//! - **Update B** (`q:medium`): a merge patch that may touch position
//!   attributes. The resource may move: orphaned subtrees are deleted and
//!   new chains inserted.
//! - **Delete** (`q:medium`): may orphan (and delete) whole subtrees.
//! - **Update C** (`q:long`): wholesale replacement of the attributes of
//!   many resources in one request (up to [`MAX_UPDATE_C`]); any of them
//!   may move.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{config::NodeConfig, plan, rules::MAX_TOKEN_LEN};
use crate::{error::AppError, jobs::model::Queue};

/// Every resource task is in this one scope: requests are ordered by its
/// generation, and a stage that finds a newer one hands the rest of the
/// reconciliation over to it.
pub const SCOPE: &str = "resources";

/// Largest serialized attributes document.
pub const MAX_ATTRIBUTES_BYTES: usize = 64 * 1024;
/// Most resources one Update C replaces.
pub const MAX_UPDATE_C: usize = 1000;

/// A requested change, as stored in the task's payload. (Read back by
/// hand, see the `Deserialize` impl below.)
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Operation {
    /// The new resource's id is its task's id.
    #[serde(rename = "create")]
    Create { attributes: Map<String, Value> },
    #[serde(rename = "updateA", rename_all = "camelCase")]
    UpdateA {
        resource_id: Uuid,
        patch: Map<String, Value>,
    },
    #[serde(rename = "updateB", rename_all = "camelCase")]
    UpdateB {
        resource_id: Uuid,
        patch: Map<String, Value>,
    },
    #[serde(rename = "updateC")]
    UpdateC { resources: Vec<Replacement> },
    #[serde(rename = "delete", rename_all = "camelCase")]
    Delete { resource_id: Uuid },
}

/// Reads the form `Serialize` writes, through [`Operation::from_payload`].
impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = Map::<String, Value>::deserialize(deserializer)?;
        Operation::from_payload(Value::Object(fields)).map_err(serde::de::Error::custom)
    }
}

impl Operation {
    /// A stored payload (`{"op": "updateA", "resourceId": …, "patch": …}`)
    /// as an operation. The attribute maps are moved out as they are, not
    /// read through serde's data model: there a float that reads back as
    /// the same double is written again in another form (`0.0000001` →
    /// `1e-7`), and the derived form of a tagged enum buffers its fields
    /// where no integer beyond 64 bits fits, while attributes keep every
    /// number's text (`docs/nodes.md`). Read payloads with this, not with
    /// `serde_json::from_value`.
    pub fn from_payload(payload: Value) -> Result<Self, String> {
        let Value::Object(mut fields) = payload else {
            return Err("a request is a JSON object".into());
        };
        let op = match fields.remove("op") {
            Some(Value::String(op)) => op,
            _ => return Err("a request names its `op`".into()),
        };
        let fields = &mut fields;
        Ok(match op.as_str() {
            "create" => Operation::Create {
                attributes: take_object(fields, "attributes")?,
            },
            "updateA" => Operation::UpdateA {
                resource_id: take_uuid(fields, "resourceId")?,
                patch: take_object(fields, "patch")?,
            },
            "updateB" => Operation::UpdateB {
                resource_id: take_uuid(fields, "resourceId")?,
                patch: take_object(fields, "patch")?,
            },
            "updateC" => {
                let Some(Value::Array(items)) = fields.remove("resources") else {
                    return Err("`resources` is a list".into());
                };
                let resources = items
                    .into_iter()
                    .map(|item| {
                        let Value::Object(mut item) = item else {
                            return Err("each of `resources` is an object".to_owned());
                        };
                        Ok(Replacement {
                            id: take_uuid(&mut item, "id")?,
                            attributes: take_object(&mut item, "attributes")?,
                        })
                    })
                    .collect::<Result<_, String>>()?;
                Operation::UpdateC { resources }
            }
            "delete" => Operation::Delete {
                resource_id: take_uuid(fields, "resourceId")?,
            },
            other => return Err(format!("unknown operation `{other}`")),
        })
    }
}

fn take_object(fields: &mut Map<String, Value>, name: &str) -> Result<Map<String, Value>, String> {
    match fields.remove(name) {
        Some(Value::Object(object)) => Ok(object),
        _ => Err(format!("`{name}` is an object")),
    }
}

fn take_uuid(fields: &mut Map<String, Value>, name: &str) -> Result<Uuid, String> {
    fields
        .get(name)
        .and_then(Value::as_str)
        .and_then(|text| Uuid::parse_str(text).ok())
        .ok_or_else(|| format!("`{name}` is a UUID"))
}

/// One resource's new attributes in an Update C.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replacement {
    pub id: Uuid,
    pub attributes: Map<String, Value>,
}

/// The task kinds, one per operation.
pub const CREATE_KIND: &str = "resources.create";
pub const UPDATE_A_KIND: &str = "resources.update_a";
pub const UPDATE_B_KIND: &str = "resources.update_b";
pub const UPDATE_C_KIND: &str = "resources.update_c";
pub const DELETE_KIND: &str = "resources.delete";
/// Server-initiated: does whatever reconciliation work is still owed (left
/// by a newest request that failed or was cancelled). Periodic, `q:medium`.
pub const RECONCILE_KIND: &str = "resources.reconcile";
/// How often the owed-work reconciliation runs.
pub const RECONCILE_PERIOD: std::time::Duration = std::time::Duration::from_secs(300);
pub const KINDS: [(&str, Queue); 5] = [
    (CREATE_KIND, Queue::Short),
    (UPDATE_A_KIND, Queue::Short),
    (UPDATE_B_KIND, Queue::Medium),
    (UPDATE_C_KIND, Queue::Long),
    (DELETE_KIND, Queue::Medium),
];

impl Operation {
    pub fn kind(&self) -> &'static str {
        match self {
            Operation::Create { .. } => CREATE_KIND,
            Operation::UpdateA { .. } => UPDATE_A_KIND,
            Operation::UpdateB { .. } => UPDATE_B_KIND,
            Operation::UpdateC { .. } => UPDATE_C_KIND,
            Operation::Delete { .. } => DELETE_KIND,
        }
    }

    pub fn queue(&self) -> Queue {
        queue_of(self.kind()).unwrap_or(Queue::Medium)
    }

    /// The existing resources the operation needs.
    pub fn targets(&self) -> Vec<Uuid> {
        match self {
            Operation::Create { .. } => vec![],
            Operation::UpdateA { resource_id, .. }
            | Operation::UpdateB { resource_id, .. }
            | Operation::Delete { resource_id } => vec![*resource_id],
            Operation::UpdateC { resources } => resources.iter().map(|r| r.id).collect(),
        }
    }

    /// The operation with its attribute numbers in one form on every
    /// backend (`docs/nodes.md`, "Position token"): an integer keeps its
    /// text however long it is; any other number is written in plain
    /// decimal notation with a point, from the shortest text that reads
    /// back as the same double (`1e2` → `100.0`, `1.50` → `1.5`, `1e-7` →
    /// `0.0000001`); a negative zero is `0.0`. PostgreSQL's `jsonb` keeps a
    /// number as `numeric`, which keeps such text exactly but rewrites
    /// exponents and has no negative zero, while SQLite keeps the text as
    /// sent: in this form both give back what was stored, in attributes and
    /// in position tokens alike. A number no double can hold (`1e400`) is
    /// `BAD_USER_INPUT`.
    pub fn canonical(mut self) -> Result<Self, AppError> {
        let (field, maps): (&'static str, Vec<&mut Map<String, Value>>) = match &mut self {
            Operation::Create { attributes } => ("attributes", vec![attributes]),
            Operation::UpdateA { patch, .. } | Operation::UpdateB { patch, .. } => {
                ("patch", vec![patch])
            }
            Operation::UpdateC { resources } => (
                "resources",
                resources
                    .iter_mut()
                    .map(|replacement| &mut replacement.attributes)
                    .collect(),
            ),
            Operation::Delete { .. } => ("resourceId", vec![]),
        };
        for map in maps {
            for value in map.values_mut() {
                canonical_numbers(value).map_err(|text| {
                    AppError::bad_input(
                        field,
                        format!("the number `{}` is out of range", clip(&text)),
                    )
                })?;
            }
        }
        Ok(self)
    }

    /// Checks the request against the configuration; an error names the
    /// field (`BAD_USER_INPUT`).
    pub fn validate(&self, config: &NodeConfig) -> Result<(), AppError> {
        match self {
            Operation::Create { attributes } => check_attributes(config, "attributes", attributes),
            Operation::UpdateA { patch, .. } => {
                check_patch(patch)?;
                if let Some(attribute) = patch
                    .keys()
                    .find(|key| config.token_attributes.contains(*key))
                {
                    return Err(AppError::bad_input(
                        "patch",
                        format!(
                            "attribute `{attribute}` decides where the resource sits in the tree; \
                             change it with updateResourceB"
                        ),
                    ));
                }
                check_size("patch", patch)
            }
            Operation::UpdateB { patch, .. } => {
                check_patch(patch)?;
                check_size("patch", patch)
            }
            Operation::UpdateC { resources } => {
                if resources.is_empty() || resources.len() > MAX_UPDATE_C {
                    return Err(AppError::bad_input(
                        "resources",
                        format!("replace between 1 and {MAX_UPDATE_C} resources"),
                    ));
                }
                let mut seen = BTreeSet::new();
                for replacement in resources {
                    if !seen.insert(replacement.id) {
                        return Err(AppError::bad_input(
                            "resources",
                            format!("resource {} is listed twice", replacement.id),
                        ));
                    }
                    check_attributes(config, "resources.attributes", &replacement.attributes)?;
                }
                Ok(())
            }
            Operation::Delete { .. } => Ok(()),
        }
    }
}

/// The queue a resource task kind runs on.
pub fn queue_of(kind: &str) -> Option<Queue> {
    KINDS
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, queue)| *queue)
}

/// Replaces every negative zero in `value` by `0.0`, in place.
/// Rewrites every number in `value` to its canonical text; the error is
/// the text of a number out of a double's range.
fn canonical_numbers(value: &mut Value) -> Result<(), String> {
    match value {
        Value::Number(number) => {
            if let Some(text) = canonical_number(number.as_str())? {
                *number = serde_json::from_str(&text).expect("a canonical number is JSON");
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(canonical_numbers),
        Value::Object(fields) => fields.values_mut().try_for_each(canonical_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

/// The canonical text of a JSON number, or `None` when `text` is already
/// canonical.
fn canonical_number(text: &str) -> Result<Option<String>, String> {
    let integer = !text.contains(['.', 'e', 'E']);
    if integer && text != "-0" {
        return Ok(None);
    }
    let double: f64 = text.parse().map_err(|_| text.to_owned())?;
    if !double.is_finite() {
        return Err(text.to_owned());
    }
    let canonical = plain_decimal(double);
    Ok((canonical != text).then_some(canonical))
}

/// A computed double as a JSON number in the same canonical form as a sent
/// one (`None` for infinities and NaN).
pub fn decimal_number(double: f64) -> Option<serde_json::Number> {
    double
        .is_finite()
        .then(|| serde_json::from_str(&plain_decimal(double)).expect("a plain decimal is JSON"))
}

/// A finite double in positional notation with at least one digit after
/// the point, from its shortest round-trip digits: `1e20` →
/// `100000000000000000000.0`, `1.5e-7` → `0.00000015`, `-0.0` → `0.0`.
fn plain_decimal(double: f64) -> String {
    if double == 0.0 {
        return "0.0".to_owned();
    }
    // `{:e}` writes the shortest digits that read back as `double`.
    let scientific = format!("{:e}", double.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().expect("`{:e}` writes an integer exponent");
    // How many digits stand before the point.
    let point = exponent + 1;
    let count = digits.len() as i64;
    let sign = if double < 0.0 { "-" } else { "" };
    if point <= 0 {
        let zeros = "0".repeat((-point) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else if point >= count {
        let zeros = "0".repeat((point - count) as usize);
        format!("{sign}{digits}{zeros}.0")
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{sign}{whole}.{fraction}")
    }
}

/// At most 40 characters of a number for an error message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn check_patch(patch: &Map<String, Value>) -> Result<(), AppError> {
    if patch.is_empty() {
        return Err(AppError::bad_input("patch", "the patch changes nothing"));
    }
    Ok(())
}

fn check_size(field: &'static str, attributes: &Map<String, Value>) -> Result<(), AppError> {
    let size = serde_json::to_vec(attributes).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_ATTRIBUTES_BYTES {
        return Err(AppError::bad_input(
            field,
            format!("attributes are limited to {MAX_ATTRIBUTES_BYTES} bytes of JSON"),
        ));
    }
    Ok(())
}

/// A complete attributes document: within the size limit, and every
/// position token it produces within [`MAX_TOKEN_LEN`].
pub fn check_attributes(
    config: &NodeConfig,
    field: &'static str,
    attributes: &Map<String, Value>,
) -> Result<(), AppError> {
    check_size(field, attributes)?;
    let value = Value::Object(attributes.clone());
    for spec in plan::resolve(config, &value) {
        if spec.position_token.len() > MAX_TOKEN_LEN {
            return Err(AppError::bad_input(
                field,
                format!(
                    "the `{}` position token is longer than {MAX_TOKEN_LEN} bytes",
                    config.classes[spec.class].name
                ),
            ));
        }
    }
    Ok(())
}

/// JSON merge patch (RFC 7386): `null` removes a key, objects merge,
/// anything else replaces.
pub fn merge_patch(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(inner) => {
                let entry = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                if let Value::Object(existing) = entry {
                    merge_patch(existing, inner);
                }
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::nodes::config::DEFAULT_CONFIG;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn operations_round_trip_as_payloads() {
        let op = Operation::UpdateA {
            resource_id: Uuid::nil(),
            patch: object(json!({"health": 2})),
        };
        let payload = serde_json::to_value(&op).unwrap();
        assert_eq!(payload["op"], "updateA");
        assert_eq!(payload["resourceId"], Uuid::nil().to_string());
        assert_eq!(Operation::from_payload(payload).unwrap(), op);
        assert_eq!(op.queue(), Queue::Short);
        assert_eq!(
            Operation::UpdateC { resources: vec![] }.queue(),
            Queue::Long
        );
    }

    #[test]
    fn a_negative_zero_becomes_zero_everywhere_in_the_attributes() {
        let text = |op: &Operation| serde_json::to_string(op).unwrap();
        let create = Operation::Create {
            attributes: object(
                serde_json::from_str(
                    r#"{"region": -0.0, "deep": {"list": [-0.0, 1, -0, 2.5]}, "neg": -1.5, "zero": 0}"#,
                )
                .unwrap(),
            ),
        }
        .canonical()
        .unwrap();
        let written = text(&create);
        assert!(!written.contains("-0"), "{written}");
        assert!(written.contains(r#""region":0.0"#), "{written}");
        // `-0` too: JSON parsers read it as a negative zero.
        assert!(written.contains(r#""list":[0.0,1,0.0,2.5]"#), "{written}");
        assert!(
            written.contains(r#""neg":-1.5"#) && written.contains(r#""zero":0"#),
            "{written}"
        );
        let replace = Operation::UpdateC {
            resources: vec![Replacement {
                id: Uuid::nil(),
                attributes: object(serde_json::from_str(r#"{"a": -0.0}"#).unwrap()),
            }],
        }
        .canonical()
        .unwrap();
        assert!(text(&replace).contains(r#""a":0.0"#));
    }

    #[test]
    fn integers_keep_their_text_and_other_numbers_are_plain_decimals() {
        let canonical = |text: &str| {
            let attributes = object(serde_json::from_str(&format!(r#"{{"n": {text}}}"#)).unwrap());
            Operation::UpdateB {
                resource_id: Uuid::nil(),
                patch: attributes,
            }
            .canonical()
            .map(|op| match op {
                Operation::UpdateB { patch, .. } => patch["n"].to_string(),
                _ => unreachable!(),
            })
        };
        for (sent, kept) in [
            ("100000000000000000000", "100000000000000000000"),
            (
                "-340282366920938463463374607431768211457",
                "-340282366920938463463374607431768211457",
            ),
            ("0", "0"),
            ("-0", "0.0"),
            ("-0.0", "0.0"),
            ("1", "1"),
            ("1.0", "1.0"),
            ("1.50", "1.5"),
            ("1e2", "100.0"),
            ("1E+2", "100.0"),
            ("2.5", "2.5"),
            ("-2.5e-3", "-0.0025"),
            ("1e-7", "0.0000001"),
            ("1.5e-7", "0.00000015"),
            ("1e20", "100000000000000000000.0"),
            ("123.456e1", "1234.56"),
            ("0.30000000000000004", "0.30000000000000004"),
            (
                "1.7976931348623157e308",
                &format!("17976931348623157{}.0", "0".repeat(292)),
            ),
        ] {
            assert_eq!(canonical(sent).unwrap(), kept, "{sent}");
        }
        // The stored payload reads back, whatever the integers' size
        // (serde's buffered enum form could hold none beyond 64 bits).
        for text in [
            "-123456789012345678901234567890",
            "340282366920938463463374607431768211457",
        ] {
            let op = Operation::UpdateA {
                resource_id: Uuid::nil(),
                patch: object(
                    serde_json::from_str(&format!(r#"{{"n": {text}, "m": [{text}]}}"#)).unwrap(),
                ),
            };
            let payload = serde_json::to_value(&op).unwrap();
            assert_eq!(Operation::from_payload(payload.clone()).unwrap(), op);
            let written = payload.to_string();
            assert_eq!(serde_json::from_str::<Operation>(&written).unwrap(), op);
        }
        // Floats keep their canonical text on the way back too.
        let op = Operation::Create {
            attributes: object(serde_json::from_str(r#"{"t": 1e-7, "u": 1e20}"#).unwrap()),
        }
        .canonical()
        .unwrap();
        let payload = serde_json::to_value(&op).unwrap();
        let back = Operation::from_payload(payload).unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            r#"{"op":"create","attributes":{"t":0.0000001,"u":100000000000000000000.0}}"#
        );
        let error = canonical("1e400").unwrap_err();
        assert_eq!(error.code(), "BAD_USER_INPUT");
        assert!(error.to_string().contains("out of range"), "{error}");
    }

    #[test]
    fn update_a_may_not_move_a_resource() {
        let config = NodeConfig::parse(DEFAULT_CONFIG).unwrap();
        let moving = Operation::UpdateA {
            resource_id: Uuid::nil(),
            patch: object(json!({"health": 1, "cluster": "k2"})),
        };
        let error = moving.validate(&config).unwrap_err().to_string();
        assert!(error.contains("`cluster`"), "{error}");
        let staying = Operation::UpdateA {
            resource_id: Uuid::nil(),
            patch: object(json!({"health": 1})),
        };
        assert!(staying.validate(&config).is_ok());
        let empty = Operation::UpdateB {
            resource_id: Uuid::nil(),
            patch: Map::new(),
        };
        assert!(empty.validate(&config).is_err());
    }

    #[test]
    fn oversized_documents_and_tokens_are_refused() {
        let config = NodeConfig::parse(DEFAULT_CONFIG).unwrap();
        let huge = Operation::Create {
            attributes: object(json!({"blob": "x".repeat(MAX_ATTRIBUTES_BYTES)})),
        };
        assert!(huge.validate(&config).is_err());
        let long_token = Operation::Create {
            attributes: object(json!({"region": "r".repeat(MAX_TOKEN_LEN + 1)})),
        };
        assert!(
            long_token
                .validate(&config)
                .unwrap_err()
                .to_string()
                .contains("`region`")
        );
        let id = Uuid::now_v7();
        let twice = Operation::UpdateC {
            resources: vec![
                Replacement {
                    id,
                    attributes: Map::new(),
                },
                Replacement {
                    id,
                    attributes: Map::new(),
                },
            ],
        };
        assert!(
            twice
                .validate(&config)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut target = object(json!({"a": 1, "b": {"c": 1, "d": 2}, "e": "x"}));
        merge_patch(
            &mut target,
            &object(json!({"a": null, "b": {"c": null, "f": 3}, "e": {"g": 1}, "h": [1]})),
        );
        assert_eq!(
            Value::Object(target),
            json!({"b": {"d": 2, "f": 3}, "e": {"g": 1}, "h": [1]})
        );
    }
}
