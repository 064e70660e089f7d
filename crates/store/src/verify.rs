//! `memfold verify`: proves that every archived fact is accounted for, and reports what is not.
//!
//! Each fact must be in a current entry (directly, or through replaced and merged versions
//! that lead to one), pending, or tombstoned by a person's act (a forget, or an entry deleted
//! from `memory.md` by hand). Reported as problems:
//! - a fact whose only home is a history version that leads nowhere: it was consolidated,
//!   then the entry holding it vanished without a forget, an undo or a rebuild explaining it
//!   (the fact counts as pending, so the next pass takes it up again);
//! - an entry tombstoned as "deleted by hand" whose facts all live on in current entries: it
//!   was merged away, not deleted, and the tombstone would hide those facts from a rebuild;
//! - a fact dated on or before the watermark that is still pending;
//! - parse problems in any file, sources that name no archived fact, duplicate ids.
//!
//! The report is `ok` only when there are no problems. Reading the files is all it does, so
//! it is cheap enough to run after every pass in tests.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::Problem;
use crate::entries::Entry;
use crate::ledger::{End, FactFate, Ledger};

/// The reason a tombstone written for an entry deleted from `memory.md` by hand carries.
pub const DELETED_BY_HAND: &str = "deleted by hand";

/// The result of a verification (`verify --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub facts: usize,
    pub pending: usize,
    pub consolidated: usize,
    pub tombstoned: usize,
    /// Facts of entries retired for disuse (in history, not pending).
    pub retired: usize,
    pub problems: Vec<Problem>,
    /// What is not a lost fact but wants a person's attention: memory files other accounts
    /// can read or write, with the fix. They do not make `ok` false.
    pub warnings: Vec<String>,
}

/// Check a ledger. `extra` adds problems found elsewhere (e.g. index vs files).
pub fn verify(ledger: &Ledger, extra: Vec<Problem>) -> Report {
    let mut problems = ledger.problems.clone();
    let fates = ledger.fates();
    let mut seen = HashSet::new();
    for fact in &ledger.facts {
        let file = format!("archive/{}.md", fact.date);
        if !seen.insert(fact.id.as_str()) {
            problems.push(Problem::new(&file, fact.line, format!("fact id {} is used on another day too", fact.id)));
        }
        if fates.get(fact.id.as_str()) == Some(&FactFate::Pending)
            && ledger.state.watermark.is_some_and(|w| fact.date <= w)
        {
            problems.push(Problem::new(
                &file,
                fact.line,
                format!("fact {} is before the watermark but in no entry, history block or tombstone", fact.id),
            ));
        }
    }
    problems.extend(lost_facts(ledger, &fates));
    problems.extend(merged_not_deleted(ledger));
    let known: HashSet<&str> = ledger.facts.iter().map(|f| f.id.as_str()).collect();
    for (file, entries) in [("consolidated/memory.md", &ledger.memory), ("consolidated/history.md", &ledger.history)] {
        for entry in entries.entries() {
            for source in entry.meta.sources.iter().filter(|s| !known.contains(s.as_str())) {
                problems.push(Problem::new(
                    file,
                    entry.line,
                    format!("entry {} names source {source}, which is in no archive file", entry.id()),
                ));
            }
        }
    }
    problems.extend(extra);
    let count = |fate| fates.values().filter(|f| **f == fate).count();
    Report {
        ok: problems.is_empty(),
        facts: ledger.facts.len(),
        pending: count(FactFate::Pending),
        consolidated: count(FactFate::Consolidated),
        tombstoned: count(FactFate::Tombstoned),
        retired: count(FactFate::Retired),
        problems,
        warnings: secrets(ledger).into_iter().chain(links(ledger)).collect(),
    }
}

