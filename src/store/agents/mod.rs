//! The files of the agents memfold plugs into, Claude Code and Codex: their transcripts
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
