//! What loom-fs asks of the kernel, with no state of its own: walking
//! beneath a root without following links (`openat2`, or by hand:
//! `by_hand`, `walk`), descriptor counts, free space, and the process's own
//! Landlock sandbox; on Windows, the backend's primitives on handles
//! (`windows`). Nothing here knows about tools, calls or MCP.

/// The most symlinks one resolution follows (Linux's own limit).
pub const MAX_LINKS: usize = 40;

#[cfg(unix)]
pub mod beneath;
pub mod by_hand;
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