/// Links that lead nowhere or read as no link (a hand edit, or an entry that left without
/// them following it), and links only one side holds. A link never holds a fact, so these do
/// not make `ok` false; the fix is to edit the `related` key or let the next change mend it.
fn links(ledger: &Ledger) -> Vec<String> {
    let current: HashMap<&str, &Entry> = ledger.memory.entries().map(|e| (e.id(), e)).collect();
    let mut found = Vec::new();
    for entry in ledger.memory.entries() {
        let at = format!("consolidated/memory.md:{}: entry {}", entry.line, entry.id());
        if entry.meta.garbled_links() {
            found.push(format!("{at}: its \"related\" holds something that is not a link (kept as written)"));
        }
        for link in entry.meta.links() {
            match current.get(link.id.as_str()) {
                None => found.push(format!("{at}: links to {}, which is not a current entry", link.id)),
                Some(other) if !other.meta.links().iter().any(|l| l.id == entry.id()) => {
                    found.push(format!("{at}: links to {}, which does not link back", link.id))
                }
                Some(_) => {}
            }
        }
    }
    found
}

/// Credentials in the archive or in current entries (typed by hand, or let in by
/// `ingest.secrets = "allow"`): where and of what kind, never the value. They are never
/// promoted and masked in every LLM request, but they stay in the files until a person
/// takes them out.
fn secrets(ledger: &Ledger) -> Vec<String> {
    let mut found = Vec::new();
    let mut report = |file: &str, line: usize, what: &str, text: &str| {
        for secret in crate::secrets::find(text) {
            found.push(format!(
                "{file}:{line}: {what} holds a {} (never promoted, masked in LLM requests; edit it out, or forget it)",
                secret.kind
            ));
        }
    };
    for fact in &ledger.facts {
        report(&format!("archive/{}.md", fact.date), fact.line, &format!("fact {}", fact.id), &fact.text);
    }
    for entry in ledger.memory.entries() {
        report("consolidated/memory.md", entry.line, &format!("entry {}", entry.id()), &entry.content);
    }
    found
}

/// Pending facts that a replaced or merged version took up whose chain leads nowhere, and that
/// no deliberate act (undo, rebuild) explains.
fn lost_facts(ledger: &Ledger, fates: &HashMap<&str, FactFate>) -> Vec<Problem> {
    let ends = ledger.entry_ends();
    let mut explained: HashSet<&str> = HashSet::new();
    let mut lost: Vec<(&str, &Entry)> = Vec::new();
    for block in ledger.history.entries() {
        let end = ends.get(block.id()).copied().unwrap_or(End::Lost);
        let leads_on = block.meta.status.as_ref().is_some_and(|s| s.leads_on());
        for fact in &block.meta.sources {
            if fates.get(fact.as_str()) != Some(&FactFate::Pending) {
                continue;
            }
            if leads_on && end == End::Lost {
                lost.push((fact, block));
            } else {
                explained.insert(fact);
            }
        }
    }
    let mut reported = HashSet::new();
    lost.into_iter()
        .filter(|(fact, _)| !explained.contains(fact) && reported.insert(*fact))
        .map(|(fact, block)| {
            Problem::new(
                "consolidated/history.md",
                block.line,
                format!(
                    "fact {fact} is in no current entry: its version of entry {} ({}{}) leads to no entry in \
                     memory.md and no forget, undo or rebuild explains it; the next pass consolidates it again",
                    block.id(),
                    block.meta.status.as_ref().map_or("history", |s| s.as_str()),
                    block.meta.run.as_deref().map_or(String::new(), |r| format!(" in run {r}")),
                ),
            )
        })
        .collect()
}

