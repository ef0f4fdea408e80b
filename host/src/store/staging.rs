//! The staging area: where tools write new content before it is published.
//!
//! A file is replaced by writing the new content to a temporary file and
//! renaming it over the old one. Written beside its target, that temporary
//! file is visible while it grows (`list_directory` shows it, `git status`
//! lists it), and a server killed mid-write leaves it there for good. So a
//! call that writes gets a directory of its own, out of sight, on the
//! root's filesystem so that the rename stays atomic:
//! `<root>/.mcp-trash/.staging/<server>/<call>/`. Everything below
//! `.mcp-trash` is denied to every tool; the guest sees this directory as a
//! separate preopen (`mount.staging`), and the policing filesystem lets
//! what it made there leave only by a rename (or link) into its own root.
//!
//! `<server>` is one per running server process (and root), made at its
//! first call that writes in the root, and `flock`ed for as long as the
//! process lives: the kernel drops that lock when the process dies, however
//! it dies, so anyone can tell a live server's directory from one a killed
//! server left. A call's directory is removed when the call ends, whatever
//! it left, and a server's when it ends. What a killed server left is
//! removed at the next start and by `trash purge` ([`sweep`]): every
//! directory whose lock is free. A live server's directory is never
//! touched by another process (its calls may run as long as its own
//! timeout allows, which another process does not know).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustix::fs::{FileType, FlockOperation, Mode};
use rustix::io::Errno;

use crate::policy::Root;
use crate::store::TRASH_DIR;
use crate::sys::beneath::{self, make_dir, names_in, open_dir, remove_below};

/// The staging area's directory, in a root's trash directory.
pub const STAGING_DIR: &str = ".staging";

/// This server's staging directories, one per root it writes in.
pub struct Staging {
    /// This process's directory name: unique among the servers that ever
    /// share a root (process id and start time).
    server: String,
    areas: Mutex<HashMap<String, Arc<Area>>>,
    next_call: AtomicU64,
    /// Numbers the areas this server makes: a name is never made twice, so
    /// an area dropped (after it was removed under us) never removes its
    /// successor.
    next_area: AtomicU64,
}

/// `<root>/.mcp-trash/.staging/<server>`, open and locked; removed when
/// the server ends (if it ends; if it is killed, the next start or `trash
/// purge` removes it).
struct Area {
    dir: OwnedFd,
    /// `.staging`, and this area's name in it (never used for another).
    parent: OwnedFd,
    name: String,
    path: PathBuf,
}

/// Tries at making a locked area before giving up: each try that fails
/// (another server's sweep took the fresh directory first) uses a new name.
const AREA_TRIES: u64 = 8;

impl Drop for Area {
    fn drop(&mut self) {
        let _ = remove_below(self.parent.as_fd(), OsStr::new(&self.name));
    }
}

/// One call's staging directory in one root; removed, with whatever the
/// call left in it, when dropped.
pub struct CallDir {
    area: Arc<Area>,
    name: String,
    path: PathBuf,
}

impl CallDir {
    /// Its host path, to preopen for the guest.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CallDir {
    fn drop(&mut self) {
        if let Err(e) = remove_below(self.area.dir.as_fd(), OsStr::new(&self.name)) {
            tracing::warn!("cannot remove the staging directory of a call: {e}");
        }
    }
}

impl Default for Staging {
    fn default() -> Staging {
        Staging::new()
    }
}

impl Staging {
    pub fn new() -> Staging {
        let started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Staging {
            server: format!("{}-{started:x}", std::process::id()),
            areas: Mutex::default(),
            next_call: AtomicU64::new(1),
            next_area: AtomicU64::new(1),
        }
    }

    /// A new, empty directory for one call in `root`.
    pub fn call_dir(&self, root: &Root) -> io::Result<CallDir> {
        let name = self.next_call.fetch_add(1, Ordering::Relaxed).to_string();
        let area = self.area(root, false)?;
        let made = match rustix::fs::mkdirat(&area.dir, name.as_str(), Mode::from_raw_mode(0o700)) {
            // The area was removed under us (by hand): make it again.
            Err(Errno::NOENT) => {
                let area = self.area(root, true)?;
                rustix::fs::mkdirat(&area.dir, name.as_str(), Mode::from_raw_mode(0o700))
                    .map(|()| area)
            }
            made => made.map(|()| area),
        };
        let area = made?;
        Ok(CallDir {
            path: area.path.join(&name),
            area,
            name,
        })
    }

    /// This server's area in `root`, made (and locked) at first use.
    fn area(&self, root: &Root, afresh: bool) -> io::Result<Arc<Area>> {
        let mut areas = self.areas.lock().unwrap_or_else(|p| p.into_inner());
        if !afresh && let Some(area) = areas.get(&root.name) {
            return Ok(Arc::clone(area));
        }
        let root_fd = beneath::open_root(root)?;
        let trash = make_dir(root_fd.as_fd(), OsStr::new(TRASH_DIR))?;
        let staging = make_dir(trash.as_fd(), OsStr::new(STAGING_DIR))?;
        for _ in 0..AREA_TRIES {
            let n = self.next_area.fetch_add(1, Ordering::Relaxed);
            let name = format!("{}-{n}", self.server);
            // Made, then locked: between the two it is a free directory that
            // another server's sweep may take (then this name is dropped).
            let dir = match make_dir(staging.as_fd(), OsStr::new(&name)) {
                Ok(dir) => dir,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(Errno::WOULDBLOCK) => continue,
                Err(e) => return Err(e.into()),
            }
            let area = Arc::new(Area {
                dir,
                path: root.path.join(TRASH_DIR).join(STAGING_DIR).join(&name),
                parent: staging,
                name,
            });
            areas.insert(root.name.clone(), Arc::clone(&area));
            return Ok(area);
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "another server kept taking the staging directory",
        ))
    }
}

