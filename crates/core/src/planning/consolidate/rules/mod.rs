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
/// name it ends, whether the text is about it); a title before a name ("Dr." of "Dr. Chen")
/// is part of the longer name only. A word that opens a sentence ("Ana's
/// birthday…") may be a name; it counts when the other text writes it as one. The last word
/// of a longer name ("Street" of "Elm Street") is shared only by the same name. A text is
/// about a name it opens with ("Ana's birthday…", "My sister Ana…", "Our cat Miso…") or
/// names something by ("a dog named Rex", "a bakery called Crumb"); a name that is only an
/// object ("Speaks English", "Uses Google Calendar") is not what the text is about.
fn names(text: &str) -> Vec<Name> {
    let toks = text::tokens(&unify_quotes(strip_time(text.trim())));
    let capital = |i: usize| {
        let tok: &text::Tok = &toks[i];
        (words::is_name(tok) || words::maybe_name(tok)) && !words::is_stopword(&tok.word)
    };
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
        while i + 1 < toks.len() && capital(i + 1) && toks[i].punct.is_none_or(|p| p == '.') {
            i += 1;
        }
        let phrase: Vec<&str> = toks[start..=i].iter().map(|t| t.word.as_str()).collect();
        let about = opening(start) || naming(start);
        for (at, tok) in toks.iter().enumerate().take(i + 1).skip(start) {
            // A title names nobody on its own: "Dr." of "Dr. Chen" is not shared with "Dr. Pham".
            if tok.word.chars().count() < 2 || words::is_title(&tok.word) {
                continue;
            }
            let ends = if at == i && i > start { phrase.join(" ") } else { String::new() };
            let raw = tok.raw.trim_end_matches(|c: char| !c.is_alphanumeric()).to_string();
            match out.iter_mut().find(|n| n.word == tok.word) {
                Some(seen) => {
                    seen.sure |= words::is_name(tok);
                    seen.about |= about;
                }
                None => out.push(Name { word: tok.word.clone(), raw, sure: words::is_name(tok), ends, about }),
            }
        }
        i += 1;
    }
    out
}

/// The proper names of a text, as the offline decider reads them, as written, each with
/// whether it is surely a name (capitalised inside a sentence) or only may be (it opens one:
/// "Ana's birthday…", but also "Read the manual…").
pub fn proper_names(text: &str) -> Vec<(String, bool)> {
    names(text).into_iter().filter(|n| n.sure || n.about).map(|n| (n.raw, n.sure)).collect()
}

/// A capitalised word of a text, as [`relate`] weighs it.
struct Name {
    word: String,
    raw: String,
    sure: bool,
    ends: String,
    about: bool,
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
            let shared = own.iter().find(|mine| {
                theirs.iter().any(|other| {
                    other.word == mine.word
                        && (mine.sure || other.sure)
                        && mine.ends == other.ends
                        && (mine.about || other.about)
                })
            });
            let Some(Name { raw: shared, .. }) = shared else { continue };
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

/// The form used for duplicate detection: no leading "HH:MM ", typographic quotes unified,
/// lowercase, whitespace collapsed, trailing punctuation removed.
pub fn normalise(text: &str) -> String {
    let flat = unify_quotes(strip_time(text.trim())).split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    flat.trim_end_matches(|c: char| ".!?;:,".contains(c) || c.is_whitespace()).to_string()
}
