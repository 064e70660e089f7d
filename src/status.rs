//! The state of a memory root at a glance: the gate, pending facts, entries, the last run.
//!
//! `memfold status --json` prints a [`Status`] and `GET /status` answers with one (plus what
//! the daemon adds about its own passes), so both read the same fields from the same files.

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::consolidate::gate::{self, GateInput};
use crate::consolidate::records;
use crate::files::Root;
use crate::ledger::{Ledger, LedgerError};
use crate::lock;
use crate::memory::views::{EmbedderStatus, Status};

/// Read the root and evaluate the gate as an unforced pass would at `now`. Blocking (reads files).
pub fn status(root: &Root, config: &Config, now: DateTime<Utc>) -> Result<Status, LedgerError> {
    let ledger = Ledger::load(root)?;
    let pending = ledger.pending().len();
    // The gate counts what an unforced pass would take up, so it agrees with the pass.
    let waiting = records::pending_plans(root);
    let under_review = records::under_review(&waiting);
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
        plans_waiting: waiting.len(),
        proposals_waiting: waiting.iter().map(|p| p.journal.len()).sum(),
        entries: ledger.memory.entries().count(),
        last_run: ledger.state.last_run.clone(),
        watermark: ledger.state.watermark,
        problems: ledger.problems.len(),
        embedder: {
            let (chosen, why) = crate::embed::chosen(&config.embedding);
            EmbedderStatus { name: chosen.name(), why }
        },
    })
}
