//! Sync through git (`memfold sync`, and the daemon's syncs): commit what changed here, fetch,
//! merge with [`crate::planning::sync`], push; a push refused because someone pushed first is
//! fetched and merged again.
//!
//! The whole sync holds the consolidation lock, so it never interleaves with a pass, an apply,
//! an undo or a forget. The merge is one [`memfold_store::commit`] change, so a kill at any
//! point leaves the files as before or after it; the change also writes
//! `.memfold/sync-merge`, the other side's commit, and the next sync that finds it makes the
//! merge commit a killed one did not make. What the last sync did and why it failed is kept
//! in `.memfold/sync.json` for `status` and `sync --status`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Memory, Rewritten};
use crate::error::Error;
use crate::planning::sync::{self, Merged, Side};
use memfold_store::Root;
use memfold_store::atomic::write_atomic;
use memfold_store::commit;
use memfold_store::git::{BRANCH, Git, Pushed, REMOTE, Tree};
use memfold_store::ledger::Ledger;
use memfold_store::sys::blocking;
use memfold_store::sys::lock::LockGuard;

/// Pushes refused because someone pushed first, fetched and merged again, before giving up.
const PUSH_TRIES: usize = 5;

/// What `.gitignore` keeps on this machine. Everything under `.memfold/` is this machine's
/// (the index, locks, the token, caches, the commit record, plans, runs, the journal, the
/// recall log) except the tombstones, which must travel: a fact deleted here stays deleted there.
/// `memfold.toml` stays too: it says where this machine's LLM and embedder are.
const IGNORED: &str = "# memfold sync: what stays on this machine\n/.memfold/*\n!/.memfold/tombstones.jsonl\n/memfold.toml\n*.swp\n*~\n.#*\n.DS_Store\n";

/// `.memfold/sync.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncState {
    /// The remote's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// When a sync last finished (fetched, merged, pushed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<DateTime<Utc>>,
    /// Why the last attempt failed (cleared by one that succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What the last successful sync brought in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
}

/// `memfold sync --status`.
#[derive(Debug, Clone, Serialize)]
pub struct SyncStatus {
    /// Whether the root is set up for sync.
    pub enabled: bool,
    #[serde(flatten)]
    pub state: SyncState,
    /// Commits here the remote has not got, as of the last fetch.
    pub ahead: usize,
    /// Commits on the remote not merged here, as of the last fetch.
    pub behind: usize,
    /// Whether files changed here since the last commit (the next sync commits them).
    pub changed: bool,
}

/// What a sync did.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    pub remote: String,
    /// Whether what changed here was committed.
    pub committed: bool,
    /// Merges made (0 when the remote had nothing new, more when a push was refused).
    pub merges: usize,
    /// What the merges brought in, added up.
    pub merged: Merged,
    pub pushed: bool,
    /// The commit both sides now have.
    pub head: Option<String>,
    /// memfold's own time (reading, merging, writing), milliseconds.
    pub ms: u64,
    /// Time spent in git (transfer, objects, refs), milliseconds.
    pub git_ms: u64,
}

fn state_path(root: &Root) -> std::path::PathBuf {
    root.sync_state()
}

fn merge_marker(root: &Root) -> std::path::PathBuf {
    root.sync_merge_marker()
}

/// The marker's path as a commit record names it.
const MERGE_MARKER: &str = ".memfold/sync-merge";

pub fn load_state(root: &Root) -> SyncState {
    std::fs::read_to_string(state_path(root)).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

fn save_state(root: &Root, state: &SyncState) {
    let text = serde_json::to_string_pretty(state).unwrap_or_default() + "\n";
    if let Err(e) = write_atomic(&state_path(root), text.as_bytes(), None) {
        tracing::warn!(error = %e, "could not record how the sync went");
    }
}

/// Times the git calls of one sync (the rest of its time is memfold's own).
#[derive(Default)]
struct GitTime {
    git: Duration,
}

impl GitTime {
    fn git<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.git += start.elapsed();
        out
    }
}

