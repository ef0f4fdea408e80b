//! The trash directory opened beneath its root, and the index the host
//! writes beside each call's entry (`.mcp-trash/<stamp>.json`): what was kept,
//! from where. Written atomically, under the root's index lock; never
//! followed through a symlink.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::{fs, io};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::{INDEX_SUFFIX, MAX_INDEX_BYTES, TrashError, io_error, stamp_time};
use crate::policy::{Permission, Root};
use crate::store::{TRASH_DIR, locks};
use crate::sys::beneath::beneath;

/// `.mcp-trash/<stamp>.json`: what one call kept in one root, and what it
/// put in place there (for `trash undo`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Index {
    pub(super) entries: Vec<IndexEntry>,
    /// The tool that made the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tool: Option<String>,
    /// What the call put in place, as it was once published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) put: Vec<crate::store::publish::PutEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct IndexEntry {
    /// Root-relative path the entry was taken from.
    pub(super) from: String,
    /// Root-relative path in the trash (`.mcp-trash/<stamp>/…`).
    pub(super) to: String,
}

pub(super) fn index_name(stamp: &str) -> String {
    format!("{stamp}{INDEX_SUFFIX}")
}

/// The temporary file an index is written to before it is renamed into
/// place: `.<stamp>.json.<pid>.tmp`.
pub(super) fn temp_name(stamp: &str, pid: u32) -> String {
    format!(".{}.{pid}.tmp", index_name(stamp))
}

/// Whether `name` is one [`temp_name`] makes.
pub(super) fn is_temp_name(name: &str) -> bool {
    let shaped = || {
        let (index, pid) = name
            .strip_prefix('.')?
            .strip_suffix(".tmp")?
            .rsplit_once('.')?;
        let stamp = index.strip_suffix(INDEX_SUFFIX)?;
        let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
        (digits && stamp_time(stamp).is_some()).then_some(())
    };
    shaped().is_some()
}

/// `<root>/.mcp-trash`, opened beneath the root without following a
/// symlink; everything below it is reached through this descriptor.
pub(super) struct TrashDir {
    pub(super) fd: OwnedFd,
}

impl TrashDir {
    /// `None` if the root (or its trash) is not there.
    pub(super) fn open(root: &Root) -> io::Result<Option<TrashDir>> {
        let dir = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        let root_fd = match rustix::fs::open(&root.path, dir, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match beneath(&root_fd, Path::new(TRASH_DIR)) {
            Ok(fd) => Ok(Some(TrashDir { fd })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`TrashDir::open`], making `.mcp-trash` first where it is missing and
    /// the server may write in the root (as a lock or a count written there
    /// would). `None` where the root, or a trash it may not make, is not
    /// there.
    pub(super) fn open_or_make(root: &Root) -> io::Result<Option<TrashDir>> {
        let root_fd = match crate::sys::beneath::open_root(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            opened => opened?,
        };
        match beneath(&root_fd, Path::new(TRASH_DIR)) {
            Ok(fd) => Ok(Some(TrashDir { fd })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !root.perms.contains(Permission::Write) {
                    return Ok(None);
                }
                let fd = crate::sys::beneath::make_dir(root_fd.as_fd(), OsStr::new(TRASH_DIR))?;
                Ok(Some(TrashDir { fd }))
            }
            Err(e) => Err(e),
        }
    }

    /// [`TrashDir::open`], saying which way a trash that cannot be opened
    /// is wrong.
    pub(super) fn open_checked(root: &Root) -> Result<Option<TrashDir>, TrashError> {
        TrashDir::open(root).map_err(|e| match Errno::from_io_error(&e) {
            // Either for a symlink, as the kernel pleases; looked at only
            // to say which.
            Some(Errno::LOOP | Errno::NOTDIR) => {
                match fs::symlink_metadata(root.path.join(TRASH_DIR)) {
                    Ok(meta) if meta.file_type().is_symlink() => TrashError::Symlink {
                        root: root.name.clone(),
                        path: TRASH_DIR.into(),
                    },
                    _ => TrashError::NotADirectory {
                        root: root.name.clone(),
                    },
                }
            }
            _ => io_error(root, format!("cannot open {TRASH_DIR}"), e),
        })
    }

    /// Whether the stamp's directory is there (and is one).
    pub(super) fn has_dir(&self, stamp: &str) -> bool {
        rustix::fs::statat(&self.fd, stamp, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| crate::sys::stat::file_type(&st).is_dir())
    }

    /// The stamp's index, `None` if it has none.
    pub(super) fn read_index(&self, stamp: &str) -> io::Result<Option<Index>> {
        // Non-blocking: a FIFO planted under the name must not hang us.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, index_name(stamp), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        let mut text = Vec::new();
        file.take(MAX_INDEX_BYTES + 1).read_to_end(&mut text)?;
        if text.len() as u64 > MAX_INDEX_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "too large"));
        }
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Replaces the stamp's index atomically: a temporary file beside it
    /// (exclusive, not through a symlink), created and written through one
    /// descriptor, then a rename. On any failure the temporary file is
    /// removed, even when the open itself failed: the kernel may create
    /// the file and then refuse to open it for writing (Landlock without
    /// the write right). Flushed to disk (the file before its rename, the
    /// trash directory after): `trash undo` reads what a call put in place
    /// from here, and a call answered must be undoable after a power cut.
    pub(super) fn write_index(&self, stamp: &str, index: &Index) -> io::Result<()> {
        let text = serde_json::to_vec(index).map_err(io::Error::other)?;
        let temp = temp_name(stamp, std::process::id());
        // A leftover of a process that had this id and died mid-write.
        let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = match rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600)) {
            // Someone else's file under our name: not ours to remove.
            Err(Errno::EXIST) => return Err(Errno::EXIST.into()),
            Err(e) => Err(e.into()),
            Ok(fd) => {
                let mut file = File::from(fd);
                file.write_all(&text)
                    .and_then(|()| file.sync_data())
                    .and_then(|()| {
                        rustix::fs::renameat(&self.fd, &temp, &self.fd, index_name(stamp))?;
                        rustix::fs::fsync(&self.fd).map_err(Into::into)
                    })
            }
        };
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        }
        written
    }

    pub(super) fn remove_index(&self, stamp: &str) -> io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, index_name(stamp), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Records in `root`'s trash what a call stamped `stamp` kept there, added
