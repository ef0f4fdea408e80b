//! The trash from the operator's side: the index the host keeps of what
//! each call kept, and listing, restoring and purging it from the command
//! line (`loom-fs-mcp trash …`).
//!
//! A tool that replaces or deletes something first moves or hard-links it to
//! `<root>/.mcp-trash/<stamp>/<path>` (see [`crate::runtime::fs`]). The
//! files alone do not say what was kept: `.mcp-trash/<stamp>/a/b.txt` is as
//! much a file `a/b.txt` overwritten as a directory `a` deleted. So after a
//! call that kept something the host writes an index beside the entry,
//! `.mcp-trash/<stamp>.json` ([`record`]): where each kept entry came from
//! and where it went. It lies outside every stamp directory, so no kept
//! path can collide with it, and no guest can reach it: a trash mount
//! reaches only `.mcp-trash` itself and its own call's
//! `.mcp-trash/<stamp>/…`. A stamp directory without an index (an older
//! trash, an index that could not be written) is listed leaf by leaf: each
//! file, symlink or empty directory below it is an entry.
//!
//! An entry's ID is derived from its root's name and its place in the trash
//! and nothing else, so it is the same in every listing, whatever else
//! comes and goes (see [`short_ids`]).
//!
//! None of this is a tool: the model can put things into the trash, never
//! take them out or erase them. The operator can. Roles bound the model,
//! not the operator, so a restore is not refused for want of a permission;
//! confinement and the deny list still apply to where it puts things.
//!
//! The trash is never followed through a symlink: `.mcp-trash`, its stamp
//! directories and its index files are looked at with `lstat` and refused
//! if they are links, entries are walked without following any, and a
//! restore moves through directories opened beneath the root with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, never replacing anything.

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, Metadata};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::policy::{Permission, Resolved, Root, Rule, resolve};
use crate::runtime::fs::{Kept, TRASH_DIR};

/// Hex digits of an ID as listed (more only where two entries share them).
pub const ID_DIGITS: usize = 8;

/// The fewest digits of an ID that `restore` accepts.
pub const MIN_ID_DIGITS: usize = 4;

/// Every digit of an ID (a SHA-256).
const FULL_ID_DIGITS: usize = 64;

/// What follows a stamp in its index's name.
const INDEX_SUFFIX: &str = ".json";

/// The largest index read. A call keeps a handful of entries; an index much
/// larger than this was not written by the host.
const MAX_INDEX_BYTES: u64 = 16 << 20;

/// One thing kept in a trash: a file, a symlink or a whole directory.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Every digit of its ID: the SHA-256 of the root's name and `to`.
    pub id: String,
    pub root: Arc<Root>,
    /// The stamp of the call that kept it (`20261201T083145.123456Z`).
    pub stamp: String,
    /// The time its stamp names.
    pub deleted_at: SystemTime,
    /// Root-relative path it was taken from.
    pub from: PathBuf,
    /// Root-relative path in the trash (`.mcp-trash/<stamp>/…`).
    pub to: PathBuf,
    /// Bytes: a file's length; for a directory, the length of every regular
    /// file below it (symlinks are not followed and count for nothing).
    pub size: u64,
}

impl Entry {
    fn new(root: &Arc<Root>, stamp: &Stamp, from: PathBuf, to: PathBuf, size: u64) -> Entry {
        Entry {
            id: id(&root.name, &to),
            root: Arc::clone(root),
            stamp: stamp.name.clone(),
            deleted_at: stamp.at,
            from,
            to,
            size,
        }
    }

    /// `ID<TAB>root<TAB>original path<TAB>deleted at<TAB>size`: the time in
    /// RFC 3339 (UTC, microseconds), the size in bytes, control characters
    /// and backslashes in the path escaped so that a line is one entry.
    pub fn line(&self, id: &str) -> String {
        format!(
            "{id}\t{}\t{}\t{}\t{}",
            self.root.name,
            escaped(&self.from),
            humantime::format_rfc3339_micros(self.deleted_at),
            self.size
        )
    }
}

/// Why a trash command did nothing (or, for [`TrashError::Io`] in a purge,
/// stopped part way).
#[derive(Debug, thiserror::Error)]
pub enum TrashError {
    /// `--root` named no root of the config.
    #[error("unknown root '{name}'; roots: {known}")]
    UnknownRoot { name: String, known: String },
    /// `.mcp-trash`, a stamp directory or an index is a symlink.
    #[error(
        "root '{root}': {path} is a symbolic link; the trash is never followed through one \
         (look at where it points, then remove it)"
    )]
    Symlink { root: String, path: String },
    /// `.mcp-trash` is something other than a directory.
    #[error("root '{root}': {TRASH_DIR} is not a directory")]
    NotADirectory { root: String },
    /// The filesystem said no.
    #[error("root '{root}': {what}")]
    Io {
        root: String,
        what: String,
        #[source]
        source: io::Error,
    },
    /// Not something an ID can be.
    #[error(
        "'{0}' is not a trash ID: an ID is {MIN_ID_DIGITS} to {FULL_ID_DIGITS} hexadecimal \
         digits (see `trash list`)"
    )]
    BadId(String),
    /// No entry's ID starts so.
    #[error("no trash entry has the ID {0} (see `trash list`)")]
    UnknownId(String),
    /// Several entries' IDs start so.
    #[error(
        "{count} trash entries have IDs starting {id}; give more of its digits (see `trash list`)"
    )]
    AmbiguousId { id: String, count: usize },
    /// Something stands where the entry would go.
    #[error(
        "root '{root}': '{path}' is occupied; nothing was changed (restore elsewhere with \
         --to NEW_PATH)"
    )]
    Occupied { root: String, path: String },
    /// The destination is not a place in the root a restore may use.
    #[error("root '{root}': cannot restore to '{path}': refused by rule '{rule}': {message}")]
    Refused {
        root: String,
        path: String,
        rule: Rule,
        message: String,
    },
    /// The original path cannot be given to `resolve`.
    #[error("root '{root}': the entry's original path is not UTF-8; give one with --to NEW_PATH")]
    NotUtf8 { root: String },
}

