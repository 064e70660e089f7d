//! Derived caches under `.memfold/`, written here and nowhere else (beside [`super::commit`],
//! which writes memory itself): deleting either costs time, never a fact.
//!
//! **Aspect keys** (`.memfold/aspects.jsonl`): the keys an LLM gave facts, cached by text, one
//! line per text. Deleting the file costs a keying call per pass for the facts still pending. A
//! line is `{"text":"<sha256 of the text>","keys":["user / employer"]}`; a line that does not
//! parse is skipped, and a later line for the same text wins. Planning adds keys to a loaded
//! [`KeyCache`] in memory ([`KeyCache::insert`]); the use case that ran it saves them
//! ([`KeyCache::save`]).
//!
//! **Status counts** (`.memfold/status.json`): what `status` derives from the large files, with
//! the record of the files it was derived from ([`StatusCounts`]).
//!
//! **Linked entries** (`.memfold/links.json`): the current entries that have links and the ids
//! of pinned ones, with the size and modification time of the `memory.md` they were read from
//! ([`LinkCache`]), so a search from a fresh process follows links and ranks by use without
//! reading a large `memory.md`.
//!
//! **Uses** (`.memfold/uses.tsv`): see [`super::uses`].
//!
//! **Record summaries** (`.memfold/records.json`): what `status` needs of each stored plan and
//! run record ([`RecordSummary`]), with the size and modification time it was read at; a record
//! whose stat differs is read again. A plan of a large pass is tens of MB that `status` would
//! otherwise parse on every call.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Root;
use super::archive::clean_text;
use super::sources::Sources;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    text: String,
    keys: Vec<String>,
}

/// The cached keys of a root, by text.
#[derive(Debug, Default, Clone)]
pub struct KeyCache {
    path: PathBuf,
    keys: HashMap<String, Vec<String>>,
    /// Lines inserted since the cache was loaded or saved.
    unsaved: Vec<Line>,
}

/// What a text is cached under: the hash of its words, so spacing does not matter.
fn text_hash(text: &str) -> String {
    crate::content_hash(clean_text(text))
}

impl KeyCache {
    /// The cache of `root` (empty when the file is missing or unreadable).
    pub fn load(root: &Root) -> KeyCache {
        KeyCache::at(root.state_dir().join("aspects.jsonl"))
    }

    fn at(path: PathBuf) -> KeyCache {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let keys = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Line>(l).ok())
            .map(|line| (line.text, line.keys))
            .collect();
        KeyCache { path, keys, unsaved: Vec::new() }
    }

    /// The keys cached for `text`.
    pub fn get(&self, text: &str) -> Option<&[String]> {
        self.keys.get(&text_hash(text)).map(Vec::as_slice)
    }

    /// Take in the keys of these texts, in memory: [`KeyCache::save`] writes them.
    pub fn insert(&mut self, keyed: &[(String, Vec<String>)]) {
        for (text, keys) in keyed {
            let line = Line { text: text_hash(text), keys: keys.clone() };
            self.keys.insert(line.text.clone(), line.keys.clone());
            self.unsaved.push(line);
        }
    }

    /// Append the keys inserted since loading (or the last save) to the file, durably.
    pub fn save(&mut self) -> std::io::Result<()> {
        if self.unsaved.is_empty() {
            return Ok(());
        }
        let mut lines = String::new();
        for line in &self.unsaved {
            lines.push_str(&serde_json::to_string(line).map_err(std::io::Error::other)?);
            lines.push('\n');
        }
        super::atomic::append_durable(&self.path, lines.as_bytes())?;
        self.unsaved.clear();
        Ok(())
    }
}

/// What `status` derives from the large files, with the record of the files it was derived
/// from (`.memfold/status.json`). While no source file changed, `status` reads only
/// `state.json` and the plans: a stat per file instead of a parse of all of memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusCounts {
    pub seen: Sources,
    pub pending: usize,
    pub entries: usize,
    pub problems: usize,
    /// The pass's candidates (`memfold_core`'s `planning::consolidate::pass::candidates`), by id.
    pub candidates: Vec<String>,
    /// Current entries with links, and naming a name `memfold about` lists.
    #[serde(default)]
    pub related: usize,
    #[serde(default)]
    pub named: usize,
    /// Decay's view of the entries, when it was worked out (see [`DecayCounts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decay: Option<DecayCounts>,
}

/// How many current entries (pinned ones and `MEMORY.md`'s left out) were last used on each
/// day, as of the use table and `MEMORY.md` whose size and modification time it records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecayCounts {
    pub seen: [(u64, u64); 2],
    pub quiet: std::collections::BTreeMap<chrono::NaiveDate, usize>,
}

impl DecayCounts {
    /// The size and modification time of the use table and `MEMORY.md` now.
    pub fn look(root: &Root) -> [(u64, u64); 2] {
        let stat = |path: PathBuf| std::fs::metadata(path).ok().map_or((0, 0), |m| stat_of(&m));
        [stat(super::uses::Uses::path(root)), stat(root.memory_md())]
    }

    /// Entries last used before `day`.
    pub fn before(&self, day: chrono::NaiveDate) -> usize {
        self.quiet.range(..day).map(|(_, n)| n).sum()
    }
}

