//! What a user waits for on a repetitive memory: N facts from a small vocabulary (an agent
//! logging its work; `tests/common/worklog.rs`), every step a whole `memfold` process or a
//! request to a real daemon, in the order a user meets them:
//! 1. `add --stdin` of the N facts to a fresh root, then the first pass (`consolidate
//!    --force`: local embedder, offline decider);
//! 2. `reindex --clear` (docs/s: rows it wrote per second);
//! 3. `memfold status`: the first call after that rebuild, then 20 more (median, slowest);
//! 4. `memfold search` of three common words, 20 runs (median, slowest);
//! 5. a restarted `memfold serve`: 180 `GET /search` one after another from the moment it
//!    answers `/healthz` (p50, p99, slowest), then 50 `POST /facts`, each followed by searches
//!    until one finds the fact (p50, slowest), then the daemon's RSS;
//! 6. `.memfold/` on disk against the markdown it derives from and against the index's rows
//!    (the table's data files: vectors, texts and what a hit carries, without the indices).
//!
//! Run: `cargo bench --bench worklog` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (default
//! `100000`; a list runs each), `MEMFOLD_BENCH_VOCAB` (`work,ops`), `MEMFOLD_BENCH_KEEP=DIR`
//! (keep each root as `DIR/VOCAB-N`).
//! Targets (issue "Fast on the memories agents really write", at 100k, both vocabularies):
//! first pass ≤ 30 s; `reindex --clear` ≥ 25k docs/s; `status` ≤ 100 ms on every call;
//! `search` ≤ 100 ms p50; `GET /search` p50 ≤ 5 ms and p99 ≤ 10 ms from the first request;
//! a posted fact found p50 ≤ 50 ms, slowest ≤ 200 ms; RSS ≤ 300 MiB; `.memfold/` ≤ 2× the
//! rows' size.

#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "../tests/common/worklog.rs"]
mod worklog;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use run::{memfold, ms, quantile};
use serde_json::{Value, json};
use worklog::Vocab;

const RUNS: usize = 20;
const SEARCHES: usize = 180;
const WRITES: usize = 50;

fn timed(root: &Path, args: &[&str]) -> (Duration, Vec<u8>) {
    let started = Instant::now();
    let out = memfold(root).args(args).env("MEMFOLD_LOG", "warn").stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "memfold {args:?} failed");
    (started.elapsed(), out.stdout)
}

fn spread(mut times: Vec<Duration>) -> String {
    let p50 = quantile(&mut times, 0.5);
    format!("median {:.0} ms, slowest {:.0} ms", ms(p50), ms(*times.last().unwrap()))
}