fn io_error(root: &Root, what: impl Into<String>, source: io::Error) -> TrashError {
    TrashError::Io {
        root: root.name.clone(),
        what: what.into(),
        source,
    }
}

/// The time a stamp names, if `stamp` is one (`20261201T083145.123456Z`,
/// as [`crate::runtime::trash_stamp`] makes them).
pub fn stamp_time(stamp: &str) -> Option<SystemTime> {
    let b = stamp.as_bytes();
    let digits = |from: usize, to: usize| b[from..to].iter().all(u8::is_ascii_digit);
    let shaped = b.len() == 23
        && (b[8], b[15], b[22]) == (b'T', b'.', b'Z')
        && digits(0, 8)
        && digits(9, 15)
        && digits(16, 22);
    if !shaped {
        return None;
    }
    let s = stamp;
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}.{}Z",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15],
        &s[16..22]
    );
    humantime::parse_rfc3339(&rfc3339).ok()
}

/// How long after its stamp a call may still be adding to its stamp
/// directory: the stamp is taken before the call waits for a slot (at most
/// the tool timeout), then the guest runs (at most the tool timeout again).
/// Its index is written when it ends, so an indexed stamp is finished.
pub fn in_flight(tool_timeout: Duration) -> Duration {
    tool_timeout * 2 + Duration::from_secs(1)
}

/// The full ID of what lies at `to` (root-relative) in root `root`.
/// SHA-256, not CRC-32: the model chooses the paths it deletes, and with a
/// linear 32-bit checksum it could give two entries the same ID at will.
fn id(root: &str, to: &Path) -> String {
    let digest = Sha256::new()
        .chain_update(root.as_bytes())
        .chain_update([0])
        .chain_update(to.as_os_str().as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The IDs to show for `entries`, in their order: the first
/// [`ID_DIGITS`] digits of each, more where two entries share those (then
/// as many as tell them apart). An ID once shown stays a prefix of its
/// entry's full ID, so it keeps naming that entry unless a new entry comes
/// to share it, which `restore` reports as ambiguous.
pub fn short_ids(entries: &[Entry]) -> Vec<&str> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| entries[a].id.cmp(&entries[b].id));
    let mut digits = vec![ID_DIGITS; entries.len()];
    for pair in order.windows(2) {
        let (a, b) = (&entries[pair[0]].id, &entries[pair[1]].id);
        let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        for &i in pair {
            digits[i] = digits[i].max(shared + 1);
        }
    }
    entries
        .iter()
        .zip(digits)
        .map(|(e, n)| &e.id[..n.min(e.id.len())])
        .collect()
}

/// The position in `entries` of the one entry whose ID starts with `id`
/// (at least [`MIN_ID_DIGITS`] hex digits, any case).
pub fn find(entries: &[Entry], id: &str) -> Result<usize, TrashError> {
    let wanted = id.trim().to_ascii_lowercase();
    let hex = wanted.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || !(MIN_ID_DIGITS..=FULL_ID_DIGITS).contains(&wanted.len()) {
        return Err(TrashError::BadId(crate::policy::shown(id)));
    }
    let found: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.id.starts_with(&wanted))
        .map(|(i, _)| i)
        .collect();
    match found[..] {
        [] => Err(TrashError::UnknownId(wanted)),
        [i] => Ok(i),
        _ => Err(TrashError::AmbiguousId {
            id: wanted,
            count: found.len(),
        }),
    }
}

/// The roots a command acts on: `only`, or all of them in config order.
fn select<'a>(
    roots: &'a [Arc<Root>],
    only: Option<&str>,
) -> Result<Vec<&'a Arc<Root>>, TrashError> {
    match only {
        None => Ok(roots.iter().collect()),
        Some(name) => match roots.iter().find(|r| r.name == name) {
            Some(root) => Ok(vec![root]),
            None => Err(TrashError::UnknownRoot {
                name: crate::policy::shown(name),
                known: roots
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        },
    }
}

/// Every entry in the trash of `only` (or of every root), oldest first;
/// entries of one call in root order, then in the order they were kept.
pub fn list(roots: &[Arc<Root>], only: Option<&str>) -> Result<Vec<Entry>, TrashError> {
    let mut out = Vec::new();
    for root in select(roots, only)? {
        for stamp in stamps(root)? {
            out.extend(entries_of(root, &stamp));
        }
    }
    // Stable: within a stamp, roots stay in config order.
    out.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(out)
}

/// A call's part of a trash: its directory, its index, or both.
struct Stamp {
    name: String,
    at: SystemTime,
    dir: bool,
    index: bool,
}

/// The stamps in `root`'s trash, in order. Names that are not stamps are
/// left alone (a temporary index file starts with `.`, so it is one of
/// them); a stamp directory or index that is a symlink is refused.
fn stamps(root: &Root) -> Result<Vec<Stamp>, TrashError> {
    let trash = root.path.join(TRASH_DIR);
    let meta = match fs::symlink_metadata(&trash) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(root, format!("cannot look at {TRASH_DIR}"), e)),
    };
    if meta.file_type().is_symlink() {
        return Err(TrashError::Symlink {
            root: root.name.clone(),
            path: TRASH_DIR.into(),
        });
    }
    if !meta.is_dir() {
        return Err(TrashError::NotADirectory {
            root: root.name.clone(),
        });
    }
    let unreadable = |e| io_error(root, format!("cannot read {TRASH_DIR}"), e);
    let mut found: BTreeMap<String, Stamp> = BTreeMap::new();
    for item in fs::read_dir(&trash).map_err(unreadable)? {
        let item = item.map_err(unreadable)?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let (stamp, is_index) = match name.strip_suffix(INDEX_SUFFIX) {
            Some(stamp) => (stamp, true),
            None => (name, false),
        };
        let Some(at) = stamp_time(stamp) else {
            if !name.starts_with('.') {
                tracing::warn!(root = %root.name, "{TRASH_DIR}/{}: not a trash entry; left alone", escaped(Path::new(name)));
            }
            continue;
        };
        let ty = item.file_type().map_err(unreadable)?;
        if ty.is_symlink() {
            return Err(TrashError::Symlink {
                root: root.name.clone(),
                path: format!("{TRASH_DIR}/{name}"),
            });
        }
        let entry = found.entry(stamp.to_string()).or_insert(Stamp {
            name: stamp.to_string(),
            at,
            dir: false,
            index: false,
        });
        match (is_index, ty.is_file(), ty.is_dir()) {
            (true, true, _) => entry.index = true,
            (false, _, true) => entry.dir = true,
            _ => {
                tracing::warn!(root = %root.name, "{TRASH_DIR}/{name}: not a file or directory as expected; left alone")
            }
        }
    }
    Ok(found.into_values().collect())
}

