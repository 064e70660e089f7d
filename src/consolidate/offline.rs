//! The offline decider: the text rules that turn one cluster into ops when no LLM is configured.
//!
//! [`decide`] is a pure function of a [`ClusterDoc`] (README, "How consolidation works"). It compares texts, never
//! vectors, and prefers a missed merge to a wrong one:
//!
//! - DUPLICATE when a candidate's text equals a neighbour's (or the neighbour's current clause,
//!   so the decider recognises its own REPLACE content), exactly or after [`normalise`], and no
//!   number, date, name or negation differs between the two; a pinned neighbour too, since a
//!   DUPLICATE only adds sources. A neighbour an earlier candidate of the call updates is
//!   compared as it will read, by that candidate's text, so a repeat of the old value is not
//!   taken for a duplicate;
//! - REPLACE when it clearly contradicts exactly one non-pinned, not newer neighbour about the
//!   same subject (negation polarity, an antonym pair, the same attribute with another value, or
//!   a temporal marker with only the value changed); the content keeps the old text as history:
//!   "X (since D); previously: Y", or for a correction "X (previously recorded: Y)";
//! - ADD otherwise. Candidates that duplicate or contradict each other share one op.
//!
//! Word overlap is only ever a precondition of those rules, never a reason on its own. Every op
//! names the rules that fired in `signals`; the offline decider never proposes REMOVE.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;

use super::ops::{Candidate, ClusterDoc, Neighbor, Op, ProposedOp};

/// Decides one cluster: every candidate ends up in exactly one op, ops in candidate order.
///
/// Candidates are taken by date, then (within a day) those with a temporal marker last, then by
/// id. Each one, in this order of preference, joins the op of a neighbour or earlier candidate
/// it duplicates, updates the one neighbour or earlier op it contradicts, or becomes an ADD.
/// A fact dated after `today` is never trusted to be the newer side of an update.
pub fn decide(doc: &ClusterDoc, today: NaiveDate) -> Vec<ProposedOp> {
    let mut cands: Vec<Cand> = doc.candidates.iter().map(|c| Cand { c, fact: Fact::new(&c.text) }).collect();
    cands.sort_by(|a, b| a.key().cmp(&b.key()));
    let mut neighs: Vec<Neigh> = doc.neighbors.iter().map(Neigh::new).collect();
    neighs.sort_by(|a, b| (&a.n.id, &a.n.content).cmp(&(&b.n.id, &b.n.content)));
    let mut plan = Plan::default();
    for i in 0..cands.len() {
        plan.place(&cands, &neighs, i, today);
    }
    plan.drafts.iter().map(|d| d.render(&cands, &neighs)).collect()
}

/// The form used for duplicate detection: no leading "HH:MM ", typographic quotes unified,
/// lowercase, whitespace collapsed, trailing punctuation removed.
pub fn normalise(text: &str) -> String {
    let flat = unify_quotes(strip_time(text.trim())).split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    flat.trim_end_matches(|c: char| ".!?;:,".contains(c) || c.is_whitespace()).to_string()
}

// ---------------------------------------------------------------------------------------------
// Word lists, space-separated (small on purpose: each one is a rule a person can read and argue with).

const STOPWORDS: &str = concat!(
    "a an the and or but of to in on at for with by from as into onto about than then so too very really ",
    "just also still even quite i me my mine myself we us our ours you your yours he him his she her hers ",
    "they them their theirs it its this that these those is am are was were be been being do does did ",
    "have has had having will would shall should can could may might must there here some any longer yet ",
    "again actually",
);
const NEGATIONS: &str = "not no never none nobody nothing neither nor";
/// Temporal markers: a fact that has one says what is true from now on.
const MARKER_WORDS: &str = "now currently nowadays anymore moved switched started changed became joined quit stopped";
/// Markers that are time adverbs, not content ("now works at" = "works at").
const TIME_ADVERBS: &str = "now currently nowadays anymore";
const CORRECTION_WORDS: &str = "correction corrected mistake misspelled typo wrong actually";
const ANTONYMS: &[(&str, &str)] = &[
    ("like", "dislike"),
    ("love", "hate"),
    ("like", "hate"),
    ("open", "closed"),
    ("married", "divorced"),
    ("married", "single"),
    ("employed", "unemployed"),
    ("allowed", "forbidden"),
    ("enabled", "disabled"),
    ("available", "unavailable"),
    ("started", "stopped"),
];
/// Head nouns of attributes that hold one value at a time ("my X is Y" replaces the old Y).
const ATTRIBUTE_NOUNS: &str = concat!(
    "name surname nickname colour email phone number address age birthday job title role employer salary ",
    "rent timezone hometown height weight manager boss partner wife husband girlfriend boyfriend doctor ",
    "dentist username pronoun",
);
/// Verbs of having: what one has can be many things, so "now has X" does not replace "has Y".
const POSSESSION_WORDS: &str = "has have had got own owns owned bought adopted";
const NUMBER_WORDS: &str = concat!(
    "zero one two three four five six seven eight nine ten eleven twelve twenty hundred thousand million ",
    "once twice",
);
const MONTHS: &str = concat!(
    "january february march april may june july august september october november december jan feb mar ",
    "apr jun jul aug sep sept oct nov dec",
);
const DAY_WORDS: &str = "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight";
/// How a later clause of an entry starts when it is only history of the first one.
const HISTORY_OPENERS: &[&str] = &["previously", "formerly", "before that", "until", "used to"];
/// Jaccard over content words required before negation or an antonym can count as a contradiction.
const SAME_SUBJECT_JACCARD: f64 = 0.75;

// ---------------------------------------------------------------------------------------------
// Text preparation.