impl Memory {
    /// Sync with the remote: `init` sets it (making the root a repository if it is not one).
    pub async fn sync(&self, init: Option<String>) -> Result<SyncReport, Error> {
        let me = self.clone();
        let (report, rewrote) = blocking(move || {
            let root = me.inner.root.clone();
            let mut state = load_state(&root);
            state.last_attempt = Some(me.inner.clock.now());
            let out = me.sync_blocking(init);
            match &out {
                Ok((report, _)) => {
                    state.remote = Some(report.remote.clone());
                    state.last_sync = state.last_attempt;
                    state.last_error = None;
                    state.merged = Some(report.merged.clone());
                }
                // Another writer held the lock: nothing was tried; the next sync will.
                Err(e) if e.kind() == crate::error::Kind::Busy => return out,
                Err(e) => state.last_error = Some(e.to_string()),
            }
            save_state(&root, &state);
            out
        })
        .await?;
        if rewrote {
            self.tell(Rewritten::Memory);
            self.tell(Rewritten::Promoted);
        }
        self.refresh_after_change().await;
        Ok(report)
    }

    /// Whether the daemon should sync now: sync is set up (the root has its repository, or
    /// `[sync] remote` is set) and, unless `after_pass`, `[sync] interval_minutes` have passed
    /// since the last attempt.
    pub fn sync_due(&self, after_pass: bool) -> bool {
        due(&self.inner.root, &self.inner.config.sync, after_pass, self.inner.clock.now())
    }

    /// Where sync stands, without touching the network.
    pub async fn sync_status(&self) -> Result<SyncStatus, Error> {
        let root = self.inner.root.clone();
        blocking(move || {
            let git = Git::new(root.dir());
            let state = load_state(&root);
            if !git.is_repo() || git.remote_url()?.is_none() {
                return Ok(SyncStatus { enabled: false, state, ahead: 0, behind: 0, changed: false });
            }
            let (head, remote) = (git.head()?, git.remote_head()?);
            let (ahead, behind) = match (&head, &remote) {
                (Some(h), Some(r)) => git.ahead_behind(h, r)?,
                (Some(_), None) => (1, 0),
                _ => (0, 0),
            };
            let changed = git.changed()?;
            Ok(SyncStatus { enabled: true, state, ahead, behind, changed })
        })
        .await
    }

    fn sync_blocking(&self, init: Option<String>) -> Result<(SyncReport, bool), Error> {
        let started = Instant::now();
        let mut clock = GitTime::default();
        let root = &self.inner.root;
        let lock = self.lock()?;
        self.reconcile_locked(&lock)?;
        let git = Git::new(root.dir());
        // `[sync] remote` sets a root up the first time only: a remote set since (by `--init`)
        // is not changed back.
        let set_up = git.is_repo() && git.remote_url()?.is_some();
        let configured = Some(self.inner.config.sync.remote.clone()).filter(|r| !r.trim().is_empty() && !set_up);
        let remote = match init.or(configured) {
            Some(url) => {
                if url.trim().starts_with('-') || url.trim().is_empty() {
                    return Err(Error::BadInput(format!(
                        "{url:?} is not a git remote (a path, an ssh or https address)"
                    )));
                }
                clock.git(|| -> Result<(), Error> {
                    if !git.is_repo() {
                        git.init()?;
                    }
                    Ok(git.set_remote(url.trim())?)
                })?;
                url
            }
            None if git.is_repo() => git.remote_url()?.ok_or_else(not_set_up(root))?,
            None => return Err(not_set_up(root)()),
        };
        clear_stale_locks(root);
        ensure_ignored(root)?;
        let mut committed = clock.git(|| commit_local(&git, root))?;
        commit::failpoint("sync", "committed");
        let (mut merges, mut merged, mut pushed, mut rewrote) = (0, Merged::default(), false, false);
        for _ in 0..PUSH_TRIES {
            let theirs = clock.git(|| git.fetch())?;
            let head = git.head()?;
            if let Some(theirs) = &theirs
                && !head.as_deref().is_some_and(|h| git.is_ancestor(theirs, h).unwrap_or(false))
            {
                let (got, wrote) = self.merge_remote(&git, &lock, head.as_deref(), theirs, &mut clock)?;
                add(&mut merged, got);
                rewrote |= wrote;
                merges += 1;
                committed = true;
            }
            let head = git.head()?;
            if head.is_some() && head == theirs {
                pushed = true; // nothing the remote lacks
                break;
            }
            commit::failpoint("sync", "merged");
            match clock.git(|| git.push())? {
                Pushed::Done => {
                    pushed = true;
                    break;
                }
                Pushed::Rejected(why) => tracing::info!(%why, "push refused: someone pushed first; fetching again"),
            }
        }
        if !pushed {
            return Err(Error::Other(format!(
                "sync: the remote refused {PUSH_TRIES} pushes in a row (others keep pushing); everything here is merged and committed, run sync again"
            )));
        }
        drop(lock);
        let total = started.elapsed();
        let report = SyncReport {
            remote,
            committed,
            merges,
            merged,
            pushed,
            head: git.head()?,
            ms: total.saturating_sub(clock.git).as_millis() as u64,
            git_ms: clock.git.as_millis() as u64,
        };
        Ok((report, rewrote))
    }

