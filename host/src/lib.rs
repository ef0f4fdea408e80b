//! loom-fs: a filesystem MCP server with roles, whose every tool runs as a
//! WebAssembly component. See `ARCHITECTURE.md` at the repository root for
//! the map of this crate.
//!
//! The modules are layers, listed here from the top: a module uses those
//! below it, never one above (tests excepted).

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
