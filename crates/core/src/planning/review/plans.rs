//! Stored plans: listing them, applying them whole or by op group (exactly, or rebased onto a
//! changed `memory.md`), and rejecting them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};

use super::reports::{AppliedPlan, GroupView, OpDetail, PlanDetail, PlanView, RejectedPlan};
use super::{MEMORY, block_entry};
use crate::error::Error;
use crate::planning::consolidate::pass::OpReport;
use crate::planning::diff;
use crate::planning::run::ops::ProposedOp;
use crate::planning::run::plan::{JournalRecord, Plan, Planner};
use crate::planning::run::records::{self, PlanReason, PlanStatus, SeenEntry, SeenFact, StoredPlan};
use memfold_models::llm::Usage;
use memfold_store::Root;
use memfold_store::archive::Fact;
use memfold_store::commit::Change;
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::ledger::{FactFate, Ledger};

fn memory_hash(root: &Root) -> Result<String, Error> {
    memfold_store::atomic::current_hash(&root.memory()).map_err(|source| Error::Read { path: MEMORY.into(), source })
}

/// Stored plans waiting for a person, and rejected ones, oldest first.
pub fn plans(root: &Root) -> Result<Vec<PlanView>, Error> {
    let hash = memory_hash(root)?;
    Ok(records::plan_heads(root)
        .iter()
        .filter(|p| matches!(p.status, PlanStatus::Pending | PlanStatus::Rejected))
        .map(|p| PlanView::new(p, &hash))
        .collect())
}

/// Every plan: pending, rejected and expired ones from their files, applied ones from the
/// records of the runs that applied them (without their diff), oldest first.
pub fn all_plans(root: &Root) -> Result<Vec<PlanView>, Error> {
    let hash = memory_hash(root)?;
    let mut views: Vec<PlanView> = records::plan_heads(root).iter().map(|p| PlanView::new(p, &hash)).collect();
    let listed: HashSet<String> = views.iter().map(|v| v.id.clone()).collect();
    let mut journal: HashMap<String, Vec<JournalRecord>> = HashMap::new();
    for record in records::journal(root)? {
        journal.entry(record.run.clone()).or_default().push(record);
    }
    for run in super::runs(root)? {
        let Some(plan) = run.plan.as_ref().filter(|p| !listed.contains(*p)) else { continue };
        let record = records::load_run(root, &run.run)?;
        let head = records::PlanHead {
            id: plan.clone(),
            status: PlanStatus::Applied,
            reason: record.as_ref().and_then(|r| r.plan_reason.clone()).unwrap_or(PlanReason::Other("unknown".into())),
            created: run.started.unwrap_or(run.time),
            rejected: None,
            expired: None,
            note: record.and_then(|r| r.note),
            pass: run.run.clone(),
            memory_hash_before: String::new(),
            diff: String::new(),
            journal: journal.remove(&run.run).unwrap_or_default(),
            facts: Vec::new(),
            touched: run.entries.iter().cloned().collect(),
            llm: run.llm.unwrap_or_default(),
        };
        views.push(PlanView::new(&head, &hash));
    }
    views.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    Ok(views)
}

/// The change that marks pending plans made more than `days` days before `now` expired:
/// their facts are no longer held and the next pass decides them again (a person who wants
/// the old proposal back finds it in `plans --all`). None when no plan is that old.
pub fn plan_expire(root: &Root, days: u32, now: DateTime<Utc>) -> Result<Option<(Change, Vec<String>)>, Error> {
    if days == 0 {
        return Ok(None);
    }
    let cutoff = now - chrono::Duration::days(i64::from(days));
    let old: Vec<String> =
        records::pending_plans(root).into_iter().filter(|p| p.created < cutoff).map(|p| p.id).collect();
    if old.is_empty() {
        return Ok(None);
    }
    let mut change = Change::new(format!("expire {} plans", old.len()));
    for id in &old {
        let mut stored = records::load_plan(root, id)?;
        stored.status = PlanStatus::Expired;
        stored.expired = Some(now);
        change.records.push(stored.file());
    }
    Ok(Some((change, old)))
}

