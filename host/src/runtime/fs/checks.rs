//! The checks before an operation on the disk as it is: an existing path,
//! an open for reading, each probed and judged against the deny list and
//! the mount's permissions, with errors named for the model; and the
//! plumbing they share (probes, descriptors, disk errors, metered
//! streams). New names and removals are judged in the call's view
//! (`view.rs`, `change.rs`). Refusals are recorded; nothing is changed
//! here.
//!
//! Part of `impl PolicedFs`: the checks need the descriptor table (which
//! descriptor is which directory) as well as the guard, so they are the
//! policing filesystem's methods; here, apart from the WASI methods
//! (`descriptor.rs`) that ask them.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, OFlags, statat};
use wasmtime::component::Resource;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::{
    Direct, Handle, Lookup, Place, PolicedFs, Probe, ReadOpen, io_error, is_exhaustion,
    is_plain_name, is_special, join_lexically, open_regular, probe, raw_fd, real_path, reopen,
    reopen_for_reading, without_symlinks,
};
use crate::policy::{Permission, Rule};
use crate::runtime::activity::DiskError;

impl PolicedFs<'_> {
    /// Hands out a write stream wrapped in the call's meter.
    /// Its disk errors are recorded for the root of `h`.
    pub(super) fn metered_output(
        &mut self,
        stream: Resource<streams::OutputStream>,
        h: &Handle,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let inner = self.fs.table.delete(stream)?;
        let root = Arc::clone(&self.guard.mounts[h.mount].root);
        let metered = self.guard.meter.output(inner, root);
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
            Probe::Escapes => Err(self.guard.refuse(Some(h.mount), rel, op, Rule::Confinement)),
            Probe::Failed | Probe::NoDescriptors => {
                Err(self.guard.refuse(Some(h.mount), rel, op, Rule::ProbeFailed))
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
            return Err(self
                .guard
                .refuse(Some(h.mount), &rel, op, Rule::SpecialFile));
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
        if !directory
            && is_plain_name(path)
            && let Some(opened) = self.read_open_plain(fd, path, &h, &rel)?
        {
            return Ok(ReadOpen::Opened(opened));
        }
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
                return Err(self
                    .guard
                    .refuse(Some(h.mount), &rel, op, Rule::SpecialFile));
            }
        };
        // The file as this call read it, for a publish over it to compare
        // (none where this call cannot write: a search reads thousands).
        if !is_dir && self.guard.mounts[h.mount].perms.contains(Permission::Write) {
            self.guard.overlays[h.mount].saw(&real, crate::store::publish::Identity::of(&st));
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

    /// [`Self::read_open`] of a regular file named by one plain name in the
    /// complete listing of its directory ([`super::Listed`]), the common
    /// case (a walk reading the files of a directory it listed), or right
    /// under the root (stat'ed first), in two calls where the general path
    /// makes four, two of them through procfs: opened by its name without
    /// following and without waiting,
    /// kept only if `fstat` says it is a regular file
    /// ([`super::open_regular`]), or taken from the read-ahead
    /// (`ahead.rs`), which opened it so. Its real path is the directory's,
    /// which was its descriptor's checked path when a file of the listing
    /// was first opened,
    /// plus the name: no symlink can be on the way, and `rel` is checked as
    /// a real path is (the whole path against the deny list, inside the
    /// client roots). `None` where anything differs (not listed, a
    /// symlink, a directory, a special file, a swap): the general path
    /// decides.
    fn read_open_plain(
        &mut self,
        fd: &Resource<Descriptor>,
        name: &str,
        h: &Handle,
        rel: &Path,
    ) -> FsResult<Option<Resource<Descriptor>>> {
        let rep = fd.rep();
        let listed = self.guard.listed.is_file(rep, name) && self.listing_holds(fd, h)?;
        // A name right under the root needs no listing: nothing above it in
        // the root can be renamed. It is stat'ed first instead, so that a
        // special file is refused without being opened.
        let seen = match (listed, h.rel.as_os_str().is_empty()) {
            (true, _) => None,
            (false, true) => match statat(self.dir_fd(fd)?, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if crate::sys::stat::file_type(&st) == FileType::RegularFile => Some(st),
                _ => return Ok(None),
            },
            (false, false) => return Ok(None),
        };
        let ahead = if listed {
            self.guard.ahead.take(rep, name)
        } else {
            None
        };
        // The first listed file opened: the worker opens the others.
        if listed && !self.guard.ahead.reading(rep) && !self.guard.ahead.is_off() {
            let names = self.guard.listed.after(rep, name);
            let dir = raw_fd(self.fs.table.get(fd)?);
            self.guard.ahead.start(rep, dir, names);
        }
        let (file, st, head) = match ahead {
            Some(opened) => (opened.file, opened.st, opened.head),
            None => match open_regular(self.dir_fd(fd)?, name) {
                Ok(Some((file, st))) => (file, st, None),
                Err(e) if is_exhaustion(e) => return Err(self.exhausted()),
                Ok(None) | Err(_) => return Ok(None),
            },
        };
        if seen.is_some_and(|seen| (seen.st_dev, seen.st_ino) != (st.st_dev, st.st_ino)) {
            return Ok(None);
        }
        let mount = &self.guard.mounts[h.mount];
        if mount.root.deny.match_path(rel).is_some() {
            return Err(self
                .guard
                .denied(h.mount, rel, Permission::Read, Lookup::Existing));
        }
        if self.guard.place(h.mount, rel) != Place::Inside {
            return Err(self
                .guard
                .outside(h.mount, rel, Permission::Read, Lookup::Existing));
        }
        if mount.perms.contains(Permission::Write) {
            self.guard.overlays[h.mount].saw(rel, crate::store::publish::Identity::of(&st));
        }
        let Descriptor::Dir(d) = self.fs.table.get(fd)? else {
            return Err(ErrorCode::NotDirectory.into());
        };
        let descriptor = Descriptor::File(wasmtime_wasi::filesystem::File::new(
            file.into(),
            d.perms,
            OpenMode::READ,
            true,
        ));
        let new = self.fs.table.push(descriptor)?;
        let handle = Handle {
            mount: h.mount,
            rel: rel.to_path_buf(),
        };
        self.guard.handles.insert(new.rep(), handle);
        if head.is_some() {
            self.guard.ahead.hand(new.rep(), head);
        }
        self.guard.activity.count_opened();
        Ok(Some(new))
    }

    /// Whether the directory listed last, of descriptor `fd` (handle `h`),
    /// is where its descriptor was checked: its real path read once per
    /// listing, when a file of it is first opened.
    fn listing_holds(&mut self, fd: &Resource<Descriptor>, h: &Handle) -> FsResult<bool> {
        if let Some(holds) = self.guard.listed.holds {
            return Ok(holds);
        }
        let expected = self.guard.mounts[h.mount].host.join(&h.rel);
        let holds = real_path(self.dir_fd(fd)?).is_some_and(|real| real == expected);
        self.guard.listed.holds = Some(holds);
        Ok(holds)
    }

    /// A tracked descriptor, for an operation on the descriptor itself.
    pub(super) fn tracked(
        &mut self,
        fd: &Resource<Descriptor>,
        op: Permission,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        if op != Permission::Read && !self.guard.perms(h.mount).contains(op) {
            return Err(self
                .guard
                .refuse(Some(h.mount), &h.rel, op, Rule::Permission));
        }
        self.guard.inside_for(&h, op)?;
        Ok(h)
    }

    /// A tracked descriptor, for an operation that tells what is in the
    /// file or about it.
    pub(super) fn readable(&mut self, fd: &Resource<Descriptor>) -> FsResult<Handle> {
        self.tracked(fd, Permission::Read)
    }

    /// What `readlink` may tell the guest of the link `at` to `target`:
    /// nothing that points out of the root, at a denied name or outside
    /// the client roots.
    pub(super) fn shown_target(&mut self, at: &Handle, target: String) -> FsResult<String> {
        let parent = at.rel.parent().unwrap_or(Path::new(""));
        let deny = &self.guard.mounts[at.mount].root.deny;
        match join_lexically(parent, Path::new(&target)) {
            None => {
                Err(self
                    .guard
                    .refuse(Some(at.mount), &at.rel, Permission::Read, Rule::Confinement))
            }
            Some(to)
                if deny.match_path(&to).is_some()
                    || deny.match_path(Path::new(&target)).is_some() =>
            {
                Err(self
                    .guard
                    .refuse(Some(at.mount), &at.rel, Permission::Read, Rule::Deny))
            }
            Some(to) if self.guard.place(at.mount, &to) == Place::Outside => Err(self
                .guard
                .refuse(Some(at.mount), &at.rel, Permission::Read, Rule::ClientRoots)),
            Some(_) => Ok(target),
        }
    }
}
