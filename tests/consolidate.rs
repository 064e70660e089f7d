//! Consolidation passes against real files, a real LanceDB index and a fake OpenAI-compatible LLM.
//!
//! The fake LLM is a real HTTP server; its scripted handler reads the cluster document the
//! pass sends and answers with ops, so the production chat client, validation, planning and
//! apply code all run. After every scenario `verify` must be ok.

use std::sync::Arc;

use memfold::consolidate::pass::PassOptions;
use memfold::corpus;
use memfold::error::Error;
use memfold::index::{DocKind, SearchOpts};
use memfold::ledger::Ledger;
use memfold::lock::LockGuard;
use memfold::state::State;
use memfold::testkit::FakeReply;
use serde_json::{Value, json};

mod common;
use common::{add, assert_verified, d, env, force, history, mem, memory, pass};

/// The cluster document inside a chat request.
fn cluster(request: &Value) -> Value {
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    serde_json::Deserializer::from_str(user).into_iter::<Value>().next().unwrap().unwrap()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect()
}

fn ops(ops: Value) -> FakeReply {
    FakeReply::Content(json!({ "ops": ops }).to_string())
}

/// A handler that adds every candidate as one entry when the cluster has no neighbours, and
/// otherwise calls `with_neighbours(doc)`.
fn script(
    with_neighbours: impl Fn(&Value) -> Value + Send + Sync + 'static,
) -> impl Fn(&Value) -> FakeReply + Send + Sync {
    move |request| {
        let doc = cluster(request);
        if doc.get("max_lines").is_some() {
            // A promotion request: name the first entry offered.
            let first = &doc["entries"][0];
            return FakeReply::Content(
                json!({"lines": [{"entry": first["id"], "text": first["content"]}]}).to_string(),
            );
        }
        if doc["neighbors"].as_array().unwrap().is_empty() {
            let facts = ids(&doc["candidates"]);
            let text: Vec<&str> =
                doc["candidates"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
            return ops(json!([{"op": "ADD", "facts": facts, "content": text.join(" ")}]));
        }
        ops(with_neighbours(&doc))
    }
}

#[tokio::test]
async fn a_job_change_becomes_one_current_entry_with_history() {
    let env = env().await;
    let google = add(&env, "2026-05-27", &["Works at Google as an engineer"]);
    env.llm.set_chat_handler(script(|doc| {
        json!([{"op": "REPLACE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"]),
                "content": "Currently works at Microsoft (since 2026-05). Previously worked at Google.", "why": "update"}])
    }));
    force(&env).await;
    let microsoft = add(&env, "2026-05-30", &["Started at Microsoft, works there now"]);
    let report = force(&env).await;
    assert_eq!(report.ops.len(), 1, "{:?}", report.ops);

    let memory = memory(&env);
    let entries: Vec<_> = memory.entries().collect();
    assert_eq!(entries.len(), 1);
    assert!(entries[0].content.starts_with("Currently works at Microsoft"));
    assert_eq!(entries[0].meta.sources, [google[0].clone(), microsoft[0].clone()]);
    assert_eq!(entries[0].meta.first_seen, Some(d("2026-05-27")));
    assert_eq!(entries[0].meta.updated, Some(d("2026-05-30")));
    let history = history(&env);
    let old: Vec<_> = history.entries().collect();
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].content, "Works at Google as an engineer");
    assert_eq!(old[0].meta.status, Some(memfold::files::entries::HistoryStatus::Replaced));
    assert_eq!(old[0].meta.valid_until, Some(d("2026-05-30")));

    let index = corpus::open_index(&env.root, &env.config).await.unwrap();
    let mut opts = SearchOpts::new(&env.config.search, d("2026-06-01"));
    let hits = index.search("where does he work Microsoft", &opts).await.unwrap();
    assert_eq!(hits[0].id, entries[0].id());
    opts.as_of = Some(d("2026-05-28"));
    let hits = index.search("works at", &opts).await.unwrap();
    assert!(hits[0].text.contains("Google") && !hits[0].text.contains("Microsoft"), "{hits:?}");
    assert_verified(&env);
}

