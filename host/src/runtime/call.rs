//! One call: a fresh store and instance with only the call's mounts
//! ([`InstanceBuilder`]), the guest run under its memory cap and deadline,
//! and what it left behind gathered: its refusals and, when it succeeded,
//! the changes it staged (for the caller to publish; a call that failed
//! leaves them to be dropped with its instance). The spent instance is
//! handed back beside the outcome ([`FinishedInstance`]) to be dropped once
//! the answer is on its way; nothing in it runs again.

use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::instance::InstanceBuilder;
use super::{
    Budget, CallError, CallOutcome, CallRequest, CallState, Output, Runtime, Tool, bindings, fs,
    output,
};

impl Runtime {
    pub(super) fn store(&self, state: CallState, budget: &Budget) -> Store<CallState> {
        let mut store = Store::new(&self.engine, state);
        store.data_mut().limiter.max = usize::try_from(budget.memory_bytes).unwrap_or(usize::MAX);
        store.limiter(|s| &mut s.limiter);
        let (deadline, cancel) = (store.data().deadline, store.data().cancel.clone());
        store.epoch_deadline_callback(move |_| {
            if cancel.is_cancelled() || Instant::now() >= deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        store.set_epoch_deadline(1);
        store
    }

    /// Runs tool `index` on a fresh instance that sees only `req.mounts`.
    pub fn call(&self, index: usize, req: CallRequest) -> CallOutcome {
        self.call_keeping_instance(index, req).0
    }

    /// [`Runtime::call`], handing back the spent instance with the outcome:
    /// the caller answers first and drops it after (see [`FinishedInstance`]).
    /// Top-down: the instance with only the call's mounts, the guest's run,
    /// what it left behind.
    pub fn call_keeping_instance(
        &self,
        index: usize,
        req: CallRequest,
    ) -> (CallOutcome, FinishedInstance) {
        let tool = &self.tools[index];
        let mut instance = InstanceBuilder::new(tool);
        for m in &req.mounts {
            if let Err(message) = instance.mount(m) {
                return (CallOutcome::setup(message), FinishedInstance::none());
            }
        }
        let (mut store, context, stderr) = instance.build(self, &req);
        let result = run_guest(tool, &mut store, context, &req);
        let result = result.map_err(|e| stopped(e, &store, &tool.budget, &req.cancel, &stderr));
        let outcome = left_behind(&mut store, result);
        (
            outcome,
            FinishedInstance {
                _store: Some(store),
            },
        )
    }
}

/// What the guest's `call` gave back, read under the output limit: `None`
/// when the result was over it. An error is a trap (or an instance that
/// could not be made).
fn run_guest(
    tool: &Tool,
    store: &mut Store<CallState>,
    context: bindings::Context,
    req: &CallRequest,
) -> wasmtime::Result<Result<Output, CallError>> {
    let limit = tool.budget.output_bytes;
    let instance = tool.pre.instance_pre().instantiate(&mut *store)?;
    let call = instance.get_typed_func::<(bindings::Context, String), (output::GuestResult,)>(
        &mut *store,
        &tool.call,
    )?;
    let arguments = req.arguments.clone();
    let (ran, over) = output::with_budget(limit, || call.call(&mut *store, (context, arguments)));
    let (lifted,) = ran?;
    Ok(match output::owned(lifted).filter(|_| !over) {
        None => Err(CallError::OutputTooLarge(limit)),
        Some(Ok(output)) => Ok(output),
        Some(Err(e)) => Err(CallError::Tool(e)),
    })
}

/// Why a guest that trapped was stopped: a cancellation, its deadline, its
/// memory cap, or a crash (with what it wrote to stderr).
fn stopped(
    e: wasmtime::Error,
    store: &Store<CallState>,
    budget: &Budget,
    cancel: &CancellationToken,
    stderr: &MemoryOutputPipe,
) -> CallError {
    if cancel.is_cancelled() {
        CallError::Cancelled
    } else if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        CallError::Timeout(budget.timeout)
    } else if store.data().limiter.hit {
        CallError::Memory(budget.memory_bytes)
    } else {
        let guest_stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
        CallError::Crashed(format!("{e:?}; guest stderr: {}", guest_stderr.trim()))
    }
}

/// The outcome, with what the call left behind: its refusals and, for a
/// call that succeeded, the changes it staged to publish (a call that
/// failed changed nothing: its stage goes with its instance).
fn left_behind(
    store: &mut Store<CallState>,
    result: Result<Result<Output, CallError>, CallError>,
) -> CallOutcome {
    let result = result.and_then(|r| r);
    let guard = &mut store.data_mut().guard;
    let changes = if result.is_ok() {
        guard.take_changes()
    } else {
        guard.discard_changes();
        fs::CallChanges::none()
    };
    CallOutcome {
        result,
        refusals: guard.take_refusals(),
        changes,
    }
}

/// A call's instance once its outcome is out: its store, the guest's
/// memory and whatever descriptors it still held. Dropping it returns the
/// instance's pool slot, which resets the guest's memory (the pages it
/// wrote: a tenth of a 4 KiB `read_file`'s CPU), so it is dropped after the
/// answer has gone on its way, on the guest's thread. Nothing in it can run
/// again: the guest's call has returned or trapped.
pub struct FinishedInstance {
    _store: Option<Store<CallState>>,
}

impl FinishedInstance {
    /// A call that never had an instance.
    pub fn none() -> FinishedInstance {
        FinishedInstance { _store: None }
    }
}
