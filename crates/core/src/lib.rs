//! memfold's use cases ([`memory`]: one method of [`Memory`] per verb, and the views they
//! return) and the pure planning behind them ([`planning`]: from what was read to one change
//! the store commits), with the [`error`] every use case returns.
//!
//! Below it: `memfold-store` (the files, the one commit), `memfold-index` (LanceDB) and
//! `memfold-models` (embedders, the chat client). Above it: the `memfold` crate's doors and
//! service, which call [`Memory`] and render what it returns.

pub mod error;
pub mod memory;
pub mod planning;

pub use memory::Memory;
