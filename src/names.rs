//! Player names: the one place a name is checked, normalised and given its uniqueness key.
//!
//! A name is stored in Unicode NFKC form, so `Ａla` (fullwidth) is stored as `Ala`. It may
//! not contain control, invisible or bidirectional-control characters, which could make
//! two names look alike or reorder the text around them. Two names are the same captain
//! when their confusable skeletons (UTS #39) of the lower-cased name agree, so `Ala`,
//! `ALA`, `Аla` (Cyrillic A) and `Ａla` cannot coexist.

use unicode_normalization::UnicodeNormalization;
use unicode_security::confusable_detection::skeleton;

/// Longest player name, in characters (after normalisation).
pub const NAME_MAX_CHARS: usize = 32;

/// Why a name was refused; the message is shown to the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("a name has 1 to {NAME_MAX_CHARS} characters")]
    Length,
    #[error("a name may not contain control, invisible or bidirectional-control characters")]
    Invisible,
    #[error("a name may not contain white space other than single spaces")]
    Whitespace,
    #[error("a name may not start or end with white space")]
    Padded,
}

/// A checked, NFKC-normalised player name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayerName(String);

impl PlayerName {
    /// Normalises and checks `raw`.
    pub fn parse(raw: &str) -> Result<Self, NameError> {
        // Checked before normalising too: NFKC keeps most of these, but not all of them.
        if raw.chars().any(is_hidden) {
            return Err(NameError::Invisible);
        }
        let name: String = raw.nfkc().collect();
        if name.chars().any(is_hidden) {
            return Err(NameError::Invisible);
        }
        let count = name.chars().count();
        if count == 0 || count > NAME_MAX_CHARS {
            return Err(NameError::Length);
        }
        if name.chars().any(|c| c.is_whitespace() && c != ' ') || name.contains("  ") {
            return Err(NameError::Whitespace);
        }
        if name.trim() != name {
            return Err(NameError::Padded);
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The uniqueness key: the confusable skeleton of the lower-cased name.
    pub fn key(&self) -> String {
        let lower = self.0.to_lowercase();
        skeleton(&lower).collect::<String>().to_lowercase()
    }
}

impl std::fmt::Display for PlayerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Control characters, format characters that render as nothing (zero-width joiners,
/// word joiners, soft hyphens, variation selectors, tags) and bidirectional controls.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> String {
        PlayerName::parse(name).expect("a valid name").key()
    }

    #[test]
    fn look_alike_names_share_one_key() {
        let latin = key("Ala");
        assert_eq!(key("ALA"), latin);
        assert_eq!(key("\u{0410}la"), latin, "Cyrillic capital A");
        assert_eq!(key("\u{FF21}la"), latin, "fullwidth capital A");
        assert_ne!(key("Ola"), latin);
    }

    #[test]
    fn a_fullwidth_name_is_stored_normalised() {
        let name = PlayerName::parse("\u{FF21}la").expect("valid");
        assert_eq!(name.as_str(), "Ala");
    }

    #[test]
    fn invisible_and_bidi_characters_are_refused() {
        for name in [
            "A\u{200B}la",
            "Ala\u{202E}",
            "\u{2066}Ala",
            "A\u{00AD}la",
            "Ala\u{FEFF}",
            "A\u{E0041}la",
            "Al\na",
        ] {
            assert_eq!(
                PlayerName::parse(name),
                Err(NameError::Invisible),
                "{name:?}"
            );
        }
    }

    #[test]
    fn length_and_spacing_are_checked() {
        assert_eq!(PlayerName::parse(""), Err(NameError::Length));
        assert_eq!(PlayerName::parse(&"a".repeat(33)), Err(NameError::Length));
        assert!(PlayerName::parse(&"ą".repeat(32)).is_ok());
        assert_eq!(PlayerName::parse(" Ala"), Err(NameError::Padded));
        assert_eq!(PlayerName::parse("A  la"), Err(NameError::Whitespace));
        assert_eq!(PlayerName::parse("A\u{2028}la"), Err(NameError::Whitespace));
        assert!(PlayerName::parse("Kapitan Ala").is_ok());
    }
}
