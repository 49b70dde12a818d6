//! Plain text from HTML (pure): what item titles and feed names are made of,
//! so no client ever gets markup from a title (Miniflux does the same).
//! html5ever's tokenizer reads the tags and entities; the text of
//! `<script>` and `<style>` is dropped, whitespace runs become one space.

use std::cell::{Cell, RefCell};

use html5ever::{
    tendril::StrTendril,
    tokenizer::{
        BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
    },
};

#[derive(Default)]
struct TextSink {
    text: RefCell<String>,
    /// Inside `<script>` or `<style>`.
    skipping: Cell<bool>,
}

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::CharacterTokens(text) if !self.skipping.get() => {
                self.text.borrow_mut().push_str(&text)
            }
            Token::NullCharacterToken => {}
            Token::TagToken(tag) if matches!(&*tag.name, "script" | "style") => {
                self.skipping
                    .set(tag.kind == TagKind::StartTag && !tag.self_closing);
            }
            // Tags separate words only where the browser would break the line.
            Token::TagToken(tag) if matches!(&*tag.name, "br" | "p" | "div" | "li") => {
                self.text.borrow_mut().push(' ')
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// The text of `html`: tags removed, entities decoded, whitespace collapsed
/// and trimmed.
pub fn plain_text(html: &str) -> String {
    if !html.contains(['<', '&']) {
        return collapse(html);
    }
    let tokenizer = Tokenizer::new(TextSink::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    collapse(&tokenizer.sink.text.borrow())
}

/// Whitespace runs become one space; other control characters (a JSON
/// Feed's `\u0007`) go.
fn collapse(text: &str) -> String {
    text.split_whitespace()
        .map(|word| word.replace(char::is_control, ""))
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_stripped_and_entities_decoded() {
        assert_eq!(
            plain_text("<img src=x onerror=alert(1)>Hello &amp; bye"),
            "Hello & bye"
        );
        assert_eq!(plain_text("Test: <b>bold</b> end"), "Test: bold end");
        assert_eq!(plain_text("Caf&eacute; &mdash; 1 < 2"), "Café — 1 < 2");
        assert_eq!(
            plain_text("a<script>alert(1)</script>b<style>p{}</style>"),
            "ab"
        );
        assert_eq!(plain_text("  line\n  two\t"), "line two");
        assert_eq!(plain_text("bell\u{7} \u{7} rings"), "bell rings");
        assert_eq!(plain_text("<p>one</p><p>two</p>"), "one two");
        assert_eq!(plain_text(""), "");
    }
}
