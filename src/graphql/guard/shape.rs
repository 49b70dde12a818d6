//! What a parsed document costs once its fragment spreads are expanded,
//! computed before validation and in time linear in the document.
//!
//! async-graphql's validator (and its recursion check) expands every
//! fragment spread where it occurs, so a document whose fragment `F_i`
//! spreads `F_{i-1}` twice costs 2^i visits: 900 bytes can hold seconds of
//! synchronous CPU. Here each fragment is measured once, from its own
//! selections and the measures of the fragments it spreads, in dependency
//! order (fragments before the fragments that spread them; no recursion
//! over fragments, so a long chain cannot exhaust the stack). The guard
//! then refuses a document whose expansion exceeds the limits before the
//! validator starts.
//!
//! Recursion here follows selection-set nesting only, which the text
//! pre-scan (`nesting`) has already bounded.

use std::collections::HashMap;

use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};

/// Fields whose value is a list, inside introspection (`__Schema`,
/// `__Type`, `__Field`, `__Directive`): these multiply the answer.
const INTROSPECTION_LISTS: [&str; 8] = [
    "types",
    "directives",
    "fields",
    "interfaces",
    "possibleTypes",
    "enumValues",
    "inputFields",
    "args",
];

fn is_introspection_root(name: &str) -> bool {
    name == "__schema" || name == "__type"
}

/// The measures of a selection set (an operation's or a fragment's) with
/// every fragment spread expanded. Counts saturate instead of overflowing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measure {
    /// Fragment spreads, each counted as often as it is reached.
    pub spreads: u64,
    /// Aliases, each counted as often as it is reached.
    pub aliases: u64,
    /// Field selections (`__typename` included), each counted as often as
    /// it is reached: the size of what validation and execution walk.
    pub fields: u64,
    /// Depth in fields as async-graphql counts it (`__typename` does not
    /// count), except that `__schema` and `__type` count as one level:
    /// their subtrees are measured apart, below.
    pub depth: u64,
    /// Whether `__schema` or `__type` is selected.
    pub introspection: bool,
    /// The deepest `__schema`/`__type` subtree, in fields, the root included.
    pub introspection_depth: u64,
    /// The most list-valued introspection fields along one path of an
    /// introspection subtree (`types { fields { args … } } }` is 3).
    pub introspection_lists: u64,
    /// This selection's depth counting every field, and its list-valued
    /// introspection fields along one path: what it adds when it sits
    /// inside an introspection subtree.
    full_depth: u64,
    list_depth: u64,
}

/// A fragment spread and where it sits in its selection set.
#[derive(Debug, Clone, Copy)]
struct Site<'a> {
    fragment: &'a str,
    /// `Measure::depth` of the fields above it, outside introspection.
    depth_above: u64,
    /// Every field above it, and list-valued introspection fields above it.
    full_above: u64,
    lists_above: u64,
    /// Inside an introspection subtree: fields and list-valued fields
    /// from its root down to the spread.
    introspection_above: Option<(u64, u64)>,
}

/// A selection set measured on its own, its spreads not yet expanded.
#[derive(Debug, Default)]
struct Local<'a> {
    own: Measure,
    sites: Vec<Site<'a>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Above {
    depth: u64,
    full: u64,
    lists: u64,
    introspection: Option<(u64, u64)>,
}