/// The entries of one stamp that still exist: its index's, or, without a
/// usable index, every leaf below its directory.
fn entries_of(root: &Arc<Root>, stamp: &Stamp) -> Vec<Entry> {
    if !stamp.dir {
        return Vec::new();
    }
    let base = Path::new(TRASH_DIR).join(&stamp.name);
    let index = if stamp.index {
        match read_index(root, &stamp.name) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(root = %root.name, stamp = %stamp.name, "unreadable trash index, listing the entry file by file: {e}");
                None
            }
        }
    } else {
        None
    };
    let kept: Vec<(PathBuf, PathBuf)> = match index {
        Some(index) => index
            .entries
            .iter()
            .filter_map(|e| {
                let checked = checked(&stamp.name, e);
                if checked.is_none() {
                    tracing::warn!(root = %root.name, stamp = %stamp.name, "ignoring a malformed trash index entry");
                }
                checked
            })
            .collect(),
        None => {
            let mut leaves = Vec::new();
            leaves_below(root, &root.path.join(&base), Path::new(""), &mut leaves);
            leaves
                .into_iter()
                .map(|below| (below.clone(), base.join(below)))
                .collect()
        }
    };
    let mut seen = HashSet::new();
    kept.into_iter()
        .filter(|(_, to)| seen.insert(to.clone()))
        .filter_map(|(from, to)| {
            let meta = lstat_beneath(&root.path, &to)?;
            let size = size_of(&root.path.join(&to), &meta);
            Some(Entry::new(root, stamp, from, to, size))
        })
        .collect()
}

/// An index entry's paths if they are what the host writes: plain
/// relative paths, `to` below the stamp's directory.
fn checked(stamp: &str, entry: &IndexEntry) -> Option<(PathBuf, PathBuf)> {
    let from = plain(&entry.from)?;
    let to = plain(&entry.to)?;
    let below = to.strip_prefix(Path::new(TRASH_DIR).join(stamp)).ok()?;
    (!below.as_os_str().is_empty()).then_some((from, to))
}

/// `s` as a relative path of plain names (no `..`, `.`, root or NUL), in
/// its normal spelling; `None` if it is anything else or empty.
fn plain(s: &str) -> Option<PathBuf> {
    if s.contains('\0') {
        return None;
    }
    let path: PathBuf = Path::new(s)
        .components()
        .map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!path.as_os_str().is_empty()).then_some(path)
}

/// The metadata of `rel` below `base`, looked up without following any
/// symlink on the way (the last name may be one: it is reported, not
/// followed).
fn lstat_beneath(base: &Path, rel: &Path) -> Option<Metadata> {
    let mut at = base.to_path_buf();
    let mut parts = rel.components().peekable();
    while let Some(part) = parts.next() {
        at.push(part);
        let meta = fs::symlink_metadata(&at).ok()?;
        if parts.peek().is_none() {
            return Some(meta);
        }
        if !meta.is_dir() {
            return None;
        }
    }
    None
}

/// Every file, symlink, other non-directory, and empty directory below
/// `dir` (relative to the walk's start, `rel` being `dir`'s), in name
/// order, never following a symlink. A directory that cannot be read is
/// skipped with a warning.
fn leaves_below(root: &Root, dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let read = fs::read_dir(dir).and_then(|items| {
        items
            .map(|item| item.and_then(|i| Ok((i.file_name(), i.file_type()?.is_dir()))))
            .collect::<io::Result<Vec<_>>>()
    });
    let mut items = match read {
        Ok(items) => items,
        Err(e) => {
            tracing::warn!(root = %root.name, "cannot read {}/{}: {e}; skipped", TRASH_DIR, escaped(rel));
            return;
        }
    };
    items.sort();
    if items.is_empty() && !rel.as_os_str().is_empty() {
        out.push(rel.to_path_buf());
    }
    for (name, is_dir) in items {
        if is_dir {
            leaves_below(root, &dir.join(&name), &rel.join(&name), out);
        } else {
            out.push(rel.join(name));
        }
    }
}

/// Bytes held at `path` (whose `lstat` is `meta`), as [`Entry::size`] says.
/// What cannot be read counts for nothing.
fn size_of(path: &Path, meta: &Metadata) -> u64 {
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    let Ok(items) = fs::read_dir(path) else {
        return 0;
    };
    items
        .filter_map(Result::ok)
        .filter_map(|item| Some((item.path(), item.metadata().ok()?)))
        .map(|(path, meta)| size_of(&path, &meta))
        .sum()
}

/// A path for the operator's terminal: lossy UTF-8, with backslashes and
/// control characters escaped (`\n`, `\t`, `\u{1b}`).
fn escaped(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// `.mcp-trash/<stamp>.json`: what one call kept in one root.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    entries: Vec<IndexEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct IndexEntry {
    /// Root-relative path the entry was taken from.
    from: String,
    /// Root-relative path in the trash (`.mcp-trash/<stamp>/…`).
    to: String,
}

fn index_name(stamp: &str) -> String {
    format!("{stamp}{INDEX_SUFFIX}")
}

/// `<root>/.mcp-trash`, opened without following a symlink there.
struct TrashDir {
    fd: OwnedFd,
}

