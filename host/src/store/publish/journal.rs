//! The journal of a publish that changes more than one name: its steps,
//! written to the call's stage directory on the root's filesystem and
//! synced before the first of them is done (the commit point), removed
//! once they are all done and synced.
//!
//! A server killed part-way leaves it in its staging area, whose lock the
//! kernel gives back with the process; whoever next sweeps that area (a
//! server starting, a running server before it takes a root's locks, `trash
//! purge`) finishes the steps before it removes anything there
//! ([`recover_in`]): each step finds what was done already and does the
//! rest, so a call's changes end all published. One journal per root: a
//! call that changes two roots writes both before it does anything, so
//! that after a kill each root finishes on its own.

use std::io;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::Published;
use super::steps::{Outcome, PlanRoot, Step, parent_of, run_step, sync_dirs};
use crate::policy::Root;

/// The journal's name in a call's stage directory.
pub const JOURNAL: &str = "journal";

/// What a journal holds: one root's steps.
#[derive(Serialize, Deserialize)]
struct Journal {
    stamp: String,
    /// The root's name when it was written, for the log.
    root: String,
    steps: Vec<Step>,
}

/// A journal written: each root's, by root index and path.
pub(super) struct Written(Vec<(usize, PathBuf)>);

/// Writes each root's journal of `steps` (the commit point: see the
/// module), in its stage directory (`stages`, by root).
pub(super) fn write(
    roots: &[PlanRoot],
    stamp: &str,
    steps: &[Step],
    stages: &[Option<PathBuf>],
) -> io::Result<Written> {
    let mut written = Vec::new();
    for (r, root) in roots.iter().enumerate() {
        let steps: Vec<Step> = steps
            .iter()
            .filter(|s| s.root() == r)
            .cloned()
            .map(|s| s.in_root(0))
            .collect();
        if steps.is_empty() {
            continue;
        }
        let Some(Some(stage)) = stages.get(r) else {
            // A root whose change needs no stage has nothing to journal
            // but its one removal: the commit point is the journal of the
            // others.
            finish(roots, &Written(written));
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "root '{}' has no stage directory for the journal of a change of several names",
                    root.root.name
                ),
            ));
        };
        let journal = Journal {
            stamp: stamp.to_string(),
            root: root.root.name.clone(),
            steps,
        };
        let path = stage.join(JOURNAL);
        let done = serde_json::to_vec(&journal)
            .map_err(io::Error::other)
            .and_then(|bytes| write_synced(&root.fd, &path, &bytes));
        if let Err(e) = done {
            // Not committed: the journals already written must not be
            // finished by a later sweep.
            finish(roots, &Written(written));
            return Err(e);
        }
        written.push((r, path));
    }
    Ok(Written(written))
}

/// Writes `bytes` to `path` (beneath `root`) through a temporary name,
/// synced, then renamed into place and its directory synced.
fn write_synced(root: &OwnedFd, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = parent_of(root, path).map_err(io::Error::from)?;
    let mut temp = name.to_os_string();
    temp.push(".tmp");
    let file = rustix::fs::openat(
        &dir,
        temp.as_os_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(file);
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| Ok(rustix::fs::renameat(&dir, temp.as_os_str(), &dir, name)?));
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temp.as_os_str(), AtFlags::empty());
    }
    written?;
    rustix::fs::fsync(&dir)?;
    Ok(())
}

/// Removes the journals once their steps are done and synced.
pub(super) fn finish(roots: &[PlanRoot], written: &Written) {
    for (r, path) in &written.0 {
        if let Ok((dir, name)) = parent_of(&roots[*r].fd, path) {
            let _ = rustix::fs::unlinkat(&dir, name, AtFlags::empty());
            let _ = rustix::fs::fsync(&dir);
        }
    }
}

impl Step {
    /// The same step, acting in root `root` (a journal holds one root's).
    fn in_root(mut self, root: usize) -> Step {
        match &mut self {
            Step::Link { root: r, .. }
            | Step::Copy { root: r, .. }
            | Step::Take { root: r, .. }
            | Step::Unlink { root: r, .. }
            | Step::Mkdir { root: r, .. }
            | Step::Put { root: r, .. }
            | Step::HardLink { root: r, .. }
            | Step::SetTimes { root: r, .. } => *r = root,
        }
        self
    }
}

/// What finishing a journal did, for the log and the audit.
#[derive(Debug)]
pub struct Recovered {
    /// The call's trash entry.
    pub stamp: String,
    pub published: Published,
}

/// Finishes the journal in the call directory `call` (of a server that is
/// gone, its lock held by the caller) of `root`'s staging area, if there
/// is one; what it kept and put is for the caller to record in the trash
/// index. `None` where the call left no journal (it never reached its
/// commit point: nothing of it is published).
pub fn recover_in(root: &Arc<Root>, call: &OwnedFd) -> io::Result<Option<Recovered>> {
    let file = match rustix::fs::openat(
        call,
        JOURNAL,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(file) => file,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut text = Vec::new();
    std::fs::File::from(file).read_to_end(&mut text)?;
    let journal: Journal = serde_json::from_slice(&text).map_err(io::Error::other)?;
    let roots = [PlanRoot {
        root: Arc::clone(root),
        fd: crate::sys::beneath::open_root(root)?,
    }];
    let mut out = Outcome::default();
    for step in &journal.steps {
        run_step(&roots, &journal.stamp, step, &mut out);
    }
    sync_dirs(&roots, &out.dirs);
    rustix::fs::unlinkat(call.as_fd(), JOURNAL, AtFlags::empty())?;
    tracing::warn!(
        root = %root.name,
        stamp = %journal.stamp,
        journal_root = %journal.root,
        "finished the publish of a call whose server stopped part-way"
    );
    Ok(Some(Recovered {
        stamp: journal.stamp,
        published: out.published,
    }))
}
