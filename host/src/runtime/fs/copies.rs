//! Copies into a trash, where a hard link is impossible (the file is on
//! another filesystem than the root's trash: a mount point inside the root,
//! a btrfs subvolume; or a filesystem without hard links).
//!
//! A copy is never partial in the trash, whoever makes it and whenever the
//! server dies: it is written in the call's own directory on the root's
//! filesystem (`Mount::keep`, in the staging area, which the next start
//! sweeps) and renamed into its trash slot once whole.
//!
//! - **The guest's** (a built-in tool's `keep_by_link` falls back to one):
//!   its exclusive create in the trash makes the file in that directory
//!   instead, under a name of the host's; the guest writes it through its
//!   descriptor as if it were in the trash. The copy is renamed into its
//!   slot when the guest syncs it (the built-in tools sync a copy once
//!   written, and only then), or when the call ends with its writers gone;
//!   a copy a stopped call was still writing, or one the guest removes (a
//!   copy cut short), never reaches the trash.
//! - **The host's** (a publish over a file the trash cannot link): made
//!   before the exchange, synced, then renamed into its slot, unless the
//!   call's own copy of that file is already there with the same content.
//!   The version that comes out of the exchange must then be that very file
//!   unchanged (same inode, size and modification time): otherwise the
//!   exchange is undone and the publish looks again.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};

use super::*;

/// A copy this call makes in a trash, by trash mount and real
/// root-relative path (`.mcp-trash/<stamp>/…`).
pub(super) struct TrashCopy {
    /// Held by whatever can still write it (see [`OpenCopy`]).
    pub(super) token: OpenCopy,
    /// Where it is while it is not whole: its name in the keep directory,
    /// and the checked trash directory (and name) it goes to.
    pending: Option<Pending>,
}

impl TrashCopy {
    /// A copy made in place (a trash mount without a keep directory).
    pub(super) fn placed(token: OpenCopy) -> TrashCopy {
        TrashCopy {
            token,
            pending: None,
        }
    }
}

struct Pending {
    name: String,
    parent: OwnedFd,
    base: OsString,
}

/// What a file kept by a copy was when it was copied: the version a
/// publish displaces must be it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Copied {
    size: u64,
    mtime: (i64, u64),
}

impl Copied {
    pub(super) fn of(st: &rustix::fs::Stat) -> Copied {
        Copied {
            size: st.st_size as u64,
            mtime: crate::sys::stat::mtime(st),
        }
    }
}

impl FsGuard {
    /// The keep directory of the trash of the root of `mount`, opened
    /// beneath it, and the index of that trash mount.
    fn keep_dir(&self, mount: usize) -> std::io::Result<Option<OwnedFd>> {
        let Some(rel) = self
            .mounts
            .iter()
            .enumerate()
            .find(|(m, t)| t.trash && self.same_root(*m, mount))
            .and_then(|(_, t)| t.keep.as_ref())
        else {
            return Ok(None);
        };
        crate::store::staging::open_keep(&self.mounts[mount].root, rel).map(Some)
    }

    /// A fresh name in the keep directory.
    fn copy_name(&mut self) -> String {
        self.next_copy += 1;
        format!("copy-{}", self.next_copy)
    }

    /// The copy `rep` (a descriptor of the guest's) writes, if any.
    fn copy_written_by(&self, rep: u32) -> Option<(usize, PathBuf)> {
        let token = self.copy_writers.get(&rep)?;
        self.copies
            .iter()
            .find(|(_, c)| c.token.same(token))
            .map(|(key, _)| key.clone())
    }

