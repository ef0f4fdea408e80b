//! Read-ahead for a walk, on a thread of the call's own: the one way a
//! component's single thread gets the machine's other cores without
//! knowing it.
//!
//! A search opens the files of a directory one after the other, in the
//! order of their names, and reads each once from its start. Once a guest
//! has opened a regular file of the directory it listed last ([`Listed`]),
//! the call's worker thread opens the directory's next regular files in
//! name order, as the guest's own open would (by the name, `O_NOFOLLOW |
//! O_NONBLOCK`, kept only if `fstat` says it is a regular file), and reads
//! the first [`HEAD`] bytes of each, at most [`AHEAD`] files before the
//! guest. The guest's open of such a name takes the file opened ahead
//! (every check by name is still made then, on the guest's thread), its
//! first read from the start gets the bytes read ahead, and its drop closes
//! it on the worker. Files the guest passes over are closed there too.
//!
//! The guest's code and the order of its calls are unchanged, so a search
//! gives the same answer as without it, whatever the scheduling; what
//! changes is which thread made the system calls, and that a file's first
//! bytes may have been read a moment before the guest asked (as the
//! kernel's own read-ahead does). The worker never opens a name the
//! directory's listing did not show the guest (denied names and names
//! outside the client roots are never listed), never anything but a
//! regular file's first bytes, and stops when the call ends: dropping
//! [`Ahead`] ends the worker and waits for it, its descriptors closed.
//! A guest that passes over most of what was opened for it (a pattern
//! matching few names) turns the read-ahead off for the rest of the call.
//!
//! [`Listed`]: super::Listed

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::thread::JoinHandle;

use rustix::fs::{FileType, Mode, OFlags, Stat};

/// Files opened ahead and not yet taken, at most: what bounds the worker's
/// descriptors and the bytes it holds (`AHEAD` × [`HEAD`]).
const AHEAD: usize = 16;
/// Descriptors the read-ahead of one call holds at most: [`AHEAD`] files
/// waiting, one being sent, the directory's duplicate, and the files the
/// guest has dropped since the worker last closed (it closes before each
/// open, and is woken by each file taken).
pub const MOST_HELD: usize = 2 * AHEAD + 2;
/// Bytes read ahead from a file's start: the most one guest read brings.
pub(super) const HEAD: usize = 64 * 1024;
/// Files passed over, beyond twice those taken, that turn the read-ahead
/// off for the call.
const PASSED_OFF: u64 = 64;

/// A regular file opened ahead, and its first bytes (all of it when
/// shorter than [`HEAD`]; none when the read failed: the guest's read
/// reads then).
pub(super) struct Opened {
    pub(super) file: OwnedFd,
    pub(super) st: Stat,
    pub(super) head: Option<Vec<u8>>,
}

/// What the worker sends back: a name of the directory, opened or not (not
/// a regular file, or its open failed: the guest's open decides then).
struct Item {
    generation: u64,
    name: Box<str>,
    opened: Option<Opened>,
}

enum Job {
    /// Open `names` of `dir`, in order, while the generation is current.
    Open {
        generation: u64,
        dir: OwnedFd,
        names: Vec<Box<str>>,
    },
    /// Close (drop) this.
    Close(Box<dyn Send>),
}

struct Worker {
    jobs: Sender<Job>,
    items: Receiver<Item>,
    thread: JoinHandle<()>,
}

/// A call's read-ahead (see the module).
pub(super) struct Ahead {
    worker: Option<Worker>,
    /// Bumped when the guest moves on: the worker drops older jobs.
    current: Arc<AtomicU64>,
    /// How many names of the current job the guest has opened itself (the
    /// worker was behind): the worker passes over them without opening.
    skip: Arc<AtomicUsize>,
    /// Items of the current job received so far.
    received: usize,
    generation: u64,
    /// The directory descriptor being read ahead, and the names asked of
    /// the worker and not yet received, in name order.
    dir: Option<u32>,
    asked: VecDeque<Box<str>>,
    /// Items received and not yet taken (only tests wait for them).
    ready: VecDeque<Item>,
    /// Descriptors handed to the guest from files opened ahead, with the
    /// bytes read ahead until the first read from the start takes them.
    handed: HashMap<u32, Option<Vec<u8>>>,
    taken: u64,
    passed: u64,
    off: bool,
}

impl Default for Ahead {
    fn default() -> Ahead {
        Ahead {
            worker: None,
            current: Arc::new(AtomicU64::new(0)),
            skip: Arc::new(AtomicUsize::new(0)),
            received: 0,
            generation: 0,
            dir: None,
            asked: VecDeque::new(),
            ready: VecDeque::new(),
            handed: HashMap::new(),
            taken: 0,
            passed: 0,
            off: !enabled(),
        }
    }
}

