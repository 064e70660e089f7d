//! Watching memory roots: a change to any markdown file, by any editor or program, triggers a refresh.
//!
//! notify (through the full debouncer) watches each root, its `archive/` and `consolidated/`,
//! each without its subfolders: only `archive/*.md`, `consolidated/*.md` and `MEMORY.md` count,
//! and the two folders themselves (removing or renaming a folder gives one event for the folder
//! only; the watcher then watches the folder now at that path). `.memfold/` is not watched: the
//! index's store opens its files on every search, and on Linux each open would wake the
//! watcher's thread. memfold's own temp files never count. The debouncer's callback is
//! synchronous, so it only `try_send`s the changed paths into a bounded channel; when the
//! channel is full the batch is dropped, which loses nothing because a refresh is already
//! queued and every refresh re-reads all files and compares content hashes. memfold's own
//! writes therefore cost a hash check and no index work. `MEMORY.md`, `memory.md` or
//! `history.md` linked to a file elsewhere (see `store::atomic`) is watched there too, in the
//! folder holding the file the link points to when watching starts; a change to it asks for a
//! full refresh of its root.
//!
//! One watcher serves every root a daemon has open (a home's spaces come and go as they open
//! and close: [`WatchHandle::add`], [`WatchHandle::remove`]): one notify instance and one thread,
//! however many spaces, and each batch says which root it is for.

use memfold_store::sys::guard as lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::mpsc;

use memfold_store::Root;

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

/// The changes of one root: its key (the space's name; empty for a lone root) and paths.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub key: String,
    pub changes: Changes,
}

/// A root being watched.
#[derive(Debug, Clone)]
struct Watched {
    key: String,
    /// Canonical: notify reports canonical paths.
    root: Root,
    /// The files outside the root its links point to.
    linked: Vec<PathBuf>,
}

impl Watched {
    fn folders(&self) -> [PathBuf; 2] {
        [self.root.archive_dir(), self.root.consolidated_dir()]
    }
}

type Notifier = Debouncer<notify::RecommendedWatcher, RecommendedCache>;

/// Adds and removes roots of a running [`Watcher`]; cheap to clone.
#[derive(Clone)]
pub struct WatchHandle {
    debouncer: Arc<Mutex<Notifier>>,
    roots: Arc<Mutex<Vec<Watched>>>,
}

/// A running watcher; dropping it (and its handles) stops watching.
pub struct Watcher {
    handle: WatchHandle,
    rx: mpsc::Receiver<Vec<Batch>>,
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

/// The batches of one debounced group of events: per root, the paths that count, or a rescan
/// (an empty list) when notify asks for one or a linked file changed.
fn batches(events: &[notify_debouncer_full::DebouncedEvent], roots: &[Watched]) -> Vec<Batch> {
    if events.iter().any(|e| e.need_rescan()) {
        return roots.iter().map(|w| Batch { key: w.key.clone(), changes: Vec::new() }).collect();
    }
    let mut by_root: HashMap<&str, Option<Changes>> = HashMap::new();
    for path in events.iter().filter(|e| !e.kind.is_access()).flat_map(|e| e.paths.iter()) {
        for watched in roots {
            if watched.linked.contains(path) {
                by_root.insert(&watched.key, None);
            } else if is_watched(&watched.root, path)
                && let Some(changes) = by_root.entry(&watched.key).or_insert_with(|| Some(Vec::new()))
            {
                changes.push(path.clone());
            }
        }
    }
    by_root
        .into_iter()
        .map(|(key, changes)| Batch { key: key.to_string(), changes: changes.unwrap_or_default() })
        .collect()
}

impl Watcher {
    /// A watcher of no root yet; events are grouped over `debounce`.
    pub fn new(debounce: Duration) -> Result<Watcher, WatchError> {
        let (tx, rx) = mpsc::channel::<Vec<Batch>>(16);
        let roots: Arc<Mutex<Vec<Watched>>> = Arc::default();
        let events_seen = Arc::new(AtomicUsize::new(0));
        let (seen, watched) = (events_seen.clone(), roots.clone());
        let handler = move |result: DebounceEventResult| {
            let roots = lock(&watched).clone();
            let batches = match result {
                Ok(events) => {
                    seen.fetch_add(events.len(), Ordering::Relaxed);
                    batches(&events, &roots)
                }
                Err(errors) => {
                    for error in errors {
                        tracing::warn!(error = %error, "watch error; rescanning");
                    }
                    roots.iter().map(|w| Batch { key: w.key.clone(), changes: Vec::new() }).collect()
                }
            };
            if !batches.is_empty() && tx.try_send(batches).is_err() {
                tracing::debug!("watch channel full; a refresh is already queued");
            }
        };
        let debouncer = new_debouncer(debounce, None, handler)
            .map_err(|source| WatchError::Notify { path: PathBuf::from("/"), source })?;
        let handle = WatchHandle { debouncer: Arc::new(Mutex::new(debouncer)), roots };
        Ok(Watcher { handle, rx, events: events_seen })
    }

    /// Watch `dir`, a root as given, under the empty key, with the daemon's debounce.
    pub fn of_root(dir: &Path) -> Result<Watcher, WatchError> {
        let watcher = Watcher::new(WATCH_DEBOUNCE)?;
        watcher.handle.add("", dir)?;
        Ok(watcher)
    }

    /// Start watching `root` alone, under the empty key.
    pub fn start(root: &Root, debounce: Duration) -> Result<Watcher, WatchError> {
        let watcher = Watcher::new(debounce)?;
        watcher.handle.add("", root.dir())?;
        Ok(watcher)
    }

