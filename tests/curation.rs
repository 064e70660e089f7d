//! Curation through the binary: merge, supersede, undo of one op or group, notes, sweeps,
//! over the CLI and HTTP, with `verify` after every step and after undoing each.

use std::path::Path;

use memfold::store::entries::EntryFile;
use memfold::testkit::{FakeOpenAi, FakeReply};
use serde_json::{Value, json};

use crate::common::daemon::Fixture;

fn cli(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    let out = crate::common::memfold(root, args, env);
    assert!(out.status.success(), "{args:?}: exit {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn refused(root: &Path, args: &[&str]) -> String {
    let out = crate::common::memfold(root, args, &[]);
    assert!(!out.status.success(), "{args:?} should be refused: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn verified(root: &Path) {
    let v = cli(root, &["verify", "--json"], &[]);
    assert_eq!(v["ok"], true, "verify: {v}");
}

fn memory(root: &Path) -> EntryFile {
    EntryFile::parse(&std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap(), "memory.md")
}

fn id_with(root: &Path, word: &str) -> String {
    memory(root)
        .entries()
        .find(|e| e.content.contains(word))
        .unwrap_or_else(|| panic!("no entry with {word}"))
        .id()
        .to_string()
}

/// A root whose facts were folded into one entry each by an offline pass.
fn root_with(texts: &[&str]) -> tempfile::TempDir {
    let dir = crate::common::init_root();
    for t in texts {
        cli(dir.path(), &["add", "--json", "--date", "2026-05-27", t], &[]);
    }
    cli(dir.path(), &["consolidate", "--force", "--json"], &[]);
    assert_eq!(memory(dir.path()).entries().count(), texts.len());
    dir
}

#[test]
fn merge_and_supersede_over_the_cli_keep_every_fact_and_undo_restores_memory() {
    let dir = root_with(&[
        "Has a beagle named Biscuit.",
        "Biscuit was born in 2019.",
        "Drives a blue Corolla.",
        "Bought a green Civic in May.",
        "Lives on Elm Street.",
    ]);
    let root = dir.path();
    let before = std::fs::read(root.join("consolidated/memory.md")).unwrap();
    let (a, b) = (id_with(root, "beagle"), id_with(root, "2019"));

    // merge with a given text: one entry, sources united, the other to history as merged.
    let merged = cli(
        root,
        &["merge", &a, &b, "--text", "Has a beagle named Biscuit, born in 2019.", "--note", "same dog", "--json"],
        &[],
    );
    assert_eq!((merged["entry"].as_str(), merged["text_from"].as_str()), (Some(a.as_str()), Some("given")));
    let m = memory(root);
    assert!(m.get(&b).is_none());
    assert_eq!(m.get(&a).unwrap().content, "Has a beagle named Biscuit, born in 2019.");
    assert_eq!(m.get(&a).unwrap().meta.sources.len(), 2, "sources united");
    verified(root);
    let chain = cli(root, &["history", &b, "--json"], &[]);
    assert!(chain.to_string().contains("\"merged\""), "{chain}");
    let runs = cli(root, &["runs", "--json"], &[]);
    let run = runs["runs"].as_array().unwrap().iter().find(|r| r["verb"] == "merge").unwrap().clone();
    assert!(run["notes"][0].as_str().unwrap().contains("same dog"), "{run}");

    // supersede by another entry, then by a text.
    let (old, new) = (id_with(root, "Corolla"), id_with(root, "Civic"));
    let sup = cli(root, &["supersede", &old, "--with", &new, "--json"], &[]);
    assert_eq!(sup["entry"], new.as_str());
    assert!(memory(root).get(&old).is_none());
    assert_eq!(memory(root).get(&new).unwrap().meta.sources.len(), 2);
    verified(root);
    let chain = cli(root, &["history", &old, "--json"], &[]);
    assert!(chain.to_string().contains("\"superseded\""), "{chain}");
    let elm = id_with(root, "Elm");
    let by_text = cli(root, &["supersede", &elm, "--text", "Lives on Oak Avenue since 2026.", "--json"], &[]);
    assert_eq!(memory(root).get(&elm).unwrap().content, "Lives on Oak Avenue since 2026.");
    verified(root);

    // a pinned entry is refused, naming it.
    assert!(crate::common::memfold(root, &["pin", &elm], &[]).status.success());
    let err = refused(root, &["merge", &elm, &a]);
    assert!(err.contains("pinned") && err.contains(&elm), "{err}");
    crate::common::memfold(root, &["unpin", &elm], &[]);

    // undo each, newest first: memory.md byte for byte as before.
    for done in [&by_text, &sup, &merged] {
        let undone = cli(root, &["undo", done["run"].as_str().unwrap(), "--note", "changed my mind", "--json"], &[]);
        assert!(undone["restored"].as_array().is_some(), "{undone}");
        verified(root);
    }
    assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), before);
    let status = cli(root, &["status", "--json"], &[]);
    assert!(status["curation"]["ops_undone"].as_u64().unwrap() >= 4, "{status}");
}

