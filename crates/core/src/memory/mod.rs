//! The use cases of memfold: one handle on a memory root, one method per verb.
//!
//! [`Memory`] owns the root, the configuration, the clock, the index, the chat model and the
//! decider. The methods are grouped by what they do, one file each: [`ingest`]
//! (facts and turns), [`search`] (the index), [`passes`]
//! (consolidation and rebuilds), [`curation`] (forget, pin, undo, apply,
//! reject), [`reads`] (status, verify, entries, history, runs, plans); what they
//! return is in [`views`]. The CLI calls them directly; the daemon's doors (HTTP, MCP) go
//! through `memfold::service::Service`. Every method that changes memory follows the same
//! sequence, written once (here):
//!
//! 1. take the consolidation lock (refused at once, naming the holder, when another pass,
//!    apply, undo, forget or pin holds it) and finish a change a killed process left
//!    unfinished ([`memfold_store::commit::recover`]);
//! 2. record entries a person deleted from `memory.md` by hand (tombstones), so nothing is
//!    planned around them;
//! 3. read the files ([`Ledger`]) and plan the change, purely;
//! 4. [`commit`] it: the only write of `memory.md`, `history.md`, the seen copy, tombstones,
//!    journal, run and plan records and `state.json`. The lock guard moves into the blocking
//!    write, so a caller that gives up (a daemon shutting down) cannot release the lock while
//!    the write goes on;
//! 5. after `memory.md` changed, still holding the lock: rewrite `MEMORY.md`
//!    ([`crate::planning::promote`]) and add what that cost to the run's record; then, without the lock,
//!    bring the index up to date.
//!
//! Blocking work (file IO, the commit) runs on tokio's blocking pool; `Memory` is cheap to
//! clone (one `Arc`), so adapters can share it.

mod curation;
pub mod health;
pub mod ingest;
mod passes;
mod reads;
mod recall;
mod search;
pub mod status;
mod sweeps;
pub mod sync;

#[cfg(test)]
pub(crate) use passes::promote_root;
pub mod agents;
pub mod project;
pub mod requests;
pub mod text;
pub mod views;

pub use requests::day;

pub use curation::Undo;
pub use ingest::CheckedFacts;
/// Where memory is kept: a root, and a home of spaces (the places the use cases are opened on).
pub use memfold_store::{Root, home::Home};
pub use recall::{RecallRequest, Recalled, RecalledLine};
pub use sweeps::{SweepOptions, SweepReport};
pub use sync::{JoinedSpace, SyncReport, SyncState, SyncStatus, due as sync_due};

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use futures::FutureExt;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{Notify, OnceCell, broadcast};

use crate::error::Error;
use crate::planning::consolidate::aspects::{Aspects, Keyer, KeyerParams, Keying, Taxonomy};
use crate::planning::consolidate::decide::Decider;
use crate::planning::forget::{self, Promoted};
use crate::planning::run::records;
use memfold_index::Index;
use memfold_index::corpus;
use memfold_models::Models;
use memfold_models::llm::{ChatClient, Prompts, Usage};
use memfold_store::archive::Appender;
use memfold_store::commit::{self, Change};
use memfold_store::config::Config;
use memfold_store::egress::Egress;
use memfold_store::ledger::Ledger;
use memfold_store::sys::blocking;
use memfold_store::sys::clock::Clock;
use memfold_store::sys::lock::LockGuard;

/// The most hits one search may ask for.
pub const MAX_K: usize = 1000;

/// A file that changed, for adapters that tell their clients (MCP `resources/updated`): this
/// process rewrote it, or a file watcher saw it change ([`Memory::files_changed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewritten {
    /// `consolidated/memory.md`.
    Memory,
    /// `MEMORY.md`.
    Promoted,
}

impl Rewritten {
    /// The file's path in the root.
    pub fn file(self) -> &'static str {
        match self {
            Rewritten::Memory => "consolidated/memory.md",
            Rewritten::Promoted => "MEMORY.md",
        }
    }
}