    pub fn handle(&self) -> WatchHandle {
        self.handle.clone()
    }

    /// The next batches of changes, merged with any further ones already waiting, by root.
    /// When a batch names `archive/` or `consolidated/` itself (made, removed or renamed), or
    /// asks for a rescan, the folder now at that path is watched before the batch is returned,
    /// so the refresh that follows sees every file written after the watch began.
    pub async fn next_batches(&mut self) -> Option<Vec<Batch>> {
        let mut merged: Vec<Batch> = Vec::new();
        let mut add = |batches: Vec<Batch>| {
            for batch in batches {
                match merged.iter_mut().find(|b| b.key == batch.key) {
                    Some(known) if known.changes.is_empty() => {}
                    Some(known) if batch.changes.is_empty() => known.changes.clear(),
                    Some(known) => known.changes.extend(batch.changes),
                    None => merged.push(batch),
                }
            }
        };
        add(self.rx.recv().await?);
        while let Ok(more) = self.rx.try_recv() {
            add(more);
        }
        for batch in &mut merged {
            self.handle.rewatch(batch);
        }
        Some(merged)
    }

    /// The next batch of changes of a lone root (its key is ignored).
    pub async fn next(&mut self) -> Option<Changes> {
        let batches = self.next_batches().await?;
        let mut changes: Changes = Vec::new();
        for batch in batches {
            if batch.changes.is_empty() {
                return Some(Vec::new());
            }
            changes.extend(batch.changes);
        }
        Some(changes)
    }

    /// How many events notify has delivered, before any filtering.
    pub fn events_seen(&self) -> usize {
        self.events.load(Ordering::Relaxed)
    }
}

impl WatchHandle {
    /// Watch the root at `dir` under `key` (a key already watched is watched anew).
    pub fn add(&self, key: &str, dir: &Path) -> Result<(), WatchError> {
        let canonical = dir.canonicalize().map_err(|source| WatchError::Root { path: dir.to_path_buf(), source })?;
        let root = Root::new(canonical);
        let watched = Watched { key: key.to_string(), linked: linked_targets(&root), root };
        {
            let mut debouncer = lock(&self.debouncer);
            for dir in std::iter::once(watched.root.dir()).chain(watched.linked.iter().filter_map(|t| t.parent())) {
                debouncer
                    .watch(dir, RecursiveMode::NonRecursive)
                    .map_err(|source| WatchError::Notify { path: dir.to_path_buf(), source })?;
            }
            for folder in &watched.folders() {
                watch_folder(&mut debouncer, folder)?;
            }
        }
        let mut roots = lock(&self.roots);
        roots.retain(|w| w.key != key);
        roots.push(watched);
        Ok(())
    }

    /// Stop watching the root under `key`.
    pub fn remove(&self, key: &str) {
        let gone: Vec<Watched> = {
            let mut roots = lock(&self.roots);
            let (gone, kept) = std::mem::take(&mut *roots).into_iter().partition(|w| w.key == key);
            *roots = kept;
            gone
        };
        let mut debouncer = lock(&self.debouncer);
        for watched in gone {
            let _ = debouncer.unwatch(watched.root.dir());
            for folder in &watched.folders() {
                let _ = debouncer.unwatch(folder);
            }
        }
    }

    /// Watch again the folders of `batch`'s root that it names (or all, for a rescan); a
    /// folder that cannot be watched turns the batch into a rescan.
    fn rewatch(&self, batch: &mut Batch) {
        let Some(watched) = lock(&self.roots).iter().find(|w| w.key == batch.key).cloned() else { return };
        let folders = watched.folders();
        if batch.changes.is_empty() || batch.changes.iter().any(|p| folders.contains(p)) {
            let mut debouncer = lock(&self.debouncer);
            for folder in &folders {
                if let Err(e) = watch_folder(&mut debouncer, folder) {
                    tracing::warn!(error = %e, "could not watch a folder of memory's files; a refresh reads it anyway");
                    batch.changes.clear();
                }
            }
        }
    }
}

/// Watch `folder` (not its subfolders) as it now is. A folder that does not exist is not an
/// error: its creation shows in the root's watch, and [`Watcher::next_batches`] watches it then.
fn watch_folder(debouncer: &mut Notifier, folder: &Path) -> Result<(), WatchError> {
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

    #[tokio::test]
    async fn one_watcher_tells_the_roots_apart_and_forgets_a_removed_one() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Root::new(dir.path().join("a")), Root::new(dir.path().join("b")));
        a.init().unwrap();
        b.init().unwrap();
        let mut watcher = Watcher::new(Duration::from_millis(100)).unwrap();
        let handle = watcher.handle();
        handle.add("a", a.dir()).unwrap();
        handle.add("b", b.dir()).unwrap();
        let day = b.dir().canonicalize().unwrap().join("archive/2026-11-26.md");
        std::fs::write(&day, "- 09:00 Likes tea. <!--f f-1-->\n").unwrap();
        let batches = tokio::time::timeout(Duration::from_secs(10), watcher.next_batches()).await.unwrap().unwrap();
        assert_eq!(batches, [Batch { key: "b".into(), changes: vec![day] }]);
        handle.remove("b");
        std::fs::write(b.archive_dir().join("2026-11-27.md"), "- 09:00 Likes coffee.\n").unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(600), watcher.next_batches()).await;
        assert!(quiet.is_err(), "{quiet:?}");
    }

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