#[test]
fn one_op_of_a_run_is_undone_alone_and_an_op_a_later_one_depends_on_is_refused() {
    let dir = root_with(&["Plays the cello.", "Allergic to penicillin.", "Works at Globex."]);
    let root = dir.path();
    let run = cli(root, &["runs", "--json"], &[])["runs"][0]["run"].as_str().unwrap().to_string();
    let detail = cli(root, &["run", &run, "--json"], &[]);
    assert_eq!(detail["groups"].as_array().unwrap().len(), 3, "three unrelated ADDs: {detail}");
    let second = detail["groups"][1]["entries"][0].as_str().unwrap().to_string();
    let undone = cli(root, &["undo", &run, "--op", "2", "--note", "not mine", "--json"], &[]);
    assert_eq!(undone["ops"], json!([2]));
    assert_eq!(undone["removed"], json!([second]));
    assert_eq!(memory(root).entries().count(), 2);
    verified(root);
    let err = refused(root, &["undo", &run, "--op", "2"]);
    assert!(err.contains("undone already"), "{err}");
    let runs = cli(root, &["runs", "--json"], &[]);
    assert_eq!(runs["runs"][0]["undone_ops"], json!([2]));
    // The rest of the run still undoes as a whole.
    cli(root, &["undo", &run, "--json"], &[]);
    assert_eq!(memory(root).entries().count(), 0);
    verified(root);

    // A merge of three is one group: undoing any of its ops alone (the REPLACE, a REMOVE, two of
    // three) is refused, naming the group and writing nothing; the group undoes whole.
    let dir = root_with(&["Likes jasmine tea.", "Drinks espresso daily.", "Bakes sourdough bread."]);
    let root = dir.path();
    let ids: Vec<String> = memory(root).entries().map(|e| e.id().to_string()).collect();
    let merged = cli(root, &["merge", &ids[0], &ids[1], &ids[2], "--json"], &[]);
    assert_eq!(merged["text_from"], "joined", "no LLM: the texts joined");
    let run = merged["run"].as_str().unwrap();
    let after_merge = std::fs::read(root.join("consolidated/memory.md")).unwrap();
    for ops in ["1", "2", "3", "2,3", "1,3"] {
        let err = refused(root, &["undo", run, "--op", ops]);
        assert!(
            err.contains(&ids[0]) && err.contains("--group 1") && err.contains("nothing was undone"),
            "{ops}: {err}"
        );
        assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), after_merge, "{ops}");
    }
    cli(root, &["undo", run, "--op", "1,2,3", "--json"], &[]);
    assert_eq!(memory(root).entries().count(), 3, "every op of the group: the group");
    verified(root);
    let merged = cli(root, &["merge", &ids[0], &ids[1], &ids[2], "--json"], &[]);
    let run = merged["run"].as_str().unwrap();
    cli(root, &["undo", run, "--group", "1", "--json"], &[]);
    assert_eq!(memory(root).entries().count(), 3);
    verified(root);
}

