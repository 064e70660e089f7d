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
//! - ADD otherwise. Candidates that duplicate or contradict each other share one op.
//!
//! Word overlap is only ever a precondition of those rules, never a reason on its own. Every op
//! names the rules that fired in `signals`; the offline decider never proposes REMOVE.

mod compare;
mod fold;
mod place;
mod text;
mod words;
#[cfg(test)]
mod tests;

use chrono::NaiveDate;

use super::ops::{ClusterDoc, ProposedOp};
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
    match hints {
        Some(hints) => fold::fold(ops, &doc.candidates, &doc.neighbors, today, hints),
        None => ops,
    }
}

/// The form used for duplicate detection: no leading "HH:MM ", typographic quotes unified,
/// lowercase, whitespace collapsed, trailing punctuation removed.
pub fn normalise(text: &str) -> String {
    let flat = unify_quotes(strip_time(text.trim())).split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    flat.trim_end_matches(|c: char| ".!?;:,".contains(c) || c.is_whitespace()).to_string()
}
