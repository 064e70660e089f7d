//! Review mode, plans, runs and undo against real files, a real index and a fake LLM.
//!
//! Every scenario checks `verify` after each step: nothing may be lost whether a plan is
//! applied, rebased, refused or rejected, or a run is undone or its undo refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};

use memfold::config::Mode;
use memfold::error::Error;
use memfold::memory::views::GroupView;
use memfold::planning::consolidate::pass::{PassOptions, PassReport};
use memfold::planning::run::records::PlanStatus;
use memfold::store::entries::{EntryFile, HistoryStatus};
use memfold::store::ledger::{FactFate, Ledger};
use memfold::store::state::State;
use memfold::testkit::FakeReply;
use serde_json::{Value, json};

use crate::common::{Env, add, d, env, force, history, mem, memfold, memory, status};

async fn pass(env: &Env, force: bool) -> PassReport {
    crate::common::pass(env, PassOptions { force, dry_run: false }).await.unwrap()
}

fn memory_text(env: &Env) -> String {
    std::fs::read_to_string(env.root.memory()).unwrap()
}

fn entry_with(env: &Env, word: &str) -> String {
    crate::common::entry_with(env.root.dir(), word).unwrap_or_else(|| panic!("no entry with {word}"))
}

fn assert_verified(env: &Env) {
    let report = memfold::store::verify::verify(&Ledger::load(&env.root).unwrap(), Vec::new());
    assert!(report.ok, "verify: {:?}", report.problems);
}

fn fate(env: &Env, fact: &str) -> FactFate {
    Ledger::load(&env.root).unwrap().fates()[fact]
}

/// Every markdown file under the root, with its bytes.
fn markdown(root: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::common::files(root)
        .into_iter()
        .filter(|(path, _)| path.ends_with(".md") && !path.starts_with(".memfold"))
        .collect()
}

/// The cluster document inside a chat request (None for a promotion request).
fn cluster(request: &Value) -> Option<Value> {
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    let doc: Value = serde_json::Deserializer::from_str(user).into_iter::<Value>().next().unwrap().unwrap();
    doc.get("candidates").is_some().then_some(doc)
}

/// The id of the first item in `list` whose `key` contains `word`.
fn find(list: &Value, key: &str, word: &str) -> Option<String> {
    list.as_array()?
        .iter()
        .find(|x| x[key].as_str().is_some_and(|t| t.contains(word)))
        .map(|x| x["id"].as_str().unwrap().to_string())
}

/// Answer decision calls with `decide(doc)`; candidates no op names are added verbatim by the
/// validator. Promotion calls get an empty reply (the offline ranking is used).
fn script(env: &Env, decide: impl Fn(&Value) -> Vec<Value> + Send + Sync + 'static) {
    env.llm.set_chat_handler(move |request| match cluster(request) {
        Some(doc) => FakeReply::Content(json!({ "ops": decide(&doc) }).to_string()),
        None => FakeReply::Content(json!({ "lines": [] }).to_string()),
    });
}

/// A REPLACE of the neighbour containing `entry_word` by the candidate containing `fact_word`.
fn replace(doc: &Value, fact_word: &str, entry_word: &str, content: &str, confidence: Option<f64>) -> Option<Value> {
    let fact = find(&doc["candidates"], "text", fact_word)?;
    let target = find(&doc["neighbors"], "content", entry_word)?;
    let mut op = json!({"op": "REPLACE", "target": target, "facts": [fact], "content": content, "why": "update"});
    if let Some(c) = confidence {
        op["confidence"] = json!(c);
    }
    Some(op)
}

fn job_change(doc: &Value) -> Vec<Value> {
    replace(
        doc,
        "Microsoft",
        "Google",
        "Currently works at Microsoft (since 2026-05). Previously worked at Google.",
        None,
    )
    .into_iter()
    .collect()
}

