//! The path operations that make something new, done by the host itself
//! rather than by wasmtime-wasi: a file created by an open, a directory, a
//! symlink, a hard link, a rename. wasmtime-wasi turns the OS error of a
//! failed operation into a WASI code, and folds `EDQUOT`, `EROFS`, `EMFILE`
//! and `EXDEV` into the generic `io` (the model would read "uncategorized
//! error"); done here, the OS error is at hand: a disk error is recorded for
//! the call ([`PolicedFs::host_error`]) and the guest gets the WASI code
//! that says what happened (`cross-device` for a rename across
//! filesystems, on which the built-in tools fall back to a copy).
//!
//! Each acts on the parent directory of its path, opened `O_PATH` beneath
//! the mount and checked by its real name ([`PolicedFs::parent`]), and on
//! the last name of the path, as cap-std does for wasmtime-wasi; an open
//! of an existing file for writing acts on the very inode that was checked,
//! reopened from its probe, and a create is exclusive. Paths
//! whose last component is not a plain name (`.`, `..`, a trailing `/`
//! where it changes the meaning) are left to wasmtime-wasi, whose answer
//! for them is an error that is not a disk's.

use super::*;

/// The last name of `path` when the operation can act on it in its parent
/// directory: one plain name, with no `/` after it (`a/` must be a
/// directory, which only the general lookup says).
pub(super) fn last_plain(path: &str) -> bool {
    let last = path.rsplit('/').next().unwrap_or(path);
    is_plain_name(last)
}

/// The sync flags wasmtime-wasi does not support on an open either.
pub(super) fn refuse_sync(flags: fs::DescriptorFlags) -> FsResult<()> {
    if flags.intersects(
        fs::DescriptorFlags::FILE_INTEGRITY_SYNC
            | fs::DescriptorFlags::DATA_INTEGRITY_SYNC
            | fs::DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Err(ErrorCode::Unsupported.into());
    }
    Ok(())
}

/// The open flags and mode of an open for writing: without the write
/// flag, for reading too (wasmtime-wasi's rule: the mode then refuses what
/// is not asked); truncating, and exclusive where a create asks it (the
/// caller adds the create).
fn writing(flags: fs::DescriptorFlags, oflags: fs::OpenFlags) -> (OFlags, OpenMode) {
    let read =
        flags.contains(fs::DescriptorFlags::READ) || !flags.contains(fs::DescriptorFlags::WRITE);
    let (mut o, mut mode) = (OFlags::CLOEXEC, OpenMode::WRITE);
    if read {
        mode |= OpenMode::READ;
        o |= OFlags::RDWR;
    } else {
        o |= OFlags::WRONLY;
    }
    if oflags.contains(fs::OpenFlags::TRUNCATE) {
        o |= OFlags::TRUNC;
    }
    if oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) {
        o |= OFlags::EXCL;
    }
    (o, mode)
}

