//! The pass scheduler: the only place a daemon runs a consolidation pass, for every space it
//! serves.
//!
//! [`PassQueue`] is a space's side: a request is queued on the daemon's one bounded channel and
//! answered on a oneshot, and every attempt keeps a [`PassRecord`] that the space's status shows
//! under `daemon.passes`. [`SchedulerWorker`] is the worker that runs them, at most
//! `spaces.max_concurrent_passes` at once and never two in one space. With ticks on (the
//! daemon) it also looks at every space's gate every `consolidation.interval_seconds`, the first
//! time at start, and runs a pass in each space whose gate is open, the space whose gate has
//! been open longest first, so a busy space cannot keep the others waiting. A pass refused
//! because `memory.md` changed under it is tried again after [`STALE_RETRY`]; a pass refused
//! because another process holds the consolidation lock is left for the next tick. On shutdown
//! the passes in flight are dropped, which leaves the files as they were (a commit already
//! started runs to its end on its blocking thread).

use memfold_store::sys::guard as lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use memfold_store::sys::clock;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, warn};

use super::Service;
use super::metrics::PassOutcome;
use super::spaces::Spaces;
use super::workers::stopped;
use memfold_core::error::{Error, Kind};
use memfold_core::memory::views::{PassOptions, PassReport};

/// Delay before a pass refused as stale (memory.md changed during it) is tried again.
pub const STALE_RETRY: Duration = Duration::from_secs(5);
/// Stale retries in a row before the scheduler waits for its next tick instead.
const STALE_RETRIES: u32 = 3;
/// Consolidation requests that may wait behind the pass in flight.
const SCHEDULER_QUEUE: usize = 16;
/// Pass records kept for the status.
const PASS_RECORDS: usize = 20;

/// A pass for the scheduler to run, in the space of `service`.
pub struct PassRequest {
    id: String,
    trigger: Trigger,
    opts: PassOptions,
    reply: Option<oneshot::Sender<Result<PassReport, Error>>>,
    service: Arc<Service>,
    /// Stale refusals in a row so far.
    tries: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Trigger {
    /// The interval tick.
    Schedule,
    /// A door asked (`POST /consolidate`, `memory_consolidate`).
    Request,
    /// Again after a stale refusal.
    Retry,
}

/// Where a requested pass is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PassState {
    Queued,
    Running,
    Done,
    Failed,
    /// Dropped at shutdown.
    Abandoned,
}

/// A pass as the status shows it under `daemon.passes`.
#[derive(Debug, Clone, Serialize)]
pub struct PassRecord {
    /// The daemon's id for the attempt (a long request is answered with it).
    pub request: String,
    trigger: Trigger,
    pub force: bool,
    pub dry_run: bool,
    pub state: PassState,
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

impl PassRecord {
    fn queued(request: &PassRequest) -> PassRecord {
        PassRecord {
            request: request.id.clone(),
            trigger: request.trigger,
            force: request.opts.force,
            dry_run: request.opts.dry_run,
            state: PassState::Queued,
            run: None,
            applied: false,
            ops: 0,
            gate: None,
            error: None,
            queued: clock::now(),
            started: None,
            finished: None,
        }
    }
}

/// The daemon's request channel, which every space's [`PassQueue`] sends on.
pub(super) fn channel() -> (mpsc::Sender<PassRequest>, mpsc::Receiver<PassRequest>) {
    mpsc::channel(SCHEDULER_QUEUE)
}

/// A space's side of the scheduler: the daemon's request channel and this space's records.
pub struct PassQueue {
    sender: mpsc::Sender<PassRequest>,
    records: Mutex<VecDeque<PassRecord>>,
    requests: AtomicU64,
}

impl PassQueue {
    pub(super) fn new(sender: mpsc::Sender<PassRequest>) -> PassQueue {
        PassQueue { sender, records: Mutex::new(VecDeque::new()), requests: AtomicU64::new(0) }
    }

    /// Queue a pass of `service`'s space and wait up to `wait` for it: its result, or (still
    /// queued or running) its request id. Refused when the queue is full or the scheduler has
    /// stopped.
    pub(super) async fn request(
        &self,
        service: Arc<Service>,
        opts: PassOptions,
        wait: Duration,
    ) -> Result<Result<Result<PassReport, Error>, String>, Error> {
        let id = self.request_id();
        let (reply, answer) = oneshot::channel();
        let request =
            PassRequest { id: id.clone(), trigger: Trigger::Request, opts, reply: Some(reply), service, tries: 0 };
        self.record(PassRecord::queued(&request));
        if let Err(e) = self.sender.try_send(request) {
            self.forget(&id);
            return Err(match e {
                mpsc::error::TrySendError::Full(_) => Error::QueueFull(SCHEDULER_QUEUE),
                mpsc::error::TrySendError::Closed(_) => Error::ShuttingDown,
            });
        }
        match tokio::time::timeout(wait, answer).await {
            Ok(Ok(result)) => Ok(Ok(result)),
            Ok(Err(_)) => Err(Error::ShuttingDown),
            Err(_) => {
                info!(request = %id, waited_secs = wait.as_secs(), "pass continues in the background");
                Ok(Err(id))
            }
        }
    }

    /// Recent passes, newest first.
    pub(super) fn records(&self) -> Vec<PassRecord> {
        lock(&self.records).iter().rev().cloned().collect()
    }

    fn request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        format!("q-{}-{n}", clock::now().format("%Y%m%dT%H%M%SZ"))
    }

    /// Insert or replace the record with this request id.
    fn record(&self, record: PassRecord) {
        let mut records = lock(&self.records);
        records.retain(|r| r.request != record.request);
        records.push_back(record);
        while records.len() > PASS_RECORDS {
            records.pop_front();
        }
    }

    fn forget(&self, request: &str) {
        lock(&self.records).retain(|r| r.request != request);
    }

    fn queued_at(&self, request: &str) -> Option<DateTime<Utc>> {
        lock(&self.records).iter().find(|r| r.request == request).map(|r| r.queued)
    }
}

/// The worker that runs every space's passes: spawn [`SchedulerWorker::run`].
pub struct SchedulerWorker {
    spaces: Arc<Spaces>,
    requests: mpsc::Receiver<PassRequest>,
    ticks: bool,
}

/// A pass that finished (or was dropped at shutdown).
struct Finished {
    request: PassRequest,
    record: PassRecord,
    result: Result<PassReport, Error>,
    elapsed: Duration,
}

impl SchedulerWorker {
    pub(super) fn new(spaces: Arc<Spaces>, requests: mpsc::Receiver<PassRequest>, ticks: bool) -> SchedulerWorker {
        SchedulerWorker { spaces, requests, ticks }
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
                    for name in self.spaces.sync_due().await {
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
                    for name in self.spaces.due().await {
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
    fn finish(&self, finished: Finished) -> Option<PassRequest> {
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
        self.spaces.passed(service.name());
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
