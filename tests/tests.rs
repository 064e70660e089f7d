//! The integration tests, in one binary so that LanceDB, DataFusion and candle are linked once.
//!
//! Each module drives the real `memfold` binary or the library against real files, a real
//! LanceDB index and real HTTP servers on 127.0.0.1; the LLM is the fake OpenAI-compatible
//! server of `memfold::testkit`. `common` holds what they share.

mod common;

mod agents;
mod aspects;
mod cli;
mod consolidate;
mod crash;
mod curation;
mod decay;
mod doctor;
mod hooks;
mod http;
mod index;
mod inert;
mod layout;
mod links;
mod mcp;
mod offline;
mod review;
mod scheduler;
mod secrets;
mod security;
mod spaces;
mod sync;
mod ui;
mod ui_browser;
