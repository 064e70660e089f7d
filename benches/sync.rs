//! Sync benchmark: 1,000 new facts (and the entries a pass made of them) from one machine
//! merged into a root of N entries on another, through a bare repository on local disk.
//!
//! It writes root A (N facts over 100 days, one entry per fact), `sync --init`s it to a bare
//! remote, and makes root B from the remote (`sync --init` of an empty root: a machine joining).
//! Then B archives 1,000 new facts and consolidates them, A archives 10 of its own, B syncs, and
//! A syncs: the timed merge (a three-way one: today's day file changed on both machines). Each
//! sync is a whole `memfold sync --json` process; memfold's own time (reading, merging,
//! writing) and git's (objects, refs, transfer) are printed apart, as the report gives them.
//!
//! Run: `cargo bench --bench sync` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (default 100000),
//! `MEMFOLD_BENCH_VOCAB` (`varied`, the default; `work` or `ops`: the repetitive memories of
//! `tests/common/worklog.rs`; a list runs each).
//! Target (issue "Memory that follows you to every machine"): ≤ 5 s of memfold's own time.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "../tests/common/worklog.rs"]
#[allow(dead_code)]
mod worklog;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use chrono::NaiveDate;
use memfold::store::Root;
use memfold::store::archive::{Appender, NewFact};
use memfold::store::entries::{Entry, EntryFile, EntryMeta};
use run::memfold;
use serde_json::Value;

fn ok(root: &Path, args: &[&str]) -> Value {
    let out = memfold(root).args(args).env("MEMFOLD_LOG", "warn").output().unwrap();
    assert!(out.status.success(), "memfold {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// One sync, timed: (wall seconds, memfold's ms, git's ms, its report).
fn sync(root: &Path, init: Option<&str>) -> (f64, u64, u64, Value) {
    let mut args = vec!["sync", "--json"];
    if let Some(remote) = init {
        args.extend(["--init", remote]);
    }
    let started = Instant::now();
    let report = ok(root, &args);
    let wall = started.elapsed().as_secs_f64();
    (wall, report["ms"].as_u64().unwrap_or(0), report["git_ms"].as_u64().unwrap_or(0), report)
}

/// The sentences of a vocabulary (None: varied ones).
fn texts(vocab: Option<worklog::Vocab>, n: usize) -> Vec<String> {
    match vocab {
        Some(v) => worklog::facts(v, 0, n),
        None => life::distractors(n),
    }
}

/// `texts` as facts over 100 days and one entry per fact naming it.
fn seed(root: &Root, texts: &[String]) {
    let first = NaiveDate::from_ymd_opt(2026, 6, 1).unwrap();
    let facts: Vec<NewFact> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| NewFact {
            text: t.clone(),
            date: Some(first + chrono::Days::new((i % 100) as u64)),
            source: None,
        })
        .collect();
    let now = first.and_hms_opt(9, 0, 0).unwrap();
    let archived = Appender::default().append(root, &facts, now).unwrap();
    let mut file = EntryFile::default();
    for (i, fact) in archived.iter().enumerate() {
        let meta = EntryMeta {
            first_seen: Some(fact.date),
            updated: Some(fact.date),
            sources: vec![fact.id.clone()],
            ..EntryMeta::new(format!("m-{i:06}"))
        };
        file.push(Entry::new(meta, &fact.text));
    }
    std::fs::write(root.memory(), file.render()).unwrap();
}

fn main() {
    let n: usize = std::env::var("MEMFOLD_BENCH_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let vocabs = std::env::var("MEMFOLD_BENCH_VOCAB").unwrap_or_else(|_| "varied".into());
    for vocab in vocabs.split(',').map(str::trim) {
        bench(n, worklog::Vocab::parse(vocab));
    }
}

fn bench(n: usize, vocab: Option<worklog::Vocab>) {
    let all = texts(vocab, n + 1_010);
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    assert!(Command::new("git").args(["init", "--quiet", "--bare"]).arg(&remote).status().unwrap().success());
    let remote = remote.display().to_string();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    ok(&a, &["init"]);
    ok(&b, &["init"]);
    seed(&Root::new(&a), &all[..n]);
    let (wall, ms, git_ms, _) = sync(&a, Some(&remote));
    println!(
        "sync {n} entries ({}), commit {}: first push from A {wall:.1} s (memfold {ms} ms, git {git_ms} ms)",
        vocab.map_or("varied", worklog::Vocab::name),
        run::commit()
    );
    let (wall, ms, git_ms, report) = sync(&b, Some(&remote));
    println!(
        "  a new machine B joins: {wall:.1} s (memfold {ms} ms, git {git_ms} ms; {} facts, {} entries came in)",
        report["merged"]["facts"], report["merged"]["entries"]
    );

    let news = all;
    run::add_stdin(&b, &news[n..n + 1_000]);
    let pass = Instant::now();
    ok(&b, &["consolidate", "--force", "--json"]);
    let pass = pass.elapsed().as_secs_f64();
    run::add_stdin(&a, &news[n + 1_000..]);
    let (wall, ms, git_ms, _) = sync(&b, None);
    println!(
        "  B archives 1,000 facts, consolidates them ({pass:.1} s, not timed) and syncs: {wall:.1} s (memfold {ms} ms, git {git_ms} ms)"
    );
    let (wall, ms, git_ms, report) = sync(&a, None);
    println!(
        "  A syncs them in (10 facts of its own the same day): {wall:.1} s wall, memfold {ms} ms, git {git_ms} ms; {} facts, {} entries came in, {} merges",
        report["merged"]["facts"], report["merged"]["entries"], report["merges"]
    );
    let (wall, ms, git_ms, _) = sync(&b, None);
    println!("  B takes A's merge: {wall:.1} s (memfold {ms} ms, git {git_ms} ms)");
    let same = std::fs::read(a.join("consolidated/memory.md")).unwrap()
        == std::fs::read(b.join("consolidated/memory.md")).unwrap();
    let verify = ok(&a, &["verify", "--json"]);
    println!("  memory.md the same on both: {same}; verify on A: ok={} ({} facts)", verify["ok"], verify["facts"]);
}
