//! Planning one consolidation pass: embed, neighbours, pack into calls, decide each call, validate, plan.
//!
//! Given the files as read (a [`Ledger`]) and the pending facts the gate let through,
//! [`Pass::plan`] embeds new facts and entries, ranks each fact's neighbours, packs facts into
//! decision calls, asks the decider about each call in turn, validates the ops and applies
//! them to an in-memory copy of `memory.md`. It writes nothing: `--dry-run` stops there, review
//! mode stores the plan, and otherwise [`crate::memory::Memory::consolidate`] commits it (see
//! [`super::apply`]). A call whose decision fails leaves its facts pending with an attempt
//! count; the other calls go on.
//!
//! **Every new fact is decided in a call that holds its ranked entries** (its top
//! `neighbor_k` by fused cosine and lexical rank, [`cluster::Links::ranked`]), or, for an entry
//! an earlier call of the same pass changed, that entry as it now stands (merged away: the entry
//! it was merged into). [`pack`] never drops a ranked entry to make a call fit, calls are decided
//! in order against the planner's current state, and a call also shows what earlier calls made
//! from facts linked to its own. [`Packing`] reports, per pass, the share of (fact, ranked
//! entry) pairs that met in the fact's call, counted from the documents actually sent.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::aspects::{self, Key};
use super::cluster::{self, NeighbourParams, Node};
use super::decide::{DecideError, Decider, user_message};
use super::divert::split_low_confidence;
use super::gate::Gate;
use super::ops::{Candidate, ClusterDoc, Neighbor, Op, OpKind, ProposedOp};
use super::pack::{self, PackInput, Packing};
use super::plan::{Plan, Planner, neighbor};
use super::validate::validate;
use crate::config::{ConsolidationConfig, Mode};
use crate::models::embed::Embedder;
use crate::error::Error;
use crate::store::archive::Fact;
use crate::store::caches::KeyCache;
use crate::store::ledger::Ledger;
use crate::models::llm::{Usage, estimate_tokens};

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
            decider: decider.name(),
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
    pub config: &'a ConsolidationConfig,
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

impl Pass<'_> {
    /// What the offline decider knows about every call of the pass besides its texts: the
    /// single-valued attributes, the rejected pairs, whether the vectors read meaning. The
    /// vectors and keys of a call are added by [`Pass::hints_for`].
    fn hints(&self) -> super::rules::Hints {
        super::rules::Hints {
            rejected: self.rejected.clone(),
            semantic: !self.embedder.id().starts_with("local:"),
            single: match &self.aspects {
                Some(run) => run.aspects.taxonomy().single_attributes().map(str::to_string).collect(),
                None => HashSet::new(),
            },
            ..Default::default()
        }
    }

    /// Set `hints` to the vectors and aspect keys of the texts of `doc` (entries an earlier call
    /// of the pass made have none). `at` places an id in `vectors`: the pass's `entries` entries
    /// first, then its facts.
    fn hints_for(
        hints: &mut super::rules::Hints,
        doc: &ClusterDoc,
        at: &HashMap<&str, usize>,
        entries: usize,
        vectors: &[Vec<f32>],
        lists: &aspects::Candidates,
    ) {
        hints.vectors.clear();
        hints.keys.clear();
        for id in doc.neighbors.iter().map(|n| n.id.as_str()).chain(doc.candidates.iter().map(|c| c.id.as_str())) {
            let Some(&i) = at.get(id) else { continue };
            hints.vectors.insert(id.to_string(), vectors[i].clone());
            let keys = match i.checked_sub(entries) {
                None => lists.entry_keys.get(i),
                Some(f) => lists.fact_keys.get(f),
            };
            if let Some(keys) = keys {
                hints.keys.insert(id.to_string(), keys.clone());
            }
        }
    }
}

