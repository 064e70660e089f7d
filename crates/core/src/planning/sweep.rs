//! Sweeping the current entries for duplicates, contradictions and superseded values (pure
//! but for the decider, which the use case calls).
//!
//! A pass only compares new facts with entries; entries already in `memory.md` (written by
//! hand, merged from another machine, made before a better embedder) are never compared with
//! each other. A sweep does that, and stores what it finds as one plan for review: it never
//! applies anything on its own.
//!
//! **Which entries.** Each entry is swept when it is new or changed since the last sweep (its
//! content hash differs from the one in `.memfold/sweep.json`), or every entry with `full`.
//! Entries a pending plan touches wait for the next sweep.
//!
//! **Against which.** Neighbours are found by the words entries share: an inverted index of
//! content-word stems, in which a swept entry scores each other entry by the rarity of the
//! words they share (idf), counting only words fewer than [`MAX_POSTING`] entries use. Entries
//! with the same content words (a copy, or the same words in another order) are neighbours
//! however common their words are, ahead of the rest, unless more than [`MAX_ALIKE`] entries
//! have those words. Entries that differ in one common word ("Kamara's dentist is Dr. Chen" /
//! "Lomaro's dentist is Dr. Chen" in a memory of such lines) are not paired: in a memory of
//! one shape every entry would be, at a decision each. An entry takes at most `k` neighbours, each sharing
//! half of the smaller entry's words at least.
//! Each pair is weighed once: when both entries are swept, from the later one in the file.
//! This finds what shares a subject ("The dentist is Dr. Alvarez" / "The dentist is Dr. Chen");
//! paraphrases with no word in common are left to the passes, whose facts come with vectors.
//!
//! **Deciding.** Each swept entry with neighbours is one decision document, the entry as the
//! candidate and its neighbours as the entries, given to the pass's decider (the LLM, or the
//! offline rules). Its ops are read for entries: a DUPLICATE of the candidate is a REMOVE of it
//! into the target; a REPLACE naming it rewrites the target and removes it into the target; an
//! ADD keeps it as it is. Pairs a person rejected in an earlier sweep's plan are not proposed
//! again.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::planning::consolidate::stem::stem;
use crate::planning::run::ops::{Candidate, ClusterDoc, Op, ProposedOp};
use crate::planning::run::plan::neighbor;
use memfold_store::content_hash;
use memfold_store::entries::{Entry, EntryFile};

/// A word more entries than this use says nothing about which entries belong together.
pub const MAX_POSTING: usize = 200;

/// Entries with the same content words that are more than this many say nothing about which
/// belong together either.
const MAX_ALIKE: usize = 32;

/// `.memfold/sweep.json`: what the last sweep looked at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepState {
    /// When the last sweep finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<DateTime<Utc>>,
    /// Entry id → hash of its content when it was last swept.
    #[serde(default)]
    pub swept: BTreeMap<String, String>,
}

/// The path of the sweep state, relative to the root.
pub const STATE: &str = ".memfold/sweep.json";

impl SweepState {
    /// The state as a file of a [`memfold_store::commit::Change`].
    pub fn file(&self) -> (String, Option<String>) {
        let mut text = serde_json::to_string(self).unwrap_or_default();
        text.push('\n');
        (STATE.to_string(), Some(text))
    }
}

/// One swept entry and its neighbours, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    pub entry: String,
    pub neighbours: Vec<String>,
}

/// Words too common to tell entries apart.
const STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by", "from", "is", "are",
    "was", "were", "be", "been", "has", "have", "had", "it", "its", "this", "that", "as", "user", "user's", "i", "my",
    "me", "their", "they", "he", "she", "his", "her", "we", "our", "you", "your", "s",
];

/// The distinct content-word stems of a text.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The entries to sweep: every current entry with `full`, else those new or changed since
/// `state`; never one in `held` (a pending plan touches it).
pub fn to_sweep<'m>(memory: &'m EntryFile, state: &SweepState, full: bool, held: &HashSet<String>) -> Vec<&'m Entry> {
    memory
        .entries()
        .filter(|e| !held.contains(e.id()))
        .filter(|e| full || state.swept.get(e.id()) != Some(&content_hash(&e.content)))
        .collect()
}

