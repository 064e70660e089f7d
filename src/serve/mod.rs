//! The daemon (`memfold serve`): one [`Service`] behind its doors, named workers in a `JoinSet`,
//! stopped by one shutdown signal.
//!
//! [`serve`] takes the serve lock (`.memfold/serve.lock`, so a second daemon on the same root
//! exits with a message naming the first), opens the index, binds the listener, starts
//! watching the root, then runs four workers over one [`Service`]:
//!
//! - `http`: the HTTP server ([`http`]): the JSON API, the MCP server at `/mcp` ([`mcp`]).
//!   Handlers are thin: they parse, call the service and render.
//! - `scheduler`: the only place a consolidation pass runs, one at a time ([`scheduler`]).
//! - `indexer`: brings the index up to date with the files ([`Service::refresh`], by content
//!   hash) whenever ingest or the watcher marks it dirty; a search refreshes first if it is
//!   still dirty, so facts are searchable as soon as `POST /facts` has answered. At start and
//!   after `server.settle_idle_secs` without a change it settles the index
//!   ([`Service::settle`]): rows small writes left outside the indices are folded in.
//! - `watcher`: [`Watcher`] events → tombstone entries deleted from `memory.md` by hand
//!   (`Memory::reconcile`) → mark the index dirty and tell subscribers of `memory.md` and
//!   `MEMORY.md` (`Memory::files_changed`; the MCP server's `resources/updated`).
//! - `trimmer`: once the daemon has done nothing for [`TRIM_QUIET`] after doing something, hands
//!   the memory its allocator holds free back to the system ([`release_free_memory`]). glibc
//!   keeps what searches and index writes freed (at 100k entries, about 190 MiB after 300
//!   searches); an idle daemon then holds what it uses.
//!
//! `memfold mcp` ([`serve_stdio`]) serves the same service's MCP tools on stdin/stdout, with a
//! scheduler that runs only the passes asked for and a watcher of its own.
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

mod guard;
pub mod http;
mod listen;
mod mcp;
mod metrics;
mod scheduler;
mod service;
pub mod token;
pub mod ui;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::alloc::release_free_memory;
use crate::error::Error;
use crate::files::Root;
use crate::lock::{LockError, LockGuard};
use crate::memory::Memory;
use crate::watch::{WatchError, Watcher};

pub use guard::check_allowed_host;
pub use mcp::{McpServeError, serve_stdio};
pub use scheduler::{PassRecord, STALE_RETRY};
pub use service::{DaemonStatus, Door, EntryView, PassAnswer, PassRunning, Pinned, Service, ServiceStatus};

