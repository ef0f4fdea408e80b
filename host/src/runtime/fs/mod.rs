//! The policing `wasi:filesystem`: the host's own implementation of the WASI
//! filesystem host traits, wrapping wasmtime-wasi's.
//!
//! Every guest filesystem operation comes through here, for built-in and
//! third-party components alike, so the rules hold for code the project did
//! not write. Each path operation is checked in three steps:
//! 1. **lexically** against the descriptor it is relative to (tracked in a
//!    side table: descriptor → root, real root-relative path): no absolute
//!    path, no `..` above the root, no denied component, and the root grants
//!    the operation (read / write / delete);
//! 2. **by its real name**: the path is probed with `openat2(O_PATH,
//!    RESOLVE_BENEATH)` and the probe's real path (`/proc/self/fd`) is checked
//!    against the deny list, so a symlink alias of `.env` is refused *before*
//!    the operation (an `O_TRUNC` through an alias never happens); special
//!    files (FIFO, socket, device) are refused by type without being opened;
//! 3. an existing file or directory is opened from that probe (the inode
//!    opened is the inode checked: nothing renamed over the name since is
//!    truncated or waited on), and a read of a name the probe found missing
//!    answers it missing without opening it by the path again (where a FIFO
//!    made since would hold the open); after an `open-at`, the new descriptor's real
//!    name is checked again (closing a race with step 2 where the general
//!    open ran) and recorded for the paths relative to it.
//!
//! One read is cheaper, the common one of a walk: a regular file opened for
//! reading by a plain name (no `/`) under a directory descriptor, a name
//! the directory's complete listing showed as a regular file ([`Listed`];
//! `checks.rs`, `read_open_plain`), or one right under the root that a
//! stat shows as one (nothing above it in the root can be renamed). It is opened by that name without
//! following a symlink and without waiting (`O_NONBLOCK`), and kept only if
//! `fstat` says it is a regular file; anything else goes the way above.
//! Its real name is the directory's plus the name, checked whole against
//! the deny list and the client roots: the listing is used only if, when
//! a file of it is first opened, the directory's real path is the one its
//! descriptor was checked with, and no symlink can be on the way, so the procfs real name
//! and reopen are not needed. A directory above it renamed while its files
//! are read is not seen, as a rename after any check is not. The next
//! files of that listing are opened the same way ahead of the guest, on a
//! thread of the call's (`ahead.rs`).
//!
//! Directory reads skip denied names, so a walk never sees a `.venv` and a
//! listing never shows `.env`. Descriptors the host did not hand out are
//! refused. Every refusal is recorded for the audit log.
//!
//! Operations on an already-open descriptor (read, write, stat, streams) pass
//! through once the descriptor is known to be tracked: its path was checked
//! when it was opened, and wasmtime-wasi enforces its open mode (a read-only
//! preopen yields no writable descriptor). The bytes they move are counted
//! and held to the byte quota (`meter`).
//!
//! Nothing a guest does changes a root while the call runs: every change is
//! staged in the call's overlay (`overlay`, `change`), and the call sees
//! its own changes (`view`). When the call has succeeded the host publishes
//! them together, keeping every version they replace or remove
//! ([`crate::store::publish`]); a call that fails changes nothing.
//!
//! Two types carry it all, and each one's `impl` is split over several
//! files by what the methods are for: [`PolicedFs`] (wasmtime-wasi's
//! filesystem and the call's guard, the view the host traits are
//! implemented on) and [`FsGuard`] (a call's state, in `handles.rs`). A
//! WASI method checks, walks and changes in one breath, so its steps are
//! methods of one type; one file for every method would run to thousands
//! of lines, and one file per concern keeps each readable alone:
//! `descriptor.rs` and `entries.rs` are the trait impls, the WASI entry
//! points; `checks.rs` the checks on an unchanged root (`ahead.rs` the
//! read-ahead of a walk's files, on a thread of the call's); `handles.rs` the
//! guard's deny, role and area checks; `view.rs` the walk in the call's
//! view; `open.rs` (opening), `change.rs` (changes to the tree),
//! `copy_up.rs` (the copy at a first write), `times.rs` (new times) and
//! `stage.rs` (where staged files wait) the changes. Each file says which
//! part of which impl it holds.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::HasData;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::FsError;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use crate::policy::{Permission, Perms, Root, Rule};

