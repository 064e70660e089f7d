//! Daemon-owned state under `.memfold/`: `state.json`, and the journal, tombstone and recall logs.
//!
//! `state.json` is versioned and written atomically. The `.jsonl` logs are append-only, one
//! JSON record per line; a reader skips a torn last line (a crash mid-append) silently and
//! reports any other bad line with its number, and a writer starts on a fresh line after a
//! torn one.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::Problem;
use crate::atomic::{WriteError, append_lines, write_atomic};

/// The `state.json` schema version this build reads and writes.
pub const STATE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not valid state ({message}); move it aside to start over")]
    Corrupt { path: String, message: String },
    #[error("{path} has schema version {found}, newer than this memfold understands ({STATE_VERSION})")]
    TooNew { path: String, found: u32 },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("appending to {path}: {source}")]
    Append { path: String, source: std::io::Error },
}

/// How far consolidation got with one fact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FactProgress {
    /// Passes that tried and failed to decide this fact.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Set when a run that consumed the fact was undone: the next automatic pass must not repeat it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_run: Option<String>,
}

/// A summary of the last applied pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub id: String,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub ops: usize,
    pub facts: usize,
}

/// The whole of `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// Every fact dated on or before this day is consolidated or tombstoned.
    #[serde(default)]
    pub watermark: Option<NaiveDate>,
    #[serde(default)]
    pub last_run: Option<LastRun>,
    /// Progress of facts that are still pending and were tried, by fact id.
    #[serde(default)]
    pub facts: BTreeMap<String, FactProgress>,
    /// Content hashes of the markdown files as memfold last read or wrote them, by relative path.
    #[serde(default)]
    pub file_hashes: BTreeMap<String, String>,
}

impl Default for State {
    fn default() -> Self {
        State {
            version: STATE_VERSION,
            watermark: None,
            last_run: None,
            facts: BTreeMap::new(),
            file_hashes: BTreeMap::new(),
        }
    }
}

impl State {
    /// Load `state.json`; a missing file is a fresh state.
    pub fn load(path: &Path) -> Result<State, StateError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(source) => return Err(StateError::Read { path: shown, source }),
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| StateError::Corrupt { path: shown.clone(), message: e.to_string() })?;
        let found = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found > STATE_VERSION {
            return Err(StateError::TooNew { path: shown, found });
        }
        serde_json::from_value(value).map_err(|e| StateError::Corrupt { path: shown, message: e.to_string() })
    }

    /// The text of `state.json`.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A deleted entry or fact that must never come back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Entry id and/or fact ids covered.
    pub ids: Vec<String>,
    /// Hash of the deleted text, so a re-ingested copy can be recognised.
    pub text_hash: String,
    pub time: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One search hit returned to a caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recall {
    pub id: String,
    pub time: DateTime<Utc>,
    /// Short hash of the query (the query itself is not kept).
    pub query: String,
}

/// Read a `.jsonl` log: records, and problems for bad lines other than a torn last one.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path, file: &str) -> Result<(Vec<T>, Vec<Problem>), StateError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => return Err(StateError::Read { path: path.display().to_string(), source }),
    };
    let torn_tail = !text.is_empty() && !text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::with_capacity(lines.len());
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(record) => records.push(record),
            Err(_) if torn_tail && i + 1 == lines.len() => {}
            Err(e) => problems.push(Problem::new(file, i + 1, format!("unreadable record skipped ({e})"))),
        }
    }
    Ok((records, problems))
}

/// Append records to a `.jsonl` log without waiting for the disk (see
/// [`crate::atomic::append_lines`]): for the recall log, which every search writes, and
/// where a power cut may cost the last searches' records and nothing else.
pub fn append_jsonl<T: Serialize>(path: &Path, records: &[T]) -> Result<(), StateError> {
    if records.is_empty() {
        return Ok(());
    }
    append_lines(path, json_lines(records).as_bytes())
        .map(drop)
        .map_err(|source| StateError::Append { path: path.display().to_string(), source })
}

/// One JSON document per line.
pub fn json_lines<T: Serialize>(records: &[T]) -> String {
    let mut buf = String::new();
    for record in records {
        buf.push_str(&serde_json::to_string(record).unwrap_or_default());
        buf.push('\n');
    }
    buf
}

/// Rewrite a `.jsonl` log atomically with only `records` (used to compact rolling logs).
pub fn rewrite_jsonl<T: Serialize>(path: &Path, records: &[T]) -> Result<(), StateError> {
    write_atomic(path, json_lines(records).as_bytes(), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_missing_is_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(State::load(&path).unwrap(), State::default());
        let mut state = State { watermark: Some("2026-11-20".parse().unwrap()), ..State::default() };
        state.facts.insert(
            "f-1".into(),
            FactProgress { attempts: 2, last_error: Some("bad reply".into()), reverted_run: None },
        );
        std::fs::write(&path, state.to_json()).unwrap();
        assert_eq!(State::load(&path).unwrap(), state);
    }

    #[test]
    fn newer_state_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, r#"{"version": 99}"#).unwrap();
        let err = State::load(&path).unwrap_err();
        assert!(err.to_string().contains("schema version 99"), "{err}");
    }

    #[test]
    fn corrupt_state_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(State::load(&path).unwrap_err().to_string().contains("state.json"));
    }

    #[test]
    fn torn_last_line_is_ignored_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recall.jsonl");
        let r = |id: &str| Recall { id: id.into(), time: Utc::now(), query: "q".into() };
        append_jsonl(&path, &[r("m-1"), r("m-2")]).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"id\":\"m-3\",\"ti");
        std::fs::write(&path, &text).unwrap();
        let (records, problems) = read_jsonl::<Recall>(&path, "recall.jsonl").unwrap();
        assert_eq!(records.len(), 2);
        assert!(problems.is_empty());
        append_jsonl(&path, &[r("m-4")]).unwrap();
        let (records, problems) = read_jsonl::<Recall>(&path, "recall.jsonl").unwrap();
        assert_eq!(records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["m-1", "m-2", "m-4"]);
        assert_eq!(problems.len(), 1, "the torn line is now in the middle and is reported");
        assert_eq!(problems[0].line, 3);
    }
}