/// Whether calls read ahead: always, but in the tests' build with
/// `LOOMFS_TEST_READ_AHEAD=0` (to compare with the guest alone).
#[cfg(not(feature = "test-hooks"))]
fn enabled() -> bool {
    true
}

#[cfg(feature = "test-hooks")]
fn enabled() -> bool {
    std::env::var_os("LOOMFS_TEST_READ_AHEAD").is_none_or(|v| v != "0")
}

impl Ahead {
    /// Whether the read-ahead is off for the call.
    pub(super) fn is_off(&self) -> bool {
        self.off
    }

    /// Whether the directory `dir` is being read ahead.
    pub(super) fn reading(&self, dir: u32) -> bool {
        self.dir == Some(dir)
    }

    /// Starts reading ahead `names` (in name order) of the directory
    /// descriptor `dir` (`fd`), dropping what was read ahead for another.
    pub(super) fn start(&mut self, dir: u32, fd: BorrowedFd<'_>, names: Vec<Box<str>>) {
        self.abandon();
        self.received = 0;
        self.skip.store(0, Ordering::Relaxed);
        if self.off || names.is_empty() {
            return;
        }
        let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(fd, 0) else {
            return;
        };
        let generation = self.generation;
        let Some(worker) = self.worker() else {
            return;
        };
        let job = Job::Open {
            generation,
            dir: dup,
            names: names.clone(),
        };
        if worker.jobs.send(job).is_ok() {
            self.dir = Some(dir);
            self.asked = names.into();
        }
    }

    /// The file `name` of directory `dir`, if the worker has opened it
    /// already: what it opened before it (names the guest passed over, or
    /// opened itself while the worker was behind) is closed. `None` when
    /// it was not asked of the worker, is not opened yet (the guest never
    /// waits for the worker: it opens the file itself), or was not a
    /// regular file when opened.
    pub(super) fn take(&mut self, dir: u32, name: &str) -> Option<Opened> {
        let Ok(at) = self.asked.binary_search_by(|n| (**n).cmp(name)) else {
            return None;
        };
        if self.dir != Some(dir) {
            return None;
        }
        // Where it is in the job's names.
        let index = self.received + at;
        loop {
            let Some(item) = self.try_receive() else {
                // Not opened yet: the guest opens it, and the worker passes
                // over it and what comes before it.
                self.skip.fetch_max(index + 1, Ordering::Relaxed);
                return None;
            };
            self.received += 1;
            let asked = self.asked.pop_front();
            debug_assert_eq!(asked.as_deref(), Some(&*item.name));
            if *item.name == *name {
                self.taken += 1;
                return item.opened;
            }
            if let Some(opened) = item.opened {
                self.passed += 1;
                self.close(Box::new(opened.file));
            }
            if self.passed > 2 * self.taken + PASSED_OFF {
                self.off = true;
                self.abandon();
                return None;
            }
            if *item.name > *name {
                return None;
            }
        }
    }

    /// The next item of the current generation, if the worker sent it
    /// (older ones are closed).
    fn try_receive(&mut self) -> Option<Item> {
        if let Some(item) = self.ready.pop_front() {
            return Some(item);
        }
        let worker = self.worker.as_ref()?;
        loop {
            let item = worker.items.try_recv().ok()?;
            if item.generation == self.generation {
                return Some(item);
            }
            if let Some(opened) = item.opened {
                self.close(Box::new(opened.file));
            }
        }
    }

    /// Marks `rep`, handed to the guest, as opened ahead with `head`.
    pub(super) fn hand(&mut self, rep: u32, head: Vec<u8>) {
        self.handed.insert(rep, Some(head));
    }

    /// The bytes read ahead for descriptor `rep`, once.
    pub(super) fn head(&mut self, rep: u32) -> Option<Vec<u8>> {
        self.handed.get_mut(&rep)?.take()
    }

    /// Whether descriptor `rep` was opened ahead (its drop closes it on
    /// the worker); forgets it.
    pub(super) fn release(&mut self, rep: u32) -> bool {
        self.handed.remove(&rep).is_some()
    }

    /// Waits until the worker has sent `n` more items (tests: the guest
    /// never waits).
    #[cfg(test)]
    fn settle(&mut self, n: usize) {
        for _ in 0..n {
            let item = self.worker.as_ref().unwrap().items.recv().unwrap();
            self.ready.push_back(item);
        }
    }

    /// Closes `what` on the worker (at once where there is none).
    pub(super) fn close(&self, what: Box<dyn Send>) {
        if let Some(worker) = &self.worker
            && let Err(mpsc::SendError(Job::Close(what))) = worker.jobs.send(Job::Close(what))
        {
            drop(what);
        }
    }

