//! The pre-scan that runs before the GraphQL parser: how deeply a document
//! nests `[` and `{` (list and object values, list types, selection sets),
//! outside strings, block strings and comments.
//!
//! async-graphql's parser recurses once per level of a list or object
//! value without a bound, so about 1,500 levels overflow a worker thread's
//! stack and abort the process (`docs/upstream/async-graphql-value-nesting.md`).
//! One linear pass over the text, with no recursion of its own, refuses
//! such documents before the parser sees them. It follows the GraphQL
//! lexical grammar (October 2021, §2.1); where the text is not valid
//! GraphQL it errs towards counting a bracket, never towards hiding one,
//! and the parser refuses the text anyway.

/// The deepest `[`/`{` nesting in `query`, stopping early once it passes
/// `limit` (the answer is then `limit + 1`).
pub fn max_nesting(query: &str, limit: usize) -> usize {
    let bytes = query.as_bytes();
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                // A comment runs to the end of the line.
                while i < bytes.len() && !matches!(bytes[i], b'\n' | b'\r') {
                    i += 1;
                }
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                // A block string ends at the next `"""` not escaped as `\"""`.
                i += 3;
                while i < bytes.len() && !bytes[i..].starts_with(b"\"\"\"") {
                    i += if bytes[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 3;
                continue;
            }
            b'"' => {
                // A string ends at an unescaped `"`; it cannot span lines,
                // so a line break ends it too (the parser refuses that).
                i += 1;
                while i < bytes.len() && !matches!(bytes[i], b'"' | b'\n' | b'\r') {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > limit {
                        return deepest;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn nested_list(levels: usize) -> String {
        format!(
            "{{ __typename(x: {}1{}) }}",
            "[".repeat(levels),
            "]".repeat(levels)
        )
    }

    #[test]
    fn counts_values_types_and_selections_together() {
        assert_eq!(max_nesting("{ me { id } }", 64), 2);
        assert_eq!(max_nesting(&nested_list(10), 64), 11);
        assert_eq!(max_nesting("query($v: [[Int]]) { a }", 64), 2);
        assert_eq!(max_nesting("{ a(x: {b: {c: [1]}}) }", 64), 4);
    }

    #[test]
    fn stops_counting_past_the_limit() {
        assert_eq!(max_nesting(&nested_list(100_000), 64), 65);
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_count() {
        assert_eq!(max_nesting(r#"{ a(x: "[[[[{{{{") }"#, 3), 1);
        assert_eq!(max_nesting(r#"{ a(x: "\"[[[[") }"#, 3), 1);
        assert_eq!(max_nesting("{ a # [[[[[[\n }", 3), 1);
        assert_eq!(
            max_nesting("{ a(x: \"\"\"[[[[\n{{{{ \\\"\"\" [[[[ \"\"\") }", 3),
            1
        );
    }

    #[test]
    fn a_string_cut_by_a_line_break_hides_nothing() {
        // Invalid GraphQL, but the brackets after the break still count.
        assert_eq!(max_nesting("{ a(x: \"open\n[[[[) }", 3), 4);
    }

    /// The reference: a character-at-a-time lexer written for this test
    /// from the specification's grammar, sharing no code with the scanner.
    fn reference(query: &str) -> usize {
        enum State {
            Code,
            Comment,
            Text,
            Block,
        }
        let chars: Vec<char> = query.chars().collect();
        let (mut state, mut depth, mut deepest, mut i) = (State::Code, 0i64, 0i64, 0);
        while i < chars.len() {
            let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
            match state {
                State::Code => match chars[i] {
                    '#' => state = State::Comment,
                    '"' if rest.starts_with("\"\"\"") => {
                        state = State::Block;
                        i += 2;
                    }
                    '"' => state = State::Text,
                    '[' | '{' => {
                        depth += 1;
                        deepest = deepest.max(depth);
                    }
                    ']' | '}' => depth = (depth - 1).max(0),
                    _ => {}
                },
                State::Comment if matches!(chars[i], '\n' | '\r') => state = State::Code,
                State::Comment => {}
                State::Text => match chars[i] {
                    '\\' => i += 1,
                    '"' | '\n' | '\r' => state = State::Code,
                    _ => {}
                },
                State::Block if rest.starts_with("\\\"\"\"") => i += 3,
                State::Block if rest.starts_with("\"\"\"") => {
                    state = State::Code;
                    i += 2;
                }
                State::Block => {}
            }
            i += 1;
        }
        deepest as usize
    }

    proptest! {
        #[test]
        fn agrees_with_a_reference_lexer(
            query in proptest::collection::vec(
                prop_oneof![
                    Just("["), Just("]"), Just("{"), Just("}"), Just("\""), Just("\"\"\""),
                    Just("\\"), Just("#"), Just("\n"), Just("a"), Just(" "), Just("é"),
                ],
                0..60,
            ).prop_map(|parts| parts.concat())
        ) {
            prop_assert_eq!(max_nesting(&query, usize::MAX), reference(&query));
        }
    }
}
