//! Resolution beneath a mount: `openat2(RESOLVE_BENEATH)` probes that open
//! nothing for reading, the real path of a descriptor, a symlink met on the
//! way, and the WASI names of file types. Decides nothing: callers do.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::path::DecInt;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::FsError;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;

use super::Handle;
use crate::policy::normalise_lexically;
use crate::sys::openat2::{O_PATH, ResolveFlags, openat2};

/// How a checked path is used: looked up as something that exists, or as a
/// name about to be created (see [`FsGuard::denied`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    Existing,
    New,
}

/// `base` joined with the relative `path`, `..` resolved lexically; `None`
/// for an absolute path or one climbing above the root.
pub(super) fn join_lexically(base: &Path, path: &Path) -> Option<PathBuf> {
    if path
        .components()
        .any(|c| matches!(c, Component::RootDir | Component::Prefix(_)))
    {
        return None;
    }
    normalise_lexically(base.join(path))
}

/// Whether `path` names a direct entry of its directory (one plain name):
/// then, without following symlinks, its real path is the directory's plus
/// the name, and no probe is needed.
pub(super) fn is_plain_name(path: &str) -> bool {
    !path.is_empty() && path != "." && path != ".." && !path.contains('/')
}

/// The real path of an open descriptor: its link in `/proc/self/fd`.
pub(super) fn real_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let link = rustix::fs::readlinkat(proc_self_fd()?, DecInt::from_fd(fd), Vec::new()).ok()?;
    Some(std::ffi::OsString::from_vec(link.into_bytes()).into())
}

/// Opens the file `fd` (an `O_PATH` descriptor) is, for reading: the same
/// file, found again by no name.
pub(super) fn reopen_for_reading(fd: BorrowedFd<'_>) -> rustix::io::Result<OwnedFd> {
    reopen(fd, OFlags::RDONLY)
}

/// Opens the file `fd` (an `O_PATH` descriptor) is, with `access` (and
/// close-on-exec, no controlling terminal): the inode checked is the inode
/// opened, whatever has been renamed over its name since.
pub(super) fn reopen(fd: BorrowedFd<'_>, access: OFlags) -> rustix::io::Result<OwnedFd> {
    let proc_fd = proc_self_fd().ok_or(rustix::io::Errno::NOENT)?;
    rustix::fs::openat(
        proc_fd,
        DecInt::from_fd(fd),
        access | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// `/proc/self/fd`, opened once for the process (a lookup of `/proc/self`
/// per call cost as much as the rest of a read's checks) and checked to be
/// procfs with nothing mounted over it.
#[cfg(target_os = "linux")]
fn proc_self_fd() -> Option<BorrowedFd<'static>> {
    rustix_linux_procfs::proc_self_fd().ok()
}

/// No `/proc` off Linux: no real path, no reopen (and no serving, see
/// [`self_test`]).
#[cfg(not(target_os = "linux"))]
fn proc_self_fd() -> Option<BorrowedFd<'static>> {
    None
}

/// What probing a path found.
pub(super) enum Probe {
    /// It exists: an `O_PATH` descriptor of it.
    Found(OwnedFd),
    /// Resolving it would leave the root (`EXDEV` from `RESOLVE_BENEATH`).
    Escapes,
    /// Missing, or unreachable in a way the operation itself will hit the
    /// same way (not a directory, a symlink loop, no access): the error
    /// that said so.
    Absent(rustix::io::Errno),
    /// The probe failed for a reason that says nothing about the path
    /// (e.g. `openat2` filtered by seccomp): refuse, never fall back to the
    /// lexical check alone.
    Failed,
    /// The process has no descriptor free for the probe.
    NoDescriptors,
}