mod ahead;
mod change;
mod checks;
mod copy_up;
mod descriptor;
mod entries;
mod file_output;
mod handles;
mod open;
mod ops;
mod overlay;
mod probe;
mod stage;
mod times;
mod view;

pub use ahead::MOST_HELD as READ_AHEAD_DESCRIPTORS;
pub use copy_up::Pending;
pub use handles::*;
pub use overlay::{MAX_BYTES as MAX_OVERLAY_BYTES, MAX_ENTRIES as MAX_OVERLAY_ENTRIES};
pub use probe::*;
pub use stage::StageDir;

/// What a call changed, for the publish: each root's changes, and the stage
/// directories that hold the staged files until the publish is done (then
/// dropped, which empties them).
pub struct CallChanges {
    pub changes: Vec<crate::store::publish::Changes>,
    pub(super) _stages: Vec<Vec<StageDir>>,
}

impl CallChanges {
    pub fn none() -> CallChanges {
        CallChanges {
            changes: Vec::new(),
            _stages: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.changes
            .iter()
            .all(crate::store::publish::Changes::is_empty)
    }
}

/// A directory preopened for this call: a root (or a history tool's git
/// directory, a read-only root of its own).
pub struct Mount {
    pub root: Arc<Root>,
    /// Where the guest sees it.
    pub guest_dir: String,
    /// The host directory it opens (the root).
    pub host: PathBuf,
    /// What the guest may do here: the root's permissions, up to what the
    /// call declared (a tool declared `write` never deletes, whatever the
    /// root's role would allow).
    pub perms: Perms,
    /// What the session's client roots leave of the root
    /// (`client_roots = "narrow"`); `None`: all of it.
    pub area: Option<Area>,
    /// The paths (real, root-relative) the call was asked to delete
    /// through a path argument: removing one of these directories takes it
    /// whole, with what its deny list hides; anywhere else a directory must
    /// be empty to be removed.
    pub deletes: Vec<PathBuf>,
    /// The device of the root's filesystem (where its trash is).
    pub dev: u64,
}

/// The part of a root a narrowed call may reach: root-relative paths,
/// each with everything below it. Outside them a path is refused as a
/// denied name is (missing to a lookup, no hint that it exists); the
/// directories on the way to one may be looked up, stated and listed, and
/// a listing of one shows only the names on the way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Area(Arc<[PathBuf]>);

/// Where a root-relative path lies with respect to an [`Area`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In one of its paths or below.
    Inside,
    /// A directory above one of its paths, which leads there.
    OnTheWay,
    Outside,
}

impl Area {
    /// The area of `paths` (root-relative, no `..`); `None` when one of
    /// them is the whole root.
    pub fn of(paths: Vec<PathBuf>) -> Option<Area> {
        if paths.iter().any(|p| p.as_os_str().is_empty()) {
            return None;
        }
        Some(Area(paths.into()))
    }

    pub fn place(&self, rel: &Path) -> Place {
        if self.0.iter().any(|a| rel.starts_with(a)) {
            Place::Inside
        } else if self.0.iter().any(|a| a.starts_with(rel)) {
            Place::OnTheWay
        } else {
            Place::Outside
        }
    }

    /// Whether a listing of directory `dir` shows `name`.
    pub fn shows(&self, dir: &Path, name: &OsStr) -> bool {
        self.place(&dir.join(name)) != Place::Outside
    }
}

impl Mount {
    pub fn root(root: Arc<Root>, guest_dir: String, up_to: Permission) -> Mount {
        let host = root.path.clone();
        let perms = root.perms.intersect(Perms::up_to(up_to));
        // The device matters only where the call may change something.
        let dev = if up_to > Permission::Read {
            rustix::fs::stat(&host).map_or(0, |st| crate::sys::stat::inode(&st).0)
        } else {
            0
        };
        Mount {
            root,
            guest_dir,
            host,
            perms,
            area: None,
            deletes: Vec::new(),
            dev,
        }
    }