impl AspectRun<'_> {
    /// The keys an LLM gave this pass's facts, and its entries' texts and the facts they were
    /// made from: from
    /// the cache, after one keying call for the facts it does not hold (when an LLM is
    /// configured; its cost goes to `usage`). A failed keying call costs nothing but its keys.
    async fn llm_keys(
        &self,
        ledger: &Ledger,
        entries: &[Neighbor],
        facts: &[Candidate],
        usage: &mut Usage,
    ) -> aspects::LlmKeys {
        let taxonomy = self.aspects.taxonomy();
        if let Some(keying) = self.aspects.keying() {
            let missing: Vec<(&str, &str)> = {
                let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                facts.iter().filter(|f| cache.get(&f.text).is_none()).map(|f| (f.id.as_str(), f.text.as_str())).collect()
            };
            if !missing.is_empty() {
                match crate::models::llm::keys::keys(&keying.chat, &keying.system, &missing).await {
                    Ok((mut keys, cost)) => {
                        usage.add(cost);
                        // A fact the reply left out is cached without keys: it is not asked again.
                        let keyed: Vec<(String, Vec<String>)> = missing
                            .iter()
                            .map(|&(id, text)| (text.to_string(), keys.remove(id).unwrap_or_default()))
                            .collect();
                        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(&keyed);
                    }
                    Err(e) => {
                        if let crate::models::llm::LlmError::Unparseable { usage: cost, .. } = &e {
                            usage.add(*cost);
                        }
                        tracing::warn!(error = %e, facts = missing.len(), "keying call failed; the pass goes on with offline keys");
                    }
                }
            }
        }
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let parse = |text: &str| -> Vec<Key> {
            cache.get(text).into_iter().flatten().filter_map(|k| taxonomy.parse_key(k)).collect()
        };
        let fact_text: HashMap<&str, &str> = ledger.facts.iter().map(|f| (f.id.as_str(), f.text.as_str())).collect();
        let sources: HashMap<&str, &[String]> =
            ledger.memory.entries().map(|e| (e.id(), e.meta.sources.as_slice())).collect();
        aspects::LlmKeys {
            facts: facts.iter().map(|f| parse(&f.text)).collect(),
            entries: entries
                .iter()
                .map(|e| {
                    // Its own text (an entry made verbatim from a fact has the fact's text), then
                    // the facts it was made from.
                    let mut keys: Vec<Key> = parse(&e.content);
                    for source in sources.get(e.id.as_str()).copied().unwrap_or_default() {
                        for key in fact_text.get(source.as_str()).map(|t| parse(t)).unwrap_or_default() {
                            if !keys.contains(&key) {
                                keys.push(key);
                            }
                        }
                    }
                    keys
                })
                .collect(),
        }
    }
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
    cfg: &crate::config::ConsolidationConfig,
    force: bool,
) -> Vec<&'a Fact> {
    candidates(ledger)
        .into_iter()
        .filter(|f| admitted(&f.id, &ledger.state, under_review, cfg, force))
        .collect()
}

/// Pending facts a pass could ever take up as they are written: not edited since they were
/// archived, not named by a block of `memory.md` that cannot be read.
pub fn candidates(ledger: &Ledger) -> Vec<&Fact> {
    ledger.pending().into_iter().filter(|f| !f.edited && !ledger.memory.unreadable_facts.contains(&f.id)).collect()
}

/// Whether a candidate goes into the next pass: not in a pending plan, and (unless forced)
/// neither out of attempts nor taken back by an undo.
pub fn admitted(
    id: &str,
    state: &crate::store::state::State,
    under_review: &std::collections::HashSet<String>,
    cfg: &crate::config::ConsolidationConfig,
    force: bool,
) -> bool {
    !under_review.contains(id)
        && state.facts.get(id).is_none_or(|p| force || (p.attempts < cfg.max_attempts && p.reverted_run.is_none()))
}

