//! The one writer of memory's files: a change is made durable as one redo record, then the files are written, then the record is removed.
//!
//! Every change to `consolidated/memory.md`, `consolidated/history.md`, the seen copy
//! (`.memfold/memory.seen.md`), the tombstones, the journal, the run and plan records and
//! `state.json` — a pass, an applied plan, an undo, a forget, a pin, a rebuild, a hand
//! deletion being recorded — is one [`Change`] handed to [`commit`]. The protocol (see
//! docs/ARCHITECTURE.md, "One commit"):
//!
//! 1. While holding the consolidation lock, check that `memory.md` still hashes to what the
//!    change was planned against (else [`CommitError::Stale`], nothing written), and that the
//!    new text would not put an entry inside a block a person or an older version left
//!    unclosed, where it could not be read back (else [`CommitError::Hidden`]); the same for
//!    the blocks the change appends to (or rewrites in) `history.md`.
//! 2. Write the whole change — every file's new text or appended bytes, with the offset each
//!    append starts at — as `.memfold/commit.json` (temp file, fsync, rename, fsync folder).
//!    From here on the change happens, even if the process dies.
//! 3. Write the files: `memory.md` first (refused if a person changed it since step 1, in
//!    which case the record is removed and nothing else is written), then the seen copy,
//!    `history.md`, the logs, the records and `state.json`, each atomically or as a durable
//!    append.
//! 4. Remove the record.
//!
//! [`recover`] runs before any other writer (and before `verify`) whenever the record exists
//! and its writer is gone (the lock is free): it redoes every step. Each step is idempotent —
//! a file already holding its new text is left alone, an append already present is not
//! repeated, an append cut short is completed — so recovery after a crash at any instant,
//! or a crash during recovery, ends in the state the change describes. The one case where
//! it does not roll forward: `memory.md` holds neither the text before the change nor after
//! it, because a person edited it after the crash. Then recovery compares the entries the
//! change touched: if they read as the change left them, `memory.md` was written and the rest
//! is rolled forward; if they read as before, nothing had been written and the record is
//! dropped (the facts stay pending for the next pass).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::atomic::{self, WriteError, current_hash, sync_dir, write_atomic};
use crate::entries::{Entry, EntryFile};
use crate::state::{State, json_lines};
use crate::{Root, content_hash};

/// Version of the commit record this build writes and reads.
const RECORD_VERSION: u32 = 1;

const MEMORY: &str = "consolidated/memory.md";
const HISTORY: &str = "consolidated/history.md";
const SEEN: &str = ".memfold/memory.seen.md";
const TOMBSTONES: &str = ".memfold/tombstones.jsonl";
const JOURNAL: &str = ".memfold/journal.jsonl";
const STATE: &str = ".memfold/state.json";
const MEMORY_MD: &str = "MEMORY.md";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// `memory.md` changed since the change was planned; nothing was written.
    #[error("consolidated/memory.md changed since it was read; nothing was written")]
    Stale,
    /// The new `memory.md` would hide an entry inside a block a person (or an older version)
    /// left unclosed, where it could not be read back; nothing was written.
    #[error("{0}")]
    Hidden(crate::Problem),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is not a valid commit record ({message}); move it aside to continue")]
    Corrupt { path: String, message: String },
    /// A path that is not a plain relative path inside the root (absolute, `..`, `.git`, an
    /// empty part); nothing was written.
    #[error("{path:?} is not a path inside the memory root; nothing was written")]
    Outside { path: String },
}

/// One entry's render before and after a change, as content hashes (None: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryDelta {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl EntryDelta {
    /// The delta of one entry from rendered blocks (`Entry::render` text, None: absent).
    pub fn of(id: &str, before: Option<&str>, after: Option<&str>) -> EntryDelta {
        EntryDelta { id: id.to_string(), before: before.map(content_hash), after: after.map(content_hash) }
    }
}

/// The new `memory.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    /// Hash of the text the change was planned against.
    pub before: String,
    pub text: String,
    /// The entries the change adds, changes or removes: what recovery compares when a person
    /// edited the file after a crash.
    pub entries: Vec<EntryDelta>,
}

/// What happens to `history.md`.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryWrite {
    /// Blocks appended at the end (passes, forget, hand deletions).
    Append(Vec<Entry>),
    /// The whole file replaced (an undo re-marks the blocks of the run it takes back), unless
    /// it no longer hashes to `before`.
    Rewrite { before: String, text: String },
}