#[tokio::test]
async fn review_mode_changes_no_markdown_until_apply_and_apply_yields_the_previewed_diff() {
    let mut env = env().await;
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    add(&env, "2026-05-27", &["Plays chess on weekends"]);
    force(&env).await;
    assert_verified(&env);

    env.config.consolidation.mode = Mode::Review;
    let microsoft = add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let files_before = markdown(env.root.dir());
    let memory_before = memory_text(&env);
    let report = force(&env).await;
    assert!(!report.applied, "{report:?}");
    assert_eq!(report.plans.len(), 1, "{report:?}");
    assert_eq!(markdown(env.root.dir()), files_before, "review mode wrote markdown");
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Pending);
    assert_verified(&env);

    let plans = mem(&env).await.plans().await.unwrap();
    assert_eq!(plans.len(), 1);
    let plan = &plans[0];
    assert_eq!((plan.status, plan.reason.as_str(), plan.stale), (PlanStatus::Pending, "review", false));
    assert_eq!(plan.ops.len(), 1);
    assert_eq!((plan.ops[0].op.as_str(), plan.ops[0].why.as_deref()), ("REPLACE", Some("update")));
    assert!(plan.diff.starts_with("--- a/consolidated/memory.md\n+++ b/consolidated/memory.md\n@@ "), "{}", plan.diff);
    assert!(plan.diff.contains("\n+Currently works at Microsoft"), "{}", plan.diff);
    assert!(plan.diff.contains("\n-Works at Google as an engineer"), "{}", plan.diff);
    assert_eq!(plan.stat.removed, 2, "old header and content");

    // The plan file says how to get there (its journal), not the whole file it would write.
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(env.root.dir().join(format!(".memfold/plans/{}.json", plan.id))).unwrap(),
    )
    .unwrap();
    assert!(file.get("memory_after").is_none() && file["journal"].as_array().is_some_and(|j| !j.is_empty()), "{file}");

    // A second pass leaves the facts of the pending plan alone.
    let calls = env.llm.chat_calls();
    let again = force(&env).await;
    assert!(again.plans.is_empty() && again.ops.is_empty(), "{again:?}");
    assert_eq!(env.llm.chat_calls(), calls);

    let applied = mem(&env).await.apply_plan(&plan.id).await.unwrap();
    assert!(!applied.rebased);
    assert_eq!(applied.run, plan.id);
    let memory_after = memory_text(&env);
    assert_eq!(memfold::planning::diff::unified(&memory_before, &memory_after, "consolidated/memory.md", 3), plan.diff);
    assert_eq!(applied.diff, plan.diff);
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Consolidated);
    assert!(history(&env).entries().any(|e| e.content == "Works at Google as an engineer"));
    assert!(mem(&env).await.plans().await.unwrap().is_empty(), "an applied plan leaves the list");
    let runs = mem(&env).await.runs().await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].plan.as_deref(), Some(plan.id.as_str()));
    assert_eq!(runs[1].ops, BTreeMap::from([("REPLACE".to_string(), 1)]));
    assert!(runs[1].llm.unwrap().calls >= 1, "the decision cost travels with the plan");
    assert_verified(&env);

    // Applying twice is not possible.
    let err = mem(&env).await.apply_plan(&plan.id).await.unwrap_err();
    assert_eq!(status(&err), 404, "{err}");
}

#[tokio::test]
async fn a_rebuild_in_review_mode_writes_no_markdown_until_applied_and_an_outage_rebuilds_nothing() {
    let mut env = env().await;
    script(&env, |_| Vec::new());
    add(&env, "2026-05-27", &["Works at Google as an engineer", "Plays chess on weekends"]);
    force(&env).await;
    let contents = |env: &Env| {
        let mut texts: Vec<String> = memory(env).entries().map(|e| e.content.clone()).collect();
        texts.sort();
        texts
    };
    let before = contents(&env);
    assert_eq!(before.len(), 2);

    env.config.consolidation.mode = Mode::Review;
    let files_before = markdown(env.root.dir());
    let report = mem(&env).await.rebuild().await.unwrap();
    assert!(!report.applied, "{report:?}");
    assert_eq!(report.plans.len(), 1, "{report:?}");
    assert_eq!(markdown(env.root.dir()), files_before, "a rebuild in review mode wrote markdown");
    assert_verified(&env);
    let plan = mem(&env).await.plans().await.unwrap().remove(0);
    assert_eq!(plan.reason.as_str(), "rebuild");

    // memory.md changed since: a rebuild replaces every entry, so it is refused, not replayed.
    let text = memory_text(&env);
    std::fs::write(env.root.memory(), format!("{text}\nLikes tea.\n")).unwrap();
    let err = mem(&env).await.apply_plan(&plan.id).await.unwrap_err();
    assert_eq!(status(&err), 409, "{err}");
    assert!(memory_text(&env).ends_with("Likes tea.\n"));
    std::fs::write(env.root.memory(), &text).unwrap();

    let applied = mem(&env).await.apply_plan(&plan.id).await.unwrap();
    assert!(!applied.rebased);
    assert_eq!(contents(&env), before);
    let set_aside = history(&env).entries().filter(|e| e.meta.status == Some(HistoryStatus::Rebuilt)).count();
    assert_eq!(set_aside, 2);
    assert_verified(&env);

    // With the LLM out of reach a rebuild writes nothing at all.
    env.config.consolidation.mode = Mode::Auto;
    env.llm.set_chat_handler(|_| FakeReply::Status(503));
    let files_before = markdown(env.root.dir());
    let err = mem(&env).await.rebuild().await.unwrap_err();
    assert_eq!(status(&err), 503, "{err}");
    assert_eq!(markdown(env.root.dir()), files_before);
    assert_eq!(contents(&env), before);
    assert_verified(&env);
}

