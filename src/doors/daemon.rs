//! The daemon (`memfold serve`): the spaces it serves (a lone root, or every space of a home)
//! behind its doors, the service's workers ([`Runtime`]) stopped by one shutdown signal.
//!
//! [`serve_root`] and [`serve_home`] take the serve lock (`.memfold/serve.lock` of the root or
//! the home, so a second daemon exits with a message naming the first), read the tokens, bind
//! the listener, start the [`Runtime`] (scheduler, watcher, trimmer) and add the HTTP door to
//! it, all over one [`Spaces`]:
//!
//! - `http`: the HTTP server ([`http`]): the JSON API, the MCP server at `/mcp`, the review
//!   page at `/ui`. Handlers are thin: they parse, call the space's service and render.
//! - `scheduler`: the only place consolidation passes run ([`crate::service::scheduler`]).
//! - `watcher`: one file watcher for every open space: its events → tombstone entries deleted
//!   from `memory.md` by hand → mark the space's index dirty and tell subscribers of
//!   `memory.md` and `MEMORY.md` (the MCP server's `resources/updated`).
//! - `trimmer`: once the daemon has done nothing for [`crate::service::workers::TRIM_QUIET`] after doing something, hands
//!   the memory its allocator holds free back to the system.
//!
//! Each open space also has an indexer, which [`Spaces`] starts when it opens the space and
//! stops when it closes it: it brings the space's index up to date with its files whenever
//! ingest or the watcher marks it dirty (a search refreshes first if it is still dirty), and at
//! open and after `server.settle_idle_secs` without a change settles it.
//!
//! `memfold mcp` ([`crate::doors::mcp::serve_stdio`]) serves one space's MCP tools on
//! stdin/stdout over the same [`Runtime`], whose scheduler there runs only the passes asked for.
//!
//! **Shutdown.** SIGINT and SIGTERM (or a worker ending on its own) send `true` on one watch
//! channel. Every worker selects on it: the server stops accepting and lets open requests
//! finish (for at most [`http::HTTP_DRAIN`]); the scheduler drops the passes in flight, which
//! leaves the files as they were, except that a commit already started runs to its end on its
//! blocking thread, holding the consolidation lock until it is done (`memfold serve` gives
//! blocking tasks up to 10 s when it shuts its runtime down; a commit cut short even so is
//! finished by the next process that opens the root); the watcher stops. The workers are
//! joined, each logged by name, the spaces close (their indexers joined), then the serve lock
//! is released; a second signal stops waiting for the workers. Logs go to stderr unbuffered, so
//! there is nothing left to flush.

use std::sync::Arc;

use tracing::{error, info, warn};

use super::http;
use crate::service::token;
use crate::service::watch::WatchError;
use crate::service::workers::Runtime;
use crate::service::{Requests, Spaces};
use memfold_core::error::Error;
use memfold_core::memory::Memory;
use memfold_store::config::Config;
use memfold_store::sys::lock::LockError;

/// Errors that stop `memfold serve` (at start, or a worker failing).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("opening the index: {0}")]
    Index(Error),
    #[error(transparent)]
    Home(Error),
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

/// Serve the root `memory` is open on until SIGINT or SIGTERM. `bind` overrides `server.bind`.
pub async fn serve_root(memory: Memory, bind: Option<String>) -> Result<(), DaemonError> {
    let (spaces, requests) = Spaces::root(memory, true);
    let service = spaces.open_service("").expect("a root's one space is open");
    run(spaces, requests, bind, Some(service)).await
}

/// Serve every space of the home `config` names (its home's configuration).
pub async fn serve_home(config: Config, bind: Option<String>) -> Result<(), DaemonError> {
    let (spaces, requests) = Spaces::home(config).map_err(DaemonError::Home)?;
    run(spaces, requests, bind, None).await
}

/// Run the daemon over `spaces` until SIGINT or SIGTERM, then shut down gracefully. A lone
/// root's index (`root`) is opened, caught up, settled and its rows read into memory before the
/// listener, so its first search is answered as fast as any.
async fn run(
    spaces: Arc<Spaces>,
    requests: Requests,
    bind: Option<String>,
    root: Option<Arc<crate::service::Service>>,
) -> Result<(), DaemonError> {
    let config = spaces.config().clone();
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let serve_lock = spaces.serve_lock()?;
    spaces.keys().load(bind.parse().ok())?; // refuse before binding what would not be served
    if let Some(root) = &root {
        root.warm_up().await.map_err(DaemonError::Index)?;
    }
    let open_files = memfold_store::sys::limits::raise_open_files();
    let listener = tokio::net::TcpListener::bind(&bind)
        .await
        .map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind { addr: bind.clone(), source })?;
    spaces.keys().load(Some(addr))?;
    spaces.announce(Some(addr));
    spaces.warn_if_exposed();
    let mut signals = Signals::new().map_err(DaemonError::Signal)?;
    let mut runtime = Runtime::start(spaces.clone(), requests)?;

    let max_connections = memfold_store::sys::limits::connections(config.server.max_connections, open_files);
    info!(
        %addr,
        dir = %spaces.dir().display(),
        home = spaces.is_home(),
        auth = spaces.keys().needs_token(),
        max_connections,
        interval_secs = config.consolidation.interval_seconds,
        "memfold serving"
    );
    let http = http::Listener { listener, addr, max_connections };
    runtime.spawn("http", http::serve(spaces.clone(), http, runtime.stop_signal()));

    let mut failure = None;
    tokio::select! {
        signal = signals.recv() => info!(signal, "shutting down"),
        (name, result) = runtime.next_ended() => {
            let message = match result {
                Ok(()) => "stopped on its own".to_string(),
                Err(message) => message,
            };
            error!(worker = name, error = %message, "worker ended; shutting down");
            failure = Some(DaemonError::Worker { name, message });
        }
    }
    runtime
        .shutdown(async {
            let signal = signals.recv().await;
            warn!(signal, "second signal: not waiting for the workers");
        })
        .await;
    spaces.announce(None);
    spaces.close_all().await;
    drop(root);
    drop(spaces);
    drop(serve_lock);
    info!("memfold stopped");
    failure.map_or(Ok(()), Err)
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