#[tokio::test]
async fn three_phrasings_over_two_days_become_one_entry_with_three_sources() {
    let env = env().await;
    let first = add(&env, "2026-06-01", &["Has a dog named Rex", "Owns a dog called Rex"]);
    env.llm.set_chat_handler(script(
        |doc| json!([{"op": "DUPLICATE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"])}]),
    ));
    force(&env).await;
    let second = add(&env, "2026-06-02", &["My dog's name is Rex"]);
    force(&env).await;
    let memory = memory(&env);
    let entries: Vec<_> = memory.entries().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut want = first.clone();
    want.extend(second);
    assert_eq!(entries[0].meta.sources, want);
    assert_verified(&env);
}

#[tokio::test]
async fn a_correction_leaves_no_stale_value_current() {
    let env = env().await;
    add(&env, "2026-06-01", &["User's name is Jon"]);
    env.llm.set_chat_handler(script(|doc| {
        json!([{"op": "REPLACE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"]),
                "content": "User's name is John.", "why": "correction"}])
    }));
    force(&env).await;
    add(&env, "2026-06-03", &["User's name is John, not Jon"]);
    force(&env).await;
    let memory = memory(&env);
    let current: Vec<&str> = memory.entries().map(|e| e.content.as_str()).collect();
    assert_eq!(current, ["User's name is John."]);
    assert!(history(&env).entries().any(|e| e.content == "User's name is Jon"));
    assert_verified(&env);
}

#[tokio::test]
async fn a_fact_touching_two_topics_is_not_forced_into_one_entry() {
    let env = env().await;
    add(&env, "2026-06-01", &["Lives in Lisbon"]);
    add(&env, "2026-06-01", &["Has no pets at home"]);
    env.llm.set_chat_handler(script(|doc| {
        let facts = ids(&doc["candidates"]);
        let out: Vec<Value> = doc["neighbors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let content = if n["content"].as_str().unwrap().contains("Lisbon") {
                    "Lives in Berlin (since 2026-06). Previously lived in Lisbon."
                } else {
                    "Has a cat (adopted 2026-06). Previously had no pets."
                };
                json!({"op": "REPLACE", "target": n["id"], "facts": facts, "content": content, "why": "update"})
            })
            .collect();
        json!(out)
    }));
    // Separate passes so the two entries exist before the two-topic fact arrives.
    force(&env).await;
    let both =
        add(&env, "2026-06-05", &["Moved to Berlin and adopted a cat; lives there with no more empty home, pets now"]);
    let report = force(&env).await;
    let memory = memory(&env);
    let entries: Vec<_> = memory.entries().collect();
    assert_eq!(entries.len(), 2, "{entries:?}\n{report:?}");
    assert!(entries.iter().all(|e| e.meta.sources.contains(&both[0])));
    assert!(entries.iter().any(|e| e.content.contains("Berlin")) && entries.iter().any(|e| e.content.contains("cat")));
    assert_verified(&env);
}

#[tokio::test]
async fn the_gate_opens_on_numbers_or_force_and_never_past_the_lock() {
    let mut env = env().await;
    env.config.consolidation.min_facts = 3;
    env.config.consolidation.min_hours = 24.0;
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Likes tea"]);
    let report = pass(&env, PassOptions::default()).await.unwrap();
    assert!(!report.gate.open && report.gate.reason.contains("min_facts = 3"), "{:?}", report.gate);
    add(&env, "2026-06-01", &["Plays chess", "Reads novels"]);
    let report = pass(&env, PassOptions::default()).await.unwrap();
    assert!(report.gate.open && report.applied, "{:?}", report.gate);
    add(&env, "2026-06-02", &["Runs on Sundays", "Bakes bread", "Speaks Dutch"]);
    let report = pass(&env, PassOptions::default()).await.unwrap();
    assert!(!report.gate.open && report.gate.reason.contains("min_hours = 24"), "{:?}", report.gate);
    {
        let _held = LockGuard::try_acquire(&env.root.consolidate_lock(), "consolidation").unwrap();
        let err = pass(&env, PassOptions { force: true, dry_run: false }).await.unwrap_err();
        assert!(matches!(err, Error::Busy(_)), "{err}");
        assert!(err.to_string().contains(&format!("pid {}", std::process::id())), "{err}");
    }
    let report = pass(&env, PassOptions { force: true, dry_run: false }).await.unwrap();
    assert!(report.applied);
    let _ = &mut env;
    assert_verified(&env);
}

