//! The service's background workers: an indexer per open space, the watcher and the trimmer,
//! and the one shutdown signal every worker selects on. [`Runtime`] starts the scheduler, the
//! watcher and the trimmer over a daemon's spaces, for `memfold serve` (which adds its HTTP
//! door) and `memfold mcp` alike, and stops them together; [`Spaces`] spawns a space's indexer
//! when it opens the space, and stops it when it closes it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, warn};

use super::Spaces;
use super::metrics::Metrics;
use super::passes::Requests;
use super::scheduler::SchedulerWorker;
use super::watch::{WATCH_DEBOUNCE, WatchError, Watcher};
use memfold_core::memory::Memory;
use memfold_store::sys::alloc::release_free_memory;

/// Quiet time the indexer waits after being told the files changed, so bursts are one refresh.
const INDEX_DEBOUNCE: Duration = Duration::from_millis(100);
/// The indexer rests this many times as long as its last refresh took before the next one.
const INDEX_REST_FACTOR: u32 = 3;

/// Resolves once shutdown has been signalled.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Keep one space's index up to date with its files: `memory` is the space's, `metrics` the
/// daemon's counters. Runs until `stop` says so or its sender is gone (the space closed).
pub async fn indexer_worker((memory, metrics): (Memory, Arc<Metrics>), mut stop: watch::Receiver<bool>) {
    let refresh = || async {
        let result = memory.refresh().await;
        metrics.refreshed(result.is_ok());
        result
    };
    // Nothing to settle when it was settled since the last write (by the warm-up before the
    // daemon listened); that is not counted.
    let settle = || async {
        let result = memory.settle_if_unsettled().await;
        if !matches!(result, Ok(None)) {
            metrics.settled(result.is_ok());
        }
        result
    };
    // A refresh re-reads every file, so under sustained ingest the indexer rests
    // INDEX_REST_FACTOR times as long as its last refresh took: background indexing then
    // uses a bounded share of the CPU, and a search still refreshes first when it must.
    // At start, and once the files have been quiet for `server.settle_idle_secs` after a
    // change, it folds the rows small writes left outside the indices back in (`settle`), so
    // search cost does not carry a day's writes into the next.
    let idle = Duration::from_secs(memory.config().server.settle_idle_secs);
    let mut rest = INDEX_DEBOUNCE;
    // When rows were last written, while the index is not settled since; None: settle now
    // (at start) or nothing to settle.
    let mut unsettled: Option<Instant> = None;
    let mut settled = false;
    let mut writes = memory.index_writes();
    loop {
        let due = unsettled.map_or(!settled, |quiet_since| quiet_since.elapsed() >= idle);
        if due {
            tokio::select! {
                _ = stopped(&mut stop) => break,
                result = settle() => match result {
                    Ok(done) => debug!(?done, "index settled"),
                    Err(e) => warn!(error = %e, "could not settle the index; trying again after the next change"),
                },
            }
            (unsettled, settled, writes) = (None, true, memory.index_writes());
        }
        let wait = unsettled.map_or(Duration::MAX, |quiet_since| idle.saturating_sub(quiet_since.elapsed()));
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = memory.changed() => {}
            _ = tokio::time::sleep(wait) => continue,
        }
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = tokio::time::sleep(rest) => {}
        }
        let started = Instant::now();
        tokio::select! {
            _ = stopped(&mut stop) => break,
            result = refresh() => if let Err(e) = result {
                warn!(error = %e, "index refresh failed; trying again on the next change or search");
            }
        }
        rest = (started.elapsed() * INDEX_REST_FACTOR).max(INDEX_DEBOUNCE);
        // Rows written by this refresh or by a search's, which may have come first.
        let now = memory.index_writes();
        if now != writes {
            (writes, unsettled) = (now, Some(Instant::now()));
        }
    }
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

