//! Index benchmark: sync throughput, search latency and peak memory over synthetic documents.
//!
//! Run in release: `cargo bench --bench index` (sizes default to 10k and 100k rows; set
//! `MEMFOLD_BENCH_SIZES=2000,20000` to change them). Per size it reports
//! - a full sync of every doc into an empty index without the ANN index (embed + write + full-text index),
//! - building the ANN vector index (what the first sync past the threshold adds),
//! - an incremental sync changing 1% of the docs,
//! - search p50 / p99 over 200 queries, without and with an as-of filter, searching with
//!   lance's indices and then with the vectors held in memory (as the daemon does),
//! - how many of the exact 10 nearest entries and facts of each query the vector leg's 40
//!   candidates hold (the ANN index's recall, against a brute-force scan done here),
//!
//! and at the end the process's peak RSS (VmHWM). Targets: sync ≥ 5k docs/s with the local
//! embedder, search p50 < 10 ms at 100k rows.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use memfold::index::{Doc, DocKind, Index, IndexTuning, Scope, SearchOpts};
use memfold::models::embed::local::LocalEmbedder;

const QUERIES: usize = 200;
const DIM: usize = 384;

/// A deterministic pseudo-random sequence (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A vocabulary of pronounceable pseudo-words; word frequency is skewed like real text.
fn vocabulary(rng: &mut Rng, size: usize) -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ren", "to", "sa", "vel", "qui", "dor", "ne", "fa", "zu", "ber", "li", "mon", "ta", "gri",
        "so", "pel", "an", "ro", "ix", "el", "un",
    ];
    (0..size)
        .map(|_| (0..2 + rng.below(2)).map(|_| SYLLABLES[rng.below(SYLLABLES.len())]).collect::<String>())
        .collect()
}

