//! The records runs leave (`.memfold/runs/<run>.json`) and the plans waiting for review
//! (`.memfold/plans/<id>.json`) as files: where each is, reading one as JSON, listing them. Their
//! shapes are the core's run vocabulary (`memfold_core::planning::run::records`); they are
//! written only through [`crate::commit`], in the change that applies or stores them.

use std::path::{Path, PathBuf};

use crate::Root;

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} does not parse: {message}")]
    Corrupt { path: String, message: String },
}

/// Where the run records are, relative to the root ([`Root::runs_dir`]).
pub(crate) const RUNS: &str = ".memfold/runs";
/// Where the stored plans are, relative to the root ([`Root::plans_dir`]).
pub(crate) const PLANS: &str = ".memfold/plans";

/// A run record's path relative to the root (for a [`crate::commit::Change`]).
pub fn run_rel(run: &str) -> String {
    format!("{RUNS}/{run}.json")
}

/// A stored plan's path relative to the root.
pub fn plan_rel(id: &str) -> String {
    format!("{PLANS}/{id}.json")
}

/// The run record of `run`.
pub fn run_path(root: &Root, run: &str) -> PathBuf {
    root.dir().join(run_rel(run))
}

/// The stored plan `id`.
pub fn plan_path(root: &Root, id: &str) -> PathBuf {
    root.dir().join(plan_rel(id))
}

/// The record at `path` read as `T`; none when there is no such file.
pub fn read_json<T: serde::de::DeserializeOwned>(root: &Root, path: &Path) -> Result<Option<T>, RecordError> {
    let shown = root.relative(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RecordError::Read { path: shown, source }),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| RecordError::Corrupt { path: shown, message: e.to_string() })
}

/// A record file as listed: its file name, path, size and modification time (nanoseconds since
/// the epoch; [`crate::caches::stat_of`]), so a reader can tell an unchanged file without
/// opening it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub modified_ns: u64,
}

/// The stored plans' files (`.memfold/plans/*.json`, any order).
pub fn plans_listed(root: &Root) -> Vec<Listed> {
    listed(&root.plans_dir())
}

/// The run records' files (`.memfold/runs/*.json`, any order).
pub fn runs_listed(root: &Root) -> Vec<Listed> {
    listed(&root.runs_dir())
}

fn listed(dir: &Path) -> Vec<Listed> {
    json_files(dir)
        .filter_map(|e| {
            let (size, modified_ns) = crate::caches::stat_of(&e.metadata().ok()?);
            Some(Listed { name: e.file_name().to_str()?.to_string(), path: e.path(), size, modified_ns })
        })
        .collect()
}

/// The `.json` files of `dir`, not yet stat'ed (the names are all most readers need).
fn json_files(dir: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json")))
}

/// Every stored plan's file (any order).
pub fn plan_files(root: &Root) -> Vec<PathBuf> {
    json_files(&root.plans_dir()).map(|e| e.path()).collect()
}

/// The runs recorded (their ids, from the file names; any order).
pub fn run_names(root: &Root) -> Vec<String> {
    json_files(&root.runs_dir())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_string))
        .collect()
}
