//! CLI benchmark: what a shell (or an agent calling the CLI) waits for, process start to exit.
//!
//! Per size N it writes a root of N entries (varied sentences, as the soak bench does), runs
//! `memfold reindex` once (timed: read the markdown, embed, table, indices), then times 20
//! runs each of `memfold search "…"` and `memfold status`, and prints the median and the
//! slowest, and the commit it ran on.
//!
//! Run: `cargo bench --bench cli` (release). Knob: `MEMFOLD_BENCH_ENTRIES` (default
//! `10000,100000`). Targets (issue "The performance a user meets"): `search` and `status`
//! ≤ 100 ms at 100k.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use memfold::files::Root;
use run::memfold;

const RUNS: usize = 20;

fn timed(root: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let status = memfold(root).args(args).env("MEMFOLD_LOG", "warn").stdout(Stdio::null()).status().unwrap();
    assert!(status.success(), "memfold {args:?} failed");
    started.elapsed()
}

fn bench(entries: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    assert!(memfold(&root_dir).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let root = Root::new(&root_dir);
    let texts = life::distractors(entries + RUNS);
    seed::write_entries(&root, &texts[..entries]);

    let reindex = timed(&root_dir, &["reindex"]);
    let queries: Vec<String> =
        texts[entries..].iter().map(|q| q.split_whitespace().take(5).collect::<Vec<_>>().join(" ")).collect();
    let mut report = Vec::new();
    for (name, args) in [("search", vec!["search"]), ("status", vec!["status"])] {
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|i| {
                let mut args = args.clone();
                if name == "search" {
                    args.push(&queries[i]);
                }
                timed(&root_dir, &args)
            })
            .collect();
        times.sort();
        report.push(format!(
            "`memfold {name}` median {:.0} ms, slowest {:.0} ms",
            times[RUNS / 2].as_secs_f64() * 1000.0,
            times[RUNS - 1].as_secs_f64() * 1000.0
        ));
    }
    println!(
        "cli {entries} entries, commit {}: reindex {:.1} s ({:.0} docs/s); {}",
        run::commit(),
        reindex.as_secs_f64(),
        entries as f64 / reindex.as_secs_f64(),
        report.join("; ")
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cli bench: skipped (run with `cargo bench --bench cli`)");
        return;
    }
    let sizes = match std::env::var("MEMFOLD_BENCH_ENTRIES") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![10_000, 100_000],
    };
    for entries in sizes {
        bench(entries);
    }
}
