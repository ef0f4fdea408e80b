//! The steps of a publish, each done so that doing it again, after a kill
//! part-way, finds it done and goes on (the journal's recovery runs the
//! same code): every step looks first at what stands where it acts, by
//! device and inode, and never replaces or removes what the call did not
//! see. What someone else put in a place meanwhile stays; the call's own
//! version then goes to the trash instead, and is told.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, Timespec, Timestamps};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::{Identity, KeptEntry, Published, PutEntry, Time, Times};
use crate::policy::Root;
use crate::sys::{beneath, rename};

/// One step of a publish. Paths are relative to the step's root (`root`,
/// an index in the plan's roots).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Step {
    /// Keeps the file at `at` in the trash (`slot`) by a hard link; a
    /// later `Put` replaces it in place.
    Link {
        root: usize,
        at: PathBuf,
        slot: PathBuf,
        was: Identity,
    },
    /// Keeps the file at `at` in the trash by a copy (a link cannot reach:
    /// another filesystem), written at `temp` on the trash's filesystem and
    /// renamed to `slot` once whole and synced.
    Copy {
        root: usize,
        at: PathBuf,
        temp: PathBuf,
        slot: PathBuf,
        was: Identity,
    },
    /// Moves the entry at `from` to `to`: its trash slot, or a stage where
    /// it waits to be put at its new place.
    Take {
        root: usize,
        from: PathBuf,
        to: PathBuf,
        was: Identity,
    },
    /// Removes the file at `at`, kept already by a `Copy`.
    Unlink {
        root: usize,
        at: PathBuf,
        was: Identity,
    },
    Mkdir {
        root: usize,
        at: PathBuf,
    },
    /// Puts the entry staged at `from` at `at`: over the file `over` (kept
    /// by a `Link` or `Copy`), or where nothing stands.
    Put {
        root: usize,
        from: PathBuf,
        at: PathBuf,
        over: Option<Identity>,
    },
    /// A hard link at `at` to the file at `from`.
    HardLink {
        root: usize,
        from: PathBuf,
        at: PathBuf,
    },
    SetTimes {
        root: usize,
        at: PathBuf,
        times: Times,
    },
}

impl Step {
    pub(super) fn root(&self) -> usize {
        match self {
            Step::Link { root, .. }
            | Step::Copy { root, .. }
            | Step::Take { root, .. }
            | Step::Unlink { root, .. }
            | Step::Mkdir { root, .. }
            | Step::Put { root, .. }
            | Step::HardLink { root, .. }
            | Step::SetTimes { root, .. } => *root,
        }
    }
}

/// The directory holding `path` beneath `root`, and its last name.
pub(super) fn parent_of<'p>(root: &OwnedFd, path: &'p Path) -> Result<(OwnedFd, &'p OsStr), Errno> {
    let name = path.file_name().ok_or(Errno::INVAL)?;
    let parent = path.parent().unwrap_or(Path::new(""));
    let dir = beneath::beneath(root, parent)
        .map_err(|e| e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error))?;
    Ok((dir, name))
}

/// What stands at `path` beneath `root`, not following a final symlink:
/// `None` when nothing does; an error when its directory is not there.
pub(super) fn lstat(root: &OwnedFd, path: &Path) -> Result<Option<Identity>, Errno> {
    if path.as_os_str().is_empty() {
        return rustix::fs::fstat(root).map(|st| Some(Identity::of(&st)));
    }
    let (dir, name) = parent_of(root, path)?;
    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Identity::of(&st))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Renames `from` to `to` (both beneath `root`) with `flags`; where the
/// filesystem lacks `RENAME_NOREPLACE`, by [`rename::rename_noreplace`]'s
/// check and plain rename.
fn rename(root: &OwnedFd, from: &Path, to: &Path, flags: RenameFlags) -> Result<(), Errno> {
    let (from_dir, from_name) = parent_of(root, from)?;
    let (to_dir, to_name) = parent_of(root, to)?;
    if flags == RenameFlags::NOREPLACE {
        return rename::rename_noreplace(&from_dir, from_name, &to_dir, to_name);
    }
    rustix::fs::renameat_with(&from_dir, from_name, &to_dir, to_name, flags)
}

