//! The WASI `descriptor` methods: every open, stat, link, rename, removal,
//! read and write a guest makes, each through the checks before it touches
//! the disk. None of them acts on a path the checks have not judged.

use super::entries::as_seen;
use super::*;

/// The most one read brings, as wasmtime-wasi's own `read` (its
/// `MAX_READ_SIZE_ALLOC`): a guest asking for more reads again.
const MAX_READ: u64 = 64 * 1024;

impl PolicedFs<'_> {
    /// wasmtime-wasi's `read` (at most [`MAX_READ`] bytes, `true` only
    /// when none were left), without filling the buffer with zeros before
    /// reading into it: a search asks for 64 KiB to get a small file whole
    /// in one read, and the zeros cost more than the bytes. The bytes land
    /// in the call's scratch buffer and leave in a vector their size (a
    /// 64 KiB allocation freed per read costs more than the copy).
    fn read_at(
        &mut self,
        fd: &Resource<Descriptor>,
        len: fs::Filesize,
        offset: fs::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        // Not a file: the code wasmtime-wasi gives a directory.
        let Descriptor::File(file) = self.fs.table.get(fd)? else {
            return Err(ErrorCode::BadDescriptor.into());
        };
        let ask = len.min(MAX_READ) as usize;
        let scratch = &mut self.guard.scratch;
        scratch.reserve(ask);
        let (got, _) = rustix::io::pread(
            &*file.file,
            &mut scratch.spare_capacity_mut()[..ask],
            offset,
        )
        .map_err(io_error)?;
        Ok((got.to_vec(), got.is_empty()))
    }
}

