//! loom-fs: a filesystem MCP server with roles, whose every tool runs as a
//! WebAssembly component. See `ARCHITECTURE.md` at the repository root for
//! the map of this crate.

pub mod audit;
pub mod beneath;
pub mod config;
pub mod http;
pub mod locks;
pub mod mcp;
pub mod policy;
pub mod quota;
pub mod runtime;
pub mod sandbox;
pub mod slots;
pub mod space;
pub mod staging;
pub mod tools;
pub mod transport;
pub mod trash;