/// Everything one change writes. Build it with [`Change::new`] and the fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// What the change is ("pass r-…", "forget m-…"), for logs and the record.
    pub label: String,
    pub memory: Option<MemoryWrite>,
    /// The seen copy, when `memory.md` is not written (hand edits being recorded); with a
    /// `memory` write the seen copy is always its text.
    pub seen: Option<String>,
    pub history: Option<HistoryWrite>,
    /// Lines appended to `.memfold/tombstones.jsonl` and `.memfold/journal.jsonl`.
    pub tombstones: Vec<crate::state::Tombstone>,
    /// Journal records, one JSON document per line ([`crate::state::json_lines`]).
    pub journal: String,
    /// Daemon-owned files under `.memfold/` (run and plan records) by path relative to the
    /// root: Some(text) writes, None removes.
    pub records: Vec<(String, Option<String>)>,
    pub state: Option<State>,
    /// `MEMORY.md` without the lines of removed entries, written only if the file still
    /// hashes to the first string (a person's edit wins; the next promotion catches up).
    pub memory_md: Option<(String, String)>,
    /// Other files of the root a sync brings from another machine (archive day files, the
    /// tombstones, files a person keeps in the root), written after everything above.
    pub files: Vec<FileWrite>,
}

/// A file a sync writes, by path relative to the root.
#[derive(Debug, Clone, PartialEq)]
pub enum FileWrite {
    /// Bytes appended at the end (under the file's lock, as the archive's appenders take it).
    Append { path: String, text: String },
    /// The whole file replaced, unless it no longer hashes to `before` (a person's or an
    /// appender's write since wins; the next sync brings the rest).
    Replace { path: String, before: String, text: String },
}

impl Change {
    pub fn new(label: impl Into<String>) -> Change {
        Change { label: label.into(), ..Change::default() }
    }

    /// Whether the change writes nothing.
    pub fn is_empty(&self) -> bool {
        self.memory.is_none()
            && self.seen.is_none()
            && self.history.is_none()
            && self.tombstones.is_empty()
            && self.journal.is_empty()
            && self.records.is_empty()
            && self.state.is_none()
            && self.memory_md.is_none()
            && self.files.is_empty()
    }
}

/// One file operation of a record, with paths relative to the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Step {
    /// `memory.md`: from the text hashing to `before` to `text`.
    Memory { before: String, text: String, entries: Vec<EntryDelta> },
    /// A file only memfold writes: replaced whatever it holds.
    Put { path: String, text: String },
    /// A file a person may edit: replaced only while it hashes to `before`; left alone otherwise.
    Guarded { path: String, before: String, text: String },
    /// Bytes appended at offset `at` (the file's length when the record was made).
    Append { path: String, at: u64, text: String },
    /// A file only memfold writes, removed.
    Remove { path: String },
}

impl Step {
    fn path(&self) -> &str {
        match self {
            Step::Memory { .. } => MEMORY,
            Step::Put { path, .. } | Step::Guarded { path, .. } | Step::Append { path, .. } | Step::Remove { path } => {
                path
            }
        }
    }
}

/// Refuse a path that is not plain and relative inside the root: every part a name (no `..`,
/// `.`, empty part or root), none of them `.git`, no backslash or NUL. A commit writes only
/// such paths, whatever planned them (a sync plans from another machine's tree).
fn inside(path: &str) -> Result<(), CommitError> {
    let plain = !path.is_empty()
        && !path.contains(['\\', '\0'])
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.eq_ignore_ascii_case(".git"));
    if plain { Ok(()) } else { Err(CommitError::Outside { path: path.to_string() }) }
}

/// `.memfold/commit.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    version: u32,
    label: String,
    time: DateTime<Utc>,
    steps: Vec<Step>,
}

fn record_path(root: &Root) -> std::path::PathBuf {
    root.state_dir().join("commit.json")
}

/// Whether an unfinished change waits for [`recover`] (cheap: one `stat`).
pub fn pending(root: &Root) -> bool {
    record_path(root).exists()
}

fn io(path: &str) -> impl FnOnce(std::io::Error) -> CommitError + '_ {
    move |source| CommitError::Io { path: path.to_string(), source }
}

