//! Call slots: a bound on how many guests run at once.
//!
//! Each running guest holds up to `tool_memory_bytes` and a guest thread,
//! so `max_concurrent_calls` slots bound the server's memory whatever the
//! client sends. A call takes a slot before its guest starts and gives it back
//! when the guest is done (the permit travels with the guest's thread, so a
//! guest that outlives its caller still holds its slot). A call beyond the
//! bound waits its turn, for at most the tool timeout, then is refused as
//! `busy`; a cancelled call stops waiting at once. Calls never wait behind
//! one slow call while a slot is free.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// A taken slot; dropping it frees the slot.
pub type Slot = OwnedSemaphorePermit;

/// The slots of one server.
pub struct Slots {
    semaphore: Arc<Semaphore>,
    size: usize,
    wait: Duration,
}

/// Why a call got no slot.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error(
        "all {slots} call slots stayed taken for {} ms (max_concurrent_calls); try again later",
        waited.as_millis()
    )]
    Busy { slots: usize, waited: Duration },
    #[error("the call was cancelled")]
    Cancelled,
}

impl Slots {
    /// `size` slots; a call waits at most `wait` for one.
    pub fn new(size: usize, wait: Duration) -> Slots {
        Slots {
            semaphore: Arc::new(Semaphore::new(size)),
            size,
            wait,
        }
    }

    /// Takes a free slot, or waits for one until `wait` passes (or
    /// `until`, if that comes first: the call waited for other things
    /// before) or `cancel` fires.
    pub async fn take(
        &self,
        cancel: &CancellationToken,
        until: tokio::time::Instant,
    ) -> Result<Slot, SlotError> {
        // The common case, a free slot, arms no timer.
        if let Ok(slot) = Arc::clone(&self.semaphore).try_acquire_owned() {
            return Ok(slot);
        }
        let wait = self
            .wait
            .min(until.saturating_duration_since(tokio::time::Instant::now()));
        let waiting = tokio::time::timeout(wait, Arc::clone(&self.semaphore).acquire_owned());
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(SlotError::Cancelled),
            taken = waiting => match taken {
                Ok(Ok(slot)) => Ok(slot),
                // The semaphore is never closed: a closed one is as good as busy.
                // The call waited its whole allowance (`until` is the end
                // of the same allowance, part of it spent on other waits).
                Ok(Err(_)) | Err(_) => Err(SlotError::Busy {
                    slots: self.size,
                    waited: self.wait,
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// No earlier end than the slots' own wait.
    fn later() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(3600)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_free_slot_is_taken_at_once_and_given_back_on_drop() {
        rt().block_on(async {
            let slots = Slots::new(2, Duration::from_secs(60));
            let none = CancellationToken::new();
            let a = slots.take(&none, later()).await.unwrap();
            let b = slots.take(&none, later()).await.unwrap();
            drop(a);
            let started = Instant::now();
            let _c = slots.take(&none, later()).await.unwrap();
            assert!(started.elapsed() < Duration::from_secs(30));
            drop(b);
        });
    }

    #[test]
    fn a_call_beyond_the_bound_waits_then_is_busy() {
        rt().block_on(async {
            let wait = Duration::from_millis(150);
            let slots = Slots::new(1, wait);
            let none = CancellationToken::new();
            let _held = slots.take(&none, later()).await.unwrap();
            let started = Instant::now();
            let err = slots.take(&none, later()).await.unwrap_err();
            assert!(started.elapsed() >= wait);
            assert_eq!(
                err.to_string(),
                "all 1 call slots stayed taken for 150 ms (max_concurrent_calls); try again later"
            );
        });
    }

    /// A call that already waited (for its locks) waits only what is left.
    #[test]
    fn an_earlier_end_shortens_the_wait() {
        rt().block_on(async {
            let slots = Slots::new(1, Duration::from_secs(60));
            let none = CancellationToken::new();
            let _held = slots.take(&none, later()).await.unwrap();
            let started = Instant::now();
            let until = tokio::time::Instant::now() + Duration::from_millis(100);
            let err = slots.take(&none, until).await.unwrap_err();
            assert!(matches!(err, SlotError::Busy { .. }));
            assert!(started.elapsed() < Duration::from_secs(30));
        });
    }

    #[test]
    fn a_waiting_call_gets_the_slot_freed_before_its_wait_ends() {
        rt().block_on(async {
            let slots = Slots::new(1, Duration::from_secs(60));
            let none = CancellationToken::new();
            let held = slots.take(&none, later()).await.unwrap();
            let freer = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                drop(held);
            });
            assert!(slots.take(&none, later()).await.is_ok());
            freer.await.unwrap();
        });
    }

    #[test]
    fn cancelling_stops_the_wait() {
        rt().block_on(async {
            let slots = Slots::new(1, Duration::from_secs(60));
            let _held = slots
                .take(&CancellationToken::new(), later())
                .await
                .unwrap();
            let cancel = CancellationToken::new();
            let trigger = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                trigger.cancel();
            });
            let started = Instant::now();
            assert_eq!(
                slots.take(&cancel, later()).await.unwrap_err(),
                SlotError::Cancelled
            );
            assert!(started.elapsed() < Duration::from_secs(30));
        });
    }
}
