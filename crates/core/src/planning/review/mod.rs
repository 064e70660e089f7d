//! Review and reversal of consolidation: stored plans, the run log, undo, and entry history chains.
//!
//! **Plans.** With `consolidation.mode = "review"` a pass stores its whole plan under
//! `.memfold/plans/<id>.json` instead of applying it; in `auto` mode only the ops the decider
//! gave a confidence below `consolidation.review_below_confidence` are stored (planned on top
//! of what the pass applied), the rest apply (see [`crate::planning::consolidate::divert`]). A plan file
//! holds what applying it writes (the new `memory.md`, history blocks, journal records, the
//! facts) plus a unified diff for people. The plan id is the id of the run that applying it
//! creates. Facts in a pending plan are left out of every pass until the plan is applied or
//! rejected.
//!
//! [`plan_apply`] takes exactly the stored `memory.md` when the file still hashes to what the
//! plan was made against. Otherwise the plan is rebased: its ops are replayed on the current
//! file, which is allowed only when every entry the plan changes is still exactly as the plan
//! saw it (the replay then changes the same entries the same way); if not, it is refused with
//! the ids in the way. A stored rebuild (reason [`crate::planning::run::records::PlanReason::Rebuild`]) is never rebased: it
//! replaces every entry, so it applies only to the file it was made for. [`plan_reject`] keeps the file (status `rejected`) and returns its facts
//! to pending, flagged with [`FactProgress::reverted_run`](memfold_store::state::FactProgress).
//!
//! **Runs.** Every applied run has a record `.memfold/runs/<run>.json` next to its journal
//! lines: the text of `memory.md` before the run and its hash after, so that [`plan_undo`] can
//! restore it byte for byte when nothing changed it since. When something did, undo works entry
//! by entry from the journal: every entry the run touched must still be exactly as the run left
//! it, or the undo is refused with the conflicting ids and nothing is written. Only the newest
//! [`RUNS_WITH_COPIES`](crate::planning::run::records::RUNS_WITH_COPIES) records keep their copy of
//! `memory.md` (byte-for-byte undo of an older run needs every later run undone first, and the
//! copies add up); older ones keep the hashes, and their undo works entry by entry. Removed
//! entries go back where they stood when the run's copy is at hand, and at the end of the file
//! when it was dropped (the order of entries carries no meaning). An undo moves the undone versions to `history.md`
//! with `status: reverted`, marks the history blocks the run wrote for the versions it puts
//! back `status: restored` (neither kind leads anywhere any more), puts the previous versions
//! back, removes what the run added, lowers the watermark below the facts that are pending
//! again, and flags them.
//!
//! **Flagged facts** (`reverted_run` set, by an undo or a rejection) stay pending but are left
//! out of automatic passes, so the same decision is not made again by itself; a forced pass
//! (`memfold consolidate --force`, `POST /consolidate {"force":true}`) includes them, which
//! is how a person asks for a new decision. The flag clears once the fact is consolidated.
//!
//! The `plan_*` functions are pure: they read what they are given and return the
//! `Change` to commit; [`crate::memory::Memory`] takes the lock, reads, commits, and
//! brings the index and `MEMORY.md` up to date.

mod chains;
mod plans;
mod reports;
#[cfg(test)]
mod tests;
mod undo;

pub use chains::{fact_view, history_chain};
pub use plans::{all_plans, plan_apply, plan_apply_groups, plan_detail, plan_expire, plan_reject, plans, reject_rest};
pub use reports::{
    AppliedPlan, Chain, FactView, GroupView, OpDetail, PlanDetail, PlanView, RejectedPlan, RunDetail, RunView, Undone,
    Version, VersionStatus,
};
pub use undo::{UndoScope, plan_undo, run_detail, runs, undo_selection};

use memfold_store::entries::{Entry, EntryFile};

const MEMORY: &str = "consolidated/memory.md";

/// A rendered block back as an entry (rendered anew when written).
fn block_entry(block: &str) -> Option<Entry> {
    let file = EntryFile::parse(block, "block");
    file.entries().next().map(|e| Entry::new(e.meta.clone(), &e.content))
}
