//! The small rule language of the node configuration, parsed once at
//! start-up (pure; the built-in [`super::engine::RuleEngine`] evaluates it).
//!
//! Both kinds of rule are expressions: numbers and values combined with
//! `min(…)` and `max(…)`. They differ in the values they read.
//!
//! - A **property rule** reads aggregates over the node's resources or over
//!   the nodes of a class it depends on: `max(attr.health)`,
//!   `sum(attr.cpu)`, `count()`, `count(attr.owner)`,
//!   `avg(attr.latency.p99)`, `max(database.status)`; combined, e.g.
//!   `max(max(attr.health), min(max(database.status), 1))`.
//! - A **patch rule** (`patchAggregatedStatus`) reads the node: `aggregated`
//!   (the computed aggregate), `status`, `properties.<name>`; e.g.
//!   `min(aggregated, 2)` caps what a node reports upwards.
//!
//! A value may be missing (an aggregate over nothing, an absent property):
//! "no value" counts as lower than any number, so `max` passes over it and
//! `min` of it is no value (see [`Expr::evaluate`]).

use std::fmt;

/// How an aggregate folds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregate {
    Max,
    Min,
    Sum,
    Avg,
    Count,
}

impl Aggregate {
    fn parse(name: &str) -> Option<Aggregate> {
        Some(match name {
            "max" => Aggregate::Max,
            "min" => Aggregate::Min,
            "sum" => Aggregate::Sum,
            "avg" => Aggregate::Avg,
            "count" => Aggregate::Count,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Max => "max",
            Aggregate::Min => "min",
            Aggregate::Sum => "sum",
            Aggregate::Avg => "avg",
            Aggregate::Count => "count",
        }
    }
}

/// What an aggregate folds over.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `count()`: the node's resources themselves.
    Resources,
    /// `attr.a.b`: an attribute (a path into the JSON) of each resource.
    Attribute(Vec<String>),
    /// `class.property`: a property of every node of a class this one
    /// depends on.
    Dependency { class: String, property: String },
}

/// `aggregate(source)`, the value a property rule reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Aggregation {
    pub aggregate: Aggregate,
    pub source: Source,
}

impl fmt::Display for Aggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Resources => String::new(),
            Source::Attribute(path) => format!("attr.{}", path.join(".")),
            Source::Dependency { class, property } => format!("{class}.{property}"),
        };
        write!(f, "{}({source})", self.aggregate.name())
    }
}

/// What a patch rule reads of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeValue {
    /// The aggregate computed from the node's status and its children.
    Aggregated,
    /// The node's own `properties.status`.
    Status,
    /// `properties.<name>`.
    Property(String),
}

impl fmt::Display for NodeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeValue::Aggregated => f.write_str("aggregated"),
            NodeValue::Status => f.write_str("status"),
            NodeValue::Property(name) => write!(f, "properties.{name}"),
        }
    }
}

/// A rule: numbers and values `V` combined with `min(…)` and `max(…)`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr<V> {
    Number(f64),
    Value(V),
    /// One argument or more.
    Min(Vec<Expr<V>>),
    /// One argument or more.
    Max(Vec<Expr<V>>),
}

/// A property rule: aggregates, combined.
pub type PropertyRule = Expr<Aggregation>;

/// A `patchAggregatedStatus` rule.
pub type PatchRule = Expr<NodeValue>;

impl<V> Expr<V> {
    /// The rule's number, `value` giving each value's (`None`: no value).
    /// No value counts as lower than any number, as `None < Some(_)` in
    /// Rust: `max` of no value and a number is the number, `min` of them
    /// is no value. So `min(max(database.status), 1)` has no value while
    /// there is no database, and `max(max(attr.health), …)` then is the
    /// health alone, instead of a cap turning nothing into 1.
    pub fn evaluate<F: FnMut(&V) -> Option<f64>>(&self, value: &mut F) -> Option<f64> {
        match self {
            Expr::Number(n) => Some(*n),
            Expr::Value(v) => value(v),
            Expr::Max(args) => args
                .iter()
                .filter_map(|arg| arg.evaluate(value))
                .reduce(f64::max),
            Expr::Min(args) => {
                let mut min: Option<f64> = None;
                for arg in args {
                    let n = arg.evaluate(value)?;
                    min = Some(min.map_or(n, |m| m.min(n)));
                }
                min
            }
        }
    }