/// The plan that applying `stored` writes against the root `ledger` was read from (see the
/// module docs for when it is rebased or refused). `today` is the day the plan was made on,
/// for plans stored without one.
pub fn plan_apply(ledger: &Ledger, stored: &StoredPlan, today: NaiveDate) -> Result<(Plan, AppliedPlan), Error> {
    let id = stored.id.as_str();
    check_applicable(ledger, stored)?;
    let current = ledger.memory.render();
    let (plan, rebased) = if ledger.memory.hash == stored.memory_hash_before {
        (exact_plan(stored, &ledger.memory, current.clone(), today)?, false)
    } else if stored.reason == PlanReason::Rebuild {
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
    if stored.status != PlanStatus::Pending {
        return Err(Error::Conflict {
            message: format!("plan {id} was {}; its facts are pending again", stored.status.as_str()),
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
        crate::planning::run::ops::Op::Remove { into, .. } => Some(into.as_str()),
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
    let named: BTreeSet<&str> = stored.journal.iter().flat_map(named_entries).collect();
    let groups = op_groups(&stored.journal)
        .into_iter()
        .enumerate()
        .map(|(n, ops)| group_view(n + 1, ops.iter().map(|&i| &stored.journal[i]), &stored.seen, &named))
        .collect();
    Ok(PlanDetail { plan: PlanView::new(&stored.head(), &hash), groups, fact_texts: stored.facts.clone() })
}

/// Group `number` of a journal: its ops with what they change, its facts and entries, and the
/// entries the calls showed for its facts (`seen`) that no op names (`named`).
pub(super) fn group_view<'r>(
    number: usize,
    records: impl Iterator<Item = &'r JournalRecord>,
    seen: &[SeenFact],
    named: &BTreeSet<&str>,
) -> GroupView {
    let ops: Vec<OpDetail> = records
        .map(|record| OpDetail { seq: record.seq, op: OpReport::from(&record.op), changes: record.changes.clone() })
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
    for seen in seen.iter().filter(|s| facts.contains(&s.fact)) {
        for e in &seen.entries {
            if !named.contains(e.id.as_str()) && !left_alone.iter().any(|l| l.id == e.id) {
                left_alone.push(e.clone());
            }
        }
    }
    GroupView { group: number, ops, facts, entries, left_alone }
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
    if stored.reason == PlanReason::Rebuild {
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

/// The stored plan as written, against the `memory.md` it was made for (`current`, whose text is
/// `memory_before`). A plan stored without the text it writes (all but a rebuild's) is
/// replayed from its journal, which [`rebase`] checks change for change.
fn exact_plan(
    stored: &StoredPlan,
    current: &EntryFile,
    memory_before: String,
    today: NaiveDate,
) -> Result<Plan, Error> {
    let memory_after = match stored.memory_after.is_empty() && stored.reason != PlanReason::Rebuild {
        true => rebase(stored, current, today)?.memory_after,
        false => stored.memory_after.clone(),
    };
    let history = stored.history.iter().map(|b| block_entry(b)).collect::<Option<Vec<Entry>>>().ok_or_else(|| {
        Error::Corrupt {
            path: memfold_store::runs::plan_rel(&stored.id),
            message: "a history block does not parse".into(),
        }
    })?;
    Ok(Plan {
        run: stored.id.clone(),
        memory_hash_before: stored.memory_hash_before.clone(),
        memory_before,
        memory_after,
        history,
        journal: stored.journal.clone(),
        facts_done: stored.facts_done.clone(),
        touched: stored.touched.clone(),
        llm: stored.llm,
        from_plan: Some(stored.id.clone()),
        packing: None,
        verb: None,
        note: None,
        plan_reason: Some(stored.reason.clone()),
        decider: Some(stored.head().decider()),
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
    if stored.status != PlanStatus::Pending {
        return (change, rejected);
    }
    // A rejected proposal is not made again for the same pair (the pass leaves rejected pairs
    // out), so its facts go back to the next pass; other plans' facts would get the same
    // decision again and wait, flagged, for a forced pass.
    if stored.reason != PlanReason::Proposal {
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
