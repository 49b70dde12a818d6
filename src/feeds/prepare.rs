//! Bytes as fetched → a UTF-8 document feed-rs can read (pure). Real feeds
//! come in legacy encodings and with sloppy XML; neither may cost the user
//! the feed:
//!
//! - **Encoding** ([`decode`]): a byte-order mark first, then the HTTP
//!   `Content-Type` charset, then the XML prolog's `encoding`, else UTF-8
//!   (`encoding_rs`, the WHATWG labels). UTF-16 and UTF-32 with a BOM are
//!   read too. An undecodable byte becomes U+FFFD instead of refusing the
//!   document. Where HTTP says UTF-8 but the bytes are not, and the prolog
//!   names another encoding, the prolog is believed.
//! - **XML repair** ([`repair`]): outside CDATA sections and comments, a
//!   bare `&` becomes `&amp;`, HTML's named entities (`&eacute;`, `&nbsp;`,
//!   and the Netscape RSS 0.91 DTD's, which are HTML 4's) become numeric
//!   references, invalid numeric references are replaced, and a `<` that
//!   cannot start markup becomes `&lt;`. The DOCTYPE is dropped (its
//!   entities are HTML's, handled above; nothing it defines is expanded),
//!   and so is the XML declaration, since the text is UTF-8 now.
//!
//! [`repair`] also counts the entries the document holds (`<item>` and
//! `<entry>` start tags), so that a document the parser reads without
//! entries where there are some is reported, never a silent success.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};

/// The document as UTF-8 (without a byte-order mark).
pub fn decode(body: &[u8], http_charset: Option<&str>) -> String {
    if let Some(text) = decode_utf32(body) {
        return text;
    }
    if let Some((encoding, bom)) = Encoding::for_bom(body) {
        return encoding
            .decode_without_bom_handling(&body[bom..])
            .0
            .into_owned();
    }
    // UTF-16 without a BOM shows in its first characters (`<?`).
    match body {
        [0x3C, 0x00, 0x3F, 0x00, ..] => {
            return UTF_16LE.decode_without_bom_handling(body).0.into_owned();
        }
        [0x00, 0x3C, 0x00, 0x3F, ..] => {
            return UTF_16BE.decode_without_bom_handling(body).0.into_owned();
        }
        _ => {}
    }
    let http = http_charset.and_then(|label| Encoding::for_label(label.trim().as_bytes()));
    let prolog = prolog_encoding(body);
    let encoding = match (http, prolog) {
        (Some(http), Some(prolog))
            if http == UTF_8 && prolog != UTF_8 && std::str::from_utf8(body).is_err() =>
        {
            prolog
        }
        (Some(http), _) => http,
        (None, Some(prolog)) => prolog,
        (None, None) => UTF_8,
    };
    // A UTF-16 label on bytes without a BOM is a lie about an ASCII prolog
    // we just read: such documents are UTF-8 in practice.
    let encoding = encoding.output_encoding();
    encoding.decode_without_bom_handling(body).0.into_owned()
}

/// UTF-32 with its BOM (which `encoding_rs` does not decode).
fn decode_utf32(body: &[u8]) -> Option<String> {
    let word: fn([u8; 4]) -> u32 = match body {
        [0x00, 0x00, 0xFE, 0xFF, ..] => u32::from_be_bytes,
        [0xFF, 0xFE, 0x00, 0x00, ..] => u32::from_le_bytes,
        _ => return None,
    };
    Some(
        body[4..]
            .chunks(4)
            .map(|chunk| {
                <[u8; 4]>::try_from(chunk)
                    .ok()
                    .and_then(|bytes| char::from_u32(word(bytes)))
                    .unwrap_or(char::REPLACEMENT_CHARACTER)
            })
            .collect(),
    )
}

/// The `encoding` of an ASCII-compatible XML declaration, if it names one
/// `encoding_rs` knows.
fn prolog_encoding(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let start = head.iter().position(|b| !b.is_ascii_whitespace())?;
    let head = head.get(start..)?.strip_prefix(b"<?xml")?;
    let end = head.windows(2).position(|w| w == b"?>")?;
    let decl = std::str::from_utf8(&head[..end]).ok()?;
    let value = attribute(decl, "encoding")?;
    Encoding::for_label(value.as_bytes())
}

/// `name="value"` or `name='value'` inside a tag's text.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = tag;
    while let Some(at) = rest.find(name) {
        let after = rest[at + name.len()..].trim_start();
        let preceded_by_space = rest[..at].ends_with(|c: char| c.is_ascii_whitespace());
        if preceded_by_space && let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            let quote = value.chars().next()?;
            if quote == '"' || quote == '\'' {
                let value = &value[1..];
                return value.find(quote).map(|end| &value[..end]);
            }
        }
        rest = &rest[at + name.len()..];
    }
    None
}

/// The repaired document and how many entries (`<item>`, `<entry>` start
/// tags) it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    pub text: String,
    pub entry_tags: usize,
}

