//! Listing the trash: each stamp directory read through the trash's own
//! descriptor, by its index where it has one and leaf by leaf where not,
//! with sizes and ages. Reads only.

use std::collections::{BTreeMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustix::fs::{AtFlags, FileType, Stat};

use super::index::{IndexEntry, TrashDir, is_temp_name};
use super::{
    Entry, INDEX_SUFFIX, Now, SIZE_FILE, TrashError, escaped, io_error, select, stamp_time,
};
use crate::policy::Root;
use crate::store::TRASH_DIR;
use crate::store::locks::LOCK_FILE;
use crate::store::staging::STAGING_DIR;
use crate::sys::beneath::{beneath, names_in, open_dir};

/// What [`list`] found.
#[derive(Debug, Default)]
pub struct Listing {
    /// Oldest first; entries of one call in root order, then in the order
    /// they were kept.
    pub entries: Vec<Entry>,
    /// Stamp directories not listed because their call may still be
    /// running (no index yet, younger than the in-flight window): their
    /// entries, and so their IDs, are not final until it ends.
    pub in_flight: usize,
}

/// Every entry in the trash of `only` (or of every root), but those of
/// calls that may still be running at `now`.
pub fn list(roots: &[Arc<Root>], only: Option<&str>, now: Now) -> Result<Listing, TrashError> {
    let mut listing = Listing::default();
    for root in select(roots, only)? {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        for stamp in contents(root, &trash)?.stamps {
            if stamp.in_flight(now) {
                listing.in_flight += 1;
            } else {
                listing.entries.extend(entries_of(root, &trash, &stamp));
            }
        }
    }
    // Stable: within a stamp, roots stay in config order.
    listing.entries.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(listing)
}

/// A call's part of a trash: its directory, its index, or both.
pub(super) struct Stamp {
    pub(super) name: String,
    pub(super) at: SystemTime,
    pub(super) dir: bool,
    pub(super) index: bool,
}

impl Stamp {
    /// Whether its call may still be adding to it at `now`: it has a
    /// directory but no index yet, and is younger than the in-flight window.
    pub(super) fn in_flight(&self, now: Now) -> bool {
        self.dir && !self.index && now.since(self.at) < now.in_flight
    }
}

/// What a trash holds at its top.
pub(super) struct Contents {
    /// In order.
    pub(super) stamps: Vec<Stamp>,
    /// Temporary index files ([`temp_name`]): one still being written, or
    /// the leftover of a write that failed or a process that died.
    pub(super) temps: Vec<OsString>,
}

/// The stamps and temporary index files in `root`'s trash. Other names are
/// left alone, with a warning; a stamp directory or index that is a
/// symlink is refused.
pub(super) fn contents(root: &Root, trash: &TrashDir) -> Result<Contents, TrashError> {
    let unreadable = |e| io_error(root, format!("cannot read {TRASH_DIR}"), e);
    let mut found: BTreeMap<String, Stamp> = BTreeMap::new();
    let mut temps = Vec::new();
    for (raw, ty) in names_in(&trash.fd).map_err(unreadable)? {
        let shown = || format!("{TRASH_DIR}/{}", escaped(Path::new(&raw)));
        let Some(name) = raw.to_str() else {
            tracing::warn!(root = %root.name, "{}: not a trash entry; left alone", shown());
            continue;
        };
        if is_temp_name(name) {
            temps.push(raw.clone());
            continue;
        }
        // The host's own: no entries (see `staging` and `locks`).
        if name == STAGING_DIR || name == LOCK_FILE || name == SIZE_FILE {
            continue;
        }
        let (stamp, is_index) = match name.strip_suffix(INDEX_SUFFIX) {
            Some(stamp) => (stamp, true),
            None => (name, false),
        };
        let Some(at) = stamp_time(stamp) else {
            tracing::warn!(root = %root.name, "{}: not a trash entry; left alone", shown());
            continue;
        };
        if ty == FileType::Symlink {
            return Err(TrashError::Symlink {
                root: root.name.clone(),
                path: shown(),
            });
        }
        let entry = found.entry(stamp.to_string()).or_insert(Stamp {
            name: stamp.to_string(),
            at,
            dir: false,
            index: false,
        });
        match (is_index, ty) {
            (true, FileType::RegularFile) => entry.index = true,
            (false, FileType::Directory) => entry.dir = true,
            _ => {
                tracing::warn!(root = %root.name, "{}: not a file or directory as expected; left alone", shown())
            }
        }
    }
    Ok(Contents {
        stamps: found.into_values().collect(),
        temps,
    })
}

/// The entries of one stamp that still exist: its index's, or, without a
/// usable index, every leaf below its directory.
pub(super) fn entries_of(root: &Arc<Root>, trash: &TrashDir, stamp: &Stamp) -> Vec<Entry> {
    if !stamp.dir {
        return Vec::new();
    }
    let base = Path::new(TRASH_DIR).join(&stamp.name);
    let index = if stamp.index {
        match trash.read_index(&stamp.name) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(root = %root.name, stamp = %stamp.name, "unreadable trash index, listing the entry file by file: {e}");
                None
            }
        }
    } else {
        None
    };
    let kept: Vec<(PathBuf, PathBuf)> = match index {
        Some(index) => index
            .entries
            .iter()
            .filter_map(|e| {
                let checked = checked(&stamp.name, e);
                if checked.is_none() {
                    tracing::warn!(root = %root.name, stamp = %stamp.name, "ignoring a malformed trash index entry");
                }
                checked
            })
            .collect(),
        None => {
            let mut leaves = Vec::new();
            match open_dir(trash.fd.as_fd(), OsStr::new(&stamp.name)) {
                Ok(dir) => leaves_below(root, &dir, &base, Path::new(""), &mut leaves),
                Err(e) => {
                    tracing::warn!(root = %root.name, "cannot read {}: {e}; skipped", escaped(&base))
                }
            }
            leaves
                .into_iter()
                .map(|below| (below.clone(), base.join(below)))
                .collect()
        }
    };
    let mut seen = HashSet::new();
    kept.into_iter()
        .filter(|(_, to)| seen.insert(to.clone()))
        .filter_map(|(from, to)| {
            let size = size_of(trash, to.strip_prefix(TRASH_DIR).ok()?)?;
            Some(Entry::new(root, stamp, from, to, size))
        })
        .collect()
}

