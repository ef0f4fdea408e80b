//! Publishing a call's changes: the one place where what a component
//! changed reaches the user's files, and where what it replaced or removed
//! is kept.
//!
//! A component never changes a root while it runs: the policing filesystem
//! stages its changes (`runtime::fs`'s overlay) and hands them here as
//! [`Changes`] once the call has succeeded. Publishing them is a
//! transaction:
//! 1. **check** — every entry the call took away (removed, replaced,
//!    renamed) must still be what the call saw (device, inode, size,
//!    times: its [`Identity`]), and every place it puts something new must
//!    still be free; otherwise nothing is published ([`Refused::Conflict`])
//!    and the caller may run the call again on the new state;
//! 2. **commit** — when more than one name changes, the [`Plan`]'s steps
//!    are written to a journal and synced: from then on the call completes,
//!    whoever finishes it (the same server, or [`journal::recover`] in
//!    another one, or `trash purge`);
//! 3. **apply** — every replaced or removed entry goes into the call's
//!    trash entry first (a hard link, a rename, or a copy where a link
//!    cannot reach), then every new entry takes its place by a rename from
//!    the call's stage, which never replaces what the call did not see.
//!
//! A call that changes one name needs no journal: its one rename is
//! atomic, and a kill before it leaves only a hard link in the trash.
//!
//! The steps act on names below each root through descriptors opened
//! beneath it (`sys::beneath`), never through a symlink; paths here are
//! root-relative.

pub mod journal;
mod plan;
mod steps;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Stat};
use serde::{Deserialize, Serialize};

use crate::policy::Root;

pub use journal::{JOURNAL, Recovered, recover_in};
pub use plan::Plan;

/// What a disk entry was when a call saw it: enough to tell it is still
/// the same entry, unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: rustix::fs::RawMode,
    pub size: i64,
    pub mtime: (i64, u64),
    pub ctime: (i64, u64),
}

/// The kind of a disk entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    pub fn of(ty: FileType) -> Kind {
        match ty {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        }
    }
}

impl Identity {
    pub fn of(st: &Stat) -> Identity {
        let (dev, ino) = crate::sys::stat::inode(st);
        Identity {
            dev,
            ino,
            kind: Kind::of(crate::sys::stat::file_type(st)),
            mode: st.st_mode & 0o7777,
            size: st.st_size,
            mtime: crate::sys::stat::mtime(st),
            ctime: crate::sys::stat::ctime(st),
        }
    }

    /// The same entry (inode and kind), whatever happened to it since.
    /// Compared for the same path in the same root (a journal's step, an
    /// undo), where the device number adds nothing and is not stable: a
    /// reboot after a power cut may number a btrfs subvolume, an LVM
    /// volume or a FUSE mount anew, and the publish it interrupted must
    /// still be finished.
    pub fn same_entry(&self, other: &Identity) -> bool {
        (self.ino, self.kind) == (other.ino, other.kind)
    }

    /// The same entry at the same version: its size and modification time
    /// too, for what is not a directory (whose times the publish's own
    /// steps change as they take entries from it). What a step run again
    /// after a kill compares: a step of the publish changes a file's change
    /// time (a link) but never its content.
    pub fn same_version(&self, other: &Identity) -> bool {
        self.same_entry(other)
            && (self.kind == Kind::Dir || (self.size, self.mtime) == (other.size, other.mtime))
    }

    /// The same entry, unchanged. A directory's size and times change with
    /// its entries: those count too (something added to a directory the
    /// call removes whole would go to the trash unseen by it).
    pub fn unchanged(&self, now: &Identity) -> bool {
        self == now
    }
}

/// A time a call set on an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Time {
    /// Left as it is.
    Keep,
    /// The time of the publish.
    Now,
    /// Seconds and nanoseconds since the epoch.
    At(i64, u32),
}

/// The access and modification times a call set on an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    pub access: Time,
    pub modified: Time,
}

/// A disk entry the call took from its place.
#[derive(Clone, Debug)]
pub struct Taken {
    /// Where it was (root-relative).
    pub from: PathBuf,
    /// What it was when the call first saw it.
    pub was: Identity,
    /// Moved to a new place (a [`New::Moved`] says where), rather than
    /// removed or replaced (then it is kept in the trash).
    pub moved: bool,
}

/// Something the call puts at a place.
#[derive(Clone, Debug)]
pub struct Made {
    /// Where (root-relative), once published.
    pub at: PathBuf,
    pub new: New,
    /// What must stand at its place on disk for the publish to go on.
    pub check: Check,
    /// Times the call set on it.
    pub times: Option<Times>,
}

/// What a [`Made`] puts there.
#[derive(Clone, Debug)]
pub enum New {
    /// A file or symlink the call made, staged at this root-relative path
    /// (in a stage directory on the filesystem of its place).
    Staged(PathBuf),
    /// A directory the call made.
    Dir,
    /// The entry that was at `from` (a [`Taken`] with `moved`).
    Moved(PathBuf),
    /// One more name of the file made at another place (a hard link the
    /// call made to a file of its own).
    LinkTo(PathBuf),
    /// A hard link to a disk file the call left where it is.
    LinkDisk { from: PathBuf, was: Identity },
    /// Nothing new: only [`Made::times`], on an entry left where it is.
    Touch,
}