    /// Every value the rule reads, left to right.
    pub fn values(&self) -> Vec<&V> {
        let mut values = Vec::new();
        let mut stack = vec![self];
        while let Some(expr) = stack.pop() {
            match expr {
                Expr::Number(_) => {}
                Expr::Value(v) => values.push(v),
                Expr::Min(args) | Expr::Max(args) => stack.extend(args.iter().rev()),
            }
        }
        values
    }
}

impl<V: fmt::Display> fmt::Display for Expr<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, args) = match self {
            Expr::Number(n) => return write!(f, "{n}"),
            Expr::Value(v) => return write!(f, "{v}"),
            Expr::Min(args) => ("min", args),
            Expr::Max(args) => ("max", args),
        };
        write!(f, "{name}(")?;
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{arg}")?;
        }
        f.write_str(")")
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Number(f64),
    Open,
    Close,
    Comma,
    Dot,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | ',' | '.' => {
                chars.next();
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    ',' => Token::Comma,
                    _ => Token::Dot,
                });
            }
            c if c.is_ascii_digit() || c == '-' => {
                let mut end = start + c.len_utf8();
                chars.next();
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_digit() || d == '.' {
                        end = i + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                let literal = &text[start..end];
                let number = literal
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| format!("`{literal}` is not a number"))?;
                tokens.push(Token::Number(number));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut end = start;
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' {
                        end = i + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Ident(text[start..end].to_owned()));
            }
            other => return Err(format!("unexpected character `{other}`")),
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn new(text: &str) -> Result<Parser, String> {
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err("the rule is empty".into());
        }
        Ok(Parser { tokens, at: 0 })
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn expect(&mut self, token: Token, what: &str) -> Result<(), String> {
        match self.next() {
            Some(found) if found == token => Ok(()),
            _ => Err(format!("expected {what}")),
        }
    }

    fn ident(&mut self, what: &str) -> Result<String, String> {
        match self.next() {
            Some(Token::Ident(name)) => Ok(name),
            _ => Err(format!("expected {what}")),
        }
    }

    fn end(&self) -> Result<(), String> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err("unexpected text after the rule".into()),
        }
    }

    /// `ident (. ident)*`
    fn path(&mut self, first: String) -> Result<Vec<String>, String> {
        let mut path = vec![first];
        while self.peek() == Some(&Token::Dot) {
            self.next();
            path.push(self.ident("a name after `.`")?);
        }
        Ok(path)
    }

    /// A number, a value (`V` decides what a name means) or `min(…)` /
    /// `max(…)` of expressions.
    fn expr<V: Operand>(&mut self) -> Result<Expr<V>, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            Some(Token::Ident(name)) => {
                if let Some(value) = V::parse(self, &name)? {
                    return Ok(Expr::Value(value));
                }
                self.expect(Token::Open, &format!("`(` after `{name}`"))?;
                let mut args = vec![self.expr()?];
                while self.peek() == Some(&Token::Comma) {
                    self.next();
                    args.push(self.expr()?);
                }
                self.expect(Token::Close, "`)`")?;
                Ok(if name == "min" {
                    Expr::Min(args)
                } else {
                    Expr::Max(args)
                })
            }
            _ => Err(V::EXPECTED.into()),
        }
    }

    /// After `name`: `(` and then a number or a call, so `name(…)` combines
    /// expressions rather than aggregating a source.
    fn combines(&self) -> bool {
        self.peek() == Some(&Token::Open)
            && match self.tokens.get(self.at + 1) {
                Some(Token::Number(_)) => true,
                Some(Token::Ident(_)) => self.tokens.get(self.at + 2) == Some(&Token::Open),
                _ => false,
            }
    }
}

/// The values one rule language reads (the operands of `min`/`max`).
trait Operand: Sized {
    /// What may start an expression, for the error message.
    const EXPECTED: &'static str;

    /// The value starting with `name` (just read), or `None` when `name`
    /// is `min`/`max` combining expressions.
    fn parse(parser: &mut Parser, name: &str) -> Result<Option<Self>, String>;
}