fn sentence(rng: &mut Rng, words: &[String], len: usize) -> String {
    (0..len)
        .map(|_| {
            // Squaring a uniform draw favours the first words of the vocabulary.
            let u = rng.below(1 << 20) as f64 / f64::from(1 << 20);
            words[((u * u) * words.len() as f64) as usize].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn docs(n: usize, words: &[String], rng: &mut Rng) -> Vec<Doc> {
    let start = NaiveDate::from_ymd_opt(2025, 1, 1).unwrap();
    (0..n)
        .map(|i| {
            let from = start + chrono::Duration::days(rng.below(700) as i64);
            let len = 8 + rng.below(16);
            let text = sentence(rng, words, len);
            let (key, kind, path, until) = match i % 20 {
                0 => (
                    format!("m-{i}@1"),
                    DocKind::History,
                    "consolidated/history.md".to_string(),
                    Some(from + chrono::Duration::days(30)),
                ),
                1..=5 => (format!("f-{i}"), DocKind::Fact, format!("archive/{from}.md"), None),
                _ => (format!("m-{i}"), DocKind::Entry, "consolidated/memory.md".to_string(), None),
            };
            Doc {
                id: key.split('@').next().unwrap().to_string(),
                key,
                kind,
                text,
                path,
                sources: vec![format!("f-src-{i}")],
                valid_from: from,
                valid_until: until,
                pinned: i % 97 == 0,
            }
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

async fn search_latency(index: &Index, queries: &[String], opts: &SearchOpts) -> (Duration, Duration) {
    // Warm caches once.
    index.search(&queries[0], opts).await.expect("search");
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let hits = index.search(q, opts).await.expect("search");
        times.push(t.elapsed());
        assert!(hits.len() <= opts.k);
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

async fn bench(n: usize, dir: &Path) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let words = vocabulary(&mut rng, 5_000);
    let mut docs = docs(n, &words, &mut rng);
    let embedder = Arc::new(LocalEmbedder::new(DIM));
    let tuning = tuning();
    let no_ann = IndexTuning { ann_min_rows: usize::MAX, ..tuning.clone() };

    let index = Index::open_with(dir, embedder.clone(), no_ann).await.expect("open");
    let t = Instant::now();
    let stats = index.sync(&docs, Scope::All, None).await.expect("sync");
    let full = t.elapsed();
    assert_eq!(stats.upserted, n);
    println!(
        "{n:>7} rows  full sync            {:>8.2} s  {:>8.0} docs/s",
        full.as_secs_f64(),
        n as f64 / full.as_secs_f64()
    );
    drop(index);

    // Reopened with the default threshold, an unchanged sync only builds the ANN index.
    let index = Index::open_with(dir, embedder.clone(), tuning.clone()).await.expect("open");
    let t = Instant::now();
    index.sync(&docs, Scope::All, None).await.expect("sync");
    if n >= tuning.ann_min_rows {
        println!("{n:>7} rows  ANN index build       {:>8.2} s", t.elapsed().as_secs_f64());
    } else {
        println!("{n:>7} rows  no ANN index below {} rows (flat search)", IndexTuning::default().ann_min_rows);
    }

    for d in docs.iter_mut().step_by(100) {
        d.text.push_str(" revised");
    }
    let changed = docs.len().div_ceil(100);
    let t = Instant::now();
    let stats = index.sync(&docs, Scope::All, None).await.expect("sync");
    let incremental = t.elapsed();
    assert_eq!(stats.upserted, changed);
    println!(
        "{n:>7} rows  1% changed sync       {:>8.2} s  {:>8.0} docs/s",
        incremental.as_secs_f64(),
        changed as f64 / incremental.as_secs_f64()
    );

    let queries: Vec<String> = (0..QUERIES)
        .map(|_| {
            let len = 2 + rng.below(3);
            sentence(&mut rng, &words, len)
        })
        .collect();
    let today = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
    let opts = SearchOpts {
        k: 10,
        as_of: None,
        dated: None,
        history: false,
        kinds: None,
        recency_weight: 0.1,
        recency_half_life_days: 90.0,
        today,
        uses: None,
        decay_weight: 0.0,
        decay_half_life_days: 180.0,
    };
    let (p50, p99) = search_latency(&index, &queries, &opts).await;
    println!("{n:>7} rows  search                p50 {:>6.2} ms  p99 {:>6.2} ms", ms(p50), ms(p99));
    let as_of = SearchOpts { as_of: NaiveDate::from_ymd_opt(2025, 9, 1), ..opts.clone() };
    let (p50, p99) = search_latency(&index, &queries, &as_of).await;
    println!("{n:>7} rows  search --as-of        p50 {:>6.2} ms  p99 {:>6.2} ms", ms(p50), ms(p99));
    let (among_40, top_10) = ann_recall(&index, &embedder, &docs, &queries).await;
    println!("{n:>7} rows  exact top 10 among the vector leg's 40   {:>5.1} %", 100.0 * among_40);
    println!("{n:>7} rows  exact top 10 among its first 10 (true recall@10)   {:>5.1} %", 100.0 * top_10);
    // What a daemon does: the vectors held in memory, scanned whole (index/held.rs).
    index.hold_vectors();
    let t = Instant::now();
    while !index.vectors_held().await {
        assert!(t.elapsed() < Duration::from_secs(120), "the vectors were never held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("{n:>7} rows  vectors held after    {:>8.2} s", t.elapsed().as_secs_f64());
    let (p50, p99) = search_latency(&index, &queries, &opts).await;
    println!("{n:>7} rows  search, vectors held  p50 {:>6.2} ms  p99 {:>6.2} ms", ms(p50), ms(p99));
    let (p50, p99) = search_latency(&index, &queries, &as_of).await;
    println!("{n:>7} rows  search --as-of, held  p50 {:>6.2} ms  p99 {:>6.2} ms", ms(p50), ms(p99));
    let (among_40, top_10) = ann_recall(&index, &embedder, &docs, &queries).await;
    println!("{n:>7} rows  held: exact top 10 among the vector leg's 40   {:>5.1} %", 100.0 * among_40);
    println!("{n:>7} rows  held: exact top 10 among its first 10 (true recall@10)   {:>5.1} %", 100.0 * top_10);
}

/// The index tuning, with `MEMFOLD_BENCH_REFINE=FACTOR` to try another re-ranking depth.
fn tuning() -> IndexTuning {
    let mut tuning = IndexTuning::default();
    if let Some(refine) = std::env::var("MEMFOLD_BENCH_REFINE").ok().and_then(|v| v.parse().ok()) {
        tuning.vector_refine_factor = refine;
    }
    println!("vector leg refine factor {}", tuning.vector_refine_factor);
    tuning
}

/// The share of each query's exact 10 nearest docs (entries and facts, by cosine over the
/// local embedder's normalised vectors) that the vector leg's 40 candidates hold, and that its
/// first 10 hold (what a search's vector leg ranks 1 to 10), averaged.
async fn ann_recall(index: &Index, embedder: &LocalEmbedder, docs: &[Doc], queries: &[String]) -> (f64, f64) {
    const CANDIDATES: usize = 40;
    const EXACT: usize = 10;
    let query_vectors: Vec<Vec<f32>> = queries.iter().map(|q| embedder.vector(q)).collect();
    // Per query, the best EXACT (score, doc index) so far, streaming over the docs so that no
    // copy of every vector inflates the peak RSS this bench reports.
    let mut best: Vec<Vec<(f32, usize)>> = vec![Vec::with_capacity(EXACT + 1); queries.len()];
    for (i, doc) in docs.iter().enumerate() {
        if doc.kind == DocKind::History {
            continue;
        }
        let v = embedder.vector(&doc.text);
        for (q, top) in query_vectors.iter().zip(&mut best) {
            let score: f32 = q.iter().zip(&v).map(|(a, b)| a * b).sum();
            if top.len() < EXACT || score > top[EXACT - 1].0 {
                let at = top.partition_point(|(s, _)| *s >= score);
                top.insert(at, (score, i));
                top.truncate(EXACT);
            }
        }
    }
    let (mut among_40, mut top_10) = (0.0, 0.0);
    for (q, top) in query_vectors.iter().zip(&best) {
        let near = index.nearest(q, &[DocKind::Entry, DocKind::Fact], CANDIDATES, &[]).await.expect("nearest");
        let share = |n: usize| {
            let near: std::collections::HashSet<&str> = near.iter().take(n).map(|(k, _)| k.as_str()).collect();
            top.iter().filter(|(_, i)| near.contains(docs[*i].key.as_str())).count() as f64 / top.len() as f64
        };
        among_40 += share(CANDIDATES);
        top_10 += share(EXACT);
    }
    (among_40 / queries.len() as f64, top_10 / queries.len() as f64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let sizes: Vec<usize> = std::env::var("MEMFOLD_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    for n in sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        runtime.block_on(bench(n, &dir.path().join(".memfold").join("index")));
    }
    // Reindex throughput with in-process MiniLM (uncached: every text is embedded).
    if let Ok(model_dir) = std::env::var("MEMFOLD_BENCH_MINILM_DIR") {
        let n: usize = std::env::var("MEMFOLD_BENCH_MINILM_DOCS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000);
        let embedder =
            Arc::new(memfold::models::embed::MiniLmEmbedder::load(Path::new(&model_dir), 32).expect("minilm model"));
        let dir = tempfile::tempdir().expect("temp dir");
        runtime.block_on(async {
            let mut rng = Rng(7);
            let words = vocabulary(&mut rng, 5_000);
            let docs = docs(n, &words, &mut rng);
            let index = Index::open(&dir.path().join("index"), embedder).await.expect("open");
            let t = Instant::now();
            index.sync(&docs, Scope::All, None).await.expect("sync");
            let secs = t.elapsed().as_secs_f64();
            println!("{n:>7} rows  full sync (minilm)   {secs:>8.2} s  {:>8.0} docs/s", n as f64 / secs);
        });
    }
    match peak_rss_mib() {
        Some(mib) => println!("peak RSS {mib:.0} MiB"),
        None => println!("peak RSS unavailable (no /proc/self/status)"),
    }
}
