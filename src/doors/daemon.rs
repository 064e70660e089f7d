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
//! finish (for at most [`http::HTTP_DRAIN`]); the scheduler drops a pass in flight, which leaves the
//! files as they were, except that a commit already started runs to its end on its blocking
//! thread, holding the consolidation lock until it is done (`memfold serve` gives blocking
//! tasks up to 10 s when it shuts its runtime down; a commit cut short even so is finished by
//! the next process that opens the root);
//! the indexer and the watcher stop. The workers are joined, each logged by name, then the
//! serve lock is released; a second signal stops waiting for the workers. Logs go to stderr
//! unbuffered, so there is nothing left to flush.

use std::collections::HashMap;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::error::Error;
use crate::memory::Memory;
use crate::service::watch::WatchError;
use crate::sys::lock::LockError;

use super::http;
use crate::service::Service;
use crate::service::token;
use crate::service::workers::{indexer_worker, trimmer_worker, watcher_worker};

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
    let (state, scheduler) = Service::new(memory, true);
    let config = state.config().clone();
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let serve_lock = state.serve_lock()?;
    let requested = bind.parse().ok();
    state.auth(requested)?; // refuse before binding what would not be served
    state.open_index().await.map_err(DaemonError::Index)?;
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let auth = state.auth(Some(addr))?;
    state.announce(Some(addr));
    state.warn_if_exposed();
    let watcher = state.watcher()?;
    let mut signals = Signals::new().map_err(DaemonError::Signal)?;

    let (stop_tx, stop) = watch::channel(false);
    info!(
        %addr,
        root = %state.root_dir().display(),
        auth = auth.token().is_some(),
        decider = state.decider_name(),
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
    state.mark_dirty(); // the first refresh catches up with whatever changed while nobody watched

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
    state.announce(None);
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
