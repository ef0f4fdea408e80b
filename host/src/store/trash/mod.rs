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
//! and nothing else, so it stays the same for as long as the entry is
//! there, whatever else comes and goes (see [`short_ids`]). What a call
//! kept takes its final shape only when its index is written, as the call
//! ends: before, a directory it deleted would list leaf by leaf, under IDs
//! that vanish once the index makes it one entry. So a stamp directory
//! without an index that is younger than the in-flight window
//! ([`in_flight`]) is not listed (nor restored, nor purged) yet; [`list`]
//! counts it so the operator is told.
//!
//! None of this is a tool: the model can put things into the trash, never
//! take them out or erase them. The operator can. Roles bound the model,
//! not the operator, so a restore is not refused for want of a permission;
//! confinement and the deny list still apply to where it puts things.
//!
//! The trash is never followed through a symlink, and never looked up by
//! path once opened: `.mcp-trash` is opened beneath the root with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` ([`TrashDir`]), and everything
//! below it is read, statted, removed and moved through that descriptor and
//! directories opened from it with `O_NOFOLLOW`. A stamp directory or an
//! index that is a symlink is refused; a symlink inside an entry is
//! unlinked, never followed; a restore moves through directories opened
//! the same way beneath the root, never replacing anything. So a
//! `.mcp-trash` swapped for a symlink after it was opened leads nowhere
//! outside the root.

use std::collections::{BTreeMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::policy::{Permission, Resolved, Root, Rule, resolve};
use crate::store::locks::{self, LOCK_FILE};
use crate::store::staging::{self, STAGING_DIR, Swept};
use crate::store::{Kept, TRASH_DIR};
use crate::sys::beneath::{beneath, names_in, open_dir, parents, remove_below, remove_empty};

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
    /// RFC 3339 (UTC, microseconds), the size in bytes, the path shown by
    /// the naming rule ([`escaped`]) so that a line is one entry.
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
/// as [`crate::store::trash_stamp`] makes them).
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

/// When a command looks at the trash, and so which calls may still be
/// running.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    pub at: SystemTime,
    /// See [`in_flight`]; from the running server's `tool_timeout_ms`.
    pub in_flight: Duration,
}

impl Now {
    /// The present moment, beside a server whose tool timeout is
    /// `tool_timeout`.
    pub fn with_timeout(tool_timeout: Duration) -> Now {
        Now {
            at: SystemTime::now(),
            in_flight: in_flight(tool_timeout),
        }
    }

    /// How long ago `then` was (nothing, if it is to come).
    fn since(&self, then: SystemTime) -> Duration {
        self.at.duration_since(then).unwrap_or_default()
    }
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
        return Err(TrashError::BadId(crate::policy::shown_clipped(id)));
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
                name: crate::policy::shown_arg(name).into_owned(),
                known: roots
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        },
    }
}

/// What [`list`] found.
#[derive(Debug, Default)]
pub struct Listing {
    /// Oldest first; entries of one call in root order, then in the order
    /// they were kept.
    pub entries: Vec<Entry>,
    /// Stamp directories not listed because their call may still be
    /// running (no index yet, younger than the in-flight window): their
    /// entries, and so their IDs, are not final until it ends.
    pub in_flight: usize,
}

/// Every entry in the trash of `only` (or of every root), but those of
/// calls that may still be running at `now`.
pub fn list(roots: &[Arc<Root>], only: Option<&str>, now: Now) -> Result<Listing, TrashError> {
    let mut listing = Listing::default();
    for root in select(roots, only)? {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        for stamp in contents(root, &trash)?.stamps {
            if stamp.in_flight(now) {
                listing.in_flight += 1;
            } else {
                listing.entries.extend(entries_of(root, &trash, &stamp));
            }
        }
    }
    // Stable: within a stamp, roots stay in config order.
    listing.entries.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(listing)
}

/// A call's part of a trash: its directory, its index, or both.
struct Stamp {
    name: String,
    at: SystemTime,
    dir: bool,
    index: bool,
}

