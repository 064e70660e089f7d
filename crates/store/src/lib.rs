//! The markdown truth: where each file of a memory root lives, and how it is read and written.
//!
//! [`archive`] holds the append-only daily logs, [`entries`] parses and renders
//! `consolidated/memory.md` and `history.md`, and [`atomic`] writes whole files safely.
//! Everything else in memfold is derived from these files.
//!
//! Beside them sit [`config`] (`memfold.toml`, read as memfold reads it) and [`sys`], what
//! the operating system provides. This crate knows nothing of the index, the models or a
//! server: it builds and tests without LanceDB, candle, axum or an HTTP client.

pub mod config;
pub mod sys;

pub mod agents;
pub mod archive;
pub mod atomic;
pub mod caches;
pub mod commit;
pub mod egress;
pub mod entries;
pub mod git;
pub mod home;
pub mod ledger;
pub mod listening;
pub mod project;
pub mod promoted;
pub mod recall;
pub mod runs;
pub mod secrets;
pub mod signin;
pub mod sources;
pub mod state;
pub mod token;
pub mod uses;
pub mod verify;

use std::fmt;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The paths of one memory root (docs/files.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    pub fn new(dir: impl Into<PathBuf>) -> Root {
        Root { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn archive_dir(&self) -> PathBuf {
        self.dir.join("archive")
    }
    pub fn archive_file(&self, date: NaiveDate) -> PathBuf {
        self.archive_dir().join(format!("{date}.md"))
    }
    pub fn consolidated_dir(&self) -> PathBuf {
        self.dir.join("consolidated")
    }
    pub fn memory(&self) -> PathBuf {
        self.consolidated_dir().join("memory.md")
    }
    pub fn history(&self) -> PathBuf {
        self.consolidated_dir().join("history.md")
    }
    pub fn memory_md(&self) -> PathBuf {
        self.dir.join("MEMORY.md")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join(".memfold")
    }
    pub fn state_json(&self) -> PathBuf {
        self.state_dir().join("state.json")
    }
    pub fn journal(&self) -> PathBuf {
        self.state_dir().join("journal.jsonl")
    }
    pub fn tombstones(&self) -> PathBuf {
        self.state_dir().join("tombstones.jsonl")
    }
    pub fn recall(&self) -> PathBuf {
        self.state_dir().join("recall.jsonl")
    }
    pub fn plans_dir(&self) -> PathBuf {
        self.dir.join(runs::PLANS)
    }
    /// One record per applied run.
    pub fn runs_dir(&self) -> PathBuf {
        self.dir.join(runs::RUNS)
    }
    /// What the last sync did and where it stands.
    pub fn sync_state(&self) -> PathBuf {
        self.state_dir().join("sync.json")
    }
    /// Present while a sync's merge is under way (a crash leaves it for the next sync).
    pub fn sync_merge_marker(&self) -> PathBuf {
        self.state_dir().join("sync-merge")
    }
    /// The git repository a sync keeps the root in.
    pub fn git_dir(&self) -> PathBuf {
        self.dir.join(".git")
    }
    /// What a sync leaves out of the repository.
    pub fn gitignore(&self) -> PathBuf {
        self.dir.join(".gitignore")
    }
    /// The daemon's bearer token (`crate::service::token`).
    pub fn token_file(&self) -> PathBuf {
        self.state_dir().join("token")
    }
    pub fn consolidate_lock(&self) -> PathBuf {
        self.state_dir().join("consolidate.lock")
    }
    pub fn serve_lock(&self) -> PathBuf {
        self.state_dir().join("serve.lock")
    }
    /// The review page's sign-in codes ([`signin`]).
    pub fn codes_dir(&self) -> PathBuf {
        self.state_dir().join("ui-codes")
    }
    /// Every request sent to an LLM or embedding endpoint ([`egress`]).
    pub fn egress_file(&self) -> PathBuf {
        self.state_dir().join("egress.jsonl")
    }
    /// Where the running daemon listens ([`listening`]).
    pub fn listening_file(&self) -> PathBuf {
        self.state_dir().join("serve.json")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.state_dir().join("index")
    }
    pub fn embed_cache_dir(&self) -> PathBuf {
        self.state_dir().join("embed-cache")
    }
    /// `memory.md` as memfold last wrote or reconciled it, to recognise entries deleted by hand.
    pub fn memory_seen(&self) -> PathBuf {
        self.state_dir().join("memory.seen.md")
    }

    /// The path relative to the root with `/` separators, as stored in the index and in messages.
    pub fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.dir).unwrap_or(path);
        rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
    }

    /// Whether `init` has run here.
    pub fn is_initialized(&self) -> bool {
        self.state_dir().is_dir() && self.archive_dir().is_dir()
    }

    /// `Err` with what to do, when the folder is not an initialised root.
    pub fn check_initialized(&self) -> Result<(), String> {
        if self.is_initialized() {
            return Ok(());
        }
        let dir = self.dir.display();
        Err(format!("{dir} is not a memfold root; run `memfold init --root {dir}` first"))
    }

    /// Create the folders and empty files of a root; existing files are left alone.
    pub fn init(&self) -> std::io::Result<()> {
        for dir in [self.dir.clone(), self.archive_dir(), self.consolidated_dir(), self.state_dir(), self.plans_dir()] {
            crate::sys::access::create_dir(&dir)?;
        }
        for file in [self.memory(), self.history(), self.memory_md()] {
            if !file.exists() {
                crate::sys::access::open_append(&file)?;
            }
        }
        Ok(())
    }
}