#[tokio::test]
async fn merge_supersede_and_undo_over_http_with_notes() {
    let fixture = Fixture::new();
    let root = fixture.root();
    for t in ["Runs 5 km on Mondays.", "Swims on Thursdays.", "Owns a red kayak."] {
        cli(&root, &["add", "--json", t], &[]);
    }
    cli(&root, &["consolidate", "--force", "--json"], &[]);
    let daemon = fixture.serve(&[]).await;
    let (a, b, k) = (id_with(&root, "Mondays."), id_with(&root, "Thursdays"), id_with(&root, "kayak"));
    let (code, merged) = daemon.post(&format!("/entries/{b}/merge"), json!({ "with": [a], "note": "one habit" })).await;
    assert_eq!(code, 200, "{merged}");
    assert_eq!(merged["retired"], json!([a]));
    verified(&root);
    let (code, sup) =
        daemon.post(&format!("/entries/{k}/supersede"), json!({ "text": "Sold the red kayak in 2026." })).await;
    assert_eq!(code, 200, "{sup}");
    verified(&root);
    let (code, bad) = daemon.post(&format!("/entries/{k}/supersede"), json!({ "with": b, "text": "x" })).await;
    assert_eq!(code, 400, "{bad}");
    let run = merged["run"].as_str().unwrap();
    let (code, detail) = daemon.get(&format!("/runs/{run}")).await;
    assert_eq!((code, detail["verb"].as_str()), (200, Some("merge")), "{detail}");
    let (code, undone) = daemon.post(&format!("/runs/{run}/undo"), json!({ "note": "two habits after all" })).await;
    assert_eq!(code, 200, "{undone}");
    verified(&root);
    let (_, runs) = daemon.get("/runs").await;
    let notes = runs.to_string();
    assert!(notes.contains("one habit") && notes.contains("two habits after all"), "{runs}");
    let metrics = daemon.metrics().await;
    assert!(metrics.contains("memfold_ops_undone"), "{metrics}");
    daemon.stop().await;
}

/// An entry a person deletes from `memory.md` while the daemon runs is recorded by its
/// watcher, with no change asked for: tombstoned, nothing lost, and a change asked for right
/// after finds no lock held by the daemon itself.
#[tokio::test]
async fn a_hand_deletion_is_recorded_by_the_daemons_watcher() {
    let fixture = Fixture::new();
    let root = fixture.root();
    for t in ["Runs 5 km on Mondays.", "Owns a red kayak."] {
        cli(&root, &["add", "--json", t], &[]);
    }
    cli(&root, &["consolidate", "--force", "--json"], &[]);
    let daemon = fixture.serve(&[]).await;
    let (kayak, runs) = (id_with(&root, "kayak"), id_with(&root, "Mondays"));
    // The kayak's block, its header to the next one, cut out as an editor would.
    let text = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
    let mut cutting = false;
    let kept: String = text
        .split_inclusive('\n')
        .filter(|line| {
            if line.starts_with("<!--m ") {
                cutting = line.contains(&kayak);
            }
            !cutting
        })
        .collect();
    assert!(!kept.contains("kayak") && kept.contains("Mondays"), "{kept}");
    std::fs::write(root.join("consolidated/memory.md"), kept).unwrap();
    let tombstones = root.join(".memfold/tombstones.jsonl");
    crate::common::daemon::eventually(std::time::Duration::from_secs(20), "the hand deletion recorded", async || {
        std::fs::read_to_string(&tombstones).ok().filter(|t| t.contains(&kayak))
    })
    .await;
    let (code, pinned) = daemon.post(&format!("/entries/{runs}/pin"), json!({})).await;
    assert_eq!(code, 200, "{pinned}");
    verified(&root);
    daemon.stop().await;
}

/// 2,000 entries written by hand: distinct people and things, with planted duplicates,
/// contradictions, and additive pairs (same subject, two compatible facts).
struct Planted {
    text: String,
    duplicates: Vec<(String, String)>,
    contradictions: Vec<(String, String)>,
    additive: Vec<(String, String)>,
}

fn name(i: usize) -> String {
    const A: &[&str] = &["Ka", "Lo", "Mi", "Ru", "Ze", "Ta", "Vo", "Ni", "Sa", "Pe"];
    const B: &[&str] = &["ren", "mar", "lis", "dov", "qua", "tel", "bix", "gor", "fen", "wul"];
    const C: &[&str] = &["a", "o", "is", "ek", "um", "ar", "in", "os", "ay", "ut"];
    format!("{}{}{}{}", A[i % 10], B[(i / 10) % 10], C[(i / 100) % 10], ["", "x", "z", "q"][(i / 1000) % 4])
}