/// Opens `path` under `dir` as `O_PATH`, never leaving `dir` (the same
/// resolution cap-std applies to the real operation).
pub(super) fn probe(dir: BorrowedFd<'_>, path: &str, follow: bool) -> Probe {
    let mut flags = O_PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let path = if path.is_empty() { "." } else { path };
    use rustix::io::Errno;
    // openat2 returns EAGAIN when a rename raced the lookup of a path with `..`.
    for _ in 0..4 {
        match openat2(
            dir,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Probe::Found(fd),
            Err(Errno::XDEV) => return Probe::Escapes,
            Err(
                e @ (Errno::NOENT
                | Errno::NOTDIR
                | Errno::LOOP
                | Errno::NAMETOOLONG
                | Errno::ACCESS),
            ) => return Probe::Absent(e),
            Err(Errno::AGAIN) => continue,
            Err(Errno::MFILE | Errno::NFILE) => return Probe::NoDescriptors,
            Err(_) => return Probe::Failed,
        }
    }
    Probe::Failed
}

/// What resolving `path` under `dir` without following any symlink found.
pub(super) enum Direct {
    /// No symlink on the way (a final one counted only when `follow`): the
    /// path's `O_PATH` descriptor, the one [`probe`] would open.
    Found(OwnedFd),
    /// A symlink on the way, or no descriptor free to tell.
    Symlink,
    /// Something else (missing, escaping…): [`probe`] says what.
    Other,
}

/// Resolves `path` under `dir` with `openat2(RESOLVE_NO_SYMLINKS)`: whether
/// a symlink is on the way, and the probe itself when none is (one lookup
/// for both, the common case).
pub(super) fn without_symlinks(dir: BorrowedFd<'_>, path: &str, follow: bool) -> Direct {
    let mut flags = O_PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let path = if path.is_empty() { "." } else { path };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    // Out of descriptors, it cannot tell: the steps are checked then, and
    // their probes say the call ran out (never a check skipped).
    match openat2(dir, path, flags, Mode::empty(), resolve) {
        Ok(fd) => Direct::Found(fd),
        Err(e) if e == rustix::io::Errno::LOOP || is_exhaustion(e) => Direct::Symlink,
        Err(_) => Direct::Other,
    }
}

/// Checks at start that the kernel gives what the policing filesystem
/// relies on: `openat2` with `RESOLVE_BENEATH` (Linux 5.6+) and
/// `/proc/self/fd` to read a descriptor's real path. The first call opens
/// the process's handle on `/proc/self/fd`: make it before the kernel
/// sandbox, which would refuse that open.
pub fn self_test() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err(format!(
            "loom-fs does not run on {} yet: it confines every path with Linux's \
             openat2(RESOLVE_BENEATH) and /proc/self/fd, and has no portable confinement \
             yet; it will not serve unconfined ({})",
            std::env::consts::OS,
            crate::sys::sandbox::unavailable()
        ));
    }
    // `O_PATH`, as the probes are: it reads nothing, so it also works in a
    // process the kernel sandbox has restricted to its roots.
    let root = rustix::fs::open("/", O_PATH | OFlags::CLOEXEC, Mode::empty())
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
        _ => Err("/proc/self/fd is unavailable or not procfs: mount /proc".into()),
    }
}

pub(super) fn is_special(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        matches!(
            crate::sys::stat::file_type(&st),
            FileType::Fifo | FileType::Socket | FileType::CharacterDevice | FileType::BlockDevice
        )
    })
}