/// The id of a run that starts at `now` with these facts.
pub fn run_id(now: DateTime<Utc>, facts: &[&Fact]) -> String {
    let ids: Vec<&str> = facts.iter().map(|f| f.id.as_str()).collect();
    let hash = crate::store::content_hash(format!("{now}\n{}", ids.join(",")));
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
        // A block a person must mend is left as it is, so no decider is asked to change it.
        let entries: Vec<Neighbor> =
            ledger.memory.entries().filter(|e| !e.needs_mending()).map(|e| neighbor(e, today)).collect();
        let facts: Vec<Candidate> =
            pending.iter().map(|f| Candidate { id: f.id.clone(), text: f.text.clone(), date: f.date }).collect();
        let texts: Vec<String> =
            entries.iter().map(|e| e.content.clone()).chain(facts.iter().map(|f| f.text.clone())).collect();
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
        let system_tokens = estimate_tokens(&self.decider.system_prompt());
        let sizes = Sizes { budget_tokens: cfg.call_budget_tokens, system_tokens, max_facts: cfg.cluster_max };
        if system_tokens >= sizes.budget_tokens {
            tracing::warn!(
                system_tokens,
                budget = sizes.budget_tokens,
                "the decision prompt alone exceeds consolidation.call_budget_tokens; every fact gets a call of its own"
            );
        }
        let keyed = match &self.aspects {
            Some(run) => Some(run.llm_keys(ledger, &entries, &facts, &mut report.llm).await),
            None => None,
        };
        let aspect_k = cfg.aspect_k;
        let keyer = self.aspects.as_ref().map(|run| run.aspects.clone());
        let (entries, facts, calls, added, vectors, lists) = tokio::task::spawn_blocking(move || {
            let lists = match (keyer, keyed) {
                (Some(aspects), Some(llm)) => aspects.candidates(&entries, &facts, &vectors, &llm, aspect_k),
                _ => aspects::Candidates::default(),
            };
            let calls = calls(&entries, &facts, &vectors, &lists.per_fact, params, sizes)?;
            let added = (lists.facts_keyed, lists.facts_keyed_by_llm, calls.from_aspects);
            Ok::<_, candle_core::Error>((entries, facts, calls, added, vectors, lists))
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        report.timings.neighbours_ms = ms(step);
        if self.aspects.is_some() {
            let (facts_keyed, facts_keyed_by_llm, candidates_added) = added;
            report.aspects = Some(AspectReport { facts_keyed, facts_keyed_by_llm, candidates_added });
        }

        let facts_by_id: HashMap<String, Fact> = pending.iter().map(|f| (f.id.clone(), (*f).clone())).collect();
        let mut planner = Planner::new(ledger.memory.clone(), &facts_by_id, run.to_string(), now, today);
        let mut failures: Vec<(String, String)> = Vec::new();
        let mut stopped: Option<(DecideError, Vec<String>)> = None;
        let mut decide_wait = std::time::Duration::ZERO;
        let mut held: Vec<ProposedOp> = Vec::new();
        // The offline decider's hints: what holds for the whole pass once, each call's vectors
        // and keys looked up by id.
        let mut hints = (cfg.offline_folds && matches!(self.decider, Decider::Offline)).then(|| self.hints());
        let at: HashMap<&str, usize> = match hints {
            Some(_) => entries.iter().map(|e| e.id.as_str()).chain(facts.iter().map(|f| f.id.as_str())).zip(0..).collect(),
            None => HashMap::new(),
        };
        for (number, call) in calls.calls.iter().enumerate() {
            let fact_ids: Vec<String> = call.facts.iter().map(|&f| facts[f].id.clone()).collect();
            let mut entry_ids: Vec<String> = call.entries.iter().map(|&e| entries[e].id.clone()).collect();
            // What earlier calls made from facts linked to these.
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
            count_call(&mut report.packing, &doc, system_tokens, &met);
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
            if let Some(hints) = &mut hints {
                Pass::hints_for(hints, &doc, &at, entries.len(), &vectors, &lists);
            }
            let asked = std::time::Instant::now();
            let decided = self.decider.decide(&doc, today, &mut report.llm, hints.as_ref()).await;
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
                Err(err) if err.is_the_calls() => {
                    tracing::warn!(run = %run, facts = fact_ids.len(), error = %err, "call left pending");
                    let message = match &err {
                        DecideError::BadReply(m) => format!("unusable reply: {m}"),
                        other => other.to_string(),
                    };
                    failures.extend(fact_ids.iter().map(|f| (f.clone(), message.clone())));
                }
                Err(err) => {
                    // Every later call would fail the same way: stop asking, keep what was
                    // decided, and leave the rest pending at no cost to their attempts.
                    let rest: Vec<String> =
                        calls.calls[number..].iter().flat_map(|c| &c.facts).map(|&f| facts[f].id.clone()).collect();
                    tracing::warn!(run = %run, facts = rest.len(), error = %err, "decider unavailable; the rest of the pass waits for the next one");
                    report.stopped = Some(err.to_string());
                    stopped = Some((err, rest));
                    break;
                }
            }
        }
        report.timings.decide_ms = decide_wait.as_millis() as u64;
        let deferred = stopped.iter().flat_map(|(_, rest)| rest.iter().cloned());
        report.failed_facts = failures.iter().map(|(f, _)| f.clone()).chain(deferred).collect();
        let mut plan = planner.finish(ledger.memory.hash.clone());
        plan.llm = report.llm;
        plan.packing = Some(report.packing.clone());
        Ok(Planned { plan, held, failures, stopped, facts: facts_by_id })
    }
}