/// Write a change. The caller holds the consolidation lock (the `_lock` guard proves it and is
/// released only when the write has finished, even if the caller's task was dropped) and has
/// run [`recover`] since taking it.
pub fn commit(root: &Root, change: &Change, _lock: &crate::sys::lock::LockGuard) -> Result<(), CommitError> {
    if change.is_empty() {
        return Ok(());
    }
    if let Some(memory) = &change.memory {
        let now = read_or_empty(&root.memory()).map_err(io(MEMORY))?;
        if content_hash(&now) != memory.before {
            return Err(CommitError::Stale);
        }
        if let Some(problem) = crate::entries::newly_hidden(&now, &memory.text, MEMORY) {
            return Err(CommitError::Hidden(problem));
        }
    }
    let steps = steps(root, change)?;
    for step in &steps {
        inside(step.path())?;
    }
    for step in &steps {
        // History blocks appended after (or rewritten into) a block a person left open would
        // be hidden as surely as entries.
        let after = match step {
            Step::Append { path, text, .. } | Step::Guarded { path, text, .. } if path == HISTORY => text,
            _ => continue,
        };
        let now = read_or_empty(&root.history()).map_err(io(HISTORY))?;
        let after = if matches!(step, Step::Append { .. }) { format!("{now}{after}") } else { after.clone() };
        if let Some(problem) = crate::entries::newly_hidden(&now, &after, HISTORY) {
            return Err(CommitError::Hidden(problem));
        }
    }
    let kind = change.label.split_whitespace().next().unwrap_or("change");
    failpoint(kind, "planned");
    let record = Record { version: RECORD_VERSION, label: change.label.clone(), time: crate::sys::clock::now(), steps };
    let path = record_path(root);
    let mut text = serde_json::to_string(&record)
        .map_err(|e| CommitError::Corrupt { path: root.relative(&path), message: e.to_string() })?;
    text.push('\n');
    write_atomic(&path, text.as_bytes(), None)?;
    failpoint(kind, "recorded");
    for (i, step) in record.steps.iter().enumerate() {
        match run(root, step) {
            Ok(()) => {}
            Err(CommitError::Stale) => {
                // Only the first step can be refused, before anything else was written.
                remove_record(root)?;
                return Err(CommitError::Stale);
            }
            Err(e) => return Err(e),
        }
        failpoint(kind, &format!("step{}", i + 1));
    }
    remove_record(root)?;
    failpoint(kind, "done");
    tracing::debug!(change = %record.label, steps = record.steps.len(), "committed");
    Ok(())
}

/// Finish the unfinished change, if there is one. The caller holds the consolidation lock.
/// Returns the label of the change that was finished (or dropped).
pub fn recover(root: &Root, _lock: &crate::sys::lock::LockGuard) -> Result<Option<String>, CommitError> {
    let path = record_path(root);
    let shown = root.relative(&path);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CommitError::Io { path: shown, source }),
    };
    let record: Record = serde_json::from_str(&text)
        .map_err(|e| CommitError::Corrupt { path: shown.clone(), message: e.to_string() })?;
    if record.version > RECORD_VERSION {
        return Err(CommitError::Corrupt {
            path: shown,
            message: format!("version {} is newer than this memfold understands", record.version),
        });
    }
    for step in &record.steps {
        inside(step.path())?;
    }
    for (i, step) in record.steps.iter().enumerate() {
        let done = redo(root, step)?;
        failpoint("recover", &format!("step{}", i + 1));
        match done {
            Redo::Done => {}
            Redo::Drop => {
                tracing::warn!(
                    change = %record.label,
                    "an unfinished change was dropped: memory.md was edited after it stopped and still reads as before it; its facts stay pending"
                );
                remove_record(root)?;
                return Ok(Some(record.label));
            }
        }
    }
    remove_record(root)?;
    tracing::info!(change = %record.label, since = %record.time, "finished a change a stopped process left unfinished");
    Ok(Some(record.label))
}

fn remove_record(root: &Root) -> Result<(), CommitError> {
    let path = record_path(root);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(CommitError::Io { path: root.relative(&path), source }),
    }
    sync_dir(&root.state_dir()).map_err(io(".memfold"))
}