    /// Drops what was asked for the directory read ahead: the guest moved
    /// on.
    pub(super) fn abandon(&mut self) {
        self.generation += 1;
        self.current.store(self.generation, Ordering::Relaxed);
        self.dir = None;
        self.asked.clear();
        // What the worker sent already: closed on it.
        let mut stale: Vec<OwnedFd> = self
            .ready
            .drain(..)
            .filter_map(|i| i.opened.map(|o| o.file))
            .collect();
        if let Some(worker) = &self.worker {
            while let Ok(item) = worker.items.try_recv() {
                stale.extend(item.opened.map(|o| o.file));
            }
        }
        for file in stale {
            self.close(Box::new(file));
        }
    }

    /// The worker, started on first use.
    fn worker(&mut self) -> Option<&Worker> {
        if self.worker.is_none() {
            let (jobs, their_jobs) = mpsc::channel();
            let (their_items, items) = mpsc::sync_channel(AHEAD);
            let (current, skip) = (Arc::clone(&self.current), Arc::clone(&self.skip));
            let thread = std::thread::Builder::new()
                .name("loomfs-ahead".into())
                .spawn(move || work(their_jobs, their_items, current, skip))
                .ok()?;
            self.worker = Some(Worker {
                jobs,
                items,
                thread,
            });
        }
        self.worker.as_ref()
    }
}

impl Drop for Ahead {
    /// Ends the worker and waits for it: when a call is over, nothing of it
    /// runs and every descriptor it opened is closed.
    fn drop(&mut self) {
        if let Some(Worker {
            jobs,
            items,
            thread,
        }) = self.worker.take()
        {
            self.current.store(u64::MAX, Ordering::Relaxed);
            drop((jobs, items));
            let _ = thread.join();
        }
    }
}

/// The worker: closes what it is given, opens the names of the current job
/// one by one, closes first whatever waits to be closed.
fn work(
    jobs: Receiver<Job>,
    items: SyncSender<Item>,
    current: Arc<AtomicU64>,
    skip: Arc<AtomicUsize>,
) {
    let mut buf = vec![0u8; HEAD];
    // The generation, the directory, its names left, how many were taken.
    let mut job: Option<(u64, OwnedFd, VecDeque<Box<str>>, usize)> = None;
    loop {
        // Idle, it waits for the next directory by spinning first: the
        // guest lists one after another.
        let next = if job.is_none() {
            spin_until(|| match jobs.try_recv() {
                Err(TryRecvError::Empty) => None,
                got => Some(got),
            })
            .unwrap_or_else(|| jobs.recv().map_err(|_| TryRecvError::Disconnected))
        } else {
            jobs.try_recv()
        };
        match next {
            Ok(Job::Close(what)) => {
                drop(what);
                continue;
            }
            Ok(Job::Open {
                generation,
                dir,
                names,
            }) => {
                job = Some((generation, dir, names.into(), 0));
                continue;
            }
            Err(TryRecvError::Disconnected) => return,
            Err(TryRecvError::Empty) => {}
        }
        let Some((generation, dir, names, taken)) = job.as_mut() else {
            continue;
        };
        let generation = *generation;
        let name = match names.pop_front() {
            Some(name) if current.load(Ordering::Relaxed) == generation => name,
            _ => {
                job = None;
                continue;
            }
        };
        *taken += 1;
        // A name the guest opened itself is passed over, unopened.
        let opened = if *taken <= skip.load(Ordering::Relaxed) {
            None
        } else {
            open(dir.as_fd(), &name, &mut buf)
        };
        let item = Item {
            generation,
            name,
            opened,
        };
        let mut item = Some(item);
        let sent = spin_until(|| match items.try_send(item.take()?) {
            Ok(()) => Some(true),
            Err(TrySendError::Full(back)) => {
                item = Some(back);
                None
            }
            Err(TrySendError::Disconnected(_)) => Some(false),
        })
        .or_else(|| Some(items.send(item.take()?).is_ok()));
        // The call is over: only closing is left.
        if sent != Some(true) {
            job = None;
        }
    }
}

