//! A call's state in the policing filesystem: which descriptor is which
//! mount and path, what the call changed (its overlays and stages), what it
//! was refused, and the deny and role checks every operation asks of it.
//!
//! `FsGuard` is defined here with its checks; the rest of its `impl` is in
//! the files of what the methods serve: `view.rs` (the walk in the call's
//! view), `change.rs` (the overlay bookkeeping of a change), `stage.rs`
//! (the stage directories), `times.rs` (one lookup for new times).

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::FileType;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::ahead::Ahead;
use super::overlay::Overlay;
use super::{
    CallChanges, Listed, Lookup, Mount, Pending, Place, Refusal, StageDir, join_lexically,
    real_path,
};
use crate::policy::{Permission, Perms, Rule};
use crate::runtime::activity::Activity;
use crate::runtime::meter::Meter;
use crate::store::quota::Quota;
use crate::store::staging::Staging;

/// What a tracked descriptor is: which mount, and its real root-relative path.
#[derive(Clone, Debug)]
pub(super) struct Handle {
    pub(super) mount: usize,
    pub(super) rel: PathBuf,
}

impl Handle {
    /// The same mount, at `rel`.
    pub(super) fn at(&self, rel: PathBuf) -> Handle {
        Handle {
            mount: self.mount,
            rel,
        }
    }
}

/// Per-call policy state of the filesystem.
pub struct FsGuard {
    pub(super) mounts: Vec<Mount>,
    pub(super) handles: HashMap<u32, Handle>,
    /// Directory entry stream → the directory's handle.
    pub(super) streams: HashMap<u32, Handle>,
    /// The regular files of the directory listed last.
    pub(super) listed: Listed,
    /// The files of that directory opened ahead of the guest.
    pub(super) ahead: Ahead,
    pub(super) refusals: Vec<Refusal>,
    pub(super) activity: Arc<Activity>,
    /// Counts the bytes read and written, and holds them to the quota.
    pub(super) meter: Arc<Meter>,
    /// Where each read lands first (see `PolicedFs::read_at`).
    pub(super) scratch: Vec<u8>,
    /// What the call changed in each mount's root, staged (see
    /// [`super::overlay`]).
    pub(super) overlays: Vec<Overlay>,
    /// Whether each mount's paths are walked in the call's view: set by its
    /// first change, never cleared (a descriptor of a directory the call
    /// made must never be looked into on disk).
    pub(super) view: Vec<bool>,
    /// Each mount's root, opened `O_PATH` when first needed.
    pub(super) root_fds: Vec<Option<OwnedFd>>,
    /// Each mount's stage directories, one per filesystem (see
    /// [`super::change`]).
    pub(super) stages: Vec<Vec<StageDir>>,
    /// Where stage directories are made; none where the call may change
    /// nothing.
    pub(super) staging: Option<Arc<Staging>>,
    /// Numbers the entries of the stages.
    pub(super) next_staged: u64,
    /// Numbers the directory listings ([`Listed`]).
    pub(super) next_listing: u64,
    /// Descriptors opened for writing on a disk file not yet copied.
    pub(super) pending: HashMap<u32, Pending>,
}

impl FsGuard {
    pub fn new(
        mounts: Vec<Mount>,
        activity: Arc<Activity>,
        quota: Option<Arc<Quota>>,
        staging: Option<Arc<Staging>>,
    ) -> FsGuard {
        let n = mounts.len();
        FsGuard {
            meter: Arc::new(Meter::new(Arc::clone(&activity), quota)),
            activity,
            mounts,
            handles: HashMap::new(),
            streams: HashMap::new(),
            listed: Listed::default(),
            ahead: Ahead::default(),
            refusals: Vec::new(),
            scratch: Vec::new(),
            overlays: (0..n).map(|_| Overlay::default()).collect(),
            view: vec![false; n],
            root_fds: (0..n).map(|_| None).collect(),
            stages: (0..n).map(|_| Vec::new()).collect(),
            staging,
            next_staged: 0,
            next_listing: 0,
            pending: HashMap::new(),
        }
    }

    /// Drops what the call staged (a call that failed publishes nothing):
    /// its stage directories are emptied now, before the call is answered.
    pub fn discard_changes(&mut self) {
        for stages in &mut self.stages {
            stages.clear();
        }
        for overlay in &mut self.overlays {
            *overlay = Overlay::default();
        }
        self.pending.clear();
    }