/// What a search asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchRequest {
    /// Hits to return (default `search.default_k`, at most [`MAX_K`]).
    pub k: Option<usize>,
    /// What was current on this day.
    pub as_of: Option<NaiveDate>,
    /// Include superseded versions.
    pub history: bool,
    /// Leave the recall log alone: a person browsing memory is not the agent recalling it, and
    /// must not change what `MEMORY.md` promotes.
    pub skip_recall: bool,
    /// Keep only hits at least this similar to the query (cosine, from the vector leg; a hit
    /// only the text leg found has no similarity and is dropped): recall for a prompt, where
    /// nothing is better than something unrelated.
    pub min_similarity: Option<f64>,
    /// Only hits dated (their `valid_from`) between these two days, both included.
    pub dated: Option<(NaiveDate, NaiveDate)>,
}

/// A conversation turn to extract facts from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The turn as text, one `role: content` line per message.
    pub text: String,
    /// The day the facts belong to (default today).
    pub date: Option<NaiveDate>,
    /// Stored as the facts' `src` (default `turn`).
    pub source: Option<String>,
}

/// A turn as the doors take it (`POST /turns`, the MCP tool `memory_add_turn`): as text or as
/// chat messages, with the day and the source of its facts.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    /// The turn as text ("user: …\nassistant: …"). Give this or messages.
    #[serde(default)]
    pub text: Option<String>,
    /// The turn as chat messages. Give this or text.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The day the facts belong to (YYYY-MM-DD); default today.
    #[serde(default, deserialize_with = "day")]
    pub date: Option<NaiveDate>,
    /// Stored as the facts' source (default "turn").
    #[serde(default)]
    pub source: Option<String>,
}

/// One chat message of a turn.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// "user", "assistant", …
    pub role: String,
    pub content: String,
}

impl TryFrom<TurnRequest> for Turn {
    type Error = Error;

    /// Exactly one of text and messages, and not empty.
    fn try_from(request: TurnRequest) -> Result<Turn, Error> {
        let messages = request.messages.iter().map(|m| (m.role.as_str(), m.content.as_str()));
        let turn = match (request.text.as_deref(), messages.len()) {
            (Some(text), 0) if !text.trim().is_empty() => Turn { text: text.trim().to_string(), ..Turn::default() },
            (None, 1..) => Turn::from_messages(messages),
            _ => return Err(Error::BadInput("give either \"messages\" (non-empty) or \"text\" (non-empty)".into())),
        };
        Ok(Turn { date: request.date, source: request.source, ..turn })
    }
}

impl Turn {
    /// A turn from chat messages (`role`, `content`).
    pub fn from_messages<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Turn {
        let text = messages
            .into_iter()
            .map(|(role, content)| format!("{}: {}", role.trim(), content.trim()))
            .collect::<Vec<_>>()
            .join("\n");
        Turn { text, ..Turn::default() }
    }
}

/// A handle on one memory root. Clones share everything.
#[derive(Clone)]
pub struct Memory {
    inner: Arc<Inner>,
}

struct Inner {
    root: Root,
    config: Config,
    /// The embedder models and chat clients this process shares among its roots.
    models: Arc<Models>,
    clock: Clock,
    index: OnceCell<Arc<Index>>,
    chat: Option<ChatClient>,
    prompts: Prompts,
    decider: Decider,
    /// Remembers the day files between appends (one append at a time).
    appender: Mutex<Appender>,
    /// The aspect keyer, made with the index's embedder on the first pass that needs it (none
    /// when `consolidation.aspect_k` is 0).
    aspects: OnceCell<Option<Aspects>>,
    /// The life aspects keys are made of (built in, extended by `consolidation.aspects_file`).
    taxonomy: Taxonomy,
    fresh: Freshness,
    rewritten: broadcast::Sender<Rewritten>,
    /// Whether the index, once open, holds its vectors in memory ([`Memory::hold_vectors`]).
    hold_vectors: AtomicBool,
    /// The entries of `memory.md` that have links and the pinned ones, as of its size and time
    /// when read (a search follows links one hop; pinned entries are exempt from decay).
    linked: std::sync::Mutex<Option<(Signature, Arc<memfold_store::caches::LinkCache>)>>,
    /// What decay by use ranks with, as of the use table, `memory.md` and `MEMORY.md` it was
    /// made from.
    uses: std::sync::Mutex<Option<([Signature; 3], Arc<memfold_index::UseDays>)>>,
}

/// A file's size and modification time (ns since the epoch): whether it may have changed
/// since it was read.
type Signature = (u64, u64);

