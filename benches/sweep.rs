//! Sweeps at 100k entries, whole `memfold sweep` processes, on two kinds of memory:
//! - `varied`: N different sentences about people, places and things (`tests/common/life.rs`);
//! - `repetitive`: N facts of one shape, "Kamara's dentist is Dr. Chen.", 4,000 subjects with
//!   25 things each, the way an agent's memory of one field repeats itself (many entries share
//!   most of their words);
//! - `work` and `ops` (with `MEMFOLD_BENCH_KINDS`): the work logs of `tests/common/worklog.rs`,
//!   where every word but a number is in thousands of entries.
//!
//! In each, one entry in 500 has a planted duplicate (the same sentence, its end changed).
//! For each kind the bench prints
//! - a full sweep, offline (`sweep --full`): wall time, entries compared, ops proposed, and
//!   how many planted duplicates were proposed;
//! - an incremental sweep after `MEMFOLD_BENCH_CHANGED` (1,000) entries were rewritten:
//!   wall time and entries swept;
//! - the same incremental sweep with a scripted LLM (an OpenAI-compatible server in this
//!   process that answers at once: DUPLICATE for the same sentence, else ADD), its
//!   `sweep_max_calls` raised so every document is decided: LLM calls and prompt tokens per
//!   swept entry, as the server counted them (characters / 4, whole prompt);
//! - `sweep --stale` with half the entries recalled ten days ago and `decay.retire_after_days`
//!   below the entries' age: wall time and entries proposed; then the plan applied and undone;
//! - the commit it ran on.
//!
//! Run: `cargo bench --bench sweep` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (100000),
//! `MEMFOLD_BENCH_CHANGED` (1000), `MEMFOLD_BENCH_KINDS` (`varied,repetitive`).
//! Targets (issue "Curation"): a full sweep of 100k entries offline ≤ 60 s, an incremental
//! sweep after 1,000 changed entries ≤ 5 s; `sweep --stale` at 100k ≤ 60 s.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;
#[path = "../tests/common/worklog.rs"]
#[allow(dead_code)]
mod worklog;

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use memfold::store::Root;
use memfold::testkit::{FAKE_CHAT_MODEL, FakeOpenAi, FakeReply};
use serde_json::{Value, json};

use run::knob;

/// One entry in this many has a planted duplicate.
const PLANT_EVERY: usize = 500;

/// A made-up name per index, distinct for the first 4,000.
fn name(i: usize) -> String {
    const A: &[&str] = &["Ka", "Lo", "Mi", "Ru", "Ze", "Ta", "Vo", "Ni", "Sa", "Pe"];
    const B: &[&str] = &["ren", "mar", "lis", "dov", "qua", "tel", "bix", "gor", "fen", "wul"];
    const C: &[&str] = &["a", "o", "is", "ek", "um", "ar", "in", "os", "ay", "ut"];
    format!("{}{}{}{}", A[i % 10], B[(i / 10) % 10], C[(i / 100) % 10], ["", "x", "z", "q"][(i / 1000) % 4])
}

/// `n` distinct facts of one shape: 4,000 subjects × 25 things × values.
fn repetitive(n: usize) -> Vec<String> {
    const THINGS: &[&str] = &[
        "dentist",
        "bicycle",
        "landlord",
        "piano teacher",
        "favourite cafe",
        "accountant",
        "plumber",
        "tailor",
        "car",
        "gym",
        "doctor",
        "barber",
        "bank",
        "vet",
        "school",
        "office",
        "phone",
        "laptop",
        "editor",
        "shell",
        "coach",
        "tutor",
        "florist",
        "baker",
        "mechanic",
    ];
    const VALUES: &[&str] =
        &["Dr. Alvarez", "Dr. Chen", "Oakridge", "Birchmoor", "Larkspur", "Quenby", "Halloway", "Tamsin"];
    (0..n)
        .map(|i| {
            let (who, thing) = (name(i % 4000), THINGS[(i / 4000) % THINGS.len()]);
            format!("{who}'s {thing} is {}.", VALUES[(i * 7 + i / 4000) % VALUES.len()])
        })
        .collect()
}

