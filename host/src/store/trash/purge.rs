//! Purging entries for good: the operator's erase, by ID or by age, and the
//! left-overs of interrupted index writes. The model never reaches it: the
//! command line does.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use super::budget::recount;
use super::index::{TrashDir, record_recovered};
use super::list::{Stamp, contents, entries_of};
use super::{Entry, Now, TrashError, escaped, io_error, select};
use crate::policy::Root;
use crate::store::staging::{STAGING_DIR, Swept};
use crate::store::{TRASH_DIR, staging};
use crate::sys::beneath::remove_below;

/// What a purge removed (or, dry, would remove).
#[derive(Debug, Default)]
pub struct Purged {
    /// The entries, oldest first.
    pub entries: Vec<Entry>,
    /// Stamp directories removed.
    pub dirs: usize,
    /// Stamp directories left because their call may still be running
    /// (no index yet, younger than the in-flight window).
    pub in_flight: usize,
    /// Temporary index files removed: leftovers of index writes that
    /// failed, older than the in-flight window.
    pub temps: usize,
    /// What servers that are gone left in the staging areas.
    pub staged: Swept,
}

/// Removes from the trash of `only` (or of every root) each call's part
/// whose stamp is at least `older_than` before `now`: its directory, whole
/// ([`remove_below`]: symlinks are removed, never what they point to), and
/// its index. A stamp directory without an index that is younger than the
/// in-flight window is left: its call may still be moving things into it,
/// and removing them under it would lose them. Temporary index files last
/// changed before the in-flight window are removed too, whatever their
/// age against `older_than`: they are no entry, only litter.
pub fn purge(
    roots: &[Arc<Root>],
    only: Option<&str>,
    older_than: Duration,
    now: Now,
    dry_run: bool,
) -> Result<Purged, TrashError> {
    let mut purged = Purged::default();
    for root in select(roots, only)? {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        let contents = contents(root, &trash)?;
        for stamp in contents.stamps {
            if now.since(stamp.at) < older_than {
                continue;
            }
            if stamp.in_flight(now) {
                purged.in_flight += 1;
                continue;
            }
            let entries = entries_of(root, &trash, &stamp);
            if !dry_run && let Err(e) = remove_stamp(root, &trash, &stamp) {
                // One stamp that cannot go (a tree too deep for the open
                // file limit, say) stops no other.
                tracing::warn!("{e}; the other entries are purged");
                continue;
            }
            purged.dirs += usize::from(stamp.dir);
            purged.entries.extend(entries);
        }
        for temp in contents.temps {
            purged.temps += usize::from(remove_stale_temp(root, &trash, &temp, now, dry_run)?);
        }
        // The count beside servers on this root follows what went.
        if !dry_run
            && root.trash_max_bytes > 0
            && let Err(e) = recount(root)
        {
            tracing::warn!(root = %root.name, "cannot count the trash again: {e}");
        }
        // One root's staging area that cannot be cleared stops no other.
        match staging::sweep(root, dry_run) {
            Ok(swept) => {
                record_recovered(std::slice::from_ref(root), &swept.recovered);
                purged.staged.servers += swept.servers;
                purged.staged.recovered.extend(swept.recovered);
            }
            Err(e) => {
                tracing::warn!(root = %root.name, "cannot clear {TRASH_DIR}/{STAGING_DIR}: {e}")
            }
        }
    }
    purged.entries.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(purged)
}

/// Removes the temporary index file `name` if it was last changed before
/// the in-flight window (dry: says whether it would). A younger one may be
/// an index being written right now.
pub(super) fn remove_stale_temp(
    root: &Root,
    trash: &TrashDir,
    name: &OsStr,
    now: Now,
    dry_run: bool,
) -> Result<bool, TrashError> {
    let shown = format!("{TRASH_DIR}/{}", escaped(Path::new(name)));
    let st = match rustix::fs::statat(&trash.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(io_error(root, format!("cannot look at {shown}"), e.into())),
    };
    let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(st.st_mtime.try_into().unwrap_or(0));
    if now.since(changed) < now.in_flight {
        return Ok(false);
    }
    if !dry_run {
        match rustix::fs::unlinkat(&trash.fd, name, AtFlags::empty()) {
            Ok(()) => {}
            Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_error(root, format!("cannot remove {shown}"), e.into())),
        }
    }
    Ok(true)
}

/// Removes a stamp's directory (refused if it is a symlink) and then its
/// index, by name in the trash's descriptor.
pub(super) fn remove_stamp(root: &Root, trash: &TrashDir, stamp: &Stamp) -> Result<(), TrashError> {
    let shown = format!("{TRASH_DIR}/{}", stamp.name);
    if stamp.dir {
        let name = OsStr::new(&stamp.name);
        match rustix::fs::statat(&trash.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if crate::sys::stat::file_type(&st) == FileType::Symlink => {
                return Err(TrashError::Symlink {
                    root: root.name.clone(),
                    path: shown,
                });
            }
            Ok(st) if crate::sys::stat::file_type(&st) == FileType::Directory => {
                remove_below(trash.fd.as_fd(), name)
                    .map_err(|e| io_error(root, format!("cannot remove {shown}"), e))?
            }
            Ok(_) | Err(Errno::NOENT) => {}
            Err(e) => return Err(io_error(root, format!("cannot look at {shown}"), e.into())),
        }
    }
    if stamp.index {
        trash
            .remove_index(&stamp.name)
            .map_err(|e| io_error(root, format!("cannot remove {shown}.json"), e))?;
    }
    Ok(())
}