#[tokio::test]
async fn a_rejected_plan_leaves_its_facts_pending_and_is_not_proposed_again_by_itself() {
    let mut env = env().await;
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    force(&env).await;
    env.config.consolidation.mode = Mode::Review;
    env.config.consolidation.min_facts = 1;
    env.config.consolidation.min_hours = 0.0;
    let microsoft = add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let files_before = markdown(env.root.dir());
    let first = force(&env).await.plans.remove(0);

    let rejected = mem(&env).await.reject_plan(&first, None).await.unwrap();
    assert_eq!(rejected.facts, microsoft);
    assert_eq!(markdown(env.root.dir()), files_before);
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Pending);
    let state = State::load(&env.root.state_json()).unwrap();
    assert_eq!(state.facts[&microsoft[0]].reverted_run.as_deref(), Some(first.as_str()));
    let plans = mem(&env).await.plans().await.unwrap();
    assert_eq!((plans.len(), plans[0].status), (1, PlanStatus::Rejected));
    assert_verified(&env);

    // An automatic pass leaves the rejected decision's facts out.
    let calls = env.llm.chat_calls();
    let auto = pass(&env, false).await;
    assert!(!auto.gate.open && auto.plans.is_empty(), "{:?}", auto.gate);
    assert_eq!(env.llm.chat_calls(), calls);
    let err = mem(&env).await.apply_plan(&first).await.unwrap_err();
    assert_eq!((status(&err), err.code()), (409, "conflict"), "{err}");

    // A forced pass asks again and makes a new plan.
    let second = force(&env).await;
    assert_eq!(second.plans.len(), 1);
    assert_ne!(second.plans[0], first);
    mem(&env).await.apply_plan(&second.plans[0]).await.unwrap();
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Consolidated);
    assert!(State::load(&env.root.state_json()).unwrap().facts.is_empty(), "flag cleared once consolidated");
    assert_verified(&env);
}

#[tokio::test]
async fn a_stale_plan_is_rebased_when_its_entries_are_untouched_and_refused_when_not() {
    let mut env = env().await;
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    add(&env, "2026-05-27", &["Plays chess on weekends"]);
    force(&env).await;
    env.config.consolidation.mode = Mode::Review;
    add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let plan = force(&env).await.plans.remove(0);

    // A person edits the entry the plan replaces: refused, nothing written.
    let original = memory_text(&env);
    let edited = original.replace("Works at Google as an engineer", "Works at Google as a senior engineer");
    std::fs::write(env.root.memory(), &edited).unwrap();
    let google = entry_with(&env, "Google");
    let err = mem(&env).await.apply_plan(&plan).await.unwrap_err();
    assert!(matches!(err, Error::Stale { .. }), "{err}");
    assert_eq!((status(&err), err.ids()), (409, std::slice::from_ref(&google)));
    assert!(err.to_string().contains("changed since plan"), "{err}");
    assert_eq!(memory_text(&env), edited);
    assert!(mem(&env).await.plans().await.unwrap()[0].stale);
    assert_verified(&env);

    // The edit is undone and another entry is edited instead: the plan rebases.
    let chess_edit = original.replace("Plays chess on weekends", "Plays chess on weekends and holidays");
    std::fs::write(env.root.memory(), &chess_edit).unwrap();
    let applied = mem(&env).await.apply_plan(&plan).await.unwrap();
    assert!(applied.rebased);
    let memory = memory(&env);
    assert!(memory.get(&google).unwrap().content.starts_with("Currently works at Microsoft"));
    assert!(memory.entries().any(|e| e.content == "Plays chess on weekends and holidays"), "the hand edit is kept");
    assert_verified(&env);
}

