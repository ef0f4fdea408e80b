//! The WASI `descriptor` methods: every open, stat, link, rename, removal,
//! read and write a guest makes, each through the checks before it touches
//! the disk. None of them acts on a path the checks have not judged.
//!
//! The trait impl `fs::HostDescriptor for PolicedFs`, whole, and a read
//! helper of `impl PolicedFs`: each method here is the entry point, and
//! the steps it takes are `PolicedFs` and `FsGuard` methods in the files
//! named for them (`checks.rs`, `view.rs`, `open.rs`, `change.rs`, …).

use std::path::{Component, Path};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::entries::as_seen;
use super::file_output::FileOutput;
use super::ops;
use super::{
    DirStream, Handle, Lookup, PolicedFs, Probe, ReadOpen, again, io_error, quota_error, raw_fd,
    wasi_file_type,
};
use crate::policy::{Permission, Rule};
use crate::sys::descriptors::MAX_DESCRIPTORS;

/// The most one read brings, as wasmtime-wasi's own `read` (its
/// `MAX_READ_SIZE_ALLOC`): a guest asking for more reads again.
const MAX_READ: u64 = 64 * 1024;
const _: () = assert!(MAX_READ as usize == super::ahead::HEAD);

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
        // The bytes read ahead for a file's first read, from its start: what
        // this read would bring (a shorter head is the whole file).
        if offset == 0
            && let Some(mut head) = self.guard.ahead.head(fd.rep())
        {
            head.truncate(ask);
            let end = head.is_empty();
            return Ok((head, end));
        }
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
        let h = self.guard.handle(fd.rep(), op)?;
        if self.guard.held() >= MAX_DESCRIPTORS {
            let shown = h.rel.join(&path);
            return Err(self
                .guard
                .refuse(Some(h.mount), &shown, op, Rule::TooManyDescriptors));
        }
        // A change, or a path in a root the call has changed: the call's
        // view (see `change` and `view`).
        if writes || self.guard.view[h.mount] {
            return self.open_in_view(&fd, path_flags, &path, oflags, flags);
        }
        ops::refuse_sync(flags)?;
        let directory = oflags.contains(fs::OpenFlags::DIRECTORY);
        let checked = match self.read_open(&fd, &path, follow, directory)? {
            ReadOpen::Opened(new) => return Ok(new),
            ReadOpen::General(checked) => checked,
        };
        let dir = again(&fd);
        let opened = fs::HostDescriptor::open_at(&mut self.fs, fd, path_flags, path, oflags, flags)
            .inspect_err(|_| self.check_exhaustion(&dir));
        let new = self.disk_noted(dir.rep(), opened)?;
        let real = {
            let opened = raw_fd(self.fs.table.get(&new)?);
            self.guard.real(&checked, opened, &checked.rel, op)
        };
        match real {
            Ok(rel) => {
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
        let h = self.guard.handle(fd.rep(), Permission::Read)?;
        if self.guard.view[h.mount] {
            return self.stat_in_view(&fd, &path, follow);
        }
        self.check_existing(&fd, &path, Permission::Read, follow, false)?;
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
        let h = self.guard.handle(fd.rep(), Permission::Read)?;
        if self.guard.view[h.mount] {
            return self.hash_in_view(&fd, &path, follow);
        }
        self.check_existing(&fd, &path, Permission::Read, follow, false)?;
        fs::HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let h = self.guard.handle(fd.rep(), Permission::Read)?;
        let (at, target) = if self.guard.view[h.mount] {
            self.readlink_in_view(&fd, &path)?
        } else {
            let at = self.check_existing(&fd, &path, Permission::Read, false, false)?;
            let target = fs::HostDescriptor::readlink_at(&mut self.fs, fd, path)?;
            (at, target)
        };
        self.shown_target(&at, target)
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        self.set_times_in_view(&fd, path_flags, &path, atim, mtim)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.mkdir_in_view(&fd, &path)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: fs::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.link_in_view(&fd, old_path_flags, &old_path, &new_descriptor, &new_path)
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let h = self.guard.handle(fd.rep(), Permission::Write)?;
        let rel = self
            .guard
            .lexical(&h, &dest_path, Permission::Write, Lookup::New)?;
        // A new link may only point down from where it sits: no absolute
        // target and no `..`, so no chain of links can climb out of the root.
        let target = Path::new(&src_path);
        if target
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(self.guard.refuse(
                Some(h.mount),
                &rel,
                Permission::Write,
                Rule::Confinement,
            ));
        }
        if self.guard.mounts[h.mount]
            .root
            .deny
            .match_path(target)
            .is_some()
        {
            return Err(self
                .guard
                .refuse(Some(h.mount), &rel, Permission::Write, Rule::Deny));
        }
        self.symlink_in_view(&fd, &src_path, &dest_path)
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.remove_in_view(&fd, &path, false)
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.remove_in_view(&fd, &path, true)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.rename_in_view(&fd, &old_path, &new_fd, &new_path)
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<fs::DirectoryEntryStream>> {
        let h = self.tracked(&fd, Permission::Read)?;
        if !self.guard.perms(h.mount).contains(Permission::Read) {
            return Err(self.guard.refuse(
                Some(h.mount),
                &h.rel,
                Permission::Read,
                Rule::Permission,
            ));
        }
        if self.guard.held() >= MAX_DESCRIPTORS {
            return Err(self.guard.refuse(
                Some(h.mount),
                &h.rel,
                Permission::Read,
                Rule::TooManyDescriptors,
            ));
        }
        if self.guard.view[h.mount] {
            let entries = self.listing(h.mount, &h.rel)?;
            let stream = self.fs.table.push(DirStream::listed(entries))?;
            self.guard.streams.insert(stream.rep(), h);
            self.guard.activity.count_dir_read();
            return Ok(Resource::new_own(stream.rep()));
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
        let mut stream = DirStream::new(own).map_err(|e| self.os_error(e))?;
        // Its regular files may be opened by name (`read_open_plain`).
        self.guard.ahead.abandon();
        let listing = (fd.rep(), self.guard.next_listing);
        self.guard.next_listing += 1;
        self.guard.listed.start(listing);
        stream.listing = Some(listing);
        let stream = self.fs.table.push(stream)?;
        self.guard.streams.insert(stream.rep(), h);
        self.guard.activity.count_dir_read();
        Ok(Resource::new_own(stream.rep()))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.guard.handles.remove(&fd.rep());
        self.guard.pending.remove(&fd.rep());
        self.guard.listed.forget(fd.rep());
        if self.guard.ahead.reading(fd.rep()) {
            self.guard.ahead.abandon();
        }
        // A file opened ahead is closed on the read-ahead's thread.
        if self.guard.ahead.release(fd.rep()) {
            let descriptor = self.fs.table.delete(fd)?;
            self.guard.ahead.close(Box::new(descriptor));
            return Ok(());
        }
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
        self.materialize(fd.rep())?;
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
        self.metered_output(stream, &h)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let h = self.tracked(&fd, Permission::Write)?;
        self.materialize(fd.rep())?;
        let stream = fs::HostDescriptor::append_via_stream(&mut self.fs, fd)?;
        self.metered_output(stream, &h)
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

    /// Nothing to do on disk: what a call writes is staged, and its
    /// publish syncs it, and the directories it changes, before the call
    /// is answered (a call that fails keeps none of it).
    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        Ok(())
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
        self.resize_pending(fd.rep(), size)?;
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
        self.set_times_of_descriptor(&fd, atim, mtim)
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
        self.materialize(fd.rep())?;
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

    /// As [`Self::sync_data`]: the publish syncs.
    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        Ok(())
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
        // Untracked: never the same.
        if !self.guard.handles.contains_key(&a.rep()) || !self.guard.handles.contains_key(&b.rep())
        {
            return Ok(false);
        }
        fs::HostDescriptor::is_same_object(&mut self.fs, a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::MetadataHashValue> {
        self.readable(&fd)?;
        fs::HostDescriptor::metadata_hash(&mut self.fs, fd)
    }
}