#[tokio::test]
async fn garbage_twice_leaves_that_cluster_pending_and_the_next_run_retries_it() {
    let env = env().await;
    add(&env, "2026-06-01", &["Likes green tea", "Collects vinyl records"]);
    let garbage = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = garbage.clone();
    env.llm.set_chat_handler(move |request| {
        let doc = cluster(request);
        if doc.get("max_lines").is_some() {
            return FakeReply::Content("{}".into());
        }
        let text = doc["candidates"][0]["text"].as_str().unwrap().to_string();
        if text.contains("vinyl") && flag.load(std::sync::atomic::Ordering::SeqCst) {
            return FakeReply::Content("I think these are about music!".into());
        }
        let facts = ids(&doc["candidates"]);
        ops(json!([{"op": "ADD", "facts": facts, "content": text}]))
    });
    let report = force(&env).await;
    assert!(report.applied);
    assert_eq!(report.failed_facts.len(), 1);
    assert_eq!(memory(&env).entries().count(), 1, "the tea cluster applied");
    let state = State::load(&env.root.state_json()).unwrap();
    assert_eq!(state.facts[&report.failed_facts[0]].attempts, 1);
    assert_eq!(Ledger::load(&env.root).unwrap().pending().len(), 1);
    assert_verified(&env);

    garbage.store(false, std::sync::atomic::Ordering::SeqCst);
    let report = force(&env).await;
    assert!(report.failed_facts.is_empty());
    assert_eq!(memory(&env).entries().count(), 2);
    assert!(State::load(&env.root.state_json()).unwrap().facts.is_empty(), "progress cleared once done");
    assert_verified(&env);
}

#[tokio::test]
async fn bad_ops_change_nothing_they_should_not() {
    let env = env().await;
    add(&env, "2026-06-01", &["Likes black tea"]);
    add(&env, "2026-06-01", &["Plays chess on weekends"]);
    env.llm.set_chat_handler(script(|_| json!([])));
    force(&env).await;
    let before = memory(&env);
    let chess = before.entries().find(|e| e.content.contains("chess")).unwrap().id().to_string();
    let tea = before.entries().find(|e| e.content.contains("tea")).unwrap().id().to_string();

    add(&env, "2026-06-02", &["Likes green tea more than black tea"]);
    let (tea2, chess2) = (tea.clone(), chess.clone());
    env.llm.set_chat_handler(move |request| {
        let doc = cluster(request);
        if doc.get("max_lines").is_some() {
            return FakeReply::Status(500);
        }
        let facts = ids(&doc["candidates"]);
        ops(json!([
            {"op": "REPLACE", "target": chess2, "facts": facts, "content": "Hijacked"},
            {"op": "REMOVE", "target": tea2, "into": tea2},
            {"op": "REMOVE", "target": tea2, "into": "m-nowhere"},
            {"op": "REPLACE", "target": tea2, "facts": facts, "content": ""},
            {"op": "REPLACE", "target": tea2, "facts": facts, "content": "unchanged"},
        ]))
    });
    let report = force(&env).await;
    assert_eq!(report.dropped.len(), 5, "{:?}", report.dropped);
    let after = memory(&env);
    assert_eq!(after.get(&chess).unwrap().content, before.get(&chess).unwrap().content);
    assert_eq!(after.get(&tea).unwrap().content, before.get(&tea).unwrap().content);
    assert!(after.entries().any(|e| e.content == "Likes green tea more than black tea"), "candidate added verbatim");
    assert_eq!(history(&env).entries().count(), 0);
    assert_verified(&env);
}

