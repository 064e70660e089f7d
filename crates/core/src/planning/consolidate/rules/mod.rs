//! The offline decider: the text rules that turn one cluster into ops when no LLM is configured.
//!
//! [`decide`] is a pure function of a [`ClusterDoc`] (docs/consolidation.md). It compares texts, never
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
//! - ADD otherwise. Candidates that duplicate or contradict each other share one op. An ADD
//!   that shares with an entry of the call a proper name one of the two is about (a person,
//!   pet, place or project) is linked to that entry ([`relate`]): related, not the same, both
//!   kept.
//!
//! Word overlap is only ever a precondition of those rules, never a reason on its own. Every op
//! names the rules that fired in `signals`; the offline decider never proposes REMOVE.

mod compare;
mod fold;
mod place;
#[cfg(test)]
mod tests;
mod text;
mod words;

use chrono::NaiveDate;

use crate::planning::run::ops::{ClusterDoc, ProposedOp};
pub use fold::Hints;
use place::{Cand, Neigh, Placement};
use text::{Said, strip_time, unify_quotes};

/// Decides one cluster: every candidate ends up in exactly one op, ops in candidate order.
///
/// Candidates are taken by date, then (within a day) those with a temporal marker last, then by
/// id. Each one, in this order of preference, joins the op of a neighbour or earlier candidate
/// it duplicates, updates the one neighbour or earlier op it contradicts, or becomes an ADD.
/// A fact dated after `today` is never trusted to be the newer side of an update. With `hints`
/// (what the pass knows besides the texts), a candidate left as an ADD of its own may still be
/// folded: a certain duplicate applies, a likely fold is proposed ([`fold`]).
pub fn decide(doc: &ClusterDoc, today: NaiveDate, hints: Option<&Hints>) -> Vec<ProposedOp> {
    let mut cands: Vec<Cand> = doc.candidates.iter().map(|c| Cand { c, fact: Said::new(&c.text) }).collect();
    cands.sort_by(|a, b| a.key().cmp(&b.key()));
    let mut neighs: Vec<Neigh> = doc.neighbors.iter().map(Neigh::new).collect();
    neighs.sort_by(|a, b| (&a.n.id, &a.n.content).cmp(&(&b.n.id, &b.n.content)));
    let mut plan = Placement::default();
    for i in 0..cands.len() {
        plan.place(&cands, &neighs, i, today);
    }
    let ops: Vec<ProposedOp> = plan.drafts.iter().map(|d| d.render(&cands, &neighs)).collect();
    let ops = match hints {
        Some(hints) => fold::fold(ops, &doc.candidates, &doc.neighbors, today, hints),
        None => ops,
    };
    relate(ops, doc, hints)
}