impl fs::HostDescriptor for PolicedFs<'_> {
    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
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
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        if self.guard.held() >= MAX_DESCRIPTORS {
            let h = self.guard.handle(fd.rep(), op)?;
            let shown = h.rel.join(&path);
            return Err(self
                .guard
                .refuse(Some(h.mount), &shown, op, "too_many_descriptors"));
        }
        // In a trash, only an exclusive create for writing (a copy kept when
        // a hard link is impossible).
        let h = self.guard.handle(fd.rep(), op)?;
        if self.guard.mounts[h.mount].trash
            && !(oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE)
                && flags.contains(fs::DescriptorFlags::WRITE)
                && !flags.contains(fs::DescriptorFlags::READ))
        {
            return Err(self
                .guard
                .refuse(Some(h.mount), &h.rel.join(&path), op, "trash"));
        }
        let mut creates = oflags.contains(fs::OpenFlags::CREATE)
            && !matches!(self.probe_at(&fd, &path, follow)?, Probe::Found(_));
        let (mut checked, mut probe) = if oflags.contains(fs::OpenFlags::CREATE) {
            let named = self.check_new(&fd, &path, op)?;
            if creates
                && self.guard.mounts[named.mount].trash
                && ops::last_plain(&path)
                && let Some(copy) = self.trash_copy_open(&fd, &path, &named)?
            {
                // A copy kept where a hard link is impossible, made out of
                // the trash until whole (see `copies`).
                return Ok(copy);
            }
            // An existing target is checked like any other (it may be an alias).
            let (checked, probe) = self.check_for_writing(&fd, &path, op, follow)?;
            // Creating through a symlink whose target is missing would create
            // a file the checks never saw (`notes.txt -> .env`): refused, as
            // if the target's place were missing, the answer a denied
            // existing target gets too.
            if follow && self.is_dangling_symlink(&fd, &path)? {
                self.guard
                    .refuse(Some(checked.mount), &checked.rel, op, "confinement");
                return Err(ErrorCode::NoEntry.into());
            }
            (checked, probe)
        } else if op == Permission::Read {
            ops::refuse_sync(flags)?;
            let directory = oflags.contains(fs::OpenFlags::DIRECTORY);
            match self.read_open(&fd, &path, follow, directory)? {
                ReadOpen::Opened(new) => return Ok(new),
                ReadOpen::General(checked) => (checked, None),
            }
        } else {
            self.check_for_writing(&fd, &path, op, follow)?
        };
        let made = if creates && ops::last_plain(&path) {
            // Made here: its OS error is at hand (see `ops`).
            let made = self.host_create(&fd, &path, oflags, flags, &checked)?;
            if made.is_none() {
                // It appeared since it was probed: an existing file, checked
                // and opened as one, not this call's own.
                creates = false;
                (checked, probe) = self.check_for_writing(&fd, &path, op, follow)?;
            }
            made
        } else {
            None
        };
        let new = if let Some(made) = made {
            made
        } else if !creates
            && (flags.contains(fs::DescriptorFlags::WRITE)
                || oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE))
        {
            self.host_open_for_writing(&fd, oflags, flags, (&checked, probe))?
        } else {
            let dir = again(&fd);
            let opened =
                fs::HostDescriptor::open_at(&mut self.fs, fd, path_flags, path, oflags, flags)
                    .inspect_err(|_| self.check_exhaustion(&dir));
            self.disk_noted(dir.rep(), opened)?
        };
        let real = {
            let opened = raw_fd(self.fs.table.get(&new)?);
            self.guard.real(&checked, opened, &checked.rel, op)
        };
        match real {
            Ok(rel) => {
                if creates && self.guard.mounts[checked.mount].trash {
                    // A copy kept where a hard link is impossible.
                    self.guard.keep_copy(checked.mount, &rel);
                    let token = OpenCopy::default();
                    self.guard.copy_writers.insert(new.rep(), token.clone());
                    self.guard
                        .copies
                        .insert((checked.mount, rel.clone()), TrashCopy::placed(token));
                } else if creates {
                    self.guard.created.insert((checked.mount, rel.clone()));
                }
                self.guard.handles.insert(
                    new.rep(),
                    Handle {
                        mount: checked.mount,
                        rel,
                    },
                );
                self.guard.activity.count_opened();
                Ok(new)
            }
            Err(refused) => {
                fs::HostDescriptor::drop(&mut self.fs, new).map_err(FsError::trap)?;
                Err(refused)
            }
        }
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::DescriptorStat> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Read, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        let mut stat =
            fs::HostDescriptor::stat_at(&mut self.fs, again(&fd), path_flags, path.clone())?;
        if stat.type_ == fs::DescriptorType::Unknown
            && let Probe::Found(probe) = self.probe_at(&fd, &path, follow)?
            && let Ok(st) = rustix::fs::fstat(&probe)
        {
            stat.type_ = wasi_file_type(crate::sys::stat::file_type(&st));
        }
        Ok(as_seen(stat))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::MetadataHashValue> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Read, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        fs::HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let h = self.check_existing(&fd, &path, Permission::Read, false, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        let target = fs::HostDescriptor::readlink_at(&mut self.fs, fd, path)?;
        // A link's text must not tell the guest about what lies outside the
        // root or behind a denied name.
        let parent = h.rel.parent().unwrap_or(Path::new(""));
        match join_lexically(parent, Path::new(&target)) {
            None => Err(self
                .guard
                .refuse(Some(h.mount), &h.rel, Permission::Read, "confinement")),
            Some(to)
                if self.guard.mounts[h.mount]
                    .root
                    .deny
                    .match_path(&to)
                    .is_some()
                    || self.guard.mounts[h.mount]
                        .root
                        .deny
                        .match_path(Path::new(&target))
                        .is_some() =>
            {
                Err(self
                    .guard
                    .refuse(Some(h.mount), &h.rel, Permission::Read, "deny"))
            }
            Some(to) if self.guard.place(h.mount, &to) == Place::Outside => {
                Err(self
                    .guard
                    .refuse(Some(h.mount), &h.rel, Permission::Read, "client_roots"))
            }
            Some(_) => Ok(target),
        }
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Write, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Write)?;
        let rep = fd.rep();
        let set = fs::HostDescriptor::set_times_at(&mut self.fs, fd, path_flags, path, atim, mtim);
        self.disk_noted(rep, set)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let dir = self.check_new(&fd, &path, Permission::Write)?;
        // A trash mount reaches `.mcp-trash` itself, a hidden entry: making
        // it answers the same whether it was there or not.
        if self.guard.mounts[dir.mount].trash
            && dir.rel == Path::new(TRASH_DIR)
            && self.is_directory(&fd, &path)?
        {
            return Ok(());
        }
        if ops::last_plain(path.trim_end_matches('/')) {
            self.host_mkdir(&fd, &path, &dir)?;
        } else {
            let rep = fd.rep();
            let made = fs::HostDescriptor::create_directory_at(&mut self.fs, fd, path);
            self.disk_noted(rep, made)?;
        }
        self.guard.created.insert((dir.mount, dir.rel));
        Ok(())
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: fs::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let follow = old_path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let old = self.check_existing(&fd, &old_path, Permission::Write, follow, true)?;
        self.guard.not_trash(&old, &old.rel, Permission::Write)?;
        let new = self.check_new(&new_descriptor, &new_path, Permission::Write)?;
        self.guard.not_mount_top(&old, Permission::Write)?;
        self.guard.staging_bounds(&old, &new, Permission::Write)?;
        let before = self.stat_of(&fd, &old_path, follow)?;
        let inode = before.as_ref().map(crate::sys::stat::inode);
        let into_trash = self.guard.mounts[new.mount].trash;
        if into_trash {
            self.never_replace_in_trash(&new_descriptor, &new_path, &new)?;
        }
        if !self.guard.same_root(old.mount, new.mount) {
            return Err(self.guard.refuse(
                Some(new.mount),
                &new.rel,
                Permission::Write,
                "confinement",
            ));
        }
        if !follow && ops::last_plain(&old_path) && ops::last_plain(&new_path) {
            self.host_rename_or_link(
                (&fd, &old_path, &old),
                (&new_descriptor, &new_path, &new),
                true,
            )?;
        } else {
            let rep = new_descriptor.rep();
            let linked = fs::HostDescriptor::link_at(
                &mut self.fs,
                again(&fd),
                old_path_flags,
                old_path.clone(),
                new_descriptor,
                new_path,
            );
            self.disk_noted(rep, linked)?;
        }
        if into_trash && let Some(inode) = inode {
            self.guard.kept_inodes.insert(inode);
            self.guard.trash_links.insert(
                (new.mount, new.rel.clone()),
                TrashLink {
                    inode,
                    from: (old.mount, old.rel.clone()),
                },
            );
            // The new link changed the file's change time: a file this call
            // read, unchanged until this link, is still the file it read.
            let key = (old.mount, old.rel.clone());
            if before.as_ref().map(Identity::of) == self.guard.read.get(&key).copied()
                && let Some(after) = self.stat_of(&fd, &old_path, follow)?
            {
                self.guard.read.insert(key, Identity::of(&after));
            }
        }
        self.guard.keep(&old, &new);
        Ok(())
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let link = self.check_new(&fd, &dest_path, Permission::Write)?;
        self.guard.not_trash(&link, &link.rel, Permission::Write)?;
        // Nothing a tool publishes needs one, and a link would point
        // elsewhere once moved.
        if self.guard.mounts[link.mount].staging {
            return Err(self.guard.refuse(
                Some(link.mount),
                &link.rel,
                Permission::Write,
                "staging",
            ));
        }
        // A new link may only point down from where it sits: no absolute
        // target and no `..`, so no chain of links can climb out of the root.
        let target = Path::new(&src_path);
        if target
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(self.guard.refuse(
                Some(link.mount),
                &link.rel,
                Permission::Write,
                "confinement",
            ));
        }
        if self.guard.mounts[link.mount]
            .root
            .deny
            .match_path(target)
            .is_some()
        {
            return Err(self
                .guard
                .refuse(Some(link.mount), &link.rel, Permission::Write, "deny"));
        }
        if ops::last_plain(&dest_path) {
            return self.host_symlink(&fd, &src_path, &dest_path, &link);
        }
        let rep = fd.rep();
        let made = fs::HostDescriptor::symlink_at(&mut self.fs, fd, src_path, dest_path);
        self.disk_noted(rep, made)
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        if let Some(copy) = self.own_copy(&fd, &path) {
            return self.unlink_copy(&copy);
        }
        if let Some(link) = self.own_link(&fd, &path)? {
            return self.unlink_own_link(&fd, &path, link);
        }
        let target = self.check_removal(&fd, &path)?;
        if ops::last_plain(&path) {
            self.host_remove(&fd, &path, &target, false)?;
        } else {
            let rep = fd.rep();
            let removed = fs::HostDescriptor::unlink_file_at(&mut self.fs, fd, path);
            self.disk_noted(rep, removed)?;
        }
        self.guard.forget_under(target.mount, &target.rel);
        Ok(())
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.check_removal(&fd, &path)?;
        if ops::last_plain(path.trim_end_matches('/')) {
            self.host_remove(&fd, &path, &target, true)?;
        } else {
            let rep = fd.rep();
            let removed = fs::HostDescriptor::remove_directory_at(&mut self.fs, fd, path);
            self.disk_noted(rep, removed)?;
        }
        self.guard.forget_under(target.mount, &target.rel);
        Ok(())
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let new = self.check_new(&new_fd, &new_path, Permission::Write)?;
        let into_trash = self.guard.mounts[new.mount].trash;
        let old_mount = self.guard.handle(fd.rep(), Permission::Write)?.mount;
        let across = !self.guard.same_root(old_mount, new.mount);
        // Taking an entry out of its place, into the trash or to another
        // root, is a delete there; a rename within a root is a write.
        let op = if into_trash || across {
            Permission::Delete
        } else {
            Permission::Write
        };
        let old = self.check_existing(&fd, &old_path, op, false, false)?;
        self.guard.not_trash(&old, &old.rel, op)?;
        self.guard.not_mount_top(&old, op)?;
        self.guard.not_mount_top(&new, Permission::Write)?;
        self.guard.staging_bounds(&old, &new, op)?;
        if self.guard.mounts[old.mount].staging && !self.guard.mounts[new.mount].staging {
            let published = self.publish(&fd, &old_path, &new_fd, &new_path, &old, &new);
            return self.disk_noted(new_fd.rep(), published);
        }
        if into_trash {
            if across {
                // Into another root's trash: never.
                return Err(self.guard.refuse(Some(new.mount), &new.rel, op, "trash"));
            }
            self.never_replace_in_trash(&new_fd, &new_path, &new)?;
        } else if across
            && self.is_directory(&fd, &old_path)?
            && !self.guard.same_deny(old.mount, new.mount)
        {
            // A directory carries entries hidden by its root's deny list; in
            // a root that denies less they would appear.
            return Err(self
                .guard
                .refuse(Some(old.mount), &old.rel, Permission::Write, "deny"));
        }
        self.carry_mode(&fd, &old_path, &new_fd, &new_path)?;
        if ops::last_plain(&old_path) && ops::last_plain(&new_path) {
            self.host_rename_or_link((&fd, &old_path, &old), (&new_fd, &new_path, &new), false)?;
        } else {
            let rep = new_fd.rep();
            let renamed =
                fs::HostDescriptor::rename_at(&mut self.fs, fd, old_path, new_fd, new_path);
            self.disk_noted(rep, renamed)?;
        }
        self.guard.forget_under(old.mount, &old.rel);
        // What was at the new name is gone: descriptors of it, and any
        // "created by this call" mark, no longer apply.
        self.guard.forget_under(new.mount, &new.rel);
        self.guard.keep(&old, &new);
        Ok(())
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<fs::DirectoryEntryStream>> {
        let h = self.tracked(&fd, Permission::Read)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        if !self.guard.perms(h.mount).contains(Permission::Read) {
            return Err(self
                .guard
                .refuse(Some(h.mount), &h.rel, Permission::Read, "permission"));
        }
        if self.guard.held() >= MAX_DESCRIPTORS {
            return Err(self.guard.refuse(
                Some(h.mount),
                &h.rel,
                Permission::Read,
                "too_many_descriptors",
            ));
        }
        // A descriptor of its own: its own position, and the guest may drop
        // the directory's descriptor before the stream.
        let own = rustix::fs::openat(
            self.dir_fd(&fd)?,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.os_error(e))?;
        let stream = DirStream::new(own).map_err(|e| self.os_error(e))?;
        let stream = self.fs.table.push(stream)?;
        self.guard.streams.insert(stream.rep(), h);
        self.guard.activity.count_dir_read();
        Ok(Resource::new_own(stream.rep()))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.guard.handles.remove(&fd.rep());
        self.guard.copy_writers.remove(&fd.rep());
        fs::HostDescriptor::drop(&mut self.fs, fd)
    }

    // Operations on an open descriptor: its path was checked when it was
    // opened; only tracking (and write permission for changes) is checked.
    // Bytes moved are metered (see `meter`): streams are handed out wrapped.

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        self.readable(&fd)?;
        let stream = fs::HostDescriptor::read_via_stream(&mut self.fs, fd, offset)?;
        let inner = self.fs.table.delete(stream)?;
        let metered = self.guard.meter.input(inner);
        Ok(self.fs.table.push(metered)?)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let h = self.tracked(&fd, Permission::Write)?;
        let copy = self.guard.copy_writers.get(&fd.rep()).cloned();
        // wasmtime-wasi's checks, then a stream that writes on this thread
        // (see `file_output`).
        let file = match self.fs.table.get(&fd)? {
            Descriptor::File(f) if f.perms.write_not_permitted() => {
                return Err(ErrorCode::NotPermitted.into());
            }
            Descriptor::File(f) => Arc::clone(&f.file),
            Descriptor::Dir(_) => return Err(ErrorCode::BadDescriptor.into()),
        };
        let stream: wasmtime_wasi::p2::DynOutputStream = Box::new(FileOutput::new(file, offset));
        let stream = self.fs.table.push(stream)?;
        self.metered_output(stream, &h, copy)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let h = self.tracked(&fd, Permission::Write)?;
        let copy = self.guard.copy_writers.get(&fd.rep()).cloned();
        let stream = fs::HostDescriptor::append_via_stream(&mut self.fs, fd)?;
        self.metered_output(stream, &h, copy)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
        len: fs::Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        fs::HostDescriptor::advise(&mut self.fs, fd, offset, len, advice)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        let rep = fd.rep();
        let synced = fs::HostDescriptor::sync_data(&mut self.fs, fd);
        self.disk_noted(rep, synced)?;
        self.synced(rep)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorFlags> {
        self.tracked(&fd, Permission::Read)?;
        fs::HostDescriptor::get_flags(&mut self.fs, fd)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorType> {
        self.tracked(&fd, Permission::Read)?;
        let ty = fs::HostDescriptor::get_type(&mut self.fs, again(&fd))?;
        if ty == fs::DescriptorType::Unknown
            && let Ok(st) = rustix::fs::fstat(self.dir_fd(&fd)?)
        {
            return Ok(wasi_file_type(crate::sys::stat::file_type(&st)));
        }
        Ok(ty)
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: fs::Filesize) -> FsResult<()> {
        self.tracked(&fd, Permission::Write)?;
        let rep = fd.rep();
        let sized = fs::HostDescriptor::set_size(&mut self.fs, fd, size);
        self.disk_noted(rep, sized)
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        self.tracked(&fd, Permission::Write)?;
        let rep = fd.rep();
        let set = fs::HostDescriptor::set_times(&mut self.fs, fd, atim, mtim);
        self.disk_noted(rep, set)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: fs::Filesize,
        offset: fs::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.readable(&fd)?;
        let meter = Arc::clone(&self.guard.meter);
        let grant = meter.read_grant(len);
        let read = self.read_at(&fd, grant.size, offset);
        let got = read.as_ref().map_or(0, |(bytes, _)| bytes.len() as u64);
        meter.read_done(grant, got).map_err(|_| quota_error())?;
        read
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        mut buf: Vec<u8>,
        offset: fs::Filesize,
    ) -> FsResult<fs::Filesize> {
        let h = self.tracked(&fd, Permission::Write)?;
        let root = &self.guard.mounts[h.mount].root;
        crate::runtime::meter::reserve(&self.guard.activity, root, buf.len() as u64)
            .map_err(FsError::from)?;
        let meter = Arc::clone(&self.guard.meter);
        // A short write is a write: only what the quota grants is written.
        let granted = meter
            .write_grant(buf.len() as u64)
            .map_err(|_| quota_error())?;
        buf.truncate(granted as usize);
        let rep = fd.rep();
        let wrote = fs::HostDescriptor::write(&mut self.fs, fd, buf, offset);
        meter.wrote(granted, *wrote.as_ref().unwrap_or(&0));
        self.disk_noted(rep, wrote)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        let rep = fd.rep();
        let synced = fs::HostDescriptor::sync(&mut self.fs, fd);
        self.disk_noted(rep, synced)?;
        self.synced(rep)
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorStat> {
        self.readable(&fd)?;
        let mut stat = fs::HostDescriptor::stat(&mut self.fs, again(&fd))?;
        if stat.type_ == fs::DescriptorType::Unknown
            && let Ok(st) = rustix::fs::fstat(self.dir_fd(&fd)?)
        {
            stat.type_ = wasi_file_type(crate::sys::stat::file_type(&st));
        }
        Ok(as_seen(stat))
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        // Untracked, or in a trash (which tells nothing back): never the same.
        let told = |h: Option<&Handle>| h.is_some_and(|h| !self.guard.mounts[h.mount].trash);
        if !told(self.guard.handles.get(&a.rep())) || !told(self.guard.handles.get(&b.rep())) {
            return Ok(false);
        }
        fs::HostDescriptor::is_same_object(&mut self.fs, a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::MetadataHashValue> {
        self.readable(&fd)?;
        fs::HostDescriptor::metadata_hash(&mut self.fs, fd)
    }
}
