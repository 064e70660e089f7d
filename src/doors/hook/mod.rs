//! `memfold hook EVENT`: the door an agent's lifecycle hooks come through (Claude Code, Codex,
//! Gemini CLI, Cursor, Copilot CLI, and OpenCode through memfold's plugin). The hook reads the
//! agent's JSON from stdin and answers in the agent's shape (its event names and fields, see
//! [`context`]):
//!
//! - `session-start`: `MEMORY.md`, then the entries most relevant to the project, as
//!   `additionalContext` (at most `hooks.session_start_max_chars`), ending with how to see more;
//! - `user-prompt-submit`: the few entries relevant to the prompt, above a similarity floor
//!   (counted in the recall log, so what prompts recall feeds `MEMORY.md`);
//! - `stop`, `pre-compact`, `post-compact`, `session-end`: capture what was said since the
//!   session's last capture. With an LLM the exchange is spooled for the daemon's extraction;
//!   without one, what the person explicitly asked to remember is stored as facts.
//!
//! **Never in the agent's way.** A hook always exits 0 and prints nothing but its answer.
//! When the daemon is down (or slower than `hooks.daemon_timeout_ms`), `session-start`
//! answers from the files and says so in one line, and captures go to the files directly:
//! facts to the archive, turns to the spool, both reaching the index when the daemon runs.
//! What goes wrong (a bad payload, a bad transcript line) is reported on stderr and skipped.
//!
//! The hook process opens no index and loads no model: it asks the daemon.

pub(crate) mod client;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::service::token;
use client::Daemon;
use memfold_core::memory::agents::capture::{self, Conversation};
use memfold_core::memory::agents::{self, Agent, Role, Said};
use memfold_core::memory::requests::{Add, Recall};
use memfold_core::memory::views::{DocKind, Hit};
use memfold_core::memory::{Home, Root, ingest, text};
use memfold_store::config::{Config, Overrides};

/// The events a hook answers.
pub use memfold_core::memory::agents::HookEvent as Event;

/// `agent`'s name for the event, as its answers name it.
fn agent_name(event: Event, agent: Agent) -> &'static str {
    agent.event_name(event).unwrap_or(match event {
        Event::PreCompact => "PreCompact",
        Event::PostCompact => "PostCompact",
        _ => "Stop",
    })
}

/// What the agents send (the fields memfold reads; others are ignored). The agents spell them
/// differently: Claude Code, Codex and Gemini CLI `session_id`, `transcript_path`, `cwd`;
/// Copilot CLI `sessionId`, `transcriptPath`, `cwd`; Cursor `conversation_id` and
/// `workspace_roots`; memfold's OpenCode plugin sends the session's `messages`.
#[derive(Debug, Default)]
struct Payload {
    session_id: Option<String>,
    transcript_path: Option<String>,
    cwd: Option<String>,
    prompt: Option<String>,
    compact_summary: Option<String>,
    /// Why a session starts: `startup`, `resume`, `clear`, `compact` (Copilot CLI: `new`).
    source: Option<String>,
    /// Gemini CLI's `AfterAgent`: the model's answer to `prompt`.
    prompt_response: Option<String>,
    /// The whole conversation so far, where the agent gives no transcript file (OpenCode).
    messages: Option<Vec<Said>>,
    /// Which agent's spelling the payload is in, where it tells.
    spelled_by: Option<Agent>,
}

