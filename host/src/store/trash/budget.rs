//! The trash budget (`trash_max_bytes`): how many bytes a root's trash may
//! hold, and the count that lets a call be told, before it changes
//! anything, whether what it would keep still fits.
//!
//! The count lives in the trash, `.mcp-trash/.size`, shared by every
//! server on the root and by `trash purge` and `trash restore`, and changed
//! only under the root's `trash size` lock ([`locks::hold`]). It holds the
//! bytes kept, and one reservation per call that may be keeping something
//! right now: its stamp, its process, the bytes it said it would keep, and
//! when it can no longer be running (the in-flight window). So:
//! - a call that keeps history first [`reserve`]s what it would keep (the
//!   file it replaces, the tree it deletes; `tools` works that out under
//!   the call's path locks), refused if the count and it would pass the
//!   budget; when it ends it [`Reservation::settle`]s: its reservation goes
//!   and what its stamp directory really holds is added. Every keeper adds
//!   before it keeps, so the count only ever runs high, never low;
//! - before any refusal the count is taken again from the trash itself
//!   ([`recount`]: a walk of the stamp directories, those of calls still
//!   reserving left out, their reservations standing for them), so a count
//!   left high (a server killed mid-call, an entry removed by hand) never
//!   refuses a call that fits;
//! - a server walks each root's trash at start, and `trash purge` and
//!   `trash restore` walk it again once they have removed something.
//!
//! Sizes are those of [`Entry::size`]: the length of every regular file
//! below a stamp directory (a hard-linked kept version counts its length:
//! once the original is replaced, that is what stays on disk). Indexes, the
//! staging area and the host's own files count for nothing.
//!
//! In a root the server may only delete in, it makes no file of its own:
//! there the count file is used if a server that writes made it, and
//! otherwise each call that deletes counts the trash by a walk.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read as _;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use std::{fs, io};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::index::TrashDir;
use super::list::{contents, size_of};
use super::{SIZE_FILE, stamp_time};
use crate::policy::{Permission, Root, Rule};
use crate::store::{TRASH_DIR, locks};

/// The label of the lock the count is changed under.
const SIZE_LOCK: &str = "trash size";

/// The largest count file read: a line per call in flight.
const MAX_SIZE_FILE: u64 = 1 << 20;

/// Share of the budget past which the operator is warned (start-up lines,
/// `check`, `trash list`, the log).
pub const WARN_PERCENT: u64 = 80;

/// A change that would keep more than a root's trash may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    /// The root's `trash_max_bytes`.
    pub budget: u64,
    /// Bytes its trash holds, with what calls still running said they
    /// would keep, counted again just now.
    pub size: u64,
    /// Bytes this change would keep there.
    pub needed: u64,
}

impl OverBudget {
    /// The refusal, naming the rule, the root, the budget and the size.
    pub fn text(&self, root: &str) -> String {
        format!(
            "refused by rule '{}': root '{root}' keeps at most trash_max_bytes = {} \
             ({}) in its trash, which holds {} ({} left), and this change would keep {} there \
             (what it replaces or deletes)",
            Rule::TrashBudget,
            self.budget,
            human(self.budget),
            human(self.size),
            human(self.budget.saturating_sub(self.size)),
            human(self.needed),
        )
    }

    /// What the operator can do.
    pub const WAY_OUT: &'static str = "the operator empties the trash of old versions \
         (`loom-fs-mcp trash purge --older-than 7d`; `trash list` shows what it holds) or \
         raises trash_max_bytes; nothing is dropped from the trash without the operator's word";
}

fn human(bytes: u64) -> String {
    crate::sys::space::human(bytes)
}

/// A root's trash against its budget, as the operator is shown it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub size: u64,
    /// `trash_max_bytes`; 0 for none.
    pub budget: u64,
}

impl Usage {
    /// `1.5 MiB of 1 GiB (trash_max_bytes)`, or without a budget.
    pub fn text(&self) -> String {
        if self.budget == 0 {
            format!("{} (no trash_max_bytes)", human(self.size))
        } else {
            format!(
                "{} of {} (trash_max_bytes, {}%)",
                human(self.size),
                human(self.budget),
                percent(self.size, self.budget)
            )
        }
    }

