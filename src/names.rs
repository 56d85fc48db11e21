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
//!
//! Marks are counted after canonical decomposition (a precomposed `á` is a letter and one
//! mark), and before keying, a mark that does not change how its letter looks is folded
//! away: a combining dot above (U+0307) on a letter that already carries a dot (`i`, `j`
//! and the other soft-dotted letters), unless another mark above came first.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;
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
        // Decomposed: a precomposed letter's own marks count as the marks they are.
        for c in name.nfd() {
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
    /// Marks that do not change a letter's look (see the module note) are folded first.
    pub fn key(&self) -> String {
        key_of(&fold_unseen_marks(&self.0))
    }

    /// Every key an existing account with this name may be stored under, newest first: the
    /// key, the key before unseen marks were folded, and the legacy key. Registration and
    /// log-in look names up by all of them.
    pub fn lookup_keys(&self) -> Vec<String> {
        let mut keys = vec![self.key(), key_of(&self.0), self.legacy_key()];
        keys.dedup();
        keys
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

/// The skeleton of the upper-cased text, folded, then skeleton and folding once more.
fn key_of(name: &str) -> String {
    let once = skeleton(&name.to_uppercase())
        .collect::<String>()
        .to_lowercase();
    skeleton(&once).collect::<String>().to_lowercase()
}

/// `name` without the marks that leave its letters looking the same: a combining dot above
/// on a soft-dotted letter (its own dot is where the mark would go) when it is the first
/// mark above that letter.
fn fold_unseen_marks(name: &str) -> String {
    const DOT_ABOVE: char = '\u{0307}';
    /// Above marks share this canonical combining class.
    const ABOVE: u8 = 230;
    let mut folded = String::with_capacity(name.len());
    let mut dotted_base = false;
    let mut above_taken = false;
    for c in name.nfd() {
        if c.general_category_group() == GeneralCategoryGroup::Mark {
            if c == DOT_ABOVE && dotted_base && !above_taken {
                continue;
            }
            above_taken |= canonical_combining_class(c) == ABOVE;
        } else {
            dotted_base = is_soft_dotted(c);
            above_taken = false;
        }
        folded.push(c);
    }
    folded.nfc().collect()
}

/// Letters drawn with a dot of their own (Unicode's Soft_Dotted property) that NFKC keeps.
fn is_soft_dotted(c: char) -> bool {
    matches!(
        c,
        'i' | 'j'
            | '\u{012F}'
            | '\u{0249}'
            | '\u{0268}'
            | '\u{029D}'
            | '\u{03F3}'
            | '\u{0456}'
            | '\u{0458}'
            | '\u{1D96}'
            | '\u{1DA4}'
            | '\u{1DA8}'
            | '\u{1E2D}'
            | '\u{1ECB}'
            | '\u{1DF1A}'
    )
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
    fn a_dot_above_a_dotted_letter_folds_away() {
        assert_eq!(key("Alamoyryi\u{0307}"), key("Alamoyryi"));
        assert_eq!(key("Ali\u{0307}ce"), key("Alice"));
        assert_eq!(
            key("Ali\u{0323}\u{0307}"),
            key("Ali\u{0323}"),
            "below marks come first"
        );
        assert_eq!(key("Cyri\u{0456}\u{0307}"), key("Cyri\u{0456}"));
        // A dot above changes the look of an undotted letter, or of an i already topped by
        // another mark: those stay distinct.
        assert_ne!(key("Alamoyrya\u{0307}"), key("Alamoyrya"));
        assert_ne!(key("\u{0130}la"), key("Ila"), "capital I with dot above");
        assert_ne!(key("Ali\u{0301}\u{0307}"), key("Ali\u{0301}"));
        // Accounts keyed before the folding are still found.
        let name = PlayerName::parse("Alamoyryi\u{0307}").expect("valid");
        assert!(name.lookup_keys().contains(&key_of(name.as_str())));
    }

    #[test]
    fn marks_are_counted_after_decomposition() {
        // NFKC composes `a` + U+0301 into `á`; three more marks make four on one letter.
        let precomposed = "Ala\u{00E1}\u{0316}\u{0317}\u{0318}";
        assert_eq!(PlayerName::parse(precomposed), Err(NameError::StackedMarks));
        assert!(PlayerName::parse("Ala\u{00E1}\u{0316}\u{0317}").is_ok());
        assert!(
            PlayerName::parse("Nguy\u{1EC5}n").is_ok(),
            "ễ has two marks"
        );
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
