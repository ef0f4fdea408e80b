//! Writes that replace: a staged file published over the path it replaces in
//! one exchange, and what stood there kept in the trash first. Never
//! removes a version it has not kept.

use super::*;

impl PolicedFs<'_> {
    /// Publishes what the call made in its staging directory (`old`) at a
    /// name of its root (`new`): the rename the guest asked for, done so
    /// that nothing is lost and nothing is replaced unseen.
    ///
    /// - Where nothing stands, it is `RENAME_NOREPLACE`: something that
    ///   appeared meanwhile is looked at again, never overwritten blindly.
    ///   A file this call read that is gone since fails with `busy`: the
    ///   publish would bring back a file someone deleted.
    /// - A directory (a copied tree) is only ever published where nothing
    ///   stands.
    /// - Over a file this call opened for reading, the file must still be
    ///   the one it read (device, inode, size, modification and change
    ///   times); otherwise the publish fails with `busy` and nothing
    ///   changes, so an edit never overwrites a change it did not see.
    /// - What stands there is in the call's trash entry before anything
    ///   moves: kept by the tool itself (the built-in tools link what they
    ///   replace first, and report where), or linked there now. Then the
    ///   new file takes the place with `RENAME_EXCHANGE` (WASI has no
    ///   exchange), in one step, and what stood there comes out under the
    ///   temporary name. If that is not the version kept (an outside
    ///   program replaced the file in the instant between), it is the one
    ///   this call replaced: over a file the call read, the exchange is
    ///   undone (`busy`); otherwise it goes to the trash too, and if it
    ///   cannot, the exchange is undone.
    pub(super) fn publish(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
        old: &Handle,
        new: &Handle,
    ) -> FsResult<()> {
        use rustix::fs::{AtFlags, RenameFlags, renameat_with};
        use rustix::io::Errno;
        pause_before_publish();
        let (from_dir, from_name) = self.parent(fd, old_path, old)?;
        let (to_dir, to_name) = self.parent(new_fd, new_path, new)?;
        let lstat =
            |dir: &OwnedFd, name: &str| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
        let incoming = lstat(&from_dir, &from_name).map_err(io_error)?;
        let is_dir = |st: &rustix::fs::Stat| crate::sys::stat::file_type(st) == FileType::Directory;
        let inode = |st: &rustix::fs::Stat| crate::sys::stat::inode(st);
        let read = self.guard.read.get(&(new.mount, new.rel.clone())).copied();
        // Twice at most: a name that appears between the look and the
        // rename is looked at again.
        for _ in 0..2 {
            let standing = match lstat(&to_dir, &to_name) {
                Ok(st) => st,
                Err(Errno::NOENT) if read.is_some() => return Err(ErrorCode::Busy.into()),
                Err(Errno::NOENT) => {
                    match renameat_with(
                        &from_dir,
                        &from_name,
                        &to_dir,
                        &to_name,
                        RenameFlags::NOREPLACE,
                    ) {
                        Ok(()) => {
                            self.published(old, new);
                            return Ok(());
                        }
                        Err(Errno::EXIST) => continue,
                        Err(e) => return Err(self.host_error(new.mount, e)),
                    }
                }
                Err(e) => return Err(io_error(e)),
            };
            if is_dir(&incoming) {
                return Err(ErrorCode::Exist.into());
            }
            if is_dir(&standing) {
                return Err(ErrorCode::IsDirectory.into());
            }
            if read.is_some_and(|read| read != Identity::of(&standing)) {
                return Err(ErrorCode::Busy.into());
            }
            let Some(stamp) = self.guard.stamp.clone() else {
                // No trash to keep the replaced file in: never replace.
                return Err(self.guard.refuse(
                    Some(new.mount),
                    &new.rel,
                    Permission::Write,
                    "trash",
                ));
            };
            if !self.guard.kept_inodes.contains(&inode(&standing))
                && !self.guard.kept_copies.contains_key(&inode(&standing))
            {
                match self.keep_standing(&to_dir, &to_name, new, &stamp) {
                    // The file is on another filesystem than the trash (one
                    // mounted inside the root): kept by a copy, before
                    // anything moves.
                    Err(e) if e.raw_os_error() == Some(Errno::XDEV.raw_os_error()) => {
                        self.keep_standing_by_copy(&to_dir, &to_name, new, &stamp, &standing)?;
                    }
                    // Where hard links are impossible, it is moved there
                    // after the exchange instead.
                    _ => {}
                }
            }
            // The new file takes the old one's permission bits: WASI
            // cannot, and an edit must not make a private file readable or
            // a script not executable. Never set-id bits: the guest wrote
            // the content.
            if crate::sys::stat::file_type(&incoming) == FileType::RegularFile
                && crate::sys::stat::file_type(&standing) == FileType::RegularFile
            {
                let mode = Mode::from_raw_mode(standing.st_mode & 0o777);
                let _ = rustix::fs::chmodat(&from_dir, from_name.as_str(), mode, AtFlags::empty());
            }
            let exchange = || {
                renameat_with(
                    &from_dir,
                    &from_name,
                    &to_dir,
                    &to_name,
                    RenameFlags::EXCHANGE,
                )
            };
            exchange().map_err(|e| self.host_error(new.mount, e))?;
            let displaced = lstat(&from_dir, &from_name).map_err(io_error)?;
            let copied = self.guard.kept_copies.get(&inode(&displaced)).copied();
            if self.guard.kept_inodes.contains(&inode(&displaced))
                || copied == Some(copies::Copied::of(&displaced))
            {
                // Kept already: this name is one more link to it, or the
                // very version copied.
                let _ = rustix::fs::unlinkat(&from_dir, from_name.as_str(), AtFlags::empty());
            } else if self.guard.kept_copies.contains_key(&inode(&standing)) {
                // Kept by a copy, but what came out is not the version
                // copied (changed in the instant between): put back, and
                // look again.
                if let Err(undo) = exchange() {
                    tracing::error!(
                        root = %self.guard.mounts[new.mount].root.name,
                        "a replaced file could not be put back ({undo}); it is in the staging \
                         directory of the call"
                    );
                    return Err(ErrorCode::Busy.into());
                }
                continue;
            } else {
                let kept = if read.is_some() {
                    // Not the file the call read: changed in the instant
                    // between the check and the exchange.
                    Err(ErrorCode::Busy.into())
                } else {
                    self.keep_displaced(&from_dir, &from_name, new, &stamp)
                        .map_err(|e| self.host_io_error(new.mount, e))
                };
                if let Err(e) = kept {
                    if let Err(undo) = exchange() {
                        tracing::error!(
                            root = %self.guard.mounts[new.mount].root.name,
                            "a replaced file could not be kept nor put back ({undo}); it is in the \
                             staging directory of the call"
                        );
                    }
                    return Err(e);
                }
            }
            self.published(old, new);
            return Ok(());
        }
        Err(ErrorCode::Busy.into())
    }

    /// The call's trash slot for what stands at `at`:
    /// `.mcp-trash/<stamp>/<path>`, or `<path>.~N~` where that is taken,
    /// made ready (its parent directories), and `put` tried at each free
    /// name until it does not find the name taken. Records what was kept.
    pub(super) fn keep_at_slot(
        &mut self,
        at: &Handle,
        stamp: &Path,
        mut put: impl FnMut(&OwnedFd, &std::ffi::OsStr) -> rustix::io::Result<()>,
    ) -> std::io::Result<()> {
        let root = Arc::clone(&self.guard.mounts[at.mount].root);
        let slot = stamp.join(&at.rel);
        let (Some(parent), Some(base)) = (slot.parent(), slot.file_name()) else {
            return Err(std::io::ErrorKind::InvalidInput.into());
        };
        let root_fd = crate::sys::beneath::open_root(&root)?;
        let into = crate::sys::beneath::parents(&root_fd, parent)?;
        for n in 1..100u32 {
            let mut candidate = base.to_os_string();
            if n > 1 {
                candidate.push(format!(".~{n}~"));
            }
            match put(&into, &candidate) {
                Ok(()) => {
                    self.guard.kept.push(Kept {
                        root: root.name.clone(),
                        from: at.rel.to_string_lossy().into_owned(),
                        to: parent.join(&candidate).to_string_lossy().into_owned(),
                    });
                    return Ok(());
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(std::io::ErrorKind::AlreadyExists.into())
    }

    /// Links what stands at `name` in `dir` (the place a publish replaces)
    /// into the call's trash entry, before the exchange: from then on it is
    /// kept whatever happens, a kill included.
    pub(super) fn keep_standing(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
    ) -> std::io::Result<()> {
        let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        self.keep_at_slot(at, stamp, |into, slot| {
            rustix::fs::linkat(dir, name, into, slot, rustix::fs::AtFlags::empty())
        })?;
        self.guard.kept_inodes.insert(crate::sys::stat::inode(&st));
        Ok(())
    }

    /// Moves a version a publish displaced (now at `name` in `dir`, the
    /// staging directory) into the call's trash entry.
    pub(super) fn keep_displaced(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
    ) -> std::io::Result<()> {
        self.keep_at_slot(at, stamp, |into, slot| {
            rustix::fs::renameat_with(dir, name, into, slot, rustix::fs::RenameFlags::NOREPLACE)
        })
    }

    /// After a publish: descriptors of either name are stale, and the file
    /// this call read at the target is replaced by its own.
    pub(super) fn published(&mut self, old: &Handle, new: &Handle) {
        self.guard.forget_under(old.mount, &old.rel);
        self.guard.forget_under(new.mount, &new.rel);
        self.guard.read.remove(&(new.mount, new.rel.clone()));
    }

    /// A tracked descriptor, for an operation on the descriptor itself.
    pub(super) fn tracked(
        &mut self,
        fd: &Resource<Descriptor>,
        op: Permission,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        if op != Permission::Read && !self.guard.perms(h.mount).contains(op) {
            return Err(self.guard.refuse(Some(h.mount), &h.rel, op, "permission"));
        }
        self.guard.inside_for(&h, op)?;
        Ok(h)
    }

    /// A tracked descriptor, for an operation that tells what is in the
    /// file or about it (its bytes, its metadata): never in a trash, which
    /// takes things in and gives nothing back, whoever put them there.
    pub(super) fn readable(&mut self, fd: &Resource<Descriptor>) -> FsResult<Handle> {
        let h = self.tracked(fd, Permission::Read)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        Ok(h)
    }
}