/// The steps of a change, in the order they are written.
fn steps(root: &Root, change: &Change) -> Result<Vec<Step>, CommitError> {
    let mut steps = Vec::new();
    if let Some(memory) = &change.memory {
        steps.push(Step::Memory {
            before: memory.before.clone(),
            text: memory.text.clone(),
            entries: memory.entries.clone(),
        });
        steps.push(Step::Put { path: SEEN.into(), text: memory.text.clone() });
    } else if let Some(seen) = &change.seen {
        steps.push(Step::Put { path: SEEN.into(), text: seen.clone() });
    }
    match &change.history {
        Some(HistoryWrite::Append(blocks)) if !blocks.is_empty() => {
            let (at, tail) = tail(&root.history(), 2).map_err(io(HISTORY))?;
            let mut text = String::new();
            let mut tail = tail;
            if !tail.is_empty() && !tail.ends_with('\n') {
                text.push('\n');
                tail.push('\n');
            }
            text.push_str(&crate::entries::blocks_after(&tail, blocks));
            steps.push(Step::Append { path: HISTORY.into(), at, text });
        }
        Some(HistoryWrite::Rewrite { before, text }) => {
            steps.push(Step::Guarded { path: HISTORY.into(), before: before.clone(), text: text.clone() })
        }
        _ => {}
    }
    for (path, file, lines) in [
        (TOMBSTONES, root.tombstones(), (!change.tombstones.is_empty()).then(|| json_lines(&change.tombstones))),
        (JOURNAL, root.journal(), (!change.journal.is_empty()).then(|| change.journal.clone())),
    ] {
        let Some(lines) = lines else { continue };
        let (at, tail) = tail(&file, 1).map_err(io(path))?;
        let text = if tail.is_empty() || tail.ends_with('\n') { lines } else { format!("\n{lines}") };
        steps.push(Step::Append { path: path.into(), at, text });
    }
    for (path, text) in &change.records {
        steps.push(match text {
            Some(text) => Step::Put { path: path.clone(), text: text.clone() },
            None => Step::Remove { path: path.clone() },
        });
    }
    if let Some(state) = &change.state {
        steps.push(Step::Put { path: STATE.into(), text: state.to_json() });
    }
    if let Some((before, text)) = &change.memory_md {
        steps.push(Step::Guarded { path: MEMORY_MD.into(), before: before.clone(), text: text.clone() });
    }
    for file in &change.files {
        steps.push(match file {
            FileWrite::Append { path, text } => {
                inside(path)?;
                let (at, tail) = tail(&root.dir().join(path), 1).map_err(io(path))?;
                let text = if tail.is_empty() || tail.ends_with('\n') { text.clone() } else { format!("\n{text}") };
                Step::Append { path: path.clone(), at, text }
            }
            FileWrite::Replace { path, before, text } => {
                Step::Guarded { path: path.clone(), before: before.clone(), text: text.clone() }
            }
        });
    }
    Ok(steps)
}

/// A file's text; a missing file is empty.
fn read_or_empty(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        other => other,
    }
}

/// A file's length and its last `n` bytes (lossily decoded); a missing file is empty.
fn tail(path: &Path, n: u64) -> std::io::Result<(u64, String)> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, String::new())),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(n)))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    Ok((len, String::from_utf8_lossy(&buf).into_owned()))
}

/// Write one step during a live commit.
fn run(root: &Root, step: &Step) -> Result<(), CommitError> {
    match step {
        Step::Memory { before, text, .. } => match write_atomic(&root.memory(), text.as_bytes(), Some(before)) {
            Ok(()) => Ok(()),
            Err(WriteError::Stale { .. }) => Err(CommitError::Stale),
            Err(e) => Err(e.into()),
        },
        Step::Guarded { path, before, text } => {
            let _day = day_lock(root, path)?;
            match write_atomic(&root.dir().join(path), text.as_bytes(), Some(before)) {
                Ok(()) => Ok(()),
                Err(WriteError::Stale { .. }) => {
                    tracing::info!(file = %path, "changed by hand meanwhile; left as it is");
                    Ok(())
                }
                Err(e) => Err(e.into()),
            }
        }
        other => redo(root, other).map(|_| ()),
    }
}

enum Redo {
    Done,
    /// `memory.md` was never written: drop the whole record.
    Drop,
}

