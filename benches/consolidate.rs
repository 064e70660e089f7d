//! Benchmark: one consolidation pass over many new facts against many entries, with a fake LLM
//! that answers at once, so the time measured is memfold's own.
//!
//! `cargo bench --bench consolidate` (release). Sizes: MEMFOLD_BENCH_ENTRIES (default 50000)
//! and MEMFOLD_BENCH_FACTS (default 10000). Prints the pass timings, LLM calls per 100 facts,
//! prompt tokens per fact and peak RSS.

use std::time::Instant;

use memfold::config::Config;
use memfold::consolidate::pass::PassOptions;
use memfold::files::Root;
use memfold::files::archive::{self, NewFact};
use memfold::files::entries::{Entry, EntryFile, EntryMeta};
use memfold::memory::Memory;
use memfold::testkit::{FakeOpenAi, FakeReply};

const NAMES: &[&str] =
    &["Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena"];
const VERBS: &[&str] =
    &["likes", "visits", "cooks", "studies", "repairs", "paints", "collects", "teaches", "reads", "plays"];
const THINGS: &[&str] = &[
    "jazz records",
    "green tea",
    "old bicycles",
    "mountain trails",
    "chess openings",
    "sourdough bread",
    "watercolours",
    "vintage cameras",
    "board games",
    "Portuguese poetry",
    "kite surfing",
    "bonsai trees",
    "ramen",
    "astronomy",
];
const PLACES: &[&str] = &["Lisbon", "Berlin", "Osaka", "Lagos", "Quito", "Oslo", "Hanoi", "Perth", "Tunis", "Lima"];

/// A deterministic sentence for number `i`.
fn sentence(i: usize, salt: usize) -> String {
    let pick =
        |list: &[&'static str], k: usize| list[(i.wrapping_mul(2654435761).wrapping_add(k * 97 + salt)) % list.len()];
    format!("{} {} {} in {} (note {})", pick(NAMES, 1), pick(VERBS, 2), pick(THINGS, 3), pick(PLACES, 4), i % 997)
}

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

#[tokio::main]
async fn main() {
    let n_entries = env_usize("MEMFOLD_BENCH_ENTRIES", 50_000);
    let n_facts = env_usize("MEMFOLD_BENCH_FACTS", 10_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Root::new(dir.path());
    root.init().expect("init");

    let mut memory = EntryFile::default();
    for i in 0..n_entries {
        let meta = EntryMeta {
            first_seen: Some("2026-01-01".parse().unwrap()),
            updated: Some("2026-01-01".parse().unwrap()),
            ..EntryMeta::new(format!("m-{i:08x}"))
        };
        memory.push(Entry::new(meta, &sentence(i, 0)));
    }
    std::fs::write(root.memory(), memory.render()).expect("memory.md");
    let facts: Vec<NewFact> = (0..n_facts)
        .map(|i| NewFact {
            text: sentence(i * 5 % n_entries.max(1), 1),
            date: Some("2026-06-01".parse().unwrap()),
            source: None,
        })
        .collect();
    let now = "2026-06-01T12:00:00".parse().unwrap();
    for chunk in facts.chunks(1000) {
        archive::append(&root, chunk, now).expect("archive");
    }

    let llm = FakeOpenAi::start().await;
    llm.set_chat_handler(|_| FakeReply::Content(r#"{"ops":[],"lines":[]}"#.into()));
    let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
    config.llm = llm.llm_config();
    let memory = Memory::open(config).await.expect("open");
    let t = Instant::now();
    let done = memory.reindex(false, None).await.expect("initial index");
    let index_secs = t.elapsed().as_secs_f64();
    println!(
        "initial index: {} docs in {index_secs:.1}s ({:.0} docs/s)",
        done.stats.upserted,
        done.stats.upserted as f64 / index_secs
    );

    let wall = Instant::now();
    let report = memory.consolidate(PassOptions { force: true, dry_run: false }).await.expect("pass");
    let wall = wall.elapsed().as_secs_f64();
    let t = &report.timings;
    let without_llm = t.total_ms.saturating_sub(t.decide_ms);
    println!("pass over {n_facts} new facts against {n_entries} entries: {wall:.2}s wall clock");
    println!(
        "  total {:.2}s, excluding the LLM {:.2}s (embed {:.2}s, neighbours+clusters {:.2}s, decide wait {:.2}s, write {:.2}s, promote {:.2}s, reindex {:.2}s)",
        t.total_ms as f64 / 1e3,
        without_llm as f64 / 1e3,
        t.embed_ms as f64 / 1e3,
        t.neighbours_ms as f64 / 1e3,
        t.decide_ms as f64 / 1e3,
        t.write_ms as f64 / 1e3,
        t.promote_ms as f64 / 1e3,
        t.reindex_ms as f64 / 1e3
    );
    let decisions = report.clusters.len();
    println!(
        "  {decisions} decision calls: {:.1} per 100 facts; {} prompt tokens: {:.1} per fact; {} ops",
        decisions as f64 * 100.0 / n_facts as f64,
        report.llm.prompt_tokens,
        report.llm.prompt_tokens as f64 / n_facts as f64,
        report.ops.len()
    );
    println!("  peak RSS {:.0} MB", peak_rss_mb());
}