#[tokio::test]
async fn low_confidence_ops_go_to_review_while_the_rest_apply() {
    let env = env().await;
    script(&env, |doc| {
        let mut ops: Vec<Value> = Vec::new();
        ops.extend(replace(doc, "Microsoft", "Google", "Works at Microsoft; previously Google.", Some(0.2)));
        if let Some(fact) = find(&doc["candidates"], "text", "cello") {
            ops.push(json!({"op": "ADD", "facts": [fact], "content": "Plays the cello.", "confidence": 0.9}));
        }
        ops
    });
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    force(&env).await;
    let google = entry_with(&env, "Google");
    let microsoft = add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let cello = add(&env, "2026-05-30", &["Learning to play the cello"]);
    let report = force(&env).await;
    assert!(report.applied, "{report:?}");
    assert_eq!(report.plans.len(), 1, "{report:?}");
    assert!(report.plans[0].ends_with("-review"));
    let memory_now = memory(&env);
    assert_eq!(memory_now.get(&google).unwrap().content, "Works at Google as an engineer", "held back");
    assert!(memory_now.entries().any(|e| e.content == "Plays the cello."), "confident op applied");
    assert_eq!(fate(&env, &cello[0]), FactFate::Consolidated);
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Pending);
    assert_verified(&env);

    let plan = &mem(&env).await.plans().await.unwrap()[0];
    assert_eq!((plan.reason.as_str(), plan.stale), ("low-confidence", false));
    assert_eq!(plan.ops[0].confidence, Some(0.2));
    let before = memory_text(&env);
    mem(&env).await.apply_plan(&plan.id).await.unwrap();
    assert_eq!(memfold::planning::diff::unified(&before, &memory_text(&env), "consolidated/memory.md", 3), plan.diff);
    assert_eq!(memory(&env).get(&google).unwrap().content, "Works at Microsoft; previously Google.");
    assert_eq!(fate(&env, &microsoft[0]), FactFate::Consolidated);
    assert_verified(&env);
}