impl Payload {
    /// The fields of a JSON payload, by any of the agents' spellings; a field of the wrong type
    /// is left out and named.
    fn from_value(value: &Value) -> Payload {
        let text = |keys: &[&str]| {
            keys.iter().find_map(|k| match value.get(*k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => None,
                Some(other) => {
                    warn(&format!("the payload's {k} is not a string ({other}); left out"));
                    None
                }
            })
        };
        let cwd = text(&["cwd"])
            .or_else(|| value.get("workspace_roots").and_then(Value::as_array)?.first()?.as_str().map(str::to_string));
        let messages = value.get("messages").and_then(Value::as_array).map(|list| {
            list.iter()
                .filter_map(|m| {
                    let role = match m.get("role").and_then(Value::as_str)? {
                        "user" => Role::User,
                        "assistant" => Role::Assistant,
                        "summary" => Role::Summary,
                        _ => return None,
                    };
                    Some(Said { role, text: m.get("text").and_then(Value::as_str)?.to_string() })
                })
                .collect()
        });
        let spelled_by = if value.get("conversation_id").is_some() || value.get("workspace_roots").is_some() {
            Some(Agent::Cursor)
        } else if value.get("sessionId").is_some() {
            Some(Agent::Copilot)
        } else if value.get("turn_id").is_some() {
            Some(Agent::Codex)
        } else {
            match value.get("hook_event_name").and_then(Value::as_str) {
                Some("BeforeAgent" | "AfterAgent" | "PreCompress") => Some(Agent::Gemini),
                _ => None,
            }
        };
        Payload {
            session_id: text(&["session_id", "conversation_id", "sessionId"]),
            transcript_path: text(&["transcript_path", "transcriptPath"]),
            cwd,
            prompt: text(&["prompt"]),
            compact_summary: text(&["compact_summary"]),
            source: text(&["source"]),
            prompt_response: text(&["prompt_response"]),
            messages,
            spelled_by,
        }
    }
}

/// The most a payload may be (a prompt can be long; a payload is never megabytes of JSON).
const MAX_PAYLOAD: u64 = 8 << 20;

/// Run the hook for `event`; always 0.
pub fn run(overrides: &Overrides, event: Event, agent: Option<Agent>) -> i32 {
    let answer = std::panic::catch_unwind(|| {
        let payload = read_payload();
        let agent = agent.unwrap_or_else(|| guess_agent(&payload));
        answer(overrides, event, agent, &payload)
    });
    match answer {
        Ok(Some(out)) => println!("{out}"),
        Ok(None) => {}
        Err(panic) => warn(&format!("failed: {}", memfold_store::sys::panic_message(&*panic))),
    }
    0
}

/// A line on stderr: the agent logs it, the person sees it in the agent's debug view.
fn warn(message: &str) {
    eprintln!("memfold hook: {message}");
}

/// The payload from stdin (read with a deadline: an agent that never closes stdin does not
/// hold the hook).
fn read_payload() -> Payload {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::stdin().lock().take(MAX_PAYLOAD).read_to_end(&mut bytes);
        let _ = tx.send(read.map(|_| bytes));
    });
    let bytes = match rx.recv_timeout(Duration::from_secs(3)) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            warn(&format!("reading the payload: {e}"));
            return Payload::default();
        }
        Err(_) => {
            warn("no payload on stdin within 3 s");
            return Payload::default();
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        warn("the payload is empty");
        return Payload::default();
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Payload::from_value(&value),
        Ok(_) => {
            warn("the payload is not a JSON object");
            Payload::default()
        }
        Err(e) => {
            warn(&format!("the payload is not JSON ({e})"));
            Payload::default()
        }
    }
}

/// The agent of a hook wired by hand (`setup` names it): told by the payload's spelling, a
/// Codex transcript, else Claude Code.
fn guess_agent(payload: &Payload) -> Agent {
    let codex_transcript =
        payload.transcript_path.as_deref().is_some_and(|p| agents::is_codex_transcript(Path::new(p)));
    match payload.spelled_by {
        Some(agent) => agent,
        None if codex_transcript => Agent::Codex,
        None => Agent::ClaudeCode,
    }
}

/// Where the hook reads and writes: the root (a space's, in a home), the project's name,
/// the daemon if one answers, and a line to tell the agent when something is off.
struct Target {
    root: Root,
    config: Config,
    project: String,
    daemon: Option<Daemon>,
}

/// The memory this hook works on (see [`agents::locate`]), and its daemon with the token it
/// wants: a space's through the home's operator token, a root's with its own.
fn target(overrides: &Overrides, payload: &Payload) -> Result<Target, String> {
    let cwd = payload.cwd.as_deref().map(PathBuf::from).or_else(|| std::env::current_dir().ok()).unwrap_or_default();
    let located = agents::locate(overrides, &cwd)?;
    located.notes.iter().for_each(|note| warn(note));
    let (token, prefix) = match &located.space {
        None => (root_token(&located.config, &located.root), String::new()),
        Some((home, space)) => (operator_token(&located.config, home), format!("/spaces/{space}")),
    };
    let daemon = located.daemon.map(|addr| Daemon { addr, token, prefix });
    Ok(Target { root: located.root, config: located.config, project: located.project, daemon })
}

