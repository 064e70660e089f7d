//! `memfold mcp` driven by a real MCP client (rmcp's) over stdin/stdout: the real binary, a
//! real memory root in a temp dir, and the fake OpenAI-compatible server as the LLM.
//!
//! The MCP server over HTTP (`/mcp` on `memfold serve`) is driven in tests/http.rs, with the
//! same tour (tests/common/mcp.rs). `tools/list` must equal tests/mcp_tools.json; after a
//! deliberate change, rewrite it with `WRITE_MCP_TOOLS_SNAPSHOT=1 cargo test --test mcp
//! tools_list` and update docs/mcp.md's tool list.

use std::time::{Duration, Instant};

use memfold::testkit::{FakeOpenAi, FakeReply};
use rmcp::model::{
    ClientConfig, ProtocolVersion, ServerNotification, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::common::mcp::{self, ENTRIES_URI, LIMIT, MEMORY_URI, ok, refused};
use crate::common::{init_root, llm_env, memfold};

fn env<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tour_over_stdio_with_resource_updates() {
    let root = init_root();
    let fake = FakeOpenAi::start().await;
    mcp::script(&fake);
    let llm = llm_env(&fake);
    let (client, _child, mut updates, _) = mcp::stdio(root.path(), &env(&llm)).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "memfold");
    assert!(info.capabilities.resources.as_ref().unwrap().subscribe == Some(true), "{info:?}");
    #[allow(deprecated)]
    for uri in [MEMORY_URI, ENTRIES_URI] {
        client.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    }
    #[allow(deprecated)]
    let unknown = client.subscribe(SubscribeRequestParams::new("memfold://nothing.md")).await;
    assert!(unknown.is_err(), "{unknown:?}");

    mcp::tour(&client, root.path(), &fake).await;
    // The passes of the tour rewrote both files in this process.
    mcp::updated(&mut updates, &[MEMORY_URI, ENTRIES_URI]).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list() {
    let root = init_root();
    let (client, _child, _, _) = mcp::stdio(root.path(), &[]).await;
    let listed = json!({ "tools": client.list_all_tools().await.unwrap() });
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_tools.json");
    if std::env::var_os("WRITE_MCP_TOOLS_SNAPSHOT").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&listed).unwrap() + "\n").unwrap();
    }
    let snapshot: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(listed, snapshot, "tools/list changed: update tests/mcp_tools.json and docs/mcp.md's tool list");
    let names: Vec<&str> = snapshot["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let doc = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp.md")).unwrap();
    for name in &names {
        assert!(doc.contains(&format!("| `{name}`")), "docs/mcp.md's tool list lacks {name}");
    }
    assert_eq!(names.len(), 20, "{names:?}");
    // The hints an agent's client acts on.
    let hint = |tool: &str, hint: &str| {
        snapshot["tools"].as_array().unwrap().iter().find(|t| t["name"] == tool).unwrap()["annotations"][hint].clone()
    };
    for read_only in ["memory_search", "memory_get", "memory_status", "memory_plans", "memory_plan", "memory_runs"] {
        assert_eq!(hint(read_only, "readOnlyHint"), true, "{read_only}");
    }
    for destructive in ["memory_forget", "memory_consolidate", "memory_apply_plan", "memory_undo"] {
        assert_eq!(hint(destructive, "destructiveHint"), true, "{destructive}");
    }
    for additive in ["memory_add", "memory_add_turn", "memory_pin", "memory_unpin", "memory_reject_plan"] {
        assert_eq!((hint(additive, "readOnlyHint"), hint(additive, "destructiveHint")), (json!(false), json!(false)));
    }
    client.cancel().await.unwrap();
}

