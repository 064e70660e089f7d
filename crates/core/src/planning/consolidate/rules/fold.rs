//! Folds beyond the text rules: a certain duplicate applies; a likely duplicate, a negation, a
//! correction or a new value for a single-valued aspect is proposed to a person.
//!
//! They look at a candidate the text rules left as an ADD of its own, against each neighbour of
//! the call, with what the pass knows besides the texts ([`Hints`]): the vectors, the aspect
//! keys, which attributes hold one value at a time, and the pairs a person already rejected.
//!
//! - **Certain duplicate** (applied, confidence 0.9): every content word of the fact is in the
//!   entry (allowing inflection, first or third person and filler words), and no number, name
//!   or negation of the fact is missing from it or differs. Or, with an embedder that reads
//!   meaning, all but a few are there, each of those stands for a word of the entry the fact
//!   lacks ("yearly" for "annual"), and the two sentences are nearly the same (confidence 0.7).
//! - **Likely duplicate** (proposed, 0.35): no veto, most of its words are in the entry, and
//!   (with an embedder that reads meaning) the two sentences are close.
//! - **Negation** (proposed, 0.4): the fact says not, or that a state ended ("quit", "sold", "for
//!   good", "no longer", "paid off"), of what the entry says, about the same thing (shared words,
//!   or an aspect the entry is chiefly about: the first of its keys).
//! - **Correction** (proposed, 0.4): a fact that says it corrects ("actually", "not X but Y")
//!   what an entry about the same thing says.
//! - **New value** (proposed, 0.3): fact and entry share a key whose attribute holds one value at
//!   a time (employer, home city, car, phone number, manager…) and the fact says something the
//!   entry does not; not when the fact names only what the entry names ("The Galway flat has
//!   damp" beside "We moved to Galway": more about the same home, linked instead).
//!
//! A fact that says it adds ("also", "as well", "too") is never folded. An entry that recounts a
//! dated past event ("Bought the duvet at Linen Chest in 2019.") is history: never proposed for
//! replacement. Among a fact's proposals, one about an aspect that the entry and the fact are
//! both chiefly about comes first. Confidences are below `review_below_confidence` (0.5) for
//! every proposal, so the pass stores them as a plan for a person; the signals say why in words
//! ("negates", "new value for: employer"). A pair a person rejected is never proposed again. No
//! key, similarity or word count merges anything on its own: a certain duplicate needs the entry
//! to say all the fact says.

use std::collections::HashSet;

use rustc_hash::{FxHashMap, FxHashSet};

use chrono::{Datelike, NaiveDate};

use super::super::aspects::{Key, compatible};
use super::text::{Said, Tok, claim, content_words, strip_time, tokens};
use super::words::{is_date, is_name, is_number, word_stem};
use crate::planning::run::ops::{Candidate, Neighbor, Op, ProposedOp};

/// What the pass knows about the texts of a call besides the texts.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// By candidate or entry id: its vector (unit length).
    pub vectors: FxHashMap<String, Vec<f32>>,
    /// By candidate or entry id: its aspect keys.
    pub keys: FxHashMap<String, Vec<Key>>,
    /// Attributes that hold one value at a time.
    pub single: HashSet<String>,
    /// (fact, entry) pairs a person rejected a proposal for.
    pub rejected: HashSet<(String, String)>,
    /// Whether the vectors read meaning (not the built-in `local` embedder's letter n-grams).
    pub semantic: bool,
}

/// Confidence of a certain duplicate whose words are all in the entry.
pub const CERTAIN: f64 = 0.9;
/// Confidence of a certain duplicate the embedder vouches for.
pub const VOUCHED: f64 = 0.7;
const LIKELY_SAME: f64 = 0.35;
const NEGATES: f64 = 0.4;
const CORRECTS: f64 = 0.4;
const NEW_VALUE: f64 = 0.3;

