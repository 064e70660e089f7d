//! A real MCP client for the tests (rmcp's own), over a spawned `memfold mcp` or a daemon's
//! `/mcp`, and the tour of the tools both transports must pass.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use memfold::testkit::{FakeOpenAi, promotion_reply};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::add_everything;

/// How long anything here may take before a test gives up (a sanity bound, not a target).
pub const LIMIT: Duration = Duration::from_secs(60);
pub const MEMORY_URI: &str = "memfold://MEMORY.md";
pub const ENTRIES_URI: &str = "memfold://memory.md";

/// A client that passes on every `notifications/resources/updated` it gets (legacy subscriptions).
#[derive(Clone)]
pub struct Recorder {
    updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Recorder {
    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _: NotificationContext<RoleClient>) {
        let _ = self.updated.send(params.uri);
    }
}

impl Recorder {
    pub fn new() -> (Recorder, mpsc::UnboundedReceiver<String>) {
        let (updated, updates) = mpsc::unbounded_channel();
        (Recorder { updated }, updates)
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// `memfold --root ROOT mcp` with `env`, stdin and stdout piped, stderr inherited (warnings only).
pub fn command(root: &Path, env: &[(&str, &str)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_memfold"));
    command.env("MEMFOLD_EMBEDDING__PROVIDER", "local");
    command
        .arg("--root")
        .arg(root)
        .arg("mcp")
        .env_remove("MEMFOLD_ROOT")
        .env_remove("MEMFOLD_CONFIG")
        .env_remove("MEMFOLD_LLM__BASE_URL")
        .env("MEMFOLD_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command
}

/// Start `memfold mcp` and connect (the `initialize` handshake); also how long that took.
pub async fn stdio(
    root: &Path,
    env: &[(&str, &str)],
) -> (Client, tokio::process::Child, mpsc::UnboundedReceiver<String>, Duration) {
    let started = Instant::now();
    let mut child = command(root, env).spawn().expect("memfold mcp starts");
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let (recorder, updates) = Recorder::new();
    let client = tokio::time::timeout(LIMIT, recorder.serve((stdout, stdin))).await.expect("in time").unwrap();
    let initialized = started.elapsed();
    (client, child, updates, initialized)
}

/// Connect to `url` (`http://…/mcp`) with this bearer token.
pub async fn http(url: &str, token: &str) -> (Client, mpsc::UnboundedReceiver<String>) {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let (recorder, updates) = Recorder::new();
    let client = recorder.serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    (client, updates)
}

/// Call a tool; the call itself must not be a protocol error.
pub async fn call<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(args) = args {
        params = params.with_arguments(args);
    }
    client.call_tool(params).await.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The text of a tool result.
pub fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect::<Vec<_>>().join("\n")
}

/// Call a tool that must succeed; its structured content.
pub async fn ok<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    tool: &str,
    args: Value,
) -> Value {
    let result = call(client, tool, args).await;
    assert_eq!(result.is_error, Some(false), "{tool}: {}", text(&result));
    assert!(!text(&result).is_empty(), "{tool} answered no text");
    result.structured_content.unwrap_or_else(|| panic!("{tool}: no structured content"))
}

/// Call a tool that must answer a tool error; its text and structured content.
pub async fn refused<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    tool: &str,
    args: Value,
) -> (String, Value) {
    let result = call(client, tool, args).await;
    assert_eq!(result.is_error, Some(true), "{tool} should have failed: {}", text(&result));
    (text(&result), result.structured_content.clone().unwrap_or(Value::Null))
}

/// A resource's text.
pub async fn read<S: rmcp::Service<RoleClient>>(client: &RunningService<RoleClient, S>, uri: &str) -> String {
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap();
    match &read.contents[..] {
        [ResourceContents::TextResourceContents { text, uri: got, mime_type, .. }] => {
            assert_eq!(got, uri);
            assert_eq!(mime_type.as_deref(), Some("text/markdown"));
            text.clone()
        }
        other => panic!("{other:?}"),
    }
}

/// The next `resources/updated` URIs until both of `want` arrived.
pub async fn updated(updates: &mut mpsc::UnboundedReceiver<String>, want: &[&str]) {
    let mut missing: Vec<&str> = want.to_vec();
    while !missing.is_empty() {
        let uri = tokio::time::timeout(LIMIT, updates.recv())
            .await
            .unwrap_or_else(|_| panic!("no resources/updated for {missing:?}"))
            .unwrap();
        missing.retain(|m| *m != uri);
    }
}

/// The fake LLM's behaviour for these tests: decision calls ADD every candidate, promotion
/// calls keep every entry (`promotion_reply`).
pub fn script(fake: &FakeOpenAi) {
    fake.set_chat_handler(|request| promotion_reply(request).unwrap_or_else(|| add_everything(request)));
}

/// The ids of the hits of a search.
async fn hit_ids<S: rmcp::Service<RoleClient>>(client: &RunningService<RoleClient, S>, query: &str) -> Vec<String> {
    let found = ok(client, "memory_search", json!({"query": query, "k": 10})).await;
    found["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

/// The acceptance tour, on any transport, against a fresh root whose LLM is `fake` (scripted
/// with [`script`]): list tools (the committed snapshot), add facts, search them, consolidate,
/// read `MEMORY.md`, undo, consolidate again, pin, forget, a refused undo; bad arguments.
pub async fn tour<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    root: &Path,
    fake: &FakeOpenAi,
) {
    let tools = client.list_all_tools().await.unwrap();
    let listed = json!({ "tools": tools });
    let snapshot: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_tools.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(listed, snapshot, "tools/list changed: update tests/mcp_tools.json and docs/mcp.md's tool list");

    let added =
        ok(client, "memory_add", json!({"facts": ["Lives in Porto.", "Has a dog named Rex."], "source": "chat"})).await;
    let facts: Vec<String> =
        added["facts"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().into()).collect();
    assert_eq!(facts.len(), 2, "{added}");
    assert_eq!(added["facts"][0]["text"], "Lives in Porto.");
    assert!(hit_ids(client, "Porto").await.contains(&facts[0]), "a fact is searchable as soon as it is added");
    let status = ok(client, "memory_status", json!({})).await;
    assert_eq!(status["pending_facts"], 2, "{status}");

    let dry = ok(client, "memory_consolidate", json!({"force": true, "dry_run": true})).await;
    assert_eq!((dry["dry_run"].as_bool(), dry["applied"].as_bool()), (Some(true), Some(false)), "{dry}");
    let calls = fake.chat_calls();
    let report = ok(client, "memory_consolidate", json!({"force": true})).await;
    assert_eq!(report["applied"], true, "{report}");
    assert_eq!(report["decider"], "llm", "{report}");
    assert!(fake.chat_calls() > calls, "the pass asked the fake LLM");
    let ops: Vec<&str> = report["ops"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["ADD", "ADD"], "{report}");
    let run = report["run"].as_str().unwrap().to_string();

    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, [MEMORY_URI, ENTRIES_URI]);
    let promoted = read(client, MEMORY_URI).await;
    assert_eq!(promoted, std::fs::read_to_string(root.join("MEMORY.md")).unwrap());
    assert!(promoted.contains("Lives in Porto."), "{promoted}");
    let entries = read(client, ENTRIES_URI).await;
    assert_eq!(entries, std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap());
    let unknown = client.read_resource(ReadResourceRequestParams::new("memfold://state.json")).await;
    assert!(unknown.is_err(), "only the two files are served: {unknown:?}");

    let undone = ok(client, "memory_undo", json!({"run": run})).await;
    assert_eq!(undone["removed"].as_array().unwrap().len(), 2, "{undone}");
    assert_eq!(undone["facts"].as_array().unwrap().len(), 2, "{undone}");
    assert!(!read(client, MEMORY_URI).await.contains("Lives in Porto."), "MEMORY.md rewritten after the undo");
    let runs = ok(client, "memory_runs", json!({})).await;
    assert!(runs["runs"][0]["undone"].is_string(), "{runs}");

    let again = ok(client, "memory_consolidate", json!({"force": true})).await;
    assert_eq!(again["applied"], true, "{again}");
    let second = again["run"].as_str().unwrap().to_string();
    let current = ok(client, "memory_search", json!({"query": "dog Rex"})).await;
    let rex = current["hits"].as_array().unwrap().iter().find(|h| h["kind"] == "entry").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The same facts made the same entry again; its chain holds the version the undo reverted.
    let chain = ok(client, "memory_get", json!({"id": rex})).await;
    let statuses: Vec<&str> =
        chain["versions"].as_array().unwrap().iter().map(|v| v["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["reverted", "current"], "{chain}");
    assert_eq!(chain["versions"][1]["content"].as_str().unwrap().trim(), "Has a dog named Rex.", "{chain}");
    // What memory holds about Rex (naming him), and the names it speaks of.
    let about = ok(client, "memory_about", json!({"name": "Rex", "include_history": true})).await;
    assert_eq!(about["entries"][0]["id"], rex, "{about}");
    assert_eq!(about["history"][0]["status"], "reverted", "{about}");
    let names = ok(client, "memory_about", json!({})).await;
    assert!(names["names"].as_array().unwrap().iter().any(|n| n["name"] == "Rex"), "{names}");

    let pinned = ok(client, "memory_pin", json!({"id": rex})).await;
    assert_eq!(pinned, json!({"id": rex, "pinned": true}));
    let chain = ok(client, "memory_get", json!({"id": rex})).await;
    assert_eq!(chain["versions"][1]["pinned"], true, "{chain}");
    ok(client, "memory_unpin", json!({"id": rex})).await;

    let forgot = ok(client, "memory_forget", json!({"id": rex, "reason": "asked to"})).await;
    assert_eq!(forgot["kind"], "entry", "{forgot}");
    assert!(forgot["tombstoned"].as_array().unwrap().iter().any(|t| t == &json!(facts[1])), "{forgot}");
    let left = hit_ids(client, "dog named Rex").await;
    assert!(!left.contains(&rex) && !left.contains(&facts[1]), "a forgotten entry is not found: {left:?}");
    let chain = ok(client, "memory_get", json!({"id": rex})).await;
    let statuses: Vec<&str> =
        chain["versions"].as_array().unwrap().iter().map(|v| v["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["reverted", "deleted"], "{chain}");

    // Undoing the second run would bring the forgotten entry back: refused, naming it.
    let (message, error) = refused(client, "memory_undo", json!({"run": second})).await;
    assert_eq!(error["error"]["code"], "conflict", "{error}");
    assert!(error["error"]["ids"].as_array().unwrap().iter().any(|id| id == &json!(rex)), "{error}");
    assert_eq!(error["error"]["message"], json!(message));

    // Bad arguments never reach a tool; errors of the call name what is wrong.
    for (tool, args, says) in [
        ("memory_add", json!({"facts": "Porto"}), "invalid type"),
        ("memory_add", json!({"facts": ["x"], "when": "today"}), "unknown field `when`"),
        ("memory_add", json!({"facts": ["x"], "date": "yesterday"}), "YYYY-MM-DD, got \"yesterday\""),
        ("memory_search", json!({}), "missing field `query`"),
        ("memory_search", json!({"query": "x", "k": -1}), "invalid value"),
        ("memory_search", json!({"query": "x", "k": 0}), "k must be between 1 and 1000"),
        ("memory_add", json!({"facts": []}), "no facts given"),
        ("memory_add", json!({"facts": ["   "]}), "fact 0 is empty"),
        ("memory_get", json!({"id": "m-none"}), "no entry m-none"),
        ("memory_forget", json!({"id": "m-none"}), "m-none"),
        ("memory_apply_plan", json!({"plan": "../state"}), "plan"),
        ("memory_add_turn", json!({"text": "user: hi", "messages": [{"role": "user", "content": "hi"}]}), "either"),
    ] {
        let (message, _) = refused(client, tool, args.clone()).await;
        assert!(message.contains(says), "{tool} {args}: {message}");
    }
    let unknown = client.call_tool(CallToolRequestParams::new("memory_nothing")).await;
    assert!(unknown.is_err(), "an unknown tool is a protocol error: {unknown:?}");
    let verify = super::json(&super::memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
}
