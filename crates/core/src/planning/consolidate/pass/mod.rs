//! Planning one consolidation pass: embed, neighbours, pack into calls, decide each call, validate, plan.
//!
//! Given the files as read (a [`Ledger`]) and the pending facts the gate let through,
//! [`Pass::plan`] embeds new facts and entries, ranks each fact's neighbours, packs facts into
//! decision calls, asks the decider about each call in turn, validates the ops and applies
//! them to an in-memory copy of `memory.md`. It writes nothing: `--dry-run` stops there, review
//! mode stores the plan, and otherwise [`crate::memory::Memory::consolidate`] commits it (see
//! [`crate::planning::run::apply`]). A call whose decision fails leaves its facts pending with an attempt
//! count; the other calls go on.
//!
//! **Every new fact is decided in a call that holds its ranked entries** (its top
//! `neighbor_k` by fused cosine and lexical rank, [`super::cluster::Links::ranked`]), or, for an entry
//! an earlier call of the same pass changed, that entry as it now stands (merged away: the entry
//! it was merged into). [`super::pack`] never drops a ranked entry to make a call fit, calls are decided
//! in order against the planner's current state, and a call also shows what earlier calls made
//! from facts linked to its own. [`Packing`] reports, per pass, the share of (fact, ranked
//! entry) pairs that met in the fact's call, counted from the documents actually sent.

mod calls;
mod prepare;

use memfold_store::caches::DeciderKind;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::aspects::{self};
use super::decide::{DecideError, Decider};
use super::divert::{divert, seen_facts};
use super::gate::Gate;
use super::pack::Packing;
use crate::error::Error;
use crate::planning::run::apply::{self, Outcome};
use crate::planning::run::ops::{Op, OpKind, ProposedOp};
use crate::planning::run::plan::Plan;
use crate::planning::run::records::PlanReason;
use memfold_models::embed::Embedder;
use memfold_models::llm::Usage;
use memfold_store::Root;
use memfold_store::archive::Fact;
use memfold_store::caches::KeyCache;
use memfold_store::commit::Change;
use memfold_store::config::{ConsolidationConfig, Mode};
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::ledger::Ledger;
use memfold_store::sys::clock::Clock;

/// How to run a pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassOptions {
    /// Skip `min_hours` and `min_facts` (never the lock).
    pub force: bool,
    /// Plan and report, write nothing.
    pub dry_run: bool,
}

/// One decision call: which facts and entries it saw.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    pub candidates: Vec<String>,
    pub neighbors: Vec<String>,
    /// Per candidate fact, the entries ranked for it (best first) that the call showed; kept with
    /// a stored plan, so a person sees what each fact was weighed against.
    #[serde(skip)]
    pub ranked: Vec<(String, Vec<String>)>,
}

/// An op as reported (`consolidate --json`); every key is present.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub op: OpKind,
    pub facts: Vec<String>,
    pub target: Option<String>,
    pub into: Option<String>,
    pub content: Option<String>,
    pub why: Option<String>,
    pub signals: Vec<String>,
    pub confidence: Option<f64>,
}

impl From<&ProposedOp> for OpReport {
    fn from(p: &ProposedOp) -> Self {
        let (into, content, why) = match &p.op {
            Op::Add { content, .. } => (None, Some(content.clone()), None),
            Op::Replace { content, why, .. } => (None, Some(content.clone()), why.clone()),
            Op::Remove { into, why, .. } => (Some(into.clone()), None, why.clone()),
            Op::Retire { why, .. } | Op::Stale { why, .. } => (None, None, why.clone()),
            Op::Duplicate { .. } => (None, None, None),
        };
        OpReport {
            op: p.op.kind(),
            facts: p.op.facts().to_vec(),
            target: p.op.target().map(str::to_string),
            into,
            content,
            why,
            signals: p.signals.clone(),
            confidence: p.confidence,
        }
    }
}

/// An op the validator refused.
#[derive(Debug, Clone, Serialize)]
pub struct DroppedReport {
    #[serde(flatten)]
    pub op: OpReport,
    pub reason: String,
}

