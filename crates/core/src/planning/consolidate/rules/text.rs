//! Text preparation, and what a text says as the rules need it: tokens, clauses, attributes.

use std::collections::BTreeSet;

use super::normalise;
use super::words::*;

pub(super) fn unify_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201B}' | '`' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' => '"',
            c => c,
        })
        .collect()
}

/// `text` without a leading "HH:MM " time stamp.
pub(super) fn strip_time(text: &str) -> &str {
    let Some((first, rest)) = text.split_once(char::is_whitespace) else { return text };
    let is_time = first.split_once(':').is_some_and(|(h, m)| {
        (1..=2).contains(&h.len()) && m.len() == 2 && h.chars().chain(m.chars()).all(|c| c.is_ascii_digit())
    });
    if is_time { rest.trim_start() } else { text }
}

/// `text` without parenthesised asides such as "(since 2026-05-30)".
pub(super) fn drop_parentheticals(text: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Splits at sentence ends: `. ! ? ;` followed by whitespace or the end, and newlines.
pub(super) fn clauses(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (k, &c) in chars.iter().enumerate() {
        let end = c == '\n' || (".!?;".contains(c) && chars.get(k + 1).is_none_or(|n| n.is_whitespace()));
        if !end {
            current.push(c);
        } else if current.chars().any(char::is_alphanumeric) {
            out.push(current.trim().to_string());
            current.clear();
        }
    }
    if current.chars().any(char::is_alphanumeric) {
        out.push(current.trim().to_string());
    }
    out
}

pub(super) fn is_history(clause: &str) -> bool {
    let lower = clause.trim_start_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    HISTORY_OPENERS.iter().any(|h| lower.starts_with(h))
}

/// What a text says now: the text before its first clause of history (`; previously: …`),
/// without asides of history (`(previously recorded: …)`). An entry's past clauses say what
/// was true before; a fact that repeats one of them is not said by the entry.
pub(super) fn claim(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Asides that open with a history word go.
    while let Some(open) = rest.find('(') {
        let inner = &rest[open + 1..];
        let close = inner.find(')').map_or(rest.len(), |c| open + 1 + c + 1);
        out.push_str(&rest[..open]);
        if !is_history(inner) {
            out.push_str(&rest[open..close]);
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    // Then everything from the first clause of history on.
    let chars: Vec<(usize, char)> = out.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        let end = c == '\n' || (".!?;:".contains(c) && chars.get(k + 1).is_none_or(|(_, n)| n.is_whitespace()));
        if end && at > 0 && is_history(&out[at + c.len_utf8()..]) {
            return out[..at].trim_end().to_string();
        }
    }
    out.trim_end().to_string()
}

/// The clause that states the current value: the first one, when every later one is history.
/// `None` when the text states several things (it is then never part of a contradiction).
pub(super) fn current_clause(text: &str) -> Option<String> {
    let parts = clauses(&drop_parentheticals(strip_time(text.trim())));
    let (first, rest) = parts.split_first()?;
    rest.iter().all(|c| is_history(c)).then(|| first.clone())
}

/// One word as the rules see it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tok {
    /// Lowercase; contractions are split ("don't" → "do", "not").
    pub(super) word: String,
    /// As written, for capitalisation.
    pub(super) raw: String,
    /// First word of the text or of a sentence.
    pub(super) start: bool,
    /// The first punctuation mark written right after the word.
    pub(super) punct: Option<char>,
    /// Written with a possessive "'s" ("Ana's"), which `word` and `raw` leave out.
    pub(super) possessive: bool,
}

/// The tokens of a text as a person wrote it: the leading "HH:MM " of a turn left out,
/// typographic quotes unified.
pub(super) fn tokens_of(text: &str) -> Vec<Tok> {
    tokens(&unify_quotes(strip_time(text.trim())))
}

pub(super) fn tokens(text: &str) -> Vec<Tok> {
    let not_alnum = |c: char| !c.is_alphanumeric();
    let mut out: Vec<Tok> = Vec::new();
    let mut start = true;
    for chunk in text.split_whitespace() {
        let lead = chunk.len() - chunk.trim_start_matches(not_alnum).len();
        let core = chunk[lead..].trim_end_matches(not_alnum);
        let punct = chunk[lead + core.len()..].chars().find(|c| ".,;:!?".contains(*c));
        if !core.is_empty() {
            let possessive = core.to_lowercase().ends_with("'s");
            for (word, raw) in split_contraction(core) {
                out.push(Tok { word, raw, start, punct: None, possessive });
                start = false;
            }
            if let Some(last) = out.last_mut() {
                last.punct = punct;
            }
        }
        // The full stop of a title ("Dr. Chen") ends no sentence.
        let title = punct == Some('.') && out.last().is_some_and(|t| super::words::is_title(&t.word));
        if punct.is_some_and(|p| ".;:!?".contains(p)) && !title {
            start = true;
        }
    }
    out
}

/// `core` as (lowercase word, as written) pairs, with English contractions split.
pub(super) fn split_contraction(core: &str) -> Vec<(String, String)> {
    let lower = core.to_lowercase();
    let cut = |n: usize| core.get(..core.len().saturating_sub(n)).unwrap_or(core).to_string();
    let not = ("not".to_string(), "not".to_string());
    if lower == "cannot" {
        return vec![("can".into(), cut(3)), not];
    }
    if let Some(base) = lower.strip_suffix("n't") {
        let base = match base {
            "" => return vec![not],
            "ca" => "can",
            "wo" => "will",
            "sha" => "shall",
            b => b,
        };
        return vec![(base.to_string(), cut(3)), not];
    }
    for (suffix, expansion) in
        [("'m", "am"), ("'re", "are"), ("'ve", "have"), ("'ll", "will"), ("'d", "would"), ("'s", "")]
    {
        if let Some(base) = lower.strip_suffix(suffix).filter(|b| !b.is_empty()) {
            let mut out = vec![(base.to_string(), cut(suffix.len()))];
            if !expansion.is_empty() {
                out.push((expansion.to_string(), expansion.to_string()));
            }
            return out;
        }
    }
    vec![(lower, core.to_string())]
}

/// One text prepared for comparison.
pub(super) struct Said {
    /// The text without a leading time, trimmed.
    pub(super) exact: String,
    pub(super) norm: String,
    pub(super) toks: Vec<Tok>,
    pub(super) negated: bool,
    /// The clause that states the current value; `None` when the text states several things.
    pub(super) clause: Option<Clause>,
    pub(super) clause_text: Option<String>,
}

impl Said {
    pub(super) fn new(text: &str) -> Said {
        let exact = strip_time(text.trim());
        let body = unify_quotes(exact);
        let toks = tokens(&body);
        let clause_text = current_clause(&body);
        Said {
            exact: exact.to_string(),
            norm: normalise(text),
            negated: toks.iter().any(|t| is_negation(&t.word)),
            toks,
            clause: clause_text.as_deref().map(Clause::new),
            clause_text,
        }
    }

    pub(super) fn has_marker(&self) -> bool {
        self.clause.as_ref().is_some_and(|c| !c.markers.is_empty())
    }

    pub(super) fn correction(&self) -> bool {
        self.clause.as_ref().is_some_and(|c| c.correction)
    }
}

/// An attribute statement: "my favourite colour is purple", "email: a@b.c".
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attribute {
    /// The key's words as one spelling writes them ("favourite colour"), for signals.
    pub(super) key: Vec<String>,
    /// Their stems, for comparing keys ("kids' names" and "kid's name" are one key).
    pub(super) stems: Vec<String>,
    pub(super) value: Vec<String>,
}

/// The clause that states a fact's current value, reduced to what the rules compare.
#[derive(Debug, Clone)]
pub(super) struct Clause {
    /// Content words in order: no stopwords, negations or time adverbs; lightly stemmed;
    /// names as written (lowercase); a few verbs mapped to a frame (see [`frame`]).
    pub(super) words: Vec<String>,
    pub(super) names: BTreeSet<String>,
    pub(super) numbers: BTreeSet<String>,
    pub(super) dates: BTreeSet<String>,
    pub(super) negated: bool,
    pub(super) persons: BTreeSet<&'static str>,
    pub(super) markers: Vec<&'static str>,
    pub(super) attribute: Option<Attribute>,
    /// "X, not Y" or a word such as "actually", "typo".
    pub(super) correction: bool,
    /// States a possession ("has a cat"), which may have several values at once.
    pub(super) possession: bool,
}

impl Clause {
    pub(super) fn new(text: &str) -> Clause {
        let toks = tokens(text);
        let tail = contrast_at(&toks);
        let main = &toks[..tail.unwrap_or(toks.len())];
        let mut clause = Clause {
            words: content_words(main),
            names: BTreeSet::new(),
            numbers: BTreeSet::new(),
            dates: BTreeSet::new(),
            negated: main.iter().any(|t| is_negation(&t.word)),
            persons: main.iter().filter_map(|t| person(&t.word)).collect(),
            markers: markers(main),
            attribute: attribute(main),
            correction: tail.is_some_and(|k| toks[k].word == "not")
                || toks.iter().any(|t| listed!(CORRECTION_WORDS, &t.word)),
            possession: main.iter().any(|t| listed!(POSSESSION_WORDS, &t.word)),
        };
        for t in main {
            if is_date(t) {
                clause.dates.insert(t.word.clone());
            } else if is_number(&t.word) {
                clause.numbers.insert(t.word.clone());
            } else if is_name(t) {
                clause.names.insert(t.word.clone());
            }
        }
        clause
    }
}

/// Where a contrastive tail starts: ", not Y" (a correction), "instead of", "rather than".
pub(super) fn contrast_at(toks: &[Tok]) -> Option<usize> {
    (1..toks.len()).find(|&k| {
        let next = toks.get(k + 1).map(|t| t.word.as_str());
        match toks[k].word.as_str() {
            "not" => toks[k - 1].punct == Some(',') && next != Some("even"),
            "instead" => next == Some("of"),
            "rather" => next == Some("than"),
            _ => false,
        }
    })
}

pub(super) fn content_words(main: &[Tok]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, t) in main.iter().enumerate() {
        let w = t.word.as_str();
        let after_these = k > 0 && main[k - 1].word == "these";
        if is_negation(w) || is_stopword(w) || listed!(TIME_ADVERBS, w) || (w == "days" && after_these) {
            continue;
        }
        if is_name(t) {
            out.push(t.word.clone());
            continue;
        }
        out.push(frame(w, main.get(k + 1)).map_or_else(|| word_stem(w), str::to_string));
    }
    out
}

pub(super) fn markers(main: &[Tok]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (k, t) in main.iter().enumerate() {
        let next = main.get(k + 1).map(|n| n.word.as_str());
        let marker = match (t.word.as_str(), next) {
            ("no", Some("longer")) => Some("no longer"),
            ("these", Some("days")) => Some("these days"),
            ("as", Some("of")) => Some("as of"),
            (w, _) => word_set!(MARKER_WORDS).get(w).copied(),
        };
        if let Some(m) = marker.filter(|m| !out.contains(m)) {
            out.push(m);
        }
    }
    out
}

/// "X: Y", "X is Y", "X is named Y", where X is a favourite or a single-valued attribute.
pub(super) fn attribute(main: &[Tok]) -> Option<Attribute> {
    if main.iter().any(|t| is_negation(&t.word)) {
        return None;
    }
    let colon = main.iter().position(|t| t.punct == Some(':')).filter(|&k| k < 4 && k + 1 < main.len());
    let (key, mut value) = match colon {
        Some(k) => (&main[..=k], &main[k + 1..]),
        None => {
            let k =
                main.iter().position(|t| matches!(t.word.as_str(), "is" | "are")).filter(|&k| (1..=5).contains(&k))?;
            (&main[..k], &main[k + 1..])
        }
    };
    let mut key: Vec<String> = key
        .iter()
        .map(|t| t.word.as_str())
        .filter(|w| !is_article(w) && person(w).is_none())
        .map(|w| spelled(w).to_string())
        .collect();
    // "My manager is called Priya" names the one manager; "Our neighbour is called Georgia"
    // one neighbour of several, which says nothing against a neighbour called Victoria ("is
    // now called" does: a temporal marker, read apart).
    let one_of_several = key.last().is_some_and(|w| listed!(SEVERAL_NOUNS, w));
    let named = !one_of_several && value.first().is_some_and(|t| matches!(t.word.as_str(), "named" | "called"));
    if named {
        key.push("name".into());
        value = &value[1..];
    }
    let value: Vec<String> =
        value.iter().map(|t| t.word.clone()).filter(|w| !is_article(w) && !listed!(TIME_ADVERBS, w)).collect();
    let stems: Vec<String> = key.iter().map(|w| word_stem(w)).collect();
    let single_valued = named
        || key.iter().any(|w| w == "favourite")
        || stems.last().is_some_and(|w| stem_set!(ATTRIBUTE_NOUNS).contains(w));
    (single_valued && !value.is_empty() && value.len() <= 6).then_some(Attribute { key, stems, value })
}
