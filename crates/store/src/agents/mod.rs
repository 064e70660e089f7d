//! The files of the agents memfold plugs into (Claude Code, Codex, Gemini CLI, Cursor, GitHub
//! Copilot CLI, OpenCode) and of the MCP clients it serves: their transcripts
//! ([`transcript`]), what a hook's capture keeps in a root ([`capture`]), their settings files
//! that `memfold setup` edits ([`settings`]), and the memories `memfold import` brings in
//! ([`imports`]).

pub mod capture;
pub mod imports;
pub mod settings;
pub mod transcript;

use std::path::{Path, PathBuf};

/// The user's home folder (`HOME`), where the agents keep their settings and memories.
pub fn user_home() -> Result<PathBuf, String> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).ok_or_else(|| "HOME is not set".to_string())
}

/// Codex's folder: `CODEX_HOME`, else `~/.codex`.
pub fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()).map(PathBuf::from).unwrap_or_else(|| home.join(".codex"))
}

/// Claude Code's auto-memory folder of `project`: `~/.claude/projects/<the project's path,
/// every other character a '-'>/memory`.
pub fn claude_memory_dir(home: &Path, project: &Path) -> PathBuf {
    let name: String =
        project.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    home.join(".claude/projects").join(name).join("memory")
}

/// The hook events memfold answers, in the order a session meets them; each agent calls them by
/// names of its own ([`Agent::events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    Stop,
    PreCompact,
    PostCompact,
    SessionEnd,
}

impl HookEvent {
    pub const ALL: [HookEvent; 6] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::SessionEnd,
    ];

    /// memfold's name for the event (`memfold hook <name>`).
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::UserPromptSubmit => "user-prompt-submit",
            HookEvent::Stop => "stop",
            HookEvent::PreCompact => "pre-compact",
            HookEvent::PostCompact => "post-compact",
            HookEvent::SessionEnd => "session-end",
        }
    }

    pub fn parse(name: &str) -> Result<HookEvent, String> {
        HookEvent::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| format!("{name:?} is not a hook event: {}", HookEvent::ALL.map(HookEvent::name).join(", ")))
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An agent memfold plugs into: its lifecycle hooks (or, for OpenCode, a plugin) and its MCP
/// server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
    Copilot,
    OpenCode,
}

/// How an agent's settings hold its hook handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookLayout {
    /// `{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]}]}}`
    /// (Claude Code, Codex, Gemini CLI); `millis`: the timeout is in milliseconds (Gemini CLI),
    /// else seconds.
    Grouped { millis: bool },
    /// `{"version": 1, "hooks": {event: [{<command key>: "…", <timeout key>: seconds}]}}`
    /// (Cursor: `command`/`timeout`; Copilot CLI: `bash`/`timeoutSec` with `"type": "command"`).
    Flat { command: &'static str, timeout: &'static str, typed: bool },
    /// No hooks file: a plugin memfold writes (OpenCode).
    Plugin,
}

impl Agent {
    pub const ALL: [Agent; 6] =
        [Agent::ClaudeCode, Agent::Codex, Agent::Gemini, Agent::Cursor, Agent::Copilot, Agent::OpenCode];