#[tokio::test]
async fn apply_then_undo_restores_memory_byte_for_byte_and_the_facts_wait_for_a_forced_pass() {
    let mut env = env().await;
    script(&env, |doc| {
        let mut ops: Vec<Value> = Vec::new();
        ops.extend(replace(doc, "Microsoft", "Google", "Works at Microsoft; previously Google.", None));
        if let (Some(fact), Some(target)) =
            (find(&doc["candidates"], "text", "Rex daily"), find(&doc["neighbors"], "content", "Rex"))
        {
            ops.push(json!({"op": "DUPLICATE", "facts": [fact], "target": target}));
        }
        if let (Some(target), Some(into)) =
            (find(&doc["neighbors"], "content", "Enjoys tea"), find(&doc["neighbors"], "content", "Likes tea"))
        {
            ops.push(json!({"op": "REMOVE", "target": target, "into": into, "why": "same preference"}));
        }
        ops
    });
    add(&env, "2026-05-27", &["Works at Google as an engineer", "Has a dog named Rex"]);
    add(&env, "2026-05-27", &["Likes tea", "Enjoys tea"]);
    force(&env).await;
    assert_eq!(memory(&env).entries().count(), 4);
    // A hand-written paragraph: it gets a header when the run writes the file, and loses it on undo.
    let mut text = memory_text(&env);
    text.push_str("\nAllergic to peanuts.\n");
    std::fs::write(env.root.memory(), &text).unwrap();
    let before = memory_text(&env);
    let history_before = history(&env).entries().count();

    let new_facts = add(
        &env,
        "2026-05-30",
        &["Started at Microsoft, works there now", "Walks the dog Rex daily", "Likes tea with milk"],
    );
    let report = force(&env).await;
    let run = report.run.clone().unwrap();
    let kinds: Vec<&str> = report.ops.iter().map(|o| o.op.as_str()).collect();
    for kind in ["REPLACE", "DUPLICATE", "REMOVE"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    assert_ne!(memory_text(&env), before);
    assert_verified(&env);

    let undone = mem(&env).await.undo(&run).await.unwrap();
    assert!(undone.exact, "{undone:?}");
    assert_eq!(memory_text(&env), before, "memory.md byte for byte as before the run");
    let mut returned = undone.facts.clone();
    returned.sort();
    let mut want = new_facts.clone();
    want.sort();
    assert_eq!(returned, want);
    for fact in &new_facts {
        assert_eq!(fate(&env, fact), FactFate::Pending);
    }
    let history_now = history(&env);
    let reverted: Vec<_> = history_now.entries().filter(|e| e.meta.status == Some(HistoryStatus::Reverted)).collect();
    assert!(reverted.len() >= 3, "undone versions kept: {reverted:?}");
    assert!(reverted.iter().all(|e| e.meta.run.as_deref() == Some(run.as_str())));
    let of_run: Vec<_> = history_now.entries().filter(|e| e.meta.run.as_deref() == Some(run.as_str())).collect();
    assert!(
        of_run.iter().all(|e| matches!(e.meta.status, Some(HistoryStatus::Reverted | HistoryStatus::Restored))),
        "the run's own history blocks no longer account for facts: {of_run:?}"
    );
    assert!(reverted.iter().any(|e| e.content == "Works at Microsoft; previously Google."));
    assert!(history_now.entries().count() > history_before);
    let runs = mem(&env).await.runs().await.unwrap();
    assert!(runs.iter().find(|r| r.run == run).unwrap().undone.is_some());
    assert_verified(&env);

    // Undoing twice is refused.
    let err = mem(&env).await.undo(&run).await.unwrap_err();
    assert_eq!(status(&err), 409, "{err}");

    // An automatic pass leaves the undone run's facts out; a forced one decides them again.
    env.config.consolidation.min_facts = 1;
    env.config.consolidation.min_hours = 0.0;
    let auto = pass(&env, false).await;
    assert!(!auto.gate.open, "{:?}", auto.gate);
    assert_eq!(memory_text(&env), before);
    let again = force(&env).await;
    assert!(again.applied);
    for fact in &new_facts {
        assert_eq!(fate(&env, fact), FactFate::Consolidated);
    }
    assert_verified(&env);
}

#[tokio::test]
async fn undo_of_an_older_run_whose_entries_changed_since_is_refused_and_loses_nothing() {
    let env = env().await;
    script(&env, job_change);
    let empty = memory_text(&env);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    let first = force(&env).await.run.unwrap();
    let after_first = memory_text(&env);
    add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let second = force(&env).await.run.unwrap();
    let google = entry_with(&env, "Microsoft");
    let (memory_before, history_before) = (memory_text(&env), std::fs::read(env.root.history()).unwrap());

    let err = mem(&env).await.undo(&first).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    assert_eq!(err.ids(), std::slice::from_ref(&google));
    assert!(err.to_string().contains(&google), "{err}");
    assert_eq!(memory_text(&env), memory_before);
    assert_eq!(std::fs::read(env.root.history()).unwrap(), history_before);
    assert_verified(&env);

    // A hand edit of an entry the run touched is a conflict too.
    let edited = memory_before.replace("works at Microsoft", "works at Microsoft Research");
    assert_ne!(edited, memory_before);
    std::fs::write(env.root.memory(), &edited).unwrap();
    let err = mem(&env).await.undo(&second).await.unwrap_err();
    assert_eq!(err.ids(), std::slice::from_ref(&google), "{err}");
    assert_eq!(memory_text(&env), edited);
    std::fs::write(env.root.memory(), &memory_before).unwrap();

    // Newest first works, each byte for byte.
    assert!(mem(&env).await.undo(&second).await.unwrap().exact);
    assert_eq!(memory_text(&env), after_first);
    assert_verified(&env);
    assert!(mem(&env).await.undo(&first).await.unwrap().exact);
    assert_eq!(memory_text(&env), empty);
    assert_eq!(Ledger::load(&env.root).unwrap().pending().len(), 2);
    assert_verified(&env);
}

#[tokio::test]
async fn undo_of_an_older_run_with_untouched_entries_works_entry_by_entry() {
    let env = env().await;
    script(&env, |doc| {
        match (find(&doc["neighbors"], "content", "Enjoys tea"), find(&doc["neighbors"], "content", "Likes tea")) {
            (Some(target), Some(into)) if find(&doc["candidates"], "text", "milk").is_some() => {
                vec![json!({"op": "REMOVE", "target": target, "into": into})]
            }
            _ => Vec::new(),
        }
    });
    add(&env, "2026-05-27", &["Likes tea"]);
    add(&env, "2026-05-27", &["Plays chess on weekends"]);
    add(&env, "2026-05-27", &["Enjoys tea"]);
    force(&env).await;
    let order: Vec<String> = memory(&env).entries().map(|e| e.id().to_string()).collect();
    let milk = add(&env, "2026-05-28", &["Likes tea with milk"]);
    let merge = force(&env).await.run.unwrap();
    assert_eq!(memory(&env).entries().count(), 3, "one merged away, one added");
    let cello = add(&env, "2026-05-29", &["Learning to play the cello"]);
    force(&env).await;
    let cello_entry = entry_with(&env, "cello");

    let undone = mem(&env).await.undo(&merge).await.unwrap();
    assert!(!undone.exact, "a later run changed memory.md");
    assert_eq!(undone.facts, milk);
    let now: Vec<String> = memory(&env).entries().map(|e| e.id().to_string()).collect();
    let mut want = order.clone();
    want.push(cello_entry);
    assert_eq!(now, want, "the merged entry is back where it was, the later run's entry stays");
    assert_eq!(fate(&env, &cello[0]), FactFate::Consolidated);
    assert_eq!(fate(&env, &milk[0]), FactFate::Pending);
    assert_verified(&env);
}

#[tokio::test]
async fn history_shows_the_chain_with_dates() {
    let env = env().await;
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    force(&env).await;
    add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let run = force(&env).await.run.unwrap();
    let id = entry_with(&env, "Microsoft");
    let chain = mem(&env).await.history(&id).await.unwrap();
    let versions: Vec<(&str, &str)> = chain.versions.iter().map(|v| (v.status.as_str(), v.content.as_str())).collect();
    assert_eq!(
        versions,
        [
            ("replaced", "Works at Google as an engineer"),
            ("current", "Currently works at Microsoft (since 2026-05). Previously worked at Google.")
        ]
    );
    let old = &chain.versions[0];
    assert_eq!((old.first_seen, old.valid_until), (Some(d("2026-05-27")), Some(d("2026-05-30"))));
    assert_eq!((old.superseded_by.as_deref(), old.run.as_deref()), (Some(id.as_str()), Some(run.as_str())));
    assert_eq!(chain.versions[1].updated, Some(d("2026-05-30")));

    mem(&env).await.undo(&run).await.unwrap();
    let statuses: Vec<String> =
        mem(&env).await.history(&id).await.unwrap().versions.into_iter().map(|v| v.status.to_string()).collect();
    assert_eq!(statuses, ["restored", "reverted", "current"], "the run's copy of the old version is marked restored");
    assert_verified(&env);

    let err = mem(&env).await.history("m-nowhere").await.unwrap_err();
    assert_eq!(status(&err), 404);
}

#[tokio::test]
async fn unknown_and_malformed_ids_are_told_apart() {
    let env = env().await;
    for err in
        [mem(&env).await.undo("r-nope").await.unwrap_err(), mem(&env).await.apply_plan("r-nope").await.unwrap_err()]
    {
        assert_eq!((status(&err), err.code()), (404, "not_found"), "{err}");
    }
    for err in [
        mem(&env).await.apply_plan("../state").await.unwrap_err(),
        mem(&env).await.reject_plan("", None).await.unwrap_err(),
        mem(&env).await.undo("r 1").await.unwrap_err(),
        mem(&env).await.history("m 1").await.unwrap_err(),
    ] {
        assert_eq!((status(&err), err.code()), (400, "bad_request"), "{err}");
    }
}

fn cli_json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}\nstderr: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn the_cli_reviews_applies_lists_undoes_and_shows_history() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let review = [("MEMFOLD_CONSOLIDATION__MODE", "review")];
    assert!(memfold(root, &["init"], &[]).status.success());
    cli_json(&memfold(root, &["add", "--json", "--date", "2026-05-27", "Has a dog named Rex."], &[]));
    let before = std::fs::read(root.join("consolidated/memory.md")).unwrap();
    let report = cli_json(&memfold(root, &["consolidate", "--force", "--json"], &review));
    assert_eq!(report["applied"], false, "{report}");
    let plan = report["plans"][0].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), before);
    let plans = cli_json(&memfold(root, &["plans", "--json"], &[]));
    assert_eq!(plans["plans"][0]["id"], plan.as_str());
    assert!(plans["plans"][0]["diff"].as_str().unwrap().contains("+Has a dog named Rex."), "{plans}");
    let text = memfold(root, &["plans"], &[]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("+Has a dog named Rex."));

    let applied = cli_json(&memfold(root, &["apply", &plan, "--json"], &[]));
    assert_eq!(applied["run"], plan.as_str());
    let runs = cli_json(&memfold(root, &["runs", "--json"], &[]));
    assert_eq!(runs["runs"][0]["ops"]["ADD"], 1, "{runs}");
    assert_eq!(runs["runs"][0]["facts"], 1);
    let memory = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
    let id = EntryFile::parse(&memory, "memory.md").entries().next().unwrap().id().to_string();
    let chain = cli_json(&memfold(root, &["history", &id, "--json"], &[]));
    assert_eq!(chain["versions"][0]["status"], "current");

    let undone = cli_json(&memfold(root, &["undo", &plan, "--json"], &[]));
    assert_eq!(undone["exact"], true, "{undone}");
    assert_eq!(std::fs::read(root.join("consolidated/memory.md")).unwrap(), before);
    let verify = cli_json(&memfold(root, &["verify", "--json"], &[]));
    assert_eq!((verify["ok"].as_bool(), verify["pending"].as_u64()), (Some(true), Some(1)), "{verify}");
    let again = memfold(root, &["undo", &plan], &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("undone already"));
}

