//! The agent hooks timed as the agent runs them: a whole `memfold hook EVENT` process, the
//! payload on stdin, the answer read from stdout, on a root of N entries (default 100,000)
//! with a running daemon, then with the daemon stopped.
//!
//! It prints p50, p95 and p99 over R runs (default 30) of
//! - `hook session-start` (MEMORY.md, then the project's entries through the daemon);
//! - `hook user-prompt-submit` (`POST /recall`: the entries chosen for the prompt, counted in the
//!   recall log and in the session's record of what it was told), and the same prompts naming
//!   a day ("yesterday": a second, dated search);
//! - `hook stop` without an LLM (the transcript read from the session's position, a request to
//!   remember stored through `POST /facts`), and with an LLM configured (the exchange spooled
//!   and handed to the daemon, which extracts it in the background; the hook does not wait);
//! - `session-start` and `user-prompt-submit` with the daemon down (answered from the files);
//! - every event of Gemini CLI, Cursor, Copilot CLI and OpenCode with their recorded payloads
//!   (`fixtures/hooks/<agent>/`), the captures reading the agent's recorded transcript afresh
//!   per run (a new session each time), daemon running;
//! - the commit it ran on.
//!
//! Run: `cargo bench --bench hooks` (release). Knobs: `MEMFOLD_BENCH_ENTRIES` (100000),
//! `MEMFOLD_BENCH_RUNS` (30). Targets (issue "Plugged into the agents people run"):
//! session-start and user-prompt-submit p50 ≤ 50 ms with the daemon running at 100k entries,
//! ≤ 150 ms with it down; stop ≤ 50 ms.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;
#[path = "common/seed.rs"]
mod seed;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use run::{knob, ms, quantile};

use memfold::config::{Config, Overrides};
use memfold::memory::Memory;
use memfold::store::Root;
use serde_json::json;

/// One `memfold hook EVENT` process with `payload`: how long until it exited, and its stdout.
fn hook(root: &Path, event: &str, payload: &serde_json::Value, env: &[(&str, &str)]) -> (Duration, String) {
    hook_of("claude-code", root, event, payload, env)
}

