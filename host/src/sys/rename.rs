//! `renameat2` with `RENAME_NOREPLACE`, on filesystems that lack it too.
//!
//! Many FUSE filesystems and older NFS servers refuse `renameat2`'s flags
//! (`EINVAL`). There a rename that must not replace is a check and a plain
//! rename: another process creating the same name in between would be
//! replaced. The names this is used for are the host's own (trash slots,
//! staged files) or places the publish holds the call's locks on, so only
//! a process outside loom-fs could slip into that gap.

use std::ffi::OsStr;
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, RenameFlags};
use rustix::io::Errno;

/// Renames `from_name` in `from_dir` to `to_name` in `to_dir`, failing
/// with `EEXIST` when something stands there.
pub fn rename_noreplace(
    from_dir: impl AsFd,
    from_name: &OsStr,
    to_dir: impl AsFd,
    to_name: &OsStr,
) -> Result<(), Errno> {
    let (from_dir, to_dir) = (from_dir.as_fd(), to_dir.as_fd());
    match rustix::fs::renameat_with(from_dir, from_name, to_dir, to_name, RenameFlags::NOREPLACE) {
        // Also what a rename the kernel refuses whatever the flags answers
        // (a directory into itself): the plain rename refuses it again.
        Err(Errno::INVAL) => match rustix::fs::statat(to_dir, to_name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Err(Errno::EXIST),
            Err(Errno::NOENT) => rustix::fs::renameat(from_dir, from_name, to_dir, to_name),
            Err(e) => Err(e),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &std::path::Path) -> std::fs::File {
        std::fs::File::open(path).unwrap()
    }

    #[test]
    fn renames_onto_a_free_name_and_refuses_a_taken_one() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), "a").unwrap();
        std::fs::write(tmp.path().join("b"), "b").unwrap();
        let d = dir(tmp.path());

        let taken = rename_noreplace(&d, OsStr::new("a"), &d, OsStr::new("b"));
        assert_eq!(taken, Err(Errno::EXIST));
        assert_eq!(std::fs::read_to_string(tmp.path().join("b")).unwrap(), "b");

        rename_noreplace(&d, OsStr::new("a"), &d, OsStr::new("c")).unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join("c")).unwrap(), "a");
        assert!(!tmp.path().join("a").exists());
    }

    #[test]
    fn a_rename_the_kernel_refuses_is_refused_after_the_fallback_too() {
        // A directory into itself answers EINVAL, which also takes the
        // fallback path: the plain rename must refuse it again.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        let (parent, inner) = (dir(tmp.path()), dir(&tmp.path().join("d")));
        let into_itself = rename_noreplace(&parent, OsStr::new("d"), &inner, OsStr::new("x"));
        assert_eq!(into_itself, Err(Errno::INVAL));
        assert!(tmp.path().join("d").is_dir());
    }
}
