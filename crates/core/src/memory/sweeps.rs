//! Sweeps: the current entries compared with each other, what is found stored as a plan for
//! review (see [`crate::planning::sweep`]).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::{Memory, blocking};
use crate::error::Error;
use crate::planning::consolidate::divert;
use crate::planning::consolidate::pass::{OpReport, ms};
use crate::planning::consolidate::rules::Hints;
use crate::planning::consolidate::validate::validate;
use crate::planning::run::ops::OpKind;
use crate::planning::run::ops::ProposedOp;
use crate::planning::run::plan::Planner;
use crate::planning::run::records::{self, PlanReason, PlanStatus};
use crate::planning::stale;
use crate::planning::sweep::{self, SweepState};
use memfold_models::llm::Usage;
use memfold_store::commit::{self, Change};
use memfold_store::content_hash;
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::ledger::Ledger;
use memfold_store::sys::lock::LockGuard;
use memfold_store::uses::Uses;

/// What a sweep did (`memfold sweep --json`, `POST /sweep`).
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    /// Current entries.
    pub entries: usize,
    /// Entries swept (new or changed since the last sweep, or all of them with `full`).
    pub swept: usize,
    /// Swept entries with neighbours, each one decision document.
    pub compared: usize,
    /// Documents decided; the rest wait for the next sweep (`sweep_max_calls`).
    pub decided: usize,
    /// Swept entries left for the next sweep.
    pub left: usize,
    pub decider: memfold_store::caches::DeciderKind,
    /// The proposals, as a plan's ops.
    pub ops: Vec<OpReport>,
    /// The plan they were stored as (none on a dry run or when nothing was found).
    pub plan: Option<String>,
    /// Entries unused for `decay.retire_after_days`, proposed for retirement (`--stale`, and
    /// every sweep while `decay.retire_after_days` is not 0).
    pub stale: Vec<OpReport>,
    /// The plan they were stored as (reason `stale`).
    pub stale_plan: Option<String>,
    /// The run that applied it, when `consolidation.auto_apply` names STALE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_run: Option<String>,
    /// Only stale entries were looked for (`--stale`).
    pub stale_only: bool,
    /// `decay.retire_after_days` (0: nothing retires).
    pub retire_after_days: u32,
    pub dry_run: bool,
    pub full: bool,
    /// What deciding cost (LLM calls and tokens; none offline).
    pub llm: Usage,
    /// Documents a decider could not decide (the entries are swept again next time).
    pub failed: usize,
    pub ms: u64,
}

/// How to sweep.
#[derive(Debug, Clone, Copy, Default)]
pub struct SweepOptions {
    /// Every entry, not only those new or changed since the last sweep.
    pub full: bool,
    /// Find and report, store nothing.
    pub dry_run: bool,
    /// Only the entries unused for `decay.retire_after_days`, not duplicates.
    pub stale: bool,
}

/// What a sweep reads, under the consolidation lock unless it is a dry run.
struct SweepRead {
    lock: Option<LockGuard>,
    ledger: Ledger,
    /// Entries a pending plan touches: never swept or proposed.
    held: HashSet<String>,
    /// Pairs people rejected in earlier sweeps' plans.
    rejected: HashSet<(String, String)>,
    state: SweepState,
    /// Entries decay never proposes (pinned, in `MEMORY.md`, held).
    exempt: stale::Exempt,
    uses: Uses,
}

/// What the decider made of the swept entries.
#[derive(Default)]
struct SweepDecided {
    ops: Vec<ProposedOp>,
    decided: usize,
    failed: usize,
    /// Entries left for the next sweep (over the budget, or not decided).
    undecided: HashSet<String>,
    usage: Usage,
}

