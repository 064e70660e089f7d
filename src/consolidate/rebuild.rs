//! `memfold rebuild`: re-consolidate everything from the archive into a fresh `memory.md`.
//!
//! The current entries move to `history.md` with `status: rebuilt` (such blocks no longer
//! account for their facts, so every fact that is not tombstoned is pending again), except
//! entries that cannot be re-derived from the archive: pinned ones and blocks a person wrote
//! (no sources), which carry over. Then a forced pass consolidates everything. Tombstoned
//! facts stay out, so nothing forgotten comes back.

use chrono::Utc;

use super::pass::{Pass, PassError, PassOptions, PassReport};
use crate::files::entries::{Entry, EntryFile};
use crate::files::write_memory;
use crate::ledger::Ledger;
use crate::lock::LockGuard;

impl Pass<'_> {
    /// Set the current entries aside and consolidate the whole archive again.
    pub async fn rebuild(&self) -> Result<PassReport, PassError> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || -> Result<(), PassError> {
            let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
            if let Err(e) = crate::forget::reconcile_locked(&root) {
                tracing::warn!(error = %e, "could not reconcile hand edits of memory.md");
            }
            let ledger = Ledger::load(&root)?;
            let run = format!("rebuild-{}", Utc::now().format("%Y%m%dT%H%M%SZ"));
            let today = chrono::Local::now().date_naive();
            let mut fresh = EntryFile::default();
            let mut set_aside = Vec::new();
            for entry in ledger.memory.entries() {
                if entry.meta.pinned || entry.meta.sources.is_empty() {
                    fresh.push(Entry::new(entry.meta.clone(), &entry.content));
                } else {
                    let mut meta = entry.meta.clone();
                    meta.status = Some("rebuilt".into());
                    meta.valid_until = Some(today);
                    meta.run = Some(run.clone());
                    set_aside.push(Entry::new(meta, &entry.content));
                }
            }
            crate::files::append_history(&root, &set_aside)
                .map_err(|e| PassError::Apply(super::apply::ApplyError::History(e)))?;
            write_memory(&root, &fresh.render(), &ledger.memory.hash).map_err(|e| PassError::Apply(e.into()))?;
            tracing::info!(run = %run, set_aside = set_aside.len(), kept = fresh.entries().count(), "rebuild: entries set aside");
            Ok(())
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        self.run(PassOptions { force: true, dry_run: false }).await
    }
}
