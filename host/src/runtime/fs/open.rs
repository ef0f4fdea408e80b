//! `open-at` in the call's view: what the walk finds is handed out as a
//! descriptor (a directory the call made holds the stage, a disk file
//! opened for writing waits as a [`Pending`] copy), and a file to create
//! is made new in the stage.
//!
//! Part of `impl PolicedFs`: the WASI `open-at` of a call with changes, and
//! the descriptors it hands out, which go into wasmtime-wasi's table and
//! the guard's alike; `descriptor.rs` holds the trait method that calls it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use wasmtime::component::Resource;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;

use super::ops;
use super::overlay::Node;
use super::view::{At, Seen, Walked};
use super::{Handle, Lookup, Pending, PolicedFs, reopen, reopen_for_reading};
use crate::policy::{Permission, Rule};
use crate::store::publish::{Identity, Kind};

impl PolicedFs<'_> {
    /// The permissions the directory descriptor `fd` carries (its
    /// preopen's), and whether it may be changed through.
    pub(super) fn dir_perms_of(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => Ok(d.perms),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
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
}