    /// Renames the copy `key` into its trash slot, if it is not there yet.
    fn place_copy(&mut self, key: &(usize, PathBuf)) -> std::io::Result<()> {
        let Some(copy) = self.copies.get_mut(key) else {
            return Ok(());
        };
        let Some(pending) = copy.pending.take() else {
            return Ok(());
        };
        let placed = (|| {
            let keep = self.keep_dir(key.0)?.ok_or(std::io::ErrorKind::NotFound)?;
            rustix::fs::renameat_with(
                &keep,
                pending.name.as_str(),
                &pending.parent,
                &pending.base,
                rustix::fs::RenameFlags::NOREPLACE,
            )?;
            Ok(())
        })();
        if placed.is_err()
            && let Some(copy) = self.copies.get_mut(key)
        {
            copy.pending = Some(pending);
        }
        placed
    }

    /// Removes the copy `key`, wherever it is, and forgets it as kept.
    pub(super) fn remove_copy(&mut self, key: &(usize, PathBuf)) -> std::io::Result<()> {
        let Some(copy) = self.copies.remove(key) else {
            return Ok(());
        };
        let to = key.1.to_string_lossy();
        self.kept.retain(|k| k.to != to);
        match copy.pending {
            Some(pending) => {
                let keep = self.keep_dir(key.0)?.ok_or(std::io::ErrorKind::NotFound)?;
                rustix::fs::unlinkat(&keep, pending.name.as_str(), rustix::fs::AtFlags::empty())?;
            }
            None => {
                let (mount, rel) = key;
                let base = rel.file_name().ok_or(std::io::ErrorKind::InvalidInput)?;
                let root = crate::sys::beneath::open_root(&self.mounts[*mount].root)?;
                let dir = crate::sys::beneath::beneath(&root, rel.parent().unwrap_or(rel))?;
                rustix::fs::unlinkat(&dir, base, rustix::fs::AtFlags::empty())?;
            }
        }
        Ok(())
    }

    /// When the call has ended: each copy it made in a trash is put in
    /// place, whole as its writer left it, but one a stopped guest
    /// (`stopped`: a timeout, a cancel, memory, a crash) was still writing,
    /// which is removed and forgotten as kept: a partial copy must never
    /// pass for the old version. Whatever it copied is still in place (the
    /// host's publish never relies on a copy it has not checked), so
    /// nothing is lost.
    pub fn settle_copies(&mut self, stopped: bool) {
        let keys: Vec<(usize, PathBuf)> = self.copies.keys().cloned().collect();
        for key in keys {
            let writing = self.copies.get(&key).is_some_and(|c| c.token.writing());
            let settled = if stopped && writing {
                self.remove_copy(&key)
            } else {
                self.place_copy(&key).or_else(|e| {
                    tracing::warn!("a copy kept in the trash could not be put in place: {e}");
                    self.remove_copy(&key)
                })
            };
            if let Err(e) = settled {
                tracing::error!(
                    root = %self.mounts[key.0].root.name,
                    "the unfinished copy {} of a call could not be removed ({e}); it is not \
                     in the trash index",
                    key.1.display()
                );
                let to = key.1.to_string_lossy();
                self.kept.retain(|k| k.to != to);
                self.copies.remove(&key);
            }
        }
    }
}

