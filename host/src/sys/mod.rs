//! What loom-fs asks of the kernel, with no state of its own: walking
//! beneath a root without following links (`openat2`), descriptor counts,
//! free space, and the process's own Landlock sandbox. Nothing here knows
//! about tools, calls or MCP.

/// The most symlinks one resolution follows (Linux's own limit).
pub const MAX_LINKS: usize = 40;

#[cfg(unix)]
pub mod beneath;
#[cfg(unix)]
pub mod descriptors;
#[cfg(unix)]
pub mod openat2;
#[cfg(unix)]
pub mod rename;
#[cfg(unix)]
pub mod sandbox;
#[cfg(unix)]
pub mod space;
#[cfg(unix)]
pub mod stat;
#[cfg(target_os = "linux")]
pub mod walk;
#[cfg(windows)]
pub mod windows;
