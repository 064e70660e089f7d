//! The one service behind every door of the daemon: the HTTP API, the MCP server (on `/mcp` and on
//! stdin/stdout) and the review page call [`Service`], and nothing else.
//!
//! A door parses its request, calls one method here, and renders what comes back. What the
//! doors used to write each for itself lives here once: ingest batching, turn extraction and
//! its append, passes handed to the scheduler and the answer for a pass that outlasts
//! `server.request_timeout_secs`, the daemon's part of the status, and the metrics. Every method
//! counts its call in `memfold_calls_total{verb,door}`, and what it cost (facts ingested, LLM
//! calls of an extraction or a promotion) the same way whichever door it came through.
//!
//! **Ingest** groups concurrent appends into one archive write (one lock, one read of the day
//! file, one fsync): each caller queues its facts, and whoever gets the writer mutex next
//! appends everything queued. The append runs in `spawn_blocking` and answers every waiter from
//! there, so a client that disconnects cannot lose other clients' replies.
//!
//! **Changes** of memory (a pass, forget, pin, undo, apply, reject, reindex) run one at a time
//! in this process, so parallel calls, from one agent or from several doors, queue instead of
//! finding the consolidation lock taken by each other; another process holding the lock still
//! refuses them (`lock_held`). The file watcher's record of what a person deleted from
//! `memory.md` by hand takes the same turn when no change is under way, and is left to the
//! change otherwise ([`Service::files_changed`]).

pub mod access;
pub mod metrics;
pub mod passes;
pub mod scheduler;
pub mod spaces;
pub mod token;
pub mod watch;
pub mod workers;

use memfold_store::sys::guard as lock;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

pub use access::Access;
use memfold_core::error::{Error, Kind};
use memfold_core::memory::views::{
    AboutAnswer, Added, AppliedPlan, Chain, Curated, Entry, FactView, Forgotten, PassOptions, PassReport, PlanDetail,
    PlanView, Reindexed, RejectedPlan, RunDetail, RunView, Status, Successor, Undone,
};
use memfold_core::memory::{
    CheckedFacts, Memory, RecallRequest, Recalled, Rewritten, SearchRequest, SweepOptions, SweepReport, Turn, Undo,
};
use memfold_core::planning::recall::Candidate;
use memfold_index::{Hit, Settled};
use memfold_store::archive::{Fact, NewFact};
use memfold_store::config::Config;
use metrics::Metrics;
use passes::PassQueue;
pub use passes::{PassRecord, PassState, Requests};
pub use scheduler::{STALE_RETRY, SchedulerWorker};
pub use spaces::{SpaceSummary, Spaces};

/// Which door a call came through (a label of `memfold_calls_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Door {
    /// The JSON API.
    Http,
    /// The MCP tools, at `/mcp` or on stdin/stdout.
    Mcp,
    /// The review page under `/ui`.
    Ui,
}

impl Door {
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Http => "http",
            Door::Mcp => "mcp",
            Door::Ui => "ui",
        }
    }
}

/// The verbs, as `memfold_calls_total` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    Add,
    AddTurn,
    DrainSpool,
    Search,
    Consolidate,
    Status,
    Entries,
    Entry,
    History,
    Forget,
    Pin,
    Reindex,
    Runs,
    Undo,
    Plans,
    Apply,
    Reject,
    Plan,
    Fact,
    Share,
    Merge,
    Supersede,
    Run,
    Sweep,
    Recall,
    About,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Add => "add",
            Verb::AddTurn => "add_turn",
            Verb::DrainSpool => "drain_spool",
            Verb::Search => "search",
            Verb::Consolidate => "consolidate",
            Verb::Status => "status",
            Verb::Entries => "entries",
            Verb::Entry => "entry",
            Verb::History => "history",
            Verb::Forget => "forget",
            Verb::Pin => "pin",
            Verb::Reindex => "reindex",
            Verb::Runs => "runs",
            Verb::Undo => "undo",
            Verb::Plans => "plans",
            Verb::Apply => "apply",
            Verb::Reject => "reject",
            Verb::Plan => "plan",
            Verb::Fact => "fact",
            Verb::Share => "share",
            Verb::Merge => "merge",
            Verb::Supersede => "supersede",
            Verb::Run => "run",
            Verb::Sweep => "sweep",
            Verb::Recall => "recall",
            Verb::About => "about",
        }
    }
}

