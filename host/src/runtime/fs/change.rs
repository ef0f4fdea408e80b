//! Every change a guest makes, staged in the call's overlay instead of
//! made on disk: a create or a truncating open makes a file in the call's
//! stage; a first write into an existing file's bytes works on a copy of
//! it (a reflink where the filesystem has them, else a byte copy), made
//! only when the guest first changes it through its descriptor; a
//! directory made, a symlink, a hard link, a removal, a rename and new
//! times are recorded. The role and the deny list apply to each as they
//! would on disk (the walk checks every name), and what a change removes
//! or replaces is noted as taken, to be kept in the trash when the call is
//! published.

use super::overlay::{Node, Staged, Start};
use super::view::{At, Seen, Walked};
use super::*;
use crate::store::publish::{Identity, Kind, Time, Times};

/// A descriptor opened for writing on a disk file the call has not changed
/// yet: its bytes are copied into the stage when the guest first changes
/// them ([`PolicedFs::materialize`]).
#[derive(Clone, Debug)]
pub struct Pending {
    pub(super) mount: usize,
    /// The file's path in the call's view.
    pub(super) rel: PathBuf,
    /// Its start path and what it was.
    pub(super) start: PathBuf,
    pub(super) was: Identity,
}

/// A directory of the call's stage on one filesystem.
pub struct StageDir {
    pub(super) dev: u64,
    /// Root-relative.
    pub(super) rel: PathBuf,
    pub(super) fd: OwnedFd,
    /// Keeps the directory for the call (emptied when dropped).
    pub(super) _dir: Option<crate::store::staging::CallDir>,
}

fn times_of(atim: fs::NewTimestamp, mtim: fs::NewTimestamp) -> Times {
    let one = |t: fs::NewTimestamp| match t {
        fs::NewTimestamp::NoChange => Time::Keep,
        fs::NewTimestamp::Now => Time::Now,
        fs::NewTimestamp::Timestamp(d) => {
            Time::At(i64::try_from(d.seconds).unwrap_or(i64::MAX), d.nanoseconds)
        }
    };
    Times {
        access: one(atim),
        modified: one(mtim),
    }
}

/// Both times: those of `new` where it sets them, else those of `old`.
fn merged(old: Option<Times>, new: Times) -> Times {
    let Some(old) = old else { return new };
    let pick = |o: Time, n: Time| if n == Time::Keep { o } else { n };
    Times {
        access: pick(old.access, new.access),
        modified: pick(old.modified, new.modified),
    }
}

impl FsGuard {
    /// The stage directory of mount `m` on the filesystem of device `dev`
    /// (`near`: a start path of a directory on it, to find its top), made
    /// at first use.
    pub(super) fn stage_dir(&mut self, m: usize, dev: u64, near: &Path) -> FsResult<usize> {
        if let Some(i) = self.stages[m].iter().position(|s| s.dev == dev) {
            return Ok(i);
        }
        let Some(staging) = self.staging.clone() else {
            // No staging area (a describe, a test without one): nothing
            // can be staged, so nothing can change.
            return Err(self.refuse(Some(m), near, Permission::Write, Rule::Staging));
        };
        let root = Arc::clone(&self.mounts[m].root);
        let top = if dev == self.mounts[m].dev {
            None
        } else {
            crate::store::staging::filesystem_top(&root, near)
        };
        let dir = staging
            .call_dir(&root, top.as_deref())
            .map_err(|e| self.stage_error(m, &e))?;
        let rel = dir
            .path()
            .strip_prefix(&root.path)
            .map(Path::to_path_buf)
            .map_err(|_| ErrorCode::Io)?;
        let fd = crate::sys::beneath::beneath(self.root_fd(m)?, &rel)
            .map_err(|e| self.stage_error(m, &e))?;
        let st = rustix::fs::fstat(&fd).map_err(io_error)?;
        let dev = crate::sys::stat::inode(&st).0;
        if let Some(i) = self.stages[m].iter().position(|s| s.dev == dev) {
            return Ok(i);
        }
        self.stages[m].push(StageDir {
            dev,
            rel,
            fd,
            _dir: Some(dir),
        });
        Ok(self.stages[m].len() - 1)
    }

    fn stage_error(&self, m: usize, e: &std::io::Error) -> FsError {
        // No descriptor free: the call is marked, as at any other open.
        if let Some(n) = e.raw_os_error()
            && super::probe::is_exhaustion(rustix::io::Errno::from_raw_os_error(n))
        {
            self.activity.mark_out_of_descriptors();
            return ErrorCode::Io.into();
        }
        if let Some(disk) = DiskError::of_io(e) {
            self.activity
                .mark_disk_error(disk, &self.mounts[m].root.name);
        }
        tracing::warn!(root = %self.mounts[m].root.name, "cannot make a staging directory: {e}");
        ErrorCode::Io.into()
    }

    /// A fresh name in the stage.
    fn stage_name(&mut self, prefix: &str) -> String {
        self.next_staged += 1;
        format!("{prefix}{}", self.next_staged)
    }