/// Each capitalised word: (lowercase, as written, whether it is surely a name, the longer
/// name it ends, whether the text is about it, what the text says it is); a title before a
/// name ("Dr." of "Dr. Chen") is part of the longer name only. A word that opens a sentence
/// ("Ana's birthday…") may be a name; it counts when the other text writes it as one. The
/// last word of a longer name ("Street" of "Elm Street") is shared only by the same name. A
/// text is about a name it opens with ("Ana's birthday…", "My sister Ana…", "Our cat Miso…")
/// or names something by ("a dog named Rex", "a bakery called Crumb"); a name that is only an
/// object ("Speaks English", "Uses Google Calendar") is not what the text is about.
fn names(text: &str) -> Vec<Name> {
    let toks = text::tokens_of(text);
    // A capitalised word that opens a sentence may be a name even where it looks like a verb
    // or a plural ("Waffles ate a sock", "James is…"): it is never sure, so it counts only where
    // the other text writes it as a name. A title opens a name ("Ms. Harlow approved…").
    let capital = |i: usize| {
        let tok: &text::Tok = &toks[i];
        (words::is_name(tok) || words::opens_capitalised(tok)) && !words::is_stopword(&tok.word)
    };
    let guess = |t: &text::Tok| !words::is_name(t) && !words::maybe_name(t) && !words::is_title(&t.word);
    let opening = |i: usize| {
        let sentence = (0..=i).rev().find(|j| toks[*j].start).unwrap_or(0);
        let before = &toks[sentence..i];
        let possessive =
            before.first().is_some_and(|t| ["my", "our", "his", "her", "their", "the"].contains(&t.word.as_str()));
        before.is_empty() || (possessive && before.len() <= 3 && before.iter().all(|t| !words::is_name(t)))
    };
    let naming = |i: usize| i > 0 && ["named", "called"].contains(&toks[i - 1].word.as_str());
    let mut out: Vec<Name> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !capital(i) {
            i += 1;
            continue;
        }
        let start = i;
        // A possessive ends a name ("St. Brigid" of "St. Brigid's National School"); a word
        // that opens a sentence looking like a verb is one of its own ("Walks Rex…").
        while i + 1 < toks.len()
            && capital(i + 1)
            && toks[i].punct.is_none_or(|p| p == '.')
            && !toks[i].possessive
            && !(i == start && guess(&toks[i]))
        {
            i += 1;
        }
        // A word that opens a sentence and is followed by no verb is not its subject: it
        // describes a noun or is a verb itself ("Fig jam goes…", "Chase the invoice…").
        if start == i && toks[i].start && !words::is_name(&toks[i]) && !opens_as_subject(&toks, i) {
            i += 1;
            continue;
        }
        let phrase: Vec<&str> = toks[start..=i].iter().map(|t| t.word.as_str()).collect();
        let about = opening(start) || naming(start);
        let kind = kind_of(&toks, start, i);
        for (at, tok) in toks.iter().enumerate().take(i + 1).skip(start) {
            // A title names nobody on its own: "Dr." of "Dr. Chen" is not shared with "Dr. Pham".
            if tok.word.chars().count() < 2 || words::is_title(&tok.word) {
                continue;
            }
            let ends = if at == i && i > start { phrase.join(" ") } else { String::new() };
            let raw = tok.raw.trim_end_matches(|c: char| !c.is_alphanumeric()).to_string();
            // A word before the last of a longer name describes what the name names ("Chelsea"
            // of "Chelsea FC"), unless the words before say what the whole is.
            let kind = match &kind {
                Kind::Unsaid if at < i => Kind::Part(toks[i].word.clone()),
                kind => kind.clone(),
            };
            let guess = guess(tok);
            match out.iter_mut().find(|n| n.word == tok.word) {
                Some(seen) => {
                    seen.sure |= words::is_name(tok);
                    seen.guess &= guess;
                    seen.about |= about;
                    if seen.kind == Kind::Unsaid {
                        seen.kind = kind;
                    }
                }
                None => {
                    out.push(Name { word: tok.word.clone(), raw, sure: words::is_name(tok), guess, ends, about, kind })
                }
            }
        }
        i += 1;
    }
    out
}

/// Whether the capitalised word `toks[i]` that opens a sentence may be its subject, as a name
/// is: followed by its verb ("Pepper hates…", "Biscuit threw…", "Maisie can't…"), owning
/// something ("Notion's offline mode…"), or by nothing ([`words::follows_a_subject`]).
fn opens_as_subject(toks: &[text::Tok], i: usize) -> bool {
    let Some(next) = toks.get(i + 1).filter(|_| toks[i].punct.is_none() && !toks[i].possessive) else {
        return true;
    };
    next.raw.chars().next().is_some_and(char::is_uppercase) || words::follows_a_subject(next)
}

/// Whether `text` writes the word `word` (lowercase) with a capital only where it opens a
/// sentence with no verb after it ("Fig jam goes well…", "Mark the invoices…"): there it is
/// no name ([`opens_as_subject`]), so the text is not about a Fig or a Mark. Read for `about`,
/// which would rather list an entry too many than miss one, so a verb after a short phrase
/// counts too ("Priya from work wants…", "Tom at the office said…"); links ask for the verb
/// right after the word.
pub fn capitalised_only_as_a_word(text: &str, word: &str) -> bool {
    let toks = text::tokens_of(text);
    let mut written = toks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.word == word && t.raw.chars().next().is_some_and(|c| c.is_uppercase() || c.is_numeric()))
        .peekable();
    written.peek().is_some()
        && written.all(|(i, t)| {
            t.start && !words::is_name(t) && !opens_as_subject(&toks, i) && !subject_of_a_phrase(&toks, i)
        })
}