impl PolicedFs<'_> {
    /// The guest's exclusive create of `path` in a trash mount (checked as
    /// `new`: its real parent and name), made in the keep directory (see
    /// the module). `None` where the mount has none: the general open.
    pub(super) fn trash_copy_open(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        new: &Handle,
    ) -> FsResult<Option<Resource<Descriptor>>> {
        let key = (new.mount, new.rel.clone());
        let Some(keep) = self
            .guard
            .keep_dir(new.mount)
            .map_err(|e| self.host_io_error(new.mount, e))?
        else {
            return Ok(None);
        };
        if self.guard.copies.contains_key(&key) {
            return Err(ErrorCode::Exist.into());
        }
        let perms = match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => d.perms,
            Descriptor::File(_) => return Err(ErrorCode::NotDirectory.into()),
        };
        if perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        let (parent, base) = self.parent(fd, path, new)?;
        let name = self.guard.copy_name();
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        let file = rustix::fs::openat(&keep, name.as_str(), flags, Mode::from_raw_mode(0o666))
            .map_err(|e| self.host_error(new.mount, e))?;
        let file = wasmtime_wasi::filesystem::File::new(file.into(), perms, OpenMode::WRITE, true);
        let created = self.fs.table.push(Descriptor::File(file))?;
        self.guard.keep_copy(new.mount, &new.rel);
        let token = OpenCopy::default();
        self.guard.copy_writers.insert(created.rep(), token.clone());
        self.guard.copies.insert(
            key,
            TrashCopy {
                token,
                pending: Some(Pending {
                    name,
                    parent,
                    base: base.into(),
                }),
            },
        );
        self.guard.handles.insert(created.rep(), new.clone());
        self.guard.activity.count_opened();
        Ok(Some(created))
    }

    /// After the guest synced descriptor `rep`: a copy it writes in a trash
    /// is whole, and goes to its slot.
    pub(super) fn synced(&mut self, rep: u32) -> FsResult<()> {
        let Some(key) = self.guard.copy_written_by(rep) else {
            return Ok(());
        };
        self.guard
            .place_copy(&key)
            .map_err(|e| self.host_io_error(key.0, e))
    }

    /// Removes the guest's own copy `key` (one cut short).
    pub(super) fn unlink_copy(&mut self, key: &(usize, PathBuf)) -> FsResult<()> {
        self.guard
            .remove_copy(key)
            .map_err(|e| self.host_io_error(key.0, e))
    }

    /// Keeps what stands at `name` in `dir` (described by `standing`) in
    /// the call's trash entry by a copy, before a publish replaces it: a
    /// hard link there would cross filesystems. The call's own copy of
    /// it, if it made one and it is whole with the same content, is
    /// enough. Records what the copy is of ([`FsGuard::kept_copies`]).
    pub(super) fn keep_standing_by_copy(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
        standing: &rustix::fs::Stat,
    ) -> FsResult<()> {
        let inode = crate::sys::stat::inode(standing);
        let copied = Copied::of(standing);
        let is_link = match crate::sys::stat::file_type(standing) {
            FileType::Symlink => true,
            FileType::RegularFile => false,
            // A special file cannot be copied: it is never replaced here.
            _ => return Err(ErrorCode::CrossDevice.into()),
        };
        if !is_link && self.own_copy_matches(dir, name, at, stamp, standing) {
            self.guard.kept_copies.insert(inode, copied);
            return Ok(());
        }
        let keep = self
            .guard
            .keep_dir(at.mount)
            .map_err(|e| self.host_io_error(at.mount, e))?
            .ok_or(ErrorCode::CrossDevice)?;
        let scratch = self.guard.copy_name();
        let made = if is_link {
            copy_symlink(dir, name, &keep, &scratch, standing)
        } else {
            copy_file(dir, name, &keep, &scratch, standing)
        };
        if let Err(e) = made {
            let _ = rustix::fs::unlinkat(&keep, scratch.as_str(), rustix::fs::AtFlags::empty());
            return Err(self.host_io_error(at.mount, e));
        }
        let placed = self.keep_at_slot(at, stamp, |into, slot| {
            rustix::fs::renameat_with(
                &keep,
                scratch.as_str(),
                into,
                slot,
                rustix::fs::RenameFlags::NOREPLACE,
            )
        });
        if let Err(e) = placed {
            let _ = rustix::fs::unlinkat(&keep, scratch.as_str(), rustix::fs::AtFlags::empty());
            return Err(self.host_io_error(at.mount, e));
        }
        self.guard.kept_copies.insert(inode, copied);
        Ok(())
    }

    /// Whether the call has already kept what stands at `name` in `dir`
    /// by a whole copy of its own (its slot is `<stamp>/<path>`, or
    /// `<path>.~N~`), byte for byte, the file unchanged while compared.
    fn own_copy_matches(
        &self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
        standing: &rustix::fs::Stat,
    ) -> bool {
        let slot = stamp.join(&at.rel);
        let ours = self.guard.copies.iter().filter(|((m, rel), c)| {
            self.guard.same_root(*m, at.mount)
                && c.pending.is_none()
                && !c.token.writing()
                && (*rel == slot
                    || rel.parent() == slot.parent()
                        && rel.file_name().zip(slot.file_name()).is_some_and(|(r, s)| {
                            r.to_string_lossy()
                                .strip_prefix(&*s.to_string_lossy())
                                .is_some_and(|n| n.starts_with(".~") && n.ends_with('~'))
                        }))
        });
        let open = |dir: BorrowedFd<'_>, name: &std::ffi::OsStr| {
            rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                Mode::empty(),
            )
            .ok()
        };
        let Ok(root) = crate::sys::beneath::open_root(&self.guard.mounts[at.mount].root) else {
            return false;
        };
        for ((_, rel), _) in ours {
            let (Some(parent), Some(base)) = (rel.parent(), rel.file_name()) else {
                continue;
            };
            let Ok(parent) = crate::sys::beneath::beneath(&root, parent) else {
                continue;
            };
            let (Some(copy), Some(file)) =
                (open(parent.as_fd(), base), open(dir.as_fd(), name.as_ref()))
            else {
                continue;
            };
            let unchanged = |f: &OwnedFd| {
                rustix::fs::fstat(f).is_ok_and(|st| {
                    crate::sys::stat::inode(&st) == crate::sys::stat::inode(standing)
                        && Copied::of(&st) == Copied::of(standing)
                })
            };
            if unchanged(&file) && same_content(copy, &file) && unchanged(&file) {
                return true;
            }
        }
        false
    }
}

