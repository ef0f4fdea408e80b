//! Resolution beneath a directory by hand, one name at a time: the portable
//! twin of `openat2(RESOLVE_BENEATH)` (see [`super::openat2`]), as cap-std
//! resolves where the kernel has no such call.
//!
//! Every name is opened relative to the descriptor of the directory before
//! it, `O_NOFOLLOW`, and kept: a directory renamed or swapped for a symlink
//! after it was checked leads nowhere else. A symlink is read from the
//! descriptor of the link that was checked and its target walked the same
//! way: an absolute target, or `..` above the starting directory, is an
//! escape (`EXDEV`, as `RESOLVE_BENEATH` says); more than [`MAX_LINKS`]
//! links is a loop (`ELOOP`). `..` pops back to the descriptor of the
//! directory it entered from, never asks the kernel for a parent.
//!
//! On Linux it is selected by `LOOMFS_PORTABLE_RESOLVE=1` (a switch of the
//! tests' build, `test-hooks`, for the test suite's second pass); elsewhere it is not used yet: those
//! builds have no `O_PATH` and no `/proc` to reopen what was checked.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::{Errno, Result};

pub use super::MAX_LINKS;

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
    if path.is_empty() {
        return Err(Errno::NOENT);
    }
    if path.starts_with(b"/") {
        return Err(Errno::XDEV);
    }
    let follow_last = !flags.contains(OFlags::NOFOLLOW);
    let mut pending = names(path);
    // A trailing slash: the last name must be a directory, and a symlink
    // there is followed.
    let mut trailing_slash = path.ends_with(b"/");
    // The directories entered, the current one on top; empty: `dir`.
    let mut entered: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    loop {
        let cur = entered.last().map_or(dir, |fd| fd.as_fd());
        let Some(name) = pending.pop_front() else {
            // The path named a directory reached (`.`, `a/..`).
            return rustix::fs::openat(cur, ".", flags, mode);
        };
        match name.as_slice() {
            b"." => continue,
            b".." => {
                entered.pop().ok_or(Errno::XDEV)?;
                continue;
            }
            _ => {}
        }
        let last = pending.is_empty();
        let found = rustix::fs::openat(
            cur,
            name.as_slice(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let ty = super::stat::file_type(&rustix::fs::fstat(&found)?);
        if ty == FileType::Symlink && (!last || follow_last || trailing_slash) {
            if no_symlinks {
                return Err(Errno::LOOP);
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(Errno::LOOP);
            }
            let target = rustix::fs::readlinkat(&found, "", Vec::new())?;
            let target = target.to_bytes();
            if target.starts_with(b"/") {
                return Err(Errno::XDEV);
            }
            // The path's own trailing slash holds for the target too.
            if last {
                trailing_slash |= target.ends_with(b"/");
            }
            for n in names(target).into_iter().rev() {
                pending.push_front(n);
            }
            continue;
        }
        if !last {
            if ty != FileType::Directory {
                return Err(Errno::NOTDIR);
            }
            entered.push(found);
            continue;
        }
        if trailing_slash && ty != FileType::Directory {
            return Err(Errno::NOTDIR);
        }
        if flags.contains(OFlags::PATH) && flags.contains(OFlags::NOFOLLOW | OFlags::CLOEXEC) {
            return Ok(found);
        }
        // Opened again with the caller's flags: it must be what was checked.
        let opened = rustix::fs::openat(cur, name.as_slice(), flags | OFlags::NOFOLLOW, mode)?;
        let same = |a: &OwnedFd, b: &OwnedFd| -> Result<bool> {
            let (a, b) = (rustix::fs::fstat(a)?, rustix::fs::fstat(b)?);
            Ok(super::stat::inode(&a) == super::stat::inode(&b))
        };
        return match same(&found, &opened)? {
            true => Ok(opened),
            false => Err(Errno::AGAIN),
        };
    }
}

/// The names of a path, in order; empty ones (`a//b`) left out.
fn names(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
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
                let kernel = outcome(rustix::fs::openat2(
                    &dir,
                    path,
                    flags,
                    Mode::empty(),
                    resolve,
                ));
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
