//! What a pass applies now and what it holds back for a person: review mode and low-confidence ops.
//!
//! With `consolidation.mode = "review"` the whole plan becomes a stored plan and nothing
//! applies; in `auto` mode the ops the decider gave a confidence below
//! `consolidation.review_below_confidence` are planned on top of what the pass applies and
//! stored, and the rest apply. Pure: the stored plan is written by the pass's commit.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, NaiveDate, Utc};

use super::pass::ClusterReport;
use crate::planning::run::ops::ProposedOp;
use crate::planning::run::plan::{Plan, Planner};
use crate::planning::run::records::{FORMAT_VERSION, PlanReason, PlanStatus, SeenEntry, SeenFact, StoredPlan};
use memfold_store::archive::Fact;
use memfold_store::config::Mode;
use memfold_store::content_hash;
use memfold_store::entries::{Entry, EntryFile};

const MEMORY: &str = "consolidated/memory.md";
/// Lines of context in plan diffs.
pub const DIFF_CONTEXT: usize = 3;

/// Split validated ops into those to apply now and those held for review: ops whose
/// confidence is below `below`. Ops without a confidence apply.
pub fn split_low_confidence(ops: Vec<ProposedOp>, below: f64) -> (Vec<ProposedOp>, Vec<ProposedOp>) {
    ops.into_iter().partition(|op| op.confidence.is_none_or(|c| c >= below))
}

/// Decide what a pass applies now and what it stores for review. In review mode the whole plan
/// is stored and nothing applies; in auto mode the `held` ops are planned on top of the applied
/// plan, stored with `held_reason` (low confidence, or an offline [`PlanReason::Proposal`]
/// for the offline decider's). `now` and `today` must be the planner's.
pub fn divert(
    plan: Plan,
    held: &[ProposedOp],
    held_reason: PlanReason,
    facts: &HashMap<String, Fact>,
    mode: Mode,
    now: DateTime<Utc>,
    today: NaiveDate,
) -> (Plan, Option<StoredPlan>) {
    let pick = |plan: &Plan| -> Vec<Fact> {
        let named: BTreeSet<&str> =
            plan.journal.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
        named.into_iter().filter_map(|id| facts.get(id)).cloned().collect()
    };
    match mode {
        Mode::Review if !plan.journal.is_empty() => {
            let nothing = Plan {
                memory_after: plan.memory_before.clone(),
                history: Vec::new(),
                journal: Vec::new(),
                facts_done: BTreeSet::new(),
                touched: BTreeSet::new(),
                ..plan.clone()
            };
            let review = stored(&plan, pick(&plan), PlanReason::Review, &plan.run, now, today);
            (nothing, Some(review))
        }
        Mode::Auto if !held.is_empty() => {
            // The held ops apply to memory.md as this pass leaves it.
            let (base, hash) = if plan.journal.is_empty() {
                (plan.memory_before.clone(), plan.memory_hash_before.clone())
            } else {
                (plan.memory_after.clone(), content_hash(&plan.memory_after))
            };
            let mut planner =
                Planner::new(EntryFile::parse(&base, MEMORY), facts, format!("{}-review", plan.run), now, today);
            planner.apply(held);
            let mut held_plan = planner.finish(hash);
            held_plan.memory_before = base;
            let review = (!held_plan.journal.is_empty())
                .then(|| stored(&held_plan, pick(&held_plan), held_reason, &plan.run, now, today));
            (plan, review)
        }
        _ => (plan, None),
    }
}

/// A plan as stored under `.memfold/plans/`.
pub(crate) fn stored(
    plan: &Plan,
    facts: Vec<Fact>,
    reason: PlanReason,
    pass: &str,
    created: DateTime<Utc>,
    day: NaiveDate,
) -> StoredPlan {
    StoredPlan {
        version: FORMAT_VERSION,
        id: plan.run.clone(),
        status: PlanStatus::Pending,
        reason,
        created,
        day: Some(day),
        rejected: None,
        pass: pass.to_string(),
        memory_hash_before: plan.memory_hash_before.clone(),
        memory_after: plan.memory_after.clone(),
        diff: crate::planning::diff::unified(&plan.memory_before, &plan.memory_after, MEMORY, DIFF_CONTEXT),
        history: plan.history.iter().map(Entry::render).collect(),
        journal: plan.journal.clone(),
        facts,
        facts_done: plan.facts_done.clone(),
        touched: plan.touched.clone(),
        llm: plan.llm,
        seen: Vec::new(),
        note: None,
        expired: None,
    }
}

/// For each fact of `stored`, the entries ranked for it that its decision call showed, with
/// their text as `memory` (the file the pass planned against) holds it; an entry the pass
/// itself made is looked up in the plan's `memory.md` after it, parsed only then.
pub fn seen_facts(clusters: &[ClusterReport], stored: &StoredPlan, memory: &EntryFile) -> Vec<SeenFact> {
    let facts: BTreeSet<&str> = stored.facts.iter().map(|f| f.id.as_str()).collect();
    let mut after: Option<EntryFile> = None;
    let by_id: std::collections::HashMap<&str, &memfold_store::entries::Entry> =
        memory.entries().map(|e| (e.id(), e)).collect();
    clusters
        .iter()
        .flat_map(|c| &c.ranked)
        .filter(|(fact, _)| facts.contains(fact.as_str()))
        .map(|(fact, ids)| SeenFact {
            fact: fact.clone(),
            entries: ids
                .iter()
                .filter_map(|id| {
                    let entry = match by_id.get(id.as_str()) {
                        Some(e) => *e,
                        None => after.get_or_insert_with(|| EntryFile::parse(&stored.memory_after, MEMORY)).get(id)?,
                    };
                    Some(SeenEntry { id: entry.meta.id.clone(), content: entry.content.clone() })
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::run::ops::Op;

    fn op(confidence: Option<f64>) -> ProposedOp {
        ProposedOp { confidence, ..ProposedOp::new(Op::Add { facts: vec!["f-1".into()], content: "x".into() }) }
    }

    #[test]
    fn only_ops_below_the_threshold_are_held() {
        let (now, held) = split_low_confidence(vec![op(None), op(Some(0.49)), op(Some(0.5)), op(Some(0.9))], 0.5);
        assert_eq!(now.iter().map(|o| o.confidence).collect::<Vec<_>>(), [None, Some(0.5), Some(0.9)]);
        assert_eq!(held.iter().map(|o| o.confidence).collect::<Vec<_>>(), [Some(0.49)]);
    }
}
