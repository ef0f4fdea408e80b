//! Directories reached by descriptor beneath a root, never through a
//! symlink: what the host's own I/O in a root (the trash, the staging
//! area, the lock file) is built on.
//!
//! A path string is looked up once, with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, and everything below is reached from the
//! descriptor it gives, by single names opened `O_NOFOLLOW`. So a
//! directory swapped for a symlink after it was opened leads nowhere
//! outside the root, and a planted symlink is refused, never followed.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::openat2::ResolveFlags;

/// The names in the directory `dir` but `.` and `..`, in name order, each
/// with its type as `lstat` gives it (never following a symlink). A name
/// gone while it is looked at is left out.
pub fn names_in(dir: &OwnedFd) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for item in rustix::fs::Dir::read_from(dir)? {
        let item = item?;
        let name = OsStr::from_bytes(item.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let ty = match item.file_type() {
            // Some filesystems do not say in the listing.
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => crate::sys::stat::file_type(&st),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            },
            ty => ty,
        };
        out.push((name.to_os_string(), ty));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The directory `name` in `dir`, opened without following a symlink.
pub fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty())
}

/// The directory `rel` below `dir`, opened without leaving `dir` and
/// without following any symlink.
pub fn beneath(dir: impl AsFd, rel: &Path) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    let mut tries = 0;
    loop {
        // EAGAIN: a rename elsewhere raced the lookup; try again.
        match super::openat2::openat2(dir.as_fd(), rel, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if tries < 8 => tries += 1,
            done => return done.map_err(Into::into),
        }
    }
}

/// The directory `rel` below `root`, made where missing, one name at a
/// time, each opened as in [`beneath`].
pub fn parents(root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let mut dir = beneath(root, Path::new(""))?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a plain path",
            ));
        };
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = beneath(&dir, Path::new(name))?;
    }
    Ok(dir)
}

/// Removes `name` in `dir` and, if it is a directory, everything below
/// it, by descriptor only: a directory is opened `O_NOFOLLOW` from its
/// parent's descriptor, emptied and removed by name in its parent; anything
/// else, a symlink included, is unlinked, never followed. A name swapped
/// for a symlink meanwhile is unlinked as the link it now is.
pub fn remove_below(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let removed = match open_dir(dir, name) {
        Ok(sub) => {
            for (child, _) in names_in(&sub)? {
                remove_below(sub.as_fd(), &child)?;
            }
            rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
        }
        Err(Errno::NOTDIR | Errno::LOOP) => rustix::fs::unlinkat(dir, name, AtFlags::empty()),
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A root's directory, opened by its path (resolved once, at config load).
pub fn open_root(root: &crate::policy::Root) -> io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    rustix::fs::open(&root.path, flags, Mode::empty()).map_err(Into::into)
}

/// The directory `name` in `dir`, made if missing, opened as in
/// [`open_dir`].
pub fn make_dir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    open_dir(dir, name).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_are_never_followed() {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        symlink("../outside", root.join("link")).unwrap();
        let fd =
            rustix::fs::open(&root, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        assert!(beneath(&fd, Path::new("a/b")).is_ok());
        assert!(beneath(&fd, Path::new("link")).is_err());
        assert!(beneath(&fd, Path::new("../outside")).is_err());
        assert!(parents(&fd, Path::new("link/x")).is_err());
        assert!(!tmp.path().join("outside/x").exists());
        assert!(make_dir(fd.as_fd(), OsStr::new("link")).is_err());
        // Removing through a symlink removes the link, not its target.
        std::fs::write(tmp.path().join("outside/keep"), "x").unwrap();
        remove_below(fd.as_fd(), OsStr::new("link")).unwrap();
        assert!(tmp.path().join("outside/keep").exists());
        remove_below(fd.as_fd(), OsStr::new("a")).unwrap();
        assert!(!root.join("a").exists());
    }
}
