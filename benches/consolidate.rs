//! Benchmark: consolidation passes with a fake LLM that answers at once, so the time measured is
//! memfold's own, and the LLM cost is what the packing of facts into calls asks for.
//!
//! `cargo bench --bench consolidate` (release) runs two passes:
//! - a daily pass: the 60 update facts of `fixtures/updates.tsv` against their 60 entries among
//!   1,940 generated distractors (2,000 entries);
//! - a large pass: MEMFOLD_BENCH_FACTS (default 10000) generated facts against
//!   MEMFOLD_BENCH_ENTRIES (default 50000) generated entries, all distinct sentences of ten
//!   shapes about people, places and things (`tests/common/life.rs`).
//!
//! The fake LLM answers every decision call with a mix of ops, as a real one would on a day
//! of updates ([`mixed_reply`]): of the candidates shown with neighbours, one in six replaces
//! a neighbour and one in six is a duplicate of one, the rest are added, and a leftover
//! neighbour is merged into another, so about a third of the ops change or fold an entry and
//! the pass writes history, as real passes do; every other ADD links its entry to one of the
//! call's entries (`MEMFOLD_BENCH_LINKS=0`: none).
//!
//! Each prints the pass timings, the coverage (share of (fact, ranked entry) pairs that met in the
//! fact's call), decision calls per fact, prompt tokens per fact (whole prompt, system prompt
//! included, as the fake server counted them: characters / 4) and peak RSS.

use std::time::Instant;

use memfold::config::Config;
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::Root;
use memfold::store::archive::{self, NewFact};
use memfold::store::entries::{Entry, EntryFile, EntryMeta};
use memfold::testkit::{FakeOpenAi, FakeReply};

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// Fields the bench does not read are still part of the shared test data.
#[allow(dead_code)]
#[path = "../tests/common/life.rs"]
mod life;

/// Entries and facts of the daily pass.
fn daily() -> (Vec<String>, Vec<String>) {
    let updates = life::updates();
    let distractors = life::distractors(2000 - updates.len());
    let every = distractors.len() / updates.len();
    let mut entries = Vec::with_capacity(2000);
    for (j, text) in distractors.into_iter().enumerate() {
        if j % every == 0 && j / every < updates.len() {
            entries.push(updates[j / every].old.clone());
        }
        entries.push(text);
    }
    (entries, updates.into_iter().map(|u| u.new).collect())
}

/// Entries and facts of the large pass: distinct sentences, entries first.
fn large(n_entries: usize, n_facts: usize) -> (Vec<String>, Vec<String>) {
    let mut texts = life::distractors(n_entries + n_facts);
    let facts = texts.split_off(n_entries);
    (texts, facts)
}

/// A decision answered with a mix of ops: candidate j replaces a neighbour (j % 6 == 0), is a
/// duplicate of one (j % 6 == 3) or is added; one more neighbour, if any is left, is merged
/// into another. Each neighbour is the target of one op at most. Anything else (a promotion)
/// gets an empty answer, which the offline ranking replaces.
/// Whether the fake LLM links ADDs to entries (`MEMFOLD_BENCH_LINKS`, default on).
fn links() -> bool {
    std::env::var("MEMFOLD_BENCH_LINKS").map_or(true, |v| v != "0")
}