/// Whether the word `toks[i]` that opens a sentence is followed by a place or a group it
/// belongs to and then its verb: a preposition, then a verb within three words of it, in the
/// same sentence ("Priya from work wants…"; not "Zoom in on the photo…").
fn subject_of_a_phrase(toks: &[text::Tok], i: usize) -> bool {
    let preposition = toks
        .get(i + 1)
        .is_some_and(|t| toks[i].punct.is_none() && t.punct.is_none() && words::listed!(words::PHRASE_WORDS, &t.word));
    preposition && toks.iter().skip(i + 2).take(3).take_while(|t| !t.start).any(words::verb_like)
}

/// What the words around the name `toks[start..=end]` say it is ([`Kind`]).
fn kind_of(toks: &[text::Tok], start: usize, end: usize) -> Kind {
    use words::{AUXILIARIES, GOING_WORDS, NOT_NOUNS, PLACE_NOUNS, PLACE_WORDS, SOMEONE_NOUNS, THING_NOUNS, listed};
    let word = |i: usize| toks.get(i).map_or("", |t| t.word.as_str());
    // "my colleague Sydney", "a dog named Rex", "our lodger is a student called Wen", "Dr. Mensah".
    let mut back = start;
    let mut steps = 0;
    // Where the walk back stops, the word for what a name after "called" or "named" names
    // ("designer" of "a designer called Florence").
    let mut named = "";
    while back > 0 && steps < 4 && toks[back - 1].punct.is_none() {
        back -= 1;
        steps += 1;
        let w = word(back);
        if listed!(SOMEONE_NOUNS, w) {
            return Kind::Someone;
        }
        if !["is", "was", "named", "called", "a", "an", "the"].contains(&w) {
            named = w;
            break;
        }
    }
    if words::is_title(word(start)) {
        return Kind::Someone;
    }
    // "Went to Hannah's", "in Tom's car": a name that owns something is no place itself.
    if start > 0 && toks[start - 1].punct.is_none() && !toks[end].possessive {
        let before = word(start - 1);
        // "flying to Sydney", "drove through Lincoln", "went past Boots".
        let going = ["to", "through", "past"].contains(&before) && start > 1 && listed!(GOING_WORDS, word(start - 2));
        if going || listed!(PLACE_WORDS, before) {
            return Kind::Place;
        }
        if ["named", "called"].contains(&before) {
            return Kind::Named(named.to_string());
        }
    }
    // "Finding Nemo is the kids' favourite film", "Paris is the city she…": what the text says
    // the name is, within a few words of "is" or "was" (not what it is doing: "Jamal is opening
    // a second shop").
    if toks[end].punct.is_none() && !toks[end].possessive && matches!(word(end + 1), "is" | "was") {
        for i in end + 2..end + 6 {
            let Some(t) = toks.get(i) else { break };
            if t.word.ends_with("ing") || t.word.ends_with("ed") {
                break;
            }
            if listed!(THING_NOUNS, &t.word) {
                return Kind::Part(t.word.clone());
            }
            if listed!(PLACE_NOUNS, &t.word) {
                return Kind::Place;
            }
            if listed!(SOMEONE_NOUNS, &t.word) {
                return Kind::Someone;
            }
            // "the kids' favourite film": a plural's apostrophe ends no phrase.
            if t.punct.is_some_and(|p| !matches!(p, '\'' | '\u{2019}')) || listed!(AUXILIARIES, &t.word) {
                break;
            }
        }
        // "Florence was the best stop on the trip", "Dallas was the last season…": a name said
        // to be the something nobody is.
        if word(end + 2) == "the"
            && let Some(head) = head_noun(toks, end + 3)
            && !listed!(SOMEONE_NOUNS, &head)
        {
            return Kind::Part(head);
        }
    }
    // "a Samsung fridge", "Everton mints were…", "The Pixel phone's camera", "Apple picking…":
    // the name describes a noun. A name that owns one ("Ana's birthday") is what the text is about.
    let Some(next) = toks.get(end + 1).filter(|_| toks[end].punct.is_none() && !toks[end].possessive) else {
        return Kind::Unsaid;
    };
    let noun = next.raw.chars().next().is_some_and(char::is_lowercase)
        && !words::is_stopword(&next.word)
        && !words::is_number(&next.word)
        && !words::is_date(next)
        && !listed!(NOT_NOUNS, &next.word)
        && !listed!(AUXILIARIES, &next.word);
    // "a Samsung fridge", "a new Samsung fridge".
    let indefinite = (1..=2).any(|n| start >= n && matches!(word(start - n), "a" | "an"));
    let then_a_verb = next.punct.is_none() && listed!(AUXILIARIES, word(end + 2));
    let gerund = toks[start].start && next.word.ends_with("ing");
    if noun && (indefinite || next.possessive || then_a_verb || gerund) {
        Kind::Part(next.word.clone())
    } else {
        Kind::Unsaid
    }
}

