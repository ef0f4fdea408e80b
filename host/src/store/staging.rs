//! The staging area: where a call's changes wait for their publish.
//!
//! What a component writes while its call runs is staged, never put in
//! place (`runtime::fs`'s overlay): the files it makes live in a directory
//! of the call's own, out of sight, on the filesystem of their place so
//! that the publish's rename stays atomic:
//! `<root>/.mcp-trash/.staging/<server>/<call>/`. The same directory holds
//! the publish's journal and the host's copies on their way into the trash
//! (`store::publish`). Everything below `.mcp-trash` is denied to every
//! tool, and no component is given this directory: only the host reaches
//! it.
//!
//! A root may hold another filesystem (a mount point inside it, a btrfs
//! subvolume): a rename from the root's staging area to a place there
//! would cross filesystems (`EXDEV`). So a call that writes only there gets
//! its directory on that filesystem instead, in a staging area at its top
//! (`<root>/<top>/.mcp-trash/.staging/<server>/<call>/`, denied like every
//! `.mcp-trash`), and the place of that area is noted in the root's own
//! (`.mcp-trash/.staging/nested`) for the sweep to find it.
//!
//! `<server>` is one per running server process (and root, and filesystem),
//! made at its first call that writes there, and `flock`ed for as long as the
//! process lives: the kernel drops that lock when the process dies, however
//! it dies, so anyone can tell a live server's directory from one a killed
//! server left. A call's directory is emptied when the call ends, whatever
//! it left, and kept for a later call of the same server; a server's
//! directory is removed when it ends. What a killed server left is
//! removed at the next start and by `trash purge` ([`sweep`]): every
//! directory whose lock is free. A live server's directory is never
//! touched by another process (its calls may run as long as its own
//! timeout allows, which another process does not know).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode};
use rustix::io::Errno;

use crate::policy::Root;
use crate::store::TRASH_DIR;
use crate::sys::beneath::{self, make_dir, names_in, open_dir, remove_below};

/// The staging area's directory, in a root's trash directory.
pub const STAGING_DIR: &str = ".staging";

/// The file in a root's staging area that lists the other filesystems'
/// staging areas in the root (their tops, one a line, hex-encoded).
const NESTED: &str = "nested";

/// This server's staging directories, one per root it writes in.
pub struct Staging {
    /// This process's directory name: unique among the servers that ever
    /// share a root (process id and start time).
    server: String,
    /// By the root's real path and the top of the filesystem in it (empty:
    /// the root's). Not by name: two roots of one name (two configs, tests
    /// in one process) are two places, and an area lives in its root.
    areas: Mutex<HashMap<(PathBuf, PathBuf), Arc<Area>>>,
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
    /// Call directories emptied by the calls that had them, for the next
    /// calls: a directory made and removed per call made every new inode
    /// on the filesystem slow to find (ext4 skips recently freed ones).
    free: Mutex<Vec<String>>,
}

/// Tries at making a locked area before giving up: each try that fails
/// (another server's sweep took the fresh directory first) uses a new name.
const AREA_TRIES: u64 = 8;

impl Drop for Area {
    fn drop(&mut self) {
        let _ = remove_below(self.parent.as_fd(), OsStr::new(&self.name));
    }
}

/// One call's staging directory on one filesystem of a root. When
/// dropped, it is emptied of whatever the call left in it and kept for the
/// next call (removed where it cannot be emptied).
pub struct CallDir {
    guest: Place,
}

/// A directory in an area.
struct Place {
    area: Arc<Area>,
    name: String,
    path: PathBuf,
}

impl CallDir {
    /// The directory's host path.
    pub fn path(&self) -> &Path {
        &self.guest.path
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let name = OsStr::new(&self.name);
        // Emptied and kept for another call, not removed.
        if empty(self.area.dir.as_fd(), name).is_ok() {
            let mut free = self.area.free.lock().unwrap_or_else(|p| p.into_inner());
            free.push(std::mem::take(&mut self.name));
            return;
        }
        if let Err(e) = remove_below(self.area.dir.as_fd(), name) {
            tracing::warn!("cannot remove the staging directory of a call: {e}");
        }
    }
}