impl Operand for Aggregation {
    const EXPECTED: &'static str = "expected a number or an aggregate such as `max(attr.health)`";

    fn parse(parser: &mut Parser, name: &str) -> Result<Option<Self>, String> {
        let aggregate = Aggregate::parse(name).ok_or_else(|| {
            format!("unknown aggregate `{name}` (expected max, min, sum, avg or count)")
        })?;
        if parser.combines() {
            return match aggregate {
                Aggregate::Max | Aggregate::Min => Ok(None),
                _ => Err(format!(
                    "`{name}(…)` aggregates `attr.<name>` or `<class>.<property>`; \
                     only `min(…)` and `max(…)` combine numbers and aggregates"
                )),
            };
        }
        parser.expect(Token::Open, &format!("`(` after `{name}`"))?;
        let source = if parser.peek() == Some(&Token::Close) {
            if aggregate != Aggregate::Count {
                return Err(format!(
                    "`{name}()` needs a value: `attr.<name>` or `<class>.<property>`"
                ));
            }
            Source::Resources
        } else {
            let first = parser.ident("`attr.<name>` or `<class>.<property>`")?;
            let mut path = parser.path(first)?;
            if path.len() < 2 {
                return Err(format!(
                    "`{}` is not a value: write `attr.{0}` for a resource attribute or \
                     `<class>.{0}` for a property of a class this one depends on",
                    path[0]
                ));
            }
            if path[0] == "attr" {
                path.remove(0);
                Source::Attribute(path)
            } else if path.len() == 2 {
                let property = path.pop().unwrap_or_default();
                Source::Dependency {
                    class: path.pop().unwrap_or_default(),
                    property,
                }
            } else {
                return Err(format!(
                    "`{}` reads too deep: a dependency value is `<class>.<property>`",
                    path.join(".")
                ));
            }
        };
        let aggregation = Aggregation { aggregate, source };
        if parser.peek() == Some(&Token::Comma) {
            return Err(format!(
                "`{aggregation}` aggregates one value; combine aggregates with \
                 `{name}({aggregation}, …)`"
            ));
        }
        parser.expect(Token::Close, "`)`")?;
        Ok(Some(aggregation))
    }
}

impl Operand for NodeValue {
    const EXPECTED: &'static str = "expected a number, a name or `min(…)`/`max(…)`";

    fn parse(parser: &mut Parser, name: &str) -> Result<Option<Self>, String> {
        Ok(Some(match name {
            "aggregated" => NodeValue::Aggregated,
            "status" => NodeValue::Status,
            "properties" => {
                parser.expect(Token::Dot, "`.` after `properties`")?;
                NodeValue::Property(parser.ident("a property name")?)
            }
            "min" | "max" => return Ok(None),
            other => {
                return Err(format!(
                    "unknown name `{other}` (expected a number, `aggregated`, `status`, \
                     `properties.<name>`, `min(…)` or `max(…)`)"
                ));
            }
        }))
    }
}

/// Parses a property rule. Dependency classes are checked by the caller.
pub fn parse_property(text: &str) -> Result<PropertyRule, String> {
    let mut parser = Parser::new(text)?;
    let rule = parser.expr()?;
    parser.end()?;
    Ok(rule)
}

/// Parses a `patchAggregatedStatus` rule.
pub fn parse_patch(text: &str) -> Result<PatchRule, String> {
    let mut parser = Parser::new(text)?;
    let rule = parser.expr()?;
    parser.end()?;
    Ok(rule)
}

/// `{attr}` placeholders and literal text: which node of a class a resource
/// maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Attribute(Vec<String>),
}

/// Longest position token a resource may produce.
pub const MAX_TOKEN_LEN: usize = 256;