async fn search(client: &reqwest::Client, base: &str, token: &str, q: &str) -> (Duration, Value) {
    let sent = Instant::now();
    let response =
        client.get(format!("{base}/search")).query(&[("q", q), ("k", "10")]).bearer_auth(token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    (sent.elapsed(), body)
}

async fn bench(vocab: Vocab, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = match std::env::var_os("MEMFOLD_BENCH_KEEP") {
        Some(keep) => Path::new(&keep).join(format!("{}-{n}", vocab.name())),
        None => dir.path().join("root"),
    };
    let facts = worklog::facts(vocab, 0, n);
    let queries = worklog::queries(vocab, SEARCHES.max(RUNS));
    println!("worklog `{}`, {n} facts, commit {}; e.g. \"{}\"", vocab.name(), run::commit(), facts[0]);

    // 1. The first pass.
    assert!(memfold(&root).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let started = Instant::now();
    run::add_stdin(&root, &facts);
    let added = started.elapsed();
    let (pass, report) = timed(&root, &["consolidate", "--force", "--json"]);
    let report: Value = serde_json::from_slice(&report).unwrap_or(Value::Null);
    let ops = report["ops"].as_array().map_or(0, Vec::len);
    println!(
        "  add --stdin {:.2} s; first pass {:.1} s (inside: {}; {ops} ops)",
        added.as_secs_f64(),
        pass.as_secs_f64(),
        report["timings"]
    );

    // 2. Rebuild the index.
    let (reindex, out) = timed(&root, &["reindex", "--clear", "--json"]);
    let docs = serde_json::from_slice::<Value>(&out).ok().and_then(|v| v["docs"].as_u64()).unwrap_or(0);
    println!(
        "  reindex --clear {:.2} s, {docs} docs ({:.0} docs/s)",
        reindex.as_secs_f64(),
        docs as f64 / reindex.as_secs_f64()
    );

    // 3. Status, the first call after the rebuild and then more.
    let (first, _) = timed(&root, &["status"]);
    let times = (0..RUNS).map(|_| timed(&root, &["status"]).0).collect();
    println!("  status: first after the rebuild {:.0} ms; then {}", ms(first), spread(times));

    // 4. Search from a shell.
    let times = queries.iter().take(RUNS).map(|q| timed(&root, &["search", q]).0).collect();
    println!("  `memfold search` of three common words: {}", spread(times));

    // 5. A restarted daemon.
    let client = reqwest::Client::new();
    let token = std::fs::read_to_string(root.join(".memfold/token")).expect("init made the token");
    let token = token.trim();
    let (mut child, base) = run::serve(&root, &[], &client, Duration::from_secs(120)).await;
    let mut times = Vec::with_capacity(SEARCHES);
    for q in queries.iter().take(SEARCHES) {
        times.push(search(&client, &base, token, q).await.0);
    }
    let p50 = quantile(&mut times, 0.5);
    let p99 = quantile(&mut times, 0.99);
    println!(
        "  GET /search from the first request a restarted daemon answers, {SEARCHES} one after another: p50 {:.2} ms, p99 {:.2} ms, slowest {:.1} ms; daemon RSS then {:.0} MiB",
        ms(p50),
        ms(p99),
        ms(*times.last().unwrap()),
        run::rss(child.id()).0
    );
    let more = worklog::facts(vocab, n, WRITES);
    let mut found = Vec::with_capacity(WRITES);
    for text in &more {
        let sent = Instant::now();
        let response = client
            .post(format!("{base}/facts"))
            .bearer_auth(token)
            .json(&json!({ "facts": [{ "text": text }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        loop {
            let (_, hits) = search(&client, &base, token, text).await;
            if hits.to_string().contains(text.as_str()) {
                break;
            }
            assert!(sent.elapsed() < Duration::from_secs(60), "\"{text}\" never found");
        }
        found.push(sent.elapsed());
    }
    let found_p50 = quantile(&mut found, 0.5);
    let rss = run::rss(child.id()).0;
    println!(
        "  POST /facts, then searches until found: p50 {:.1} ms, slowest {:.1} ms over {WRITES}; daemon RSS then {rss:.0} MiB",
        ms(found_p50),
        ms(*found.last().unwrap())
    );
    run::stop(&mut child, Duration::from_secs(60));

    // 6. On disk.
    let markdown: u64 = ["archive", "consolidated"].iter().map(|d| memfold::store::tree_bytes(&root.join(d))).sum();
    let state = memfold::store::tree_bytes(&root.join(".memfold"));
    let rows = memfold::store::tree_bytes(&root.join(".memfold/index/docs.lance/data"));
    println!(
        "  on disk: markdown {:.1} MB, .memfold/ {:.1} MB (×{:.2}), of it the index {:.1} MB; the index's rows {:.1} MB, \
         .memfold/ ×{:.2} of them",
        markdown as f64 / 1e6,
        state as f64 / 1e6,
        state as f64 / markdown.max(1) as f64,
        memfold::store::tree_bytes(&root.join(".memfold/index")) as f64 / 1e6,
        rows as f64 / 1e6,
        state as f64 / rows.max(1) as f64
    );
    if std::env::var_os("MEMFOLD_BENCH_KEEP").is_none() {
        drop(dir);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("worklog bench: skipped (run with `cargo bench --bench worklog`)");
        return;
    }
    let sizes: Vec<usize> = std::env::var("MEMFOLD_BENCH_ENTRIES")
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![100_000]);
    let vocabs = std::env::var("MEMFOLD_BENCH_VOCAB").unwrap_or_else(|_| "work,ops".into());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    for vocab in vocabs.split(',').filter_map(|v| Vocab::parse(v.trim())) {
        for &n in &sizes {
            runtime.block_on(bench(vocab, n));
        }
    }
}
