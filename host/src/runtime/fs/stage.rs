//! The call's stage: a directory on each filesystem a root spans (made at
//! first use) where the files and symlinks a call makes wait, named for no
//! one, until the call is published; and the filesystem a place in the
//! call's view is on.
//!
//! Part of `impl FsGuard` (the type is in `handles.rs`): the guard owns its
//! stage directories, so the methods that find and fill them are the
//! guard's; they are here, beside the [`StageDir`] they keep, because every
//! change (`change.rs`, `open.rs`, `copy_up.rs`) goes through them.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::overlay::{Node, Staged, Start};
use super::{FsGuard, io_error, is_exhaustion};
use crate::policy::{Permission, Rule};
use crate::runtime::activity::DiskError;

/// A directory of the call's stage on one filesystem.
pub struct StageDir {
    pub(super) dev: u64,
    /// Root-relative.
    pub(super) rel: PathBuf,
    pub(super) fd: OwnedFd,
    /// Keeps the directory for the call (emptied when dropped).
    pub(super) _dir: Option<crate::store::staging::CallDir>,
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

    /// `e`, met making a stage directory for mount `m`, as the guest sees
    /// it (the call marked out of descriptors, or its disk error noted).
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
    pub(super) fn stage_name(&mut self, prefix: &str) -> String {
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
}