    /// What the call changed, for the publish: each root's changes, and
    /// the stage directories that hold them (kept until the publish is
    /// done). Mounts that changed nothing are left out.
    pub fn take_changes(&mut self) -> CallChanges {
        let mut changes = Vec::new();
        let mut stages = Vec::new();
        // A call that changes two roots journals in each (see
        // `store::publish::journal`).
        let roots_changed = self.overlays.iter().filter(|o| !o.is_empty()).count();
        for m in 0..self.mounts.len() {
            if self.overlays[m].is_empty() {
                continue;
            }
            let (taken, made) = self.overlays[m].changes();
            let root_dev = self.mounts[m].dev;
            // The root's own stage holds the journal, the host's copies and
            // the entries moved between their two renames: made now if the
            // publish may need it and the call staged nothing there (a
            // single removal needs none: a root that may only delete gets
            // no stage then).
            let needs = taken.iter().any(|t| t.moved || t.was.dev != root_dev)
                || taken.len() + made.len() > 1
                || roots_changed > 1;
            let own = self.stages[m].iter().position(|s| s.dev == root_dev);
            let own = match own {
                Some(i) => Some(i),
                None if needs => self.stage_dir(m, root_dev, Path::new("")).ok(),
                None => None,
            };
            let stage = own.map(|i| self.stages[m][i].rel.clone());
            let others = self.stages[m]
                .iter()
                .filter(|s| s.dev != root_dev)
                .map(|s| (s.dev, s.rel.clone()))
                .collect();
            changes.push(crate::store::publish::Changes {
                root: Arc::clone(&self.mounts[m].root),
                dev: root_dev,
                stage,
                stages: others,
                taken,
                made,
            });
            stages.push(std::mem::take(&mut self.stages[m]));
        }
        CallChanges {
            changes,
            _stages: stages,
        }
    }

    /// Host file descriptors the guest holds: its descriptors and its
    /// directory entry streams (each reads through a descriptor of its own).
    pub(super) fn held(&self) -> usize {
        self.handles.len() + self.streams.len()
    }

