//! The policing `wasi:filesystem`: the host's own implementation of the WASI
//! filesystem host traits, wrapping wasmtime-wasi's.
//!
//! Every guest filesystem operation comes through here, for built-in and
//! third-party components alike, so the rules hold for code the project did
//! not write. Each path operation is checked in three steps:
//! 1. **lexically** against the descriptor it is relative to (tracked in a
//!    side table: descriptor → root, real root-relative path): no absolute
//!    path, no `..` above the root, no denied component, and the root grants
//!    the operation (read / write / delete);
//! 2. **by its real name**: the path is probed with `openat2(O_PATH,
//!    RESOLVE_BENEATH)` and the probe's real path (`/proc/self/fd`) is checked
//!    against the deny list, so a symlink alias of `.env` is refused *before*
//!    the operation (an `O_TRUNC` through an alias never happens); special
//!    files (FIFO, socket, device) are refused by type without being opened;
//! 3. after an `open-at`, the new descriptor's real name is checked again
//!    (closing a race with step 2) and recorded for the paths relative to it.
//!
//! Directory reads skip denied names, so a walk never sees a `.venv` and a
//! listing never shows `.env`. Descriptors the host did not hand out are
//! refused. Every refusal is recorded for the audit log.
//!
//! Operations on an already-open descriptor (read, write, stat, streams) pass
//! through once the descriptor is known to be tracked: its path was checked
//! when it was opened, and wasmtime-wasi enforces its open mode (a read-only
//! preopen yields no writable descriptor). The bytes they move are counted
//! and held to the byte quota (`meter`).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::activity::{Activity, DiskError};
use super::meter::{Meter, OutOfQuota};
use crate::policy::{Permission, Perms, Root};
use crate::store::quota::Quota;
use crate::store::{Kept, TRASH_DIR};
use crate::sys::descriptors::MAX_DESCRIPTORS;

/// A directory preopened for this call: a root, or a root's trash.
pub struct Mount {
    pub root: Arc<Root>,
    /// Where the guest sees it.
    pub guest_dir: String,
    /// The host directory it opens (the root).
    pub host: PathBuf,
    /// Whether this is the root's trash mount: only `.mcp-trash/…` is
    /// reachable, where entries may be moved or linked in and directories
    /// created; nothing is read, listed or removed there.
    pub trash: bool,
    /// Whether this is the call's staging directory (see
    /// [`crate::store::staging`]): the guest may make, read and remove files and
    /// directories there; what it made leaves only by a rename or link into
    /// its own root, and nothing enters it from elsewhere.
    pub staging: bool,
    /// What the guest may do here: the root's permissions, up to what the
    /// call declared (a tool declared `write` never deletes, whatever the
    /// root's role would allow).
    pub perms: Perms,
}

impl Mount {
    pub fn root(root: Arc<Root>, guest_dir: String, up_to: Permission) -> Mount {
        let host = root.path.clone();
        let perms = root.perms.intersect(Perms::up_to(up_to));
        Mount {
            root,
            guest_dir,
            host,
            trash: false,
            staging: false,
            perms,
        }
    }

    /// The root again, through which only `.mcp-trash/…` can be reached
    /// (and created, the first time something is kept).
    pub fn trash(root: Arc<Root>, guest_dir: String, up_to: Permission) -> Mount {
        Mount {
            trash: true,
            ..Mount::root(root, guest_dir, up_to)
        }
    }

    /// A call's staging directory `host` in `root`: everything in it is
    /// the call's own.
    pub fn staging(root: Arc<Root>, guest_dir: String, host: PathBuf) -> Mount {
        Mount {
            root,
            guest_dir,
            host,
            trash: false,
            staging: true,
            perms: Perms::up_to(Permission::Delete),
        }
    }
}

/// A guest operation the policy refused, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub root: String,
    /// Root-relative path the guest asked for.
    pub path: String,
    pub op: Permission,
    pub rule: &'static str,
}

/// What a tracked descriptor is: which mount, and its real root-relative path.
#[derive(Clone, Debug)]
struct Handle {
    mount: usize,
    rel: PathBuf,
}

/// What a file was when a call opened it for reading: a publish over it
/// checks it is still that file (see [`PolicedFs::publish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: i64,
    modified: (i128, i128),
    changed: (i128, i128),
}

impl Identity {
    fn of(st: &rustix::fs::Stat) -> Identity {
        Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            modified: (i128::from(st.st_mtime), i128::from(st.st_mtime_nsec)),
            changed: (i128::from(st.st_ctime), i128::from(st.st_ctime_nsec)),
        }
    }
}

/// Per-call policy state of the filesystem.
pub struct FsGuard {
    mounts: Vec<Mount>,
    handles: HashMap<u32, Handle>,
    /// Directory entry stream → the directory's handle.
    streams: HashMap<u32, Handle>,
    /// Files and directories this call created: it may remove them again
    /// without delete permission (a temporary file whose write failed).
    created: HashSet<(usize, PathBuf)>,
    refusals: Vec<Refusal>,
    kept: Vec<Kept>,
    /// The inodes (device, inode) this call put into a trash: a version
    /// displaced by a publish that is one of them is kept already.
    kept_inodes: HashSet<(u64, u64)>,
    /// Copies this call made in a trash where a hard link was impossible,
    /// by mount and real root-relative path: a copy cut short (a full disk)
    /// is the only thing a call may remove from a trash, and only its own.
    copies: HashSet<(usize, PathBuf)>,
    /// What each file this call opened for reading was when it was last
    /// opened, by mount and real root-relative path.
    read: HashMap<(usize, PathBuf), Identity>,
    /// This call's trash entry: through a trash mount only `.mcp-trash` and
    /// `.mcp-trash/<stamp>/…` are reachable, so a call can never touch what
    /// another call kept.
    stamp: Option<PathBuf>,
    activity: Arc<Activity>,
    /// Counts the bytes read and written, and holds them to the quota.
    meter: Arc<Meter>,
}

impl FsGuard {
    pub fn new(
        mounts: Vec<Mount>,
        stamp: Option<&str>,
        activity: Arc<Activity>,
        quota: Option<Arc<Quota>>,
    ) -> FsGuard {
        FsGuard {
            meter: Arc::new(Meter::new(Arc::clone(&activity), quota)),
            activity,
            mounts,
            handles: HashMap::new(),
            streams: HashMap::new(),
            created: HashSet::new(),
            refusals: Vec::new(),
            kept: Vec::new(),
            kept_inodes: HashSet::new(),
            copies: HashSet::new(),
            read: HashMap::new(),
            stamp: stamp.map(|s| Path::new(TRASH_DIR).join(s)),
        }
    }

    /// Files this call created, by mount host directory and root-relative
    /// path (to clean up after a call stopped mid-write).
    pub fn created(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.created
            .iter()
            .map(|(m, rel)| self.mounts[*m].host.join(rel))
    }

    /// Whether `rel` (root-relative) is reachable through a trash mount:
    /// the trash itself, this call's entry, or below it.
    fn in_own_trash(&self, rel: &Path) -> bool {
        rel == Path::new(TRASH_DIR) || self.stamp.as_ref().is_some_and(|own| rel.starts_with(own))
    }

    /// Host file descriptors the guest holds: its descriptors and its
    /// directory entry streams (each reads through a descriptor of its own).
    fn held(&self) -> usize {
        self.handles.len() + self.streams.len()
    }

