//! The call's view of a root: the disk with the call's staged changes over
//! it ([`Overlay`]), walked one name at a time.
//!
//! A path is resolved as `openat2(RESOLVE_BENEATH)` would, but by hand, so
//! that what the call changed counts: each name is looked up first among
//! the call's changes, then on disk, opened `O_PATH | O_NOFOLLOW` from the
//! descriptor of the directory before it (nothing renamed on the way leads
//! elsewhere); a symlink's target is walked the same way, an absolute one
//! or one climbing above the root refused (`confinement`), more than 40 a
//! loop. Every name reached is checked as it is reached, by its path in
//! the call's view: a denied one looks missing (or is refused, as a name to
//! create), and so does one outside the session's client roots.
//!
//! A call that has changed nothing in a root is served by the plain path
//! (`checks`), which asks the kernel once; the walk serves calls with
//! changes, and every change.
//!
//! Part of `impl FsGuard` (the walk: it reads the guard's overlays and
//! checks every name with the guard's rules) and of `impl PolicedFs` (a
//! listing, a stat, a readlink in the view, which also use the descriptor
//! table): what the call's view shows, kept apart from what changes it.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags};
use wasmtime::component::Resource;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::entries;
use super::overlay::{Node, Staged, Start};
use super::{
    DirSource, FsGuard, Handle, Lookup, Place, PolicedFs, again, io_error, is_exhaustion, raw_fd,
    reopen, wasi_file_type,
};
use crate::policy::{Permission, Rule};
use crate::store::publish::{Identity, Kind};
use crate::sys::MAX_LINKS;

/// What a path leads to in the call's view.
pub(super) enum Seen {
    /// A disk entry the call did not change (it may have moved it, or
    /// something above it): its start path, `O_PATH` descriptor and stat.
    Disk {
        start: PathBuf,
        fd: OwnedFd,
        st: rustix::fs::Stat,
    },
    /// A file or symlink of the call's.
    Staged(Arc<Staged>),
    /// A directory the call made.
    MadeDir,
}

impl Seen {
    pub(super) fn kind(&self) -> Kind {
        match self {
            Seen::Disk { st, .. } => Kind::of(crate::sys::stat::file_type(st)),
            Seen::Staged(s) if s.symlink.is_some() => Kind::Symlink,
            Seen::Staged(_) => Kind::File,
            Seen::MadeDir => Kind::Dir,
        }
    }

    /// The entry's identity, for a disk entry.
    pub(super) fn identity(&self) -> Option<Identity> {
        match self {
            Seen::Disk { st, .. } => Some(Identity::of(st)),
            _ => None,
        }
    }
}

/// A path found: where it is in the call's view, and what is there.
pub(super) struct At {
    pub(super) rel: PathBuf,
    pub(super) seen: Seen,
}

/// What a walk came to.
pub(super) enum Walked {
    Found(At),
    /// The last name is not there; its directory is. `via_link`: the name
    /// is a final symlink's target (a create there would make a file under
    /// a name the call never gave).
    Missing {
        dir: At,
        name: String,
        via_link: bool,
    },
}

impl Walked {
    /// The path in the call's view.
    pub(super) fn rel(&self) -> PathBuf {
        match self {
            Walked::Found(at) => at.rel.clone(),
            Walked::Missing { dir, name, .. } => dir.rel.join(name),
        }
    }
}

