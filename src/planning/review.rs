//! Review and reversal of consolidation: stored plans, the run log, undo, and entry history chains.
//!
//! **Plans.** With `consolidation.mode = "review"` a pass stores its whole plan under
//! `.memfold/plans/<id>.json` instead of applying it; in `auto` mode only the ops the decider
//! gave a confidence below `consolidation.review_below_confidence` are stored (planned on top
//! of what the pass applied), the rest apply (see [`crate::planning::consolidate::divert`]). A plan file
//! holds what applying it writes (the new `memory.md`, history blocks, journal records, the
//! facts) plus a unified diff for people. The plan id is the id of the run that applying it
//! creates. Facts in a pending plan are left out of every pass until the plan is applied or
//! rejected.
//!
//! [`plan_apply`] takes exactly the stored `memory.md` when the file still hashes to what the
//! plan was made against. Otherwise the plan is rebased: its ops are replayed on the current
//! file, which is allowed only when every entry the plan changes is still exactly as the plan
//! saw it (the replay then changes the same entries the same way); if not, it is refused with
//! the ids in the way. A stored rebuild (reason [`records::REBUILD`]) is never rebased: it
//! replaces every entry, so it applies only to the file it was made for. [`plan_reject`] keeps the file (status `rejected`) and returns its facts
//! to pending, flagged with [`FactProgress::reverted_run`](crate::store::state::FactProgress).
//!
//! **Runs.** Every applied run has a record `.memfold/runs/<run>.json` next to its journal
//! lines: the text of `memory.md` before the run and its hash after, so that [`plan_undo`] can
//! restore it byte for byte when nothing changed it since. When something did, undo works entry
//! by entry from the journal: every entry the run touched must still be exactly as the run left
//! it, or the undo is refused with the conflicting ids and nothing is written. Only the newest
//! [`RUNS_WITH_COPIES`](crate::planning::consolidate::records::RUNS_WITH_COPIES) records keep their copy of
//! `memory.md` (byte-for-byte undo of an older run needs every later run undone first, and the
//! copies add up); older ones keep the hashes, and their undo works entry by entry. Removed
//! entries go back where they stood when the run's copy is at hand, and at the end of the file
//! when it was dropped (the order of entries carries no meaning). An undo moves the undone versions to `history.md`
//! with `status: reverted`, marks the history blocks the run wrote for the versions it puts
//! back `status: restored` (neither kind leads anywhere any more), puts the previous versions
//! back, removes what the run added, lowers the watermark below the facts that are pending
//! again, and flags them.
//!
//! **Flagged facts** (`reverted_run` set, by an undo or a rejection) stay pending but are left
//! out of automatic passes, so the same decision is not made again by itself; a forced pass
//! (`memfold consolidate --force`, `POST /consolidate {"force":true}`) includes them, which
//! is how a person asks for a new decision. The flag clears once the fact is consolidated.
//!
//! The `plan_*` functions are pure: they read what they are given and return the
//! [`Change`] to commit; [`crate::memory::Memory`] takes the lock, reads, commits, and
//! brings the index and `MEMORY.md` up to date.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};

use crate::store::commit::{Change, EntryDelta, HistoryWrite, MemoryWrite};
use crate::planning::consolidate::ops::ProposedOp;
use crate::planning::consolidate::pass::OpReport;
use crate::planning::consolidate::plan::{JournalRecord, Plan, Planner, net_changes};
use crate::planning::consolidate::records::{self, PlanHead, PlanStatus, RunRecord, SeenEntry, StoredPlan, UndoRecord};
use crate::planning::diff;
use crate::error::Error;
use crate::store::archive::Fact;
use crate::store::entries::{Entry, EntryFile, EntryMeta, HistoryStatus, Item};
use crate::store::{Root, content_hash};
use crate::store::ledger::{FactFate, Ledger};
use crate::models::llm::Usage;
use crate::memory::views::{
    AppliedPlan, Chain, FactView, GroupView, OpDetail, PlanDetail, PlanView, RejectedPlan, RunView, Undone, Version,
};

const MEMORY: &str = "consolidated/memory.md";

/// A rendered block back as an entry (rendered anew when written).
fn block_entry(block: &str) -> Option<Entry> {
    let file = EntryFile::parse(block, "block");
    file.entries().next().map(|e| Entry::new(e.meta.clone(), &e.content))
}