/// What [`sweep`] removed (or, dry, would remove).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Servers that are gone and left unfinished calls (all that they
    /// left is removed, empty directories silently).
    pub servers: usize,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        *self == Swept::default()
    }
}

/// Removes from `root`'s staging area what servers that are gone left:
/// every directory whose lock is free (its server died, however). A live
/// server's directory is locked by it and left alone, so another server's
/// work in progress is never taken. One directory that cannot be removed
/// stops no other (it is logged). Nothing is removed with `dry_run`.
pub fn sweep(root: &Root, dry_run: bool) -> io::Result<Swept> {
    let mut swept = Swept::default();
    let root_fd = beneath::open_root(root)?;
    let staging = match beneath::beneath(&root_fd, &Path::new(TRASH_DIR).join(STAGING_DIR)) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(e),
    };
    for (name, ty) in names_in(&staging)? {
        if ty != FileType::Directory {
            continue;
        }
        let gone = open_dir(staging.as_fd(), &name)
            .map_err(io::Error::from)
            .and_then(|server| {
                match rustix::fs::flock(&server, FlockOperation::NonBlockingLockExclusive) {
                    // Gone: its lock was free. Held while removing, so that
                    // no one else counts it twice. Counted only if it left
                    // calls.
                    Ok(()) => {
                        let left = !names_in(&server)?.is_empty();
                        if !dry_run {
                            remove_below(staging.as_fd(), &name)?;
                        }
                        Ok(left)
                    }
                    Err(Errno::WOULDBLOCK) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            });
        match gone {
            Ok(left) => swept.servers += usize::from(left),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                root = %root.name,
                "cannot clear {TRASH_DIR}/{STAGING_DIR}/{}: {e}",
                name.to_string_lossy().escape_debug()
            ),
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(dir: &Path) -> Root {
        Root::workspace_for_tests("ws", dir)
    }

    #[test]
    fn a_call_dir_is_made_and_removed_with_its_contents() {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = root(tmp.path());
        let staging = Staging::new();
        let dir = staging.call_dir(&root).unwrap();
        assert!(
            dir.path()
                .starts_with(tmp.path().join(".mcp-trash/.staging"))
        );
        std::fs::create_dir(dir.path().join("tree")).unwrap();
        std::fs::write(dir.path().join("tree/partial"), "half").unwrap();
        let path = dir.path().to_path_buf();
        let other = staging.call_dir(&root).unwrap();
        assert_ne!(other.path(), path);
        drop(dir);
        assert!(!path.exists());
        assert!(other.path().exists());
        // Removed by hand while the server runs: made again.
        drop(other);
        std::fs::remove_dir_all(tmp.path().join(".mcp-trash/.staging")).unwrap();
        assert!(staging.call_dir(&root).unwrap().path().exists());
    }

    /// A server's directory removed under it (by hand, or a sweep that
    /// took it): the next call makes a new one, under a new name, and the
    /// old one going leaves the new one alone.
    #[test]
    fn an_area_removed_under_the_server_is_made_again() {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = root(tmp.path());
        let staging = Staging::new();
        let first = staging.call_dir(&root).unwrap();
        let area = first.path().parent().unwrap().to_path_buf();
        drop(first);
        std::fs::remove_dir_all(&area).unwrap();
        for _ in 0..3 {
            let dir = staging.call_dir(&root).unwrap();
            assert!(dir.path().is_dir(), "{:?}", dir.path());
            assert_ne!(dir.path().parent().unwrap(), area);
            std::fs::write(dir.path().join("f"), "x").unwrap();
        }
    }

    /// A live server's area is left alone, even its call directories; a
    /// gone server's is removed whole.
    #[test]
    fn the_sweep_takes_only_what_gone_servers_left() {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = root(tmp.path());
        let live = Staging::new();
        let running = live.call_dir(&root).unwrap();
        std::fs::write(running.path().join("temp"), "x").unwrap();
        // A server that was killed: its directory, unlocked.
        let dead = tmp.path().join(".mcp-trash/.staging/1-dead");
        std::fs::create_dir_all(dead.join("7")).unwrap();
        std::fs::write(dead.join("7/partial"), "half").unwrap();
        // One killed before it had a call: removed, not counted.
        std::fs::create_dir_all(tmp.path().join(".mcp-trash/.staging/2-idle")).unwrap();
        let dry = sweep(&root, true).unwrap();
        assert_eq!(dry, Swept { servers: 1 });
        assert!(dead.exists());
        assert_eq!(sweep(&root, false).unwrap(), dry);
        assert!(!dead.exists());
        assert!(!tmp.path().join(".mcp-trash/.staging/2-idle").exists());
        assert!(running.path().join("temp").exists());
        assert!(sweep(&root, false).unwrap().is_empty());
        assert!(running.path().join("temp").exists());
        // No staging area at all: nothing to do.
        let empty = tempfile::TempDir::new().unwrap();
        assert!(sweep(&self::root(empty.path()), false).unwrap().is_empty());
    }
}
