//! The second half of a pass: each packed call decided in turn against the planner's current
//! state, its ops validated and applied to the in-memory copy of `memory.md` (or held for a
//! person), until the calls are done or the decider is out of reach.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use super::prepare::Prepared;
use super::{ClusterReport, DroppedReport, OpReport, Pass, PassInput, PassReport, Planned};
use crate::planning::consolidate::decide::{DecideError, Decider, user_message};
use crate::planning::consolidate::divert::split_low_confidence;
use crate::planning::consolidate::pack::Packing;
use crate::planning::consolidate::validate::validate;
use crate::planning::run::ops::{ClusterDoc, ProposedOp};
use crate::planning::run::plan::Planner;
use memfold_models::llm::estimate_tokens;
use memfold_store::archive::Fact;
use memfold_store::config::Mode;

/// What deciding the calls has gathered so far.
struct Decided {
    /// Low-confidence ops (auto mode), held back for review.
    held: Vec<ProposedOp>,
    /// Facts of calls whose reply could not be used, with why.
    failures: Vec<(String, String)>,
    /// Why the pass stopped asking, and the facts it did not get to.
    stopped: Option<(DecideError, Vec<String>)>,
    /// Time spent waiting for decisions.
    waited: Duration,
}

impl Pass<'_> {
    /// Decide every call of `prepared` in order, recording in `report` what each showed and
    /// what came back.
    pub(super) async fn decide_calls(
        &self,
        input: &PassInput<'_>,
        prepared: Prepared,
        report: &mut PassReport,
    ) -> Planned {
        let facts_by_id: HashMap<String, Fact> = input.pending.iter().map(|f| (f.id.clone(), (*f).clone())).collect();
        let mut planner =
            Planner::new(input.ledger.memory.clone(), &facts_by_id, input.run.to_string(), input.now, input.today);
        let mut decided = Decided { held: Vec::new(), failures: Vec::new(), stopped: None, waited: Duration::ZERO };
        // The offline decider's hints: what holds for the whole pass once, each call's vectors
        // and keys looked up by id.
        let mut hints = (self.config.offline_folds && matches!(self.decider, Decider::Offline)).then(|| self.hints());
        let at: HashMap<&str, usize> = match hints {
            Some(_) => {
                let ids = prepared.entries.iter().map(|e| e.id.as_str());
                ids.chain(prepared.facts.iter().map(|f| f.id.as_str())).zip(0..).collect()
            }
            None => HashMap::new(),
        };
        let calls = &prepared.calls;
        for number in 0..calls.calls.len() {
            let (doc, fact_ids) = call_document(&planner, &prepared, number, report);
            if let Some(hints) = &mut hints {
                Pass::hints_for(hints, &doc, &at, prepared.entries.len(), &prepared.vectors, &prepared.lists);
            }
            let asked = Instant::now();
            let answer = self.decider.decide(&doc, input.today, &mut report.llm, hints.as_ref()).await;
            decided.waited += asked.elapsed();
            match answer {
                Ok(ops) => self.take(&doc, ops, &mut planner, &mut decided.held, report),
                Err(err) if err.is_the_calls() => {
                    tracing::warn!(run = %input.run, facts = fact_ids.len(), error = %err, "call left pending");
                    let message = match &err {
                        DecideError::BadReply(m) => format!("unusable reply: {m}"),
                        other => other.to_string(),
                    };
                    decided.failures.extend(fact_ids.iter().map(|f| (f.clone(), message.clone())));
                }
                Err(err) => {
                    // Every later call would fail the same way: stop asking, keep what was
                    // decided, and leave the rest pending at no cost to their attempts.
                    let rest: Vec<String> = calls.calls[number..]
                        .iter()
                        .flat_map(|c| &c.facts)
                        .map(|&f| prepared.facts[f].id.clone())
                        .collect();
                    tracing::warn!(run = %input.run, facts = rest.len(), error = %err, "decider unavailable; the rest of the pass waits for the next one");
                    report.stopped = Some(err.to_string());
                    decided.stopped = Some((err, rest));
                    break;
                }
            }
        }
        report.timings.decide_ms = decided.waited.as_millis() as u64;
        let deferred = decided.stopped.iter().flat_map(|(_, rest)| rest.iter().cloned());
        report.failed_facts = decided.failures.iter().map(|(f, _)| f.clone()).chain(deferred).collect();
        let mut plan = planner.finish(input.ledger.memory.hash.clone());
        plan.llm = report.llm;
        plan.packing = Some(report.packing.clone());
        let Decided { held, failures, stopped, .. } = decided;
        Planned { plan, held, failures, stopped, facts: facts_by_id }
    }

    /// Validate a call's ops and apply them to the planner; in auto mode the ops the decider
    /// is unsure of are held for review instead.
    fn take(
        &self,
        doc: &ClusterDoc,
        ops: Vec<ProposedOp>,
        planner: &mut Planner,
        held: &mut Vec<ProposedOp>,
        report: &mut PassReport,
    ) {
        let valid = validate(doc, ops, self.config.max_content_chars);
        report.ops.extend(valid.ops.iter().map(OpReport::from));
        report
            .dropped
            .extend(valid.dropped.iter().map(|(op, reason)| DroppedReport { op: op.into(), reason: reason.clone() }));
        let (now, unsure) = match self.config.mode {
            Mode::Auto => {
                let (sure, mut unsure) = split_low_confidence(valid.ops, self.config.review_below_confidence);
                // Kinds not in `auto_apply` wait for a person however sure the decider is.
                let (now, held_kinds): (Vec<ProposedOp>, Vec<ProposedOp>) = sure.into_iter().partition(|op| {
                    self.config.auto_apply.iter().any(|k| k.eq_ignore_ascii_case(op.op.kind().as_str()))
                });
                unsure.extend(held_kinds);
                (now, unsure)
            }
            Mode::Review => (valid.ops, Vec::new()),
        };
        held.extend(unsure);
        planner.apply(&now);
    }
}

