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

use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sha2::{Digest as _, Sha256};

use crate::policy::{Root, Rule};
use crate::store::TRASH_DIR;

/// The trash budget's count file, in the trash (denied to every tool; no
/// trash mount reaches it): kept by `budget.rs`, passed over by `list.rs`.
pub const SIZE_FILE: &str = ".size";

mod budget;
mod index;
mod list;
mod purge;
mod restore;
mod undo;

pub use budget::*;
pub use index::*;
pub use list::*;
pub use purge::*;
pub use restore::*;
pub use undo::*;

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

    /// `ID<TAB>root<TAB>original path<TAB>deleted at<TAB>size<TAB>call`: the
    /// time in RFC 3339 (UTC, microseconds), the size in bytes, the path
    /// shown by the naming rule ([`escaped`]) so that a line is one entry,
    /// and the ID of the call that kept it (`trash undo` takes it).
    pub fn line(&self, id: &str) -> String {
        format!(
            "{id}\t{}\t{}\t{}\t{}\t{}",
            self.root.name,
            escaped(&self.from),
            humantime::format_rfc3339_micros(self.deleted_at),
            self.size,
            self.stamp
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

#[cfg(test)]
mod tests;