impl Template {
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                Some(i) if rest.as_bytes()[i] == b'}' => {
                    return Err("`}` without a matching `{`".into());
                }
                Some(i) => {
                    if i > 0 {
                        parts.push(Part::Literal(rest[..i].to_owned()));
                    }
                    let close = rest[i..].find('}').ok_or("`{` without a matching `}`")? + i;
                    let name = rest[i + 1..close].trim();
                    let path: Vec<String> = name.split('.').map(str::to_owned).collect();
                    if path.iter().any(|segment| !is_identifier(segment)) {
                        return Err(format!(
                            "`{{{name}}}` is not an attribute name (letters, digits, `_`, dotted paths)"
                        ));
                    }
                    parts.push(Part::Attribute(path));
                    rest = &rest[close + 1..];
                }
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        if !parts.iter().any(|part| matches!(part, Part::Attribute(_))) {
            return Err("a position template needs at least one `{attribute}`".into());
        }
        Ok(Template { parts })
    }

    /// The top-level attribute names the template reads.
    pub fn attributes(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Attribute(path) => Some(path[0].as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The position token of a resource, or `None` when an attribute it
    /// needs is missing, empty, or not a string, number or boolean.
    pub fn render(&self, attributes: &serde_json::Value) -> Option<String> {
        let mut token = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(text) => token.push_str(text),
                Part::Attribute(path) => match lookup(attributes, path)? {
                    serde_json::Value::String(s) if !s.is_empty() => token.push_str(s),
                    serde_json::Value::Number(n) => token.push_str(&n.to_string()),
                    serde_json::Value::Bool(b) => token.push_str(if *b { "true" } else { "false" }),
                    _ => return None,
                },
            }
        }
        Some(token)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(text) => f.write_str(text)?,
                Part::Attribute(path) => write!(f, "{{{}}}", path.join("."))?,
            }
        }
        Ok(())
    }
}

/// `value.a.b…`
pub fn lookup<'v>(value: &'v serde_json::Value, path: &[String]) -> Option<&'v serde_json::Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
}

