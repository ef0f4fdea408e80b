//! New times, recorded in the call's view: set on a staged file itself,
//! else recorded on the overlay node that stands for the entry (a disk
//! file's times are set at the publish; nothing is copied for them).
//!
//! Part of `impl PolicedFs` (and one `FsGuard` lookup): the WASI
//! `set-times-at` and `set-times` methods of a call, which change the
//! call's view as `change.rs` does but touch no other part of it.

use std::path::Path;

use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;

use super::overlay::Node;
use super::view::{At, Seen, Walked};
use super::{FsGuard, Handle, Lookup, PolicedFs, again};
use crate::policy::Permission;
use crate::store::publish::{Identity, Time, Times};

/// The times a WASI `set-times` asks for, as the publish records them.
fn times_of(atim: fs::NewTimestamp, mtim: fs::NewTimestamp) -> Times {
    let one = |t: fs::NewTimestamp| match t {
        fs::NewTimestamp::NoChange => Time::Keep,
        fs::NewTimestamp::Now => Time::Now,
        fs::NewTimestamp::Timestamp(d) => {
            Time::At(i64::try_from(d.seconds).unwrap_or(i64::MAX), d.nanoseconds)
        }
    };
    Times {
        access: one(atim),
        modified: one(mtim),
    }
}

/// Both times: those of `new` where it sets them, else those of `old`.
fn merged(old: Option<Times>, new: Times) -> Times {
    let Some(old) = old else { return new };
    let pick = |o: Time, n: Time| if n == Time::Keep { o } else { n };
    Times {
        access: pick(old.access, new.access),
        modified: pick(old.modified, new.modified),
    }
}

impl PolicedFs<'_> {
    /// `set-times-at` in the call's view: recorded, nothing copied.
    pub(super) fn set_times_in_view(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: &str,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let op = Permission::Write;
        let h = self.guard.handle(fd.rep(), op)?;
        self.guard.lexical(&h, path, op, Lookup::Existing)?;
        self.writable_dir_of(fd)?;
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let Walked::Found(at) = self.guard.walk(&h, path, follow, op, Lookup::Existing)? else {
            return Err(ErrorCode::NoEntry.into());
        };
        self.guard.inside_for(
            &Handle {
                mount: h.mount,
                rel: at.rel.clone(),
            },
            op,
        )?;
        self.set_times_of(h.mount, at, times_of(atim, mtim))
    }

    /// New times for `at` of mount `m`: on a staged file itself, else on
    /// the node that stands for it.
    pub(super) fn set_times_of(&mut self, m: usize, at: At, times: Times) -> FsResult<()> {
        let node = self.guard.overlays[m].nodes.get(&at.rel).cloned();
        match (node, at.seen) {
            (_, Seen::Staged(staged)) => {
                let set = |t: Time| match t {
                    Time::Keep => rustix::fs::Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_OMIT,
                    },
                    Time::Now => rustix::fs::Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_NOW,
                    },
                    Time::At(s, n) => rustix::fs::Timespec {
                        tv_sec: s,
                        tv_nsec: i64::from(n).try_into().unwrap_or(0),
                    },
                };
                let root = self.guard.root_fd(m)?;
                let parent = staged.rel.parent().unwrap_or(Path::new(""));
                let dir = crate::sys::beneath::beneath(root, parent).map_err(|_| ErrorCode::Io)?;
                let name = staged.rel.file_name().ok_or(ErrorCode::Io)?;
                rustix::fs::utimensat(
                    &dir,
                    name,
                    &rustix::fs::Timestamps {
                        last_access: set(times.access),
                        last_modification: set(times.modified),
                    },
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| self.guard.host_error_in(m, e))
            }
            (Some(Node::Dir(old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Dir(Some(merged(old, times))))
            }
            (Some(Node::Moved(start, old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Moved(start, Some(merged(old, times))))
            }
            (Some(Node::Touched(start, old)), _) => {
                self.guard
                    .set_node(m, at.rel, Node::Touched(start, merged(Some(old), times)))
            }
            (Some(Node::Link(_)), Seen::Disk { .. }) => Err(ErrorCode::NotPermitted.into()),
            (_, Seen::Disk { start, st, .. }) => {
                self.guard.overlays[m].saw(&start, Identity::of(&st));
                self.guard.set_node(m, at.rel, Node::Touched(start, times))
            }
            _ => Err(ErrorCode::Io.into()),
        }
    }

    /// `set-times` on a descriptor: a staged file's own, else recorded for
    /// the entry it is (nothing copied).
    pub(super) fn set_times_of_descriptor(
        &mut self,
        fd: &Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let h = self.tracked(fd, Permission::Write)?;
        let m = h.mount;
        if self.guard.pending.contains_key(&fd.rep())
            || !matches!(
                self.guard.overlays[m].nodes.get(&h.rel),
                Some(Node::File(_))
            )
        {
            let at = self.guard.dir_at_or_file(m, &h.rel)?;
            return self.set_times_of(m, at, times_of(atim, mtim));
        }
        let rep = fd.rep();
        let set = fs::HostDescriptor::set_times(&mut self.fs, again(fd), atim, mtim);
        self.disk_noted(rep, set)
    }
}

impl FsGuard {
    /// What stands at `rel` of mount `m` (a tracked descriptor's path),
    /// whatever it is.
    pub(super) fn dir_at_or_file(&mut self, m: usize, rel: &Path) -> FsResult<At> {
        let Some(name) = rel.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            return self.dir_at(m, rel);
        };
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let h = Handle {
            mount: m,
            rel: parent,
        };
        match self.walk(&h, &name, false, Permission::Read, Lookup::Existing)? {
            Walked::Found(at) => Ok(at),
            Walked::Missing { .. } => Err(ErrorCode::NoEntry.into()),
        }
    }
}