impl Memory {
    /// Sweep the current entries (see [`crate::planning::sweep`]): what it finds is stored as
    /// one plan with reason `sweep`, never applied on its own. Like a pass: lock, read, plan,
    /// commit.
    pub async fn sweep(&self, opts: SweepOptions) -> Result<SweepReport, Error> {
        let started = Instant::now();
        let me = self.clone();
        let read = blocking(move || me.sweep_read(opts.dry_run)).await?;
        let now = self.inner.clock.now();
        let today = self.inner.clock.day_of(now);
        let memory = &read.ledger.memory;
        let swept = if opts.stale { Vec::new() } else { sweep::to_sweep(memory, &read.state, opts.full, &read.held) };
        let pairings = sweep::pairings(memory, &swept, &read.held, self.inner.config.consolidation.neighbor_k);
        let decided = self.sweep_decide(memory, &pairings, &read.rejected, today).await;
        // Planned one after another: an op whose entries an earlier one removed is dropped.
        let run = sweep_id(now, swept.len());
        let facts = HashMap::new();
        let mut planner = Planner::new(memory.clone(), &facts, run.clone(), now, today);
        planner.apply(&decided.ops);
        let mut plan = planner.finish(memory.hash.clone());
        plan.llm = decided.usage;
        let clock = self.inner.clock;
        let retire_after = self.inner.config.decay.retire_after_days;
        let stale_ops = stale::proposals(memory, &read.uses, &read.exempt, today, retire_after, |t| clock.day_of(t));
        let stale_run = format!("{run}-stale");
        let mut stale_planner = Planner::new(memory.clone(), &facts, stale_run.clone(), now, today);
        stale_planner.apply(&stale_ops);
        let stale_plan = stale_planner.finish(memory.hash.clone());
        let mut report = SweepReport {
            entries: memory.entries().count(),
            swept: swept.len(),
            compared: pairings.len(),
            decided: decided.decided,
            left: decided.undecided.len(),
            decider: self.inner.decider.kind(),
            ops: plan.journal.iter().map(|r| OpReport::from(&r.op)).collect(),
            plan: None,
            stale: stale_plan.journal.iter().map(|r| OpReport::from(&r.op)).collect(),
            stale_plan: None,
            stale_run: None,
            stale_only: opts.stale,
            retire_after_days: retire_after,
            dry_run: opts.dry_run,
            full: opts.full,
            llm: decided.usage,
            failed: decided.failed,
            ms: 0,
        };
        let Some(lock) = read.lock else {
            report.ms = ms(started);
            return Ok(report);
        };
        let mut change = Change::new(format!("sweep {run}"));
        if !plan.journal.is_empty() {
            let stored = divert::stored(&plan, Vec::new(), PlanReason::Sweep, &run, now, today);
            change.records.push(stored.file());
            report.plan = Some(run.clone());
        }
        if !stale_plan.journal.is_empty() {
            let stored = divert::stored(&stale_plan, Vec::new(), PlanReason::Stale, &stale_run, now, today);
            change.records.push(stored.file());
            report.stale_plan = Some(stale_run.clone());
        }
        change.records.push(next_state(&read.ledger, &read.state, &swept, &decided.undecided, now).file());
        let root = self.inner.root.clone();
        blocking(move || commit::commit(&root, &change, &lock)).await?;
        let (ops, stale) = (report.ops.len(), report.stale.len());
        tracing::info!(swept = report.swept, compared = report.compared, ops, plan = ?report.plan, stale, "sweep done");
        let auto =
            self.inner.config.consolidation.auto_apply.iter().any(|k| k.eq_ignore_ascii_case(OpKind::Stale.as_str()));
        if auto && let Some(id) = report.stale_plan.clone() {
            report.stale_run = Some(self.apply_plan(&id).await?.run);
        }
        report.ms = ms(started);
        Ok(report)
    }

    /// The files a sweep plans from, and the plans and state beside them.
    fn sweep_read(&self, dry_run: bool) -> Result<SweepRead, Error> {
        let (lock, ledger) = if dry_run {
            (None, Ledger::load(&self.inner.root)?)
        } else {
            let (lock, ledger) = self.lock_and_read()?;
            (Some(lock), ledger)
        };
        let heads = records::plan_heads(&self.inner.root);
        let held: HashSet<String> =
            heads.iter().filter(|p| p.status == PlanStatus::Pending).flat_map(|p| p.touched.iter().cloned()).collect();
        let rejected = sweep::rejected_pairs(
            heads
                .iter()
                .filter(|p| p.status == PlanStatus::Rejected && p.reason == PlanReason::Sweep)
                .flat_map(|p| &p.journal),
        );
        let state: SweepState =
            records::read_json(&self.inner.root, &self.inner.root.dir().join(sweep::STATE))?.unwrap_or_default();
        let exempt = self.decay_exempt(&heads, &held);
        let uses = Uses::current(&self.inner.root);
        Ok(SweepRead { lock, ledger, held, rejected, state, exempt, uses })
    }

