//! The one stemmer of planning: Snowball's English algorithm (Porter2), through `frostem`, the
//! crate LanceDB's tokenizer already builds.
//!
//! The aspect keyer matches the taxonomy's cues against a text's stems, and the offline rules
//! compare two texts' content words by their stems; both stem with [`stem`], so "walks",
//! "walked" and "walking" are one word to either. Word lists the rules compare with stems are
//! stemmed the same way when they are built.

use std::sync::LazyLock;

use frostem::{Algorithm, Stemmer};

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::new(Algorithm::English));

/// The stem of a lowercase word ("walking" → "walk", "cities" → "citi"). A word with a digit
/// stays as it is ("1990s", "3rd"): it is a number or a code, not an inflected word.
pub fn stem(word: &str) -> String {
    if word.chars().any(|c| c.is_ascii_digit()) {
        return word.to_string();
    }
    ENGLISH.stem(word).into_owned()
}

/// The stems of a text's words: lowercase tokens of letters and digits (apostrophes and
/// hyphens split words), each stemmed.
pub fn stems(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| stem(&w.to_lowercase())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflections_share_a_stem_and_codes_stay_whole() {
        assert_eq!(stems("Walks, walked, WALKING"), ["walk", "walk", "walk"]);
        assert_eq!(stem("classes"), "class");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("glasses"), "glass");
        assert_eq!(stem("likes"), stem("like"));
        assert_eq!(stem("cities"), stem("city"));
        assert_eq!(stems("Théo's mother-in-law"), ["théo", "s", "mother", "in", "law"]);
        assert_eq!(
            stems("After the reorg I report to Sunil."),
            ["after", "the", "reorg", "i", "report", "to", "sunil"]
        );
        assert_eq!(stems("the 1990s, flat 3rd"), ["the", "1990s", "flat", "3rd"]);
    }
}
