//! The agent hooks through the binary: every event of Claude Code and Codex with the payloads
//! their docs give (`fixtures/hooks/`), answers checked against the documented shapes;
//! captures stored once; hostile transcripts; the daemon down; an LLM's extraction in the
//! daemon; setup of both agents' settings; imports.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Fixture, eventually, run, verify};
use crate::common::{bin, llm_env};

const EVENTS: [&str; 6] = ["session-start", "user-prompt-submit", "stop", "pre-compact", "post-compact", "session-end"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks")
}

/// A recorded payload, pointed at this test's project folder, transcript and session.
fn payload(agent: &str, event: &str, project: &Path, transcript: &Path, session: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(agent).join(format!("{event}.json"))).unwrap();
    let mut payload: Value = serde_json::from_str(&text).unwrap();
    payload["cwd"] = json!(project);
    payload["transcript_path"] = json!(transcript);
    payload["session_id"] = json!(session);
    payload
}

/// What a hook process did.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `command` (a `memfold … hook EVENT`) with `stdin` piped in; what it did.
pub fn pipe(mut command: std::process::Command, stdin: &[u8]) -> Ran {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `memfold --root ROOT hook EVENT` with `stdin` (bytes as given) and extra environment.
fn hook_raw(root: &Path, event: &str, stdin: &[u8], env: &[(&str, &str)]) -> Ran {
    let mut command = bin();
    command
        .arg("--root")
        .arg(root)
        .args(["hook", event])
        .env_remove("MEMFOLD_ROOT")
        .env_remove("MEMFOLD_LLM__BASE_URL")
        .env("MEMFOLD_LOG", "warn")
        .envs(env.iter().copied());
    pipe(command, stdin)
}

fn hook(root: &Path, event: &str, payload: &Value, env: &[(&str, &str)]) -> Ran {
    hook_raw(root, event, payload.to_string().as_bytes(), env)
}

/// The answer of a hook, checked against the shape both agents document: exit 0; nothing,
/// or one JSON object of the common fields and `hookSpecificOutput` (the event's name and
/// `additionalContext`) for the events that add context. Codex rejects plain text on Stop and
/// any field its schemas do not list.
fn check_shape(event: &str, ran: &Ran) -> Option<String> {
    assert_eq!(ran.code, 0, "{event}: {}", ran.stderr);
    if ran.stdout.trim().is_empty() {
        return None;
    }
    let name = match event {
        "session-start" => "SessionStart",
        "user-prompt-submit" => "UserPromptSubmit",
        other => panic!("{other} printed {:?}: only session start and prompt submit add context", ran.stdout),
    };
    let answer: Value =
        serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{event}: not JSON ({e}): {}", ran.stdout));
    let object = answer.as_object().unwrap();
    for key in object.keys() {
        assert!(
            ["continue", "stopReason", "suppressOutput", "systemMessage", "hookSpecificOutput"].contains(&key.as_str()),
            "{event}: {key}"
        );
    }
    let specific = answer["hookSpecificOutput"].as_object().unwrap();
    for key in specific.keys() {
        assert!(["hookEventName", "additionalContext"].contains(&key.as_str()), "{event}: hookSpecificOutput.{key}");
    }
    assert_eq!(specific["hookEventName"], name);
    Some(specific["additionalContext"].as_str().unwrap().to_string())
}

/// The facts of a root: (text, source).
fn facts(root: &Path) -> Vec<(String, String)> {
    let archive = memfold::store::archive::read_all(&memfold::store::Root::new(root)).unwrap();
    archive.facts.into_iter().map(|f| (f.text, f.src.unwrap_or_default())).collect()
}

/// A project folder (a git work tree) and a copy of an agent's recorded transcript.
fn project_with_transcript(dir: &Path, agent: &str) -> (PathBuf, PathBuf) {
    let project = dir.join("shop");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let name = if agent == "codex" { "rollout.jsonl" } else { "transcript.jsonl" };
    let transcript = dir.join(format!("{agent}-{name}"));
    std::fs::copy(fixtures().join(agent).join(name), &transcript).unwrap();
    (project, transcript)
}

#[tokio::test]
async fn every_event_of_both_agents_answers_in_the_documented_shape_and_captures_once() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    for agent in ["claude-code", "codex"] {
        let (project, transcript) = project_with_transcript(fixture.dir.path(), agent);
        let session = format!("{agent}-session-1");
        for event in EVENTS {
            let ran = hook(&root, event, &payload(agent, event, &project, &transcript, &session), &[]);
            let context = check_shape(event, &ran);
            if event == "session-start" {
                let context = context.expect("session start always answers");
                assert!(context.contains("More:"), "{context}");
                assert!(!context.contains("not running"), "the daemon runs: {context}");
            }
        }
    }
    let mut stored = facts(&root);
    stored.sort();
    let want = [
        ("Don't forget to bump the invoice schema version when fields change.", "codex:codex-session-1"),
        ("From now on, run the checkout tests with --runInBand.", "claude-code:claude-code-session-1"),
        ("Invoices are generated by the billing-worker service.", "codex:codex-session-1"),
        ("The staging database listens on port 5433.", "claude-code:claude-code-session-1"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(t, s)| (t.to_string(), s.to_string())).collect();
    assert_eq!(stored, want, "each request once, none from tool output");
    daemon.stop().await;
    assert_eq!(verify(&root)["ok"], true);
}

#[tokio::test]
async fn stop_run_twice_stores_each_fact_once_and_a_later_capture_only_what_is_new() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let stop = payload("claude-code", "stop", &project, &transcript, "s-twice");
    for _ in 0..2 {
        check_shape("stop", &hook(&root, "stop", &stop, &[]));
    }
    assert_eq!(facts(&root).len(), 2, "{:?}", facts(&root));
    let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    writeln!(
        file,
        r#"{{"type":"user","message":{{"role":"user","content":"Remember that Ana reviews every billing change."}}}}"#
    )
    .unwrap();
    // A line still being written waits for the next capture.
    write!(file, r#"{{"type":"user","message":{{"role":"user","content":"Remember that half"#).unwrap();
    check_shape("stop", &hook(&root, "stop", &stop, &[]));
    check_shape("stop", &hook(&root, "stop", &stop, &[]));
    let texts: Vec<String> = facts(&root).into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts.contains(&"Ana reviews every billing change.".to_string()));
    writeln!(file, r#" lines wait."}}}}"#).unwrap();
    check_shape("stop", &hook(&root, "stop", &stop, &[]));
    assert_eq!(facts(&root).len(), 4, "{:?}", facts(&root));
    daemon.stop().await;
}

#[test]
fn a_hostile_transcript_and_bad_payloads_never_fail_the_agent() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let (project, _) = project_with_transcript(fixture.dir.path(), "claude-code");
    let transcript = fixture.dir.path().join("hostile.jsonl");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(br#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"remember that thinking is private"},{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#);
    bytes.push(b'\n');
    bytes.extend_from_slice(br#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"Remember that a tool said this."}]}}"#);
    bytes.push(b'\n');
    bytes.extend_from_slice(b"{not json at all\n");
    bytes.extend_from_slice(b"{\"type\":\"user\",\"message\":{\"content\":\"remember that \xff\xfe is not UTF-8\"}}\n");
    bytes.extend_from_slice(b"[1,2,3]\n");
    let huge = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "z".repeat(1 << 20)
    );
    bytes.extend_from_slice(huge.as_bytes());
    bytes.push(b'\n');
    let long_request = format!(r#"{{"type":"user","message":{{"content":"Remember that {}"}}}}"#, "y ".repeat(20_000));
    bytes.extend_from_slice(long_request.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(
        br#"{"type":"user","message":{"role":"user","content":"Remember that the deploy key lives in the vault."}}"#,
    );
    bytes.push(b'\n');
    std::fs::write(&transcript, &bytes).unwrap();

    let stop = payload("claude-code", "stop", &project, &transcript, "s-hostile");
    let ran = hook(&root, "stop", &stop, &[]);
    check_shape("stop", &ran);
    assert!(ran.stderr.contains("not JSON") && ran.stderr.contains("not UTF-8"), "{}", ran.stderr);
    assert!(ran.stderr.contains("over ingest.max_fact_bytes"), "{}", ran.stderr);
    let texts: Vec<String> = facts(&root).into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts, ["The deploy key lives in the vault."]);

    // A transcript that is not there, payloads that are not JSON or are empty, no session.
    let missing = payload("claude-code", "stop", &project, &fixture.dir.path().join("gone.jsonl"), "s-missing");
    let ran = hook(&root, "stop", &missing, &[]);
    check_shape("stop", &ran);
    assert!(ran.stderr.contains("gone.jsonl"), "{}", ran.stderr);
    for event in EVENTS {
        for stdin in [&b"{\"session_id\": 12, "[..], b"", b"\xff\xff", b"[]"] {
            let ran = hook_raw(&root, event, stdin, &[]);
            check_shape(event, &ran);
            assert!(ran.stderr.contains("memfold hook:"), "{event}: {}", ran.stderr);
        }
    }
    assert_eq!(facts(&root).len(), 1);
    assert_eq!(verify(&root)["ok"], true);
}

#[tokio::test]
async fn session_start_stays_under_the_cap_with_a_5_mb_memory_md_and_10k_entries() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let mut file = memfold::store::entries::EntryFile::parse("", "memory.md");
    for n in 0..10_000 {
        let text =
            format!("The shop service number {n} runs on host shop-{n}.internal and belongs to team {}.", n % 37);
        let meta = memfold::store::entries::EntryMeta::new(memfold::store::entries::derived_id(&text));
        file.push(memfold::store::entries::Entry::new(meta, &text));
    }
    std::fs::write(root.join("consolidated/memory.md"), file.render()).unwrap();
    let mut memory_md = String::from("# MEMORY\n\n");
    while memory_md.len() < 5 << 20 {
        memory_md.push_str(&format!("- A line a person wrote about the shop, number {}.\n", memory_md.len()));
    }
    std::fs::write(root.join("MEMORY.md"), &memory_md).unwrap();
    let daemon = fixture.serve(&[]).await;
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let start = payload("claude-code", "session-start", &project, &transcript, "s-big");
    // The first search brings the index up to date with the 10k entries; the hook's deadline
    // makes it answer from the files meanwhile, which is within the cap too.
    for _ in 0..2 {
        let context = check_shape(
            "session-start",
            &hook(&root, "session-start", &start, &[("MEMFOLD_HOOKS__DAEMON_TIMEOUT_MS", "60000")]),
        )
        .unwrap();
        assert!(context.chars().count() <= 10_000, "{} characters", context.chars().count());
        assert!(context.contains("more lines of MEMORY.md"), "{context}");
        assert!(context.contains("Relevant to shop"), "{context}");
        assert!(context.trim_end().ends_with("in a shell."), "{context}");
    }
    daemon.stop().await;
}

/// A daemon that holds the memory and takes the connection but never answers counts as down
/// once `hooks.daemon_timeout_ms` has passed: session start answers from the files and says so,
/// a capture goes to the archive directly.
#[test]
fn a_daemon_that_never_answers_counts_as_down_after_the_deadline() {
    let fixture = Fixture::new();
    let root = fixture.root();
    std::fs::write(root.join("MEMORY.md"), "# MEMORY\n\n- I prefer short answers.\n").unwrap();
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let store = memfold::store::Root::new(&root);
    let _serving = memfold::sys::lock::LockGuard::try_acquire(&store.serve_lock(), "memfold serve").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    memfold::store::listening::Listening::write(&store, listener.local_addr().unwrap()).unwrap();
    std::thread::spawn(move || {
        // Every connection taken and kept open, none answered.
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let deadline = [("MEMFOLD_HOOKS__DAEMON_TIMEOUT_MS", "300")];
    let started = std::time::Instant::now();
    let start = payload("claude-code", "session-start", &project, &transcript, "s-mute");
    let context = check_shape("session-start", &hook(&root, "session-start", &start, &deadline)).unwrap();
    assert!(context.contains("I prefer short answers."), "{context}");
    assert!(context.contains("did not answer in time"), "{context}");
    let stop = payload("claude-code", "stop", &project, &transcript, "s-mute");
    let ran = hook(&root, "stop", &stop, &deadline);
    check_shape("stop", &ran);
    assert!(ran.stderr.contains("they go to the archive directly"), "{}", ran.stderr);
    assert_eq!(facts(&root).len(), 2, "the requests to remember, stored without the daemon");
    // Not a timing target: a hook that waited on the silent daemon would hang here for good.
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
}

#[tokio::test]
async fn with_the_daemon_down_session_start_answers_from_the_files_and_stop_appends_to_the_archive() {
    let fixture = Fixture::new();
    let root = fixture.root();
    std::fs::write(root.join("MEMORY.md"), "# MEMORY\n\n- I prefer short answers.\n").unwrap();
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let context = check_shape(
        "session-start",
        &hook(&root, "session-start", &payload("claude-code", "session-start", &project, &transcript, "s-down"), &[]),
    )
    .unwrap();
    assert!(context.contains("I prefer short answers."), "{context}");
    assert_eq!(context.lines().filter(|l| l.contains("daemon is not running")).count(), 1, "{context}");
    let prompt = hook(
        &root,
        "user-prompt-submit",
        &payload("claude-code", "user-prompt-submit", &project, &transcript, "s-down"),
        &[],
    );
    assert_eq!(check_shape("user-prompt-submit", &prompt), None);
    check_shape("stop", &hook(&root, "stop", &payload("claude-code", "stop", &project, &transcript, "s-down"), &[]));
    assert_eq!(facts(&root).len(), 2);
    let daemon = fixture.serve(&[]).await;
    assert_eq!(verify(&root)["ok"], true, "{}", verify(&root));
    let (code, found) = daemon.get("/search?q=staging+database+port").await;
    assert_eq!(code, 200);
    assert!(found.to_string().contains("port 5433"), "{found}");
    daemon.stop().await;
}

#[tokio::test]
async fn a_prompt_recalls_what_is_relevant_above_the_floor_and_the_recall_is_logged() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    let ids = daemon.add(&["The staging database listens on port 5433", "Ana owns the billing worker service"]).await;
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let mut prompt = payload("claude-code", "user-prompt-submit", &project, &transcript, "s-prompt");
    prompt["prompt"] = json!("which port does the staging database listen on?");
    let context = check_shape("user-prompt-submit", &hook(&root, "user-prompt-submit", &prompt, &[]))
        .expect("something is relevant");
    assert!(context.contains("port 5433"), "{context}");
    assert!(context.chars().count() <= 2_000);
    let recall = std::fs::read_to_string(root.join(".memfold/recall.jsonl")).unwrap_or_default();
    assert!(recall.contains(&ids[0]), "the recalled fact is in the recall log: {recall}");
    prompt["prompt"] = json!("bake me a chocolate cake with raspberries");
    assert_eq!(
        check_shape("user-prompt-submit", &hook(&root, "user-prompt-submit", &prompt, &[])),
        None,
        "nothing relevant, nothing added"
    );
    daemon.stop().await;
}

#[tokio::test]
async fn a_prompt_that_asks_what_was_true_then_is_handed_the_older_version_too() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    daemon.add(&["The staging database listens on port 5433"]).await;
    let (code, _) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200);
    let (_, entries) = daemon.get("/entries").await;
    let id = entries["entries"][0]["id"].as_str().expect("one entry").to_string();
    let (code, superseded) = daemon
        .post(&format!("/entries/{id}/supersede"), json!({"text": "The staging database listens on port 6543"}))
        .await;
    assert_eq!(code, 200, "{superseded}");
    std::fs::write(root.join("MEMORY.md"), "# Notes\nAlways answer in English.\n").unwrap();
    let recall = |prompt: &str| {
        let daemon = &daemon;
        let prompt = prompt.to_string();
        async move {
            let (code, recalled) = daemon.post("/recall", json!({ "prompt": prompt })).await;
            assert_eq!(code, 200, "{recalled}");
            recalled["lines"].as_array().unwrap().clone()
        }
    };
    let now = recall("which port does the staging database listen on?").await;
    let said: Vec<String> = now.iter().map(|l| l["text"].as_str().unwrap().to_string()).collect();
    assert!(said.iter().any(|t| t.contains("6543")), "{said:?}");
    assert!(!said.iter().any(|t| t.contains("5433")), "what is no longer true is not handed over: {said:?}");
    let then = recall("which port did the staging database listen on before?").await;
    let old: Vec<_> = then.iter().filter(|l| l["kind"] == "history").collect();
    assert_eq!(old.len(), 1, "the older version, marked as history: {then:?}");
    assert!(old[0]["text"].as_str().unwrap().contains("5433"), "{then:?}");
    assert!(then.iter().any(|l| l["kind"] == "entry" && l["text"].as_str().unwrap().contains("6543")), "{then:?}");
    daemon.stop().await;
}

