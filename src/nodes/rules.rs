//! The small rule language of the node configuration, parsed once at
//! start-up (pure; the built-in [`super::engine::RuleEngine`] evaluates it).
//!
//! - A **property rule** aggregates over the node's resources or over the
//!   nodes of a class it depends on: `max(attr.health)`, `sum(attr.cpu)`,
//!   `count()`, `count(attr.owner)`, `avg(attr.latency.p99)`,
//!   `max(database.status)`.
//! - A **patch rule** (`patchAggregatedStatus`) is a scalar expression over
//!   the node: numbers, `aggregated` (the computed aggregate), `status`,
//!   `properties.<name>`, combined with `min(…)` and `max(…)`; e.g.
//!   `min(aggregated, 2)` caps what a node reports upwards.

use std::fmt;

/// How a property rule folds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// What a property rule aggregates over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `count()`: the node's resources themselves.
    Resources,
    /// `attr.a.b`: an attribute (a path into the JSON) of each resource.
    Attribute(Vec<String>),
    /// `class.property`: a property of every node of a class this one
    /// depends on.
    Dependency { class: String, property: String },
}

/// One property of a class: `aggregate(source)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyRule {
    pub aggregate: Aggregate,
    pub source: Source,
}

impl fmt::Display for PropertyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Resources => String::new(),
            Source::Attribute(path) => format!("attr.{}", path.join(".")),
            Source::Dependency { class, property } => format!("{class}.{property}"),
        };
        write!(f, "{}({source})", self.aggregate.name())
    }
}

/// A patch rule's expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(f64),
    /// The aggregate computed from the node's status and its children.
    Aggregated,
    /// The node's own `properties.status`.
    Status,
    /// `properties.<name>`.
    Property(String),
    Min(Vec<Expr>),
    Max(Vec<Expr>),
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

    fn expr(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            Some(Token::Ident(name)) => match name.as_str() {
                "aggregated" => Ok(Expr::Aggregated),
                "status" => Ok(Expr::Status),
                "properties" => {
                    self.expect(Token::Dot, "`.` after `properties`")?;
                    Ok(Expr::Property(self.ident("a property name")?))
                }
                "min" | "max" => {
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
                other => Err(format!(
                    "unknown name `{other}` (expected a number, `aggregated`, `status`, \
                     `properties.<name>`, `min(…)` or `max(…)`)"
                )),
            },
            _ => Err("expected a number, a name or `min(…)`/`max(…)`".into()),
        }
    }
}

/// Parses a property rule. Dependency classes are checked by the caller.
pub fn parse_property(text: &str) -> Result<PropertyRule, String> {
    let mut parser = Parser::new(text)?;
    let name = parser.ident("an aggregate: max, min, sum, avg or count")?;
    let aggregate = Aggregate::parse(&name).ok_or_else(|| {
        format!("unknown aggregate `{name}` (expected max, min, sum, avg or count)")
    })?;
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
    parser.expect(Token::Close, "`)`")?;
    parser.end()?;
    Ok(PropertyRule { aggregate, source })
}

/// Parses a `patchAggregatedStatus` expression.
pub fn parse_patch(text: &str) -> Result<Expr, String> {
    let mut parser = Parser::new(text)?;
    let expr = parser.expr()?;
    parser.end()?;
    Ok(expr)
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

    #[test]
    fn property_rules_parse_every_source() {
        assert_eq!(
            parse_property("max(attr.health)").unwrap(),
            PropertyRule {
                aggregate: Aggregate::Max,
                source: Source::Attribute(vec!["health".into()])
            }
        );
        assert_eq!(
            parse_property(" count ( ) ").unwrap().source,
            Source::Resources
        );
        assert_eq!(
            parse_property("avg(attr.latency.p99)").unwrap().source,
            Source::Attribute(vec!["latency".into(), "p99".into()])
        );
        assert_eq!(
            parse_property("sum(database.connections)").unwrap().source,
            Source::Dependency {
                class: "database".into(),
                property: "connections".into()
            }
        );
        assert_eq!(
            parse_property("min(attr.cpu)").unwrap().to_string(),
            "min(attr.cpu)"
        );
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
        ] {
            let error = parse_property(rule).unwrap_err();
            assert!(error.contains(needle), "{rule}: {error}");
        }
    }

    #[test]
    fn patch_rules_parse_nested_calls() {
        assert_eq!(
            parse_patch("min(aggregated, max(status, properties.floor), 2)").unwrap(),
            Expr::Min(vec![
                Expr::Aggregated,
                Expr::Max(vec![Expr::Status, Expr::Property("floor".into())]),
                Expr::Number(2.0)
            ])
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