    /// The refusals recorded so far.
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refusals)
    }

    /// What the call moved or linked into a trash.
    pub fn take_kept(&mut self) -> Vec<Kept> {
        std::mem::take(&mut self.kept)
    }

    /// Refuses any operation on a trash other than creating directories and
    /// moving or linking entries in.
    fn not_trash(&mut self, h: &Handle, rel: &Path, op: Permission) -> FsResult<()> {
        if self.mounts[h.mount].trash {
            return Err(self.refuse(Some(h.mount), rel, op, "trash"));
        }
        Ok(())
    }

    /// Whether the deny list refuses `rel` (root-relative) in `mount`; in a
    /// trash mount, what lies below `.mcp-trash`.
    fn denies(&self, mount: usize, rel: &Path) -> bool {
        let m = &self.mounts[mount];
        let checked = if m.trash {
            rel.strip_prefix(TRASH_DIR).unwrap_or(rel)
        } else {
            rel
        };
        m.root.deny.match_path(checked).is_some()
    }

    fn same_root(&self, a: usize, b: usize) -> bool {
        Arc::ptr_eq(&self.mounts[a].root, &self.mounts[b].root)
    }

    /// Whether two roots deny the same names (built-in and config-wide
    /// patterns are shared; compare their own).
    fn same_deny(&self, a: usize, b: usize) -> bool {
        let own = |m: usize| {
            let mut p = self.mounts[m].root.extra_deny.clone();
            p.sort();
            p
        };
        own(a) == own(b)
    }

    /// Records a copy created in this call's trash entry: it keeps what
    /// stood at the same path below the stamp.
    fn keep_copy(&mut self, mount: usize, rel: &Path) {
        let Some(own) = &self.stamp else { return };
        if let Ok(from) = rel.strip_prefix(own) {
            self.kept.push(Kept {
                root: self.mounts[mount].root.name.clone(),
                from: from.to_string_lossy().into_owned(),
                to: rel.to_string_lossy().into_owned(),
            });
        }
    }

    /// Records what a rename or link put into a trash.
    fn keep(&mut self, from: &Handle, to: &Handle) {
        if self.mounts[to.mount].trash && !self.mounts[from.mount].trash {
            self.kept.push(Kept {
                root: self.mounts[from.mount].root.name.clone(),
                from: from.rel.to_string_lossy().into_owned(),
                to: to.rel.to_string_lossy().into_owned(),
            });
        }
    }

    /// Refuses a rename or link that would bring something into a staging
    /// directory from elsewhere, or take something out of one anywhere but
    /// into its own root (not a trash, not another root).
    fn staging_bounds(&mut self, old: &Handle, new: &Handle, op: Permission) -> FsResult<()> {
        let (from, to) = (&self.mounts[old.mount], &self.mounts[new.mount]);
        if to.staging && old.mount != new.mount {
            return Err(self.refuse(Some(new.mount), &new.rel, op, "staging"));
        }
        if from.staging
            && old.mount != new.mount
            && (to.trash || !self.same_root(old.mount, new.mount))
        {
            return Err(self.refuse(Some(old.mount), &old.rel, op, "staging"));
        }
        Ok(())
    }

    /// Refuses renaming, linking or removing the top of a mount (the root
    /// itself, whatever path the guest spelled it with).
    fn not_mount_top(&mut self, h: &Handle, op: Permission) -> FsResult<()> {
        if h.rel.as_os_str().is_empty() {
            return Err(self.refuse(Some(h.mount), &h.rel, op, "root_itself"));
        }
        Ok(())
    }

    /// Forgets every descriptor under `rel` of `mount`: after a rename their
    /// recorded paths would be wrong, and nothing may act on a stale path.
    fn forget_under(&mut self, mount: usize, rel: &Path) {
        self.handles
            .retain(|_, h| !(h.mount == mount && h.rel.starts_with(rel)));
        self.streams
            .retain(|_, h| !(h.mount == mount && h.rel.starts_with(rel)));
        self.created
            .retain(|(m, p)| !(*m == mount && p.starts_with(rel)));
    }

    fn refuse(
        &mut self,
        mount: Option<usize>,
        path: &Path,
        op: Permission,
        rule: &'static str,
    ) -> FsError {
        let root = mount.map_or_else(|| "?".to_string(), |m| self.mounts[m].root.name.clone());
        self.refusals.push(Refusal {
            root,
            path: path.to_string_lossy().into_owned(),
            op,
            rule,
        });
        FsError::from(ErrorCode::Access)
    }

    fn perms(&self, mount: usize) -> Perms {
        self.mounts[mount].perms
    }

    /// The tracked handle behind `rep`, or a refusal.
    fn handle(&mut self, rep: u32, op: Permission) -> FsResult<Handle> {
        match self.handles.get(&rep) {
            Some(h) => Ok(h.clone()),
            None => Err(self.refuse(None, Path::new(""), op, "untracked_descriptor")),
        }
    }

    /// Refuses a denied name. Looked up as something that exists, it looks
    /// exactly like a missing one (`no-entry`), however it was reached
    /// (asked for, or through a symlink) and whether it exists or not: the
    /// guest cannot tell that `.env` is there. As a name to create, it is
    /// refused outright (`access`), which says nothing about what exists.
    fn denied(&mut self, mount: usize, path: &Path, op: Permission, lookup: Lookup) -> FsError {
        let refused = self.refuse(Some(mount), path, op, "deny");
        match lookup {
            Lookup::Existing => ErrorCode::NoEntry.into(),
            Lookup::New => refused,
        }
    }

    /// Step 1: joins `path` to the handle's path lexically and checks it.
    fn lexical(
        &mut self,
        h: &Handle,
        path: &str,
        op: Permission,
        lookup: Lookup,
    ) -> FsResult<PathBuf> {
        let shown = h.rel.join(path);
        // A trash has no role of its own: each operation is gated by `not_trash`.
        if !self.mounts[h.mount].trash && !self.perms(h.mount).contains(op) {
            return Err(self.refuse(Some(h.mount), &shown, op, "permission"));
        }
        let Some(rel) = join_lexically(&h.rel, Path::new(path)) else {
            return Err(self.refuse(Some(h.mount), &shown, op, "confinement"));
        };
        if self.mounts[h.mount].trash {
            // Through a trash mount only this call's part of the trash is
            // reachable; below it the deny list applies as anywhere.
            if !self.in_own_trash(&rel) {
                return Err(self.refuse(Some(h.mount), &rel, op, "trash"));
            }
            if self.denies(h.mount, &rel) {
                return Err(self.denied(h.mount, &rel, op, lookup));
            }
            return Ok(rel);
        }
        // The descriptor's own path was checked when it was handed out, and
        // `rel` is a prefix of it plus names from `path`: checking `path` is
        // checking all that is new.
        let deny = &self.mounts[h.mount].root.deny;
        if deny.match_path(Path::new(path)).is_some() {
            return Err(self.denied(h.mount, &rel, op, lookup));
        }
        Ok(rel)
    }

    /// Steps 2 and 3: checks a real path read from an open descriptor (of
    /// something that exists: a denied one looks missing).
    fn real(
        &mut self,
        h: &Handle,
        fd: BorrowedFd<'_>,
        shown: &Path,
        op: Permission,
    ) -> FsResult<PathBuf> {
        let mount = &self.mounts[h.mount];
        let root = &mount.root;
        let real =
            real_path(fd).and_then(|p| p.strip_prefix(&mount.host).ok().map(Path::to_path_buf));
        let checked = match &real {
            Some(rel) if mount.trash => self
                .in_own_trash(rel)
                .then(|| rel.strip_prefix(TRASH_DIR).unwrap_or(rel)),
            Some(rel) => Some(rel.as_path()),
            None => None,
        };
        match (real.as_ref(), checked) {
            (None, _) => Err(self.refuse(Some(h.mount), shown, op, "confinement")),
            (Some(_), None) => Err(self.refuse(Some(h.mount), shown, op, "trash")),
            (Some(_), Some(inside)) if root.deny.match_path(inside).is_some() => {
                Err(self.denied(h.mount, shown, op, Lookup::Existing))
            }
            (Some(rel), Some(_)) => Ok(rel.clone()),
        }
    }
}

/// How a checked path is used: looked up as something that exists, or as a
/// name about to be created (see [`FsGuard::denied`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Existing,
    New,
}

/// `base` joined with the relative `path`, `..` resolved lexically; `None`
/// for an absolute path or one climbing above the root.
fn join_lexically(base: &Path, path: &Path) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether `path` names a direct entry of its directory (one plain name):
/// then, without following symlinks, its real path is the directory's plus
/// the name, and no probe is needed.
fn is_plain_name(path: &str) -> bool {
    !path.is_empty() && path != "." && path != ".." && !path.contains('/')
}

/// The real path of an open descriptor.
fn real_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// What probing a path found.
enum Probe {
    /// It exists: an `O_PATH` descriptor of it.
    Found(OwnedFd),
    /// Resolving it would leave the root (`EXDEV` from `RESOLVE_BENEATH`).
    Escapes,
    /// Missing, or unreachable in a way the operation itself will hit the
    /// same way (not a directory, a symlink loop, no access).
    Absent,
    /// The probe failed for a reason that says nothing about the path
    /// (e.g. `openat2` filtered by seccomp): refuse, never fall back to the
    /// lexical check alone.
    Failed,
    /// The process has no descriptor free for the probe.
    NoDescriptors,
}

/// Opens `path` under `dir` as `O_PATH`, never leaving `dir` (the same
/// resolution cap-std applies to the real operation).
fn probe(dir: BorrowedFd<'_>, path: &str, follow: bool) -> Probe {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let path = if path.is_empty() { "." } else { path };
    use rustix::io::Errno;
    // openat2 returns EAGAIN when a rename raced the lookup of a path with `..`.
    for _ in 0..4 {
        match rustix::fs::openat2(
            dir,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Probe::Found(fd),
            Err(Errno::XDEV) => return Probe::Escapes,
            Err(
                Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::NAMETOOLONG | Errno::ACCESS,
            ) => return Probe::Absent,
            Err(Errno::AGAIN) => continue,
            Err(Errno::MFILE | Errno::NFILE) => return Probe::NoDescriptors,
            Err(_) => return Probe::Failed,
        }
    }
    Probe::Failed
}