    /// Whether it is at [`WARN_PERCENT`] of its budget or past it.
    pub fn nearly_full(&self) -> bool {
        self.budget > 0
            && u128::from(self.size) * 100 >= u128::from(self.budget) * u128::from(WARN_PERCENT)
    }

    /// The warning for a root whose trash is nearly full, if it is.
    pub fn warning(&self, root: &str) -> Option<String> {
        self.nearly_full().then(|| {
            format!(
                "root '{root}': its trash holds {} of its trash_max_bytes ({}, {}%): past it, \
                 changes that would keep more are refused; purge old versions with \
                 `loom-fs-mcp trash purge --older-than 7d`",
                human(self.size),
                human(self.budget),
                percent(self.size, self.budget)
            )
        })
    }
}

fn percent(size: u64, budget: u64) -> u128 {
    u128::from(size) * 100 / u128::from(budget.max(1))
}

/// `root`'s trash as it is now, by a walk, against its budget. Reads only.
pub fn usage(root: &Root) -> io::Result<Usage> {
    Ok(Usage {
        size: walk(root, &HashSet::new())?,
        budget: root.trash_max_bytes,
    })
}

/// Bytes held at `path` (a user's file or tree, not followed through a
/// symlink): what deleting it would keep. Metadata only; what cannot be
/// read counts for nothing.
pub fn bytes_at(path: &Path) -> u64 {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => m.len(),
        Ok(m) if m.is_dir() => fs::read_dir(path).map_or(0, |entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| bytes_at(&e.path()))
                .sum()
        }),
        _ => 0,
    }
}

/// One call's hold on room in the trash of the roots it keeps in; given
/// back, with what it really kept counted, by [`Reservation::settle`] (or
/// when dropped).
#[must_use]
pub struct Reservation {
    roots: Vec<Arc<Root>>,
    stamp: String,
}

/// What one call may keep in each root: those without a budget are left out.
pub type Needs = Vec<(Arc<Root>, u64)>;

/// Reserves room for a call stamped `stamp` that would keep `needs` bytes
/// in each root's trash, or says which root's budget it would pass (the
/// count taken again first). Call under the call's path locks; a call that
/// would keep nothing is never refused. `in_flight` is how long the call
/// may still run ([`in_flight`]).
pub fn reserve(
    needs: &[(Arc<Root>, u64)],
    stamp: &str,
    in_flight: Duration,
) -> Result<Reservation, (String, OverBudget)> {
    let mut reservation = Reservation {
        roots: Vec::new(),
        stamp: stamp.to_string(),
    };
    let expires = unix_secs(SystemTime::now() + in_flight);
    for (root, needed) in needs.iter().filter(|(r, _)| r.trash_max_bytes > 0) {
        let trash = count_dir(root);
        let trash = trash.as_ref();
        let _held = trash.and_then(|t| locks::hold_in(t.fd.as_fd(), root, SIZE_LOCK));
        let mut count = match trash.and_then(Count::read_in) {
            Some(count) => count.expired_folded(),
            None => Count::taken(root),
        };
        if *needed > 0 && count.total().saturating_add(*needed) > root.trash_max_bytes {
            count = Count::taken(root);
            if count.total().saturating_add(*needed) > root.trash_max_bytes {
                count.write_in(trash, root);
                // The roots reserved already give theirs back (dropped).
                return Err((
                    root.name.clone(),
                    OverBudget {
                        budget: root.trash_max_bytes,
                        size: count.total(),
                        needed: *needed,
                    },
                ));
            }
        }
        count.held.push(Held {
            stamp: stamp.to_string(),
            pid: std::process::id(),
            bytes: *needed,
            expires,
        });
        count.write_in(trash, root);
        reservation.roots.push(Arc::clone(root));
    }
    Ok(reservation)
}

impl Reservation {
    /// Gives the reservation back and counts what the call's stamp
    /// directory holds in each root. Once its call is done (its index
    /// written, still under its path locks).
    pub fn settle(mut self) {
        self.give_back();
    }