fn planted() -> Planted {
    let things =
        ["dentist", "bicycle", "landlord", "piano teacher", "favourite cafe", "accountant", "plumber", "tailor"];
    let values = ["Dr. Alvarez", "Dr. Chen", "Oakridge", "Birchmoor", "Larkspur", "Quenby", "Halloway", "Tamsin"];
    let mut text = String::new();
    let put = |t: String, text: &mut String| -> String {
        let id = format!("m-h{:05}", text.matches("<!--m ").count());
        text.push_str(&format!("<!--m {{\"id\":\"{id}\"}}-->\n{t}\n\n"));
        id
    };
    let (mut duplicates, mut contradictions, mut additive) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..1700 {
        let (who, thing, value) = (name(i), things[i % things.len()], values[(i / 8) % values.len()]);
        let first = put(format!("{who}'s {thing} is {value}."), &mut text);
        match i % 60 {
            0 => duplicates.push((first, put(format!("{who}'s {thing} is {value}!"), &mut text))),
            20 => {
                let other = values[(i / 8 + 3) % values.len()];
                contradictions.push((first, put(format!("{who}'s {thing} is {other}."), &mut text)));
            }
            40 => additive.push((first, put(format!("{who}'s {thing} closes on Sundays."), &mut text))),
            _ => {}
        }
    }
    while text.matches("<!--m ").count() < 2000 {
        let i = 1700 + text.matches("<!--m ").count();
        put(format!("{} collects {} stamps.", name(i), name(i + 7)), &mut text);
    }
    Planted { text, duplicates, contradictions, additive }
}

/// A scripted decider: the same text is a DUPLICATE, the same subject with another value a
/// REPLACE, anything else an ADD (what a careful LLM answers).
fn scripted(request: &Value) -> FakeReply {
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    let Ok(doc) = serde_json::from_str::<Value>(user) else {
        return FakeReply::Content(json!({ "lines": [] }).to_string());
    };
    let Some(cand) = doc["candidates"].get(0) else {
        return FakeReply::Content(json!({ "lines": [] }).to_string());
    };
    let (cid, text) = (cand["id"].as_str().unwrap(), cand["text"].as_str().unwrap());
    let norm = |s: &str| s.trim_end_matches(['.', '!']).to_lowercase();
    let subject = |s: &str| s.split(" is ").next().map(str::to_string);
    for n in doc["neighbors"].as_array().unwrap() {
        let (nid, content) = (n["id"].as_str().unwrap(), n["content"].as_str().unwrap());
        if norm(content) == norm(text) {
            return FakeReply::Content(
                json!({ "ops": [{ "op": "DUPLICATE", "facts": [cid], "target": nid }] }).to_string(),
            );
        }
        if text.contains(" is ") && content.contains(" is ") && subject(content) == subject(text) {
            let merged = format!("{} (earlier: {})", text.trim_end_matches('.'), content.trim_end_matches('.'));
            return FakeReply::Content(
                json!({ "ops": [{ "op": "REPLACE", "target": nid, "facts": [cid], "content": merged, "why": "new value" }] })
                    .to_string(),
            );
        }
    }
    FakeReply::Content(json!({ "ops": [{ "op": "ADD", "facts": [cid], "content": text }] }).to_string())
}

