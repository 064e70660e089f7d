//! Watching a memory root: a change to any markdown file, by any editor or program, triggers a refresh.
//!
//! notify (through the full debouncer) watches the root, `archive/` and `consolidated/`, each
//! without its subfolders: only `archive/*.md`, `consolidated/*.md` and `MEMORY.md` count, and
//! the two folders themselves (removing or renaming a folder gives one event for the folder
//! only; the watcher then watches the folder now at that path). `.memfold/` is not watched: the
//! index's store opens its files on every search, and on Linux each open would wake the
//! watcher's thread. memfold's own temp files never count. The debouncer's callback is
//! synchronous, so it only `try_send`s the
//! changed paths into a bounded channel; when the channel is full the batch is dropped,
//! which loses nothing because a refresh is already queued and every refresh re-reads all
//! files and compares content hashes. memfold's own writes therefore cost a hash check and
//! no index work. `MEMORY.md`, `memory.md` or `history.md` linked to a file elsewhere (see
//! `files::atomic`) is watched there too, in the folder holding the file the link points to
//! when watching starts; a change to it asks for a full refresh.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::mpsc;

use crate::store::Root;

/// Debounce of the file watcher.
pub(crate) const WATCH_DEBOUNCE: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    #[error("watching {path}: {source}")]
    Notify { path: PathBuf, source: notify::Error },
    #[error("resolving the root {path}: {source}")]
    Root { path: PathBuf, source: std::io::Error },
}

/// Changed paths of one debounced batch; empty means "rescan everything".
pub type Changes = Vec<PathBuf>;

/// A running watcher; dropping it stops watching.
pub struct Watcher {
    debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
    rx: mpsc::Receiver<Changes>,
    /// The folders of memory's files, each watched without its subfolders.
    folders: [PathBuf; 2],
    /// Events notify delivered, counted before any filtering.
    events: Arc<AtomicUsize>,
}

/// Whether a change at `path` can change what memfold knows.
pub fn is_watched(root: &Root, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root.dir()) else { return false };
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    let markdown = |name: &str| name.ends_with(".md") && !name.starts_with(".memfold-");
    match parts.as_slice() {
        ["MEMORY.md"] => true,
        ["archive"] | ["consolidated"] => true,
        ["archive", name] | ["consolidated", name] => markdown(name),
        _ => false,
    }
}

/// The files outside `root` that its linked `MEMORY.md`, `memory.md` or `history.md` point to.
fn linked_targets(root: &Root) -> Vec<PathBuf> {
    let under_root = root.dir().canonicalize().unwrap_or_else(|_| root.dir().to_path_buf());
    [root.memory_md(), root.memory(), root.history()]
        .into_iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()))
        .filter_map(|path| path.canonicalize().ok())
        .filter(|target| !target.starts_with(&under_root))
        .collect()
}

impl Watcher {
    /// Start watching `root`; events are grouped over `debounce`.
    /// Watch `dir`, a root as given (notify reports canonical paths, so the watcher compares
    /// them with the canonical root), with the daemon's debounce.
    pub fn of_root(dir: &Path) -> Result<Watcher, WatchError> {
        let canonical = dir.canonicalize().map_err(|source| WatchError::Root { path: dir.to_path_buf(), source })?;
        Watcher::start(&Root::new(canonical), WATCH_DEBOUNCE)
    }