/// Cosine at which an embedder that reads meaning vouches for the words a fact has and the
/// entry lacks.
const VOUCH_COSINE: f32 = 0.8;
/// Share of words that must be in the entry when the embedder vouches for the rest.
const VOUCH_COVERED: f64 = 0.6;
/// Cosine from which two sentences are likely the same (an embedder that reads meaning).
const LIKELY_COSINE: f32 = 0.72;
/// Share of words from which two texts are likely the same, or about the same thing.
const LIKELY_COVERED: f64 = 0.6;
const ABOUT_COVERED: f64 = 0.3;
/// Share of the entry's words a duplicate must hold (it says most of what the entry says).
const BACK_COVERED: f64 = 0.5;
const LIKELY_BACK: f64 = 0.4;
/// Cosine a certain duplicate needs besides its words, with an embedder that reads meaning.
const CERTAIN_COSINE: f32 = 0.6;
/// Cosine a fact that ends a state needs with the entry it ends, when they share an aspect.
const ENDS_COSINE: f32 = 0.33;
/// A key shared, and this much alike, for a new value to be proposed.
const RELATED_COSINE: f32 = 0.4;
const RELATED_COVERED: f64 = 0.2;
/// What the fact and the entry both leading with one single-valued attribute (both chiefly about
/// it) adds to a proposal's cosine when the proposals of one fact are ranked.
const LEAD_NEARER: f32 = 0.1;

/// Words and phrases that end a state ("quit smoking", "sold the boat", "gave it up for good"):
/// a fact with one says the entry it is about is over, as a negation does.
const ENDINGS: &[&str] = &[
    "quit",
    "quitting",
    "stopped",
    "dropped",
    "ditched",
    "cancelled",
    "canceled",
    "sold",
    "gave up",
    "give up",
    "for good",
    "anymore",
    "any more",
    "no more",
    "no longer",
    "got rid",
    "ended",
    "paid off",
    "gave away",
    "given away",
    "put away",
    "threw out",
    "thrown out",
    "hauled away",
    "done with",
    "moved out",
    "broke up",
    "split up",
    "deleted",
    "shut down",
];

/// Words that say a fact adds to what is known ("also", "as well", "another"): such a fact is
/// never folded into an entry.
const ADDS: &[&str] = &["also", "as well", "additionally", "in addition", "another", "besides", "on top of"];

/// Words that say nothing about the world in a fact told to an assistant.
const FILLERS: &str = concat!(
    "user honestly officially basically totally pretty lately recently finally literally definitely ",
    "probably seriously anyway though like kind sort bit lot one thing things",
);

/// Verbs in the past tense that open an entry recounting an event ("Bought the duvet at Linen
/// Chest in 2019."), besides those ending in "-ed".
const PAST_VERBS: &str = concat!(
    "bought got went had left read was were made took gave sold won lost met saw ate flew drove broke wrote ",
    "did came found built paid spent kept ran fell grew began became swam sang told brought caught taught ",
    "wore rode tore threw",
);

/// When a text recounts a dated event of the past: it opens with a verb in the past tense, names
/// a year (the earliest is returned) and says nothing lasts ("since", "until", "still"). Such an
/// entry is history from that year on: a new value does not supersede it and a negation does
/// not end it.
fn event_year(toks: &[Tok]) -> Option<i32> {
    let first = toks.first()?;
    let past = first.word.ends_with("ed") || super::words::listed!(PAST_VERBS, first.word.as_str());
    let lasts = toks.iter().any(|t| super::words::listed!("since until still", t.word.as_str()));
    if !past || lasts {
        return None;
    }
    toks.iter()
        .filter(|t| t.word.len() == 4 && t.word.starts_with(['1', '2']))
        .filter_map(|t| t.word.parse().ok())
        .min()
}

/// A text as these rules compare it.
struct Words {
    /// Content words, stemmed.
    content: Vec<String>,
    /// Every word's stem, for looking up.
    all: FxHashSet<String>,
    /// The stems of its words of three letters or more.
    long: FxHashSet<String>,
    names: FxHashSet<String>,
    numbers: FxHashSet<String>,
    negated: bool,
    /// Negated, or says a state ended ([`ENDINGS`]).
    ends: bool,
    correction: bool,
    /// Says it adds to what is known ([`ADDS`], or ends with "too").
    adds: bool,
    /// Recounts an event of this year ([`event_year`]).
    event_year: Option<i32>,
}