/// What became of a consolidation request.
#[derive(Debug)]
pub enum PassAnswer {
    /// The pass finished within `server.request_timeout_secs`.
    Done(Box<PassReport>),
    /// Still queued or running.
    Running(PassRunning),
}

/// A pass that goes on in the background: its request id, and where to follow it.
#[derive(Debug, Clone, Serialize)]
pub struct PassRunning {
    /// Always `running`.
    pub status: PassState,
    /// Its record in `daemon.passes` has this id.
    pub request: String,
    pub message: String,
}

/// `memfold status` plus what the daemon knows of its own passes.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    #[serde(flatten)]
    pub status: Status,
    pub daemon: DaemonStatus,
}

/// The daemon's part of the status.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStatus {
    pub started: DateTime<Utc>,
    pub uptime_seconds: u64,
    /// Recent passes, newest first.
    pub passes: Vec<PassRecord>,
}

/// An entry as the API lists it.
#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    pub id: String,
    pub content: String,
    pub first_seen: Option<chrono::NaiveDate>,
    pub updated: Option<chrono::NaiveDate>,
    pub sources: Vec<String>,
    pub pinned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The entries it is related to, and what they share.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<memfold_store::entries::Link>,
}

impl From<&Entry> for EntryView {
    fn from(e: &Entry) -> EntryView {
        let m = &e.meta;
        EntryView {
            id: e.id().to_string(),
            content: e.content.clone(),
            first_seen: m.first_seen,
            updated: m.updated,
            sources: m.sources.clone(),
            pinned: m.pinned,
            kind: m.kind.clone(),
            related: m.links(),
        }
    }
}

/// What pinning or unpinning did.
#[derive(Debug, Clone, Serialize)]
pub struct Pinned {
    pub id: String,
    pub pinned: bool,
}

/// One space's use cases as the daemon's doors reach them.
pub struct Service {
    /// The space's name ("" for a lone root).
    name: String,
    memory: Memory,
    /// The daemon's counters, which every space adds to.
    metrics: Arc<Metrics>,
    started: Instant,
    started_at: DateTime<Utc>,
    passes: PassQueue,
    ingest: Ingest,
    /// Held by the change in progress (see the module docs).
    changes: tokio::sync::Mutex<()>,
    /// Held while the spool of turns is drained; `spool_asked` says to drain it again.
    draining: Arc<tokio::sync::Mutex<()>>,
    spool_asked: std::sync::atomic::AtomicBool,
    /// The daemon's spaces, for what reaches across them (shared spaces' searches, share).
    spaces: Weak<Spaces>,
    me: Weak<Service>,
}

/// Facts waiting to be appended, and the mutex whose holder appends them (group commit).
#[derive(Default)]
struct Ingest {
    queue: Mutex<Vec<Waiting>>,
    writer: tokio::sync::Mutex<()>,
}

struct Waiting {
    facts: CheckedFacts,
    reply: oneshot::Sender<Result<Vec<Fact>, Error>>,
}

impl Service {
    /// The service of space `name` over `memory`, counting into `metrics` and queueing its
    /// passes on `passes` (see [`Spaces`], which makes them).
    pub(super) fn new(
        name: String,
        memory: Memory,
        metrics: Arc<Metrics>,
        passes: mpsc::Sender<passes::PassRequest>,
        spaces: Weak<Spaces>,
        (started, started_at): (Instant, DateTime<Utc>),
    ) -> Arc<Service> {
        Arc::new_cyclic(|me| Service {
            name,
            memory,
            metrics,
            started,
            started_at,
            passes: PassQueue::new(passes),
            ingest: Ingest::default(),
            changes: tokio::sync::Mutex::new(()),
            draining: Arc::default(),
            spool_asked: std::sync::atomic::AtomicBool::new(false),
            spaces,
            me: me.clone(),
        })
    }