/// What a pass did (`consolidate --json`).
#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub run: Option<String>,
    pub applied: bool,
    pub dry_run: bool,
    pub decider: DeciderKind,
    pub gate: Gate,
    pub clusters: Vec<ClusterReport>,
    pub packing: Packing,
    pub ops: Vec<OpReport>,
    pub dropped: Vec<DroppedReport>,
    pub llm: Usage,
    pub failed_facts: Vec<String>,
    /// Why the pass stopped asking the decider before its last call (the LLM out of reach,
    /// overloaded or refusing the credentials); the facts it did not get to are pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Plans stored for review instead of applied: the whole plan in review mode, the
    /// low-confidence ops in auto mode (`memfold plans`).
    pub plans: Vec<String>,
    /// Ops of this pass stored for a person instead of applied: the offline decider's
    /// proposals, or an LLM's ops below `review_below_confidence`.
    pub proposals: usize,
    /// What the aspect keys added (absent when `consolidation.aspect_k` is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aspects: Option<AspectReport>,
    pub timings: Timings,
}

/// What the aspect keys of a pass did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AspectReport {
    /// Facts that got at least one key.
    pub facts_keyed: usize,
    /// Of those, facts with keys from the LLM (at extraction or by this pass's keying call).
    pub facts_keyed_by_llm: usize,
    /// (fact, entry) pairs the keys added to what similarity ranked.
    pub candidates_added: usize,
}

impl PassReport {
    /// The report of a pass that has evaluated its gate and not yet done anything else.
    pub fn new(gate: Gate, decider: &Decider, cfg: &ConsolidationConfig, dry_run: bool) -> PassReport {
        PassReport {
            run: None,
            applied: false,
            dry_run,
            decider: decider.kind(),
            gate,
            clusters: Vec::new(),
            packing: Packing { budget_tokens: cfg.call_budget_tokens, coverage: 1.0, ..Packing::default() },
            ops: Vec::new(),
            dropped: Vec::new(),
            llm: Usage::default(),
            failed_facts: Vec::new(),
            stopped: None,
            plans: Vec::new(),
            proposals: 0,
            aspects: None,
            timings: Timings::default(),
        }
    }

    /// The pass in one line: its run, whether its ops were applied (`would apply` for a dry
    /// run, `planned` when they were stored for review), what it cost, what is left pending.
    pub fn summary(&self) -> String {
        let verb = match (self.dry_run, self.applied || self.plans.is_empty()) {
            (true, _) => "would apply",
            (false, true) => "applied",
            (false, false) => "planned",
        };
        let summary = format!(
            "{} {verb}: {} ops from {} decision calls ({} decider, {} LLM calls, {} prompt tokens); {} facts left pending",
            self.run.as_deref().unwrap_or("-"),
            self.ops.len(),
            self.clusters.len(),
            self.decider,
            self.llm.calls,
            self.llm.prompt_tokens,
            self.failed_facts.len()
        );
        let summary = match self.proposals {
            0 => summary,
            n => format!("{summary}; {n} ops proposed for review"),
        };
        match &self.stopped {
            Some(why) => format!("{summary}; stopped: {why}"),
            None => summary,
        }
    }
}

/// Where a pass spent its time, in milliseconds (`decide` is the wait for decisions).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    pub embed_ms: u64,
    pub neighbours_ms: u64,
    pub decide_ms: u64,
    pub write_ms: u64,
    pub promote_ms: u64,
    pub reindex_ms: u64,
    pub total_ms: u64,
}

pub fn ms(since: std::time::Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// What planning a pass needs.
pub struct Pass<'a> {
    pub config: ConsolidationConfig,
    pub embedder: Arc<dyn Embedder>,
    pub decider: &'a Decider,
    /// Aspect keys as a second source of candidates (none when `aspect_k` is 0).
    pub aspects: Option<AspectRun<'a>>,
    /// (fact, entry) pairs of proposals a person rejected: not proposed again.
    pub rejected: HashSet<(String, String)>,
}

/// The aspect keyer of a pass, the LLM keys known so far, and the keying call if an LLM is
/// configured.
pub struct AspectRun<'a> {
    pub aspects: &'a aspects::Aspects,
    pub cache: std::sync::Mutex<KeyCache>,
}

