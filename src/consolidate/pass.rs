//! One consolidation pass, from the gate to the written files.
//!
//! lock → ledger → gate → embed → neighbours → clusters → decide each (sequentially) →
//! validate → plan → apply → reindex. Everything before apply is pure planning, so
//! `--dry-run` stops there and writes nothing, and review mode stores the plan for
//! `memfold apply` instead of applying it (see [`crate::review`]). A cluster whose decision
//! fails leaves its facts pending with an attempt count; the other clusters go on.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::apply::{ApplyError, apply};
use super::cluster::{self, NeighbourParams, Node};
use super::decide::{DecideError, Decider};
use super::gate::{self, Gate, GateInput};
use super::ops::{Op, ProposedOp};
use super::plan::{Plan, Planner};
use super::validate::validate;
use crate::config::{Config, Mode};
use crate::embed::{EmbedError, Embedder};
use crate::files::Root;
use crate::files::archive::Fact;
use crate::index::Index;
use crate::ledger::{Ledger, LedgerError};
use crate::llm::Usage;
use crate::lock::{LockError, LockGuard};
use crate::state::{State, StateError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PassError {
    #[error(transparent)]
    Busy(#[from] LockError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("embedding for consolidation: {0}")]
    Embed(#[from] EmbedError),
    #[error("finding neighbours: {0}")]
    Neighbours(#[from] candle_core::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("reindexing after the pass: {0}")]
    Reindex(#[from] crate::corpus::RefreshError),
    #[error("storing a plan for review: {0}")]
    Review(#[from] crate::review::ReviewError),
}

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
}

/// An op as reported (`consolidate --json`); every key is present.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub op: &'static str,
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
    pub decider: &'static str,
    pub gate: Gate,
    pub clusters: Vec<ClusterReport>,
    pub ops: Vec<OpReport>,
    pub dropped: Vec<DroppedReport>,
    pub llm: Usage,
    pub failed_facts: Vec<String>,
    /// Plans stored for review instead of applied: the whole plan in review mode, the
    /// low-confidence ops in auto mode (`memfold plans`).
    pub plans: Vec<String>,
    pub timings: Timings,
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

fn ms(since: std::time::Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// What a pass needs.
pub struct Pass<'a> {
    pub root: &'a Root,
    pub config: &'a Config,
    pub embedder: Arc<dyn Embedder>,
    pub decider: &'a Decider,
    /// Reindexed after apply when given.
    pub index: Option<&'a Index>,
}

/// The pending facts a pass takes up: not in a pending plan (they wait for it), not given up on
/// after `max_attempts`, not edited in place in the archive (a person resolves those first,
/// forced or not), and, unless forced, not flagged by an undo or a rejected plan (so the same
/// decision is not made again by itself). `status` counts the same facts.
pub fn eligible<'a>(
    ledger: &'a Ledger,
    under_review: &std::collections::HashSet<String>,
    cfg: &crate::config::ConsolidationConfig,
    force: bool,
) -> Vec<&'a Fact> {
    ledger
        .pending()
        .into_iter()
        .filter(|f| !under_review.contains(&f.id) && !f.edited)
        .filter(|f| {
            ledger
                .state
                .facts
                .get(&f.id)
                .is_none_or(|p| p.attempts < cfg.max_attempts && (force || p.reverted_run.is_none()))
        })
        .collect()
}

fn run_id(now: DateTime<Utc>, facts: &[&Fact]) -> String {
    let ids: Vec<&str> = facts.iter().map(|f| f.id.as_str()).collect();
    let hash = crate::files::content_hash(format!("{now}\n{}", ids.join(",")));
    format!("r-{}-{}", now.format("%Y%m%dT%H%M%SZ"), &hash[..4])
}

impl Pass<'_> {
    pub async fn run(&self, opts: PassOptions) -> Result<PassReport, PassError> {
        let started = Utc::now();
        let lock = if opts.dry_run {
            None
        } else {
            Some(LockGuard::try_acquire(&self.root.consolidate_lock(), "consolidation")?)
        };
        let root = self.root.clone();
        let reconcile = lock.is_some();
        let ledger = tokio::task::spawn_blocking(move || {
            // Entries deleted by hand are tombstoned before anything is planned around them.
            if reconcile && let Err(e) = crate::forget::reconcile_locked(&root) {
                tracing::warn!(error = %e, "could not reconcile hand edits of memory.md");
            }
            Ledger::load(&root)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        let cfg = &self.config.consolidation;
        let root = self.root.clone();
        let under_review = tokio::task::spawn_blocking(move || crate::review::facts_under_review(&root))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        let pending = eligible(&ledger, &under_review, cfg, opts.force);
        let gate = gate::evaluate(
            cfg,
            &GateInput {
                lock_holder: None,
                last_run: ledger.state.last_run.as_ref().map(|r| r.finished),
                now: started,
                pending: pending.len(),
                force: opts.force,
            },
        );
        let mut report = PassReport {
            run: None,
            applied: false,
            dry_run: opts.dry_run,
            decider: self.decider.name(),
            gate: gate.clone(),
            clusters: Vec::new(),
            ops: Vec::new(),
            dropped: Vec::new(),
            llm: Usage::default(),
            failed_facts: Vec::new(),
            plans: Vec::new(),
            timings: Timings::default(),
        };
        let clock = std::time::Instant::now();
        if !gate.open {
            return Ok(report);
        }
        let run = run_id(started, &pending);
        report.run = Some(run.clone());
        tracing::info!(run = %run, pending = pending.len(), decider = self.decider.name(), "pass started");

        // Vectors for entries and new facts.
        let mut step = std::time::Instant::now();
        let entries: Vec<(String, String)> =
            ledger.memory.entries().map(|e| (e.id().to_string(), e.content.clone())).collect();
        let facts: Vec<(String, String)> = pending.iter().map(|f| (f.id.clone(), f.text.clone())).collect();
        let texts: Vec<String> = entries.iter().chain(&facts).map(|(_, text)| text.clone()).collect();
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(1024) {
            vectors.extend(self.embedder.embed(chunk).await?);
        }
        report.timings.embed_ms = ms(step);
        step = std::time::Instant::now();
        let params = NeighbourParams {
            neighbor_k: cfg.neighbor_k,
            lexical_k: cfg.lexical_k,
            min_similarity: cfg.min_similarity,
        };
        let (clusters, linked, related) =
            tokio::task::spawn_blocking(move || neighbourhoods(&entries, &facts, &vectors, params))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        report.timings.neighbours_ms = ms(step);

        let facts_by_id: HashMap<String, Fact> = pending.iter().map(|f| (f.id.clone(), (*f).clone())).collect();
        let mut planner = Planner::new(ledger.memory.clone(), &facts_by_id, run.clone(), started);
        let today = chrono::Local::now().date_naive();
        let mut failures: Vec<(String, String)> = Vec::new();
        let mut decide_wait = std::time::Duration::ZERO;
        let mut held: Vec<ProposedOp> = Vec::new();
        for c in &clusters {
            let mark = planner.journal_len();
            for (facts, mut entries) in chunks(c, &linked, cfg.cluster_max) {
                // Later calls of a split cluster see what earlier ones added from facts linked to theirs.
                let near: BTreeSet<&str> =
                    facts.iter().flat_map(|f| related.get(f).into_iter().flatten().map(String::as_str)).collect();
                entries.extend(planner.added_since(mark, &near, cfg.cluster_max));
                let doc = planner.doc(&facts, &entries);
                report.clusters.push(ClusterReport {
                    candidates: doc.candidates.iter().map(|c| c.id.clone()).collect(),
                    neighbors: doc.neighbors.iter().map(|n| n.id.clone()).collect(),
                });
                let asked = std::time::Instant::now();
                let decided = self.decider.decide(&doc, today, &mut report.llm).await;
                decide_wait += asked.elapsed();
                match decided {
                    Ok(ops) => {
                        let valid = validate(&doc, ops, cfg.max_content_chars);
                        report.ops.extend(valid.ops.iter().map(OpReport::from));
                        report.dropped.extend(
                            valid
                                .dropped
                                .iter()
                                .map(|(op, reason)| DroppedReport { op: op.into(), reason: reason.clone() }),
                        );
                        // In auto mode, ops the decider is unsure of go to review; the rest apply.
                        let (now, unsure) = match cfg.mode {
                            Mode::Auto => crate::review::split_low_confidence(valid.ops, cfg.review_below_confidence),
                            Mode::Review => (valid.ops, Vec::new()),
                        };
                        held.extend(unsure);
                        planner.apply(&now);
                    }
                    Err(err) => {
                        tracing::warn!(run = %run, facts = facts.len(), error = %err, "cluster left pending");
                        let message = match &err {
                            DecideError::BadReply(m) => format!("unusable reply: {m}"),
                            other => other.to_string(),
                        };
                        failures.extend(facts.iter().map(|f| (f.clone(), message.clone())));
                    }
                }
            }
        }
        report.timings.decide_ms = decide_wait.as_millis() as u64;
        report.failed_facts = failures.iter().map(|(f, _)| f.clone()).collect();
        let mut plan = planner.finish(ledger.memory.hash.clone());
        plan.llm = report.llm;
        if opts.dry_run {
            return Ok(report);
        }
        step = std::time::Instant::now();
        let (plan, for_review) = crate::review::divert(plan, &held, &facts_by_id, cfg.mode, started);
        self.write(&plan, started, &failures).await?;
        if let Some(for_review) = for_review {
            let root = self.root.clone();
            let id = tokio::task::spawn_blocking(move || for_review.store(&root))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
            report.plans.push(id);
        }
        report.timings.write_ms = ms(step);
        report.applied = !plan.journal.is_empty();
        step = std::time::Instant::now();
        if report.applied {
            match crate::promote::promote(self.root, self.config, self.decider.promoter()).await {
                Ok(promoted) => report.llm.add(promoted.llm),
                Err(e) => tracing::warn!(run = %run, error = %e, "MEMORY.md not rewritten"),
            }
        }
        report.timings.promote_ms = ms(step);
        drop(lock);
        step = std::time::Instant::now();
        if let Some(index) = self.index {
            crate::corpus::refresh(self.root, index).await?;
        }
        report.timings.reindex_ms = ms(step);
        report.timings.total_ms = ms(clock);
        tracing::info!(run = %run, ops = plan.journal.len(), failed = failures.len(), "pass done");
        Ok(report)
    }

    async fn write(&self, plan: &Plan, started: DateTime<Utc>, failures: &[(String, String)]) -> Result<(), PassError> {
        let root = self.root.clone();
        let plan = plan.clone();
        let failures = failures.to_vec();
        tokio::task::spawn_blocking(move || -> Result<(), PassError> {
            if !plan.journal.is_empty() {
                apply(&root, &plan, started)?;
            }
            if !failures.is_empty() {
                let mut state = State::load(&root.state_json())?;
                for (fact, error) in failures {
                    let progress = state.facts.entry(fact).or_default();
                    progress.attempts += 1;
                    progress.last_error = Some(error);
                }
                state.save(&root.state_json())?;
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// Fact id → linked ids.
type Linked = HashMap<String, BTreeSet<String>>;

/// Neighbour links and clusters of `(id, text)` entries and facts whose vectors follow
/// `vectors` in that order (entries first); also which entries, and which other facts, each
/// fact is linked to.
fn neighbourhoods(
    entries: &[(String, String)],
    facts: &[(String, String)],
    vectors: &[Vec<f32>],
    params: NeighbourParams,
) -> candle_core::Result<(Vec<cluster::Cluster>, Linked, Linked)> {
    let (entry_vecs, fact_vecs) = vectors.split_at(entries.len());
    fn nodes<'a>(items: &'a [(String, String)], vecs: &'a [Vec<f32>]) -> Vec<Node<'a>> {
        items.iter().zip(vecs).map(|((id, text), v)| Node { id, text, vector: v }).collect()
    }
    let (entry_nodes, fact_nodes) = (nodes(entries, entry_vecs), nodes(facts, fact_vecs));
    let links = cluster::neighbours(&fact_nodes, &entry_nodes, params)?;
    let clusters = cluster::clusters(&fact_nodes, &entry_nodes, &links);
    let mut linked: Linked = HashMap::new();
    for &(i, j) in &links.fact_entry {
        linked.entry(facts[i].0.clone()).or_default().insert(entries[j].0.clone());
    }
    let mut related: Linked = HashMap::new();
    for &(i, j) in &links.fact_fact {
        related.entry(facts[i].0.clone()).or_default().insert(facts[j].0.clone());
        related.entry(facts[j].0.clone()).or_default().insert(facts[i].0.clone());
    }
    Ok((clusters, linked, related))
}

/// Split a cluster into decision calls of about `max` facts + entries each.
fn chunks(
    c: &cluster::Cluster,
    linked: &HashMap<String, BTreeSet<String>>,
    max: usize,
) -> Vec<(Vec<String>, Vec<String>)> {
    if c.facts.len() + c.entries.len() <= max {
        return vec![(c.facts.clone(), c.entries.clone())];
    }
    let per_call = (max / 2).max(1);
    c.facts
        .chunks(per_call)
        .map(|facts| {
            let mut entries: BTreeSet<String> = BTreeSet::new();
            for f in facts {
                if let Some(near) = linked.get(f) {
                    entries.extend(near.iter().cloned());
                }
            }
            let entries: Vec<String> = entries.into_iter().take(max.saturating_sub(facts.len()).max(1)).collect();
            (facts.to_vec(), entries)
        })
        .collect()
}
