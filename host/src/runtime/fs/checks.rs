//! The checks before an operation: an existing path, a new name, a removal,
//! an open for reading, each resolved and judged against the deny list and
//! the mount's permissions, with errors named for the model. Refusals are
//! recorded; nothing is changed here.

use super::*;

impl PolicedFs<'_> {
    /// Hands out a write stream wrapped in the call's meter.
    /// Its disk errors are recorded for the root of `h`.
    pub(super) fn metered_output(
        &mut self,
        stream: Resource<streams::OutputStream>,
        h: &Handle,
        copy: Option<OpenCopy>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let inner = self.fs.table.delete(stream)?;
        let root = Arc::clone(&self.guard.mounts[h.mount].root);
        let metered = self
            .guard
            .meter
            .output(inner, root, copy.map(|c| Box::new(c) as _));
        Ok(self.fs.table.push(metered)?)
    }

    pub(super) fn dir_fd(&self, fd: &Resource<Descriptor>) -> FsResult<BorrowedFd<'_>> {
        Ok(raw_fd(self.fs.table.get(fd)?))
    }

    /// Probes `path` under `fd` (see [`probe`]). With no descriptor free
    /// for the probe, the operation fails and the call is marked: WASI has
    /// no error code for it, so the MCP layer says what happened.
    pub(super) fn probe_at(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<Probe> {
        match probe(self.dir_fd(fd)?, path, follow) {
            Probe::NoDescriptors => Err(self.exhausted()),
            found => Ok(found),
        }
    }

    /// The error of an operation that found no descriptor free, with the
    /// call marked for it.
    pub(super) fn exhausted(&self) -> FsError {
        self.guard.activity.mark_out_of_descriptors();
        ErrorCode::Io.into()
    }

    /// `e`, met by the host's own operation in `mount`, as the guest sees
    /// it; a disk error is recorded for the call with its errno (WASI
    /// would fold `EDQUOT` into `io`).
    pub(super) fn host_error(&self, mount: usize, e: rustix::io::Errno) -> FsError {
        if let Some(disk) = DiskError::of_errno(e.raw_os_error()) {
            let root = &self.guard.mounts[mount].root.name;
            self.guard.activity.mark_disk_error(disk, root);
        }
        self.os_error(e)
    }

    /// `e`, an I/O error of the host's own in `mount`, as the guest sees it
    /// (a disk error recorded for the call).
    pub(super) fn host_io_error(&self, mount: usize, e: std::io::Error) -> FsError {
        match e.raw_os_error() {
            Some(errno) => self.host_error(mount, rustix::io::Errno::from_raw_os_error(errno)),
            None if e.kind() == std::io::ErrorKind::ResourceBusy => ErrorCode::Busy.into(),
            None if e.kind() == std::io::ErrorKind::AlreadyExists => ErrorCode::Exist.into(),
            None => ErrorCode::Io.into(),
        }
    }

    /// `e` as the guest sees it; a lack of descriptors marks the call.
    pub(super) fn os_error(&self, e: rustix::io::Errno) -> FsError {
        if is_exhaustion(e) {
            return self.exhausted();
        }
        io_error(e)
    }

    /// Records the disk error `result` carries for the root of descriptor
    /// `rep` (see [`DiskError`]): no space and file too large by their WASI
    /// codes; an I/O error on a read-only filesystem as that (wasmtime-wasi
    /// folds `EROFS` into `io`, as it does `EDQUOT`, which only a stream's
    /// error or the host's own operations still tell).
    pub(super) fn disk_noted<T>(&self, rep: u32, result: FsResult<T>) -> FsResult<T> {
        let Err(e) = &result else {
            return result;
        };
        let Some(h) = self.guard.handles.get(&rep) else {
            return result;
        };
        let disk = match e.downcast_ref() {
            Some(ErrorCode::InsufficientSpace) => Some(DiskError::NoSpace),
            Some(ErrorCode::FileTooLarge) => Some(DiskError::TooLarge),
            Some(ErrorCode::Io | ErrorCode::ReadOnly) => self
                .fs
                .table
                .get(&Resource::<Descriptor>::new_borrow(rep))
                .ok()
                .and_then(|d| rustix::fs::fstatvfs(raw_fd(d)).ok())
                .filter(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
                .map(|_| DiskError::ReadOnly),
            _ => None,
        };
        if let Some(disk) = disk {
            let root = &self.guard.mounts[h.mount].root.name;
            self.guard.activity.mark_disk_error(disk, root);
        }
        result
    }

    /// After wasmtime-wasi's own open failed (its error code has lost the
    /// errno): whether the process is out of descriptors now, told by
    /// trying to duplicate one, and if so the call is marked.
    pub(super) fn check_exhaustion(&self, dir: &Resource<Descriptor>) {
        if let Ok(fd) = self.dir_fd(dir)
            && let Err(e) = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            && is_exhaustion(e)
        {
            self.guard.activity.mark_out_of_descriptors();
        }
    }

    /// Probes `path` under `fd`: the probe when found, `None` when absent (the
    /// operation itself will fail the same way), a refusal when it escapes
    /// or the probe cannot tell.
    pub(super) fn probe_checked(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        h: &Handle,
        rel: &Path,
        op: Permission,
    ) -> FsResult<Option<OwnedFd>> {
        Ok(self.probe_or_absent(fd, path, follow, h, rel, op)?.ok())
    }

    /// [`Self::probe_checked`], an absent path answered with the error that
    /// said so.
    fn probe_or_absent(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        h: &Handle,
        rel: &Path,
        op: Permission,
    ) -> FsResult<Result<OwnedFd, rustix::io::Errno>> {
        // A symlink on the way may lead through a denied name (`to_git/..`,
        // `to_pem/x`, `to_pem/`): then every step is checked by its real
        // name, and a denied one answers as a missing one, whatever comes
        // after it. Without a symlink, the lexical check saw every step.
        match without_symlinks(self.dir_fd(fd)?, path, follow) {
            Direct::Found(probe) => return Ok(Ok(probe)),
            Direct::Symlink => self.steps_checked(fd, path, h, rel, op)?,
            Direct::Other => {}
        }
        match self.probe_at(fd, path, follow)? {
            Probe::Found(fd) => Ok(Ok(fd)),
            Probe::Absent(e) => Ok(Err(e)),
            Probe::Escapes => Err(self.guard.refuse(Some(h.mount), rel, op, "confinement")),
            Probe::Failed | Probe::NoDescriptors => {
                Err(self.guard.refuse(Some(h.mount), rel, op, "probe_failed"))
            }
        }
    }

    /// Checks the real name of every step of `path` that is resolved as a
    /// directory (all but the last name, and that one too when `path` ends
    /// in `/`). A step that is missing ends the check: the operation meets
    /// the same end.
    pub(super) fn steps_checked(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        h: &Handle,
        rel: &Path,
        op: Permission,
    ) -> FsResult<()> {
        let names: Vec<&str> = path.split('/').filter(|n| !n.is_empty()).collect();
        let steps = if path.ends_with('/') {
            names.len()
        } else {
            names.len().saturating_sub(1)
        };
        let mut prefix = String::new();
        for name in &names[..steps] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(name);
            let Probe::Found(step) = self.probe_at(fd, &prefix, true)? else {
                return Ok(());
            };
            self.guard.passage(h, step.as_fd(), rel, op)?;
        }
        Ok(())
    }

    /// Checks an existing path for `op`: lexically, then by the real name of
    /// a probe (following a final symlink when `follow`). Special files are
    /// refused when `refuse_special`.
    pub(super) fn check_existing(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        op: Permission,
        follow: bool,
        refuse_special: bool,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::Existing)?;
        if is_plain_name(path) && !follow && !refuse_special {
            return Ok(h.at(rel));
        }
        let probed = self.existing_probed(fd, path, (op, follow, refuse_special), h, rel)?;
        Ok(probed.0)
    }

    /// Checks an existing path about to be opened for writing, as
    /// [`check_existing`](Self::check_existing) does with special files
    /// refused, and hands back the probe that was checked (`None` when
    /// nothing was there), for the open to reopen that very inode.
    pub(super) fn check_for_writing(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        op: Permission,
        follow: bool,
    ) -> FsResult<(Handle, Option<OwnedFd>)> {
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::Existing)?;
        self.existing_probed(fd, path, (op, follow, true), h, rel)
    }

    fn existing_probed(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        (op, follow, refuse_special): (Permission, bool, bool),
        h: Handle,
        rel: PathBuf,
    ) -> FsResult<(Handle, Option<OwnedFd>)> {
        let Some(probe) = self.probe_checked(fd, path, follow, &h, &rel, op)? else {
            return Ok((h.at(rel), None));
        };
        // The real name first: a denied one looks missing, whatever it is.
        let real = self.guard.real(&h, probe.as_fd(), &rel, op)?;
        if refuse_special && is_special(probe.as_fd()) {
            return Err(self.guard.refuse(Some(h.mount), &rel, op, "special_file"));
        }
        let checked = Handle {
            mount: h.mount,
            rel: real,
        };
        Ok((checked, Some(probe)))
    }

    /// Checks an existing path before opening it for reading only, with one
    /// probe: lexically, then by type (a special file is refused without
    /// being opened). A file or a directory is opened here, from the probe,
    /// after its real name is checked: the inode opened is the inode
    /// checked, nothing can be swapped in between (a FIFO put in its place
    /// would hold the host thread in `open` until a writer came, where the
    /// call's timeout cannot reach). A symlink not followed gets the open's
    /// own answer (`loop`). A missing path goes to the general open, whose
    /// real name is checked on the opened descriptor: opening for reading
    /// changes nothing. `directory`: the open asked for a directory.
    pub(super) fn read_open(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        directory: bool,
    ) -> FsResult<ReadOpen> {
        let op = Permission::Read;
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::Existing)?;
        let general = |rel| Ok(ReadOpen::General(h.at(rel)));
        let probe = match self.probe_or_absent(fd, path, follow, &h, &rel, op)? {
            Ok(probe) => probe,
            // Missing when probed: answered so, never opened again by the
            // path, where a FIFO put there since would hold the open (and
            // this thread, out of the timeout's reach) until a writer came.
            Err(e) => return Err(self.os_error(e)),
        };
        // The real name first: a denied one looks missing, whatever kind of
        // entry it is and whatever the open asks of it.
        let real = self.guard.real(&h, probe.as_fd(), &rel, op)?;
        let st = rustix::fs::fstat(&probe).map_err(io_error)?;
        let is_dir = match crate::sys::stat::file_type(&st) {
            FileType::RegularFile if directory => return Err(ErrorCode::NotDirectory.into()),
            FileType::RegularFile => false,
            FileType::Directory => true,
            FileType::Symlink => return Err(ErrorCode::Loop.into()),
            FileType::Unknown => return general(rel),
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => {
                return Err(self.guard.refuse(Some(h.mount), &rel, op, "special_file"));
            }
        };
        // The file as this call read it, for a publish over it to compare
        // (none where this call cannot write: a search reads thousands).
        if !is_dir && self.guard.mounts[h.mount].perms.contains(Permission::Write) {
            self.guard
                .read
                .insert((h.mount, real.clone()), Identity::of(&st));
        }
        let Descriptor::Dir(dir) = self.fs.table.get(fd)? else {
            return Err(ErrorCode::NotDirectory.into());
        };
        let perms = dir.perms;
        let descriptor = if is_dir {
            let file = reopen(probe.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY)
                .map_err(|e| self.os_error(e))?;
            Descriptor::Dir(wasmtime_wasi::filesystem::Dir::new(
                file.into(),
                perms,
                OpenMode::READ,
                true,
            ))
        } else {
            let file = reopen_for_reading(probe.as_fd()).map_err(|e| self.os_error(e))?;
            Descriptor::File(wasmtime_wasi::filesystem::File::new(
                file.into(),
                perms,
                OpenMode::READ,
                true,
            ))
        };
        let new = self.fs.table.push(descriptor)?;
        self.guard.handles.insert(
            new.rep(),
            Handle {
                mount: h.mount,
                rel: real,
            },
        );
        self.guard.activity.count_opened();
        Ok(ReadOpen::Opened(new))
    }

    /// Checks a name about to be created (or replaced) for `op`: lexically,
    /// and by the real name of its parent directory.
    pub(super) fn check_new(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        op: Permission,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::New)?;
        let (parent, name) = match path.trim_end_matches('/').rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => {
                return Ok(h.at(rel));
            }
        };
        let Some(probe) = self.probe_checked(fd, parent, true, &h, &rel, op)? else {
            return Ok(h.at(rel));
        };
        let real_parent = self.guard.passage(&h, probe.as_fd(), &rel, op)?;
        let real = real_parent.join(name);
        if self.guard.denies(h.mount, &real) {
            return Err(self.guard.refuse(Some(h.mount), &rel, op, "deny"));
        }
        if self.guard.place(h.mount, &real) != Place::Inside {
            return Err(self.guard.outside(h.mount, &rel, op, Lookup::New));
        }
        Ok(Handle {
            mount: h.mount,
            rel: real,
        })
    }

    /// Checks a path about to be unlinked or removed: delete permission,
    /// unless this call created it; never in a trash, never a mount's top.
    pub(super) fn check_removal(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), Permission::Delete)?;
        // Created entries are recorded by real path: find this one's.
        let real = match self.probe_at(fd, path, false)? {
            Probe::Found(found) => real_path(found.as_fd()).and_then(|p| {
                p.strip_prefix(&self.guard.mounts[h.mount].host)
                    .ok()
                    .map(Path::to_path_buf)
            }),
            _ => None,
        };
        // Everything in a staging directory is the call's own.
        let own = self.guard.mounts[h.mount].staging
            || real.is_some_and(|rel| self.guard.created.contains(&(h.mount, rel)));
        let op = if own {
            Permission::Write
        } else {
            Permission::Delete
        };
        let target = self.check_existing(fd, path, op, false, false)?;
        self.guard
            .not_trash(&target, &target.rel, Permission::Delete)?;
        self.guard.not_mount_top(&target, Permission::Delete)?;
        Ok(target)
    }

    /// The copy this call made in a trash that `path` under `fd` names, if
    /// it names one (only plain names: nothing in a trash can be a symlink
    /// the call made, nor be renamed or removed but this copy).
    pub(super) fn own_copy(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> Option<(usize, PathBuf)> {
        let h = self.guard.handles.get(&fd.rep())?;
        if !self.guard.mounts[h.mount].trash {
            return None;
        }
        let rel = Path::new(path);
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return None;
        }
        let key = (h.mount, h.rel.join(rel));
        self.guard.copies.contains_key(&key).then_some(key)
    }

    /// The hard link this call made in a trash that `path` under `fd`
    /// names, if it names one and the file is still where it was linked
    /// from (so taking the link back loses nothing).
    pub(super) fn own_link(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> FsResult<Option<(usize, PathBuf)>> {
        let Some(h) = self.guard.handles.get(&fd.rep()) else {
            return Ok(None);
        };
        let rel = Path::new(path);
        if !self.guard.mounts[h.mount].trash
            || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return Ok(None);
        }
        let key = (h.mount, h.rel.join(rel));
        let Some(link) = self.guard.trash_links.get(&key).cloned() else {
            return Ok(None);
        };
        let Probe::Found(found) = self.probe_at(fd, path, false)? else {
            return Ok(None);
        };
        let is = |st: &rustix::fs::Stat| crate::sys::stat::inode(st) == link.inode;
        let in_trash = rustix::fs::fstat(&found).is_ok_and(|st| is(&st) && st.st_nlink > 1);
        // Still at its place: looked up beneath the root, never through a
        // symlink.
        let (mount, from) = &link.from;
        let still = (|| {
            let root = crate::sys::beneath::open_root(&self.guard.mounts[*mount].root).ok()?;
            let dir = crate::sys::beneath::beneath(&root, from.parent()?).ok()?;
            let st = rustix::fs::statat(
                &dir,
                from.file_name()?,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .ok()?;
            Some(is(&st))
        })()
        .unwrap_or(false);
        Ok((in_trash && still).then_some(key))
    }

    /// Takes back the link `key` (see [`PolicedFs::own_link`]) at `path`
    /// under `fd`: no longer kept.
    pub(super) fn unlink_own_link(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        key: (usize, PathBuf),
    ) -> FsResult<()> {
        let at = Handle {
            mount: key.0,
            rel: key.1.clone(),
        };
        let (dir, name) = self.parent(fd, path, &at)?;
        rustix::fs::unlinkat(&dir, name.as_str(), rustix::fs::AtFlags::empty())
            .map_err(|e| self.host_error(key.0, e))?;
        if let Some(link) = self.guard.trash_links.remove(&key) {
            self.guard.kept_inodes.remove(&link.inode);
        }
        let to = key.1.to_string_lossy();
        self.guard.kept.retain(|k| k.to != to);
        Ok(())
    }

    /// Refuses a new name in a trash that is already taken: nothing kept is
    /// ever replaced.
    pub(super) fn never_replace_in_trash(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        new: &Handle,
    ) -> FsResult<()> {
        if matches!(self.probe_at(fd, path, false)?, Probe::Absent(_)) {
            return Ok(());
        }
        Err(self
            .guard
            .refuse(Some(new.mount), &new.rel, Permission::Write, "trash"))
    }

    /// When a rename will replace a regular file with a regular file (an
    /// atomic write), gives the incoming file the old one's permission bits:
    /// WASI cannot, and an edit must not make a private file readable or a
    /// script not executable.
    pub(super) fn carry_mode(
        &self,
        old_fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let regular = |fd: &OwnedFd| {
            rustix::fs::fstat(fd)
                .ok()
                .filter(|st| crate::sys::stat::file_type(st) == FileType::RegularFile)
        };
        let (Probe::Found(from), Probe::Found(to)) = (
            self.probe_at(old_fd, old_path, false)?,
            self.probe_at(new_fd, new_path, false)?,
        ) else {
            return Ok(());
        };
        if let (Some(_), Some(old)) = (regular(&from), regular(&to)) {
            // Never set-id bits: the guest wrote the content.
            let mode = Mode::from_raw_mode(old.st_mode & 0o777);
            let _ = rustix::fs::chmodat(
                self.dir_fd(old_fd)?,
                old_path,
                mode,
                rustix::fs::AtFlags::empty(),
            );
        }
        Ok(())
    }

    /// Whether `path` (not following a final symlink) is a directory.
    pub(super) fn is_directory(&self, fd: &Resource<Descriptor>, path: &str) -> FsResult<bool> {
        let Probe::Found(found) = self.probe_at(fd, path, false)? else {
            return Ok(false);
        };
        Ok(super::handles::is_directory(found.as_fd()))
    }

    /// Whether `path` is a symlink whose target does not exist (or leaves the root).
    pub(super) fn is_dangling_symlink(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> FsResult<bool> {
        let Probe::Found(link) = self.probe_at(fd, path, false)? else {
            return Ok(false);
        };
        let is_link = rustix::fs::fstat(&link)
            .is_ok_and(|st| crate::sys::stat::file_type(&st) == FileType::Symlink);
        Ok(is_link && !matches!(self.probe_at(fd, path, true)?, Probe::Found(_)))
    }

    /// What is at `path`, following a final symlink when `follow`; `None`
    /// when nothing is there.
    pub(super) fn stat_of(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<Option<rustix::fs::Stat>> {
        let Probe::Found(found) = self.probe_at(fd, path, follow)? else {
            return Ok(None);
        };
        Ok(rustix::fs::fstat(&found).ok())
    }

    /// The directory holding `path` under `fd` (opened `O_PATH` beneath its
    /// mount, and checked by its real name: the rename acts on exactly the
    /// directory checked) and the last name of `path`.
    pub(super) fn parent(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        target: &Handle,
    ) -> FsResult<(OwnedFd, String)> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        if !is_plain_name(name) {
            return Err(ErrorCode::Invalid.into());
        }
        let base = self.guard.handle(fd.rep(), Permission::Write)?;
        let op = Permission::Write;
        match self.probe_at(fd, dir, true)? {
            Probe::Found(parent) => {
                // The top of a trash mount holds only `.mcp-trash` that a
                // guest can name (the lexical check saw to it): it is no
                // place in the trash itself, and needs no check by name.
                let mount = &self.guard.mounts[base.mount];
                let trash_top =
                    mount.trash && real_path(parent.as_fd()).is_some_and(|p| p == mount.host);
                if !trash_top {
                    self.guard.passage(&base, parent.as_fd(), &target.rel, op)?;
                }
                Ok((parent, name.to_string()))
            }
            Probe::Absent(_) => Err(ErrorCode::NoEntry.into()),
            Probe::Escapes => {
                Err(self
                    .guard
                    .refuse(Some(base.mount), &target.rel, op, "confinement"))
            }
            Probe::Failed | Probe::NoDescriptors => {
                Err(self
                    .guard
                    .refuse(Some(base.mount), &target.rel, op, "probe_failed"))
            }
        }
    }
}
