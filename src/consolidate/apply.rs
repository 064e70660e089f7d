//! Applying a plan: the only code that writes consolidation results to disk.
//!
//! A plan that would write an entry where `memory.md` cannot read it back (inside a block a
//! hand edit or an older version left unclosed) is refused before anything is written.
//! Order: old versions are appended to `history.md` first, then `memory.md` is replaced
//! atomically (refused if it changed since it was read, in which case the history append
//! is rolled back), then the journal, the run record (`.memfold/runs/<run>.json`, for undo)
//! and `state.json` are written. A crash at any point leaves every fact accounted for: at
//! worst `history.md` holds an extra copy of a block.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::plan::Plan;
use crate::files::Root;
use crate::files::atomic::WriteError;
use crate::ledger::{FactFate, Ledger, LedgerError};
use crate::state::{LastRun, State, StateError, append_jsonl};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    #[error("consolidated/memory.md changed during the pass; nothing was written and the pass will be retried")]
    Stale,
    /// `memory.md` holds a block (typed by hand, or left by an older version) that does not
    /// close, and the plan would write an entry inside it where it could not be read back.
    #[error("{0}")]
    Hidden(crate::files::Problem),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("appending to consolidated/history.md: {0}")]
    History(std::io::Error),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Write a plan. `started` is when the pass began.
pub fn apply(root: &Root, plan: &Plan, started: DateTime<Utc>) -> Result<(), ApplyError> {
    let file = "consolidated/memory.md";
    if let Some(problem) = crate::files::entries::newly_hidden(&plan.memory_before, &plan.memory_after, file) {
        return Err(ApplyError::Hidden(problem));
    }
    let history_path = root.history();
    let history_len = std::fs::metadata(&history_path).map(|m| m.len()).unwrap_or(0);
    crate::files::append_history(root, &plan.history).map_err(ApplyError::History)?;
    match crate::files::write_memory(root, &plan.memory_after, &plan.memory_hash_before) {
        Ok(()) => {}
        Err(WriteError::Stale { .. }) => {
            // Take back the history blocks of a run that did not happen.
            if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&history_path) {
                let _ = file.set_len(history_len).and_then(|_| file.sync_all());
            }
            return Err(ApplyError::Stale);
        }
        Err(e) => return Err(e.into()),
    }
    append_jsonl(&root.journal(), &plan.journal)?;
    let finished = Utc::now();
    // What `memfold undo` needs to restore memory.md byte for byte.
    crate::review::record_run(root, plan, started, finished)?;
    let mut state = State::load(&root.state_json())?;
    for fact in &plan.facts_done {
        state.facts.remove(fact);
    }
    state.last_run = Some(LastRun {
        id: plan.run.clone(),
        started,
        finished,
        ops: plan.journal.len(),
        facts: plan.facts_done.len(),
    });
    state.file_hashes.insert("consolidated/memory.md".into(), crate::files::content_hash(&plan.memory_after));
    state.save(&root.state_json())?;
    advance_watermark(root)?;
    Ok(())
}

/// Move the watermark over closed days (before today) whose facts are all consolidated or tombstoned.
pub fn advance_watermark(root: &Root) -> Result<(), ApplyError> {
    let ledger = Ledger::load(root)?;
    let today = chrono::Local::now().date_naive();
    let fates = ledger.fates();
    let open_days: BTreeSet<_> =
        ledger.facts.iter().filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending)).map(|f| f.date).collect();
    let first_open = open_days.iter().next().copied().unwrap_or(today).min(today);
    let Some(last_closed) = ledger.facts.iter().map(|f| f.date).filter(|d| *d < first_open).max() else {
        return Ok(());
    };
    let mut state = ledger.state;
    if state.watermark.is_none_or(|w| w < last_closed) {
        state.watermark = Some(last_closed);
        state.save(&root.state_json())?;
    }
    Ok(())
}