impl Words {
    fn new(text: &str) -> Words {
        let said = Said::new(text);
        let toks: Vec<Tok> = tokens(strip_time(text.trim()));
        let content: Vec<String> = content_words(&toks)
            .into_iter()
            .filter(|w| !w.starts_with('@') && !super::words::stem_set!(FILLERS).contains(w))
            .collect();
        let all = toks.iter().map(|t| word_stem(&t.word)).chain(content.iter().cloned()).collect();
        let spaced = format!(" {} ", toks.iter().map(|t| t.word.as_str()).collect::<Vec<_>>().join(" "));
        let long = toks.iter().filter(|t| t.word.chars().count() >= 3).map(|t| word_stem(&t.word)).collect();
        Words {
            content,
            all,
            long,
            names: toks.iter().filter(|t| is_name(t)).map(|t| t.word.clone()).collect(),
            numbers: toks.iter().filter(|t| is_number(&t.word) || is_date(t)).map(|t| t.word.clone()).collect(),
            negated: said.negated,
            ends: said.negated || ENDINGS.iter().any(|e| spaced.contains(&format!(" {e} "))),
            correction: said.correction(),
            adds: ADDS.iter().any(|e| spaced.contains(&format!(" {e} "))) || spaced.ends_with(" too "),
            event_year: event_year(&toks),
        }
    }

    /// How many of this text's content words `other` lacks.
    fn missing_from(&self, other: &Words) -> usize {
        self.content.iter().filter(|w| !other.all.contains(*w)).count()
    }

    /// How many of this text's words of three letters or more (function words too: "has",
    /// "for") `other` lacks: the words a paraphrase may have said differently.
    fn worded_differently(&self, other: &Words) -> usize {
        self.long.iter().filter(|w| !other.all.contains(*w)).count()
    }

    /// The share of this text's content words that `other` holds.
    fn covered_by(&self, other: &Words) -> f64 {
        if self.content.is_empty() {
            return 0.0;
        }
        let held = self.content.iter().filter(|w| other.all.contains(*w)).count();
        held as f64 / self.content.len() as f64
    }

    /// Whether the content words this text shares with `other` come in the same order there,
    /// up to one part moved to the front or the back ("In October, Ana moved to Lisbon" is
    /// "Ana moved to Lisbon in October"): who does what to whom stays. "The fish follows the
    /// turtle" and "The turtle follows the fish" have the same words, in another order.
    fn keeps_order(&self, other: &Words) -> bool {
        let at: Vec<usize> = self.content.iter().filter_map(|w| other.content.iter().position(|o| o == w)).collect();
        let descents = at.windows(2).filter(|p| p[1] < p[0]).count();
        match descents {
            0 => true,
            1 => at.last() < at.first(),
            _ => false,
        }
    }

    /// Whether a number, date or name of this text is missing from `other`, or the negation
    /// (or an ended state) differs: then this text says something the other does not.
    fn vetoed_by(&self, other: &Words) -> bool {
        self.negated != other.negated
            || self.ends != other.ends
            || self.numbers.iter().any(|n| !other.numbers.contains(n))
            || self.names.iter().any(|n| !other.names.contains(n))
    }
}

/// A fold found for one candidate.
struct Found {
    neighbour: usize,
    op: Op,
    confidence: f64,
    signals: Vec<String>,
}

/// Fold what the text rules left as single-fact ADDs: `ops` are the rules' ops (in candidate
/// order); an ADD of one candidate becomes a DUPLICATE or a proposal when a rule above fires.
pub fn fold(
    ops: Vec<ProposedOp>,
    candidates: &[Candidate],
    neighbours: &[Neighbor],
    today: NaiveDate,
    hints: &Hints,
) -> Vec<ProposedOp> {
    let by_id: FxHashMap<&str, &Candidate> = candidates.iter().map(|c| (c.id.as_str(), c)).collect();
    // An entry is weighed by what it says now, not by what it says was true before.
    let neighbour_words: Vec<Words> = neighbours.iter().map(|n| Words::new(&claim(&n.content))).collect();
    // Entries an op of the rules already changes, and those a fold below takes: one op each.
    let mut taken: FxHashSet<String> = ops.iter().filter_map(|op| op.op.target().map(str::to_string)).collect();
    ops.into_iter()
        .map(|op| {
            let Op::Add { facts, .. } = &op.op else { return op };
            let [fact] = facts.as_slice() else { return op };
            let Some(candidate) = by_id.get(fact.as_str()) else { return op };
            match best(candidate, neighbours, &neighbour_words, &taken, today, hints) {
                Some(found) => {
                    // Any number of certain duplicates may fold into one entry; it gets one
                    // proposal per call, so a person is not asked the same thing many times.
                    if found.confidence < VOUCHED {
                        taken.insert(neighbours[found.neighbour].id.clone());
                    }
                    ProposedOp {
                        confidence: Some(found.confidence),
                        ..ProposedOp::with_signals(found.op, found.signals)
                    }
                }
                None => op,
            }
        })
        .collect()
}