    /// The name in commands, sources (`claude-code:<session>`) and messages.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Cursor => "cursor",
            Agent::Copilot => "copilot",
            Agent::OpenCode => "opencode",
        }
    }

    /// The agent's own name for people.
    pub fn title(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
            Agent::Cursor => "Cursor",
            Agent::Copilot => "GitHub Copilot CLI",
            Agent::OpenCode => "OpenCode",
        }
    }

    pub fn parse(name: &str) -> Result<Agent, String> {
        match name {
            "claude-code" | "claude" => Ok(Agent::ClaudeCode),
            "codex" => Ok(Agent::Codex),
            "gemini" | "gemini-cli" => Ok(Agent::Gemini),
            "cursor" | "cursor-agent" => Ok(Agent::Cursor),
            "copilot" | "copilot-cli" | "github-copilot" => Ok(Agent::Copilot),
            "opencode" => Ok(Agent::OpenCode),
            other => {
                Err(format!("{other:?} is not an agent memfold knows: {}", Agent::ALL.map(Agent::name).join(", ")))
            }
        }
    }

    /// The agent's hook events memfold answers, each with memfold's name for it (`memfold hook
    /// <name>`), in the order a session meets them.
    pub fn events(self) -> &'static [(&'static str, HookEvent)] {
        match self {
            Agent::ClaudeCode | Agent::Codex => &[
                ("SessionStart", HookEvent::SessionStart),
                ("UserPromptSubmit", HookEvent::UserPromptSubmit),
                ("Stop", HookEvent::Stop),
                ("PreCompact", HookEvent::PreCompact),
                ("PostCompact", HookEvent::PostCompact),
                ("SessionEnd", HookEvent::SessionEnd),
            ],
            Agent::Gemini => &[
                ("SessionStart", HookEvent::SessionStart),
                ("BeforeAgent", HookEvent::UserPromptSubmit),
                ("AfterAgent", HookEvent::Stop),
                ("PreCompress", HookEvent::PreCompact),
                ("SessionEnd", HookEvent::SessionEnd),
            ],
            Agent::Cursor => &[
                ("sessionStart", HookEvent::SessionStart),
                ("beforeSubmitPrompt", HookEvent::UserPromptSubmit),
                ("stop", HookEvent::Stop),
                ("preCompact", HookEvent::PreCompact),
                ("sessionEnd", HookEvent::SessionEnd),
            ],
            Agent::Copilot => &[
                ("sessionStart", HookEvent::SessionStart),
                ("userPromptSubmitted", HookEvent::UserPromptSubmit),
                ("agentStop", HookEvent::Stop),
                ("preCompact", HookEvent::PreCompact),
                ("sessionEnd", HookEvent::SessionEnd),
            ],
            Agent::OpenCode => &[
                ("session.created", HookEvent::SessionStart),
                ("chat.message", HookEvent::UserPromptSubmit),
                ("session.idle", HookEvent::Stop),
                ("session.compacted", HookEvent::PostCompact),
                ("session.deleted", HookEvent::SessionEnd),
            ],
        }
    }

    /// The agent's name for memfold's event `ours`.
    pub fn event_name(self, ours: HookEvent) -> Option<&'static str> {
        self.events().iter().find(|(_, o)| *o == ours).map(|(theirs, _)| *theirs)
    }

    pub fn hook_layout(self) -> HookLayout {
        match self {
            Agent::ClaudeCode | Agent::Codex => HookLayout::Grouped { millis: false },
            Agent::Gemini => HookLayout::Grouped { millis: true },
            Agent::Cursor => HookLayout::Flat { command: "command", timeout: "timeout", typed: false },
            Agent::Copilot => HookLayout::Flat { command: "bash", timeout: "timeoutSec", typed: true },
            Agent::OpenCode => HookLayout::Plugin,
        }
    }

    /// The programs that tell the agent is installed on this machine.
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            Agent::ClaudeCode => &["claude"],
            Agent::Codex => &["codex"],
            Agent::Gemini => &["gemini"],
            Agent::Cursor => &["cursor", "cursor-agent"],
            Agent::Copilot => &["copilot"],
            Agent::OpenCode => &["opencode"],
        }
    }

    /// The agent's folder in the user's home, which it makes on first run.
    pub fn folder(self, home: &Path) -> PathBuf {
        match self {
            Agent::ClaudeCode => home.join(".claude"),
            Agent::Codex => codex_home(home),
            Agent::Gemini => home.join(".gemini"),
            Agent::Cursor => home.join(".cursor"),
            Agent::Copilot => copilot_home(home),
            Agent::OpenCode => opencode_config(home),
        }
    }
}

/// Copilot CLI's folder: `COPILOT_HOME`, else `~/.copilot`.
pub fn copilot_home(home: &Path) -> PathBuf {
    std::env::var_os("COPILOT_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".copilot"))
}

/// OpenCode's configuration folder: `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`.
pub fn opencode_config(home: &Path) -> PathBuf {
    config_dir(home).join("opencode")
}

/// The user's configuration folder: `XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_dir(home: &Path) -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"))
}

/// The files of `dir` with extension `ext`, sorted (none when there is no such folder).
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

/// Whether a program is on `PATH`.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// The first lines of a text file, up to `max` bytes (whole lines, lossy UTF-8), and how many
/// lines (not empty) were left unread: a `MEMORY.md` of megabytes is counted, not held.
pub fn read_head(path: &Path, max: usize) -> (String, usize) {
    use std::io::{BufRead, Read};
    let Ok(file) = std::fs::File::open(path) else { return (String::new(), 0) };
    let mut reader = std::io::BufReader::new(file);
    let mut head = Vec::with_capacity(max.min(1 << 20));
    if reader.by_ref().take(max as u64).read_to_end(&mut head).is_err() {
        return (String::new(), 0);
    }
    let (mut more, mut in_line) = (0, false);
    let mut count = |bytes: &[u8]| {
        for b in bytes {
            match (*b == b'\n', in_line) {
                (true, true) => (more, in_line) = (more + 1, false),
                (false, _) => in_line = true,
                (true, false) => {}
            }
        }
    };
    if reader.fill_buf().is_ok_and(|rest| !rest.is_empty()) {
        // The line the limit cut goes to the count with the rest.
        let cut = head.iter().rposition(|b| *b == b'\n').map_or(0, |end| end + 1);
        count(&head[cut..]);
        head.truncate(cut);
    }
    while let Ok(chunk) = reader.fill_buf() {
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        count(chunk);
        reader.consume(n);
    }
    (String::from_utf8_lossy(&head).into_owned(), more + usize::from(in_line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_whole_lines_and_the_rest_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("MEMORY.md");
        std::fs::write(&path, "first line\nsecond line\n\nthird\nfourth").unwrap();
        assert_eq!(read_head(&path, 15), ("first line\n".to_string(), 3), "cut inside the second line");
        assert_eq!(read_head(&path, 11), ("first line\n".to_string(), 3), "cut at a line's end");
        assert_eq!(read_head(&path, 1000), ("first line\nsecond line\n\nthird\nfourth".to_string(), 0));
        assert_eq!(read_head(&dir.path().join("none.md"), 10), (String::new(), 0));
    }
}
