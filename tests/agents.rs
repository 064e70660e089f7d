//! Gemini CLI, Cursor, Copilot CLI and OpenCode through the binary, as a person who uses several
//! agents in one day sets them up: `setup` merged into settings files that hold other hooks,
//! servers and keys (kept; a second run byte-identical; `--remove` gives the bytes back); every
//! hook command it wrote run through `sh -c` from a project folder with the agent's recorded
//! payloads (`fixtures/hooks/<agent>/`), each answer checked against the agent's documented
//! shape; memfold's OpenCode plugin run under node; a fact captured in one agent's session
//! recalled in another's; `setup --list`; the MCP-only clients; imports.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::bin;
use crate::common::daemon::{Fixture, verify};
use crate::hooks::{Ran, pipe};

/// A home folder with each agent's settings as a person has them before memfold: other hooks,
/// servers and keys. (path under the home, content)
const BEFORE: [(&str, &str); 6] = [
    (
        ".gemini/settings.json",
        "{\n  \"theme\": \"GitHub\",\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\n        \"matcher\": \"write_file|replace\",\n        \"hooks\": [\n          {\n            \"name\": \"lint\",\n            \"type\": \"command\",\n            \"command\": \"$GEMINI_PROJECT_DIR/.gemini/hooks/lint.sh\",\n            \"timeout\": 5000\n          }\n        ]\n      }\n    ]\n  },\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"@modelcontextprotocol/server-github\"],\n      \"env\": {\n        \"GITHUB_PERSONAL_ACCESS_TOKEN\": \"$GITHUB_TOKEN\"\n      }\n    }\n  }\n}\n",
    ),
    (
        ".cursor/hooks.json",
        "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [\n      {\n        \"command\": \"./hooks/format.sh\"\n      }\n    ]\n  }\n}\n",
    ),
    (
        ".cursor/mcp.json",
        "{\n  \"mcpServers\": {\n    \"linear\": {\n      \"url\": \"https://mcp.linear.app/sse\"\n    }\n  }\n}\n",
    ),
    (
        ".copilot/hooks/audit.json",
        "{\n  \"version\": 1,\n  \"hooks\": {\n    \"preToolUse\": [\n      {\n        \"type\": \"command\",\n        \"bash\": \"./scripts/audit.sh\",\n        \"timeoutSec\": 10\n      }\n    ]\n  }\n}\n",
    ),
    (
        ".copilot/mcp-config.json",
        "{\n  \"mcpServers\": {\n    \"playwright\": {\n      \"type\": \"local\",\n      \"command\": \"npx\",\n      \"args\": [\"@playwright/mcp@latest\"],\n      \"tools\": [\"*\"]\n    }\n  }\n}\n",
    ),
    (
        ".config/opencode/opencode.json",
        "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"model\": \"anthropic/claude-sonnet-4-5\",\n  \"mcp\": {\n    \"figma\": {\n      \"type\": \"remote\",\n      \"url\": \"https://mcp.figma.com/mcp\"\n    }\n  }\n}\n",
    ),
];

/// The agents of this file, with their session ids in the tests.
const AGENTS: [&str; 4] = ["gemini", "cursor", "copilot", "opencode"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks")
}

