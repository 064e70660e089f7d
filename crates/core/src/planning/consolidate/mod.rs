//! The consolidation pass: gate, neighbours, packing into calls, decide, validate, plan; what applying it writes.
//!
//! Everything here is planning: it reads a [`memfold_store::ledger::Ledger`] and returns plans and the
//! [`memfold_store::commit::Change`] that applies them. [`crate::memory::Memory::consolidate`] runs it
//! under the consolidation lock and commits the result.

pub mod aspects;
pub mod calendar;
pub mod cluster;
pub mod decide;
pub mod divert;
pub mod gate;
pub mod pack;
pub mod pass;
pub mod rebuild;
pub mod rules;
pub mod stem;
pub mod validate;
