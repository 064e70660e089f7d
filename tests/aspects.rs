//! Aspect keys as a second source of candidates: a fact meets the entry it is about even when
//! they share no words. The LLM's keys (from a turn's extraction, or one keying call per pass)
//! are scripted here; what the offline keyer reaches on the held-out set is measured by
//! `benches/fold.rs`.

use memfold::memory::Turn;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::entries::{Entry, EntryFile, EntryMeta};
use memfold::testkit::FakeReply;
use serde_json::{Value, json};

use crate::common::{add, d, env, mem, pass};

/// The old job among entries that sound more like the new fact than it does.
fn memory_with_a_job() -> EntryFile {
    let mut file = EntryFile::default();
    let texts = [
        ("m-job", "Works as a backend developer at Shopify."),
        ("m-a", "Returned the library books on Friday."),
        ("m-b", "Onboarding for the new intern starts Monday."),
        ("m-c", "The laptop battery lasts about four hours."),
        ("m-d", "Returned the rented bike on Friday afternoon."),
        ("m-e", "The badge printer at the gym is broken."),
        ("m-f", "Monday is bin day on our street."),
        ("m-g", "Friday is pizza night with the kids."),
        ("m-h", "Gave the old laptop to a cousin."),
        ("m-i", "Onboarding at the climbing gym took an hour."),
        ("m-j", "Starts Monday mornings with a run."),
    ];
    for (id, text) in texts {
        let meta =
            EntryMeta { first_seen: Some(d("2026-01-10")), updated: Some(d("2026-01-10")), ..EntryMeta::new(id) };
        file.push(Entry::new(meta, text));
    }
    file
}

/// A root holding [`memory_with_a_job`], whose job entry the LLM keyed `user / employer`, and
/// few neighbours per fact.
async fn with_a_keyed_job() -> crate::common::Env {
    let mut env = env().await;
    env.config.consolidation.neighbor_k = 4;
    env.config.consolidation.lexical_k = 2;
    std::fs::write(env.root.memory(), memory_with_a_job().render()).unwrap();
    let job = memfold::store::content_hash("Works as a backend developer at Shopify.");
    let line = json!({"text": job, "keys": ["user / employer"]});
    std::fs::write(env.root.state_dir().join("aspects.jsonl"), format!("{line}\n")).unwrap();
    env
}

/// Which entries the call holding `fact` showed, from a dry run's report.
fn shown_with(report: &memfold::planning::consolidate::pass::PassReport, fact: &str) -> Vec<String> {
    report
        .clusters
        .iter()
        .filter(|c| c.candidates.iter().any(|f| f == fact))
        .flat_map(|c| c.neighbors.clone())
        .collect()
}

const FACT: &str = "Returned my badge and laptop on Friday — onboarding at Wealthsimple starts Monday.";