/// What the call saw at a [`Made`]'s place, to check before publishing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Nothing, at this root-relative path on disk (the place, found back
    /// through directories the call renamed): it must still be free, in a
    /// directory that is still there.
    Free(PathBuf),
    /// The [`Taken`] whose `from` is this path: what the new entry replaces
    /// (checked with it, and kept in the trash).
    Replaces(PathBuf),
    /// Below a directory the call made: nothing on disk to check.
    Inside,
    /// The entry at this path, unchanged (a [`New::Touch`]).
    Is(PathBuf, Identity),
}

/// One root's share of a call's changes.
#[derive(Clone, Debug)]
pub struct Changes {
    pub root: Arc<Root>,
    /// The device of the root's own filesystem (its trash's).
    pub dev: u64,
    /// The call's stage directory on the root's own filesystem,
    /// root-relative: where the journal and the host's copies are written
    /// (none where the publish needs none: a single removal).
    pub stage: Option<PathBuf>,
    /// The call's stage directory on each other filesystem mounted inside
    /// the root that it changes, by device: where entries moved there are
    /// lifted to between their two renames.
    pub stages: Vec<(u64, PathBuf)>,
    pub taken: Vec<Taken>,
    pub made: Vec<Made>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.taken.is_empty() && self.made.is_empty()
    }

    /// The stage directory on the filesystem of device `dev`.
    fn stage_on(&self, dev: u64) -> Option<&Path> {
        if dev == self.dev {
            return self.stage.as_deref();
        }
        self.stages
            .iter()
            .find(|(d, _)| *d == dev)
            .map(|(_, p)| p.as_path())
    }

    /// Every root-relative place the changes touch, for the path locks: a
    /// place taken from and every place made at.
    pub fn places(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.taken.iter().map(|t| t.from.clone()).collect();
        out.extend(self.made.iter().map(|m| m.at.clone()));
        out.sort();
        out.dedup();
        out
    }
}

/// Something a publish kept in a root's trash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptEntry {
    pub root: String,
    /// Where it was (root-relative).
    pub from: String,
    /// Where it is (`.mcp-trash/<stamp>/…`).
    pub to: String,
}

/// Something a publish put in place, as it is now: what an undo checks is
/// still there before it takes it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutEntry {
    pub root: String,
    pub at: String,
    /// Where it came from when the call moved it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
    /// What it is now (none where it could not be read back).
    pub now: Option<Identity>,
}

/// What a publish did.
#[derive(Debug, Default)]
pub struct Published {
    pub kept: Vec<KeptEntry>,
    pub put: Vec<PutEntry>,
    /// Entries changed by someone else in the instant of the publish, kept
    /// in the trash too (the audit log says so).
    pub displaced: Vec<KeptEntry>,
}

/// Why a publish did nothing.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// What the call saw at `path` changed since (or something now stands
    /// where it would put something new): nothing was published.
    #[error("'{path}' in root '{root}' changed while the call ran")]
    Conflict { root: String, path: PathBuf },
    /// The publish could not be prepared (its journal, a directory of the
    /// trash): nothing was published.
    #[error("root '{root}': {error}")]
    Io { root: String, error: io::Error },
}

/// Publishes the changes of one call, stamped `stamp` (its trash entry's
/// name), in the roots of `changes`; its path locks are held. See the
/// module.
pub fn publish(changes: &[Changes], stamp: &str) -> Result<Published, Refused> {
    let changes: Vec<&Changes> = changes.iter().filter(|c| !c.is_empty()).collect();
    if changes.is_empty() {
        return Ok(Published::default());
    }
    pause(0);
    let plan = Plan::new(&changes, stamp)?;
    plan.check()?;
    plan.run()
}

/// A pause in a publish, for the tests that change a file between a call's
/// run and its publish, or kill a server part-way through one: with
/// `LOOMFS_TEST_HOOK_DIR` set, a publish that finds `<dir>/armed` holding
/// `step` (empty for 0: before its checks; N: after its Nth step) renames
/// it to `<dir>/paused` and waits (at most 30 s) for `<dir>/go`, which it
/// removes with `paused`. Only in a build with the `test-hooks` feature
/// (the tests'); any other build never reads the variable.
#[cfg(not(feature = "test-hooks"))]
pub(super) fn pause(_step: usize) {}

/// See the other [`pause`]: this is the one the tests' build has.
#[cfg(feature = "test-hooks")]
pub(super) fn pause(step: usize) {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(dir) = DIR.get_or_init(|| std::env::var_os("LOOMFS_TEST_HOOK_DIR").map(PathBuf::from))
    else {
        return;
    };
    let Ok(armed) = std::fs::read_to_string(dir.join("armed")) else {
        return;
    };
    if armed.trim().parse::<usize>().unwrap_or(0) != step {
        return;
    }
    if std::fs::rename(dir.join("armed"), dir.join("paused")).is_err() {
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < until && std::fs::remove_file(dir.join("go")).is_err() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let _ = std::fs::remove_file(dir.join("paused"));
}