/// to an index already there (the trash tests build their entries with it;
/// a published call's index is [`record_published`]'s).
#[cfg(test)]
pub fn record(root: &Root, stamp: &str, kept: &[crate::store::Kept]) -> io::Result<()> {
    let entries = kept
        .iter()
        .filter(|k| k.root == root.name)
        .map(|k| IndexEntry {
            from: k.from.clone(),
            to: k.to.clone(),
        });
    let Some(trash) = TrashDir::open(root)? else {
        return Ok(());
    };
    let _held = locks::hold_in(trash.fd.as_fd(), root, &format!("index {stamp}"));
    let mut index = trash.read_index(stamp)?.unwrap_or_default();
    index.entries.extend(entries);
    trash.write_index(stamp, &index)
}

/// Records in each root's trash what a published call `stamp` of `tool`
/// kept and put there (an index for every root it changed, so that `trash
/// undo` finds even a call that only made new files). A failure is logged
/// and never fails the call: what was kept is in the trash regardless.
pub fn record_published(
    roots: &[Arc<Root>],
    stamp: &str,
    tool: &str,
    published: &crate::store::publish::Published,
) {
    for root in roots {
        let kept: Vec<IndexEntry> = published
            .kept
            .iter()
            .chain(&published.displaced)
            .filter(|k| k.root == root.name)
            .map(|k| IndexEntry {
                from: k.from.clone(),
                to: k.to.clone(),
            })
            .collect();
        let put: Vec<_> = published
            .put
            .iter()
            .filter(|p| p.root == root.name)
            .cloned()
            .collect();
        if kept.is_empty() && put.is_empty() {
            continue;
        }
        let written = (|| {
            let Some(trash) = TrashDir::open_or_make(root)? else {
                return Ok(());
            };
            let _held = locks::hold_in(trash.fd.as_fd(), root, &format!("index {stamp}"));
            let mut index = trash.read_index(stamp)?.unwrap_or_default();
            index.entries.extend(kept);
            index.put.extend(put);
            if !tool.is_empty() {
                index.tool = Some(tool.to_string());
            }
            trash.write_index(stamp, &index)
        })();
        if let Err(e) = written {
            tracing::warn!(root = %root.name, stamp, "cannot write the trash index: {e}");
        }
    }
}

/// Records in the trash index what publishes finished from their journal
/// kept and put (see [`crate::store::staging::sweep`]).
pub fn record_recovered(roots: &[Arc<Root>], recovered: &[crate::store::publish::Recovered]) {
    for r in recovered {
        record_published(roots, &r.stamp, "", &r.published);
    }
}
