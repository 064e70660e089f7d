//! The daemon (`memfold serve`): named workers in a `JoinSet`, stopped by one shutdown signal.
//!
//! [`serve`] takes the serve lock (`.memfold/serve.lock`, so a second daemon on the same root
//! exits with a message naming the first), opens the index, binds the listener, starts
//! watching the root, then runs four workers that share one [`Daemon`], which holds the
//! [`Memory`] every use case goes through:
//!
//! - `http`: the HTTP server the caller hands in (the axum router of `crate::http`; this
//!   module does not depend on it). Handlers are thin: they parse, call [`Memory`] and answer.
//! - `scheduler`: the only place a consolidation pass runs, one at a time. It checks the gate
//!   every `consolidation.interval_seconds` (the first check is at start) and runs the passes
//!   `POST /consolidate` sends it over a channel, answering on a oneshot. A pass refused
//!   because `memory.md` changed under it is tried again after [`STALE_RETRY`]; a pass refused
//!   because another process holds the consolidation lock is left for the next tick.
//! - `indexer`: brings the index up to date with the files ([`Memory::refresh`], by content
//!   hash) whenever ingest or the watcher marks it dirty; a search refreshes first if it is
//!   still dirty, so facts are searchable as soon as `POST /facts` has answered.
//! - `watcher`: [`Watcher`] events → tombstone entries deleted from `memory.md` by hand
//!   ([`Memory::reconcile`]) → mark the index dirty and tell subscribers of `memory.md` and
//!   `MEMORY.md` ([`Memory::files_changed`]; the MCP server's `resources/updated`).
//!
//! **Ingest** groups concurrent `POST /facts` requests into one archive append (one lock, one
//! read of the day file, one fsync): each request queues its facts, and whoever gets the
//! writer mutex next appends everything queued. The append runs in `spawn_blocking` and
//! answers every waiter from there, so a client that disconnects cannot lose other clients'
//! replies.
//!
//! **Shutdown.** SIGINT and SIGTERM (or a worker ending on its own) send `true` on one watch
//! channel. Every worker selects on it: the server stops accepting and lets open requests
//! finish (for at most [`HTTP_DRAIN`]); the scheduler drops a pass in flight, which leaves the
//! files as they were, except that a commit already started runs to its end on its blocking
//! thread, holding the consolidation lock until it is done (`memfold serve` gives blocking
//! tasks up to 10 s when it shuts its runtime down; a commit cut short even so is finished by
//! the next process that opens the root);
//! the indexer and the watcher stop. The workers are joined, each logged by name, then the
//! serve lock is released; a second signal stops waiting for the workers. Logs go to stderr
//! unbuffered, so there is nothing left to flush.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::consolidate::pass::{PassOptions, PassReport};
use crate::error::{Error, Kind};
use crate::files::Root;
use crate::files::archive::{Fact, NewFact};
use crate::lock::{LockError, LockGuard};
use crate::memory::Memory;
use crate::metrics::{Metrics, PassOutcome, Via};
use crate::watch::{WatchError, Watcher};

/// How long open requests may take to finish after shutdown starts.
pub const HTTP_DRAIN: Duration = Duration::from_secs(10);
/// Delay before a pass refused as stale (memory.md changed during it) is tried again.
pub const STALE_RETRY: Duration = Duration::from_secs(5);
/// Stale retries in a row before the scheduler waits for its next tick instead.
const STALE_RETRIES: u32 = 3;
/// Quiet time the indexer waits after being told the files changed, so bursts are one refresh.
const INDEX_DEBOUNCE: Duration = Duration::from_millis(100);
/// The indexer rests this many times as long as its last refresh took before the next one.
const INDEX_REST_FACTOR: u32 = 3;
/// Debounce of the file watcher.
pub(crate) const WATCH_DEBOUNCE: Duration = Duration::from_millis(250);
/// Consolidation requests that may wait behind the pass in flight.
const SCHEDULER_QUEUE: usize = 16;
/// Pass records kept for `GET /status`.
const PASS_RECORDS: usize = 20;

/// Errors that stop `memfold serve` (at start, or a worker failing).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("opening the index: {0}")]
    Index(Error),
    #[error("binding {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error("resolving the root {path}: {source}")]
    Root { path: String, source: std::io::Error },
    #[error("server.token_env names {var}, which is unset or empty; refusing to serve without the token it asks for")]
    TokenMissing { var: String },
    #[error("installing signal handlers: {0}")]
    Signal(std::io::Error),
    #[error("worker {name} failed: {message}")]
    Worker { name: &'static str, message: String },
}

