//! The WebAssembly runtime: one engine, the loaded tool components, and a
//! fresh, limited instance per call.
//!
//! Each call gets a new `Store` and instance built from the tool's cached
//! `InstancePre` (an instance is never reused: after a trap it is poisoned,
//! and a fresh one cannot see a previous call's state). The instance's only
//! filesystem is the preopened directories of the call's roots, read-only
//! unless the call needs write, seen through the policing filesystem
//! ([`fs`]). It has no network, no environment, no arguments and no stdout.
//! A memory cap and a wall-clock deadline (epoch interruption, also used to
//! stop a cancelled call) bound every call.

mod activity;
mod bindings;
mod cache;
mod clock;
pub mod fs;
mod meter;
mod output;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use wasmtime::component::{Component, ComponentExportIndex, Linker, ResourceTable};
use wasmtime::{
    Config as EngineConfig, Engine, InstanceAllocationStrategy, PoolingAllocationConfig,
    ResourceLimiter, Store, Trap, UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

pub use activity::{Activity, DiskError};
pub use bindings::{Annotations, Descriptor, Image, Output, PathArgument, Permission, ToolError};
pub use cache::Cache;
use fs::{FsGuard, Mount, PolicedFs, Refusal};

use crate::policy::{self, Root};
use crate::store::quota::Quota;
use crate::store::{Kept, TRASH_DIR};
use crate::sys::descriptors;

/// How often the epoch advances: the granularity of deadlines and cancellation.
const TICK: Duration = Duration::from_millis(10);

/// Most component instances alive at once: the most calls a config may let
/// run at once (`max_concurrent_calls`), plus one for `describe` at load.
/// Slots are reserved up front by the pooling allocator, so a call reuses a
/// warm slot instead of mapping and unmapping fresh memory.
pub const MAX_INSTANCES: u32 = crate::config::MAX_CONCURRENT_CALLS as u32 + 1;

/// Interfaces a tool may not import.
const NETWORK_IMPORTS: &[&str] = &["wasi:sockets/", "wasi:http/"];

/// The interface every tool component exports.
pub const TOOL_INTERFACE: &str = "loom-fs:tool/tool@0.2.0";

/// What a file must start with to be a component (magic, then the
/// component-model layer; a core module has version 1 there).
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const MODULE_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Why a file cannot be a tool component, judged by its first bytes before
/// anything compiles it.
pub fn check_component_bytes(wasm: &[u8]) -> Result<(), String> {
    match wasm.get(..8) {
        Some(h) if h == COMPONENT_HEADER => Ok(()),
        Some(h) if h == MODULE_HEADER => {
            Err("is a core WebAssembly module, not a component (build it for wasm32-wasip2)".into())
        }
        _ => Err("is not a WebAssembly component".into()),
    }
}

/// Limits of one call.
#[derive(Clone, Debug)]
pub struct Budget {
    pub memory_bytes: u64,
    pub timeout: Duration,
    /// Most bytes of result a call may return (`max_output_bytes`).
    pub output_bytes: u64,
}

/// Listing and search limits passed to the guest.
#[derive(Clone, Copy, Debug)]
pub struct GuestLimits {
    pub max_entries: u32,
    pub max_results: u32,
    pub max_search_bytes: u64,
}

/// The source of every component embedded in the binary.
pub const BUILT_IN: &str = "built-in";

/// A loaded tool component.
pub struct Tool {
    pub descriptor: Descriptor,
    /// Where it came from ([`BUILT_IN`] or a file path), for messages.
    pub source: String,
    pre: bindings::ToolComponentPre<CallState>,
    /// Its `call` export, called with a result type that is lifted under
    /// the output limit (see [`output`]).
    call: ComponentExportIndex,
}

impl Tool {
    /// Whether the project wrote it: its text shows names by the naming
    /// rule already. (A `[[components]]` file's source is its path, joined
    /// to the config's directory: never the bare word.)
    pub fn is_built_in(&self) -> bool {
        self.source == BUILT_IN
    }
}

/// Why a call produced no output.
#[derive(Debug)]
pub enum CallError {
    /// The tool itself said no.
    Tool(ToolError),
    /// The deadline passed; the guest was stopped.
    Timeout(Duration),
    /// The client cancelled; the guest was stopped.
    Cancelled,
    /// The guest wanted more memory than a call may have.
    Memory(u64),
    /// The guest trapped; the detail is for the operator's log only.
    Crashed(String),
    /// The call could not be set up (e.g. a root vanished).
    Setup(String),
    /// The result was larger than the output limit (bytes): it was refused
    /// while it was read out of the guest.
    OutputTooLarge(u64),
}

/// What a call produced, and what the policing filesystem refused on the way.
pub struct CallOutcome {
    pub result: Result<Output, CallError>,
    pub refusals: Vec<Refusal>,
    /// What the call moved or linked into a trash.
    pub kept: Vec<Kept>,
}

impl CallOutcome {
    /// A call that could not be set up: nothing ran.
    pub fn setup(message: String) -> CallOutcome {
        CallOutcome {
            result: Err(CallError::Setup(message)),
            refusals: vec![],
            kept: vec![],
        }
    }
}

/// One root as a call sees it.
pub struct CallMount {
    pub root: Arc<Root>,
    /// The most the call does there (its path arguments' strongest
    /// operation): the guest gets the root's permissions up to this, and a
    /// read-write preopen only beyond read.
    pub op: policy::Permission,
    /// The call's staging directory in this root (see [`crate::store::staging`]),
    /// for a tool that keeps history where the call writes.
    pub staging: Option<PathBuf>,
}

impl CallMount {
    pub fn writable(&self) -> bool {
        self.op != policy::Permission::Read
    }
}

pub struct CallRequest {
    pub mounts: Vec<CallMount>,
    /// For a tool that keeps history: this call's trash entry name. The
    /// trash of every writable mount is then preopened.
    pub stamp: Option<String>,
    pub limits: GuestLimits,
    pub arguments: String,
    /// Fired by the caller to stop the call (client cancellation).
    pub cancel: CancellationToken,
    /// Counts what the call does while it runs (progress notifications).
    pub activity: Arc<Activity>,
    /// The server's byte quota, if it has one.
    pub quota: Option<Arc<Quota>>,
}

/// Store data of one call.
pub struct CallState {
    /// When the call must end; clock waits are clamped to it.
    deadline: Instant,
    /// Fired when the client cancels; clock waits end on it too.
    cancel: CancellationToken,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    guard: FsGuard,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn capped_clock(state: &mut CallState) -> clock::CappedClock<'_> {
    use wasmtime_wasi::clocks::WasiClocksView;
    let (deadline, cancel) = (state.deadline, state.cancel.clone());
    clock::CappedClock {
        clock: state.clocks(),
        deadline,
        cancel,
    }
}

fn policed(state: &mut CallState) -> PolicedFs<'_> {
    PolicedFs {
        fs: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
            ctx: state.wasi.filesystem(),
            table: &mut state.table,
        },
        guard: &mut state.guard,
    }
}

