//! Ingest benchmark: `POST /facts` throughput and latency against a running `memfold serve`.
//!
//! Spawns the `memfold` binary built with the bench (same profile) on a fresh root and a free
//! loopback port, then K concurrent connections post batches of B facts until N facts are
//! posted or the time bound passes, and prints facts/s, requests/s and p50/p99 request
//! latency; then, on the daemon as that left it, the time from posting a fact to the first
//! search that finds it. At the end it checks that the archive holds every acknowledged fact.
//!
//! Run: `cargo bench --bench ingest` (release; target ≥ 2000 facts/s). Knobs (environment):
//! `MEMFOLD_BENCH_FACTS` (N, default 20000), `MEMFOLD_BENCH_CONNECTIONS` (K, default 8),
//! `MEMFOLD_BENCH_BATCH` (B, facts per request, default 1 and 20: one run each),
//! `MEMFOLD_BENCH_SECONDS` (time bound per run, default 30).

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
use run::memfold;

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn knobs(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        run::stop(&mut self.0, Duration::from_secs(15));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Start a daemon on a fresh root and wait for `/healthz`; its URL and bearer token.
async fn start(root: &Path, client: &reqwest::Client) -> (Daemon, String, String) {
    assert!(memfold(root).args(["init"]).stdout(Stdio::null()).status().unwrap().success());
    let token = std::fs::read_to_string(root.join(".memfold/token")).expect("init made the token").trim().to_string();
    let (child, base) = run::serve(root, &[], client, Duration::from_secs(60)).await;
    let daemon = Daemon(child);
    (daemon, base, token)
}

async fn run(total: usize, connections: usize, batch: usize, bound: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let client = reqwest::Client::builder().pool_max_idle_per_host(connections).build().unwrap();
    let (daemon, base, token) = start(&root, &client).await;
    let token = Arc::new(token);
    let url = Arc::new(format!("{base}/facts"));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..connections {
        let (client, url, next, token) = (client.clone(), url.clone(), next.clone(), token.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut acknowledged = 0;
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= total || started.elapsed() > bound {
                    break;
                }
                let n = batch.min(total - first);
                let facts: Vec<Value> = (first..first + n)
                    .map(|i| json!({"text": format!("bench fact {i} from connection {worker}: likes item {}", i % 97)}))
                    .collect();
                let sent = Instant::now();
                let request = client.post(url.as_str()).bearer_auth(token.as_str()).json(&json!({ "facts": facts }));
                let response = request.send().await.unwrap();
                assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
                let body: Value = response.json().await.unwrap();
                latencies.push(sent.elapsed());
                acknowledged += body["facts"].as_array().map_or(0, Vec::len);
            }
            (latencies, acknowledged)
        });
    }
    let mut latencies = Vec::new();
    let mut acknowledged = 0;
    while let Some(joined) = tasks.join_next().await {
        let (mine, n) = joined.unwrap();
        latencies.extend(mine);
        acknowledged += n;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let (searchable, searches, posts) = searchable_after(&client, &base, &token).await;
    drop(daemon);

    let archived: usize = std::fs::read_dir(root.join("archive"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap().lines().filter(|l| l.starts_with("- ")).count())
        .sum();
    assert_eq!(archived, acknowledged + SEARCHABLE_PROBES, "every acknowledged fact is in the archive");
    let secs = elapsed.as_secs_f64();
    println!(
        "ingest  batch {batch:>3}  conns {connections:>2}: {acknowledged} facts in {secs:.2}s = {:.0} facts/s, \
         {:.0} req/s, latency p50 {:.1} ms p99 {:.1} ms",
        acknowledged as f64 / secs,
        latencies.len() as f64 / secs,
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );
    // What the secret detector costs each fact: the same texts, redacted in this process on
    // one core, against the daemon's time per fact.
    let texts: Vec<String> = (0..acknowledged)
        .map(|i| format!("bench fact {i} from connection {}: likes item {}", i % connections, i % 97))
        .collect();
    let timed = Instant::now();
    let found: usize = texts.iter().map(|t| memfold::store::secrets::redact(t).1.len()).sum();
    let detect = timed.elapsed().as_secs_f64() / texts.len().max(1) as f64;
    let per_fact = secs / acknowledged.max(1) as f64;
    println!(
        "ingest  batch {batch:>3}  conns {connections:>2}: secret detection {:.2} µs per fact ({found} found), \
         {:.1}% of the daemon's {:.1} µs per fact (target ≤ 5%)",
        detect * 1e6,
        100.0 * detect / per_fact,
        per_fact * 1e6,
    );
    println!(
        "ingest  batch {batch:>3}  conns {connections:>2}: a posted fact found by GET /search after p50 {:.1} ms, \
         slowest {:.1} ms ({SEARCHABLE_PROBES} facts, one at a time, POST to first search that finds it; \
         {searches} searches; the POST alone p50 {:.1} ms)",
        percentile(&searchable, 0.50).as_secs_f64() * 1e3,
        percentile(&searchable, 1.0).as_secs_f64() * 1e3,
        percentile(&posts, 0.50).as_secs_f64() * 1e3,
    );
}

const SEARCHABLE_PROBES: usize = 50;

/// Per fact, the time from sending its `POST /facts` to the first `GET /search` that finds it
/// (searched again at once until it does, for at most 10 s), on the daemon as the throughput
/// run left it; sorted.
async fn searchable_after(client: &reqwest::Client, base: &str, token: &str) -> (Vec<Duration>, usize, Vec<Duration>) {
    let mut times = Vec::with_capacity(SEARCHABLE_PROBES);
    let (mut searches, mut posts) = (0, Vec::with_capacity(SEARCHABLE_PROBES));
    for i in 0..SEARCHABLE_PROBES {
        let word = format!("quillwort{i}zephyr");
        let sent = Instant::now();
        let body = json!({ "facts": [{ "text": format!("Planted {word} seedlings by the pond.") }] });
        let response = client.post(format!("{base}/facts")).bearer_auth(token).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        posts.push(sent.elapsed());
        loop {
            searches += 1;
            let url = format!("{base}/search?q={word}&k=3&recall=false");
            let hits: Value = client.get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap();
            let found = hits["hits"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["text"].as_str().is_some_and(|t| t.contains(&word))));
            if found {
                break;
            }
            assert!(sent.elapsed() < Duration::from_secs(10), "fact {i} not searchable after 10 s");
        }
        times.push(sent.elapsed());
    }
    times.sort();
    posts.sort();
    (times, searches, posts)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("ingest bench: skipped (run with `cargo bench --bench ingest`)");
        return;
    }
    println!("ingest bench, commit {}", run::commit());
    let total = knob("MEMFOLD_BENCH_FACTS", 20_000);
    let connections = knob("MEMFOLD_BENCH_CONNECTIONS", 8).max(1);
    let bound = Duration::from_secs(knob("MEMFOLD_BENCH_SECONDS", 30) as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    for batch in knobs("MEMFOLD_BENCH_BATCH", &[1, 20]) {
        runtime.block_on(run(total, connections, batch.max(1), bound));
    }
}