impl FsGuard {
    /// The root of mount `m`, opened `O_PATH` once for the call.
    pub(super) fn root_fd(&mut self, m: usize) -> FsResult<BorrowedFd<'_>> {
        if self.root_fds[m].is_none() {
            let fd = rustix::fs::open(
                &self.mounts[m].host,
                crate::sys::openat2::O_PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io_error)?;
            self.root_fds[m] = Some(fd);
        }
        Ok(self.root_fds[m]
            .as_ref()
            .map(|f| f.as_fd())
            .expect("opened above"))
    }

    /// The disk entry at start path `start` of mount `m`, `O_PATH`, never
    /// through a symlink; `None` when it is not there.
    pub(super) fn open_start(
        &mut self,
        m: usize,
        start: &Path,
    ) -> FsResult<Option<(OwnedFd, rustix::fs::Stat)>> {
        let root = self.root_fd(m)?;
        let path = if start.as_os_str().is_empty() {
            Path::new(".")
        } else {
            start
        };
        let flags = crate::sys::openat2::O_PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let resolve = crate::sys::openat2::ResolveFlags::BENEATH
            | crate::sys::openat2::ResolveFlags::NO_SYMLINKS;
        match crate::sys::openat2::openat2(root, path, flags, Mode::empty(), resolve) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).map_err(io_error)?;
                Ok(Some((fd, st)))
            }
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                Ok(None)
            }
            Err(e) if is_exhaustion(e) => {
                self.activity.mark_out_of_descriptors();
                Err(ErrorCode::Io.into())
            }
            Err(e) => Err(io_error(e)),
        }
    }

    /// What stands at `rel` (in the call's view) in directory `dir`, by the
    /// call's changes first, then on disk; `None` when nothing does.
    fn child(&mut self, m: usize, dir: &At, rel: &Path, name: &str) -> FsResult<Option<Seen>> {
        match self.overlays[m].nodes.get(rel).cloned() {
            Some(Node::Gone) => return Ok(None),
            Some(Node::File(staged)) => return Ok(Some(Seen::Staged(staged))),
            Some(Node::Dir(_)) => return Ok(Some(Seen::MadeDir)),
            Some(Node::Moved(start, _) | Node::Touched(start, _) | Node::Link(start)) => {
                return Ok(self.open_start(m, &start)?.map(|(fd, st)| Seen::Disk {
                    start,
                    fd,
                    st,
                }));
            }
            None => {}
        }
        let Seen::Disk { start, fd, .. } = &dir.seen else {
            // Below a directory the call made: only its own entries.
            return Ok(None);
        };
        let start = start.join(name);
        match rustix::fs::openat(
            fd,
            name,
            crate::sys::openat2::O_PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).map_err(io_error)?;
                Ok(Some(Seen::Disk { start, fd, st }))
            }
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(self.host_error_in(m, e)),
        }
    }

    /// The symlink target of an entry of kind symlink.
    fn target(&self, seen: &Seen) -> FsResult<String> {
        match seen {
            Seen::Staged(s) => Ok(s.symlink.clone().unwrap_or_default()),
            Seen::Disk { fd, .. } => {
                let t = rustix::fs::readlinkat(fd, "", Vec::new()).map_err(io_error)?;
                t.into_string()
                    .map_err(|_| ErrorCode::IllegalByteSequence.into())
            }
            Seen::MadeDir => Err(ErrorCode::Invalid.into()),
        }
    }

    /// The directory at `rel` (a tracked descriptor's path, which holds no
    /// symlink), looked up name by name from the root.
    pub(super) fn dir_at(&mut self, m: usize, rel: &Path) -> FsResult<At> {
        let (fd, st) = self
            .open_start(m, Path::new(""))?
            .ok_or(ErrorCode::NoEntry)?;
        let mut at = At {
            rel: PathBuf::new(),
            seen: Seen::Disk {
                start: PathBuf::new(),
                fd,
                st,
            },
        };
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(ErrorCode::NoEntry.into());
            };
            let name = name.to_str().ok_or(ErrorCode::IllegalByteSequence)?;
            let next = at.rel.join(name);
            let seen = self.child(m, &at, &next, name)?.ok_or(ErrorCode::NoEntry)?;
            if seen.kind() != Kind::Dir {
                return Err(ErrorCode::NotDirectory.into());
            }
            at = At { rel: next, seen };
        }
        Ok(at)
    }

    /// Walks `path` from the directory of `h` in the call's view (see the
    /// module), checking each name reached for `op`; a final symlink is
    /// followed when `follow`. `lookup` says how the last name is used.
    pub(super) fn walk(
        &mut self,
        h: &Handle,
        path: &str,
        follow: bool,
        op: Permission,
        lookup: Lookup,
    ) -> FsResult<Walked> {
        let m = h.mount;
        let mut stack = vec![self.dir_at(m, &h.rel)?];
        let mut pending: VecDeque<String> = path
            .split('/')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        let mut trailing = path.ends_with('/');
        let mut links = 0;
        let mut via_link = false;
        loop {
            let Some(name) = pending.pop_front() else {
                // The path named a directory reached (`.`, `a/..`, "").
                let at = stack.pop().expect("never empty");
                return Ok(Walked::Found(at));
            };
            match name.as_str() {
                "." => continue,
                ".." => {
                    if stack.len() == 1 {
                        return Err(self.refuse(Some(m), &h.rel.join(path), op, Rule::Confinement));
                    }
                    stack.pop();
                    continue;
                }
                _ => {}
            }
            let last = pending.is_empty();
            let dir = stack.last().expect("never empty");
            let rel = dir.rel.join(&name);
            let how = if last { lookup } else { Lookup::Existing };
            if self.mounts[m].root.deny.match_path(&rel).is_some() {
                return Err(self.denied(m, &rel, op, how));
            }
            match self.place(m, &rel) {
                Place::Inside => {}
                Place::OnTheWay if !last || (op == Permission::Read && how == Lookup::Existing) => {
                }
                _ => return Err(self.outside(m, &rel, op, how)),
            }
            let dir = stack.last().expect("never empty");
            let Some(seen) = self.child(m, dir, &rel, &name)? else {
                if last && !trailing {
                    let dir = stack.pop().expect("never empty");
                    return Ok(Walked::Missing {
                        dir,
                        name,
                        via_link,
                    });
                }
                return Err(ErrorCode::NoEntry.into());
            };
            let kind = seen.kind();
            if kind == Kind::Symlink && (!last || follow || trailing) {
                links += 1;
                if links > MAX_LINKS {
                    return Err(ErrorCode::Loop.into());
                }
                let target = self.target(&seen)?;
                if target.starts_with('/') {
                    return Err(self.refuse(Some(m), &rel, op, Rule::Confinement));
                }
                if last {
                    trailing |= target.ends_with('/');
                    via_link = true;
                }
                for n in target.split('/').filter(|n| !n.is_empty()).rev() {
                    pending.push_front(n.to_string());
                }
                continue;
            }
            if !last || trailing {
                if kind != Kind::Dir {
                    return Err(ErrorCode::NotDirectory.into());
                }
                stack.push(At { rel, seen });
                if last {
                    let at = stack.pop().expect("pushed");
                    return Ok(Walked::Found(at));
                }
                continue;
            }
            return Ok(Walked::Found(At { rel, seen }));
        }
    }

    /// Where the place `rel` of mount `m` lay on disk when the call began.
    pub(super) fn start_of(&self, m: usize, rel: &Path) -> Start {
        self.overlays[m].start_of(rel)
    }
}