/// Hex sha256 of some bytes: the content hash used for optimistic writes and the index.
pub fn content_hash(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// Bytes the files under `dir` take, counted through every subfolder (0 when it is missing or
/// unreadable; links are not followed).
pub fn tree_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => tree_bytes(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

/// Text with every control character that is not whitespace made visible: a C0 control or DEL
/// becomes its Unicode control picture (`\0` → `␀`, ESC → `␛`, DEL → `␡`), a C1 control `�`.
///
/// Everything memfold writes into a markdown file from outside text passes through this: a raw
/// NUL makes grep and git take the file for binary (and markdown readers turn it into `�`
/// anyway), and an escape sequence would drive the terminal of whoever prints the file.
pub fn visible_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| c.is_control() && !c.is_whitespace();
    if !text.contains(hidden) {
        return text.into();
    }
    text.chars()
        .map(|c| match c {
            c if !hidden(c) => c,
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
            _ => '\u{fffd}',
        })
        .collect::<String>()
        .into()
}

/// Serialise metadata for an HTML comment: JSON with no `<` or `>`, so it can neither close
/// the comment (`-->`) nor hold anything that looks like the start of one (`<!--f `).
pub(crate) fn comment_json<T: Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "{}".into());
    // `<` and `>` only occur inside JSON strings; \u003c and \u003e read back as the same text.
    json.replace('<', "\\u003c").replace('>', "\\u003e")
}

/// A recoverable problem in a file: reported with its place, never fatal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl Problem {
    pub fn new(file: impl Into<String>, line: usize, message: impl Into<String>) -> Problem {
        Problem { file: file.into(), line, message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file, self.message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hashes_are_lowercase_hex_as_ever() {
        // Ids already on disk were made by the earlier formatter: the hash of "" stays the same.
        assert_eq!(content_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn comment_json_cannot_close_or_open_a_comment() {
        let json = comment_json(&serde_json::json!({"src": "a --> b <!--f c"}));
        assert!(!json.contains('<') && !json.contains('>'), "{json}");
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["src"], "a --> b <!--f c");
    }

    #[test]
    fn control_characters_become_visible_and_line_ends_stay() {
        assert_eq!(visible_controls("a\0b\u{1b}[2J\u{7f}\u{9b}c"), "a\u{2400}b\u{241b}[2J\u{2421}\u{fffd}c");
        assert_eq!(visible_controls("tab\there\nline\r\n\u{0b}\u{0c}\u{85}"), "tab\there\nline\r\n\u{0b}\u{0c}\u{85}");
        assert!(matches!(visible_controls("plain ␀ text"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn relative_paths_use_slashes() {
        let root = Root::new("/tmp/r");
        assert_eq!(
            root.relative(&root.archive_file(NaiveDate::from_ymd_opt(2026, 11, 22).unwrap())),
            "archive/2026-11-22.md"
        );
    }
}
