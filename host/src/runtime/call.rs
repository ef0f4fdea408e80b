//! One call: a fresh store and instance with only the call's mounts, the
//! guest run under its memory cap and deadline, and what it left behind
//! gathered: its refusals and, when it succeeded, the changes it staged
//! (for the caller to publish; a call that failed leaves them to be
//! dropped with its instance). The spent instance is
//! handed back beside the outcome ([`FinishedInstance`]) to be dropped once the answer
//! is on its way; nothing in it runs again.

use super::*;

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
    pub fn call_keeping_instance(
        &self,
        index: usize,
        req: CallRequest,
    ) -> (CallOutcome, FinishedInstance) {
        let setup = |message| (CallOutcome::setup(message), FinishedInstance::none());
        // The reason a root's directory did not open, when it is worth
        // telling (the rest are for the operator's log).
        let why = |e: &wasmtime::Error| {
            tracing::warn!("cannot open a root for a call: {e:?}");
            match e.downcast_ref::<std::io::Error>() {
                Some(e) if descriptors::out_of_descriptors(e) => {
                    format!(": {}; try again", descriptors::NO_DESCRIPTORS)
                }
                _ => String::new(),
            }
        };
        let mut wasi = WasiCtxBuilder::new();
        // Before any preopen: each preopen captures it (2-5x cheaper calls).
        wasi.allow_blocking_current_thread(true);
        let tool = &self.tools[index];
        let mut mounts = Vec::new();
        let mut context_mounts = Vec::new();
        let mut history_roots = Vec::new();
        for m in &req.mounts {
            let guest_dir = format!("/{}", m.root.name);
            let perms = if m.writable() {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            if let Err(e) = wasi.preopened_dir(&m.root.path, &guest_dir, perms) {
                return setup(format!(
                    "root '{}' cannot be opened{}",
                    m.root.name,
                    why(&e)
                ));
            }
            context_mounts.push(bindings::Mount {
                name: m.root.name.clone(),
                dir: guest_dir.clone(),
                writable: m.writable(),
                max_read_bytes: m.root.max_read_bytes,
            });
            mounts.push(
                Mount::root(Arc::clone(&m.root), guest_dir, m.op)
                    .narrowed(m.area.clone())
                    .deleting(m.deletes.clone()),
            );
            if tool.history {
                // The root's git directory, for the history tools alone:
                // read-only, seen through its own deny list (the built-in
                // names and `hooks`), at a path no other tool is given.
                let git_dir = match &m.root.repository {
                    Some(repository) => {
                        let guest = format!("/.git/{}", m.root.name);
                        let git = &repository.git;
                        if let Err(e) = wasi.preopened_dir(&git.path, &guest, FsPerms::ReadOnly) {
                            return setup(format!(
                                "root '{}': its repository cannot be opened{}",
                                m.root.name,
                                why(&e)
                            ));
                        }
                        mounts.push(Mount::root(
                            Arc::clone(git),
                            guest.clone(),
                            policy::Permission::Read,
                        ));
                        Some(guest)
                    }
                    None => None,
                };
                history_roots.push((Arc::clone(&m.root), git_dir, m.area.clone()));
            }
        }
        let stderr = MemoryOutputPipe::new(8 * 1024);
        wasi.stderr(stderr.clone());
        let mut table = ResourceTable::new();
        // Streams, pollables and descriptors together; descriptors alone are
        // capped lower by the policing filesystem.
        table.set_max_capacity(4 * descriptors::MAX_DESCRIPTORS);
        let budget = &tool.budget;
        let state = CallState {
            deadline: Instant::now() + budget.timeout,
            cancel: req.cancel.clone(),
            wasi: wasi.build(),
            table,
            limiter: MemoryLimiter {
                max: 0,
                used: 0,
                hit: false,
            },
            guard: FsGuard::new(
                mounts,
                Arc::clone(&req.activity),
                req.quota.clone(),
                req.staging.clone(),
            ),
            history: tool.history.then(|| HistoryState {
                tool: tool.descriptor.name.clone(),
                roots: history_roots,
            }),
        };
        let mut store = self.store(state, budget);
        let ctx = bindings::Context {
            mounts: context_mounts,
            limits: bindings::Limits {
                max_entries: req.limits.max_entries,
                max_results: req.limits.max_results,
                max_search_bytes: req.limits.max_search_bytes,
                time_limit_ms: u64::try_from(budget.timeout.as_millis()).unwrap_or(u64::MAX),
            },
        };
        let limit = budget.output_bytes;
        let ran = tool
            .pre
            .instance_pre()
            .instantiate(&mut store)
            .and_then(|instance| {
                let call = instance
                    .get_typed_func::<(bindings::Context, String), (output::GuestResult,)>(
                        &mut store, &tool.call,
                    )?;
                let arguments = req.arguments.clone();
                let (ran, over) =
                    output::with_budget(limit, || call.call(&mut store, (ctx, arguments)));
                let (lifted,) = ran?;
                Ok(output::owned(lifted).filter(|_| !over))
            });
        let result = match ran {
            Ok(None) => Err(CallError::OutputTooLarge(limit)),
            Ok(Some(Ok(output))) => Ok(output),
            Ok(Some(Err(e))) => Err(CallError::Tool(e)),
            Err(_) if req.cancel.is_cancelled() => Err(CallError::Cancelled),
            Err(e) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {
                Err(CallError::Timeout(budget.timeout))
            }
            Err(_) if store.data().limiter.hit => Err(CallError::Memory(budget.memory_bytes)),
            Err(e) => {
                let guest_stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
                Err(CallError::Crashed(format!(
                    "{e:?}; guest stderr: {}",
                    guest_stderr.trim()
                )))
            }
        };
        // What a call that succeeded changed, to publish; a call that
        // failed changed nothing (its stage goes with its instance).
        let guard = &mut store.data_mut().guard;
        let changes = if result.is_ok() {
            guard.take_changes()
        } else {
            guard.discard_changes();
            fs::CallChanges::none()
        };
        let outcome = CallOutcome {
            result,
            refusals: guard.take_refusals(),
            changes,
        };
        (
            outcome,
            FinishedInstance {
                _store: Some(store),
            },
        )
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

impl CallState {
    /// State for `describe`: no filesystem at all.
    pub(super) fn empty(timeout: Duration) -> CallState {
        CallState {
            deadline: Instant::now() + timeout,
            cancel: CancellationToken::new(),
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                max: 0,
                used: 0,
                hit: false,
            },
            guard: FsGuard::new(vec![], Arc::default(), None, None),
            history: None,
        }
    }
}
