//! The words of a text as the taxonomy's cues are matched against them: lowercase tokens of
//! letters and digits, each cut to a crude stem.

/// Lowercase word tokens of letters and digits (apostrophes and hyphens split words), each
/// stemmed by [`stem`].
pub fn stems(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| stem(&w.to_lowercase())).collect()
}

/// A crude stem: a trailing `ing`, `ed`, `es` or `s` is dropped when enough of the word is
/// left ("walking", "walked", "walks" → "walk"; "classes" → "class"; "bus" stays).
pub fn stem(word: &str) -> String {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.chars().count() >= 3
            && !(suffix == "s" && (base.ends_with('s') || base.ends_with('u') || base.ends_with('i')))
        {
            return base.to_string();
        }
    }
    word.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflections_share_a_stem_and_cues_match_as_phrases() {
        assert_eq!(stems("Walks, walked, WALKING"), ["walk", "walk", "walk"]);
        assert_eq!(stem("classes"), "class");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("glasses"), "glass");
        assert_eq!(stems("Théo's mother-in-law"), ["théo", "s", "mother", "in", "law"]);
        assert_eq!(stems("After the reorg I report to Sunil."), ["after", "the", "reorg", "i", "report", "to", "sunil"]);
    }
}