/// Each swept entry's neighbours among the current entries (see the module docs), for those
/// that have any, in file order.
pub fn pairings(memory: &EntryFile, swept: &[&Entry], held: &HashSet<String>, k: usize) -> Vec<Pairing> {
    let entries: Vec<&Entry> = memory.entries().filter(|e| !held.contains(e.id())).collect();
    let position: HashMap<&str, usize> = entries.iter().enumerate().map(|(i, e)| (e.id(), i)).collect();
    let bags: Vec<Vec<String>> = entries.iter().map(|e| words(&e.content)).collect();
    let mut postings: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, bag) in bags.iter().enumerate() {
        for w in bag {
            postings.entry(w.as_str()).or_default().push(i);
        }
    }
    let mut alike: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, bag) in bags.iter().enumerate() {
        alike.entry(bag_key(bag)).or_default().push(i);
    }
    let n = entries.len().max(1) as f64;
    let swept_at: HashSet<usize> = swept.iter().filter_map(|e| position.get(e.id()).copied()).collect();
    let mut out = Vec::new();
    let mut score: HashMap<usize, f64> = HashMap::new();
    let mut order: Vec<usize> = swept_at.iter().copied().collect();
    order.sort_unstable();
    for i in order {
        score.clear();
        for w in &bags[i] {
            let Some(list) = postings.get(w.as_str()) else { continue };
            if list.len() > MAX_POSTING {
                continue;
            }
            let idf = (n / list.len() as f64).ln() + 1.0;
            for &j in list {
                // Each pair once: from the later entry when both are swept.
                if j == i || (j > i && swept_at.contains(&j)) {
                    continue;
                }
                *score.entry(j).or_default() += idf;
            }
        }
        // Entries with the same words rank first: that adds what every word of this one is worth.
        let whole: f64 = bags[i].iter().map(|w| (n / postings[w.as_str()].len() as f64).ln() + 1.0).sum();
        if let Some(list) = alike.get(&bag_key(&bags[i])).filter(|l| l.len() <= MAX_ALIKE) {
            for &j in list {
                if j != i && !(j > i && swept_at.contains(&j)) {
                    *score.entry(j).or_default() += whole;
                }
            }
        }
        // Candidates by the rare words they share, kept when half the smaller entry's words
        // (common ones too) are shared.
        let mut near: Vec<(usize, f64)> = score.iter().map(|(j, s)| (*j, *s)).collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near.truncate(k * 8);
        near.retain(|(j, _)| {
            let shared = bags[i].iter().filter(|w| bags[*j].binary_search(w).is_ok()).count();
            shared * 2 >= bags[i].len().min(bags[*j].len()).max(1)
        });
        if near.is_empty() {
            continue;
        }
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near.truncate(k);
        out.push(Pairing {
            entry: entries[i].id().to_string(),
            neighbours: near.into_iter().map(|(j, _)| entries[j].id().to_string()).collect(),
        });
    }
    out
}

/// The key of a bag of words: entries with the same content words share it.
fn bag_key(bag: &[String]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bag.hash(&mut h);
    h.finish()
}

/// The current entries by id, for [`doc`].
pub fn by_id(memory: &EntryFile) -> HashMap<&str, &Entry> {
    memory.entries().map(|e| (e.id(), e)).collect()
}

/// The decision document of one pairing: the swept entry as the candidate (its id standing
/// for a fact id), its neighbours as the entries.
pub fn doc(entries: &HashMap<&str, &Entry>, pairing: &Pairing, today: chrono::NaiveDate) -> Option<ClusterDoc> {
    let entry = *entries.get(pairing.entry.as_str())?;
    let neighbors =
        pairing.neighbours.iter().filter_map(|id| entries.get(id.as_str())).map(|e| neighbor(e, today)).collect();
    let date = entry.meta.updated.or(entry.meta.first_seen).unwrap_or(today);
    Some(ClusterDoc {
        neighbors,
        candidates: vec![Candidate { id: entry.id().to_string(), text: entry.content.clone(), date }],
    })
}

/// The decider's ops for `doc` read for entries (see the module docs): REMOVEs of the swept
/// entry and the REPLACEs of its neighbours that take it in, without pairs in `rejected`
/// (swept entry, neighbour).
pub fn entry_ops(doc: &ClusterDoc, ops: Vec<ProposedOp>, rejected: &HashSet<(String, String)>) -> Vec<ProposedOp> {
    let Some(swept) = doc.candidates.first().map(|c| c.id.as_str()) else { return Vec::new() };
    let mut out: Vec<ProposedOp> = Vec::new();
    let mut removed = false;
    for proposed in ops {
        let ProposedOp { op, mut signals, confidence, .. } = proposed;
        signals.insert(0, "sweep".into());
        let fold = |into: &str, why: Option<String>| ProposedOp {
            op: Op::Remove { target: swept.to_string(), into: into.to_string(), why },
            signals: signals.clone(),
            confidence,
            related: Vec::new(),
        };
        match op {
            Op::Duplicate { facts, target } if facts.iter().any(|f| f == swept) => {
                if removed || rejected.contains(&(swept.to_string(), target.clone())) {
                    continue;
                }
                out.push(fold(&target, Some(format!("{swept} says nothing {target} does not"))));
                removed = true;
            }
            Op::Replace { target, facts, content, why } if facts.iter().any(|f| f == swept) => {
                if removed || rejected.contains(&(swept.to_string(), target.clone())) {
                    continue;
                }
                let merged = ProposedOp {
                    op: Op::Replace { target: target.clone(), facts: Vec::new(), content, why: why.clone() },
                    signals: signals.clone(),
                    confidence,
                    related: Vec::new(),
                };
                out.push(merged);
                out.push(fold(&target, why));
                removed = true;
            }
            Op::Remove { target, into, why } if target != swept && into != swept => {
                if rejected.contains(&(target.clone(), into.clone())) {
                    continue;
                }
                out.push(ProposedOp { op: Op::Remove { target, into, why }, signals, confidence, related: Vec::new() });
            }
            _ => {}
        }
    }
    out
}

