//! Path locks: calls that change overlapping places run one after the other.
//!
//! Agents send calls in parallel. Two edits of one file that both read it,
//! change it and write it back would each lose the other's change; a
//! directory deleted while a file is written below it would take the file
//! half-way. So every call that changes something first locks what it
//! changes, keyed by the resolved location: the root and the real
//! root-relative path (symlinks resolved, so `link/a.txt` and `dir/a.txt`
//! are one key). Two keys overlap when they are the same path or one lies
//! below the other. Calls on disjoint paths still run side by side, and
//! reads never lock: a file is only ever replaced whole, by a rename.
//!
//! Two layers, taken in this order and given back together:
//! - **in the process**: a table of the keys held, checked and filled under
//!   one mutex, all of a call's keys at once (so no call holds some while
//!   it waits for others); a waiter is woken whenever a call gives its keys
//!   back;
//! - **across processes** (two clients that each start their own server on
//!   one folder): open-file-description byte-range locks (`F_OFD_SETLK`) in
//!   `<root>/.mcp-trash/.locks`. A path is one byte of that file (the first
//!   62 bits of its SHA-256); a call takes a shared lock on the byte of
//!   every directory above each of its paths and an exclusive one on the
//!   path's own byte, so a directory's exclusive lock meets the shared
//!   locks of every call below it. The bytes are taken in one global order
//!   (file, then offset), which rules out a deadlock between processes;
//!   the wait is polled, so it stays bounded and cancellable. A hash
//!   collision only makes two calls wait for each other. The kernel drops
//!   a killed process's locks.
//!
//! The wait counts against the call's deadline and ends when it is
//! cancelled. A root whose lock file cannot be used (a read-only
//! filesystem, a filesystem without OFD locks) keeps the lock within this
//! process and says so once in the log. The lock file is made only in a
//! root that grants write (a root that may only delete gets no file from
//! the server); in one that does not, it is used if a server that may
//! write there made it.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{FileType, Mode, OFlags};
use sha2::{Digest as _, Sha256};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::policy::{Permission, QUOTED_NOTE, Root, is_quoted, shown};
use crate::store::TRASH_DIR;
use crate::sys::beneath;

/// The lock file of a root, in its trash directory (denied to every tool).
pub const LOCK_FILE: &str = ".locks";

/// Longest pause between two tries of a lock another process holds.
const MAX_POLL: Duration = Duration::from_millis(16);

/// A place a call changes: a root and a real root-relative path (empty for
/// the root itself, which overlaps everything in it).
#[derive(Clone, Debug)]
pub struct Key {
    pub root: Arc<Root>,
    pub rel: PathBuf,
}

impl Key {
    fn overlaps(&self, other: &Key) -> bool {
        Arc::ptr_eq(&self.root, &other.root)
            && (self.rel.starts_with(&other.rel) || other.rel.starts_with(&self.rel))
    }
}

/// Why a call got no lock.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error(
        "'{path}' in root '{root}' is being changed by another call (on it, or on a path above \
         or below it), which held it for {} ms (tool_timeout_ms); try again{}",
        waited.as_millis(),
        if is_quoted(path) { format!("\n{QUOTED_NOTE}") } else { String::new() }
    )]
    Busy {
        root: String,
        /// The real path, as text shows a name ([`crate::policy::shown`]).
        path: String,
        waited: Duration,
    },
    #[error("the call was cancelled")]
    Cancelled,
    /// The lock file could not be opened for want of a descriptor: the
    /// call stops rather than go on without the lock.
    #[error(
        "{}, so the call could not lock what it changes; nothing was changed; try again in a moment",
        crate::sys::descriptors::NO_DESCRIPTORS
    )]
    NoDescriptors,
}

struct Held {
    call: u64,
    key: Key,
}

/// The path locks of one server.
#[derive(Default)]
pub struct PathLocks {
    held: Mutex<Vec<Held>>,
    released: Notify,
    next_call: AtomicU64,
    /// Roots already reported as locked within this process only.
    unshared: Mutex<HashSet<String>>,
}

/// A call's locks; dropping it gives them back.
pub struct Locked {
    locks: Arc<PathLocks>,
    call: u64,
    /// One open file description per root: closing it drops its byte locks.
    files: Vec<OwnedFd>,
}

impl Drop for Locked {
    fn drop(&mut self) {
        // The other processes first, then this one's waiters.
        self.files.clear();
        let mut held = self.locks.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|h| h.call != self.call);
        drop(held);
        self.locks.released.notify_waiters();
    }
}

