//! The files of the agents memfold plugs into, Claude Code and Codex: their transcripts
//! ([`transcript`]), what a hook's capture keeps in a root ([`capture`]), their settings files
//! that `memfold setup` edits ([`settings`]), and the memories `memfold import` brings in
//! ([`imports`]).

pub mod capture;
pub mod imports;
pub mod settings;
pub mod transcript;

/// An agent memfold plugs into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    Codex,
}

impl Agent {
    /// The name in commands, sources (`claude-code:<session>`) and messages.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
        }
    }

    pub fn parse(name: &str) -> Result<Agent, String> {
        match name {
            "claude-code" | "claude" => Ok(Agent::ClaudeCode),
            "codex" => Ok(Agent::Codex),
            other => Err(format!("{other:?} is not an agent memfold knows: claude-code or codex")),
        }
    }
}

/// The first lines of a text file, up to `max` bytes (whole lines, lossy UTF-8), and how many
/// lines were left unread (a `MEMORY.md` of megabytes costs a session start nothing more).
pub fn read_head(path: &std::path::Path, max: usize) -> (String, usize) {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else { return (String::new(), 0) };
    let mut reader = std::io::BufReader::new(file);
    let mut head = Vec::with_capacity(max.min(1 << 20));
    if reader.by_ref().take(max as u64).read_to_end(&mut head).is_err() {
        return (String::new(), 0);
    }
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    if !rest.is_empty()
        && let Some(end) = head.iter().rposition(|b| *b == b'\n')
    {
        rest.splice(0..0, head.drain(end + 1..));
    }
    let more = rest.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count();
    (String::from_utf8_lossy(&head).into_owned(), more)
}
