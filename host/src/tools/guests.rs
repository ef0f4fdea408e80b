//! The threads guests run on: long-lived, woken last-idle-first.
//!
//! A guest cannot run on the async runtime's own thread (wasmtime-wasi's
//! synchronous bindings block on the runtime's handle), so a call hands its
//! guest to another thread and awaits the outcome. tokio's blocking pool
//! wakes the thread that has waited longest: with several calls in flight
//! the guests rotate over as many threads, each one run where the caches
//! hold another's. Here the thread that went idle last takes the next
//! guest, woken on a condition variable of its own.
//!
//! A thread is made when no idle one is left, and stays for the life of the
//! pool: the slots (`max_concurrent_calls`) bound the guests running at
//! once, and with them the threads. Each runs its guests inside the async
//! runtime's context, as a blocking-pool thread does (wasmtime-wasi blocks
//! on that runtime's handle).
//!
//! The process does not wait for these threads at exit, as tokio's runtime
//! waits for its blocking pool: [`GuestThreads::busy`] tells the server
//! when the work it was given is done, so that a call still running when
//! the session ends finishes before the process does.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A job says whether it counted its thread as finishing (see
/// [`State::finishing`]): its thread uncounts it, under the same lock as it
/// takes queued work.
type Job = Box<dyn FnOnce() -> bool + Send>;

/// The pool. Dropping it lets its idle threads go; busy ones go when done.
#[derive(Default)]
pub struct GuestThreads {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Idle threads, the most recently idle last.
    idle: Vec<Arc<Waiter>>,
    /// Threads that have sent their answer and are dropping what their
    /// work left (see [`GuestThreads::run_then`]).
    finishing: usize,
    /// Work given and not done, the dropping of what it left included.
    busy: usize,
    /// Work for the finishing threads, at most one each: they take it
    /// without sleeping, warm.
    queued: VecDeque<Job>,
    closed: bool,
}

/// One idle thread's bell.
#[derive(Default)]
struct Waiter {
    next: Mutex<Next>,
    rung: Condvar,
}

#[derive(Default)]
enum Next {
    #[default]
    Wait,
    Run(Job),
    Exit,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl GuestThreads {
    /// Runs `work` on a guest thread. The first half of what it returns
    /// comes back on the receiver; the second half (a spent instance, slow
    /// to drop) is dropped after that on the same thread, which then takes
    /// work queued for it meanwhile rather than another thread being woken
    /// for it. `work`'s captures are dropped before the value is sent. If
    /// `work` panics (or no thread could be made), the receiver gets an
    /// error instead.
    pub fn run_then<T: Send + 'static, L: 'static>(
        &self,
        work: impl FnOnce() -> (T, L) + Send + 'static,
    ) -> tokio::sync::oneshot::Receiver<T> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let shared = Arc::clone(&self.state);
        let job: Job = Box::new(move || {
            let _context = runtime.as_ref().map(|r| r.enter());
            // A panic's message is on stderr (the panic hook); the caller
            // sees the answer dropped.
            let Ok((value, rest)) = catch_unwind(AssertUnwindSafe(work)) else {
                return false;
            };
            lock(&shared).finishing += 1;
            let _ = answer.send(value);
            // Caught too: the thread must live to take what was queued
            // for it.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(rest)));
            true
        });
        let mut state = lock(&self.state);
        state.busy += 1;
        if state.queued.len() < state.finishing {
            state.queued.push_back(job);
            return answered;
        }
        if let Some(waiter) = state.idle.pop() {
            drop(state);
            *lock(&waiter.next) = Next::Run(job);
            waiter.rung.notify_one();
            return answered;
        }
        drop(state);
        let shared = Arc::clone(&self.state);
        let spawned = std::thread::Builder::new()
            .name("guest".into())
            .spawn(move || serve(&shared, job));
        if let Err(e) = spawned {
            // The job (and its sender) went with the failed spawn.
            tracing::error!("cannot start a thread for a guest: {e}");
            lock(&self.state).busy -= 1;
        }
        answered
    }

    /// Work given and not done yet.
    pub fn busy(&self) -> usize {
        lock(&self.state).busy
    }
}

