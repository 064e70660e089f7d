//! Decay by use, from outside: the `memfold` binary run with the machine's clock moved by
//! libfaketime. Of 100 entries written on one day, 50 are recalled by searches half a year
//! later; a year and a half later `sweep --stale` proposes exactly the other 50 (after the
//! recall log dropped the searches: the use table kept them), an entry recalled recently ranks
//! above an equally similar one never recalled, applying the plan moves the 50 to history
//! (found with `--history`), `undo` brings `memory.md` back byte for byte, and `verify` is ok
//! throughout.
//!
//! Runs when libfaketime is installed (`.ci/run` installs Debian's `faketime`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use memfold::store::Root;
use memfold::store::archive::{self, NewFact};
use memfold::store::entries::{Entry, EntryMeta};
use serde_json::Value;

use crate::common::{d, init_root, json, memfold};

fn libfaketime() -> Option<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime",
        "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib/faketime",
        "/usr/local/lib/faketime",
    ]
    .iter()
    .map(|dir| Path::new(dir).join("libfaketime.so.1"))
    .find(|p| p.is_file())
}

/// The binary on `root` at `when` ("2026-06-01 12:00:00", the clock running from there).
fn at(root: &Path, when: &str, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    let lib = libfaketime().expect("libfaketime");
    let fake = format!("@{when}");
    let mut env =
        vec![("LD_PRELOAD", lib.to_str().unwrap()), ("FAKETIME", fake.as_str()), ("FAKETIME_DONT_FAKE_MONOTONIC", "1")];
    env.extend_from_slice(extra);
    memfold(root, args, &env)
}

/// A word only entry `i` holds.
fn word(i: usize) -> String {
    const SYLLABLES: [&str; 10] = ["ba", "ko", "mi", "ru", "te", "zo", "la", "ne", "pi", "su"];
    format!("{}{}{}x", SYLLABLES[i / 10 % 10], SYLLABLES[i % 10], SYLLABLES[(i * 7 + 3) % 10])
}

