//! `openat2` with `RESOLVE_BENEATH` (Linux 5.6+) and `O_PATH`: what every
//! lookup beneath a root is built on (see [`super::beneath`] and the policing
//! filesystem's probes).
//!
//! Linux only. Other platforms have no portable confinement yet (issue 19):
//! there `openat2` fails with `ENOSYS`, so every lookup is refused, never
//! made without the check, and the server's self-test refuses to start
//! (`runtime::fs::self_test`). These builds are type-checked, not run.

#[cfg(target_os = "linux")]
pub use rustix::fs::{ResolveFlags, openat2};

/// An open that reads nothing, only names the file (`O_PATH`). Off Linux,
/// where nothing is served, a plain read-only open.
#[cfg(target_os = "linux")]
pub const O_PATH: rustix::fs::OFlags = rustix::fs::OFlags::PATH;
#[cfg(not(target_os = "linux"))]
pub const O_PATH: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY;

#[cfg(not(target_os = "linux"))]
pub use elsewhere::{ResolveFlags, openat2};

#[cfg(not(target_os = "linux"))]
mod elsewhere {
    use std::os::fd::{AsFd, OwnedFd};

    use rustix::fs::{Mode, OFlags};

    /// The `RESOLVE_*` flags loom-fs passes, to keep one spelling of the
    /// calls on every platform.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ResolveFlags(u8);

    impl ResolveFlags {
        pub const BENEATH: ResolveFlags = ResolveFlags(1);
        pub const NO_SYMLINKS: ResolveFlags = ResolveFlags(2);
        pub const NO_MAGICLINKS: ResolveFlags = ResolveFlags(4);
    }

    impl std::ops::BitOr for ResolveFlags {
        type Output = ResolveFlags;
        fn bitor(self, other: ResolveFlags) -> ResolveFlags {
            ResolveFlags(self.0 | other.0)
        }
    }

    /// Not available: refused, whatever the path.
    pub fn openat2<P: rustix::path::Arg>(
        _dir: impl AsFd,
        _path: P,
        _flags: OFlags,
        _mode: Mode,
        _resolve: ResolveFlags,
    ) -> rustix::io::Result<OwnedFd> {
        Err(rustix::io::Errno::NOSYS)
    }
}