/// The noun a phrase starting at `toks[from]` ends on ("best stop" of "the best stop on the
/// trip"): the last of up to three lowercase words before a small word or a mark. None when it
/// is a number, a date or a superlative ("the eldest"), which say nothing of what a name is.
fn head_noun(toks: &[text::Tok], from: usize) -> Option<String> {
    let mut head = None;
    for t in toks.iter().skip(from).take(3) {
        let lower = t.raw.chars().next().is_some_and(char::is_lowercase);
        if !lower || words::is_stopword(&t.word) || words::is_number(&t.word) || words::is_date(t) {
            break;
        }
        head = Some(t);
        if t.punct.is_some() || t.possessive {
            break;
        }
    }
    head.map(|t| t.word.clone()).filter(|w| !w.ends_with("est"))
}

/// The proper names of a text, as the offline decider reads them, as written, each with
/// whether it is surely a name (capitalised inside a sentence) or only may be (it opens one:
/// "Ana's birthday…", but also "Read the manual…").
pub fn proper_names(text: &str) -> Vec<(String, bool)> {
    names(text).into_iter().filter(|n| n.sure || (n.about && !n.guess)).map(|n| (n.raw, n.sure)).collect()
}

/// A capitalised word of a text, as [`relate`] weighs it.
struct Name {
    word: String,
    raw: String,
    sure: bool,
    /// Only opens a sentence and looks like a verb or a plural ("Walks", "Waffles"): shared
    /// where the other text writes it as a name, never listed as one.
    guess: bool,
    ends: String,
    about: bool,
    kind: Kind,
}

/// What a text says a name is, from the words around it. Two texts that say different things
/// of one name speak of two things that share it ([`Kind::agrees`]).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// Nothing around the name says.
    Unsaid,
    /// A person or an animal: "my colleague Sydney", "Dr. Mensah", "a dog named Rex".
    Someone,
    /// After a word of place: "in Paris", "flying to Sydney", "visit Jordan".
    Place,
    /// Given as what something is called, with the word for that thing: "a bakery called
    /// Crumb" (`bakery`).
    Named(String),
    /// Describing the noun it holds: "a Samsung fridge", "Everton mints were…", "Chelsea" of
    /// "Chelsea FC"; the text is about that thing, not about the name.
    Part(String),
}

impl Kind {
    /// Whether two texts may mean one thing by the name: someone is not a place nor a part of
    /// another thing's name; a text about a thing the name describes ("Has a Samsung fridge")
    /// is about something else than a text about the name itself ("Samsung's launch was
    /// delayed"), unless that one says the name is a place or what a thing of that kind is
    /// called ("a project called Atlas", "the Atlas project"), or it describes the same thing.
    fn agrees(&self, other: &Kind) -> bool {
        use Kind::*;
        match (self, other) {
            (Someone, Place) | (Place, Someone) | (Someone, Part(_)) | (Part(_), Someone) => false,
            (Part(_), Unsaid) | (Unsaid, Part(_)) => false,
            (Part(a), Part(b)) => a == b,
            // "a designer called Florence" is not the Florence of "the best stop"; "a bakery
            // called Crumb" may be the Crumb of "the Crumb bakery".
            (Named(a), Part(b)) | (Part(b), Named(a)) => a.is_empty() || a == b,
            _ => true,
        }
    }
}

