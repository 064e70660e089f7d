//! Promotion benchmark: what rewriting `MEMORY.md` costs in LLM tokens over a growing memory.
//!
//! A stream of consolidation passes (default 60, of 5–30 facts each, one day apart) runs against
//! a scripted fake LLM ([`memfold::testkit::FakeOpenAi`]): decision calls add every fact, except
//! that a fact about an attribute a neighbouring entry already states ("Ana's employer is …")
//! replaces that entry; promotion calls are answered by [`memfold::testkit::promotion_reply`].
//! After each pass a few searches are recorded in the recall log, most hits on a few entries. The bench prints the
//! promotion prompt tokens per new fact (target ≤ 150), and the promotion prompt per call early
//! and late in the stream, to show that it follows what changed and not the memory's size. The
//! figures are deterministic (tokens are characters / 4, as the fake counts them).
//!
//! `cargo bench --bench promote` (release), or in a debug build for a quick check:
//! `cargo test --bench promote`. Knobs: MEMFOLD_BENCH_PASSES (default 60),
//! MEMFOLD_BENCH_MAX_LINES (`memory_max_lines`, default 200).

use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use serde_json::{Value, json};

use memfold::config::Config;
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::Root;
use memfold::store::archive::{self, NewFact};
use memfold::testkit::{FakeOpenAi, FakeReply, estimate_tokens, promotion_reply};