    fn give_back(&mut self) {
        for root in std::mem::take(&mut self.roots) {
            let trash = count_dir(&root);
            let trash = trash.as_ref();
            let _held = trash.and_then(|t| locks::hold_in(t.fd.as_fd(), &root, SIZE_LOCK));
            let Some(mut count) = trash.and_then(Count::read_in) else {
                // Gone or torn: a walk counts this call's entry with the
                // rest (where there is a count to write: not in a root this
                // server may only delete in, where each call walks).
                if root.perms.contains(Permission::Write) {
                    Count::taken(&root).write(&root);
                }
                continue;
            };
            let pid = std::process::id();
            count
                .held
                .retain(|h| !(h.stamp == self.stamp && h.pid == pid));
            let before = count.total();
            let kept = trash
                .and_then(|trash| size_of(trash, Path::new(&self.stamp)))
                .unwrap_or(0);
            count.kept = count.kept.saturating_add(kept);
            count.write_in(trash, &root);
            let was = Usage {
                size: before,
                budget: root.trash_max_bytes,
            };
            let now = Usage {
                size: count.total(),
                budget: root.trash_max_bytes,
            };
            if !was.nearly_full()
                && let Some(warning) = now.warning(&root.name)
            {
                tracing::warn!(root = %root.name, "{warning}");
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Takes `root`'s count again from its trash (calls still reserving stand
/// for their own entries) and writes it; the bytes it holds, with those
/// reservations. At start, and after a purge or a restore. A root with no
/// trash is left as it is.
pub fn recount(root: &Root) -> io::Result<u64> {
    // No trash yet: nothing to count, and nothing made in the root (the
    // first call that keeps something makes the count).
    if TrashDir::open(root)?.is_none() {
        return Ok(0);
    }
    let _held = locks::hold(root, SIZE_LOCK);
    let count = Count::try_taken(root)?;
    count.write(root);
    Ok(count.total())
}

/// A reservation in the count: a call that may be keeping `bytes` now.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    stamp: String,
    pid: u32,
    bytes: u64,
    /// Seconds since the epoch after which its call cannot be running.
    expires: u64,
}

impl Held {
    /// Whether its call may still be running at `now` (seconds since the
    /// epoch): within its window, and its process there. A process of
    /// that id that is not the server (the id used again) keeps it live
    /// until its window ends: high, never low.
    fn live(&self, now: u64) -> bool {
        self.expires >= now && process_exists(self.pid)
    }
}

/// Whether a process `pid` exists (in this process's pid namespace: servers
/// on one root in different namespaces see each other's reservations as
/// gone once they are counted again, and are held to the walk).
fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

/// The count file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Count {
    /// Bytes kept by calls that ended (and found by walks).
    kept: u64,
    held: Vec<Held>,
}

impl Count {
    /// Kept bytes and every reservation.
    fn total(&self) -> u64 {
        self.held
            .iter()
            .fold(self.kept, |sum, h| sum.saturating_add(h.bytes))
    }

    /// With the reservations of calls that can no longer be running (a
    /// killed server's) counted as kept: still high, never low.
    fn expired_folded(mut self) -> Count {
        let now = unix_secs(SystemTime::now());
        let (live, gone): (Vec<Held>, Vec<Held>) = self.held.into_iter().partition(|h| h.live(now));
        self.held = live;
        self.kept = gone
            .iter()
            .fold(self.kept, |sum, h| sum.saturating_add(h.bytes));
        self
    }

    /// The count from a walk of the trash, keeping the reservations still
    /// live (their stamps are left to them); on a walk that fails, the
    /// budget is not held against anyone (logged).
    fn taken(root: &Root) -> Count {
        Count::try_taken(root).unwrap_or_else(|e| {
            tracing::warn!(root = %root.name, "cannot count the trash ({e}); its budget is not applied to this call");
            Count::default()
        })
    }

    fn try_taken(root: &Root) -> io::Result<Count> {
        let now = unix_secs(SystemTime::now());
        let held: Vec<Held> = Count::read(root)
            .map(|c| c.held.into_iter().filter(|h| h.live(now)).collect())
            .unwrap_or_default();
        let skip: HashSet<String> = held.iter().map(|h| h.stamp.clone()).collect();
        Ok(Count {
            kept: walk(root, &skip)?,
            held,
        })
    }

    fn parse(text: &str) -> Option<Count> {
        let mut lines = text.lines();
        let kept = lines.next()?.strip_prefix("kept ")?.parse().ok()?;
        let held = lines
            .map(|line| {
                let mut f = line.strip_prefix("reserved ")?.split(' ');
                let held = Held {
                    stamp: f.next().filter(|s| stamp_time(s).is_some())?.to_string(),
                    pid: f.next()?.parse().ok()?,
                    bytes: f.next()?.parse().ok()?,
                    expires: f.next()?.parse().ok()?,
                };
                f.next().is_none().then_some(held)
            })
            .collect::<Option<Vec<Held>>>()?;
        Some(Count { kept, held })
    }

    fn render(&self) -> String {
        let mut text = format!("kept {}\n", self.kept);
        for h in &self.held {
            text.push_str(&format!(
                "reserved {} {} {} {}\n",
                h.stamp, h.pid, h.bytes, h.expires
            ));
        }
        text
    }

    /// The count file of `root`, `None` if it is missing, unreadable or
    /// not as written here (a write cut short): then a walk is the count.
    fn read(root: &Root) -> Option<Count> {
        Count::read_in(&TrashDir::open(root).ok()??)
    }

    /// [`Count::read`] in the root's trash directory, open.
    fn read_in(trash: &TrashDir) -> Option<Count> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = File::from(rustix::fs::openat(&trash.fd, SIZE_FILE, flags, Mode::empty()).ok()?);
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_SIZE_FILE).read_to_string(&mut text).ok()?;
        Count::parse(&text)
    }