/// The texts of a kind, with one planted duplicate per [`PLANT_EVERY`] (placed right after
/// its original's block, at the end); the planted pairs as entry indices.
fn texts(kind: &str, n: usize) -> (Vec<String>, Vec<(usize, usize)>) {
    let planted = n / PLANT_EVERY;
    let mut texts = match (kind, worklog::Vocab::parse(kind)) {
        ("varied", _) => life::distractors(n - planted),
        (_, Some(vocab)) => worklog::facts(vocab, 0, n - planted),
        _ => repetitive(n - planted),
    };
    let mut pairs = Vec::with_capacity(planted);
    for p in 0..planted {
        let original = p * PLANT_EVERY;
        let copy = format!("{}!", texts[original].trim_end_matches('.'));
        pairs.push((original, texts.len()));
        texts.push(copy);
    }
    (texts, pairs)
}

fn sweep(root: &Path, args: &[&str], env: &[(&str, &str)]) -> (Value, f64) {
    let mut command = run::memfold(root);
    command.arg("sweep").args(args).arg("--json").env("MEMFOLD_LOG", "warn").stderr(Stdio::inherit());
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let out = command.output().expect("memfold sweep runs");
    let secs = started.elapsed().as_secs_f64();
    assert!(out.status.success(), "sweep failed: {}", String::from_utf8_lossy(&out.stdout));
    (serde_json::from_slice(&out.stdout).expect("sweep --json"), secs)
}

/// Rewrite `changed` entries, spread over the file, each with words of its own added.
fn change(root: &Root, texts: &mut [String], changed: usize, round: usize) {
    let step = (texts.len() / changed.max(1)).max(1);
    for i in (0..texts.len()).step_by(step).take(changed) {
        texts[i] = format!("{} Noted again in round {round}, item {i}.", texts[i].trim_end_matches(['.', '!']));
    }
    seed::write_entries(root, texts);
}

