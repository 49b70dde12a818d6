//! A database row's property values as plain, grep-able strings: pure, no
//! I/O. Every property type Notion documents has a rendering; values with
//! several parts (multi-select options, people, relations, files) are
//! sorted and joined with `, ` so the string does not change when only the
//! order online does. A type whose value the string cannot hold in full (a
//! formula's or rollup's computed value, files whose bytes are not
//! mirrored, a relation cut at Notion's 25 references, a type we do not
//! know) keeps what it can and ends with a drill-down clue in parentheses
//! — `(formula)`, `(rollup)`, `(files)`, `(more online)`,
//! `(unsupported: <type>)` — and counts as a `lossy_property` degradation
//! whose id is `<row id>:<property name>`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::api::dashed;
use crate::docs::adapter::{Degradation, DegradationKind, RowProperties};

/// One property rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The string written into the frontmatter and `_index.md`.
    pub text: String,
    /// Whether the string lost something (it then ends with its clue).
    pub lossy: bool,
}

impl Rendered {
    fn exact(text: impl Into<String>) -> Self {
        Rendered {
            text: text.into(),
            lossy: false,
        }
    }

    fn lossy(text: &str, clue: &str) -> Self {
        let text = if text.is_empty() {
            format!("({clue})")
        } else {
            format!("{text} ({clue})")
        };
        Rendered { text, lossy: true }
    }
}

/// Every property of one row, sorted by name.
pub fn render_row(
    row_id: &str,
    properties: &Map<String, Value>,
    titles: &HashMap<String, String>,
) -> RowProperties {
    let mut row = RowProperties::default();
    for (name, value) in properties {
        let rendered = render_value(value, titles);
        if rendered.lossy {
            row.degradations.push(Degradation {
                kind: DegradationKind::LossyProperty,
                id: format!("{row_id}:{name}"),
            });
        }
        row.values.insert(name.clone(), rendered.text);
    }
    row.degradations.sort_by(|a, b| a.id.cmp(&b.id));
    row
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn rich_text(runs: Option<&Value>) -> String {
    runs.and_then(Value::as_array)
        .map(|runs| {
            runs.iter()
                .filter_map(|run| str_at(run, "plain_text"))
                .collect()
        })
        .unwrap_or_default()
}

fn number(value: Option<&Value>) -> String {
    match value {
        Some(Value::Number(number)) => number.to_string(),
        _ => String::new(),
    }
}

fn date(value: Option<&Value>) -> String {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return String::new();
    };
    let start = str_at(value, "start").unwrap_or_default();
    match str_at(value, "end") {
        Some(end) => format!("{start} → {end}"),
        None => start.to_owned(),
    }
}

fn user(value: &Value) -> String {
    str_at(value, "name")
        .or_else(|| value.get("person").and_then(|p| str_at(p, "email")))
        .or_else(|| str_at(value, "id"))
        .unwrap_or_default()
        .to_owned()
}

fn sorted_join(mut parts: Vec<String>) -> String {
    parts.retain(|part| !part.is_empty());
    parts.sort();
    parts.join(", ")
}

