//! What applying a plan writes, as one [`Change`] for [`memfold_store::commit`] (pure).
//!
//! An applied plan writes the new `memory.md` (refused if it changed since it was read), its
//! old versions appended to `history.md`, one journal line per op, the run record (with the
//! text of `memory.md` before the run, for undo) and `state.json` (facts done, attempts of
//! failed facts, the last run, the watermark). A plan held for review is stored as a plan file
//! in the same change; an applied stored plan's file is removed in it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};

use super::ops::OpKind;
use super::plan::{Plan, net_changes};
use super::records::{RUNS_WITH_COPIES, RunRecord, StoredPlan, copies_to_drop, plan_removal};
use memfold_store::Root;
use memfold_store::commit::{Change, EntryDelta, HistoryWrite, MemoryWrite};
use memfold_store::entries::EntryFile;
use memfold_store::ledger::Ledger;
use memfold_store::state::{LastRun, json_lines};

/// Everything besides the plan that its change records.
#[derive(Debug, Clone, Default)]
pub struct Outcome<'a> {
    /// Facts whose cluster failed, with the error: their attempt count goes up.
    pub failures: &'a [(String, String)],
    /// A plan to store for review.
    pub store: Option<&'a StoredPlan>,
    /// `memory.md` as it is on disk when the plan was made against another text (a rebuild
    /// plans against the file with its entries set aside): the plan's text is written even
    /// without ops, and the entries it drops count as touched.
    pub rewrite_from: Option<&'a EntryFile>,
}

/// The change that applies `plan` to the root `ledger` was read from. `started` and `finished`
/// are the run's instants, `today` its day.
pub fn change(
    root: &Root,
    ledger: &Ledger,
    plan: &Plan,
    outcome: Outcome,
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
    today: NaiveDate,
) -> Change {
    let mut change = Change::new(format!("run {}", plan.run));
    let mut state = ledger.state.clone();
    let applied = !plan.journal.is_empty();
    if applied || outcome.rewrite_from.is_some() {
        let entries = match outcome.rewrite_from {
            Some(before) => deltas(before, &EntryFile::parse(&plan.memory_after, "consolidated/memory.md")),
            None => net_changes(&plan.journal)
                .iter()
                .map(|c| EntryDelta::of(&c.entry, c.before.as_deref(), c.after.as_deref()))
                .collect(),
        };
        change.memory =
            Some(MemoryWrite { before: plan.memory_hash_before.clone(), text: plan.memory_after.clone(), entries });
        change.history = Some(HistoryWrite::Append(plan.history.clone()));
        state.file_hashes.insert("consolidated/memory.md".into(), memfold_store::content_hash(&plan.memory_after));
    }
    if applied {
        change.journal = json_lines(&plan.journal);
        change.records.push(RunRecord::of(plan, started, finished).file());
        change.records.extend(copies_to_drop(root, &plan.run, RUNS_WITH_COPIES));
        if let Some(id) = &plan.from_plan {
            change.records.push(plan_removal(id));
        }
        for fact in &plan.facts_done {
            state.facts.remove(fact);
        }
        state.last_run = Some(LastRun {
            id: plan.run.clone(),
            started,
            finished,
            ops: plan.journal.len(),
            facts: plan.facts_done.len(),
        });
    }
    for (fact, error) in outcome.failures {
        let progress = state.facts.entry(fact.clone()).or_default();
        progress.attempts += 1;
        progress.last_error = Some(error.clone());
    }
    if let Some(stored) = outcome.store {
        change.records.push(stored.file());
    }
    state.watermark = if plan.journal.iter().any(|r| r.op.op.kind() == OpKind::Retire) {
        // A RETIRE leaves its entry's facts (and those of versions that led to it) in no
        // current entry: they are pending again, so the watermark is what the plan leaves.
        let mut history = ledger.history.clone();
        for version in &plan.history {
            history.push(version.clone());
        }
        let after = Ledger {
            memory: EntryFile::parse(&plan.memory_after, "consolidated/memory.md"),
            history,
            ..ledger.clone()
        };
        let pending: HashSet<&str> = after.pending().into_iter().map(|f| f.id.as_str()).collect();
        after.watermark(&pending, today)
    } else {
        let done: HashSet<&str> = plan.facts_done.iter().map(String::as_str).collect();
        let pending: HashSet<&str> =
            ledger.pending().into_iter().map(|f| f.id.as_str()).filter(|f| !done.contains(f)).collect();
        ledger.watermark(&pending, today)
    };
    if state != ledger.state {
        change.state = Some(state);
    }
    change
}

/// The entries whose rendered text differs between two versions of `memory.md`.
fn deltas(before: &EntryFile, after: &EntryFile) -> Vec<EntryDelta> {
    let render = |file: &EntryFile| -> HashMap<String, String> {
        file.entries().map(|e| (e.id().to_string(), e.render())).collect()
    };
    let (old, new) = (render(before), render(after));
    let mut ids: Vec<&String> = old.keys().chain(new.keys()).collect();
    ids.sort();
    ids.dedup();
    ids.into_iter()
        .filter(|id| old.get(*id) != new.get(*id))
        .map(|id| EntryDelta::of(id, old.get(id).map(String::as_str), new.get(id).map(String::as_str)))
        .collect()
}