/// The document of call `number` as the planner now stands: its facts, its ranked entries (or
/// what earlier calls made of them) and what earlier calls made from facts linked to its own.
/// The call and its coverage of ranked entries are added to `report`. Returns the document
/// and the ids of its facts.
fn call_document(
    planner: &Planner,
    prepared: &Prepared,
    number: usize,
    report: &mut PassReport,
) -> (ClusterDoc, Vec<String>) {
    let (calls, facts, entries) = (&prepared.calls, &prepared.facts, &prepared.entries);
    let call = &calls.calls[number];
    let fact_ids: Vec<String> = call.facts.iter().map(|&f| facts[f].id.clone()).collect();
    let mut entry_ids: Vec<String> = call.entries.iter().map(|&e| entries[e].id.clone()).collect();
    let earlier: BTreeSet<&str> = call
        .facts
        .iter()
        .flat_map(|&f| &calls.related[f])
        .filter(|&&g| calls.call_of[g] < number)
        .map(|&g| facts[g].id.as_str())
        .collect();
    entry_ids.extend(planner.entries_from(&earlier));
    let doc = planner.doc(&fact_ids, &entry_ids);
    let shown: HashSet<&str> = doc.neighbors.iter().map(|n| n.id.as_str()).collect();
    let met: Vec<bool> = call
        .facts
        .iter()
        .flat_map(|&f| &calls.ranked[f])
        .map(|&e| planner.resolve(&entries[e].id).is_some_and(|id| shown.contains(id)))
        .collect();
    count_call(&mut report.packing, &doc, prepared.system_tokens, &met);
    let ranked = call
        .facts
        .iter()
        .map(|&f| {
            let shown_ranked = calls.ranked[f]
                .iter()
                .filter_map(|&e| planner.resolve(&entries[e].id))
                .filter(|id| shown.contains(id))
                .map(str::to_string)
                .collect();
            (facts[f].id.clone(), shown_ranked)
        })
        .collect();
    report.clusters.push(ClusterReport {
        candidates: doc.candidates.iter().map(|c| c.id.clone()).collect(),
        neighbors: doc.neighbors.iter().map(|n| n.id.clone()).collect(),
        ranked,
    });
    (doc, fact_ids)
}

/// Add one call to `packing`: its size, its estimated prompt, and for each (fact, ranked entry)
/// pair of the call whether the entry was in its document (`met`).
fn count_call(packing: &mut Packing, doc: &ClusterDoc, system_tokens: u64, met: &[bool]) {
    let tokens = system_tokens + estimate_tokens(&user_message(doc));
    packing.calls += 1;
    packing.nodes.push(doc.neighbors.len() + doc.candidates.len());
    packing.prompt_tokens.push(tokens);
    if tokens > packing.budget_tokens {
        packing.over_budget += 1;
    }
    packing.pairs += met.len();
    packing.pairs_in_call += met.iter().filter(|m| **m).count();
    packing.coverage = if packing.pairs == 0 { 1.0 } else { packing.pairs_in_call as f64 / packing.pairs as f64 };
}