    /// The device of the filesystem the place `rel` of mount `m` is on, and
    /// where it is (see [`Self::dev_of_place`]), refused as a read-only
    /// disk there (named for the call: nothing can be published there).
    pub(super) fn writable_place(&mut self, m: usize, rel: &Path) -> FsResult<(u64, PathBuf)> {
        let (dev, near) = self.dev_of_place(m, rel)?;
        let read_only = match self.open_start(m, &near)? {
            Some((fd, _)) => rustix::fs::fstatvfs(&fd)
                .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)),
            None => false,
        };
        if read_only {
            self.activity
                .mark_disk_error(DiskError::ReadOnly, &self.mounts[m].root.name);
            return Err(ErrorCode::ReadOnly.into());
        }
        Ok((dev, near))
    }

    /// The device of the filesystem the place `rel` of mount `m` is on:
    /// that of the nearest directory above it on disk.
    pub(super) fn dev_of_place(&mut self, m: usize, rel: &Path) -> FsResult<(u64, PathBuf)> {
        for a in rel.ancestors().skip(1) {
            if let Some(Node::Dir(_)) = self.overlays[m].nodes.get(a) {
                continue;
            }
            let start = match self.overlays[m].nodes.get(a) {
                Some(Node::Moved(s, _) | Node::Touched(s, _)) => s.clone(),
                _ => match self.start_of(m, a) {
                    Start::At(s) => s,
                    Start::Made => continue,
                },
            };
            if let Some((_, st)) = self.open_start(m, &start)? {
                return Ok((crate::sys::stat::inode(&st).0, start));
            }
        }
        Ok((self.mounts[m].dev, PathBuf::new()))
    }

    /// A new, empty file in the stage on the filesystem of the place `rel`,
    /// opened read-write.
    pub(super) fn new_staged(&mut self, m: usize, rel: &Path) -> FsResult<(Arc<Staged>, OwnedFd)> {
        let (dev, near) = self.writable_place(m, rel)?;
        let i = self.stage_dir(m, dev, &near)?;
        let name = self.stage_name("f");
        let stage = &self.stages[m][i];
        let file = rustix::fs::openat(
            &stage.fd,
            name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        );
        let (stage_rel, stage_dev) = (stage.rel.join(&name), stage.dev);
        let file = file.map_err(|e| self.host_error_in(m, e))?;
        Ok((
            Arc::new(Staged {
                rel: stage_rel,
                dev: stage_dev,
                symlink: None,
            }),
            file,
        ))
    }

    /// `e`, met by the host's own operation in mount `m`, as the guest sees
    /// it (a disk error recorded for the call).
    pub(super) fn host_error_in(&self, m: usize, e: rustix::io::Errno) -> FsError {
        if let Some(disk) = DiskError::of_errno(e.raw_os_error()) {
            self.activity
                .mark_disk_error(disk, &self.mounts[m].root.name);
        }
        if is_exhaustion(e) {
            self.activity.mark_out_of_descriptors();
            return ErrorCode::Io.into();
        }
        io_error(e)
    }

    /// Opens a staged entry of mount `m` with `access`.
    pub(super) fn open_staged(
        &mut self,
        m: usize,
        staged: &Staged,
        access: OFlags,
    ) -> FsResult<OwnedFd> {
        let root = self.root_fd(m)?;
        let parent = staged.rel.parent().unwrap_or(Path::new(""));
        let name = staged.rel.file_name().ok_or(ErrorCode::Io)?;
        let dir = crate::sys::beneath::beneath(root, parent).map_err(|_| ErrorCode::Io)?;
        rustix::fs::openat(
            &dir,
            name,
            access | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.host_error_in(m, e))
    }

    /// Notes that the call changed something in mount `m`: from now on its
    /// paths there are walked in the call's view.
    fn viewing(&mut self, m: usize) {
        self.view[m] = true;
    }

    /// Records `node` at `rel` of mount `m`, or fails when the overlay is
    /// full (see [`super::overlay::MAX_ENTRIES`]).
    pub(super) fn set_node(&mut self, m: usize, rel: PathBuf, node: Node) -> FsResult<()> {
        self.viewing(m);
        self.overlays[m]
            .set(rel.clone(), node)
            .map_err(|_| self.overflow(m, &rel))
    }

    /// Notes the disk entry at `start` as taken (see the overlay).
    pub(super) fn take(
        &mut self,
        m: usize,
        start: PathBuf,
        now: Identity,
        moved: bool,
    ) -> FsResult<()> {
        self.viewing(m);
        let shown = start.clone();
        self.overlays[m]
            .take(start, now, moved)
            .map_err(|_| self.overflow(m, &shown))
    }

    fn overflow(&mut self, m: usize, rel: &Path) -> FsError {
        self.refuse(Some(m), rel, Permission::Write, Rule::Overlay)
    }

    /// Clears `rel` of mount `m` of what the call put there: a whiteout
    /// where a disk entry the call took would show through, nothing where
    /// the disk has nothing.
    fn clear(&mut self, m: usize, rel: &Path) -> FsResult<()> {
        let shows = match self.start_of(m, rel) {
            Start::At(s) => self.overlays[m].is_taken(&s),
            Start::Made => false,
        };
        if shows {
            self.set_node(m, rel.to_path_buf(), Node::Gone)
        } else {
            self.overlays[m].nodes.remove(rel);
            Ok(())
        }
    }

    /// Re-points descriptors and streams below `from` to `to` (mount `m`).
    fn moved_handles(&mut self, m: usize, from: &Path, to: &Path) {
        for h in self.handles.values_mut().chain(self.streams.values_mut()) {
            if h.mount == m && h.rel.starts_with(from) {
                let rest = h
                    .rel
                    .strip_prefix(from)
                    .unwrap_or(Path::new(""))
                    .to_path_buf();
                h.rel = to.join(rest);
            }
        }
        for p in self.pending.values_mut() {
            if p.mount == m && p.rel.starts_with(from) {
                let rest = p
                    .rel
                    .strip_prefix(from)
                    .unwrap_or(Path::new(""))
                    .to_path_buf();
                p.rel = to.join(rest);
            }
        }
    }

    /// Whether the directory `at` is empty in the call's view, hidden
    /// entries counted (a directory that holds a denied name is not empty:
    /// its removal fails at the operation, as it would on disk).
    fn is_empty_dir(&mut self, m: usize, at: &At) -> FsResult<bool> {
        let overlay = &self.overlays[m];
        if overlay
            .below(&at.rel)
            .any(|(_, n)| !matches!(n, Node::Gone))
        {
            return Ok(false);
        }
        let Seen::Disk { fd, .. } = &at.seen else {
            return Ok(true);
        };
        let own = reopen(fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY).map_err(io_error)?;
        let names = crate::sys::beneath::names_in(&own).map_err(|_| ErrorCode::Io)?;
        let overlay = &self.overlays[m];
        Ok(names
            .iter()
            .all(|(name, _)| matches!(overlay.nodes.get(&at.rel.join(name)), Some(Node::Gone))))
    }

    /// Takes what stands at `at` (mount `m`) from the call's view for good:
    /// it is kept in the trash when the call is published. A directory goes
    /// whole.
    fn discard(&mut self, m: usize, at: &At) -> FsResult<()> {
        match &at.seen {
            Seen::Staged(_) => self.clear(m, &at.rel),
            Seen::MadeDir => {
                self.overlays[m].drop_below(&at.rel);
                self.clear(m, &at.rel)
            }
            Seen::Disk { start, st, .. } => {
                let now = Identity::of(st);
                self.overlays[m].drop_below(&at.rel);
                self.take(m, start.clone(), now, false)?;
                if now.kind == Kind::Dir {
                    self.overlays[m].taken_whole(start);
                }
                match self.overlays[m].nodes.get(&at.rel) {
                    // A hard link of the call's to a file it leaves in place:
                    // only the link goes.
                    Some(Node::Link(_)) => {
                        self.overlays[m].taken.remove(start);
                        self.clear(m, &at.rel)
                    }
                    _ => self.set_node(m, at.rel.clone(), Node::Gone),
                }
            }
        }
    }
}