impl PathLocks {
    pub fn new() -> Arc<PathLocks> {
        Arc::default()
    }

    /// Locks `keys` for one call, waiting until `deadline` at most (then
    /// [`LockError::Busy`]) and no longer than `cancel` allows: first among
    /// the calls of this process, then in each root's lock file, against
    /// other processes.
    pub async fn lock(
        self: &Arc<Self>,
        keys: Vec<Key>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Locked, LockError> {
        let wait = Wait {
            started: Instant::now(),
            deadline,
            cancel,
        };
        let call = self.next_call.fetch_add(1, Ordering::Relaxed);
        let mut locked = Locked {
            locks: Arc::clone(self),
            call,
            files: Vec::new(),
        };
        if keys.is_empty() {
            return Ok(locked);
        }
        self.lock_in_process(call, &keys, &wait).await?;
        // Held in this process (dropping `locked` gives the keys back);
        // now the other processes' locks.
        let wanted = self.open_lock_files(&keys, &mut locked)?;
        self.lock_bytes(&keys, wanted, &locked, &wait).await?;
        Ok(locked)
    }

    /// Waits until no other call of this process holds a key overlapping
    /// one of `keys`, then holds them all for `call`.
    async fn lock_in_process(
        &self,
        call: u64,
        keys: &[Key],
        wait: &Wait<'_>,
    ) -> Result<(), LockError> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let blocker = {
                let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
                let blocker = keys
                    .iter()
                    .find(|k| held.iter().any(|h| h.key.overlaps(k)))
                    .cloned();
                if blocker.is_none() {
                    held.extend(keys.iter().map(|key| Held {
                        call,
                        key: key.clone(),
                    }));
                }
                blocker
            };
            let Some(blocker) = blocker else {
                return Ok(());
            };
            tokio::select! {
                biased;
                () = wait.cancel.cancelled() => return Err(LockError::Cancelled),
                () = tokio::time::sleep_until(wait.deadline) => return Err(wait.busy(&blocker)),
                () = &mut released => {}
            }
        }
    }

    /// Opens the lock file of each root of `keys` into `locked` (two
    /// roots on one folder, a bind mount, share one description, or the
    /// call would wait for itself) and returns the byte locks to take in
    /// them, in the order every process takes them.
    fn open_lock_files<'k>(
        &self,
        keys: &'k [Key],
        locked: &mut Locked,
    ) -> Result<Vec<ByteLock<'k>>, LockError> {
        let mut wanted = Vec::new();
        let mut roots: Vec<&Arc<Root>> = Vec::new();
        for key in keys {
            if !roots.iter().any(|r| Arc::ptr_eq(r, &key.root)) {
                roots.push(&key.root);
            }
        }
        let mut opened: Vec<(u64, u64)> = Vec::new();
        for root in roots {
            let Some((file, identity)) = self.lock_file(root)? else {
                continue;
            };
            let index = match opened.iter().position(|o| *o == identity) {
                Some(index) => index,
                None => {
                    opened.push(identity);
                    locked.files.push(file);
                    locked.files.len() - 1
                }
            };
            let paths = keys.iter().filter(|k| Arc::ptr_eq(&k.root, root));
            for (offset, exclusive) in bytes_of(paths.map(|k| (&k.root, k.rel.as_path()))) {
                wanted.push(ByteLock {
                    identity,
                    offset,
                    exclusive,
                    file: index,
                    root,
                });
            }
        }
        wanted.sort_by_key(|w| (w.identity, w.offset));
        Ok(wanted)
    }

    /// Takes the byte locks `wanted` in the lock files of `locked`, in
    /// order, each polled with a doubling pause until the deadline. A lock
    /// file that cannot be locked is said once and left out.
    async fn lock_bytes(
        &self,
        keys: &[Key],
        wanted: Vec<ByteLock<'_>>,
        locked: &Locked,
        wait: &Wait<'_>,
    ) -> Result<(), LockError> {
        for want in wanted {
            let mut pause = Duration::from_millis(1);
            loop {
                match try_lock(locked.files[want.file].as_fd(), want.offset, want.exclusive) {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => {
                        self.unshared(want.root, &e);
                        break;
                    }
                }
                let now = Instant::now();
                if now >= wait.deadline {
                    let key = keys.iter().find(|k| Arc::ptr_eq(&k.root, want.root));
                    return Err(key.map_or(LockError::Cancelled, |k| wait.busy(k)));
                }
                tokio::select! {
                    biased;
                    () = wait.cancel.cancelled() => return Err(LockError::Cancelled),
                    () = tokio::time::sleep(pause.min(wait.deadline - now)) => {}
                }
                pause = (pause * 2).min(MAX_POLL);
            }
        }
        Ok(())
    }

    /// A new open file description of `root`'s lock file (made if missing)
    /// and the file's identity, or `None` (said once) if it cannot be used.
    /// No descriptor free is an error, not an unusable file: the call must
    /// not go on without the lock another server would honour.
    fn lock_file(&self, root: &Root) -> Result<Option<LockFile>, LockError> {
        match open_lock_file(root) {
            Ok(found) => Ok(Some(found)),
            Err(e) => match unusable(&e, may_make(root))? {
                Unusable::Unmade => Ok(None),
                Unusable::Unshared => {
                    self.unshared(root, &e);
                    Ok(None)
                }
            },
        }
    }

    fn unshared(&self, root: &Root, e: &io::Error) {
        let mut told = self.unshared.lock().unwrap_or_else(|p| p.into_inner());
        if told.insert(root.name.clone()) {
            tracing::warn!(
                root = %root.name,
                "cannot use {TRASH_DIR}/{LOCK_FILE} ({e}): calls that change this root are kept \
                 apart within this server only, not from another server on the same folder"
            );
        }
    }
}