impl PolicedFs<'_> {
    /// The entries of the directory at `rel` in the call's view, those the
    /// guest may see, with their types: the disk's, but what the call
    /// took away or changed, and what it made.
    pub(super) fn listing(
        &mut self,
        m: usize,
        rel: &Path,
    ) -> FsResult<Vec<(String, fs::DescriptorType)>> {
        let dir = self.guard.dir_at(m, rel)?;
        let mut out: Vec<(String, fs::DescriptorType)> = Vec::new();
        let mount = &self.guard.mounts[m];
        let deny = mount.root.deny.clone();
        let area = mount.area.clone().filter(|a| a.place(rel) != Place::Inside);
        if let Seen::Disk { fd, .. } = &dir.seen {
            let own = reopen(fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY)
                .map_err(|e| self.os_error(e))?;
            let mut source = DirSource::new(own).map_err(io_error)?;
            let overlay = &self.guard.overlays[m];
            let mut scratch = std::mem::take(&mut self.guard.scratch);
            loop {
                let more = source.read(&mut scratch, |dir_fd, name, ty| {
                    let os = OsStr::from_bytes(name);
                    if deny.hides(os) || area.as_ref().is_some_and(|a| !a.shows(rel, os)) {
                        return;
                    }
                    let Ok(name) = std::str::from_utf8(name) else {
                        return;
                    };
                    if overlay.nodes.contains_key(&rel.join(name)) {
                        return;
                    }
                    let ty = match ty {
                        FileType::Unknown => {
                            rustix::fs::statat(dir_fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                                .map_or(fs::DescriptorType::Unknown, |st| {
                                    wasi_file_type(crate::sys::stat::file_type(&st))
                                })
                        }
                        t => wasi_file_type(t),
                    };
                    out.push((name.to_string(), ty));
                });
                match more {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        self.guard.scratch = scratch;
                        return Err(io_error(e));
                    }
                }
            }
            self.guard.scratch = scratch;
        }
        let children: Vec<(PathBuf, Node)> = self.guard.overlays[m]
            .children(rel)
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect();
        for (path, node) in children {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let ty = match node {
                Node::Gone => continue,
                Node::File(s) if s.symlink.is_some() => fs::DescriptorType::SymbolicLink,
                Node::File(_) | Node::Link(_) => fs::DescriptorType::RegularFile,
                Node::Dir(_) => fs::DescriptorType::Directory,
                Node::Moved(start, _) | Node::Touched(start, _) => {
                    match self.guard.open_start(m, &start)? {
                        Some((_, st)) => wasi_file_type(crate::sys::stat::file_type(&st)),
                        None => continue,
                    }
                }
            };
            out.push((name.to_string(), ty));
        }
        Ok(out)
    }
}

use std::os::unix::ffi::OsStrExt as _;