#[tokio::test]
async fn undo_of_a_run_whose_copy_of_memory_was_dropped_goes_entry_by_entry() {
    let env = env().await;
    script(&env, |_| Vec::new());
    add(&env, "2026-05-27", &["Likes tea"]);
    force(&env).await;
    let before = memory_text(&env);
    let added = add(&env, "2026-05-28", &["Plays chess on weekends"]);
    let run = force(&env).await.run.unwrap();
    // As an old record looks once newer runs have pushed it out of the window.
    let path = env.root.state_dir().join("runs").join(format!("{run}.json"));
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["memory_before"] = json!("");
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();

    let undone = mem(&env).await.undo(&run).await.unwrap();
    assert!(!undone.exact, "no copy to restore byte for byte: {undone:?}");
    assert_eq!(undone.facts, added);
    let entries = |file: &EntryFile| -> Vec<(String, String)> {
        file.entries().map(|e| (e.id().to_string(), e.content.clone())).collect()
    };
    assert_eq!(
        entries(&memory(&env)),
        entries(&EntryFile::parse(&before, "memory.md")),
        "the entry the run added is gone, the rest is untouched"
    );
    assert_verified(&env);
}

/// A root with a Google and a chess entry, and a stored plan of two groups: a job change
/// (REPLACE of the Google entry) and a hobby change (REPLACE of the chess entry). Returns the
/// plan id, the two new facts, and the job change's group.
async fn two_group_plan() -> (Env, String, Vec<String>, GroupView) {
    let mut env = env().await;
    script(&env, |doc| {
        let job = replace(doc, "Microsoft", "Google", "Works at Microsoft since May.", None);
        let chess = replace(doc, "go now", "chess", "Plays go on weekends; gave up chess.", None);
        job.into_iter().chain(chess).collect()
    });
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    add(&env, "2026-05-27", &["Plays chess on weekends"]);
    force(&env).await;
    env.config.consolidation.mode = Mode::Review;
    let facts = add(&env, "2026-05-30", &["Started at Microsoft, works there now", "Plays go now instead of chess"]);
    let plan = force(&env).await.plans.remove(0);
    let detail = mem(&env).await.plan_detail(&plan).await.unwrap();
    assert_eq!(detail.groups.len(), 2, "{detail:?}");
    let job = detail.groups.iter().find(|g| g.facts == [facts[0].clone()]).expect("a group for the job change").clone();
    (env, plan, facts, job)
}