/// Removes everything in the directory `name` in `dir` (not followed
/// through a symlink), leaving it there, empty.
fn empty(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let sub = open_dir(dir, name)?;
    for (child, _) in names_in(&sub)? {
        remove_below(sub.as_fd(), &child)?;
    }
    Ok(())
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

    /// A new, empty directory for one call in `root`, on the filesystem
    /// whose top is `on` (relative to the root; the root's own when
    /// `None`). When the other filesystem's cannot be made (its top is not
    /// writable, say), it is on the root's filesystem, and says why in the
    /// log.
    pub fn call_dir(&self, root: &Root, on: Option<&Path>) -> io::Result<CallDir> {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        let guest = match on {
            Some(top) => match self.place(root, top, n.to_string()) {
                Ok(place) => place,
                Err(e) => {
                    tracing::warn!(
                        root = %root.name,
                        "cannot make a staging directory on the filesystem mounted at {}: {e}; \
                         the call stages on the root's",
                        top.display()
                    );
                    self.place(root, Path::new(""), n.to_string())?
                }
            },
            None => self.place(root, Path::new(""), n.to_string())?,
        };
        Ok(CallDir { guest })
    }

    /// An empty directory in this server's area at `top` of `root`: one
    /// an earlier call emptied, else the new directory `name`.
    fn place(&self, root: &Root, top: &Path, name: String) -> io::Result<Place> {
        let area = self.area(root, top, false)?;
        loop {
            let Some(free) = area.free.lock().unwrap_or_else(|p| p.into_inner()).pop() else {
                break;
            };
            // Still there (not removed by hand with the area): reused.
            let st = rustix::fs::statat(&area.dir, free.as_str(), AtFlags::SYMLINK_NOFOLLOW);
            if st.is_ok_and(|st| crate::sys::stat::file_type(&st) == FileType::Directory) {
                return Ok(Place {
                    path: area.path.join(&free),
                    area,
                    name: free,
                });
            }
        }
        let made = match rustix::fs::mkdirat(&area.dir, name.as_str(), Mode::from_raw_mode(0o700)) {
            // The area was removed under us (by hand): make it again.
            Err(Errno::NOENT) => {
                let area = self.area(root, top, true)?;
                rustix::fs::mkdirat(&area.dir, name.as_str(), Mode::from_raw_mode(0o700))
                    .map(|()| area)
            }
            made => made.map(|()| area),
        };
        let area = made?;
        Ok(Place {
            path: area.path.join(&name),
            area,
            name,
        })
    }

    /// This server's area at `top` of `root` (empty: the root's own), made
    /// (and locked) at first use.
    fn area(&self, root: &Root, top: &Path, afresh: bool) -> io::Result<Arc<Area>> {
        let key = (root.path.clone(), top.to_path_buf());
        let mut areas = self.areas.lock().unwrap_or_else(|p| p.into_inner());
        if !afresh && let Some(area) = areas.get(&key) {
            return Ok(Arc::clone(area));
        }
        let root_fd = beneath::open_root(root)?;
        if !top.as_os_str().is_empty() {
            note_nested(&root_fd, top)?;
        }
        let top_fd = beneath::beneath(&root_fd, top)?;
        let trash = make_dir(top_fd.as_fd(), OsStr::new(TRASH_DIR))?;
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
                path: root
                    .path
                    .join(top)
                    .join(TRASH_DIR)
                    .join(STAGING_DIR)
                    .join(&name),
                parent: staging,
                name,
                free: Mutex::default(),
            });
            areas.insert(key, Arc::clone(&area));
            return Ok(area);
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "another server kept taking the staging directory",
        ))
    }
}

/// What [`sweep`] removed (or, dry, would remove).
#[derive(Debug, Default)]
pub struct Swept {
    /// Servers that are gone and left unfinished calls (all that they
    /// left is removed, empty directories silently).
    pub servers: usize,
    /// The publishes those servers had committed and not finished, now
    /// finished ([`crate::store::publish::recover_in`]).
    pub recovered: Vec<crate::store::publish::journal::Recovered>,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        self.servers == 0 && self.recovered.is_empty()
    }
}