    /// The root's mount narrowed to `area` (see [`Area`]).
    pub fn narrowed(self, area: Option<Area>) -> Mount {
        Mount { area, ..self }
    }

    /// The root's mount with the paths the call was asked to delete.
    pub fn deleting(self, deletes: Vec<PathBuf>) -> Mount {
        Mount { deletes, ..self }
    }
}

/// A guest operation the policy refused, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub root: String,
    /// Root-relative path the guest asked for.
    pub path: String,
    pub op: Permission,
    pub rule: Rule,
}

/// The view the policing filesystem works on: wasmtime-wasi's filesystem
/// plus this call's guard.
pub struct PolicedFs<'a> {
    pub fs: WasiFilesystemCtxView<'a>,
    pub guard: &'a mut FsGuard,
}

/// `HasData` marker for linking the policing filesystem.
pub struct Policed;

impl HasData for Policed {
    type Data<'a> = PolicedFs<'a>;
}

fn quota_error() -> FsError {
    ErrorCode::Quota.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_join_stays_below_the_root() {
        let j = |base: &str, p: &str| join_lexically(Path::new(base), Path::new(p));
        assert_eq!(j("", "a/b"), Some(PathBuf::from("a/b")));
        assert_eq!(j("a", "../b"), Some(PathBuf::from("b")));
        assert_eq!(j("a", "./b/../c"), Some(PathBuf::from("a/c")));
        assert_eq!(j("", ".."), None);
        assert_eq!(j("a", "../../b"), None);
        assert_eq!(j("a", "/etc/passwd"), None);
        assert_eq!(j("", ""), Some(PathBuf::new()));
    }

    /// A descriptor the guard did not hand out (the component model makes
    /// handles unforgeable; this is the defence behind that) is refused for
    /// every operation, and the refusal is recorded.
    #[test]
    fn untracked_descriptors_are_refused_and_recorded() {
        let mut guard = FsGuard::new(vec![], Arc::default(), None, None);
        for op in Permission::ALL {
            assert!(guard.handle(7, op).is_err());
        }
        let refusals = guard.take_refusals();
        assert_eq!(refusals.len(), 3);
        assert!(refusals.iter().all(|r| r.rule == Rule::UntrackedDescriptor));
    }

    #[test]
    fn an_area_admits_below_and_leads_from_above() {
        let area = Area::of(vec![PathBuf::from("a/b"), PathBuf::from("c")]).unwrap();
        assert_eq!(area.place(Path::new("a/b")), Place::Inside);
        assert_eq!(area.place(Path::new("a/b/x/y")), Place::Inside);
        assert_eq!(area.place(Path::new("c/d")), Place::Inside);
        assert_eq!(area.place(Path::new("")), Place::OnTheWay);
        assert_eq!(area.place(Path::new("a")), Place::OnTheWay);
        assert_eq!(area.place(Path::new("a/bb")), Place::Outside);
        assert_eq!(area.place(Path::new("a/x")), Place::Outside);
        assert_eq!(area.place(Path::new("cc")), Place::Outside);
        assert!(area.shows(Path::new(""), OsStr::new("a")));
        assert!(area.shows(Path::new("a"), OsStr::new("b")));
        assert!(!area.shows(Path::new("a"), OsStr::new("x")));
        assert!(!area.shows(Path::new(""), OsStr::new("d")));
        assert!(area.shows(Path::new("a/b"), OsStr::new("anything")));
        assert_eq!(Area::of(vec![PathBuf::from("a"), PathBuf::new()]), None);
    }

    #[test]
    fn plain_names() {
        assert!(is_plain_name("a.txt"));
        assert!(is_plain_name(".env"));
        assert!(!is_plain_name("a/b"));
        assert!(!is_plain_name(".."));
        assert!(!is_plain_name("."));
        assert!(!is_plain_name(""));
    }
}
