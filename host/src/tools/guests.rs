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

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

type Job = Box<dyn FnOnce() + Send>;

/// The pool. Dropping it lets its idle threads go; busy ones go when done.
#[derive(Default)]
pub struct GuestThreads {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Idle threads, the most recently idle last.
    idle: Vec<Arc<Waiter>>,
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
    /// Runs `work` on a guest thread; its value comes back on the receiver.
    /// `work` and everything it holds are dropped before the value is sent.
    /// If `work` panics (or no thread could be made), the receiver gets an
    /// error instead.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> tokio::sync::oneshot::Receiver<T> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let job: Job = Box::new(move || {
            let _context = runtime.as_ref().map(|r| r.enter());
            // A panic's message is on stderr (the panic hook); the caller
            // sees the answer dropped.
            if let Ok(value) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
                let _ = answer.send(value);
            }
        });
        let mut state = lock(&self.state);
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
        }
        answered
    }
}

/// A guest thread: runs `job`, then waits to be rung for the next.
fn serve(shared: &Mutex<State>, mut job: Job) {
    loop {
        job();
        let waiter = {
            let mut state = lock(shared);
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
                block_on(pool.run(move || (i * 2, std::thread::current().id()))).expect("answered");
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
                pool.run(move || {
                    barrier.wait();
                    i
                })
            })
            .collect();
        let got: Vec<usize> = answers.into_iter().map(|a| block_on(a).unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        let panicked = pool.run(|| -> usize { panic!("a guest thread's panic, on purpose") });
        assert!(block_on(panicked).is_err());
        // The pool still serves after a panic.
        assert_eq!(block_on(pool.run(|| 7)).unwrap(), 7);
    }

    #[test]
    fn what_the_work_holds_is_dropped_before_its_answer() {
        let pool = GuestThreads::default();
        let held = Arc::new(AtomicUsize::new(0));
        let witness = Arc::clone(&held);
        let answer = pool.run(move || {
            witness.fetch_add(1, Ordering::SeqCst);
        });
        block_on(answer).unwrap();
        assert_eq!(Arc::strong_count(&held), 1);
    }
}
