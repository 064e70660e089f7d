//! The index writer lock: an exclusive `flock` on `<root>/.memfold/index.lock`.
//!
//! Every write to the table (sync, clear, recreation on an embedder change) happens while
//! the lock is held, in this process or any other, so two writers never race on the same
//! keys. Readers take no lock. The lock is a [`memfold_store::sys::lock::LockGuard`] (std's blocking
//! `File::lock`) taken inside `spawn_blocking`; writers wait for each other rather than fail,
//! and a waiter logs who holds the lock. Locks on separately opened files conflict within one
//! process too, so two `Index` handles in one process serialise as well.

use std::path::{Path, PathBuf};

use memfold_store::sys::lock::{LockError, LockGuard};

use super::IndexError;

/// The lock file for the index at `dir` (`<root>/.memfold/index` → `<root>/.memfold/index.lock`).
pub(super) fn path(dir: &Path) -> PathBuf {
    dir.with_file_name("index.lock")
}

/// Wait for the writer lock at `path`; dropping the guard releases it.
pub(super) async fn acquire(path: &Path) -> Result<LockGuard, IndexError> {
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        if let Some(holder) = memfold_store::sys::lock::holder(&target) {
            tracing::info!(lock = %target.display(), %holder, "index writer lock held; waiting");
        }
        LockGuard::acquire(&target)
    })
    .await
    .map_err(|e| LockError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) })?
    .map_err(IndexError::from)
}

/// Take the writer lock at `path` if it is free: `None` when a writer holds it.
pub(super) async fn try_acquire(path: &Path) -> Result<Option<LockGuard>, IndexError> {
    let target = path.to_path_buf();
    let taken = tokio::task::spawn_blocking(move || LockGuard::try_acquire(&target, "an index write"))
        .await
        .map_err(|e| LockError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) })?;
    match taken {
        Ok(guard) => Ok(Some(guard)),
        Err(LockError::Held { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
