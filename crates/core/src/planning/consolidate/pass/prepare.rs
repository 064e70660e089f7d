//! The first half of a pass: vectors for the entries and the new facts, each fact's ranked
//! neighbours (with the aspect keys' candidates), and the decision calls they are packed into.

use memfold_store::sys::guard;
use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{AspectReport, AspectRun, Pass, PassInput, PassReport, ms};
use crate::error::Error;
use crate::planning::consolidate::aspects::{self, Key};
use crate::planning::consolidate::cluster::{self, NeighbourParams, Node};
use crate::planning::consolidate::pack::{self, PackInput};
use crate::planning::run::ops::{Candidate, ClusterDoc, Neighbor};
use crate::planning::run::plan::neighbor;
use memfold_models::llm::{Usage, estimate_tokens};
use memfold_store::ledger::Ledger;

/// What a pass decides over: the entries it may show and its new facts, their vectors (entries
/// first), the aspect keys' candidates, and the calls they are packed into.
pub(super) struct Prepared {
    pub entries: Vec<Neighbor>,
    pub facts: Vec<Candidate>,
    pub vectors: Vec<Vec<f32>>,
    pub lists: aspects::Candidates,
    pub calls: Calls,
    /// Estimated tokens of the system prompt, sent with every call.
    pub system_tokens: u64,
}

impl Pass<'_> {
    /// Embed, rank each fact's neighbours and pack the calls, recording the time each took in
    /// `report`.
    pub(super) async fn prepare(&self, input: &PassInput<'_>, report: &mut PassReport) -> Result<Prepared, Error> {
        let cfg = &self.config;
        // Vectors for entries and new facts.
        let mut step = std::time::Instant::now();
        // A block a person must mend is left as it is, so no decider is asked to change it.
        let entries: Vec<Neighbor> =
            input.ledger.memory.entries().filter(|e| !e.needs_mending()).map(|e| neighbor(e, input.today)).collect();
        let facts: Vec<Candidate> =
            input.pending.iter().map(|f| Candidate { id: f.id.clone(), text: f.text.clone(), date: f.date }).collect();
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
            Some(run) => Some(run.llm_keys(input.ledger, &entries, &facts, &mut report.llm).await),
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
        Ok(Prepared { entries, facts, vectors, lists, calls, system_tokens })
    }
}

impl Pass<'_> {
    /// What the offline decider knows about every call of the pass besides its texts: the
    /// single-valued attributes, the rejected pairs, whether the vectors read meaning. The
    /// vectors and keys of a call are added by [`Pass::hints_for`].
    pub(super) fn hints(&self) -> crate::planning::consolidate::rules::Hints {
        crate::planning::consolidate::rules::Hints {
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
    pub(super) fn hints_for(
        hints: &mut crate::planning::consolidate::rules::Hints,
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
                let cache = guard(&self.cache);
                facts
                    .iter()
                    .filter(|f| cache.get(&f.text).is_none())
                    .map(|f| (f.id.as_str(), f.text.as_str()))
                    .collect()
            };
            if !missing.is_empty() {
                match memfold_models::llm::keys::keys(&keying.chat, &keying.system, &missing).await {
                    Ok((mut keys, cost)) => {
                        usage.add(cost);
                        // A fact the reply left out is cached without keys: it is not asked again.
                        let keyed: Vec<(String, Vec<String>)> = missing
                            .iter()
                            .map(|&(id, text)| (text.to_string(), keys.remove(id).unwrap_or_default()))
                            .collect();
                        guard(&self.cache).insert(&keyed);
                    }
                    Err(e) => {
                        if let memfold_models::llm::LlmError::Unparseable { usage: cost, .. } = &e {
                            usage.add(*cost);
                        }
                        tracing::warn!(error = %e, facts = missing.len(), "keying call failed; the pass goes on with offline keys");
                    }
                }
            }
        }
        let cache = guard(&self.cache);
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
pub(super) struct Calls {
    pub(super) calls: Vec<pack::Call>,
    /// Per fact: its ranked entries.
    pub(super) ranked: Vec<Vec<usize>>,
    /// Per fact: the facts it is linked to.
    pub(super) related: Vec<Vec<usize>>,
    /// Per fact: the number of its call.
    pub(super) call_of: Vec<usize>,
    /// (fact, entry) pairs the aspect keys added to what similarity ranked.
    pub(super) from_aspects: usize,
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
