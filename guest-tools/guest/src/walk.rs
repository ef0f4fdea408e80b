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
//!
//! With [`IgnoreFiles::Apply`], the walk tells the visitor which entries the
//! root's ignore files exclude ([`Entry::ignored`], see [`crate::ignores`]):
//! the rules of the directories above the start are read first, then a
//! directory's `.gitignore` and `.ignore` are taken from the entries its read
//! returned (no open is tried where there is none). The visitor decides what
//! an ignored entry costs: `Prune` makes an ignored directory one match on
//! its name. Below an ignored directory the visitor lets it descend into,
//! everything is ignored (as git sees it), and no ignore file is read there.
//! A start that is itself ignored was named: nothing below it is reported
//! ignored ([`Stats::start_ignored`]).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorStat, ErrorCode, OpenFlags, PathFlags,
};

use crate::ignores::{self, Loader, Rules};
use crate::sys::{self, MAX_FAILED_ENTRIES};
use crate::{Kind, ToolError, io_error, shown};

/// One entry met by the walk.
pub struct Entry<'a> {
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Depth below the start directory: its children are at depth 1.
    pub depth: u32,
    /// Position in the walk, from 0: entries met before it (what a
    /// [`crate::page::Cursor`] counts).
    pub index: u64,
    /// The entry's own type (a symlink is `Symlink`, whatever it points to).
    pub kind: Kind,
    /// Whether the root's ignore files exclude it, or a directory above it
    /// within the walk (always false unless the walk applies them).
    pub ignored: bool,
    /// The directory being read (open, and where the guest finds it), and
    /// where the entry's name starts in `rel` (its last component).
    dir: &'a Descriptor,
    dir_full: &'a Path,
    name_at: usize,
}

impl Entry<'_> {
    /// The entry's name in its directory.
    fn name(&self) -> &str {
        &self.rel[self.name_at..]
    }

    /// Where the guest finds the entry by path (built on demand: most
    /// visitors use the open directory instead).
    pub fn full(&self) -> PathBuf {
        self.dir_full.join(self.name())
    }

    /// The entry's own metadata (a symlink's, not its target's).
    pub fn stat(&self) -> Option<DescriptorStat> {
        self.dir.stat_at(PathFlags::empty(), self.name()).ok()
    }

    /// Opens the entry for reading, relative to its directory (a symlink
    /// is not followed: opening one fails).
    pub fn open(&self) -> Result<Descriptor, ErrorCode> {
        self.dir.open_at(
            PathFlags::empty(),
            self.name(),
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
    /// Ignore files that exist but could not be read: their rules were
    /// not applied.
    pub ignore_files_unreadable: u64,
    /// Whether the start directory is itself ignored (or lies in an
    /// ignored directory): then no entry is reported ignored, since the
    /// start was named and what is below it is reachable as it is.
    pub start_ignored: bool,
    /// Whether the visitor stopped the walk early.
    pub stopped: bool,
}

/// Whether a walk applies the root's ignore files.
#[derive(Clone, Copy)]
pub enum IgnoreFiles<'a> {
    /// Every entry is reported as not ignored; no ignore file is read.
    Off,
    /// Entries are matched against the ignore files inside the root, which
    /// is mounted at `root`.
    Apply { root: &'a Path },
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
        if self.start_ignored {
            notes.push(
                "the directory named is itself excluded by the root's .gitignore/.ignore \
                 files: everything below it was included, since it was named"
                    .to_string(),
            );
        }
        if self.ignore_files_unreadable > 0 {
            notes.push(format!(
                "{} ignore files (.gitignore, .ignore) could not be used (unreadable, \
                 larger than {} KiB, or too many complex patterns to build): their rules \
                 were not applied",
                self.ignore_files_unreadable,
                ignores::MAX_FILE_BYTES / 1024
            ));
        }
        notes
    }
}

