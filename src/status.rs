//! The state of a memory root at a glance: the gate, pending facts, entries, the last run.
//!
//! `memfold status --json` prints a [`Status`] and `GET /status` answers with one (plus what
//! the daemon adds about its own passes), so both read the same fields from the same files.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::consolidate::gate::{self, Gate, GateInput};
use crate::files::Root;
use crate::ledger::{Ledger, LedgerError};
use crate::lock;
use crate::state::LastRun;

/// What `status --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether a pass would start now, and why not.
    pub gate: Gate,
    /// Facts not yet consolidated or tombstoned.
    pub pending_facts: usize,
    /// Pending facts the gate does not count: in a pending plan, flagged by an undo or a
    /// rejected plan or given up after `max_attempts` unusable replies (they wait for a forced
    /// pass), or edited in place in the archive or named by an entry `memory.md` cannot show
    /// (hidden by an unclosed block, its header broken or without content: they wait for a
    /// person).
    pub held_facts: usize,
    /// Current entries in `consolidated/memory.md`.
    pub entries: usize,
    pub last_run: Option<LastRun>,
    pub watermark: Option<NaiveDate>,
    /// Recoverable problems found while reading the files (see `memfold verify`).
    pub problems: usize,
}

/// Read the root and evaluate the gate as an unforced pass would at `now`. Blocking (reads files).
pub fn status(root: &Root, config: &Config, now: DateTime<Utc>) -> Result<Status, LedgerError> {
    let ledger = Ledger::load(root)?;
    let pending = ledger.pending().len();
    // The gate counts what an unforced pass would take up, so it agrees with the pass.
    let under_review = crate::consolidate::records::facts_under_review(root);
    let eligible = crate::consolidate::pass::eligible(&ledger, &under_review, &config.consolidation, false).len();
    let holder = lock::holder(&root.consolidate_lock());
    let gate = gate::evaluate(
        &config.consolidation,
        &GateInput {
            lock_holder: holder.as_deref(),
            last_run: ledger.state.last_run.as_ref().map(|r| r.finished),
            now,
            pending: eligible,
            force: false,
        },
    );
    Ok(Status {
        gate,
        pending_facts: pending,
        held_facts: pending - eligible,
        entries: ledger.memory.entries().count(),
        last_run: ledger.state.last_run.clone(),
        watermark: ledger.state.watermark,
        problems: ledger.problems.len(),
    })
}
