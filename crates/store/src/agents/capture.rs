//! What a hook's capture keeps in a root: where it last stopped reading each session's
//! transcript (`.memfold/hooks/`), and the turns waiting for the daemon's extraction
//! (`.memfold/spool/`).
//!
//! A capture takes the session's lock, reads from its position, stores what it found (facts
//! in the archive, or a turn in the spool), and only then moves the position: run twice, the
//! second finds nothing new; killed before the move, the next run stores the same part again
//! under the same spool name, so a spooled turn is never extracted twice.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Root;
use crate::atomic::{WriteError, write_atomic};
use crate::sys::lock::{LockError, LockGuard};

/// Where a session's capture stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The transcript the offset is in (a session moved to another file starts again).
    pub transcript: PathBuf,
    pub offset: u64,
    /// The hash of the last compaction summary stored from a hook's payload.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
}

/// A short, path-safe name for an agent's session id.
fn session_key(agent: &str, session: &str) -> String {
    let digest = Sha256::digest(format!("{agent}\0{session}").as_bytes());
    let hex: String = digest.iter().take(10).map(|b| format!("{b:02x}")).collect();
    let agent: String = agent.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    format!("{agent}-{hex}")
}

fn hooks_dir(root: &Root) -> PathBuf {
    root.state_dir().join("hooks")
}

/// What the recall of one agent session told the agent so far: entry id → the content hash it
/// had then (`.memfold/hooks/<session>.told.json`). An entry told once is not told again in the
/// session unless it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Told {
    pub entries: std::collections::HashMap<String, String>,
}

fn told_file(root: &Root, agent: &str, session: &str) -> PathBuf {
    hooks_dir(root).join(format!("{}.told.json", session_key(agent, session)))
}

impl Told {
    /// What `agent`'s `session` was told (nothing, for a new session or an unreadable file).
    pub fn load(root: &Root, agent: &str, session: &str) -> Told {
        std::fs::read(told_file(root, agent, session))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn save(&self, root: &Root, agent: &str, session: &str) -> Result<(), WriteError> {
        let dir = hooks_dir(root);
        crate::sys::access::create_dir(&dir).map_err(|source| WriteError::Io { path: dir.clone(), source })?;
        let bytes = serde_json::to_vec(self).expect("a map of strings serialises");
        write_atomic(&told_file(root, agent, session), &bytes, None)
    }

    /// Forget the session (it ended), and any session untouched for a week (its end was
    /// never heard).
    pub fn remove(root: &Root, agent: &str, session: &str) {
        let _ = std::fs::remove_file(told_file(root, agent, session));
        let Ok(dir) = std::fs::read_dir(hooks_dir(root)) else { return };
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        for entry in dir.flatten() {
            let stale =
                entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age > week));
            if stale && entry.file_name().to_string_lossy().ends_with(".told.json") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// The spool of turns waiting for extraction.
pub fn spool_dir(root: &Root) -> PathBuf {
    root.state_dir().join("spool")
}

/// A session's capture, held while it reads and stores (another hook of the same session
/// waits).
pub struct Capture {
    _lock: LockGuard,
    file: PathBuf,
    key: String,
    pub position: Position,
}

impl Capture {
    /// Take the capture of `agent`'s `session` in `root`.
    pub fn open(root: &Root, agent: &str, session: &str) -> Result<Capture, LockError> {
        let dir = hooks_dir(root);
        let io = |source| LockError::Io { path: dir.clone(), source };
        crate::sys::access::create_dir(&dir).map_err(io)?;
        let key = session_key(agent, session);
        let lock = LockGuard::acquire(&dir.join(format!("{key}.lock")))?;
        let file = dir.join(format!("{key}.json"));
        let position = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        Ok(Capture { _lock: lock, file, key, position })
    }

    /// Record where the capture stopped.
    pub fn save(&self, position: &Position) -> Result<(), WriteError> {
        let bytes = serde_json::to_vec(position).expect("a position serialises");
        write_atomic(&self.file, &bytes, None)
    }

    /// Put a turn in the spool, named by the session, the offset it starts at and its text (the
    /// same part spooled again replaces itself; another part from the same place does not).
    pub fn spool(&self, root: &Root, turn: &Spooled, from: u64) -> Result<PathBuf, WriteError> {
        let dir = spool_dir(root);
        crate::sys::access::create_dir(&dir).map_err(|source| WriteError::Io { path: dir.clone(), source })?;
        // Named by where in the transcript it starts and by what it says: a capture run again
        // after a stop writes the same file again, and two different turns from one place (a
        // compaction summary, then the exchange after it) never share a name.
        let said = &crate::content_hash(&turn.text)[..12];
        let path = dir.join(format!("{}-{from:012}-{said}.json", self.key));
        let bytes = serde_json::to_vec(turn).expect("a turn serialises");
        write_atomic(&path, &bytes, None)?;
        Ok(path)
    }
}

/// A turn in the spool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spooled {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<NaiveDate>,
    pub source: String,
    /// When it was spooled (for the order of extraction).
    pub spooled: chrono::DateTime<chrono::Utc>,
}

/// The spooled turns, oldest first.
pub fn spooled(root: &Root) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(spool_dir(root)) else { return Vec::new() };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), p))
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// A spooled turn, read.
pub fn read_spooled(path: &Path) -> Result<Spooled, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Take an extracted turn out of the spool.
pub fn unspool(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Set a turn that cannot be extracted aside (`spool/failed/`), where a person can read it.
pub fn set_aside(path: &Path) -> std::io::Result<()> {
    let failed = path.parent().unwrap_or(Path::new(".")).join("failed");
    crate::sys::access::create_dir(&failed)?;
    std::fs::rename(path, failed.join(path.file_name().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_is_kept_per_session_and_a_respooled_part_replaces_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let capture = Capture::open(&root, "claude-code", "../../etc/passwd").unwrap();
        assert_eq!(capture.position, Position::default());
        let at = Position { transcript: "/t.jsonl".into(), offset: 42, summary: String::new() };
        capture.save(&at).unwrap();
        let turn = Spooled {
            text: "user: hi".into(),
            date: None,
            source: "claude-code:s".into(),
            spooled: chrono::Utc::now(),
        };
        capture.spool(&root, &turn, 0).unwrap();
        capture.spool(&root, &turn, 0).unwrap();
        drop(capture);
        assert_eq!(spooled(&root).len(), 1);
        assert_eq!(read_spooled(&spooled(&root)[0]).unwrap(), turn);
        assert_eq!(Capture::open(&root, "claude-code", "../../etc/passwd").unwrap().position, at);
        assert_eq!(Capture::open(&root, "codex", "../../etc/passwd").unwrap().position, Position::default());
        for entry in std::fs::read_dir(hooks_dir(&root)).unwrap() {
            assert!(!entry.unwrap().file_name().to_string_lossy().contains(".."));
        }
    }
}
