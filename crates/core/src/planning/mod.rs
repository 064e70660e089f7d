//! Planning: pure functions from what was read (a [`memfold_store::ledger::Ledger`], stored
//! records) to one [`memfold_store::commit::Change`]. Nothing here writes a file; the use cases
//! ([`crate::memory`]) commit what these plan.
//!
//! [`consolidate`] plans a pass, [`promote`] the lines of `MEMORY.md`, [`review`] the apply,
//! reject and undo of stored plans and runs, [`forget`] forgetting, pinning and hand deletions,
//! [`curate`] merging and superseding entries by hand, [`recall`] the lines handed to an agent
//! for a prompt;
//! [`diff`] renders the unified diffs plans carry.

pub mod about;
pub mod consolidate;
pub mod curate;
pub mod diff;
pub mod forget;
pub mod promote;
pub mod recall;
pub mod remember;
pub mod review;
pub mod run;
pub mod stale;
pub mod sweep;
pub mod sync;