/// Bring one step about, whatever part of it already happened.
fn redo(root: &Root, step: &Step) -> Result<Redo, CommitError> {
    match step {
        Step::Memory { before, text, entries } => {
            let now = read_or_empty(&root.memory()).map_err(io(MEMORY))?;
            let hash = content_hash(&now);
            if hash == content_hash(text) {
                return Ok(Redo::Done);
            }
            if &hash == before {
                write_atomic(&root.memory(), text.as_bytes(), Some(before))?;
                return Ok(Redo::Done);
            }
            // Edited by a person since: did the change reach the file before it stopped?
            let file = EntryFile::parse(&now, MEMORY);
            let current = |id: &str| file.get(id).map(|e| content_hash(e.render()));
            let (mut after, mut prior) = (0, 0);
            for delta in entries {
                let have = current(&delta.id);
                if have == delta.after {
                    after += 1;
                } else if have == delta.before {
                    prior += 1;
                }
            }
            Ok(if after > prior { Redo::Done } else { Redo::Drop })
        }
        Step::Put { path, text } => {
            let target = root.dir().join(path);
            if current_hash(&target).map_err(io(path))? != content_hash(text) {
                if let Some(dir) = target.parent() {
                    crate::sys::access::create_dir(dir).map_err(io(path))?;
                }
                write_atomic(&target, text.as_bytes(), None)?;
            }
            Ok(Redo::Done)
        }
        Step::Guarded { path, before, text } => {
            let _day = day_lock(root, path)?;
            let target = root.dir().join(path);
            let hash = current_hash(&target).map_err(io(path))?;
            if hash == *before {
                write_atomic(&target, text.as_bytes(), Some(before))?;
            } else if hash != content_hash(text) {
                tracing::info!(file = %path, "changed by hand meanwhile; left as it is");
            }
            Ok(Redo::Done)
        }
        Step::Append { path, at, text } => {
            append_at(&root.dir().join(path), *at, text.as_bytes()).map_err(io(path))?;
            Ok(Redo::Done)
        }
        Step::Remove { path } => {
            match std::fs::remove_file(root.dir().join(path)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(CommitError::Io { path: path.clone(), source }),
            }
            Ok(Redo::Done)
        }
    }
}

/// An archive day file's lock, held while a sync replaces the file, so no appender writes to
/// the file being replaced (an appender that waited checks that it locked the file that is
/// there now). None for every other file.
fn day_lock(root: &Root, path: &str) -> Result<Option<std::fs::File>, CommitError> {
    if !path.starts_with("archive/") || !root.dir().join(path).exists() {
        return Ok(None);
    }
    crate::archive::open_locked(&root.dir().join(path)).map(Some).map_err(io(path))
}

/// Make `bytes` stand at offset `at` of the file: nothing to do if they already do, the rest
/// of them if a write was cut short, all of them at the end otherwise (the file was shortened
/// or grew by other hands since).
fn append_at(path: &Path, at: u64, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::sys::access::create_dir(dir)?;
    }
    // The lock an archive appender takes: a day file a sync appends to is one it may append to.
    let mut file = crate::archive::open_locked(path)?;
    let len = file.metadata()?.len();
    if len >= at {
        file.seek(SeekFrom::Start(at))?;
        let mut there = Vec::with_capacity(bytes.len().min((len - at) as usize));
        Read::by_ref(&mut file).take(bytes.len() as u64).read_to_end(&mut there)?;
        if there == bytes {
            return Ok(());
        }
        if len - at == there.len() as u64 && bytes.starts_with(&there) {
            file.write_all(&bytes[there.len()..])?;
            return file.sync_data();
        }
    }
    // Shortened, or grown by other hands since: append it all on a fresh line.
    if len > 0 && !bytes.starts_with(b"\n") && !atomic::ends_with_newline(&mut file, len)? {
        file.write_all(b"\n")?;
    }
    file.write_all(bytes)?;
    file.sync_data()
}