/// Refuses memory growth past the call's cap, counting every linear memory
/// of the instance together (a component may hold several), and remembers
/// that it did.
struct MemoryLimiter {
    max: usize,
    used: usize,
    hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.used - current.min(self.used)).saturating_add(desired);
        if total > self.max {
            self.hit = true;
            return Ok(false);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The engine and the loaded tools.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    tools: Vec<Tool>,
    budget: Budget,
    ticker: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    pub fn new(budget: Budget) -> wasmtime::Result<Runtime> {
        fs::self_test().map_err(wasmtime::Error::msg)?;
        let mut config = EngineConfig::new();
        config.epoch_interruption(true);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(MAX_INSTANCES)
            // A wasip2 component holds a few core instances, memories and tables.
            .total_core_instances(MAX_INSTANCES * 8)
            .total_memories(MAX_INSTANCES * 2)
            .total_tables(MAX_INSTANCES * 4)
            // What one component may hold, so that no component can take
            // the slots of others: a tool that needs more is refused at
            // load (its `describe` cannot be instantiated).
            .max_core_instances_per_component(8)
            .max_memories_per_component(2)
            .max_tables_per_component(4)
            // Wasm never runs async here: reserving fiber stacks would cost
            // milliseconds at every start.
            .total_stacks(0)
            .max_memory_size(usize::try_from(budget.memory_bytes).unwrap_or(usize::MAX))
            // Reset the first 256 KiB with memset instead of madvise: the
            // guests' 128 KiB stack, statics and first heap pages (see
            // guest-tools/.cargo/config.toml) stay mapped, no page faults.
            .linear_memory_keep_resident(256 << 10)
            .table_keep_resident(64 << 10);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        // Shadow the stock filesystem with the policing one.
        linker.allow_shadowing(true);
        wasmtime_wasi::p2::bindings::sync::filesystem::types::add_to_linker::<
            CallState,
            fs::Policed,
        >(&mut linker, policed)?;
        wasmtime_wasi::p2::bindings::filesystem::preopens::add_to_linker::<CallState, fs::Policed>(
            &mut linker,
            policed,
        )?;
        wasmtime_wasi::p2::bindings::clocks::monotonic_clock::add_to_linker::<
            CallState,
            clock::Capped,
        >(&mut linker, capped_clock)?;
        linker.allow_shadowing(false);

        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("epoch-ticker".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Runtime {
            engine,
            linker,
            tools: Vec::new(),
            budget,
            ticker: stop,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Loads a component, asks it to describe itself, and keeps it.
    /// Returns its index. A component that imports a network interface is
    /// refused: the linker has wasmtime-wasi's sockets, but no call is ever
    /// granted a network, and a tool that needs one does not belong here.
    pub fn load(&mut self, component: &Component, source: String) -> wasmtime::Result<usize> {
        let ty = component.component_type();
        let network: Vec<&str> = ty
            .imports(&self.engine)
            .map(|(name, _)| name)
            .filter(|name| NETWORK_IMPORTS.iter().any(|n| name.starts_with(n)))
            .collect();
        if !network.is_empty() {
            return Err(wasmtime::Error::msg(format!(
                "imports {}: loom-fs grants no network to tools",
                network.join(", ")
            )));
        }
        let instance_pre = self.linker.instantiate_pre(component)?;
        let pre = bindings::ToolComponentPre::new(instance_pre).map_err(|_| {
            wasmtime::Error::msg(format!(
                "does not export the tool interface ({TOOL_INTERFACE}); build it against wit/"
            ))
        })?;
        let call = component
            .get_export_index(None, TOOL_INTERFACE)
            .and_then(|tool| component.get_export_index(Some(&tool), "call"))
            .ok_or_else(|| wasmtime::Error::msg("does not export the tool interface's call"))?;
        let mut store = self.store(CallState::empty(self.budget.timeout), &self.budget.clone());
        let descriptor = pre
            .instantiate(&mut store)?
            .loom_fs_tool_tool()
            .call_describe(&mut store)?;
        self.tools.push(Tool {
            descriptor,
            source,
            pre,
            call,
        });
        Ok(self.tools.len() - 1)
    }

    fn store(&self, state: CallState, budget: &Budget) -> Store<CallState> {
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
        let setup = CallOutcome::setup;
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
        let mut mounts = Vec::new();
        let mut context_mounts = Vec::new();
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
            let trash = match (&req.stamp, m.writable()) {
                (Some(stamp), true) => {
                    let mount_dir = format!("/.trash/{}", m.root.name);
                    if let Err(e) = wasi.preopened_dir(&m.root.path, &mount_dir, FsPerms::ReadWrite)
                    {
                        return setup(format!(
                            "root '{}' cannot be opened{}",
                            m.root.name,
                            why(&e)
                        ));
                    }
                    let dir = format!("{mount_dir}/{TRASH_DIR}");
                    mounts.push(Mount::trash(Arc::clone(&m.root), mount_dir, m.op));
                    Some(bindings::Trash {
                        dir,
                        stamp: stamp.clone(),
                    })
                }
                _ => None,
            };
            let staging = match (&m.staging, m.writable()) {
                (Some(host), true) => {
                    let mount_dir = format!("/.staging/{}", m.root.name);
                    if let Err(e) = wasi.preopened_dir(host, &mount_dir, FsPerms::ReadWrite) {
                        return setup(format!(
                            "root '{}': its staging directory cannot be opened{}",
                            m.root.name,
                            why(&e)
                        ));
                    }
                    mounts.push(Mount::staging(
                        Arc::clone(&m.root),
                        mount_dir.clone(),
                        host.clone(),
                    ));
                    Some(mount_dir)
                }
                _ => None,
            };
            context_mounts.push(bindings::Mount {
                name: m.root.name.clone(),
                dir: guest_dir.clone(),
                writable: m.writable(),
                max_read_bytes: m.root.max_read_bytes,
                trash,
                staging,
            });
            mounts.push(Mount::root(Arc::clone(&m.root), guest_dir, m.op));
        }
        let stderr = MemoryOutputPipe::new(8 * 1024);
        wasi.stderr(stderr.clone());
        let mut table = ResourceTable::new();
        // Streams, pollables and descriptors together; descriptors alone are
        // capped lower by the policing filesystem.
        table.set_max_capacity(4 * descriptors::MAX_DESCRIPTORS);
        let state = CallState {
            deadline: Instant::now() + self.budget.timeout,
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
                req.stamp.as_deref(),
                Arc::clone(&req.activity),
                req.quota.clone(),
            ),
        };
        let mut store = self.store(state, &self.budget);
        let ctx = bindings::Context {
            mounts: context_mounts,
            limits: bindings::Limits {
                max_entries: req.limits.max_entries,
                max_results: req.limits.max_results,
                max_search_bytes: req.limits.max_search_bytes,
                time_limit_ms: u64::try_from(self.budget.timeout.as_millis()).unwrap_or(u64::MAX),
            },
        };
        let tool = &self.tools[index];
        let limit = self.budget.output_bytes;
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
                Err(CallError::Timeout(self.budget.timeout))
            }
            Err(_) if store.data().limiter.hit => Err(CallError::Memory(self.budget.memory_bytes)),
            Err(e) => {
                let guest_stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
                Err(CallError::Crashed(format!(
                    "{e:?}; guest stderr: {}",
                    guest_stderr.trim()
                )))
            }
        };
        let guard = &mut store.data_mut().guard;
        if matches!(
            result,
            Err(CallError::Timeout(_)
                | CallError::Cancelled
                | CallError::Memory(_)
                | CallError::Crashed(_))
        ) {
            // A guest stopped mid-write cannot clean up: remove the temporary
            // files it created (by their reserved name, nothing else).
            sweep_temporaries(guard.created());
        }
        CallOutcome {
            result,
            refusals: guard.take_refusals(),
            kept: guard.take_kept(),
        }
    }
}

impl CallState {
    /// State for `describe`: no filesystem at all.
    fn empty(timeout: Duration) -> CallState {
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
            guard: FsGuard::new(vec![], None, Arc::default(), None),
        }
    }
}

/// The prefix of the temporary files guests write before renaming them
/// into place (see `guest-tools/guest/src/write.rs`).
const TEMPORARY_PREFIX: &str = ".loom-fs-write-";

fn sweep_temporaries(created: impl Iterator<Item = PathBuf>) {
    for path in created {
        let temporary = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(TEMPORARY_PREFIX));
        if temporary && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Where the build wrote the built-in components as plain `.wasm` files.
pub fn builtin_dir() -> PathBuf {
    PathBuf::from(env!("LOOMFS_COMPONENTS_DIR"))
}

/// The built-in components, embedded in the binary by the build.
pub const BUILTINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