fn removed_pairs(plan: &Value) -> Vec<(String, String)> {
    plan["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["op"] == "REMOVE")
        .map(|o| (o["target"].as_str().unwrap().to_string(), o["into"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_sweep_of_2000_entries_proposes_the_planted_pairs_and_changes_nothing_until_applied() {
    let planted = planted();
    for with_llm in [false, true] {
        let dir = crate::common::init_root();
        let root = dir.path();
        std::fs::write(root.join("consolidated/memory.md"), &planted.text).unwrap();
        let llm = FakeOpenAi::start_in_thread();
        llm.set_chat_handler(scripted);
        let url = llm.base_url();
        let mut env: Vec<(&str, &str)> = vec![("MEMFOLD_CONSOLIDATION__SWEEP_MAX_CALLS", "1000")];
        if with_llm {
            env.extend([
                ("MEMFOLD_LLM__BASE_URL", url.as_str()),
                ("MEMFOLD_LLM__MODEL", memfold::testkit::FAKE_CHAT_MODEL),
                ("MEMFOLD_LLM__API_KEY_ENV", ""),
            ]);
        }
        let before = std::fs::read(root.join("consolidated/memory.md")).unwrap();
        let report = cli(root, &["sweep", "--json"], &env);
        assert_eq!(report["entries"], 2000);
        assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), before, "a sweep writes no markdown");
        let plan_id = report["plan"].as_str().unwrap_or_else(|| panic!("a plan: {report}")).to_string();
        let plan = cli(root, &["plan", &plan_id, "--json"], &env);
        assert_eq!(plan["reason"], "sweep");
        let ops: Vec<Value> =
            plan["groups"].as_array().unwrap().iter().flat_map(|g| g["ops"].as_array().unwrap().clone()).collect();
        let pairs = removed_pairs(&json!({ "ops": ops }));
        let proposed = |(a, b): &(String, String)| pairs.iter().any(|(x, y)| (x == a && y == b) || (x == b && y == a));
        for pair in &planted.duplicates {
            assert!(proposed(pair), "duplicate {pair:?} proposed (llm: {with_llm})");
        }
        if with_llm {
            for pair in &planted.contradictions {
                assert!(proposed(pair), "contradiction {pair:?} proposed");
            }
            for pair in &planted.additive {
                assert!(!proposed(pair), "additive pair {pair:?} left alone");
            }
            assert_eq!(report["llm"]["calls"].as_u64(), Some(llm.chat_calls()));
        } else {
            assert_eq!(llm.chat_calls(), 0);
        }
        // Incremental: nothing changed, nothing swept (entries held by the plan wait).
        let again = cli(root, &["sweep", "--json"], &env);
        assert_eq!(again["plan"], Value::Null, "{again}");
        // Applying writes it; verify holds; the sweep's run undoes.
        let applied = cli(root, &["apply", &plan_id, "--note", "checked", "--json"], &[]);
        assert!(memory(root).entries().count() < 2000);
        verified(root);
        cli(root, &["undo", applied["run"].as_str().unwrap(), "--json"], &[]);
        assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), before);
        verified(root);
        let all = cli(root, &["plans", "--all", "--json"], &[]);
        assert!(
            all["plans"].as_array().unwrap().iter().any(|p| p["status"] == "applied" && p["note"] == "checked"),
            "{all}"
        );
    }
}

#[test]
fn merging_asks_the_llm_for_the_text_and_joins_the_texts_when_it_drops_a_detail() {
    let dir = root_with(&["Has a dog named Biscuit.", "Biscuit was born in 2019."]);
    let root = dir.path();
    let llm = FakeOpenAi::start_in_thread();
    let url = llm.base_url();
    let env = [
        ("MEMFOLD_LLM__BASE_URL", url.as_str()),
        ("MEMFOLD_LLM__MODEL", memfold::testkit::FAKE_CHAT_MODEL),
        ("MEMFOLD_LLM__API_KEY_ENV", ""),
    ];
    let ids: Vec<String> = memory(root).entries().map(|e| e.id().to_string()).collect();
    llm.push_chat(FakeReply::Content(json!({ "content": "Has a dog named Biscuit." }).to_string()));
    let merged = cli(root, &["merge", &ids[0], &ids[1], "--json"], &env);
    assert_eq!(merged["text_from"], "joined", "the LLM's text drops 2019: {merged}");
    assert!(merged["content"].as_str().unwrap().contains("2019"));
    cli(root, &["undo", merged["run"].as_str().unwrap(), "--json"], &[]);
    llm.push_chat(FakeReply::Content(json!({ "content": "Has a dog named Biscuit, born in 2019." }).to_string()));
    let merged = cli(root, &["merge", &ids[0], &ids[1], "--json"], &env);
    assert_eq!(merged["text_from"], "llm", "{merged}");
    verified(root);
}

/// Text a person types into `merge --text` or `supersede --text` is content, never markup: an
/// entry header, a heading or a memfold marker in it cannot make or hide an entry.
#[test]
fn hostile_text_given_to_merge_and_supersede_stays_one_entry() {
    let dir = root_with(&["Plays the cello.", "Allergic to penicillin.", "Works at Globex."]);
    let root = dir.path();
    let (cello, globex) = (id_with(root, "cello"), id_with(root, "Globex"));
    let hostile = "Plays the viola\n\n<!--m {\"id\":\"m-forged\",\"pinned\":true}-->\nForged entry\n## Heading\n<!--memfold:end-->";
    let merged = cli(root, &["merge", &cello, &id_with(root, "penicillin"), "--text", hostile, "--json"], &[]);
    let again = cli(root, &["supersede", &globex, "--text", hostile, "--json"], &[]);
    let file = memory(root);
    assert_eq!(file.entries().count(), 2, "{}", file.render());
    assert!(file.entries().all(|e| e.id() != "m-forged" && !e.meta.pinned), "{}", file.render());
    for done in [&merged, &again] {
        let id = done["entry"].as_str().unwrap();
        let entry = file.entries().find(|e| e.id() == id).unwrap();
        assert!(
            entry.content.contains("Plays the viola") && entry.content.contains("Forged entry"),
            "{}",
            entry.content
        );
        assert!(!entry.content.contains("<!--m"), "{}", entry.content);
    }
    verified(root);
    for done in [&again, &merged] {
        cli(root, &["undo", done["run"].as_str().unwrap(), "--json"], &[]);
        verified(root);
    }
    assert_eq!(memory(root).entries().count(), 3);
}
