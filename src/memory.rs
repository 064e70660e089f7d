//! The use cases of memfold: one handle on a memory root, one method per verb.
//!
//! [`Memory`] owns the root, the configuration, the clock, the index, the chat model and the
//! decider. The CLI, the HTTP API, the MCP server and the daemon's scheduler are adapters:
//! they parse, call one method here, and render the result. Every method that changes memory
//! follows the same sequence, written once:
//!
//! 1. take the consolidation lock (refused at once, naming the holder, when another pass,
//!    apply, undo, forget or pin holds it) and finish a change a killed process left
//!    unfinished ([`crate::commit::recover`]);
//! 2. record entries a person deleted from `memory.md` by hand (tombstones), so nothing is
//!    planned around them;
//! 3. read the files ([`Ledger`]) and plan the change, purely;
//! 4. [`commit`] it: the only write of `memory.md`, `history.md`, the seen copy, tombstones,
//!    journal, run and plan records and `state.json`. The lock guard moves into the blocking
//!    write, so a caller that gives up (a daemon shutting down) cannot release the lock while
//!    the write goes on;
//! 5. after `memory.md` changed, still holding the lock: rewrite `MEMORY.md`
//!    ([`crate::promote`]) and add what that cost to the run's record; then, without the lock,
//!    bring the index up to date.
//!
//! Blocking work (file IO, the commit) runs on tokio's blocking pool; `Memory` is cheap to
//! clone (one `Arc`), so adapters can share it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tokio::sync::{Notify, OnceCell, broadcast};

use crate::clock::Clock;
use crate::commit::{self, Change};
use crate::config::{Config, Mode};
use crate::consolidate::apply::{self, Outcome};
use crate::consolidate::decide::{DecideError, Decider};
use crate::consolidate::divert::divert;
use crate::consolidate::gate::{self, Gate, GateInput};
use crate::consolidate::pass::{Pass, PassOptions, PassReport, eligible, ms, run_id};
use crate::consolidate::rebuild;
use crate::consolidate::records;
use crate::corpus;
use crate::error::Error;
use crate::files::archive::{self, Appender, Fact, NewFact};
use crate::files::entries::{Entry, EntryFile};
use crate::files::{Problem, Root};
use crate::forget::{self, Forgotten, Promoted};
use crate::index::{Hit, Index, Scope, SearchOpts, SyncStats};
use crate::ledger::Ledger;
use crate::llm::{ChatClient, Prompts, Usage};
use crate::lock::LockGuard;
use crate::promote::PromoteReport;
use crate::review::{self, AppliedPlan, Chain, PlanView, RejectedPlan, RunView, Undone};
use crate::status::Status;
use crate::verify::Report;

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

/// What a search asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchRequest {
    /// Hits to return (default `search.default_k`, at most [`MAX_K`]).
    pub k: Option<usize>,
    /// What was current on this day.
    pub as_of: Option<NaiveDate>,
    /// Include superseded versions.
    pub history: bool,
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