fn each(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

/// One property value (the object with `type` and the value under it).
pub fn render_value(value: &Value, titles: &HashMap<String, String>) -> Rendered {
    let kind = str_at(value, "type").unwrap_or_default();
    let inner = value.get(kind);
    match kind {
        "title" | "rich_text" => Rendered::exact(rich_text(inner)),
        "number" => Rendered::exact(number(inner)),
        "select" | "status" => {
            Rendered::exact(inner.and_then(|o| str_at(o, "name")).unwrap_or_default())
        }
        "multi_select" => Rendered::exact(sorted_join(
            each(inner)
                .filter_map(|option| str_at(option, "name"))
                .map(str::to_owned)
                .collect(),
        )),
        "date" => Rendered::exact(date(inner)),
        "checkbox" => Rendered::exact(match inner {
            Some(Value::Bool(true)) => "true",
            _ => "false",
        }),
        "url" | "email" | "phone_number" | "created_time" | "last_edited_time" => {
            Rendered::exact(inner.and_then(Value::as_str).unwrap_or_default())
        }
        "people" => Rendered::exact(sorted_join(each(inner).map(user).collect())),
        "created_by" | "last_edited_by" => Rendered::exact(inner.map(user).unwrap_or_default()),
        "relation" => {
            let text = sorted_join(
                each(inner)
                    .filter_map(|target| str_at(target, "id"))
                    .map(|id| {
                        let key = dashed(id).unwrap_or_else(|| id.to_owned());
                        titles.get(&key).cloned().unwrap_or(key)
                    })
                    .collect(),
            );
            if value.get("has_more").and_then(Value::as_bool) == Some(true) {
                Rendered::lossy(&text, "more online")
            } else {
                Rendered::exact(text)
            }
        }
        "files" => {
            let names = sorted_join(
                each(inner)
                    .map(|file| {
                        str_at(file, "name")
                            .or_else(|| file.get("external").and_then(|e| str_at(e, "url")))
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .collect(),
            );
            if names.is_empty() {
                Rendered::exact("")
            } else {
                Rendered::lossy(&names, "files")
            }
        }
        "formula" => {
            let result = inner.map(computed).unwrap_or_default();
            Rendered::lossy(&result, "formula")
        }
        "rollup" => {
            let result = inner
                .map(|r| computed_rollup(r, titles))
                .unwrap_or_default();
            Rendered::lossy(&result, "rollup")
        }
        "unique_id" => {
            let id = number(inner.and_then(|u| u.get("number")));
            Rendered::exact(match inner.and_then(|u| str_at(u, "prefix")) {
                Some(prefix) if !id.is_empty() => format!("{prefix}-{id}"),
                _ => id,
            })
        }
        "verification" => {
            let state = inner.and_then(|v| str_at(v, "state")).unwrap_or_default();
            let by = inner
                .and_then(|v| v.get("verified_by"))
                .filter(|v| !v.is_null());
            let until = date(inner.and_then(|v| v.get("date")));
            let mut text = state.to_owned();
            if let Some(by) = by {
                text.push_str(&format!(" by {}", user(by)));
            }
            if !until.is_empty() {
                text.push_str(&format!(" ({until})"));
            }
            Rendered::exact(text)
        }
        "place" | "location" => Rendered::exact(
            inner
                .filter(|p| !p.is_null())
                .map(|place| {
                    str_at(place, "name")
                        .or_else(|| str_at(place, "address"))
                        .map(str::to_owned)
                        .unwrap_or_else(|| {
                            format!("{},{}", number(place.get("lat")), number(place.get("lon")))
                        })
                })
                .unwrap_or_default(),
        ),
        // A button holds no data: nothing to lose.
        "button" => Rendered::exact(""),
        other => Rendered::lossy("", &format!("unsupported: {other}")),
    }
}

/// A formula's result: `{ "type": "number", "number": 3 }` and the like.
fn computed(result: &Value) -> String {
    let kind = str_at(result, "type").unwrap_or_default();
    let inner = result.get(kind);
    match kind {
        "string" => inner.and_then(Value::as_str).unwrap_or_default().to_owned(),
        "number" => number(inner),
        "boolean" => match inner {
            Some(Value::Bool(b)) => b.to_string(),
            _ => String::new(),
        },
        "date" => date(inner),
        _ => String::new(),
    }
}

/// A rollup's result: a number, a date, or an array of property values.
fn computed_rollup(result: &Value, titles: &HashMap<String, String>) -> String {
    let kind = str_at(result, "type").unwrap_or_default();
    match kind {
        "array" => sorted_join(
            each(result.get("array"))
                .map(|item| render_value(item, titles).text)
                .collect(),
        ),
        _ => computed(result),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn titles() -> HashMap<String, String> {
        HashMap::from([(
            "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa".to_owned(),
            "Launch".to_owned(),
        )])
    }

    /// Every property type Notion documents, as a data source query
    /// returns it, and its rendering.
    #[test]
    fn every_property_type_renders_to_a_greppable_string() {
        let cases: Vec<(Value, &str, bool)> = vec![
            (
                json!({"type": "title", "title": [{"plain_text": "Ship "}, {"plain_text": "it"}]}),
                "Ship it",
                false,
            ),
            (
                json!({"type": "rich_text", "rich_text": [{"plain_text": "notes"}]}),
                "notes",
                false,
            ),
            (json!({"type": "rich_text", "rich_text": []}), "", false),
            (json!({"type": "number", "number": 42}), "42", false),
            (json!({"type": "number", "number": 2.5}), "2.5", false),
            (json!({"type": "number", "number": null}), "", false),
            (
                json!({"type": "select", "select": {"name": "High"}}),
                "High",
                false,
            ),
            (json!({"type": "select", "select": null}), "", false),
            (
                json!({"type": "status", "status": {"name": "Done"}}),
                "Done",
                false,
            ),
            (
                json!({"type": "multi_select", "multi_select": [{"name": "ux"}, {"name": "api"}]}),
                "api, ux",
                false,
            ),
            (
                json!({"type": "date", "date": {"start": "2026-12-01"}}),
                "2026-12-01",
                false,
            ),
            (
                json!({"type": "date", "date": {"start": "2026-12-01", "end": "2026-12-03"}}),
                "2026-12-01 → 2026-12-03",
                false,
            ),
            (json!({"type": "date", "date": null}), "", false),
            (json!({"type": "checkbox", "checkbox": true}), "true", false),
            (
                json!({"type": "checkbox", "checkbox": false}),
                "false",
                false,
            ),
            (
                json!({"type": "url", "url": "https://x.test/a"}),
                "https://x.test/a",
                false,
            ),
            (
                json!({"type": "email", "email": "ada@x.test"}),
                "ada@x.test",
                false,
            ),
            (
                json!({"type": "phone_number", "phone_number": "+1 555"}),
                "+1 555",
                false,
            ),
            (
                json!({"type": "people", "people": [{"object": "user", "id": "u2", "name": "Zoe"}, {"object": "user", "id": "u1", "name": "Ada"}]}),
                "Ada, Zoe",
                false,
            ),
            (
                json!({"type": "people", "people": [{"object": "user", "id": "u3"}]}),
                "u3",
                false,
            ),
            (
                json!({"type": "created_by", "created_by": {"object": "user", "id": "u1", "name": "Ada"}}),
                "Ada",
                false,
            ),
            (
                json!({"type": "last_edited_by", "last_edited_by": {"object": "user", "id": "u9"}}),
                "u9",
                false,
            ),
            (
                json!({"type": "created_time", "created_time": "2026-11-01T08:00:00.000Z"}),
                "2026-11-01T08:00:00.000Z",
                false,
            ),
            (
                json!({"type": "last_edited_time", "last_edited_time": "2026-11-02T08:00:00.000Z"}),
                "2026-11-02T08:00:00.000Z",
                false,
            ),
            (
                json!({"type": "relation", "relation": [{"id": "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"}, {"id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}], "has_more": false}),
                "Launch, bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb",
                false,
            ),
            (
                json!({"type": "relation", "relation": [{"id": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"}], "has_more": true}),
                "Launch (more online)",
                true,
            ),
            (
                json!({"type": "files", "files": [{"name": "b.pdf", "type": "file", "file": {"url": "https://s3/b.pdf?X-Amz-Signature=1", "expiry_time": "2026-12-01T00:00:00Z"}}, {"name": "a.png", "type": "external", "external": {"url": "https://x.test/a.png"}}]}),
                "a.png, b.pdf (files)",
                true,
            ),
            (json!({"type": "files", "files": []}), "", false),
            (
                json!({"type": "formula", "formula": {"type": "number", "number": 7}}),
                "7 (formula)",
                true,
            ),
            (
                json!({"type": "formula", "formula": {"type": "string", "string": "late"}}),
                "late (formula)",
                true,
            ),
            (
                json!({"type": "formula", "formula": {"type": "boolean", "boolean": false}}),
                "false (formula)",
                true,
            ),
            (
                json!({"type": "formula", "formula": {"type": "date", "date": {"start": "2026-01-01"}}}),
                "2026-01-01 (formula)",
                true,
            ),
            (
                json!({"type": "rollup", "rollup": {"type": "number", "number": 3, "function": "count"}}),
                "3 (rollup)",
                true,
            ),
            (
                json!({"type": "rollup", "rollup": {"type": "array", "array": [{"type": "title", "title": [{"plain_text": "b"}]}, {"type": "title", "title": [{"plain_text": "a"}]}]}}),
                "a, b (rollup)",
                true,
            ),
            (
                json!({"type": "rollup", "rollup": {"type": "incomplete", "incomplete": {}}}),
                "(rollup)",
                true,
            ),
            (
                json!({"type": "unique_id", "unique_id": {"prefix": "TASK", "number": 12}}),
                "TASK-12",
                false,
            ),
            (
                json!({"type": "unique_id", "unique_id": {"prefix": null, "number": 3}}),
                "3",
                false,
            ),
            (
                json!({"type": "verification", "verification": {"state": "verified", "verified_by": {"object": "user", "id": "u1", "name": "Ada"}, "date": {"start": "2026-12-01", "end": "2027-03-01"}}}),
                "verified by Ada (2026-12-01 → 2027-03-01)",
                false,
            ),
            (
                json!({"type": "verification", "verification": {"state": "unverified", "verified_by": null, "date": null}}),
                "unverified",
                false,
            ),
            (
                json!({"type": "place", "place": {"name": "Office", "lat": 1.5, "lon": 2.5}}),
                "Office",
                false,
            ),
            (
                json!({"type": "place", "place": {"lat": 1.5, "lon": 2.5}}),
                "1.5,2.5",
                false,
            ),
            (json!({"type": "button", "button": {}}), "", false),
            (
                json!({"type": "hologram", "hologram": {}}),
                "(unsupported: hologram)",
                true,
            ),
        ];
        for (value, text, lossy) in cases {
            let rendered = render_value(&value, &titles());
            assert_eq!(
                rendered,
                Rendered {
                    text: text.to_owned(),
                    lossy
                },
                "{value}"
            );
        }
    }

    #[test]
    fn a_row_is_sorted_by_name_and_counts_its_losses() {
        let properties = json!({
            "Tags": {"id": "t", "type": "multi_select", "multi_select": [{"name": "b"}, {"name": "a"}]},
            "Count": {"id": "c", "type": "rollup", "rollup": {"type": "number", "number": 1}},
            "Name": {"id": "title", "type": "title", "title": [{"plain_text": "Row"}]},
            "Score": {"id": "s", "type": "formula", "formula": {"type": "number", "number": 9}},
        });
        let row = render_row("r1", properties.as_object().unwrap(), &titles());
        assert_eq!(
            row.canonical(),
            r#"{"Count":"1 (rollup)","Name":"Row","Score":"9 (formula)","Tags":"a, b"}"#
        );
        assert_eq!(
            row.degradations,
            [
                Degradation {
                    kind: DegradationKind::LossyProperty,
                    id: "r1:Count".into()
                },
                Degradation {
                    kind: DegradationKind::LossyProperty,
                    id: "r1:Score".into()
                },
            ]
        );
    }
}