/// Repairs the XML in `text` (see the module docs). Text that is not XML
/// passes through with only its `&`s fixed.
pub fn repair(text: &str) -> Repaired {
    // Characters XML 1.0 forbids anywhere (a stray BEL, VT or FF from a CMS)
    // are dropped, in text, attributes and CDATA alike.
    let allowed: String;
    let text = if text.contains(forbidden_in_xml) {
        allowed = text.chars().filter(|&c| !forbidden_in_xml(c)).collect();
        allowed.as_str()
    } else {
        text
    };
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut entry_tags = 0;
    let mut rest = text;
    while let Some(at) = rest.find(['<', '&']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('&') {
            rest = reference(rest, &mut out);
            continue;
        }
        // Markup: copied (or dropped) whole.
        let (keep, drop_it, len) = if rest.starts_with("<![CDATA[") {
            (true, false, section_end(rest, "]]>"))
        } else if rest.starts_with("<!--") {
            (true, false, section_end(rest, "-->"))
        } else if rest.starts_with("<?") {
            let len = section_end(rest, "?>");
            (
                true,
                rest.starts_with("<?xml ") || rest.starts_with("<?xml?"),
                len,
            )
        } else if rest
            .get(..9)
            .is_some_and(|head| head.eq_ignore_ascii_case("<!DOCTYPE"))
        {
            (true, true, doctype_end(rest))
        } else if rest[1..].starts_with(|c: char| {
            c == '/' || c == '!' || c == '_' || c == ':' || c.is_alphabetic()
        }) {
            let len = tag_end(rest);
            let tag = &rest[..len];
            if is_entry_start(tag) {
                entry_tags += 1;
            }
            push_tag(tag, &mut out);
            rest = &rest[len..];
            continue;
        } else {
            // A `<` that starts nothing: text.
            out.push_str("&lt;");
            rest = &rest[1..];
            continue;
        };
        if keep && !drop_it {
            out.push_str(&rest[..len]);
        }
        rest = &rest[len..];
    }
    out.push_str(rest);
    Repaired {
        text: out,
        entry_tags,
    }
}

/// C0 controls other than tab, line feed and carriage return, and the
/// two non-characters XML 1.0 excludes.
fn forbidden_in_xml(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Length of `text` up to and including `end` (all of it when unclosed).
fn section_end(text: &str, end: &str) -> usize {
    text.find(end).map_or(text.len(), |at| at + end.len())
}

/// A DOCTYPE with an optional internal subset `[...]`.
fn doctype_end(text: &str) -> usize {
    let mut depth = 0usize;
    let mut quote = None;
    for (at, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth = depth.saturating_sub(1),
            (None, '>') if depth == 0 => return at + 1,
            _ => {}
        }
    }
    text.len()
}

/// A start or end tag, up to its `>` outside quoted attribute values.
fn tag_end(text: &str) -> usize {
    let mut quote = None;
    for (at, c) in text.char_indices().skip(1) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return at + 1,
            // A new tag before this one closed: this one ends here.
            (None, '<') => return at,
            _ => {}
        }
    }
    text.len()
}

fn is_entry_start(tag: &str) -> bool {
    let name = tag[1..]
        .split(|c: char| c.is_whitespace() || c == '>' || c == '/')
        .next()
        .unwrap_or_default();
    let local = name.rsplit(':').next().unwrap_or_default();
    matches!(local, "item" | "entry")
}

/// A tag copied with the `&`s of its attribute values repaired.
fn push_tag(tag: &str, out: &mut String) {
    let mut rest = tag;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = reference(&rest[at..], out);
    }
    out.push_str(rest);
}

/// Repairs the reference `text` starts with (at its `&`), appends it, and
/// returns the text after it.
fn reference<'a>(text: &'a str, out: &mut String) -> &'a str {
    let body = &text[1..];
    let end = body
        .char_indices()
        .take(40)
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '#' || c == '.' || c == '-' || c == '_'))
        .filter(|&(_, c)| c == ';')
        .map(|(at, _)| at);
    let Some(end) = end else {
        out.push_str("&amp;");
        return body;
    };
    let name = &body[..end];
    let after = &body[end + 1..];
    if let Some(number) = name.strip_prefix('#') {
        let value = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => number.parse::<u32>().ok(),
        };
        match value.map(char_reference) {
            Some(Some(c)) => push_char_ref(c, out),
            Some(None) => out.push('\u{FFFD}'),
            None => out.push_str("&amp;"),
        }
        return if value.is_some() { after } else { body };
    }
    if matches!(name, "amp" | "lt" | "gt" | "quot" | "apos") {
        out.push('&');
        out.push_str(name);
        out.push(';');
        return after;
    }
    match html5ever::data::NAMED_ENTITIES.get(&format!("{name};")) {
        Some(&(first, second)) if first != 0 => {
            for code in [first, second] {
                if let Some(c) = char::from_u32(code).filter(|_| code != 0) {
                    push_char_ref(c, out);
                }
            }
            after
        }
        // Not an entity anyone defines: the `&` is text.
        _ => {
            out.push_str("&amp;");
            body
        }
    }
}

