//! Planning one consolidation pass: embed, neighbours, clusters, decide each cluster, validate, plan.
//!
//! Given the files as read (a [`Ledger`]) and the pending facts the gate let through,
//! [`Pass::plan`] embeds new facts and entries, links each fact to its neighbours, groups them
//! into clusters, asks the decider about each cluster in turn (later calls of a split cluster
//! see what earlier ones did), validates the ops and applies them to an in-memory copy of
//! `memory.md`. It writes nothing: `--dry-run` stops there, review mode stores the plan, and
//! otherwise [`crate::memory::Memory::consolidate`] commits it (see [`super::apply`]). A
//! cluster whose decision fails leaves its facts pending with an attempt count; the other
//! clusters go on.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::cluster::{self, NeighbourParams, Node};
use super::decide::{DecideError, Decider};
use super::divert::split_low_confidence;
use super::gate::Gate;
use super::ops::{Op, ProposedOp};
use super::plan::{Plan, Planner};
use super::validate::validate;
use crate::config::{ConsolidationConfig, Mode};
use crate::embed::Embedder;
use crate::error::Error;
use crate::files::archive::Fact;
use crate::ledger::Ledger;
use crate::llm::Usage;

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

impl PassReport {
    /// The report of a pass that has evaluated its gate and not yet done anything else.
    pub fn new(gate: Gate, decider: &Decider, dry_run: bool) -> PassReport {
        PassReport {
            run: None,
            applied: false,
            dry_run,
            decider: decider.name(),
            gate,
            clusters: Vec::new(),
            ops: Vec::new(),
            dropped: Vec::new(),
            llm: Usage::default(),
            failed_facts: Vec::new(),
            plans: Vec::new(),
            timings: Timings::default(),
        }
    }
}

/// Where a pass spent its time, in milliseconds (`decide` is the wait for decisions; `total`
/// covers the whole pass from the lock to the reindex, so it is at least the sum of the others).
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
    pub config: &'a ConsolidationConfig,
    pub embedder: Arc<dyn Embedder>,
    pub decider: &'a Decider,
}

/// A planned pass: the plan, the ops held back for review, the facts whose cluster failed.
pub struct Planned {
    pub plan: Plan,
    /// Low-confidence ops (auto mode) to plan on top of `plan` and store for review.
    pub held: Vec<ProposedOp>,
    /// Facts left pending because their cluster's decision failed, with the error.
    pub failures: Vec<(String, String)>,
    /// The pending facts the pass took up, by id.
    pub facts: HashMap<String, Fact>,
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

/// The id of a run that starts at `now` with these facts.
pub fn run_id(now: DateTime<Utc>, facts: &[&Fact]) -> String {
    let ids: Vec<&str> = facts.iter().map(|f| f.id.as_str()).collect();
    let hash = crate::files::content_hash(format!("{now}\n{}", ids.join(",")));
    format!("r-{}-{}", now.format("%Y%m%dT%H%M%SZ"), &hash[..4])
}

impl Pass<'_> {
    /// Plan a pass over `pending` (facts of `ledger`) as run `run`, recording what it saw and
    /// decided in `report`. `now` stamps the journal and `today` dates new versions.
    pub async fn plan(
        &self,
        ledger: &Ledger,
        pending: &[&Fact],
        run: &str,
        now: DateTime<Utc>,
        today: NaiveDate,
        report: &mut PassReport,
    ) -> Result<Planned, Error> {
        let cfg = self.config;
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
        let mut planner = Planner::new(ledger.memory.clone(), &facts_by_id, run.to_string(), now, today);
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
                            Mode::Auto => split_low_confidence(valid.ops, cfg.review_below_confidence),
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
        Ok(Planned { plan, held, failures, facts: facts_by_id })
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