/// Generation counters that say whether the index may be behind the files.
struct Freshness {
    /// Bumped whenever the files may have changed.
    wanted: AtomicU64,
    /// The `wanted` value the last successful refresh started from.
    done: AtomicU64,
    /// One refresh at a time; holds what the last one learnt about the settling files, so
    /// the next reads only the day files that changed.
    refreshing: tokio::sync::Mutex<Option<corpus::Known>>,
    /// Wakes whoever waits for changes (the daemon's indexer).
    notify: Notify,
    /// Refreshes that wrote rows, by whichever caller.
    writes: AtomicU64,
    /// `writes` when the index was last settled, plus one (0: never).
    settled_at: AtomicU64,
    /// One settle-if-needed at a time (the daemon's warm-up and its indexer both ask at start).
    settling: tokio::sync::Mutex<()>,
}

/// A process running as root refuses a root another account owns, in whole or in part (as git
/// refuses a repository owned by someone else), unless `security.allow_other_owner` is set.
fn check_owner(root: &Root) -> Result<(), Error> {
    let found = memfold_store::sys::access::foreign_owner(root.dir())
        .map_err(|source| Error::Read { path: root.dir().display().to_string(), source })?;
    let Some((path, uid)) = found else { return Ok(()) };
    let owner = memfold_store::sys::access::user_name(uid);
    Err(Error::OtherOwner(format!(
        "{} is owned by {owner}, and memfold runs as root: a root process writing where another account can \
         plant files and links could be made to overwrite any file on the machine. Run memfold as {owner}, \
         or, if you trust every account that can write there, set security.allow_other_owner = true",
        path.display()
    )))
}

impl Memory {
    /// Create the folders and files of a memory root (existing files are left alone).
    pub fn init(config: &Config) -> Result<PathBuf, Error> {
        let root = Root::new(&config.root);
        root.init().map_err(|source| Error::Read { path: root.dir().display().to_string(), source })?;
        Ok(root.dir().to_path_buf())
    }

    /// Open an initialised root: load the prompts, connect the chat model, and finish a change
    /// a killed process left unfinished (when nobody else holds the lock). The index is opened
    /// on first use.
    pub async fn open(config: Config) -> Result<Memory, Error> {
        Memory::open_with(config, Arc::default()).await
    }

    /// [`Memory::open`], with the embedder models and chat clients of `models` (a daemon's
    /// spaces share them).
    pub async fn open_with(config: Config, models: Arc<Models>) -> Result<Memory, Error> {
        let root = Root::new(&config.root);
        root.check_initialized().map_err(Error::NotARoot)?;
        if !config.security.allow_other_owner {
            check_owner(&root)?;
        }
        let prompts = Prompts::load(&config.llm.prompts_dir).map_err(|e| Error::Other(e.to_string()))?;
        let taxonomy = match config.consolidation.aspects_file.trim() {
            "" => Taxonomy::builtin(),
            file => Taxonomy::with_file(&memfold_store::config::expand_tilde(std::path::Path::new(file)))
                .map_err(|e| Error::BadInput(format!("consolidation.aspects_file: {e}")))?,
        };
        let chat = models.chat(&config.llm)?.map(|chat| chat.with_egress(Egress::new(root.egress_file())));
        // The decider may ask a cheaper model than extraction (llm.consolidation_model).
        let deciding = match config.llm.consolidation_model.trim() {
            "" => chat.clone(),
            model => {
                let cfg = memfold_store::config::LlmConfig { model: model.to_string(), ..config.llm.clone() };
                models.chat(&cfg)?.map(|chat| chat.with_egress(Egress::new(root.egress_file())))
            }
        };
        let decider = match &deciding {
            Some(client) => Decider::Llm { client: client.clone(), prompts: prompts.clone() },
            None => Decider::Offline,
        };
        let memory = Memory {
            inner: Arc::new(Inner {
                clock: config.clock(),
                root,
                config,
                models,
                index: OnceCell::new(),
                chat,
                prompts,
                decider,
                appender: Mutex::new(Appender::default()),
                aspects: OnceCell::new(),
                taxonomy,
                fresh: Freshness {
                    wanted: AtomicU64::new(1),
                    done: AtomicU64::new(0),
                    refreshing: tokio::sync::Mutex::new(None),
                    notify: Notify::new(),
                    writes: AtomicU64::new(0),
                    settled_at: AtomicU64::new(0),
                    settling: tokio::sync::Mutex::new(()),
                },
                rewritten: broadcast::channel(16).0,
                hold_vectors: AtomicBool::new(false),
                linked: std::sync::Mutex::new(None),
                uses: std::sync::Mutex::new(None),
            }),
        };
        let me = memory.clone();
        blocking(move || me.recover_if_free()).await?;
        Ok(memory)
    }