/// Makes the directories above `path` (below `root`) that are missing.
fn parents(root: &OwnedFd, path: &Path) -> Result<(), Errno> {
    let parent = path.parent().unwrap_or(Path::new(""));
    beneath::parents(root, parent)
        .map(drop)
        .map_err(|e| e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error))
}

/// Copies the file at `at` to a new file `temp`, synced: the bytes of a
/// version kept where no link reaches.
fn copy_file(root: &OwnedFd, at: &Path, temp: &Path) -> Result<(), Errno> {
    let (dir, name) = parent_of(root, at)?;
    let from = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let (tdir, tname) = parent_of(root, temp)?;
    // A copy left by a kill before it was renamed into the trash.
    match rustix::fs::unlinkat(&tdir, tname, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(e),
    }
    let to = rustix::fs::openat(
        &tdir,
        tname,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut from = std::fs::File::from(from);
    let mut to = std::fs::File::from(to);
    let errno = |e: io::Error| e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = from.read(&mut buf).map_err(errno)?;
        if n == 0 {
            break;
        }
        to.write_all(&buf[..n]).map_err(errno)?;
    }
    to.sync_all().map_err(errno)?;
    Ok(())
}

fn timespec(t: Time) -> Timespec {
    match t {
        Time::Keep => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        Time::Now => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        Time::At(secs, nanos) => Timespec {
            tv_sec: secs,
            tv_nsec: i64::from(nanos).try_into().unwrap_or(0),
        },
    }
}

/// A root a plan acts in, opened.
pub struct PlanRoot {
    pub(super) root: Arc<Root>,
    pub(super) fd: OwnedFd,
}

/// What doing the steps came to, gathered as they run.
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) published: Published,
    /// Directories whose entries changed, to sync: root, path.
    pub(super) dirs: BTreeSet<(usize, PathBuf)>,
    /// The first step that failed: its root and error.
    pub(super) failed: Option<(usize, Errno)>,
}

/// Does one step in `roots` (see the module); what it kept or could not
/// put goes into `out`.
pub(super) fn run_step(roots: &[PlanRoot], stamp: &str, step: &Step, out: &mut Outcome) {
    let r = step.root();
    let Some(root) = roots.get(r) else {
        return;
    };
    let mut run = StepRun {
        fd: &root.fd,
        name: &root.root.name,
        r,
        stamp,
        out: &mut *out,
    };
    let done = match step {
        Step::Link { at, slot, was, .. } => run.keep_by_link(at, slot, was),
        Step::Copy {
            at,
            temp,
            slot,
            was,
            ..
        } => run.keep_by_copy(at, temp, slot, was),
        Step::Take { from, to, was, .. } => run.take(from, to, was),
        Step::Unlink { at, was, .. } => run.unlink(at, was),
        Step::Mkdir { at, .. } => run.mkdir(at),
        Step::Put { from, at, over, .. } => {
            put(roots, r, stamp, from, at, *over, run.out);
            Ok(())
        }
        Step::HardLink { from, at, .. } => run.hard_link(from, at),
        Step::SetTimes { at, times, .. } => run.set_times(at, times),
    };
    if let Err(e) = done {
        tracing::error!(root = %root.root.name, ?step, "a step of a publish failed: {e}");
        out.failed.get_or_insert((r, e));
    }
}

/// One step being run by [`run_step`]: its root (`r`, its directory `fd`,
/// its `name`), the call's trash entry and where what it did is told.
/// Each kind of step is a method; one that finds its work done, or the
/// entry it acts on changed by someone else, does nothing and succeeds.
struct StepRun<'a> {
    fd: &'a OwnedFd,
    name: &'a str,
    r: usize,
    stamp: &'a str,
    out: &'a mut Outcome,
}