impl Stamp {
    /// Whether its call may still be adding to it at `now`: it has a
    /// directory but no index yet, and is younger than the in-flight window.
    fn in_flight(&self, now: Now) -> bool {
        self.dir && !self.index && now.since(self.at) < now.in_flight
    }
}

/// What a trash holds at its top.
struct Contents {
    /// In order.
    stamps: Vec<Stamp>,
    /// Temporary index files ([`temp_name`]): one still being written, or
    /// the leftover of a write that failed or a process that died.
    temps: Vec<OsString>,
}

/// The stamps and temporary index files in `root`'s trash. Other names are
/// left alone, with a warning; a stamp directory or index that is a
/// symlink is refused.
fn contents(root: &Root, trash: &TrashDir) -> Result<Contents, TrashError> {
    let unreadable = |e| io_error(root, format!("cannot read {TRASH_DIR}"), e);
    let mut found: BTreeMap<String, Stamp> = BTreeMap::new();
    let mut temps = Vec::new();
    for (raw, ty) in names_in(&trash.fd).map_err(unreadable)? {
        let shown = || format!("{TRASH_DIR}/{}", escaped(Path::new(&raw)));
        let Some(name) = raw.to_str() else {
            tracing::warn!(root = %root.name, "{}: not a trash entry; left alone", shown());
            continue;
        };
        if is_temp_name(name) {
            temps.push(raw.clone());
            continue;
        }
        // The host's own: no entries (see `staging` and `locks`).
        if name == STAGING_DIR || name == LOCK_FILE {
            continue;
        }
        let (stamp, is_index) = match name.strip_suffix(INDEX_SUFFIX) {
            Some(stamp) => (stamp, true),
            None => (name, false),
        };
        let Some(at) = stamp_time(stamp) else {
            tracing::warn!(root = %root.name, "{}: not a trash entry; left alone", shown());
            continue;
        };
        if ty == FileType::Symlink {
            return Err(TrashError::Symlink {
                root: root.name.clone(),
                path: shown(),
            });
        }
        let entry = found.entry(stamp.to_string()).or_insert(Stamp {
            name: stamp.to_string(),
            at,
            dir: false,
            index: false,
        });
        match (is_index, ty) {
            (true, FileType::RegularFile) => entry.index = true,
            (false, FileType::Directory) => entry.dir = true,
            _ => {
                tracing::warn!(root = %root.name, "{}: not a file or directory as expected; left alone", shown())
            }
        }
    }
    Ok(Contents {
        stamps: found.into_values().collect(),
        temps,
    })
}

/// The entries of one stamp that still exist: its index's, or, without a
/// usable index, every leaf below its directory.
fn entries_of(root: &Arc<Root>, trash: &TrashDir, stamp: &Stamp) -> Vec<Entry> {
    if !stamp.dir {
        return Vec::new();
    }
    let base = Path::new(TRASH_DIR).join(&stamp.name);
    let index = if stamp.index {
        match trash.read_index(&stamp.name) {
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
            match open_dir(trash.fd.as_fd(), OsStr::new(&stamp.name)) {
                Ok(dir) => leaves_below(root, &dir, &base, Path::new(""), &mut leaves),
                Err(e) => {
                    tracing::warn!(root = %root.name, "cannot read {}: {e}; skipped", escaped(&base))
                }
            }
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
            let size = size_of(trash, to.strip_prefix(TRASH_DIR).ok()?)?;
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

/// Every file, symlink, other non-directory, and empty directory below
/// `dir` (relative to the walk's start, `rel` being `dir`'s; `base` is the
/// start's, for warnings), in name order, never following a symlink. A
/// directory that cannot be read is skipped with a warning.
fn leaves_below(root: &Root, dir: &OwnedFd, base: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let unreadable = |e: &dyn std::fmt::Display| {
        tracing::warn!(root = %root.name, "cannot read {}: {e}; skipped", escaped(&base.join(rel)));
    };
    let items = match names_in(dir) {
        Ok(items) => items,
        Err(e) => return unreadable(&e),
    };
    if items.is_empty() && !rel.as_os_str().is_empty() {
        out.push(rel.to_path_buf());
    }
    for (name, ty) in items {
        if ty != FileType::Directory {
            out.push(rel.join(name));
            continue;
        }
        match open_dir(dir.as_fd(), &name) {
            Ok(sub) => leaves_below(root, &sub, base, &rel.join(&name), out),
            Err(e) => unreadable(&io::Error::from(e)),
        }
    }
}

/// Bytes held at `rel` below the trash, as [`Entry::size`] says; `None` if
/// nothing is there, or a name on the way is not a directory or is a
/// symlink (the last name may be one: it holds nothing).
fn size_of(trash: &TrashDir, rel: &Path) -> Option<u64> {
    let name = rel.file_name()?;
    let parent = beneath(&trash.fd, rel.parent().unwrap_or(Path::new(""))).ok()?;
    let st = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => file_size(&st),
        FileType::Directory => open_dir(parent.as_fd(), name).map_or(0, |dir| size_in(&dir)),
        _ => 0,
    })
}

/// Bytes of every regular file below `dir`; symlinks are not followed and
/// what cannot be read counts for nothing.
fn size_in(dir: &OwnedFd) -> u64 {
    let size = |(name, ty): (OsString, FileType)| match ty {
        FileType::RegularFile => {
            rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW).map_or(0, |st| file_size(&st))
        }
        FileType::Directory => open_dir(dir.as_fd(), &name).map_or(0, |sub| size_in(&sub)),
        _ => 0,
    };
    names_in(dir)
        .unwrap_or_default()
        .into_iter()
        .map(size)
        .sum()
}

