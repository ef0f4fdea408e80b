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
//! guest. The guest's open of such a name takes the file opened ahead if it
//! is ready (every check by name is still made then, on the guest's
//! thread; the guest never waits for the worker: it opens a file that is
//! not ready itself, and the worker passes over that name), its first read
//! from the start gets the bytes read ahead, and its drop closes it on the
//! worker. Files the guest passes over are closed there too.
//!
//! The guest's code and the order of its calls are unchanged, so on a tree
//! that does not change while it is searched a search gives the same answer
//! as without it, whatever the scheduling. What changes is which thread
//! made the system calls, and that a file may be read as it was a moment
//! before the guest asked (at most [`AHEAD`] files earlier in the walk): a
//! file replaced in between is read as it was when opened ahead. The
//! worker never opens a name the directory's listing did not show the
//! guest (denied names and names outside the client roots are never
//! listed), never reads anything but a regular file's first bytes, and is
//! told to stop when the call's instance is dropped; the drop waits for it
//! (a second at most: a worker held in an open on a stalled filesystem is
//! left to end on its own), its descriptors closed.
//! A guest that passes over most of what was opened for it (a pattern
//! matching few names) turns the read-ahead off for the rest of the call.
//!
//! What it holds is bounded ([`MOST_HELD`] descriptors, [`AHEAD`] heads):
//! the next directory waits in one slot (a newer one replaces it), closes
//! wait at most [`AHEAD`] deep (more are made on the guest's thread), and
//! the bytes read ahead are kept for at most [`AHEAD`] files handed out.
//!
//! [`Listed`]: super::Listed

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::fs::Stat;

/// Files opened ahead and not yet taken, at most: what bounds the worker's
/// descriptors and the bytes it holds (`AHEAD` × [`HEAD`]).
const AHEAD: usize = 16;
/// Descriptors the read-ahead of one call holds at most: [`AHEAD`] files
/// waiting, one being sent, [`AHEAD`] waiting to be closed, the directory
/// being read and the next one.
pub const MOST_HELD: usize = 2 * AHEAD + 3;
/// Bytes read ahead from a file's start: the most one guest read brings.
pub(super) const HEAD: usize = 64 * 1024;
/// Files passed over, beyond twice those taken, that turn the read-ahead
/// off for the call.
const PASSED_OFF: u64 = 64;
/// How long the end of a call waits for its worker.
const JOIN_WAIT: Duration = Duration::from_secs(1);

/// A regular file opened ahead, and its first bytes (all of it when
/// shorter than [`HEAD`]; none when the read failed: the guest's read
/// reads then).
pub(super) struct Opened {
    pub(super) file: OwnedFd,
    pub(super) st: Stat,
    pub(super) head: Option<Vec<u8>>,
}

/// What the worker sends back: the next name of the job, opened or not (not
/// a regular file, its open failed, or the guest opened it itself).
struct Item {
    generation: u64,
    opened: Option<Opened>,
}

/// A directory to read ahead: its names in order, from the first.
struct Job {
    generation: u64,
    dir: OwnedFd,
    names: Arc<[Box<str>]>,
}

/// What the guest's thread and the worker share.
struct Shared {
    /// The generation of the current job: bumped when the guest moves on,
    /// and the worker drops older jobs.
    current: AtomicU64,
    /// How many names of the current job the guest has opened itself (the
    /// worker was behind): the worker passes over them without opening.
    skip: AtomicUsize,
    /// The next job, taken by the worker when woken.
    next: Mutex<Option<Job>>,
    /// Closes sent to the worker and not yet made.
    closing: AtomicUsize,
}

enum Message {
    /// A job waits in [`Shared::next`].
    Wake,
    /// Close (drop) this.
    Close(Box<dyn Send>),
}

struct Worker {
    messages: Sender<Message>,
    items: Receiver<Item>,
    /// Disconnected when the worker has returned.
    ended: Receiver<()>,
    thread: JoinHandle<()>,
}

/// A call's read-ahead (see the module).
pub(super) struct Ahead {
    worker: Option<Worker>,
    shared: Arc<Shared>,
    generation: u64,
    /// The directory descriptor being read ahead, the job's names, and
    /// how many of its items were received.
    dir: Option<u32>,
    names: Arc<[Box<str>]>,
    received: usize,
    /// Items received and not yet taken (only tests wait for them).
    ready: std::collections::VecDeque<Item>,
    /// Descriptors handed to the guest from files opened ahead, with the
    /// bytes read ahead until the first read from the start takes them.
    handed: HashMap<u32, Option<Vec<u8>>>,
    /// Of `handed`, those holding bytes.
    heads: usize,
    taken: u64,
    passed: u64,
    off: bool,
}