/// The WASI type of a file type, for the kinds wasmtime-wasi reports as
/// `unknown` (it has no FIFO or socket type): guests see what the file
/// really is.
pub(super) fn wasi_file_type(t: FileType) -> fs::DescriptorType {
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
pub(super) enum ReadOpen {
    /// Opened the file itself, from its probe.
    Opened(Resource<Descriptor>),
    /// Left the open to wasmtime-wasi; the handle to check it against.
    General(Handle),
}

/// A directory entry stream of the policing filesystem. The guest knows it
/// as a `wasi:filesystem` `directory-entry-stream`; only this module ever
/// touches it, so it needs none of wasmtime-wasi's own stream type. Unlike
/// that one, it reads entries a buffer at a time as the guest asks for them
/// rather than all at once, takes each
/// entry's type from the directory itself, and never looks at a denied
/// entry (wasmtime-wasi's reads every entry's metadata up front).
///
/// The kernel's entries are read a batch at a time ([`DirSource`]), and
/// what a read brought is sorted at once into the entries the guest may
/// see, their names end to end in one string: no allocation per entry but
/// the name handed to the guest.
pub(super) struct DirStream {
    /// Where more entries come from; none for a listing made whole (in
    /// the call's view: see `view`).
    pub(super) source: Option<DirSource>,
    /// The listing (the directory's descriptor, an id) whose regular files
    /// go into [`Listed`].
    pub(super) listing: Option<(u32, u64)>,
    /// The names of the entries read ahead, end to end.
    pub(super) names: String,
    /// Each entry read ahead: where its name ends in `names`, and its type,
    /// or `None` for a name that is not UTF-8 (which WASI cannot carry).
    pub(super) ahead: Vec<(usize, Option<fs::DescriptorType>)>,
    /// How many of `ahead` the guest has had.
    pub(super) given: usize,
    /// Where the next name starts in `names`.
    pub(super) start: usize,
    /// The directory's end was read, or its read failed: nothing more.
    pub(super) done: bool,
}

/// Bytes of names [`Listed`] holds at most: a directory of about 200,000
/// short names; the files of a larger one past that are stat'ed first.
const LISTED_BYTES: usize = 4 << 20;

/// The regular files of the directory listed last, as its entries said,
/// once the listing is read to its end: what `PolicedFs::read_open_plain`
/// opens by name (it checks what it opened), and what the read-ahead may
/// open. Only while the directory's real path, read when a file of the
/// listing is first opened, is the path its descriptor was checked with
/// ([`Listed::holds`]). One
/// listing at a time, as a walk goes: it reads a directory, then opens its
/// files. Each listing has an id of its own, so a stream of a directory
/// whose descriptor number was handed out again adds nothing to another's.
#[derive(Default)]
pub(super) struct Listed {
    /// The directory's descriptor and the listing's id.
    of: Option<(u32, u64)>,
    complete: bool,
    /// The names end to end (one copy, no allocation per name: a listing
    /// no file of is opened costs little), and where each ends.
    names: String,
    ends: Vec<u32>,
    /// Indexes into `ends` in name order, made when the listing is complete.
    order: Vec<u32>,
    /// Whether the directory's real path was the one its descriptor was
    /// checked with, when a file of the listing was first opened.
    pub(super) holds: Option<bool>,
}

impl Listed {
    /// Starts over for `listing`, a directory's descriptor and an id.
    pub(super) fn start(&mut self, listing: (u32, u64)) {
        self.of = Some(listing);
        self.complete = false;
        self.holds = None;
        self.names.clear();
        self.ends.clear();
        self.order.clear();
    }

    /// `name`, a regular file in `listing`.
    pub(super) fn add(&mut self, listing: (u32, u64), name: &str) {
        if self.of == Some(listing)
            && !self.complete
            && self.names.len() + name.len() <= LISTED_BYTES
        {
            self.names.push_str(name);
            self.ends.push(self.names.len() as u32);
        }
    }

    /// `listing` was read to its end (a listing larger than
    /// `LISTED_BYTES` never is: its files are opened the general way).
    pub(super) fn complete(&mut self, listing: (u32, u64)) {
        if self.of != Some(listing) || self.complete {
            return;
        }
        if self.names.len() + 255 > LISTED_BYTES {
            *self = Listed::default();
            return;
        }
        self.complete = true;
    }

    /// The names in name order, sorted when first asked (a listing no
    /// file of is opened, a glob's, is never sorted here).
    fn sort(&mut self) {
        if self.order.len() == self.ends.len() {
            return;
        }
        let mut order: Vec<u32> = (0..self.ends.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.name(a).cmp(self.name(b)));
        self.order = order;
    }

    fn name(&self, i: u32) -> &str {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.names[start..self.ends[i] as usize]
    }

    /// Whether `name` was a regular file in the complete listing of the
    /// directory of descriptor `dir`.
    pub(super) fn is_file(&mut self, dir: u32, name: &str) -> bool {
        if !self.complete || !self.of.is_some_and(|(d, _)| d == dir) {
            return false;
        }
        self.sort();
        self.order
            .binary_search_by(|&i| self.name(i).cmp(name))
            .is_ok()
    }

    /// The regular files of `dir` after `name`, in name order.
    pub(super) fn after(&mut self, dir: u32, name: &str) -> Vec<Box<str>> {
        if !self.complete || !self.of.is_some_and(|(d, _)| d == dir) {
            return Vec::new();
        }
        self.sort();
        let from = self.order.partition_point(|&i| self.name(i) <= name);
        self.order[from..]
            .iter()
            .map(|&i| self.name(i).into())
            .collect()
    }

    /// Forgets the listing of `dir`, whose descriptor is dropped.
    pub(super) fn forget(&mut self, dir: u32) {
        if self.of.is_some_and(|(d, _)| d == dir) {
            *self = Listed::default();
        }
    }
}

/// `name` under `dir` opened for reading by its name, never following a
/// symlink nor waiting (`O_NONBLOCK`: a FIFO renamed there opens at once,
/// and is closed unread), kept only if `fstat` says it is a regular file,
/// then made blocking again: the file and its metadata, `None` for
/// anything else; an error is the open's.
pub(super) fn open_regular(
    dir: BorrowedFd<'_>,
    name: &str,
) -> rustix::io::Result<Option<(OwnedFd, rustix::fs::Stat)>> {
    let how =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = rustix::fs::openat(dir, name, how, Mode::empty())?;
    let st = rustix::fs::fstat(&file)?;
    if crate::sys::stat::file_type(&st) != FileType::RegularFile {
        return Ok(None);
    }
    rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
    Ok(Some((file, st)))
}

/// Where a stream's entries come from. On Linux, the directory itself,
/// read with `getdents64` into the call's scratch buffer (rustix's `Dir`
/// made a `CString` of every name and grew its buffer from 768 bytes: 7
/// reads for 1,000 entries); elsewhere rustix's `Dir`.
#[cfg(target_os = "linux")]
pub(super) struct DirSource(OwnedFd);
#[cfg(not(target_os = "linux"))]
pub(super) struct DirSource(rustix::fs::Dir);

/// Bytes one `getdents64` may fill: about 500 short names. What a stream
/// holds between reads is at most the visible names of one read, and a
/// call may hold `MAX_DESCRIPTORS` streams.
#[cfg(target_os = "linux")]
const READ_BYTES: usize = 16 * 1024;

impl DirSource {
    #[cfg(target_os = "linux")]
    pub(super) fn new(fd: OwnedFd) -> rustix::io::Result<DirSource> {
        Ok(DirSource(fd))
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn new(fd: OwnedFd) -> rustix::io::Result<DirSource> {
        rustix::fs::Dir::new(fd).map(DirSource)
    }

    /// Reads the next batch of the directory's entries, handing each but
    /// `.` and `..` to `each` with the directory, the entry's name and its
    /// type as the directory tells it. `Ok(false)` once the end is read.
    /// Only the read that starts a batch can fail.
    #[cfg(target_os = "linux")]
    pub(super) fn read(
        &mut self,
        scratch: &mut Vec<u8>,
        mut each: impl FnMut(BorrowedFd<'_>, &[u8], rustix::fs::FileType),
    ) -> rustix::io::Result<bool> {
        scratch.reserve(READ_BYTES);
        let buf = &mut scratch.spare_capacity_mut()[..READ_BYTES];
        let mut raw = rustix::fs::RawDir::new(&self.0, buf);
        loop {
            let entry = match raw.next() {
                None | Some(Err(rustix::io::Errno::NOENT)) => return Ok(false),
                Some(Err(e)) => return Err(e),
                Some(Ok(entry)) => entry,
            };
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                each(self.0.as_fd(), name, entry.file_type());
            }
            if raw.is_buffer_empty() {
                return Ok(true);
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn read(
        &mut self,
        _scratch: &mut Vec<u8>,
        mut each: impl FnMut(BorrowedFd<'_>, &[u8], rustix::fs::FileType),
    ) -> rustix::io::Result<bool> {
        for _ in 0..512 {
            let Some(entry) = self.0.read() else {
                return Ok(false);
            };
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                each(self.0.fd()?, name, entry.file_type());
            }
        }
        Ok(true)
    }
}

impl DirStream {
    pub(super) fn new(fd: OwnedFd) -> rustix::io::Result<DirStream> {
        Ok(DirStream {
            source: Some(DirSource::new(fd)?),
            listing: None,
            names: String::new(),
            ahead: Vec::new(),
            given: 0,
            start: 0,
            done: false,
        })
    }

    /// A stream of `entries` (name and type), all known already.
    pub(super) fn listed(entries: Vec<(String, fs::DescriptorType)>) -> DirStream {
        let mut names = String::new();
        let mut ahead = Vec::with_capacity(entries.len());
        for (name, ty) in entries {
            names.push_str(&name);
            ahead.push((names.len(), Some(ty)));
        }
        DirStream {
            source: None,
            listing: None,
            names,
            ahead,
            given: 0,
            start: 0,
            done: true,
        }
    }

    /// This stream's table entry, from the guest's handle.
    pub(super) fn of(stream: &Resource<fs::DirectoryEntryStream>) -> Resource<DirStream> {
        if stream.owned() {
            Resource::new_own(stream.rep())
        } else {
            Resource::new_borrow(stream.rep())
        }
    }
}

/// `e` as the guest sees it: wasmtime-wasi's code for it, or, for the OS
/// errors it folds into the generic `io` though WASI has a code of their
/// own, that code (a rename across filesystems is `cross-device`, on which
/// the built-in tools copy instead).
pub(super) fn io_error(e: rustix::io::Errno) -> FsError {
    use rustix::io::Errno;
    match e {
        Errno::XDEV => ErrorCode::CrossDevice.into(),
        Errno::DQUOT => ErrorCode::Quota.into(),
        Errno::ROFS => ErrorCode::ReadOnly.into(),
        Errno::TXTBSY => ErrorCode::TextFileBusy.into(),
        _ => FsError::from(std::io::Error::from(e)),
    }
}

/// Whether `e` says the process (or the system) has no descriptor free.
pub(super) fn is_exhaustion(e: rustix::io::Errno) -> bool {
    matches!(e, rustix::io::Errno::MFILE | rustix::io::Errno::NFILE)
}

pub(super) fn raw_fd(d: &Descriptor) -> BorrowedFd<'_> {
    match d {
        Descriptor::File(f) => f.file.as_fd(),
        Descriptor::Dir(d) => d.dir.as_fd(),
    }
}

/// Makes a new borrow of a resource, to delegate after inspecting it.
pub(super) fn again<T: 'static>(r: &Resource<T>) -> Resource<T> {
    Resource::new_borrow(r.rep())
}

#[cfg(test)]
mod tests {
    use super::Listed;

    #[test]
    fn a_listing_is_used_complete_and_only_for_its_own_stream() {
        let mut listed = Listed::default();
        listed.start((4, 1));
        for name in ["b", "c", "a"] {
            listed.add((4, 1), name);
        }
        // A stream of an earlier directory that had the same descriptor
        // number adds nothing.
        listed.add((4, 0), "x");
        assert!(!listed.is_file(4, "a"), "used before it is complete");
        listed.complete((4, 1));
        listed.add((4, 1), "late");
        assert!(listed.is_file(4, "a") && listed.is_file(4, "c"));
        assert!(!listed.is_file(4, "x") && !listed.is_file(4, "late"));
        assert!(!listed.is_file(5, "a"), "another descriptor");
        assert_eq!(
            listed.after(4, "a"),
            vec!["b".into(), "c".into()] as Vec<Box<str>>
        );
        listed.forget(4);
        assert!(!listed.is_file(4, "a"));
    }
}