/// A pause before every publish, for the tests that change a file between
/// a call's read and its publish: with `LOOMFS_TEST_HOOK_DIR` set, a
/// publish that finds `<dir>/armed` renames it to `<dir>/paused` and waits
/// (at most 30 s) for `<dir>/go`, which it removes with `paused`. Only the
/// tests set it; it is not a setting.
fn pause_before_publish() {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(dir) = DIR.get_or_init(|| std::env::var_os("LOOMFS_TEST_HOOK_DIR").map(PathBuf::from))
    else {
        return;
    };
    if std::fs::rename(dir.join("armed"), dir.join("paused")).is_err() {
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < until && std::fs::remove_file(dir.join("go")).is_err() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let _ = std::fs::remove_file(dir.join("paused"));
}

/// Whether resolving `path` under `dir` passes a symlink (a final one
/// counted only when `follow`): `openat2(RESOLVE_NO_SYMLINKS)` says so.
fn symlink_on_the_way(dir: BorrowedFd<'_>, path: &str, follow: bool) -> bool {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let path = if path.is_empty() { "." } else { path };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    // Out of descriptors, it cannot tell: the steps are checked then, and
    // their probes say the call ran out (never a check skipped).
    match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve) {
        Err(e) => e == rustix::io::Errno::LOOP || is_exhaustion(e),
        Ok(_) => false,
    }
}

/// Checks at start that the kernel gives what the policing filesystem
/// relies on: `openat2` with `RESOLVE_BENEATH` (Linux 5.6+) and
/// `/proc/self/fd` to read a descriptor's real path.
pub fn self_test() -> Result<(), String> {
    // `O_PATH`, as the probes are: it reads nothing, so it also works in a
    // process the kernel sandbox has restricted to its roots.
    let root = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("cannot open /: {e}"))?;
    let Probe::Found(probe) = probe(root.as_fd(), ".", true) else {
        return Err(
            "openat2(RESOLVE_BENEATH) is unavailable (Linux 5.6 or later is needed, \
                    and no seccomp filter may block it)"
                .into(),
        );
    };
    match real_path(probe.as_fd()) {
        Some(p) if p == Path::new("/") => Ok(()),
        _ => Err("/proc/self/fd is unavailable: mount /proc".into()),
    }
}

fn is_special(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        matches!(
            FileType::from_raw_mode(st.st_mode),
            FileType::Fifo | FileType::Socket | FileType::CharacterDevice | FileType::BlockDevice
        )
    })
}

/// The WASI type of a mode, for the kinds wasmtime-wasi reports as `unknown`
/// (it has no FIFO or socket type): guests see what the file really is.
fn wasi_type(mode: u32) -> fs::DescriptorType {
    wasi_file_type(FileType::from_raw_mode(mode))
}

fn wasi_file_type(t: FileType) -> fs::DescriptorType {
    match t {
        FileType::Fifo => fs::DescriptorType::Fifo,
        FileType::Socket => fs::DescriptorType::Socket,
        FileType::CharacterDevice => fs::DescriptorType::CharacterDevice,
        FileType::BlockDevice => fs::DescriptorType::BlockDevice,
        FileType::RegularFile => fs::DescriptorType::RegularFile,
        FileType::Directory => fs::DescriptorType::Directory,
        FileType::Symlink => fs::DescriptorType::SymbolicLink,
        FileType::Unknown => fs::DescriptorType::Unknown,
    }
}

/// What the checks before a read-only open did.
enum ReadOpen {
    /// Opened the file itself, from its probe.
    Opened(Resource<Descriptor>),
    /// Left the open to wasmtime-wasi; the handle to check it against.
    General(Handle),
}

/// A directory entry stream of the policing filesystem. The guest knows it
/// as a `wasi:filesystem` `directory-entry-stream`; only this module ever
/// touches it, so it needs none of wasmtime-wasi's own stream type. Unlike
/// that one, it reads entries as the guest asks for them, takes each
/// entry's type from the directory itself, and never looks at a denied
/// entry (wasmtime-wasi's reads every entry's metadata up front).
struct DirStream(rustix::fs::Dir);

impl DirStream {
    /// This stream's table entry, from the guest's handle.
    fn of(stream: &Resource<fs::DirectoryEntryStream>) -> Resource<DirStream> {
        if stream.owned() {
            Resource::new_own(stream.rep())
        } else {
            Resource::new_borrow(stream.rep())
        }
    }
}

fn io_error(e: rustix::io::Errno) -> FsError {
    FsError::from(std::io::Error::from(e))
}

/// Whether `e` says the process (or the system) has no descriptor free.
fn is_exhaustion(e: rustix::io::Errno) -> bool {
    matches!(e, rustix::io::Errno::MFILE | rustix::io::Errno::NFILE)
}

fn raw_fd(d: &Descriptor) -> BorrowedFd<'_> {
    match d {
        Descriptor::File(f) => f.file.as_fd(),
        Descriptor::Dir(d) => d.dir.as_fd(),
    }
}

/// Makes a new borrow of a resource, to delegate after inspecting it.
fn again<T: 'static>(r: &Resource<T>) -> Resource<T> {
    Resource::new_borrow(r.rep())
}

/// The view the policing filesystem works on: wasmtime-wasi's filesystem
/// plus this call's guard.
pub struct PolicedFs<'a> {
    pub fs: WasiFilesystemCtxView<'a>,
    pub guard: &'a mut FsGuard,
}

/// `HasData` marker for linking the policing filesystem.
pub struct Policed;

impl HasData for Policed {
    type Data<'a> = PolicedFs<'a>;
}

fn quota_error() -> FsError {
    ErrorCode::Quota.into()
}

