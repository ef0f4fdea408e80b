//! Breadth-first directory walk, entries sorted by name in each directory.
//!
//! Breadth-first makes a truncated result hold what lies closest to the start,
//! and sorting makes every run give the same order. Symlinks are reported but
//! never followed (no cycles, no detours). A directory that cannot be read is
//! counted and skipped, never fatal. Denied names never reach this code: the
//! host's filesystem does not return them from a directory read.
//!
//! Directories are read with `wasi:filesystem` directly: each entry comes
//! with its type, and nothing more is asked per entry unless the visitor
//! asks for it ([`Entry::stat`]).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorStat, ErrorCode, OpenFlags, PathFlags,
};

use crate::{Kind, ToolError, io_error, shown, sys};

/// One entry met by the walk.
pub struct Entry<'a> {
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Depth below the start directory: its children are at depth 1.
    pub depth: u32,
    /// The entry's own type (a symlink is `Symlink`, whatever it points to).
    pub kind: Kind,
    /// The directory being read (open, and where the guest finds it), and
    /// the entry's name in it.
    dir: &'a Descriptor,
    dir_full: &'a Path,
    name: &'a str,
}

impl Entry<'_> {
    /// Where the guest finds the entry by path (built on demand: most
    /// visitors use the open directory instead).
    pub fn full(&self) -> PathBuf {
        self.dir_full.join(self.name)
    }

    /// The entry's own metadata (a symlink's, not its target's).
    pub fn stat(&self) -> Option<DescriptorStat> {
        self.dir.stat_at(PathFlags::empty(), self.name).ok()
    }

    /// Opens the entry for reading, relative to its directory (a symlink
    /// is not followed: opening one fails).
    pub fn open(&self) -> Result<Descriptor, ErrorCode> {
        self.dir.open_at(
            PathFlags::empty(),
            self.name,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
    }
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
    /// Entries skipped because their directory could not say what they are
    /// (a name that is not UTF-8, which WASI cannot carry).
    pub entries_skipped: u64,
    /// Whether the visitor stopped the walk early.
    pub stopped: bool,
}

impl Stats {
    /// What a result must say about the parts of the tree the walk could
    /// not see.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.dirs_unreadable > 0 {
            notes.push(format!(
                "{} directories could not be read and were skipped",
                self.dirs_unreadable
            ));
        }
        if self.entries_skipped > 0 {
            notes.push(format!(
                "{} directory entries could not be read and were skipped (a name that is \
                 not UTF-8 cannot be shown)",
                self.entries_skipped
            ));
        }
        notes
    }
}

/// Most failed entries in a row before a directory read is given up.
const MAX_FAILED_ENTRIES: u64 = 64;

/// The sorted entries of a directory, `(name, kind)`, and how many entries
/// failed (skipped, the read goes on past them).
fn entries(dir: &Descriptor) -> Option<(Vec<(String, Kind)>, u64)> {
    let stream = dir.read_directory().ok()?;
    let mut entries = Vec::new();
    let (mut failed, mut in_a_row) = (0, 0);
    loop {
        match stream.read_directory_entry() {
            Ok(Some(e)) => {
                entries.push((e.name, Kind::from_wasi(Some(e.type_))));
                in_a_row = 0;
            }
            Ok(None) => break,
            Err(_) => {
                failed += 1;
                in_a_row += 1;
                if in_a_row == MAX_FAILED_ENTRIES {
                    break;
                }
            }
        }
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Some((entries, failed))
}

/// Walks `start` (root-relative `start_rel`, `.` for the root) breadth-first down to
/// `max_depth` levels, calling `visit` on every entry. Symlinks on the way to
/// `start` are followed (the host has checked them); none below it are.
/// Fails only if `start` itself cannot be read.
pub fn breadth_first(
    start: &Path,
    start_rel: &str,
    max_depth: u32,
    mut visit: impl FnMut(&Entry) -> Flow,
) -> Result<Stats, ToolError> {
    let mut stats = Stats::default();
    let mut queue: VecDeque<(PathBuf, String, u32)> = VecDeque::new();
    queue.push_back((start.to_path_buf(), start_rel.to_string(), 0));
    while let Some((dir_full, dir_rel, depth)) = queue.pop_front() {
        let read = sys::open_dir(&dir_full, depth == 0)
            .ok()
            .and_then(|dir| entries(&dir).map(|entries| (dir, entries)));
        let Some((dir, (entries, failed))) = read else {
            if depth == 0 {
                return Err(start_error(start, start_rel));
            }
            stats.dirs_unreadable += 1;
            continue;
        };
        stats.dirs_read += 1;
        stats.entries_skipped += failed;
        for (name, kind) in &entries {
            let rel = if dir_rel == "." {
                name.clone()
            } else {
                format!("{dir_rel}/{name}")
            };
            let entry = Entry {
                rel,
                depth: depth + 1,
                kind: *kind,
                dir: &dir,
                dir_full: &dir_full,
                name,
            };
            match visit(&entry) {
                Flow::Stop => {
                    stats.stopped = true;
                    return Ok(stats);
                }
                Flow::Prune => {}
                Flow::Continue => {
                    if *kind == Kind::Directory && depth + 1 < max_depth {
                        queue.push_back((entry.full(), entry.rel, depth + 1));
                    }
                }
            }
        }
    }
    Ok(stats)
}

/// Why the start directory (`rel`) cannot be read, in the words of
/// `io_error` (asked again through std: only on this failure path).
fn start_error(start: &Path, rel: &str) -> ToolError {
    std::fs::read_dir(start).err().map_or_else(
        || ToolError::Io(format!("'{}' could not be read", shown(rel))),
        |e| io_error(rel, &e),
    )
}
