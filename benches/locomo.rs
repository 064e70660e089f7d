//! The offline decider on LoCoMo conversations: what it merges and replaces when a long
//! conversation is consolidated session by session, and whether search still finds the
//! evidence of each question.
//!
//! LoCoMo (Maharana et al., 2024, `snap-research/LoCoMo`, CC BY-NC 4.0) is not in this
//! repository: point `MEMFOLD_BENCH_LOCOMO` at its `locomo10.json`. Each session's
//! `observation` facts are added, dated by the session, with their dialogue id as source, and a
//! forced pass (no LLM) consolidates them. At the end:
//! - every applied op that is not an ADD (merges and replaces), fact beside entry, to be checked
//!   by hand, and the proposals waiting for a person, by rule;
//! - **evidence recall@10**: for each question (adversarial ones excepted) whose evidence is
//!   among the facts, whether one of the first 10 hits of a search for the question holds an
//!   evidence fact (a hit carries the facts it was made from).
//!
//! Settings: `MEMFOLD_BENCH_CONVERSATIONS` (`0,1,2`), `MEMFOLD_BENCH_EMBEDDER` (`local`, or
//! `minilm` with `MEMFOLD_TEST_MINILM_DIR`), `MEMFOLD_BENCH_FOLDS` (`on`; `off`: the text rules
//! alone, as before folds existed). Run: `cargo bench --bench locomo --profile dev`.

#[path = "common/locomo.rs"]
mod locomo;

use std::collections::{BTreeMap, HashMap};

use memfold::config::{Config, EmbeddingProvider};
use memfold::memory::{Memory, SearchRequest};
use memfold::planning::consolidate::pass::PassOptions;
use serde_json::Value;

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[tokio::main]
async fn main() {
    let Ok(path) = std::env::var("MEMFOLD_BENCH_LOCOMO") else {
        println!("locomo: set MEMFOLD_BENCH_LOCOMO to LoCoMo's locomo10.json (github.com/snap-research/LoCoMo)");
        return;
    };
    let data: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).expect("locomo10.json")).unwrap();
    let conversations: Vec<usize> =
        setting("MEMFOLD_BENCH_CONVERSATIONS", "0,1,2").split(',').map(|n| n.trim().parse().unwrap()).collect();
    let embedder = setting("MEMFOLD_BENCH_EMBEDDER", "local");
    let folds = setting("MEMFOLD_BENCH_FOLDS", "on") != "off";
    println!(
        "locomo: conversations {conversations:?}, embedder {embedder}, offline folds {}",
        if folds { "on" } else { "off" }
    );

    let (mut questions, mut found) = (0usize, 0usize);
    let bar = Config::default().consolidation.review_below_confidence;
    let mut totals: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &n in &conversations {
        let sample = &data[n];
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
        config.embedding.provider =
            if embedder == "minilm" { EmbeddingProvider::Minilm } else { EmbeddingProvider::Local };
        config.embedding.model_dir = std::env::var("MEMFOLD_TEST_MINILM_DIR").unwrap_or_default();
        config.consolidation.offline_folds = folds;
        Memory::init(&config).unwrap();
        let memory = Memory::open(config).await.unwrap();

        // Sessions in order, each consolidated before the next is told.
        let mut fact_text: HashMap<String, String> = HashMap::new();
        let mut fact_of_dia: HashMap<String, Vec<String>> = HashMap::new();
        let mut facts_told = 0;
        let mut applied: Vec<(String, String, Vec<String>, Option<f64>)> = Vec::new();
        let mut proposed: BTreeMap<String, usize> = BTreeMap::new();
        for news in locomo::sessions(sample) {
            let added = memory.add(memory.check_facts(news.clone()).unwrap()).unwrap();
            facts_told += added.len();
            for (fact, new) in added.iter().zip(&news) {
                fact_text.insert(fact.id.clone(), new.text.clone());
                for dia in locomo::turns(new.source.as_deref().unwrap_or_default()) {
                    fact_of_dia.entry(dia.to_string()).or_default().push(fact.id.clone());
                }
            }
            let report = memory.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
            for op in &report.ops {
                if op.confidence.is_some_and(|c| c < bar) {
                    // A proposal: stored for a person, not applied.
                    let rule = op.signals.first().map(String::as_str).unwrap_or("?");
                    *proposed.entry(rule.split(':').next().unwrap_or(rule).to_string()).or_default() += 1;
                    continue;
                }
                *totals.entry(op.op.as_str()).or_default() += 1;
                if op.op.as_str() != "ADD" {
                    let entry = memory.entry(op.target.as_deref().unwrap_or_default()).await.ok();
                    let before = entry.map(|e| e.content).unwrap_or_default();
                    applied.push((op.op.to_string(), before, op.facts.clone(), op.confidence));
                }
            }
        }
        let status = memory.status().await.unwrap();
        println!(
            "\n## conversation {n} ({}): {facts_told} facts, {} entries, {} proposals waiting in {} plans",
            sample["sample_id"].as_str().unwrap_or_default(),
            status.entries,
            status.proposals_waiting,
            status.plans_waiting
        );
        println!("proposals by rule: {proposed:?}; applied merges and replaces:");
        for (op, entry, facts, confidence) in &applied {
            let told: Vec<&str> = facts.iter().map(|f| fact_text.get(f).map(String::as_str).unwrap_or("?")).collect();
            println!("- {op} ({confidence:?}): {:?}\n    now: {entry:?}", told);
        }

        // Evidence recall@10.
        let (mut asked, mut hit) = (0usize, 0usize);
        for (question, evidence) in locomo::questions(sample, &fact_of_dia) {
            asked += 1;
            let request = SearchRequest { k: Some(10), ..SearchRequest::default() };
            let hits = memory.search(question, &request).await.unwrap();
            if hits.iter().any(|h| evidence.contains(&h.id) || h.sources.iter().any(|s| evidence.contains(s))) {
                hit += 1;
            }
        }
        println!("evidence recall@10: {:.3} ({hit} of {asked} questions)", hit as f64 / asked.max(1) as f64);
        questions += asked;
        found += hit;
    }
    println!("\nops applied: {totals:?}");
    println!("evidence recall@10 over all: {:.3} ({found} of {questions})", found as f64 / questions.max(1) as f64);
}