    /// Merge the remote's `theirs` into the files and commit the merge. Returns what it brought
    /// and whether `memory.md` was rewritten.
    fn merge_remote(
        &self,
        git: &Git,
        lock: &LockGuard,
        head: Option<&str>,
        theirs: &str,
        clock: &mut GitTime,
    ) -> Result<(Merged, bool), Error> {
        let root = &self.inner.root;
        let (base_files, ours_files, theirs_files) = clock.git(|| -> Result<_, Error> {
            let base = match head {
                Some(h) => git.merge_base(h, theirs)?,
                None => None,
            };
            let files = |c: Option<&str>| c.map_or(Ok(Tree::default()), |c| git.files(c));
            Ok((files(base.as_deref())?, files(head)?, git.files(theirs)?))
        })?;
        // Every path the other side changed that is memfold's to merge, and the four files the
        // merge always reads; any other path the other side changed is named, never read nor
        // written (`memfold.toml`, `.memfold/…`, a `..` git let through, a symbolic link).
        let changed_there = |path: &String, blob: &String| ours_files.files.get(path) != Some(blob);
        let mut refused: Vec<String> = theirs_files
            .files
            .iter()
            .filter(|(path, blob)| !sync::allowed(path) && changed_there(path, blob))
            .filter(|(path, blob)| base_files.files.get(*path) != Some(*blob))
            .map(|(path, _)| path.clone())
            .chain(theirs_files.other.iter().filter(|p| !base_files.other.contains(p)).cloned())
            .collect();
        let mut paths: Vec<&str> = theirs_files
            .files
            .iter()
            .filter(|(path, blob)| sync::allowed(path) && changed_there(path, blob))
            .map(|(path, _)| path.as_str())
            .collect();
        paths.extend([sync::MEMORY, sync::HISTORY, sync::TOMBSTONES, sync::PROMOTED]);
        paths.sort_unstable();
        paths.dedup();
        let wanted = paths
            .iter()
            .flat_map(|p| [base_files.files.get(*p), theirs_files.files.get(*p)])
            .flatten()
            .map(String::as_str);
        let blobs = clock.git(|| git.blobs(wanted))?;
        let text =
            |blob: Option<&String>| blob.and_then(|b| blobs.get(b)).map(|b| String::from_utf8_lossy(b).into_owned());
        let mut files = BTreeMap::new();
        for path in paths {
            let ours = match std::fs::read(root.dir().join(path)) {
                Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(source) => return Err(Error::Read { path: path.to_string(), source }),
            };
            let side =
                Side { base: text(base_files.files.get(path)), ours, theirs: text(theirs_files.files.get(path)) };
            files.insert(path.to_string(), side);
        }
        let ledger = Ledger::load(root)?;
        let now = self.inner.clock.now();
        let short = &theirs[..theirs.len().min(7)];
        let other = format!("{REMOTE}/{BRANCH} {short}");
        let run = format!("r-{}-sync-{}", now.format("%Y%m%dT%H%M%SZ"), &theirs[..theirs.len().min(4)]);
        let request = sync::Request {
            ledger: &ledger,
            files: &files,
            other: &other,
            run: &run,
            now,
            today: self.inner.clock.day_of(now),
            secrets: self.inner.config.ingest.secrets,
        };
        let (mut change, mut merged) = sync::plan(&request).map_err(Error::Unreadable)?;
        refused.append(&mut merged.refused);
        refused.sort_unstable();
        refused.dedup();
        if !refused.is_empty() {
            tracing::warn!(paths = ?refused, "the other machine's commit holds files that are not memfold's to merge; left alone");
        }
        merged.refused = refused;
        let rewrote = change.memory.is_some();
        change.records.push((MERGE_MARKER.to_string(), Some(format!("{theirs}\n"))));
        commit::commit(root, &change, lock)?;
        clock.git(|| finish_merge(git, root, head, theirs))?;
        tracing::info!(
            facts = merged.facts,
            entries = merged.entries,
            conflicts = merged.conflicts.len(),
            "merged {other}"
        );
        Ok((merged, rewrote))
    }
}