impl TrashDir {
    /// `None` if the root has no trash.
    fn open(root: &Root) -> io::Result<Option<TrashDir>> {
        let dir = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        let root_fd = rustix::fs::open(&root.path, dir, Mode::empty())?;
        match rustix::fs::openat(&root_fd, TRASH_DIR, dir | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(fd) => Ok(Some(TrashDir { fd })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the stamp's directory is there (and is one).
    fn has_dir(&self, stamp: &str) -> bool {
        rustix::fs::statat(&self.fd, stamp, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
    }

    /// The stamp's index, `None` if it has none.
    fn read_index(&self, stamp: &str) -> io::Result<Option<Index>> {
        // Non-blocking: a FIFO planted under the name must not hang us.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, index_name(stamp), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        let mut text = Vec::new();
        file.take(MAX_INDEX_BYTES + 1).read_to_end(&mut text)?;
        if text.len() as u64 > MAX_INDEX_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "too large"));
        }
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Replaces the stamp's index atomically: a temporary file beside it
    /// (exclusive, not through a symlink), then a rename. Not flushed to
    /// disk: an index lost in a crash only makes its entry list file by
    /// file, the kept files themselves were flushed by the guest.
    fn write_index(&self, stamp: &str, index: &Index) -> io::Result<()> {
        let text = serde_json::to_vec(index).map_err(io::Error::other)?;
        let temp = format!(".{}.{}.tmp", index_name(stamp), std::process::id());
        // A leftover of a process that had this id and died mid-write.
        let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600))?;
        let written = File::from(fd).write_all(&text).and_then(|()| {
            rustix::fs::renameat(&self.fd, &temp, &self.fd, index_name(stamp)).map_err(Into::into)
        });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        }
        written
    }

    fn remove_index(&self, stamp: &str) -> io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, index_name(stamp), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn read_index(root: &Root, stamp: &str) -> io::Result<Option<Index>> {
    match TrashDir::open(root)? {
        Some(trash) => trash.read_index(stamp),
        None => Ok(None),
    }
}

/// Records in `root`'s trash what a call stamped `stamp` kept there. A
/// call that kept nothing there writes nothing, unless its stamp
/// directory exists anyway (a call that failed after making it): then an
/// empty index says the leftovers are no entry. An index already there
/// (another server's call with the same stamp) is added to.
pub fn record(root: &Root, stamp: &str, kept: &[Kept]) -> io::Result<()> {
    let entries: Vec<IndexEntry> = kept
        .iter()
        .filter(|k| k.root == root.name)
        .map(|k| IndexEntry {
            from: k.from.clone(),
            to: k.to.clone(),
        })
        .collect();
    let Some(trash) = TrashDir::open(root)? else {
        return Ok(());
    };
    if entries.is_empty() && !trash.has_dir(stamp) {
        return Ok(());
    }
    let mut index = trash.read_index(stamp)?.unwrap_or_default();
    index.entries.extend(entries);
    trash.write_index(stamp, &index)
}

/// [`record`] for every root a call could keep something in (those it
/// resolved a path on for more than reading). A failure is logged and
/// never fails the call: what was kept is in the trash regardless, and
/// lists file by file without its index.
pub fn record_call(resolved: &[Resolved], stamp: &str, kept: &[Kept]) {
    let mut done: Vec<&str> = Vec::new();
    for r in resolved.iter().filter(|r| r.op() != Permission::Read) {
        let root = r.root();
        if done.contains(&root.name.as_str()) {
            continue;
        }
        done.push(&root.name);
        if let Err(e) = record(root, stamp, kept) {
            tracing::warn!(root = %root.name, stamp, "cannot write the trash index: {e}");
        }
    }
}

/// Where a restore put an entry.
#[derive(Debug)]
pub struct Restored {
    pub root: Arc<Root>,
    /// Root-relative, symlinks on the way resolved.
    pub path: PathBuf,
}

/// Puts `entry` back at its original path, or at `to` (root-relative, in
/// the entry's root), refusing if anything stands there. Missing parent
/// directories are created; the move never replaces anything, even if
/// something appears meanwhile. The entry then leaves its index, and its
/// stamp's directory and index go once nothing is left in them.
///
/// The destination goes through [`resolve`] like any path from the model:
/// confined to the root (no `..` above it, no symlink out of it), no denied
/// name (so never into `.mcp-trash`, never onto `.env`). It is resolved for
/// the weakest operation the root grants, so the permission check always
/// passes: the role bounds the model, and the operator restoring is not
/// the model. Confinement and the deny list do not depend on the
/// operation; what `Write` would add, refusing the root itself, the
/// occupied check here covers (the root always exists).
pub fn restore(
    roots: &[Arc<Root>],
    entry: &Entry,
    to: Option<&str>,
) -> Result<Restored, TrashError> {
    let root = &entry.root;
    let dest = match to {
        Some(path) => path.to_string(),
        None => entry
            .from
            .to_str()
            .ok_or_else(|| TrashError::NotUtf8 {
                root: root.name.clone(),
            })?
            .to_string(),
    };
    let op = root.perms.iter().next().unwrap_or(Permission::Read);
    let resolved = resolve(roots, &root.name, &dest, op).map_err(|d| TrashError::Refused {
        root: root.name.clone(),
        path: crate::policy::shown(&dest),
        rule: d.rule,
        message: d.message,
    })?;
    let occupied = || TrashError::Occupied {
        root: root.name.clone(),
        path: crate::policy::shown(&dest),
    };
    // `exists` follows a final symlink; a dangling one occupies the name too.
    let link_there = fs::symlink_metadata(root.path.join(&dest)).is_ok();
    if resolved.is_root() || resolved.exists() || link_there {
        return Err(occupied());
    }
    let rel = resolved.real_rel().to_path_buf();
    move_into_place(root, &entry.to, &rel).map_err(|e| match e {
        Moved::Occupied => occupied(),
        Moved::Failed(e) => io_error(
            root,
            format!("cannot move the entry to '{}'", escaped(&rel)),
            e,
        ),
    })?;
    if let Err(e) = forget(root, entry) {
        tracing::warn!(root = %root.name, stamp = %entry.stamp, "restored, but the trash index could not be updated: {e}");
    }
    Ok(Restored {
        root: Arc::clone(root),
        path: rel,
    })
}