/// What `POST /recall` hands over for `prompt`, as the agent reads it.
async fn recalled_text(daemon: &Daemon, prompt: &str) -> String {
    let (code, recalled) = daemon.post("/recall", json!({ "prompt": prompt })).await;
    assert_eq!(code, 200, "{recalled}");
    recalled["text"].as_str().unwrap().to_string()
}

/// Notes of deploys that went fine, one on each of `days`, which say more of a prompt about
/// the deploy than the rollback on `rollback` does; and `more` facts.
async fn deploys_and_a_rollback(
    daemon: &Daemon,
    days: &[chrono::NaiveDate],
    rollback: chrono::NaiveDate,
    more: &[Value],
) {
    let mut facts: Vec<Value> = days
        .iter()
        .enumerate()
        .map(|(i, day)| {
            let text =
                format!("What happened with the deploy of service {i}: the deploy went out fine, nothing happened.");
            json!({ "text": text, "date": day.to_string() })
        })
        .collect();
    let rolled_back = "The deploy of the billing worker was rolled back after Redis timeouts.";
    facts.push(json!({ "text": rolled_back, "date": rollback.to_string() }));
    facts.extend(more.iter().cloned());
    let (code, added) = daemon.post("/facts", json!({ "facts": facts })).await;
    assert_eq!(code, 200, "{added}");
}