/// The home's operator token (the configured one, else the home's token file, made if need be).
fn operator_token(config: &Config, home: &Home) -> Option<String> {
    match config.server_token_env() {
        Some(token) => Some(token),
        None => token::ensure(&home.token_file()).ok(),
    }
}

/// The token of a root's daemon, if it wants one.
fn root_token(config: &Config, root: &Root) -> Option<String> {
    match token::resolve(config, root, None) {
        Ok(token::Auth::Token { token, .. }) => Some(token),
        _ => None,
    }
}

/// The hook's answer for `event` (nothing to print for the capturing events).
fn answer(overrides: &Overrides, event: Event, agent: Agent, payload: &Payload) -> Option<String> {
    let target = match target(overrides, payload) {
        Ok(target) => target,
        Err(e) => {
            warn(&e);
            return match event {
                Event::SessionStart => context(agent, event, Some(&format!("memfold: {e}"))),
                _ => context(agent, event, None),
            };
        }
    };
    match event {
        Event::SessionStart => {
            if target.config.llm.enabled() {
                hand_over(&target);
            }
            context(agent, event, Some(&session_start(&target, agent, payload)))
        }
        Event::UserPromptSubmit => context(agent, event, prompt(&target, agent, payload).as_deref()),
        Event::Stop | Event::PreCompact | Event::PostCompact | Event::SessionEnd => {
            if let Err(e) = capture(&target, agent, payload) {
                warn(&e);
            }
            if event == Event::SessionEnd
                && let Some(session) = payload.session_id.as_deref().filter(|s| !s.is_empty())
            {
                agents::session_ended(&target.root, agent, session);
            }
            context(agent, event, None)
        }
    }
}

/// The agent's shape for text added to the model's context (none: what the event prints with
/// nothing to add, mostly nothing):
/// - Claude Code, Codex, Gemini CLI: `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`
///   under the agent's name for the event;
/// - Cursor: `{"additional_context"}` at session start; before a prompt `{"continue": true}`
///   with `additional_context` (which Cursor 3.20 reads there, though its docs list only
///   `continue` and `user_message`);
/// - Copilot CLI and memfold's OpenCode plugin: `{"additionalContext"}`.
///
/// The context goes to the agent's model: every secret in it is masked, whatever
/// `ingest.secrets` let into the files (a hand edit of `MEMORY.md` or `memory.md`, `allow`).
fn context(agent: Agent, event: Event, text: Option<&str>) -> Option<String> {
    let prompt = event == Event::UserPromptSubmit;
    let Some(text) = text else {
        return (agent == Agent::Cursor && prompt).then(|| json!({ "continue": true }).to_string());
    };
    let text = text::mask(text);
    let answer = match agent {
        Agent::ClaudeCode | Agent::Codex | Agent::Gemini => {
            json!({ "hookSpecificOutput": { "hookEventName": agent_name(event, agent), "additionalContext": text } })
        }
        Agent::Cursor if prompt => json!({ "continue": true, "additional_context": text }),
        Agent::Cursor => json!({ "additional_context": text }),
        Agent::Copilot | Agent::OpenCode => json!({ "additionalContext": text }),
    };
    Some(answer.to_string())
}

impl Target {
    fn deadline(&self) -> Duration {
        Duration::from_millis(self.config.hooks.daemon_timeout_ms)
    }

    /// A search through the daemon: the hits, or why there are none.
    fn search(&self, query: &str, params: &[(&str, String)]) -> Result<Vec<Hit>, String> {
        let daemon = self.daemon.as_ref().ok_or("the daemon is not running")?;
        let mut query_string = url::form_urlencoded::Serializer::new(String::new());
        query_string.append_pair("q", query);
        for (key, value) in params {
            query_string.append_pair(key, value);
        }
        #[derive(serde::Deserialize)]
        struct Found {
            hits: Vec<Hit>,
        }
        let answer = daemon.get(&format!("/search?{}", query_string.finish()), self.deadline())?;
        match answer.status {
            200 => answer.read::<Found>().map(|found| found.hits),
            status => Err(format!("the daemon answered {status}: {}", answer.error())),
        }
    }
}