/// Link each ADD to the entries of the call it is related to but distinct from: they share a
/// proper name that one of the two is about ("Has a dog named Rex." and "Walks Rex every
/// morning."; not "Speaks English" and "Reads English novels"), and where the pass knows both
/// texts' aspect keys, they do not say the name is of two different kinds of thing. An entry
/// another op changes is left alone; what the two share is the name, as the fact writes it.
fn relate(mut ops: Vec<ProposedOp>, doc: &ClusterDoc, hints: Option<&Hints>) -> Vec<ProposedOp> {
    use super::aspects::{USER, compatible};
    use crate::planning::run::ops::{Op, Related};
    let changed: std::collections::HashSet<String> =
        ops.iter().filter_map(|o| o.op.target().map(str::to_string)).collect();
    let neighbour_names: Vec<Vec<Name>> = doc.neighbors.iter().map(|n| names(&n.content)).collect();
    for op in &mut ops {
        let Op::Add { facts, content } = &op.op else { continue };
        let own = names(content);
        if own.is_empty() {
            continue;
        }
        let keys_of = |id: &str| hints.and_then(|h| h.keys.get(id));
        for (n, theirs) in doc.neighbors.iter().zip(&neighbour_names) {
            if changed.contains(&n.id) {
                continue;
            }
            let Some(Name { raw: shared, .. }) = shared_name(&own, theirs) else { continue };
            // "Walks Rex every morning" is the user's doing, about Rex: a subject of the user's
            // own says nothing against the name.
            let subjects_agree = match (facts.iter().find_map(|f| keys_of(f)), keys_of(&n.id)) {
                (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => {
                    a.iter().chain(b).any(|x| x.subject == USER)
                        || a.iter().any(|x| b.iter().any(|y| compatible(&x.subject, &y.subject)))
                }
                _ => true,
            };
            if subjects_agree {
                op.related.push(Related::With { id: n.id.clone(), shares: Some(shared.clone()) });
            }
        }
        // The same links whatever order the call lists its entries in.
        op.related.sort_by(|a, b| a.id().cmp(b.id()));
        for link in &op.related {
            op.signals.push(format!("related to {} (both name {})", link.id(), link.shares().unwrap_or_default()));
        }
    }
    ops
}

/// A name two texts share and mean one thing by: written as a name in one of them at least,
/// the same longer name if any, one of the two about it, and nothing around it in either
/// saying it is another kind of thing ([`Kind::agrees`]).
fn shared_name<'a>(own: &'a [Name], theirs: &[Name]) -> Option<&'a Name> {
    own.iter().find(|mine| {
        theirs.iter().any(|other| {
            other.word == mine.word
                && (mine.sure || other.sure)
                && mine.ends == other.ends
                && (mine.about || other.about)
                && mine.kind.agrees(&other.kind)
        })
    })
}

/// Whether a fact speaks of the very thing an entry names, and of nothing else by name: it
/// shares a name with the entry ([`shared_name`]) and every name it writes is one the entry
/// writes. "The Galway flat has damp" says more about the Galway of "We moved to Galway", not a
/// new home; "Moved from Galway to Cork" names another.
fn names_only_what_it_names(fact: &str, entry: &str) -> bool {
    let (mine, theirs) = (names(fact), names(entry));
    shared_name(&mine, &theirs).is_some()
        && mine.iter().filter(|n| n.sure).all(|n| theirs.iter().any(|t| t.word == n.word))
}

/// The form used for duplicate detection: no leading "HH:MM ", typographic quotes unified,
/// lowercase, whitespace collapsed, trailing punctuation removed.
pub fn normalise(text: &str) -> String {
    let flat = unify_quotes(strip_time(text.trim())).split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    flat.trim_end_matches(|c: char| ".!?;:,".contains(c) || c.is_whitespace()).to_string()
}
