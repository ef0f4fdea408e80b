//! Every change a guest makes, staged in the call's overlay instead of
//! made on disk: a create or a truncating open makes a file in the call's
//! stage; a first write into an existing file's bytes works on a copy of
//! it (a reflink where the filesystem has them, else a byte copy), made
//! only when the guest first changes it through its descriptor; a
//! directory made, a symlink, a hard link, a removal, a rename and new
//! times are recorded. The role and the deny list apply to each as they
//! would on disk (the walk checks every name), and what a change removes
//! or replaces is noted as taken, to be kept in the trash when the call is
//! published.
//!
//! This file holds the changes to the tree: a directory made, a symlink, a
//! hard link, a removal and a rename. Opening (`open.rs`), the copy at a
//! first write (`copy_up.rs`), new times (`times.rs`) and the stage
//! (`stage.rs`) have files of their own.
//!
//! Part of `impl FsGuard` (the overlay bookkeeping every change goes
//! through: recording a node, taking a disk entry, re-pointing handles)
//! and of `impl PolicedFs` (the WASI `filesystem::types` descriptor
//! methods that change the tree): a change needs the guard's overlay and,
//! for its checks, the descriptor table, so it is written against both.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::overlay::{Node, Staged, Start};
use super::view::{At, Seen, Walked};
use super::{FsGuard, Handle, Lookup, PolicedFs, io_error, reopen};
use crate::policy::{Permission, Rule};
use crate::store::publish::{Identity, Kind};

impl FsGuard {
    /// Notes that the call changed something in mount `m`: from now on its
    /// paths there are walked in the call's view.
    fn viewing(&mut self, m: usize) {
        self.view[m] = true;
    }

    /// Records `node` at `rel` of mount `m`, or fails when the overlay is
    /// full (see [`super::overlay::MAX_ENTRIES`]).
    pub(super) fn set_node(&mut self, m: usize, rel: PathBuf, node: Node) -> FsResult<()> {
        self.viewing(m);
        self.overlays[m]
            .set(rel.clone(), node)
            .map_err(|_| self.overflow(m, &rel))
    }

    /// Notes the disk entry at `start` as taken (see the overlay).
    pub(super) fn take(
        &mut self,
        m: usize,
        start: PathBuf,
        now: Identity,
        moved: bool,
    ) -> FsResult<()> {
        self.viewing(m);
        let shown = start.clone();
        self.overlays[m]
            .take(start, now, moved)
            .map_err(|_| self.overflow(m, &shown))
    }

    /// The refusal of a change to `rel` of mount `m` when the call's
    /// overlay is full.
    fn overflow(&mut self, m: usize, rel: &Path) -> FsError {
        self.refuse(Some(m), rel, Permission::Write, Rule::Overlay)
    }

    /// Clears `rel` of mount `m` of what the call put there: a whiteout
    /// where a disk entry the call took would show through, nothing where
    /// the disk has nothing.
    fn clear(&mut self, m: usize, rel: &Path) -> FsResult<()> {
        let shows = match self.start_of(m, rel) {
            Start::At(s) => self.overlays[m].is_taken(&s),
            Start::Made => false,
        };
        if shows {
            self.set_node(m, rel.to_path_buf(), Node::Gone)
        } else {
            self.overlays[m].nodes.remove(rel);
            Ok(())
        }
    }

    /// Re-points descriptors and streams below `from` to `to` (mount `m`).
    fn moved_handles(&mut self, m: usize, from: &Path, to: &Path) {
        for h in self.handles.values_mut().chain(self.streams.values_mut()) {
            if h.mount == m && h.rel.starts_with(from) {
                let rest = h
                    .rel
                    .strip_prefix(from)
                    .unwrap_or(Path::new(""))
                    .to_path_buf();
                h.rel = to.join(rest);
            }
        }
        for p in self.pending.values_mut() {
            if p.mount == m && p.rel.starts_with(from) {
                let rest = p
                    .rel
                    .strip_prefix(from)
                    .unwrap_or(Path::new(""))
                    .to_path_buf();
                p.rel = to.join(rest);
            }
        }
    }

    /// Whether the directory `at` is empty in the call's view, hidden
    /// entries counted (a directory that holds a denied name is not empty:
    /// its removal fails at the operation, as it would on disk).
    fn is_empty_dir(&mut self, m: usize, at: &At) -> FsResult<bool> {
        let overlay = &self.overlays[m];
        if overlay
            .below(&at.rel)
            .any(|(_, n)| !matches!(n, Node::Gone))
        {
            return Ok(false);
        }
        let Seen::Disk { fd, .. } = &at.seen else {
            return Ok(true);
        };
        let own = reopen(fd.as_fd(), OFlags::RDONLY | OFlags::DIRECTORY).map_err(io_error)?;
        let names = crate::sys::beneath::names_in(&own).map_err(|_| ErrorCode::Io)?;
        let overlay = &self.overlays[m];
        Ok(names
            .iter()
            .all(|(name, _)| matches!(overlay.nodes.get(&at.rel.join(name)), Some(Node::Gone))))
    }