// ---------------------------------------------------------------------------------------------
// Plans: list, apply, reject

impl PlanView {
    fn new(plan: &PlanHead, memory_hash: &str) -> PlanView {
        PlanView {
            id: plan.id.clone(),
            status: plan.status,
            reason: plan.reason.clone(),
            created: plan.created,
            rejected: plan.rejected,
            pass: plan.pass.clone(),
            // Only a plan that can still be applied can be stale.
            stale: plan.status == PlanStatus::Pending && plan.memory_hash_before != memory_hash,
            ops: plan.journal.iter().map(|r| OpReport::from(&r.op)).collect(),
            facts: plan.facts.iter().map(|f| f.id.clone()).collect(),
            entries: plan.touched.iter().cloned().collect(),
            diff: plan.diff.clone(),
            stat: diff::stat(&plan.diff),
            llm: plan.llm,
        }
    }
}

fn memory_hash(root: &Root) -> Result<String, Error> {
    crate::store::atomic::current_hash(&root.memory()).map_err(|source| Error::Read { path: MEMORY.into(), source })
}

/// Stored plans, pending and rejected, oldest first.
pub fn plans(root: &Root) -> Result<Vec<PlanView>, Error> {
    let hash = memory_hash(root)?;
    Ok(records::plan_heads(root).iter().map(|p| PlanView::new(p, &hash)).collect())
}


/// The plan that applying `stored` writes against the root `ledger` was read from (see the
/// module docs for when it is rebased or refused). `today` is the day the plan was made on,
/// for plans stored without one.
pub fn plan_apply(ledger: &Ledger, stored: &StoredPlan, today: NaiveDate) -> Result<(Plan, AppliedPlan), Error> {
    let id = stored.id.as_str();
    check_applicable(ledger, stored)?;
    let current = ledger.memory.render();
    let (plan, rebased) = if ledger.memory.hash == stored.memory_hash_before {
        (exact_plan(stored, current.clone())?, false)
    } else if stored.reason == records::REBUILD {
        return Err(Error::Stale {
            message: format!(
                "consolidated/memory.md changed since rebuild {id} was planned, and a rebuild replaces every \
                 entry; reject the plan and rebuild again"
            ),
            ids: Vec::new(),
        });
    } else {
        (rebase(stored, &ledger.memory, today)?, true)
    };
    let applied = applied_view(stored, &plan, &current, rebased);
    Ok((plan, applied))
}

fn applied_view(stored: &StoredPlan, plan: &Plan, current: &str, rebased: bool) -> AppliedPlan {
    AppliedPlan {
        plan: stored.id.clone(),
        run: plan.run.clone(),
        rebased,
        ops: plan.journal.len(),
        facts: plan.facts_done.iter().cloned().collect(),
        entries: plan.touched.iter().cloned().collect(),
        diff: diff::unified(current, &plan.memory_after, MEMORY, crate::planning::consolidate::divert::DIFF_CONTEXT),
        llm: Usage::default(),
        groups: Vec::new(),
        rejected: Vec::new(),
    }
}

/// A plan can be applied unless it was rejected or uses facts forgotten since.
fn check_applicable(ledger: &Ledger, stored: &StoredPlan) -> Result<(), Error> {
    let id = stored.id.as_str();
    if stored.status == PlanStatus::Rejected {
        return Err(Error::Conflict {
            message: format!("plan {id} was rejected; its facts are pending again"),
            ids: vec![id.to_string()],
        });
    }
    let fates = ledger.fates();
    let forgotten: Vec<String> = stored
        .facts
        .iter()
        .filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Tombstoned))
        .map(|f| f.id.clone())
        .collect();
    if !forgotten.is_empty() {
        return Err(Error::Conflict {
            message: format!("plan {id} uses facts forgotten since it was made ({}); reject it", forgotten.join(", ")),
            ids: forgotten,
        });
    }
    Ok(())
}

/// The entries a journal record names: its op's target, the entry a REMOVE folds `into`, and
/// every entry its changes touch.
fn named_entries(record: &JournalRecord) -> impl Iterator<Item = &str> {
    let into = match &record.op.op {
        crate::planning::consolidate::ops::Op::Remove { into, .. } => Some(into.as_str()),
        _ => None,
    };
    record.op.op.target().into_iter().chain(into).chain(record.changes.iter().map(|c| c.entry.as_str()))
}