#[tokio::test]
async fn a_keying_call_brings_the_entry_a_reworded_update_is_about() {
    // The entry was made from a fact the LLM keyed earlier; the new fact is keyed by this pass.
    let mut env = with_a_keyed_job().await;
    let facts = add(&env, "2026-06-01", &[FACT]);
    env.llm.set_keys_handler(|request| {
        let user: Value = serde_json::from_str(request["messages"][1]["content"].as_str().unwrap()).unwrap();
        let id = user["facts"][0]["id"].as_str().unwrap().to_string();
        FakeReply::Content(json!({"keys": {id: ["user / employer"]}}).to_string())
    });
    env.llm.set_chat_handler(|_| FakeReply::Content(r#"{"ops":[]}"#.into()));

    // Without aspect keys the entry is not among what the fact is shown.
    env.config.consolidation.aspect_k = 0;
    let report = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(!shown_with(&report, &facts[0]).contains(&"m-job".to_string()), "{report:?}");
    assert_eq!(env.llm.keying_calls(), 0);

    env.config.consolidation.aspect_k = 4;
    let report = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(shown_with(&report, &facts[0]).contains(&"m-job".to_string()), "{:?}", report.clusters);
    assert_eq!(env.llm.keying_calls(), 1);
    let keying = &env.llm.keying_requests()[0];
    assert!(keying["messages"][0]["content"].as_str().unwrap().contains("employer"), "the attributes are listed");
    let aspects = report.aspects.as_ref().unwrap();
    assert_eq!((aspects.facts_keyed_by_llm, aspects.candidates_added > 0), (1, true), "{aspects:?}");
    assert!(
        report.packing.coverage == 1.0 && report.packing.pairs > 0,
        "the aspect pairs are counted: {:?}",
        report.packing
    );
    // The keying call is part of the pass's cost, and its keys are cached: no second call.
    assert!(report.llm.calls >= 2, "{:?}", report.llm);
    let cached = std::fs::read_to_string(env.root.state_dir().join("aspects.jsonl")).unwrap();
    assert_eq!(cached.lines().count(), 2, "{cached}");
    let again = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert_eq!(env.llm.keying_calls(), 1, "cached keys are not asked for again");
    assert!(shown_with(&again, &facts[0]).contains(&"m-job".to_string()));
}

#[tokio::test]
async fn the_keys_of_an_extracted_fact_come_with_it_and_save_the_keying_call() {
    let env = with_a_keyed_job().await;
    env.llm.push_chat(FakeReply::Content(json!({"facts": [{"text": FACT, "keys": ["user / employer"]}]}).to_string()));
    let memory = mem(&env).await;
    let turn = Turn {
        text: "user: I start at Wealthsimple on Monday!".into(),
        date: Some(d("2026-06-01")),
        ..Turn::default()
    };
    let (facts, _) = memory.extract_turn(&turn).await.unwrap();
    let system = env.llm.chat_requests()[0]["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.contains("## Keys") && system.contains("employer"), "the extraction asks for keys");
    let added = memory.add(facts).unwrap();
    env.llm.set_chat_handler(|_| FakeReply::Content(r#"{"ops":[]}"#.into()));
    let report = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert_eq!(env.llm.keying_calls(), 0, "the extraction's keys were cached");
    assert!(shown_with(&report, &added[0].id).contains(&"m-job".to_string()), "{:?}", report.clusters);
}

/// Without an LLM, the taxonomy's cue words key both sides: "report to" and "manager" name the
/// same aspect, so the fact meets the entry among entries that share more words with it.
#[tokio::test]
async fn the_offline_keyer_brings_a_manager_change_to_the_manager_entry() {
    let mut env = env().await;
    env.config.llm = Default::default();
    env.config.consolidation.neighbor_k = 3;
    env.config.consolidation.lexical_k = 2;
    let mut file = EntryFile::default();
    let texts = [
        ("m-manager", "Manager is Colette Lavoie."),
        ("m-a", "After the move the sofa went to Sunil's place."),
        ("m-b", "The reorg of the garage shelves took a weekend."),
        ("m-c", "Reports the broken streetlight to the city every winter."),
        ("m-d", "Sunil Mehta runs the Thursday chess club instead of Dan."),
        ("m-e", "Instead of coffee, drinks rooibos after lunch."),
    ];
    for (id, text) in texts {
        let meta =
            EntryMeta { first_seen: Some(d("2026-01-10")), updated: Some(d("2026-01-10")), ..EntryMeta::new(id) };
        file.push(Entry::new(meta, text));
    }
    std::fs::write(env.root.memory(), file.render()).unwrap();
    let facts = add(&env, "2026-06-01", &["After the reorg I report to Sunil Mehta instead."]);
    env.config.consolidation.aspect_k = 0;
    let report = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(!shown_with(&report, &facts[0]).contains(&"m-manager".to_string()), "{:?}", report.clusters);
    env.config.consolidation.aspect_k = 2;
    let report = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(shown_with(&report, &facts[0]).contains(&"m-manager".to_string()), "{:?}", report.clusters);
    assert_eq!(report.aspects.as_ref().map(|a| a.facts_keyed_by_llm), Some(0));
    assert!(report.ops.iter().all(|op| op.op.as_str() == "ADD"), "a shared key decides nothing: {:?}", report.ops);
}
