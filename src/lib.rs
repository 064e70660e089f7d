//! memfold keeps an AI agent's long-term memory as plain markdown and consolidates it in the background.
//!
//! The modules follow the data flow: facts are appended to the [`files::archive`], the
//! [`index`] makes everything searchable, [`consolidate`] folds new facts into
//! `consolidated/memory.md`, and [`promote`] rewrites `MEMORY.md`. Every change to memory's
//! files goes through [`commit`]. [`memory::Memory`] is the use-case layer, one method per
//! verb; the [`cli`], the [`http`] API, the [`mcp`] server and the [`daemon`] are adapters over
//! it. The data flow and the invariants are described in docs/ARCHITECTURE.md.

pub mod cli;
mod clock;
mod commit;
pub mod config;
pub mod consolidate;
pub mod corpus;
mod daemon;
pub mod diff;
pub mod embed;
pub mod error;
pub mod files;
mod forget;
mod guard;
pub mod http;
pub mod index;
pub mod ledger;
pub mod llm;
pub mod lock;
pub mod mcp;
pub mod memory;
mod metrics;
mod openai;
mod promote;
pub mod recall;
mod review;
pub mod state;
mod status;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod verify;
pub mod watch;