    pub fn root(&self) -> &Root {
        &self.inner.root
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Who decides this memory's passes.
    pub fn decider(&self) -> memfold_store::caches::DeciderKind {
        self.inner.decider.kind()
    }

    /// The index, opened (and its embedder connected) on first use.
    pub async fn index(&self) -> Result<&Arc<Index>, Error> {
        self.inner
            .index
            .get_or_try_init(|| async {
                let opening = corpus::open_index(&self.inner.root, &self.inner.config, &self.inner.models);
                // LanceDB may panic on a damaged table rather than fail; either way the index is
                // unreadable, and only this memory's requests say so.
                let index =
                    AssertUnwindSafe(opening).catch_unwind().await.map_err(|panic| Error::IndexUnreadable {
                        path: self.inner.root.index_dir().display().to_string(),
                        message: memfold_store::sys::panic_message(&*panic).to_string(),
                    })??;
                if self.inner.hold_vectors.load(Ordering::SeqCst) {
                    index.hold_vectors();
                }
                Ok::<_, Error>(Arc::new(index))
            })
            .await
    }

    /// Searches answered from the vectors the index holds, since it opened (0 before).
    pub fn searches_with_held_vectors(&self) -> u64 {
        self.inner.index.get().map_or(0, |index| index.searches_with_held_vectors())
    }

    /// Have the index hold its vectors in memory for searches (`index/held.rs`), for a process
    /// that searches often (the daemon, `memfold mcp`): read in the background once the index
    /// is open, now if it already is.
    pub fn hold_vectors(&self) {
        self.inner.hold_vectors.store(true, Ordering::SeqCst);
        if let Some(index) = self.inner.index.get() {
            index.hold_vectors();
        }
    }

    /// As [`Memory::hold_vectors`], reading the vectors now rather than once the index has
    /// been quiet for a while: for a space a daemon opens on a request, so that the requests
    /// after the first are answered from them. Errors are logged (searches go to lance).
    pub async fn hold_vectors_now(&self) {
        self.inner.hold_vectors.store(true, Ordering::SeqCst);
        match self.index().await {
            Ok(index) => index.hold_vectors_now().await,
            Err(e) => tracing::warn!(error = %e, "the index's vectors are not held; searches ask lance"),
        }
    }

    /// The aspect keys of this root: the taxonomy (built in, extended by
    /// `consolidation.aspects_file`), the offline keyer over the index's embedder, and the keying
    /// call when an LLM is configured. None when `consolidation.aspect_k` is 0.
    pub async fn aspects(&self) -> Result<Option<&Aspects>, Error> {
        let cfg = &self.inner.config.consolidation;
        let made = self
            .inner
            .aspects
            .get_or_try_init(|| async {
                if cfg.aspect_k == 0 {
                    return Ok::<_, Error>(None);
                }
                let embedder = self.index().await?.embedder();
                let keyer = Keyer::new(self.inner.taxonomy.clone(), embedder.as_ref(), KeyerParams::default()).await?;
                let keying = self.inner.chat.as_ref().map(|chat| Keying {
                    chat: chat.clone(),
                    system: memfold_models::llm::keys::system_message(
                        &self.inner.prompts.keys,
                        keyer.taxonomy().attributes(),
                    ),
                });
                Ok(Some(Aspects::new(keyer, keying)))
            })
            .await?;
        Ok(made.as_ref())
    }

    /// Learn when `memory.md` or `MEMORY.md` changes: rewritten by this process, or reported by
    /// a file watcher through [`Memory::files_changed`] (so a change may be told twice).
    pub fn subscribe(&self) -> broadcast::Receiver<Rewritten> {
        self.inner.rewritten.subscribe()
    }

    /// Take in a batch of paths a file watcher saw change (empty: anything may have changed):
    /// the next search refreshes the index first, and subscribers hear of `memory.md` and
    /// `MEMORY.md`.
    pub fn files_changed(&self, changes: &[PathBuf]) {
        let root = &self.inner.root;
        // Watchers report canonical paths.
        let canonical = root.dir().canonicalize().ok().map(Root::new);
        let roots: Vec<&Root> = std::iter::once(root).chain(&canonical).collect();
        let changed =
            |path: fn(&Root) -> PathBuf| changes.is_empty() || roots.iter().any(|r| changes.contains(&path(r)));
        if changed(Root::memory) {
            self.tell(Rewritten::Memory);
        }
        if changed(Root::memory_md) {
            self.tell(Rewritten::Promoted);
        }
        self.mark_dirty();
    }

    /// Where a daemon serving this root listens, if one runs.
    pub fn daemon(&self) -> Option<memfold_store::listening::Listening> {
        memfold_store::listening::Listening::read(&self.inner.root)
    }

    fn tell(&self, what: Rewritten) {
        let _ = self.inner.rewritten.send(what);
    }

    /// Take the consolidation lock and finish an unfinished change (blocking).
    fn lock(&self) -> Result<LockGuard, Error> {
        let lock = LockGuard::try_acquire(&self.inner.root.consolidate_lock(), "consolidation")?;
        commit::recover(&self.inner.root, &lock)?;
        Ok(lock)
    }

    /// Finish an unfinished change if its writer is gone (blocking). Returns whether a live
    /// writer holds the lock with a change under way.
    fn recover_if_free(&self) -> Result<bool, Error> {
        if !commit::pending(&self.inner.root) {
            return Ok(false);
        }
        match self.lock() {
            Ok(_lock) => Ok(false),
            Err(Error::Busy(_)) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// `MEMORY.md` as it is (empty when missing or unreadable: dropping lines is best effort,
    /// the next promotion rewrites them anyway).
    fn promoted(&self) -> String {
        std::fs::read_to_string(self.inner.root.memory_md()).unwrap_or_default()
    }

    /// Record entries a person deleted from `memory.md` by hand (blocking, lock held).
    fn reconcile_locked(&self, lock: &LockGuard) -> Result<Vec<String>, Error> {
        let root = &self.inner.root;
        let read = |path: PathBuf, name: &str| -> Result<Option<String>, Error> {
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok(Some(text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(Error::Read { path: name.to_string(), source }),
            }
        };
        let seen = read(root.memory_seen(), ".memfold/memory.seen.md")?;
        let current = read(root.memory(), "consolidated/memory.md")?.unwrap_or_default();
        if seen.as_deref() == Some(current.as_str()) {
            return Ok(Vec::new());
        }
        let ledger = Ledger::load(root)?;
        let promoted = self.promoted();
        let now = self.inner.clock.now();
        let (change, gone) = forget::plan_reconcile(
            &ledger,
            seen.as_deref(),
            Promoted { text: &promoted },
            now,
            self.inner.clock.day_of(now),
        );
        commit::commit(root, &change, lock)?;
        if !gone.is_empty() {
            tracing::info!(entries = ?gone, "tombstoned entries deleted by hand");
        }
        Ok(gone)
    }

    /// The start of every change (blocking): take the lock (finishing an unfinished change),
    /// record the entries a person deleted from `memory.md` by hand, and read the files. A
    /// failure at any step stops the change: planning around a hand deletion that could not
    /// be recorded would bring the deleted entry back.
    fn lock_and_read(&self) -> Result<(LockGuard, Ledger), Error> {
        let lock = self.lock()?;
        self.reconcile_locked(&lock)?;
        let ledger = Ledger::load(&self.inner.root)?;
        Ok((lock, ledger))
    }

    /// Lock, recover, record hand deletions, read, plan, commit: the write path of every verb
    /// but consolidation. `plan` returns the change and what to answer.
    /// Returns what `plan` answered, whether `memory.md` was rewritten, and the lock, still held.
    async fn write<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&Memory, &Ledger) -> Result<(Change, T), Error> + Send + 'static,
    ) -> Result<(T, bool, LockGuard), Error> {
        let me = self.clone();
        blocking(move || {
            let (lock, ledger) = me.lock_and_read()?;
            let (change, out) = plan(&me, &ledger)?;
            let rewrote = change.memory.is_some();
            commit::commit(&me.inner.root, &change, &lock)?;
            Ok((out, rewrote, lock))
        })
        .await
    }

    /// After a commit that rewrote `memory.md`, with the lock still held (so no other process
    /// promotes at the same time): tell subscribers, rewrite `MEMORY.md`, and add what that cost
    /// to the record of `run`, if the commit made one. Returns the lock and the cost. Failures
    /// are logged, not returned: the change itself is done.
    async fn after_commit(&self, lock: LockGuard, run: Option<&str>) -> (LockGuard, Usage) {
        self.tell(Rewritten::Memory);
        let usage = match self.promote().await {
            Ok(report) => report.llm,
            Err(e) => {
                tracing::warn!(error = %e, "MEMORY.md not rewritten");
                return (lock, Usage::default());
            }
        };
        let Some(run) = run.filter(|_| usage.calls > 0) else { return (lock, usage) };
        let (me, run) = (self.clone(), run.to_string());
        let (lock, failed) = blocking(move || {
            let mut change = Change::new(format!("account {run}"));
            let written = records::load_run(&me.inner.root, &run).and_then(|record| {
                if let Some(mut record) = record {
                    record.llm.add(usage);
                    change.records.push(record.file());
                }
                Ok(commit::commit(&me.inner.root, &change, &lock)?)
            });
            (lock, written.err())
        })
        .await;
        if let Some(e) = failed {
            tracing::warn!(error = %e, "could not add the promotion's cost to the run record");
        }
        (lock, usage)
    }

    /// After a change: mark the index dirty and bring it up to date, if there is one (a root
    /// nobody searched yet gets its index on the first search, not on a forget).
    async fn refresh_after_change(&self) {
        self.mark_dirty();
        if (self.inner.index.initialized() || self.inner.root.index_dir().exists())
            && let Err(e) = self.refresh().await
        {
            tracing::warn!(error = %e, "index refresh failed; the next search or change tries again");
        }
    }
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("root", &self.inner.root).field("decider", &self.decider()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_text_or_messages_never_both_nor_neither() {
        let turn = |json: serde_json::Value| Turn::try_from(serde_json::from_value::<TurnRequest>(json).unwrap());
        assert_eq!(turn(serde_json::json!({"text": "  user: hi  "})).unwrap().text, "user: hi");
        let messages =
            serde_json::json!([{"role": "user", "content": " hi "}, {"role": "assistant", "content": "hello"}]);
        let both = turn(serde_json::json!({"messages": messages, "date": "2026-05-01", "source": "chat"})).unwrap();
        assert_eq!((both.text.as_str(), both.source.as_deref()), ("user: hi\nassistant: hello", Some("chat")));
        for bad in [serde_json::json!({"text": "x", "messages": messages}), serde_json::json!({"text": " "})] {
            assert_eq!(turn(bad).unwrap_err().kind(), crate::error::Kind::BadInput);
        }
        assert!(turn(serde_json::json!({})).is_err());
        let err = serde_json::from_value::<TurnRequest>(serde_json::json!({"text": "x", "date": "May 1"})).unwrap_err();
        assert!(err.to_string().contains("YYYY-MM-DD"), "{err}");
    }

    #[tokio::test]
    async fn a_watcher_tells_subscribers_of_memory_md_and_memory_md_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let memory = Memory::open(Config { root: dir.path().to_path_buf(), ..Config::default() }).await.unwrap();
        let mut told = memory.subscribe();
        let mut heard = |changes: &[PathBuf]| {
            memory.files_changed(changes);
            std::iter::from_fn(|| told.try_recv().ok()).collect::<Vec<_>>()
        };
        let canonical = Root::new(dir.path().canonicalize().unwrap());
        assert_eq!(heard(&[canonical.archive_file(chrono::NaiveDate::MIN)]), []);
        assert_eq!(heard(&[canonical.archive_dir().join("MEMORY.md")]), []);
        assert_eq!(heard(&[canonical.memory_md()]), [Rewritten::Promoted]);
        assert_eq!(heard(&[root.memory(), root.history()]), [Rewritten::Memory]);
        assert_eq!(heard(&[]), [Rewritten::Memory, Rewritten::Promoted], "a rescan may have changed both");
    }

    /// A process that asked for held vectors gets them from an index opened before or after it
    /// asked; one that did not, never.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_vectors_are_asked_for_before_or_after_the_index_opens() {
        for (before, after) in [(true, false), (false, true), (false, false)] {
            let dir = tempfile::tempdir().unwrap();
            Root::new(dir.path()).init().unwrap();
            let memory = Memory::open(Config { root: dir.path().to_path_buf(), ..Config::default() }).await.unwrap();
            if before {
                memory.hold_vectors();
            }
            let index = memory.index().await.unwrap().clone();
            if after {
                memory.hold_vectors();
            }
            assert_eq!(index.holds_vectors(), before || after);
        }
    }
}