/// The sorted entries of a directory, `(name, kind)`, and how many entries
/// failed (skipped, the read goes on past them).
fn entries(dir: &Descriptor) -> Option<(Vec<(String, Kind)>, u64)> {
    let stream = dir.read_directory().ok()?;
    let mut entries = Vec::new();
    let (mut failed, mut in_a_row) = (0, 0);
    loop {
        match stream.read_directory_entry() {
            Ok(Some(e)) => {
                entries.push((sort_key(&e.name), e.name, Kind::from_wasi(Some(e.type_))));
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
    // Most names differ in their first bytes: compared as one number first.
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let entries = entries
        .into_iter()
        .map(|(_, name, kind)| (name, kind))
        .collect();
    Some((entries, failed))
}

/// The first 8 bytes of `name`, big-endian, zeros after a shorter name: in
/// the order of the names themselves where they differ (a name holds no
/// NUL, so a shorter name that is a prefix of another sorts first, as a
/// byte comparison puts it), equal where only the bytes after them can
/// tell.
fn sort_key(name: &str) -> u64 {
    let mut first = [0u8; 8];
    let n = name.len().min(8);
    first[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_be_bytes(first)
}

/// A directory waiting to be read: where the guest finds it, its
/// root-relative path, its depth, the ignore rules above it and whether it
/// is itself ignored.
struct Pending {
    full: PathBuf,
    rel: String,
    depth: u32,
    rules: Option<Rc<Rules>>,
    ignored: bool,
}

/// Walks `start` (root-relative `start_rel`, `.` for the root) breadth-first down to
/// `max_depth` levels, calling `visit` on every entry. Symlinks on the way to
/// `start` are followed (the host has checked them); none below it are.
/// `start` itself is never ignored: it was named. Fails only if `start`
/// itself cannot be read.
pub fn breadth_first(
    start: &Path,
    start_rel: &str,
    max_depth: u32,
    ignore_files: IgnoreFiles,
    mut visit: impl FnMut(&Entry) -> Flow,
) -> Result<Stats, ToolError> {
    let mut stats = Stats::default();
    let mut loader = Loader::default();
    let (apply, rules) = match ignore_files {
        IgnoreFiles::Off => (false, None),
        IgnoreFiles::Apply { root } => match loader.ancestors(root, start_rel) {
            Ok(rules) => (true, rules),
            Err(ignores::StartIgnored) => {
                stats.start_ignored = true;
                (false, None)
            }
        },
    };
    let mut index = 0;
    let mut queue: VecDeque<Pending> = VecDeque::new();
    queue.push_back(Pending {
        full: start.to_path_buf(),
        rel: start_rel.to_string(),
        depth: 0,
        rules,
        ignored: false,
    });
    while let Some(pending) = queue.pop_front() {
        let Pending {
            full: dir_full,
            rel: dir_rel,
            depth,
            rules,
            ignored: dir_ignored,
        } = pending;
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
        // Inside an ignored directory everything is ignored: its own ignore
        // files cannot change that.
        let rules = if apply && !dir_ignored {
            let present: Vec<&str> = ignores::FILE_NAMES
                .into_iter()
                .filter(|name| {
                    entries
                        .binary_search_by(|(n, _)| n.as_str().cmp(name))
                        .is_ok_and(|i| entries[i].1 == Kind::File)
                })
                .collect();
            loader.for_dir(&dir, &dir_rel, &present, rules)
        } else {
            rules
        };
        for (name, kind) in entries {
            let name_len = name.len();
            // The name itself is the path of an entry of the root.
            let rel = if dir_rel == "." {
                name
            } else {
                let mut rel = String::with_capacity(dir_rel.len() + 1 + name.len());
                rel.push_str(&dir_rel);
                rel.push('/');
                rel.push_str(&name);
                rel
            };
            let ignored = apply
                && (dir_ignored
                    || Rules::is_ignored(rules.as_ref(), &rel, kind == Kind::Directory));
            let entry = Entry {
                name_at: rel.len() - name_len,
                rel,
                depth: depth + 1,
                index,
                kind,
                ignored,
                dir: &dir,
                dir_full: &dir_full,
            };
            index += 1;
            match visit(&entry) {
                Flow::Stop => {
                    stats.stopped = true;
                    stats.ignore_files_unreadable = loader.unreadable;
                    return Ok(stats);
                }
                Flow::Prune => {}
                Flow::Continue => {
                    if kind == Kind::Directory && depth + 1 < max_depth {
                        queue.push_back(Pending {
                            full: entry.full(),
                            rel: entry.rel,
                            depth: depth + 1,
                            rules: rules.clone(),
                            ignored,
                        });
                    }
                }
            }
        }
    }
    stats.ignore_files_unreadable = loader.unreadable;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Wherever the keys of two names differ, they order them as the names
    /// themselves.
    #[test]
    fn sort_keys_order_as_names() {
        let names = [
            "",
            "a",
            "a.",
            "a.b",
            "ab",
            "abcdefgh",
            "abcdefgh1",
            "abcdefgi",
            "abcdefg",
            "B",
            "b",
            "f0001.txt",
            "f0010.txt",
            "f001.txt",
            "é",
            "éa",
            "z",
            "~",
            "Ω",
        ];
        for a in names {
            for b in names {
                let (ka, kb) = (sort_key(a), sort_key(b));
                if ka != kb {
                    assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }
}
