//! `openat2` with `RESOLVE_BENEATH` (Linux 5.6+) and `O_PATH`: what every
//! lookup beneath a root is built on (see [`super::beneath`] and the policing
//! filesystem's probes).
//!
//! Linux only. Other platforms have no portable confinement yet (issue 19):
//! there `openat2` fails with `ENOSYS`, so every lookup is refused, never
//! made without the check, and the server's self-test refuses to start
//! (`runtime::fs::self_test`). These builds are type-checked, not run.

#[cfg(target_os = "linux")]
pub use rustix::fs::ResolveFlags;

/// `openat2` beneath `dir`: the kernel's, or with `LOOMFS_PORTABLE_RESOLVE=1`
/// (a switch of the tests' build, for the test suite's second pass) the portable walk of
/// [`super::walk`], which answers the same. Every caller passes
/// `RESOLVE_BENEATH`.
#[cfg(target_os = "linux")]
pub fn openat2<P: rustix::path::Arg>(
    dir: impl std::os::fd::AsFd,
    path: P,
    flags: rustix::fs::OFlags,
    mode: rustix::fs::Mode,
    resolve: ResolveFlags,
) -> rustix::io::Result<std::os::fd::OwnedFd> {
    debug_assert!(resolve.contains(ResolveFlags::BENEATH));
    if portable() {
        let path = path.as_cow_c_str()?;
        let no_symlinks = resolve.contains(ResolveFlags::NO_SYMLINKS);
        return super::walk::beneath(dir.as_fd(), path.to_bytes(), flags, mode, no_symlinks);
    }
    rustix::fs::openat2(dir, path, flags, mode, resolve)
}

/// Whether the portable walk stands in for the kernel's `openat2`
/// (`LOOMFS_PORTABLE_RESOLVE=1`, read once, in a build with the
/// `test-hooks` feature only: the tests'; any other build uses `openat2`).
#[cfg(all(target_os = "linux", not(feature = "test-hooks")))]
pub fn portable() -> bool {
    false
}

/// See the other [`portable`]: this is the one the tests' build has.
#[cfg(all(target_os = "linux", feature = "test-hooks"))]
pub fn portable() -> bool {
    static PORTABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PORTABLE.get_or_init(|| std::env::var_os("LOOMFS_PORTABLE_RESOLVE").is_some_and(|v| v == "1"))
}

/// An open that reads nothing, only names the file (`O_PATH`). Off Linux,
/// where nothing is served, a plain read-only open.
#[cfg(target_os = "linux")]
pub const O_PATH: rustix::fs::OFlags = rustix::fs::OFlags::PATH;
#[cfg(not(target_os = "linux"))]
pub const O_PATH: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY;

#[cfg(not(target_os = "linux"))]
pub use elsewhere::{ResolveFlags, openat2};

/// The portable walk is not used off Linux yet (see [`super::walk`]).
#[cfg(not(target_os = "linux"))]
pub fn portable() -> bool {
    false
}

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
