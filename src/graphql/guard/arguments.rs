//! Every value written into a document — field and directive arguments,
//! variable defaults — checked against the input rules (`crate::input`):
//! no NUL, no overlong string, bounded nesting. Variables get the same
//! check in the guard; together they cover every string a GraphQL request
//! can hand a resolver.

use async_graphql::{
    Pos, Positioned,
    parser::types::{Directive, ExecutableDocument, Selection, SelectionSet},
};

use async_graphql_value::Value;

use crate::input::{InputError, Tree, check_value};

/// A value in the document that breaks an input rule.
#[derive(Debug, PartialEq)]
pub struct ArgumentProblem {
    /// The argument's name, or the variable's (`$name`) for a default.
    pub argument: String,
    /// What the value is: "argument `name` of field `createGroup`",
    /// "the default of variable `$q`"…
    pub subject: String,
    pub error: InputError,
    pub pos: Pos,
}

impl ArgumentProblem {
    pub fn message(&self) -> String {
        self.error.describe(&self.subject, &self.argument)
    }
}

type Found = Result<(), ArgumentProblem>;

fn check<T: Tree>(
    argument: &str,
    subject: impl FnOnce() -> String,
    value: &Positioned<T>,
) -> Found {
    check_value(&value.node).map_err(|error| ArgumentProblem {
        argument: argument.to_owned(),
        subject: subject(),
        error,
        pos: value.pos,
    })
}

fn directives(list: &[Positioned<Directive>]) -> Found {
    for directive in list {
        let name = directive.node.name.node.as_str();
        for (argument, value) in &directive.node.arguments {
            let subject = || format!("argument `{}` of directive `@{name}`", argument.node);
            check::<Value>(&argument.node, subject, value)?;
        }
    }
    Ok(())
}

fn selections(set: &SelectionSet) -> Found {
    for selection in &set.items {
        match &selection.node {
            Selection::Field(field) => {
                let field = &field.node;
                let name = field.name.node.as_str();
                for (argument, value) in &field.arguments {
                    let subject = || format!("argument `{}` of field `{name}`", argument.node);
                    check::<Value>(&argument.node, subject, value)?;
                }
                directives(&field.directives)?;
                selections(&field.selection_set.node)?;
            }
            Selection::FragmentSpread(spread) => directives(&spread.node.directives)?,
            Selection::InlineFragment(fragment) => {
                directives(&fragment.node.directives)?;
                selections(&fragment.node.selection_set.node)?;
            }
        }
    }
    Ok(())
}

/// The first value of `document` that breaks an input rule, if any.
pub fn check_document(document: &ExecutableDocument) -> Found {
    for (_, operation) in document.operations.iter() {
        let operation = &operation.node;
        for variable in &operation.variable_definitions {
            let name = format!("${}", variable.node.name.node);
            if let Some(default) = &variable.node.default_value {
                check(
                    &name,
                    || format!("the default of variable `{name}`"),
                    default,
                )?;
            }
            directives(&variable.node.directives)?;
        }
        directives(&operation.directives)?;
        selections(&operation.selection_set.node)?;
    }
    for fragment in document.fragments.values() {
        directives(&fragment.node.directives)?;
        selections(&fragment.node.selection_set.node)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Problem;

    fn problem(query: &str) -> Option<ArgumentProblem> {
        check_document(&async_graphql::parser::parse_query(query).unwrap()).err()
    }

    #[test]
    fn clean_documents_pass() {
        assert_eq!(
            problem(
                r#"query($n: String = "x") { createGroup(name: $n) { id } search(query: "ok") { total } }"#
            ),
            None
        );
    }

    #[test]
    fn every_place_a_value_can_be_written_is_checked() {
        let nul = r#""a\u0000b""#;
        for (query, subject) in [
            (
                format!("mutation {{ createGroup(name: {nul}) {{ id }} }}"),
                "argument `name` of field `createGroup`",
            ),
            (
                format!("{{ me @skip(if: false) {{ id @deprecated(reason: {nul}) }} }}"),
                "argument `reason` of directive `@deprecated`",
            ),
            (
                format!("query($q: String = {nul}) {{ me {{ id }} }}"),
                "the default of variable `$q`",
            ),
            (
                format!("{{ ...F }} fragment F on Query {{ search(query: {nul}) {{ total }} }}"),
                "argument `query` of field `search`",
            ),
            (
                format!(
                    "{{ ... on Query {{ items(filter: {{ query: {nul} }}) {{ totalCount }} }} }}"
                ),
                "argument `filter` of field `items`",
            ),
        ] {
            let found = problem(&query).unwrap_or_else(|| panic!("{query} passes"));
            assert_eq!(found.subject, subject, "{query}");
            assert_eq!(found.error.problem, Problem::Nul);
        }
    }

    #[test]
    fn the_message_names_the_argument_and_the_place_inside_it() {
        let found = problem(r#"{ items(filter: { query: "\u0000" }) { totalCount } }"#).unwrap();
        assert_eq!(
            found.message(),
            "argument `filter` of field `items` contains a NUL character (at `filter.query`)"
        );
    }
}