/// Spawn to `initialize` answered, on the embedded default (local embedder, no LLM), which
/// docs/performance.md's table reports. Printed, not asserted beyond a sanity bound: the target
/// is under a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_answers_initialize_without_opening_the_index() {
    let root = init_root();
    let mut times = Vec::new();
    for _ in 0..5 {
        let (client, _child, _, initialized) = mcp::stdio(root.path(), &[]).await;
        times.push(initialized);
        client.cancel().await.unwrap();
    }
    assert!(!root.path().join(".memfold/index").exists(), "initialize opened the index");
    times.sort();
    let ms: Vec<u128> = times.iter().map(Duration::as_millis).collect();
    eprintln!("memfold mcp: spawn to initialize answered, 5 runs sorted: {ms:?} ms (median {} ms)", ms[2]);
    assert!(times[2] < Duration::from_secs(10), "{ms:?}");
}

/// Another process's writes (the CLI here; a daemon or a person alike) reach searches and
/// subscribers of a running `memfold mcp`, over both subscription mechanisms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_by_other_processes_reach_searches_and_subscribers() {
    let root = init_root();
    let (client, _child, mut updates, _) = mcp::stdio(root.path(), &[]).await;
    #[allow(deprecated)]
    for uri in [MEMORY_URI, ENTRIES_URI] {
        client.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    }
    // A 2026-07-28 client on a second `memfold mcp`, listening.
    let mut second = mcp::command(root.path(), &[]).spawn().unwrap();
    let transport = (second.stdout.take().unwrap(), second.stdin.take().unwrap());
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let listener = ClientConfig::default().serve_with_lifecycle(transport, lifecycle).await.unwrap();
    let mut subscription =
        listener.listen(SubscriptionFilter::builder().resource_subscription(MEMORY_URI).build()).await.unwrap();
    assert_eq!(subscription.acknowledged().resource_subscriptions, Some(vec![MEMORY_URI.to_string()]));
    assert_eq!(mcp::read(&listener, MEMORY_URI).await, crate::common::read(root.path(), "MEMORY.md"));

    // A fact the CLI adds is found (the watcher marks the index stale; no timing assumed),
    // also after a search brought the index up to date.
    ok(&client, "memory_search", json!({"query": "anything"})).await;
    let added = crate::common::json(&memfold(root.path(), &["add", "--json", "Plays the cello on Sundays."], &[]));
    let id = added["facts"][0]["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    loop {
        let found = ok(&client, "memory_search", json!({"query": "cello Sundays"})).await;
        if found["hits"].as_array().unwrap().iter().any(|h| h["id"] == id) {
            break;
        }
        assert!(started.elapsed() < LIMIT, "the fact the CLI added was never found: {found}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A pass by the CLI rewrites memory.md and MEMORY.md: both servers tell their subscribers.
    crate::common::ok(memfold(root.path(), &["consolidate", "--force"], &[]));
    mcp::updated(&mut updates, &[MEMORY_URI, ENTRIES_URI]).await;
    let note = tokio::time::timeout(LIMIT, subscription.next()).await.expect("in time").unwrap().unwrap();
    match note {
        ServerNotification::ResourceUpdatedNotification(n) => assert_eq!(n.params.uri, MEMORY_URI),
        other => panic!("{other:?}"),
    }
    let promoted = mcp::read(&listener, MEMORY_URI).await;
    assert!(promoted.contains("Plays the cello on Sundays."), "a read after the update sees the new file: {promoted}");

    // A person's edit of MEMORY.md is a change too; after unsubscribing from memory.md, only
    // MEMORY.md is told.
    #[allow(deprecated)]
    client.unsubscribe(UnsubscribeRequestParams::new(ENTRIES_URI)).await.unwrap();
    let path = root.path().join("MEMORY.md");
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "\nA line of my own.\n").unwrap();
    mcp::updated(&mut updates, &[MEMORY_URI]).await;
    subscription.cancel().await.unwrap();
    listener.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_need_an_llm_and_are_stored_whole_or_not_at_all() {
    let root = init_root();
    let (offline, _child, _, _) = mcp::stdio(root.path(), &[]).await;
    let (message, error) =
        refused(&offline, "memory_add_turn", json!({"text": "user: I have a cat named Miso."})).await;
    assert!(message.starts_with("no LLM is configured"), "{message}");
    assert!(message.contains("memory_add"), "the message says what to do instead: {message}");
    assert_eq!(error["error"]["code"], "llm_unavailable", "{error}");
    offline.cancel().await.unwrap();

    let fake = FakeOpenAi::start().await;
    let llm = llm_env(&fake);
    let (client, _child, _, _) = mcp::stdio(root.path(), &env(&llm)).await;
    fake.push_chat(FakeReply::Content(json!({"facts": [{"text": "The user has a cat named Miso."}]}).to_string()));
    let turn = json!({"messages": [
        {"role": "user", "content": "I got a cat! Her name is Miso."},
        {"role": "assistant", "content": "Congratulations!"},
    ], "source": "chat"});
    let added = ok(&client, "memory_add_turn", turn).await;
    assert_eq!(added["facts"][0]["text"], "The user has a cat named Miso.", "{added}");
    assert!(added["llm"]["calls"].as_u64().unwrap() >= 1, "{added}");
    let user = fake.chat_requests()[0]["messages"][1]["content"].as_str().unwrap().to_string();
    assert!(user.contains("user: I got a cat! Her name is Miso."), "{user}");

    fake.push_chat(FakeReply::Status(503));
    let (message, error) = refused(&client, "memory_add_turn", json!({"text": "user: my sister lives in Porto"})).await;
    assert!(message.ends_with("nothing was stored, send the turn again later"), "{message}");
    assert_eq!(error["error"]["code"], "llm_unavailable", "{error}");
    let status = ok(&client, "memory_status", json!({})).await;
    assert_eq!(status["pending_facts"], 1, "only the first turn was stored: {status}");
    client.cancel().await.unwrap();
}

/// Every line `memfold mcp` writes on stdout is a JSON-RPC message, even with every log
/// enabled and a pass that logs; the logs go to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_carries_nothing_but_protocol() {
    let root = init_root();
    let mut command = mcp::command(root.path(), &[("MEMFOLD_LOG", "debug")]);
    command.stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let logs = tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_add",
            "arguments": {"facts": ["Lives in Porto."]}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_search",
            "arguments": {"query": "Porto"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_consolidate",
            "arguments": {"force": true}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "memory_status"}}),
    ];
    let mut lines = Vec::new();
    for request in requests {
        stdin.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        let Some(id) = request.get("id").cloned() else { continue };
        loop {
            let line = tokio::time::timeout(LIMIT, stdout.next_line()).await.expect("an answer in time").unwrap();
            let line = line.expect("stdout open");
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            lines.push(line);
            if message["id"] == id {
                assert!(message.get("error").is_none() && message["result"]["isError"] != true, "{message}");
                break;
            }
        }
    }
    drop(stdin);
    let status = tokio::time::timeout(LIMIT, child.wait()).await.expect("exits when stdin closes").unwrap();
    assert!(status.success(), "{status}");
    while let Some(line) = stdout.next_line().await.unwrap() {
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let logs = logs.await.unwrap();
    assert!(logs.contains("pass done"), "the logs went to stderr:\n{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_mode_plans_are_listed_rejected_and_applied() {
    let root = init_root();
    let (client, _child, _, _) = mcp::stdio(root.path(), &[("MEMFOLD_CONSOLIDATION__MODE", "review")]).await;
    ok(&client, "memory_add", json!({"facts": ["Lives in Porto.", "Has a dog named Rex."]})).await;
    let pass = mcp::call(&client, "memory_consolidate", json!({"force": true})).await;
    let report = pass.structured_content.clone().unwrap();
    let first = report["plans"][0].as_str().unwrap().to_string();
    assert_eq!(report["applied"], false, "{report}");
    assert!(mcp::text(&pass).contains(&format!("plan {first} stored for review")), "{}", mcp::text(&pass));

    let listed = mcp::call(&client, "memory_plans", json!({})).await;
    let plans = listed.structured_content.clone().unwrap();
    assert_eq!(plans["plans"][0]["id"], json!(first), "{plans}");
    assert_eq!(plans["plans"][0]["status"], "pending", "{plans}");
    assert!(mcp::text(&listed).contains("+Lives in Porto."), "the text shows the diff: {}", mcp::text(&listed));
    let rejected = ok(&client, "memory_reject_plan", json!({"plan": first})).await;
    assert_eq!(rejected["facts"].as_array().unwrap().len(), 2, "{rejected}");
    let again = ok(&client, "memory_reject_plan", json!({"plan": first})).await;
    assert_eq!(again, rejected, "rejecting twice changes nothing");
    let (message, _) = refused(&client, "memory_apply_plan", json!({"plan": first})).await;
    assert!(message.contains(&first), "{message}");

    let report = ok(&client, "memory_consolidate", json!({"force": true})).await;
    let second = report["plans"][0].as_str().unwrap().to_string();
    // One group at a time: the plan in groups, then only the group of the dog.
    let shown = mcp::call(&client, "memory_plan", json!({"plan": second})).await;
    let detail = shown.structured_content.clone().unwrap();
    let groups = detail["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{detail}");
    assert!(mcp::text(&shown).contains("group 2:") && mcp::text(&shown).contains("Has a dog named Rex."));
    let dog = groups.iter().position(|g| g["ops"][0]["content"] == "Has a dog named Rex.").unwrap() + 1;
    let applied = ok(&client, "memory_apply_plan", json!({"plan": second, "groups": [dog]})).await;
    assert_eq!((applied["ops"].as_u64(), applied["groups"].clone()), (Some(1), json!([dog])), "{applied}");
    assert_eq!(applied["rejected"].as_array().unwrap().len(), 1, "{applied}");
    let report = ok(&client, "memory_consolidate", json!({"force": true})).await;
    let second = report["plans"][0].as_str().unwrap().to_string();
    let applied = ok(&client, "memory_apply_plan", json!({"plan": second})).await;
    assert_eq!(applied["ops"], 1, "{applied}");
    let runs = ok(&client, "memory_runs", json!({})).await;
    assert_eq!(runs["runs"][1]["plan"], json!(second), "{runs}");
    let status = ok(&client, "memory_status", json!({})).await;
    assert_eq!((status["entries"].as_u64(), status["pending_facts"].as_u64()), (Some(2), Some(0)), "{status}");
    let (message, error) = refused(&client, "memory_apply_plan", json!({"plan": second})).await;
    assert_eq!(message, format!("no plan {second}"));
    assert_eq!(error["error"]["code"], "not_found", "{error}");
    client.cancel().await.unwrap();
}

/// Agents call tools in parallel: this server's changes queue instead of finding the
/// consolidation lock taken by each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_changes_from_one_agent_queue_instead_of_refusing_each_other() {
    let root = init_root();
    let (client, _child, _, _) = mcp::stdio(root.path(), &[]).await;
    let facts = ["Lives in Porto.", "Has a dog named Rex.", "Plays the cello.", "Works as a nurse."];
    ok(&client, "memory_add", json!({ "facts": facts })).await;
    ok(&client, "memory_consolidate", json!({"force": true})).await;
    let file = memfold::store::entries::EntryFile::read(&root.path().join("consolidated/memory.md"), "memory.md");
    let ids: Vec<String> = file.unwrap().entries().map(|e| e.id().to_string()).collect();
    assert_eq!(ids.len(), 4);
    let (a, b, c, d, e) = tokio::join!(
        mcp::call(&client, "memory_forget", json!({"id": ids[0]})),
        mcp::call(&client, "memory_forget", json!({"id": ids[1]})),
        mcp::call(&client, "memory_pin", json!({"id": ids[2]})),
        mcp::call(&client, "memory_consolidate", json!({"force": true})),
        mcp::call(&client, "memory_unpin", json!({"id": ids[3]})),
    );
    for result in [a, b, c, d, e] {
        assert_eq!(result.is_error, Some(false), "{}", mcp::text(&result));
    }
    let status = ok(&client, "memory_status", json!({})).await;
    assert_eq!(status["entries"], 2, "{status}");
    client.cancel().await.unwrap();
}
