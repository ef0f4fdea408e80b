//! Undoing a call, for the operator (`trash undo`): everything the call
//! replaced or removed is put back, and what it put in place goes to the
//! trash, so that the undo loses nothing either. Never a tool: the model
//! puts things into the trash and never takes them out.
//!
//! What the call did is read from its trash index (what it kept, from
//! where; what it put, as it was once published). The undo is itself a
//! publish ([`crate::store::publish`]): checked first, all or nothing,
//! crash-safe, under the path locks of every place it touches, with a trash
//! entry of its own. It is refused, naming the paths, where a later change
//! touched what the call put (a file changed or replaced since, a kept
//! version's place taken by something else).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::TrashError;
use super::index::{Index, IndexEntry, TrashDir, record_published};
use super::list::contents;
use crate::policy::Root;
use crate::store::publish::{
    self, Changes, Check, Identity, Made, New, Published, PutEntry, Taken,
};
use crate::sys::beneath::beneath;

/// What an undo did.
#[derive(Debug)]
pub struct Undone {
    /// The call undone.
    pub call: String,
    /// The undo's own trash entry, where the call's versions went.
    pub stamp: String,
    pub published: Published,
}

/// Why an undo did nothing.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("no call {call} in the trash index of any root")]
    Unknown { call: String },
    /// Later changes touched these places (root, path).
    #[error(
        "changed since the call, so its undo would lose a later change: {}; nothing was undone",
        .places.iter().map(|(r, p)| format!("{r}/{p}")).collect::<Vec<_>>().join(", ")
    )]
    Changed { places: Vec<(String, String)> },
    #[error("{0}")]
    Trash(#[from] TrashError),
    #[error("root '{root}': {error}; nothing was undone")]
    Io { root: String, error: io::Error },
}

/// The calls whose index says they changed something, at or after `since`,
/// newest first.
pub fn calls_since(roots: &[Arc<Root>], since: SystemTime) -> Result<Vec<String>, TrashError> {
    let mut calls: Vec<(SystemTime, String)> = Vec::new();
    for root in roots {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        for stamp in contents(root, &trash)?.stamps {
            if stamp.index && stamp.at >= since && !calls.iter().any(|(_, c)| *c == stamp.name) {
                calls.push((stamp.at, stamp.name));
            }
        }
    }
    calls.sort_by(|a, b| b.cmp(a));
    Ok(calls.into_iter().map(|(_, c)| c).collect())
}

/// Undoes call `call` (see the module), with `staging` for the publish's
/// stage and `stamp` for its trash entry. The caller holds the path locks
/// of the places [`undo_places`] names.
pub fn undo(
    roots: &[Arc<Root>],
    call: &str,
    staging: &crate::store::staging::Staging,
    stamp: &str,
) -> Result<Undone, UndoError> {
    let plans = undo_changes(roots, call, staging)?;
    let changes: Vec<Changes> = plans.iter().map(|(c, _)| c.clone()).collect();
    let published = publish::publish(&changes, stamp).map_err(|e| match e {
        publish::Refused::Conflict { root, path } => UndoError::Changed {
            places: vec![(root, path.to_string_lossy().into_owned())],
        },
        publish::Refused::Io { root, error } => UndoError::Io { root, error },
    })?;
    record_published(roots, stamp, "trash undo", &published);
    Ok(Undone {
        call: call.to_string(),
        stamp: stamp.to_string(),
        published,
    })
}

/// The places an undo of `call` touches in each root: what the call kept
/// and put (to lock them before the undo).
pub fn undo_places(
    roots: &[Arc<Root>],
    call: &str,
) -> Result<Vec<(Arc<Root>, PathBuf)>, UndoError> {
    let mut places = Vec::new();
    for (root, index) in indexes(roots, call)? {
        for k in &index.entries {
            places.push((Arc::clone(&root), PathBuf::from(&k.from)));
        }
        for p in &index.put {
            places.push((Arc::clone(&root), PathBuf::from(&p.at)));
            if let Some(from) = &p.moved_from {
                places.push((Arc::clone(&root), PathBuf::from(from)));
            }
        }
    }
    Ok(places)
}

/// Each root's index of `call`.
fn indexes(roots: &[Arc<Root>], call: &str) -> Result<Vec<(Arc<Root>, Index)>, UndoError> {
    let mut found = Vec::new();
    for root in roots {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        let index = trash.read_index(call).map_err(|error| UndoError::Io {
            root: root.name.clone(),
            error,
        })?;
        if let Some(index) = index {
            found.push((Arc::clone(root), index));
        }
    }
    if found.is_empty() {
        return Err(UndoError::Unknown {
            call: call.to_string(),
        });
    }
    Ok(found)
}

