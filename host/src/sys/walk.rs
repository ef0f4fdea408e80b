//! Resolution beneath a directory by hand on Linux: the portable walk
//! ([`super::by_hand`]) on descriptors, answering as
//! `openat2(RESOLVE_BENEATH)` does (its tests compare both on 42 paths
//! under 6 flag sets).
//!
//! On Linux it is selected by `LOOMFS_PORTABLE_RESOLVE=1` (a switch of the
//! tests' build, `test-hooks`, for the test suite's second pass); elsewhere it is not used yet: those
//! builds have no `O_PATH` and no `/proc` to reopen what was checked.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::{Errno, Result};

pub use super::MAX_LINKS;
use super::by_hand::{self, Kind, Stop};

/// Opens `path` beneath `dir` with `flags`, as `openat2` with
/// `RESOLVE_BENEATH` (and `RESOLVE_NO_SYMLINKS` if `no_symlinks`) would:
/// the same file, or the same error for the same reason. A name changed
/// between its check and the open of the last one fails with `EAGAIN`
/// (callers try again, as they do for `openat2`).
pub fn beneath(
    dir: BorrowedFd<'_>,
    path: &[u8],
    flags: OFlags,
    mode: Mode,
    no_symlinks: bool,
) -> Result<OwnedFd> {
    let follow_last = !flags.contains(OFlags::NOFOLLOW);
    by_hand::walk(
        &Descriptors {
            start: dir,
            flags,
            mode,
        },
        path,
        follow_last,
        no_symlinks,
    )
}

/// The walk's steps on descriptors, from `start`, the last name opened
/// with `flags` and `mode`.
struct Descriptors<'a> {
    start: BorrowedFd<'a>,
    flags: OFlags,
    mode: Mode,
}

impl Descriptors<'_> {
    fn at<'b>(&'b self, dir: Option<&'b OwnedFd>) -> BorrowedFd<'b> {
        dir.map_or(self.start, |fd| fd.as_fd())
    }
}