    /// Each pairing decided, up to `consolidation.sweep_max_calls` with an LLM; offline only
    /// what a pass would apply is kept.
    async fn sweep_decide(
        &self,
        memory: &EntryFile,
        pairings: &[sweep::Pairing],
        rejected: &HashSet<(String, String)>,
        today: NaiveDate,
    ) -> SweepDecided {
        let cfg = &self.inner.config.consolidation;
        let llm = self.inner.decider.llm().is_some();
        let budget = if llm { cfg.sweep_max_calls } else { usize::MAX };
        let hints = Hints { rejected: rejected.clone(), ..Hints::default() };
        let mut out = SweepDecided::default();
        let by_id = sweep::by_id(memory);
        for (n, pairing) in pairings.iter().enumerate() {
            if n >= budget {
                out.undecided.insert(pairing.entry.clone());
                continue;
            }
            let Some(doc) = sweep::doc(&by_id, pairing, today) else { continue };
            out.decided += 1;
            match self.inner.decider.decide(&doc, today, &mut out.usage, Some(&hints)).await {
                Ok(proposed) => {
                    let mut valid = validate(&doc, proposed, cfg.max_content_chars);
                    if !llm {
                        // Offline, what a pass would apply: the certain duplicates. What the rules
                        // only suspect among entries that all stand on their own is noise.
                        valid.ops.retain(|op| op.confidence.is_none_or(|c| c >= cfg.review_below_confidence));
                    }
                    out.ops.extend(sweep::entry_ops(&doc, valid.ops, rejected));
                }
                Err(e) => {
                    tracing::warn!(entry = %pairing.entry, error = %e, "sweep: could not decide; swept again next time");
                    out.failed += 1;
                    out.undecided.insert(pairing.entry.clone());
                }
            }
        }
        out
    }

    /// Whether `consolidation.sweep_interval_hours` says a sweep is due: the gate's read of
    /// the files, without the curation totals `status` adds.
    pub async fn sweep_due(&self) -> Result<bool, Error> {
        let me = self.clone();
        let status =
            blocking(move || crate::memory::status::status(&me.inner.root, &me.inner.config, me.inner.clock.now()))
                .await?;
        Ok(status.sweep_due)
    }
}

impl Memory {
    /// What decay never retires besides pinned entries (see [`crate::planning::stale`]): the
    /// entries of `MEMORY.md` and of pending plans, and when a person last kept an entry by
    /// rejecting its retirement. Blocking (reads `MEMORY.md`).
    fn decay_exempt(&self, heads: &[records::PlanHead], held: &HashSet<String>) -> stale::Exempt {
        let mut ids: HashSet<String> = held.clone();
        ids.extend(memfold_store::promoted::entry_ids(&self.inner.root));
        let mut kept: HashMap<String, DateTime<Utc>> = HashMap::new();
        for head in heads.iter().filter(|p| p.reason == PlanReason::Stale && p.status == PlanStatus::Rejected) {
            let Some(at) = head.rejected else { continue };
            for target in head.journal.iter().filter_map(|r| r.op.op.target()) {
                let time = kept.entry(target.to_string()).or_insert(at);
                *time = (*time).max(at);
            }
        }
        stale::Exempt { ids, kept }
    }
}

/// What the next sweep starts from: the entries swept now (and those swept before, unchanged)
/// by their content hash. Entries the plan touches count as swept too: while it is pending they
/// are held anyway, applied they change and are swept again, rejected they are not.
fn next_state(
    ledger: &Ledger,
    state: &SweepState,
    swept: &[&Entry],
    undecided: &HashSet<String>,
    now: DateTime<Utc>,
) -> SweepState {
    let mut next = SweepState { last: Some(now), swept: Default::default() };
    let swept_ids: HashSet<&str> = swept.iter().map(|e| e.id()).collect();
    for e in ledger.memory.entries() {
        let id = e.id();
        let hash = content_hash(&e.content);
        let now_swept = swept_ids.contains(id) && !undecided.contains(id);
        if now_swept || state.swept.get(id) == Some(&hash) {
            next.swept.insert(id.to_string(), hash);
        }
    }
    next
}

fn sweep_id(now: DateTime<Utc>, swept: usize) -> String {
    let hash = content_hash(format!("{now}\nsweep\n{swept}"));
    format!("r-{}-sweep-{}", now.format("%Y%m%dT%H%M%SZ"), &hash[..4])
}