    pub fn start(root: &Root, debounce: Duration) -> Result<Watcher, WatchError> {
        let (tx, rx) = mpsc::channel::<Changes>(16);
        let filter_root = root.clone();
        let targets = linked_targets(root);
        let linked = targets.clone();
        let events_seen = Arc::new(AtomicUsize::new(0));
        let seen = events_seen.clone();
        let handler = move |result: DebounceEventResult| {
            let changes = match result {
                Ok(events) => {
                    seen.fetch_add(events.len(), Ordering::Relaxed);
                    let to_target = || events.iter().flat_map(|e| e.paths.iter()).any(|p| linked.contains(p));
                    if events.iter().any(|e| e.need_rescan()) || to_target() {
                        Some(Vec::new())
                    } else {
                        let paths: Vec<PathBuf> = events
                            .iter()
                            .filter(|e| !e.kind.is_access())
                            .flat_map(|e| e.paths.iter())
                            .filter(|p| is_watched(&filter_root, p))
                            .cloned()
                            .collect();
                        (!paths.is_empty()).then_some(paths)
                    }
                }
                Err(errors) => {
                    for error in errors {
                        tracing::warn!(error = %error, "watch error; rescanning");
                    }
                    Some(Vec::new())
                }
            };
            if let Some(changes) = changes
                && tx.try_send(changes).is_err()
            {
                tracing::debug!("watch channel full; a refresh is already queued");
            }
        };
        let notify_err = |source| WatchError::Notify { path: root.dir().to_path_buf(), source };
        let mut debouncer = new_debouncer(debounce, None, handler).map_err(notify_err)?;
        debouncer.watch(root.dir(), RecursiveMode::NonRecursive).map_err(notify_err)?;
        for target in &targets {
            if let Some(dir) = target.parent() {
                let err = |source| WatchError::Notify { path: dir.to_path_buf(), source };
                debouncer.watch(dir, RecursiveMode::NonRecursive).map_err(err)?;
            }
        }
        let folders = [root.archive_dir(), root.consolidated_dir()];
        for folder in &folders {
            watch_folder(&mut debouncer, folder)?;
        }
        Ok(Watcher { debouncer, rx, folders, events: events_seen })
    }

    /// The next batch of changes, merged with any further batches already waiting. When a
    /// batch names `archive/` or `consolidated/` itself (made, removed or renamed), or asks for
    /// a rescan, the folder now at that path is watched before the batch is returned, so the
    /// refresh that follows sees every file written after the watch began.
    pub async fn next(&mut self) -> Option<Changes> {
        let mut changes = self.rx.recv().await?;
        while let Ok(more) = self.rx.try_recv() {
            if more.is_empty() {
                changes.clear();
                break;
            }
            if !changes.is_empty() {
                changes.extend(more);
            }
        }
        if changes.is_empty() || changes.iter().any(|p| self.folders.contains(p)) {
            for folder in &self.folders {
                if let Err(e) = watch_folder(&mut self.debouncer, folder) {
                    tracing::warn!(error = %e, "could not watch a folder of memory's files; a refresh reads it anyway");
                    changes.clear();
                }
            }
        }
        Some(changes)
    }

    /// How many events notify has delivered, before any filtering.
    pub fn events_seen(&self) -> usize {
        self.events.load(Ordering::Relaxed)
    }
}