/// Tombstones recorded for an entry deleted by hand whose facts all live on in current entries.
fn merged_not_deleted(ledger: &Ledger) -> Vec<Problem> {
    let mut holders: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in ledger.memory.entries() {
        for f in &e.meta.sources {
            holders.entry(f.as_str()).or_default().push(e.id());
        }
    }
    let mut problems = Vec::new();
    for (i, t) in ledger.tombstones.iter().enumerate() {
        if t.reason.as_deref() != Some(DELETED_BY_HAND) || t.ids.len() < 2 {
            continue;
        }
        let (entry, facts) = (&t.ids[0], &t.ids[1..]);
        if ledger.memory.get(entry).is_some() || !facts.iter().all(|f| holders.contains_key(f.as_str())) {
            continue;
        }
        let mut alive: Vec<&str> = facts.iter().flat_map(|f| holders[f.as_str()].iter().copied()).collect();
        alive.sort_unstable();
        alive.dedup();
        problems.push(Problem::new(
            ".memfold/tombstones.jsonl",
            i + 1,
            format!(
                "entry {entry} was recorded as deleted by hand, but all its facts live on in current entries ({}): \
                 it was merged away, not deleted, and this tombstone hides those facts",
                alive.join(", ")
            ),
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::Fact;
    use crate::entries::{EntryMeta, HistoryStatus};
    use crate::state::Tombstone;

    fn fact(id: &str) -> Fact {
        Fact::sample(id, "2026-05-01", id)
    }

    fn entry(id: &str, sources: &[&str]) -> Entry {
        let meta = EntryMeta { sources: sources.iter().map(|s| s.to_string()).collect(), ..EntryMeta::new(id) };
        Entry::new(meta, &format!("Text of {id}."))
    }

    fn version(id: &str, sources: &[&str], status: HistoryStatus, into: &str) -> Entry {
        let mut e = entry(id, sources);
        e.meta.status = Some(status);
        e.meta.superseded_by = Some(into.into());
        e.meta.run = Some("r-1".into());
        e
    }

    /// A pass added m-new from f-1 and f-2, replaced it and merged m-old into it, and was
    /// killed after writing history but before memory.md: the facts are only in history.
    #[test]
    fn facts_only_in_history_versions_that_lead_nowhere_are_reported() {
        let mut ledger = Ledger::empty();
        ledger.facts = ["f-1", "f-2", "f-3"].map(fact).to_vec();
        ledger.memory.push(entry("m-keep", &["f-3"]));
        ledger.history.push(version("m-new", &["f-1", "f-2"], HistoryStatus::Replaced, "m-new"));
        ledger.history.push(version("m-old", &["f-2"], HistoryStatus::Merged, "m-new"));
        let report = verify(&ledger, Vec::new());
        assert!(!report.ok);
        assert_eq!(report.pending, 2, "the next pass takes them up again");
        let lost: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(lost.len(), 2, "{lost:?}");
        assert!(lost[0].starts_with("fact f-1 is in no current entry"), "{lost:?}");
        // Once memory.md holds the entry the versions lead to, all is well.
        ledger.memory.push(entry("m-new", &["f-1", "f-2"]));
        assert!(verify(&ledger, Vec::new()).ok);
    }

    #[test]
    fn versions_set_aside_by_an_undo_or_a_rebuild_are_no_loss() {
        let mut ledger = Ledger::empty();
        ledger.facts = ["f-1"].map(fact).to_vec();
        ledger.history.push(version("m-a", &["f-1"], HistoryStatus::Replaced, "m-a"));
        let mut undone = entry("m-a", &["f-1"]);
        undone.meta.status = Some(HistoryStatus::Reverted);
        ledger.history.push(undone);
        let report = verify(&ledger, Vec::new());
        assert!(report.ok, "{:?}", report.problems);
        assert_eq!(report.pending, 1);
    }

    /// A pass merged m-b into m-a and was killed before the seen copy was written; the next
    /// reader took m-b for deleted by hand and tombstoned its facts, which live on in m-a.
    #[test]
    fn a_merged_entry_tombstoned_as_deleted_by_hand_is_reported() {
        let mut ledger = Ledger::empty();
        ledger.facts = ["f-1", "f-2"].map(fact).to_vec();
        ledger.memory.push(entry("m-a", &["f-1", "f-2"]));
        let tombstone = |ids: &[&str]| Tombstone {
            ids: ids.iter().map(|s| s.to_string()).collect(),
            text_hash: "h".into(),
            time: chrono::Utc::now(),
            reason: Some(DELETED_BY_HAND.into()),
        };
        ledger.tombstones.push(tombstone(&["m-b", "f-2"]));
        let report = verify(&ledger, Vec::new());
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].message.contains("merged away, not deleted"));
        // A real deletion: the entry's own fact lives nowhere else.
        ledger.tombstones[0] = tombstone(&["m-c", "f-9"]);
        ledger.facts.push(fact("f-9"));
        assert!(verify(&ledger, Vec::new()).ok);
    }
}