/// A prompt naming a day weighs what is dated then, which a search of all memory ranks
/// below the first thirty candidates here: forty notes of other days say more of the prompt.
#[tokio::test]
async fn a_prompt_naming_a_day_is_handed_what_is_dated_then() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[]).await;
    let first = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    let days: Vec<chrono::NaiveDate> =
        (0..40).map(|i| first + chrono::Days::new(i * 7)).filter(|d| d.format("%m").to_string() != "03").collect();
    deploys_and_a_rollback(&daemon, &days, "2026-03-14".parse().unwrap(), &[]).await;
    let undated = recalled_text(&daemon, "What happened with the deploy? Was there a rollback?").await;
    assert!(!undated.contains("rolled back"), "without the day, other notes say more of the prompt: {undated}");
    for dated in [
        "What happened with the deploy on 14 March 2026? Was there a rollback?",
        "What happened with the deploy on March 14th, 2026? Was there a rollback?",
    ] {
        let told = recalled_text(&daemon, dated).await;
        assert!(told.contains("billing worker was rolled back"), "{dated}: {told}");
    }
    daemon.stop().await;
}

/// "Yesterday", "last week": days counted back from the daemon's today.
#[tokio::test]
async fn a_prompt_naming_yesterday_is_handed_what_was_said_yesterday() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[("MEMFOLD_TIME__ZONE", "utc")]).await;
    let today = chrono::Utc::now().date_naive();
    let days: Vec<chrono::NaiveDate> = (2..42).map(|i| today - chrono::Days::new(i * 3)).collect();
    let yesterday = today - chrono::Days::new(1);
    let dentist = json!({ "text": "Booked the dentist for Friday afternoon.", "date": yesterday.to_string() });
    deploys_and_a_rollback(&daemon, &days, yesterday, &[dentist]).await;
    let undated = recalled_text(&daemon, "What happened with the deploy? Was there a rollback?").await;
    assert!(!undated.contains("rolled back"), "{undated}");
    let told = recalled_text(&daemon, "What happened with the deploy yesterday? Was there a rollback?").await;
    assert!(told.contains("billing worker was rolled back"), "{told}");
    // A day named is no reason to hand over what is not near the prompt.
    let coding = recalled_text(&daemon, "Fix the failing unit test I wrote yesterday in src/parser.rs").await;
    assert!(!coding.contains("dentist"), "{coding}");
    daemon.stop().await;
}

