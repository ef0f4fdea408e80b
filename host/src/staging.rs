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
//! `<server>` is one per running server process, made at its first call
//! that writes in the root, and `flock`ed for as long as the process
//! lives: the kernel drops that lock when the process dies, however it
//! dies, so anyone can tell a live server's directory from one a killed
//! server left. A call's directory is removed when the call ends,
//! whatever it left. What a killed server left is removed at the next
//! start and by `trash purge` ([`sweep`]): directories whose server is
//! gone, and call directories older than the in-flight window (another
//! server on the same root may be writing in its own).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode};
use rustix::io::Errno;

use crate::beneath::{self, make_dir, names_in, open_dir, remove_below};
use crate::policy::Root;
use crate::runtime::fs::TRASH_DIR;

/// The staging area's directory, in a root's trash directory.
pub const STAGING_DIR: &str = ".staging";

/// This server's staging directories, one per root it writes in.
pub struct Staging {
    /// This process's directory name: unique among the servers that ever
    /// share a root (process id and start time).
    server: String,
    areas: Mutex<HashMap<String, Arc<Area>>>,
    next_call: AtomicU64,
}

/// `<root>/.mcp-trash/.staging/<server>`, open and locked; removed when
/// the server ends (if it ends; if it is killed, the next start or `trash
/// purge` removes it).
struct Area {
    dir: OwnedFd,
    /// `.staging`, and this server's name in it.
    parent: OwnedFd,
    name: String,
    path: PathBuf,
}

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
        let dir = make_dir(staging.as_fd(), OsStr::new(&self.server))?;
        rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive)?;
        let area = Arc::new(Area {
            dir,
            parent: staging,
            name: self.server.clone(),
            path: root
                .path
                .join(TRASH_DIR)
                .join(STAGING_DIR)
                .join(&self.server),
        });
        areas.insert(root.name.clone(), Arc::clone(&area));
        Ok(area)
    }
}

/// What [`sweep`] removed (or, dry, would remove).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Servers that are gone and left unfinished calls (all that they
    /// left is removed, empty directories silently).
    pub servers: usize,
    /// Call directories of live servers, older than the in-flight window.
    pub calls: usize,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        *self == Swept::default()
    }
}

/// Removes from `root`'s staging area what no running call can still be
/// using: the directory of every server that is gone (its lock is free),
/// and the call directories of live servers last changed more than
/// `in_flight` before `now`. A server's own directory is locked by itself,
/// so it is never taken for a dead one. Nothing is removed with `dry_run`.
pub fn sweep(
    root: &Root,
    now: SystemTime,
    in_flight: Duration,
    dry_run: bool,
) -> io::Result<Swept> {
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
        let server = match open_dir(staging.as_fd(), &name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        match rustix::fs::flock(&server, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                // Gone: its lock was free. Held while removing, so that no
                // one else counts it twice. Counted only if it left calls.
                let left = !names_in(&server)?.is_empty();
                if !dry_run {
                    remove_below(staging.as_fd(), &name)?;
                }
                swept.servers += usize::from(left);
            }
            Err(Errno::WOULDBLOCK) => {
                for (call, _) in names_in(&server)? {
                    let Ok(st) = rustix::fs::statat(&server, &call, AtFlags::SYMLINK_NOFOLLOW)
                    else {
                        continue;
                    };
                    let changed = st.st_mtime.max(st.st_ctime);
                    let changed = SystemTime::UNIX_EPOCH
                        + Duration::from_secs(u64::try_from(changed).unwrap_or(0));
                    let age = now.duration_since(changed).unwrap_or_default();
                    if age > in_flight {
                        if !dry_run {
                            remove_below(server.as_fd(), &call)?;
                        }
                        swept.calls += 1;
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{DenyList, Role};

    fn root(dir: &Path) -> Root {
        Root {
            name: "ws".into(),
            path: dir.to_path_buf(),
            role: Role::Workspace,
            perms: Role::Workspace.ceiling(),
            deny: DenyList::new([]).unwrap(),
            extra_deny: vec![],
            max_read_bytes: 1 << 20,
        }
    }

    const WINDOW: Duration = Duration::from_secs(61);

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

    /// A live server's area is left alone (but for call directories older
    /// than the window); a gone server's is removed whole.
    #[test]
    fn the_sweep_takes_what_gone_servers_left() {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = root(tmp.path());
        let live = Staging::new();
        let running = live.call_dir(&root).unwrap();
        std::fs::write(running.path().join("temp"), "x").unwrap();
        // A server that was killed: its directory, unlocked.
        let dead = tmp.path().join(".mcp-trash/.staging/1-dead");
        std::fs::create_dir_all(dead.join("7")).unwrap();
        std::fs::write(dead.join("7/partial"), "half").unwrap();
        let dry = sweep(&root, SystemTime::now(), WINDOW, true).unwrap();
        assert_eq!(
            dry,
            Swept {
                servers: 1,
                calls: 0
            }
        );
        assert!(dead.exists());
        assert_eq!(sweep(&root, SystemTime::now(), WINDOW, false).unwrap(), dry);
        assert!(!dead.exists());
        assert!(running.path().join("temp").exists());
        // With a zero window the live server's call directory is old.
        std::thread::sleep(Duration::from_millis(1100));
        let swept = sweep(&root, SystemTime::now(), Duration::ZERO, false).unwrap();
        assert_eq!(
            swept,
            Swept {
                servers: 0,
                calls: 1
            }
        );
        assert!(!running.path().exists());
        // No staging area at all: nothing to do.
        let empty = tempfile::TempDir::new().unwrap();
        assert!(
            sweep(&self::root(empty.path()), SystemTime::now(), WINDOW, false)
                .unwrap()
                .is_empty()
        );
    }
}