/// Notes in the root's staging area that the filesystem at `top` has one
/// (once: the line is looked for first; two servers noting it at once
/// write it twice, which is harmless).
fn note_nested(root_fd: &OwnedFd, top: &Path) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::ffi::OsStrExt as _;
    let trash = make_dir(root_fd.as_fd(), OsStr::new(TRASH_DIR))?;
    let staging = make_dir(trash.as_fd(), OsStr::new(STAGING_DIR))?;
    let line: String = top
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if nested_tops(&staging)?.iter().any(|t| t == top) {
        return Ok(());
    }
    let flags = rustix::fs::OFlags::WRONLY
        | rustix::fs::OFlags::CREATE
        | rustix::fs::OFlags::APPEND
        | rustix::fs::OFlags::NOFOLLOW
        | rustix::fs::OFlags::CLOEXEC;
    let file = rustix::fs::openat(&staging, NESTED, flags, Mode::from_raw_mode(0o600))?;
    std::fs::File::from(file).write_all(format!("{line}\n").as_bytes())
}

/// The tops of the other filesystems in a root that have a staging area,
/// as its staging area (`staging`) lists them.
fn nested_tops(staging: &OwnedFd) -> io::Result<Vec<PathBuf>> {
    use std::io::Read as _;
    use std::os::unix::ffi::OsStringExt as _;
    let flags =
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC;
    let file = match rustix::fs::openat(staging, NESTED, flags, Mode::empty()) {
        Ok(file) => file,
        Err(Errno::NOENT) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut text = String::new();
    std::fs::File::from(file).read_to_string(&mut text)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let bytes = (0..line.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(line.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            let top = PathBuf::from(std::ffi::OsString::from_vec(bytes));
            // Only plain relative paths below the root.
            top.components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
                .then_some(top)
                .filter(|t| !t.as_os_str().is_empty())
        })
        .collect())
}

/// The filesystem and mount a directory is on: device and mount ID.
#[cfg(target_os = "linux")]
fn mount_identity(fd: &OwnedFd) -> Option<(u32, u32, u64)> {
    let st = rustix::fs::statx(
        fd,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::BASIC_STATS | rustix::fs::StatxFlags::MNT_ID,
    )
    .ok()?;
    Some((st.stx_dev_major, st.stx_dev_minor, st.stx_mnt_id))
}

/// Off Linux (no mount IDs), the device alone.
#[cfg(not(target_os = "linux"))]
fn mount_identity(fd: &OwnedFd) -> Option<(u64, u64, u64)> {
    let st = rustix::fs::fstat(fd).ok()?;
    Some((crate::sys::stat::inode(&st).0, 0, 0))
}

/// The top of the filesystem that holds the directory `dir` (relative to
/// the root) or, where it is missing, its nearest existing parent, when
/// that is another filesystem than the root's (a mount point inside it, a
/// btrfs subvolume: a rename from the root's filesystem to there would
/// cross filesystems). Told by device and mount: a bind mount of the
/// root's own filesystem is another mount, and renames across it fail
/// too. `None` where it is the root's, or where it cannot be told.
pub fn filesystem_top(root: &Root, dir: &Path) -> Option<PathBuf> {
    let root_fd = beneath::open_root(root).ok()?;
    let identity = mount_identity;
    let root_id = identity(&root_fd)?;
    let (mut at_id, mut top) = (root_id, None);
    let (mut cur, mut rel) = (root_fd, PathBuf::new());
    for part in dir.components() {
        let std::path::Component::Normal(name) = part else {
            return None;
        };
        // `O_PATH`: a directory the server may not list still tells.
        let flags = crate::sys::openat2::O_PATH
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC;
        let Ok(next) = rustix::fs::openat(&cur, name, flags, Mode::empty()) else {
            break;
        };
        rel.push(name);
        let id = identity(&next)?;
        if id != at_id {
            top = (id != root_id).then(|| rel.clone());
            at_id = id;
        }
        cur = next;
    }
    top
}