/// A guest thread: runs `job`, then what was queued for it, then waits to
/// be rung for the next.
fn serve(shared: &Mutex<State>, mut job: Job) {
    loop {
        let finished = job();
        let waiter = {
            let mut state = lock(shared);
            state.busy -= 1;
            if finished {
                state.finishing -= 1;
            }
            if let Some(queued) = state.queued.pop_front() {
                job = queued;
                continue;
            }
            if state.closed {
                return;
            }
            let waiter = Arc::new(Waiter::default());
            state.idle.push(Arc::clone(&waiter));
            waiter
        };
        let mut next = lock(&waiter.next);
        loop {
            match std::mem::take(&mut *next) {
                Next::Wait => next = waiter.rung.wait(next).unwrap_or_else(|p| p.into_inner()),
                Next::Run(rung) => {
                    job = rung;
                    break;
                }
                Next::Exit => return,
            }
        }
    }
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.closed = true;
        for waiter in state.idle.drain(..) {
            *lock(&waiter.next) = Next::Exit;
            waiter.rung.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn run<T: Send + 'static>(
        pool: &GuestThreads,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> tokio::sync::oneshot::Receiver<T> {
        pool.run_then(move || (work(), ()))
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn values_come_back_and_threads_are_reused() {
        let pool = GuestThreads::default();
        let mut names = std::collections::HashSet::new();
        for i in 0..50 {
            let (value, thread) =
                block_on(run(&pool, move || (i * 2, std::thread::current().id())))
                    .expect("answered");
            assert_eq!(value, i * 2);
            names.insert(thread);
        }
        // One call at a time: the thread that went idle last, every time.
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn calls_at_once_each_get_a_thread_and_a_panic_is_an_error() {
        let pool = GuestThreads::default();
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let answers: Vec<_> = (0..4)
            .map(|i| {
                let barrier = Arc::clone(&barrier);
                // All four wait for each other: they run at once or never.
                run(&pool, move || {
                    barrier.wait();
                    i
                })
            })
            .collect();
        let got: Vec<usize> = answers.into_iter().map(|a| block_on(a).unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        let panicked = run(&pool, || -> usize {
            panic!("a guest thread's panic, on purpose")
        });
        assert!(block_on(panicked).is_err());
        // The pool still serves after a panic.
        assert_eq!(block_on(run(&pool, || 7)).unwrap(), 7);
    }

    #[test]
    fn what_the_work_holds_is_dropped_before_its_answer() {
        let pool = GuestThreads::default();
        let held = Arc::new(AtomicUsize::new(0));
        let witness = Arc::clone(&held);
        let answer = run(&pool, move || {
            witness.fetch_add(1, Ordering::SeqCst);
        });
        block_on(answer).unwrap();
        assert_eq!(Arc::strong_count(&held), 1);
    }

    /// What the work leaves is dropped after its answer, on its thread;
    /// work that comes meanwhile waits for that thread rather than waking
    /// another, and starts once the drop is done.
    #[test]
    fn the_rest_is_dropped_after_the_answer_and_the_next_work_waits_for_it() {
        struct Slow(Arc<AtomicUsize>);
        impl Drop for Slow {
            fn drop(&mut self) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                self.0.store(1, Ordering::SeqCst);
            }
        }
        let pool = GuestThreads::default();
        let dropped = Arc::new(AtomicUsize::new(0));
        let rest = Slow(Arc::clone(&dropped));
        let first = pool.run_then(move || (std::thread::current().id(), rest));
        let first = block_on(first).unwrap();
        let seen = Arc::clone(&dropped);
        let second = run(&pool, move || {
            (std::thread::current().id(), seen.load(Ordering::SeqCst))
        });
        let (second, dropped_before) = block_on(second).unwrap();
        assert_eq!(first, second, "the same thread, warm");
        assert_eq!(dropped_before, 1, "the next work started after the drop");
    }

    /// Waits (a bounded while, for a loaded machine) until the pool has no
    /// work left.
    fn until_idle(pool: &GuestThreads) {
        for _ in 0..1_000 {
            if pool.busy() == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the pool is still busy");
    }

    /// The work counts as busy until what it left is dropped: a server
    /// waits on that before it exits.
    #[test]
    fn work_is_busy_until_what_it_left_is_dropped() {
        struct Held(Arc<std::sync::Barrier>, Arc<AtomicUsize>);
        impl Drop for Held {
            fn drop(&mut self) {
                self.0.wait();
                self.1.store(1, Ordering::SeqCst);
            }
        }
        let pool = GuestThreads::default();
        assert_eq!(pool.busy(), 0);
        let release = Arc::new(std::sync::Barrier::new(2));
        let dropped = Arc::new(AtomicUsize::new(0));
        let rest = Held(Arc::clone(&release), Arc::clone(&dropped));
        block_on(pool.run_then(move || ((), rest))).unwrap();
        // Answered, and its drop waits for us.
        assert_eq!(pool.busy(), 1);
        release.wait();
        until_idle(&pool);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    /// A panic while dropping what the work left strands nothing: the
    /// thread lives on and takes the next work.
    #[test]
    fn a_panic_in_the_drop_strands_no_work() {
        struct Bad;
        impl Drop for Bad {
            fn drop(&mut self) {
                panic!("a drop's panic, on purpose");
            }
        }
        let pool = GuestThreads::default();
        let first = block_on(pool.run_then(|| (std::thread::current().id(), Bad))).unwrap();
        let second = block_on(run(&pool, || std::thread::current().id())).unwrap();
        assert_eq!(first, second, "the same thread lived on");
        until_idle(&pool);
    }
}