/// The op groups of a plan's journal: ops connected by a shared fact or entry (the target, the
/// entry a REMOVE folds `into`, or any entry their changes touch), each a list of journal
/// indices in order, groups ordered by their first op. A group is what a person decides: its
/// ops depend on each other (a REPLACE of an entry an ADD of the same plan made; a REMOVE that
/// folds into an entry another op rewrites), while ops of different groups touch nothing in
/// common, so any subset of groups replays to exactly the changes the plan stored for them.
pub fn op_groups(journal: &[JournalRecord]) -> Vec<Vec<usize>> {
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut parent: Vec<usize> = (0..journal.len()).collect();
    let mut owner: HashMap<(bool, &str), usize> = HashMap::new();
    for (i, record) in journal.iter().enumerate() {
        let facts = record.op.op.facts().iter().map(|f| (true, f.as_str()));
        for key in facts.chain(named_entries(record).map(|e| (false, e))) {
            match owner.get(&key) {
                Some(&other) => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, other));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    owner.insert(key, i);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..journal.len() {
        let root = find(&mut parent, i);
        groups.entry(root).or_default().push(i);
    }
    groups.into_values().collect()
}

/// A stored plan with its ops in groups and its facts as archived.
pub fn plan_detail(root: &Root, id: &str) -> Result<PlanDetail, Error> {
    let stored = records::load_plan(root, id)?;
    let hash = memory_hash(root)?;
    // Entries some op of the plan names or changes; the rest of what the calls saw was left alone.
    let named: BTreeSet<&str> = stored
        .journal
        .iter()
        .flat_map(named_entries)
        .collect();
    let groups = op_groups(&stored.journal)
        .into_iter()
        .enumerate()
        .map(|(n, ops)| {
            let ops: Vec<OpDetail> = ops
                .iter()
                .map(|&i| {
                    let record = &stored.journal[i];
                    OpDetail { seq: record.seq, op: OpReport::from(&record.op), changes: record.changes.clone() }
                })
                .collect();
            let mut facts: Vec<String> = Vec::new();
            let mut entries: Vec<String> = Vec::new();
            for op in &ops {
                for f in &op.op.facts {
                    if !facts.contains(f) {
                        facts.push(f.clone());
                    }
                }
                for c in &op.changes {
                    if !entries.contains(&c.entry) {
                        entries.push(c.entry.clone());
                    }
                }
            }
            let mut left_alone: Vec<SeenEntry> = Vec::new();
            for seen in stored.seen.iter().filter(|s| facts.contains(&s.fact)) {
                for e in &seen.entries {
                    if !named.contains(e.id.as_str()) && !left_alone.iter().any(|l| l.id == e.id) {
                        left_alone.push(e.clone());
                    }
                }
            }
            GroupView { group: n + 1, ops, facts, entries, left_alone }
        })
        .collect();
    Ok(PlanDetail { plan: PlanView::new(&stored.head(), &hash), groups, fact_texts: stored.facts.clone() })
}

/// Apply only the op groups numbered `chosen` (1-based, as [`plan_detail`] numbers them) of a
/// stored plan. The chosen ops are replayed on the current `memory.md`; every entry they
/// change must be as the plan saw it and the replay must make exactly the stored changes, or
/// nothing is applied and the entries in the way are named. Returns the plan to commit, its
/// view, and the ops left out as a plan of their own, for [`reject_rest`] to reject in the same
/// change. Choosing every group is [`plan_apply`].
pub fn plan_apply_groups(
    ledger: &Ledger,
    stored: &StoredPlan,
    chosen: &[usize],
    today: NaiveDate,
) -> Result<(Plan, AppliedPlan, Option<StoredPlan>), Error> {
    let id = stored.id.as_str();
    let groups = op_groups(&stored.journal);
    let mut chosen: Vec<usize> = chosen.to_vec();
    chosen.sort_unstable();
    chosen.dedup();
    if chosen.is_empty() {
        return Err(Error::BadInput(format!("choose at least one group of plan {id}, or reject it")));
    }
    if let Some(bad) = chosen.iter().find(|&&g| g == 0 || g > groups.len()) {
        return Err(Error::BadInput(format!("plan {id} has groups 1 to {}; there is no group {bad}", groups.len())));
    }
    if chosen.len() == groups.len() {
        let (plan, mut applied) = plan_apply(ledger, stored, today)?;
        applied.groups = chosen;
        return Ok((plan, applied, None));
    }
    check_applicable(ledger, stored)?;
    if stored.reason == records::REBUILD {
        return Err(Error::BadInput(format!("rebuild {id} replaces every entry; apply it whole or reject it")));
    }
    let keep: BTreeSet<usize> = chosen.iter().flat_map(|g| groups[g - 1].iter().copied()).collect();
    let (mut kept, mut left) = (Vec::new(), Vec::new());
    for (i, record) in stored.journal.iter().enumerate() {
        if keep.contains(&i) { kept.push(record.clone()) } else { left.push(record.clone()) }
    }
    let mut part = stored.clone();
    part.journal = kept;
    part.touched = part.journal.iter().flat_map(|r| r.changes.iter().map(|c| c.entry.clone())).collect();
    let current = ledger.memory.render();
    let mut plan = rebase(&part, &ledger.memory, stored.day.unwrap_or(today))?;
    plan.run = stored.id.clone();
    let mut applied = applied_view(stored, &plan, &current, ledger.memory.hash != stored.memory_hash_before);
    applied.groups = chosen;

    let mut rest = stored.clone();
    rest.journal = left;
    let named: BTreeSet<&str> = rest.journal.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
    rest.facts.retain(|f| named.contains(f.id.as_str()) && !plan.facts_done.contains(&f.id));
    rest.facts_done = rest.facts.iter().map(|f| f.id.clone()).collect();
    rest.touched = rest.journal.iter().flat_map(|r| r.changes.iter().map(|c| c.entry.clone())).collect();
    // What applying the rest would write is no longer known: the rest is to be rejected.
    rest.memory_after = String::new();
    rest.history = Vec::new();
    rest.diff = String::new();
    Ok((plan, applied, Some(rest)))
}

/// Make the change that applies part of a plan ([`plan_apply_groups`]) reject the rest too:
/// the stored plan is replaced by `rest`, rejected (instead of removed), and the facts of `rest`
/// that are pending are flagged as a rejection flags them. Returns those facts.
pub fn reject_rest(change: &mut Change, ledger: &Ledger, rest: &StoredPlan, now: DateTime<Utc>) -> Vec<String> {
    let (rejection, rejected) = plan_reject(ledger, rest, now);
    let path = rest.file().0;
    change.records.retain(|(p, _)| *p != path);
    change.records.extend(rejection.records);
    if let Some(flagged) = rejection.state {
        let state = change.state.get_or_insert_with(|| ledger.state.clone());
        for fact in &rest.facts {
            if let Some(run) = flagged.facts.get(&fact.id).and_then(|p| p.reverted_run.clone()) {
                state.facts.entry(fact.id.clone()).or_default().reverted_run = Some(run);
            }
        }
    }
    rejected.facts
}

/// The stored plan as written, against the `memory.md` it was made for.
fn exact_plan(stored: &StoredPlan, memory_before: String) -> Result<Plan, Error> {
    let history = stored.history.iter().map(|b| block_entry(b)).collect::<Option<Vec<Entry>>>().ok_or_else(|| {
        Error::Corrupt {
            path: format!(".memfold/plans/{}.json", stored.id),
            message: "a history block does not parse".into(),
        }
    })?;
    Ok(Plan {
        run: stored.id.clone(),
        memory_hash_before: stored.memory_hash_before.clone(),
        memory_before,
        memory_after: stored.memory_after.clone(),
        history,
        journal: stored.journal.clone(),
        facts_done: stored.facts_done.clone(),
        touched: stored.touched.clone(),
        llm: stored.llm,
        from_plan: Some(stored.id.clone()),
        packing: None,
    })
}

/// Replay a plan's ops on the current `memory.md`, if every entry it changes is as it saw it.
fn rebase(stored: &StoredPlan, current: &EntryFile, today: NaiveDate) -> Result<Plan, Error> {
    let mut seen = HashSet::new();
    let mut conflicts = Vec::new();
    for change in stored.journal.iter().flat_map(|r| &r.changes) {
        if seen.insert(change.entry.as_str())
            && current.get(&change.entry).map(Entry::render).as_deref() != change.before.as_deref()
        {
            conflicts.push(change.entry.clone());
        }
    }
    let stale = |ids: Vec<String>| Error::Stale {
        message: format!(
            "consolidated/memory.md changed since plan {} was made, and so did entries it changes ({}); \
             reject the plan (its facts return to pending) and consolidate again",
            stored.id,
            ids.join(", ")
        ),
        ids,
    };
    if !conflicts.is_empty() {
        return Err(stale(conflicts));
    }
    let facts: HashMap<String, Fact> = stored.facts.iter().map(|f| (f.id.clone(), f.clone())).collect();
    let ops: Vec<ProposedOp> = stored.journal.iter().map(|r| r.op.clone()).collect();
    // The blocks render as when the plan was made: same clock, same day.
    let day = stored.day.unwrap_or(today);
    let mut planner = Planner::new(current.clone(), &facts, stored.id.clone(), stored.created, day);
    planner.apply(&ops);
    let mut plan = planner.finish(current.hash.clone());
    let same = plan.journal.len() == stored.journal.len()
        && plan.journal.iter().zip(&stored.journal).all(|(a, b)| a.changes == b.changes);
    if !same {
        return Err(stale(stored.touched.iter().cloned().collect()));
    }
    plan.llm = stored.llm;
    plan.from_plan = Some(stored.id.clone());
    Ok(plan)
}

/// Reject a stored plan: nothing is written to markdown, its facts stay pending (flagged, but
/// for an offline proposal: those go back to the next pass, which leaves the rejected pairs out).
/// Rejecting a rejected plan again changes nothing (the change is empty).
pub fn plan_reject(ledger: &Ledger, stored: &StoredPlan, now: DateTime<Utc>) -> (Change, RejectedPlan) {
    let fates = ledger.fates();
    let facts: Vec<String> = stored
        .facts
        .iter()
        .filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending))
        .map(|f| f.id.clone())
        .collect();
    let rejected = RejectedPlan { plan: stored.id.clone(), facts: facts.clone() };
    let mut change = Change::new(format!("reject {}", stored.id));
    if stored.status == PlanStatus::Rejected {
        return (change, rejected);
    }
    // A rejected proposal is not made again for the same pair (the pass leaves rejected pairs
    // out), so its facts go back to the next pass; other plans' facts would get the same
    // decision again and wait, flagged, for a forced pass.
    if stored.reason != records::PROPOSAL {
        let mut state = ledger.state.clone();
        for fact in &facts {
            state.facts.entry(fact.clone()).or_default().reverted_run = Some(stored.id.clone());
        }
        change.state = Some(state);
    }
    let mut stored = stored.clone();
    stored.status = PlanStatus::Rejected;
    stored.rejected = Some(now);
    change.records.push(stored.file());
    (change, rejected)
}