/// A planned pass: the plan, the ops held back for review, the facts whose cluster failed.
pub struct Planned {
    pub plan: Plan,
    /// Low-confidence ops (auto mode) to plan on top of `plan` and store for review.
    pub held: Vec<ProposedOp>,
    /// Facts left pending because their call's reply could not be used, with the error; each
    /// such failure counts toward the fact's `max_attempts`.
    pub failures: Vec<(String, String)>,
    /// Why the pass stopped asking (the decider out of reach, overloaded or refusing the
    /// credentials), and the facts it left pending at no cost to their attempts.
    pub stopped: Option<(DecideError, Vec<String>)>,
    /// The pending facts the pass took up, by id.
    pub facts: HashMap<String, Fact>,
}

/// The pending facts a pass takes up: not in a pending plan (they wait for it), not edited in
/// place in the archive and not named by an entry `memory.md` cannot show (hidden by an
/// unclosed block, its header broken or without content: a person mends those first, forced
/// or not), and, unless forced,
/// not given up on after `max_attempts` unusable replies and not flagged by an undo or a
/// rejected plan (so the same decision is not made again by itself). A forced pass tries
/// given-up facts again. `status` counts the same facts.
pub fn eligible<'a>(
    ledger: &'a Ledger,
    under_review: &std::collections::HashSet<String>,
    cfg: &memfold_store::config::ConsolidationConfig,
    force: bool,
) -> Vec<&'a Fact> {
    candidates(ledger).into_iter().filter(|f| admitted(&f.id, &ledger.state, under_review, cfg, force)).collect()
}

/// Pending facts a pass could ever take up as they are written: not edited since they were
/// archived, not named by a block of `memory.md` that cannot be read.
pub fn candidates(ledger: &Ledger) -> Vec<&Fact> {
    candidates_among(ledger, &ledger.pending()).collect()
}

/// [`candidates`] among `pending` (the ledger's pending facts, already found).
pub fn candidates_among<'l>(ledger: &'l Ledger, pending: &[&'l Fact]) -> impl Iterator<Item = &'l Fact> {
    pending.iter().copied().filter(|f| !f.edited && !ledger.memory.unreadable_facts.contains(&f.id))
}

/// Whether a candidate goes into the next pass: not in a pending plan, and (unless forced)
/// neither out of attempts nor taken back by an undo.
pub fn admitted(
    id: &str,
    state: &memfold_store::state::State,
    under_review: &std::collections::HashSet<String>,
    cfg: &memfold_store::config::ConsolidationConfig,
    force: bool,
) -> bool {
    !under_review.contains(id)
        && state.facts.get(id).is_none_or(|p| force || (p.attempts < cfg.max_attempts && p.reverted_run.is_none()))
}

/// The id of a run that starts at `now` with these facts.
pub fn run_id(now: DateTime<Utc>, facts: &[&Fact]) -> String {
    let ids: Vec<&str> = facts.iter().map(|f| f.id.as_str()).collect();
    let hash = memfold_store::content_hash(format!("{now}\n{}", ids.join(",")));
    format!("r-{}-{}", now.format("%Y%m%dT%H%M%SZ"), &hash[..4])
}

/// What one pass plans over: the files as read, the pending facts the gate let through, the
/// run's id, when it started (it stamps the journal) and the day (it dates new versions).
pub struct PassInput<'a> {
    pub ledger: &'a Ledger,
    pub pending: &'a [&'a Fact],
    pub run: &'a str,
    pub now: DateTime<Utc>,
    pub today: NaiveDate,
}

impl Pass<'_> {
    /// Plan a pass, recording what it saw and decided in `report`: embed, rank and pack
    /// ([`Pass::prepare`]), then decide the calls in turn ([`Pass::decide_calls`]).
    pub async fn plan(&self, input: &PassInput<'_>, report: &mut PassReport) -> Result<Planned, Error> {
        let prepared = self.prepare(input, report).await?;
        Ok(self.decide_calls(input, prepared, report).await)
    }
}

/// A pass whose gate is open, as the use case read it: the files (for a rebuild, with the
/// current entries set aside), the pending facts the gate let through, the run's id and start.
pub struct PassRun<'a> {
    pub ledger: &'a Ledger,
    pub pending: &'a [&'a Fact],
    pub run: String,
    pub started: DateTime<Utc>,
    pub opts: PassOptions,
    /// A rebuild: `memory.md` as it is on disk, and the versions set aside.
    pub rebuild: Option<(&'a EntryFile, Vec<Entry>)>,
}