/// How a move into place failed.
#[derive(Debug)]
enum Moved {
    /// Something stands at the destination: nothing was moved.
    Occupied,
    Failed(io::Error),
}

impl From<io::Error> for Moved {
    fn from(e: io::Error) -> Moved {
        Moved::Failed(e)
    }
}

/// Renames `from` to `to` (both root-relative, `to` with symlinks resolved),
/// through directories opened beneath the root without following any
/// symlink, creating `to`'s missing parents; never replacing what is at
/// `to` (`RENAME_NOREPLACE`), so a race cannot lose it.
fn move_into_place(root: &Root, from: &Path, to: &Path) -> Result<(), Moved> {
    let (Some(from_name), Some(to_name)) = (from.file_name(), to.file_name()) else {
        return Err(Moved::Occupied);
    };
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let root_fd = rustix::fs::open(&root.path, flags, Mode::empty()).map_err(io::Error::from)?;
    let source = beneath(&root_fd, from.parent().unwrap_or(Path::new("")))?;
    let target = parents(&root_fd, to.parent().unwrap_or(Path::new("")))?;
    match rustix::fs::renameat_with(&source, from_name, &target, to_name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) => Err(Moved::Occupied),
        Err(e) => Err(Moved::Failed(e.into())),
    }
}

/// The directory `rel` below `dir`, opened without leaving `dir` and
/// without following any symlink.
fn beneath(dir: impl AsFd, rel: &Path) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    let mut tries = 0;
    loop {
        // EAGAIN: a rename elsewhere raced the lookup; try again.
        match rustix::fs::openat2(dir.as_fd(), rel, flags, Mode::empty(), resolve) {
            Err(Errno::AGAIN) if tries < 8 => tries += 1,
            done => return done.map_err(Into::into),
        }
    }
}

/// The directory `rel` below `root`, made where missing, one name at a
/// time, each opened as in [`beneath`].
fn parents(root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let mut dir = beneath(root, Path::new(""))?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a plain path",
            ));
        };
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = beneath(&dir, Path::new(name))?;
    }
    Ok(dir)
}

/// Takes a restored entry out of its stamp: out of the index, and the
/// empty directories it leaves (its stamp's included) removed; the index
/// goes with the stamp's directory.
fn forget(root: &Root, entry: &Entry) -> io::Result<()> {
    let Some(trash) = TrashDir::open(root)? else {
        return Ok(());
    };
    let index = trash.read_index(&entry.stamp)?.map(|mut index| {
        index
            .entries
            .retain(|e| plain(&e.to).as_deref() != Some(entry.to.as_path()));
        index
    });
    let stamp_dir = Path::new(TRASH_DIR).join(&entry.stamp);
    let mut dir = entry.to.parent();
    while let Some(d) = dir.filter(|d| d.starts_with(&stamp_dir)) {
        if fs::remove_dir(root.path.join(d)).is_err() {
            break;
        }
        dir = d.parent();
    }
    match index {
        _ if !trash.has_dir(&entry.stamp) => trash.remove_index(&entry.stamp),
        Some(index) => trash.write_index(&entry.stamp, &index),
        None => Ok(()),
    }
}

/// What a purge removed (or, dry, would remove).
#[derive(Debug, Default)]
pub struct Purged {
    /// The entries, oldest first.
    pub entries: Vec<Entry>,
    /// Stamp directories removed.
    pub dirs: usize,
    /// Stamp directories left because their call may still be running
    /// (no index yet, younger than the in-flight window).
    pub in_flight: usize,
}

/// Removes from the trash of `only` (or of every root) each call's part
/// whose stamp is at least `older_than` before `now`: its directory, whole
/// (`remove_dir_all` removes symlinks, never what they point to), and its
/// index. A stamp directory without an index that is younger than
/// `in_flight` (see [`in_flight`]) is left: its call may still be moving
/// things into it, and removing them under it would lose them.
pub fn purge(
    roots: &[Arc<Root>],
    only: Option<&str>,
    older_than: Duration,
    in_flight: Duration,
    now: SystemTime,
    dry_run: bool,
) -> Result<Purged, TrashError> {
    let mut purged = Purged::default();
    for root in select(roots, only)? {
        for stamp in stamps(root)? {
            let age = now.duration_since(stamp.at).unwrap_or_default();
            if age < older_than {
                continue;
            }
            if stamp.dir && !stamp.index && age < in_flight {
                purged.in_flight += 1;
                continue;
            }
            let entries = entries_of(root, &stamp);
            if !dry_run {
                remove_stamp(root, &stamp)?;
            }
            purged.dirs += usize::from(stamp.dir);
            purged.entries.extend(entries);
        }
    }
    purged.entries.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(purged)
}