impl Default for Ahead {
    fn default() -> Ahead {
        Ahead {
            worker: None,
            shared: Arc::new(Shared {
                current: AtomicU64::new(0),
                skip: AtomicUsize::new(0),
                next: Mutex::new(None),
                closing: AtomicUsize::new(0),
            }),
            generation: 0,
            dir: None,
            names: Arc::new([]),
            received: 0,
            ready: std::collections::VecDeque::new(),
            handed: HashMap::new(),
            heads: 0,
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
    /// Where no worker can be had, the read-ahead is off for the call.
    pub(super) fn start(&mut self, dir: u32, fd: BorrowedFd<'_>, names: Vec<Box<str>>) {
        self.abandon();
        if self.off || names.is_empty() {
            return;
        }
        let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0);
        let (Ok(dup), true) = (dup, self.worker().is_some()) else {
            self.off = true;
            return;
        };
        let names: Arc<[Box<str>]> = names.into();
        self.shared.skip.store(0, Ordering::Relaxed);
        let job = Job {
            generation: self.generation,
            dir: dup,
            names: Arc::clone(&names),
        };
        // A job the worker has not taken yet is replaced (its directory
        // closed here).
        let replaced = self
            .shared
            .next
            .lock()
            .map(|mut next| next.replace(job))
            .ok();
        drop(replaced);
        let woken = self
            .worker
            .as_ref()
            .is_some_and(|w| w.messages.send(Message::Wake).is_ok());
        if woken {
            self.dir = Some(dir);
            self.names = names;
            self.received = 0;
        }
    }

    /// The file `name` of directory `dir`, if the worker has opened it
    /// already: what it opened before it (names the guest passed over, or
    /// opened itself while the worker was behind) is closed. `None` when
    /// it was not asked of the worker, is not opened yet (the guest never
    /// waits for the worker: it opens the file itself), or was not a
    /// regular file when opened.
    pub(super) fn take(&mut self, dir: u32, name: &str) -> Option<Opened> {
        if self.dir != Some(dir) {
            return None;
        }
        let left = &self.names[self.received..];
        let at = left.binary_search_by(|n| (**n).cmp(name)).ok()?;
        // Where it is in the job's names.
        let index = self.received + at;
        loop {
            let Some(item) = self.try_receive() else {
                // Not opened yet: the guest opens it, and the worker passes
                // over it and what comes before it.
                self.shared.skip.fetch_max(index + 1, Ordering::Relaxed);
                return None;
            };
            let this = self.received;
            self.received += 1;
            if this == index {
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
        }
    }

    /// The next item of the current generation, if the worker sent it
    /// (older ones are closed).
    fn try_receive(&mut self) -> Option<Item> {
        if let Some(item) = self.ready.pop_front() {
            return Some(item);
        }
        loop {
            let item = self.worker.as_ref()?.items.try_recv().ok()?;
            if item.generation == self.generation {
                return Some(item);
            }
            if let Some(opened) = item.opened {
                self.close(Box::new(opened.file));
            }
        }
    }

    /// Marks `rep`, handed to the guest, as opened ahead with `head` (kept
    /// for the first read while fewer than [`AHEAD`] are).
    pub(super) fn hand(&mut self, rep: u32, head: Option<Vec<u8>>) {
        let head = head.filter(|_| self.heads < AHEAD);
        self.heads += usize::from(head.is_some());
        self.handed.insert(rep, head);
    }

    /// The bytes read ahead for descriptor `rep`, once.
    pub(super) fn head(&mut self, rep: u32) -> Option<Vec<u8>> {
        let head = self.handed.get_mut(&rep)?.take();
        self.heads -= usize::from(head.is_some());
        head
    }

    /// Whether descriptor `rep` was opened ahead (its drop closes it on
    /// the worker); forgets it.
    pub(super) fn release(&mut self, rep: u32) -> bool {
        match self.handed.remove(&rep) {
            Some(head) => {
                self.heads -= usize::from(head.is_some());
                true
            }
            None => false,
        }
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

    /// Closes `what` on the worker; here when there is none, or when
    /// [`AHEAD`] closes wait already (a worker held in a send closes
    /// nothing until the guest takes a file).
    pub(super) fn close(&self, what: Box<dyn Send>) {
        let Some(worker) = &self.worker else {
            return;
        };
        if self.shared.closing.load(Ordering::Relaxed) >= AHEAD {
            return;
        }
        self.shared.closing.fetch_add(1, Ordering::Relaxed);
        if let Err(mpsc::SendError(Message::Close(what))) =
            worker.messages.send(Message::Close(what))
        {
            self.shared.closing.fetch_sub(1, Ordering::Relaxed);
            drop(what);
        }
    }

    /// Drops what was asked for the directory read ahead: the guest moved
    /// on.
    pub(super) fn abandon(&mut self) {
        self.generation += 1;
        self.shared
            .current
            .store(self.generation, Ordering::Relaxed);
        self.dir = None;
        self.names = Arc::new([]);
        self.received = 0;
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
            let (messages, theirs) = mpsc::channel();
            let (their_items, items) = mpsc::sync_channel(AHEAD);
            let (ends, ended) = mpsc::channel::<()>();
            let shared = Arc::clone(&self.shared);
            let thread = std::thread::Builder::new()
                .name("loomfs-ahead".into())
                .spawn(move || {
                    let _ends = ends;
                    work(&theirs, &their_items, &shared);
                })
                .ok()?;
            self.worker = Some(Worker {
                messages,
                items,
                ended,
                thread,
            });
        }
        self.worker.as_ref()
    }
}

impl Drop for Ahead {
    /// Tells the worker to stop and waits for it (see the module): when a
    /// call is over, nothing of it runs and every descriptor it opened is
    /// closed.
    fn drop(&mut self) {
        let Some(Worker {
            messages,
            items,
            ended,
            thread,
        }) = self.worker.take()
        else {
            return;
        };
        self.shared.current.store(u64::MAX, Ordering::Relaxed);
        drop((messages, items));
        match ended.recv_timeout(JOIN_WAIT) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!("a read-ahead thread is held in a system call; left to end");
            }
            _ => {
                let _ = thread.join();
            }
        }
    }
}