#[tokio::test]
async fn within_a_session_an_unchanged_entry_is_told_once_and_what_session_start_told_is_not_repeated() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    daemon.add(&["The staging database listens on port 5433", "The shop checkout takes payments through Stripe"]).await;
    let (code, _) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200);
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let ask = |session: &str, text: &str| {
        let mut prompt = payload("claude-code", "user-prompt-submit", &project, &transcript, session);
        prompt["prompt"] = json!(text);
        check_shape("user-prompt-submit", &hook(&root, "user-prompt-submit", &prompt, &[]))
    };
    let port = "which port does the staging database listen on?";
    // Both entries are in MEMORY.md, which session start hands over whole: nothing to add.
    assert!(std::fs::read_to_string(root.join("MEMORY.md")).unwrap().contains("port 5433"));
    assert_eq!(ask("s-0", port), None, "MEMORY.md is in the agent's context already");
    std::fs::write(root.join("MEMORY.md"), "# Notes\nAlways answer in English.\n").unwrap();
    let first = ask("s-1", port).expect("the entry is recalled");
    assert!(first.contains("port 5433") && first.contains("[m-"), "each line names its entry: {first}");
    assert_eq!(ask("s-1", port), None, "told once in the session");
    // Over HTTP: a budget too small for the line hands nothing over; no session, nothing held back.
    let (code, small) = daemon.post("/recall", json!({"prompt": port, "budget": 20})).await;
    assert_eq!((code, small["lines"].as_array().map(Vec::len)), (200, Some(0)), "{small}");
    let (_, whole) = daemon.post("/recall", json!({"prompt": port})).await;
    assert_eq!(whole["lines"][0]["kind"], "entry", "{whole}");
    assert!(whole["text"].as_str().unwrap().contains("port 5433"), "{whole}");
    assert!(ask("s-2", port).is_some_and(|c| c.contains("port 5433")), "another session is told again");
    // A person edits the entry by hand: changed, it is told again in the same session.
    let memory = root.join("consolidated/memory.md");
    let edited = std::fs::read_to_string(&memory).unwrap().replace("port 5433", "port 6543");
    std::fs::write(&memory, edited).unwrap();
    eventually(Duration::from_secs(30), "the edit indexed", async || {
        let (_, found) = daemon.get("/search?q=staging%20database%20port").await;
        found.to_string().contains("6543").then_some(())
    })
    .await;
    assert!(ask("s-1", port).is_some_and(|c| c.contains("port 6543")), "changed since: told again");
    assert_eq!(ask("s-1", port), None);
    // What session start handed over (the entries relevant to the project) is not repeated.
    let start = payload("claude-code", "session-start", &project, &transcript, "s-3");
    let context = check_shape("session-start", &hook(&root, "session-start", &start, &[])).unwrap();
    assert!(context.contains("Stripe"), "relevant to the shop: {context}");
    assert_eq!(ask("s-3", "how does the shop checkout take payments? Stripe?"), None, "{context}");
    // A session's record of what it was told ends with it.
    let told = || {
        std::fs::read_dir(root.join(".memfold/hooks"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".told.json"))
            .count()
    };
    assert_eq!(told(), 3, "s-1, s-2, s-3");
    let end = payload("claude-code", "session-end", &project, &transcript, "s-1");
    check_shape("session-end", &hook(&root, "session-end", &end, &[]));
    assert_eq!(told(), 2, "s-1 pruned with the session");
    daemon.stop().await;
}