/// Applying some op groups of a plan writes exactly the changes the plan stored for them and
/// nothing of the others, whose facts wait, flagged; when an entry a chosen group changes was
/// edited since, nothing is written and the entry is named.
#[tokio::test]
async fn applying_some_groups_writes_exactly_their_stored_changes() {
    let (env, plan, facts, job) = two_group_plan().await;
    let (google, chess) = (entry_with(&env, "Google"), entry_with(&env, "chess"));

    // An edit of the other group's entry does not stand in the way of this one.
    let edited = memory_text(&env).replace("Plays chess on weekends", "Plays chess on Saturdays");
    std::fs::write(env.root.memory(), &edited).unwrap();
    let applied = mem(&env).await.apply_plan_groups(&plan, Some(vec![job.group]), None).await.unwrap();
    assert_eq!((applied.groups.clone(), applied.rejected.clone()), (vec![job.group], vec![facts[1].clone()]));
    let memory = memory(&env);
    let stored_after = job.ops[0].changes.iter().find(|c| c.entry == google).unwrap().after.clone().unwrap();
    assert_eq!(memory.get(&google).unwrap().render(), stored_after, "the stored after-block, byte for byte");
    assert!(memory.get(&chess).unwrap().content.contains("Saturdays"), "the other group changed nothing");
    assert_eq!(fate(&env, &facts[1]), FactFate::Pending);
    let state = State::load(&env.root.state_json()).unwrap();
    assert_eq!(state.facts[&facts[1]].reverted_run.as_deref(), Some(plan.as_str()), "flagged like a rejection");
    let plans = mem(&env).await.plans().await.unwrap();
    assert_eq!((plans.len(), plans[0].status, plans[0].ops.len()), (1, PlanStatus::Rejected, 1));
    let err = mem(&env).await.apply_plan(&plan).await.unwrap_err();
    assert_eq!(status(&err), 409, "what is left was rejected: {err}");
    assert_verified(&env);

    // The same plan again; this time the chosen group's entry was edited: refused.
    let (env, plan, _, job) = two_group_plan().await;
    let google = entry_with(&env, "Google");
    let edited = memory_text(&env).replace("Works at Google as an engineer", "Works at Google as a lead");
    std::fs::write(env.root.memory(), &edited).unwrap();
    let err = mem(&env).await.apply_plan_groups(&plan, Some(vec![job.group]), None).await.unwrap_err();
    assert!(matches!(err, Error::Stale { .. }), "{err}");
    assert_eq!(err.ids(), std::slice::from_ref(&google));
    assert_eq!(memory_text(&env), edited, "nothing written");
    assert_eq!(mem(&env).await.plans().await.unwrap()[0].status, PlanStatus::Pending);
    let err = mem(&env).await.apply_plan_groups(&plan, Some(vec![0]), None).await.unwrap_err();
    assert_eq!(status(&err), 400, "{err}");
    assert_verified(&env);
}

