//! The consolidation pass: gate, neighbours, clusters, packing into calls, decide, validate, plan, apply.

pub mod apply;
pub mod cluster;
pub mod decide;
pub mod gate;
pub mod offline;
pub mod ops;
pub mod pack;
pub mod pass;
pub mod plan;
pub mod rebuild;
pub mod validate;
