//! The files beside the table: `meta.json` (which schema version and embedder made the
//! vectors, and what the maintenance policy needs to remember between processes) and
//! `sources.json` (what the rows were built from, a [`Sources`]).
//!
//! It is written only under the index writer lock, atomically (temp file and rename).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IndexError;
use memfold_store::sources::Sources;

/// The contents of `meta.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Meta {
    pub schema_version: u32,
    /// [`memfold_models::embed::Embedder::id`] of the embedder that made every vector in the table.
    pub embedder: String,
    pub dim: usize,
    /// Rows in the table when the vector (ANN) index was last trained; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ann_trained_rows: Option<usize>,
    /// Rows were deleted or rewritten since the full-text index was built: lance keeps them in
    /// the index's BM25 statistics until it is rebuilt. Set before such a write, cleared when
    /// the full-text index is rebuilt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_stale: bool,
}

impl Meta {
    /// Whether the table's vectors can be used with an embedder described by `want`.
    pub fn compatible(&self, want: &Meta) -> bool {
        self.schema_version == want.schema_version && self.embedder == want.embedder && self.dim == want.dim
    }
}

pub(super) fn path(dir: &Path) -> PathBuf {
    dir.join("meta.json")
}

/// Read `meta.json`; a missing file is `None`, an unreadable one is `None` with a warning
/// (the table is then recreated, which is safe: it is derived).
pub(super) async fn read(dir: &Path) -> Result<Option<Meta>, IndexError> {
    let path = path(dir);
    match tokio::fs::read(&path).await {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(meta) => Ok(Some(meta)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "index meta unreadable; the index will be rebuilt");
                Ok(None)
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IndexError::Io { path, source }),
    }
}

/// Write `meta.json` atomically. Call only under the writer lock.
pub(super) async fn write(dir: &Path, meta: &Meta) -> Result<(), IndexError> {
    write_file(path(dir), serde_json::to_vec_pretty(meta).expect("meta serialises")).await
}

/// Write one of the index's own files (`meta.json`, `sources.json`) atomically, off the runtime.
pub(super) async fn write_file(path: PathBuf, bytes: Vec<u8>) -> Result<(), IndexError> {
    let target = path.clone();
    memfold_store::sys::blocking(move || memfold_store::atomic::write_atomic(&target, &bytes, None))
        .await
        .map_err(|e| IndexError::Meta { path, message: e.to_string() })
}

/// Where the record lives in the index folder.
pub(super) fn sources_path(dir: &Path) -> PathBuf {
    dir.join("sources.json")
}

/// Read the record; a missing or unreadable one is `None` (the next refresh reads every file).
pub(super) async fn read_sources(dir: &Path) -> Option<Sources> {
    let bytes = tokio::fs::read(sources_path(dir)).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Write the record atomically. Call only under the writer lock.
pub(super) async fn write_sources(dir: &Path, sources: &Sources) -> Result<(), IndexError> {
    write_file(sources_path(dir), serde_json::to_vec(sources).expect("sources serialise")).await
}

/// Remove the record (rows are about to change in a way it does not describe). Call only
/// under the writer lock.
pub(super) async fn forget_sources(dir: &Path) -> Result<(), IndexError> {
    let path = sources_path(dir);
    match tokio::fs::remove_file(&path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(IndexError::Io { path, source }),
    }
}
