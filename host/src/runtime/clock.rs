//! A monotonic clock whose waits end by the call's deadline.
//!
//! Epoch interruption stops a guest only while it runs wasm code; a guest
//! blocked in a host call (`pollable.block` on a clock subscription, the one
//! way a tool can wait without end here: no network, empty stdin) would hold
//! its thread forever. Every subscription is clamped to the time left before
//! the deadline, so the guest wakes, re-enters wasm, and the epoch check
//! stops it. A wait that fits before the deadline is untouched.

use std::time::Instant;

use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::clocks::WasiClocksCtxView;
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::{
    self, Duration, Instant as WasiInstant,
};

/// The stock clock plus the call's deadline.
pub struct CappedClock<'a> {
    pub clock: WasiClocksCtxView<'a>,
    pub deadline: Instant,
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
        let latest = now.saturating_add(self.left());
        monotonic_clock::Host::subscribe_instant(&mut self.clock, when.min(latest))
    }

    fn subscribe_duration(
        &mut self,
        duration: Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let capped = duration.min(self.left());
        monotonic_clock::Host::subscribe_duration(&mut self.clock, capped)
    }
}