#[tokio::test]
async fn clusters_never_share_an_entry_and_dry_run_writes_nothing() {
    let env = env().await;
    env.llm.set_chat_handler(script(
        |doc| json!([{"op": "DUPLICATE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"])}]),
    ));
    add(&env, "2026-06-01", &["Likes tea", "Plays chess", "Has a dog named Rex", "Lives in Lisbon"]);
    force(&env).await;
    add(
        &env,
        "2026-06-02",
        &["Likes tea a lot", "Plays chess online", "Walks the dog Rex daily", "Lives in Lisbon centre"],
    );
    let calls_before = env.llm.chat_calls() as usize;
    let memory_before = std::fs::read(env.root.memory()).unwrap();
    let dry = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(!dry.applied && !dry.ops.is_empty());
    assert_eq!(std::fs::read(env.root.memory()).unwrap(), memory_before, "dry run wrote memory.md");
    let report = force(&env).await;
    let mut seen = std::collections::HashSet::new();
    for c in &report.clusters {
        for n in &c.neighbors {
            assert!(seen.insert(n.clone()), "{n} in two clusters: {:?}", report.clusters);
        }
    }
    assert!(report.clusters.len() >= 2);
    let decisions =
        env.llm.chat_requests()[calls_before..].iter().filter(|r| cluster(r).get("candidates").is_some()).count();
    assert_eq!(decisions, report.clusters.len() + dry.clusters.len(), "one decision call per cluster");
    // Every op is a DUPLICATE: entries gain sources, but nothing MEMORY.md shows changed, so the
    // promotion asks the LLM nothing.
    assert_eq!(report.llm.calls as usize, report.clusters.len(), "decisions only");
    assert!(report.llm.prompt_tokens > 0);
    assert!(std::fs::read_to_string(env.root.memory_md()).unwrap().contains("<!--p m-"), "MEMORY.md promoted");
    assert_verified(&env);
}

#[tokio::test]
async fn search_finds_pending_facts_and_entries_by_kind() {
    let env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Allergic to peanuts"]);
    force(&env).await;
    add(&env, "2026-06-02", &["Learning to play the cello"]);
    let index = corpus::open_index(&env.root, &env.config).await.unwrap();
    corpus::refresh(&env.root, &index).await.unwrap();
    let opts = SearchOpts::new(&env.config.search, d("2026-06-03"));
    let hits = index.search("peanuts allergy", &opts).await.unwrap();
    assert_eq!(hits[0].kind, DocKind::Entry);
    let hits = index.search("cello", &opts).await.unwrap();
    assert_eq!(hits[0].kind, DocKind::Fact, "pending facts are searchable at once");
}

#[tokio::test]
async fn a_cluster_over_cluster_max_is_decided_in_calls_that_see_earlier_results() {
    let mut env = env().await;
    env.config.consolidation.cluster_max = 4;
    // Six phrasings of one fact: one component, too big for one call of at most 4.
    add(
        &env,
        "2026-06-01",
        &[
            "Dog Rex likes the park",
            "Dog Rex loves the park",
            "Dog Rex enjoys the park",
            "Dog Rex adores the park",
            "Dog Rex runs in the park",
            "Dog Rex plays in the park",
        ],
    );
    // Add when alone; once an earlier call's entry is visible, report the rest as duplicates.
    env.llm.set_chat_handler(script(
        |doc| json!([{"op": "DUPLICATE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"])}]),
    ));
    let report = force(&env).await;
    assert_eq!(report.clusters.len(), 3, "6 facts in calls of 2: {:?}", report.clusters);
    assert!(report.clusters[0].neighbors.is_empty());
    let first_entry = memory(&env).entries().next().unwrap().id().to_string();
    for later in &report.clusters[1..] {
        assert!(later.neighbors.contains(&first_entry), "a later call sees the entry the first call added: {later:?}");
    }
    let memory = memory(&env);
    assert_eq!(memory.entries().count(), 1);
    assert_eq!(memory.entries().next().unwrap().meta.sources.len(), 6);
    assert_verified(&env);
}

