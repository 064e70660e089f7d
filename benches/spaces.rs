//! Many spaces on one daemon: a home of S spaces with N entries each (default 1,000 × 1,000),
//! served by one `memfold serve --home`, timed and measured from outside.
//!
//! Each space gets N varied sentences (about people, places and things, each space's own
//! mix) as entries of its `memory.md`, and its index built in this process before the daemon
//! starts, as a home in use has them. Then it prints
//! - search latency of the first request to each space, every space in turn (each opened cold,
//!   since `spaces.max_open` is far below S): p50, p99 and the slowest;
//! - the daemon's RSS after touching every space (and the most seen while doing it), and idle
//!   11 s later;
//! - search p50 and p99 in a warm space (one open and searched), 200 queries;
//! - from sending `POST /facts` to the first search that finds the fact, 50 facts, in a warm
//!   space: p50 and the slowest;
//! - the commit it ran on.
//!
//! Run: `cargo bench --bench spaces` (release). Knobs: `MEMFOLD_BENCH_SPACES` (1000),
//! `MEMFOLD_BENCH_ENTRIES` (1000), `MEMFOLD_BENCH_KEEP` (set: keep the home and print where).
//! Targets (issue "Many agents, one daemon"): RSS after touching every space ≤ 1 GiB, idle RSS
//! ≤ 300 MiB; search p50 ≤ 5 ms in a warm space and ≤ 100 ms in a space opened cold; a
//! `POST /facts` then the search that finds it ≤ 50 ms.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use run::{knob, ms, quantile};

use memfold::config::{Config, Overrides};
use memfold::memory::Memory;
use memfold::store::Root;
use serde_json::{Value, json};

const QUERIES: usize = 200;
const WRITES: usize = 50;
/// The daemon closes a space after this many seconds without a request (the default is 300).
const CLOSE_IDLE_SECS: u64 = 20;

/// `memfold --home HOME` with the local embedder, without the bench's knobs.
fn memfold(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memfold"));
    command.env("MEMFOLD_EMBEDDING__PROVIDER", "local").arg("--home").arg(home);
    for name in ["MEMFOLD_ROOT", "MEMFOLD_CONFIG", "MEMFOLD_HOME", "MEMFOLD_SPACE"] {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("MEMFOLD_BENCH_")) {
        command.env_remove(name);
    }
    command
}

fn space_name(i: usize) -> String {
    format!("s{i:04}")
}

/// A home of `spaces` spaces of `entries` entries each, every index built; the spaces' tokens.
async fn build(home: &Path, spaces: usize, entries: usize) -> Vec<String> {
    assert!(memfold(home).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let pool = life::distractors(entries * 3);
    let mut tokens = Vec::with_capacity(spaces);
    let started = Instant::now();
    for i in 0..spaces {
        let name = space_name(i);
        let root_dir = home.join("spaces").join(&name);
        let root = Root::new(&root_dir);
        root.init().unwrap();
        tokens.push(memfold::service::token::ensure(&root.token_file()).unwrap());
        // Each space its own mix of the pool.
        let texts: Vec<String> = (0..entries).map(|k| pool[(k * 3 + i * 7) % pool.len()].clone()).collect();
        seed::write_entries(&root, &texts);
        let overrides = Overrides { home: Some(home.to_path_buf()), space: Some(name), ..Overrides::default() };
        let mut config = Config::load(&overrides).unwrap();
        config.embedding.provider = memfold::config::EmbeddingProvider::Local;
        let memory = Memory::open(config).await.unwrap();
        memory.reindex(false, None).await.unwrap();
        if (i + 1) % 100 == 0 {
            println!("  built {} spaces in {:.0} s", i + 1, started.elapsed().as_secs_f64());
        }
    }
    tokens
}

struct Daemon {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        run::stop(&mut self.child, Duration::from_secs(60));
    }
}