/// What a planned pass leaves to write: the one change to commit (none after a dry run).
pub struct PassPlan {
    pub change: Option<Change>,
    /// Ops applied by the change, and facts left pending because their call failed.
    pub ops: usize,
    pub failures: usize,
}

impl<'a> Pass<'a> {
    /// A pass with `config` (for a rebuild, one that holds nothing back: it applies whole, or
    /// in review mode is stored whole) over `embedder`'s vectors, asking `decider`.
    /// `rejected`: the (fact, entry) pairs of proposals a person rejected, which only the
    /// offline decider's folds read.
    pub fn new(
        config: &ConsolidationConfig,
        rebuild: bool,
        embedder: Arc<dyn Embedder>,
        decider: &'a Decider,
        aspects: Option<AspectRun<'a>>,
        rejected: HashSet<(String, String)>,
    ) -> Pass<'a> {
        let mut config = config.clone();
        if rebuild {
            config.review_below_confidence = 0.0;
        }
        let rejected = match decider {
            Decider::Offline if config.offline_folds => rejected,
            _ => HashSet::new(),
        };
        Pass { config, embedder, decider, aspects, rejected }
    }

    /// Plan a whole pass: decide its facts ([`Pass::plan`]), hold back what a person must
    /// decide (review mode, low confidence, the offline decider's proposals), and make the one
    /// change that writes it ([`crate::planning::run::apply`]). `clock` dates it and stamps its end.
    pub async fn plan_run(
        &self,
        root: &Root,
        run: &PassRun<'_>,
        report: &mut PassReport,
        clock: &Clock,
    ) -> Result<PassPlan, Error> {
        let today = clock.day_of(run.started);
        let input = PassInput { ledger: run.ledger, pending: run.pending, run: &run.run, now: run.started, today };
        let mut planned = self.plan(&input, report).await?;
        let cfg = &self.config;
        if cfg.mode == Mode::Auto {
            report.proposals = planned.held.len();
        }
        if run.opts.dry_run {
            return Ok(PassPlan { change: None, ops: 0, failures: planned.failures.len() });
        }
        let mut rewrite_from = None;
        if let Some((on_disk, blocks)) = &run.rebuild {
            check_rebuild_decided(&mut planned, &run.run)?;
            let plan = &mut planned.plan;
            plan.memory_hash_before = on_disk.hash.clone();
            plan.memory_before = on_disk.render();
            plan.history.splice(0..0, blocks.iter().cloned());
            rewrite_from = (cfg.mode == Mode::Auto).then_some(*on_disk);
        }
        let held_reason = match self.decider {
            Decider::Offline => PlanReason::Proposal,
            Decider::Llm { .. } => PlanReason::LowConfidence,
        };
        let (plan, mut stored) =
            divert(planned.plan, &planned.held, held_reason, &planned.facts, cfg.mode, run.started, today);
        if let Some(stored) = &mut stored {
            stored.seen = seen_facts(&report.clusters, stored, &run.ledger.memory);
            if run.rebuild.is_some() {
                stored.reason = PlanReason::Rebuild;
            }
        }
        let outcome = Outcome { failures: &planned.failures, store: stored.as_ref(), rewrite_from };
        let change = apply::change(root, run.ledger, &plan, outcome, run.started, clock.now(), today);
        report.plans.extend(stored.map(|s| s.id));
        report.applied = !plan.journal.is_empty();
        Ok(PassPlan { change: Some(change), ops: plan.journal.len(), failures: planned.failures.len() })
    }
}

/// A rebuild sets every entry aside, so a fact left undecided would leave `memory.md` without
/// what it says until a later pass: it writes nothing unless it decided every fact.
fn check_rebuild_decided(planned: &mut Planned, run: &str) -> Result<(), Error> {
    if let Some((err, _)) = planned.stopped.take() {
        tracing::warn!(run = %run, error = %err, "rebuild stopped; nothing was written");
        return Err(match err {
            DecideError::Llm(e) => Error::Llm(e),
            DecideError::BadReply(m) => Error::LlmReply(m),
        });
    }
    if let Some((fact, why)) = planned.failures.first() {
        return Err(Error::LlmReply(format!(
            "rebuild: {} facts undecided ({fact}: {why}); nothing was written",
            planned.failures.len()
        )));
    }
    Ok(())
}