impl StatusCounts {
    pub fn path(root: &Root) -> PathBuf {
        root.state_dir().join("status.json")
    }

    /// The cached counts (None when missing or unreadable).
    pub fn load(root: &Root) -> Option<StatusCounts> {
        std::fs::read(StatusCounts::path(root)).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// Cache the counts (atomically).
    pub fn save(&self, root: &Root) -> Result<(), super::atomic::WriteError> {
        let bytes = serde_json::to_vec(self).expect("status counts serialise");
        super::atomic::write_atomic(&StatusCounts::path(root), &bytes, None)
    }
}

/// Who decided a plan's ops: the configured LLM or the offline rules (`"llm"`, `"offline"` in
/// every record and report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeciderKind {
    Llm,
    #[default]
    Offline,
}

impl DeciderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeciderKind::Llm => "llm",
            DeciderKind::Offline => "offline",
        }
    }
}

impl std::fmt::Display for DeciderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `status` keeps of one plan or run record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordSummary {
    /// The file's size and modification time (ns since the epoch) when it was read.
    pub size: u64,
    pub modified_ns: u64,
    /// A plan: whether it is pending, its ops and the facts it names.
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub ops: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<String>,
    /// Who decided it, and what a person did with its ops: applied (a run of a plan), rejected
    /// or expired (a plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<DeciderKind>,
    #[serde(default)]
    pub applied: usize,
    #[serde(default)]
    pub rejected: usize,
    #[serde(default)]
    pub expired: usize,
    /// A run: its ops undone and the tokens its merges saved (while not undone).
    #[serde(default)]
    pub undone: usize,
    #[serde(default)]
    pub saved: usize,
}

/// `.memfold/records.json`: [`RecordSummary`] by file name, for plans and runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordSummaries {
    pub plans: std::collections::BTreeMap<String, RecordSummary>,
    pub runs: std::collections::BTreeMap<String, RecordSummary>,
}

impl RecordSummaries {
    pub fn path(root: &Root) -> PathBuf {
        root.state_dir().join("records.json")
    }

    /// The cached summaries (empty when missing or unreadable).
    pub fn load(root: &Root) -> RecordSummaries {
        std::fs::read(RecordSummaries::path(root))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Cache the summaries (atomically).
    pub fn save(&self, root: &Root) -> Result<(), super::atomic::WriteError> {
        let bytes = serde_json::to_vec(self).expect("record summaries serialise");
        super::atomic::write_atomic(&RecordSummaries::path(root), &bytes, None)
    }
}

/// A file's size and modification time in ns, as [`RecordSummary`] records them.
pub fn stat_of(meta: &std::fs::Metadata) -> (u64, u64) {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    (meta.len(), modified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_kept_by_text_and_a_broken_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aspects.jsonl");
        let mut cache = KeyCache::at(path.clone());
        cache.insert(&[("Moved to  Lisbon.".into(), vec!["user / home city".into()])]);
        assert!(!path.exists(), "inserting writes nothing");
        cache.save().unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{not json\n"))
            .unwrap();
        let again = KeyCache::at(path);
        assert_eq!(again.get("Moved to Lisbon."), Some(&["user / home city".to_string()][..]));
        assert_eq!(again.get("Moved to Porto."), None);
    }
}

/// The current entries with links, and the pinned ones, as of one `memory.md` (its size and
/// modification time, ns since the epoch).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LinkCache {
    pub size: u64,
    pub modified_ns: u64,
    pub entries: HashMap<String, super::entries::Linked>,
    /// Ids of pinned entries (exempt from decay).
    pub pinned: Vec<String>,
}

impl LinkCache {
    pub fn path(root: &Root) -> PathBuf {
        root.state_dir().join("links.json")
    }

    /// `memory.md`'s size and modification time now.
    pub fn stat(root: &Root) -> (u64, u64) {
        let meta = std::fs::metadata(root.memory()).ok();
        let modified = meta.as_ref().and_then(|m| m.modified().ok());
        let ns = modified.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as u64);
        (meta.map_or(0, |m| m.len()), ns)
    }

    /// The linked entries of `memory.md` as it is now: from the cache when it was made from
    /// this `memory.md`, else read from it (and cached again, best effort).
    pub fn current(root: &Root) -> LinkCache {
        let (size, modified_ns) = LinkCache::stat(root);
        let cached: Option<LinkCache> =
            std::fs::read(LinkCache::path(root)).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
        if let Some(cache) = cached.filter(|c| c.size == size && c.modified_ns == modified_ns && modified_ns != 0) {
            return cache;
        }
        let text = std::fs::read_to_string(root.memory()).unwrap_or_default();
        let (entries, pinned) = super::entries::linked(&text);
        let cache = LinkCache { size, modified_ns, entries, pinned };
        if root.state_dir().is_dir() {
            let bytes = serde_json::to_vec(&cache).expect("linked entries serialise");
            if let Err(e) = super::atomic::write_atomic(&LinkCache::path(root), &bytes, None) {
                tracing::debug!(error = %e, "could not cache the linked entries");
            }
        }
        cache
    }
}
