//! The state of a memory root at a glance: the gate, pending facts, entries, the last run.
//!
//! `memfold status --json` prints a [`Status`] and `GET /status` answers with one (plus what
//! the daemon adds about its own passes), so both read the same fields from the same files.

use chrono::{NaiveDate, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::consolidate::gate::{self, Gate, GateInput};
use crate::files::Root;
use crate::ledger::{Ledger, LedgerError};
use crate::lock;
use crate::state::LastRun;

/// What `status --json` prints (DESIGN §7).
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether a pass would start now, and why not.
    pub gate: Gate,
    pub pending_facts: usize,
    /// Current entries in `consolidated/memory.md`.
    pub entries: usize,
    pub last_run: Option<LastRun>,
    pub watermark: Option<NaiveDate>,
    /// Recoverable problems found while reading the files (see `memfold verify`).
    pub problems: usize,
}

/// Read the root and evaluate the gate as an unforced pass would right now. Blocking (reads files).
pub fn status(root: &Root, config: &Config) -> Result<Status, LedgerError> {
    let ledger = Ledger::load(root)?;
    let pending = ledger.pending().len();
    let holder = lock::holder(&root.consolidate_lock());
    let gate = gate::evaluate(
        &config.consolidation,
        &GateInput {
            lock_holder: holder.as_deref(),
            last_run: ledger.state.last_run.as_ref().map(|r| r.finished),
            now: Utc::now(),
            pending,
            force: false,
        },
    );
    Ok(Status {
        gate,
        pending_facts: pending,
        entries: ledger.memory.entries().count(),
        last_run: ledger.state.last_run.clone(),
        watermark: ledger.state.watermark,
        problems: ledger.problems.len(),
    })
}