    /// The space's name ("" for a lone root).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(super) fn passes(&self) -> &PassQueue {
        &self.passes
    }

    /// What the indexer of this space works on.
    pub(super) fn indexing(&self) -> (Memory, Arc<Metrics>) {
        (self.memory.clone(), self.metrics.clone())
    }

    /// Run a pass, as the space's one change at a time (the scheduler's part).
    pub(super) async fn run_pass(&self, opts: PassOptions) -> Result<PassReport, Error> {
        self.one_at_a_time(self.memory.consolidate(opts)).await
    }

    fn count(&self, verb: Verb, door: Door) {
        self.metrics.call(verb, door);
    }

    /// One change of memory at a time (see the module docs); the scheduler runs its passes
    /// through this too.
    pub(super) async fn one_at_a_time<T>(&self, change: impl Future<Output = T>) -> T {
        let _one = self.changes.lock().await;
        change.await
    }

    // ---- the space's set-up ---------------------------------------------------------------

    pub fn config(&self) -> &Config {
        self.memory.config()
    }

    /// The space's root, as configured.
    pub fn root_dir(&self) -> &std::path::Path {
        self.memory.root().dir()
    }

    /// Open the index now, and have it hold its rows in memory for searches.
    pub async fn open_index(&self) -> Result<(), Error> {
        self.memory.index().await?;
        self.hold_rows();
        Ok(())
    }

    /// Open the index, catch it up with the files, settle it and read its rows into memory, so
    /// the first search is answered as fast as any (a lone root's daemon does this before it
    /// listens). A failure after the opening is logged: searches then catch up themselves.
    pub async fn warm_up(&self) -> Result<(), Error> {
        self.memory.index().await?;
        let result = self.memory.warm_up().await;
        if !matches!(result, Ok(None)) {
            self.metrics.settled(result.is_ok());
        }
        if let Err(e) = result {
            tracing::warn!(space = %self.name, error = %e, "could not settle the index before serving");
            self.hold_rows();
        }
        Ok(())
    }

    /// Have the index hold its rows in memory for searches, once it is open.
    pub fn hold_rows(&self) {
        self.memory.hold_vectors();
    }

    /// The index may be behind the files: the next search or refresh catches up.
    pub fn mark_dirty(&self) {
        self.memory.mark_dirty();
    }

    /// Take in paths a file watcher saw change (see [`Memory::files_changed`]); when
    /// `memory.md` may have changed, record what a person deleted from it first. That record
    /// takes the consolidation lock, so it is one of the space's changes: a change asked for
    /// meanwhile (the undo of what the watcher just saw written) waits for it rather than
    /// finding the lock held by this very daemon. While a change is under way the record is
    /// left to it, as to any writer ([`Memory::reconcile`]): the watcher does not wait out a
    /// pass before the index hears of the files.
    pub async fn files_changed(&self, changes: &[std::path::PathBuf]) {
        let memory = changes.is_empty() || changes.iter().any(|p| p.ends_with("consolidated/memory.md"));
        if memory
            && let Ok(_one) = self.changes.try_lock()
            && let Err(e) = self.memory.reconcile().await
        {
            tracing::warn!(space = %self.name, error = %e, "could not record hand edits of memory.md");
        }
        self.memory.files_changed(changes);
    }

    /// Learn when `memory.md` or `MEMORY.md` changes (see [`Memory::subscribe`]).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Rewritten> {
        self.memory.subscribe()
    }

    /// The text of `memory.md` or `MEMORY.md` (empty when the file does not exist).
    pub async fn file_text(&self, file: Rewritten) -> Result<String, Error> {
        self.memory.file_text(file).await
    }

    /// A number that changes whenever the daemon serves a call, runs a pass or refreshes or
    /// settles the index, and stands still while it is idle.
    pub fn activity(&self) -> u64 {
        self.metrics.activity()
    }

    // ---- ingest ------------------------------------------------------------------------------

    /// Append facts to the archive, grouped with other appends waiting at the same time. A
    /// refused request (no facts, a fact without text or too long) stores nothing.
    pub async fn add(&self, door: Door, facts: Vec<NewFact>) -> Result<Added, Error> {
        self.count(Verb::Add, door);
        let facts = self.memory.check_facts(facts)?;
        let n = facts.len();
        let added = self.append(facts).await?;
        self.metrics.facts_ingested(Verb::Add, n);
        Ok(Added::new(&added, None))
    }

    /// Extract the facts of a conversation turn with the LLM and append them, all or none.
    pub async fn add_turn(&self, door: Door, turn: Turn) -> Result<Added, Error> {
        self.count(Verb::AddTurn, door);
        let (facts, usage) = self.memory.extract_turn(&turn).await.map_err(|e| match e {
            Error::Llm(e) => {
                tracing::warn!(error = %e, "fact extraction failed");
                Error::TurnNotStored(e)
            }
            e => e,
        })?;
        self.metrics.extract_llm(usage);
        let added = if facts.is_empty() { Vec::new() } else { self.append(facts).await? };
        self.metrics.facts_ingested(Verb::AddTurn, added.len());
        Ok(Added::new(&added, Some(usage)))
    }

    /// Extract the turns the agent hooks spooled, in the background (a hook hands its turn
    /// over and returns at once): started now, or after the drain already running. How many
    /// turns wait.
    pub async fn drain_spool(&self, door: Door) -> Result<usize, Error> {
        self.count(Verb::DrainSpool, door);
        let waiting = self.memory.spooled().await;
        self.start_draining()?;
        Ok(waiting)
    }

    /// When a daemon opens the space: extract what the hooks spooled while it was down or the
    /// space closed (with an LLM; without one nothing is ever spooled).
    pub(super) fn resume_spool(&self) {
        if !self.memory.config().llm.enabled() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            if me.memory.spooled().await > 0 {
                let _ = me.start_draining();
            }
        });
    }

    /// Drain the spool in the background, now or after the drain already running.
    fn start_draining(&self) -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        self.spool_asked.store(true, Ordering::SeqCst);
        let Ok(guard) = self.draining.clone().try_lock_owned() else { return Ok(()) };
        let me = self.me.upgrade().ok_or(Error::ShuttingDown)?;
        tokio::spawn(async move {
            let _draining = guard;
            while me.spool_asked.swap(false, Ordering::SeqCst) {
                match me.memory.drain_spool().await {
                    Ok(drained) => {
                        me.metrics.facts_ingested(Verb::AddTurn, drained.facts);
                        if drained.turns + drained.left + drained.set_aside > 0 {
                            tracing::info!(
                                turns = drained.turns,
                                facts = drained.facts,
                                left = drained.left,
                                set_aside = drained.set_aside,
                                "spooled turns extracted"
                            );
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "the spool of turns could not be drained"),
                }
            }
        });
        Ok(())
    }

    async fn append(&self, facts: CheckedFacts) -> Result<Vec<Fact>, Error> {
        let (reply, answer) = oneshot::channel();
        lock(&self.ingest.queue).push(Waiting { facts, reply });
        {
            let _writer = self.ingest.writer.lock().await;
            let batch = std::mem::take(&mut *lock(&self.ingest.queue));
            if !batch.is_empty() {
                let memory = self.memory.clone();
                // The closure answers every waiter itself; awaiting it only keeps appends one at a time.
                let _ = tokio::task::spawn_blocking(move || append_batch(&memory, batch)).await;
            }
        }
        answer.await.map_err(|_| {
            Error::Other(
                "the archive append was interrupted (shutting down); the facts may not have been written".into(),
            )
        })?
    }

    // ---- search and the index ------------------------------------------------------------------

    /// The lines to hand an agent for a prompt ([`Memory::recall`]), weighed among this space's
    /// candidates and, in a home, its shared spaces' (not recorded in their recall logs).
    pub async fn recall(&self, door: Door, prompt: &str, request: &RecallRequest) -> Result<Recalled, Error> {
        self.count(Verb::Recall, door);
        let mut candidates = self.memory.recall_candidates(prompt).await?;
        if let Some(spaces) = self.spaces.upgrade().filter(|s| s.is_home()) {
            for (name, space) in self.shared_services(&spaces).await {
                match space.memory.recall_candidates(prompt).await {
                    Ok(found) => {
                        candidates.extend(found.into_iter().map(|c| Candidate { space: Some(name.clone()), ..c }))
                    }
                    Err(e) => self.shared_failed(&name, &e),
                }
            }
        }
        self.memory.recall_from(prompt, candidates, request).await
    }

    /// The home's shared spaces, this one aside.
    fn shared(&self, spaces: &Spaces) -> Vec<String> {
        spaces.config().spaces.shared.iter().filter(|s| **s != self.name).cloned().collect()
    }

    /// The home's shared spaces (this one aside), opened. One that fails is left out and
    /// logged: the caller's own space still answers, and the operator sees the shared one fail.
    async fn shared_services(&self, spaces: &Spaces) -> Vec<(String, Arc<Service>)> {
        let mut out = Vec::new();
        for name in self.shared(spaces) {
            match spaces.service(&name, false).await {
                Ok(space) => out.push((name, space)),
                Err(Error::NoSpace(_)) => {}
                Err(e) => self.shared_failed(&name, &e),
            }
        }
        out
    }

    fn shared_failed(&self, shared: &str, e: &Error) {
        tracing::warn!(space = %self.name, shared = %shared, error = %e, "a shared space could not be read");
    }

    /// Hybrid search; the hits are recorded in the recall log. A space of a home also reads
    /// the home's shared spaces (`spaces.shared`): their hits say which space they came from,
    /// are ranked among its own by score, and are not recorded in anyone's recall log.
    pub async fn search(&self, door: Door, query: &str, request: &SearchRequest) -> Result<Vec<Hit>, Error> {
        self.count(Verb::Search, door);
        let mut hits = self.memory.search(query, request).await?;
        let Some(spaces) = self.spaces.upgrade().filter(|s| s.is_home()) else { return Ok(hits) };
        // In a home every hit names its space, the caller's own included.
        for hit in &mut hits {
            hit.space = Some(self.name.clone());
        }
        if self.shared(&spaces).is_empty() {
            return Ok(hits);
        }
        let quiet = SearchRequest { skip_recall: true, ..request.clone() };
        for (name, space) in self.shared_services(&spaces).await {
            match space.memory.search(query, &quiet).await {
                Ok(found) => hits.extend(found.into_iter().map(|hit| Hit { space: Some(name.clone()), ..hit })),
                Err(e) => self.shared_failed(&name, &e),
            }
        }
        // Best first; on a tie the caller's own space first.
        let own = |hit: &Hit| hit.space.as_deref() != Some(self.name.as_str());
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(own(a).cmp(&own(b))));
        hits.truncate(request.k.unwrap_or(self.config().search.default_k).min(memfold_core::memory::MAX_K));
        Ok(hits)
    }

    /// Copy entry `id` into the shared space `to` as a new fact whose source names this space
    /// and the entry (`share:<space>/<entry>`): the only way a space writes into another. The
    /// shared space's next pass decides it like any fact.
    pub async fn share(&self, door: Door, id: &str, to: &str) -> Result<Added, Error> {
        self.count(Verb::Share, door);
        let spaces = self.spaces.upgrade().ok_or(Error::ShuttingDown)?;
        spaces::check_share(spaces.is_home().then(|| spaces.config()), &self.name, to)?;
        let fact = self.memory.shared_fact(&self.name, id).await?;
        spaces.service(to, false).await?.add(door, vec![fact]).await
    }

    /// Bring the index up to date with the files, counting the refresh.
    pub async fn refresh(&self) -> Result<(), Error> {
        let result = self.memory.refresh().await;
        self.metrics.refreshed(result.is_ok());
        result
    }

    /// Fold small writes back into the index's indices, counting it.
    pub async fn settle(&self) -> Result<Settled, Error> {
        let result = self.memory.settle().await;
        self.metrics.settled(result.is_ok());
        result
    }

    pub async fn reindex(&self, door: Door, clear: bool) -> Result<Reindexed, Error> {
        self.count(Verb::Reindex, door);
        self.one_at_a_time(self.memory.reindex(clear, None)).await
    }

    // ---- consolidation -------------------------------------------------------------------------

    /// Hand a pass to the scheduler and wait up to `server.request_timeout_secs` for its report.
    pub async fn consolidate(&self, door: Door, opts: PassOptions) -> Result<PassAnswer, Error> {
        self.count(Verb::Consolidate, door);
        let wait = Duration::from_secs(self.memory.config().server.request_timeout_secs);
        let me = self.me.upgrade().ok_or(Error::ShuttingDown)?;
        match self.passes.request(me, opts, wait).await? {
            Ok(result) => Ok(PassAnswer::Done(Box::new(result?))),
            Err(request) => Ok(PassAnswer::Running(PassRunning {
                status: PassState::Running,
                message: format!(
                    "the pass takes longer than server.request_timeout_secs ({}s) and goes on in the background as \
                     request {request}; the status (GET /status, memory_status) shows it under daemon.passes, and \
                     the runs (GET /runs, memory_runs) once it is applied",
                    wait.as_secs()
                ),
                request,
            })),
        }
    }

    // ---- reads ---------------------------------------------------------------------------------

    pub async fn status(&self, door: Door) -> Result<ServiceStatus, Error> {
        self.count(Verb::Status, door);
        let status = self.memory.status().await?;
        Ok(ServiceStatus { status, daemon: self.daemon_status() })
    }

    fn daemon_status(&self) -> DaemonStatus {
        DaemonStatus {
            started: self.started_at,
            uptime_seconds: self.started.elapsed().as_secs(),
            passes: self.passes.records(),
        }
    }

    pub async fn entries(&self, door: Door) -> Result<Vec<EntryView>, Error> {
        self.count(Verb::Entries, door);
        Ok(self.memory.entries().await?.iter().map(EntryView::from).collect())
    }

    pub async fn entry(&self, door: Door, id: &str) -> Result<EntryView, Error> {
        self.count(Verb::Entry, door);
        Ok(EntryView::from(&self.memory.entry(id).await?))
    }

    pub async fn history(&self, door: Door, id: &str) -> Result<Chain, Error> {
        self.count(Verb::History, door);
        self.memory.history(id).await
    }

    pub async fn about(&self, door: Door, name: Option<&str>, history: bool) -> Result<AboutAnswer, Error> {
        self.count(Verb::About, door);
        self.memory.about(name, history).await
    }

    pub async fn runs(&self, door: Door) -> Result<Vec<RunView>, Error> {
        self.count(Verb::Runs, door);
        self.memory.runs().await
    }

    /// One applied run with its ops in groups.
    pub async fn run(&self, door: Door, id: &str) -> Result<RunDetail, Error> {
        self.count(Verb::Run, door);
        self.memory.run_detail(id).await
    }

    pub async fn plans(&self, door: Door) -> Result<Vec<PlanView>, Error> {
        self.count(Verb::Plans, door);
        self.memory.plans().await
    }

    /// A stored plan with its ops in groups and its facts as archived.
    pub async fn plan(&self, door: Door, id: &str) -> Result<PlanDetail, Error> {
        self.count(Verb::Plan, door);
        self.memory.plan_detail(id).await
    }

    /// One archived fact, where it is and where it went.
    pub async fn fact(&self, door: Door, id: &str) -> Result<FactView, Error> {
        self.count(Verb::Fact, door);
        self.memory.fact(id).await
    }

    // ---- curation ------------------------------------------------------------------------------

    pub async fn forget(&self, door: Door, id: &str, reason: Option<&str>) -> Result<Forgotten, Error> {
        self.count(Verb::Forget, door);
        self.one_at_a_time(self.memory.forget(id, reason)).await
    }

    pub async fn pin(&self, door: Door, id: &str, pinned: bool) -> Result<Pinned, Error> {
        self.count(Verb::Pin, door);
        self.one_at_a_time(self.memory.pin(id, pinned)).await?;
        Ok(Pinned { id: id.to_string(), pinned })
    }

    /// Undo a run, or the ops and op groups of it `what` names.
    pub async fn undo(&self, door: Door, run: &str, what: &Undo) -> Result<Undone, Error> {
        self.count(Verb::Undo, door);
        let undone = self.one_at_a_time(self.memory.undo_part(run, what)).await?;
        self.metrics.promote_llm(undone.llm);
        Ok(undone)
    }

    /// Merge entries into the first of them.
    pub async fn merge(
        &self,
        door: Door,
        ids: &[String],
        text: Option<&str>,
        note: Option<&str>,
    ) -> Result<Curated, Error> {
        self.count(Verb::Merge, door);
        let done = self.one_at_a_time(self.memory.merge(ids, text, note)).await?;
        self.metrics.promote_llm(done.llm);
        Ok(done)
    }

    /// Supersede an entry by another entry or by a new text.
    pub async fn supersede(&self, door: Door, old: &str, by: Successor, note: Option<&str>) -> Result<Curated, Error> {
        self.count(Verb::Supersede, door);
        let done = self.one_at_a_time(self.memory.supersede(old, by, note)).await?;
        self.metrics.promote_llm(done.llm);
        Ok(done)
    }

    /// Apply a stored plan, or only the op groups named (rejecting the rest).
    pub async fn apply_plan(
        &self,
        door: Door,
        id: &str,
        groups: Option<Vec<usize>>,
        note: Option<&str>,
    ) -> Result<AppliedPlan, Error> {
        self.count(Verb::Apply, door);
        let applied = self.one_at_a_time(self.memory.apply_plan_groups(id, groups, note)).await?;
        self.metrics.promote_llm(applied.llm);
        Ok(applied)
    }

    pub async fn reject_plan(&self, door: Door, id: &str, note: Option<&str>) -> Result<RejectedPlan, Error> {
        self.count(Verb::Reject, door);
        self.one_at_a_time(self.memory.reject_plan(id, note)).await
    }

    /// Sweep the current entries; what is found is stored as a plan for review.
    pub async fn sweep(&self, door: Door, opts: SweepOptions) -> Result<SweepReport, Error> {
        self.count(Verb::Sweep, door);
        self.one_at_a_time(self.memory.sweep(opts)).await
    }

    /// The scheduled sweep, when `consolidation.sweep_interval_hours` says one is due.
    /// Sync with the git remote when it is due (see [`Memory::sync_due`]), as the space's one
    /// change at that moment. A failure is logged and kept for `status`; the next one tries again.
    pub(crate) async fn sync_if_due(&self, after_pass: bool) {
        if !self.memory.sync_due(after_pass) {
            return;
        }
        match self.one_at_a_time(self.memory.sync(None)).await {
            Ok(report) => tracing::info!(
                space = %self.name,
                merges = report.merges,
                facts = report.merged.facts,
                entries = report.merged.entries,
                conflicts = report.merged.conflicts.len(),
                "synced"
            ),
            Err(e) if e.kind() == memfold_core::error::Kind::Busy => {
                tracing::debug!(space = %self.name, "sync skipped: another change holds the lock")
            }
            Err(e) => {
                tracing::warn!(space = %self.name, error = %e, "sync failed; `memfold sync --status` says why, the next one tries again")
            }
        }
    }

    pub(crate) async fn sweep_if_due(&self) {
        match self.memory.sweep_due().await {
            Ok(true) => match self.one_at_a_time(self.memory.sweep(SweepOptions::default())).await {
                Ok(report) => {
                    tracing::info!(space = %self.name, swept = report.swept, plan = ?report.plan, "scheduled sweep done")
                }
                Err(e) => {
                    tracing::warn!(space = %self.name, error = %e, "scheduled sweep failed; tried again at the next tick")
                }
            },
            Ok(false) => {}
            Err(e) => tracing::warn!(space = %self.name, error = %e, "could not read the status for a sweep"),
        }
    }

    // ---- metrics -------------------------------------------------------------------------------

    /// This space's gauges for `/metrics`: its pending facts and entries (None when the files
    /// cannot be read) and the searches its held rows served.
    pub(super) async fn gauges(&self) -> Option<Status> {
        match self.memory.status().await {
            Ok(status) => Some(status),
            Err(e) => {
                tracing::warn!(space = %self.name, error = %e, "metrics: could not read the files; leaving out its gauges");
                None
            }
        }
    }

    /// Searches this space answered from the vectors its index holds, since it opened.
    pub(super) fn held_searches(&self) -> u64 {
        self.memory.searches_with_held_vectors()
    }
}