/// Everything the handlers and workers share. No lock in here is held across an await except
/// the one that exists to serialise archive appends.
pub struct Daemon {
    pub memory: Memory,
    pub metrics: Metrics,
    /// The bearer token every route but `/healthz` requires, when set.
    pub token: Option<String>,
    /// The address the server listens on.
    pub addr: std::net::SocketAddr,
    started: Instant,
    started_at: DateTime<Utc>,
    scheduler: mpsc::Sender<PassRequest>,
    ingest: Ingest,
    passes: Mutex<VecDeque<PassRecord>>,
    requests: AtomicU64,
}

/// Facts waiting to be appended, and the mutex whose holder appends them (group commit).
#[derive(Default)]
struct Ingest {
    queue: Mutex<Vec<Waiting>>,
    writer: tokio::sync::Mutex<()>,
}

struct Waiting {
    facts: Vec<NewFact>,
    via: Via,
    reply: oneshot::Sender<Result<Vec<Fact>, Error>>,
}

/// A pass for the scheduler to run.
struct PassRequest {
    id: String,
    trigger: Trigger,
    opts: PassOptions,
    reply: Option<oneshot::Sender<Result<PassReport, Error>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Trigger {
    /// The interval tick.
    Schedule,
    /// `POST /consolidate`.
    Request,
    /// Again after a stale refusal.
    Retry,
}

/// A pass as `GET /status` shows it under `daemon.passes`.
#[derive(Debug, Clone, Serialize)]
pub struct PassRecord {
    /// The daemon's id for the attempt (`POST /consolidate` answers it with 202).
    pub request: String,
    trigger: Trigger,
    pub force: bool,
    pub dry_run: bool,
    /// `queued`, `running`, `done`, `failed` or `abandoned`.
    pub state: &'static str,
    /// The pass's run id, once it has one.
    pub run: Option<String>,
    pub applied: bool,
    pub ops: usize,
    pub gate: Option<String>,
    pub error: Option<String>,
    pub queued: DateTime<Utc>,
    pub started: Option<DateTime<Utc>>,
    pub finished: Option<DateTime<Utc>>,
}

/// What became of a `POST /consolidate`.
pub enum PassReply {
    /// The pass finished within `server.request_timeout_secs`.
    Done(Box<Result<PassReport, Error>>),
    /// Still queued or running; its record in `daemon.passes` has this id.
    Running(String),
}

/// The scheduler cannot take a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    #[error("{0} consolidation requests are already waiting; try again later")]
    QueueFull(usize),
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Daemon {
    /// Bring the index up to date if the files may have changed, counting the refresh.
    pub async fn refresh(&self) -> Result<(), Error> {
        let result = self.memory.refresh().await;
        self.metrics.refreshed(result.is_ok());
        result
    }

    /// Append facts to the archive, grouped with other requests waiting at the same time.
    /// Answers them in the order given; a refused batch (a fact without text) stores nothing.
    pub async fn ingest(self: &Arc<Self>, facts: Vec<NewFact>, via: Via) -> Result<Vec<Fact>, Error> {
        let (reply, answer) = oneshot::channel();
        lock(&self.ingest.queue).push(Waiting { facts, via, reply });
        {
            let _writer = self.ingest.writer.lock().await;
            let batch = std::mem::take(&mut *lock(&self.ingest.queue));
            if !batch.is_empty() {
                let state = self.clone();
                // The closure answers every waiter itself; awaiting it only keeps appends one at a time.
                let _ = tokio::task::spawn_blocking(move || state.append_batch(batch)).await;
            }
        }
        answer.await.map_err(|_| {
            Error::Other(
                "the archive append was interrupted (shutting down); the facts may not have been written".into(),
            )
        })?
    }

    fn append_batch(&self, mut batch: Vec<Waiting>) {
        let sizes: Vec<usize> = batch.iter().map(|w| w.facts.len()).collect();
        let all: Vec<NewFact> = batch.iter_mut().flat_map(|w| std::mem::take(&mut w.facts)).collect();
        let started = Instant::now();
        match self.memory.add(all) {
            Ok(facts) => {
                debug!(
                    requests = batch.len(),
                    facts = facts.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "facts appended"
                );
                let mut facts = facts.into_iter();
                for (waiting, n) in batch.into_iter().zip(sizes) {
                    self.metrics.facts_ingested(waiting.via, n);
                    let _ = waiting.reply.send(Ok(facts.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                error!(error = %e, requests = batch.len(), "archive append failed");
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

    /// Hand a pass to the scheduler and wait up to `server.request_timeout_secs` for it.
    pub async fn request_pass(&self, opts: PassOptions) -> Result<PassReply, RequestError> {
        let id = self.request_id();
        let (reply, answer) = oneshot::channel();
        let request = PassRequest { id: id.clone(), trigger: Trigger::Request, opts, reply: Some(reply) };
        self.record(PassRecord::queued(&request));
        if let Err(e) = self.scheduler.try_send(request) {
            lock(&self.passes).retain(|r| r.request != id);
            return Err(match e {
                mpsc::error::TrySendError::Full(_) => RequestError::QueueFull(SCHEDULER_QUEUE),
                mpsc::error::TrySendError::Closed(_) => RequestError::ShuttingDown,
            });
        }
        let wait = Duration::from_secs(self.memory.config().server.request_timeout_secs);
        match tokio::time::timeout(wait, answer).await {
            Ok(Ok(result)) => Ok(PassReply::Done(Box::new(result))),
            Ok(Err(_)) => Err(RequestError::ShuttingDown),
            Err(_) => {
                info!(request = %id, waited_secs = wait.as_secs(), "pass continues in the background");
                Ok(PassReply::Running(id))
            }
        }
    }

    /// The daemon's part of `GET /status`.
    pub fn daemon_status(&self) -> serde_json::Value {
        let passes: Vec<PassRecord> = lock(&self.passes).iter().rev().cloned().collect();
        serde_json::json!({
            "started": self.started_at,
            "uptime_seconds": self.started.elapsed().as_secs(),
            "passes": passes,
        })
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    fn request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        format!("q-{}-{n}", Utc::now().format("%Y%m%dT%H%M%SZ"))
    }

    /// Insert or replace the record with this request id.
    fn record(&self, record: PassRecord) {
        let mut passes = lock(&self.passes);
        passes.retain(|r| r.request != record.request);
        passes.push_back(record);
        while passes.len() > PASS_RECORDS {
            passes.pop_front();
        }
    }

    fn forget_record(&self, request: &str) {
        lock(&self.passes).retain(|r| r.request != request);
    }
}

impl PassRecord {
    fn queued(request: &PassRequest) -> PassRecord {
        PassRecord {
            request: request.id.clone(),
            trigger: request.trigger,
            force: request.opts.force,
            dry_run: request.opts.dry_run,
            state: "queued",
            run: None,
            applied: false,
            ops: 0,
            gate: None,
            error: None,
            queued: Utc::now(),
            started: None,
            finished: None,
        }
    }
}

/// The HTTP server a daemon runs as its `http` worker: given the daemon, a bound listener and
/// the shutdown signal, it serves until told to stop.
pub trait HttpServer: FnOnce(Arc<Daemon>, tokio::net::TcpListener, watch::Receiver<bool>) -> Self::Serving {
    type Serving: Future<Output = Result<(), String>> + Send + 'static;
}

impl<F, Fut> HttpServer for F
where
    F: FnOnce(Arc<Daemon>, tokio::net::TcpListener, watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    type Serving = Fut;
}

/// Run the daemon on `memory` until SIGINT or SIGTERM, then shut down gracefully. `bind`
/// overrides `server.bind`; `http` serves the API.
pub async fn serve(memory: Memory, bind: Option<String>, http: impl HttpServer) -> Result<(), DaemonError> {
    let root = memory.root().clone();
    let config = memory.config().clone();
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let serve_lock = LockGuard::try_acquire(&root.serve_lock(), "memfold serve")?;
    let token = config.server_token();
    if token.is_none() && !config.server.token_env.is_empty() {
        return Err(DaemonError::TokenMissing { var: config.server.token_env.clone() });
    }
    memory.index().await.map_err(DaemonError::Index)?;
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    // notify reports canonical paths; the watcher must compare them with a canonical root.
    let canonical = root
        .dir()
        .canonicalize()
        .map_err(|source| DaemonError::Root { path: root.dir().display().to_string(), source })?;
    let watcher = Watcher::start(&Root::new(canonical), WATCH_DEBOUNCE)?;
    let mut signals = Signals::new().map_err(DaemonError::Signal)?;
    if token.is_none() && !addr.ip().is_loopback() {
        warn!(%addr, "listening beyond loopback without a bearer token (set server.token_env)");
    }

    let (stop_tx, stop) = watch::channel(false);
    let (scheduler_tx, scheduler_rx) = mpsc::channel(SCHEDULER_QUEUE);
    let state = Arc::new(Daemon {
        memory,
        metrics: Metrics::default(),
        token,
        addr,
        started: Instant::now(),
        started_at: Utc::now(),
        scheduler: scheduler_tx,
        ingest: Ingest::default(),
        passes: Mutex::new(VecDeque::new()),
        requests: AtomicU64::new(0),
    });
    info!(
        %addr,
        root = %root.dir().display(),
        auth = state.token.is_some(),
        decider = state.memory.decider_name(),
        interval_secs = config.consolidation.interval_seconds,
        "memfold serving"
    );

    let mut workers = Workers::default();
    workers.spawn("http", http(state.clone(), listener, stop.clone()));
    workers.spawn("scheduler", scheduler_worker(state.clone(), scheduler_rx, stop.clone()));
    workers.spawn("indexer", indexer_worker(state.clone(), stop.clone()));
    workers.spawn("watcher", watcher_worker(state.clone(), watcher, stop.clone()));
    state.memory.mark_dirty(); // the first refresh catches up with whatever changed while nobody watched

    let mut failure = None;
    tokio::select! {
        signal = signals.recv() => info!(signal, "shutting down"),
        (name, result) = workers.next_ended() => {
            let message = match result {
                Ok(()) => "stopped on its own".to_string(),
                Err(message) => message,
            };
            error!(worker = name, error = %message, "worker ended; shutting down");
            failure = Some(DaemonError::Worker { name, message });
        }
    }
    let _ = stop_tx.send(true);
    let mut waiting = true;
    while !workers.is_empty() {
        tokio::select! {
            (name, result) = workers.next_ended() => match result {
                Ok(()) => info!(worker = name, "worker stopped"),
                Err(message) => warn!(worker = name, error = %message, "worker stopped with an error"),
            },
            signal = signals.recv(), if waiting => {
                warn!(signal, "second signal: not waiting for the workers");
                waiting = false;
                workers.abort_all();
            }
        }
    }
    drop(state);
    drop(serve_lock);
    info!("memfold stopped");
    failure.map_or(Ok(()), Err)
}

/// The workers, each with a name for the logs.
#[derive(Default)]
struct Workers {
    set: JoinSet<Result<(), String>>,
    names: HashMap<tokio::task::Id, &'static str>,
}

impl Workers {
    fn spawn(&mut self, name: &'static str, work: impl Future<Output = Result<(), String>> + Send + 'static) {
        let handle = self.set.spawn(work);
        self.names.insert(handle.id(), name);
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    fn abort_all(&mut self) {
        self.set.abort_all();
    }

    /// The next worker to end, by name; pending forever when there are none.
    async fn next_ended(&mut self) -> (&'static str, Result<(), String>) {
        let Some(joined) = self.set.join_next_with_id().await else {
            return std::future::pending().await;
        };
        match joined {
            Ok((id, result)) => (self.names.get(&id).copied().unwrap_or("?"), result),
            Err(e) => {
                let name = self.names.get(&e.id()).copied().unwrap_or("?");
                (name, Err(if e.is_cancelled() { "aborted".into() } else { format!("panicked: {e}") }))
            }
        }
    }
}

/// SIGINT and SIGTERM as one stream.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The name of the next signal received.
    async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "ctrl-c"
        }
    }
}

/// Resolves once shutdown has been signalled.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

async fn scheduler_worker(
    state: Arc<Daemon>,
    mut requests: mpsc::Receiver<PassRequest>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let every = Duration::from_secs(state.memory.config().consolidation.interval_seconds.max(1));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (when, options, retries so far) of a pass to try again after a stale refusal.
    let mut retry: Option<(tokio::time::Instant, PassOptions, u32)> = None;
    loop {
        let retry_at = retry.map(|(at, _, _)| at);
        let request = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            request = requests.recv() => match request {
                Some(request) => request,
                None => break,
            },
            _ = async { tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)).await }, if retry_at.is_some() => {
                let (_, opts, _) = retry.expect("guarded by the branch condition");
                PassRequest { id: state.request_id(), trigger: Trigger::Retry, opts, reply: None }
            }
            _ = tick.tick() => PassRequest {
                id: state.request_id(),
                trigger: Trigger::Schedule,
                opts: PassOptions::default(),
                reply: None,
            },
        };
        let tries = match (request.trigger, retry) {
            (Trigger::Retry, Some((_, _, n))) => n,
            _ => 0,
        };
        if request.trigger == Trigger::Retry {
            retry = None;
        }

        let mut record = PassRecord::queued(&request);
        if request.trigger == Trigger::Request {
            record.queued =
                lock(&state.passes).iter().find(|r| r.request == request.id).map_or(record.queued, |r| r.queued);
        }
        record.state = "running";
        record.started = Some(Utc::now());
        state.record(record.clone());
        let started = Instant::now();
        let result = tokio::select! {
            result = state.memory.consolidate(request.opts) => result,
            _ = stopped(&mut stop) => {
                info!(request = %request.id, "shutdown: pass abandoned; the files are as they were (or as its atomic write left them, if it had started)");
                state.metrics.pass(PassOutcome::Abandoned, None, started.elapsed());
                record.state = "abandoned";
                record.finished = Some(Utc::now());
                state.record(record);
                break;
            }
        };
        let elapsed = started.elapsed();
        record.finished = Some(Utc::now());
        let outcome = match &result {
            Ok(report) if !report.gate.open => PassOutcome::GateShut,
            Ok(report) if report.dry_run => PassOutcome::DryRun,
            Ok(report) if report.applied => PassOutcome::Applied,
            Ok(_) => PassOutcome::Unchanged,
            Err(e) if e.kind() == Kind::Busy => PassOutcome::Busy,
            Err(e) if e.kind() == Kind::Stale => PassOutcome::Stale,
            Err(_) => PassOutcome::Failed,
        };
        state.metrics.pass(outcome, result.as_ref().ok(), elapsed);
        match &result {
            Ok(report) => {
                record.state = "done";
                record.run = report.run.clone();
                record.applied = report.applied;
                record.ops = report.ops.len();
                record.gate = Some(report.gate.reason.clone());
                if outcome == PassOutcome::GateShut {
                    debug!(request = %request.id, reason = %report.gate.reason, "gate shut");
                } else {
                    info!(
                        request = %request.id,
                        run = report.run.as_deref().unwrap_or("-"),
                        outcome = outcome.as_str(),
                        ops = report.ops.len(),
                        failed_facts = report.failed_facts.len(),
                        elapsed_ms = elapsed.as_millis() as u64,
                        "pass finished"
                    );
                }
            }
            Err(e) => {
                record.state = "failed";
                record.error = Some(e.to_string());
                match outcome {
                    PassOutcome::Busy => info!(request = %request.id, error = %e, "pass skipped"),
                    PassOutcome::Stale if tries < STALE_RETRIES => {
                        warn!(request = %request.id, retry_in_secs = STALE_RETRY.as_secs(), "memory.md changed during the pass; nothing written, trying again");
                        let opts = PassOptions { dry_run: false, ..request.opts };
                        retry = Some((tokio::time::Instant::now() + STALE_RETRY, opts, tries + 1));
                    }
                    PassOutcome::Stale => {
                        warn!(request = %request.id, "memory.md keeps changing; waiting for the next tick")
                    }
                    _ => error!(request = %request.id, error = %e, "pass failed"),
                }
            }
        }
        if request.trigger == Trigger::Schedule && matches!(outcome, PassOutcome::GateShut | PassOutcome::Busy) {
            state.forget_record(&request.id); // routine ticks are not worth a record
        } else {
            state.record(record);
        }
        if let Some(reply) = request.reply {
            let _ = reply.send(result);
        }
    }
    Ok(())
}

async fn indexer_worker(state: Arc<Daemon>, mut stop: watch::Receiver<bool>) -> Result<(), String> {
    // A refresh re-reads every file, so under sustained ingest the indexer rests
    // INDEX_REST_FACTOR times as long as its last refresh took: background indexing then
    // uses a bounded share of the CPU, and a search still refreshes first when it must.
    let mut rest = INDEX_DEBOUNCE;
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = state.memory.changed() => {}
        }
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = tokio::time::sleep(rest) => {}
        }
        let started = Instant::now();
        tokio::select! {
            _ = stopped(&mut stop) => break,
            result = state.refresh() => if let Err(e) = result {
                warn!(error = %e, "index refresh failed; trying again on the next change or search");
            }
        }
        rest = (started.elapsed() * INDEX_REST_FACTOR).max(INDEX_DEBOUNCE);
    }
    Ok(())
}

async fn watcher_worker(
    state: Arc<Daemon>,
    mut watcher: Watcher,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    loop {
        let changes = tokio::select! {
            _ = stopped(&mut stop) => break,
            changes = watcher.next() => match changes {
                Some(changes) => changes,
                None => return Err("the file watcher stopped".into()),
            },
        };
        let memory = changes.is_empty() || changes.iter().any(|p| p.ends_with("consolidated/memory.md"));
        debug!(paths = changes.len(), memory, "files changed");
        if memory && let Err(e) = state.memory.reconcile().await {
            warn!(error = %e, "could not record hand edits of memory.md");
        }
        state.memory.files_changed(&changes);
    }
    // Dropping the debouncer joins its thread; keep that off the runtime.
    let _ = tokio::task::spawn_blocking(move || drop(watcher)).await;
    Ok(())
}