#[tokio::test]
async fn with_an_llm_the_daemon_extracts_a_captured_exchange_once_even_after_being_down() {
    let fake = memfold::testkit::FakeOpenAi::start_in_thread();
    fake.set_chat_handler(|_| {
        memfold::testkit::FakeReply::Content(
            json!({"facts": [{"text": "The staging database listens on port 5433"}]}).to_string(),
        )
    });
    let env = llm_env(&fake);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let fixture = Fixture::new();
    let root = fixture.root();
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    let stop = payload("claude-code", "stop", &project, &transcript, "s-llm");
    // Down: the exchange waits in the spool.
    let ran = hook(&root, "stop", &stop, &env);
    check_shape("stop", &ran);
    assert!(ran.stderr.contains("wait in the spool"), "{}", ran.stderr);
    assert_eq!(fake.chat_calls(), 0);
    let daemon = fixture.serve(&env).await;
    // Up: the daemon extracts what waited, without another hook.
    eventually(Duration::from_secs(30), "the spooled turn extracted", async || {
        (!facts(&root).is_empty()).then_some(())
    })
    .await;
    // The next capture finds nothing new in the transcript and spools nothing.
    check_shape("stop", &hook(&root, "stop", &stop, &env));
    let stored = facts(&root);
    assert_eq!(stored, [("The staging database listens on port 5433".to_string(), "claude-code:s-llm".to_string())]);
    let request = fake.chat_requests().last().cloned().unwrap().to_string();
    assert!(request.contains("port 5433") && request.contains("runInBand"), "{request}");
    assert!(!request.contains("this tool result is not the person"), "tool output never reaches the LLM");
    check_shape(
        "session-end",
        &hook(&root, "session-end", &payload("claude-code", "session-end", &project, &transcript, "s-llm"), &env),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.chat_calls(), 1, "one exchange, one extraction");
    assert_eq!(facts(&root).len(), 1);
    daemon.stop().await;
}

/// `memfold setup …` with HOME (and CODEX_HOME) in `home`.
fn setup(root: &Path, home: &Path, args: &[&str]) -> String {
    let out = bin()
        .arg("--root")
        .arg(root)
        .arg("setup")
        .args(args)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env_remove("MEMFOLD_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn setup_claude_code_keeps_what_is_there_is_idempotent_and_removes_exactly_its_part() {
    let fixture = Fixture::new();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let settings = "{\n  \"permissions\": {\n    \"allow\": [\n      \"Bash(npm test)\"\n    ]\n  },\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"notify-send done\"\n          }\n        ]\n      }\n    ]\n  },\n  \"autoMemoryEnabled\": true\n}\n";
    let claude_json = "{\n  \"numStartups\": 12,\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"http\",\n      \"url\": \"https://api.githubcopilot.com/mcp/\"\n    }\n  }\n}\n";
    std::fs::write(home.join(".claude/settings.json"), settings).unwrap();
    std::fs::write(home.join(".claude.json"), claude_json).unwrap();
    let root = fixture.root();
    let dry = setup(&root, &home, &["claude-code", "--dry-run"]);
    assert!(dry.contains("+++ b/") && dry.contains("hook session-start"), "{dry}");
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(),
        settings,
        "a dry run writes nothing"
    );

    setup(&root, &home, &["claude-code"]);
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(after["permissions"]["allow"][0], "Bash(npm test)");
    assert_eq!(after["autoMemoryEnabled"], true, "the agent's own memory is left on");
    assert_eq!(after["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done");
    for event in ["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "PostCompact", "SessionEnd"] {
        assert!(after["hooks"][event].to_string().contains(" hook "), "{event}: {after}");
    }
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(mcp["numStartups"], 12);
    assert_eq!(mcp["mcpServers"]["github"]["type"], "http");
    assert_eq!(mcp["mcpServers"]["memfold"]["args"].as_array().unwrap().last().unwrap(), "mcp");
    let backups = std::fs::read_dir(home.join(".claude"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("memfold-backup"))
        .count();
    assert_eq!(backups, 1);

    let once =
        (std::fs::read(home.join(".claude/settings.json")).unwrap(), std::fs::read(home.join(".claude.json")).unwrap());
    let again = setup(&root, &home, &["claude-code"]);
    assert!(again.matches("unchanged").count() == 2, "{again}");
    assert_eq!(
        once,
        (std::fs::read(home.join(".claude/settings.json")).unwrap(), std::fs::read(home.join(".claude.json")).unwrap())
    );

    setup(&root, &home, &["claude-code", "--remove"]);
    assert_eq!(std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(), settings);
    assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), claude_json);

    // The project scope writes nothing a team commits: the hooks in the project's
    // settings.local.json, the server under the project's path in ~/.claude.json.
    let project = fixture.dir.path().join("shop");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let run_in = |args: &[&str]| {
        let out = bin()
            .current_dir(&project)
            .arg("--root")
            .arg(&root)
            .arg("setup")
            .args(args)
            .env("HOME", &home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run_in(&["claude-code", "--scope", "project"]);
    assert!(project.join(".claude/settings.local.json").is_file());
    assert!(!project.join(".mcp.json").exists() && !project.join(".claude/settings.json").exists());
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    let key = std::fs::canonicalize(&project).unwrap().display().to_string();
    assert_eq!(
        mcp["projects"][&key]["mcpServers"]["memfold"]["args"].as_array().unwrap().last().unwrap(),
        "mcp",
        "{mcp}"
    );
    run_in(&["claude-code", "--scope", "project", "--remove"]);
    assert!(!project.join(".claude/settings.local.json").exists());
    assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), claude_json);
}

