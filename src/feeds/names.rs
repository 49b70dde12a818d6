//! What a feed's or a group's name may contain (pure). Names travel as
//! XML (OPML export, then import elsewhere), and XML 1.0 cannot carry
//! most control characters at all, not even as `&#1;`: a name with one
//! would make `exportOpml` a document no reader (ours included) accepts.
//! So a name has no control characters: refused when a user types one,
//! dropped from names that come from elsewhere (an OPML import, a feed's
//! own title). XML's other forbidden characters, U+FFFE and U+FFFF, go
//! the same way.

/// Feed and group names are at most this many characters (`varchar(255)`).
pub const MAX_NAME_CHARS: usize = 255;

/// Why a name a user gave is refused; the text is the client's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name must be 1–{MAX_NAME_CHARS} characters")]
    Length,
    #[error("name must not contain control characters (tabs, line breaks and the like)")]
    Control,
}

fn forbidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// A name a user typed: trimmed, then refused if empty, too long, or
/// holding a character a name cannot have.
pub fn check(name: &str) -> Result<String, NameError> {
    let name = name.trim();
    if name.chars().any(forbidden) {
        return Err(NameError::Control);
    }
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(NameError::Length);
    }
    Ok(name.to_owned())
}

/// A name from elsewhere made fit: line breaks and tabs become spaces,
/// other forbidden characters are dropped, the rest is trimmed and cut to
/// [`MAX_NAME_CHARS`]. `None` when nothing is left.
pub fn clean(name: &str) -> Option<String> {
    let spaced: String = name
        .chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\r' => Some(' '),
            c if forbidden(c) => None,
            c => Some(c),
        })
        .collect();
    let name: String = spaced.trim().chars().take(MAX_NAME_CHARS).collect();
    let name = name.trim_end().to_owned();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn typed_names_with_control_characters_are_refused() {
        assert_eq!(check("  News  ").as_deref(), Ok("News"));
        assert_eq!(check("a\u{1}b"), Err(NameError::Control));
        assert_eq!(check("a\nb"), Err(NameError::Control));
        assert_eq!(check("a\u{FFFF}"), Err(NameError::Control));
        assert_eq!(check("   "), Err(NameError::Length));
        assert_eq!(check(&"x".repeat(256)), Err(NameError::Length));
        assert!(check("Ünïcode & <markup> 🦀").is_ok());
    }

    #[test]
    fn foreign_names_are_cleaned() {
        assert_eq!(clean("Line\none\ttab").as_deref(), Some("Line one tab"));
        assert_eq!(clean("nul\0bell\u{7}").as_deref(), Some("nulbell"));
        assert_eq!(clean("\u{1}\u{2}"), None);
        assert_eq!(
            clean(&"é".repeat(300)).map(|n| n.chars().count()),
            Some(255)
        );
    }

    proptest! {
        /// Whatever comes in, a cleaned name is one a user could have typed.
        #[test]
        fn a_cleaned_name_passes_the_check(name in any::<String>()) {
            if let Some(cleaned) = clean(&name) {
                prop_assert_eq!(check(&cleaned), Ok(cleaned.clone()));
            }
        }
    }
}