/// What a numeric reference stands for in a feed: C1 controls are the
/// windows-1252 characters they were meant as (as browsers read them);
/// characters XML cannot carry are `None`.
fn char_reference(code: u32) -> Option<char> {
    let c = match code {
        0x80..=0x9F => html5ever::data::C1_REPLACEMENTS[(code - 0x80) as usize]
            .unwrap_or(char::REPLACEMENT_CHARACTER),
        code => char::from_u32(code)?,
    };
    let allowed =
        matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}'));
    allowed.then_some(c)
}

fn push_char_ref(c: char, out: &mut String) {
    out.push_str(&format!("&#x{:X};", c as u32));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bom_beats_the_http_charset_and_the_prolog() {
        let mut body = vec![0xEF, 0xBB, 0xBF];
        body.extend("<?xml version=\"1.0\" encoding=\"iso-8859-1\"?><a>é</a>".as_bytes());
        assert!(decode(&body, Some("windows-1251")).ends_with("<a>é</a>"));

        let text = "<a>日本</a>";
        let mut le = vec![0xFF, 0xFE];
        le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(decode(&le, None), text);
        let mut be32 = vec![0x00, 0x00, 0xFE, 0xFF];
        be32.extend(text.chars().flat_map(|c| (c as u32).to_be_bytes()));
        assert_eq!(decode(&be32, Some("utf-8")), text);
        let mut le32 = vec![0xFF, 0xFE, 0x00, 0x00];
        le32.extend(text.chars().flat_map(|c| (c as u32).to_le_bytes()));
        assert_eq!(decode(&le32, None), text);
    }

    #[test]
    fn the_http_charset_beats_the_prolog_unless_the_bytes_say_otherwise() {
        // Real UTF-8 under a wrong ISO-8859-1 prolog: no mojibake.
        let utf8 = "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>café</a>";
        assert!(decode(utf8.as_bytes(), Some("utf-8")).ends_with("café</a>"));
        // HTTP says UTF-8, the bytes are Latin-1 as the prolog says.
        let mut latin1 = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>caf".to_vec();
        latin1.extend([0xE9]);
        latin1.extend(b"</a>");
        assert!(decode(&latin1, Some("UTF-8")).ends_with("café</a>"));
        assert!(decode(&latin1, None).ends_with("café</a>"));
        // KOI8-R by HTTP only.
        assert_eq!(decode(&[0xD0, 0xD2, 0xC9], Some("koi8-r")), "при");
        // Shift_JIS by prolog only.
        let mut sjis = b"<?xml version='1.0' encoding='Shift_JIS'?>".to_vec();
        sjis.extend([0x93, 0xFA, 0x96, 0x7B]);
        assert!(decode(&sjis, None).ends_with("日本"));
    }

    #[test]
    fn an_invalid_byte_is_replaced() {
        assert_eq!(decode(b"<a>x\xFFy</a>", Some("utf-8")), "<a>x\u{FFFD}y</a>");
        assert_eq!(decode(b"<a>x\xFFy</a>", None), "<a>x\u{FFFD}y</a>");
    }

    #[test]
    fn characters_xml_forbids_are_dropped() {
        assert_eq!(
            repair("<t a=\"x\u{b}\">Bell\u{7} and\u{c} <![CDATA[\u{1}c]]>\t\r\n\u{FFFF}</t>").text,
            "<t a=\"x\">Bell and <![CDATA[c]]>\t\r\n</t>"
        );
    }

    #[test]
    fn sloppy_references_are_repaired() {
        let fixed = repair(
            "<t a=\"x&y\">Tom & Jerry &eacute;&nbsp;&mdash;&rsquo;&hellip; &amp; &#233; &#x2014; &#150; &#0; &bogus; &</t>",
        );
        assert_eq!(
            fixed.text,
            "<t a=\"x&amp;y\">Tom &amp; Jerry &#xE9;&#xA0;&#x2014;&#x2019;&#x2026; &amp; &#xE9; &#x2014; &#x2013; \u{FFFD} &amp;bogus; &amp;</t>"
        );
    }

    #[test]
    fn cdata_and_comments_pass_untouched_and_the_prolog_and_doctype_go() {
        let fixed = repair(
            "<?xml version=\"1.0\" encoding=\"koi8-r\"?>\n<!DOCTYPE rss PUBLIC \"-//Netscape Communications//DTD RSS 0.91//EN\" \"http://my.netscape.com/publish/formats/rss-0.91.dtd\" [<!ENTITY x \"y\">]>\n<rss><!-- a & b --><d><![CDATA[<p>a & b</p>]]></d> 1 < 2</rss>",
        );
        assert_eq!(
            fixed.text,
            "\n\n<rss><!-- a & b --><d><![CDATA[<p>a & b</p>]]></d> 1 &lt; 2</rss>"
        );
    }

    #[test]
    fn multibyte_text_after_a_tag_is_not_cut() {
        assert_eq!(repair("<t>新聞</t>").text, "<t>新聞</t>");
        assert_eq!(repair("<!DOC").text, "<!DOC");
    }

    #[test]
    fn entries_are_counted_by_their_start_tags() {
        let doc = "<rdf:RDF><item rdf:about=\"x\"/><rss:item></rss:item><entry><items/></entry><itemx/></rdf:RDF>";
        assert_eq!(repair(doc).entry_tags, 3);
    }
}