/// The strongest fold of `candidate` with any neighbour: a certain duplicate first, then a likely
/// one, a negation, a correction, a new value; among neighbours, the nearest.
fn best(
    candidate: &Candidate,
    neighbours: &[Neighbor],
    neighbour_words: &[Words],
    taken: &FxHashSet<String>,
    today: NaiveDate,
    hints: &Hints,
) -> Option<Found> {
    let words = Words::new(&candidate.text);
    if words.content.is_empty() || words.adds {
        return None;
    }
    let my_vector = hints.vectors.get(&candidate.id);
    let cosine = |n: &Neighbor| -> f32 {
        match (my_vector, hints.vectors.get(&n.id)) {
            (Some(a), Some(b)) => a.iter().zip(b).map(|(x, y)| x * y).sum(),
            _ => 0.0,
        }
    };
    let keys_of = |id: &str| hints.keys.get(id).map_or(&[][..], Vec::as_slice);
    let mine = keys_of(&candidate.id);
    let same = |a: &Key, b: &Key| a.attribute == b.attribute && compatible(&a.subject, &b.subject);
    // A single-valued aspect one of the two is chiefly about (its first key: "Dentist is Dr.
    // Azoulay") and the other is about too.
    let chief_aspect = |n: &Neighbor| -> Option<String> {
        let theirs = keys_of(&n.id);
        let single = |k: &&Key| hints.single.contains(&k.attribute);
        let entry_led = theirs.first().filter(single).filter(|t| mine.iter().any(|k| same(k, t)));
        let fact_led = || mine.first().filter(single).filter(|k| theirs.iter().any(|t| same(k, t)));
        entry_led.or_else(fact_led).map(|k| k.attribute.clone())
    };
    // Whether both are chiefly about one single-valued aspect.
    let both_lead = |n: &Neighbor| -> bool {
        let (Some(k), Some(t)) = (mine.first(), keys_of(&n.id).first()) else { return false };
        hints.single.contains(&k.attribute) && same(k, t)
    };
    // Whether the fact is about what the entry is chiefly about (any aspect).
    let about_its_lead = |n: &Neighbor| keys_of(&n.id).first().is_some_and(|t| mine.iter().any(|k| same(k, t)));
    let mut found: Vec<(u8, bool, f32, Found)> = Vec::new();
    for (i, n) in neighbours.iter().enumerate() {
        if !hints.rejected.is_empty() && hints.rejected.contains(&(candidate.id.clone(), n.id.clone())) {
            continue;
        }
        let theirs = &neighbour_words[i];
        let covered = words.covered_by(theirs);
        // How much of the entry the fact says: a fact that is a small part of a longer entry
        // about something else ("Théo speaks Polish" in "Théo's colleague Julie … speaks Polish")
        // is not its duplicate.
        let back = theirs.covered_by(&words);
        let vetoed = words.vetoed_by(theirs);
        let cos = cosine(n);
        let duplicate = |confidence: f64, signals: &[&str]| Found {
            neighbour: i,
            op: Op::Duplicate { facts: vec![candidate.id.clone()], target: n.id.clone() },
            confidence,
            signals: signals.iter().map(|s| s.to_string()).collect(),
        };
        let meaning = |floor: f32| !hints.semantic || cos >= floor;
        let chief_aspect = chief_aspect(n);
        let chief = chief_aspect.is_some();
        // Among proposals, an entry both are chiefly about counts as nearer.
        let near = cos + if both_lead(n) { LEAD_NEARER } else { 0.0 };
        // The same words in another order may say something else: at most a proposal.
        let ordered = words.keeps_order(theirs);
        if !vetoed
            && ordered
            && covered >= 1.0
            && back >= BACK_COVERED
            && words.content.len() >= 2
            && meaning(CERTAIN_COSINE)
        {
            found.push((0, chief, cos, duplicate(CERTAIN, &["covered"])));
            continue;
        }
        // The words the fact has and the entry lacks must stand for words the entry has and the
        // fact lacks ("yearly" for "annual"), not be news ("… and the metro home").
        let swapped = words.missing_from(theirs) <= theirs.worded_differently(&words);
        if !vetoed
            && ordered
            && hints.semantic
            && swapped
            && covered >= VOUCH_COVERED
            && back >= BACK_COVERED
            && cos >= VOUCH_COSINE
        {
            found.push((1, chief, cos, duplicate(VOUCHED, &["covered", "embedder-vouches"])));
            continue;
        }
        if taken.contains(&n.id) {
            continue;
        }
        if !vetoed && covered >= LIKELY_COVERED && back >= LIKELY_BACK && meaning(LIKELY_COSINE) {
            let signals: &[&str] = if ordered { &["likely-same"] } else { &["likely-same", "order-differs"] };
            found.push((2, chief, cos, duplicate(LIKELY_SAME, signals)));
            continue;
        }
        // What follows replaces the entry: never a pinned one, a newer one, one that recounts a
        // past event, or from a fact dated in the future.
        if n.pinned
            || candidate.date < n.updated
            || candidate.date > today
            || theirs.event_year.is_some_and(|year| year < candidate.date.year())
        {
            continue;
        }
        // About the same thing: the entry is chiefly about an aspect the fact is about, or they
        // share words; and, with an embedder that reads meaning, the sentences are not far apart.
        let about = (covered >= ABOUT_COVERED || chief || about_its_lead(n)) && meaning(ENDS_COSINE);
        let replace = |confidence: f64, why: &str, signals: Vec<String>| Found {
            neighbour: i,
            op: Op::Replace {
                target: n.id.clone(),
                facts: vec![candidate.id.clone()],
                content: with_history(&candidate.text, &n.content, candidate.date, why == "correction"),
                why: Some(why.to_string()),
            },
            confidence,
            signals,
        };
        if about && words.ends && !theirs.ends {
            found.push((3, chief, near, replace(NEGATES, "update", vec!["negates".into()])));
        } else if about && words.correction {
            found.push((4, chief, near, replace(CORRECTS, "correction", vec!["correction".into()])));
        } else if let Some(attribute) = chief_aspect
            .filter(|_| related(covered, cos, hints.semantic))
            .filter(|_| !super::names_only_what_it_names(&candidate.text, &n.content))
        {
            found.push((5, chief, near, replace(NEW_VALUE, "update", vec![format!("new value for: {attribute}")])));
        }
    }
    // A certain duplicate first; then, among proposals, one about an aspect the entry or the
    // fact is chiefly about, then the nearest, then the strongest rule.
    let class = |rule: u8| rule.min(2);
    // Last, the entry's id: two entries that tie are chosen between the same way whatever
    // order the call lists them in.
    found.sort_by(|a, b| {
        class(a.0)
            .cmp(&class(b.0))
            .then(b.1.cmp(&a.1))
            .then(b.2.total_cmp(&a.2))
            .then(a.0.cmp(&b.0))
            .then_with(|| neighbours[a.3.neighbour].id.cmp(&neighbours[b.3.neighbour].id))
    });
    found.into_iter().next().map(|(_, _, _, f)| f)
}

/// Whether a fact and an entry that share a key look related enough for a proposal: some of the
/// fact's words in the entry, or (an embedder that reads meaning) sentences not far apart.
fn related(covered: f64, cosine: f32, semantic: bool) -> bool {
    if semantic { cosine >= RELATED_COSINE || covered >= ABOUT_COVERED } else { covered >= RELATED_COVERED }
}

/// The new text over the old one, which stays as history: "X (since D); previously: Y", or for a
/// correction "X (previously recorded: Y)".
fn with_history(new: &str, old: &str, date: NaiveDate, correction: bool) -> String {
    let now = strip_time(new.trim()).trim_end().trim_end_matches('.').trim_end();
    if correction {
        format!("{now} (previously recorded: {})", old.trim())
    } else {
        format!("{now} (since {date}); previously: {}", old.trim())
    }
}