/// [`Memory::sync_due`] from the files, without opening the root (the scheduler's tick).
pub fn due(root: &Root, config: &memfold_store::config::SyncConfig, after_pass: bool, now: DateTime<Utc>) -> bool {
    let set_up = root.git_dir().exists() || !config.remote.trim().is_empty();
    if !set_up {
        return false;
    }
    if after_pass {
        return true;
    }
    let every = chrono::Duration::minutes(config.interval_minutes.min(1 << 30) as i64);
    config.interval_minutes > 0 && load_state(root).last_attempt.is_none_or(|last| now - last >= every)
}

fn not_set_up(root: &Root) -> impl FnOnce() -> Error + '_ {
    move || {
        Error::BadInput(format!(
            "{} is not set up for sync: run `memfold sync --init REMOTE` (or set [sync] remote)",
            root.dir().display()
        ))
    }
}

fn add(total: &mut Merged, more: Merged) {
    total.facts += more.facts;
    total.entries += more.entries;
    total.tombstones += more.tombstones;
    total.conflicts.extend(more.conflicts);
    total.buried.extend(more.buried);
    total.refused.extend(more.refused);
    total.refused.sort_unstable();
    total.refused.dedup();
    total.redacted += more.redacted;
    total.fewer.extend(more.fewer);
    total.fewer.sort_unstable();
    total.fewer.dedup();
    total.plan = more.plan.or(total.plan.take());
}

/// git's own lock files left by a process killed in the middle of a git call. The caller holds
/// the consolidation lock, and only a sync runs git in the root, so any there are stale.
fn clear_stale_locks(root: &Root) {
    let git = root.git_dir();
    let locks = [
        git.join("index.lock"),
        git.join("HEAD.lock"),
        git.join("packed-refs.lock"),
        git.join("config.lock"),
        git.join(format!("refs/heads/{BRANCH}.lock")),
        git.join(format!("refs/remotes/{REMOTE}/{BRANCH}.lock")),
    ];
    for lock in locks {
        if lock.exists() {
            tracing::warn!(file = %lock.display(), "removing a lock a stopped git left");
            let _ = std::fs::remove_file(&lock);
        }
    }
}

/// `.gitignore` holds what stays on this machine (added once, a person's lines kept).
fn ensure_ignored(root: &Root) -> Result<(), Error> {
    let path = root.gitignore();
    let now = std::fs::read_to_string(&path).unwrap_or_default();
    if now.lines().any(|l| l.trim() == "/.memfold/*") {
        return Ok(());
    }
    let mut text = now.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(IGNORED);
    write_atomic(&path, text.as_bytes(), None)?;
    Ok(())
}

/// Commit what changed here since the last commit, with the other side of a merge a stopped
/// sync wrote but did not commit. Returns whether it made a commit.
fn commit_local(git: &Git, root: &Root) -> Result<bool, Error> {
    let pending =
        std::fs::read_to_string(merge_marker(root)).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    git.add_all()?;
    let tree = git.write_tree()?;
    commit::failpoint("sync", "staged");
    let head = git.head()?;
    let mut parents: Vec<&str> = head.iter().map(String::as_str).collect();
    if let Some(theirs) = pending.as_deref()
        && !head.as_deref().is_some_and(|h| git.is_ancestor(theirs, h).unwrap_or(false))
    {
        parents.push(theirs);
    }
    let unchanged = match head.as_deref() {
        Some(h) => git.tree_of(h)? == tree && parents.len() == 1,
        None => false,
    };
    if !unchanged {
        let message = match pending {
            Some(_) if parents.len() > 1 => "memfold sync: merge finished after a stop".to_string(),
            _ => format!("memfold sync: changes on {}", memfold_store::sys::host::name()),
        };
        git.commit(&tree, &parents, &message)?;
    }
    remove_marker(root);
    Ok(!unchanged)
}

/// After the merged files are written: the commit that records them (or the remote's own
/// commit, when the files are now exactly it).
fn finish_merge(git: &Git, root: &Root, head: Option<&str>, theirs: &str) -> Result<(), Error> {
    git.add_all()?;
    let tree = git.write_tree()?;
    commit::failpoint("sync", "merge-staged");
    let fast_forward = head.is_none_or(|h| git.is_ancestor(h, theirs).unwrap_or(false)) && git.tree_of(theirs)? == tree;
    if fast_forward {
        git.move_branch(theirs)?;
        git.reset_index()?;
    } else {
        let mut parents: Vec<&str> = head.into_iter().collect();
        parents.push(theirs);
        let message =
            format!("memfold sync: merge {} on {}", &theirs[..theirs.len().min(7)], memfold_store::sys::host::name());
        git.commit(&tree, &parents, &message)?;
    }
    remove_marker(root);
    Ok(())
}

