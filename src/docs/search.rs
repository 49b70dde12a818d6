//! Full-text search over the mirrored documents (`searchDocs`), the way
//! feeds search items ([`crate::fulltext`]): the engine stores each
//! written document's title and text in `docs_search` ([`indexed_body`]:
//! the body without its markers, a database row's properties after it);
//! SQLite's FTS5 or PostgreSQL's `tsvector` ranks them, titles weighing
//! more. Trashed documents are never found.
//!
//! Each hit carries a snippet around the match, cut by the database
//! (`snippet()` on SQLite, `ts_headline` on PostgreSQL) with the matches
//! between two control characters no document holds, then made safe here
//! ([`highlight`]): the text HTML-escaped, the matches in `<mark>`.

use sea_orm::{DatabaseBackend, Statement};

use crate::fulltext::{fts5_query, is_cjk, terms, tsquery};

/// Where a match starts and ends in the database's snippet.
const OPEN: char = '\u{2}';
const CLOSE: char = '\u{3}';
/// How deep `after` may page: ranked search is for the first pages.
pub const MAX_OFFSET: u64 = 1000;

/// The text indexed for a body: its degradation markers and other HTML
/// comments dropped, the properties (`name: value`) after it.
pub fn indexed_body(body: &str, properties: &[(String, String)]) -> String {
    let mut text = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(start) = rest.find("<!--") {
        text.push_str(&rest[..start]);
        match rest[start..].find("-->") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = "";
            }
        }
    }
    text.push_str(rest);
    for (name, value) in properties {
        text.push('\n');
        text.push_str(name);
        text.push_str(": ");
        text.push_str(value);
    }
    // The two marks never reach the index, so a snippet's marks are ours.
    crate::fulltext::indexable(&text.replace([OPEN, CLOSE], " "))
}