/// The worker: makes the closes it is sent, opens the names of the current
/// job one by one (closing first whatever waits to be closed).
fn work(messages: &Receiver<Message>, items: &SyncSender<Item>, shared: &Shared) {
    let mut buf = vec![0u8; HEAD];
    // The job, and how many of its names were taken.
    let mut job: Option<(Job, usize)> = None;
    loop {
        // Idle, it waits for the next directory by spinning first: the
        // guest lists one after another.
        let next = if job.is_none() {
            spin_until(|| match messages.try_recv() {
                Err(TryRecvError::Empty) => None,
                got => Some(got),
            })
            .unwrap_or_else(|| messages.recv().map_err(|_| TryRecvError::Disconnected))
        } else {
            messages.try_recv()
        };
        match next {
            Ok(Message::Close(what)) => {
                drop(what);
                shared.closing.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            Ok(Message::Wake) => {
                if let Some(next) = shared.next.lock().ok().and_then(|mut n| n.take()) {
                    job = Some((next, 0));
                }
                continue;
            }
            Err(TryRecvError::Disconnected) => return,
            Err(TryRecvError::Empty) => {}
        }
        let Some((current, taken)) = job.as_mut() else {
            continue;
        };
        let generation = current.generation;
        let name = match current.names.get(*taken) {
            Some(name) if shared.current.load(Ordering::Relaxed) == generation => name,
            _ => {
                job = None;
                continue;
            }
        };
        *taken += 1;
        // A name the guest opened itself is passed over, unopened.
        let opened = if *taken <= shared.skip.load(Ordering::Relaxed) {
            None
        } else {
            open(current.dir.as_fd(), name, &mut buf)
        };
        let mut item = Some(Item { generation, opened });
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
const SPIN: Duration = Duration::from_micros(50);

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
    let (file, st) = super::open_regular(dir, name).ok()??;
    let head = rustix::io::pread(&file, &mut buf[..], 0)
        .ok()
        .map(|got| buf[..got].to_vec());
    Some(Opened { file, st, head })
}

#[cfg(test)]
mod tests;