fn mixed_reply(request: &serde_json::Value) -> FakeReply {
    use serde_json::json;
    let user = request["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str());
    let doc: serde_json::Value = user
        .and_then(|u| serde_json::Deserializer::from_str(u).into_iter::<serde_json::Value>().next())
        .and_then(Result::ok)
        .unwrap_or_default();
    let (Some(candidates), Some(neighbours)) = (doc["candidates"].as_array(), doc["neighbors"].as_array()) else {
        return FakeReply::Content(json!({"lines": []}).to_string());
    };
    let mut free = neighbours.iter();
    let mut ops = Vec::new();
    for (j, c) in candidates.iter().enumerate() {
        let op = match j % 6 {
            0 => free.next().map(|n| {
                let content = format!("{} {}", n["content"].as_str().unwrap_or(""), c["text"].as_str().unwrap_or(""));
                json!({"op": "REPLACE", "target": n["id"], "facts": [c["id"]], "content": content, "why": "update"})
            }),
            3 => free.next().map(|n| json!({"op": "DUPLICATE", "target": n["id"], "facts": [c["id"]]})),
            _ => None,
        };
        // Every other ADD is related to the call's first entry (with `MEMFOLD_BENCH_LINKS=0`,
        // none: the pass as it was before links).
        let link = links() && j % 2 == 1 && !neighbours.is_empty();
        ops.push(op.unwrap_or_else(|| match link {
            true => json!({"op": "ADD", "facts": [c["id"]], "content": c["text"],
                           "related": [{"id": neighbours[0]["id"], "shares": "bench"}]}),
            false => json!({"op": "ADD", "facts": [c["id"]], "content": c["text"]}),
        }));
    }
    if let (Some(gone), Some(kept)) = (free.next(), free.next()) {
        ops.push(json!({"op": "REMOVE", "target": gone["id"], "into": kept["id"], "why": "same"}));
    }
    FakeReply::Content(json!({ "ops": ops }).to_string())
}

#[tokio::main]
async fn main() {
    let (entries, facts) = daily();
    run("daily pass", &entries, &facts).await;
    let (entries, facts) = large(env_usize("MEMFOLD_BENCH_ENTRIES", 50_000), env_usize("MEMFOLD_BENCH_FACTS", 10_000));
    run("large pass", &entries, &facts).await;
    println!("peak RSS {:.0} MB", peak_rss_mb());
}

async fn run(name: &str, entries: &[String], facts: &[String]) {
    let (n_entries, n_facts) = (entries.len(), facts.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Root::new(dir.path());
    root.init().expect("init");

    let mut memory = EntryFile::default();
    for (i, text) in entries.iter().enumerate() {
        let meta = EntryMeta {
            first_seen: Some("2026-01-01".parse().unwrap()),
            updated: Some("2026-01-01".parse().unwrap()),
            ..EntryMeta::new(format!("m-{i:08x}"))
        };
        memory.push(Entry::new(meta, text));
    }
    std::fs::write(root.memory(), memory.render()).expect("memory.md");
    let facts: Vec<NewFact> = facts
        .iter()
        .map(|text| NewFact { text: text.clone(), date: Some("2026-06-01".parse().unwrap()), source: None })
        .collect();
    let now = "2026-06-01T12:00:00".parse().unwrap();
    for chunk in facts.chunks(1000) {
        archive::append(&root, chunk, now).expect("archive");
    }

    let llm = FakeOpenAi::start().await;
    llm.set_chat_handler(mixed_reply);
    let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    config.llm = llm.llm_config();
    let memory = Memory::open(config).await.expect("open");
    let t = Instant::now();
    let done = memory.reindex(false, None).await.expect("initial index");
    let index_secs = t.elapsed().as_secs_f64();
    println!(
        "{name}: initial index: {} docs in {index_secs:.1}s ({:.0} docs/s)",
        done.stats.upserted,
        done.stats.upserted as f64 / index_secs
    );

    let wall = Instant::now();
    let report = memory.consolidate(PassOptions { force: true, dry_run: false }).await.expect("pass");
    let wall = wall.elapsed().as_secs_f64();
    let t = &report.timings;
    let without_llm = t.total_ms.saturating_sub(t.decide_ms);
    println!("{name} over {n_facts} new facts against {n_entries} entries: {wall:.2}s wall clock");
    println!(
        "  total {:.2}s, excluding the LLM {:.2}s (embed {:.2}s, neighbours+packing {:.2}s, decide wait {:.2}s, write {:.2}s, promote {:.2}s, reindex {:.2}s)",
        t.total_ms as f64 / 1e3,
        without_llm as f64 / 1e3,
        t.embed_ms as f64 / 1e3,
        t.neighbours_ms as f64 / 1e3,
        t.decide_ms as f64 / 1e3,
        t.write_ms as f64 / 1e3,
        t.promote_ms as f64 / 1e3,
        t.reindex_ms as f64 / 1e3
    );
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for op in &report.ops {
        *kinds.entry(op.op.as_str()).or_default() += 1;
    }
    println!("  ops applied: {kinds:?}; {} dropped by validation", report.dropped.len());
    let packing = &report.packing;
    let decisions = packing.calls;
    // Every request but the last (promotion) is a decision call.
    let requests = llm.chat_requests();
    let decision_tokens: u64 = requests
        .iter()
        .take(decisions)
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .map(|m| (m["content"].as_str().unwrap_or("").chars().count() as u64).div_ceil(4))
        .sum();
    let nodes = packing.nodes.iter().sum::<usize>() as f64 / decisions.max(1) as f64;
    let most = packing.prompt_tokens.iter().max().copied().unwrap_or(0);
    println!(
        "  coverage {} ({} of {} fact-entry pairs); {decisions} decision calls: {:.3} per fact, {nodes:.1} nodes per call, {:.0} prompt tokens per call (most {most}, {} over the {}-token budget)",
        packing.coverage,
        packing.pairs_in_call,
        packing.pairs,
        decisions as f64 / n_facts as f64,
        decision_tokens as f64 / decisions.max(1) as f64,
        packing.over_budget,
        packing.budget_tokens,
    );
    println!(
        "  {decision_tokens} decision prompt tokens: {:.0} per fact (the pass's estimate: {}); {} ops",
        decision_tokens as f64 / n_facts as f64,
        packing.prompt_tokens.iter().sum::<u64>(),
        report.ops.len()
    );
}