/// Removes from `root`'s staging areas (its own, and those on the other
/// filesystems in it) what servers that are gone left: every directory
/// whose lock is free (its server died, however). A live server's directory
/// is locked by it and left alone, so another server's work in progress is
/// never taken. A publish a server that is gone had committed (its journal
/// is in its directory on the root's own filesystem) is finished first,
/// before anything of it is removed (the entries it moves may wait in the
/// other filesystems' areas). One directory that cannot be removed stops no
/// other (it is logged). Nothing is removed with `dry_run`.
pub fn sweep(root: &Root, dry_run: bool) -> io::Result<Swept> {
    let mut swept = Swept::default();
    let root_fd = beneath::open_root(root)?;
    let area = Path::new(TRASH_DIR).join(STAGING_DIR);
    let staging = match beneath::beneath(&root_fd, &area) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(e),
    };
    if !dry_run {
        recover_area(root, &staging, &mut swept);
    }
    for top in nested_tops(&staging)? {
        match beneath::beneath(&root_fd, &top.join(&area)) {
            Ok(nested) => sweep_area(root, &nested, dry_run, &mut swept)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                root = %root.name,
                "cannot clear the staging area at {}: {e}",
                top.display()
            ),
        }
    }
    sweep_area(root, &staging, dry_run, &mut swept)?;
    Ok(swept)
}

/// Finishes the journals the servers that are gone left in the staging area
/// `staging` on `root`'s own filesystem.
fn recover_area(root: &Root, staging: &OwnedFd, swept: &mut Swept) {
    let Ok(servers) = names_in(staging) else {
        return;
    };
    let root = Arc::new(root.clone());
    for (name, ty) in servers {
        if ty != FileType::Directory {
            continue;
        }
        let Ok(server) = open_dir(staging.as_fd(), &name) else {
            continue;
        };
        // Held while it finishes: no one else finishes it twice.
        if rustix::fs::flock(&server, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue;
        }
        let Ok(calls) = names_in(&server) else {
            continue;
        };
        for (call, ty) in calls {
            if ty != FileType::Directory {
                continue;
            }
            let Ok(dir) = open_dir(server.as_fd(), &call) else {
                continue;
            };
            match crate::store::publish::recover_in(&root, &dir) {
                Ok(Some(recovered)) => swept.recovered.push(recovered),
                Ok(None) => {}
                Err(e) => tracing::error!(
                    root = %root.name,
                    "cannot finish a publish a server that stopped left in {TRASH_DIR}/{STAGING_DIR}: {e}"
                ),
            }
        }
        let _ = rustix::fs::flock(&server, FlockOperation::Unlock);
    }
}

/// Whether a stopped server's directory holds anything but the empty call
/// directories it kept for reuse.
fn unfinished(server: &OwnedFd) -> io::Result<bool> {
    for (call, ty) in names_in(server)? {
        if ty != FileType::Directory {
            return Ok(true);
        }
        match open_dir(server.as_fd(), &call) {
            Ok(dir) if names_in(&dir)?.is_empty() => {}
            Ok(_) => return Ok(true),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// [`sweep`] in one staging area.
fn sweep_area(root: &Root, staging: &OwnedFd, dry_run: bool, swept: &mut Swept) -> io::Result<()> {
    for (name, ty) in names_in(staging)? {
        if ty != FileType::Directory {
            continue;
        }
        let gone = open_dir(staging.as_fd(), &name)
            .map_err(io::Error::from)
            .and_then(|server| {
                match rustix::fs::flock(&server, FlockOperation::NonBlockingLockExclusive) {
                    // Gone: its lock was free. Held while removing, so that
                    // no one else counts it twice. Counted only if it left
                    // something unfinished: the empty call directories it
                    // kept for its next calls are not.
                    Ok(()) => {
                        let left = unfinished(&server)?;
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
    Ok(())
}

#[cfg(test)]
mod tests;