const NAMES: &[&str] = &["Ana", "Bruno", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi"];
const ATTRIBUTES: &[&str] = &["employer", "home city", "favourite band", "car", "phone number", "gym"];
const VALUES: &[&str] = &["Acme", "Lisbon", "Radiohead", "a red Fiat", "555-0199", "Iron Temple", "Oslo", "Globex"];
const VERBS: &[&str] = &["cooked", "visited", "repaired", "painted", "read about", "booked", "planned", "bought"];
const THINGS: &[&str] = &["a sourdough loaf", "the old bicycle", "a trip to Porto", "a chess set", "tickets for jazz"];

/// A deterministic pseudo-random number below `n`.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// The subject of an attribute fact ("Ana's employer"), if it is one.
fn subject(text: &str) -> Option<&str> {
    text.split_once(" is ").map(|(s, _)| s).filter(|s| s.contains("'s "))
}

/// Decision replies: REPLACE a neighbour that states the same attribute, add everything else.
fn decide(doc: &Value) -> FakeReply {
    let mut ops = Vec::new();
    let mut replaced = std::collections::HashSet::new();
    for c in doc["candidates"].as_array().into_iter().flatten() {
        let text = c["text"].as_str().unwrap_or_default();
        let target = doc["neighbors"].as_array().into_iter().flatten().find(|n| {
            let content = n["content"].as_str().unwrap_or_default();
            subject(text).is_some() && subject(content) == subject(text) && !replaced.contains(&n["id"])
        });
        if let Some(n) = target {
            replaced.insert(n["id"].clone());
            ops.push(json!({"op": "REPLACE", "target": n["id"], "facts": [c["id"]], "content": text, "why": "update"}));
        }
    }
    FakeReply::Content(json!({ "ops": ops }).to_string())
}

/// One promotion call as the fake saw it.
struct Call {
    pass: usize,
    tokens: u64,
    entries: usize,
    lines: usize,
}

#[tokio::main]
async fn main() {
    let passes: usize = std::env::var("MEMFOLD_BENCH_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let max_lines: usize = std::env::var("MEMFOLD_BENCH_MAX_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Root::new(dir.path());
    root.init().expect("init");

    let llm = FakeOpenAi::start().await;
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let current_pass = Arc::new(Mutex::new(0usize));
    let decide_tokens = Arc::new(Mutex::new(0u64));
    {
        let (calls, current_pass, decide_tokens) = (calls.clone(), current_pass.clone(), decide_tokens.clone());
        llm.set_chat_handler(move |body| {
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let tokens: u64 = messages.iter().map(|m| estimate_tokens(m["content"].as_str().unwrap_or_default())).sum();
            let user: Value = messages
                .last()
                .and_then(|m| serde_json::from_str(m["content"].as_str().unwrap_or_default()).ok())
                .unwrap_or_default();
            match promotion_reply(body) {
                Some(reply) => {
                    let count = |field: &str| user[field].as_array().map_or(0, Vec::len);
                    let pass = *current_pass.lock().unwrap();
                    calls.lock().unwrap().push(Call { pass, tokens, entries: count("entries"), lines: count("lines") });
                    reply
                }
                None => {
                    *decide_tokens.lock().unwrap() += tokens;
                    decide(&user)
                }
            }
        });
    }
    let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    config.llm = llm.llm_config();
    config.promotion.memory_max_lines = max_lines;
    let memory = Memory::open(config.clone()).await.expect("open");

    let mut rng = Lcg(0x5eed);
    let start: NaiveDate = "2026-01-01".parse().unwrap();
    let (mut facts_total, mut entries_at, mut facts_per_pass) = (0usize, Vec::new(), Vec::new());
    let started = std::time::Instant::now();
    for p in 0..passes {
        *current_pass.lock().unwrap() = p;
        let date = start + chrono::Duration::days(p as i64);
        let n = 5 + rng.below(26);
        let facts: Vec<NewFact> = (0..n)
            .map(|i| {
                let name = NAMES[rng.below(NAMES.len())];
                let text = if rng.below(10) < 3 {
                    format!(
                        "{name}'s {} is {}.",
                        ATTRIBUTES[rng.below(ATTRIBUTES.len())],
                        VALUES[rng.below(VALUES.len())]
                    )
                } else {
                    let (verb, thing) = (VERBS[rng.below(VERBS.len())], THINGS[rng.below(THINGS.len())]);
                    format!("{name} {verb} {thing} on day {p} (note {i}).")
                };
                NewFact { text, date: Some(date), source: None }
            })
            .collect();
        facts_total += facts.len();
        facts_per_pass.push(facts.len());
        archive::append(&root, &facts, date.and_hms_opt(12, 0, 0).unwrap()).expect("archive");
        let report = memory.consolidate(PassOptions { force: true, dry_run: false }).await.expect("pass");
        assert!(report.failed_facts.is_empty(), "pass {p}: {:?}", report.failed_facts);
        let entries = memfold::store::ledger::Ledger::load(&root).expect("ledger").memory.entries().count();
        entries_at.push(entries);
        // The agent searches: three questions, five hits each, most of them among a few entries
        // (the hit's position is drawn below a random bound, so early entries come up more).
        let ids: Vec<String> =
            memfold::store::ledger::Ledger::load(&root).unwrap().memory.entries().map(|e| e.id().to_string()).collect();
        for q in 0..3 {
            let hits: Vec<String> = (0..5)
                .map(|_| {
                    let bound = rng.below(ids.len()) + 1;
                    ids[rng.below(bound)].clone()
                })
                .collect();
            memfold::store::recall::record(&root, &format!("question {p}.{q}"), &hits, config.recall.window_days)
                .expect("recall");
        }
    }
    let secs = started.elapsed().as_secs_f64();

    let calls = calls.lock().unwrap();
    let promotion_tokens: u64 = calls.iter().map(|c| c.tokens).sum();
    let decide_tokens = *decide_tokens.lock().unwrap();
    let entries = *entries_at.last().unwrap_or(&0);
    println!(
        "{passes} passes, {facts_total} facts, {entries} entries at the end, memory_max_lines {max_lines} ({secs:.0} s)"
    );
    println!(
        "promotion: {} calls, {promotion_tokens} prompt tokens, {:.1} per new fact (target <= 150); decisions: {:.1} per fact",
        calls.len(),
        promotion_tokens as f64 / facts_total as f64,
        decide_tokens as f64 / facts_total as f64
    );
    let sixth = (passes / 6).max(1);
    for (label, range) in [("first", 0..sixth), ("last", passes.saturating_sub(sixth)..passes)] {
        let window: Vec<&Call> = calls.iter().filter(|c| range.contains(&c.pass)).collect();
        let facts: usize = facts_per_pass[range.clone()].iter().sum();
        let tokens: u64 = window.iter().map(|c| c.tokens).sum();
        let mean = |f: &dyn Fn(&Call) -> f64| window.iter().map(|c| f(c)).sum::<f64>() / window.len().max(1) as f64;
        println!(
            "  {label} {sixth} passes ({}–{} entries, {facts} facts): {} calls, {:.1} tokens per new fact, {:.0} per call (max {}), {:.1} entries and {:.1} lines shown per call",
            entries_at[range.start],
            entries_at[range.end - 1],
            window.len(),
            tokens as f64 / facts.max(1) as f64,
            mean(&|c| c.tokens as f64),
            window.iter().map(|c| c.tokens).max().unwrap_or(0),
            mean(&|c| c.entries as f64),
            mean(&|c| c.lines as f64),
        );
    }
    let largest = calls.iter().max_by_key(|c| c.tokens);
    if let Some(c) = largest {
        println!("  largest call: pass {}, {} tokens, {} entries, {} lines", c.pass, c.tokens, c.entries, c.lines);
    }
}