/// A place where the crash tests stop the process: `<kind>:<point>`, the kind being the first
/// word of the change's label (`run`, `forget`, `undo`, …) or `recover`, the point `planned`,
/// `recorded`, `stepN` (after the Nth step) or `done`. With `MEMFOLD_TEST_PAUSE_AT` naming it
/// (builds with the `testkit` feature only), the process says so on stderr and waits to be
/// killed.
pub fn failpoint(kind: &str, point: &str) {
    #[cfg(feature = "testkit")]
    if let Ok(at) = std::env::var("MEMFOLD_TEST_PAUSE_AT")
        && at.split_once(':') == Some((kind, point))
    {
        eprintln!("memfold: paused at {at}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "testkit"))]
    let _ = (kind, point);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entries::EntryMeta;
    use crate::sys::lock::LockGuard;

    fn fresh() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        (dir, root)
    }

    fn entry(id: &str, text: &str) -> Entry {
        Entry::new(EntryMeta::new(id), text)
    }

    fn memory_of(entries: &[Entry]) -> String {
        let mut file = EntryFile::default();
        for e in entries {
            file.push(e.clone());
        }
        file.render()
    }

    fn read(root: &Root, rel: &str) -> String {
        std::fs::read_to_string(root.dir().join(rel)).unwrap_or_default()
    }

    #[test]
    fn a_path_outside_the_root_is_never_written() {
        let (dir, root) = fresh();
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        for path in ["../x", "/tmp/x", "archive/../../x", ".git/config", "a//b", "./MEMORY.md", "", "a\\..\\x"] {
            for write in [
                FileWrite::Append { path: path.into(), text: "planted\n".into() },
                FileWrite::Replace { path: path.into(), before: content_hash(""), text: "planted\n".into() },
            ] {
                let mut change = Change::new("sync test");
                change.files.push(write);
                change.journal = "{}\n".into();
                assert!(matches!(commit(&root, &change, &lock), Err(CommitError::Outside { .. })), "{path}");
            }
        }
        assert!(!dir.path().parent().unwrap().join("x").exists());
        assert!(!pending(&root) && read(&root, ".memfold/journal.jsonl").is_empty(), "nothing was written");
    }

    /// A change that replaces m-1, adds m-2, appends history and a journal line, and writes state.
    fn sample(root: &Root) -> (Change, String) {
        let before = memory_of(&[entry("m-1", "Works at Google.")]);
        std::fs::write(root.memory(), &before).unwrap();
        std::fs::write(root.history(), "<!--m {\"id\":\"m-0\",\"status\":\"merged\"}-->\nOld").unwrap();
        let after = memory_of(&[entry("m-1", "Works at Microsoft."), entry("m-2", "Likes tea.")]);
        let mut change = Change::new("test");
        change.memory = Some(MemoryWrite {
            before: content_hash(&before),
            text: after.clone(),
            entries: vec![
                EntryDelta::of(
                    "m-1",
                    Some(&entry("m-1", "Works at Google.").render()),
                    Some(&entry("m-1", "Works at Microsoft.").render()),
                ),
                EntryDelta::of("m-2", None, Some(&entry("m-2", "Likes tea.").render())),
            ],
        });
        change.history = Some(HistoryWrite::Append(vec![entry("m-1", "Works at Google.")]));
        change.state = Some(State { watermark: Some("2026-01-01".parse().unwrap()), ..State::default() });
        change.records.push((".memfold/runs/r-1.json".into(), Some("{}\n".into())));
        (change, after)
    }

    /// Write the record of `change` as a commit does before touching any file.
    fn begin(root: &Root, change: &Change, label: &str) -> Record {
        let record = Record {
            version: RECORD_VERSION,
            label: label.into(),
            time: Utc::now(),
            steps: steps(root, change).unwrap(),
        };
        write_atomic(&record_path(root), serde_json::to_string(&record).unwrap().as_bytes(), None).unwrap();
        record
    }

    fn files(root: &Root) -> Vec<String> {
        [MEMORY, SEEN, HISTORY, STATE, ".memfold/runs/r-1.json"].iter().map(|p| read(root, p)).collect()
    }

    #[test]
    fn a_commit_writes_every_file_and_leaves_no_record() {
        let (_d, root) = fresh();
        let (change, after) = sample(&root);
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        commit(&root, &change, &lock).unwrap();
        assert_eq!(read(&root, MEMORY), after);
        assert_eq!(read(&root, SEEN), after);
        let history = read(&root, HISTORY);
        assert!(
            history.starts_with("<!--m {\"id\":\"m-0\",\"status\":\"merged\"}-->\nOld\n\n<!--m {\"id\":\"m-1\""),
            "{history}"
        );
        assert!(!pending(&root));
        assert_eq!(EntryFile::parse(&history, HISTORY).entries().count(), 2);
    }

    #[test]
    fn a_stale_memory_file_writes_nothing() {
        let (_d, root) = fresh();
        let (change, _) = sample(&root);
        std::fs::write(root.memory(), "A hand edit.\n").unwrap();
        let before = files(&root);
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        assert!(matches!(commit(&root, &change, &lock), Err(CommitError::Stale)));
        assert_eq!(files(&root), before);
        assert!(!pending(&root));
    }

    #[test]
    fn history_blocks_that_a_block_left_open_would_hide_write_nothing() {
        let (_d, root) = fresh();
        let (change, _) = sample(&root);
        std::fs::write(root.history(), "<!--m {\"id\":\"m-0\",\"status\":\"merged\"}-->\nOld\n<!-- a note\n").unwrap();
        let before = files(&root);
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        let err = commit(&root, &change, &lock).unwrap_err();
        assert!(matches!(&err, CommitError::Hidden(p) if p.file == HISTORY), "{err:?}");
        assert_eq!(files(&root), before);
        assert!(!pending(&root));
        // Closed, the same change goes through.
        std::fs::write(root.history(), "<!--m {\"id\":\"m-0\",\"status\":\"merged\"}-->\nOld\n<!-- a note -->\n")
            .unwrap();
        commit(&root, &change, &lock).unwrap();
        assert_eq!(EntryFile::parse(&read(&root, HISTORY), HISTORY).entries().count(), 2);
    }

    /// Run the steps of `change` up to `k` by hand, as a process killed after step k would
    /// have, then recover; the end state must equal a complete commit's.
    #[test]
    fn recovery_after_any_number_of_steps_ends_where_the_commit_would() {
        let (_d, complete) = fresh();
        let (change, _) = sample(&complete);
        let lock = LockGuard::try_acquire(&complete.consolidate_lock(), "test").unwrap();
        commit(&complete, &change, &lock).unwrap();
        let want = files(&complete);
        let n = steps(&complete, &change).unwrap().len();
        for k in 0..=n {
            for torn in [false, true] {
                let (_d, root) = fresh();
                let (change, _) = sample(&root);
                let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
                let record = begin(&root, &change, "test");
                for step in &record.steps[..k] {
                    run(&root, step).unwrap();
                }
                if torn && let Some(Step::Append { path, at, text }) = record.steps.get(k) {
                    // The next append stopped halfway.
                    let half = &text.as_bytes()[..text.len() / 2];
                    append_at(&root.dir().join(path), *at, half).unwrap();
                }
                assert_eq!(recover(&root, &lock).unwrap().as_deref(), Some("test"));
                assert_eq!(files(&root), want, "after {k} steps (torn: {torn})");
                assert!(!pending(&root));
                // Recovering again changes nothing.
                assert_eq!(recover(&root, &lock).unwrap(), None);
                assert_eq!(files(&root), want);
            }
        }
    }

    #[test]
    fn a_hand_edit_after_the_crash_decides_by_the_touched_entries() {
        // memory.md was written, then a person added a line: roll the rest forward.
        let (_d, root) = fresh();
        let (change, after) = sample(&root);
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        let record = begin(&root, &change, "t");
        run(&root, &record.steps[0]).unwrap();
        std::fs::write(root.memory(), format!("{after}\nA note typed by hand.\n")).unwrap();
        recover(&root, &lock).unwrap();
        assert!(read(&root, HISTORY).contains("Works at Google."), "history rolled forward");
        assert!(read(&root, MEMORY).ends_with("A note typed by hand.\n"), "the edit is kept");
        assert_eq!(read(&root, SEEN), after);

        // memory.md was never written and a person edited it: drop the record, write nothing.
        let (_d, root) = fresh();
        let (change, _) = sample(&root);
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        begin(&root, &change, "t");
        let edited = format!("{}\nA note typed by hand.\n", read(&root, MEMORY));
        std::fs::write(root.memory(), &edited).unwrap();
        let history = read(&root, HISTORY);
        recover(&root, &lock).unwrap();
        assert_eq!(read(&root, MEMORY), edited);
        assert_eq!(read(&root, HISTORY), history);
        assert!(!pending(&root));
    }

    #[test]
    fn an_append_lands_once_and_a_torn_tail_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        append_at(&path, 8, b"{\"b\":2}\n").unwrap();
        append_at(&path, 8, b"{\"b\":2}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
        std::fs::write(&path, "{\"a\":1}\n{\"b\"").unwrap();
        append_at(&path, 8, b"{\"b\":2}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }
}