    /// Writes the count over the old one in place, then cuts what is left
    /// of a longer old one. Not emptied first: on ext4 a file cut to
    /// nothing and written again is flushed to disk when closed
    /// (`auto_da_alloc`), which cost two disk writes a call. The count is
    /// changed under its lock, a few dozen bytes in one `pwrite` (so a
    /// reader never sees it half-written, and a kill leaves it whole); a
    /// kill before the cut leaves the old tail: a line cut anywhere reads
    /// as no count (a walk), whole old reservations only make it run high,
    /// never low. A write that fails empties it (no count, never a wrong
    /// one). Made only in a root the server may write in. A failure is
    /// logged: the next reader walks.
    fn write(&self, root: &Root) {
        self.write_in(None, root);
    }

    /// [`Count::write`] in the root's trash directory, where the caller
    /// holds it open.
    fn write_in(&self, trash: Option<&TrashDir>, root: &Root) {
        let written = (|| -> io::Result<()> {
            let may_make = root.perms.contains(Permission::Write);
            let opened;
            let trash = match trash {
                Some(trash) => trash,
                None => match TrashDir::open_or_make(root)? {
                    Some(trash) => {
                        opened = trash;
                        &opened
                    }
                    None => return Ok(()),
                },
            };
            let mut flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            if may_make {
                flags |= OFlags::CREATE;
            }
            let fd =
                match rustix::fs::openat(&trash.fd, SIZE_FILE, flags, Mode::from_raw_mode(0o600)) {
                    Err(Errno::NOENT) if !may_make => return Ok(()),
                    fd => fd?,
                };
            let file = File::from(fd);
            let meta = file.metadata()?;
            if !meta.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not a regular file",
                ));
            }
            let text = self.render();
            let len = text.len() as u64;
            let written = file.write_all_at(text.as_bytes(), 0).and_then(|()| {
                if meta.len() > len {
                    file.set_len(len)
                } else {
                    Ok(())
                }
            });
            if written.is_err() {
                let _ = file.set_len(0);
            }
            written
        })();
        if let Err(e) = written {
            tracing::warn!(root = %root.name, "cannot write {TRASH_DIR}/{SIZE_FILE}: {e}; the next call counts the trash again");
        }
    }
}

/// `root`'s trash directory, opened once for a step of the count (its
/// lock, its read, its write: no lookup of the root by path for each), and
/// made if missing where the server makes files of its own, as the lock
/// and the write would. `None` where it is not there or cannot be opened:
/// each step then finds its own way, as alone (the count, by a walk).
fn count_dir(root: &Root) -> Option<TrashDir> {
    TrashDir::open_or_make(root).ok().flatten()
}

/// Bytes held by `root`'s stamp directories but those in `skip`.
fn walk(root: &Root, skip: &HashSet<String>) -> io::Result<u64> {
    let Some(trash) = TrashDir::open(root)? else {
        return Ok(0);
    };
    let contents = contents(root, &trash).map_err(io::Error::other)?;
    Ok(contents
        .stamps
        .iter()
        .filter(|s| s.dir && !skip.contains(&s.name))
        .map(|s| size_of(&trash, Path::new(&s.name)).unwrap_or(0))
        .sum())
}

fn unix_secs(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