/// How big a decision call may be.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    budget_tokens: u64,
    /// Estimated tokens of the system prompt, sent with every call.
    system_tokens: u64,
    max_facts: usize,
}

/// The decision calls of a pass, with the links they were packed from (facts and entries are
/// indices into the pass's lists).
struct Calls {
    calls: Vec<pack::Call>,
    /// Per fact: its ranked entries.
    ranked: Vec<Vec<usize>>,
    /// Per fact: the facts it is linked to.
    related: Vec<Vec<usize>>,
    /// Per fact: the number of its call.
    call_of: Vec<usize>,
    /// (fact, entry) pairs the aspect keys added to what similarity ranked.
    from_aspects: usize,
}

/// Characters of `value` as JSON, which is what the token estimate counts.
fn json_chars<T: Serialize>(value: &T) -> u64 {
    serde_json::to_string(value).map_or(0, |s| s.chars().count() as u64)
}

/// Neighbour links, clusters and the packed calls of `entries` and `facts`, whose vectors follow
/// `vectors` in that order (entries first).
fn calls(
    entries: &[Neighbor],
    facts: &[Candidate],
    vectors: &[Vec<f32>],
    aspect_lists: &[Vec<usize>],
    params: NeighbourParams,
    sizes: Sizes,
) -> candle_core::Result<Calls> {
    let (entry_vecs, fact_vecs) = vectors.split_at(entries.len());
    let entry_nodes: Vec<Node> =
        entries.iter().zip(entry_vecs).map(|(e, v)| Node { id: &e.id, text: &e.content, vector: v }).collect();
    let fact_nodes: Vec<Node> =
        facts.iter().zip(fact_vecs).map(|(f, v)| Node { id: &f.id, text: &f.text, vector: v }).collect();
    let links = cluster::neighbours(&fact_nodes, &entry_nodes, aspect_lists, params)?;
    let related = links.related();
    // Calls are started and filled cluster by cluster, facts in pass order within each.
    let at: HashMap<&str, usize> = facts.iter().enumerate().map(|(i, f)| (f.id.as_str(), i)).collect();
    let order: Vec<usize> = cluster::clusters(&fact_nodes, &entry_nodes, &links)
        .iter()
        .flat_map(|c| {
            let mut members: Vec<usize> = c.facts.iter().map(|id| at[id.as_str()]).collect();
            members.sort_unstable();
            members
        })
        .collect();
    let mut entry_chars = vec![0; entries.len()];
    for &e in links.ranked.iter().flatten() {
        if entry_chars[e] == 0 {
            entry_chars[e] = json_chars(&entries[e]);
        }
    }
    let fact_chars: Vec<u64> = facts.iter().map(json_chars).collect();
    // An entry made from a fact: its text under a new id, dated like the fact.
    let added_chars: Vec<u64> = facts
        .iter()
        .map(|f| {
            let made = Neighbor {
                id: "m-00000000".into(),
                content: f.text.clone(),
                first_seen: f.date,
                updated: f.date,
                pinned: false,
            };
            json_chars(&made)
        })
        .collect();
    let frame = json_chars(&ClusterDoc::default());
    let room = sizes.budget_tokens.saturating_sub(sizes.system_tokens).saturating_mul(4).saturating_sub(frame);
    let calls = pack::pack(&PackInput {
        ranked: &links.ranked,
        related: &related,
        fact_chars: &fact_chars,
        entry_chars: &entry_chars,
        added_chars: &added_chars,
        order: &order,
        room,
        max_facts: sizes.max_facts.max(1),
    });
    let mut call_of = vec![0; facts.len()];
    for (number, call) in calls.iter().enumerate() {
        for &f in &call.facts {
            call_of[f] = number;
        }
    }
    Ok(Calls { calls, ranked: links.ranked, related, call_of, from_aspects: links.from_aspects })
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