impl Turn {
    /// A turn given either as text or as chat messages (`role`, `content`): exactly one of
    /// them, and not empty.
    pub fn from_parts<'a>(
        text: Option<&str>,
        messages: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Turn, Error> {
        match (text, messages.len()) {
            (Some(text), 0) if !text.trim().is_empty() => Ok(Turn { text: text.trim().to_string(), ..Turn::default() }),
            (None, 1..) => Ok(Turn::from_messages(messages)),
            _ => Err(Error::BadInput("give either \"messages\" (non-empty) or \"text\" (non-empty)".into())),
        }
    }

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

/// What `reindex` did.
#[derive(Debug, Clone, Serialize)]
pub struct Reindexed {
    pub docs: usize,
    pub stats: SyncStats,
    pub seconds: f64,
}

/// A handle on one memory root. Clones share everything.
#[derive(Clone)]
pub struct Memory {
    inner: Arc<Inner>,
}

struct Inner {
    root: Root,
    config: Config,
    clock: Clock,
    index: OnceCell<Arc<Index>>,
    chat: Option<ChatClient>,
    prompts: Prompts,
    decider: Decider,
    /// Remembers the day files between appends (one append at a time).
    appender: Mutex<Appender>,
    fresh: Freshness,
    rewritten: broadcast::Sender<Rewritten>,
}

/// Generation counters that say whether the index may be behind the files.
struct Freshness {
    /// Bumped whenever the files may have changed.
    wanted: AtomicU64,
    /// The `wanted` value the last successful refresh started from.
    done: AtomicU64,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
    /// Wakes whoever waits for changes (the daemon's indexer).
    notify: Notify,
}

/// Run blocking work off the runtime, passing panics on.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
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
        let root = Root::new(&config.root);
        if !root.is_initialized() {
            return Err(Error::NotARoot(format!(
                "{} is not a memfold root; run `memfold init --root {}` first",
                root.dir().display(),
                root.dir().display()
            )));
        }
        let prompts = Prompts::load(&config.llm.prompts_dir).map_err(|e| Error::Other(e.to_string()))?;
        let chat = ChatClient::from_config(&config.llm)?;
        let decider = match &chat {
            Some(client) => Decider::Llm { client: client.clone(), prompts: prompts.clone() },
            None => Decider::Offline,
        };
        let memory = Memory {
            inner: Arc::new(Inner {
                clock: config.clock(),
                root,
                config,
                index: OnceCell::new(),
                chat,
                prompts,
                decider,
                appender: Mutex::new(Appender::default()),
                fresh: Freshness {
                    wanted: AtomicU64::new(1),
                    done: AtomicU64::new(0),
                    refreshing: tokio::sync::Mutex::new(()),
                    notify: Notify::new(),
                },
                rewritten: broadcast::channel(16).0,
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

    pub fn clock(&self) -> Clock {
        self.inner.clock
    }

    /// `llm` or `offline`.
    pub fn decider_name(&self) -> &'static str {
        self.inner.decider.name()
    }

    /// Whether a chat model is configured (turns can be extracted).
    pub fn has_llm(&self) -> bool {
        self.inner.chat.is_some()
    }

    /// The index, opened (and its embedder connected) on first use.
    pub async fn index(&self) -> Result<&Arc<Index>, Error> {
        self.inner
            .index
            .get_or_try_init(|| async {
                let index = corpus::open_index(&self.inner.root, &self.inner.config).await?;
                Ok::<_, Error>(Arc::new(index))
            })
            .await
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

    fn tell(&self, what: Rewritten) {
        let _ = self.inner.rewritten.send(what);
    }

    // ---- locking and committing ----------------------------------------------------------

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

    /// Lock, recover, record hand deletions, read, plan, commit: the write path of every verb
    /// but consolidation. `plan` returns the change and what to answer.
    /// Returns what `plan` answered, whether `memory.md` was rewritten, and the lock, still held.
    async fn write<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&Memory, &Ledger) -> Result<(Change, T), Error> + Send + 'static,
    ) -> Result<(T, bool, LockGuard), Error> {
        let me = self.clone();
        blocking(move || {
            let lock = me.lock()?;
            me.reconcile_locked(&lock)?;
            let ledger = Ledger::load(&me.inner.root)?;
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
    async fn settle_index(&self) {
        self.mark_dirty();
        if (self.inner.index.initialized() || self.inner.root.index_dir().exists())
            && let Err(e) = self.refresh().await
        {
            tracing::warn!(error = %e, "index refresh failed; the next search or change tries again");
        }
    }

    // ---- ingest ----------------------------------------------------------------------------

    /// Whether facts may be appended: at least one, none without text, none longer than
    /// `ingest.max_fact_bytes`. Adapters that batch requests check each request with it first.
    pub fn check_facts(&self, facts: &[NewFact]) -> Result<(), Error> {
        if facts.is_empty() {
            return Err(Error::BadInput("no facts given".into()));
        }
        archive::check_new(facts, self.inner.config.ingest.max_fact_bytes).map_err(|e| match e {
            archive::ArchiveError::TooLong { .. } => Error::TooLarge(e.to_string()),
            e => Error::BadInput(e.to_string()),
        })
    }

    /// Append facts to their day's archive (blocking). Refused, storing nothing, when a fact
    /// has no text or is too long.
    pub fn add(&self, facts: Vec<NewFact>) -> Result<Vec<Fact>, Error> {
        self.check_facts(&facts)?;
        let now = self.inner.clock.wall_now();
        let added =
            self.inner.appender.lock().unwrap_or_else(|e| e.into_inner()).append(&self.inner.root, &facts, now)?;
        self.mark_dirty();
        Ok(added)
    }

    /// Ask the LLM for the facts in a conversation turn. Nothing is stored.
    pub async fn extract_turn(&self, turn: &Turn) -> Result<(Vec<NewFact>, Usage), Error> {
        #[derive(serde::Deserialize)]
        struct Extracted {
            facts: Vec<ExtractedFact>,
        }
        #[derive(serde::Deserialize)]
        struct ExtractedFact {
            text: String,
        }
        if turn.text.trim().is_empty() {
            return Err(Error::BadInput("the turn is empty".into()));
        }
        let Some(chat) = &self.inner.chat else {
            return Err(Error::NoLlm(
                "no LLM is configured ([llm] base_url is empty), so facts cannot be extracted from a turn; \
                 nothing was stored. Store facts directly (`memfold add`, POST /facts, the MCP tool memory_add), \
                 or configure an LLM"
                    .into(),
            ));
        };
        let today = turn.date.unwrap_or_else(|| self.inner.clock.today());
        let user = format!("Today is {today}.\n\nTurn:\n{}", turn.text.trim());
        let (extracted, usage) = chat.complete_parsed::<Extracted>(&self.inner.prompts.extract, &user).await?;
        let source = Some(turn.source.clone().unwrap_or_else(|| "turn".into()));
        let facts: Vec<NewFact> = extracted
            .facts
            .into_iter()
            .filter(|f| !archive::clean_text(&f.text).is_empty())
            .map(|f| NewFact { text: f.text, date: turn.date, source: source.clone() })
            .collect();
        if let Err(e) = archive::check_new(&facts, self.inner.config.ingest.max_fact_bytes) {
            return Err(Error::LlmReply(format!(
                "the LLM extracted an unusable fact: {e}; nothing was stored, send the turn again or in smaller parts"
            )));
        }
        Ok((facts, usage))
    }

    /// Extract the facts of a turn and append them: a turn is stored whole or not at all.
    pub async fn add_turn(&self, turn: &Turn) -> Result<(Vec<Fact>, Usage), Error> {
        let (facts, usage) = self.extract_turn(turn).await?;
        if facts.is_empty() {
            return Ok((Vec::new(), usage));
        }
        let me = self.clone();
        let added = blocking(move || me.add(facts)).await?;
        Ok((added, usage))
    }

    // ---- search and the index --------------------------------------------------------------

    /// Say the files may have changed: the next search refreshes the index first.
    pub fn mark_dirty(&self) {
        self.inner.fresh.wanted.fetch_add(1, Ordering::SeqCst);
        self.inner.fresh.notify.notify_one();
    }

    /// Wait until the files may have changed.
    pub async fn changed(&self) {
        self.inner.fresh.notify.notified().await
    }

    /// Bring the index up to date with the files, unless nothing changed since the last time.
    pub async fn refresh(&self) -> Result<(), Error> {
        let fresh = &self.inner.fresh;
        let target = fresh.wanted.load(Ordering::SeqCst);
        if fresh.done.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let index = self.index().await?;
        let _one = fresh.refreshing.lock().await;
        if fresh.done.load(Ordering::SeqCst) >= target {
            return Ok(()); // someone refreshed while we waited
        }
        let generation = fresh.wanted.load(Ordering::SeqCst);
        let (_, stats) = corpus::refresh(&self.inner.root, index).await?;
        fresh.done.fetch_max(generation, Ordering::SeqCst);
        tracing::debug!(
            upserted = stats.upserted,
            deleted = stats.deleted,
            unchanged = stats.unchanged,
            "index refreshed"
        );
        Ok(())
    }

    /// Hybrid search over entries and pending facts (and history on request); the hits are
    /// recorded in the recall log.
    pub async fn search(&self, query: &str, request: &SearchRequest) -> Result<Vec<Hit>, Error> {
        if query.trim().is_empty() {
            return Err(Error::BadInput("q (the query) is required".into()));
        }
        let mut opts = SearchOpts::new(&self.inner.config.search, self.inner.clock.today());
        opts.k = request.k.unwrap_or(self.inner.config.search.default_k);
        if opts.k == 0 || opts.k > MAX_K {
            return Err(Error::BadInput(format!("k must be between 1 and {MAX_K}")));
        }
        opts.as_of = request.as_of;
        opts.history = request.history;
        self.refresh().await?;
        let hits = self.index().await?.search(query, &opts).await?;
        let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
        let (root, query, window) = (self.inner.root.clone(), query.to_string(), self.inner.config.recall.window_days);
        if let Err(e) = blocking(move || crate::recall::record(&root, &query, &ids, window)).await {
            tracing::warn!(error = %e, "could not record recall");
        }
        Ok(hits)
    }

    /// Bring every row of the index up to date with the files, or rebuild it (`clear`).
    /// `progress` is told (done, total) as documents are embedded.
    pub async fn reindex(
        &self,
        clear: bool,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<Reindexed, Error> {
        let started = Instant::now();
        let index = self.index().await?;
        let fresh = &self.inner.fresh;
        let _one = fresh.refreshing.lock().await;
        let generation = fresh.wanted.load(Ordering::SeqCst);
        if clear {
            index.clear().await?;
        }
        let root = self.inner.root.clone();
        let ledger = blocking(move || Ledger::load(&root)).await?;
        let docs = corpus::docs(&ledger);
        let stats = index.sync(&docs, Scope::All, progress).await?;
        fresh.done.fetch_max(generation, Ordering::SeqCst);
        tracing::info!(clear, docs = docs.len(), upserted = stats.upserted, deleted = stats.deleted, "reindexed");
        Ok(Reindexed { docs: docs.len(), stats, seconds: started.elapsed().as_secs_f64() })
    }

    // ---- reading ---------------------------------------------------------------------------

    /// The gate, pending facts, entries and the last run.
    pub async fn status(&self) -> Result<Status, Error> {
        let me = self.clone();
        Ok(blocking(move || crate::status::status(&me.inner.root, &me.inner.config, me.inner.clock.now())).await?)
    }

    /// Prove that every archived fact is accounted for, and that the index (when there is one)
    /// holds exactly what the files say. Unless another writer is at work, an unfinished change
    /// is finished and entries deleted from `memory.md` by hand are recorded first, as any
    /// writer would.
    pub async fn verify(&self) -> Result<Report, Error> {
        let me = self.clone();
        let (busy, ledger) = blocking(move || -> Result<_, Error> {
            let busy = match me.lock() {
                Ok(lock) => {
                    me.reconcile_locked(&lock)?;
                    false
                }
                Err(Error::Busy(_)) => commit::pending(&me.inner.root),
                Err(e) => return Err(e),
            };
            Ok((busy, Ledger::load(&me.inner.root)?))
        })
        .await?;
        let mut extra = Vec::new();
        if busy {
            extra.push(Problem::new(
                ".memfold/commit.json",
                0,
                format!(
                    "a change is being written by {}; verify again when it is done",
                    crate::lock::holder(&self.inner.root.consolidate_lock())
                        .unwrap_or_else(|| "another process".into())
                ),
            ));
        }
        if self.inner.root.index_dir().exists() {
            extra.extend(self.index_problems().await?);
        }
        Ok(crate::verify::verify(&ledger, extra))
    }

    /// Bring the index up to date, then check that it holds exactly what the files say.
    async fn index_problems(&self) -> Result<Vec<Problem>, Error> {
        let index = self.index().await?;
        let (ledger, _) = corpus::refresh(&self.inner.root, index).await?;
        let want: std::collections::BTreeMap<String, String> =
            corpus::docs(&ledger).iter().map(|d| (d.key.clone(), Index::content_hash(d))).collect();
        let have = index.digest().await?;
        let mut problems = Vec::new();
        let rows = index.len().await?;
        if rows != have.len() {
            problems.push(Problem::new(
                ".memfold/index",
                0,
                format!("{rows} rows for {} keys: a key is duplicated", have.len()),
            ));
        }
        for (key, hash) in &want {
            if have.get(key) != Some(hash) {
                problems.push(Problem::new(".memfold/index", 0, format!("row {key} does not match the files")));
            }
        }
        for key in have.keys().filter(|k| !want.contains_key(*k)) {
            problems.push(Problem::new(".memfold/index", 0, format!("row {key} has no source in the files")));
        }
        Ok(problems)
    }

    /// The current entries of `consolidated/memory.md`.
    pub async fn entries(&self) -> Result<Vec<Entry>, Error> {
        let root = self.inner.root.clone();
        blocking(move || {
            EntryFile::read(&root.memory(), "consolidated/memory.md")
                .map(|file| file.entries().cloned().collect())
                .map_err(|source| Error::Read { path: "consolidated/memory.md".into(), source })
        })
        .await
    }

    /// One current entry.
    pub async fn entry(&self, id: &str) -> Result<Entry, Error> {
        let entries = self.entries().await?;
        entries
            .into_iter()
            .find(|e| e.id() == id)
            .ok_or_else(|| Error::NotFound { message: format!("no current entry has id {id}") })
    }

    /// An entry's versions and those linked to it.
    pub async fn history(&self, id: &str) -> Result<Chain, Error> {
        let (root, id) = (self.inner.root.clone(), id.to_string());
        blocking(move || review::history_chain(&Ledger::load(&root)?, &id)).await
    }

    /// Applied runs, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::runs(&root)).await
    }

    /// Stored plans, pending and rejected, oldest first.
    pub async fn plans(&self) -> Result<Vec<PlanView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::plans(&root)).await
    }

    /// One stored plan.
    pub async fn plan(&self, id: &str) -> Result<PlanView, Error> {
        let (root, id) = (self.inner.root.clone(), id.to_string());
        blocking(move || review::plan(&root, &id)).await
    }

    // ---- consolidation ---------------------------------------------------------------------

    /// Run a pass if the gate is open (or `force`); with `dry_run`, plan and report only.
    pub async fn consolidate(&self, opts: PassOptions) -> Result<PassReport, Error> {
        let clock = Instant::now();
        let started = self.inner.clock.now();
        let me = self.clone();
        let (lock, holder, ledger, under_review) = blocking(move || -> Result<_, Error> {
            let lock = if opts.dry_run { None } else { Some(me.lock()?) };
            if let Some(lock) = &lock
                && let Err(e) = me.reconcile_locked(lock)
            {
                tracing::warn!(error = %e, "could not record hand edits of memory.md");
            }
            // A dry run takes no lock, but says so when a pass holds it, as that pass would.
            let holder = opts.dry_run.then(|| crate::lock::holder(&me.inner.root.consolidate_lock())).flatten();
            Ok((lock, holder, Ledger::load(&me.inner.root)?, records::facts_under_review(&me.inner.root)))
        })
        .await?;
        let cfg = &self.inner.config.consolidation;
        let pending = eligible(&ledger, &under_review, cfg, opts.force);
        let gate = gate::evaluate(
            cfg,
            &GateInput {
                lock_holder: holder.as_deref(),
                last_run: ledger.state.last_run.as_ref().map(|r| r.finished),
                now: started,
                pending: pending.len(),
                force: opts.force,
            },
        );
        let mut report = PassReport::new(gate, &self.inner.decider, cfg, opts.dry_run);
        if !report.gate.open {
            report.timings.total_ms = ms(clock);
            return Ok(report);
        }
        let run = run_id(started, &pending);
        report.run = Some(run.clone());
        tracing::info!(run = %run, pending = pending.len(), decider = self.decider_name(), "pass started");
        let planned = PassRun { lock, ledger: &ledger, pending: &pending, run, started, opts, rebuild: None };
        self.run_pass(planned, report, clock).await
    }

    /// Set the current entries aside and consolidate every archived fact that is not
    /// tombstoned again, in one commit (see [`crate::consolidate::rebuild`]). In review mode
    /// the whole rebuild is stored as one plan; a fact left undecided (the LLM out of reach,
    /// an unusable reply) fails it and nothing is written.
    pub async fn rebuild(&self) -> Result<PassReport, Error> {
        let clock = Instant::now();
        let started = self.inner.clock.now();
        let today = self.inner.clock.day_of(started);
        let me = self.clone();
        let (lock, ledger, under_review) = blocking(move || -> Result<_, Error> {
            let lock = me.lock()?;
            if let Err(e) = me.reconcile_locked(&lock) {
                tracing::warn!(error = %e, "could not record hand edits of memory.md");
            }
            let ledger = Ledger::load(&me.inner.root)?;
            // A rebuild rewrites every block: one a person must mend would be cemented (a broken
            // header turned into text, entries an open block hides folded into it).
            let memory = &ledger.memory;
            if memory.entries().any(|e| e.needs_mending()) || !memory.unreadable_facts.is_empty() {
                let first = memory
                    .problems
                    .first()
                    .cloned()
                    .unwrap_or_else(|| Problem::new("consolidated/memory.md", 0, "a block to mend"));
                return Err(Error::Unreadable(Problem {
                    message: format!(
                        "{}; a rebuild writes nothing until memory.md is mended (see `memfold verify`)",
                        first.message
                    ),
                    ..first
                }));
            }
            Ok((lock, ledger, records::facts_under_review(&me.inner.root)))
        })
        .await?;
        let all = eligible(&ledger, &under_review, &self.inner.config.consolidation, true);
        let run = run_id(started, &all);
        let (planning, blocks) = rebuild::set_aside(&ledger, &run, today);
        let pending = eligible(&planning, &under_review, &self.inner.config.consolidation, true);
        let gate = Gate {
            open: true,
            reason: format!("rebuild: {} facts, {} entries set aside", pending.len(), blocks.len()),
        };
        let mut report = PassReport::new(gate, &self.inner.decider, &self.inner.config.consolidation, false);
        report.run = Some(run.clone());
        tracing::info!(run = %run, pending = pending.len(), set_aside = blocks.len(), "rebuild started");
        let planned = PassRun {
            lock: Some(lock),
            ledger: &planning,
            pending: &pending,
            run,
            started,
            opts: PassOptions { force: true, dry_run: false },
            rebuild: Some((&ledger.memory, blocks)),
        };
        self.run_pass(planned, report, clock).await
    }

    /// Plan, commit, promote and reindex one pass whose gate is open.
    async fn run_pass(&self, run: PassRun<'_>, mut report: PassReport, clock: Instant) -> Result<PassReport, Error> {
        let mut cfg = self.inner.config.consolidation.clone();
        if run.rebuild.is_some() {
            // A rebuild is one change: it applies whole, or in review mode is stored whole.
            cfg.review_below_confidence = 0.0;
        }
        let cfg = &cfg;
        let today = self.inner.clock.day_of(run.started);
        let pass = Pass { config: cfg, embedder: self.index().await?.embedder(), decider: &self.inner.decider };
        let mut planned = pass.plan(run.ledger, run.pending, &run.run, run.started, today, &mut report).await?;
        if run.opts.dry_run {
            report.timings.total_ms = ms(clock);
            return Ok(report);
        }
        let mut rewrite_from = None;
        if let Some((on_disk, blocks)) = &run.rebuild {
            // Every entry is set aside, so a fact left undecided would leave memory.md without
            // what it says until a later pass: a rebuild writes nothing unless it decided all.
            if let Some((err, _)) = planned.stopped.take() {
                tracing::warn!(run = %run.run, error = %err, "rebuild stopped; nothing was written");
                return Err(match err {
                    DecideError::Llm(e) => Error::Llm(e),
                    DecideError::BadReply(m) => Error::LlmReply(m),
                });
            }
            if let Some((fact, why)) = planned.failures.first() {
                return Err(Error::LlmReply(format!(
                    "rebuild: {} facts undecided ({fact}: {why}); nothing was written",
                    planned.failures.len()
                )));
            }
            let plan = &mut planned.plan;
            plan.memory_hash_before = on_disk.hash.clone();
            plan.memory_before = on_disk.render();
            plan.history.splice(0..0, blocks.iter().cloned());
            rewrite_from = (cfg.mode == Mode::Auto).then_some(*on_disk);
        }
        let step = Instant::now();
        let (plan, mut stored) = divert(planned.plan, &planned.held, &planned.facts, cfg.mode, run.started, today);
        if let (Some(stored), Some(_)) = (&mut stored, &run.rebuild) {
            stored.reason = records::REBUILD.to_string();
        }
        let outcome = Outcome { failures: &planned.failures, store: stored.as_ref(), rewrite_from };
        let change =
            apply::change(&self.inner.root, run.ledger, &plan, outcome, run.started, self.inner.clock.now(), today);
        let rewrote = change.memory.is_some();
        let root = self.inner.root.clone();
        let lock = run.lock.ok_or_else(|| Error::Other("a pass that writes holds the lock".into()))?;
        // The guard goes with the write: dropping this task cannot release the lock mid-write.
        let lock = blocking(move || commit::commit(&root, &change, &lock).map(|()| lock)).await?;
        report.plans.extend(stored.map(|s| s.id));
        report.timings.write_ms = ms(step);
        report.applied = !plan.journal.is_empty();
        if rewrote {
            let step = Instant::now();
            let (_lock, usage) = self.after_commit(lock, report.applied.then_some(plan.run.as_str())).await;
            report.llm.add(usage);
            report.timings.promote_ms = ms(step);
        } else {
            drop(lock);
        }
        let step = Instant::now();
        self.mark_dirty();
        self.refresh().await?;
        report.timings.reindex_ms = ms(step);
        report.timings.total_ms = ms(clock);
        tracing::info!(run = %plan.run, ops = plan.journal.len(), failed = planned.failures.len(), "pass done");
        Ok(report)
    }

    /// Rewrite `MEMORY.md` from the current entries and the recall log.
    pub async fn promote(&self) -> Result<PromoteReport, Error> {
        let llm = self.inner.chat.as_ref().map(|client| (client, self.inner.prompts.promote.as_str()));
        let report = crate::promote::promote(&self.inner.root, &self.inner.config, llm)
            .await
            .map_err(|e| Error::Other(e.to_string()))?;
        self.tell(Rewritten::Promoted);
        Ok(report)
    }

    // ---- curation --------------------------------------------------------------------------

    /// Forget an entry (to history as deleted, tombstoned with its facts) or a pending fact.
    pub async fn forget(&self, id: &str, reason: Option<&str>) -> Result<Forgotten, Error> {
        let (id, reason) = (id.to_string(), reason.map(str::to_string));
        let (done, rewrote, lock) = self
            .write(move |me, ledger| {
                let promoted = me.promoted();
                let now = me.inner.clock.now();
                forget::plan_forget(
                    ledger,
                    Promoted { text: &promoted },
                    &id,
                    reason.as_deref(),
                    now,
                    me.inner.clock.day_of(now),
                )
            })
            .await?;
        drop(lock);
        if rewrote {
            self.tell(Rewritten::Promoted);
            self.tell(Rewritten::Memory);
        }
        self.settle_index().await;
        Ok(done)
    }

    /// Pin or unpin an entry: a pinned entry is never replaced or removed by consolidation.
    pub async fn pin(&self, id: &str, pinned: bool) -> Result<(), Error> {
        let id = id.to_string();
        let (_, rewrote, lock) = self.write(move |_, ledger| Ok((forget::plan_pin(ledger, &id, pinned)?, ()))).await?;
        drop(lock);
        if rewrote {
            self.tell(Rewritten::Memory);
            self.settle_index().await;
        }
        Ok(())
    }

    /// Record entries a person deleted from `memory.md` by hand; skipped (nothing returned)
    /// while another writer holds the lock, which records them itself.
    pub async fn reconcile(&self) -> Result<Vec<String>, Error> {
        let me = self.clone();
        let gone = blocking(move || match me.lock() {
            Ok(lock) => me.reconcile_locked(&lock),
            Err(Error::Busy(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        })
        .await?;
        if !gone.is_empty() {
            self.tell(Rewritten::Promoted);
        }
        self.mark_dirty();
        Ok(gone)
    }

    /// Undo an applied run (see [`crate::review`]).
    pub async fn undo(&self, run: &str) -> Result<Undone, Error> {
        records::check_id("run", run)?;
        let run = run.to_string();
        let (undone, _, lock) = self
            .write(move |me, ledger| {
                let journal = records::journal(&me.inner.root)?;
                let record = records::load_run(&me.inner.root, &run)?;
                let now = me.inner.clock.now();
                let (mut change, undone) =
                    review::plan_undo(ledger, &journal, record, &run, now, me.inner.clock.day_of(now))?;
                let promoted = me.promoted();
                change.memory_md = Promoted { text: &promoted }.without(&undone.removed);
                Ok((change, undone))
            })
            .await?;
        tracing::info!(run = %undone.run, exact = undone.exact, restored = undone.restored.len(), removed = undone.removed.len(), facts = undone.facts.len(), "run undone");
        let mut undone = undone;
        let (lock, usage) = self.after_commit(lock, None).await;
        drop(lock);
        undone.llm = usage;
        self.settle_index().await;
        Ok(undone)
    }

    /// Apply a stored plan, rebased onto the current `memory.md` when only other entries changed.
    pub async fn apply_plan(&self, id: &str) -> Result<AppliedPlan, Error> {
        records::check_id("plan", id)?;
        let id = id.to_string();
        let started = self.inner.clock.now();
        let (applied, _, lock) = self
            .write(move |me, ledger| {
                let root = &me.inner.root;
                let stored = records::load_plan(root, &id)?;
                if records::run_path(root, &stored.id).exists() {
                    // Applied already (its run record exists): only the file is left to remove.
                    let mut change = Change::new(format!("remove applied plan {id}"));
                    change.records.push(records::plan_removal(&id));
                    return Ok((
                        change,
                        Err(Error::Conflict {
                            message: format!("plan {id} was applied already"),
                            ids: vec![id.clone()],
                        }),
                    ));
                }
                let day = stored.day.unwrap_or_else(|| me.inner.clock.day_of(stored.created));
                let (plan, applied) = review::plan_apply(ledger, &stored, day)?;
                // A rebuild sets every entry aside: each one it does not keep is a change.
                let rebuild = stored.reason == records::REBUILD;
                let outcome = Outcome { rewrite_from: rebuild.then_some(&ledger.memory), ..Outcome::default() };
                let change = apply::change(root, ledger, &plan, outcome, started, me.inner.clock.now(), day);
                Ok((change, Ok(applied)))
            })
            .await?;
        let mut applied = applied?;
        tracing::info!(plan = %applied.plan, rebased = applied.rebased, ops = applied.ops, "plan applied");
        let (lock, usage) = self.after_commit(lock, Some(&applied.run)).await;
        drop(lock);
        applied.llm = usage;
        self.settle_index().await;
        Ok(applied)
    }

    /// Reject a stored plan: nothing is written to markdown; its facts stay pending, flagged.
    pub async fn reject_plan(&self, id: &str) -> Result<RejectedPlan, Error> {
        records::check_id("plan", id)?;
        let id = id.to_string();
        let (rejected, _, _lock) = self
            .write(move |me, ledger| {
                let stored = records::load_plan(&me.inner.root, &id)?;
                Ok(review::plan_reject(ledger, &stored, me.inner.clock.now()))
            })
            .await?;
        tracing::info!(plan = %rejected.plan, facts = rejected.facts.len(), "plan rejected");
        Ok(rejected)
    }
}

/// A pass whose gate is open, ready to plan.
struct PassRun<'a> {
    /// Held unless it is a dry run.
    lock: Option<LockGuard>,
    /// The files as read (for a rebuild: with the current entries set aside).
    ledger: &'a Ledger,
    pending: &'a [&'a Fact],
    run: String,
    started: DateTime<Utc>,
    opts: PassOptions,
    /// A rebuild: `memory.md` as it is on disk, and the versions set aside.
    rebuild: Option<(&'a EntryFile, Vec<Entry>)>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("root", &self.inner.root).field("decider", &self.decider_name()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_text_or_messages_never_both_nor_neither() {
        let none = std::iter::empty::<(&str, &str)>;
        assert_eq!(Turn::from_parts(Some("  user: hi  "), none()).unwrap().text, "user: hi");
        let messages = [("user", " hi "), ("assistant", "hello")];
        assert_eq!(Turn::from_parts(None, messages.into_iter()).unwrap().text, "user: hi\nassistant: hello");
        for bad in [Turn::from_parts(Some("x"), messages.into_iter()), Turn::from_parts(Some(" "), none())] {
            assert_eq!(bad.unwrap_err().kind(), crate::error::Kind::BadInput);
        }
        assert!(Turn::from_parts(None, none()).is_err());
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
}
