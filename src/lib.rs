//! memfold keeps an AI agent's long-term memory as plain markdown and consolidates it in the background.
//!
//! The folders are the layers, from the outside in (docs/ARCHITECTURE.md draws them):
//!
//! - [`doors`]: how people, agents and programs reach memory: the command line, the HTTP API,
//!   the MCP server, the review page, the daemon that serves them, and the one text renderer
//!   the command line and MCP share;
//! - [`service`]: the one service behind the daemon's doors (ingest batching, the pass
//!   scheduler, metrics, the file watcher and the background workers);
//! - [`memory`]: the use cases, one method of [`Memory`] per verb, and the views they return;
//! - `planning`: pure functions from what was read to one change: consolidation, promotion
//!   of `MEMORY.md`, review and undo, forgetting;
//! - `store`: the markdown files and the state beside them, and the one writer (`commit`);
//! - `index`: the LanceDB index derived from the files;
//! - `models`: the embedders and the chat client;
//! - `sys`: what the operating system provides: the clock, file locks, file modes, the allocator.
//!
//! Dependencies point down that list: a door calls the service (or, for the command line,
//! [`Memory`]); nothing below `doors` knows of a door.
//!
//! # The public surface
//!
//! What a user of the crate needs, and nothing else:
//!
//! - [`Memory`] and its requests ([`memory::SearchRequest`], [`memory::Turn`],
//!   [`memory::Rewritten`], [`memory::MAX_K`]): the use cases;
//! - [`memory::views`]: every value the use cases return (reports, hits, entries, plans, runs),
//!   serialisable as the CLI's `--json` prints them;
//! - [`config`]: [`config::Config`] and its sections, loaded as `memfold` loads them;
//! - [`error`]: [`error::Error`] and its [`error::Kind`];
//! - [`service`]: the [`service::Service`] behind the daemon's doors;
//! - [`doors`]: the daemon ([`doors::daemon::serve`]), the MCP server on stdin/stdout
//!   ([`doors::mcp::serve_stdio`]) and the command line the `memfold` binary runs ([`doors::cli`]).
//!
//! Every other module is private to the crate. The `testkit` feature (tests and benches only,
//! never a user's build) adds [`testkit`](crate) — a fake OpenAI-compatible server — and opens
//! the internal modules, so the integration tests can read the files the way memfold does.

/// Internal modules: `pub(crate)`, or `pub` with the `testkit` feature.
macro_rules! internal {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "testkit")]
        pub mod $name;
        #[cfg(not(feature = "testkit"))]
        pub(crate) mod $name;
    )*};
}

pub mod config;
pub mod doors;
pub mod error;
pub mod memory;
pub mod service;

internal!(index, models, planning, store, sys);

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

/// Run blocking work (file IO, a commit) on tokio's blocking pool, passing panics on.
pub(crate) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// What a caught panic said, for an error message.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}

pub use memory::Memory;
