//! loom-fs: a filesystem MCP server with roles, whose every tool runs as a
//! WebAssembly component. See `ARCHITECTURE.md` at the repository root for
//! the map of this crate.
//!
//! The modules are layers; from the top: `cli`, `server`, `tools`,
//! `runtime`, `store`, `sys`, `config`, `policy`. A module uses those below
//! its own, never one above (tests excepted); `layers.rs` holds the order and
//! checks it.

pub mod cli;
pub mod config;
pub mod policy;
pub mod runtime;
pub mod server;
pub mod store;
pub mod sys;
pub mod tools;

#[cfg(test)]
mod layers;