/// What a careful LLM answers a sweep document: the same sentence is a DUPLICATE, else ADD.
fn scripted(request: &Value) -> FakeReply {
    let user = request["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
    let Ok(doc) = serde_json::from_str::<Value>(user) else {
        return FakeReply::Content(json!({ "ops": [] }).to_string());
    };
    let Some(cand) = doc["candidates"].get(0) else {
        return FakeReply::Content(json!({ "ops": [] }).to_string());
    };
    let (cid, text) = (cand["id"].as_str().unwrap_or(""), cand["text"].as_str().unwrap_or(""));
    let norm = |s: &str| s.trim_end_matches(['.', '!']).to_lowercase();
    for n in doc["neighbors"].as_array().into_iter().flatten() {
        if norm(n["content"].as_str().unwrap_or("")) == norm(text) {
            let target = n["id"].as_str().unwrap_or("");
            return FakeReply::Content(
                json!({ "ops": [{ "op": "DUPLICATE", "facts": [cid], "target": target }] }).to_string(),
            );
        }
    }
    FakeReply::Content(json!({ "ops": [{ "op": "ADD", "facts": [cid], "content": text }] }).to_string())
}

/// Planted pairs proposed as one folded into the other.
fn found(plan: &Value, pairs: &[(usize, usize)]) -> usize {
    let removed: std::collections::HashSet<(String, String)> = plan["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["ops"].as_array().cloned().unwrap_or_default())
        .filter(|o| o["op"] == "REMOVE")
        .map(|o| (o["target"].as_str().unwrap_or("").to_string(), o["into"].as_str().unwrap_or("").to_string()))
        .collect();
    let id = |i: usize| format!("m-{i:06}");
    pairs.iter().filter(|(a, b)| removed.contains(&(id(*a), id(*b))) || removed.contains(&(id(*b), id(*a)))).count()
}

fn bench(kind: &str, n: usize, changed: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    root.init().unwrap();
    let (mut texts, pairs) = texts(kind, n);
    seed::write_entries(&root, &texts);
    println!("{kind}: {n} entries, {} planted duplicates", pairs.len());

    let (full, secs) = sweep(dir.path(), &["--full"], &[]);
    let ops = full["ops"].as_array().map_or(0, Vec::len);
    let planted = match full["plan"].as_str() {
        Some(plan) => {
            let out = run::memfold(dir.path()).args(["plan", plan, "--json"]).output().unwrap();
            found(&serde_json::from_slice(&out.stdout).unwrap_or(Value::Null), &pairs)
        }
        None => 0,
    };
    println!(
        "  full sweep, offline: {secs:.2} s wall ({} ms inside), {} swept, {} with neighbours, {ops} ops proposed, planted duplicates proposed {planted} of {}",
        full["ms"],
        full["swept"],
        full["compared"],
        pairs.len()
    );
    // The next sweeps see what a person would leave: the proposals rejected.
    if let Some(plan) = full["plan"].as_str() {
        let out = run::memfold(dir.path()).args(["reject", plan, "--json"]).output().unwrap();
        assert!(out.status.success(), "reject: {}", String::from_utf8_lossy(&out.stdout));
    }

    change(&root, &mut texts, changed, 1);
    let (inc, secs) = sweep(dir.path(), &[], &[]);
    println!(
        "  incremental sweep after {changed} changed entries, offline: {secs:.2} s wall ({} ms inside), {} swept, {} with neighbours, {} ops",
        inc["ms"],
        inc["swept"],
        inc["compared"],
        inc["ops"].as_array().map_or(0, Vec::len)
    );

    let llm = FakeOpenAi::start_in_thread();
    llm.set_chat_handler(scripted);
    let url = llm.base_url();
    let env = [
        ("MEMFOLD_LLM__BASE_URL", url.as_str()),
        ("MEMFOLD_LLM__MODEL", FAKE_CHAT_MODEL),
        ("MEMFOLD_LLM__API_KEY_ENV", ""),
        ("MEMFOLD_CONSOLIDATION__SWEEP_MAX_CALLS", "1000000"),
    ];
    change(&root, &mut texts, changed, 2);
    let (with_llm, secs) = sweep(dir.path(), &[], &env);
    let swept = with_llm["swept"].as_u64().unwrap_or(0).max(1) as f64;
    println!(
        "  incremental sweep after {changed} changed entries, scripted LLM: {secs:.2} s wall, {} swept, {} decided; {} calls ({:.3} per swept entry), {} prompt tokens ({:.0} per swept entry, {:.0} per call)",
        with_llm["swept"],
        with_llm["decided"],
        llm.chat_calls(),
        llm.chat_calls() as f64 / swept,
        llm.prompt_tokens(),
        llm.prompt_tokens() as f64 / swept,
        llm.prompt_tokens() as f64 / llm.chat_calls().max(1) as f64,
    );

    stale(dir.path(), &root, n);
}

/// `sweep --stale` after searches recalled every other entry ten days ago (a recall log of
/// n/2 records), with `decay.retire_after_days` below the seeded entries' age, so the other
/// half (less those a pending plan holds) is proposed; then the plan applied and undone.
fn stale(dir: &Path, root: &Root, n: usize) {
    let when = (chrono::Utc::now() - chrono::Duration::days(10)).to_rfc3339();
    let log: String = (0..n)
        .step_by(2)
        .map(|i| format!("{{\"id\":\"m-{i:06}\",\"time\":\"{when}\",\"query\":\"0123456789ab\"}}\n"))
        .collect();
    std::fs::write(root.recall(), log).unwrap();
    let env = [("MEMFOLD_DECAY__RETIRE_AFTER_DAYS", "300")];
    let (found, secs) = sweep(dir, &["--stale"], &env);
    let proposed = found["stale"].as_array().map_or(0, Vec::len);
    println!("  sweep --stale, {} recalled: {secs:.2} s wall ({} ms inside), {proposed} proposed", n / 2, found["ms"]);
    let Some(plan) = found["stale_plan"].as_str() else { return };
    let timed = |args: &[&str]| {
        let started = Instant::now();
        let out = run::memfold(dir).args(args).env("MEMFOLD_LOG", "warn").output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null), started.elapsed().as_secs_f64())
    };
    let (applied, apply_secs) = timed(&["apply", plan, "--json"]);
    let run = applied["run"].as_str().unwrap_or_default().to_string();
    let (_, undo_secs) = timed(&["undo", &run, "--json"]);
    println!("  the stale plan applied: {apply_secs:.2} s wall; undone: {undo_secs:.2} s wall");
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and should not load the machine.
    if !std::env::args().any(|a| a == "--bench") {
        println!("sweep bench: skipped (run with `cargo bench --bench sweep`)");
        return;
    }
    let n = knob("MEMFOLD_BENCH_ENTRIES", 100_000);
    let changed = knob("MEMFOLD_BENCH_CHANGED", 1_000);
    let kinds = std::env::var("MEMFOLD_BENCH_KINDS").unwrap_or_else(|_| "varied,repetitive".into());
    for kind in kinds.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        bench(kind, n, changed);
    }
    println!("commit {}", run::commit());
}