/// One archived fact by id: its text, place, fate and the current entries that name it.
pub fn fact_view(ledger: &Ledger, id: &str) -> Result<FactView, Error> {
    let fact = ledger
        .facts
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(|| Error::NotFound { message: format!("no archived fact has id {id}") })?;
    Ok(FactView {
        fact: fact.clone(),
        file: format!("archive/{}.md", fact.date),
        line: fact.line,
        fate: ledger.settled().fate(fact),
        entries: ledger
            .memory
            .entries()
            .filter(|e| e.meta.sources.iter().any(|s| s == id))
            .map(|e| e.id().to_string())
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Runs

/// Applied runs, oldest first: every run in the journal, with its run record where there is one.
pub fn runs(root: &Root) -> Result<Vec<RunView>, Error> {
    let mut by_run: BTreeMap<String, RunView> = BTreeMap::new();
    let mut facts: HashMap<String, BTreeSet<String>> = HashMap::new();
    // The entries each run lists, to keep its list free of repeats in linear time.
    let mut listed: HashSet<(String, String)> = HashSet::new();
    for r in records::journal_lines(root)? {
        let view = by_run.entry(r.run.clone()).or_insert_with(|| RunView {
            run: r.run.clone(),
            time: r.time,
            started: None,
            plan: None,
            ops: BTreeMap::new(),
            facts: 0,
            entries: Vec::new(),
            llm: None,
            undone: None,
        });
        *view.ops.entry(r.op).or_default() += 1;
        for c in r.changes {
            if listed.insert((r.run.clone(), c.entry.clone())) {
                view.entries.push(c.entry);
            }
        }
        facts.entry(r.run).or_default().extend(r.facts);
    }
    for (run, view) in by_run.iter_mut() {
        view.facts = facts.get(run).map_or(0, BTreeSet::len);
        if let Some(record) = records::read_json::<records::RunHead>(root, &records::run_path(root, run))? {
            view.time = record.finished;
            view.started = Some(record.started);
            view.plan = record.plan;
            view.facts = record.facts.len();
            view.llm = Some(record.llm);
            view.undone = record.undone.map(|u| u.time);
        }
    }
    let mut runs: Vec<RunView> = by_run.into_values().collect();
    runs.sort_by(|a, b| (a.time, &a.run).cmp(&(b.time, &b.run)));
    Ok(runs)
}

/// The change that undoes `run` (see the module docs), given the root's ledger, its journal
/// and the run's record. Refused, with the ids in the way, when an entry the run touched has
/// changed since.
pub fn plan_undo(
    ledger: &Ledger,
    journal: &[JournalRecord],
    record: Option<RunRecord>,
    run: &str,
    now: DateTime<Utc>,
    today: NaiveDate,
) -> Result<(Change, Undone), Error> {
    let mut records: Vec<&JournalRecord> = journal.iter().filter(|r| r.run == run).collect();
    records.sort_by_key(|r| r.seq);
    if records.is_empty() && record.is_none() {
        return Err(Error::not_found("run", run));
    }
    if let Some(done) = record.as_ref().and_then(|r| r.undone.as_ref()) {
        return Err(Error::Conflict {
            message: format!("run {run} was undone already, at {}", done.time.to_rfc3339()),
            ids: vec![run.to_string()],
        });
    }
    let changes = net_changes(records.iter().copied());
    let conflicts: Vec<String> = changes
        .iter()
        .filter(|c| ledger.memory.get(&c.entry).map(Entry::render) != c.after)
        .map(|c| c.entry.clone())
        .collect();
    if !conflicts.is_empty() {
        return Err(Error::Conflict {
            message: format!(
                "entries run {run} touched have changed since ({}); undo refused and nothing was changed. \
                 Undo the later runs first, or edit these entries by hand",
                conflicts.join(", ")
            ),
            ids: conflicts,
        });
    }
    // Byte for byte only with the copy at hand: old records have had theirs dropped.
    let exact = record
        .as_ref()
        .is_some_and(|r| !r.memory_hash_after.is_empty() && r.memory_hash_after == ledger.memory.hash && r.has_copy());
    let before_file = record.as_ref().map(|r| EntryFile::parse(&r.memory_before, MEMORY));
    let mut memory = ledger.memory.clone();
    let (mut restored, mut removed) = (Vec::new(), Vec::new());
    for c in &changes {
        let before = c.before.as_deref().and_then(block_entry);
        match (before, c.after.is_some()) {
            (None, true) => {
                memory.remove(&c.entry);
                removed.push(c.entry.clone());
            }
            (Some(old), true) => {
                if let Some(slot) = memory.get_mut(&c.entry) {
                    *slot = old;
                }
                restored.push(c.entry.clone());
            }
            (Some(old), false) => {
                reinsert(&mut memory, old, before_file.as_ref());
                restored.push(c.entry.clone());
            }
            (None, false) => {}
        }
    }
    let new_text = match (&record, exact) {
        (Some(r), true) => r.memory_before.clone(),
        _ => memory.render(),
    };
    // The undone versions go to history as reverted.
    let reverted: Vec<Entry> = changes
        .iter()
        .filter_map(|c| {
            let after = block_entry(c.after.as_deref()?)?;
            let mut meta: EntryMeta = after.meta.clone();
            meta.status = Some(HistoryStatus::Reverted);
            meta.valid_until = Some(today);
            meta.run = Some(run.to_string());
            meta.superseded_by = c.before.is_some().then(|| c.entry.clone());
            meta.first_seen = meta.first_seen.or(meta.updated);
            Some(Entry::new(meta, &after.content))
        })
        .collect();
    // The run's copies of the versions now current again lead nowhere any more either.
    let mut history = ledger.history.clone();
    for block in history
        .entries_mut()
        .filter(|e| e.meta.run.as_deref() == Some(run) && e.meta.status.as_ref().is_some_and(HistoryStatus::leads_on))
    {
        block.meta.status = Some(HistoryStatus::Restored);
        block.touch();
    }
    for block in &reverted {
        history.push(block.clone());
    }
    // Facts the run consumed that no longer live on in current memory.
    let after = Ledger { memory: EntryFile::parse(&new_text, MEMORY), history: history.clone(), ..ledger.clone() };
    let fates = after.fates();
    let run_facts: BTreeSet<&str> = records.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
    let facts: Vec<String> =
        run_facts.into_iter().filter(|f| fates.get(f) == Some(&FactFate::Pending)).map(str::to_string).collect();
    let mut state = ledger.state.clone();
    for fact in &facts {
        state.facts.entry(fact.clone()).or_default().reverted_run = Some(run.to_string());
    }
    let pending: HashSet<&str> = after.pending().into_iter().map(|f| f.id.as_str()).collect();
    state.watermark = ledger.watermark(&pending, today);
    state.file_hashes.insert(MEMORY.into(), content_hash(&new_text));

    let mut change = Change::new(format!("undo {run}"));
    let entries = changes
        .iter()
        .map(|c| {
            let now_there = after.memory.get(&c.entry).map(Entry::render);
            EntryDelta::of(&c.entry, c.after.as_deref(), now_there.as_deref())
        })
        .collect();
    change.memory = Some(MemoryWrite { before: ledger.memory.hash.clone(), text: new_text, entries });
    change.history = Some(HistoryWrite::Rewrite { before: ledger.history.hash.clone(), text: history.render() });
    change.state = Some(state);
    let mut record = record.unwrap_or_else(|| RunRecord::legacy(run, &records));
    record.undone = Some(UndoRecord {
        time: now,
        exact,
        restored: restored.clone(),
        removed: removed.clone(),
        facts: facts.clone(),
    });
    change.records.push(record.file());
    Ok((change, Undone { run: run.to_string(), exact, restored, removed, facts, llm: Usage::default() }))
}

/// Put an entry the run removed back where it stood before the run (after the nearest earlier
/// entry that is still there), or at the end.
fn reinsert(memory: &mut EntryFile, entry: Entry, before: Option<&EntryFile>) {
    let index =
        |memory: &EntryFile, id: &str| memory.items.iter().position(|i| matches!(i, Item::Entry(e) if e.id() == id));
    if let Some(before) = before {
        let order: Vec<&str> = before.entries().map(Entry::id).collect();
        if let Some(pos) = order.iter().position(|id| *id == entry.id()) {
            if let Some(at) = order[..pos].iter().rev().find_map(|id| index(memory, id)) {
                memory.items.insert(at + 1, Item::Entry(entry));
                return;
            }
            if let Some(at) = order[pos + 1..].iter().find_map(|id| index(memory, id)) {
                memory.items.insert(at, Item::Entry(entry));
                return;
            }
        }
    }
    memory.push(entry);
}

// ---------------------------------------------------------------------------------------------
// History chains

/// The chain of versions around entry `id`.
pub fn history_chain(memory: &EntryFile, history: &EntryFile, id: &str) -> Result<Chain, Error> {
    if id.trim().is_empty() || id.chars().any(char::is_whitespace) {
        return Err(Error::BadInput(format!("{id:?} is not an entry id")));
    }
    let history: Vec<&Entry> = history.entries().collect();
    let current: Vec<&Entry> = memory.entries().collect();
    // Grow the set of linked ids until nothing new joins.
    let mut ids: BTreeSet<String> = BTreeSet::from([id.to_string()]);
    loop {
        let mut grown = ids.clone();
        for e in &history {
            if let Some(next) = &e.meta.superseded_by {
                if ids.contains(e.id()) {
                    grown.insert(next.clone());
                }
                if ids.contains(next) {
                    grown.insert(e.id().to_string());
                }
            }
        }
        if grown.len() == ids.len() {
            break;
        }
        ids = grown;
    }
    let merged_into = |target: &str| -> Vec<String> {
        let set: BTreeSet<String> = history
            .iter()
            .filter(|e| e.id() != target && e.meta.superseded_by.as_deref() == Some(target))
            .map(|e| e.id().to_string())
            .collect();
        set.into_iter().collect()
    };
    let version = |e: &Entry, status: String| Version {
        id: e.id().to_string(),
        status,
        content: e.content.clone(),
        first_seen: e.meta.first_seen,
        updated: e.meta.updated,
        valid_until: e.meta.valid_until,
        superseded_by: e.meta.superseded_by.clone(),
        supersedes: merged_into(e.id()),
        run: e.meta.run.clone(),
        sources: e.meta.sources.clone(),
        pinned: e.meta.pinned,
    };
    let mut versions: Vec<Version> = history
        .iter()
        .filter(|e| ids.contains(e.id()))
        .map(|e| version(e, e.meta.status.as_ref().map_or_else(|| "history".into(), |s| s.to_string())))
        .collect();
    versions.extend(current.iter().filter(|e| ids.contains(e.id())).map(|e| version(e, "current".into())));
    if versions.is_empty() {
        return Err(Error::not_found("entry", id));
    }
    Ok(Chain { id: id.to_string(), versions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_entry_goes_back_after_its_old_predecessor() {
        let block = |id: &str, text: &str| Entry::new(EntryMeta::new(id), text);
        let mut before = EntryFile::parse("# Memory\n\n", MEMORY);
        for (id, text) in [("m-a", "A."), ("m-b", "B."), ("m-c", "C.")] {
            before.push(block(id, text));
        }
        let before = EntryFile::parse(&before.render(), MEMORY);
        let mut now = before.clone();
        now.remove("m-b");
        reinsert(&mut now, block("m-b", "B."), Some(&before));
        assert_eq!(now.render(), before.render());
        now.remove("m-a");
        now.remove("m-b");
        reinsert(&mut now, block("m-b", "B."), Some(&before));
        let ids: Vec<&str> = now.entries().map(Entry::id).collect();
        assert_eq!(ids, ["m-b", "m-c"], "before its old successor when no predecessor is left");
    }

    /// Ops are grouped by a shared fact, target, `into` or changed entry, transitively, and
    /// only by those.
    #[test]
    fn op_groups_join_ops_that_share_a_fact_or_an_entry() {
        use crate::planning::consolidate::ops::Op;
        use crate::planning::consolidate::plan::Change as EntryChange;
        let facts = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let record = |seq: usize, op: Op, changed: &[&str]| JournalRecord {
            run: "r-1".into(),
            seq,
            time: DateTime::<Utc>::UNIX_EPOCH,
            op: ProposedOp::new(op),
            changes: changed
                .iter()
                .map(|e| EntryChange { entry: e.to_string(), before: None, after: Some("x".into()) })
                .collect(),
        };
        let journal = vec![
            record(0, Op::Add { facts: facts(&["f-1"]), content: "A".into() }, &["m-a"]),
            record(1, Op::Add { facts: facts(&["f-2"]), content: "B".into() }, &["m-b"]),
            // Replaces the entry op 0 added: same group as op 0.
            record(
                2,
                Op::Replace { target: "m-a".into(), facts: facts(&["f-3"]), content: "A2".into(), why: None },
                &["m-a"],
            ),
            // Folds m-c into m-d, which op 4 rewrites with a fact op 1 used: ops 1, 3, 4 join.
            record(3, Op::Remove { target: "m-c".into(), into: "m-d".into(), why: None }, &["m-c"]),
            record(4, Op::Duplicate { target: "m-d".into(), facts: facts(&["f-2"]) }, &["m-d"]),
            // Shares nothing.
            record(5, Op::Add { facts: facts(&["f-9"]), content: "Z".into() }, &["m-z"]),
            // A fact id equal to an entry id is not a shared entry.
            record(6, Op::Add { facts: facts(&["m-z"]), content: "Q".into() }, &["m-q"]),
        ];
        assert_eq!(op_groups(&journal), vec![vec![0, 2], vec![1, 3, 4], vec![5], vec![6]]);
        assert!(op_groups(&[]).is_empty());
    }
}