/// How long a call waits for its locks: until `deadline`, or until
/// `cancel`. `started` is when it began, for the wait a refusal tells.
struct Wait<'a> {
    started: Instant,
    deadline: Instant,
    cancel: &'a CancellationToken,
}

impl Wait<'_> {
    /// The refusal of a call that waited for `key` until its deadline.
    fn busy(&self, key: &Key) -> LockError {
        LockError::Busy {
            root: key.root.name.clone(),
            path: display(&key.rel),
            waited: self.started.elapsed(),
        }
    }
}

/// One byte lock a call takes in a root's lock file.
struct ByteLock<'k> {
    /// The lock file's identity (device, inode): the order of the files.
    identity: (u64, u64),
    offset: i64,
    exclusive: bool,
    /// Its open file description, an index in [`Locked::files`].
    file: usize,
    root: &'k Arc<Root>,
}

/// Why a root's lock file cannot be used, when the call may go on without
/// it (locked within this process only).
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    /// Not made here by design (see the module): nothing to share.
    Unmade,
    /// It cannot be used (said once in the log).
    Unshared,
}

/// What an error opening the lock file means for the call: no descriptor
/// free stops it (the next attempt may find one, and going on would skip
/// the lock another server honours); anything else leaves the lock file
/// out.
fn unusable(e: &io::Error, may_make: bool) -> Result<Unusable, LockError> {
    if crate::sys::descriptors::out_of_descriptors(e) {
        Err(LockError::NoDescriptors)
    } else if e.kind() == io::ErrorKind::NotFound && !may_make {
        Ok(Unusable::Unmade)
    } else {
        Ok(Unusable::Unshared)
    }
}

/// Longest wait for a [`hold`]: other processes hold such a lock for a
/// few file operations only; one that stays (a stopped process) must not
/// stop this one.
const HOLD_WAIT: Duration = Duration::from_secs(2);

/// Holds an exclusive lock on `label`'s byte of `root`'s lock file until
/// the descriptor is dropped, waiting for it at most [`HOLD_WAIT`]. Labels
/// have their own half of the file's offsets, so no path shares their
/// byte. `None` if the lock file cannot be used or the wait ran out: the
/// caller goes on unlocked (and says so).
pub fn hold(root: &Root, label: &str) -> Option<OwnedFd> {
    let (file, _) = open_lock_file(root).ok()?;
    hold_file(file, root, label)
}

/// [`hold`], with the lock file found in `trash`, the root's trash
/// directory the caller holds open (no lookup of the root by path again).
pub fn hold_in(trash: BorrowedFd<'_>, root: &Root, label: &str) -> Option<OwnedFd> {
    let (file, _) = open_lock_file_in(trash, may_make(root)).ok()?;
    hold_file(file, root, label)
}