fn walk<'a>(set: &'a SelectionSet, above: Above, local: &mut Local<'a>) {
    for selection in &set.items {
        match &selection.node {
            Selection::Field(field) => {
                let field = &field.node;
                let name = field.name.node.as_str();
                local.own.fields = local.own.fields.saturating_add(1);
                if field.alias.is_some() {
                    local.own.aliases = local.own.aliases.saturating_add(1);
                }
                let is_list = INTROSPECTION_LISTS.contains(&name);
                let mut here = Above {
                    depth: above.depth,
                    full: above.full + 1,
                    lists: above.lists + u64::from(is_list),
                    introspection: above
                        .introspection
                        .map(|(depth, lists)| (depth + 1, lists + u64::from(is_list))),
                };
                if above.introspection.is_none() && is_introspection_root(name) {
                    here.depth = above.depth + 1;
                    here.introspection = Some((1, 0));
                    local.own.introspection = true;
                } else if above.introspection.is_none() && name != "__typename" {
                    here.depth = above.depth + 1;
                }
                local.own.depth = local.own.depth.max(here.depth);
                local.own.full_depth = local.own.full_depth.max(here.full);
                local.own.list_depth = local.own.list_depth.max(here.lists);
                if let Some((depth, lists)) = here.introspection {
                    local.own.introspection_depth = local.own.introspection_depth.max(depth);
                    local.own.introspection_lists = local.own.introspection_lists.max(lists);
                }
                walk(&field.selection_set.node, here, local);
            }
            Selection::InlineFragment(fragment) => {
                walk(&fragment.node.selection_set.node, above, local);
            }
            Selection::FragmentSpread(spread) => local.sites.push(Site {
                fragment: spread.node.fragment_name.node.as_str(),
                depth_above: above.depth,
                full_above: above.full,
                lists_above: above.lists,
                introspection_above: above.introspection,
            }),
        }
    }
}

fn local(set: &SelectionSet) -> Local<'_> {
    let mut local = Local::default();
    walk(set, Above::default(), &mut local);
    local
}

/// A local measure with its spreads expanded by the targets' measures
/// (`None` for a fragment the document does not define: it counts as one
/// spread and nothing else, and validation reports it).
fn expand(local: &Local<'_>, measure_of: impl Fn(&str) -> Option<Measure>) -> Measure {
    let mut total = local.own;
    for site in &local.sites {
        total.spreads = total.spreads.saturating_add(1);
        let Some(target) = measure_of(site.fragment) else {
            continue;
        };
        total.spreads = total.spreads.saturating_add(target.spreads);
        total.aliases = total.aliases.saturating_add(target.aliases);
        total.fields = total.fields.saturating_add(target.fields);
        total.full_depth = total
            .full_depth
            .max(site.full_above.saturating_add(target.full_depth));
        total.list_depth = total
            .list_depth
            .max(site.lists_above.saturating_add(target.list_depth));
        match site.introspection_above {
            Some((depth, lists)) => {
                total.introspection_depth = total
                    .introspection_depth
                    .max(depth.saturating_add(target.full_depth));
                total.introspection_lists = total
                    .introspection_lists
                    .max(lists.saturating_add(target.list_depth));
            }
            None => {
                total.depth = total
                    .depth
                    .max(site.depth_above.saturating_add(target.depth));
                total.introspection |= target.introspection;
                total.introspection_depth =
                    total.introspection_depth.max(target.introspection_depth);
                total.introspection_lists =
                    total.introspection_lists.max(target.introspection_lists);
            }
        }
    }
    total
}

/// A document's measures: each operation's (by name; `None` for an
/// anonymous one) and each fragment's.
#[derive(Debug)]
pub struct DocumentMeasure<'a> {
    pub operations: Vec<(Option<&'a str>, Measure)>,
    pub fragments: Vec<(&'a str, Measure)>,
}

impl DocumentMeasure<'_> {
    /// Spreads and aliases of every operation together (validation visits
    /// them all), and the deepest operation.
    pub fn total(&self) -> Measure {
        self.operations
            .iter()
            .fold(Measure::default(), |total, (_, m)| Measure {
                spreads: total.spreads.saturating_add(m.spreads),
                aliases: total.aliases.saturating_add(m.aliases),
                fields: total.fields.saturating_add(m.fields),
                depth: total.depth.max(m.depth),
                introspection: total.introspection || m.introspection,
                introspection_depth: total.introspection_depth.max(m.introspection_depth),
                introspection_lists: total.introspection_lists.max(m.introspection_lists),
                full_depth: total.full_depth.max(m.full_depth),
                list_depth: total.list_depth.max(m.list_depth),
            })
    }
}

/// Fragments that spread one another in a cycle (GraphQL forbids it; the
/// expansion would be infinite). Holds one fragment on the cycle.
#[derive(Debug, PartialEq, Eq)]
pub struct Cycle(pub String);