/// [`hook`] for `agent`.
fn hook_of(
    agent: &str,
    root: &Path,
    event: &str,
    payload: &serde_json::Value,
    env: &[(&str, &str)],
) -> (Duration, String) {
    let started = Instant::now();
    let mut command = run::memfold(root);
    command.args(["hook", event, "--agent", agent]).env("MEMFOLD_LOG", "warn");
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    (started.elapsed(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn report(what: &str, times: &mut [Duration], target: &str) {
    println!(
        "  {what}: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms over {} runs ({target})",
        ms(quantile(times, 0.5)),
        ms(quantile(times, 0.95)),
        ms(quantile(times, 0.99)),
        times.len()
    );
}

async fn bench(entries: usize, runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    let root = Root::new(&root_dir);
    root.init().unwrap();
    let texts = life::distractors(entries);
    let started = Instant::now();
    seed::write_entries(&root, &texts);
    let mut memory_md = String::from("# MEMORY\n\n");
    for text in texts.iter().take(60) {
        memory_md.push_str(&format!("- {text}\n"));
    }
    std::fs::write(root.memory_md(), memory_md).unwrap();
    let mut config = Config::load(&Overrides { root: Some(root_dir.clone()), ..Overrides::default() }).unwrap();
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    Memory::open(config).await.unwrap().reindex(false, None).await.unwrap();
    println!("hooks: {entries} entries, commit {}:", run::commit());
    println!("  root built and indexed in {:.0} s", started.elapsed().as_secs_f64());

    let project = dir.path().join("shop");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let transcript = dir.path().join("transcript.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let payload = |event: &str, session: &str| {
        json!({"session_id": session, "transcript_path": transcript, "cwd": project, "hook_event_name": event,
               "source": "startup", "permission_mode": "default"})
    };
    let prompts: Vec<String> = life::distractors(entries + runs)[entries..].to_vec();

    let client = reqwest::Client::new();
    let (mut child, base) = run::serve(&root_dir, &[], &client, Duration::from_secs(600)).await;
    let token = std::fs::read_to_string(root.token_file()).unwrap().trim().to_string();
    run::settled(&client, &base, Some(&token), Duration::from_secs(600)).await;
    // The daemon's first search reads its held rows; a person's first prompt comes later.
    client.get(format!("{base}/search?q=warm")).bearer_auth(&token).send().await.unwrap();

    let mut start = Vec::new();
    for _ in 0..runs {
        let (took, out) = hook(&root_dir, "session-start", &payload("SessionStart", "s1"), &[]);
        assert!(out.contains("additionalContext") && !out.contains("not running"), "{out}");
        start.push(took);
    }
    let mut prompt = Vec::new();
    let mut recalled = 0;
    for text in &prompts[..runs] {
        let mut p = payload("UserPromptSubmit", "s1");
        p["prompt"] = json!(text);
        let (took, out) = hook(&root_dir, "user-prompt-submit", &p, &[]);
        recalled += usize::from(!out.is_empty());
        prompt.push(took);
    }
    // A prompt naming a day also searches what is dated then.
    let mut prompt_dated = Vec::new();
    for text in &prompts[..runs] {
        let mut p = payload("UserPromptSubmit", "s1-dated");
        p["prompt"] = json!(format!("What did I say yesterday about this? {text}"));
        prompt_dated.push(hook(&root_dir, "user-prompt-submit", &p, &[]).0);
    }
    let others = other_agents(&root_dir, dir.path(), &project, &prompts[..runs], runs);
    let mut stop = Vec::new();
    let mut stop_llm = Vec::new();
    // The LLM's address is never called by the hook (the daemon extracts); a daemon without
    // one takes the hand-over and extracts nothing, so this times the hook alone.
    let llm = [("MEMFOLD_LLM__BASE_URL", "http://127.0.0.1:9/v1")];
    for n in 0..runs {
        let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
        writeln!(file, "{}", json!({"type": "user", "message": {"role": "user", "content": format!("Remember that bench fact {n} is kept.")}})).unwrap();
        writeln!(
            file,
            "{}",
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Noted."}]}})
        )
        .unwrap();
        drop(file);
        stop.push(hook(&root_dir, "stop", &payload("Stop", "s-offline"), &[]).0);
        stop_llm.push(hook(&root_dir, "stop", &payload("Stop", "s-llm"), &llm).0);
    }
    run::stop(&mut child, Duration::from_secs(60));

    let mut start_down = Vec::new();
    let mut prompt_down = Vec::new();
    for text in &prompts[..runs] {
        let (took, out) = hook(&root_dir, "session-start", &payload("SessionStart", "s2"), &[]);
        assert!(out.contains("not running"), "{out}");
        start_down.push(took);
        let mut p = payload("UserPromptSubmit", "s2");
        p["prompt"] = json!(text);
        prompt_down.push(hook(&root_dir, "user-prompt-submit", &p, &[]).0);
    }

    report("session-start, daemon running", &mut start, "target p50 ≤ 50 ms");
    report(
        &format!("user-prompt-submit, daemon running ({recalled} of {runs} prompts recalled something)"),
        &mut prompt,
        "target p50 ≤ 50 ms",
    );
    report("user-prompt-submit naming a day (\"yesterday\"), daemon running", &mut prompt_dated, "target p50 ≤ 50 ms");
    report("stop, no LLM (a request to remember stored through the daemon)", &mut stop, "target ≤ 50 ms");
    report("stop, LLM configured (the exchange spooled and handed over)", &mut stop_llm, "target ≤ 50 ms");
    report("session-start, daemon down", &mut start_down, "target p50 ≤ 150 ms");
    report("user-prompt-submit, daemon down", &mut prompt_down, "target p50 ≤ 150 ms");
    for (agent, event, mut times) in others {
        report(&format!("{agent} {event}, daemon running"), &mut times, "target p50 ≤ 50 ms");
    }
}

/// Every event of the agents beside Claude Code, with their recorded payloads: (agent, event,
/// times).
fn other_agents(
    root: &Path,
    dir: &Path,
    project: &Path,
    prompts: &[String],
    runs: usize,
) -> Vec<(&'static str, &'static str, Vec<Duration>)> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks");
    let mut out = Vec::new();
    for agent in ["gemini", "cursor", "copilot", "opencode"] {
        for event in ["session-start", "user-prompt-submit", "stop", "pre-compact", "session-end"] {
            let file = fixtures.join(agent).join(format!("{event}.json"));
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            let recorded: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut times = Vec::new();
            for n in 0..runs {
                let session = format!("{agent}-{event}-{n}");
                let transcript = dir.join(format!("{session}.jsonl"));
                let _ = std::fs::copy(fixtures.join(agent).join("transcript.jsonl"), &transcript);
                let mut payload = recorded.clone();
                let object = payload.as_object_mut().unwrap();
                for key in ["session_id", "conversation_id", "sessionId"] {
                    if object.contains_key(key) {
                        object.insert(key.into(), json!(session));
                    }
                }
                match object.contains_key("workspace_roots") {
                    true => object.insert("workspace_roots".into(), json!([project])),
                    false => object.insert("cwd".into(), json!(project)),
                };
                for key in ["transcript_path", "transcriptPath"] {
                    if object.contains_key(key) {
                        object.insert(key.into(), json!(transcript));
                    }
                }
                if object.contains_key("prompt") {
                    object.insert("prompt".into(), json!(prompts[n % prompts.len()]));
                }
                times.push(hook_of(agent, root, event, &payload, &[]).0);
            }
            out.push((agent, event_name(event), times));
        }
    }
    out
}

fn event_name(event: &str) -> &'static str {
    ["session-start", "user-prompt-submit", "stop", "pre-compact", "session-end"]
        .into_iter()
        .find(|e| *e == event)
        .expect("a known event")
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("hooks bench: skipped (run with `cargo bench --bench hooks`)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bench(knob("MEMFOLD_BENCH_ENTRIES", 100_000), knob("MEMFOLD_BENCH_RUNS", 30)));
}
