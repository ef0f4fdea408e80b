//! Restoring an entry to where it came from, through directories opened
//! beneath the root, never replacing anything there.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::{fs, io};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::budget::recount;
use super::index::TrashDir;
use super::list::plain;
use super::{Entry, TrashError, escaped, io_error};
use crate::policy::{Permission, Root, resolve};
use crate::store::TRASH_DIR;
use crate::sys::beneath::{beneath, open_dir, parents};

/// Where a restore put an entry.
#[derive(Debug)]
pub struct Restored {
    pub root: Arc<Root>,
    /// Root-relative, symlinks on the way resolved.
    pub path: PathBuf,
}

/// Puts `entry` back at its original path, or at `to` (root-relative, in
/// the entry's root), refusing if anything stands there. Missing parent
/// directories are created; the move never replaces anything, even if
/// something appears meanwhile. The entry then leaves its index, and its
/// stamp's directory and index go once nothing is left in them.
///
/// The destination goes through [`resolve`] like any path from the model:
/// confined to the root (no `..` above it, no symlink out of it), no denied
/// name (so never into `.mcp-trash`, never onto `.env`). It is resolved for
/// the weakest operation the root grants, so the permission check always
/// passes: the role bounds the model, and the operator restoring is not
/// the model. Confinement and the deny list do not depend on the
/// operation; what `Write` would add, refusing the root itself, the
/// occupied check here covers (the root always exists).
pub fn restore(
    roots: &[Arc<Root>],
    entry: &Entry,
    to: Option<&str>,
) -> Result<Restored, TrashError> {
    let root = &entry.root;
    let dest = match to {
        Some(path) => path.to_string(),
        None => entry
            .from
            .to_str()
            .ok_or_else(|| TrashError::NotUtf8 {
                root: root.name.clone(),
            })?
            .to_string(),
    };
    let op = root.perms.iter().next().unwrap_or(Permission::Read);
    let resolved = resolve(roots, &root.name, &dest, op).map_err(|d| TrashError::Refused {
        root: root.name.clone(),
        path: escaped(Path::new(&dest)),
        rule: d.rule,
        message: d.message,
    })?;
    let occupied = || TrashError::Occupied {
        root: root.name.clone(),
        path: escaped(Path::new(&dest)),
    };
    // `exists` follows a final symlink; a dangling one occupies the name too.
    let link_there = fs::symlink_metadata(root.path.join(&dest)).is_ok();
    if resolved.is_root() || resolved.exists() || link_there {
        return Err(occupied());
    }
    let rel = resolved.real_rel().to_path_buf();
    move_into_place(root, &entry.to, &rel).map_err(|e| match e {
        Moved::Occupied => occupied(),
        Moved::Failed(e) => io_error(
            root,
            format!("cannot move the entry to '{}'", escaped(&rel)),
            e,
        ),
    })?;
    if let Err(e) = forget(root, entry) {
        tracing::warn!(root = %root.name, stamp = %entry.stamp, "restored, but the trash index could not be updated: {e}");
    }
    if root.trash_max_bytes > 0
        && let Err(e) = recount(root)
    {
        tracing::warn!(root = %root.name, "restored, but the trash could not be counted again: {e}");
    }
    Ok(Restored {
        root: Arc::clone(root),
        path: rel,
    })
}

/// How a move into place failed.
#[derive(Debug)]
pub(super) enum Moved {
    /// Something stands at the destination: nothing was moved.
    Occupied,
    Failed(io::Error),
}

impl From<io::Error> for Moved {
    fn from(e: io::Error) -> Moved {
        Moved::Failed(e)
    }
}

/// Renames `from` to `to` (both root-relative, `to` with symlinks resolved),
/// through directories opened beneath the root without following any
/// symlink, creating `to`'s missing parents; never replacing what is at
/// `to` (`RENAME_NOREPLACE`), so a race cannot lose it.
pub(super) fn move_into_place(root: &Root, from: &Path, to: &Path) -> Result<(), Moved> {
    let (Some(from_name), Some(to_name)) = (from.file_name(), to.file_name()) else {
        return Err(Moved::Occupied);
    };
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let root_fd = rustix::fs::open(&root.path, flags, Mode::empty()).map_err(io::Error::from)?;
    let source = beneath(&root_fd, from.parent().unwrap_or(Path::new("")))?;
    let target = parents(&root_fd, to.parent().unwrap_or(Path::new("")))?;
    match crate::sys::rename::rename_noreplace(&source, from_name, &target, to_name) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) => Err(Moved::Occupied),
        Err(e) => Err(Moved::Failed(e.into())),
    }
}

/// Takes a restored entry out of its stamp: out of the index, and the
/// empty directories it leaves (its stamp's included) removed; the index
/// goes with the stamp's directory.
pub(super) fn forget(root: &Root, entry: &Entry) -> io::Result<()> {
    let Some(trash) = TrashDir::open(root)? else {
        return Ok(());
    };
    let index = trash.read_index(&entry.stamp)?.map(|mut index| {
        index
            .entries
            .retain(|e| plain(&e.to).as_deref() != Some(entry.to.as_path()));
        index
    });
    if let Some(below) = entry.to.strip_prefix(TRASH_DIR).ok().and_then(Path::parent) {
        remove_emptied(&trash, below);
    }
    match index {
        _ if !trash.has_dir(&entry.stamp) => trash.remove_index(&entry.stamp),
        Some(index) => trash.write_index(&entry.stamp, &index),
        None => Ok(()),
    }
}

/// Removes the directories `below` (a path below the trash, its first
/// name a stamp) and its parents up to the stamp's, deepest first, while
/// they are empty. Each is opened from the one above without following a
/// symlink and removed by name in it, so none is reached through a path.
pub(super) fn remove_emptied(trash: &TrashDir, below: &Path) {
    let names: Vec<&OsStr> = below.iter().collect();
    let mut dirs: Vec<OwnedFd> = Vec::new();
    for name in &names {
        let parent = dirs.last().map_or(trash.fd.as_fd(), AsFd::as_fd);
        match open_dir(parent, name) {
            Ok(dir) => dirs.push(dir),
            Err(_) => break,
        }
    }
    // Only what could be opened from the trash down is removed.
    let opened = dirs.len();
    dirs.truncate(opened.saturating_sub(1));
    for (i, name) in names[..opened].iter().enumerate().rev() {
        let parent = if i == 0 {
            trash.fd.as_fd()
        } else {
            dirs[i - 1].as_fd()
        };
        if rustix::fs::unlinkat(parent, *name, AtFlags::REMOVEDIR).is_err() {
            break;
        }
    }
}
