//! The copy of a disk file made on the guest's first change to it: a
//! descriptor opened for writing on a disk file the call has not changed
//! holds it as a [`Pending`] copy, reads meanwhile read the file itself,
//! and the first write (or `set-size`) copies it into the stage (a reflink
//! where the filesystem has them) and points the descriptor at the copy.
//!
//! Part of `impl PolicedFs`: making the copy needs both the call's guard
//! and wasmtime-wasi's descriptor table (the descriptor is re-pointed), so
//! these are the policing filesystem's methods, kept apart from the opens
//! (`open.rs`) that leave a descriptor pending and the WASI methods
//! (`descriptor.rs`) that call them.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::PolicedFs;
use super::overlay::Node;
use crate::store::publish::Identity;

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

impl PolicedFs<'_> {
    /// Notes that the disk entry at `start` (seen at `rel`) is replaced in
    /// place: taken for good (or, if the call had moved it there, no
    /// longer moved but taken).
    pub(super) fn take_in_place(
        &mut self,
        m: usize,
        rel: &Path,
        start: &Path,
        was: Identity,
    ) -> FsResult<()> {
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
}