fn hit_ids(out: &Value) -> Vec<String> {
    out["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

/// An entry as memfold writes one, made from the fact `source` on 2025-01-10.
fn entry(id: &str, text: &str, source: &str, pinned: bool) -> String {
    let meta = EntryMeta {
        first_seen: Some(d("2025-01-10")),
        updated: Some(d("2025-01-10")),
        sources: vec![source.to_string()],
        pinned,
        ..EntryMeta::new(id)
    };
    format!("{}\n", Entry::new(meta, text).render())
}

#[test]
fn unused_entries_are_proposed_for_retirement_ranked_lower_retired_to_history_and_undone() {
    if libfaketime().is_none() {
        return memfold::testkit::skip("libfaketime is not installed (Debian: faketime)");
    }
    let dir = init_root();
    let root = Root::new(dir.path());
    let texts: Vec<String> =
        (0..98).map(|i| format!("The locker {} holds the spare climbing rope.", word(i))).collect();
    let twin = "Keeps the spare house key under the blue flower pot.";
    let pinned = "The wifi password hint is the name of the first cat, oxqorbit.";
    let append = |texts: &[&str]| -> Vec<String> {
        let facts: Vec<NewFact> =
            texts.iter().map(|t| NewFact { text: t.to_string(), date: Some(d("2025-01-10")), source: None }).collect();
        let when = d("2025-01-10").and_hms_opt(12, 0, 0).unwrap();
        archive::append(&root, &facts, when).unwrap().into_iter().map(|f| f.id).collect()
    };
    let mut all: Vec<&str> = texts.iter().map(String::as_str).collect();
    all.extend([twin, pinned]);
    let ids = append(&all);
    let mut memory: String = (0..98).map(|i| entry(&format!("m-{i:03}"), &texts[i], &ids[i], false)).collect();
    memory.push_str(&entry("m-twin-b", twin, &ids[98], false));
    memory.push_str(&entry("m-pinned", pinned, &ids[99], true));
    std::fs::write(root.memory(), &memory).unwrap();

    // Half a year on, searches recall the even entries and one twin (the other is not written yet).
    let recalled: BTreeSet<String> =
        (0..98).step_by(2).map(|i| format!("m-{i:03}")).chain(["m-twin-b".to_string()]).collect();
    for i in (0..98).step_by(2) {
        let out = json(&at(dir.path(), "2026-06-01 12:00:00", &["search", &word(i), "-k", "1", "--json"], &[]));
        assert_eq!(hit_ids(&out), [format!("m-{i:03}")], "{}", word(i));
    }
    let out = json(&at(
        dir.path(),
        "2026-06-01 13:00:00",
        &["search", "spare house key flower pot", "-k", "1", "--json"],
        &[],
    ));
    assert_eq!(hit_ids(&out), ["m-twin-b"]);
    // The other twin, as old, written in by hand: the same text, never recalled.
    let fact = append(&[twin]).remove(0);
    memory.push_str(&entry("m-twin-a", twin, &fact, false));
    std::fs::write(root.memory(), &memory).unwrap();
    let never: BTreeSet<String> =
        (1..98).step_by(2).map(|i| format!("m-{i:03}")).chain(["m-twin-a".to_string()]).collect();
    assert_eq!((recalled.len(), never.len()), (50, 50));

    // A year and a half on: a search drops the old searches from the recall log (past its
    // 30-day window); the use table keeps them.
    let later = "2027-01-10 12:00:00";
    let out = json(&at(dir.path(), later, &["search", "oxqorbit", "-k", "1", "--json"], &[]));
    assert_eq!(hit_ids(&out), ["m-pinned"]);
    let log = std::fs::read_to_string(root.recall()).unwrap();
    assert!(!log.contains("2026-06-01") && log.contains("m-pinned"), "compacted: {log}");

    let out = json(&at(dir.path(), later, &["sweep", "--stale", "--json"], &[]));
    let proposed: BTreeSet<String> =
        out["stale"].as_array().unwrap().iter().map(|op| op["target"].as_str().unwrap().to_string()).collect();
    assert_eq!(proposed, never, "the never recalled, all of them, and nothing else");
    let why = out["stale"][0]["why"].as_str().unwrap();
    assert!(why.contains("never recalled since it was written 2025-01-10"), "{why}");
    let plan = out["stale_plan"].as_str().expect("stored as a plan").to_string();
    assert_eq!(std::fs::read_to_string(root.memory()).unwrap(), memory, "proposed, not applied");
    let status = json(&at(dir.path(), later, &["status", "--json"], &[]));
    assert_eq!(status["stale_entries"], 50, "{status}");

    // Two entries equally similar to a query: the one recalled half a year ago ranks first;
    // without decay the tie goes by id.
    let query = ["search", "spare house key under the blue flower pot", "-k", "2", "--json"];
    assert_eq!(hit_ids(&json(&at(dir.path(), later, &query, &[]))), ["m-twin-b", "m-twin-a"]);
    assert_eq!(
        hit_ids(&json(&at(dir.path(), later, &query, &[("MEMFOLD_DECAY__WEIGHT", "0")]))),
        ["m-twin-a", "m-twin-b"]
    );

    // Applied, the 50 go to history as retired; their facts are accounted for.
    let applied = json(&at(dir.path(), later, &["apply", &plan, "--json"], &[]));
    let run = applied["run"].as_str().unwrap().to_string();
    let file = memfold::store::entries::EntryFile::parse(&std::fs::read_to_string(root.memory()).unwrap(), "memory.md");
    let left: BTreeSet<String> = file.entries().map(|e| e.id().to_string()).collect();
    assert_eq!(left.len(), 51);
    assert!(left.is_disjoint(&never));
    let history = std::fs::read_to_string(root.history()).unwrap();
    assert_eq!(history.matches("\"status\":\"retired\"").count(), 50, "{history}");
    let verified = json(&at(dir.path(), later, &["verify", "--json"], &[]));
    assert_eq!((verified["ok"].as_bool(), verified["retired"].as_u64()), (Some(true), Some(50)), "{verified}");
    let found = json(&at(dir.path(), later, &["search", &word(1), "-k", "1", "--history", "--json"], &[]));
    assert_eq!(
        (found["hits"][0]["id"].as_str(), found["hits"][0]["kind"].as_str()),
        (Some("m-001"), Some("history")),
        "{found}"
    );
    let pending = json(&at(dir.path(), later, &["status", "--json"], &[]));
    assert_eq!(pending["pending_facts"], 0, "retired facts are not pending again: {pending}");

    // Undone, memory.md is what it was, byte for byte.
    let undone = at(dir.path(), later, &["undo", &run], &[]);
    assert!(undone.status.success(), "{}", String::from_utf8_lossy(&undone.stderr));
    assert_eq!(std::fs::read_to_string(root.memory()).unwrap(), memory);
    let verified = json(&at(dir.path(), later, &["verify", "--json"], &[]));
    assert_eq!((verified["ok"].as_bool(), verified["retired"].as_u64()), (Some(true), Some(0)), "{verified}");
}

/// With `consolidation.auto_apply` naming STALE, a sweep retires the stale entries itself, as a
/// run `undo` takes back; a pinned entry as old is kept. No clock moved: the entries are old.
#[test]
fn auto_apply_naming_stale_retires_as_an_undoable_run() {
    let dir = init_root();
    let root = Root::new(dir.path());
    let facts: Vec<NewFact> = ["Old note about the shed key.", "Old note about the gate code, kept on purpose."]
        .iter()
        .map(|t| NewFact { text: t.to_string(), date: Some(d("2025-01-10")), source: None })
        .collect();
    let ids: Vec<String> = archive::append(&root, &facts, d("2025-01-10").and_hms_opt(12, 0, 0).unwrap())
        .unwrap()
        .into_iter()
        .map(|f| f.id)
        .collect();
    let memory = entry("m-shed", "Old note about the shed key.", &ids[0], false)
        + &entry("m-gate", "Old note about the gate code, kept on purpose.", &ids[1], true);
    std::fs::write(root.memory(), &memory).unwrap();
    let auto = [
        ("MEMFOLD_CONSOLIDATION__AUTO_APPLY", "ADD,REPLACE,REMOVE,DUPLICATE,STALE"),
        ("MEMFOLD_DECAY__RETIRE_AFTER_DAYS", "30"),
    ];
    let out = json(&memfold(dir.path(), &["sweep", "--stale", "--json"], &auto));
    let run = out["stale_run"].as_str().unwrap_or_else(|| panic!("applied: {out}")).to_string();
    let left = std::fs::read_to_string(root.memory()).unwrap();
    assert!(!left.contains("shed key") && left.contains("gate code"), "{left}");
    assert!(std::fs::read_to_string(root.history()).unwrap().contains("\"status\":\"retired\""));
    assert!(memfold(dir.path(), &["undo", &run], &[]).status.success());
    assert_eq!(std::fs::read_to_string(root.memory()).unwrap(), memory);
    // Without STALE in auto_apply the same sweep only proposes. (The run's commit wrote
    // MEMORY.md, whose lines are exempt: in a memory this small it holds both entries.)
    let promoted = std::fs::read_to_string(root.memory_md()).unwrap();
    assert!(promoted.contains("m-shed"), "{promoted}");
    std::fs::write(root.memory_md(), "").unwrap();
    let out = json(&memfold(dir.path(), &["sweep", "--stale", "--json"], &auto[1..]));
    assert!(out["stale_plan"].is_string() && out["stale_run"].is_null(), "{out}");
    assert_eq!(std::fs::read_to_string(root.memory()).unwrap(), memory);
}
