//! Soak benchmark: a running `memfold serve` under an agent's steady use, timed from outside.
//!
//! Per size N (entries in `memory.md`, written directly; varied sentences about people, places
//! and things) it spawns the `memfold` binary built with the bench on a fresh root and a free
//! loopback port, then sends R requests one after another, as an agent does: every request is
//! a `GET /search`, and every 10th is preceded by a `POST /facts` of one new fact (so R = 6,000
//! means 600 writes). It prints
//! - seconds per 1,000 requests, first and last, and the daemon's RSS after the first 20
//!   searches and at the end;
//! - the index's bytes on disk and table versions before and after;
//! - search p50 over 200 queries on a freshly started daemon, before the soak and after it
//!   (after: once the restarted daemon has settled its index, and how long that took), and how
//!   many of them the vectors the daemon holds in memory served;
//! - search p50 and p99 over the same queries, twice, on the restarted daemon once it answers from the
//!   rows it holds (a warm daemon, as an agent meets it between writes), and its RSS once idle;
//! - the commit it ran on.
//!
//! Run: `cargo bench --bench soak` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (default 10000;
//! a comma list runs each), `MEMFOLD_BENCH_REQUESTS` (default 0.6 × entries, at least 6000),
//! `MEMFOLD_BENCH_KEEP` (set: keep the root and print where it is).
//! Targets (issue "A daemon that runs for months"): last 1,000 requests ≤ 1.5 × the first;
//! RSS at the end ≤ 1.5 × after 20 searches; index ≤ 2 × its size before; p50 after a restart
//! ≤ 1.5 × before.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use memfold::store::Root;
use run::memfold;
use serde_json::{Value, json};

const QUERIES: usize = 200;

fn knobs(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

/// A running daemon, stopped with SIGTERM on drop.
struct Daemon {
    child: Child,
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        run::stop(&mut self.child, Duration::from_secs(30));
    }
}

impl Daemon {
    async fn start(root: &Path) -> Daemon {
        let token =
            std::fs::read_to_string(root.join(".memfold/token")).expect("init made the token").trim().to_string();
        let client = reqwest::Client::new();
        // No pass during the soak: it measures the index under ingest and search.
        let env = [("MEMFOLD_CONSOLIDATION__MIN_HOURS", "100000"), ("MEMFOLD_CONSOLIDATION__MIN_FACTS", "1000000000")];
        let (child, base) = run::serve(root, &env, &client, Duration::from_secs(120)).await;
        Daemon { child, base, token, client }
    }

    /// Wait until the daemon has settled its index once (it does at start), and say how long
    /// that took.
    async fn settled(&self) -> Duration {
        run::settled(&self.client, &self.base, Some(&self.token), Duration::from_secs(600)).await
    }

    async fn search(&self, q: &str) -> Duration {
        let sent = Instant::now();
        let response = self
            .client
            .get(format!("{}/search", self.base))
            .query(&[("q", q), ("k", "10")])
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
        let _: Value = response.json().await.unwrap();
        sent.elapsed()
    }