    /// The refusals recorded so far.
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refusals)
    }

    pub(super) fn same_root(&self, a: usize, b: usize) -> bool {
        Arc::ptr_eq(&self.mounts[a].root, &self.mounts[b].root)
    }

    pub(super) fn refuse(
        &mut self,
        mount: Option<usize>,
        path: &Path,
        op: Permission,
        rule: Rule,
    ) -> FsError {
        let root = mount.map_or_else(|| "?".to_string(), |m| self.mounts[m].root.name.clone());
        self.refusals.push(Refusal {
            root,
            path: path.to_string_lossy().into_owned(),
            op,
            rule,
        });
        FsError::from(ErrorCode::Access)
    }

    pub(super) fn perms(&self, mount: usize) -> Perms {
        self.mounts[mount].perms
    }

    /// The tracked handle behind `rep`, or a refusal.
    pub(super) fn handle(&mut self, rep: u32, op: Permission) -> FsResult<Handle> {
        match self.handles.get(&rep) {
            Some(h) => Ok(h.clone()),
            None => Err(self.refuse(None, Path::new(""), op, Rule::UntrackedDescriptor)),
        }
    }

    /// Refuses a denied name. Looked up as something that exists, it looks
    /// exactly like a missing one (`no-entry`), however it was reached
    /// (asked for, or through a symlink) and whether it exists or not: the
    /// guest cannot tell that `.env` is there. As a name to create, it is
    /// refused outright (`access`), which says nothing about what exists.
    pub(super) fn denied(
        &mut self,
        mount: usize,
        path: &Path,
        op: Permission,
        lookup: Lookup,
    ) -> FsError {
        self.refused_unseen(mount, path, op, lookup, Rule::Deny)
    }

    /// Step 1: joins `path` to the handle's path lexically and checks it.
    pub(super) fn lexical(
        &mut self,
        h: &Handle,
        path: &str,
        op: Permission,
        lookup: Lookup,
    ) -> FsResult<PathBuf> {
        // The path as a refusal names it (made only then).
        let shown = || h.rel.join(path);
        if !self.perms(h.mount).contains(op) {
            return Err(self.refuse(Some(h.mount), &shown(), op, Rule::Permission));
        }
        let Some(rel) = join_lexically(&h.rel, Path::new(path)) else {
            return Err(self.refuse(Some(h.mount), &shown(), op, Rule::Confinement));
        };
        // The descriptor's own path was checked when it was handed out, and
        // `rel` is a prefix of it plus names from `path`: checking `path` is
        // checking all that is new.
        let deny = &self.mounts[h.mount].root.deny;
        if deny.match_path(Path::new(path)).is_some() {
            return Err(self.denied(h.mount, &rel, op, lookup));
        }
        // Outside the client roots, as a denied name; on the way to one,
        // only looked up (to be stated, listed or passed through). Every
        // step counts: `b/../a/f` would tell whether `b` is there.
        if self.mounts[h.mount].area.is_some() {
            let mut at = h.rel.clone();
            for c in Path::new(path).components() {
                match c {
                    Component::Normal(name) => at.push(name),
                    Component::ParentDir => {
                        at.pop();
                    }
                    _ => {}
                }
                if self.place(h.mount, &at) == Place::Outside {
                    return Err(self.outside(h.mount, &rel, op, lookup));
                }
            }
        }
        match self.place(h.mount, &rel) {
            Place::Inside => {}
            Place::OnTheWay if op == Permission::Read && lookup == Lookup::Existing => {}
            _ => return Err(self.outside(h.mount, &rel, op, lookup)),
        }
        Ok(rel)
    }

    /// Where `rel` lies in the area of `mount` (all of an unnarrowed mount
    /// is inside).
    pub(super) fn place(&self, mount: usize, rel: &Path) -> Place {
        self.mounts[mount]
            .area
            .as_ref()
            .map_or(Place::Inside, |a| a.place(rel))
    }

    /// Refuses a path outside the client roots (`client_roots = "narrow"`)
    /// exactly as a denied name is refused: looked up, it is missing.
    pub(super) fn outside(
        &mut self,
        mount: usize,
        path: &Path,
        op: Permission,
        lookup: Lookup,
    ) -> FsError {
        self.refused_unseen(mount, path, op, lookup, Rule::ClientRoots)
    }

    /// A refusal by `rule` that says nothing of what exists: recorded, and
    /// answered as a missing name to a lookup, as `access` to a create.
    fn refused_unseen(
        &mut self,
        mount: usize,
        path: &Path,
        op: Permission,
        lookup: Lookup,
        rule: Rule,
    ) -> FsError {
        let refused = self.refuse(Some(mount), path, op, rule);
        match lookup {
            Lookup::Existing => ErrorCode::NoEntry.into(),
            Lookup::New => refused,
        }
    }

    /// Refuses an operation other than reading on a tracked descriptor
    /// whose path is not inside the client roots (a directory on the way
    /// to one is opened for looking only).
    pub(super) fn inside_for(&mut self, h: &Handle, op: Permission) -> FsResult<()> {
        if op != Permission::Read && self.place(h.mount, &h.rel) != Place::Inside {
            return Err(self.outside(h.mount, &h.rel, op, Lookup::Existing));
        }
        Ok(())
    }

    /// Steps 2 and 3: checks a real path read from an open descriptor (of
    /// something that exists: a denied one looks missing). Under client
    /// roots it must lie inside them, or be a directory on the way to one
    /// that is only looked at.
    pub(super) fn real(
        &mut self,
        h: &Handle,
        fd: BorrowedFd<'_>,
        shown: &Path,
        op: Permission,
    ) -> FsResult<PathBuf> {
        self.real_as(h, fd, shown, op, op == Permission::Read)
    }

    /// [`Self::real`] for a directory passed through on the way to what an
    /// operation acts on (a step of its path, the parent of a new name):
    /// one on the way to a client root is passed whatever the operation.
    pub(super) fn passage(
        &mut self,
        h: &Handle,
        fd: BorrowedFd<'_>,
        shown: &Path,
        op: Permission,
    ) -> FsResult<PathBuf> {
        self.real_as(h, fd, shown, op, true)
    }

    fn real_as(
        &mut self,
        h: &Handle,
        fd: BorrowedFd<'_>,
        shown: &Path,
        op: Permission,
        passes: bool,
    ) -> FsResult<PathBuf> {
        let rel = self.real_checked(h, fd, shown, op)?;
        match self.place(h.mount, &rel) {
            Place::Inside => Ok(rel),
            Place::OnTheWay if passes && is_directory(fd) => Ok(rel),
            _ => Err(self.outside(h.mount, shown, op, Lookup::Existing)),
        }
    }

    fn real_checked(
        &mut self,
        h: &Handle,
        fd: BorrowedFd<'_>,
        shown: &Path,
        op: Permission,
    ) -> FsResult<PathBuf> {
        let mount = &self.mounts[h.mount];
        let root = &mount.root;
        let real =
            real_path(fd).and_then(|p| p.strip_prefix(&mount.host).ok().map(Path::to_path_buf));
        match real {
            None => Err(self.refuse(Some(h.mount), shown, op, Rule::Confinement)),
            Some(rel) if root.deny.match_path(&rel).is_some() => {
                Err(self.denied(h.mount, shown, op, Lookup::Existing))
            }
            Some(rel) => Ok(rel),
        }
    }
}

/// Whether `fd` is a directory.
pub(super) fn is_directory(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| crate::sys::stat::file_type(&st) == FileType::Directory)
}