pub async fn trimmer_worker(state: Arc<Spaces>, mut stop: watch::Receiver<bool>) -> Result<(), String> {
    // Not trimmed yet: start-up (opening and settling the index) is activity too.
    let mut quiet = Quiet { seen: state.activity(), trimmed: false };
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            _ = tokio::time::sleep(TRIM_QUIET) => {}
        }
        // Spaces unused for long close, and what they held is handed back with the rest.
        if state.close_idle() > 0 {
            quiet.trimmed = false;
        }
        if quiet.tick(state.activity()) {
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
    Ok(())
}

pub async fn watcher_worker(
    spaces: Arc<Spaces>,
    mut watcher: Watcher,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    loop {
        let batches = tokio::select! {
            _ = stopped(&mut stop) => break,
            batches = watcher.next_batches() => match batches {
                Some(batches) => batches,
                None => return Err("the file watcher stopped".into()),
            },
        };
        for batch in batches {
            // A space closed meanwhile catches up when it opens again.
            let Some(service) = spaces.open_service(&batch.key) else { continue };
            debug!(space = %batch.key, paths = batch.changes.len(), events = watcher.events_seen(), "files changed");
            service.files_changed(&batch.changes).await;
        }
    }
    // Dropping the debouncer joins its thread; keep that off the runtime.
    let _ = tokio::task::spawn_blocking(move || drop(watcher)).await;
    Ok(())
}

/// The workers that serve a set of spaces, under one shutdown signal: the scheduler (the only
/// place a pass runs), the file watcher (changes by other processes reach the indexes) and the
/// trimmer (idle spaces closed, freed memory handed back), with any a door adds (the daemon's
/// HTTP listener). Started by the daemon and by `memfold mcp` alike.
pub struct Runtime {
    set: tokio::task::JoinSet<Result<(), String>>,
    names: HashMap<tokio::task::Id, &'static str>,
    stop_tx: watch::Sender<bool>,
}

impl Runtime {
    /// Start the scheduler (on the `requests` of `spaces`), the watcher and the trimmer.
    pub fn start(spaces: Arc<Spaces>, requests: Requests) -> Result<Runtime, WatchError> {
        let scheduler = SchedulerWorker::new(spaces.clone(), requests);
        let watcher = Watcher::new(WATCH_DEBOUNCE)?;
        spaces.watch_with(watcher.handle())?;
        let (stop_tx, stop) = watch::channel(false);
        let mut runtime = Runtime { set: tokio::task::JoinSet::new(), names: HashMap::new(), stop_tx };
        runtime.spawn("scheduler", scheduler.run(stop.clone()));
        runtime.spawn("watcher", watcher_worker(spaces.clone(), watcher, stop.clone()));
        runtime.spawn("trimmer", trimmer_worker(spaces, stop));
        Ok(runtime)
    }

    /// The shutdown signal a worker a door adds selects on.
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop_tx.subscribe()
    }

    /// Run `work` beside the others, named `name` in the logs.
    pub fn spawn(&mut self, name: &'static str, work: impl Future<Output = Result<(), String>> + Send + 'static) {
        let handle = self.set.spawn(work);
        self.names.insert(handle.id(), name);
    }

    /// The next worker to end, by name, and how; pending forever when none is left.
    pub async fn next_ended(&mut self) -> (&'static str, Result<(), String>) {
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

    /// Signal shutdown and wait for every worker (a pass in flight is dropped; a commit already
    /// started finishes on its blocking thread). `hurry`, when it resolves first, aborts those
    /// still running (a second signal).
    pub async fn shutdown(mut self, hurry: impl Future<Output = ()>) {
        let _ = self.stop_tx.send(true);
        let mut hurry = std::pin::pin!(hurry);
        let mut waiting = true;
        while !self.set.is_empty() {
            tokio::select! {
                (name, result) = self.next_ended() => match result {
                    Ok(()) => tracing::info!(worker = name, "worker stopped"),
                    Err(message) => warn!(worker = name, error = %message, "worker stopped with an error"),
                },
                () = &mut hurry, if waiting => {
                    warn!("not waiting for the workers");
                    waiting = false;
                    self.set.abort_all();
                }
            }
        }
    }
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
