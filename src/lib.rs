//! memfold keeps an AI agent's long-term memory as plain markdown and consolidates it in the background.
//!
//! The layers, from the outside in (docs/ARCHITECTURE.md draws them), each in its crate:
//!
//! - [`doors`] (this crate): how people, agents and programs reach memory: the command line,
//!   the HTTP API, the MCP server, the review page, the daemon that serves them, and the one
//!   text renderer the command line and MCP share;
//! - [`service`] (this crate): the one service behind the daemon's doors (ingest batching, the
//!   pass scheduler, metrics, the file watcher and the background workers);
//! - `memfold-core`: the use cases ([`memory`]: one method of [`Memory`] per verb, and the
//!   views they return), `planning` (pure functions from what was read to one change) and
//!   [`error`];
//! - `memfold-index`: the LanceDB index derived from the files;
//! - `memfold-models`: the embedders and the chat client;
//! - `memfold-store`: the markdown files and the state beside them, the one writer (`commit`),
//!   [`config`], and `sys`, what the operating system provides.
//!
//! Dependencies point down that list, and the crates make the compiler keep it: a door calls
//! the service (or, for the command line, [`Memory`]); nothing below `doors` knows of a door.
//!
//! # The public surface
//!
//! - [`Memory`] and its requests ([`memory::SearchRequest`], [`memory::Turn`],
//!   [`memory::Rewritten`], [`memory::MAX_K`]): the use cases;
//! - [`memory::views`]: every value the use cases return (reports, hits, entries, plans, runs),
//!   serialisable as the CLI's `--json` prints them;
//! - [`config`]: [`config::Config`] and its sections, loaded as `memfold` loads them;
//! - [`error`]: [`error::Error`] and its [`error::Kind`];
//! - [`service`]: the [`service::Service`] behind the daemon's doors;
//! - [`doors`]: the daemon ([`doors::daemon::serve_root`]), the MCP server on stdin/stdout
//!   ([`doors::mcp::serve_stdio`]) and the command line the `memfold` binary runs ([`doors::cli`]).
//!
//! The `testkit` feature (tests and benches only, never a user's build) re-exports the layers
//! below under their names (`store`, `sys`, `index`, `models`, `planning`) with the fake
//! OpenAI-compatible server (`testkit`), so the integration tests read the files the way
//! memfold does.

pub mod doors;
pub mod service;

pub use memfold_core::{Memory, error, memory};
pub use memfold_store::config;

/// The layers below, under the names the integration tests and benches read them by.
#[cfg(feature = "testkit")]
pub use {
    memfold_core::planning, memfold_index as index, memfold_models as models, memfold_models::testkit,
    memfold_store as store, memfold_store::sys,
};