fn hold_file(file: OwnedFd, root: &Root, label: &str) -> Option<OwnedFd> {
    let offset = LABELS | byte_of(OsStr::new(label).as_bytes());
    let until = std::time::Instant::now() + HOLD_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match try_lock(file.as_fd(), offset, true) {
            Ok(true) => return Some(file),
            Ok(false) if std::time::Instant::now() < until => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_POLL);
            }
            Ok(false) => {
                tracing::warn!(root = %root.name, label, "gave up waiting for a lock another server holds");
                return None;
            }
            Err(_) => return None,
        }
    }
}

/// The top bit of the 63 an offset has: set for labels ([`hold`]), clear
/// for paths ([`byte_of`] gives 62 bits).
const LABELS: i64 = 1 << 62;

/// Whether the server makes files of its own in `root`.
fn may_make(root: &Root) -> bool {
    root.perms.contains(Permission::Write)
}

/// A root's lock file, opened, and its identity (device, inode).
type LockFile = (OwnedFd, (u64, u64));

fn open_lock_file(root: &Root) -> io::Result<LockFile> {
    let root_fd = beneath::open_root(root)?;
    let trash = if may_make(root) {
        beneath::make_dir(root_fd.as_fd(), OsStr::new(TRASH_DIR))?
    } else {
        beneath::beneath(&root_fd, Path::new(TRASH_DIR))?
    };
    open_lock_file_in(trash.as_fd(), may_make(root))
}

/// The lock file in the trash directory `trash`, made if missing when
/// `make`.
fn open_lock_file_in(trash: BorrowedFd<'_>, make: bool) -> io::Result<LockFile> {
    let mut flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if make {
        flags |= OFlags::CREATE;
    }
    let file = rustix::fs::openat(trash, LOCK_FILE, flags, Mode::from_raw_mode(0o600))?;
    let st = rustix::fs::fstat(&file)?;
    if crate::sys::stat::file_type(&st) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok((file, crate::sys::stat::inode(&st)))
}

/// The bytes a call locks for `paths`: each path's own, exclusive, and
/// each directory above it, shared (exclusive wins where they meet).
fn bytes_of<'a>(paths: impl Iterator<Item = (&'a Arc<Root>, &'a Path)>) -> Vec<(i64, bool)> {
    let mut bytes: Vec<(i64, bool)> = Vec::new();
    let mut add = |offset: i64, exclusive: bool| match bytes.iter_mut().find(|b| b.0 == offset) {
        Some(b) => b.1 |= exclusive,
        None => bytes.push((offset, exclusive)),
    };
    for (_, rel) in paths {
        add(byte_of(rel.as_os_str().as_bytes()), true);
        for above in rel.ancestors().skip(1) {
            add(byte_of(above.as_os_str().as_bytes()), false);
        }
    }
    bytes
}

/// The byte of the lock file that stands for `name`.
fn byte_of(name: &[u8]) -> i64 {
    let digest = Sha256::digest(name);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // 62 bits: a non-negative offset with room for its one byte.
    (u64::from_be_bytes(first) >> 2) as i64
}

/// Tries to lock one byte; `Ok(false)` when another open file description
/// holds a conflicting lock.
fn try_lock(file: BorrowedFd<'_>, offset: i64, exclusive: bool) -> io::Result<bool> {
    match set_lock(file, offset, exclusive, false) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `fcntl(F_OFD_SETLK[W])` on one byte. OFD locks belong to the open file
/// description, not the process: two calls of one process that each opened
/// the file exclude each other, and closing the descriptor releases them.
fn set_lock(file: BorrowedFd<'_>, offset: i64, exclusive: bool, wait: bool) -> io::Result<()> {
    // SAFETY: `flock` is a plain C struct for which all zeroes is valid.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = if exclusive {
        libc::F_WRLCK as libc::c_short
    } else {
        libc::F_RDLCK as libc::c_short
    };
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = offset;
    lock.l_len = 1;
    let command = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    // SAFETY: a valid descriptor and a pointer to an initialised `flock`
    // that outlives the call.
    let done = unsafe { libc::fcntl(file.as_raw_fd(), command, &lock as *const libc::flock) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A place as a message shows it: by the naming rule; one whose name is
/// not UTF-8 (reached through a symlink) is named as such, never shown in
/// part or replaced.
fn display(rel: &Path) -> String {
    match rel.to_str() {
        Some("") => ".".into(),
        Some(path) => shown(path).into_owned(),
        None => "a path whose name is not UTF-8".into(),
    }
}

#[cfg(test)]
mod tests;