/// An index entry's paths if they are what the host writes: plain
/// relative paths, `to` below the stamp's directory.
pub(super) fn checked(stamp: &str, entry: &IndexEntry) -> Option<(PathBuf, PathBuf)> {
    let from = plain(&entry.from)?;
    let to = plain(&entry.to)?;
    let below = to.strip_prefix(Path::new(TRASH_DIR).join(stamp)).ok()?;
    (!below.as_os_str().is_empty()).then_some((from, to))
}

/// `s` as a relative path of plain names (no `..`, `.`, root or NUL), in
/// its normal spelling; `None` if it is anything else or empty.
pub(super) fn plain(s: &str) -> Option<PathBuf> {
    if s.contains('\0') {
        return None;
    }
    let path: PathBuf = Path::new(s)
        .components()
        .map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!path.as_os_str().is_empty()).then_some(path)
}

/// Every file, symlink, other non-directory, and empty directory below
/// `dir` (relative to the walk's start, `rel` being `dir`'s; `base` is the
/// start's, for warnings), in name order, never following a symlink. A
/// directory that cannot be read is skipped with a warning.
pub(super) fn leaves_below(
    root: &Root,
    dir: &OwnedFd,
    base: &Path,
    rel: &Path,
    out: &mut Vec<PathBuf>,
) {
    let unreadable = |e: &dyn std::fmt::Display| {
        tracing::warn!(root = %root.name, "cannot read {}: {e}; skipped", escaped(&base.join(rel)));
    };
    let items = match names_in(dir) {
        Ok(items) => items,
        Err(e) => return unreadable(&e),
    };
    if items.is_empty() && !rel.as_os_str().is_empty() {
        out.push(rel.to_path_buf());
    }
    for (name, ty) in items {
        if ty != FileType::Directory {
            out.push(rel.join(name));
            continue;
        }
        match open_dir(dir.as_fd(), &name) {
            Ok(sub) => leaves_below(root, &sub, base, &rel.join(&name), out),
            Err(e) => unreadable(&io::Error::from(e)),
        }
    }
}

/// Bytes held at `rel` below the trash, as [`Entry::size`] says; `None` if
/// nothing is there, or a name on the way is not a directory or is a
/// symlink (the last name may be one: it holds nothing).
pub(super) fn size_of(trash: &TrashDir, rel: &Path) -> Option<u64> {
    let name = rel.file_name()?;
    let parent = beneath(&trash.fd, rel.parent().unwrap_or(Path::new(""))).ok()?;
    let st = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(match crate::sys::stat::file_type(&st) {
        FileType::RegularFile => file_size(&st),
        FileType::Directory => open_dir(parent.as_fd(), name).map_or(0, |dir| size_in(&dir)),
        _ => 0,
    })
}

/// Bytes of every regular file below `dir`; symlinks are not followed and
/// what cannot be read counts for nothing.
pub(super) fn size_in(dir: &OwnedFd) -> u64 {
    let size = |(name, ty): (OsString, FileType)| match ty {
        FileType::RegularFile => {
            rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW).map_or(0, |st| file_size(&st))
        }
        FileType::Directory => open_dir(dir.as_fd(), &name).map_or(0, |sub| size_in(&sub)),
        _ => 0,
    };
    names_in(dir)
        .unwrap_or_default()
        .into_iter()
        .map(size)
        .sum()
}

pub(super) fn file_size(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}