/// Letters, digits and `_`, not starting with a digit.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn aggregation(aggregate: Aggregate, source: Source) -> PropertyRule {
        Expr::Value(Aggregation { aggregate, source })
    }

    #[test]
    fn property_rules_parse_every_source() {
        assert_eq!(
            parse_property("max(attr.health)").unwrap(),
            aggregation(Aggregate::Max, Source::Attribute(vec!["health".into()]))
        );
        assert_eq!(
            parse_property(" count ( ) ").unwrap(),
            aggregation(Aggregate::Count, Source::Resources)
        );
        assert_eq!(
            parse_property("avg(attr.latency.p99)").unwrap(),
            aggregation(
                Aggregate::Avg,
                Source::Attribute(vec!["latency".into(), "p99".into()])
            )
        );
        assert_eq!(
            parse_property("sum(database.connections)").unwrap(),
            aggregation(
                Aggregate::Sum,
                Source::Dependency {
                    class: "database".into(),
                    property: "connections".into()
                }
            )
        );
        assert_eq!(
            parse_property("min(attr.cpu)").unwrap().to_string(),
            "min(attr.cpu)"
        );
    }

    #[test]
    fn property_rules_combine_aggregates_with_min_and_max() {
        let rule =
            parse_property("max( max(attr.health), min(max(database.status), 1.0) )").unwrap();
        let health = aggregation(Aggregate::Max, Source::Attribute(vec!["health".into()]));
        let database = aggregation(
            Aggregate::Max,
            Source::Dependency {
                class: "database".into(),
                property: "status".into(),
            },
        );
        assert_eq!(
            rule,
            Expr::Max(vec![
                health.clone(),
                Expr::Min(vec![database.clone(), Expr::Number(1.0)])
            ])
        );
        // Canonical text: what `nodeConfig` shows and the digest reads.
        assert_eq!(
            rule.to_string(),
            "max(max(attr.health), min(max(database.status), 1))"
        );
        assert_eq!(parse_property(&rule.to_string()).unwrap(), rule);
        let values: Vec<String> = rule.values().iter().map(ToString::to_string).collect();
        assert_eq!(values, ["max(attr.health)", "max(database.status)"]);
        assert_eq!(
            parse_property("min(2, count())").unwrap(),
            Expr::Min(vec![
                Expr::Number(2.0),
                aggregation(Aggregate::Count, Source::Resources)
            ])
        );
        assert_eq!(parse_property("-1").unwrap(), Expr::Number(-1.0));
    }

    #[test]
    fn no_value_counts_as_lower_than_any_number() {
        let rule = parse_property("max(max(attr.h), min(max(db.s), 1))").unwrap();
        let with = |h: Option<f64>, s: Option<f64>| {
            rule.evaluate(&mut |aggregation: &Aggregation| match &aggregation.source {
                Source::Attribute(_) => h,
                _ => s,
            })
        };
        assert_eq!(with(Some(0.0), None), Some(0.0), "no database: the health");
        assert_eq!(with(None, None), None);
        assert_eq!(with(Some(0.0), Some(2.0)), Some(1.0), "capped at 1");
        assert_eq!(with(Some(3.0), Some(2.0)), Some(3.0));
        assert_eq!(with(None, Some(3.0)), Some(1.0));
        assert_eq!(with(Some(0.0), Some(0.0)), Some(0.0));
    }

    #[test]
    fn property_rule_errors_say_what_is_wrong() {
        for (rule, needle) in [
            ("", "empty"),
            ("maxx(attr.a)", "unknown aggregate `maxx`"),
            ("max()", "needs a value"),
            ("max(health)", "write `attr.health`"),
            ("max(a.b.c)", "too deep"),
            ("max(attr.a", "expected `)`"),
            ("max(attr.a) + 1", "unexpected character `+`"),
            ("max(attr.a) max", "unexpected text"),
            (
                "max(attr.a, 1)",
                "combine aggregates with `max(max(attr.a), …)`",
            ),
            ("sum(max(attr.a), 1)", "only `min(…)` and `max(…)` combine"),
            ("max(max(attr.a), )", "expected a number or an aggregate"),
            (
                "min(max(attr.a), aggregated)",
                "unknown aggregate `aggregated`",
            ),
        ] {
            let error = parse_property(rule).unwrap_err();
            assert!(error.contains(needle), "{rule}: {error}");
        }
    }

    #[test]
    fn patch_rules_parse_nested_calls() {
        let rule = parse_patch("min(aggregated, max(status, properties.floor), 2)").unwrap();
        assert_eq!(
            rule,
            Expr::Min(vec![
                Expr::Value(NodeValue::Aggregated),
                Expr::Max(vec![
                    Expr::Value(NodeValue::Status),
                    Expr::Value(NodeValue::Property("floor".into()))
                ]),
                Expr::Number(2.0)
            ])
        );
        assert_eq!(
            rule.to_string(),
            "min(aggregated, max(status, properties.floor), 2)"
        );
        assert_eq!(parse_patch("-1").unwrap(), Expr::Number(-1.0));
        assert!(
            parse_patch("avg(aggregated)")
                .unwrap_err()
                .contains("unknown name `avg`")
        );
        assert!(parse_patch("min(aggregated,)").is_err());
        assert!(parse_patch("1.2.3").unwrap_err().contains("not a number"));
    }

    #[test]
    fn templates_render_tokens_or_nothing() {
        let template = Template::parse("{region}-{zone.name}").unwrap();
        assert_eq!(template.to_string(), "{region}-{zone.name}");
        assert_eq!(
            template.attributes().collect::<Vec<_>>(),
            ["region", "zone"]
        );
        assert_eq!(
            template
                .render(&json!({"region": "eu", "zone": {"name": "a"}}))
                .as_deref(),
            Some("eu-a")
        );
        assert_eq!(
            template
                .render(&json!({"region": 3, "zone": {"name": true}}))
                .as_deref(),
            Some("3-true")
        );
        for missing in [
            json!({"region": "eu"}),
            json!({"region": "", "zone": {"name": "a"}}),
            json!({"region": null, "zone": {"name": "a"}}),
            json!({"region": ["eu"], "zone": {"name": "a"}}),
        ] {
            assert_eq!(template.render(&missing), None, "{missing}");
        }
    }

    #[test]
    fn template_errors() {
        assert!(
            Template::parse("region")
                .unwrap_err()
                .contains("at least one")
        );
        assert!(
            Template::parse("{region")
                .unwrap_err()
                .contains("matching `}`")
        );
        assert!(
            Template::parse("region}")
                .unwrap_err()
                .contains("matching `{`")
        );
        assert!(
            Template::parse("{re gion}")
                .unwrap_err()
                .contains("not an attribute")
        );
        assert!(Template::parse("{}").is_err());
    }
}