    /// Takes what stands at `at` (mount `m`) from the call's view for good:
    /// it is kept in the trash when the call is published. A directory goes
    /// whole.
    fn discard(&mut self, m: usize, at: &At) -> FsResult<()> {
        match &at.seen {
            Seen::Staged(_) => self.clear(m, &at.rel),
            Seen::MadeDir => {
                self.overlays[m].drop_below(&at.rel);
                self.clear(m, &at.rel)
            }
            Seen::Disk { start, st, .. } => {
                let now = Identity::of(st);
                self.overlays[m].drop_below(&at.rel);
                self.take(m, start.clone(), now, false)?;
                if now.kind == Kind::Dir {
                    self.overlays[m].taken_whole(start);
                }
                match self.overlays[m].nodes.get(&at.rel) {
                    // A hard link of the call's to a file it leaves in place:
                    // only the link goes.
                    Some(Node::Link(_)) => {
                        self.overlays[m].taken.remove(start);
                        self.clear(m, &at.rel)
                    }
                    _ => self.set_node(m, at.rel.clone(), Node::Gone),
                }
            }
        }
    }

    /// Whether an entry of kind `old_kind` may be renamed over what stands
    /// at the new name in mount `m` (replacing it, which is kept): a
    /// directory only over an empty directory, anything else not over one.
    fn may_replace(&mut self, m: usize, old_kind: Kind, new: &Walked) -> FsResult<()> {
        if let Walked::Found(standing) = new {
            match (old_kind, standing.seen.kind()) {
                (Kind::Dir, Kind::Dir) => {
                    if !self.is_empty_dir(m, standing)? {
                        return Err(ErrorCode::NotEmpty.into());
                    }
                }
                (_, Kind::Dir) => return Err(ErrorCode::IsDirectory.into()),
                (Kind::Dir, _) => return Err(ErrorCode::NotDirectory.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Fails unless `old` and the place `new_rel` of mount `m` are on one
    /// filesystem, where changes can be published (a filesystem mounted
    /// inside the root takes no rename across it), both writable.
    fn on_one_device(&mut self, m: usize, old: &At, new_rel: &Path) -> FsResult<()> {
        let old_dev = match &old.seen {
            Seen::Disk { st, .. } => crate::sys::stat::inode(st).0,
            Seen::Staged(s) => s.dev,
            Seen::MadeDir => self.dev_of_place(m, &old.rel)?.0,
        };
        self.writable_place(m, &old.rel)?;
        if old_dev != self.writable_place(m, new_rel)?.0 {
            return Err(ErrorCode::CrossDevice.into());
        }
        Ok(())
    }

    /// The node that stands for `old` (mount `m`) at its new name: the
    /// call's own node as it is, or a disk entry's, which is taken as moved.
    fn moved_node(&mut self, m: usize, old: &At) -> FsResult<Node> {
        let node = self.overlays[m].nodes.get(&old.rel).cloned();
        Ok(match (node, &old.seen) {
            (Some(Node::Touched(start, times)), _) => {
                let was = old.seen.identity().ok_or(ErrorCode::Io)?;
                self.take(m, start.clone(), was, true)?;
                Node::Moved(start, Some(times))
            }
            (Some(node @ (Node::File(_) | Node::Dir(_) | Node::Moved(..) | Node::Link(_))), _) => {
                node
            }
            (_, Seen::Disk { start, st, .. }) => {
                self.take(m, start.clone(), Identity::of(st), true)?;
                Node::Moved(start.clone(), None)
            }
            _ => return Err(ErrorCode::Io.into()),
        })
    }
}

impl PolicedFs<'_> {
    /// Fails unless the directory descriptor `fd` may be changed through:
    /// its permissions.
    pub(super) fn writable_dir_of(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<wasmtime_wasi::filesystem::FsPerms> {
        let perms = self.dir_perms_of(fd)?;
        if perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(perms)
    }

    /// `create-directory-at` in the call's view.
    pub(super) fn mkdir_in_view(&mut self, fd: &Resource<Descriptor>, path: &str) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, Lookup::New)?;
        self.writable_dir_of(fd)?;
        match self
            .guard
            .walk(&h, path.trim_end_matches('/'), false, op, Lookup::New)?
        {
            Walked::Found(_) => Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => {
                let rel = dir.rel.join(name);
                self.guard.writable_place(h.mount, &rel)?;
                self.guard.set_node(h.mount, rel, Node::Dir(None))
            }
        }
    }

    /// `symlink-at` in the call's view (its target checked by the caller).
    pub(super) fn symlink_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        target: &str,
        path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.writable_dir_of(fd)?;
        let m = h.mount;
        let rel = match self.guard.walk(&h, path, false, op, Lookup::New)? {
            Walked::Found(_) => return Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => dir.rel.join(name),
        };
        let (dev, near) = self.guard.writable_place(m, &rel)?;
        let i = self.guard.stage_dir(m, dev, &near)?;
        let name = self.guard.stage_name("l");
        let stage = &self.guard.stages[m][i];
        let (stage_rel, stage_dev) = (stage.rel.join(&name), stage.dev);
        rustix::fs::symlinkat(target, &stage.fd, name.as_str())
            .map_err(|e| self.guard.host_error_in(m, e))?;
        let staged = Arc::new(Staged {
            rel: stage_rel,
            dev: stage_dev,
            symlink: Some(target.to_string()),
        });
        self.guard.set_node(m, rel, Node::File(staged))
    }

    /// Whether what `at` is in mount `m` is the call's own (made by it,
    /// replacing nothing): removing it needs no delete permission.
    fn own(&self, m: usize, at: &At) -> bool {
        let made = matches!(at.seen, Seen::Staged(_) | Seen::MadeDir);
        let replaces = match self.guard.start_of(m, &at.rel) {
            Start::At(s) => self.guard.overlays[m].is_taken(&s),
            Start::Made => false,
        };
        made && !replaces
    }

    /// `unlink-file-at` and `remove-directory-at` in the call's view.
    pub(super) fn remove_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        dir: bool,
    ) -> FsResult<()> {
        let h = self.guard.handle(fd.rep(), Permission::Delete)?;
        let m = h.mount;
        let trimmed = if dir {
            path.trim_end_matches('/')
        } else {
            path
        };
        // What the call made itself it may remove again with write alone;
        // anything else takes delete. Looked up first to tell which.
        let own = match self
            .guard
            .walk(&h, trimmed, false, Permission::Delete, Lookup::Existing)
        {
            Ok(Walked::Found(at)) => self.own(m, &at),
            // Nothing there (a temporary file already renamed away): the
            // answer a removal of nothing gets, no permission asked.
            Ok(Walked::Missing { .. }) => return Err(ErrorCode::NoEntry.into()),
            Err(e) => return Err(e),
        };
        let op = if own {
            Permission::Write
        } else {
            Permission::Delete
        };
        self.guard.lexical(&h, path, op, Lookup::Existing)?;
        self.writable_dir_of(fd)?;
        let Walked::Found(at) = self.guard.walk(&h, trimmed, false, op, Lookup::Existing)? else {
            return Err(ErrorCode::NoEntry.into());
        };
        self.guard.inside_for(
            &Handle {
                mount: m,
                rel: at.rel.clone(),
            },
            op,
        )?;
        if at.rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &at.rel, op, Rule::RootItself));
        }
        self.guard.writable_place(m, &at.rel)?;
        match (dir, at.seen.kind()) {
            (false, Kind::Dir) => return Err(ErrorCode::IsDirectory.into()),
            (true, k) if k != Kind::Dir => return Err(ErrorCode::NotDirectory.into()),
            _ => {}
        }
        if dir {
            // A directory on another filesystem than the trash (one mounted
            // inside the root) cannot go to the trash whole.
            if let Some(id) = at.seen.identity()
                && id.dev != self.guard.mounts[m].dev
            {
                return Err(ErrorCode::CrossDevice.into());
            }
            // What the call was asked to delete goes whole, with what it
            // holds that the deny list hides; anywhere else a directory
            // must be empty, as on disk.
            let declared = match &at.seen {
                Seen::Disk { start, .. } => self.guard.mounts[m].deletes.contains(start),
                _ => false,
            };
            if !declared && !self.guard.is_empty_dir(m, &at)? {
                return Err(ErrorCode::NotEmpty.into());
            }
        }
        self.guard.discard(m, &at)
    }

    /// `rename-at` in the call's view: the entry moves in the overlay (a
    /// disk entry is taken from its place, to be moved at the publish), and
    /// what stood at the new name, if the rename may replace it, is taken.
    pub(super) fn rename_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let (m, old, new) = self.rename_ends(fd, old_path, new_fd, new_path)?;
        let new_rel = new.rel();
        if new_rel == old.rel {
            return Ok(());
        }
        if new_rel.starts_with(&old.rel) {
            return Err(ErrorCode::Invalid.into());
        }
        self.guard.inside_for(
            &Handle {
                mount: m,
                rel: old.rel.clone(),
            },
            op,
        )?;
        self.guard.may_replace(m, old.seen.kind(), &new)?;
        self.guard.on_one_device(m, &old, &new_rel)?;
        if let Walked::Found(standing) = &new {
            self.guard.discard(m, standing)?;
        }
        let moved = self.guard.moved_node(m, &old)?;
        self.guard.overlays[m].nodes.remove(&old.rel);
        self.guard.overlays[m].move_below(&old.rel, &new_rel);
        self.guard.set_node(m, new_rel.clone(), moved)?;
        self.guard.clear(m, &old.rel)?;
        self.guard.moved_handles(m, &old.rel, &new_rel);
        Ok(())
    }

    /// The two ends of a rename, checked and walked: the mount, what is to
    /// move, and what is at the new name. Refused: a path the lexical
    /// checks refuse, a directory descriptor that may not be changed
    /// through (or the two with different permissions), two roots (the
    /// guest copies, as across filesystems), the root itself at either end.
    fn rename_ends(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<(usize, At, Walked)> {
        let op = Permission::Write;
        let ho = self.guard.handle(fd.rep(), op)?;
        let hn = self.guard.handle(new_fd.rep(), op)?;
        self.guard.lexical(&ho, old_path, op, Lookup::Existing)?;
        self.guard.lexical(&hn, new_path, op, Lookup::New)?;
        let perms = self.writable_dir_of(fd)?;
        if self.writable_dir_of(new_fd)? != perms {
            return Err(ErrorCode::NotPermitted.into());
        }
        // Across roots: the guest copies (as it would across filesystems).
        if ho.mount != hn.mount {
            return Err(ErrorCode::CrossDevice.into());
        }
        let m = ho.mount;
        let Walked::Found(old) = self.guard.walk(
            &ho,
            old_path.trim_end_matches('/'),
            false,
            op,
            Lookup::Existing,
        )?
        else {
            return Err(ErrorCode::NoEntry.into());
        };
        if old.rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &old.rel, op, Rule::RootItself));
        }
        let new = self
            .guard
            .walk(&hn, new_path.trim_end_matches('/'), false, op, Lookup::New)?;
        let new_rel = new.rel();
        if new_rel.as_os_str().is_empty() {
            return Err(self.guard.refuse(Some(m), &new_rel, op, Rule::RootItself));
        }
        Ok((m, old, new))
    }

    /// `link-at` in the call's view: a hard link within one root.
    pub(super) fn link_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        old_flags: fs::PathFlags,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let ho = self.guard.handle(fd.rep(), op)?;
        let hn = self.guard.handle(new_fd.rep(), op)?;
        self.guard.lexical(&ho, old_path, op, Lookup::Existing)?;
        self.guard.lexical(&hn, new_path, op, Lookup::New)?;
        let perms = self.writable_dir_of(fd)?;
        if self.writable_dir_of(new_fd)? != perms {
            return Err(ErrorCode::NotPermitted.into());
        }
        if !self.guard.same_root(ho.mount, hn.mount) {
            return Err(self.guard.refuse(
                Some(hn.mount),
                &hn.rel.join(new_path),
                op,
                Rule::Confinement,
            ));
        }
        let m = ho.mount;
        let follow = old_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let Walked::Found(old) = self
            .guard
            .walk(&ho, old_path, follow, op, Lookup::Existing)?
        else {
            return Err(ErrorCode::NoEntry.into());
        };
        let rel = match self.guard.walk(&hn, new_path, false, op, Lookup::New)? {
            Walked::Found(_) => return Err(ErrorCode::Exist.into()),
            Walked::Missing { dir, name, .. } => dir.rel.join(name),
        };
        if old.rel.as_os_str().is_empty() || old.seen.kind() == Kind::Dir {
            return Err(ErrorCode::NotPermitted.into());
        }
        let old_dev = match &old.seen {
            Seen::Disk { st, .. } => crate::sys::stat::inode(st).0,
            Seen::Staged(s) => s.dev,
            Seen::MadeDir => return Err(ErrorCode::NotPermitted.into()),
        };
        if old_dev != self.guard.dev_of_place(m, &rel)?.0 {
            return Err(ErrorCode::CrossDevice.into());
        }
        let node = match old.seen {
            Seen::Staged(staged) => Node::File(staged),
            Seen::Disk { start, st, .. } => {
                // A link to a disk file the call moved is a link to where it
                // was: not what the guest means.
                if self.guard.overlays[m].is_taken(&start) {
                    return Err(ErrorCode::NotPermitted.into());
                }
                self.guard.overlays[m].saw(&start, Identity::of(&st));
                Node::Link(start)
            }
            Seen::MadeDir => return Err(ErrorCode::NotPermitted.into()),
        };
        self.guard.set_node(m, rel, node)
    }
}