#[test]
fn setup_carries_the_configuration_and_claims_only_its_own_hooks() {
    let fixture = Fixture::new();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    // A hook wired by hand that runs memfold.
    let by_hand = "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"memfold hook stop\"\n          }\n        ]\n      }\n    ]\n  }\n}\n";
    std::fs::write(home.join(".claude/settings.json"), by_hand).unwrap();
    let config_file = fixture.dir.path().join("my memfold.toml");
    std::fs::write(&config_file, "[hooks]\nsession_start_max_chars = 400\n").unwrap();
    let (first, second) = (fixture.root(), fixture.dir.path().join("second"));
    assert!(run(&second, &["init"]).status.success());
    let with_config = |root: &Path, args: &[&str]| {
        let out = bin()
            .arg("--root")
            .arg(root)
            .arg("setup")
            .args(args)
            .env("HOME", &home)
            .env("MEMFOLD_CONFIG", &config_file)
            .env_remove("MEMFOLD_ROOT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    with_config(&first, &["claude-code"]);
    let settings = std::fs::read_to_string(home.join(".claude/settings.json")).unwrap();
    assert!(settings.contains("--config '") && settings.contains("my memfold.toml"), "{settings}");
    let doc: Value = serde_json::from_str(&settings).unwrap();
    // Every command setup wrote runs with that configuration: session start, run as the agent
    // runs it, keeps to the file's 400 characters (the default is 10,000).
    let lines: String = (0..200).map(|i| format!("- Line {i} of what I keep in mind\n")).collect();
    std::fs::write(first.join("MEMORY.md"), lines).unwrap();
    let command = doc["hooks"]["SessionStart"][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    let mut shell = std::process::Command::new("sh");
    shell.arg("-c").arg(&command).env("HOME", &home).env_remove("MEMFOLD_CONFIG").env_remove("MEMFOLD_ROOT");
    let ran = pipe(shell, json!({"session_id": "s", "cwd": fixture.dir.path()}).to_string().as_bytes());
    let context = check_shape("session-start", &ran).unwrap();
    assert!(context.contains("Line 0") && context.chars().count() <= 400, "{}", context.chars().count());
    // A second memory set up beside the first: both sets of hooks, both servers.
    setup(&second, &home, &["claude-code"]);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    let stops: Vec<String> = doc["hooks"]["Stop"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["hooks"][0]["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(stops.len(), 3, "{stops:?}");
    assert!(stops.contains(&"memfold hook stop".to_string()), "the hand-wired hook stays");
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"].as_object().unwrap().len(), 2, "{mcp}");
    // Removing each leaves the other and the hand-wired hook; both gone, the file is as it was.
    setup(&second, &home, &["claude-code", "--remove"]);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(doc["hooks"]["Stop"].as_array().unwrap().len(), 2);
    assert!(doc.to_string().contains(&first.display().to_string()));
    with_config(&first, &["claude-code", "--remove"]);
    assert_eq!(std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(), by_hand);
}

#[test]
fn setup_codex_keeps_the_comments_of_config_toml_and_names_no_token_inline() {
    let fixture = Fixture::new();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let config = "# Codex settings, kept by hand\nmodel = \"gpt-5\"  # the default model\n\n[features]\nhooks = true\n\n# Figma, for the design work\n[mcp_servers.figma]\nurl = \"https://mcp.figma.com/mcp\"\nbearer_token_env_var = \"FIGMA_OAUTH_TOKEN\"\n";
    std::fs::write(home.join(".codex/config.toml"), config).unwrap();
    let root = fixture.root();
    setup(&root, &home, &["codex"]);
    let after = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
    assert!(after.starts_with(config), "{after}");
    assert!(after.contains("[mcp_servers.memfold]"), "{after}");
    let token = std::fs::read_to_string(root.join(".memfold/token")).unwrap_or_default();
    assert!(token.trim().is_empty() || !after.contains(token.trim()), "no token inline");
    let hooks: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json")).unwrap()).unwrap();
    assert!(hooks["hooks"]["SessionEnd"].to_string().contains("--agent codex"), "{hooks}");
    let once = std::fs::read(home.join(".codex/config.toml")).unwrap();
    setup(&root, &home, &["codex"]);
    assert_eq!(std::fs::read(home.join(".codex/config.toml")).unwrap(), once);
    setup(&root, &home, &["codex", "--remove"]);
    assert_eq!(std::fs::read_to_string(home.join(".codex/config.toml")).unwrap(), config);
    assert!(!home.join(".codex/hooks.json").exists(), "memfold made hooks.json, and takes it away");
}

#[test]
fn imports_bring_each_memory_once_and_name_what_they_skip() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let claude = fixture.dir.path().join("claude-memory");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(claude.join("MEMORY.md"), "# Memory Index\n\n- [testing.md](testing.md)\n").unwrap();
    std::fs::write(claude.join("testing.md"), "---\nname: Testing\ntype: feedback\nmodified: 2026-02-03T04:05:06Z\n---\n\n- Run vitest with --run in CI\n- Never mock the database in integration tests\n").unwrap();
    let codex = fixture.dir.path().join("codex-memories");
    std::fs::create_dir_all(codex.join("rollout_summaries")).unwrap();
    std::fs::write(
        codex.join("rollout_summaries/t1.md"),
        "thread_id: t1\nupdated_at: 2026-04-05T10:00:00Z\n\nThe user deploys with fly.io from the main branch.\n",
    )
    .unwrap();
    let mem0 = fixture.dir.path().join("mem0.jsonl");
    std::fs::write(&mem0, "{\"id\":\"m1\",\"memory\":\"Prefers pnpm over npm\",\"created_at\":\"2026-01-02T03:04:05+00:00\"}\n{oops\n{\"id\":\"m2\",\"memory\":\"Lives in Lisbon\"}\n").unwrap();
    let import = |from: &str, path: &Path| {
        let out = run(&root, &["import", "--from", from, path.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (serde_json::from_slice::<Value>(&out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(import("claude-code", &claude).0["added"], 2);
    assert_eq!(import("codex", &codex).0["added"], 1);
    let (first, skipped) = import("mem0", &mem0);
    assert_eq!(first["added"], 2);
    assert!(skipped.contains(&format!("{}:2:", mem0.display())), "{skipped}");
    for (from, path) in [("claude-code", &claude), ("codex", &codex), ("mem0", &mem0)] {
        let (again, _) = import(from, path);
        assert_eq!(again["added"], 0, "{from}");
    }
    let stored = facts(&root);
    assert_eq!(stored.len(), 5, "{stored:?}");
    assert!(stored.contains(&("Prefers pnpm over npm".into(), "mem0:m1".into())));
    assert!(stored.contains(&("Run vitest with --run in CI".into(), "claude-code:testing.md".into())));
    let archive = std::fs::read_to_string(root.join("archive/2026-01-02.md")).unwrap();
    assert!(archive.contains("Prefers pnpm over npm"), "dated as the export says");
    assert_eq!(verify(&root)["ok"], true);
}

/// `memfold --home H hook EVENT` with `payload` on stdin.
fn home_hook(home: &crate::common::home::Home, event: &str, payload: &Value) -> Ran {
    let mut command = home.command(None);
    command.args(["hook", event]);
    pipe(command, payload.to_string().as_bytes())
}

#[tokio::test]
async fn in_a_home_the_space_follows_the_project_and_the_persons_own_space_is_read_beside_it() {
    let home = crate::common::home::Home::new(&["me"], &["me"], "auto_create = true\n");
    home.ok(Some("me"), &["add", "I prefer answers without emojis"]);
    let daemon = home.serve(&[]).await;
    let work = home.dir.path().join("work");
    let (project, transcript) = project_with_transcript(&work, "claude-code");
    // Another project folder of the same name elsewhere gets a space of its own.
    let (other, _) = project_with_transcript(&home.dir.path().join("elsewhere"), "claude-code");
    check_shape("stop", &home_hook(&home, "stop", &payload("claude-code", "stop", &project, &transcript, "s-home")));
    let shop: Vec<String> = facts(&home.space("shop")).into_iter().map(|(t, _)| t).collect();
    assert_eq!(shop.len(), 2, "{shop:?}");
    let mut prompt = payload("claude-code", "user-prompt-submit", &project, &transcript, "s-home");
    prompt["prompt"] = json!("which port does the staging database listen on?");
    let context = check_shape("user-prompt-submit", &home_hook(&home, "user-prompt-submit", &prompt)).unwrap();
    assert!(context.contains("port 5433"), "{context}");
    prompt["prompt"] = json!("do I prefer answers without emojis?");
    let context = check_shape("user-prompt-submit", &home_hook(&home, "user-prompt-submit", &prompt)).unwrap();
    assert!(context.contains("without emojis") && context.contains("· me]"), "the person's space, named: {context}");

    let mut elsewhere = payload("claude-code", "session-start", &other, &transcript, "s-other");
    elsewhere["cwd"] = json!(other.join("src"));
    check_shape("session-start", &home_hook(&home, "session-start", &elsewhere));
    let spaces: Vec<String> = std::fs::read_dir(home.path().join("spaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(spaces.len(), 3, "{spaces:?}");
    assert!(spaces.iter().any(|s| s.starts_with("shop-")), "{spaces:?}");
    assert!(
        facts(&home.space("me")).iter().all(|(t, _)| !t.contains("5433")),
        "nothing written into the person's space"
    );
    daemon.stop().await;
}

#[tokio::test]
async fn mcp_started_in_a_project_of_a_home_serves_that_projects_space() {
    let home = crate::common::home::Home::new(&[], &[], "auto_create = true\n");
    let (project, _) = project_with_transcript(&home.dir.path().join("work"), "claude-code");
    std::fs::create_dir_all(project.join("src")).unwrap();
    let mut command = tokio::process::Command::from(home.command(None));
    command.arg("mcp").current_dir(project.join("src"));
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let (recorder, _) = crate::common::mcp::Recorder::new();
    let client = rmcp::ServiceExt::serve(recorder, (stdout, stdin)).await.expect("memfold mcp answers");
    crate::common::mcp::ok(&client, "memory_add", json!({"facts": ["The shop deploys on Fridays"]})).await;
    client.cancel().await.unwrap();
    let stored: Vec<String> = facts(&home.space("shop")).into_iter().map(|(t, _)| t).collect();
    assert_eq!(stored, ["The shop deploys on Fridays"], "the project's space, made on first use");
}

/// A line of a Claude Code transcript: the person said `text`.
fn said_line(text: &str) -> String {
    format!("{}\n", json!({"type": "user", "message": {"role": "user", "content": text}, "uuid": "u9"}))
}

#[test]
fn a_request_typed_on_a_phone_is_stored_and_with_the_daemon_down_lands_in_the_day_file_add_uses() {
    let fixture = Fixture::new();
    let root = fixture.root();
    // A zone whose day differs from the machine's now, so a capture that used the machine's
    // clock would land in another day file.
    let utc = chrono::Utc::now();
    let zone = if chrono::Timelike::hour(&utc) >= 10 { "+14:00" } else { "-12:00" };
    let env = [("MEMFOLD_TIME__ZONE", zone)];
    let (project, _) = project_with_transcript(fixture.dir.path(), "claude-code");
    let transcript = fixture.dir.path().join("phone.jsonl");
    std::fs::write(&transcript, said_line("Don\u{2019}t forget that Ana\u{2019}s flight lands at 9 on Friday."))
        .unwrap();
    check_shape("stop", &hook(&root, "stop", &payload("claude-code", "stop", &project, &transcript, "s-phone"), &env));
    let out = crate::common::memfold(&root, &["add", "The demo moved to Thursday"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let days: Vec<String> = std::fs::read_dir(root.join("archive"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let zoned = utc.with_timezone(&zone.parse::<chrono::FixedOffset>().unwrap()).date_naive();
    assert_eq!(days, vec![format!("{zoned}.md")], "one day file, the zone's day");
    let stored = facts(&root);
    assert!(stored.iter().any(|(t, _)| t == "Ana\u{2019}s flight lands at 9 on Friday."), "{stored:?}");
    assert_eq!(stored.len(), 2);
}

#[tokio::test]
async fn a_compaction_summary_and_the_exchange_after_it_are_both_extracted() {
    let fake = memfold::testkit::FakeOpenAi::start_in_thread();
    fake.set_chat_handler(|request: &Value| {
        let user = request["messages"][1]["content"].as_str().unwrap_or_default();
        let fact = if user.contains("compacted conversation") {
            "The checkout service moved to port 8443"
        } else if user.contains("nightly build") {
            "The nightly build runs at 2am"
        } else {
            "The staging database listens on port 5433"
        };
        memfold::testkit::FakeReply::Content(json!({"facts": [{"text": fact}]}).to_string())
    });
    let env = llm_env(&fake);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let fixture = Fixture::new();
    let root = fixture.root();
    let (project, transcript) = project_with_transcript(fixture.dir.path(), "claude-code");
    // Daemon down: the exchange, then a compaction (its summary only), then more talk.
    check_shape("stop", &hook(&root, "stop", &payload("claude-code", "stop", &project, &transcript, "s-c"), &env));
    check_shape(
        "post-compact",
        &hook(&root, "post-compact", &payload("claude-code", "post-compact", &project, &transcript, "s-c"), &env),
    );
    let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    file.write_all(said_line("Also the nightly build runs at 2am now.").as_bytes()).unwrap();
    check_shape("stop", &hook(&root, "stop", &payload("claude-code", "stop", &project, &transcript, "s-c"), &env));
    let spooled = std::fs::read_dir(root.join(".memfold/spool"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_file())
        .count();
    assert_eq!(spooled, 3, "three parts wait, none overwritten");
    let daemon = fixture.serve(&env).await;
    eventually(Duration::from_secs(30), "every spooled part extracted", async || {
        (facts(&root).len() == 3).then_some(())
    })
    .await;
    let stored: Vec<String> = facts(&root).into_iter().map(|(t, _)| t).collect();
    assert!(stored.contains(&"The checkout service moved to port 8443".to_string()), "the summary: {stored:?}");
    daemon.stop().await;
}

fn git_in(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A transcript in which the person asks to remember `text`.
fn asked(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, said_line(&format!("Remember that {text}"))).unwrap();
    path
}

#[tokio::test]
async fn worktrees_and_clones_of_one_repository_share_one_space_and_older_spaces_merge() {
    let home = crate::common::home::Home::new(&[], &[], "auto_create = true\n");
    let work = std::fs::canonicalize(home.dir.path()).unwrap().join("work");
    let app = work.join("app");
    std::fs::create_dir_all(&app).unwrap();
    git_in(&app, &["init", "--quiet"]);
    git_in(&app, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "first"]);
    git_in(&app, &["worktree", "add", "--quiet", "../app-feature"]);
    let feature = work.join("app-feature");
    // What an older memfold left: a space per work tree, each recording its folder.
    for (space, folder, fact) in
        [("app", &app, "The app deploys on Fridays"), ("app-feature", &feature, "The feature flag is called new-cart")]
    {
        home.ok(Some(space), &["init"]);
        std::fs::write(home.space(space).join(".memfold/project"), format!("{}\n", folder.display())).unwrap();
        home.ok(Some(space), &["add", fact]);
        home.ok(Some(space), &["consolidate", "--force"]);
    }
    let before: usize = ["app", "app-feature"]
        .iter()
        .map(|s| home.json(Some(s), &["verify", "--json"])["facts"].as_u64().unwrap() as usize)
        .sum();
    // A session in the linked work tree: its memory goes to the repository's space, and the
    // other space is named with the command that joins it.
    let transcript = asked(home.dir.path(), "t1.jsonl", "the checkout tests need Redis running.");
    let ran = home_hook(
        &home,
        "stop",
        &json!({"session_id": "w1", "cwd": feature.join("src"), "transcript_path": transcript}),
    );
    check_shape("stop", &ran);
    assert!(
        ran.stderr.contains("space app-feature also holds memory of this repository")
            && ran.stderr.contains("--merge app app-feature"),
        "{}",
        ran.stderr
    );
    let in_app = home.json(Some("app"), &["search", "checkout tests Redis", "--json"]);
    assert!(in_app.to_string().contains("Redis"), "{in_app}");
    // Joined: every fact of both in one archive, verify ok, the other space gone (kept aside).
    let joined = home.json(None, &["spaces", "--merge", "app", "app-feature", "--json"]);
    assert_eq!(joined["from"], "app-feature", "{joined}");
    let report = home.json(Some("app"), &["verify", "--json"]);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["facts"].as_u64().unwrap() as usize, before + 1, "{report}");
    let listed = home.json(None, &["spaces", "--json"]);
    let names: Vec<&str> = listed["spaces"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["app"], "{listed}");
    assert!(std::path::Path::new(joined["kept_at"].as_str().unwrap()).join("archive").is_dir(), "kept whole");
    let found = home.json(Some("app"), &["search", "feature flag", "--json"]);
    assert!(found.to_string().contains("new-cart"), "{found}");
    let again = home_hook(&home, "stop", &json!({"session_id": "w2", "cwd": feature, "transcript_path": transcript}));
    assert!(!again.stderr.contains("also holds"), "{}", again.stderr);

    // With an origin, a clone of the same remote in another folder lands in the same space.
    git_in(&app, &["remote", "add", "origin", "git@github.com:Me/App.git"]);
    let copy = work.join("elsewhere/app-copy");
    std::fs::create_dir_all(&copy).unwrap();
    git_in(&copy, &["init", "--quiet"]);
    git_in(&copy, &["remote", "add", "origin", "https://github.com/me/app.git"]);
    let transcript = asked(home.dir.path(), "t2.jsonl", "staging runs on fly.io.");
    check_shape(
        "stop",
        &home_hook(&home, "stop", &json!({"session_id": "c1", "cwd": copy, "transcript_path": transcript})),
    );
    let found = home.json(Some("app"), &["search", "staging fly.io", "--json"]);
    assert!(found.to_string().contains("fly.io"), "the clone's fact is in app: {found}");
    let listed = home.json(None, &["spaces", "--json"]);
    assert_eq!(listed["spaces"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        std::fs::read_to_string(home.space("app").join(".memfold/project")).unwrap().trim(),
        "remote:github.com/me/app"
    );

    // A folder outside git keeps a space of its own, named after it.
    let notes = work.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let transcript = asked(home.dir.path(), "t3.jsonl", "the notes are in markdown.");
    check_shape(
        "stop",
        &home_hook(&home, "stop", &json!({"session_id": "n1", "cwd": notes, "transcript_path": transcript})),
    );
    let listed = home.json(None, &["spaces", "--json"]);
    let names: Vec<&str> = listed["spaces"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["app", "notes"], "{listed}");
}