impl PolicedFs<'_> {
    /// The permissions the directory descriptor `fd` carries (its
    /// preopen's), and whether it may be changed through.
    fn dir_perms_of(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => Ok(d.perms),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }

    fn writable_dir_of(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        let perms = self.dir_perms_of(fd)?;
        if perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(perms)
    }

    /// Hands out `file` as a descriptor for `rel` of mount `m`.
    fn hand_out(
        &mut self,
        m: usize,
        rel: PathBuf,
        descriptor: Descriptor,
    ) -> FsResult<Resource<Descriptor>> {
        let new = self.fs.table.push(descriptor)?;
        self.guard
            .handles
            .insert(new.rep(), Handle { mount: m, rel });
        self.guard.activity.count_opened();
        Ok(new)
    }

    /// A directory descriptor for `at`.
    fn dir_descriptor(
        &mut self,
        m: usize,
        at: At,
        perms: wasmtime_wasi::filesystem::FsPerms,
    ) -> FsResult<Resource<Descriptor>> {
        let file = match &at.seen {
            Seen::Disk { fd, .. } => reopen(fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY)
                .map_err(|e| self.os_error(e))?,
            // A directory the call made is nowhere on disk yet: its
            // descriptor holds the stage (never looked into: every path
            // below it is walked in the call's view).
            _ => {
                let i = self
                    .guard
                    .stage_dir(m, self.guard.mounts[m].dev, Path::new(""))?;
                reopen(
                    self.guard.stages[m][i].fd.as_fd(),
                    OFlags::RDONLY | OFlags::DIRECTORY,
                )
                .map_err(|e| self.os_error(e))?
            }
        };
        let dir = wasmtime_wasi::filesystem::Dir::new(file.into(), perms, OpenMode::READ, true);
        self.hand_out(m, at.rel, Descriptor::Dir(dir))
    }

    /// `open-at` in the call's view (see the module).
    pub(super) fn open_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: &str,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let writes = oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE)
            || flags.intersects(fs::DescriptorFlags::WRITE | fs::DescriptorFlags::MUTATE_DIRECTORY);
        let op = if writes {
            Permission::Write
        } else {
            Permission::Read
        };
        ops::refuse_sync(flags)?;
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let creates = oflags.contains(fs::OpenFlags::CREATE);
        let lookup = if creates {
            Lookup::New
        } else {
            Lookup::Existing
        };
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, lookup)?;
        let perms = self.dir_perms_of(fd)?;
        if writes && perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        let m = h.mount;
        let walked = self.guard.walk(&h, path, follow, op, lookup)?;
        let (_, mode) = ops::writing(flags, oflags);
        let at = match walked {
            Walked::Found(at) => at,
            Walked::Missing {
                dir,
                name,
                via_link,
            } => {
                if !creates {
                    return Err(ErrorCode::NoEntry.into());
                }
                // Through a symlink whose target is missing: refused, as
                // if the target's place were missing (the answer a denied
                // existing target gets too).
                if via_link {
                    self.guard
                        .refuse(Some(m), &dir.rel.join(&name), op, Rule::Confinement);
                    return Err(ErrorCode::NoEntry.into());
                }
                if oflags.contains(fs::OpenFlags::DIRECTORY) {
                    return Err(ErrorCode::Invalid.into());
                }
                let rel = dir.rel.join(&name);
                let (staged, file) = self.guard.new_staged(m, &rel)?;
                self.guard.set_node(m, rel.clone(), Node::File(staged))?;
                let file = wasmtime_wasi::filesystem::File::new(file.into(), perms, mode, true);
                return self.hand_out(m, rel, Descriptor::File(file));
            }
        };
        if oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) {
            return Err(ErrorCode::Exist.into());
        }
        match at.seen.kind() {
            Kind::Dir => {
                if oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE)
                    || flags.contains(fs::DescriptorFlags::WRITE)
                {
                    return Err(ErrorCode::IsDirectory.into());
                }
                self.dir_descriptor(m, at, perms)
            }
            Kind::Symlink => Err(ErrorCode::Loop.into()),
            Kind::Other => Err(self.guard.refuse(Some(m), &at.rel, op, Rule::SpecialFile)),
            Kind::File if oflags.contains(fs::OpenFlags::DIRECTORY) => {
                Err(ErrorCode::NotDirectory.into())
            }
            Kind::File => self.open_file(m, at, writes, oflags, perms, mode),
        }
    }

    /// Opens the file `at`: the staged one as it is, a disk file for
    /// reading as it is, a disk file for writing as a [`Pending`] copy (or,
    /// truncated, as a new staged file: nothing to copy).
    fn open_file(
        &mut self,
        m: usize,
        at: At,
        writes: bool,
        oflags: fs::OpenFlags,
        perms: wasmtime_wasi::filesystem::FsPerms,
        mode: OpenMode,
    ) -> FsResult<Resource<Descriptor>> {
        let truncate = oflags.contains(fs::OpenFlags::TRUNCATE);
        let file = |f: OwnedFd| wasmtime_wasi::filesystem::File::new(f.into(), perms, mode, true);
        match at.seen {
            Seen::Staged(staged) => {
                let mut access = if writes { OFlags::RDWR } else { OFlags::RDONLY };
                if truncate {
                    access |= OFlags::TRUNC;
                }
                let f = self.guard.open_staged(m, &staged, access)?;
                self.hand_out(m, at.rel, Descriptor::File(file(f)))
            }
            Seen::Disk { start, fd, st } => {
                let was = Identity::of(&st);
                if self.guard.mounts[m].perms.contains(Permission::Write) {
                    self.guard.overlays[m].saw(&start, was);
                }
                if !writes {
                    let f = reopen_for_reading(fd.as_fd()).map_err(|e| self.os_error(e))?;
                    return self.hand_out(m, at.rel, Descriptor::File(file(f)));
                }
                if truncate {
                    let (staged, f) = self.guard.new_staged(m, &at.rel)?;
                    self.take_in_place(m, &at.rel, &start, was)?;
                    self.guard.set_node(m, at.rel.clone(), Node::File(staged))?;
                    return self.hand_out(m, at.rel, Descriptor::File(file(f)));
                }
                // Copied when first changed: reads meanwhile read the file.
                let f = reopen_for_reading(fd.as_fd()).map_err(|e| self.os_error(e))?;
                let rel = at.rel.clone();
                let new = self.hand_out(m, at.rel, Descriptor::File(file(f)))?;
                self.guard.pending.insert(
                    new.rep(),
                    Pending {
                        mount: m,
                        rel,
                        start,
                        was,
                    },
                );
                Ok(new)
            }
            Seen::MadeDir => Err(ErrorCode::IsDirectory.into()),
        }
    }

    /// Notes that the disk entry at `start` (seen at `rel`) is replaced in
    /// place: taken for good (or, if the call had moved it there, no
    /// longer moved but taken).
    fn take_in_place(&mut self, m: usize, rel: &Path, start: &Path, was: Identity) -> FsResult<()> {
        if let Some(Node::Link(_)) = self.guard.overlays[m].nodes.get(rel) {
            // A link of the call's to a file it leaves in place: the link
            // is replaced, the file stays.
            return Ok(());
        }
        self.guard.take(m, start.to_path_buf(), was, false)
    }

    /// Copies the file a [`Pending`] descriptor opened into the stage, on
    /// the guest's first change through it, and points the descriptor at
    /// the copy. Another descriptor's copy of the same path is shared.
    pub(super) fn materialize(&mut self, rep: u32) -> FsResult<()> {
        let Some(p) = self.guard.pending.remove(&rep) else {
            return Ok(());
        };
        let m = p.mount;
        let resource = Resource::<Descriptor>::new_borrow(rep);
        let staged_file = match self.guard.overlays[m].nodes.get(&p.rel).cloned() {
            Some(Node::File(staged)) => self.guard.open_staged(m, &staged, OFlags::RDWR)?,
            _ => {
                let (staged, copy) = self.guard.new_staged(m, &p.rel)?;
                let source = Arc::clone(match self.fs.table.get(&resource)? {
                    Descriptor::File(f) => &f.file,
                    Descriptor::Dir(_) => return Err(ErrorCode::BadDescriptor.into()),
                });
                self.copy_up(m, source.as_fd(), copy.as_fd(), p.was.size)?;
                self.take_in_place(m, &p.rel, &p.start, p.was)?;
                self.guard.set_node(m, p.rel.clone(), Node::File(staged))?;
                copy
            }
        };
        match self.fs.table.get_mut(&resource)? {
            Descriptor::File(f) => f.file = Arc::new(staged_file.into()),
            Descriptor::Dir(_) => return Err(ErrorCode::BadDescriptor.into()),
        }
        Ok(())
    }

    /// Copies `size` bytes of `from` into the empty `to`: a reflink where
    /// the filesystem can (no bytes move), else the kernel's copy, else a
    /// read and a write; the root's free-space reserve is checked first
    /// where bytes are written.
    fn copy_up(
        &mut self,
        m: usize,
        from: BorrowedFd<'_>,
        to: BorrowedFd<'_>,
        size: i64,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        if rustix::fs::ioctl_ficlone(to, from).is_ok() {
            return Ok(());
        }
        let size = u64::try_from(size).unwrap_or(0);
        let root = Arc::clone(&self.guard.mounts[m].root);
        crate::runtime::meter::reserve(&self.guard.activity, &root, size).map_err(FsError::from)?;
        #[cfg(target_os = "linux")]
        {
            let (mut from_off, mut to_off) = (0u64, 0u64);
            loop {
                match rustix::fs::copy_file_range(
                    from,
                    Some(&mut from_off),
                    to,
                    Some(&mut to_off),
                    1 << 30,
                ) {
                    Ok(0) => return Ok(()),
                    Ok(_) => continue,
                    Err(_) if to_off == 0 => break,
                    Err(e) => return Err(self.guard.host_error_in(m, e)),
                }
            }
        }
        // No copy_file_range here (or across filesystems on an old kernel).
        let mut buf = vec![0u8; 256 * 1024];
        let mut off = 0u64;
        loop {
            let n = rustix::io::pread(from, &mut buf, off)
                .map_err(|e| self.guard.host_error_in(m, e))?;
            if n == 0 {
                return Ok(());
            }
            let mut done = 0;
            while done < n {
                let w = rustix::io::pwrite(to, &buf[done..n], off + done as u64)
                    .map_err(|e| self.guard.host_error_in(m, e))?;
                done += w;
            }
            off += n as u64;
        }
    }

    /// `set-size` on a descriptor opened for writing on a disk file not
    /// copied yet: to nothing, a new empty file (nothing copied); otherwise
    /// the copy, then the size set on it.
    pub(super) fn resize_pending(&mut self, rep: u32, size: fs::Filesize) -> FsResult<()> {
        let Some(p) = self.guard.pending.get(&rep).cloned() else {
            return Ok(());
        };
        if size > 0
            || matches!(
                self.guard.overlays[p.mount].nodes.get(&p.rel),
                Some(Node::File(_))
            )
        {
            return self.materialize(rep);
        }
        self.guard.pending.remove(&rep);
        let m = p.mount;
        let (staged, file) = self.guard.new_staged(m, &p.rel)?;
        self.take_in_place(m, &p.rel, &p.start, p.was)?;
        self.guard.set_node(m, p.rel.clone(), Node::File(staged))?;
        match self
            .fs
            .table
            .get_mut(&Resource::<Descriptor>::new_borrow(rep))?
        {
            Descriptor::File(f) => f.file = Arc::new(file.into()),
            Descriptor::Dir(_) => return Err(ErrorCode::BadDescriptor.into()),
        }
        Ok(())
    }

    /// `create-directory-at` in the call's view.
    pub(super) fn mkdir_in_view(&mut self, fd: &Resource<Descriptor>, path: &str) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, Lookup::New)?;
        self.writable_dir_of(fd)?;
        match self
            .guard
            .walk(&h, path.trim_end_matches('/'), false, op, Lookup::New)?
        {
            Walked::Found(_) => Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => {
                let rel = dir.rel.join(name);
                self.guard.writable_place(h.mount, &rel)?;
                self.guard.set_node(h.mount, rel, Node::Dir(None))
            }
        }
    }

    /// `symlink-at` in the call's view (its target checked by the caller).
    pub(super) fn symlink_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        target: &str,
        path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.writable_dir_of(fd)?;
        let m = h.mount;
        let rel = match self.guard.walk(&h, path, false, op, Lookup::New)? {
            Walked::Found(_) => return Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => dir.rel.join(name),
        };
        let (dev, near) = self.guard.writable_place(m, &rel)?;
        let i = self.guard.stage_dir(m, dev, &near)?;
        let name = self.guard.stage_name("l");
        let stage = &self.guard.stages[m][i];
        let (stage_rel, stage_dev) = (stage.rel.join(&name), stage.dev);
        rustix::fs::symlinkat(target, &stage.fd, name.as_str())
            .map_err(|e| self.guard.host_error_in(m, e))?;
        let staged = Arc::new(Staged {
            rel: stage_rel,
            dev: stage_dev,
            symlink: Some(target.to_string()),
        });
        self.guard.set_node(m, rel, Node::File(staged))
    }

    /// Whether what `at` is in mount `m` is the call's own (made by it,
    /// replacing nothing): removing it needs no delete permission.
    fn own(&self, m: usize, at: &At) -> bool {
        let made = matches!(at.seen, Seen::Staged(_) | Seen::MadeDir);
        let replaces = match self.guard.start_of(m, &at.rel) {
            Start::At(s) => self.guard.overlays[m].is_taken(&s),
            Start::Made => false,
        };
        made && !replaces
    }

    /// `unlink-file-at` and `remove-directory-at` in the call's view.
    pub(super) fn remove_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        dir: bool,
    ) -> FsResult<()> {
        let h = self.guard.handle(fd.rep(), Permission::Delete)?;
        let m = h.mount;
        let trimmed = if dir {
            path.trim_end_matches('/')
        } else {
            path
        };
        // What the call made itself it may remove again with write alone;
        // anything else takes delete. Looked up first to tell which.
        let own = match self
            .guard
            .walk(&h, trimmed, false, Permission::Delete, Lookup::Existing)
        {
            Ok(Walked::Found(at)) => self.own(m, &at),
            // Nothing there (a temporary file already renamed away): the
            // answer a removal of nothing gets, no permission asked.
            Ok(Walked::Missing { .. }) => return Err(ErrorCode::NoEntry.into()),
            Err(e) => return Err(e),
        };
        let op = if own {
            Permission::Write
        } else {
            Permission::Delete
        };
        self.guard.lexical(&h, path, op, Lookup::Existing)?;
        self.writable_dir_of(fd)?;
        let Walked::Found(at) = self.guard.walk(&h, trimmed, false, op, Lookup::Existing)? else {
            return Err(ErrorCode::NoEntry.into());
        };
        self.guard.inside_for(
            &Handle {
                mount: m,
                rel: at.rel.clone(),
            },
            op,
        )?;
        if at.rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &at.rel, op, Rule::RootItself));
        }
        self.guard.writable_place(m, &at.rel)?;
        match (dir, at.seen.kind()) {
            (false, Kind::Dir) => return Err(ErrorCode::IsDirectory.into()),
            (true, k) if k != Kind::Dir => return Err(ErrorCode::NotDirectory.into()),
            _ => {}
        }
        if dir {
            // A directory on another filesystem than the trash (one mounted
            // inside the root) cannot go to the trash whole.
            if let Some(id) = at.seen.identity()
                && id.dev != self.guard.mounts[m].dev
            {
                return Err(ErrorCode::CrossDevice.into());
            }
            // What the call was asked to delete goes whole, with what it
            // holds that the deny list hides; anywhere else a directory
            // must be empty, as on disk.
            let declared = match &at.seen {
                Seen::Disk { start, .. } => self.guard.mounts[m].deletes.contains(start),
                _ => false,
            };
            if !declared && !self.guard.is_empty_dir(m, &at)? {
                return Err(ErrorCode::NotEmpty.into());
            }
        }
        self.guard.discard(m, &at)
    }

    /// `rename-at` in the call's view.
    pub(super) fn rename_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let ho = self.guard.handle(fd.rep(), op)?;
        let hn = self.guard.handle(new_fd.rep(), op)?;
        self.guard.lexical(&ho, old_path, op, Lookup::Existing)?;
        self.guard.lexical(&hn, new_path, op, Lookup::New)?;
        let perms = self.writable_dir_of(fd)?;
        if self.writable_dir_of(new_fd)? != perms {
            return Err(ErrorCode::NotPermitted.into());
        }
        // Across roots: the guest copies (as it would across filesystems).
        if ho.mount != hn.mount {
            return Err(ErrorCode::CrossDevice.into());
        }
        let m = ho.mount;
        let Walked::Found(old) = self.guard.walk(
            &ho,
            old_path.trim_end_matches('/'),
            false,
            op,
            Lookup::Existing,
        )?
        else {
            return Err(ErrorCode::NoEntry.into());
        };
        if old.rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &old.rel, op, Rule::RootItself));
        }
        let new = self
            .guard
            .walk(&hn, new_path.trim_end_matches('/'), false, op, Lookup::New)?;
        let new_rel = new.rel();
        if new_rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &new_rel, op, Rule::RootItself));
        }
        if new_rel == old.rel {
            return Ok(());
        }
        if new_rel.starts_with(&old.rel) {
            return Err(ErrorCode::Invalid.into());
        }
        self.guard.inside_for(
            &Handle {
                mount: m,
                rel: old.rel.clone(),
            },
            op,
        )?;
        let old_kind = old.seen.kind();
        // What stands at the new name: replaced (and kept) if the rename
        // may replace it.
        if let Walked::Found(standing) = &new {
            match (old_kind, standing.seen.kind()) {
                (Kind::Dir, Kind::Dir) => {
                    if !self.guard.is_empty_dir(m, standing)? {
                        return Err(ErrorCode::NotEmpty.into());
                    }
                }
                (_, Kind::Dir) => return Err(ErrorCode::IsDirectory.into()),
                (Kind::Dir, _) => return Err(ErrorCode::NotDirectory.into()),
                _ => {}
            }
        }
        // Across filesystems (one mounted inside the root): no rename.
        let old_dev = match &old.seen {
            Seen::Disk { st, .. } => crate::sys::stat::inode(st).0,
            Seen::Staged(s) => s.dev,
            Seen::MadeDir => self.guard.dev_of_place(m, &old.rel)?.0,
        };
        self.guard.writable_place(m, &old.rel)?;
        if old_dev != self.guard.writable_place(m, &new_rel)?.0 {
            return Err(ErrorCode::CrossDevice.into());
        }
        if let Walked::Found(standing) = &new {
            self.guard.discard(m, standing)?;
        }
        let node = self.guard.overlays[m].nodes.get(&old.rel).cloned();
        let moved = match (node, &old.seen) {
            (Some(Node::Touched(start, times)), _) => {
                let was = old.seen.identity().ok_or(ErrorCode::Io)?;
                self.guard.take(m, start.clone(), was, true)?;
                Node::Moved(start, Some(times))
            }
            (Some(node @ (Node::File(_) | Node::Dir(_) | Node::Moved(..) | Node::Link(_))), _) => {
                node
            }
            (_, Seen::Disk { start, st, .. }) => {
                self.guard.take(m, start.clone(), Identity::of(st), true)?;
                Node::Moved(start.clone(), None)
            }
            _ => return Err(ErrorCode::Io.into()),
        };
        self.guard.overlays[m].nodes.remove(&old.rel);
        self.guard.overlays[m].move_below(&old.rel, &new_rel);
        self.guard.set_node(m, new_rel.clone(), moved)?;
        self.guard.clear(m, &old.rel)?;
        self.guard.moved_handles(m, &old.rel, &new_rel);
        Ok(())
    }

    /// `link-at` in the call's view: a hard link within one root.
    pub(super) fn link_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        old_flags: fs::PathFlags,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let ho = self.guard.handle(fd.rep(), op)?;
        let hn = self.guard.handle(new_fd.rep(), op)?;
        self.guard.lexical(&ho, old_path, op, Lookup::Existing)?;
        self.guard.lexical(&hn, new_path, op, Lookup::New)?;
        let perms = self.writable_dir_of(fd)?;
        if self.writable_dir_of(new_fd)? != perms {
            return Err(ErrorCode::NotPermitted.into());
        }
        if !self.guard.same_root(ho.mount, hn.mount) {
            return Err(self.guard.refuse(
                Some(hn.mount),
                &hn.rel.join(new_path),
                op,
                Rule::Confinement,
            ));
        }
        let m = ho.mount;
        let follow = old_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let Walked::Found(old) = self
            .guard
            .walk(&ho, old_path, follow, op, Lookup::Existing)?
        else {
            return Err(ErrorCode::NoEntry.into());
        };
        let rel = match self.guard.walk(&hn, new_path, false, op, Lookup::New)? {
            Walked::Found(_) => return Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => dir.rel.join(name),
        };
        if old.rel.as_os_str().is_empty() || old.seen.kind() == Kind::Dir {
            return Err(ErrorCode::NotPermitted.into());
        }
        let old_dev = match &old.seen {
            Seen::Disk { st, .. } => crate::sys::stat::inode(st).0,
            Seen::Staged(s) => s.dev,
            Seen::MadeDir => return Err(ErrorCode::NotPermitted.into()),
        };
        if old_dev != self.guard.dev_of_place(m, &rel)?.0 {
            return Err(ErrorCode::CrossDevice.into());
        }
        let node = match old.seen {
            Seen::Staged(staged) => Node::File(staged),
            Seen::Disk { start, st, .. } => {
                // A link to a disk file the call moved is a link to where it
                // was: not what the guest means.
                if self.guard.overlays[m].is_taken(&start) {
                    return Err(ErrorCode::NotPermitted.into());
                }
                self.guard.overlays[m].saw(&start, Identity::of(&st));
                Node::Link(start)
            }
            Seen::MadeDir => return Err(ErrorCode::NotPermitted.into()),
        };
        self.guard.set_node(m, rel, node)
    }

    /// `set-times-at` in the call's view: recorded, nothing copied.
    pub(super) fn set_times_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: &str,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, Lookup::Existing)?;
        self.writable_dir_of(fd)?;
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let Walked::Found(at) = self.guard.walk(&h, path, follow, op, Lookup::Existing)? else {
            return Err(ErrorCode::NoEntry.into());
        };
        self.guard.inside_for(
            &Handle {
                mount: h.mount,
                rel: at.rel.clone(),
            },
            op,
        )?;
        self.set_times_of(h.mount, at, times_of(atim, mtim))
    }

    /// New times for `at` of mount `m`: on a staged file itself, else on
    /// the node that stands for it.
    pub(super) fn set_times_of(&mut self, m: usize, at: At, times: Times) -> FsResult<()> {
        let node = self.guard.overlays[m].nodes.get(&at.rel).cloned();
        match (node, at.seen) {
            (_, Seen::Staged(staged)) => {
                let set = |t: Time| match t {
                    Time::Keep => rustix::fs::Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_OMIT,
                    },
                    Time::Now => rustix::fs::Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_NOW,
                    },
                    Time::At(s, n) => rustix::fs::Timespec {
                        tv_sec: s,
                        tv_nsec: i64::from(n).try_into().unwrap_or(0),
                    },
                };
                let root = self.guard.root_fd(m)?;
                let parent = staged.rel.parent().unwrap_or(Path::new(""));
                let dir = crate::sys::beneath::beneath(root, parent).map_err(|_| ErrorCode::Io)?;
                let name = staged.rel.file_name().ok_or(ErrorCode::Io)?;
                rustix::fs::utimensat(
                    &dir,
                    name,
                    &rustix::fs::Timestamps {
                        last_access: set(times.access),
                        last_modification: set(times.modified),
                    },
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| self.guard.host_error_in(m, e))
            }
            (Some(Node::Dir(old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Dir(Some(merged(old, times))))
            }
            (Some(Node::Moved(start, old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Moved(start, Some(merged(old, times))))
            }
            (Some(Node::Touched(start, old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Touched(start, merged(Some(old), times)))
            }
            (Some(Node::Link(_)), Seen::Disk { .. }) => Err(ErrorCode::NotPermitted.into()),
            (_, Seen::Disk { start, st, .. }) => {
                self.guard.overlays[m].saw(&start, Identity::of(&st));
                self.guard.set_node(m, at.rel, Node::Touched(start, times))
            }
            _ => Err(ErrorCode::Io.into()),
        }
    }

    /// `set-times` on a descriptor: a staged file's own, else recorded for
    /// the entry it is (nothing copied).
    pub(super) fn set_times_of_descriptor(
        &mut self,
        fd: &Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let h = self.tracked(fd, Permission::Write)?;
        let m = h.mount;
        if self.guard.pending.contains_key(&fd.rep())
            || !matches!(
                self.guard.overlays[m].nodes.get(&h.rel),
                Some(Node::File(_))
            )
        {
            let at = self.guard.dir_at_or_file(m, &h.rel)?;
            return self.set_times_of(m, at, times_of(atim, mtim));
        }
        let rep = fd.rep();
        let set = fs::HostDescriptor::set_times(&mut self.fs, again(fd), atim, mtim);
        self.disk_noted(rep, set)
    }
}

impl FsGuard {
    /// What stands at `rel` of mount `m` (a tracked descriptor's path),
    /// whatever it is.
    pub(super) fn dir_at_or_file(&mut self, m: usize, rel: &Path) -> FsResult<At> {
        let Some(name) = rel.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            return self.dir_at(m, rel);
        };
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let h = Handle {
            mount: m,
            rel: parent,
        };
        match self.walk(&h, &name, false, Permission::Read, Lookup::Existing)? {
            Walked::Found(at) => Ok(at),
            Walked::Missing { .. } => Err(ErrorCode::NoEntry.into()),
        }
    }
}