/// The undo of `call` as changes to publish, each root's with the stage
/// directory that holds its lifts (kept until the publish is done).
fn undo_changes(
    roots: &[Arc<Root>],
    call: &str,
    staging: &crate::store::staging::Staging,
) -> Result<Vec<(Changes, crate::store::staging::CallDir)>, UndoError> {
    let mut out = Vec::new();
    let mut changed: Vec<(String, String)> = Vec::new();
    for (root, index) in indexes(roots, call)? {
        let mut undo = RootUndo {
            root_fd: crate::sys::beneath::open_root(&root).map_err(io_error(&root))?,
            root,
            taken: Vec::new(),
            made: Vec::new(),
            changed: &mut changed,
        };
        undo.take_back_puts(&index.put)?;
        undo.bring_back_kept(&index.entries)?;
        out.push(undo.into_changes(staging)?);
    }
    if !changed.is_empty() {
        // A place the call replaced counts once (its new version changed,
        // so its old one has no free place to return to either).
        changed.sort();
        changed.dedup();
        return Err(UndoError::Changed { places: changed });
    }
    Ok(out)
}

/// The undo's error for an I/O error in `root`.
fn io_error(root: &Root) -> impl Fn(io::Error) -> UndoError + '_ {
    |error| UndoError::Io {
        root: root.name.clone(),
        error,
    }
}

/// One root's part of an undo being planned by [`undo_changes`]: what
/// stands there now, and the changes that undo the call there.
struct RootUndo<'a> {
    root: Arc<Root>,
    root_fd: OwnedFd,
    taken: Vec<Taken>,
    made: Vec<Made>,
    /// The places (root name, path) changed since the call, of every root.
    changed: &'a mut Vec<(String, String)>,
}

impl RootUndo<'_> {
    /// What stands at `path` now, if anything.
    fn now(&self, path: &Path) -> Result<Option<Identity>, UndoError> {
        let Some(name) = path.file_name() else {
            return Ok(None);
        };
        let dir = match beneath(&self.root_fd, path.parent().unwrap_or(Path::new(""))) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(&self.root)(e)),
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Identity::of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_error(&self.root)(e.into())),
        }
    }

    /// Counts `path` as changed since the call.
    fn changed(&mut self, path: &str) {
        self.changed.push((self.root.name.clone(), path.to_owned()));
    }

    /// What the call put goes (to the undo's trash entry), or back where it
    /// came from: still as the call left it.
    fn take_back_puts(&mut self, puts: &[PutEntry]) -> Result<(), UndoError> {
        for p in puts {
            let at = PathBuf::from(&p.at);
            match (self.now(&at)?, &p.now) {
                (Some(is), Some(was)) if is.same_version(was) => self.taken.push(Taken {
                    from: at.clone(),
                    was: is,
                    moved: p.moved_from.is_some(),
                }),
                _ => self.changed(&p.at),
            }
            if let Some(from) = &p.moved_from {
                self.made.push(Made {
                    at: PathBuf::from(from),
                    new: New::Moved(at),
                    check: Check::Free(PathBuf::from(from)),
                    times: None,
                });
            }
        }
        Ok(())
    }

    /// What the call kept comes back to its place: a place the call put
    /// something at is freed by [`Self::take_back_puts`]; any other must
    /// be free.
    fn bring_back_kept(&mut self, entries: &[IndexEntry]) -> Result<(), UndoError> {
        for k in entries {
            let (from, to) = (PathBuf::from(&k.from), PathBuf::from(&k.to));
            let Some(kept) = self.now(&to)? else {
                self.changed(&k.to);
                continue;
            };
            self.taken.push(Taken {
                from: to.clone(),
                was: kept,
                moved: true,
            });
            let check = if self.taken.iter().any(|t| t.from == from) {
                Check::Replaces(from.clone())
            } else {
                Check::Free(from.clone())
            };
            if let Check::Free(_) = check
                && self.now(&from)?.is_some()
            {
                self.changed(&k.from);
            }
            self.made.push(Made {
                at: from,
                new: New::Moved(to),
                check,
                times: None,
            });
        }
        Ok(())
    }

    /// This root's changes, with a new stage directory for its lifts.
    fn into_changes(
        self,
        staging: &crate::store::staging::Staging,
    ) -> Result<(Changes, crate::store::staging::CallDir), UndoError> {
        let io = io_error(&self.root);
        let dir = staging.call_dir(&self.root, None).map_err(&io)?;
        let stage = dir
            .path()
            .strip_prefix(&self.root.path)
            .map(Path::to_path_buf)
            .map_err(|_| io(io::ErrorKind::InvalidData.into()))?;
        let dev =
            crate::sys::stat::inode(&rustix::fs::fstat(&self.root_fd).map_err(|e| io(e.into()))?).0;
        let changes = Changes {
            root: Arc::clone(&self.root),
            dev,
            stage: Some(stage),
            stages: Vec::new(),
            taken: self.taken,
            made: self.made,
        };
        Ok((changes, dir))
    }
}