impl StepRun<'_> {
    /// Whether `path` is still the version `was`.
    fn is(&self, path: &Path, was: &Identity) -> bool {
        matches!(lstat(self.fd, path), Ok(Some(now)) if now.same_version(was))
    }

    /// Tells that what was at `from` is kept at `to`.
    fn kept(&mut self, from: &Path, to: &Path) {
        self.out.published.kept.push(KeptEntry {
            root: self.name.to_owned(),
            from: from.to_string_lossy().into_owned(),
            to: to.to_string_lossy().into_owned(),
        });
    }

    /// Marks the directory holding `path` to be synced.
    fn changed_dir_of(&mut self, path: &Path) {
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        self.out.dirs.insert((self.r, dir));
    }

    /// [`Step::Link`]: the file at `at` kept at `slot` by a hard link.
    fn keep_by_link(&mut self, at: &Path, slot: &Path, was: &Identity) -> Result<(), Errno> {
        if matches!(lstat(self.fd, slot), Ok(Some(_))) {
            self.kept(at, slot);
            return Ok(());
        }
        if !self.is(at, was) {
            return Ok(());
        }
        parents(self.fd, slot)?;
        let (dir, n) = parent_of(self.fd, at)?;
        let (sdir, sn) = parent_of(self.fd, slot)?;
        rustix::fs::linkat(&dir, n, &sdir, sn, AtFlags::empty())?;
        self.kept(at, slot);
        self.changed_dir_of(slot);
        Ok(())
    }

    /// [`Step::Copy`]: the file at `at` kept at `slot` by a copy written at
    /// `temp`.
    fn keep_by_copy(
        &mut self,
        at: &Path,
        temp: &Path,
        slot: &Path,
        was: &Identity,
    ) -> Result<(), Errno> {
        if matches!(lstat(self.fd, slot), Ok(Some(_))) {
            self.kept(at, slot);
            return Ok(());
        }
        if !self.is(at, was) {
            return Ok(());
        }
        parents(self.fd, slot)?;
        copy_file(self.fd, at, temp)?;
        rename(self.fd, temp, slot, RenameFlags::NOREPLACE)?;
        self.kept(at, slot);
        self.changed_dir_of(slot);
        Ok(())
    }

    /// [`Step::Take`]: what is at `from` renamed to `to` (the trash, or a
    /// stage directory for what the call moves).
    fn take(&mut self, from: &Path, to: &Path, was: &Identity) -> Result<(), Errno> {
        if !self.is(from, was) {
            // Taken already (a step run again), or changed by someone
            // else since the check: left where it is.
            if in_trash(self.stamp, to)
                && matches!(lstat(self.fd, to), Ok(Some(now)) if now.same_entry(was))
            {
                self.kept(from, to);
            }
            return Ok(());
        }
        parents(self.fd, to)?;
        rename(self.fd, from, to, RenameFlags::NOREPLACE)?;
        if in_trash(self.stamp, to) {
            self.kept(from, to);
        }
        self.changed_dir_of(from);
        self.changed_dir_of(to);
        Ok(())
    }

    /// [`Step::Unlink`]: the file at `at` removed (kept by a copy before).
    fn unlink(&mut self, at: &Path, was: &Identity) -> Result<(), Errno> {
        if !self.is(at, was) {
            return Ok(());
        }
        let (dir, n) = parent_of(self.fd, at)?;
        rustix::fs::unlinkat(&dir, n, AtFlags::empty())?;
        self.changed_dir_of(at);
        Ok(())
    }

    /// [`Step::Mkdir`]: the directory `at` made, unless one is there.
    fn mkdir(&mut self, at: &Path) -> Result<(), Errno> {
        let (dir, n) = parent_of(self.fd, at)?;
        match rustix::fs::mkdirat(&dir, n, Mode::from_raw_mode(0o777)) {
            Ok(()) => {
                self.changed_dir_of(at);
                self.out.published.put.push(PutEntry {
                    root: self.name.to_owned(),
                    at: at.to_string_lossy().into_owned(),
                    moved_from: None,
                    now: lstat(self.fd, at).ok().flatten(),
                });
                Ok(())
            }
            Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// [`Step::HardLink`]: a hard link at `at` to `from`, unless something
    /// is there.
    fn hard_link(&mut self, from: &Path, at: &Path) -> Result<(), Errno> {
        if matches!(lstat(self.fd, at), Ok(Some(_))) {
            return Ok(());
        }
        let (dir, n) = parent_of(self.fd, from)?;
        let (adir, an) = parent_of(self.fd, at)?;
        rustix::fs::linkat(&dir, n, &adir, an, AtFlags::empty())?;
        self.changed_dir_of(at);
        Ok(())
    }

    /// [`Step::SetTimes`]: the times of `at` (the root itself when empty).
    fn set_times(&self, at: &Path, times: &Times) -> Result<(), Errno> {
        let set = Timestamps {
            last_access: timespec(times.access),
            last_modification: timespec(times.modified),
        };
        if at.as_os_str().is_empty() {
            rustix::fs::futimens(self.fd, &set)
        } else {
            let (dir, n) = parent_of(self.fd, at)?;
            rustix::fs::utimensat(&dir, n, &set, AtFlags::SYMLINK_NOFOLLOW)
        }
    }
}

/// Puts the staged `from` at `at` (see [`Step::Put`]). Over a file kept
/// for it, by an exchange: what comes out must be that file; anything else
/// (changed by someone else in the instant) goes to the trash too. Where
/// nothing should stand but something does, the call's version goes to the
/// trash (`<at>.unpublished`) and the other stays.
fn put(
    roots: &[PlanRoot],
    r: usize,
    stamp: &str,
    from: &Path,
    at: &Path,
    over: Option<Identity>,
    out: &mut Outcome,
) {
    let root = &roots[r];
    let (fd, name) = (&root.fd, &root.root.name);
    let parent = |p: &Path| (r, p.parent().unwrap_or(Path::new("")).to_path_buf());
    match lstat(fd, from) {
        Ok(Some(_)) => {}
        // Put already (a step run again).
        _ => return,
    }
    let standing = lstat(fd, at);
    let result = match (over, &standing) {
        (Some(was), Ok(Some(now))) if now.same_version(&was) => {
            match rename(fd, from, at, RenameFlags::EXCHANGE) {
                Ok(()) => {
                    // What came out is at `from` now.
                    match lstat(fd, from) {
                        Ok(Some(out_now)) if out_now.same_entry(&was) => {
                            if let Ok((dir, n)) = parent_of(fd, from) {
                                let _ = rustix::fs::unlinkat(&dir, n, AtFlags::empty());
                            }
                        }
                        Ok(Some(_)) => set_aside(root, stamp, from, at, ".displaced", out),
                        _ => {}
                    }
                    Ok(())
                }
                // A filesystem without `RENAME_EXCHANGE` (FUSE, older NFS):
                // a plain rename over the version just checked, which the
                // call's keep step linked into the trash already. A version
                // someone else renames there in between is replaced.
                Err(Errno::INVAL) => rename(fd, from, at, RenameFlags::empty()),
                Err(e) => Err(e),
            }
        }
        (_, Ok(None)) => rename(fd, from, at, RenameFlags::NOREPLACE),
        (_, Ok(Some(_))) => {
            set_aside(root, stamp, from, at, ".unpublished", out);
            Ok(())
        }
        (_, Err(e)) => Err(*e),
    };
    match result {
        Ok(()) => {
            out.dirs.insert(parent(at));
            out.published.put.push(PutEntry {
                root: name.clone(),
                at: at.to_string_lossy().into_owned(),
                moved_from: None,
                now: lstat(fd, at).ok().flatten(),
            });
        }
        Err(e) => {
            tracing::error!(root = %name, at = %at.display(), "a publish could not put a file in place: {e}");
            set_aside(root, stamp, from, at, ".unpublished", out);
        }
    }
}

/// Moves what is at `from` (the call's version that could not take its
/// place, or one someone else put there that an exchange brought out)
/// into the call's trash entry as `<at><suffix>`, and tells it.
fn set_aside(
    root: &PlanRoot,
    stamp: &str,
    from: &Path,
    at: &Path,
    suffix: &str,
    out: &mut Outcome,
) {
    let mut slot = Path::new(crate::store::TRASH_DIR)
        .join(stamp)
        .join(at)
        .into_os_string();
    slot.push(suffix);
    let slot = PathBuf::from(slot);
    let moved = parents(&root.fd, &slot)
        .and_then(|()| rename(&root.fd, from, &slot, RenameFlags::NOREPLACE));
    match moved {
        Ok(()) => out.published.displaced.push(KeptEntry {
            root: root.root.name.clone(),
            from: at.to_string_lossy().into_owned(),
            to: slot.to_string_lossy().into_owned(),
        }),
        Err(e) => tracing::error!(
            root = %root.root.name,
            at = %at.display(),
            "a version could not be set aside in the trash ({e}); it stays in the staging area"
        ),
    }
}

/// Syncs the directories whose entries changed: the renames and links are
/// on disk when the call is answered. This runs after the commit point, so
/// a failure cannot undo the call (its changes are in place and visible);
/// it is logged as an error naming the root and directory, for the
/// operator: the disk may not hold them after a power cut.
pub(super) fn sync_dirs(roots: &[PlanRoot], dirs: &BTreeSet<(usize, PathBuf)>) {
    for (r, dir) in dirs {
        let Some(root) = roots.get(*r) else {
            continue;
        };
        let synced = beneath::beneath(&root.fd, dir)
            .and_then(|fd| rustix::fs::fsync(&fd).map_err(std::io::Error::from));
        // Gone since: a later step or call removed it, nothing to sync.
        if let Err(e) = synced
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::error!(
                root = %root.root.name,
                dir = %dir.display(),
                "a published change could not be synced to disk ({e})"
            );
        }
    }
}

