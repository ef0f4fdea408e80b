//! Breadth-first directory walk, entries sorted by name in each directory.
//!
//! Breadth-first makes a truncated result hold what lies closest to the start,
//! and sorting makes every run give the same order. Symlinks are reported but
//! never followed (no cycles, no detours). A directory that cannot be read is
//! counted and skipped, never fatal. Denied names never reach this code: the
//! host's filesystem does not return them from a directory read.

use std::collections::VecDeque;
use std::fs::{self, DirEntry};
use std::path::{Path, PathBuf};

use crate::Kind;

/// One entry met by the walk.
pub struct Entry {
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Depth below the start directory: its children are at depth 1.
    pub depth: u32,
    /// The entry's own type (a symlink is `Symlink`, whatever it points to).
    pub kind: Kind,
    /// The directory entry, for metadata without following symlinks.
    pub dir_entry: DirEntry,
}

/// What the visitor wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on (and descend into this entry if it is a directory within depth).
    Continue,
    /// Go on, but do not descend into this entry.
    Prune,
    /// End the walk now.
    Stop,
}

/// Counts a walk reports besides its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Directories read.
    pub dirs_read: u64,
    /// Directories that could not be read and were skipped.
    pub dirs_unreadable: u64,
    /// Whether the visitor stopped the walk early.
    pub stopped: bool,
}

/// Walks `start` (shown as `start_rel`, `.` for the root) breadth-first down to
/// `max_depth` levels, calling `visit` on every entry.
pub fn breadth_first(
    start: &Path,
    start_rel: &str,
    max_depth: u32,
    mut visit: impl FnMut(&Entry) -> Flow,
) -> Stats {
    let mut stats = Stats::default();
    let mut queue: VecDeque<(PathBuf, String, u32)> = VecDeque::new();
    queue.push_back((start.to_path_buf(), start_rel.to_string(), 0));
    while let Some((dir, dir_rel, depth)) = queue.pop_front() {
        let Ok(read) = fs::read_dir(&dir) else {
            stats.dirs_unreadable += 1;
            continue;
        };
        stats.dirs_read += 1;
        let mut entries: Vec<DirEntry> = read.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for dir_entry in entries {
            let name = dir_entry.file_name().to_string_lossy().into_owned();
            let rel = if dir_rel == "." {
                name
            } else {
                format!("{dir_rel}/{name}")
            };
            let kind = dir_entry
                .file_type()
                .map(|ft| Kind::of(ft, &dir_entry.path(), false))
                .unwrap_or(Kind::Unknown);
            let entry = Entry {
                rel,
                depth: depth + 1,
                kind,
                dir_entry,
            };
            match visit(&entry) {
                Flow::Stop => {
                    stats.stopped = true;
                    return stats;
                }
                Flow::Prune => {}
                Flow::Continue => {
                    if kind == Kind::Directory && depth + 1 < max_depth {
                        queue.push_back((entry.dir_entry.path(), entry.rel, depth + 1));
                    }
                }
            }
        }
    }
    stats
}