/// (removed, survivor) pairs of the REMOVEs of `journal`: what a rejected sweep proposed.
pub fn rejected_pairs<'r>(
    journal: impl IntoIterator<Item = &'r crate::planning::run::plan::JournalRecord>,
) -> HashSet<(String, String)> {
    journal
        .into_iter()
        .filter_map(|r| match &r.op.op {
            Op::Remove { target, into, .. } => Some((target.clone(), into.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(texts: &[&str]) -> EntryFile {
        let mut text = String::new();
        for (i, t) in texts.iter().enumerate() {
            text.push_str(&format!("<!--m {{\"id\":\"m-{i}\"}}-->\n{t}\n\n"));
        }
        EntryFile::parse(&text, "memory.md")
    }

    #[test]
    fn entries_that_share_a_subject_are_paired_once_and_others_are_not() {
        let m = memory(&[
            "The dentist is Dr. Alvarez.",
            "Plays the cello on Sundays.",
            "The dentist is Dr. Chen.",
            "Allergic to penicillin.",
        ]);
        let all = to_sweep(&m, &SweepState::default(), true, &HashSet::new());
        let pairs = pairings(&m, &all, &HashSet::new(), 8);
        assert_eq!(pairs, [Pairing { entry: "m-2".into(), neighbours: vec!["m-0".into()] }]);
    }

    #[test]
    fn entries_with_the_same_words_are_paired_first_however_common_their_words_are() {
        // 300 lines of one shape put every word but the batch number past MAX_POSTING; the
        // number alone is shared by no two of them. Ties in the rare words go to the earlier
        // entry: m-0 would come first but for the same words.
        let mut texts = vec!["Jon moved the crate in the cellar, batch 7.".to_string()];
        texts.extend((1..=300).map(|i| format!("Mara cleaned the valve in the cellar, batch {i}.")));
        texts.push("Mara cleaned the valve in the cellar, batch 7!".into()); // m-301: a copy of m-7
        texts.push("In the cellar, batch 7: the valve Mara cleaned.".into()); // m-302: the same words
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let m = memory(&refs);
        let swept: Vec<&Entry> = m.entries().filter(|e| e.id() == "m-301" || e.id() == "m-302").collect();
        let pairs = pairings(&m, &swept, &HashSet::new(), 8);
        let neighbours =
            |id: &str| pairs.iter().find(|p| p.entry == id).map(|p| p.neighbours.clone()).unwrap_or_default();
        assert_eq!(neighbours("m-301").first().map(String::as_str), Some("m-7"), "{pairs:?}");
        assert_eq!(neighbours("m-302").first().map(String::as_str), Some("m-7"), "{pairs:?}");
        // Lines that differ in one common word are not paired for it.
        let all = to_sweep(&m, &SweepState::default(), true, &HashSet::new());
        let everything = pairings(&m, &all, &HashSet::new(), 8);
        assert!(everything.iter().all(|p| p.entry != "m-100"), "{:?}", &everything[..3]);
    }

    #[test]
    fn an_incremental_sweep_takes_only_changed_entries_but_pairs_them_with_any() {
        let m = memory(&["The dentist is Dr. Alvarez.", "The dentist is Dr. Chen."]);
        let mut state = SweepState::default();
        for e in m.entries() {
            state.swept.insert(e.id().to_string(), content_hash(&e.content));
        }
        assert!(to_sweep(&m, &state, false, &HashSet::new()).is_empty());
        state.swept.insert("m-0".into(), "changed".into());
        let swept = to_sweep(&m, &state, false, &HashSet::new());
        let pairs = pairings(&m, &swept, &HashSet::new(), 8);
        assert_eq!(pairs, [Pairing { entry: "m-0".into(), neighbours: vec!["m-1".into()] }]);
    }

    #[test]
    fn a_duplicate_of_the_swept_entry_folds_it_and_an_add_keeps_it() {
        let m = memory(&["Likes green tea.", "Likes green tea!"]);
        let pairing = Pairing { entry: "m-1".into(), neighbours: vec!["m-0".into()] };
        let d = doc(&by_id(&m), &pairing, "2026-06-01".parse().unwrap()).unwrap();
        let dup = ProposedOp::new(Op::Duplicate { facts: vec!["m-1".into()], target: "m-0".into() });
        let ops = entry_ops(&d, vec![dup.clone()], &HashSet::new());
        assert!(matches!(&ops[0].op, Op::Remove { target, into, .. } if target == "m-1" && into == "m-0"));
        let add = ProposedOp::new(Op::Add { facts: vec!["m-1".into()], content: "x".into() });
        assert!(entry_ops(&d, vec![add], &HashSet::new()).is_empty());
        let rejected: HashSet<(String, String)> = [("m-1".to_string(), "m-0".to_string())].into();
        assert!(entry_ops(&d, vec![dup], &rejected).is_empty(), "a rejected pair is not proposed again");
    }
}