impl Daemon {
    async fn start(home: &Path) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = memfold(home)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .env("MEMFOLD_LOG", "warn")
            .env("MEMFOLD_SPACES__CLOSE_IDLE_SECS", CLOSE_IDLE_SECS.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let started = Instant::now();
        while client.get(format!("{base}/healthz")).send().await.is_err() {
            assert!(started.elapsed() < Duration::from_secs(120), "memfold serve did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Daemon { child, base, client }
    }

    /// A search with `token`; its latency and the hits.
    async fn search(&self, token: &str, q: &str) -> (Duration, Value) {
        let sent = Instant::now();
        let response = self
            .client
            .get(format!("{}/search", self.base))
            .query(&[("q", q), ("k", "10")])
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        (sent.elapsed(), body)
    }

    async fn add(&self, token: &str, text: &str) {
        let response = self
            .client
            .post(format!("{}/facts", self.base))
            .bearer_auth(token)
            .json(&json!({ "facts": [{ "text": text }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    }

    /// `memfold_searches_held_vectors_total`, home-wide, from `/metrics` with the operator's token.
    async fn held_searches(&self, operator: &str) -> u64 {
        let response = self.client.get(format!("{}/metrics", self.base)).bearer_auth(operator).send().await.unwrap();
        let text = response.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("memfold_searches_held_vectors_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// How many spaces the daemon holds open (the operator's `/spaces`).
    async fn open(&self, operator: &str) -> usize {
        let response = self.client.get(format!("{}/spaces", self.base)).bearer_auth(operator).send().await.unwrap();
        let listed: Value = response.json().await.unwrap();
        listed["spaces"].as_array().unwrap().iter().filter(|s| s["open"] == true).count()
    }

    /// RSS and its anonymous part, MiB.
    fn rss(&self) -> (f64, f64) {
        run::rss(self.child.id())
    }
}

async fn bench(spaces: usize, entries: usize) {
    let dir = tempfile::tempdir().unwrap();
    let home: PathBuf = dir.path().join("home");
    let started = Instant::now();
    let tokens = build(&home, spaces, entries).await;
    let built = started.elapsed();
    let operator = std::fs::read_to_string(home.join(".memfold/token")).unwrap().trim().to_string();
    let queries: Vec<String> = life::distractors(entries * 3 + QUERIES)[entries * 3..]
        .iter()
        .map(|q| q.split_whitespace().take(5).collect::<Vec<_>>().join(" "))
        .collect();

    let daemon = Daemon::start(&home).await;
    let (rss_started, _) = daemon.rss();
    // Every space in turn: each first request opens it cold.
    let mut cold = Vec::with_capacity(spaces);
    let mut rss_most: f64 = 0.0;
    for (i, token) in tokens.iter().enumerate() {
        let (took, _) = daemon.search(token, &queries[i % queries.len()]).await;
        cold.push(took);
        if i % 10 == 0 {
            rss_most = rss_most.max(daemon.rss().0);
        }
    }
    let (rss_touched, anon_touched) = daemon.rss();
    rss_most = rss_most.max(rss_touched);
    let cold_p50 = quantile(&mut cold, 0.5);
    let cold_p99 = quantile(&mut cold, 0.99);
    let cold_max = *cold.last().unwrap();

    // A warm space: the last one touched, after 20 searches (below the ANN threshold a space
    // searches through LanceDB, above it from the rows it holds once they are read).
    let warm_token = tokens.last().unwrap();
    for q in queries.iter().take(20) {
        daemon.search(warm_token, q).await;
    }
    let held_before = daemon.held_searches(&operator).await;
    let mut warm = Vec::with_capacity(QUERIES);
    for q in &queries {
        warm.push(daemon.search(warm_token, q).await.0);
    }
    let warm_p50 = quantile(&mut warm, 0.5);
    let warm_p99 = quantile(&mut warm, 0.99);
    let warm_held = daemon.held_searches(&operator).await - held_before;

    // A write, then searches until one finds it.
    let mut found = Vec::with_capacity(WRITES);
    for n in 0..WRITES {
        let text = format!("The bench fact number {n} mentions the zanzibar{n} marker");
        let sent = Instant::now();
        daemon.add(warm_token, &text).await;
        loop {
            let (_, hits) = daemon.search(warm_token, &format!("zanzibar{n} marker")).await;
            if hits.to_string().contains(&text) {
                break;
            }
            assert!(sent.elapsed() < Duration::from_secs(30), "fact {n} never found");
        }
        found.push(sent.elapsed());
    }
    let found_p50 = quantile(&mut found, 0.5);
    let found_max = *found.last().unwrap();

    // Quiet: the daemon hands freed memory back once a 5 s tick finds the tick before quiet;
    // the spaces stay open until `spaces.close_idle_secs` passes without a request.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (rss_quiet, anon_quiet) = daemon.rss();
    let open_quiet = daemon.open(&operator).await;
    tokio::time::sleep(Duration::from_secs(CLOSE_IDLE_SECS + 11)).await;
    let (rss_idle, anon_idle) = daemon.rss();
    let open_idle = daemon.open(&operator).await;
    drop(daemon);
    let disk = memfold::store::tree_bytes(&home);
    if std::env::var_os("MEMFOLD_BENCH_KEEP").is_some() {
        println!("home kept at {}", home.display());
        std::mem::forget(dir);
    }

    println!("spaces: {spaces} spaces × {entries} entries, one daemon, commit {}:", run::commit());
    println!(
        "  home built (entries written, every index built) in {:.0} s; {:.0} MB on disk",
        built.as_secs_f64(),
        disk as f64 / 1e6
    );
    println!("  daemon RSS at start {rss_started:.0} MiB");
    println!(
        "  first search of each space (opened cold): p50 {:.1} ms, p99 {:.1} ms, slowest {:.1} ms (target p50 ≤ 100 ms)",
        ms(cold_p50),
        ms(cold_p99),
        ms(cold_max)
    );
    println!(
        "  RSS after touching every space {rss_touched:.0} MiB ({anon_touched:.0} MiB anonymous), most seen {rss_most:.0} MiB (target ≤ 1024)"
    );
    println!(
        "  warm space: search p50 {:.2} ms, p99 {:.2} ms over {QUERIES}, {warm_held} from held rows (target p50 ≤ 5 ms)",
        ms(warm_p50),
        ms(warm_p99)
    );
    println!(
        "  POST /facts then the first search that finds it: p50 {:.1} ms, slowest {:.1} ms over {WRITES} (target ≤ 50 ms)",
        ms(found_p50),
        ms(found_max)
    );
    println!("  quiet 11 s later: RSS {rss_quiet:.0} MiB ({anon_quiet:.0} MiB anonymous), {open_quiet} spaces open");
    println!(
        "  idle past spaces.close_idle_secs = {CLOSE_IDLE_SECS}: RSS {rss_idle:.0} MiB ({anon_idle:.0} MiB anonymous), {open_idle} spaces open (target ≤ 300 MiB)"
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("spaces bench: skipped (run with `cargo bench --bench spaces`)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bench(knob("MEMFOLD_BENCH_SPACES", 1000), knob("MEMFOLD_BENCH_ENTRIES", 1000)));
}