/// `MEMORY.md`, then the entries most relevant to the project, within the cap, ending with
/// how to see more. What it tells starts the session's record of what it was told (a new
/// session, or one whose context was compacted), so the prompts do not repeat it.
fn session_start(target: &Target, agent: Agent, payload: &Payload) -> String {
    let cap = target.config.hooks.session_start_max_chars;
    let project = target.project.replace(['-', '_', '.'], " ");
    let mut footer = format!(
        "More: the memfold MCP tool memory_search, or `memfold search \"{}\"` in a shell.",
        if project.trim().is_empty() { "QUERY" } else { project.trim() }
    );
    let (memory_md, more_lines) = agents::memory_md_head(&target.root, cap * 4);
    let mut relevant = Vec::new();
    if target.daemon.is_none() {
        footer.insert_str(
            0,
            "memfold: the daemon is not running, so this is MEMORY.md alone and captures go straight to the files \
             until `memfold serve` runs.\n",
        );
    } else if !project.trim().is_empty() {
        match target.search(&project, &[("k", "10".into()), ("recall", "false".into())]) {
            Ok(hits) => {
                for hit in hits.into_iter().filter(|h| h.kind == DocKind::Entry) {
                    if !memory_md.contains(hit.text.trim()) {
                        relevant.push((text::hit_line(&hit), hit));
                    }
                }
            }
            Err(e) => {
                warn(&format!("searching for the project: {e}"));
                footer.insert_str(0, "memfold: the daemon did not answer in time; this is MEMORY.md alone.\n");
            }
        }
    }
    let mut out = String::new();
    let budget = cap.saturating_sub(footer.chars().count() + 2);
    let mut relevant_text = String::new();
    let session = payload.session_id.as_deref().filter(|s| !s.is_empty());
    let mut told = Vec::new();
    if !relevant.is_empty() {
        relevant_text = format!("\n## Relevant to {} (memfold)\n", target.project);
        for (line, hit) in &relevant {
            if relevant_text.chars().count() + line.chars().count() + 1 > budget / 3 {
                break;
            }
            relevant_text.push_str(line);
            relevant_text.push('\n');
            told.push((hit.id.clone(), hit.text.clone()));
        }
    }
    // A resumed session still holds what it was told; a new, cleared or compacted one does not.
    let resumed = payload.source.as_deref() == Some("resume");
    if let Some(session) = session
        && let Err(e) = agents::told_at_start(&target.root, agent, session, resumed, &told)
    {
        warn(&format!("recording what the session was told: {e}"));
    }
    let memory_budget = budget.saturating_sub(relevant_text.chars().count());
    if !memory_md.trim().is_empty() {
        out.push_str(&fit_lines(&memory_md, memory_budget, more_lines));
        out.push('\n');
    }
    out.push_str(&relevant_text);
    out.push('\n');
    out.push_str(&footer);
    debug_assert!(out.chars().count() <= cap.max(footer.chars().count() + 2));
    out
}

/// As many whole lines of `text` as fit in `budget` characters, with a line that says how many
/// were left out (and `more` lines past what was read).
fn fit_lines(text: &str, budget: usize, more: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut used = 0;
    for (i, line) in lines.iter().enumerate() {
        let left = lines.len() - i + more;
        let note = format!("… ({left} more lines of MEMORY.md)");
        let need = line.chars().count() + 1;
        if used + need + note.chars().count() + 1 > budget {
            if used + note.chars().count() < budget {
                out.push_str(&note);
            }
            return out;
        }
        out.push_str(line);
        out.push('\n');
        used += need;
    }
    if more > 0 {
        out.push_str(&format!("… ({more} more lines of MEMORY.md)"));
    }
    out
}