/// How each name on the way is opened to be checked.
const PROBE: OFlags = OFlags::PATH.union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl by_hand::Steps for Descriptors<'_> {
    type Handle = OwnedFd;
    type Unit = u8;
    type Error = Errno;

    fn is_separator(unit: u8) -> bool {
        unit == b'/'
    }

    fn error(stop: Stop) -> Errno {
        match stop {
            Stop::Empty | Stop::Missing => Errno::NOENT,
            Stop::Escape => Errno::XDEV,
            Stop::Loop => Errno::LOOP,
            Stop::NotADirectory => Errno::NOTDIR,
        }
    }

    fn probe(&self, dir: Option<&OwnedFd>, name: &[u8]) -> Result<Option<OwnedFd>> {
        match rustix::fs::openat(self.at(dir), name, PROBE, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn kind(&self, fd: &OwnedFd) -> Result<Kind> {
        Ok(match super::stat::file_type(&rustix::fs::fstat(fd)?) {
            FileType::Symlink => Kind::Link,
            FileType::Directory => Kind::Directory,
            _ => Kind::Other,
        })
    }

    fn target(&self, fd: &OwnedFd) -> Result<Vec<u8>> {
        Ok(rustix::fs::readlinkat(fd, "", Vec::new())?.into_bytes())
    }

    fn here(&self, dir: Option<&OwnedFd>) -> Result<OwnedFd> {
        rustix::fs::openat(self.at(dir), ".", self.flags, self.mode)
    }

    fn last(
        &self,
        dir: Option<&OwnedFd>,
        name: &[u8],
        checked: Option<OwnedFd>,
    ) -> Result<OwnedFd> {
        let found = checked.ok_or(Errno::NOENT)?;
        if self.flags.contains(PROBE) {
            return Ok(found);
        }
        // Opened again with the caller's flags: it must be what was checked.
        let opened =
            rustix::fs::openat(self.at(dir), name, self.flags | OFlags::NOFOLLOW, self.mode)?;
        let (a, b) = (rustix::fs::fstat(&found)?, rustix::fs::fstat(&opened)?);
        if super::stat::inode(&a) == super::stat::inode(&b) {
            Ok(opened)
        } else {
            Err(Errno::AGAIN)
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::fs::ResolveFlags;
    use std::os::unix::fs::symlink;

    /// The same outcome: the same file, or the same error.
    fn outcome(r: Result<OwnedFd>) -> std::result::Result<(u64, u64), Errno> {
        r.map(|fd| super::super::stat::inode(&rustix::fs::fstat(&fd).unwrap()))
    }

    #[test]
    fn it_answers_as_openat2_does_for_symlinks_in_every_position() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("root");
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(top.path().join("outside")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "x").unwrap();
        std::fs::write(top.path().join("outside/secret"), "s").unwrap();
        for (link, target) in [
            ("a/up", ".."),
            ("a/down", "b/c"),
            ("a/file", "b/f.txt"),
            ("a/abs", "/etc"),
            ("a/out", "../../outside"),
            ("a/loop1", "loop2"),
            ("a/loop2", "loop1"),
            ("a/dangling", "nothing"),
            ("a/dirslash", "b/"),
            ("a/b/c/back", "../../.."),
            ("a/b/c/toofar", "../../../.."),
            ("a/proc", "/proc/self/root"),
        ] {
            symlink(target, root.join(link)).unwrap();
        }
        let paths = [
            "",
            ".",
            "a",
            "a/",
            "a/b/c",
            "a/b/f.txt",
            "a/b/f.txt/",
            "a/b/f.txt/x",
            "a/..",
            "a/../..",
            "..",
            "../outside",
            "a/b/../../a/b",
            "a/up",
            "a/up/a/b",
            "a/up/..",
            "a/down",
            "a/down/",
            "a/down/back",
            "a/down/back/a",
            "a/down/toofar",
            "a/down/toofar/x",
            "a/file",
            "a/file/",
            "a/abs",
            "a/abs/passwd",
            "a/out",
            "a/out/secret",
            "a/loop1",
            "a/loop1/x",
            "a/dangling",
            "a/dangling/x",
            "a/dirslash",
            "a/dirslash/f.txt",
            "a/proc",
            "a/proc/etc",
            "missing",
            "missing/x",
            "a//b///c",
            "./a/./b",
            "/etc",
            "a/b/c/back/a/b/c/back/..",
        ];
        let dir =
            rustix::fs::open(&root, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        let path_only = OFlags::PATH | OFlags::CLOEXEC;
        let cases = [
            (
                path_only,
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ),
            (
                path_only | OFlags::NOFOLLOW,
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ),
            (path_only, ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS),
            (
                path_only | OFlags::NOFOLLOW,
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
            ),
            (
                OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
            ),
            (
                OFlags::RDONLY | OFlags::CLOEXEC,
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ),
        ];
        let mut compared = 0;
        for (flags, resolve) in cases {
            for path in paths {
                // The kernel answers EAGAIN to a `..` while any rename runs
                // on the system (other tests make them): asked again, as
                // every caller of openat2 does.
                let kernel = (0..100)
                    .map(|_| rustix::fs::openat2(&dir, path, flags, Mode::empty(), resolve))
                    .find(|r| !matches!(r, Err(Errno::AGAIN)))
                    .unwrap_or(Err(Errno::AGAIN));
                let kernel = outcome(kernel);
                let by_hand = outcome(beneath(
                    dir.as_fd(),
                    path.as_bytes(),
                    flags,
                    Mode::empty(),
                    resolve.contains(ResolveFlags::NO_SYMLINKS),
                ));
                assert_eq!(by_hand, kernel, "{path:?} with {flags:?}, {resolve:?}");
                compared += 1;
            }
        }
        assert_eq!(compared, 6 * paths.len());
    }
}