/// Measures every operation and fragment of `document`.
pub fn measure(document: &ExecutableDocument) -> Result<DocumentMeasure<'_>, Cycle> {
    let names: Vec<&str> = document
        .fragments
        .keys()
        .map(|name| name.as_str())
        .collect();
    let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let locals: Vec<Local<'_>> = names
        .iter()
        .map(|name| local(&document.fragments[*name].node.selection_set.node))
        .collect();

    // Dependency order (Kahn): a fragment is measured once every fragment
    // it spreads is.
    let mut waiting_on = vec![0usize; names.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    for (i, local) in locals.iter().enumerate() {
        let mut targets: Vec<usize> = local
            .sites
            .iter()
            .filter_map(|site| index.get(site.fragment).copied())
            .collect();
        targets.sort_unstable();
        targets.dedup();
        waiting_on[i] = targets.len();
        for target in targets {
            dependents[target].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..names.len()).filter(|i| waiting_on[*i] == 0).collect();
    let mut measures: Vec<Option<Measure>> = vec![None; names.len()];
    while let Some(i) = ready.pop() {
        measures[i] = Some(expand(&locals[i], |name| {
            index.get(name).and_then(|target| measures[*target])
        }));
        for &dependent in &dependents[i] {
            waiting_on[dependent] -= 1;
            if waiting_on[dependent] == 0 {
                ready.push(dependent);
            }
        }
    }
    if let Some(start) = measures.iter().position(Option::is_none) {
        return Err(Cycle(on_cycle(start, &locals, &index, &measures, &names)));
    }
    let measure_of = |name: &str| index.get(name).and_then(|i| measures[*i]);
    let operations = document
        .operations
        .iter()
        .map(|(name, operation)| {
            let local = local(&operation.node.selection_set.node);
            (name.map(|n| n.as_str()), expand(&local, measure_of))
        })
        .collect();
    let fragments = names
        .iter()
        .zip(&measures)
        .filter_map(|(name, measure)| measure.map(|m| (*name, m)))
        .collect();
    Ok(DocumentMeasure {
        operations,
        fragments,
    })
}

/// A fragment on a cycle: from an unmeasured fragment, follow spreads of
/// unmeasured fragments until one repeats (every unmeasured fragment
/// spreads at least one other, so the walk cannot stop before).
fn on_cycle(
    start: usize,
    locals: &[Local<'_>],
    index: &HashMap<&str, usize>,
    measures: &[Option<Measure>],
    names: &[&str],
) -> String {
    let mut seen = vec![false; names.len()];
    let mut at = start;
    while !seen[at] {
        seen[at] = true;
        let next = locals[at]
            .sites
            .iter()
            .filter_map(|site| index.get(site.fragment).copied())
            .find(|target| measures[*target].is_none());
        match next {
            Some(next) => at = next,
            None => break,
        }
    }
    names[at].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(query: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(query).expect("valid syntax")
    }

    fn total(query: &str) -> Measure {
        measure(&document(query)).expect("no cycle").total()
    }

    /// `F0 { me { id } }`, and each `F_i` spreads `F_{i-1}` twice.
    fn doubling(levels: usize) -> String {
        let mut query = format!("{{ ...F{levels} }} fragment F0 on Query {{ me {{ id }} }}");
        for i in 1..=levels {
            query.push_str(&format!(
                " fragment F{i} on Query {{ ...F{} ...F{} }}",
                i - 1,
                i - 1
            ));
        }
        query
    }

    #[test]
    fn depth_is_counted_as_async_graphql_counts_it() {
        assert_eq!(total("{ me { id } }").depth, 2);
        assert_eq!(total("{ me { __typename } }").depth, 1);
        assert_eq!(
            total("{ ...F } fragment F on Query { me { ... on User { id } } }").depth,
            2
        );
        assert_eq!(
            total("{ groups { ...G } } fragment G on FeedGroup { feeds { ...H } } fragment H on Feed { group { id } }").depth,
            4
        );
    }

    #[test]
    fn doubling_fragments_are_counted_without_expanding_them() {
        let m = total(&doubling(22));
        assert_eq!(m.spreads, (1u64 << 23) - 1);
        assert_eq!(m.depth, 2);
        // Far past u64: the count saturates instead of overflowing.
        assert_eq!(total(&doubling(80)).spreads, u64::MAX);
    }

    #[test]
    fn aliases_count_once_per_spread() {
        let spreads = "...F ".repeat(20);
        let m = total(&format!(
            "{{ me {{ {spreads} }} }} fragment F on User {{ a: id b: username }}"
        ));
        assert_eq!(m.aliases, 40);
        assert_eq!(m.spreads, 20);
        assert_eq!(
            total(
                "query { a: me { x: id } b: me { id } ...F } fragment F on Query { c: me { id } }"
            )
            .aliases,
            4
        );
    }

    #[test]
    fn fields_count_once_per_spread() {
        let spreads = "...F ".repeat(100);
        let m = total(&format!(
            "{{ {spreads} }} fragment F on Query {{ __typename __typename me {{ id }} }}"
        ));
        assert_eq!(m.fields, 400);
        assert_eq!(total("{ me { id username } }").fields, 3);
    }

    #[test]
    fn operations_add_up() {
        let m =
            total("query A { ...F } query B { ...F ...F } fragment F on Query { a: me { id } }");
        assert_eq!((m.spreads, m.aliases), (3, 3));
    }

    #[test]
    fn unused_fragments_are_measured_too() {
        let parsed = document(&format!("{{ me {{ id }} }} {}", &doubling(5)[10..]));
        let measured = measure(&parsed).expect("no cycle");
        let f5 = measured
            .fragments
            .iter()
            .find(|(name, _)| *name == "F5")
            .unwrap();
        assert_eq!(f5.1.spreads, 62);
    }

    #[test]
    fn cycles_are_found_without_following_them_forever() {
        let cycle = measure(&document(
            "{ ...A } fragment A on Query { ...B } fragment B on Query { ...C ...A } fragment C on Query { me { id } }",
        ))
        .unwrap_err();
        assert!(["A", "B"].contains(&cycle.0.as_str()), "{cycle:?}");
        assert!(measure(&document("{ ...S } fragment S on Query { ...S }")).is_err());
    }

    #[test]
    fn a_long_chain_of_fragments_needs_no_deep_recursion() {
        let mut query = String::from("{ ...F0 }");
        for i in 0..50_000 {
            query.push_str(&format!(" fragment F{i} on Query {{ ...F{} }}", i + 1));
        }
        query.push_str(" fragment F50000 on Query { me { id } }");
        let m = total(&query);
        assert_eq!(m.spreads, 50_001);
    }

    #[test]
    fn unknown_fragments_count_as_one_spread() {
        assert_eq!(total("{ ...Missing }").spreads, 1);
    }

    #[test]
    fn introspection_is_measured_apart_from_the_depth() {
        let m = total(
            "{ __schema { types { ...T } } } fragment T on __Type { fields { args { type { ...R } } } } fragment R on __Type { ofType { ofType { name } } }",
        );
        assert!(m.introspection);
        assert_eq!(m.depth, 1);
        // __schema types fields args type ofType ofType name
        assert_eq!(m.introspection_depth, 8);
        assert_eq!(m.introspection_lists, 3);
        let plain = total("{ me { id } __typename }");
        assert!(!plain.introspection);
        assert_eq!(plain.introspection_depth, 0);
        let typed = total("{ __type(name: \"User\") { fields { type { fields { name } } } } }");
        assert_eq!(typed.introspection_lists, 2);
        assert_eq!(typed.introspection_depth, 5);
    }

    #[test]
    fn a_field_named_like_an_introspection_list_counts_only_inside_introspection() {
        let m = total("{ types { fields { args { id } } } }");
        assert!(!m.introspection);
        assert_eq!(m.introspection_lists, 0);
        assert_eq!(m.depth, 4);
    }
}