/// Append one batch and answer each waiter with its own facts, in the order given.
fn append_batch(memory: &Memory, mut batch: Vec<Waiting>) {
    let sizes: Vec<usize> = batch.iter().map(|w| w.facts.len()).collect();
    let mut all = CheckedFacts::default();
    for waiting in &mut batch {
        all.extend(std::mem::take(&mut waiting.facts));
    }
    let started = Instant::now();
    match memory.add(all) {
        Ok(facts) => {
            tracing::debug!(
                requests = batch.len(),
                facts = facts.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "facts appended"
            );
            let mut facts = facts.into_iter();
            for (waiting, n) in batch.into_iter().zip(sizes) {
                let _ = waiting.reply.send(Ok(facts.by_ref().take(n).collect()));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, requests = batch.len(), "archive append failed");
            let message = e.to_string();
            let kind = e.kind();
            for waiting in batch {
                let e = if kind == Kind::BadInput {
                    Error::BadInput(message.clone())
                } else {
                    Error::Other(message.clone())
                };
                let _ = waiting.reply.send(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watcher's record of hand deletions takes the consolidation lock: run beside the
    /// daemon's own changes, it must queue with them, never make one fail as `lock_held`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watchers_record_of_hand_edits_never_makes_a_change_find_the_lock_held() {
        let dir = tempfile::tempdir().unwrap();
        let root = memfold_store::Root::new(dir.path());
        root.init().unwrap();
        let config = Config { root: dir.path().to_path_buf(), ..Config::default() };
        let memory = Memory::open(config).await.unwrap();
        let facts =
            ["Runs 5 km on Mondays.", "Owns a red kayak."].map(|t| NewFact { text: t.into(), ..NewFact::default() });
        memory.add(memory.check_facts(facts.to_vec()).unwrap()).unwrap();
        memory.consolidate(PassOptions { force: true, ..PassOptions::default() }).await.unwrap();
        let (spaces, _requests) = Spaces::root(memory, true);
        let service = spaces.service("", false).await.unwrap();
        let entry =
            memfold_store::entries::EntryFile::parse(&std::fs::read_to_string(root.memory()).unwrap(), "memory.md")
                .entries()
                .next()
                .unwrap()
                .id()
                .to_string();
        let changed = [root.memory()];
        for round in 0..40 {
            let (_, pinned) =
                tokio::join!(service.files_changed(&changed), service.pin(Door::Http, &entry, round % 2 == 0));
            assert!(pinned.is_ok(), "round {round}: {:?}", pinned.err());
        }
    }

    #[test]
    fn verb_and_door_names_are_distinct() {
        let verbs = [
            Verb::Add,
            Verb::AddTurn,
            Verb::Search,
            Verb::Consolidate,
            Verb::Status,
            Verb::Entries,
            Verb::Entry,
            Verb::History,
            Verb::Forget,
            Verb::Pin,
            Verb::Reindex,
            Verb::Runs,
            Verb::Undo,
            Verb::Plans,
            Verb::Apply,
            Verb::Reject,
            Verb::Plan,
            Verb::Fact,
            Verb::Share,
            Verb::DrainSpool,
            Verb::Merge,
            Verb::Supersede,
            Verb::Run,
            Verb::Sweep,
            Verb::Recall,
            Verb::About,
        ];
        let names: std::collections::BTreeSet<&str> = verbs.iter().map(|v| v.as_str()).collect();
        assert_eq!(names.len(), verbs.len());
    }
}