/// Notes where each entry put in place by a move came from (a take whose
/// entry a later step puts somewhere).
pub(super) fn moved_from(steps: &[Step], roots: &[PlanRoot], published: &mut Published) {
    for step in steps {
        let Step::Take { root, from, to, .. } = step else {
            continue;
        };
        let put_at = steps.iter().find_map(|s| match s {
            Step::Put {
                root: r,
                from: f,
                at,
                ..
            } if r == root && f == to => Some(at),
            _ => None,
        });
        if let Some(at) = put_at {
            let name = &roots[*root].root.name;
            let at = at.to_string_lossy();
            if let Some(p) = published
                .put
                .iter_mut()
                .find(|p| &p.root == name && p.at == at)
            {
                p.moved_from = Some(from.to_string_lossy().into_owned());
            }
        }
    }
}

/// Whether `path` is in the call's trash entry (not the staging area,
/// which lies in `.mcp-trash` too).
fn in_trash(stamp: &str, path: &Path) -> bool {
    path.starts_with(Path::new(crate::store::TRASH_DIR).join(stamp))
}

/// Syncs a staged file's data before it is published (a symlink has none
/// to sync).
pub(super) fn sync_staged(root: &OwnedFd, stage: &Path) -> Result<(), Errno> {
    let (dir, n) = parent_of(root, stage)?;
    match rustix::fs::openat(
        &dir,
        n,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(f) => rustix::fs::fsync(f.as_fd()),
        Err(Errno::LOOP) => Ok(()),
        Err(e) => Err(e),
    }
}