fn unify_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201B}' | '`' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' => '"',
            c => c,
        })
        .collect()
}

/// `text` without a leading "HH:MM " time stamp.
fn strip_time(text: &str) -> &str {
    let Some((first, rest)) = text.split_once(char::is_whitespace) else { return text };
    let is_time = first.split_once(':').is_some_and(|(h, m)| {
        (1..=2).contains(&h.len()) && m.len() == 2 && h.chars().chain(m.chars()).all(|c| c.is_ascii_digit())
    });
    if is_time { rest.trim_start() } else { text }
}

/// `text` without parenthesised asides such as "(since 2026-05-30)".
fn drop_parentheticals(text: &str) -> String {
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
fn clauses(text: &str) -> Vec<String> {
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

fn is_history(clause: &str) -> bool {
    let lower = clause.trim_start_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    HISTORY_OPENERS.iter().any(|h| lower.starts_with(h))
}

/// The clause that states the current value: the first one, when every later one is history.
/// `None` when the text states several things (it is then never part of a contradiction).
fn current_clause(text: &str) -> Option<String> {
    let parts = clauses(&drop_parentheticals(strip_time(text.trim())));
    let (first, rest) = parts.split_first()?;
    rest.iter().all(|c| is_history(c)).then(|| first.clone())
}

/// One word as the rules see it.
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    /// Lowercase; contractions are split ("don't" → "do", "not").
    word: String,
    /// As written, for capitalisation.
    raw: String,
    /// First word of the text or of a sentence.
    start: bool,
    /// The first punctuation mark written right after the word.
    punct: Option<char>,
}

fn tokens(text: &str) -> Vec<Tok> {
    let not_alnum = |c: char| !c.is_alphanumeric();
    let mut out: Vec<Tok> = Vec::new();
    let mut start = true;
    for chunk in text.split_whitespace() {
        let lead = chunk.len() - chunk.trim_start_matches(not_alnum).len();
        let core = chunk[lead..].trim_end_matches(not_alnum);
        let punct = chunk[lead + core.len()..].chars().find(|c| ".,;:!?".contains(*c));
        if !core.is_empty() {
            for (word, raw) in split_contraction(core) {
                out.push(Tok { word, raw, start, punct: None });
                start = false;
            }
            if let Some(last) = out.last_mut() {
                last.punct = punct;
            }
        }
        if punct.is_some_and(|p| ".;:!?".contains(p)) {
            start = true;
        }
    }
    out
}

/// `core` as (lowercase word, as written) pairs, with English contractions split.
fn split_contraction(core: &str) -> Vec<(String, String)> {
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

// ---------------------------------------------------------------------------------------------
// Word classes.

fn listed(list: &str, word: &str) -> bool {
    list.split(' ').any(|w| w == word)
}

fn is_stopword(word: &str) -> bool {
    listed(STOPWORDS, word)
}

fn is_negation(word: &str) -> bool {
    listed(NEGATIONS, word)
}

fn is_article(word: &str) -> bool {
    matches!(word, "a" | "an" | "the")
}

fn is_number(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit()) || listed(NUMBER_WORDS, word)
}

/// ISO and numeric dates, ordinals ("3rd"), month names (capitalised), weekdays, "today".
fn is_date(t: &Tok) -> bool {
    let w = t.word.as_str();
    let capitalised = t.raw.chars().next().is_some_and(char::is_uppercase);
    let ordinal = ["st", "nd", "rd", "th"]
        .iter()
        .any(|s| w.strip_suffix(s).is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())));
    let parts: Vec<&str> = w.split(['-', '/']).collect();
    let numeric = (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && (parts[0].len() == 4 || parts.iter().rev().skip(1).all(|p| p.len() <= 2));
    (capitalised && listed(MONTHS, w)) || listed(DAY_WORDS, w) || ordinal || numeric
}

/// A proper name: capitalised and not the first word of a sentence, or all capitals ("NASA").
fn is_name(t: &Tok) -> bool {
    if t.word == "i" || is_date(t) {
        return false;
    }
    let letters: Vec<char> = t.raw.chars().filter(|c| c.is_alphabetic()).collect();
    let all_caps = letters.len() >= 2 && letters.iter().all(|c| c.is_uppercase());
    all_caps || (!t.start && t.raw.chars().next().is_some_and(char::is_uppercase))
}

/// A capitalised first word that may be a name ("Alice is my sister"); used only to veto.
fn maybe_name(t: &Tok) -> bool {
    t.start
        && t.raw.chars().next().is_some_and(char::is_uppercase)
        && t.word.len() > 1
        && t.word.chars().all(char::is_alphabetic)
        && !["s", "ed", "ing"].iter().any(|s| t.word.ends_with(s))
        && !is_stopword(&t.word)
        && !is_negation(&t.word)
        && !listed(MARKER_WORDS, &t.word)
}

fn person(word: &str) -> Option<&'static str> {
    Some(match word {
        "i" | "me" | "my" | "mine" | "myself" => "first",
        "we" | "us" | "our" | "ours" => "we",
        "you" | "your" | "yours" => "you",
        "he" | "him" | "his" => "he",
        "she" | "her" | "hers" => "she",
        "they" | "them" | "their" | "theirs" => "they",
        _ => return None,
    })
}

/// Light stemming: "likes" → "like", "cities" → "city"; words with digits stay as they are.
fn stem(word: &str) -> String {
    if word.chars().any(|c| c.is_ascii_digit()) {
        return word.to_string();
    }
    if word.len() > 4
        && let Some(base) = word.strip_suffix("ies")
    {
        return format!("{base}y");
    }
    if word.len() > 3 && word.ends_with('s') && !["ss", "us", "is"].iter().any(|s| word.ends_with(s)) {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

fn spelling(word: String) -> String {
    match word.as_str() {
        "favorite" | "fave" => "favourite".into(),
        "color" => "colour".into(),
        _ => word,
    }
}

/// A few verbs that name the same slot in different words ("works at" / "started at" → `@work`).
fn frame(stem: &str, next: Option<&Tok>) -> Option<&'static str> {
    let after = next.map_or("", |t| t.word.as_str());
    match stem {
        "work" | "working" | "worked" | "employed" | "started" if matches!(after, "at" | "for" | "with") => {
            Some("@work")
        }
        "joined" if after == "at" || next.is_some_and(is_name) => Some("@work"),
        "live" | "living" | "lived" | "based" | "moved" | "relocated"
            if matches!(after, "in" | "to" | "into" | "near") =>
        {
            Some("@home")
        }
        "use" | "using" => Some("@use"),
        "switched" if after == "to" => Some("@use"),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// What a text says, as the rules need it.

/// One text prepared for comparison.
struct Fact {
    /// The text without a leading time, trimmed.
    exact: String,
    norm: String,
    toks: Vec<Tok>,
    negated: bool,
    /// The clause that states the current value; `None` when the text states several things.
    clause: Option<Clause>,
    clause_text: Option<String>,
}

impl Fact {
    fn new(text: &str) -> Fact {
        let exact = strip_time(text.trim());
        let body = unify_quotes(exact);
        let toks = tokens(&body);
        let clause_text = current_clause(&body);
        Fact {
            exact: exact.to_string(),
            norm: normalise(text),
            negated: toks.iter().any(|t| is_negation(&t.word)),
            toks,
            clause: clause_text.as_deref().map(Clause::new),
            clause_text,
        }
    }

    fn has_marker(&self) -> bool {
        self.clause.as_ref().is_some_and(|c| !c.markers.is_empty())
    }

    fn correction(&self) -> bool {
        self.clause.as_ref().is_some_and(|c| c.correction)
    }
}

/// An attribute statement: "my favourite colour is purple", "email: a@b.c".
#[derive(Debug, Clone, PartialEq)]
struct Attribute {
    key: Vec<String>,
    value: Vec<String>,
}

/// The clause that states a fact's current value, reduced to what the rules compare.
#[derive(Debug, Clone)]
struct Clause {
    /// Content words in order: no stopwords, negations or time adverbs; lightly stemmed;
    /// names as written (lowercase); a few verbs mapped to a frame (see [`frame`]).
    words: Vec<String>,
    names: BTreeSet<String>,
    numbers: BTreeSet<String>,
    dates: BTreeSet<String>,
    negated: bool,
    persons: BTreeSet<&'static str>,
    markers: Vec<&'static str>,
    attribute: Option<Attribute>,
    /// "X, not Y" or a word such as "actually", "typo".
    correction: bool,
    /// States a possession ("has a cat"), which may have several values at once.
    possession: bool,
}

impl Clause {
    fn new(text: &str) -> Clause {
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
                || toks.iter().any(|t| listed(CORRECTION_WORDS, &t.word)),
            possession: main.iter().any(|t| listed(POSSESSION_WORDS, &t.word)),
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
fn contrast_at(toks: &[Tok]) -> Option<usize> {
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

fn content_words(main: &[Tok]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, t) in main.iter().enumerate() {
        let w = t.word.as_str();
        let after_these = k > 0 && main[k - 1].word == "these";
        if is_negation(w) || is_stopword(w) || listed(TIME_ADVERBS, w) || (w == "days" && after_these) {
            continue;
        }
        if is_name(t) {
            out.push(t.word.clone());
            continue;
        }
        let stem = spelling(stem(w));
        out.push(frame(&stem, main.get(k + 1)).map_or(stem, str::to_string));
    }
    out
}

fn markers(main: &[Tok]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (k, t) in main.iter().enumerate() {
        let next = main.get(k + 1).map(|n| n.word.as_str());
        let marker = match (t.word.as_str(), next) {
            ("no", Some("longer")) => Some("no longer"),
            ("these", Some("days")) => Some("these days"),
            ("as", Some("of")) => Some("as of"),
            (w, _) => MARKER_WORDS.split(' ').find(|m| *m == w),
        };
        if let Some(m) = marker.filter(|m| !out.contains(m)) {
            out.push(m);
        }
    }
    out
}

/// "X: Y", "X is Y", "X is named Y", where X is a favourite or a single-valued attribute.
fn attribute(main: &[Tok]) -> Option<Attribute> {
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
        .map(|w| spelling(stem(w)))
        .collect();
    let named = value.first().is_some_and(|t| matches!(t.word.as_str(), "named" | "called"));
    if named {
        key.push("name".into());
        value = &value[1..];
    }
    let value: Vec<String> =
        value.iter().map(|t| t.word.clone()).filter(|w| !is_article(w) && !listed(TIME_ADVERBS, w)).collect();
    let single_valued =
        named || key.iter().any(|w| w == "favourite") || key.last().is_some_and(|w| listed(ATTRIBUTE_NOUNS, w));
    (single_valued && !value.is_empty() && value.len() <= 6).then_some(Attribute { key, value })
}

// ---------------------------------------------------------------------------------------------
// The rules.

/// What comparing a candidate with another text found.
#[derive(Debug, Clone, PartialEq)]
enum Dup {
    /// A duplicate; the signals say which kind.
    Same(Vec<&'static str>),
    /// Equal but for numbers, dates, names or negation: not a duplicate, and these say why.
    Vetoed(Vec<&'static str>),
    Different,
}

fn duplicate(a: &Fact, b: &Fact) -> Dup {
    if a.exact == b.exact {
        return Dup::Same(vec!["exact-duplicate"]);
    }
    match vetoes(a, b) {
        Some(v) if !v.is_empty() => Dup::Vetoed(v),
        Some(_) if a.norm == b.norm => Dup::Same(vec!["normalized-duplicate"]),
        _ => Dup::Different,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Word,
    Number,
    Date,
    Name,
}

fn kind(t: &Tok) -> Kind {
    if is_date(t) {
        Kind::Date
    } else if is_number(&t.word) {
        Kind::Number
    } else if is_name(t) || maybe_name(t) {
        Kind::Name
    } else {
        Kind::Word
    }
}

/// Aligns two texts word by word (negations and "do" left out). `None` when they differ in
/// ordinary words; otherwise the vetoes for the numbers, dates, names and negation that differ.
fn vetoes(a: &Fact, b: &Fact) -> Option<Vec<&'static str>> {
    let keep = |t: &&Tok| !is_negation(&t.word) && !matches!(t.word.as_str(), "do" | "does" | "did");
    let xs: Vec<&Tok> = a.toks.iter().filter(keep).collect();
    let ys: Vec<&Tok> = b.toks.iter().filter(keep).collect();
    if xs.len() != ys.len() {
        return None;
    }
    let mut found = [false; 4];
    let mut mark = |k: Kind| match k {
        Kind::Number => found[0] = true,
        Kind::Date => found[1] = true,
        Kind::Name => found[2] = true,
        Kind::Word => {}
    };
    for (x, y) in xs.iter().zip(&ys) {
        if x.word == y.word {
            continue; // a difference in case only ("Google" / "google") is what normalising is for
        }
        let (kx, ky) = (kind(x), kind(y));
        if kx == Kind::Word || ky == Kind::Word {
            return None;
        }
        mark(kx);
        mark(ky);
        if is_number(&x.word) && is_number(&y.word) {
            mark(Kind::Number);
        }
    }
    found[3] = a.negated != b.negated;
    let names = ["veto:number", "veto:date", "veto:name", "veto:negation"];
    Some(names.iter().zip(found).filter(|(_, f)| *f).map(|(n, _)| *n).collect())
}

/// Substantial, order-consistent overlap of content words.
fn same_subject(a: &[String], b: &[String]) -> bool {
    let (sa, sb): (BTreeSet<&String>, BTreeSet<&String>) = (a.iter().collect(), b.iter().collect());
    let shared: BTreeSet<&String> = sa.intersection(&sb).copied().collect();
    let union = sa.union(&sb).count();
    if shared.is_empty() || (shared.len() as f64) < SAME_SUBJECT_JACCARD * union as f64 {
        return false;
    }
    let order = |ws: &[String]| {
        let mut seen = BTreeSet::new();
        ws.iter().filter(|w| shared.contains(w) && seen.insert(w.as_str())).cloned().collect::<Vec<_>>()
    };
    order(a) == order(b)
}

/// An antonym pair across the two texts with the same subject once the pair is left out.
fn antonym(a: &[String], b: &[String]) -> Option<(&'static str, &'static str)> {
    let has = |ws: &[String], w: &str| ws.iter().any(|x| x == w);
    for &(x, y) in ANTONYMS {
        for (p, q) in [(x, y), (y, x)] {
            if has(a, p) && has(b, q) && !has(a, q) && !has(b, p) {
                let rest = |ws: &[String]| ws.iter().filter(|w| *w != p && *w != q).cloned().collect::<Vec<_>>();
                if same_subject(&rest(a), &rest(b)) {
                    return Some((x, y));
                }
            }
        }
    }
    None
}

/// The same statement with only its value changed: a shared leading frame ("works at"), then
/// one short differing slot ("Google" / "Microsoft"). Frames named by synonyms (`@work`) need
/// proper names in the slot; other frames must not be possessions.
fn slot_update(old: &Clause, new: &Clause) -> bool {
    let (a, b) = (&old.words[..], &new.words[..]);
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (was, now) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let frame: Vec<&String> = a[..prefix].iter().chain(&a[a.len() - suffix..]).collect();
    let widest = was.len().max(now.len());
    if prefix == 0 || was.is_empty() || now.is_empty() || widest > 3 || frame.len() < widest {
        return false;
    }
    if was.iter().chain(now).any(|w| w.starts_with('@')) {
        return false;
    }
    if frame.iter().any(|w| w.starts_with('@')) {
        return was.iter().all(|w| old.names.contains(w)) && now.iter().all(|w| new.names.contains(w));
    }
    !old.possession && !new.possession
}

/// The rules by which `new` contradicts or updates `old` (empty when it does not).
fn contradiction(old: &Clause, new: &Clause) -> Vec<String> {
    let mut signals = Vec::new();
    if !(old.persons.is_empty() || new.persons.is_empty() || old.persons == new.persons) {
        return signals;
    }
    let same_values = old.names == new.names && old.numbers == new.numbers && old.dates == new.dates;
    if old.negated != new.negated && same_values && same_subject(&old.words, &new.words) {
        signals.push("negation-polarity".to_string());
    }
    if old.negated == new.negated
        && same_values
        && let Some((x, y)) = antonym(&old.words, &new.words)
    {
        signals.push(format!("antonym:{x}/{y}"));
    }
    if !old.negated
        && !new.negated
        && let (Some(a), Some(b)) = (&old.attribute, &new.attribute)
        && a.key == b.key
        && a.value != b.value
    {
        signals.push(format!("attribute-value:{}", a.key.join(" ")));
    }
    if let Some(m) = new.markers.first()
        && (!signals.is_empty() || (old.negated == new.negated && slot_update(old, new)))
    {
        signals.push(format!("temporal-marker:{m}"));
    }
    signals
}

// ---------------------------------------------------------------------------------------------
// Forming ops.

struct Cand<'a> {
    c: &'a Candidate,
    fact: Fact,
}

impl Cand<'_> {
    fn key(&self) -> (NaiveDate, bool, &str, &str) {
        (self.c.date, self.fact.has_marker(), &self.c.id, &self.c.text)
    }

    fn body(&self) -> &str {
        strip_time(self.c.text.trim())
    }
}

struct Neigh<'a> {
    n: &'a Neighbor,
    fact: Fact,
    /// The current clause as a text of its own, when it differs from the whole content.
    head: Option<Fact>,
}

impl Neigh<'_> {
    fn new(n: &Neighbor) -> Neigh<'_> {
        let fact = Fact::new(&n.content);
        let head = fact.clause_text.as_deref().filter(|t| normalise(t) != fact.norm).map(Fact::new);
        Neigh { n, fact, head }
    }

    fn duplicate_of(&self, c: &Fact) -> Dup {
        let whole = duplicate(c, &self.fact);
        match (whole, self.head.as_ref().map(|h| duplicate(c, h))) {
            (Dup::Same(s), _) => Dup::Same(s),
            (_, Some(Dup::Same(mut s))) => {
                s.push("current-clause");
                Dup::Same(s)
            }
            (Dup::Vetoed(mut v), Some(Dup::Vetoed(w))) => {
                v.extend(w.into_iter().filter(|x| !v.contains(x)).collect::<Vec<_>>());
                Dup::Vetoed(v)
            }
            (Dup::Vetoed(v), _) | (_, Some(Dup::Vetoed(v))) => Dup::Vetoed(v),
            _ => Dup::Different,
        }
    }
}

/// One op under construction.
#[derive(Debug, Default)]
struct Draft {
    /// The neighbour this op is about (DUPLICATE, or REPLACE once it has statements); ADD when `None`.
    target: Option<usize>,
    facts: Vec<usize>,
    /// Candidates whose text makes up the content, oldest first; the last one is current.
    statements: Vec<usize>,
    signals: Vec<String>,
}

impl Draft {
    fn render(&self, cands: &[Cand], neighs: &[Neigh]) -> ProposedOp {
        let facts = self.facts.iter().map(|&i| cands[i].c.id.clone()).collect();
        let statements: Vec<&Cand> = self.statements.iter().map(|&i| &cands[i]).collect();
        let op = match (self.target, statements.split_first()) {
            (Some(n), None) => Op::Duplicate { facts, target: neighs[n].n.id.clone() },
            (Some(n), Some(_)) => Op::Replace {
                target: neighs[n].n.id.clone(),
                facts,
                content: with_history(neighs[n].n.content.trim().to_string(), &statements),
                why: Some(
                    if statements.last().is_some_and(|c| c.fact.correction()) { "correction" } else { "update" }.into(),
                ),
            },
            (None, Some((first, rest))) => Op::Add { facts, content: with_history(first.body().to_string(), rest) },
            (None, None) => Op::Add { facts, content: String::new() },
        };
        let signals = if self.signals.is_empty() { vec!["no-match".to_string()] } else { self.signals.clone() };
        ProposedOp::with_signals(op, signals)
    }
}

/// `base` with each update laid over it, newest outermost.
fn with_history(base: String, updates: &[&Cand]) -> String {
    updates.iter().fold(base, |previous, c| {
        let now = c.body().trim_end().trim_end_matches('.').trim_end();
        if c.fact.correction() {
            format!("{now} (previously recorded: {previous})")
        } else {
            format!("{now} (since {}); previously: {previous}", c.c.date)
        }
    })
}

/// Where a contradicted statement lives: a neighbour (and its op, if any) or an ADD draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Dest {
    Entry(usize),
    Draft(usize),
}

#[derive(Debug, Default)]
struct Plan {
    drafts: Vec<Draft>,
    /// The draft of each candidate placed so far (by sorted index).
    owner: Vec<usize>,
    /// The draft of each neighbour that has one.
    targets: BTreeMap<usize, usize>,
}

impl Plan {
    fn join<S: Into<String>>(&mut self, d: usize, i: usize, statement: bool, signals: impl IntoIterator<Item = S>) {
        let draft = &mut self.drafts[d];
        draft.facts.push(i);
        if statement {
            draft.statements.push(i);
        }
        for s in signals.into_iter().map(Into::into) {
            if !draft.signals.contains(&s) {
                draft.signals.push(s);
            }
        }
        self.owner.push(d);
    }

    fn add<S: Into<String>>(&mut self, i: usize, signals: impl IntoIterator<Item = S>) {
        self.drafts.push(Draft::default());
        self.join(self.drafts.len() - 1, i, true, signals);
    }

    fn target(&mut self, n: usize) -> usize {
        if let Some(&d) = self.targets.get(&n) {
            return d;
        }
        self.drafts.push(Draft { target: Some(n), ..Draft::default() });
        self.targets.insert(n, self.drafts.len() - 1);
        self.drafts.len() - 1
    }

    /// Places candidate `i` (all earlier ones are placed).
    fn place(&mut self, cands: &[Cand], neighs: &[Neigh], i: usize, today: NaiveDate) {
        let cand = &cands[i];
        let mut vetoes: Vec<String> = Vec::new();
        let mut note = |v: Vec<&'static str>| {
            for s in v {
                if !vetoes.iter().any(|x| x == s) {
                    vetoes.push(s.to_string());
                }
            }
        };
        for (n, nb) in neighs.iter().enumerate() {
            // A neighbour an earlier candidate already updates now says what that one says.
            let now_says = self.targets.get(&n).and_then(|&d| self.drafts[d].statements.last());
            let dup = match now_says {
                Some(&h) => duplicate(&cand.fact, &cands[h].fact),
                None => nb.duplicate_of(&cand.fact),
            };
            match dup {
                // A DUPLICATE only adds sources, which a pinned entry may gain too.
                Dup::Same(s) => {
                    let d = self.target(n);
                    return self.join(d, i, false, s);
                }
                Dup::Vetoed(v) => note(v),
                Dup::Different => {}
            }
        }
        for (j, earlier) in cands[..i].iter().enumerate() {
            match duplicate(&cand.fact, &earlier.fact) {
                Dup::Same(s) => return self.join(self.owner[j], i, false, s),
                Dup::Vetoed(v) => note(v),
                Dup::Different => {}
            }
        }
        let Some(clause) = &cand.fact.clause else {
            return self.add(i, std::iter::once("multi-clause".to_string()).chain(vetoes));
        };

        let mut hits: BTreeMap<Dest, Vec<String>> = BTreeMap::new();
        for (n, nb) in neighs.iter().enumerate() {
            if let Some(old) = &nb.fact.clause {
                let s = contradiction(old, clause);
                if !s.is_empty() {
                    hits.entry(Dest::Entry(n)).or_default().extend(s);
                }
            }
        }
        for (d, draft) in self.drafts.iter().enumerate() {
            if let Some(&h) = draft.statements.last()
                && let Some(old) = &cands[h].fact.clause
            {
                let s = contradiction(old, clause);
                if !s.is_empty() {
                    hits.entry(draft.target.map_or(Dest::Draft(d), Dest::Entry)).or_default().extend(s);
                }
            }
        }
        let mut blocked = Vec::new();
        let mut open = Vec::new();
        for (dest, mut s) in hits {
            let guard = match dest {
                Dest::Entry(n) if neighs[n].n.pinned => Some("pinned-target"),
                Dest::Entry(n) if cand.c.date < neighs[n].n.updated => Some("older-than-target"),
                _ if cand.c.date > today => Some("future-date"),
                _ => None,
            };
            match guard {
                Some(g) => {
                    s.push(g.to_string());
                    blocked.extend(s);
                }
                None => open.push((dest, s)),
            }
        }
        match open.as_slice() {
            [(dest, s)] => {
                let d = match *dest {
                    Dest::Entry(n) => self.target(n),
                    Dest::Draft(d) => d,
                };
                self.join(d, i, true, s.iter().cloned().chain(vetoes))
            }
            [] => self.add(i, blocked.into_iter().chain(vetoes)),
            _ => {
                let all = open.iter().flat_map(|(_, s)| s.iter().cloned());
                self.add(i, all.chain(["ambiguous-target".to_string()]).chain(blocked).chain(vetoes))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    const TODAY: &str = "2026-12-31";

    fn entry(id: &str, content: &str) -> Neighbor {
        Neighbor {
            id: id.into(),
            content: content.into(),
            first_seen: day("2026-05-01"),
            updated: day("2026-05-01"),
            pinned: false,
        }
    }

    fn pinned(id: &str, content: &str) -> Neighbor {
        Neighbor { pinned: true, ..entry(id, content) }
    }

    fn fact(id: &str, text: &str, date: &str) -> Candidate {
        Candidate { id: id.into(), text: text.into(), date: day(date) }
    }

    /// Runs the decider and checks what must hold for every output.
    fn run(neighbors: Vec<Neighbor>, candidates: Vec<Candidate>) -> Vec<ProposedOp> {
        let doc = ClusterDoc { neighbors, candidates };
        let ops = decide(&doc, day(TODAY));
        let mut seen: Vec<&str> = ops.iter().flat_map(|o| o.op.facts().iter().map(String::as_str)).collect();
        seen.sort_unstable();
        let mut want: Vec<&str> = doc.candidates.iter().map(|c| c.id.as_str()).collect();
        want.sort_unstable();
        assert_eq!(seen, want, "every candidate exactly once: {ops:#?}");
        let mut targets = BTreeSet::new();
        for o in &ops {
            assert!(!o.signals.is_empty(), "op without signals: {o:?}");
            assert_ne!(o.op.kind(), "REMOVE");
            if let Some(t) = o.op.target() {
                let n = doc.neighbors.iter().find(|n| n.id == t).expect("target is a neighbour");
                assert!(!n.pinned || o.op.kind() == "DUPLICATE", "pinned target: {o:?}");
                assert!(targets.insert(t.to_string()), "two ops on {t}: {ops:#?}");
            }
            if let Op::Add { content, .. } | Op::Replace { content, .. } = &o.op {
                assert!(!content.trim().is_empty());
            }
        }
        ops
    }

    fn kinds(ops: &[ProposedOp]) -> Vec<&'static str> {
        ops.iter().map(|o| o.op.kind()).collect()
    }

    fn has(op: &ProposedOp, signal: &str) -> bool {
        op.signals.iter().any(|s| s == signal)
    }

    fn content(op: &ProposedOp) -> &str {
        match &op.op {
            Op::Add { content, .. } | Op::Replace { content, .. } => content,
            _ => "",
        }
    }

    /// The single op for one neighbour and one candidate.
    fn pair(old: &str, new: &str) -> ProposedOp {
        let ops = run(vec![entry("m-1", old)], vec![fact("f-1", new, "2026-06-01")]);
        assert_eq!(ops.len(), 1);
        ops[0].clone()
    }

    // --- helpers

    #[test]
    fn normalise_ignores_case_space_time_quotes_and_trailing_punctuation() {
        assert_eq!(normalise("14:03   Alice\u{2019}s  CAT is Tom!! "), "alice's cat is tom");
        assert_eq!(normalise("Works at Google."), normalise("works   at google"));
        assert_eq!(normalise("Meeting at 14:30"), "meeting at 14:30");
    }

    #[test]
    fn contractions_split_into_a_negation() {
        let words: Vec<String> = tokens("I don't, can't and won't").into_iter().map(|t| t.word).collect();
        assert_eq!(words, ["i", "do", "not", "can", "not", "and", "will", "not"]);
    }

    #[test]
    fn names_are_capitalised_words_not_at_sentence_start_or_all_caps() {
        let names: Vec<String> =
            tokens("Alice met Bob. Then NASA called in May").into_iter().filter(is_name).map(|t| t.word).collect();
        assert_eq!(names, ["bob", "nasa"]);
    }

    #[test]
    fn current_clause_skips_history_and_asides() {
        let c = current_clause("Started at Microsoft (since 2026-05-30); previously: Works at Google.");
        assert_eq!(c.as_deref(), Some("Started at Microsoft"));
        assert_eq!(current_clause("Has a dog. Likes tea."), None);
        assert_eq!(current_clause("Runs daily. Before work, drinks coffee."), None);
    }

    #[test]
    fn attribute_forms_are_recognised() {
        let attr = |t: &str| attribute(&tokens(t)).map(|a| (a.key.join(" "), a.value.join(" ")));
        assert_eq!(attr("My favorite color is purple"), Some(("favourite colour".into(), "purple".into())));
        assert_eq!(attr("Email: a@b.org"), Some(("email".into(), "a@b.org".into())));
        assert_eq!(attr("My dog is named Rex"), Some(("dog name".into(), "rex".into())));
        assert_eq!(attr("My dog is old"), None);
        assert_eq!(attr("Alice is my sister"), None);
    }

    // --- DUPLICATE

    #[test]
    fn exact_duplicate_of_a_neighbour_is_duplicate() {
        let op = pair("Works at Google.", "Works at Google.");
        assert_eq!(op.op, Op::Duplicate { facts: vec!["f-1".into()], target: "m-1".into() });
        assert!(has(&op, "exact-duplicate"));
    }

    #[test]
    fn normalised_duplicate_of_a_neighbour_is_duplicate() {
        for text in ["  works AT google!! ", "09:15 Works at Google", "Works   at Google"] {
            let op = pair("Works at Google.", text);
            assert_eq!(op.op.kind(), "DUPLICATE", "{text}");
            assert!(has(&op, "normalized-duplicate"), "{text}: {:?}", op.signals);
        }
        assert_eq!(pair("Alice's cat is Tom.", "Alice\u{2019}s cat is Tom").op.kind(), "DUPLICATE");
    }

    #[test]
    fn restating_the_current_clause_of_a_replaced_entry_is_duplicate() {
        let op = pair("Started at Microsoft (since 2026-05-30); previously: Works at Google.", "Started at Microsoft.");
        assert_eq!(op.op.kind(), "DUPLICATE");
        assert!(has(&op, "current-clause"));
    }

    #[test]
    fn ordinal_dates_veto_duplicate() {
        let op = pair("Meeting on the 3rd", "Meeting on the 4th");
        assert_eq!(op.op.kind(), "ADD");
        assert!(has(&op, "veto:date") && has(&op, "veto:number"), "{:?}", op.signals);
    }

    #[test]
    fn differing_numbers_veto_duplicate() {
        let op = pair("Has 2 cats", "Has 3 cats");
        assert_eq!(op.op.kind(), "ADD");
        assert!(has(&op, "veto:number"));
    }

    #[test]
    fn different_names_veto_duplicate() {
        let op = pair("Alice is my sister", "Bob is my sister");
        assert_eq!(op.op.kind(), "ADD");
        assert!(has(&op, "veto:name"), "{:?}", op.signals);
    }

    #[test]
    fn case_only_difference_is_a_normalised_duplicate() {
        let op = pair("Went to the Apple store", "went to the apple store");
        assert_eq!(op.op.kind(), "DUPLICATE");
        assert!(has(&op, "normalized-duplicate"));
    }

    #[test]
    fn look_alike_pairs_are_never_duplicate() {
        let pairs = [
            ("Meeting on the 3rd", "Meeting on the 4th"),
            ("Has 2 cats", "Has 3 cats"),
            ("Alice is my sister", "Bob is my sister"),
            ("I like coffee", "I don't like coffee"),
            ("Flight on 2026-05-30", "Flight on 2026-05-31"),
            ("Call Mark on Monday", "Call Mark on Tuesday"),
            ("Dentist appointment in May", "Dentist appointment in June"),
            ("Works at Google", "Worked at Google"),
            ("Lives in Paris", "Lives in Paris, Texas"),
            ("Is allergic to peanuts", "Is not allergic to peanuts"),
            ("Never drinks coffee", "Drinks coffee"),
            ("Visited Rome in 2019", "Visited Rome in 2020"),
            ("Bought tickets for Friday", "Bought tickets for Saturday"),
            ("Rent is $1200", "Rent is $1300"),
            ("Flying to Paris", "Flying from Paris"),
            ("Married to Sam", "Divorced from Sam"),
            ("Likes tea", "Dislikes tea"),
            ("Favourite colour is purple", "Favourite colour is cyan"),
            ("Son is 7 years old", "Son is 8 years old"),
            ("Uses NASA data", "Uses ESA data"),
            ("Can swim", "Can't swim"),
            ("Wakes up at 7:00", "Wakes up at 7:30"),
            ("Dog bites man", "Man bites dog"),
        ];
        for (a, b) in pairs {
            for (old, new) in [(a, b), (b, a)] {
                let op = pair(old, new);
                assert_ne!(op.op.kind(), "DUPLICATE", "{old:?} / {new:?}");
                // As two candidates: never one op unless its content keeps both texts.
                let ops = run(vec![], vec![fact("f-1", old, "2026-06-01"), fact("f-2", new, "2026-06-02")]);
                for o in ops.iter().filter(|o| o.op.facts().len() > 1) {
                    assert!(content(o).contains(old) && content(o).contains(new), "{old:?} / {new:?}: {o:?}");
                }
            }
        }
    }

    // --- REPLACE

    #[test]
    fn favourite_colour_change_is_attribute_replace() {
        let op = pair("My favourite colour is purple", "My favourite colour is cyan");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "attribute-value:favourite colour"), "{:?}", op.signals);
        assert!(content(&op).contains("cyan") && content(&op).contains("purple"));
    }

    #[test]
    fn negated_like_replaces_and_never_duplicates() {
        let op = pair("I like coffee", "I don't like coffee");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "negation-polarity") && has(&op, "veto:negation"), "{:?}", op.signals);
    }

    #[test]
    fn dislike_replaces_like_by_antonym() {
        let op = pair("likes tea", "dislikes tea");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "antonym:like/dislike"), "{:?}", op.signals);
    }

    #[test]
    fn now_works_at_microsoft_replaces_works_at_google_with_history() {
        let op = pair("Works at Google.", "Now works at Microsoft.");
        let Op::Replace { target, content, why, .. } = &op.op else { panic!("{op:?}") };
        assert_eq!(target, "m-1");
        assert_eq!(why.as_deref(), Some("update"));
        assert!(content.contains("Microsoft") && content.contains("Google") && content.contains("previously"));
        assert!(has(&op, "temporal-marker:now"));
    }

    #[test]
    fn started_at_replaces_works_at_with_dated_history() {
        let ops = run(vec![entry("m-1", "Works at Google.")], vec![fact("f-1", "Started at Microsoft.", "2026-05-30")]);
        assert_eq!(content(&ops[0]), "Started at Microsoft (since 2026-05-30); previously: Works at Google.");
        assert!(has(&ops[0], "temporal-marker:started"));
    }

    #[test]
    fn moved_replaces_lives_in() {
        let op = pair("Lives in Porto.", "Moved to Lisbon.");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "temporal-marker:moved"));
    }

    #[test]
    fn no_longer_replaces_by_negation_and_marker() {
        let op = pair("Works at Google", "No longer works at Google");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "negation-polarity") && has(&op, "temporal-marker:no longer"), "{:?}", op.signals);
    }

    #[test]
    fn correction_keeps_the_previous_record() {
        let op = pair("My name is Jon.", "My name is John, not Jon.");
        let Op::Replace { content, why, .. } = &op.op else { panic!("{op:?}") };
        assert_eq!(why.as_deref(), Some("correction"));
        assert_eq!(content, "My name is John, not Jon (previously recorded: My name is Jon.)");
        assert!(has(&op, "attribute-value:name"));
    }

    #[test]
    fn two_updates_of_one_target_fold_into_one_replace() {
        let ops = run(
            vec![entry("m-1", "Works at Google.")],
            vec![
                fact("f-2", "Now works at Amazon.", "2026-06-02"),
                fact("f-1", "Now works at Microsoft.", "2026-05-30"),
            ],
        );
        assert_eq!(kinds(&ops), ["REPLACE"]);
        assert_eq!(ops[0].op.facts(), ["f-1", "f-2"]);
        assert_eq!(
            content(&ops[0]),
            "Now works at Amazon (since 2026-06-02); previously: Now works at Microsoft (since 2026-05-30); \
             previously: Works at Google."
        );
    }

    #[test]
    fn same_day_update_is_ordered_by_its_marker() {
        let ops =
            run(vec![], vec![fact("f-1", "Now drinks tea", "2026-06-01"), fact("f-2", "Drinks coffee", "2026-06-01")]);
        assert_eq!(kinds(&ops), ["ADD"]);
        assert!(content(&ops[0]).starts_with("Now drinks tea (since 2026-06-01); previously: Drinks coffee"));
    }

    // --- ADD and the guards

    #[test]
    fn unrelated_facts_are_added() {
        let ops =
            run(vec![entry("m-1", "Works at Google.")], vec![fact("f-1", "Has a sister in Berlin.", "2026-06-01")]);
        assert_eq!(ops[0].op, Op::Add { facts: vec!["f-1".into()], content: "Has a sister in Berlin.".into() });
        assert!(has(&ops[0], "no-match"));
    }

    #[test]
    fn a_dog_named_rex_and_a_cat_are_separate() {
        assert_eq!(pair("My dog is named Rex", "I have a cat").op.kind(), "ADD");
        assert_eq!(pair("My dog is named Rex", "Now has a cat").op.kind(), "ADD");
    }

    #[test]
    fn lexical_similarity_alone_never_merges() {
        for (old, new) in [
            ("Likes hiking", "Likes swimming"),
            ("Flying to Paris", "Flying from Paris"),
            ("My dog is old", "My dog is brown"),
        ] {
            assert_eq!(pair(old, new).op.kind(), "ADD", "{old} / {new}");
        }
    }

    #[test]
    fn a_new_possession_does_not_replace_an_old_one() {
        assert_eq!(pair("Has a cat named Tom", "Now has a cat named Max").op.kind(), "ADD");
        assert_eq!(pair("Has a cat named Tom", "No longer has a cat named Tom").op.kind(), "REPLACE");
    }

    #[test]
    fn stopped_replaces_started_by_antonym() {
        let op = pair("Started learning piano", "Stopped learning piano");
        assert_eq!(op.op.kind(), "REPLACE");
        assert!(has(&op, "antonym:started/stopped"), "{:?}", op.signals);
    }

    #[test]
    fn different_subjects_do_not_contradict() {
        for (old, new) in [
            ("He likes tea", "I dislike tea"),
            ("Alice likes Bob", "Bob dislikes Alice"),
            ("My name is John", "Her name is Mary"),
            ("Alice drinks tea", "Now Bob drinks tea"),
            ("Works at Google", "Started at 9am"),
            ("Works at Google", "Joined a gym"),
        ] {
            assert_eq!(pair(old, new).op.kind(), "ADD", "{old} / {new}");
        }
    }

    #[test]
    fn two_topics_in_one_fact_are_not_forced_into_one_op() {
        let neighbors = || vec![entry("m-1", "Lives in Porto."), entry("m-2", "My favourite colour is purple.")];
        for text in
            ["Moved to Lisbon; my favourite colour is cyan.", "Moved to Lisbon and my favourite colour is cyan."]
        {
            let ops = run(neighbors(), vec![fact("f-1", text, "2026-06-01")]);
            assert_eq!(kinds(&ops), ["ADD"], "{text}");
            assert_eq!(content(&ops[0]), text);
        }
        assert_eq!(pair("Works at Google", "Works at Google and has a cat").op.kind(), "ADD");
    }

    #[test]
    fn a_pinned_neighbour_gains_duplicates_but_is_never_replaced() {
        let ops = run(vec![pinned("m-1", "Works at Google.")], vec![fact("f-1", "Works at Google.", "2026-06-01")]);
        assert_eq!(kinds(&ops), ["DUPLICATE"], "no second entry saying the same");
        assert!(has(&ops[0], "exact-duplicate"));
        let ops =
            run(vec![pinned("m-1", "Works at Google.")], vec![fact("f-1", "Now works at Microsoft.", "2026-06-01")]);
        assert_eq!(kinds(&ops), ["ADD"]);
        assert!(has(&ops[0], "pinned-target") && has(&ops[0], "temporal-marker:now"));
    }

    #[test]
    fn a_repeat_of_what_an_update_in_the_same_call_replaced_is_not_its_duplicate() {
        let ops = run(
            vec![entry("m-1", "Works at Google.")],
            vec![fact("f-1", "Now works at Microsoft.", "2026-06-01"), fact("f-2", "Works at Google.", "2026-06-02")],
        );
        // The newest fact says Google again: it may not vanish into an entry saying Microsoft.
        let current: Vec<&str> = ops
            .iter()
            .filter_map(|o| match &o.op {
                Op::Add { content, .. } | Op::Replace { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert!(current.iter().any(|c| c.starts_with("Works at Google")), "{ops:#?}");
        let ops = run(
            vec![entry("m-1", "Works at Google.")],
            vec![
                fact("f-1", "Now works at Microsoft.", "2026-06-01"),
                fact("f-2", "Now works at Microsoft.", "2026-06-02"),
            ],
        );
        assert_eq!(kinds(&ops), ["REPLACE"], "a repeat of the update joins it: {ops:#?}");
        assert_eq!(ops[0].op.facts(), ["f-1", "f-2"]);
    }

    #[test]
    fn older_fact_does_not_replace_a_newer_entry() {
        let mut newer = entry("m-1", "Works at Google.");
        newer.updated = day("2026-07-01");
        let ops = run(vec![newer], vec![fact("f-1", "Now works at Microsoft.", "2026-06-01")]);
        assert_eq!(kinds(&ops), ["ADD"]);
        assert!(has(&ops[0], "older-than-target"));
    }

    #[test]
    fn future_dated_fact_does_not_replace() {
        let ops =
            run(vec![entry("m-1", "Works at Google.")], vec![fact("f-1", "Now works at Microsoft.", "2027-03-01")]);
        assert_eq!(kinds(&ops), ["ADD"]);
        assert!(has(&ops[0], "future-date"));
    }

    #[test]
    fn contradicting_two_neighbours_is_ambiguous_and_added() {
        let ops = run(
            vec![entry("m-1", "Works at Google."), entry("m-2", "Works at Amazon.")],
            vec![fact("f-1", "Now works at Microsoft.", "2026-06-01")],
        );
        assert_eq!(kinds(&ops), ["ADD"]);
        assert!(has(&ops[0], "ambiguous-target"));
    }

    // --- candidates among themselves

    #[test]
    fn candidate_duplicates_join_one_op() {
        let facts = || {
            vec![
                fact("f-1", "Likes green tea.", "2026-06-01"),
                fact("f-2", "likes green tea", "2026-06-01"),
                fact("f-3", "Likes green tea!", "2026-06-02"),
            ]
        };
        let ops = run(vec![], facts());
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].op,
            Op::Add { facts: vec!["f-1".into(), "f-2".into(), "f-3".into()], content: "Likes green tea.".into() }
        );
        let ops = run(vec![entry("m-1", "Likes green tea.")], facts());
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].op,
            Op::Duplicate { facts: vec!["f-1".into(), "f-2".into(), "f-3".into()], target: "m-1".into() }
        );
    }

    #[test]
    fn contradicting_candidates_become_one_add_with_history() {
        let ops =
            run(vec![], vec![fact("f-2", "Dislikes tea.", "2026-06-02"), fact("f-1", "Likes tea.", "2026-06-01")]);
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].op,
            Op::Add {
                facts: vec!["f-1".into(), "f-2".into()],
                content: "Dislikes tea (since 2026-06-02); previously: Likes tea.".into()
            }
        );
        assert!(has(&ops[0], "antonym:like/dislike"));
    }

    #[test]
    fn restating_a_replaced_entry_joins_its_replace() {
        let ops = run(
            vec![entry("m-1", "Works at Google.")],
            vec![fact("f-1", "Works at Google.", "2026-06-01"), fact("f-2", "Now works at Microsoft.", "2026-06-02")],
        );
        assert_eq!(kinds(&ops), ["REPLACE"]);
        assert_eq!(ops[0].op.facts(), ["f-1", "f-2"]);
    }

    // --- whole outputs

    fn mixed() -> ClusterDoc {
        ClusterDoc {
            neighbors: vec![
                entry("m-1", "Works at Google."),
                pinned("m-2", "Allergic to peanuts."),
                entry("m-3", "My favourite colour is purple."),
                entry("m-4", "Likes tea."),
            ],
            candidates: vec![
                fact("f-1", "Now works at Microsoft.", "2026-06-01"),
                fact("f-2", "Not allergic to peanuts.", "2026-06-01"),
                fact("f-3", "My favourite colour is cyan.", "2026-06-02"),
                fact("f-4", "Likes tea.", "2026-06-02"),
                fact("f-5", "Has a cat named Tom.", "2026-06-03"),
                fact("f-6", "has a cat named Tom", "2026-06-04"),
                fact("f-7", "Meeting on the 3rd.", "2026-06-04"),
                fact("f-8", "Meeting on the 4th.", "2026-06-04"),
            ],
        }
    }

    #[test]
    fn every_candidate_is_accounted_for_once() {
        let doc = mixed();
        let ops = run(doc.neighbors, doc.candidates);
        assert_eq!(kinds(&ops), ["ADD", "REPLACE", "REPLACE", "DUPLICATE", "ADD", "ADD", "ADD"]);
        assert!(has(&ops[0], "pinned-target") && has(&ops[0], "negation-polarity"), "{:?}", ops[0].signals);
        assert_eq!(ops[4].op.facts(), ["f-5", "f-6"]);
    }

    #[test]
    fn output_is_deterministic_whatever_the_input_order() {
        let doc = mixed();
        let mut shuffled = doc.clone();
        shuffled.candidates.reverse();
        shuffled.neighbors.reverse();
        shuffled.candidates.swap(1, 5);
        assert_eq!(decide(&doc, day(TODAY)), decide(&shuffled, day(TODAY)));
    }

    #[test]
    fn empty_cluster_has_no_ops() {
        assert!(decide(&ClusterDoc::default(), day(TODAY)).is_empty());
        assert_eq!(kinds(&run(vec![entry("m-1", "Works at Google.")], vec![])), Vec::<&str>::new());
    }
}
