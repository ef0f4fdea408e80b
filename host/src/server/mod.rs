//! The protocol faces: MCP over stdio and over Streamable HTTP, both
//! answering from one [`mcp::Server`]. They own framing, sessions and
//! connection limits; they never touch a file or decide a permission.

pub mod http;
pub mod mcp;
pub mod stdio;
