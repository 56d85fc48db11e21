//! Player names: the one place a name is checked, normalised and given its uniqueness key.
//!
//! A name is stored in Unicode NFKC form, so `Ａla` (fullwidth) is stored as `Ala`. It may
//! not contain control, invisible or bidirectional-control characters, which could make
//! two names look alike or reorder the text around them: every default-ignorable code
//! point, and characters that draw as blank (the braille blank, the null notehead). A
//! name needs at least one letter or digit, and at most [`MAX_MARKS_IN_A_ROW`] combining
//! marks may stack on one character. Two names are the same captain when their keys
//! agree: the confusable skeleton (UTS #39) of the upper-cased name taken first, then case
//! folded, then the skeleton and folding once more, so `Ala`, `ALA`, `Аla` (Cyrillic A),
//! `Ａla` and `AIa` (capital I) cannot coexist.

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_security::confusable_detection::skeleton;

/// Longest player name, in characters (after normalisation).
pub const NAME_MAX_CHARS: usize = 32;
/// Most combining marks on one character.
pub const MAX_MARKS_IN_A_ROW: usize = 3;

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
    #[error("a name needs at least one letter or digit")]
    NoLetter,
    #[error("a name may stack at most {MAX_MARKS_IN_A_ROW} combining marks on a character")]
    StackedMarks,
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
        if !name.chars().any(|c| {
            matches!(
                c.general_category_group(),
                GeneralCategoryGroup::Letter | GeneralCategoryGroup::Number
            )
        }) {
            return Err(NameError::NoLetter);
        }
        let mut in_a_row = 0;
        for c in name.chars() {
            if c.general_category_group() == GeneralCategoryGroup::Mark {
                in_a_row += 1;
                if in_a_row > MAX_MARKS_IN_A_ROW {
                    return Err(NameError::StackedMarks);
                }
            } else {
                in_a_row = 0;
            }
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The uniqueness key: the confusable skeleton of the upper-cased name first (so a
    /// capital `I` is an `l` before folding could make it an `i`; `i`, `I` and `l` then
    /// share a key), folded, then the skeleton and folding once more (for look-alikes only
    /// lower case has, such as `rn` and `m`).
    pub fn key(&self) -> String {
        let once = skeleton(&self.0.to_uppercase())
            .collect::<String>()
            .to_lowercase();
        skeleton(&once).collect::<String>().to_lowercase()
    }

    /// The key players registered before keys took the skeleton first were given (the
    /// skeleton of the lower-cased name); log-in looks an account up by either.
    pub fn legacy_key(&self) -> String {
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
                // Default-ignorable since Unicode 14 (Khitan filler).
                | '\u{16FE4}'
                // Not ignorable, but drawn as nothing: braille blank, null notehead,
                // object replacement.
                | '\u{2800}'
                | '\u{1D159}'
                | '\u{FFFC}'
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
    fn a_capital_i_is_the_look_alike_of_a_small_l() {
        assert_eq!(key("AIazzzxz"), key("Alazzzxz"));
        assert_eq!(key("KAPITAN"), key("Kapitan"), "case still folds");
        assert_ne!(key("Alazzzxz"), key("Olazzzxz"));
    }

    #[test]
    fn blank_and_stacked_names_are_refused() {
        for blank in ["\u{2800}", "\u{16FE4}", "\u{1D159}", "a\u{2800}b"] {
            assert_eq!(
                PlayerName::parse(blank),
                Err(NameError::Invisible),
                "{blank:?}"
            );
        }
        assert_eq!(PlayerName::parse("--"), Err(NameError::NoLetter));
        let stacked = format!("a{}", "\u{0301}\u{0316}".repeat(15));
        assert_eq!(PlayerName::parse(&stacked), Err(NameError::StackedMarks));
        assert!(PlayerName::parse("Nguyễn").is_ok());
        assert!(PlayerName::parse("7").is_ok());
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