/// How long a thread waits for the other by spinning before it sleeps:
/// both work at the pace of a file every few microseconds, and a sleep and
/// a wake-up per file cost more than the file (a quarter of a search's CPU
/// in futex calls when each waited by sleeping at once).
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// `f()` until it answers, for at most [`SPIN`]; `None` if it did not.
fn spin_until<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = std::time::Instant::now();
    loop {
        if let Some(answer) = f() {
            return Some(answer);
        }
        if start.elapsed() >= SPIN {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// `name` under `dir` opened for reading as the guest's open of a plain
/// name is (see `checks.rs`), if it is a regular file, and its first
/// [`HEAD`] bytes.
fn open(dir: BorrowedFd<'_>, name: &str, buf: &mut [u8]) -> Option<Opened> {
    let how =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = rustix::fs::openat(dir, name, how, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&file).ok()?;
    if crate::sys::stat::file_type(&st) != FileType::RegularFile {
        return None;
    }
    let head = rustix::io::pread(&file, &mut buf[..], 0)
        .ok()
        .map(|got| buf[..got].to_vec());
    Some(Opened { file, st, head })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_of(files: &[(&str, &str)]) -> (tempfile::TempDir, OwnedFd) {
        let tmp = tempfile::TempDir::new().unwrap();
        for (name, text) in files {
            std::fs::write(tmp.path().join(name), text).unwrap();
        }
        let fd = rustix::fs::open(
            tmp.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        (tmp, fd)
    }

    /// A read-ahead that is on, whatever the environment says.
    fn on() -> Ahead {
        let mut ahead = Ahead::default();
        ahead.off = false;
        ahead
    }

    fn names(n: &[&str]) -> Vec<Box<str>> {
        n.iter().map(|&s| s.into()).collect()
    }

    #[test]
    fn the_files_asked_are_taken_in_order_with_their_heads() {
        let (_tmp, dir) = dir_of(&[("a", "one\n"), ("b", "two\n"), ("c", "three\n")]);
        let mut ahead = on();
        ahead.start(7, dir.as_fd(), names(&["a", "b", "c"]));
        assert!(ahead.reading(7));
        ahead.settle(3);
        // "a" passed over, "b" taken, "c" never asked for.
        let b = ahead.take(7, "b").expect("opened ahead");
        assert_eq!(b.head.as_deref(), Some(&b"two\n"[..]));
        assert_eq!(ahead.passed, 1);
        // Not asked of the worker: the guest's own open.
        assert!(ahead.take(7, "zz").is_none());
        assert!(ahead.take(8, "c").is_none());
    }

    #[test]
    fn what_is_not_a_regular_file_is_not_kept() {
        let (tmp, dir) = dir_of(&[("f", "x\n")]);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            tmp.path().join("p"),
            Mode::RUSR | Mode::WUSR,
        )
        .unwrap();
        std::os::unix::fs::symlink("f", tmp.path().join("l")).unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        let mut ahead = on();
        ahead.start(1, dir.as_fd(), names(&["d", "f", "l", "p"]));
        ahead.settle(4);
        // The FIFO was opened without waiting, and not kept.
        assert!(ahead.take(1, "p").is_none());
        ahead.start(1, dir.as_fd(), names(&["d", "f", "l"]));
        ahead.settle(3);
        assert!(ahead.take(1, "d").is_none());
        assert!(ahead.take(1, "f").is_some());
        assert!(ahead.take(1, "l").is_none(), "a symlink is never followed");
    }

    #[test]
    fn dropping_it_ends_the_worker_and_closes_its_files() {
        let files: Vec<(String, String)> = (0..100)
            .map(|i| (format!("f{i:03}"), "x".repeat(i)))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (&a[..], &b[..])).collect();
        let (tmp, dir) = dir_of(&refs);
        // This process's descriptors of the directory's files (other tests
        // run beside this one).
        let open_fds = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|p| p.starts_with(tmp.path()) && p != tmp.path())
                .count()
        };
        let before = open_fds();
        let mut ahead = on();
        let all: Vec<Box<str>> = files.iter().map(|(n, _)| n.as_str().into()).collect();
        ahead.start(3, dir.as_fd(), all);
        ahead.settle(2);
        assert!(ahead.take(3, "f001").is_some());
        // The worker holds at most AHEAD files (and the directory) ahead.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(open_fds() <= before + AHEAD + 2, "{} open", open_fds());
        drop(ahead);
        assert_eq!(open_fds(), before, "descriptors left open");
    }

    #[test]
    fn passing_over_most_turns_it_off() {
        let files: Vec<(String, String)> = (0..400)
            .map(|i| (format!("f{i:03}"), String::new()))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (&a[..], &b[..])).collect();
        let (_tmp, dir) = dir_of(&refs);
        let mut ahead = on();
        let all: Vec<Box<str>> = files.iter().map(|(n, _)| n.as_str().into()).collect();
        ahead.start(3, dir.as_fd(), all);
        ahead.settle(100);
        assert!(ahead.take(3, "f399").is_none());
        assert!(ahead.off);
        assert!(!ahead.reading(3));
    }
}
