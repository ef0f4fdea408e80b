//! A call's state in the policing filesystem: which descriptor is which
//! mount and real path, what the call created, kept and was refused, and the
//! deny and role checks every operation asks of it. Opens nothing itself.

use super::*;

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

/// What a file was when a call opened it for reading: a publish over it
/// checks it is still that file (see [`PolicedFs::publish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Identity {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: i64,
    pub(super) modified: (i128, i128),
    pub(super) changed: (i128, i128),
}

impl Identity {
    pub(super) fn of(st: &rustix::fs::Stat) -> Identity {
        let (dev, ino) = crate::sys::stat::inode(st);
        let (modified, modified_ns) = crate::sys::stat::mtime(st);
        let (changed, changed_ns) = crate::sys::stat::ctime(st);
        Identity {
            dev,
            ino,
            size: st.st_size,
            modified: (i128::from(modified), i128::from(modified_ns)),
            changed: (i128::from(changed), i128::from(changed_ns)),
        }
    }
}

/// The token of a copy kept in a trash (see [`FsGuard::copies`]): one
/// clone in the guard, one in each descriptor or stream that can write it.
#[derive(Clone, Default, Debug)]
pub struct OpenCopy(Arc<()>);

impl OpenCopy {
    /// Whether something besides the guard can still write the copy.
    pub(super) fn writing(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// Whether `other` is a clone of this token.
    pub(super) fn same(&self, other: &OpenCopy) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A hard link a call made into a trash: the file (device, inode) and the
/// place it was linked from (mount, real root-relative path).
#[derive(Clone, Debug)]
pub(super) struct TrashLink {
    pub(super) inode: (u64, u64),
    pub(super) from: (usize, PathBuf),
}

/// Per-call policy state of the filesystem.
pub struct FsGuard {
    pub(super) mounts: Vec<Mount>,
    pub(super) handles: HashMap<u32, Handle>,
    /// Directory entry stream → the directory's handle.
    pub(super) streams: HashMap<u32, Handle>,
    /// Files and directories this call created: it may remove them again
    /// without delete permission (a temporary file whose write failed).
    pub(super) created: HashSet<(usize, PathBuf)>,
    pub(super) refusals: Vec<Refusal>,
    pub(super) kept: Vec<Kept>,
    /// The inodes (device, inode) this call put into a trash: a version
    /// displaced by a publish that is one of them is kept already.
    pub(super) kept_inodes: HashSet<(u64, u64)>,
    /// Copies this call made in a trash where a hard link was impossible,
    /// by mount and real root-relative path: a copy cut short (a full disk)
    /// is the only thing a call may remove from a trash, and only its own.
    /// Each has a token, cloned into whatever can still write it: the
    /// descriptor that created it (the only one: a trash is never opened
    /// again for writing) and the streams made from it. A copy whose token
    /// is held elsewhere is still being written ([`OpenCopy`]). See
    /// [`super::copies`]: a copy is in its slot only once whole.
    pub(super) copies: HashMap<(usize, PathBuf), super::copies::TrashCopy>,
    /// Files (device, inode) a publish kept by a copy, each as it was when
    /// copied: a version the publish displaces must be one of them.
    pub(super) kept_copies: HashMap<(u64, u64), super::copies::Copied>,
    /// Numbers the files of copies on their way into the trash.
    pub(super) next_copy: u64,
    /// Hard links this call made into a trash (by trash mount and real
    /// root-relative path), with the file they are (device, inode): one
    /// may be taken back while the file is still linked elsewhere (a
    /// change it was kept for did not happen).
    pub(super) trash_links: HashMap<(usize, PathBuf), TrashLink>,
    /// The token of the copy each descriptor (by rep) created, until the
    /// guest drops it.
    pub(super) copy_writers: HashMap<u32, OpenCopy>,
    /// What each file this call opened for reading was when it was last
    /// opened, by mount and real root-relative path.
    pub(super) read: HashMap<(usize, PathBuf), Identity>,
    /// This call's trash entry: through a trash mount only `.mcp-trash` and
    /// `.mcp-trash/<stamp>/…` are reachable, so a call can never touch what
    /// another call kept.
    pub(super) stamp: Option<PathBuf>,
    pub(super) activity: Arc<Activity>,
    /// Counts the bytes read and written, and holds them to the quota.
    pub(super) meter: Arc<Meter>,
    /// Where each read lands first (see `PolicedFs::read_at`).
    pub(super) scratch: Vec<u8>,
}

impl FsGuard {
    pub fn new(
        mounts: Vec<Mount>,
        stamp: Option<&str>,
        activity: Arc<Activity>,
        quota: Option<Arc<Quota>>,
    ) -> FsGuard {
        FsGuard {
            meter: Arc::new(Meter::new(Arc::clone(&activity), quota)),
            activity,
            mounts,
            handles: HashMap::new(),
            streams: HashMap::new(),
            created: HashSet::new(),
            refusals: Vec::new(),
            kept: Vec::new(),
            kept_inodes: HashSet::new(),
            copies: HashMap::new(),
            kept_copies: HashMap::new(),
            next_copy: 0,
            trash_links: HashMap::new(),
            copy_writers: HashMap::new(),
            read: HashMap::new(),
            stamp: stamp.map(|s| Path::new(TRASH_DIR).join(s)),
            scratch: Vec::new(),
        }
    }

    /// Files this call created, by mount host directory and root-relative
    /// path (to clean up after a call stopped mid-write).
    pub fn created(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.created
            .iter()
            .map(|(m, rel)| self.mounts[*m].host.join(rel))
    }

    /// Whether `rel` (root-relative) is reachable through a trash mount:
    /// the trash itself, this call's entry, or below it.
    pub(super) fn in_own_trash(&self, rel: &Path) -> bool {
        rel == Path::new(TRASH_DIR) || self.stamp.as_ref().is_some_and(|own| rel.starts_with(own))
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

    /// What the call moved or linked into a trash.
    pub fn take_kept(&mut self) -> Vec<Kept> {
        std::mem::take(&mut self.kept)
    }

    /// Refuses any operation on a trash other than creating directories and
    /// moving or linking entries in.
    pub(super) fn not_trash(&mut self, h: &Handle, rel: &Path, op: Permission) -> FsResult<()> {
        if self.mounts[h.mount].trash {
            return Err(self.refuse(Some(h.mount), rel, op, "trash"));
        }
        Ok(())
    }

    /// Whether the deny list refuses `rel` (root-relative) in `mount`; in a
    /// trash mount, what lies below `.mcp-trash`.
    pub(super) fn denies(&self, mount: usize, rel: &Path) -> bool {
        let m = &self.mounts[mount];
        let checked = if m.trash {
            rel.strip_prefix(TRASH_DIR).unwrap_or(rel)
        } else {
            rel
        };
        m.root.deny.match_path(checked).is_some()
    }

    pub(super) fn same_root(&self, a: usize, b: usize) -> bool {
        Arc::ptr_eq(&self.mounts[a].root, &self.mounts[b].root)
    }

    /// Whether two roots deny the same names (built-in and config-wide
    /// patterns are shared; compare their own).
    pub(super) fn same_deny(&self, a: usize, b: usize) -> bool {
        let own = |m: usize| {
            let mut p = self.mounts[m].root.extra_deny.clone();
            p.sort();
            p
        };
        own(a) == own(b)
    }

    /// Records a copy created in this call's trash entry: it keeps what
    /// stood at the same path below the stamp.
    pub(super) fn keep_copy(&mut self, mount: usize, rel: &Path) {
        let Some(own) = &self.stamp else { return };
        if let Ok(from) = rel.strip_prefix(own) {
            self.kept.push(Kept {
                root: self.mounts[mount].root.name.clone(),
                from: from.to_string_lossy().into_owned(),
                to: rel.to_string_lossy().into_owned(),
            });
        }
    }

    /// Records what a rename or link put into a trash.
    pub(super) fn keep(&mut self, from: &Handle, to: &Handle) {
        if self.mounts[to.mount].trash && !self.mounts[from.mount].trash {
            self.kept.push(Kept {
                root: self.mounts[from.mount].root.name.clone(),
                from: from.rel.to_string_lossy().into_owned(),
                to: to.rel.to_string_lossy().into_owned(),
            });
        }
    }

    /// Refuses a rename or link that would bring something into a staging
    /// directory from elsewhere, or take something out of one anywhere but
    /// into its own root (not a trash, not another root).
    pub(super) fn staging_bounds(
        &mut self,
        old: &Handle,
        new: &Handle,
        op: Permission,
    ) -> FsResult<()> {
        let (from, to) = (&self.mounts[old.mount], &self.mounts[new.mount]);
        if to.staging && old.mount != new.mount {
            return Err(self.refuse(Some(new.mount), &new.rel, op, "staging"));
        }
        if from.staging
            && old.mount != new.mount
            && (to.trash || !self.same_root(old.mount, new.mount))
        {
            return Err(self.refuse(Some(old.mount), &old.rel, op, "staging"));
        }
        Ok(())
    }

    /// Refuses renaming, linking or removing the top of a mount (the root
    /// itself, whatever path the guest spelled it with).
    pub(super) fn not_mount_top(&mut self, h: &Handle, op: Permission) -> FsResult<()> {
        if h.rel.as_os_str().is_empty() {
            return Err(self.refuse(Some(h.mount), &h.rel, op, "root_itself"));
        }
        Ok(())
    }

    /// Forgets every descriptor under `rel` of `mount`: after a rename their
    /// recorded paths would be wrong, and nothing may act on a stale path.
    pub(super) fn forget_under(&mut self, mount: usize, rel: &Path) {
        self.handles
            .retain(|_, h| !(h.mount == mount && h.rel.starts_with(rel)));
        self.streams
            .retain(|_, h| !(h.mount == mount && h.rel.starts_with(rel)));
        self.created
            .retain(|(m, p)| !(*m == mount && p.starts_with(rel)));
    }

    pub(super) fn refuse(
        &mut self,
        mount: Option<usize>,
        path: &Path,
        op: Permission,
        rule: &'static str,
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
            None => Err(self.refuse(None, Path::new(""), op, "untracked_descriptor")),
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
        self.refused_unseen(mount, path, op, lookup, "deny")
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
        // A trash has no role of its own: each operation is gated by `not_trash`.
        if !self.mounts[h.mount].trash && !self.perms(h.mount).contains(op) {
            return Err(self.refuse(Some(h.mount), &shown(), op, "permission"));
        }
        let Some(rel) = join_lexically(&h.rel, Path::new(path)) else {
            return Err(self.refuse(Some(h.mount), &shown(), op, "confinement"));
        };
        if self.mounts[h.mount].trash {
            // Through a trash mount only this call's part of the trash is
            // reachable; below it the deny list applies as anywhere.
            if !self.in_own_trash(&rel) {
                return Err(self.refuse(Some(h.mount), &rel, op, "trash"));
            }
            if self.denies(h.mount, &rel) {
                return Err(self.denied(h.mount, &rel, op, lookup));
            }
            return Ok(rel);
        }
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
        self.refused_unseen(mount, path, op, lookup, "client_roots")
    }

    /// A refusal by `rule` that says nothing of what exists: recorded, and
    /// answered as a missing name to a lookup, as `access` to a create.
    fn refused_unseen(
        &mut self,
        mount: usize,
        path: &Path,
        op: Permission,
        lookup: Lookup,
        rule: &'static str,
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
        let checked = match &real {
            Some(rel) if mount.trash => self
                .in_own_trash(rel)
                .then(|| rel.strip_prefix(TRASH_DIR).unwrap_or(rel)),
            Some(rel) => Some(rel.as_path()),
            None => None,
        };
        match (real.as_ref(), checked) {
            (None, _) => Err(self.refuse(Some(h.mount), shown, op, "confinement")),
            (Some(_), None) => Err(self.refuse(Some(h.mount), shown, op, "trash")),
            (Some(_), Some(inside)) if root.deny.match_path(inside).is_some() => {
                Err(self.denied(h.mount, shown, op, Lookup::Existing))
            }
            (Some(rel), Some(_)) => Ok(rel.clone()),
        }
    }
}

/// Whether `fd` is a directory.
pub(super) fn is_directory(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| crate::sys::stat::file_type(&st) == FileType::Directory)
}
