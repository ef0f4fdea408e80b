//! A monotonic clock whose waits end by the call's deadline.
//!
//! Epoch interruption stops a guest only while it runs wasm code; a guest
//! blocked in a host call (`pollable.block` on a clock subscription, the one
//! way a tool can wait without end here: no network, empty stdin) would hold
//! its thread forever. Every subscription is clamped to the time left before
//! the deadline, so the guest wakes, re-enters wasm, and the epoch check
//! stops it. A wait that fits before the deadline is untouched, except that
//! it also ends when the client cancels the call: a cancelled guest that is
//! sleeping wakes at once, and the epoch check stops it.

use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::clocks::WasiClocksCtxView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::{
    self, Duration, Instant as WasiInstant,
};
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};

/// The stock clock plus the call's deadline and cancellation.
pub struct CappedClock<'a> {
    pub clock: WasiClocksCtxView<'a>,
    pub deadline: Instant,
    pub cancel: CancellationToken,
}

/// A clock wait that ends at its time or when the call is cancelled.
struct Wait {
    until: tokio::time::Instant,
    cancel: CancellationToken,
}

#[async_trait::async_trait]
impl Pollable for Wait {
    async fn ready(&mut self) {
        tokio::select! {
            () = tokio::time::sleep_until(self.until) => {}
            () = self.cancel.cancelled() => {}
        }
    }
}

/// `HasData` marker for linking the capped clock.
pub struct Capped;

impl HasData for Capped {
    type Data<'a> = CappedClock<'a>;
}

impl CappedClock<'_> {
    /// Nanoseconds left before the deadline, plus one epoch tick so the
    /// deadline has passed when the guest wakes.
    fn left(&self) -> u64 {
        let left = self.deadline.saturating_duration_since(Instant::now()) + super::TICK;
        u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)
    }

    /// A pollable ready after `nanos` (at most until the deadline), or as
    /// soon as the call is cancelled.
    fn wait(&mut self, nanos: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let nanos = nanos.min(self.left());
        if nanos == 0 || self.cancel.is_cancelled() {
            // The stock zero wait yields once, which busy polling relies on.
            return monotonic_clock::Host::subscribe_duration(&mut self.clock, 0);
        }
        let until = tokio::time::Instant::now() + std::time::Duration::from_nanos(nanos);
        let wait = self.clock.table.push(Wait {
            until,
            cancel: self.cancel.clone(),
        })?;
        subscribe(self.clock.table, wait)
    }
}

impl monotonic_clock::Host for CappedClock<'_> {
    fn now(&mut self) -> wasmtime::Result<WasiInstant> {
        monotonic_clock::Host::now(&mut self.clock)
    }

    fn resolution(&mut self) -> wasmtime::Result<Duration> {
        monotonic_clock::Host::resolution(&mut self.clock)
    }

    fn subscribe_instant(&mut self, when: WasiInstant) -> wasmtime::Result<Resource<DynPollable>> {
        let now = monotonic_clock::Host::now(&mut self.clock)?;
        self.wait(when.saturating_sub(now))
    }

    fn subscribe_duration(
        &mut self,
        duration: Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.wait(duration)
    }
}
