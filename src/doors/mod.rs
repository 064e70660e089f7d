//! The doors: how people, agents and programs reach memory.
//!
//! [`cli`] is the `memfold` command line, which calls [`memfold_core::Memory`] itself (it has no
//! daemon to share). The daemon's doors, [`http`] (the JSON API), [`mcp`] (the MCP tools and
//! resources, at `/mcp` and on stdin/stdout) and [`web`] (the review page under `/ui`), call
//! the one [`crate::service::Service`] and nothing else. [`daemon`] is `memfold serve`: it
//! binds the listener and runs the HTTP door beside the service's workers. [`render`] is the
//! text the command line and MCP print for the same views. [`hook`] is `memfold hook EVENT`,
//! the agents' lifecycle hooks, which reach the daemon over HTTP as any client does (and
//! the files when it is down); `setup` wires memfold into an agent's settings, `unit` into
//! the system's service manager, and [`doctor`] says whether all of it is in place.

pub mod cli;
pub mod daemon;
pub mod doctor;
pub mod hook;
pub mod http;
pub mod mcp;
pub mod render;
pub mod setup;
pub mod unit;
pub mod web;