impl PolicedFs<'_> {
    /// `stat-at` in the call's view.
    pub(super) fn stat_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<fs::DescriptorStat> {
        let (m, at) = self.found_in_view(fd, path, follow)?;
        let stat = self.stat_seen(m, &at)?;
        Ok(entries::as_seen(stat))
    }

    /// `metadata-hash-at` in the call's view.
    pub(super) fn hash_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<fs::MetadataHashValue> {
        let (m, at) = self.found_in_view(fd, path, follow)?;
        let (tmp, _) = self.temporary(m, &at)?;
        let hash = fs::HostDescriptor::metadata_hash(&mut self.fs, again(&tmp));
        self.fs.table.delete(tmp)?;
        hash
    }

    /// `readlink-at` in the call's view: the link and its target (the
    /// caller checks what the target may tell).
    pub(super) fn readlink_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> FsResult<(Handle, String)> {
        let (m, at) = self.found_in_view(fd, path, false)?;
        if at.seen.kind() != Kind::Symlink {
            return Err(ErrorCode::Invalid.into());
        }
        let target = self.guard.target(&at.seen)?;
        Ok((
            Handle {
                mount: m,
                rel: at.rel,
            },
            target,
        ))
    }

    /// What `path` under `fd` leads to in the call's view, looked up for
    /// reading (something that exists).
    fn found_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<(usize, At)> {
        let op = Permission::Read;
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, Lookup::Existing)?;
        match self.guard.walk(&h, path, follow, op, Lookup::Existing)? {
            Walked::Found(at) => Ok((h.mount, at)),
            Walked::Missing { .. } => Err(ErrorCode::NoEntry.into()),
        }
    }

    /// A descriptor of what `at` is, in the table for as long as the caller
    /// needs it (for wasmtime-wasi's stat and hash of it), and whether it
    /// stands for a directory the call made (which has none of its own).
    fn temporary(&mut self, m: usize, at: &At) -> FsResult<(Resource<Descriptor>, bool)> {
        let (fd, made) = match &at.seen {
            Seen::Disk { fd, .. } => (fd.try_clone().map_err(|e| FsError::from(e))?, false),
            Seen::Staged(s) => (
                self.guard.open_staged(m, s, crate::sys::openat2::O_PATH)?,
                false,
            ),
            Seen::MadeDir => {
                let i = self
                    .guard
                    .stage_dir(m, self.guard.mounts[m].dev, Path::new(""))?;
                let fd = self.guard.stages[m][i]
                    .fd
                    .try_clone()
                    .map_err(|e| FsError::from(e))?;
                (fd, true)
            }
        };
        let file = wasmtime_wasi::filesystem::File::new(
            fd.into(),
            wasmtime_wasi::filesystem::FsPerms::ReadOnly,
            OpenMode::READ,
            true,
        );
        Ok((self.fs.table.push(Descriptor::File(file))?, made))
    }

    /// What a stat of `at` shows: the entry's own (a staged file's, a disk
    /// entry's), with the times the call set on it.
    pub(super) fn stat_seen(&mut self, m: usize, at: &At) -> FsResult<fs::DescriptorStat> {
        let (tmp, made) = self.temporary(m, at)?;
        let stat = fs::HostDescriptor::stat(&mut self.fs, again(&tmp));
        let raw = rustix::fs::fstat(raw_fd(self.fs.table.get(&tmp)?)).ok();
        self.fs.table.delete(tmp)?;
        let mut stat = stat?;
        if stat.type_ == fs::DescriptorType::Unknown
            && let Some(st) = raw
        {
            stat.type_ = wasi_file_type(crate::sys::stat::file_type(&st));
        }
        if made {
            stat.type_ = fs::DescriptorType::Directory;
        }
        let times = match self.guard.overlays[m].nodes.get(&at.rel) {
            Some(Node::Dir(t) | Node::Moved(_, t)) => *t,
            Some(Node::Touched(_, t)) => Some(*t),
            _ => None,
        };
        if let Some(times) = times {
            let when = |t: crate::store::publish::Time, was| match t {
                crate::store::publish::Time::Keep => was,
                crate::store::publish::Time::Now => {
                    wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime::try_from(
                        std::time::SystemTime::now(),
                    )
                    .ok()
                }
                crate::store::publish::Time::At(s, n) => {
                    Some(wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime {
                        seconds: u64::try_from(s).unwrap_or(0),
                        nanoseconds: n,
                    })
                }
            };
            stat.data_access_timestamp = when(times.access, stat.data_access_timestamp);
            stat.data_modification_timestamp =
                when(times.modified, stat.data_modification_timestamp);
        }
        Ok(stat)
    }
}