/// Watch `folder` (not its subfolders) as it now is. A folder that does not exist is not an
/// error: its creation shows in the root's watch, and [`Watcher::next`] watches it then.
fn watch_folder(
    debouncer: &mut Debouncer<notify::RecommendedWatcher, RecommendedCache>,
    folder: &Path,
) -> Result<(), WatchError> {
    // A removed folder's watch is gone with it; one at a path made again is a new watch.
    let _ = debouncer.unwatch(folder);
    match debouncer.watch(folder, RecursiveMode::NonRecursive) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind, notify::ErrorKind::PathNotFound) || !folder.is_dir() => Ok(()),
        Err(source) => Err(WatchError::Notify { path: folder.to_path_buf(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher over a fresh root, given as the daemon gives it (canonical).
    fn watched() -> (tempfile::TempDir, Root, Watcher) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().canonicalize().unwrap());
        root.init().unwrap();
        let watcher = Watcher::start(&root, Duration::from_millis(100)).unwrap();
        (dir, root, watcher)
    }

    /// The next batch names `path`, or asks for a rescan.
    async fn sees(watcher: &mut Watcher, path: &Path) {
        let changes = tokio::time::timeout(Duration::from_secs(10), watcher.next()).await.unwrap().unwrap();
        assert!(changes.is_empty() || changes.contains(&path.to_path_buf()), "{path:?} not in {changes:?}");
    }

    #[test]
    fn only_the_markdown_truth_is_watched() {
        let root = Root::new("/r");
        for yes in ["/r/MEMORY.md", "/r/archive/2026-11-22.md", "/r/consolidated/memory.md", "/r/archive"] {
            assert!(is_watched(&root, Path::new(yes)), "{yes}");
        }
        for no in [
            "/r/.memfold/state.json",
            "/r/.memfold/index/data.lance",
            "/r/consolidated/.memfold-abc.tmp",
            "/r/notes.md",
            "/r/archive/sub/x.md",
            "/elsewhere/archive/2026-11-22.md",
            "/r/archive/2026-11-22.md.swp",
        ] {
            assert!(!is_watched(&root, Path::new(no)), "{no}");
        }
    }

    #[tokio::test]
    async fn vim_style_and_rename_saves_are_both_seen() {
        let (_dir, root, mut watcher) = watched();
        let target = root.memory();
        // vim: write a swap/backup, then replace the file.
        std::fs::write(root.consolidated_dir().join("memory.md~"), "old").unwrap();
        std::fs::remove_file(&target).unwrap();
        std::fs::write(&target, "Likes tea.\n").unwrap();
        sees(&mut watcher, &target).await;
        // atomic save: temp file renamed over the target.
        let tmp = root.consolidated_dir().join("memory.md.tmp-editor");
        std::fs::write(&tmp, "Likes coffee.\n").unwrap();
        std::fs::rename(&tmp, &target).unwrap();
        sees(&mut watcher, &target).await;
    }

    #[tokio::test]
    async fn the_private_state_wakes_nothing() {
        let (_dir, root, mut watcher) = watched();
        // What the index's store does on every search and write: open, read, make and remove
        // files and folders under `.memfold/`.
        let index = root.dir().join(".memfold").join("index").join("docs.lance").join("_versions");
        std::fs::create_dir_all(&index).unwrap();
        for i in 0..20 {
            let file = index.join(format!("{i}.manifest"));
            std::fs::write(&file, "x").unwrap();
            std::fs::read(&file).unwrap();
            std::fs::remove_file(&file).unwrap();
        }
        std::fs::remove_dir_all(root.dir().join(".memfold").join("index")).unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(600), watcher.next()).await;
        assert!(quiet.is_err(), "{quiet:?}");
        assert_eq!(watcher.events_seen(), 0, "notify delivered events for files memfold does not watch");
        // A day file still counts.
        let day = root.archive_dir().join("2026-11-26.md");
        std::fs::write(&day, "- 09:00 Likes tea. <!--f f-1-->\n").unwrap();
        sees(&mut watcher, &day).await;
    }

    #[tokio::test]
    async fn a_folder_made_again_is_watched_again() {
        let (_dir, root, mut watcher) = watched();
        let archive = root.archive_dir();
        std::fs::remove_dir_all(&archive).unwrap();
        sees(&mut watcher, &archive).await;
        std::fs::create_dir(&archive).unwrap();
        sees(&mut watcher, &archive).await;
        // A file in the new folder is seen.
        let day = archive.join("2026-11-26.md");
        std::fs::write(&day, "- 09:00 Likes tea. <!--f f-1-->\n").unwrap();
        sees(&mut watcher, &day).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn an_edit_through_a_link_elsewhere_asks_for_a_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().join("root"));
        root.init().unwrap();
        let vault = dir.path().canonicalize().unwrap().join("vault");
        std::fs::create_dir(&vault).unwrap();
        std::fs::rename(root.memory(), vault.join("memory.md")).unwrap();
        std::os::unix::fs::symlink(vault.join("memory.md"), root.memory()).unwrap();
        let mut watcher = Watcher::start(&root, Duration::from_millis(100)).unwrap();
        // Another file in that folder is not memfold's.
        std::fs::write(vault.join("other.md"), "x").unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(600), watcher.next()).await;
        assert!(quiet.is_err(), "{quiet:?}");
        std::fs::write(vault.join("memory.md"), "Likes tea.\n").unwrap();
        let changes = tokio::time::timeout(Duration::from_secs(10), watcher.next()).await.unwrap().unwrap();
        assert!(changes.is_empty(), "a full refresh: {changes:?}");
    }
}
