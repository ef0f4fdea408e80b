//! What loom-fs asks of the kernel, with no state of its own: walking
//! beneath a root without following links (`openat2`), descriptor counts,
//! free space, and the process's own Landlock sandbox. Nothing here knows
//! about tools, calls or MCP.

/// The most symlinks one resolution follows (Linux's own limit).
pub const MAX_LINKS: usize = 40;

pub mod beneath;
pub mod descriptors;
pub mod openat2;
pub mod rename;
pub mod sandbox;
pub mod space;
pub mod stat;
#[cfg(target_os = "linux")]
pub mod walk;
