//! The pass scheduler: the only place the daemon runs a consolidation pass, one at a time.
//!
//! [`PassQueue`] is the service's side: a request is queued on a bounded channel and answered on
//! a oneshot, and every attempt keeps a [`PassRecord`] that the status shows under
//! `daemon.passes`. [`SchedulerWorker`] is the worker that runs them. With ticks on (the daemon)
//! it also checks the gate every `consolidation.interval_seconds`, the first check at start. A
//! pass refused because `memory.md` changed under it is tried again after [`STALE_RETRY`]; a
//! pass refused because another process holds the consolidation lock is left for the next
//! tick. On shutdown a pass in flight is dropped, which leaves the files as they were (a commit
//! already started runs to its end on its blocking thread).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, warn};

use super::Service;
use super::metrics::PassOutcome;
use super::workers::stopped;
use crate::error::{Error, Kind};
use crate::memory::views::{PassOptions, PassReport};

/// Delay before a pass refused as stale (memory.md changed during it) is tried again.
pub const STALE_RETRY: Duration = Duration::from_secs(5);
/// Stale retries in a row before the scheduler waits for its next tick instead.
const STALE_RETRIES: u32 = 3;
/// Consolidation requests that may wait behind the pass in flight.
const SCHEDULER_QUEUE: usize = 16;
/// Pass records kept for the status.
const PASS_RECORDS: usize = 20;

/// A pass for the scheduler to run.
pub struct PassRequest {
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
            queued: Utc::now(),
            started: None,
            finished: None,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The service's side of the scheduler: the request channel and the records.
pub struct PassQueue {
    sender: mpsc::Sender<PassRequest>,
    records: Mutex<VecDeque<PassRecord>>,
    requests: AtomicU64,
}

impl PassQueue {
    /// The queue, and the receiving end for the worker.
    pub(super) fn new() -> (PassQueue, mpsc::Receiver<PassRequest>) {
        let (sender, receiver) = mpsc::channel(SCHEDULER_QUEUE);
        (PassQueue { sender, records: Mutex::new(VecDeque::new()), requests: AtomicU64::new(0) }, receiver)
    }

    /// Queue a pass and wait up to `wait` for it: its result, or (still queued or running) its
    /// request id. Refused when the queue is full or the scheduler has stopped.
    pub(super) async fn request(
        &self,
        opts: PassOptions,
        wait: Duration,
    ) -> Result<Result<Result<PassReport, Error>, String>, Error> {
        let id = self.request_id();
        let (reply, answer) = oneshot::channel();
        let request = PassRequest { id: id.clone(), trigger: Trigger::Request, opts, reply: Some(reply) };
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
        format!("q-{}-{n}", Utc::now().format("%Y%m%dT%H%M%SZ"))
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

/// The worker that runs the service's passes: spawn [`SchedulerWorker::run`].
pub struct SchedulerWorker {
    service: Arc<Service>,
    requests: mpsc::Receiver<PassRequest>,
    ticks: bool,
}

impl SchedulerWorker {
    pub(super) fn new(service: Arc<Service>, requests: mpsc::Receiver<PassRequest>, ticks: bool) -> SchedulerWorker {
        SchedulerWorker { service, requests, ticks }
    }

    /// Run passes until `stop` says so (or every sender is gone).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), String> {
        let state = self.service.clone();
        let queue = state.passes();
        let every = Duration::from_secs(state.memory().config().consolidation.interval_seconds.max(1));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // (when, options, retries so far) of a pass to try again after a stale refusal.
        let mut retry: Option<(tokio::time::Instant, PassOptions, u32)> = None;
        loop {
            let retry_at = retry.map(|(at, _, _)| at);
            let request = tokio::select! {
                biased;
                _ = stopped(&mut stop) => break,
                request = self.requests.recv() => match request {
                    Some(request) => request,
                    None => break,
                },
                _ = async { tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)).await }, if retry_at.is_some() => {
                    let (_, opts, _) = retry.expect("guarded by the branch condition");
                    PassRequest { id: queue.request_id(), trigger: Trigger::Retry, opts, reply: None }
                }
                _ = tick.tick(), if self.ticks => PassRequest {
                    id: queue.request_id(),
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
                record.queued = queue.queued_at(&request.id).unwrap_or(record.queued);
            }
            record.state = PassState::Running;
            record.started = Some(Utc::now());
            queue.record(record.clone());
            let started = Instant::now();
            let result = tokio::select! {
                result = state.one_at_a_time(state.memory().consolidate(request.opts)) => result,
                _ = stopped(&mut stop) => {
                    info!(request = %request.id, "shutdown: pass abandoned; the files are as they were (or as its atomic write left them, if it had started)");
                    state.metrics().pass(PassOutcome::Abandoned, None, started.elapsed());
                    record.state = PassState::Abandoned;
                    record.finished = Some(Utc::now());
                    queue.record(record);
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
            state.metrics().pass(outcome, result.as_ref().ok(), elapsed);
            match &result {
                Ok(report) => {
                    record.state = PassState::Done;
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
                    record.state = PassState::Failed;
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
                queue.forget(&request.id); // routine ticks are not worth a record
            } else {
                queue.record(record);
            }
            if let Some(reply) = request.reply {
                let _ = reply.send(result);
            }
        }
        Ok(())
    }
}