/// The entries the daemon recalls for the prompt (`POST /recall`): above the embedder's bar,
/// close to the best, none the session was told already, within the budget; none, nothing.
/// Each line names its entry and date, so the agent can ask for its history.
fn prompt(target: &Target, agent: Agent, payload: &Payload) -> Option<String> {
    let prompt = payload.prompt.as_deref().unwrap_or_default().trim();
    if prompt.is_empty() {
        return None;
    }
    let daemon = target.daemon.as_ref()?;
    let request = Recall {
        prompt: prompt.chars().take(1_000).collect(),
        agent: Some(agent.name().to_string()),
        session: payload.session_id.clone(),
        budget: None,
    };
    #[derive(serde::Deserialize)]
    struct Recalled {
        text: String,
    }
    let recalled = daemon.post("/recall", &request, target.deadline()).and_then(|answer| match answer.status {
        200 => answer.read::<Recalled>(),
        status => Err(format!("the daemon answered {status}: {}", answer.error())),
    });
    match recalled {
        Ok(recalled) => (!recalled.text.trim().is_empty())
            .then(|| format!("Recalled by memfold (ids for memory_get and `memfold history`):\n{}", recalled.text)),
        Err(e) => {
            warn(&format!("recall for the prompt: {e}"));
            None
        }
    }
}

/// Capture what was said since the session's last capture (see [`capture::capture`]): without
/// an LLM, the facts asked to be remembered go through the daemon when it answers, else to the
/// archive directly; with one, the daemon is told that turns wait in the spool.
fn capture(target: &Target, agent: Agent, payload: &Payload) -> Result<(), String> {
    let conversation = Conversation {
        session: payload.session_id.clone().unwrap_or_default(),
        transcript: payload.transcript_path.clone(),
        messages: payload.messages.clone(),
        turn: turn_of(payload),
        compact_summary: payload.compact_summary.clone(),
    };
    let store = |facts: Add| store_facts(target, facts);
    capture::capture(&target.root, &target.config, agent, &conversation, store, &mut |note| warn(&note))?;
    if target.config.llm.enabled() {
        hand_over(target);
    }
    Ok(())
}

/// The turn a payload carries itself (Gemini CLI's `AfterAgent`: the prompt and the answer), for
/// when there is no transcript to read.
fn turn_of(payload: &Payload) -> Vec<Said> {
    match (&payload.prompt, &payload.prompt_response) {
        (Some(prompt), Some(response)) => vec![
            Said { role: Role::User, text: prompt.clone() },
            Said { role: Role::Assistant, text: response.clone() },
        ],
        _ => Vec::new(),
    }
}

/// Tell the daemon that turns wait in the spool (it extracts them in the background).
fn hand_over(target: &Target) {
    let waiting = agents::waiting(&target.root);
    if waiting == 0 {
        return;
    }
    match &target.daemon {
        Some(daemon) => match daemon.post_empty("/turns/spooled", target.deadline()) {
            Ok(answer) if answer.status == 202 => {}
            Ok(answer) => warn(&format!(
                "the daemon answered {} ({}); {waiting} turns wait in the spool",
                answer.status,
                answer.error()
            )),
            Err(e) => warn(&format!("the daemon did not take the turns ({e}); {waiting} wait in the spool")),
        },
        None => {
            warn(&format!("the daemon is not running; {waiting} turns wait in the spool until `memfold serve` runs"))
        }
    }
}

/// Store facts through the daemon when it answers, else in the archive directly (through the
/// same ingest check, with the configured clock).
fn store_facts(target: &Target, facts: Add) -> Result<(), String> {
    if let Some(daemon) = &target.daemon {
        match daemon.post("/facts", &facts, target.deadline()) {
            Ok(answer) if answer.status == 200 => return Ok(()),
            Ok(answer) => warn(&format!(
                "the daemon answered {} ({}); the facts go to the archive directly",
                answer.status,
                answer.error()
            )),
            Err(e) => warn(&format!("the daemon did not take the facts ({e}); they go to the archive directly")),
        }
    }
    ingest::append_without_daemon(&target.root, &target.config, facts.facts())
        .map_err(|e| format!("appending to the archive: {e}"))?;
    Ok(())
}