/// Removes a stamp's directory (checked again to be one, not a symlink)
/// and then its index.
fn remove_stamp(root: &Root, stamp: &Stamp) -> Result<(), TrashError> {
    let trash = root.path.join(TRASH_DIR);
    let shown = format!("{TRASH_DIR}/{}", stamp.name);
    if stamp.dir {
        let dir = trash.join(&stamp.name);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(TrashError::Symlink {
                    root: root.name.clone(),
                    path: shown,
                });
            }
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&dir)
                .map_err(|e| io_error(root, format!("cannot remove {shown}"), e))?,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(root, format!("cannot look at {shown}"), e)),
        }
    }
    if stamp.index {
        match fs::remove_file(trash.join(index_name(&stamp.name))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(root, format!("cannot remove {shown}.json"), e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{DenyList, Role};
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    const STAMP: &str = "20261201T083145.123456Z";
    const LATER: &str = "20261201T083146.000001Z";

    struct Fixture {
        _tmp: TempDir,
        dir: PathBuf,
        roots: Vec<Arc<Root>>,
    }

    impl Fixture {
        /// Roots `ws` (workspace) and `docs` (reference), beside `outside`.
        fn new() -> Fixture {
            let tmp = TempDir::new().unwrap();
            let dir = fs::canonicalize(tmp.path()).unwrap();
            let roots = [("ws", Role::Workspace), ("docs", Role::Reference)]
                .into_iter()
                .map(|(name, role)| {
                    fs::create_dir(dir.join(name)).unwrap();
                    Arc::new(Root {
                        name: name.into(),
                        path: dir.join(name),
                        role,
                        perms: role.ceiling(),
                        deny: DenyList::new([]).unwrap(),
                        extra_deny: vec![],
                        max_read_bytes: 1 << 20,
                    })
                })
                .collect();
            fs::create_dir(dir.join("outside")).unwrap();
            Fixture {
                _tmp: tmp,
                dir,
                roots,
            }
        }

        fn ws(&self) -> &Arc<Root> {
            &self.roots[0]
        }

        fn write(&self, rel: &str, content: &str) {
            let path = self.dir.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }

        /// Keeps `from` (in `ws`) under `stamp` as a guest would, and
        /// records it.
        fn keep(&self, stamp: &str, from: &str) -> Kept {
            let to = format!("{TRASH_DIR}/{stamp}/{from}");
            let at = self.dir.join("ws").join(&to);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            fs::rename(self.dir.join("ws").join(from), at).unwrap();
            let kept = Kept {
                root: "ws".into(),
                from: from.into(),
                to,
            };
            record(self.ws(), stamp, std::slice::from_ref(&kept)).unwrap();
            kept
        }

        fn list(&self) -> Vec<(String, String, u64)> {
            list(&self.roots, None)
                .unwrap()
                .into_iter()
                .map(|e| (e.stamp, e.from.to_string_lossy().into_owned(), e.size))
                .collect()
        }
    }

    #[test]
    fn ids_are_stable_and_short() {
        // The SHA-256 of "ws\0.mcp-trash/20261201T083145.123456Z/a.txt":
        // the same on every platform and toolchain, forever.
        let to = Path::new(".mcp-trash/20261201T083145.123456Z/a.txt");
        let full = id("ws", to);
        assert_eq!(full.len(), FULL_ID_DIGITS);
        assert_eq!(&full[..16], "41816a2fe7fce690");
        assert_ne!(id("docs", to), full, "the root is part of the ID");

        let f = Fixture::new();
        f.write("ws/a.txt", "alpha\n");
        f.keep(STAMP, "a.txt");
        let entries = list(&f.roots, None).unwrap();
        assert_eq!(short_ids(&entries), [&full[..ID_DIGITS]]);
        assert_eq!(entries[0].to, to);
        assert_eq!(
            entries[0].line(&full[..ID_DIGITS]),
            format!(
                "{}\tws\ta.txt\t2026-12-01T08:31:45.123456Z\t6",
                &full[..ID_DIGITS]
            )
        );
    }

    #[test]
    fn shared_digits_lengthen_the_shown_ids_only() {
        let f = Fixture::new();
        f.write("ws/a.txt", "a");
        f.keep(STAMP, "a.txt");
        let one = list(&f.roots, None).unwrap().remove(0);
        let with_id = |id: &str| Entry {
            id: id.into(),
            ..one.clone()
        };
        let entries = [
            with_id("abcdef0123"),
            with_id("abcdef0199"),
            with_id("12345678ff"),
        ];
        assert_eq!(short_ids(&entries), ["abcdef012", "abcdef019", "12345678"]);
        assert_eq!(find(&entries, "ABCDEF012").unwrap(), 0);
        assert_eq!(find(&entries, "1234").unwrap(), 2);
        assert!(matches!(
            find(&entries, "abcd"),
            Err(TrashError::AmbiguousId { count: 2, .. })
        ));
        assert!(matches!(
            find(&entries, "9999"),
            Err(TrashError::UnknownId(_))
        ));
        for bad in ["abc", "xyz12", "", "../a", &"a".repeat(65)] {
            assert!(
                matches!(find(&entries, bad), Err(TrashError::BadId(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn stamps_are_read_as_times() {
        let at = stamp_time(STAMP).unwrap();
        assert_eq!(
            humantime::format_rfc3339_micros(at).to_string(),
            "2026-12-01T08:31:45.123456Z"
        );
        let made = crate::runtime::trash_stamp();
        assert!(stamp_time(&made).is_some(), "{made}");
        for bad in [
            "",
            "old",
            "20261201T083145.123456",
            "20261301T083145.123456Z",
            "2026120xT083145.123456Z",
            "20261201T083145.1234567Z",
        ] {
            assert!(stamp_time(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_directory_kept_whole_is_one_entry_and_sizes_add_up() {
        let f = Fixture::new();
        f.write("ws/tree/one.txt", "1\n");
        f.write("ws/tree/deep/two.txt", "22\n");
        symlink("../../outside", f.dir.join("ws/tree/out")).unwrap();
        f.write("outside/big.txt", &"x".repeat(1000));
        f.keep(STAMP, "tree");
        f.write("ws/a/b.txt", "overwritten");
        f.keep(LATER, "a/b.txt");
        // Oldest first; the symlink counts for nothing, its target is not read.
        assert_eq!(
            f.list(),
            [
                (STAMP.to_string(), "tree".to_string(), 5),
                (LATER.to_string(), "a/b.txt".to_string(), 11),
            ]
        );
        let index = fs::read_to_string(f.dir.join(format!("ws/.mcp-trash/{STAMP}.json"))).unwrap();
        assert_eq!(
            index,
            format!(r#"{{"entries":[{{"from":"tree","to":".mcp-trash/{STAMP}/tree"}}]}}"#)
        );
    }

    #[test]
    fn without_an_index_every_leaf_is_an_entry() {
        let f = Fixture::new();
        f.write(&format!("ws/.mcp-trash/{STAMP}/notes/n.txt"), "note");
        f.write(&format!("ws/.mcp-trash/{STAMP}/top.txt"), "top!!");
        fs::create_dir_all(f.dir.join(format!("ws/.mcp-trash/{STAMP}/empty"))).unwrap();
        symlink(
            "../../../../outside",
            f.dir.join(format!("ws/.mcp-trash/{STAMP}/link")),
        )
        .unwrap();
        // Not stamps: left alone.
        f.write("ws/.mcp-trash/old/x.txt", "x");
        f.write("ws/.mcp-trash/.20261201T083145.123456Z.json.1.tmp", "{");
        let got: Vec<(String, u64)> = f.list().into_iter().map(|(_, p, s)| (p, s)).collect();
        assert_eq!(
            got,
            [
                ("empty".to_string(), 0),
                ("link".to_string(), 0),
                ("notes/n.txt".to_string(), 4),
                ("top.txt".to_string(), 5),
            ]
        );
        // An index that cannot be read is the same as none.
        f.write(&format!("ws/.mcp-trash/{STAMP}.json"), "not json");
        assert_eq!(f.list().len(), 4);
    }

    #[test]
    fn malformed_index_entries_are_ignored() {
        let f = Fixture::new();
        f.write(&format!("ws/.mcp-trash/{STAMP}/good.txt"), "good");
        f.write(&format!("ws/.mcp-trash/{LATER}/other.txt"), "other");
        f.write("ws/.mcp-trash/x.txt", "x");
        f.write("outside/secret.txt", "secret");
        let entries: Vec<serde_json::Value> = [
            ("good.txt", format!(".mcp-trash/{STAMP}/good.txt")),
            ("../escape", format!(".mcp-trash/{STAMP}/good.txt")),
            ("/abs", format!(".mcp-trash/{STAMP}/good.txt")),
            ("", format!(".mcp-trash/{STAMP}/good.txt")),
            ("./dot", format!(".mcp-trash/{STAMP}/good.txt")),
            (
                "a",
                format!(".mcp-trash/{STAMP}/../../../outside/secret.txt"),
            ),
            ("a", format!(".mcp-trash/{LATER}/other.txt")),
            ("a", ".mcp-trash/x.txt".to_string()),
            ("a", format!(".mcp-trash/{STAMP}")),
            ("a", format!("/.mcp-trash/{STAMP}/good.txt")),
            ("a", format!(".mcp-trash/{STAMP}/missing.txt")),
            ("again", format!(".mcp-trash/{STAMP}//good.txt")),
        ]
        .into_iter()
        .map(|(from, to)| serde_json::json!({"from": from, "to": to}))
        .collect();
        f.write(
            &format!("ws/.mcp-trash/{STAMP}.json"),
            &serde_json::json!({ "entries": entries }).to_string(),
        );
        let got: Vec<(String, String)> = f.list().into_iter().map(|(s, p, _)| (s, p)).collect();
        assert_eq!(
            got,
            [
                (STAMP.to_string(), "good.txt".to_string()),
                (LATER.to_string(), "other.txt".to_string()),
            ]
        );
    }

    #[test]
    fn a_symlinked_trash_is_refused() {
        let f = Fixture::new();
        f.write("outside/.mcp-trash/20261201T083145.123456Z/a.txt", "a");
        symlink("../outside/.mcp-trash", f.dir.join("ws/.mcp-trash")).unwrap();
        let refused = list(&f.roots, None).unwrap_err();
        assert!(matches!(refused, TrashError::Symlink { ref path, .. } if path == ".mcp-trash"));
        assert!(matches!(
            purge(
                &f.roots,
                None,
                Duration::ZERO,
                Duration::ZERO,
                SystemTime::now(),
                false
            ),
            Err(TrashError::Symlink { .. })
        ));
        assert!(
            f.dir
                .join("outside/.mcp-trash/20261201T083145.123456Z/a.txt")
                .exists()
        );
        // Nothing is recorded through it either.
        let kept = Kept {
            root: "ws".into(),
            from: "a.txt".into(),
            to: format!(".mcp-trash/{STAMP}/a.txt"),
        };
        assert!(record(f.ws(), STAMP, &[kept]).is_err());
        assert!(
            !f.dir
                .join(format!("outside/.mcp-trash/{STAMP}.json"))
                .exists()
        );

        fs::remove_file(f.dir.join("ws/.mcp-trash")).unwrap();
        fs::create_dir(f.dir.join("ws/.mcp-trash")).unwrap();
        symlink(
            "../../outside/.mcp-trash/20261201T083145.123456Z",
            f.dir.join(format!("ws/.mcp-trash/{STAMP}")),
        )
        .unwrap();
        let refused = list(&f.roots, None).unwrap_err().to_string();
        assert_eq!(
            refused,
            format!(
                "root 'ws': .mcp-trash/{STAMP} is a symbolic link; the trash is never followed \
                 through one (look at where it points, then remove it)"
            )
        );
        assert!(
            f.dir
                .join("outside/.mcp-trash/20261201T083145.123456Z/a.txt")
                .exists()
        );
    }

    #[test]
    fn restore_puts_back_and_cleans_up() {
        let f = Fixture::new();
        f.write("ws/a/b/c.txt", "deep");
        f.write("ws/a/keep.txt", "stays");
        f.keep(STAMP, "a/b/c.txt");
        fs::remove_dir(f.dir.join("ws/a/b")).unwrap();
        let entries = list(&f.roots, None).unwrap();
        let restored = restore(&f.roots, &entries[0], None).unwrap();
        assert_eq!(restored.path, Path::new("a/b/c.txt"));
        assert_eq!(
            fs::read_to_string(f.dir.join("ws/a/b/c.txt")).unwrap(),
            "deep"
        );
        // The stamp is gone, index and all; the trash itself stays.
        let left: Vec<_> = fs::read_dir(f.dir.join("ws/.mcp-trash")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");

        // Two entries in one stamp (a second record adds to the index):
        // restoring one keeps the other indexed.
        f.write("ws/x.txt", "x");
        f.write("ws/y.txt", "y");
        f.keep(LATER, "x.txt");
        f.keep(LATER, "y.txt");
        let entries = list(&f.roots, None).unwrap();
        assert_eq!(entries.len(), 2);
        restore(&f.roots, &entries[0], None).unwrap();
        assert_eq!(fs::read_to_string(f.dir.join("ws/x.txt")).unwrap(), "x");
        assert_eq!(f.list(), [(LATER.to_string(), "y.txt".to_string(), 1)]);
        let index = fs::read_to_string(f.dir.join(format!("ws/.mcp-trash/{LATER}.json"))).unwrap();
        assert_eq!(
            index,
            format!(r#"{{"entries":[{{"from":"y.txt","to":".mcp-trash/{LATER}/y.txt"}}]}}"#)
        );
    }

    #[test]
    fn restore_refuses_occupied_escaping_and_denied_destinations() {
        let f = Fixture::new();
        f.write("ws/a.txt", "old");
        f.keep(STAMP, "a.txt");
        f.write("ws/a.txt", "new");
        symlink("../outside", f.dir.join("ws/out")).unwrap();
        symlink("missing.txt", f.dir.join("ws/dangling")).unwrap();
        let entry = list(&f.roots, None).unwrap().remove(0);
        let err = restore(&f.roots, &entry, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "root 'ws': 'a.txt' is occupied; nothing was changed (restore elsewhere with --to \
             NEW_PATH)"
        );
        for (to, rule) in [
            ("../outside/a.txt", Some(Rule::Confinement)),
            ("out/a.txt", Some(Rule::Confinement)),
            ("/etc/a.txt", Some(Rule::AbsolutePath)),
            (".env", Some(Rule::Deny)),
            (".mcp-trash/a.txt", Some(Rule::Deny)),
            ("", None),
            (".", None),
            ("dangling", None),
        ] {
            match (restore(&f.roots, &entry, Some(to)), rule) {
                (Err(TrashError::Refused { rule: got, .. }), Some(rule)) => {
                    assert_eq!(got, rule, "{to}")
                }
                (Err(TrashError::Occupied { .. }), None) => {}
                (other, _) => panic!("{to}: {other:?}"),
            }
        }
        assert!(
            fs::read_dir(f.dir.join("outside"))
                .unwrap()
                .next()
                .is_none()
        );
        assert_eq!(fs::read_to_string(f.dir.join("ws/a.txt")).unwrap(), "new");
        assert_eq!(f.list().len(), 1);
        let restored = restore(&f.roots, &entry, Some("old/a.txt")).unwrap();
        assert_eq!(restored.path, Path::new("old/a.txt"));
        assert_eq!(
            fs::read_to_string(f.dir.join("ws/old/a.txt")).unwrap(),
            "old"
        );
        assert!(f.list().is_empty());
    }

    #[test]
    fn the_final_move_never_replaces() {
        // What appears at the destination after the checks (a race) stays.
        let f = Fixture::new();
        f.write("ws/a.txt", "kept");
        f.keep(STAMP, "a.txt");
        f.write("ws/a.txt", "raced in");
        let to = PathBuf::from(format!(".mcp-trash/{STAMP}/a.txt"));
        let moved = move_into_place(f.ws(), &to, Path::new("a.txt"));
        assert!(matches!(moved, Err(Moved::Occupied)), "{moved:?}");
        assert_eq!(
            fs::read_to_string(f.dir.join("ws/a.txt")).unwrap(),
            "raced in"
        );
        assert_eq!(
            fs::read_to_string(f.dir.join("ws").join(&to)).unwrap(),
            "kept"
        );
        // A parent swapped for a symlink out is not followed.
        f.write("ws/sub/x", "x");
        fs::remove_dir_all(f.dir.join("ws/sub")).unwrap();
        symlink("../outside", f.dir.join("ws/sub")).unwrap();
        let moved = move_into_place(f.ws(), &to, Path::new("sub/a.txt"));
        assert!(matches!(moved, Err(Moved::Failed(_))), "{moved:?}");
        assert!(
            fs::read_dir(f.dir.join("outside"))
                .unwrap()
                .next()
                .is_none()
        );
    }

    #[test]
    fn purge_goes_by_age_and_spares_calls_in_flight() {
        let f = Fixture::new();
        f.write("ws/a.txt", "a");
        f.keep(STAMP, "a.txt");
        f.write(&format!("ws/.mcp-trash/{LATER}/b.txt"), "bb");
        let at = stamp_time(LATER).unwrap();
        let hour = Duration::from_secs(3600);
        // Nothing is an hour old yet.
        let purged = purge(&f.roots, None, hour, Duration::ZERO, at, false).unwrap();
        assert!(purged.entries.is_empty());
        assert_eq!(f.list().len(), 2);
        // Dry: said, not done.
        let later = at + 2 * hour;
        let dry = purge(&f.roots, Some("ws"), hour, Duration::ZERO, later, true).unwrap();
        assert_eq!((dry.entries.len(), dry.dirs), (2, 2));
        assert_eq!(f.list().len(), 2);
        // The unindexed stamp may belong to a call still running.
        let purged = purge(&f.roots, None, Duration::ZERO, hour, at, false).unwrap();
        assert_eq!((purged.entries.len(), purged.in_flight), (1, 1));
        assert_eq!(purged.entries[0].from, Path::new("a.txt"));
        assert_eq!(f.list(), [(LATER.to_string(), "b.txt".to_string(), 2)]);
        let purged = purge(&f.roots, None, Duration::ZERO, hour, later, false).unwrap();
        assert_eq!(purged.entries.len(), 1);
        assert!(f.list().is_empty());
        assert!(
            fs::read_dir(f.dir.join("ws/.mcp-trash"))
                .unwrap()
                .next()
                .is_none()
        );
        assert!(matches!(
            purge(&f.roots, Some("nope"), hour, hour, later, false),
            Err(TrashError::UnknownRoot { .. })
        ));
    }

    #[test]
    fn a_call_that_kept_nothing_writes_no_index() {
        let f = Fixture::new();
        record(f.ws(), STAMP, &[]).unwrap();
        assert!(!f.dir.join("ws/.mcp-trash").exists());
        fs::create_dir_all(f.dir.join(format!("ws/.mcp-trash/{LATER}/half"))).unwrap();
        record(f.ws(), STAMP, &[]).unwrap();
        assert!(!f.dir.join(format!("ws/.mcp-trash/{STAMP}.json")).exists());
        // A stamp directory left by a failed call: an empty index hides it.
        record(f.ws(), LATER, &[]).unwrap();
        assert!(f.list().is_empty());
    }
}
