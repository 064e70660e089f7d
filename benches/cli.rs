//! CLI benchmark: what a shell (or an agent calling the CLI) waits for, process start to exit.
//!
//! Per size N it writes a root of N entries (varied sentences, as the soak bench does), runs
//! `memfold reindex --clear` once (timed: read the markdown, embed, table, indices), then times
//! 20 runs each of `memfold search "…"`, `memfold status` and `memfold about NAME` (the name the
//! entries name most), then `search` again with every entry in the use table (decay by use at
//! its dearest), and prints the median and the
//! slowest, the index's bytes on disk, and the commit it ran on. Then it adds the same N
//! sentences as new facts to a fresh root (`add --stdin`) and times the first pass over them
//! (`consolidate --force`: local embedder, offline decider).
//!
//! Run: `cargo bench --bench cli` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (default
//! `10000,100000`), `MEMFOLD_BENCH_VOCAB` (`varied`, the default; `work` and `ops`: the
//! repetitive memories of `tests/common/worklog.rs`, searched for three common words; a list
//! runs each), `MEMFOLD_BENCH_KEEP=DIR` (keep each root as `DIR/root-N`). Targets (issue
//! "The performance a user meets"): `search` and `status` ≤ 100 ms at 100k; `reindex --clear`
//! ≥ 10,000 docs/s; a first pass of 100k facts ≤ 90 s.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;
#[path = "../tests/common/worklog.rs"]
mod worklog;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use memfold::store::Root;
use run::memfold;

const RUNS: usize = 20;

fn timed(root: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let status = memfold(root).args(args).env("MEMFOLD_LOG", "warn").stdout(Stdio::null()).status().unwrap();
    assert!(status.success(), "memfold {args:?} failed");
    started.elapsed()
}

/// The memory's texts (`entries` of them) and `RUNS` searches, of the vocabulary the bench
/// was asked for.
fn data(vocab: Option<worklog::Vocab>, entries: usize) -> (Vec<String>, Vec<String>) {
    match vocab {
        Some(v) => (worklog::facts(v, 0, entries), worklog::queries(v, RUNS)),
        None => {
            let texts = life::distractors(entries + RUNS);
            let queries =
                texts[entries..].iter().map(|q| q.split_whitespace().take(5).collect::<Vec<_>>().join(" ")).collect();
            (texts[..entries].to_vec(), queries)
        }
    }
}

fn bench(entries: usize, vocab: Option<worklog::Vocab>) {
    let dir = tempfile::tempdir().unwrap();
    // MEMFOLD_BENCH_KEEP=DIR keeps each root as DIR/root-N, to profile a verb on it afterwards.
    let root_dir = match std::env::var_os("MEMFOLD_BENCH_KEEP") {
        Some(keep) => Path::new(&keep).join(format!("root-{}-{entries}", vocab.map_or("varied", worklog::Vocab::name))),
        None => dir.path().join("root"),
    };
    assert!(memfold(&root_dir).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let root = Root::new(&root_dir);
    let (texts, queries) = data(vocab, entries);
    seed::write_entries(&root, &texts);

    let reindex = timed(&root_dir, &["reindex", "--clear"]);
    // The first `status` after a rebuild, apart: it may count what the rebuild changed.
    let first_status = timed(&root_dir, &["status"]);
    let mut report = vec![format!("first `memfold status` after it {:.0} ms", first_status.as_secs_f64() * 1000.0)];
    // `about NAME`: a name the entries speak of (the most named one).
    let names = memfold(&root_dir).args(["about", "--json"]).output().unwrap();
    let names: serde_json::Value = serde_json::from_slice(&names.stdout).unwrap_or_default();
    let name = names["names"][0]["name"].as_str().unwrap_or("Ana").to_string();
    for (name, args) in
        [("search", vec!["search"]), ("status", vec!["status"]), ("about", vec!["about", name.as_str()])]
    {
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
    // Decay by use at its dearest: every entry in the use table (each recalled once, three
    // days ago), which every search reads.
    let mut uses = memfold::store::uses::Uses::default();
    let when = chrono::Utc::now() - chrono::Duration::days(3);
    for i in 0..entries {
        uses.ids.insert(format!("m-{i:06}"), memfold::store::uses::Use(when, 1));
    }
    uses.save(&root).unwrap();
    let mut times: Vec<Duration> = queries.iter().map(|q| timed(&root_dir, &["search", q])).collect();
    times.sort();
    report.push(format!(
        "`memfold search` with every entry in the use table median {:.0} ms, slowest {:.0} ms",
        times[RUNS / 2].as_secs_f64() * 1000.0,
        times[RUNS - 1].as_secs_f64() * 1000.0
    ));
    println!(
        "cli {entries} entries ({}), commit {}: reindex --clear {:.1} s ({:.0} docs/s); {}; index on disk {:.1} MB",
        vocab.map_or("varied", worklog::Vocab::name),
        run::commit(),
        reindex.as_secs_f64(),
        entries as f64 / reindex.as_secs_f64(),
        report.join("; "),
        memfold::store::tree_bytes(&root_dir.join(".memfold/index")) as f64 / 1e6,
    );

    // The first pass over as many new facts: `add --stdin`, then `consolidate --force` (local
    // embedder, offline decider), each a whole process.
    let fresh = root_dir.with_file_name(format!("first-pass-{entries}"));
    assert!(memfold(&fresh).arg("init").stdout(Stdio::null()).status().unwrap().success());
    let started = Instant::now();
    run::add_stdin(&fresh, &texts);
    let added = started.elapsed();
    let pass = timed(&fresh, &["consolidate", "--force"]);
    println!(
        "cli {entries} new facts, commit {}: add --stdin {:.2} s; first pass (consolidate --force) {:.1} s",
        run::commit(),
        added.as_secs_f64(),
        pass.as_secs_f64()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cli bench: skipped (run with `cargo bench --bench cli`)");
        return;
    }
    let binary = std::fs::metadata(env!("CARGO_BIN_EXE_memfold")).map_or(0, |m| m.len());
    println!("cli bench, commit {}: the memfold binary takes {:.1} MB", run::commit(), binary as f64 / 1e6);
    let sizes = match std::env::var("MEMFOLD_BENCH_ENTRIES") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![10_000, 100_000],
    };
    // MEMFOLD_BENCH_VOCAB: `varied` (the default), `work` or `ops` (tests/common/worklog.rs).
    let vocabs = std::env::var("MEMFOLD_BENCH_VOCAB").unwrap_or_else(|_| "varied".into());
    for vocab in vocabs.split(',').map(str::trim) {
        for &entries in &sizes {
            bench(entries, worklog::Vocab::parse(vocab));
        }
    }
}