impl PolicedFs<'_> {
    /// Hands out a write stream wrapped in the call's meter.
    /// Its disk errors are recorded for the root of `h`.
    fn metered_output(
        &mut self,
        stream: Resource<streams::OutputStream>,
        h: &Handle,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let inner = self.fs.table.delete(stream)?;
        let root = Arc::clone(&self.guard.mounts[h.mount].root);
        let metered = self.guard.meter.output(inner, root);
        Ok(self.fs.table.push(metered)?)
    }

    fn dir_fd(&self, fd: &Resource<Descriptor>) -> FsResult<BorrowedFd<'_>> {
        Ok(raw_fd(self.fs.table.get(fd)?))
    }

    /// Probes `path` under `fd` (see [`probe`]). With no descriptor free
    /// for the probe, the operation fails and the call is marked: WASI has
    /// no error code for it, so the MCP layer says what happened.
    fn probe_at(&self, fd: &Resource<Descriptor>, path: &str, follow: bool) -> FsResult<Probe> {
        match probe(self.dir_fd(fd)?, path, follow) {
            Probe::NoDescriptors => Err(self.exhausted()),
            found => Ok(found),
        }
    }

    /// The error of an operation that found no descriptor free, with the
    /// call marked for it.
    fn exhausted(&self) -> FsError {
        self.guard.activity.mark_out_of_descriptors();
        ErrorCode::Io.into()
    }

    /// `e`, met by the host's own operation in `mount`, as the guest sees
    /// it; a disk error is recorded for the call with its errno (WASI
    /// would fold `EDQUOT` into `io`).
    fn host_error(&self, mount: usize, e: rustix::io::Errno) -> FsError {
        if let Some(disk) = DiskError::of_errno(e.raw_os_error()) {
            let root = &self.guard.mounts[mount].root.name;
            self.guard.activity.mark_disk_error(disk, root);
        }
        self.os_error(e)
    }

    /// `e` as the guest sees it; a lack of descriptors marks the call.
    fn os_error(&self, e: rustix::io::Errno) -> FsError {
        if is_exhaustion(e) {
            return self.exhausted();
        }
        io_error(e)
    }

    /// Records the disk error `result` carries for the root of descriptor
    /// `rep` (see [`DiskError`]): no space and file too large by their WASI
    /// codes; an I/O error on a read-only filesystem as that (wasmtime-wasi
    /// folds `EROFS` into `io`, as it does `EDQUOT`, which only a stream's
    /// error or the host's own operations still tell).
    fn disk_noted<T>(&self, rep: u32, result: FsResult<T>) -> FsResult<T> {
        let Err(e) = &result else {
            return result;
        };
        let Some(h) = self.guard.handles.get(&rep) else {
            return result;
        };
        let disk = match e.downcast_ref() {
            Some(ErrorCode::InsufficientSpace) => Some(DiskError::NoSpace),
            Some(ErrorCode::FileTooLarge) => Some(DiskError::TooLarge),
            Some(ErrorCode::Io | ErrorCode::ReadOnly) => self
                .fs
                .table
                .get(&Resource::<Descriptor>::new_borrow(rep))
                .ok()
                .and_then(|d| rustix::fs::fstatvfs(raw_fd(d)).ok())
                .filter(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
                .map(|_| DiskError::ReadOnly),
            _ => None,
        };
        if let Some(disk) = disk {
            let root = &self.guard.mounts[h.mount].root.name;
            self.guard.activity.mark_disk_error(disk, root);
        }
        result
    }

    /// After wasmtime-wasi's own open failed (its error code has lost the
    /// errno): whether the process is out of descriptors now, told by
    /// trying to duplicate one, and if so the call is marked.
    fn check_exhaustion(&self, dir: &Resource<Descriptor>) {
        if let Ok(fd) = self.dir_fd(dir)
            && let Err(e) = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            && is_exhaustion(e)
        {
            self.guard.activity.mark_out_of_descriptors();
        }
    }

    /// Probes `path` under `fd`: the probe when found, `None` when absent (the
    /// operation itself will fail the same way), a refusal when it escapes
    /// or the probe cannot tell.
    fn probe_checked(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        h: &Handle,
        rel: &Path,
        op: Permission,
    ) -> FsResult<Option<OwnedFd>> {
        // A symlink on the way may lead through a denied name (`to_git/..`,
        // `to_pem/x`, `to_pem/`): then every step is checked by its real
        // name, and a denied one answers as a missing one, whatever comes
        // after it. Without a symlink, the lexical check saw every step.
        if symlink_on_the_way(self.dir_fd(fd)?, path, follow) {
            self.steps_checked(fd, path, h, rel, op)?;
        }
        match self.probe_at(fd, path, follow)? {
            Probe::Found(fd) => Ok(Some(fd)),
            Probe::Absent => Ok(None),
            Probe::Escapes => Err(self.guard.refuse(Some(h.mount), rel, op, "confinement")),
            Probe::Failed | Probe::NoDescriptors => {
                Err(self.guard.refuse(Some(h.mount), rel, op, "probe_failed"))
            }
        }
    }

    /// Checks the real name of every step of `path` that is resolved as a
    /// directory (all but the last name, and that one too when `path` ends
    /// in `/`). A step that is missing ends the check: the operation meets
    /// the same end.
    fn steps_checked(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        h: &Handle,
        rel: &Path,
        op: Permission,
    ) -> FsResult<()> {
        let names: Vec<&str> = path.split('/').filter(|n| !n.is_empty()).collect();
        let steps = if path.ends_with('/') {
            names.len()
        } else {
            names.len().saturating_sub(1)
        };
        let mut prefix = String::new();
        for name in &names[..steps] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(name);
            let Probe::Found(step) = self.probe_at(fd, &prefix, true)? else {
                return Ok(());
            };
            self.guard.real(h, step.as_fd(), rel, op)?;
        }
        Ok(())
    }

    /// Checks an existing path for `op`: lexically, then by the real name of
    /// a probe (following a final symlink when `follow`). Special files are
    /// refused when `refuse_special`.
    fn check_existing(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        op: Permission,
        follow: bool,
        refuse_special: bool,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::Existing)?;
        if is_plain_name(path) && !follow && !refuse_special {
            return Ok(Handle {
                mount: h.mount,
                rel,
            });
        }
        let Some(probe) = self.probe_checked(fd, path, follow, &h, &rel, op)? else {
            return Ok(Handle {
                mount: h.mount,
                rel,
            });
        };
        // The real name first: a denied one looks missing, whatever it is.
        let real = self.guard.real(&h, probe.as_fd(), &rel, op)?;
        if refuse_special && is_special(probe.as_fd()) {
            return Err(self.guard.refuse(Some(h.mount), &rel, op, "special_file"));
        }
        Ok(Handle {
            mount: h.mount,
            rel: real,
        })
    }

    /// Checks an existing path before opening it for reading only, with one
    /// probe: lexically, then by type (a special file is refused without
    /// being opened). A regular file opened with plain read flags
    /// (`reopen`) is opened here, from the probe, after its real name is
    /// checked: the inode read is the inode checked, nothing can be swapped
    /// in between. Anything else (a directory, a symlink not followed, a
    /// missing path) goes to the general open, whose real name is checked
    /// on the opened descriptor: opening for reading changes nothing.
    fn read_open(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        reopen: bool,
    ) -> FsResult<ReadOpen> {
        let op = Permission::Read;
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::Existing)?;
        let general = |rel| {
            Ok(ReadOpen::General(Handle {
                mount: h.mount,
                rel,
            }))
        };
        let Some(probe) = self.probe_checked(fd, path, follow, &h, &rel, op)? else {
            return general(rel);
        };
        // The real name first: a denied one looks missing, whatever kind of
        // entry it is and whatever the open asks of it.
        let real = self.guard.real(&h, probe.as_fd(), &rel, op)?;
        let st = rustix::fs::fstat(&probe).map_err(io_error)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile if reopen => {}
            FileType::RegularFile | FileType::Directory | FileType::Symlink | FileType::Unknown => {
                return general(rel);
            }
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => {
                return Err(self.guard.refuse(Some(h.mount), &rel, op, "special_file"));
            }
        }
        // The file as this call read it, for a publish over it to compare.
        self.guard
            .read
            .insert((h.mount, real.clone()), Identity::of(&st));
        let Descriptor::Dir(dir) = self.fs.table.get(fd)? else {
            return Err(ErrorCode::NotDirectory.into());
        };
        let perms = dir.perms;
        let file = rustix::fs::open(
            format!("/proc/self/fd/{}", probe.as_raw_fd()),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| self.os_error(e))?;
        let file = wasmtime_wasi::filesystem::File::new(file.into(), perms, OpenMode::READ, true);
        let new = self.fs.table.push(Descriptor::File(file))?;
        self.guard.handles.insert(
            new.rep(),
            Handle {
                mount: h.mount,
                rel: real,
            },
        );
        self.guard.activity.count_opened();
        Ok(ReadOpen::Opened(new))
    }

    /// Checks a name about to be created (or replaced) for `op`: lexically,
    /// and by the real name of its parent directory.
    fn check_new(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        op: Permission,
    ) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        let rel = self.guard.lexical(&h, path, op, Lookup::New)?;
        let (parent, name) = match path.trim_end_matches('/').rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => {
                return Ok(Handle {
                    mount: h.mount,
                    rel,
                });
            }
        };
        let Some(probe) = self.probe_checked(fd, parent, true, &h, &rel, op)? else {
            return Ok(Handle {
                mount: h.mount,
                rel,
            });
        };
        let real_parent = self.guard.real(&h, probe.as_fd(), &rel, op)?;
        let real = real_parent.join(name);
        if self.guard.denies(h.mount, &real) {
            return Err(self.guard.refuse(Some(h.mount), &rel, op, "deny"));
        }
        Ok(Handle {
            mount: h.mount,
            rel: real,
        })
    }

    /// Checks a path about to be unlinked or removed: delete permission,
    /// unless this call created it; never in a trash, never a mount's top.
    fn check_removal(&mut self, fd: &Resource<Descriptor>, path: &str) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), Permission::Delete)?;
        // Created entries are recorded by real path: find this one's.
        let real = match self.probe_at(fd, path, false)? {
            Probe::Found(found) => real_path(found.as_fd()).and_then(|p| {
                p.strip_prefix(&self.guard.mounts[h.mount].host)
                    .ok()
                    .map(Path::to_path_buf)
            }),
            _ => None,
        };
        // Everything in a staging directory is the call's own.
        let own = self.guard.mounts[h.mount].staging
            || real.is_some_and(|rel| self.guard.created.contains(&(h.mount, rel)));
        let op = if own {
            Permission::Write
        } else {
            Permission::Delete
        };
        let target = self.check_existing(fd, path, op, false, false)?;
        self.guard
            .not_trash(&target, &target.rel, Permission::Delete)?;
        self.guard.not_mount_top(&target, Permission::Delete)?;
        Ok(target)
    }

    /// The copy this call made in a trash that `path` under `fd` names, if
    /// it names one (only plain names: nothing in a trash can be a symlink
    /// the call made, nor be renamed or removed but this copy).
    fn own_copy(&self, fd: &Resource<Descriptor>, path: &str) -> Option<(usize, PathBuf)> {
        let h = self.guard.handles.get(&fd.rep())?;
        if !self.guard.mounts[h.mount].trash {
            return None;
        }
        let rel = Path::new(path);
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return None;
        }
        let key = (h.mount, h.rel.join(rel));
        self.guard.copies.contains(&key).then_some(key)
    }

    /// Refuses a new name in a trash that is already taken: nothing kept is
    /// ever replaced.
    fn never_replace_in_trash(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        new: &Handle,
    ) -> FsResult<()> {
        if matches!(self.probe_at(fd, path, false)?, Probe::Absent) {
            return Ok(());
        }
        Err(self
            .guard
            .refuse(Some(new.mount), &new.rel, Permission::Write, "trash"))
    }

    /// When a rename will replace a regular file with a regular file (an
    /// atomic write), gives the incoming file the old one's permission bits:
    /// WASI cannot, and an edit must not make a private file readable or a
    /// script not executable.
    fn carry_mode(
        &self,
        old_fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) -> FsResult<()> {
        let regular = |fd: &OwnedFd| {
            rustix::fs::fstat(fd)
                .ok()
                .filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
        };
        let (Probe::Found(from), Probe::Found(to)) = (
            self.probe_at(old_fd, old_path, false)?,
            self.probe_at(new_fd, new_path, false)?,
        ) else {
            return Ok(());
        };
        if let (Some(_), Some(old)) = (regular(&from), regular(&to)) {
            // Never set-id bits: the guest wrote the content.
            let mode = Mode::from_raw_mode(old.st_mode & 0o777);
            let _ = rustix::fs::chmodat(
                self.dir_fd(old_fd)?,
                old_path,
                mode,
                rustix::fs::AtFlags::empty(),
            );
        }
        Ok(())
    }

    /// Whether `path` (not following a final symlink) is a directory.
    fn is_directory(&self, fd: &Resource<Descriptor>, path: &str) -> FsResult<bool> {
        let Probe::Found(found) = self.probe_at(fd, path, false)? else {
            return Ok(false);
        };
        Ok(rustix::fs::fstat(&found)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory))
    }

    /// Whether `path` is a symlink whose target does not exist (or leaves the root).
    fn is_dangling_symlink(&self, fd: &Resource<Descriptor>, path: &str) -> FsResult<bool> {
        let Probe::Found(link) = self.probe_at(fd, path, false)? else {
            return Ok(false);
        };
        let is_link = rustix::fs::fstat(&link)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
        Ok(is_link && !matches!(self.probe_at(fd, path, true)?, Probe::Found(_)))
    }

    /// What is at `path`, following a final symlink when `follow`; `None`
    /// when nothing is there.
    fn stat_of(
        &self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<Option<rustix::fs::Stat>> {
        let Probe::Found(found) = self.probe_at(fd, path, follow)? else {
            return Ok(None);
        };
        Ok(rustix::fs::fstat(&found).ok())
    }

    /// The directory holding `path` under `fd` (opened `O_PATH` beneath its
    /// mount, and checked by its real name: the rename acts on exactly the
    /// directory checked) and the last name of `path`.
    fn parent(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        target: &Handle,
    ) -> FsResult<(OwnedFd, String)> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        if !is_plain_name(name) {
            return Err(ErrorCode::Invalid.into());
        }
        let base = self.guard.handle(fd.rep(), Permission::Write)?;
        let op = Permission::Write;
        match self.probe_at(fd, dir, true)? {
            Probe::Found(parent) => {
                self.guard.real(&base, parent.as_fd(), &target.rel, op)?;
                Ok((parent, name.to_string()))
            }
            Probe::Absent => Err(ErrorCode::NoEntry.into()),
            Probe::Escapes => {
                Err(self
                    .guard
                    .refuse(Some(base.mount), &target.rel, op, "confinement"))
            }
            Probe::Failed | Probe::NoDescriptors => {
                Err(self
                    .guard
                    .refuse(Some(base.mount), &target.rel, op, "probe_failed"))
            }
        }
    }

    /// Publishes what the call made in its staging directory (`old`) at a
    /// name of its root (`new`): the rename the guest asked for, done so
    /// that nothing is lost and nothing is replaced unseen.
    ///
    /// - Where nothing stands, it is `RENAME_NOREPLACE`: something that
    ///   appeared meanwhile is looked at again, never overwritten blindly.
    ///   A file this call read that is gone since fails with `busy`: the
    ///   publish would bring back a file someone deleted.
    /// - A directory (a copied tree) is only ever published where nothing
    ///   stands.
    /// - Over a file this call opened for reading, the file must still be
    ///   the one it read (device, inode, size, modification and change
    ///   times); otherwise the publish fails with `busy` and nothing
    ///   changes, so an edit never overwrites a change it did not see.
    /// - What stands there is in the call's trash entry before anything
    ///   moves: kept by the tool itself (the built-in tools link what they
    ///   replace first, and report where), or linked there now. Then the
    ///   new file takes the place with `RENAME_EXCHANGE` (WASI has no
    ///   exchange), in one step, and what stood there comes out under the
    ///   temporary name. If that is not the version kept (an outside
    ///   program replaced the file in the instant between), it is the one
    ///   this call replaced: over a file the call read, the exchange is
    ///   undone (`busy`); otherwise it goes to the trash too, and if it
    ///   cannot, the exchange is undone.
    fn publish(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
        old: &Handle,
        new: &Handle,
    ) -> FsResult<()> {
        use rustix::fs::{AtFlags, RenameFlags, renameat_with};
        use rustix::io::Errno;
        pause_before_publish();
        let (from_dir, from_name) = self.parent(fd, old_path, old)?;
        let (to_dir, to_name) = self.parent(new_fd, new_path, new)?;
        let lstat =
            |dir: &OwnedFd, name: &str| rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW);
        let incoming = lstat(&from_dir, &from_name).map_err(io_error)?;
        let is_dir =
            |st: &rustix::fs::Stat| FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        let inode = |st: &rustix::fs::Stat| (st.st_dev, st.st_ino);
        let read = self.guard.read.get(&(new.mount, new.rel.clone())).copied();
        // Twice at most: a name that appears between the look and the
        // rename is looked at again.
        for _ in 0..2 {
            let standing = match lstat(&to_dir, &to_name) {
                Ok(st) => st,
                Err(Errno::NOENT) if read.is_some() => return Err(ErrorCode::Busy.into()),
                Err(Errno::NOENT) => {
                    match renameat_with(
                        &from_dir,
                        &from_name,
                        &to_dir,
                        &to_name,
                        RenameFlags::NOREPLACE,
                    ) {
                        Ok(()) => {
                            self.published(old, new);
                            return Ok(());
                        }
                        Err(Errno::EXIST) => continue,
                        Err(e) => return Err(self.host_error(new.mount, e)),
                    }
                }
                Err(e) => return Err(io_error(e)),
            };
            if is_dir(&incoming) {
                return Err(ErrorCode::Exist.into());
            }
            if is_dir(&standing) {
                return Err(ErrorCode::IsDirectory.into());
            }
            if read.is_some_and(|read| read != Identity::of(&standing)) {
                return Err(ErrorCode::Busy.into());
            }
            let Some(stamp) = self.guard.stamp.clone() else {
                // No trash to keep the replaced file in: never replace.
                return Err(self.guard.refuse(
                    Some(new.mount),
                    &new.rel,
                    Permission::Write,
                    "trash",
                ));
            };
            if !self.guard.kept_inodes.contains(&inode(&standing)) {
                // Where hard links are impossible, it is moved there after
                // the exchange instead.
                let _ = self.keep_standing(&to_dir, &to_name, new, &stamp);
            }
            // The new file takes the old one's permission bits: WASI
            // cannot, and an edit must not make a private file readable or
            // a script not executable. Never set-id bits: the guest wrote
            // the content.
            if FileType::from_raw_mode(incoming.st_mode) == FileType::RegularFile
                && FileType::from_raw_mode(standing.st_mode) == FileType::RegularFile
            {
                let mode = Mode::from_raw_mode(standing.st_mode & 0o777);
                let _ = rustix::fs::chmodat(&from_dir, from_name.as_str(), mode, AtFlags::empty());
            }
            let exchange = || {
                renameat_with(
                    &from_dir,
                    &from_name,
                    &to_dir,
                    &to_name,
                    RenameFlags::EXCHANGE,
                )
            };
            exchange().map_err(|e| self.host_error(new.mount, e))?;
            let displaced = lstat(&from_dir, &from_name).map_err(io_error)?;
            if self.guard.kept_inodes.contains(&inode(&displaced)) {
                // Kept already: this name is one more link to it.
                let _ = rustix::fs::unlinkat(&from_dir, from_name.as_str(), AtFlags::empty());
            } else {
                let kept = if read.is_some() {
                    // Not the file the call read: changed in the instant
                    // between the check and the exchange.
                    Err(ErrorCode::Busy.into())
                } else {
                    self.keep_displaced(&from_dir, &from_name, new, &stamp)
                        .map_err(FsError::from)
                };
                if let Err(e) = kept {
                    if let Err(undo) = exchange() {
                        tracing::error!(
                            root = %self.guard.mounts[new.mount].root.name,
                            "a replaced file could not be kept nor put back ({undo}); it is in the \
                             staging directory of the call"
                        );
                    }
                    return Err(e);
                }
            }
            self.published(old, new);
            return Ok(());
        }
        Err(ErrorCode::Busy.into())
    }

    /// The call's trash slot for what stands at `at`:
    /// `.mcp-trash/<stamp>/<path>`, or `<path>.~N~` where that is taken,
    /// made ready (its parent directories), and `put` tried at each free
    /// name until it does not find the name taken. Records what was kept.
    fn keep_at_slot(
        &mut self,
        at: &Handle,
        stamp: &Path,
        mut put: impl FnMut(&OwnedFd, &std::ffi::OsStr) -> rustix::io::Result<()>,
    ) -> std::io::Result<()> {
        let root = Arc::clone(&self.guard.mounts[at.mount].root);
        let slot = stamp.join(&at.rel);
        let (Some(parent), Some(base)) = (slot.parent(), slot.file_name()) else {
            return Err(std::io::ErrorKind::InvalidInput.into());
        };
        let root_fd = crate::sys::beneath::open_root(&root)?;
        let into = crate::sys::beneath::parents(&root_fd, parent)?;
        for n in 1..100u32 {
            let mut candidate = base.to_os_string();
            if n > 1 {
                candidate.push(format!(".~{n}~"));
            }
            match put(&into, &candidate) {
                Ok(()) => {
                    self.guard.kept.push(Kept {
                        root: root.name.clone(),
                        from: at.rel.to_string_lossy().into_owned(),
                        to: parent.join(&candidate).to_string_lossy().into_owned(),
                    });
                    return Ok(());
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(std::io::ErrorKind::AlreadyExists.into())
    }

    /// Links what stands at `name` in `dir` (the place a publish replaces)
    /// into the call's trash entry, before the exchange: from then on it is
    /// kept whatever happens, a kill included.
    fn keep_standing(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
    ) -> std::io::Result<()> {
        let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        self.keep_at_slot(at, stamp, |into, slot| {
            rustix::fs::linkat(dir, name, into, slot, rustix::fs::AtFlags::empty())
        })?;
        self.guard.kept_inodes.insert((st.st_dev, st.st_ino));
        Ok(())
    }

    /// Moves a version a publish displaced (now at `name` in `dir`, the
    /// staging directory) into the call's trash entry.
    fn keep_displaced(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        at: &Handle,
        stamp: &Path,
    ) -> std::io::Result<()> {
        self.keep_at_slot(at, stamp, |into, slot| {
            rustix::fs::renameat_with(dir, name, into, slot, rustix::fs::RenameFlags::NOREPLACE)
        })
    }

    /// After a publish: descriptors of either name are stale, and the file
    /// this call read at the target is replaced by its own.
    fn published(&mut self, old: &Handle, new: &Handle) {
        self.guard.forget_under(old.mount, &old.rel);
        self.guard.forget_under(new.mount, &new.rel);
        self.guard.read.remove(&(new.mount, new.rel.clone()));
    }

    /// A tracked descriptor, for an operation on the descriptor itself.
    fn tracked(&mut self, fd: &Resource<Descriptor>, op: Permission) -> FsResult<Handle> {
        let h = self.guard.handle(fd.rep(), op)?;
        if op != Permission::Read && !self.guard.perms(h.mount).contains(op) {
            return Err(self.guard.refuse(Some(h.mount), &h.rel, op, "permission"));
        }
        Ok(h)
    }

    /// A tracked descriptor, for an operation that tells what is in the
    /// file or about it (its bytes, its metadata): never in a trash, which
    /// takes things in and gives nothing back, whoever put them there.
    fn readable(&mut self, fd: &Resource<Descriptor>) -> FsResult<Handle> {
        let h = self.tracked(fd, Permission::Read)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        Ok(h)
    }
}

/// What a guest is told about a directory: its type and times, but a link
/// count of 1 and a size of 0 whatever the filesystem says (and a symlink's
/// size as 0). Both count the
/// entries in it (a subdirectory adds a link; on tmpfs each entry adds to
/// the size), hidden ones included: the guest must not learn that a `.git`
/// or a `.venv` is there from the numbers of its parent.
fn as_seen(mut stat: fs::DescriptorStat) -> fs::DescriptorStat {
    match stat.type_ {
        fs::DescriptorType::Directory => {
            stat.link_count = 1;
            stat.size = 0;
        }
        // A symlink's size is the length of its target, which `readlink`
        // keeps to itself where it points out or at a denied name.
        fs::DescriptorType::SymbolicLink => stat.size = 0,
        _ => {}
    }
    stat
}

impl preopens::Host for PolicedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.fs)?;
        for (fd, name) in &dirs {
            let Some(mount) = self.guard.mounts.iter().position(|m| &m.guest_dir == name) else {
                continue;
            };
            // The preopen must be the very directory meant: a root swapped
            // for a symlink, or a `.mcp-trash` planted as one, is left
            // untracked, so every use of it is refused.
            let opened = raw_fd(self.fs.table.get(fd)?);
            if real_path(opened).as_deref() == Some(self.guard.mounts[mount].host.as_path()) {
                self.guard.handles.insert(
                    fd.rep(),
                    Handle {
                        mount,
                        rel: PathBuf::new(),
                    },
                );
            } else {
                let root = Some(mount);
                self.guard
                    .refuse(root, Path::new(""), Permission::Read, "confinement");
            }
        }
        Ok(dirs)
    }
}

