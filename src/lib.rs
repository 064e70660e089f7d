//! memfold keeps an AI agent's long-term memory as plain markdown and consolidates it in the background.
//!
//! The modules follow the data flow: facts are appended to the [`files::archive`], the
//! [`index`] makes everything searchable, [`consolidate`] folds new facts into
//! `consolidated/memory.md`, and [`promote`] rewrites `MEMORY.md`. The [`daemon`] and
//! [`http`] modules are thin shells around them.

pub mod cli;
pub mod config;
pub mod consolidate;
pub mod corpus;
pub mod daemon;
pub mod diff;
pub mod embed;
pub mod files;
pub mod forget;
pub mod guard;
pub mod http;
pub mod index;
pub mod ledger;
pub mod llm;
pub mod lock;
pub mod metrics;
pub mod openai;
pub mod promote;
pub mod recall;
pub mod review;
pub mod state;
pub mod status;
#[doc(hidden)]
pub mod testkit;
pub mod verify;
pub mod watch;
