//! memfold keeps an AI agent's long-term memory as plain markdown and consolidates it in the background.
//!
//! The modules follow the data flow: facts are appended to the archive (`files::archive`), the
//! index makes everything searchable (`index`, `corpus`, `embed`), `consolidate` folds new
//! facts into `consolidated/memory.md` and `promote` rewrites `MEMORY.md`. Every change to
//! memory's files goes through `commit`. [`Memory`] is the use-case layer, one method per verb
//! in the files of [`memory`]; the [`cli`] calls it, and the daemon's doors (the HTTP API and
//! the MCP server) call [`serve::Service`], which owns a `Memory` and the daemon's ingest
//! batching, pass scheduler and metrics. The data flow and the invariants are described in
//! docs/ARCHITECTURE.md.
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
//! - [`serve`]: the daemon ([`serve::serve`]), its [`serve::Service`], and the MCP server on
//!   stdin/stdout ([`serve::serve_stdio`]);
//! - [`cli`]: the command line the `memfold` binary runs.
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

pub mod cli;
pub mod config;
pub mod error;
pub mod memory;
pub mod serve;

internal!(
    alloc,
    clock,
    commit,
    consolidate,
    corpus,
    diff,
    embed,
    files,
    forget,
    index,
    ledger,
    llm,
    lock,
    openai,
    promote,
    recall,
    review,
    state,
    status,
    verify,
    watch,
);

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

/// Run blocking work (file IO, a commit) on tokio's blocking pool, passing panics on.
pub(crate) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

pub use memory::Memory;