/// `memfold --root ROOT ARGS` with HOME in `home` (and nothing of this machine's agents).
fn memfold_in(root: &Path, home: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    bin()
        .current_dir(cwd)
        .arg("--root")
        .arg(root)
        .args(args)
        .env("HOME", home)
        .env_remove("COPILOT_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .env_remove("MEMFOLD_ROOT")
        .output()
        .unwrap()
}

fn setup(root: &Path, home: &Path, args: &[&str]) -> String {
    let mut all = vec!["setup"];
    all.extend(args);
    let out = memfold_in(root, home, home, &all);
    assert!(out.status.success(), "setup {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `dir` with its bytes, backups left out.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        if !entry.to_string_lossy().contains(".memfold-backup-") {
            out.push((entry.clone(), std::fs::read(&entry).unwrap()));
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}

fn json_at(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The hook commands setup wrote for `agent`, by memfold's event name.
fn commands(home: &Path, agent: &str) -> Vec<(String, String)> {
    let (file, key) = match agent {
        "gemini" => (home.join(".gemini/settings.json"), "command"),
        "cursor" => (home.join(".cursor/hooks.json"), "command"),
        "copilot" => (home.join(".copilot/hooks/memfold.json"), "bash"),
        other => panic!("{other} has no hooks file"),
    };
    let doc = json_at(&file);
    let mut out = Vec::new();
    for list in doc["hooks"].as_object().unwrap().values() {
        for item in list.as_array().unwrap() {
            let handlers = match item.get("hooks") {
                Some(inner) => inner.as_array().unwrap().clone(),
                None => vec![item.clone()],
            };
            for handler in handlers {
                let command = handler[key].as_str().unwrap_or_default();
                let words: Vec<&str> = command.split_whitespace().collect();
                if let Some(at) = words.iter().position(|w| *w == "hook") {
                    out.push((words[at + 1].to_string(), command.to_string()));
                }
            }
        }
    }
    out
}

/// A recorded payload pointed at this test's project, session and transcript (in the fields
/// the agent spells them with).
fn payload(agent: &str, event: &str, project: &Path, session: &str, transcript: Option<&Path>) -> Value {
    let mut payload = json_at(&fixtures().join(agent).join(format!("{event}.json")));
    let object = payload.as_object_mut().unwrap();
    for key in ["session_id", "conversation_id", "sessionId"] {
        if object.contains_key(key) {
            object.insert(key.into(), json!(session));
        }
    }
    if object.contains_key("workspace_roots") {
        object.insert("workspace_roots".into(), json!([project]));
    } else {
        object.insert("cwd".into(), json!(project));
    }
    for key in ["transcript_path", "transcriptPath"] {
        if object.contains_key(key) {
            object.insert(key.into(), json!(transcript.map(|t| t.display().to_string()).unwrap_or_default()));
        }
    }
    payload
}

/// Run a hook command as the agent does: `sh -c` in the project folder, the payload on stdin.
fn run_hook(command: &str, home: &Path, project: &Path, payload: &Value) -> Ran {
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(command)
        .current_dir(project)
        .env("HOME", home)
        .env_remove("COPILOT_HOME")
        .env_remove("MEMFOLD_ROOT")
        .env("MEMFOLD_LOG", "warn");
    pipe(shell, payload.to_string().as_bytes())
}

/// The answer of `agent`'s hook for `event`, checked against the agent's documented output; the
/// context it adds, if any.
fn check_shape(agent: &str, event: &str, ran: &Ran) -> Option<String> {
    assert_eq!(ran.code, 0, "{agent} {event}: {}", ran.stderr);
    let out = ran.stdout.trim();
    let adds_context = matches!(event, "session-start" | "user-prompt-submit");
    if out.is_empty() {
        assert!(!(agent == "cursor" && event == "user-prompt-submit"), "Cursor waits for {{\"continue\"}}");
        return None;
    }
    assert!(adds_context, "{agent} {event} printed {out:?}: only session start and prompts add context");
    let answer: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{agent} {event}: not JSON ({e}): {out}"));
    let keys: Vec<&str> = answer.as_object().unwrap().keys().map(String::as_str).collect();
    let allowed: &[&str] = match (agent, event) {
        ("gemini", _) => {
            &["continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason", "hookSpecificOutput"]
        }
        ("cursor", "session-start") => &["env", "additional_context", "continue", "user_message"],
        ("cursor", _) => &["continue", "user_message", "additional_context"],
        ("copilot", _) => &["additionalContext"],
        _ => unreachable!(),
    };
    assert!(keys.iter().all(|k| allowed.contains(k)), "{agent} {event}: {keys:?}");
    match agent {
        "gemini" => {
            let specific = answer["hookSpecificOutput"].as_object().unwrap();
            let name = if event == "session-start" { "SessionStart" } else { "BeforeAgent" };
            assert_eq!(specific["hookEventName"], name);
            assert!(specific.keys().all(|k| ["hookEventName", "additionalContext"].contains(&k.as_str())));
            specific.get("additionalContext").and_then(Value::as_str).map(str::to_string)
        }
        "cursor" => {
            if event == "user-prompt-submit" {
                assert_eq!(answer["continue"], true, "{answer}");
            }
            answer.get("additional_context").map(|c| c.as_str().unwrap().to_string())
        }
        _ => Some(answer["additionalContext"].as_str().unwrap().to_string()),
    }
}

/// The facts of a root: (text, source).
fn facts(root: &Path) -> Vec<(String, String)> {
    let archive = memfold::store::archive::read_all(&memfold::store::Root::new(root)).unwrap();
    archive.facts.into_iter().map(|f| (f.text, f.src.unwrap_or_default())).collect()
}

/// Run memfold's OpenCode plugin under node for one session: created, a prompt, the system
/// prompt of that turn, idle (capture). The plugin's `client` answers with `messages`. What
/// the turn's system prompt got.
fn run_plugin(
    plugin: &Path,
    home: &Path,
    project: &Path,
    session: &str,
    prompt: &str,
    messages: &Value,
) -> Option<Vec<String>> {
    if Command::new("node").arg("--version").output().is_err() {
        memfold::testkit::skip("node is not installed (the OpenCode plugin runs under it here)");
        return None;
    }
    let module = plugin.with_file_name("memfold-under-test.mjs");
    std::fs::copy(plugin, &module).unwrap();
    let driver = format!(
        r#"import {{ MemfoldPlugin }} from {module};
const messages = {messages};
const client = {{ session: {{ messages: async () => ({{ data: messages.map((m, i) => ({{ info: {{ id: "m" + i, role: m.role }}, parts: [{{ type: "text", text: m.text }}] }})) }}) }} }};
const hooks = await MemfoldPlugin({{ client, directory: {project} }});
await hooks.event({{ event: {{ type: "session.created", properties: {{ info: {{ id: {session} }} }} }} }});
await hooks["chat.message"]({{ sessionID: {session} }}, {{ message: {{}}, parts: [{{ type: "text", text: {prompt} }}] }});
const output = {{ system: ["You are OpenCode."] }};
await hooks["experimental.chat.system.transform"]({{ sessionID: {session}, model: {{}} }}, output);
await hooks.event({{ event: {{ type: "session.idle", properties: {{ sessionID: {session} }} }} }});
console.log(JSON.stringify(output.system));
"#,
        module = json!(module.display().to_string()),
        messages = messages,
        project = json!(project.display().to_string()),
        session = json!(session),
        prompt = json!(prompt),
    );
    let script = plugin.with_file_name("driver.mjs");
    std::fs::write(&script, driver).unwrap();
    let out = Command::new("node").arg(&script).current_dir(project).env("HOME", home).output().unwrap();
    std::fs::remove_file(&module).unwrap();
    std::fs::remove_file(&script).unwrap();
    assert!(out.status.success(), "node: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[tokio::test]
async fn four_more_agents_are_set_up_in_place_run_their_hooks_and_share_one_memory() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let home = fixture.dir.path().join("home");
    for (path, text) in BEFORE {
        std::fs::create_dir_all(home.join(path).parent().unwrap()).unwrap();
        std::fs::write(home.join(path), text).unwrap();
    }
    let before = snapshot(&home);

    // Set up, each twice: the second run changes no byte.
    for agent in AGENTS {
        let out = setup(&root, &home, &[agent]);
        if agent == "gemini" {
            assert!(out.contains("hooksConfig.enabled = true"), "the switch is named: {out}");
        }
    }
    let once = snapshot(&home);
    for agent in AGENTS {
        let out = setup(&root, &home, &[agent]);
        assert!(!out.contains(": changed") && !out.contains(": created"), "{agent}: {out}");
    }
    assert_eq!(snapshot(&home), once, "a second run is byte-identical");

    // What was there is kept beside memfold's part.
    let text = std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap();
    assert!(
        text.contains("\"args\": [\"-y\", \"@modelcontextprotocol/server-github\"],"),
        "the layout is kept: {text}"
    );
    let gemini = json_at(&home.join(".gemini/settings.json"));
    assert_eq!(gemini["theme"], "GitHub");
    assert_eq!(gemini["hooks"]["BeforeTool"][0]["hooks"][0]["name"], "lint");
    assert_eq!(gemini["mcpServers"]["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"], "$GITHUB_TOKEN");
    assert_eq!(gemini["mcpServers"]["memfold"]["args"].as_array().unwrap().last().unwrap(), "mcp");
    assert_eq!(gemini["hooksConfig"]["enabled"], true);
    assert_eq!(gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"], 30000, "Gemini CLI counts milliseconds");
    let cursor = json_at(&home.join(".cursor/hooks.json"));
    assert_eq!(cursor["version"], 1);
    assert_eq!(cursor["hooks"]["afterFileEdit"][0]["command"], "./hooks/format.sh");
    let events: Vec<&String> = cursor["hooks"].as_object().unwrap().keys().collect();
    assert_eq!(events, ["afterFileEdit", "sessionStart", "beforeSubmitPrompt", "stop", "preCompact", "sessionEnd"]);
    assert_eq!(json_at(&home.join(".cursor/mcp.json"))["mcpServers"]["linear"]["url"], "https://mcp.linear.app/sse");
    let copilot = json_at(&home.join(".copilot/hooks/memfold.json"));
    assert_eq!(copilot["hooks"]["userPromptSubmitted"][0]["type"], "command");
    assert_eq!(json_at(&home.join(".copilot/mcp-config.json"))["mcpServers"]["memfold"]["tools"][0], "*");
    let opencode = json_at(&home.join(".config/opencode/opencode.json"));
    assert_eq!(opencode["mcp"]["figma"]["type"], "remote");
    assert_eq!(opencode["mcp"]["memfold"]["command"].as_array().unwrap().last().unwrap(), "mcp");
    let plugin = home.join(".config/opencode/plugins/memfold.js");
    assert!(plugin.is_file());

    // Each agent's hooks, run as the agent runs them from a project folder, with its payloads.
    let daemon = fixture.serve(&[]).await;
    let project = fixture.dir.path().join("shop");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    for agent in ["gemini", "cursor", "copilot"] {
        let session = format!("{agent}-session-1");
        let transcript = match agent {
            "copilot" => home.join(".copilot/session-state").join(&session).join("events.jsonl"),
            _ => fixture.dir.path().join(format!("{agent}-transcript.jsonl")),
        };
        std::fs::create_dir_all(transcript.parent().unwrap()).unwrap();
        std::fs::copy(fixtures().join(agent).join("transcript.jsonl"), &transcript).unwrap();
        let commands = commands(&home, agent);
        assert_eq!(commands.len(), 5, "{agent}: {commands:?}");
        for (event, command) in &commands {
            let ran = run_hook(command, &home, &project, &payload(agent, event, &project, &session, Some(&transcript)));
            let context = check_shape(agent, event, &ran);
            if event == "session-start" {
                assert!(context.expect("session start answers").contains("More:"), "{agent}");
            }
        }
    }
    let mut stored = facts(&root);
    stored.sort();
    let want = [
        ("Auth tokens expire after 15 minutes.", "copilot:copilot-session-1"),
        ("The mock server listens on port 4010.", "gemini:gemini-session-1"),
        ("The release branch is cut every Tuesday.", "cursor:cursor-session-1"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(t, s)| (t.to_string(), s.to_string())).collect();
    assert_eq!(stored, want, "each request once; none from tool output, hook context or the CLI's own lines");

    // A fact captured in Cursor's session is recalled in a Gemini CLI session, and in OpenCode's.
    let (_, prompt) = commands(&home, "gemini").into_iter().find(|(e, _)| e == "user-prompt-submit").unwrap();
    let mut asked = payload("gemini", "user-prompt-submit", &project, "gemini-session-2", None);
    asked["prompt"] = json!("Which day is the release branch cut?");
    let context = check_shape("gemini", "user-prompt-submit", &run_hook(&prompt, &home, &project, &asked));
    assert!(context.as_deref().unwrap_or_default().contains("release branch is cut every Tuesday"), "{context:?}");
    let messages = json_at(&fixtures().join("opencode/stop.json"))["messages"].clone();
    if let Some(system) = run_plugin(&plugin, &home, &project, "ses_1", "When do we cut the release branch?", &messages)
    {
        assert_eq!(system[0], "You are OpenCode.");
        let added = system[1..].join("\n");
        assert!(added.contains("release branch is cut every Tuesday"), "{system:?}");
        let opencode: Vec<(String, String)> =
            facts(&root).into_iter().filter(|(_, s)| s.starts_with("opencode:")).collect();
        assert_eq!(opencode, [("Webhooks are signed with HMAC-SHA256.".to_string(), "opencode:ses_1".to_string())]);
    }

    // setup --list names each, and flags a setup whose binary is gone.
    let list = memfold_in(&root, &home, &project, &["setup", "--list", "--json"]);
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    let setup_of = |name: &str| {
        list["agents"].as_array().unwrap().iter().find(|a| a["name"] == name).unwrap()["setup"]
            .as_array()
            .unwrap()
            .clone()
    };
    for agent in AGENTS {
        let parts = setup_of(agent);
        assert!(parts.len() >= 2, "{agent}: {parts:?}");
        assert!(
            parts.iter().all(|p| p["binary_exists"] == true && p["memory"].as_str().unwrap().starts_with("--root "))
        );
    }
    assert!(setup_of("claude-code").is_empty());
    let hooks_json = home.join(".cursor/hooks.json");
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_memfold")).unwrap().display().to_string();
    let moved = std::fs::read_to_string(&hooks_json).unwrap().replace(&exe, "/gone/bin/memfold");
    std::fs::write(&hooks_json, &moved).unwrap();
    let text = memfold_in(&root, &home, &project, &["setup", "--list"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("/gone/bin/memfold") && text.contains("NOT THERE"), "{text}");
    let doctor = memfold_in(&root, &home, &project, &["doctor", "--json"]);
    let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let failed: Vec<&str> = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(failed.contains(&"hooks cursor"), "{failed:?}");
    setup(&root, &home, &["cursor"]);
    daemon.stop().await;
    assert_eq!(verify(&root)["ok"], true);

    // --remove gives every file back as it was, and takes away the files memfold made.
    for agent in AGENTS {
        setup(&root, &home, &[agent, "--remove"]);
    }
    let after: Vec<(PathBuf, Vec<u8>)> =
        snapshot(&home).into_iter().filter(|(p, _)| !p.starts_with(home.join(".copilot/session-state"))).collect();
    assert_eq!(after, before);
}

#[test]
fn the_mcp_clients_get_the_server_alone_and_lose_it_exactly() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let home = fixture.dir.path().join("home");
    let clients = [
        ("claude-desktop", ".config/Claude/claude_desktop_config.json", "mcpServers"),
        ("vscode", ".config/Code/User/mcp.json", "servers"),
        ("windsurf", ".codeium/windsurf/mcp_config.json", "mcpServers"),
        ("zed", ".config/zed/settings.json", "context_servers"),
        ("cursor", ".cursor/mcp.json", "mcpServers"),
    ];
    if cfg!(target_os = "macos") {
        return memfold::testkit::skip("the clients' files are under ~/Library on macOS");
    }
    for (client, file, key) in clients {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = format!(
            "{{\n  \"telemetry\": {{\n    \"metrics\": false\n  }},\n  \"{key}\": {{\n    \"other\": {{\n      \"command\": \"uvx\",\n      \"args\": [\"mcp-server-time\"]\n    }}\n  }}\n}}\n"
        );
        std::fs::write(&path, &original).unwrap();
        let out = setup(&root, &home, &["mcp", "--client", client]);
        assert!(out.contains(": changed"), "{client}: {out}");
        let doc = json_at(&path);
        assert_eq!(doc[key]["other"]["command"], "uvx", "{client}");
        assert_eq!(doc["telemetry"]["metrics"], false, "{client}");
        let ours = &doc[key]["memfold"];
        assert_eq!(ours["args"].as_array().unwrap().last().unwrap(), "mcp", "{client}: {doc}");
        assert!(!doc.to_string().contains("token"), "no token in any file: {doc}");
        match client {
            "vscode" => assert_eq!(ours["type"], "stdio"),
            "zed" => assert_eq!(ours["source"], "custom"),
            _ => {}
        }
        let once = std::fs::read(&path).unwrap();
        assert!(setup(&root, &home, &["mcp", "--client", client]).contains("unchanged"));
        assert_eq!(std::fs::read(&path).unwrap(), once);
        setup(&root, &home, &["mcp", "--client", client, "--remove"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original, "{client}");
    }
    // A settings file with comments and trailing commas (Zed writes them) keeps them: only
    // memfold's part is touched, and --remove gives the bytes back.
    let zed = home.join(".config/zed/settings.json");
    let commented = "// Zed settings\n//\n// For information on how to configure Zed, see the Zed\n// documentation: https://zed.dev/docs/configuring-zed\n{\n  \"theme\": \"One Dark\", // the dark one\n  \"buffer_font_size\": 15,\n  /* servers */\n  \"context_servers\": {\n    \"time\": { \"command\": \"uvx\", \"args\": [\"mcp-server-time\"] },\n  },\n}\n";
    std::fs::write(&zed, commented).unwrap();
    setup(&root, &home, &["mcp", "--client", "zed"]);
    let text = std::fs::read_to_string(&zed).unwrap();
    for kept in [
        "// Zed settings",
        "// the dark one",
        "/* servers */",
        "\"time\": { \"command\": \"uvx\", \"args\": [\"mcp-server-time\"] },",
    ] {
        assert!(text.contains(kept), "{kept:?} kept: {text}");
    }
    let doc = memfold::store::agents::settings::parse_jsonc(&text).unwrap();
    assert_eq!(doc["context_servers"]["memfold"]["source"], "custom", "{text}");
    setup(&root, &home, &["mcp", "--client", "zed", "--remove"]);
    assert_eq!(std::fs::read_to_string(&zed).unwrap(), commented);
}

#[test]
fn gemini_cursor_and_copilot_memories_are_imported_once_with_their_source() {
    let fixture = Fixture::new();
    let root = fixture.root();
    assert!(crate::common::daemon::run(&root, &["init"]).status.success());
    let home = fixture.dir.path().join("home");
    let project = fixture.dir.path().join("app");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let files = [
        (
            home.join(".gemini/GEMINI.md"),
            "# My instructions\n\nAlways answer in British English.\n\n## Gemini Added Memories\n- My cat is called Miso.\n- I prefer pnpm over npm.\n",
        ),
        (
            project.join(".cursor/rules/testing.mdc"),
            "---\ndescription: How tests run\nglobs: src/**/*.ts\nalwaysApply: false\n---\n\n- Run vitest with --run in CI.\n- Snapshot files live next to the test.\n",
        ),
        (project.join(".cursorrules"), "Use tabs for indentation.\n"),
        (project.join(".github/copilot-instructions.md"), "# Project notes\n\nThe API is versioned under /v2.\n"),
        (
            project.join(".github/instructions/db.instructions.md"),
            "---\napplyTo: \"migrations/**\"\n---\nMigrations are written in plain SQL.\n",
        ),
    ];
    for (path, text) in &files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    for _ in 0..2 {
        for from in ["gemini", "cursor", "copilot"] {
            let out = memfold_in(&root, &home, &project, &["import", "--from", from]);
            assert!(out.status.success(), "{from}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let mut stored = facts(&root);
    stored.sort();
    let want = [
        ("I prefer pnpm over npm.", "gemini:GEMINI.md"),
        ("Migrations are written in plain SQL.", "copilot:.github/instructions/db.instructions.md"),
        ("My cat is called Miso.", "gemini:GEMINI.md"),
        ("Run vitest with --run in CI.", "cursor:.cursor/rules/testing.mdc"),
        ("Snapshot files live next to the test.", "cursor:.cursor/rules/testing.mdc"),
        ("The API is versioned under /v2.", "copilot:.github/copilot-instructions.md"),
        ("Use tabs for indentation.", "cursor:.cursorrules"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(t, s)| (t.to_string(), s.to_string())).collect();
    assert_eq!(stored, want, "the instructions outside Gemini's memories are not memories; each once");
}

#[test]
fn the_project_scope_writes_the_projects_own_folders_and_takes_them_back() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let project = fixture.dir.path().join("app");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(project.join(".cursor")).unwrap();
    let rules = "{\n  \"version\": 1,\n  \"hooks\": {\n    \"beforeShellExecution\": [{ \"command\": \".cursor/hooks/guard.sh\" }]\n  }\n}\n";
    std::fs::write(project.join(".cursor/hooks.json"), rules).unwrap();
    let before = snapshot(&project);
    let wrote = [
        ("gemini", ".gemini/settings.json"),
        ("cursor", ".cursor/hooks.json"),
        ("copilot", ".github/hooks/memfold.json"),
        ("opencode", ".opencode/plugins/memfold.js"),
    ];
    for (agent, file) in wrote {
        let out = memfold_in(&root, &home, &project, &["setup", agent, "--scope", "project"]);
        assert!(out.status.success(), "{agent}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("keep them out of commits"), "{agent}");
        let text = std::fs::read_to_string(project.join(file)).unwrap();
        assert!(text.contains(&format!("--agent {agent}")) || text.contains("\"opencode\""), "{agent}: {text}");
    }
    assert!(std::fs::read_to_string(project.join(".cursor/hooks.json")).unwrap().contains("guard.sh"));
    for (agent, _) in wrote {
        let out = memfold_in(&root, &home, &project, &["setup", agent, "--scope", "project", "--remove"]);
        assert!(out.status.success(), "{agent}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let after: Vec<(PathBuf, Vec<u8>)> = snapshot(&project);
    assert_eq!(after, before, "the project's files as they were");
}

/// Whatever an agent sends (not JSON, the wrong types, nothing), each agent's hooks exit 0 and
/// answer in its shape: Cursor's prompt event still says `continue`.
#[test]
fn bad_payloads_of_every_agent_never_stand_in_its_way() {
    let fixture = Fixture::new();
    let root = fixture.root();
    assert!(crate::common::daemon::run(&root, &["init"]).status.success());
    let garbage: [&[u8]; 6] = [
        b"",
        b"not json",
        b"[1, 2]",
        br#"{"conversation_id": 7, "workspace_roots": "not a list", "prompt": {"text": 1}}"#,
        br#"{"sessionId": null, "transcriptPath": "/nonexistent/events.jsonl", "cwd": 5}"#,
        br#"{"session_id": "s", "messages": [{"role": "user"}, 3, {"role": "tool", "text": "x"}]}"#,
    ];
    for agent in AGENTS {
        for event in ["session-start", "user-prompt-submit", "stop", "pre-compact", "session-end"] {
            for stdin in garbage {
                let mut command = bin();
                command
                    .arg("--root")
                    .arg(&root)
                    .args(["hook", event, "--agent", agent])
                    .env_remove("MEMFOLD_ROOT")
                    .env("MEMFOLD_LOG", "warn");
                let ran = pipe(command, stdin);
                match agent {
                    // memfold's own plugin reads `additionalContext` from JSON or nothing.
                    "opencode" => {
                        assert_eq!(ran.code, 0, "{event}: {}", ran.stderr);
                        let out = ran.stdout.trim();
                        assert!(out.is_empty() || serde_json::from_str::<Value>(out).is_ok(), "{event}: {out}");
                    }
                    _ => {
                        check_shape(agent, event, &ran);
                    }
                }
            }
        }
    }
    assert!(facts(&root).is_empty(), "nothing stored from garbage");
}