impl fs::Host for PolicedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<fs::ErrorCode> {
        fs::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<fs::ErrorCode>> {
        if self
            .fs
            .table
            .get(&err)?
            .downcast_ref::<OutOfQuota>()
            .is_some()
        {
            return Ok(Some(fs::ErrorCode::Quota));
        }
        fs::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl fs::HostDescriptor for PolicedFs<'_> {
    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let writes = oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE)
            || flags.intersects(fs::DescriptorFlags::WRITE | fs::DescriptorFlags::MUTATE_DIRECTORY);
        let op = if writes {
            Permission::Write
        } else {
            Permission::Read
        };
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        if self.guard.held() >= MAX_DESCRIPTORS {
            let h = self.guard.handle(fd.rep(), op)?;
            let shown = h.rel.join(&path);
            return Err(self
                .guard
                .refuse(Some(h.mount), &shown, op, "too_many_descriptors"));
        }
        // In a trash, only an exclusive create for writing (a copy kept when
        // a hard link is impossible).
        let h = self.guard.handle(fd.rep(), op)?;
        if self.guard.mounts[h.mount].trash
            && !(oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE)
                && flags.contains(fs::DescriptorFlags::WRITE)
                && !flags.contains(fs::DescriptorFlags::READ))
        {
            return Err(self
                .guard
                .refuse(Some(h.mount), &h.rel.join(&path), op, "trash"));
        }
        let creates = oflags.contains(fs::OpenFlags::CREATE)
            && !matches!(self.probe_at(&fd, &path, follow)?, Probe::Found(_));
        let checked = if oflags.contains(fs::OpenFlags::CREATE) {
            self.check_new(&fd, &path, op)?;
            // An existing target is checked like any other (it may be an alias).
            let checked = self.check_existing(&fd, &path, op, follow, true)?;
            // Creating through a symlink whose target is missing would create
            // a file the checks never saw (`notes.txt -> .env`): refused, as
            // if the target's place were missing, the answer a denied
            // existing target gets too.
            if follow && self.is_dangling_symlink(&fd, &path)? {
                self.guard
                    .refuse(Some(checked.mount), &checked.rel, op, "confinement");
                return Err(ErrorCode::NoEntry.into());
            }
            checked
        } else if op == Permission::Read {
            let reopen = oflags == fs::OpenFlags::empty() && flags == fs::DescriptorFlags::READ;
            match self.read_open(&fd, &path, follow, reopen)? {
                ReadOpen::Opened(new) => return Ok(new),
                ReadOpen::General(checked) => checked,
            }
        } else {
            self.check_existing(&fd, &path, op, follow, true)?
        };
        let dir = again(&fd);
        let opened = fs::HostDescriptor::open_at(&mut self.fs, fd, path_flags, path, oflags, flags)
            .inspect_err(|_| self.check_exhaustion(&dir));
        let new = self.disk_noted(dir.rep(), opened)?;
        let real = {
            let opened = raw_fd(self.fs.table.get(&new)?);
            self.guard.real(&checked, opened, &checked.rel, op)
        };
        match real {
            Ok(rel) => {
                if creates && self.guard.mounts[checked.mount].trash {
                    // A copy kept where a hard link is impossible.
                    self.guard.keep_copy(checked.mount, &rel);
                    self.guard.copies.insert((checked.mount, rel.clone()));
                } else if creates {
                    self.guard.created.insert((checked.mount, rel.clone()));
                }
                self.guard.handles.insert(
                    new.rep(),
                    Handle {
                        mount: checked.mount,
                        rel,
                    },
                );
                self.guard.activity.count_opened();
                Ok(new)
            }
            Err(refused) => {
                fs::HostDescriptor::drop(&mut self.fs, new).map_err(FsError::trap)?;
                Err(refused)
            }
        }
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::DescriptorStat> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Read, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        let mut stat =
            fs::HostDescriptor::stat_at(&mut self.fs, again(&fd), path_flags, path.clone())?;
        if stat.type_ == fs::DescriptorType::Unknown
            && let Probe::Found(probe) = self.probe_at(&fd, &path, follow)?
            && let Ok(st) = rustix::fs::fstat(&probe)
        {
            stat.type_ = wasi_type(st.st_mode);
        }
        Ok(as_seen(stat))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::MetadataHashValue> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Read, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        fs::HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let h = self.check_existing(&fd, &path, Permission::Read, false, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        let target = fs::HostDescriptor::readlink_at(&mut self.fs, fd, path)?;
        // A link's text must not tell the guest about what lies outside the
        // root or behind a denied name.
        let parent = h.rel.parent().unwrap_or(Path::new(""));
        match join_lexically(parent, Path::new(&target)) {
            None => Err(self
                .guard
                .refuse(Some(h.mount), &h.rel, Permission::Read, "confinement")),
            Some(to)
                if self.guard.mounts[h.mount]
                    .root
                    .deny
                    .match_path(&to)
                    .is_some()
                    || self.guard.mounts[h.mount]
                        .root
                        .deny
                        .match_path(Path::new(&target))
                        .is_some() =>
            {
                Err(self
                    .guard
                    .refuse(Some(h.mount), &h.rel, Permission::Read, "deny"))
            }
            Some(_) => Ok(target),
        }
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let h = self.check_existing(&fd, &path, Permission::Write, follow, false)?;
        self.guard.not_trash(&h, &h.rel, Permission::Write)?;
        fs::HostDescriptor::set_times_at(&mut self.fs, fd, path_flags, path, atim, mtim)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let dir = self.check_new(&fd, &path, Permission::Write)?;
        // A trash mount reaches `.mcp-trash` itself, a hidden entry: making
        // it answers the same whether it was there or not.
        if self.guard.mounts[dir.mount].trash
            && dir.rel == Path::new(TRASH_DIR)
            && self.is_directory(&fd, &path)?
        {
            return Ok(());
        }
        let rep = fd.rep();
        let made = fs::HostDescriptor::create_directory_at(&mut self.fs, fd, path);
        self.disk_noted(rep, made)?;
        self.guard.created.insert((dir.mount, dir.rel));
        Ok(())
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: fs::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let follow = old_path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let old = self.check_existing(&fd, &old_path, Permission::Write, follow, true)?;
        self.guard.not_trash(&old, &old.rel, Permission::Write)?;
        let new = self.check_new(&new_descriptor, &new_path, Permission::Write)?;
        self.guard.not_mount_top(&old, Permission::Write)?;
        self.guard.staging_bounds(&old, &new, Permission::Write)?;
        let before = self.stat_of(&fd, &old_path, follow)?;
        let inode = before.as_ref().map(|st| (st.st_dev, st.st_ino));
        let into_trash = self.guard.mounts[new.mount].trash;
        if into_trash {
            self.never_replace_in_trash(&new_descriptor, &new_path, &new)?;
        }
        if !self.guard.same_root(old.mount, new.mount) {
            return Err(self.guard.refuse(
                Some(new.mount),
                &new.rel,
                Permission::Write,
                "confinement",
            ));
        }
        let rep = new_descriptor.rep();
        let linked = fs::HostDescriptor::link_at(
            &mut self.fs,
            again(&fd),
            old_path_flags,
            old_path.clone(),
            new_descriptor,
            new_path,
        );
        self.disk_noted(rep, linked)?;
        if into_trash && let Some(inode) = inode {
            self.guard.kept_inodes.insert(inode);
            // The new link changed the file's change time: a file this call
            // read, unchanged until this link, is still the file it read.
            let key = (old.mount, old.rel.clone());
            if before.as_ref().map(Identity::of) == self.guard.read.get(&key).copied()
                && let Some(after) = self.stat_of(&fd, &old_path, follow)?
            {
                self.guard.read.insert(key, Identity::of(&after));
            }
        }
        self.guard.keep(&old, &new);
        Ok(())
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let link = self.check_new(&fd, &dest_path, Permission::Write)?;
        self.guard.not_trash(&link, &link.rel, Permission::Write)?;
        // Nothing a tool publishes needs one, and a link would point
        // elsewhere once moved.
        if self.guard.mounts[link.mount].staging {
            return Err(self.guard.refuse(
                Some(link.mount),
                &link.rel,
                Permission::Write,
                "staging",
            ));
        }
        // A new link may only point down from where it sits: no absolute
        // target and no `..`, so no chain of links can climb out of the root.
        let target = Path::new(&src_path);
        if target
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(self.guard.refuse(
                Some(link.mount),
                &link.rel,
                Permission::Write,
                "confinement",
            ));
        }
        if self.guard.mounts[link.mount]
            .root
            .deny
            .match_path(target)
            .is_some()
        {
            return Err(self
                .guard
                .refuse(Some(link.mount), &link.rel, Permission::Write, "deny"));
        }
        let rep = fd.rep();
        let made = fs::HostDescriptor::symlink_at(&mut self.fs, fd, src_path, dest_path);
        self.disk_noted(rep, made)
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        if let Some(copy) = self.own_copy(&fd, &path) {
            fs::HostDescriptor::unlink_file_at(&mut self.fs, fd, path)?;
            let to = copy.1.to_string_lossy();
            self.guard.kept.retain(|k| k.to != to);
            self.guard.copies.remove(&copy);
            return Ok(());
        }
        let target = self.check_removal(&fd, &path)?;
        fs::HostDescriptor::unlink_file_at(&mut self.fs, fd, path)?;
        self.guard.forget_under(target.mount, &target.rel);
        Ok(())
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let target = self.check_removal(&fd, &path)?;
        fs::HostDescriptor::remove_directory_at(&mut self.fs, fd, path)?;
        self.guard.forget_under(target.mount, &target.rel);
        Ok(())
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let new = self.check_new(&new_fd, &new_path, Permission::Write)?;
        let into_trash = self.guard.mounts[new.mount].trash;
        let old_mount = self.guard.handle(fd.rep(), Permission::Write)?.mount;
        let across = !self.guard.same_root(old_mount, new.mount);
        // Taking an entry out of its place, into the trash or to another
        // root, is a delete there; a rename within a root is a write.
        let op = if into_trash || across {
            Permission::Delete
        } else {
            Permission::Write
        };
        let old = self.check_existing(&fd, &old_path, op, false, false)?;
        self.guard.not_trash(&old, &old.rel, op)?;
        self.guard.not_mount_top(&old, op)?;
        self.guard.not_mount_top(&new, Permission::Write)?;
        self.guard.staging_bounds(&old, &new, op)?;
        if self.guard.mounts[old.mount].staging && !self.guard.mounts[new.mount].staging {
            let published = self.publish(&fd, &old_path, &new_fd, &new_path, &old, &new);
            return self.disk_noted(new_fd.rep(), published);
        }
        if into_trash {
            if across {
                // Into another root's trash: never.
                return Err(self.guard.refuse(Some(new.mount), &new.rel, op, "trash"));
            }
            self.never_replace_in_trash(&new_fd, &new_path, &new)?;
        } else if across
            && self.is_directory(&fd, &old_path)?
            && !self.guard.same_deny(old.mount, new.mount)
        {
            // A directory carries entries hidden by its root's deny list; in
            // a root that denies less they would appear.
            return Err(self
                .guard
                .refuse(Some(old.mount), &old.rel, Permission::Write, "deny"));
        }
        self.carry_mode(&fd, &old_path, &new_fd, &new_path)?;
        let rep = new_fd.rep();
        let renamed = fs::HostDescriptor::rename_at(&mut self.fs, fd, old_path, new_fd, new_path);
        self.disk_noted(rep, renamed)?;
        self.guard.forget_under(old.mount, &old.rel);
        // What was at the new name is gone: descriptors of it, and any
        // "created by this call" mark, no longer apply.
        self.guard.forget_under(new.mount, &new.rel);
        self.guard.keep(&old, &new);
        Ok(())
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<fs::DirectoryEntryStream>> {
        let h = self.tracked(&fd, Permission::Read)?;
        self.guard.not_trash(&h, &h.rel, Permission::Read)?;
        if !self.guard.perms(h.mount).contains(Permission::Read) {
            return Err(self
                .guard
                .refuse(Some(h.mount), &h.rel, Permission::Read, "permission"));
        }
        if self.guard.held() >= MAX_DESCRIPTORS {
            return Err(self.guard.refuse(
                Some(h.mount),
                &h.rel,
                Permission::Read,
                "too_many_descriptors",
            ));
        }
        // A descriptor of its own: its own position, and the guest may drop
        // the directory's descriptor before the stream.
        let own = rustix::fs::openat(
            self.dir_fd(&fd)?,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.os_error(e))?;
        let dir = rustix::fs::Dir::new(own).map_err(|e| self.os_error(e))?;
        let stream = self.fs.table.push(DirStream(dir))?;
        self.guard.streams.insert(stream.rep(), h);
        self.guard.activity.count_dir_read();
        Ok(Resource::new_own(stream.rep()))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.guard.handles.remove(&fd.rep());
        fs::HostDescriptor::drop(&mut self.fs, fd)
    }

    // Operations on an open descriptor: its path was checked when it was
    // opened; only tracking (and write permission for changes) is checked.
    // Bytes moved are metered (see `meter`): streams are handed out wrapped.

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        self.readable(&fd)?;
        let stream = fs::HostDescriptor::read_via_stream(&mut self.fs, fd, offset)?;
        let inner = self.fs.table.delete(stream)?;
        let metered = self.guard.meter.input(inner);
        Ok(self.fs.table.push(metered)?)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let h = self.tracked(&fd, Permission::Write)?;
        let stream = fs::HostDescriptor::write_via_stream(&mut self.fs, fd, offset)?;
        self.metered_output(stream, &h)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let h = self.tracked(&fd, Permission::Write)?;
        let stream = fs::HostDescriptor::append_via_stream(&mut self.fs, fd)?;
        self.metered_output(stream, &h)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
        len: fs::Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        fs::HostDescriptor::advise(&mut self.fs, fd, offset, len, advice)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        let rep = fd.rep();
        let synced = fs::HostDescriptor::sync_data(&mut self.fs, fd);
        self.disk_noted(rep, synced)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorFlags> {
        self.tracked(&fd, Permission::Read)?;
        fs::HostDescriptor::get_flags(&mut self.fs, fd)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorType> {
        self.tracked(&fd, Permission::Read)?;
        let ty = fs::HostDescriptor::get_type(&mut self.fs, again(&fd))?;
        if ty == fs::DescriptorType::Unknown
            && let Ok(st) = rustix::fs::fstat(self.dir_fd(&fd)?)
        {
            return Ok(wasi_type(st.st_mode));
        }
        Ok(ty)
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: fs::Filesize) -> FsResult<()> {
        self.tracked(&fd, Permission::Write)?;
        let rep = fd.rep();
        let sized = fs::HostDescriptor::set_size(&mut self.fs, fd, size);
        self.disk_noted(rep, sized)
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        self.tracked(&fd, Permission::Write)?;
        fs::HostDescriptor::set_times(&mut self.fs, fd, atim, mtim)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: fs::Filesize,
        offset: fs::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.readable(&fd)?;
        let meter = Arc::clone(&self.guard.meter);
        let grant = meter.read_grant(len);
        let read = fs::HostDescriptor::read(&mut self.fs, fd, grant.size, offset);
        let got = read.as_ref().map_or(0, |(bytes, _)| bytes.len() as u64);
        meter.read_done(grant, got).map_err(|_| quota_error())?;
        read
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        mut buf: Vec<u8>,
        offset: fs::Filesize,
    ) -> FsResult<fs::Filesize> {
        let h = self.tracked(&fd, Permission::Write)?;
        let root = &self.guard.mounts[h.mount].root;
        super::meter::reserve(&self.guard.activity, root, buf.len() as u64)
            .map_err(FsError::from)?;
        let meter = Arc::clone(&self.guard.meter);
        // A short write is a write: only what the quota grants is written.
        let granted = meter
            .write_grant(buf.len() as u64)
            .map_err(|_| quota_error())?;
        buf.truncate(granted as usize);
        let rep = fd.rep();
        let wrote = fs::HostDescriptor::write(&mut self.fs, fd, buf, offset);
        meter.wrote(granted, *wrote.as_ref().unwrap_or(&0));
        self.disk_noted(rep, wrote)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.tracked(&fd, Permission::Read)?;
        let rep = fd.rep();
        let synced = fs::HostDescriptor::sync(&mut self.fs, fd);
        self.disk_noted(rep, synced)
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorStat> {
        self.readable(&fd)?;
        let mut stat = fs::HostDescriptor::stat(&mut self.fs, again(&fd))?;
        if stat.type_ == fs::DescriptorType::Unknown
            && let Ok(st) = rustix::fs::fstat(self.dir_fd(&fd)?)
        {
            stat.type_ = wasi_type(st.st_mode);
        }
        Ok(as_seen(stat))
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        // Untracked, or in a trash (which tells nothing back): never the same.
        let told = |h: Option<&Handle>| h.is_some_and(|h| !self.guard.mounts[h.mount].trash);
        if !told(self.guard.handles.get(&a.rep())) || !told(self.guard.handles.get(&b.rep())) {
            return Ok(false);
        }
        fs::HostDescriptor::is_same_object(&mut self.fs, a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::MetadataHashValue> {
        self.readable(&fd)?;
        fs::HostDescriptor::metadata_hash(&mut self.fs, fd)
    }
}

impl fs::HostDirectoryEntryStream for PolicedFs<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<fs::DirectoryEntryStream>,
    ) -> FsResult<Option<fs::DirectoryEntry>> {
        let Some(h) = self.guard.streams.get(&stream.rep()).cloned() else {
            return Err(self.guard.refuse(
                None,
                Path::new(""),
                Permission::Read,
                "untracked_descriptor",
            ));
        };
        let deny = &self.guard.mounts[h.mount].root.deny;
        let DirStream(dir) = self.fs.table.get_mut(&DirStream::of(&stream))?;
        loop {
            let entry = match dir.read() {
                None => return Ok(None),
                Some(entry) => entry.map_err(io_error)?,
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                return Err(ErrorCode::IllegalByteSequence.into());
            };
            // Denied names are never seen, let alone looked at.
            if deny.hides(OsStr::new(name)) {
                continue;
            }
            let type_ = match entry.file_type() {
                FileType::Unknown => {
                    // An entry name is one component: no traversal is possible.
                    rustix::fs::statat(
                        dir.fd().map_err(io_error)?,
                        name,
                        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                    )
                    .map_or(fs::DescriptorType::Unknown, |st| wasi_type(st.st_mode))
                }
                t => wasi_file_type(t),
            };
            return Ok(Some(fs::DirectoryEntry {
                type_,
                name: name.to_string(),
            }));
        }
    }

    fn drop(&mut self, stream: Resource<fs::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.guard.streams.remove(&stream.rep());
        self.fs.table.delete(DirStream::of(&stream))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_join_stays_below_the_root() {
        let j = |base: &str, p: &str| join_lexically(Path::new(base), Path::new(p));
        assert_eq!(j("", "a/b"), Some(PathBuf::from("a/b")));
        assert_eq!(j("a", "../b"), Some(PathBuf::from("b")));
        assert_eq!(j("a", "./b/../c"), Some(PathBuf::from("a/c")));
        assert_eq!(j("", ".."), None);
        assert_eq!(j("a", "../../b"), None);
        assert_eq!(j("a", "/etc/passwd"), None);
        assert_eq!(j("", ""), Some(PathBuf::new()));
    }

    /// A descriptor the guard did not hand out (the component model makes
    /// handles unforgeable; this is the defence behind that) is refused for
    /// every operation, and the refusal is recorded.
    #[test]
    fn untracked_descriptors_are_refused_and_recorded() {
        let mut guard = FsGuard::new(vec![], None, Arc::default(), None);
        for op in Permission::ALL {
            assert!(guard.handle(7, op).is_err());
        }
        let refusals = guard.take_refusals();
        assert_eq!(refusals.len(), 3);
        assert!(refusals.iter().all(|r| r.rule == "untracked_descriptor"));
    }

    #[test]
    fn plain_names() {
        assert!(is_plain_name("a.txt"));
        assert!(is_plain_name(".env"));
        assert!(!is_plain_name("a/b"));
        assert!(!is_plain_name(".."));
        assert!(!is_plain_name("."));
        assert!(!is_plain_name(""));
    }
}
