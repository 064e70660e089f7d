//! The pass scheduler: the only place a daemon runs a consolidation pass, for every space it
//! serves, and the one that decides when (the gates, their order, the syncs due).
//!
//! [`super::passes::PassQueue`] is a space's side: a request is queued on the daemon's one
//! bounded channel and answered on a oneshot, and every attempt keeps a record that the
//! space's status shows under `daemon.passes`. [`SchedulerWorker`] is the worker that runs them, at most
//! `spaces.max_concurrent_passes` at once and never two in one space. With ticks on (the
//! daemon) it also looks at every space's gate every `consolidation.interval_seconds`, the first
//! time at start, and runs a pass in each space whose gate is open, the space whose gate has
//! been open longest first, so a busy space cannot keep the others waiting. A pass refused
//! because `memory.md` changed under it is tried again after [`STALE_RETRY`]; a pass refused
//! because another process holds the consolidation lock is left for the next tick. On shutdown
//! the passes in flight are dropped, which leaves the files as they were (a commit already
//! started runs to its end on its blocking thread).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memfold_store::sys::clock;
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use super::Service;
use super::metrics::PassOutcome;
use super::passes::{PassRecord, PassRequest, PassState, Requests, Trigger};
use super::spaces::Spaces;
use super::workers::stopped;
use memfold_core::error::{Error, Kind};
use memfold_core::memory::views::{PassOptions, PassReport};
use memfold_store::Root;

/// Delay before a pass refused as stale (memory.md changed during it) is tried again.
pub const STALE_RETRY: Duration = Duration::from_secs(5);
/// Stale retries in a row before the scheduler waits for its next tick instead.
const STALE_RETRIES: u32 = 3;
/// The worker that runs every space's passes: spawn [`SchedulerWorker::run`].
pub struct SchedulerWorker {
    spaces: Arc<Spaces>,
    requests: mpsc::Receiver<PassRequest>,
    ticks: bool,
    gates: Gates,
}

/// When each space's gate was first seen open, and when each space last passed: the order in
/// which the scheduler runs the spaces whose gates are open.
#[derive(Default)]
struct Gates {
    opened: HashMap<String, Instant>,
    passed: HashMap<String, Instant>,
}

impl Gates {
    /// `open` (the spaces whose gates a tick at `now` found open) in the order their passes go:
    /// the gate open longest first; among gates seen open at the same tick, the space that
    /// passed least recently (or never) first.
    fn order(&mut self, mut open: Vec<String>, now: Instant) -> Vec<String> {
        self.opened.retain(|name, _| open.contains(name));
        for name in &open {
            self.opened.entry(name.clone()).or_insert(now);
        }
        open.sort_by_key(|name| (self.opened[name], self.passed.get(name).copied()));
        open
    }

    /// A pass of space `name` ended: a gate open after it counts its age from now, so a space
    /// that keeps receiving facts goes behind the spaces that waited.
    fn passed(&mut self, name: &str) {
        self.opened.remove(name);
        self.passed.insert(name.to_string(), Instant::now());
    }
}

/// A pass that finished (or was dropped at shutdown).
struct Finished {
    request: PassRequest,
    record: PassRecord,
    result: Result<PassReport, Error>,
    elapsed: Duration,
}

impl SchedulerWorker {
    pub fn new(spaces: Arc<Spaces>, requests: Requests) -> SchedulerWorker {
        SchedulerWorker { spaces, requests: requests.receiver, ticks: requests.ticks, gates: Gates::default() }
    }

    /// The spaces whose gate is open now, the one whose gate has been open longest first (a
    /// tick). Gates are read from each space's files without opening it.
    async fn due(&mut self) -> Vec<String> {
        let spaces = self.spaces.clone();
        let now = clock::now();
        let open: Vec<String> = memfold_store::sys::blocking(move || {
            spaces
                .names()
                .into_iter()
                .filter(|name| {
                    let gate = spaces.config_of(name).ok().and_then(|config| {
                        memfold_core::memory::status::status(&Root::new(&config.root), &config, now).ok()
                    });
                    spaces.metrics().gate_checked();
                    gate.is_some_and(|status| status.gate.open || status.sweep_due)
                })
                .collect()
        })
        .await;
        self.gates.order(open, Instant::now())
    }

    /// The spaces whose sync with their git remote is due by `[sync] interval_minutes` (read
    /// from each space's files without opening it).
    async fn sync_due(&self) -> Vec<String> {
        let spaces = self.spaces.clone();
        let now = clock::now();
        memfold_store::sys::blocking(move || {
            spaces
                .names()
                .into_iter()
                .filter(|name| {
                    spaces.config_of(name).is_ok_and(|config| {
                        memfold_core::memory::sync_due(&Root::new(&config.root), &config.sync, false, now)
                    })
                })
                .collect()
        })
        .await
    }