/// Whether the file `a` holds the same bytes as the file `b`.
fn same_content(a: OwnedFd, b: &OwnedFd) -> bool {
    let Ok(b) = rustix::io::dup(b) else {
        return false;
    };
    let (mut a, mut b) = (std::fs::File::from(a), std::fs::File::from(b));
    let (mut x, mut y) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = match read_full(&mut a, &mut x) {
            Ok(n) => n,
            Err(_) => return false,
        };
        match read_full(&mut b, &mut y) {
            Ok(m) if m == n => {}
            _ => return false,
        }
        if x[..n] != y[..n] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            got => n += got,
        }
    }
    Ok(n)
}

/// Copies the regular file `name` in `dir` to the new file `to` in `into`,
/// synced, with its permission bits; fails if the file changed meanwhile
/// (it is not the version `standing` describes).
fn copy_file(
    dir: &OwnedFd,
    name: &str,
    into: &OwnedFd,
    to: &str,
    standing: &rustix::fs::Stat,
) -> std::io::Result<()> {
    let from = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let same = |st: &rustix::fs::Stat| {
        crate::sys::stat::inode(st) == crate::sys::stat::inode(standing)
            && Copied::of(st) == Copied::of(standing)
    };
    if !same(&rustix::fs::fstat(&from)?) {
        return Err(std::io::ErrorKind::ResourceBusy.into());
    }
    let mode = Mode::from_raw_mode(standing.st_mode & 0o777);
    let target = rustix::fs::openat(
        into,
        to,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
        mode,
    )?;
    let (mut from, mut target) = (std::fs::File::from(from), std::fs::File::from(target));
    std::io::copy(&mut from, &mut target)?;
    target.flush()?;
    target.sync_all()?;
    let _ = rustix::fs::fchmod(&target, mode);
    if !same(&rustix::fs::fstat(&from)?) {
        return Err(std::io::ErrorKind::ResourceBusy.into());
    }
    Ok(())
}

/// Makes `to` in `into` a symlink with the target of the symlink `name`
/// in `dir`.
fn copy_symlink(
    dir: &OwnedFd,
    name: &str,
    into: &OwnedFd,
    to: &str,
    _standing: &rustix::fs::Stat,
) -> std::io::Result<()> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    rustix::fs::symlinkat(target.as_c_str(), into, to)?;
    Ok(())
}