fn remove_marker(root: &Root) {
    match std::fs::remove_file(merge_marker(root)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(error = %e, "could not remove .memfold/sync-merge"),
    }
}

/// What joining another space into this one did.
#[derive(Debug, Clone, Serialize)]
pub struct JoinedSpace {
    /// The space taken in.
    pub from: String,
    /// Where its folder was moved, whole, once its memory was in this one.
    pub kept_at: std::path::PathBuf,
    pub merged: Merged,
}

impl Memory {
    /// Take the memory of `other` (another space's root, named `name`) into this one, the way a
    /// sync takes another machine's (`planning::sync`, with nothing in common): every fact of
    /// its archive (by id), its tombstones, its entries (by id; one id holding two texts keeps
    /// the later and offers the other for review), its history and the lines a person wrote in
    /// its `MEMORY.md`. Then its folder is moved, whole, to `aside`. Refused while a daemon
    /// serves it or another writer holds it.
    pub async fn join_space(&self, other: Root, name: String, aside: std::path::PathBuf) -> Result<JoinedSpace, Error> {
        let me = self.clone();
        let joined = blocking(move || me.join_blocking(&other, &name, &aside)).await?;
        self.tell(Rewritten::Memory);
        self.tell(Rewritten::Promoted);
        self.refresh_after_change().await;
        Ok(joined)
    }

    fn join_blocking(&self, other: &Root, name: &str, aside: &std::path::Path) -> Result<JoinedSpace, Error> {
        let root = &self.inner.root;
        if other.dir() == root.dir() {
            return Err(Error::BadInput(format!("space {name} is this space: nothing to join")));
        }
        other.check_initialized().map_err(Error::BadInput)?;
        // Nobody else may read or write it meanwhile: no daemon serves it, no pass runs in it.
        let _served = LockGuard::try_acquire(&other.serve_lock(), "memfold spaces --merge")?;
        let theirs_lock = LockGuard::try_acquire(&other.consolidate_lock(), "memfold spaces --merge")?;
        commit::recover(other, &theirs_lock)?;
        let lock = self.lock()?;
        self.reconcile_locked(&lock)?;
        let read = |dir: &std::path::Path, path: &str| -> Result<Option<String>, Error> {
            match std::fs::read(dir.join(path)) {
                Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(Error::Read { path: format!("{}/{path}", dir.display()), source }),
            }
        };
        let days = |dir: &std::path::Path| -> Vec<String> {
            std::fs::read_dir(dir.join("archive"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| format!("archive/{}", e.file_name().to_string_lossy()))
                .filter(|p| sync::allowed(p))
                .collect()
        };
        let mut paths: Vec<String> = days(other.dir());
        paths.extend(days(root.dir()));
        paths.extend([sync::MEMORY, sync::HISTORY, sync::TOMBSTONES, sync::PROMOTED].map(String::from));
        paths.sort_unstable();
        paths.dedup();
        let mut files = BTreeMap::new();
        for path in paths {
            let side = Side { base: None, ours: read(root.dir(), &path)?, theirs: read(other.dir(), &path)? };
            files.insert(path, side);
        }
        let ledger = Ledger::load(root)?;
        let now = self.inner.clock.now();
        let other_name = format!("space {name}");
        let run = format!("r-{}-join-{}", now.format("%Y%m%dT%H%M%SZ"), &memfold_store::content_hash(name)[..4]);
        let request = sync::Request {
            ledger: &ledger,
            files: &files,
            other: &other_name,
            run: &run,
            now,
            today: self.inner.clock.day_of(now),
            secrets: self.inner.config.ingest.secrets,
        };
        let (change, merged) = sync::plan(&request).map_err(Error::Unreadable)?;
        commit::commit(root, &change, &lock)?;
        drop(lock);
        // Its memory is in this one now: the folder goes aside whole (nothing of it is lost),
        // its locks still held until it has moved.
        if let Some(parent) = aside.parent() {
            memfold_store::sys::access::create_dir(parent)
                .map_err(|source| Error::Read { path: parent.display().to_string(), source })?;
        }
        std::fs::rename(other.dir(), aside)
            .map_err(|source| Error::Read { path: other.dir().display().to_string(), source })?;
        tracing::info!(from = name, facts = merged.facts, entries = merged.entries, "space joined");
        Ok(JoinedSpace { from: name.to_string(), kept_at: aside.to_path_buf(), merged })
    }
}