#[tokio::test]
async fn an_entry_replaced_twice_keeps_both_old_versions_and_verifies() {
    let env = env().await;
    env.llm.set_chat_handler(script(|doc| {
        let text = doc["candidates"][0]["text"].as_str().unwrap();
        json!([{"op": "REPLACE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"]), "content": text, "why": "update"}])
    }));
    add(&env, "2026-06-01", &["Lives in Lisbon"]);
    force(&env).await;
    add(&env, "2026-07-01", &["Lives in Berlin now"]);
    force(&env).await;
    add(&env, "2026-08-01", &["Lives in Oslo now"]);
    force(&env).await;
    let history = history(&env);
    let versions: Vec<&str> = history.entries().map(|e| e.content.as_str()).collect();
    assert_eq!(versions, ["Lives in Lisbon", "Lives in Berlin now"]);
    assert_eq!(
        history.entries().map(|e| e.id()).collect::<std::collections::HashSet<_>>().len(),
        1,
        "one entry, two versions"
    );
    assert_eq!(memory(&env).entries().next().unwrap().content, "Lives in Oslo now");
    let index = corpus::open_index(&env.root, &env.config).await.unwrap();
    let mut opts = SearchOpts::new(&env.config.search, d("2026-09-01"));
    opts.as_of = Some(d("2026-07-15"));
    let hits = index.search("lives in", &opts).await.unwrap();
    assert_eq!(hits[0].text, "Lives in Berlin now", "{hits:?}");
    assert_verified(&env);
}

/// `rebuild` used to count facts in older replaced or merged versions as consolidated and
/// never re-add them: "has a dog named Rex and a cat named Miso" came back as the cat alone.
#[tokio::test]
async fn rebuild_after_replace_and_remove_keeps_every_fact() {
    let env = env().await;
    // A fact starting "Also" is added; any other replaces the first neighbour with all texts
    // and merges the other neighbours into it.
    env.llm.set_chat_handler(script(|doc| {
        let candidates = doc["candidates"].as_array().unwrap();
        if candidates[0]["text"].as_str().unwrap().starts_with("Also") {
            return json!([{"op": "ADD", "facts": ids(&doc["candidates"]), "content": candidates[0]["text"]}]);
        }
        let neighbours = doc["neighbors"].as_array().unwrap();
        let first = &neighbours[0];
        let texts: Vec<&str> =
            doc["candidates"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
        let mut content = first["content"].as_str().unwrap().to_string();
        for n in &neighbours[1..] {
            content = format!("{content} {}", n["content"].as_str().unwrap());
        }
        let mut ops = vec![json!({"op": "REPLACE", "target": first["id"], "facts": ids(&doc["candidates"]),
                                  "content": format!("{content} {}", texts.join(" ")), "why": "update"})];
        for n in &neighbours[1..] {
            ops.push(json!({"op": "REMOVE", "target": n["id"], "into": first["id"], "why": "same pet"}));
        }
        json!(ops)
    }));
    let mut facts = add(&env, "2026-05-01", &["Has a dog named Rex."]);
    force(&env).await;
    facts.extend(add(&env, "2026-05-02", &["Also has a cat named Miso."]));
    force(&env).await;
    assert_eq!(memory(&env).entries().count(), 2);
    facts.extend(add(&env, "2026-05-03", &["The dog Rex has a friend, the cat named Miso."]));
    let report = force(&env).await;
    let kinds: Vec<&str> = report.ops.iter().map(|o| o.op).collect();
    assert_eq!(kinds, ["REPLACE", "REMOVE"], "{:?}", report.ops);
    assert_eq!(memory(&env).entries().count(), 1);
    assert_verified(&env);

    let report = mem(&env).await.rebuild().await.unwrap();
    assert!(report.applied, "{report:?}");
    let ledger = Ledger::load(&env.root).unwrap();
    let fates = ledger.fates();
    let current: String = memory(&env).entries().map(|e| e.content.clone()).collect::<Vec<_>>().join("\n");
    for fact in ledger.facts.iter() {
        assert_eq!(fates[fact.id.as_str()], memfold::ledger::FactFate::Consolidated, "{}", fact.text);
        assert!(current.contains(&fact.text), "{} is not in memory after the rebuild:\n{current}", fact.text);
    }
    assert_eq!(ledger.facts.len(), facts.len());
    assert_verified(&env);
}