fn file_size(st: &Stat) -> u64 {
    u64::try_from(st.st_size).unwrap_or(0)
}

/// A path for the operator's terminal, by the naming rule
/// ([`crate::policy::shown`]): a path holding a control, bidi or invisible
/// format character is shown as a JSON string literal (`"e\u001b]0;x"`),
/// any other as it is, so a line of `trash list` is one entry and nothing
/// in it acts on the terminal. Every path the trash commands print, on
/// stdout or in an error, goes through it: the model chooses the names. A
/// name that is not UTF-8 shows its bad bytes as U+FFFD: entries are
/// restored by ID, never by the name shown.
pub fn escaped(path: &Path) -> String {
    crate::policy::shown(&path.to_string_lossy()).into_owned()
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

/// The temporary file an index is written to before it is renamed into
/// place: `.<stamp>.json.<pid>.tmp`.
fn temp_name(stamp: &str, pid: u32) -> String {
    format!(".{}.{pid}.tmp", index_name(stamp))
}

/// Whether `name` is one [`temp_name`] makes.
fn is_temp_name(name: &str) -> bool {
    let shaped = || {
        let (index, pid) = name
            .strip_prefix('.')?
            .strip_suffix(".tmp")?
            .rsplit_once('.')?;
        let stamp = index.strip_suffix(INDEX_SUFFIX)?;
        let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
        (digits && stamp_time(stamp).is_some()).then_some(())
    };
    shaped().is_some()
}

/// `<root>/.mcp-trash`, opened beneath the root without following a
/// symlink; everything below it is reached through this descriptor.
struct TrashDir {
    fd: OwnedFd,
}

impl TrashDir {
    /// `None` if the root (or its trash) is not there.
    fn open(root: &Root) -> io::Result<Option<TrashDir>> {
        let dir = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        let root_fd = match rustix::fs::open(&root.path, dir, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match beneath(&root_fd, Path::new(TRASH_DIR)) {
            Ok(fd) => Ok(Some(TrashDir { fd })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`TrashDir::open`], saying which way a trash that cannot be opened
    /// is wrong.
    fn open_checked(root: &Root) -> Result<Option<TrashDir>, TrashError> {
        TrashDir::open(root).map_err(|e| match Errno::from_io_error(&e) {
            // Either for a symlink, as the kernel pleases; looked at only
            // to say which.
            Some(Errno::LOOP | Errno::NOTDIR) => {
                match fs::symlink_metadata(root.path.join(TRASH_DIR)) {
                    Ok(meta) if meta.file_type().is_symlink() => TrashError::Symlink {
                        root: root.name.clone(),
                        path: TRASH_DIR.into(),
                    },
                    _ => TrashError::NotADirectory {
                        root: root.name.clone(),
                    },
                }
            }
            _ => io_error(root, format!("cannot open {TRASH_DIR}"), e),
        })
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
    /// (exclusive, not through a symlink), created and written through one
    /// descriptor, then a rename. On any failure the temporary file is
    /// removed, even when the open itself failed: the kernel may create
    /// the file and then refuse to open it for writing (Landlock without
    /// the write right). Not flushed to disk: an index lost in a crash
    /// only makes its entry list file by file, the kept files themselves
    /// were flushed by the guest.
    fn write_index(&self, stamp: &str, index: &Index) -> io::Result<()> {
        let text = serde_json::to_vec(index).map_err(io::Error::other)?;
        let temp = temp_name(stamp, std::process::id());
        // A leftover of a process that had this id and died mid-write.
        let _ = rustix::fs::unlinkat(&self.fd, &temp, AtFlags::empty());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = match rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600)) {
            // Someone else's file under our name: not ours to remove.
            Err(Errno::EXIST) => return Err(Errno::EXIST.into()),
            Err(e) => Err(e.into()),
            Ok(fd) => File::from(fd).write_all(&text).and_then(|()| {
                rustix::fs::renameat(&self.fd, &temp, &self.fd, index_name(stamp))
                    .map_err(Into::into)
            }),
        };
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
    // Another server on this root may be adding to the same stamp's index.
    let _held = locks::hold(root, &format!("index {stamp}"));
    // A call that kept nothing here (a keep that failed: a full disk) may
    // have made its entry's directories: they go, so a failed call leaves
    // nothing behind in the trash either. Only empty ones are removed.
    if entries.is_empty()
        && trash.read_index(stamp)?.is_none()
        && remove_empty(trash.fd.as_fd(), OsStr::new(stamp))
    {
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
pub fn record_call<'a>(
    resolved: impl IntoIterator<Item = &'a Resolved>,
    stamp: &str,
    kept: &[Kept],
) {
    let mut done: Vec<&str> = Vec::new();
    for r in resolved.into_iter().filter(|r| r.op() != Permission::Read) {
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
        path: escaped(Path::new(&dest)),
        rule: d.rule,
        message: d.message,
    })?;
    let occupied = || TrashError::Occupied {
        root: root.name.clone(),
        path: escaped(Path::new(&dest)),
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
    if let Some(below) = entry.to.strip_prefix(TRASH_DIR).ok().and_then(Path::parent) {
        remove_emptied(&trash, below);
    }
    match index {
        _ if !trash.has_dir(&entry.stamp) => trash.remove_index(&entry.stamp),
        Some(index) => trash.write_index(&entry.stamp, &index),
        None => Ok(()),
    }
}

/// Removes the directories `below` (a path below the trash, its first
/// name a stamp) and its parents up to the stamp's, deepest first, while
/// they are empty. Each is opened from the one above without following a
/// symlink and removed by name in it, so none is reached through a path.
fn remove_emptied(trash: &TrashDir, below: &Path) {
    let names: Vec<&OsStr> = below.iter().collect();
    let mut dirs: Vec<OwnedFd> = Vec::new();
    for name in &names {
        let parent = dirs.last().map_or(trash.fd.as_fd(), AsFd::as_fd);
        match open_dir(parent, name) {
            Ok(dir) => dirs.push(dir),
            Err(_) => break,
        }
    }
    // Only what could be opened from the trash down is removed.
    let opened = dirs.len();
    dirs.truncate(opened.saturating_sub(1));
    for (i, name) in names[..opened].iter().enumerate().rev() {
        let parent = if i == 0 {
            trash.fd.as_fd()
        } else {
            dirs[i - 1].as_fd()
        };
        if rustix::fs::unlinkat(parent, *name, AtFlags::REMOVEDIR).is_err() {
            break;
        }
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
    /// Temporary index files removed: leftovers of index writes that
    /// failed, older than the in-flight window.
    pub temps: usize,
    /// What servers that are gone left in the staging areas.
    pub staged: Swept,
}

/// Removes from the trash of `only` (or of every root) each call's part
/// whose stamp is at least `older_than` before `now`: its directory, whole
/// ([`remove_below`]: symlinks are removed, never what they point to), and
/// its index. A stamp directory without an index that is younger than the
/// in-flight window is left: its call may still be moving things into it,
/// and removing them under it would lose them. Temporary index files last
/// changed before the in-flight window are removed too, whatever their
/// age against `older_than`: they are no entry, only litter.
pub fn purge(
    roots: &[Arc<Root>],
    only: Option<&str>,
    older_than: Duration,
    now: Now,
    dry_run: bool,
) -> Result<Purged, TrashError> {
    let mut purged = Purged::default();
    for root in select(roots, only)? {
        let Some(trash) = TrashDir::open_checked(root)? else {
            continue;
        };
        let contents = contents(root, &trash)?;
        for stamp in contents.stamps {
            if now.since(stamp.at) < older_than {
                continue;
            }
            if stamp.in_flight(now) {
                purged.in_flight += 1;
                continue;
            }
            let entries = entries_of(root, &trash, &stamp);
            if !dry_run && let Err(e) = remove_stamp(root, &trash, &stamp) {
                // One stamp that cannot go (a tree too deep for the open
                // file limit, say) stops no other.
                tracing::warn!("{e}; the other entries are purged");
                continue;
            }
            purged.dirs += usize::from(stamp.dir);
            purged.entries.extend(entries);
        }
        for temp in contents.temps {
            purged.temps += usize::from(remove_stale_temp(root, &trash, &temp, now, dry_run)?);
        }
        // One root's staging area that cannot be cleared stops no other.
        match staging::sweep(root, dry_run) {
            Ok(swept) => purged.staged.servers += swept.servers,
            Err(e) => {
                tracing::warn!(root = %root.name, "cannot clear {TRASH_DIR}/{STAGING_DIR}: {e}")
            }
        }
    }
    purged.entries.sort_by(|a, b| a.stamp.cmp(&b.stamp));
    Ok(purged)
}

/// Removes the temporary index file `name` if it was last changed before
/// the in-flight window (dry: says whether it would). A younger one may be
/// an index being written right now.
fn remove_stale_temp(
    root: &Root,
    trash: &TrashDir,
    name: &OsStr,
    now: Now,
    dry_run: bool,
) -> Result<bool, TrashError> {
    let shown = format!("{TRASH_DIR}/{}", escaped(Path::new(name)));
    let st = match rustix::fs::statat(&trash.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(io_error(root, format!("cannot look at {shown}"), e.into())),
    };
    let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(st.st_mtime.try_into().unwrap_or(0));
    if now.since(changed) < now.in_flight {
        return Ok(false);
    }
    if !dry_run {
        match rustix::fs::unlinkat(&trash.fd, name, AtFlags::empty()) {
            Ok(()) => {}
            Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_error(root, format!("cannot remove {shown}"), e.into())),
        }
    }
    Ok(true)
}

/// Removes a stamp's directory (refused if it is a symlink) and then its
/// index, by name in the trash's descriptor.
fn remove_stamp(root: &Root, trash: &TrashDir, stamp: &Stamp) -> Result<(), TrashError> {
    let shown = format!("{TRASH_DIR}/{}", stamp.name);
    if stamp.dir {
        let name = OsStr::new(&stamp.name);
        match rustix::fs::statat(&trash.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                return Err(TrashError::Symlink {
                    root: root.name.clone(),
                    path: shown,
                });
            }
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                remove_below(trash.fd.as_fd(), name)
                    .map_err(|e| io_error(root, format!("cannot remove {shown}"), e))?
            }
            Ok(_) | Err(Errno::NOENT) => {}
            Err(e) => return Err(io_error(root, format!("cannot look at {shown}"), e.into())),
        }
    }
    if stamp.index {
        trash
            .remove_index(&stamp.name)
            .map_err(|e| io_error(root, format!("cannot remove {shown}.json"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