/// A stored plan keeps what its facts were weighed against: each group lists the entries ranked
/// for its facts and shown to the decider that no op of the plan changes, as the decider saw them.
#[tokio::test]
async fn a_plan_shows_the_neighbours_its_decider_saw_and_left_alone() {
    let mut env = env().await;
    let shown: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let record = shown.clone();
    script(&env, move |doc| {
        let ids = doc["neighbors"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap().to_string());
        record.lock().unwrap().extend(ids);
        job_change(doc)
    });
    add(&env, "2026-05-27", &["Works at Google as an engineer", "Works out at the gym after work", "Plays chess"]);
    force(&env).await;
    shown.lock().unwrap().clear();
    env.config.consolidation.mode = Mode::Review;
    add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let plan = force(&env).await.plans.remove(0);
    let detail = mem(&env).await.plan_detail(&plan).await.unwrap();
    let google = entry_with(&env, "Google");
    let mut expected = shown.lock().unwrap().clone();
    assert!(expected.remove(&google), "the job entry was shown: {expected:?}");
    assert!(!expected.is_empty(), "more than the job entry was shown");

    let group = &detail.groups[0];
    let left: BTreeSet<String> = group.left_alone.iter().map(|e| e.id.clone()).collect();
    assert_eq!(left, expected, "what was shown, less what the plan changes");
    let memory = memory(&env);
    for e in &group.left_alone {
        assert_eq!(memory.get(&e.id).unwrap().content, e.content, "as the decider saw it");
    }
    let stored = std::fs::read_to_string(memfold::planning::run::records::plan_path(&env.root, &plan)).unwrap();
    assert!(stored.contains("\"seen\""), "{stored}");
}

#[tokio::test]
async fn an_llm_rewrite_that_drops_a_year_goes_to_review_with_the_reason_naming_it() {
    let env = env().await;
    script(&env, |doc| replace(doc, "Lisbon", "Rome", "Lives in Lisbon.", Some(0.95)).into_iter().collect());
    add(&env, "2026-05-27", &["Lives in Rome with Ana"]);
    force(&env).await;
    let rome = entry_with(&env, "Rome");
    add(&env, "2026-05-30", &["Moved to Lisbon in May 2019"]);
    let report = force(&env).await;
    assert_eq!(report.plans.len(), 1, "{report:?}");
    assert_eq!(memory(&env).get(&rome).unwrap().content, "Lives in Rome with Ana", "held back");
    let plan = &mem(&env).await.plans().await.unwrap()[0];
    assert_eq!(plan.ops[0].confidence, Some(memfold::planning::consolidate::validate::DROPS_DETAIL));
    let signals = plan.ops[0].signals.join(" ");
    assert!(signals.contains("drops \"2019\", \"may\""), "{signals}");
    assert_verified(&env);
}

#[tokio::test]
async fn kinds_left_out_of_auto_apply_wait_for_a_person_and_the_master_switch_stops_every_pass() {
    let mut env = env().await;
    env.config.consolidation.auto_apply = vec!["ADD".into(), "DUPLICATE".into()];
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    force(&env).await;
    let google = entry_with(&env, "Google");
    add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let report = force(&env).await;
    assert_eq!(report.plans.len(), 1, "the REPLACE waits: {report:?}");
    assert_eq!(memory(&env).get(&google).unwrap().content, "Works at Google as an engineer");
    assert_verified(&env);

    env.config.consolidation.enabled = false;
    add(&env, "2026-06-01", &["Learning to play the cello"]);
    let before = markdown(env.root.dir());
    let report = mem(&env).await.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
    assert!(!report.applied && report.gate.reason.contains("consolidation.enabled = false"), "{report:?}");
    assert_eq!(markdown(env.root.dir()), before, "nothing decided, nothing written");
}

#[tokio::test]
async fn consolidation_asks_its_own_model_when_one_is_named() {
    let mut env = env().await;
    env.config.llm.consolidation_model = "cheap-decider".into();
    script(&env, job_change);
    add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    force(&env).await;
    let models: Vec<String> =
        env.llm.chat_requests().iter().map(|r| r["model"].as_str().unwrap_or_default().to_string()).collect();
    let decisions: Vec<&String> =
        env.llm.chat_requests().iter().zip(&models).filter(|(r, _)| cluster(r).is_some()).map(|(_, m)| m).collect();
    assert!(!decisions.is_empty() && decisions.iter().all(|m| *m == "cheap-decider"), "{models:?}");
}
