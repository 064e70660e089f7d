//! The vocabulary of a run, shared by every use case that produces one (a pass, a sweep,
//! curation by hand, a sync, a rebuild, an undo): the ops a decider proposes ([`ops`]), the
//! plan a `Planner` builds from them and the journal it keeps ([`plan`]), the records a run
//! and a stored plan leave in `.memfold/runs/` and `.memfold/plans/` ([`records`]), and the one
//! `Change` applying a plan writes ([`apply`]).

pub mod apply;
pub mod ops;
pub mod plan;
pub mod records;