/// The ranked statement for `query` (`None` when it has no word to
/// search for): each hit's platform, id, title, path, kind, URL, snippet
/// and rank, best first, `limit` of them after `offset`.
pub fn statement(
    backend: DatabaseBackend,
    query: &str,
    limit: u64,
    offset: u64,
) -> Option<Statement> {
    let terms = terms(query);
    if terms.is_empty() {
        return None;
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let offset = i64::try_from(offset.min(MAX_OFFSET)).unwrap_or(0);
    let (sql, query) = match backend {
        // Rank first over the index, then cut headlines for the page only:
        // `ts_headline` re-parses each body it is given.
        DatabaseBackend::Postgres => (
            "SELECT d.platform, d.remote_id, d.title, d.local_path, d.kind, d.url, best.rank, \
                    ts_headline('simple', left(s.search_body, 200000), to_tsquery('simple', $1), \
                        'StartSel=' || chr(2) || ', StopSel=' || chr(3) || \
                        ', MaxWords=24, MinWords=8, MaxFragments=2, FragmentDelimiter=\" … \"') AS snippet \
             FROM (SELECT s.id, ts_rank(s.search, q)::float8 AS rank \
                   FROM docs_search s \
                   JOIN docs_documents d ON d.platform = s.platform AND d.remote_id = s.remote_id, \
                        to_tsquery('simple', $1) AS q \
                   WHERE s.search @@ q AND d.status <> 'trashed' \
                   ORDER BY rank DESC, s.id LIMIT $2 OFFSET $3) AS best \
             JOIN docs_search s ON s.id = best.id \
             JOIN docs_documents d ON d.platform = s.platform AND d.remote_id = s.remote_id \
             ORDER BY best.rank DESC, s.id",
            tsquery(&terms),
        ),
        // The FTS5 table drives the join (as for items); BM25 is lower for
        // better matches.
        _ => (
            "SELECT d.platform, d.remote_id, d.title, d.local_path, d.kind, d.url, \
                    -bm25(docs_fts, 10.0, 1.0) AS rank, \
                    snippet(docs_fts, -1, char(2), char(3), '…', 24) AS snippet \
             FROM docs_fts CROSS JOIN docs_search s ON s.id = docs_fts.rowid \
             JOIN docs_documents d ON d.platform = s.platform AND d.remote_id = s.remote_id \
             WHERE docs_fts MATCH $1 AND d.status <> 'trashed' \
             ORDER BY rank DESC, s.id LIMIT $2 OFFSET $3",
            fts5_query(&terms),
        ),
    };
    Some(Statement::from_sql_and_values(
        backend,
        sql,
        [query.into(), limit.into(), offset.into()],
    ))
}

/// A database snippet made safe to show: HTML-escaped, the matches in
/// `<mark>`, the spaces indexing put around CJK characters taken out.
/// (PostgreSQL's headline drops what its parser reads as HTML tags;
/// SQLite's snippet keeps them, escaped here.)
pub fn highlight(snippet: &str) -> String {
    let chars: Vec<char> = snippet.chars().collect();
    let mut out = String::with_capacity(snippet.len() + 16);
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if c == ' ' || c == OPEN || c == CLOSE {
            // A run of spaces and marks: indexing put one space after a CJK
            // character before it and one before a CJK character after it;
            // those go, the text's own spaces stay.
            let end = chars[at..]
                .iter()
                .position(|c| !matches!(*c, ' ' | OPEN | CLOSE))
                .map_or(chars.len(), |offset| at + offset);
            let run = &chars[at..end];
            let inserted = usize::from(at > 0 && is_cjk(chars[at - 1]))
                + usize::from(chars.get(end).is_some_and(|c| is_cjk(*c)));
            let spaces = run.iter().filter(|c| **c == ' ').count();
            // Matches end before the spaces and begin after them.
            for _ in run.iter().filter(|c| **c == CLOSE) {
                out.push_str("</mark>");
            }
            out.extend(std::iter::repeat_n(' ', spaces.saturating_sub(inserted)));
            for _ in run.iter().filter(|c| **c == OPEN) {
                out.push_str("<mark>");
            }
            at = end;
            continue;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
        at += 1;
    }
    // A phrase's characters matched one by one read as one match.
    out.trim().replace("</mark><mark>", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_holds_the_text_not_the_markers() {
        let body = "Intro <!-- opendoc:degraded kind=sheet id=x --> end\u{2}";
        let indexed = indexed_body(body, &[("Status".into(), "Done".into())]);
        assert_eq!(indexed, "Intro  end \nStatus: Done");
        assert!(indexed_body("a <!-- open", &[]).starts_with("a "));
    }

    #[test]
    fn snippets_are_escaped_and_marked() {
        assert_eq!(
            highlight("a <b>\u{2}rust\u{3}</b> & \"c\""),
            "a &lt;b&gt;<mark>rust</mark>&lt;/b&gt; &amp; &quot;c&quot;"
        );
        // CJK characters come back together.
        let indexed = crate::fulltext::indexable("我们的文档 ok");
        assert_eq!(highlight(&indexed), "我们的文档 ok");
        assert_eq!(
            highlight(" 我  们  \u{2}的\u{3}  文  档  ok"),
            "我们<mark>的</mark>文档 ok"
        );
        assert_eq!(
            highlight(" 设  计  \u{2}文\u{3}  \u{2}档\u{3}  <b>"),
            "设计<mark>文档</mark> &lt;b&gt;"
        );
        assert_eq!(highlight("a \u{2}b c\u{3} d"), "a <mark>b c</mark> d");
    }

    #[test]
    fn a_query_without_words_searches_nothing() {
        assert!(statement(DatabaseBackend::Sqlite, " !! ", 10, 0).is_none());
        let sql = statement(DatabaseBackend::Sqlite, "rust", 10, 5_000).unwrap();
        let values = sql.values.unwrap().0;
        assert_eq!(values[2], sea_orm::Value::BigInt(Some(MAX_OFFSET as i64)));
    }
}
