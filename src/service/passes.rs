//! A space's side of the pass scheduler ([`super::scheduler`]): a request is queued on the
//! daemon's one bounded channel and answered on a oneshot, and every attempt keeps a
//! [`PassRecord`] that the space's status shows under `daemon.passes`.

use memfold_store::sys::guard as lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use memfold_store::sys::clock;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tracing::info;

use super::Service;
use memfold_core::error::Error;
use memfold_core::memory::views::{PassOptions, PassReport};

/// Consolidation requests that may wait behind the pass in flight.
const SCHEDULER_QUEUE: usize = 16;
/// Pass records kept for the status.
const PASS_RECORDS: usize = 20;

/// A pass for the scheduler to run, in the space of `service`.
pub struct PassRequest {
    pub(super) id: String,
    pub(super) trigger: Trigger,
    pub(super) opts: PassOptions,
    pub(super) reply: Option<oneshot::Sender<Result<PassReport, Error>>>,
    pub(super) service: Arc<Service>,
    /// Stale refusals in a row so far.
    pub(super) tries: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Trigger {
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
    pub(super) fn queued(request: &PassRequest) -> PassRecord {
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

/// The daemon's request channel: every space's [`PassQueue`] sends on it, the scheduler
/// receives the [`Requests`].
pub(super) fn channel(ticks: bool) -> (mpsc::Sender<PassRequest>, Requests) {
    let (sender, receiver) = mpsc::channel(SCHEDULER_QUEUE);
    (sender, Requests { receiver, ticks })
}

/// The requests the scheduler receives, and whether it also runs the passes whose gates open
/// on its interval (a daemon) or only those asked for (`memfold mcp`).
pub struct Requests {
    pub(super) receiver: mpsc::Receiver<PassRequest>,
    pub(super) ticks: bool,
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

    pub(super) fn request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        format!("q-{}-{n}", clock::now().format("%Y%m%dT%H%M%SZ"))
    }

    /// Insert or replace the record with this request id.
    pub(super) fn record(&self, record: PassRecord) {
        let mut records = lock(&self.records);
        records.retain(|r| r.request != record.request);
        records.push_back(record);
        while records.len() > PASS_RECORDS {
            records.pop_front();
        }
    }

    pub(super) fn forget(&self, request: &str) {
        lock(&self.records).retain(|r| r.request != request);
    }

    pub(super) fn queued_at(&self, request: &str) -> Option<DateTime<Utc>> {
        lock(&self.records).iter().find(|r| r.request == request).map(|r| r.queued)
    }
}