/// How long open requests may take to finish after shutdown starts.
pub const HTTP_DRAIN: Duration = Duration::from_secs(10);
/// Quiet time the indexer waits after being told the files changed, so bursts are one refresh.
const INDEX_DEBOUNCE: Duration = Duration::from_millis(100);
/// The indexer rests this many times as long as its last refresh took before the next one.
const INDEX_REST_FACTOR: u32 = 3;
/// Debounce of the file watcher.
pub(crate) const WATCH_DEBOUNCE: Duration = Duration::from_millis(250);

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
    #[error(transparent)]
    Token(#[from] token::TokenError),
    #[error("installing signal handlers: {0}")]
    Signal(std::io::Error),
    #[error("worker {name} failed: {message}")]
    Worker { name: &'static str, message: String },
}

/// Run the daemon on `memory` until SIGINT or SIGTERM, then shut down gracefully. `bind`
/// overrides `server.bind`.
pub async fn serve(memory: Memory, bind: Option<String>) -> Result<(), DaemonError> {
    let root = memory.root().clone();
    let config = memory.config().clone();
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let serve_lock = LockGuard::try_acquire(&root.serve_lock(), "memfold serve")?;
    let requested = bind.parse().ok();
    token::resolve(&config, &root, requested)?; // refuse before binding what would not be served
    memory.index().await.map_err(DaemonError::Index)?;
    memory.hold_vectors();
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let auth = token::resolve(&config, &root, Some(addr))?;
    let exposed = crate::files::access::exposed(root.dir());
    if !exposed.is_empty() {
        let files: Vec<String> = exposed.iter().map(|e| format!("{} ({:o})", e.path, e.mode)).collect();
        warn!(
            files = %files.join(", "),
            fix = %crate::files::access::fix_for(root.dir()),
            "other accounts on this machine can read or change these memory files"
        );
    }
    // notify reports canonical paths; the watcher must compare them with a canonical root.
    let canonical = root
        .dir()
        .canonicalize()
        .map_err(|source| DaemonError::Root { path: root.dir().display().to_string(), source })?;
    let watcher = Watcher::start(&Root::new(canonical), WATCH_DEBOUNCE)?;
    let mut signals = Signals::new().map_err(DaemonError::Signal)?;

    let (stop_tx, stop) = watch::channel(false);
    let (state, scheduler) = Service::new(memory, true);
    info!(
        %addr,
        root = %root.dir().display(),
        auth = auth.token().is_some(),
        decider = state.memory().decider_name(),
        interval_secs = config.consolidation.interval_seconds,
        "memfold serving"
    );

    let mut workers = Workers::default();
    let http = http::Listener { listener, addr, token: auth.token().map(str::to_string) };
    workers.spawn("http", http::serve(state.clone(), http, stop.clone()));
    workers.spawn("scheduler", scheduler.run(stop.clone()));
    workers.spawn("indexer", indexer_worker(state.clone(), stop.clone()));
    workers.spawn("watcher", watcher_worker(state.clone(), watcher, stop.clone()));
    workers.spawn("trimmer", trimmer_worker(state.clone(), stop.clone()));
    state.memory().mark_dirty(); // the first refresh catches up with whatever changed while nobody watched

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

async fn indexer_worker(state: Arc<Service>, mut stop: watch::Receiver<bool>) -> Result<(), String> {
    // A refresh re-reads every file, so under sustained ingest the indexer rests
    // INDEX_REST_FACTOR times as long as its last refresh took: background indexing then
    // uses a bounded share of the CPU, and a search still refreshes first when it must.
    // At start, and once the files have been quiet for `server.settle_idle_secs` after a
    // change, it folds the rows small writes left outside the indices back in (`settle`), so
    // search cost does not carry a day's writes into the next.
    let idle = Duration::from_secs(state.memory().config().server.settle_idle_secs);
    let mut rest = INDEX_DEBOUNCE;
    // When rows were last written, while the index is not settled since; None: settle now
    // (at start) or nothing to settle.
    let mut unsettled: Option<Instant> = None;
    let mut settled = false;
    let mut writes = state.memory().index_writes();
    loop {
        let due = unsettled.map_or(!settled, |quiet_since| quiet_since.elapsed() >= idle);
        if due {
            tokio::select! {
                _ = stopped(&mut stop) => break,
                result = state.settle() => match result {
                    Ok(done) => debug!(?done, "index settled"),
                    Err(e) => warn!(error = %e, "could not settle the index; trying again after the next change"),
                },
            }
            (unsettled, settled, writes) = (None, true, state.memory().index_writes());
        }
        let wait = unsettled.map_or(Duration::MAX, |quiet_since| idle.saturating_sub(quiet_since.elapsed()));
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = state.memory().changed() => {}
            _ = tokio::time::sleep(wait) => continue,
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
        // Rows written by this refresh or by a search's, which may have come first.
        let now = state.memory().index_writes();
        if now != writes {
            (writes, unsettled) = (now, Some(Instant::now()));
        }
    }
    Ok(())
}

/// How long the daemon must have done nothing before the trimmer runs.
pub const TRIM_QUIET: Duration = Duration::from_secs(5);

/// When to hand freed memory back: at the first quiet tick after any activity, once.
#[derive(Debug, Default)]
struct Quiet {
    seen: u64,
    trimmed: bool,
}

impl Quiet {
    /// Told the activity count at each tick; true when the daemon has just become quiet.
    fn tick(&mut self, activity: u64) -> bool {
        if activity != self.seen {
            (self.seen, self.trimmed) = (activity, false);
            return false;
        }
        !std::mem::replace(&mut self.trimmed, true)
    }
}

async fn trimmer_worker(state: Arc<Service>, mut stop: watch::Receiver<bool>) -> Result<(), String> {
    // Not trimmed yet: start-up (opening and settling the index) is activity too.
    let mut quiet = Quiet { seen: state.activity(), trimmed: false };
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = tokio::time::sleep(TRIM_QUIET) => {}
        }
        if quiet.tick(state.activity()) {
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
    Ok(())
}

async fn watcher_worker(
    state: Arc<Service>,
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
        debug!(paths = changes.len(), memory, events = watcher.events_seen(), "files changed");
        if memory && let Err(e) = state.memory().reconcile().await {
            warn!(error = %e, "could not record hand edits of memory.md");
        }
        state.memory().files_changed(&changes);
    }
    // Dropping the debouncer joins its thread; keep that off the runtime.
    let _ = tokio::task::spawn_blocking(move || drop(watcher)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trimmer_runs_once_per_quiet_spell() {
        let mut quiet = Quiet { seen: 0, trimmed: false };
        assert!(quiet.tick(0), "quiet since start-up");
        assert!(!quiet.tick(0), "once");
        assert!(!quiet.tick(3), "busy");
        assert!(!quiet.tick(7), "still busy");
        assert!(quiet.tick(7), "quiet again");
        assert!(!quiet.tick(7));
    }
}