    async fn add(&self, text: &str) {
        let response = self
            .client
            .post(format!("{}/facts", self.base))
            .bearer_auth(&self.token)
            .json(&json!({ "facts": [{ "text": text }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    }

    fn rss_mib(&self) -> f64 {
        self.rss().0
    }

    /// The daemon's resident memory in MiB: all of it, and its anonymous part (heap and stacks:
    /// what the process allocated, without the pages of its own executable it has run).
    fn rss(&self) -> (f64, f64) {
        run::rss(self.child.id())
    }

    /// Search p50 over the queries, after one warm-up pass over the first 20, and how many of
    /// them the vectors the daemon holds served (`/metrics`; the others asked LanceDB).
    async fn p50(&self, queries: &[String]) -> (Duration, u64) {
        for q in queries.iter().take(20) {
            self.search(q).await;
        }
        let held = self.held_searches().await;
        let mut times = Vec::with_capacity(queries.len());
        for q in queries {
            times.push(self.search(q).await);
        }
        let held = self.held_searches().await - held;
        times.sort();
        (times[times.len() / 2], held)
    }

    /// Search p50 and p99 over the queries, twice, on a warm daemon: once a search has been answered
    /// from the rows it holds (it reads them about a second after its start-up settle), and
    /// how many of the timed searches they answered.
    async fn warm(&self, queries: &[String]) -> (Duration, Duration, u64) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let held = self.held_searches().await;
            self.search(&queries[0]).await;
            if self.held_searches().await > held {
                break;
            }
            assert!(Instant::now() < deadline, "the daemon never answered a search from the rows it holds");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let held = self.held_searches().await;
        let mut times = Vec::with_capacity(2 * queries.len());
        for q in queries.iter().chain(queries) {
            times.push(self.search(q).await);
        }
        let held = self.held_searches().await - held;
        times.sort();
        (times[times.len() / 2], times[times.len() * 99 / 100], held)
    }

    /// `memfold_searches_held_vectors_total` from `/metrics`.
    async fn held_searches(&self) -> u64 {
        let response = self.client.get(format!("{}/metrics", self.base)).bearer_auth(&self.token).send().await.unwrap();
        let text = response.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("memfold_searches_held_vectors_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no held-search count in /metrics:\n{text}"))
    }
}

/// Bytes under `dir` and the number of table versions (manifests) of the index.
fn disk(root: &Path) -> (u64, usize) {
    let index = root.join(".memfold/index");
    let versions = std::fs::read_dir(index.join("docs.lance/_versions")).map_or(0, |d| {
        d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "manifest")).count()
    });
    (memfold::store::tree_bytes(&index), versions)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn soak(entries: usize, requests: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    if std::env::var_os("MEMFOLD_BENCH_KEEP").is_some() {
        println!("root kept at {}", root_dir.display());
    }
    assert!(memfold(&root_dir).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let root = Root::new(&root_dir);
    // Distinct sentences: N entries of memory, then the facts and the queries of the soak.
    let texts = life::distractors(entries + requests / 10 + QUERIES);
    let (memory, rest) = texts.split_at(entries);
    let (facts, queries) = rest.split_at(requests / 10);
    seed::write_entries(&root, memory);
    // Queries are reworded fragments of other sentences, so both legs have work.
    let queries: Vec<String> =
        queries.iter().map(|q| q.split_whitespace().take(5).collect::<Vec<_>>().join(" ")).collect();

    let started = Instant::now();
    let ((before_p50, before_held), before_rss) = {
        let daemon = Daemon::start(&root_dir).await;
        daemon.settled().await;
        let p50 = daemon.p50(&queries).await;
        (p50, daemon.rss_mib())
    };
    let indexed = started.elapsed();
    let (before_bytes, before_versions) = disk(&root_dir);

    let daemon = Daemon::start(&root_dir).await;
    let mut rss_start = (0.0, 0.0);
    let mut per_thousand: Vec<Duration> = Vec::new();
    let mut block = Instant::now();
    for i in 0..requests {
        if i % 10 == 0 {
            daemon.add(&facts[i / 10]).await;
        }
        daemon.search(&queries[i % queries.len()]).await;
        if i + 1 == 20 {
            rss_start = daemon.rss();
        }
        if (i + 1) % 1000 == 0 {
            per_thousand.push(block.elapsed());
            let (rss, anon) = daemon.rss();
            println!(
                "  {:>6} requests: {:>7.1} s per 1,000, RSS {rss:>6.0} MiB ({anon:.0} MiB anonymous)",
                i + 1,
                block.elapsed().as_secs_f64(),
            );
            block = Instant::now();
        }
    }
    let rss_end = daemon.rss();
    drop(daemon);
    let (after_bytes, after_versions) = disk(&root_dir);
    let restarted = Daemon::start(&root_dir).await;
    let settling = restarted.settled().await;
    let (after_p50, after_held) = restarted.p50(&queries).await;
    let after_rss = restarted.rss_mib();
    let (warm_p50, warm_p99, warm_held) = restarted.warm(&queries).await;
    // Idle: the daemon hands freed memory back once a 5 s tick finds it was quiet the whole
    // tick before, so 5 to 10 s after it last did anything.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (idle_rss, idle_anon) = restarted.rss();
    drop(restarted);
    if std::env::var_os("MEMFOLD_BENCH_KEEP").is_some() {
        std::mem::forget(dir);
    }

    let first = per_thousand.first().copied().unwrap_or_default();
    let last = per_thousand.last().copied().unwrap_or_default();
    println!("soak {entries} entries, {requests} requests ({} writes), commit {}:", requests / 10, run::commit());
    println!("  first index build and 220 searches: {:.1} s", indexed.as_secs_f64());
    println!(
        "  seconds per 1,000 requests: first {:.2}, last {:.2} (×{:.2}; target ≤ 1.5)",
        first.as_secs_f64(),
        last.as_secs_f64(),
        last.as_secs_f64() / first.as_secs_f64().max(1e-9)
    );
    println!(
        "  daemon RSS: after 20 searches {:.0} MiB, at the end {:.0} MiB (×{:.2}; target ≤ 1.5); anonymous {:.0} → {:.0} MiB (×{:.2})",
        rss_start.0,
        rss_end.0,
        rss_end.0 / rss_start.0.max(1e-9),
        rss_start.1,
        rss_end.1,
        rss_end.1 / rss_start.1.max(1e-9)
    );
    println!(
        "  index on disk: before {:.1} MB in {before_versions} versions, after {:.1} MB in {after_versions} versions (×{:.2}; target ≤ 2)",
        mb(before_bytes),
        mb(after_bytes),
        after_bytes as f64 / before_bytes.max(1) as f64
    );
    println!("  a restarted daemon settled its index in {:.1} s", settling.as_secs_f64());
    println!(
        "  search p50 on a fresh daemon: before {:.2} ms ({before_rss:.0} MiB), after {:.2} ms ({after_rss:.0} MiB) (×{:.2}; target ≤ 1.5)",
        ms(before_p50),
        ms(after_p50),
        after_p50.as_secs_f64() / before_p50.as_secs_f64().max(1e-9)
    );
    println!(
        "  of those {} searches, held vectors served {before_held} before and {after_held} after (the others asked LanceDB)",
        queries.len()
    );
    println!(
        "  warm daemon, its rows held: search p50 {:.2} ms, p99 {:.2} ms over {} searches ({warm_held} answered from the held rows); RSS idle 11 s after them {idle_rss:.0} MiB ({idle_anon:.0} MiB anonymous)",
        ms(warm_p50),
        ms(warm_p99),
        2 * queries.len()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("soak bench: skipped (run with `cargo bench --bench soak`)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    for entries in knobs("MEMFOLD_BENCH_ENTRIES", &[10_000]) {
        let requests = knobs("MEMFOLD_BENCH_REQUESTS", &[(entries * 6 / 10).max(6_000)])[0];
        runtime.block_on(soak(entries, requests));
    }
}