impl PolicedFs<'_> {
    /// The permissions wasmtime-wasi enforces on the directory descriptor
    /// `fd` (a read-only preopen refuses every change), checked as its own
    /// operations check them.
    fn dir_perms(&self, fd: &Resource<Descriptor>) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => Ok(d.perms),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }

    fn writable_dir(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        let perms = self.dir_perms(fd)?;
        if perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(perms)
    }

    /// Makes the directory `path` under `fd` (checked as `dir`).
    pub(super) fn host_mkdir(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        dir: &Handle,
    ) -> FsResult<()> {
        self.writable_dir(fd)?;
        let (parent, name) = self.parent(fd, path, dir)?;
        rustix::fs::mkdirat(&parent, name.as_str(), Mode::from_raw_mode(0o777))
            .map_err(|e| self.host_error(dir.mount, e))
    }

    /// Removes the file (`dir`: the empty directory) `path` under `fd`
    /// (checked as `target`).
    pub(super) fn host_remove(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        target: &Handle,
        dir: bool,
    ) -> FsResult<()> {
        self.writable_dir(fd)?;
        let (parent, name) = self.parent(fd, path, target)?;
        let flags = if dir {
            rustix::fs::AtFlags::REMOVEDIR
        } else {
            rustix::fs::AtFlags::empty()
        };
        rustix::fs::unlinkat(&parent, name.as_str(), flags)
            .map_err(|e| self.host_error(target.mount, e))
    }

    /// Opens what exists at a path under `fd` for writing: the inode its
    /// probe found and the checks passed (`probe`, `checked`), reopened by
    /// no name, so that nothing renamed over the path since (a symlink
    /// to a denied file, a directory swapped for one leading to it, a FIFO)
    /// is what an `O_TRUNC` empties or what the open waits on. A path gone
    /// since its probe answers `no-entry`, as an open a moment later would.
    pub(super) fn host_open_for_writing(
        &mut self,
        fd: &Resource<Descriptor>,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
        (checked, probe): (&Handle, Option<OwnedFd>),
    ) -> FsResult<Resource<Descriptor>> {
        refuse_sync(flags)?;
        if oflags.contains(fs::OpenFlags::DIRECTORY)
            && oflags.intersects(
                fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE | fs::OpenFlags::TRUNCATE,
            )
        {
            return Err(ErrorCode::Invalid.into());
        }
        let perms = self.writable_dir(fd)?;
        let Some(probe) = probe else {
            return Err(ErrorCode::NoEntry.into());
        };
        if oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) {
            return Err(ErrorCode::Exist.into());
        }
        // What the open itself would answer for anything but a file (a
        // special file was refused by the checks).
        let st = rustix::fs::fstat(&probe).map_err(io_error)?;
        match crate::sys::stat::file_type(&st) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(ErrorCode::IsDirectory.into()),
            FileType::Symlink => return Err(ErrorCode::Loop.into()),
            _ => return Err(ErrorCode::Io.into()),
        }
        let (access, mode) = writing(flags, oflags);
        let file = reopen(probe.as_fd(), access).map_err(|e| self.host_error(checked.mount, e))?;
        let file = wasmtime_wasi::filesystem::File::new(file.into(), perms, mode, true);
        Ok(self.fs.table.push(Descriptor::File(file))?)
    }

    /// Makes the symlink `path` under `fd` (checked as `link`) to `target`.
    pub(super) fn host_symlink(
        &mut self,
        fd: &Resource<Descriptor>,
        target: &str,
        path: &str,
        link: &Handle,
    ) -> FsResult<()> {
        self.writable_dir(fd)?;
        let (parent, name) = self.parent(fd, path, link)?;
        rustix::fs::symlinkat(target, &parent, name.as_str())
            .map_err(|e| self.host_error(link.mount, e))
    }

    /// Renames (or, with `link`, hard-links) `old_path` under `fd` to
    /// `new_path` under `new_fd`, never following a symlink at either end.
    pub(super) fn host_rename_or_link(
        &mut self,
        (fd, old_path, old): (&Resource<Descriptor>, &str, &Handle),
        (new_fd, new_path, new): (&Resource<Descriptor>, &str, &Handle),
        link: bool,
    ) -> FsResult<()> {
        // As wasmtime-wasi: both ends writable, under the same permissions.
        let perms = self.writable_dir(fd)?;
        if self.writable_dir(new_fd)? != perms {
            return Err(ErrorCode::NotPermitted.into());
        }
        let (from_dir, from_name) = self.parent(fd, old_path, old)?;
        let (to_dir, to_name) = self.parent(new_fd, new_path, new)?;
        let done = if link {
            rustix::fs::linkat(
                &from_dir,
                from_name.as_str(),
                &to_dir,
                to_name.as_str(),
                rustix::fs::AtFlags::empty(),
            )
        } else {
            rustix::fs::renameat(&from_dir, from_name.as_str(), &to_dir, to_name.as_str())
        };
        done.map_err(|e| self.host_error(new.mount, e))
    }

    /// Creates the file `path` under `fd` (checked as `checked`; nothing
    /// stood there when it was probed) with an open as wasmtime-wasi's
    /// would make it, and hands out its descriptor. The open is exclusive,
    /// whatever the guest asked: only a file this open made is handed out
    /// as made (a call may remove what it created). Something put there
    /// since the probe gives `None` where the guest did not ask for
    /// exclusive: the caller opens it as the existing file it is.
    pub(super) fn host_create(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
        checked: &Handle,
    ) -> FsResult<Option<Resource<Descriptor>>> {
        refuse_sync(flags)?;
        if oflags.contains(fs::OpenFlags::DIRECTORY) {
            return Err(ErrorCode::Invalid.into());
        }
        let perms = self.writable_dir(fd)?;
        let (o, mode) = writing(flags, oflags);
        let o = o | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let (parent, name) = self.parent(fd, path, checked)?;
        let file = match rustix::fs::openat(&parent, name.as_str(), o, Mode::from_raw_mode(0o666)) {
            Err(rustix::io::Errno::EXIST) if !oflags.contains(fs::OpenFlags::EXCLUSIVE) => {
                return Ok(None);
            }
            opened => opened.map_err(|e| self.host_error(checked.mount, e))?,
        };
        let file = wasmtime_wasi::filesystem::File::new(file.into(), perms, mode, true);
        Ok(Some(self.fs.table.push(Descriptor::File(file))?))
    }
}
