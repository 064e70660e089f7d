//! Capture what an agent's session said since its last capture: with an LLM, the exchange is
//! spooled for the daemon's extraction; without one, what the person explicitly asked to
//! remember is stored as facts. The session's position moves only once what was read is
//! stored, so a capture killed halfway stores the same part again, never a part twice (see
//! `memfold_store::agents::capture`).

use std::path::{Path, PathBuf};

use memfold_store::Root;
use memfold_store::agents::Agent;
use memfold_store::agents::capture::{Capture, Position, Spooled};
use memfold_store::agents::transcript::{self, Role, Said};
use memfold_store::archive::NewFact;
use memfold_store::config::Config;

use crate::memory::requests::Add;
use crate::planning::remember;

/// The most characters of conversation in one spooled turn (a longer capture is spooled in
/// parts, each extracted on its own).
const TURN_CHARS: usize = 24_000;

/// The position of a capture from a payload's messages (not a file).
const MESSAGES: &str = "<payload messages>";

/// What an agent tells of a session when it asks for a capture.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    pub session: String,
    /// The session's transcript, as the agent names it (`~` allowed).
    pub transcript: Option<String>,
    /// The whole conversation so far, where the agent gives no transcript file (OpenCode).
    pub messages: Option<Vec<Said>>,
    /// The turn the payload carries itself (Gemini CLI's `AfterAgent`), for when there is no
    /// transcript to read.
    pub turn: Vec<Said>,
    /// A compaction's summary, stored once per summary.
    pub compact_summary: Option<String>,
}

/// Capture what `conversation` said since its last capture in `root`. Without an LLM the facts
/// go to `store` (the door hands them to the daemon, else to the archive directly); the
/// position moves only once `store` succeeds. What is skipped (a bad transcript line, a
/// credential under `ingest.secrets = "refuse"`, a request over `ingest.max_fact_bytes`) is
/// told to `warn`.
pub fn capture(
    root: &Root,
    config: &Config,
    agent: Agent,
    conversation: &Conversation,
    store: impl FnOnce(Add) -> Result<(), String>,
    warn: &mut dyn FnMut(String),
) -> Result<(), String> {
    let session = conversation.session.as_str();
    if session.is_empty() {
        return Err("the payload names no session_id; nothing captured".to_string());
    }
    let capture = Capture::open(root, agent.name(), session).map_err(|e| e.to_string())?;
    let (mut said, mut position, from) = read_since(agent, conversation, &capture.position, warn);
    if let Some(summary) = conversation.compact_summary.as_deref().filter(|s| !s.trim().is_empty()) {
        let hash = memfold_store::content_hash(summary);
        if position.summary != hash {
            said.push(Said { role: Role::Summary, text: summary.to_string() });
            position.summary = hash;
        }
    }
    let source = format!("{}:{session}", agent.name());
    if !said.is_empty() {
        if config.llm.enabled() {
            spool(root, config, &capture, &said, &source, from, warn)?;
        } else {
            let facts = requests(config, &said, &source, warn);
            if !facts.is_empty() {
                store(Add::of(facts))?;
            }
        }
    }
    capture.save(&position).map_err(|e| e.to_string())
}

/// What was said since `position`, the position after it, and the offset it starts at: from
/// the payload's messages, else the transcript, else the payload's own turn.
fn read_since(
    agent: Agent,
    conversation: &Conversation,
    position: &Position,
    warn: &mut dyn FnMut(String),
) -> (Vec<Said>, Position, u64) {
    let mut position = position.clone();
    let mut from = position.offset;
    let transcript_path = conversation
        .transcript
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| memfold_store::config::expand_tilde(Path::new(p)))
        .or_else(|| derived_transcript(agent, &conversation.session).filter(|p| p.is_file()));
    if let Some(messages) = &conversation.messages {
        let path = PathBuf::from(MESSAGES);
        if position.transcript != path || (messages.len() as u64) < position.offset {
            position = Position { transcript: path, offset: 0, summary: position.summary };
            from = 0;
        }
        let said = messages[position.offset as usize..].to_vec();
        position.offset = messages.len() as u64;
        return (said, position, from);
    }
    let Some(path) = transcript_path else {
        return (conversation.turn.clone(), position, from);
    };
    if position.transcript != path {
        position = Position { transcript: path.clone(), offset: 0, summary: position.summary };
        from = 0;
    }
    match transcript::read_since(&path, position.offset) {
        Ok(read) => {
            for skipped in &read.skipped {
                warn(format!("{}: {skipped}", path.display()));
            }
            position.offset = read.end;
            (read.said, position, from)
        }
        Err(e) => {
            warn(format!("reading the transcript {}: {e}", path.display()));
            (conversation.turn.clone(), position, from)
        }
    }
}

/// Where an agent keeps a session's transcript when its payload does not say: Copilot CLI's
/// `session-state/<id>/events.jsonl` (its session end names no transcript).
fn derived_transcript(agent: Agent, session: &str) -> Option<PathBuf> {
    let safe = !session.is_empty() && session.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match agent {
        Agent::Copilot if safe => {
            let home = memfold_store::agents::user_home().ok()?;
            Some(memfold_store::agents::copilot_home(&home).join("session-state").join(session).join("events.jsonl"))
        }
        _ => None,
    }
}

/// Spool the conversation for the daemon's extraction (in the root: it survives a daemon that
/// is down).
fn spool(
    root: &Root,
    config: &Config,
    capture: &Capture,
    said: &[Said],
    source: &str,
    from: u64,
    warn: &mut dyn FnMut(String),
) -> Result<(), String> {
    let mut parts: Vec<String> = vec![String::new()];
    for s in said {
        let text: String = s.text.chars().take(TURN_CHARS / 2).collect();
        let line = format!("{}: {}\n", s.role.label(), text.trim());
        if parts.last().is_some_and(|p| p.chars().count() + line.chars().count() > TURN_CHARS) {
            parts.push(String::new());
        }
        parts.last_mut().expect("one part at least").push_str(&line);
    }
    let now = config.clock().now();
    // The spool is a file memfold writes: a credential is held to `ingest.secrets` before it.
    let policy = config.ingest.secrets;
    for (i, text) in parts.into_iter().enumerate().filter(|(_, t)| !t.trim().is_empty()) {
        let text = match memfold_store::secrets::hold(policy, &text) {
            Ok((held, _)) => held,
            Err(first) => {
                warn(format!(
                    "a part of the exchange holds a {}; not captured (ingest.secrets = \"refuse\")",
                    first.kind
                ));
                continue;
            }
        };
        let turn = Spooled { text, date: None, source: source.to_string(), spooled: now };
        capture.spool(root, &turn, from + i as u64).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What the person explicitly asked to remember in `said`, as facts from `source`.
fn requests(config: &Config, said: &[Said], source: &str, warn: &mut dyn FnMut(String)) -> Vec<NewFact> {
    let max = config.ingest.max_fact_bytes;
    said.iter()
        .filter(|s| s.role == Role::User)
        .flat_map(|s| remember::requests(&s.text))
        .filter(|text| {
            let fits = text.len() <= max;
            if !fits {
                warn(format!(
                    "a request to remember of {} bytes is over ingest.max_fact_bytes ({max}); not stored",
                    text.len()
                ));
            }
            fits
        })
        .map(|text| NewFact { text, date: None, source: Some(source.to_string()) })
        .collect()
}
