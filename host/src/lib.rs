//! loom-fs: a filesystem MCP server with roles, whose every tool runs as a
//! WebAssembly component. See `ARCHITECTURE.md` at the repository root for
//! the map of this crate.
//!
//! The modules are layers; from the top: `cli`, `server`, `tools`,
//! `runtime`, `store`, `sys`, `config`, `policy`. A module uses those below
//! its own, never one above (tests excepted); `layers.rs` holds the order and
//! checks it.

//!
//! Off Unix (Windows) only the bottom layers build: `config` and `policy`
//! (the Windows name rules included) and, of `sys`, the Windows backend's
//! primitives on handles. Everything above holds files by Unix descriptors,
//! and the binary says it does not run there yet.

#[cfg(unix)]
pub mod cli;
pub mod config;
pub mod policy;
#[cfg(unix)]
pub mod runtime;
#[cfg(unix)]
pub mod server;
#[cfg(unix)]
pub mod store;
pub mod sys;
#[cfg(unix)]
pub mod tools;

#[cfg(test)]
mod layers;