    /// Run passes until `stop` says so (or every sender is gone).
    ///
    /// Asked-for passes (a request, a retry) go first, in the order they came. Then the spaces
    /// whose gates the ticks found open, the oldest open gate first; a space is named once in
    /// that list however many ticks see it, and is opened only when its pass starts, so a home
    /// of many due spaces holds no more of them open than run at once.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), String> {
        let config = self.spaces.config();
        let every = Duration::from_secs(config.consolidation.interval_seconds.max(1));
        let most = config.spaces.max_concurrent_passes.max(1);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut waiting: VecDeque<PassRequest> = VecDeque::new();
        let mut due: VecDeque<String> = VecDeque::new();
        let mut retries: Vec<(tokio::time::Instant, PassRequest)> = Vec::new();
        let mut running: tokio::task::JoinSet<Finished> = tokio::task::JoinSet::new();
        let mut busy: Vec<String> = Vec::new();
        loop {
            let retry_at = retries.iter().map(|(at, _)| *at).min();
            tokio::select! {
                biased;
                _ = stopped(&mut stop) => break,
                finished = running.join_next(), if !running.is_empty() => {
                    let Some(Ok(finished)) = finished else { continue };
                    busy.retain(|s| *s != finished.request.service.name());
                    if let Some(retry) = self.finish(finished) {
                        retries.push((tokio::time::Instant::now() + STALE_RETRY, retry));
                    }
                }
                request = self.requests.recv() => match request {
                    Some(request) => waiting.push_back(request),
                    None => break,
                },
                _ = async { tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)).await }, if retry_at.is_some() => {
                    let now = tokio::time::Instant::now();
                    let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut retries).into_iter().partition(|(at, _)| *at <= now);
                    retries = later;
                    waiting.extend(ready.into_iter().map(|(_, request)| request));
                }
                _ = tick.tick(), if self.ticks => {
                    for name in self.sync_due().await {
                        if busy.contains(&name) {
                            continue; // its pass syncs when it has applied something
                        }
                        let spaces = self.spaces.clone();
                        tokio::spawn(async move {
                            match spaces.service(&name, false).await {
                                Ok(service) => service.sync_if_due(false).await,
                                Err(e) => tracing::warn!(space = %name, error = %e, "sync due, but the space cannot be opened"),
                            }
                        });
                    }
                    for name in self.due().await {
                        if !due.contains(&name) && !busy.contains(&name) {
                            due.push_back(name);
                        }
                    }
                }
            }
            // Start what may start: at most `most` at once, never two in one space.
            let mut held = VecDeque::new();
            while let Some(request) = waiting.pop_front() {
                let space = request.service.name().to_string();
                if running.len() >= most || busy.contains(&space) {
                    held.push_back(request);
                    continue;
                }
                busy.push(space);
                running.spawn(run_one(request));
            }
            waiting = held;
            while running.len() < most {
                let Some(at) = due.iter().position(|name| !busy.contains(name)) else { break };
                let name = due.remove(at).expect("a position in the list");
                let service = match self.spaces.service(&name, false).await {
                    Ok(service) => service,
                    Err(e) => {
                        tracing::warn!(space = %name, error = %e, "gate open, but the space cannot be opened");
                        continue;
                    }
                };
                let queue = service.passes();
                let request = PassRequest {
                    id: queue.request_id(),
                    trigger: Trigger::Schedule,
                    opts: PassOptions::default(),
                    reply: None,
                    service,
                    tries: 0,
                };
                busy.push(name);
                running.spawn(run_one(request));
            }
        }
        // Shutdown: the passes in flight are dropped (see the module docs).
        running.abort_all();
        for request in waiting.into_iter().chain(retries.into_iter().map(|(_, r)| r)) {
            request.service.passes().forget(&request.id);
        }
        // Each abandoned pass logs itself as its task drops (see [`Abandoned`]).
        running.shutdown().await;
        Ok(())
    }

    /// Record a finished pass, count it, answer its requester. Returns the request to try
    /// again after [`STALE_RETRY`] when `memory.md` changed under it (a few times in a row).
    fn finish(&mut self, finished: Finished) -> Option<PassRequest> {
        let Finished { request, mut record, result, elapsed } = finished;
        let service = request.service.clone();
        let queue = service.passes();
        let outcome = match &result {
            Ok(report) if !report.gate.open => PassOutcome::GateShut,
            Ok(report) if report.dry_run => PassOutcome::DryRun,
            Ok(report) if report.applied => PassOutcome::Applied,
            Ok(_) => PassOutcome::Unchanged,
            Err(e) if e.kind() == Kind::Busy => PassOutcome::Busy,
            Err(e) if e.kind() == Kind::Stale => PassOutcome::Stale,
            Err(_) => PassOutcome::Failed,
        };
        service.metrics().pass(outcome, result.as_ref().ok(), elapsed);
        self.gates.passed(service.name());
        let mut retry = None;
        let space = service.name();
        match &result {
            Ok(report) => {
                record.state = PassState::Done;
                record.run = report.run.clone();
                record.applied = report.applied;
                record.ops = report.ops.len();
                record.gate = Some(report.gate.reason.clone());
                if outcome == PassOutcome::GateShut {
                    debug!(space, request = %request.id, reason = %report.gate.reason, "gate shut");
                } else {
                    info!(
                        space,
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
                record.state = PassState::Failed;
                record.error = Some(e.to_string());
                match outcome {
                    PassOutcome::Busy => info!(space, request = %request.id, error = %e, "pass skipped"),
                    PassOutcome::Stale if request.tries < STALE_RETRIES => {
                        warn!(space, request = %request.id, retry_in_secs = STALE_RETRY.as_secs(), "memory.md changed during the pass; nothing written, trying again");
                        retry = Some(PassRequest {
                            id: queue.request_id(),
                            trigger: Trigger::Retry,
                            opts: PassOptions { dry_run: false, ..request.opts },
                            reply: None,
                            service: service.clone(),
                            tries: request.tries + 1,
                        });
                    }
                    PassOutcome::Stale => {
                        warn!(space, request = %request.id, "memory.md keeps changing; waiting for the next tick")
                    }
                    _ => error!(space, request = %request.id, error = %e, "pass failed"),
                }
            }
        }
        if request.trigger == Trigger::Schedule && matches!(outcome, PassOutcome::GateShut | PassOutcome::Busy) {
            queue.forget(&request.id); // routine ticks are not worth a record
        } else {
            queue.record(record);
        }
        if let Some(reply) = request.reply {
            let _ = reply.send(result);
        }
        retry
    }
}

/// Run one pass: mark it running, run it as the space's one change at a time.
async fn run_one(request: PassRequest) -> Finished {
    let service = request.service.clone();
    let queue = service.passes();
    let mut record = PassRecord::queued(&request);
    if request.trigger == Trigger::Request {
        record.queued = queue.queued_at(&request.id).unwrap_or(record.queued);
    }
    record.state = PassState::Running;
    record.started = Some(clock::now());
    queue.record(record.clone());
    let started = Instant::now();
    let guard = Abandoned { service: service.clone(), record: Some(record.clone()), started };
    let result = service.run_pass(request.opts).await;
    if request.trigger == Trigger::Schedule {
        service.sweep_if_due().await;
    }
    if result.as_ref().is_ok_and(|report| report.applied) {
        service.sync_if_due(true).await;
    }
    drop(guard.disarm());
    let elapsed = started.elapsed();
    record.finished = Some(clock::now());
    Finished { request, record, result, elapsed }
}

/// Records a pass dropped before it finished (the daemon shutting down) as abandoned.
struct Abandoned {
    service: Arc<Service>,
    record: Option<PassRecord>,
    started: Instant,
}

impl Abandoned {
    fn disarm(mut self) -> Self {
        self.record = None;
        self
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            self.service.metrics().pass(PassOutcome::Abandoned, None, self.started.elapsed());
            info!(
                space = self.service.name(),
                request = %record.request,
                "shutdown: pass abandoned; the files are as they were (or as its atomic write left them, if it had started)"
            );
            record.state = PassState::Abandoned;
            record.finished = Some(clock::now());
            self.service.passes().record(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gates_open_longest_go_first_and_ties_go_to_the_space_that_waited_since_its_last_pass() {
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let mut gates = Gates::default();
        assert_eq!(gates.order(names(&["a", "b", "c"]), at(0)), names(&["a", "b", "c"]));
        // a passed; its gate opens again at the same tick as new ones: the others first.
        gates.passed.insert("a".into(), at(1));
        gates.opened.remove("a");
        assert_eq!(gates.order(names(&["a", "b", "c", "d"]), at(2)), names(&["b", "c", "d", "a"]));
        // c's and d's gates shut (their passes ran) and opened again later than a's: a first.
        gates.passed.insert("c".into(), at(3));
        gates.passed.insert("d".into(), at(3));
        assert_eq!(gates.order(names(&["a", "b"]), at(4)), names(&["b", "a"]));
        assert_eq!(gates.order(names(&["a", "b", "c", "d"]), at(5)), names(&["b", "a", "c", "d"]));
    }
}
