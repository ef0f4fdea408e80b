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
pub mod admit;
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
    ResourceLimiter,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub use activity::{Activity, DiskError};
pub use bindings::{Annotations, Descriptor, Image, Output, PathArgument, Permission, ToolError};
pub use cache::Cache;
pub use fs::Area;
use fs::{FsGuard, PolicedFs, Refusal};

use crate::policy::Root;
use crate::store::quota::Quota;
use crate::store::staging::Staging;

mod call;
mod instance;
mod interfaces;

pub use call::FinishedInstance;
pub use instance::CallMount;
use interfaces::HistoryState;

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
pub const TOOL_INTERFACE: &str = "loom-fs:tool/tool@0.3.0";

/// The interface components built against the WIT package before 0.3.0
/// export: they kept history themselves, which the host now does for
/// every component.
pub const OLD_TOOL_INTERFACE: &str = "loom-fs:tool/tool@0.2.0";

/// The host interface of the history tools: only the built-in component
/// that serves them may import it.
pub const HISTORY_INTERFACE: &str = "loom-fs:tool/history@0.3.0";

/// The host interface of the document reader: only the built-in component
/// that serves `read_document` may import it.
pub const DOCUMENTS_INTERFACE: &str = "loom-fs:tool/documents@0.3.0";

/// The tool whose calls that ask `documents: true` the document reader
/// serves, with its parsers: the tool's own component searches files only.
pub const DOCUMENT_SEARCH: &str = "search_files";

/// The tools the history component serves (one: `git`, whose commands
/// share the component's one copy of gitoxide).
pub const HISTORY_TOOLS: &[&str] = &["git"];

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
    /// The SHA-256 of a third-party component's bytes (hex); `None` for a
    /// built-in.
    pub digest: Option<String>,
    /// Its `[[components]]` entry (index in the config), for a third-party one.
    pub entry: Option<usize>,
    /// Its calls' limits: the server's, or lower ones its entry sets.
    pub budget: Budget,
    /// Whether it is one of the history tools ([`HISTORY_TOOLS`]): its
    /// calls get each root's git directory and the `history` interface.
    pub history: bool,
    /// Whether it is the document reader (it imports `documents`): it
    /// also serves [`DOCUMENT_SEARCH`] calls that ask for documents.
    pub documents: bool,
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

    /// The first digits of its digest, as audit lines carry them.
    pub fn short_digest(&self) -> Option<&str> {
        self.digest
            .as_deref()
            .map(|d| &d[..admit::SHORT_DIGEST.min(d.len())])
    }
}

/// What a third-party component was admitted with: its digest, its
/// config entry, and its limits.
pub struct Admission {
    pub digest: String,
    pub entry: usize,
    pub budget: Budget,
}

/// The WIT names a component imports and exports, in its own order.
pub fn interface(engine: &Engine, component: &Component) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    (
        ty.imports(engine).map(|(n, _)| n.to_string()).collect(),
        ty.exports(engine).map(|(n, _)| n.to_string()).collect(),
    )
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
    /// What a call that succeeded changed, staged, for the caller to
    /// publish (nothing for a call that failed).
    pub changes: fs::CallChanges,
}

impl CallOutcome {
    /// A call that could not be set up: nothing ran.
    pub fn setup(message: String) -> CallOutcome {
        CallOutcome {
            result: Err(CallError::Setup(message)),
            refusals: vec![],
            changes: fs::CallChanges::none(),
        }
    }
}

#[derive(Clone)]
pub struct CallRequest {
    /// The tool the call is for, as the client named it.
    pub tool: String,
    pub mounts: Vec<CallMount>,
    /// Where the call stages its changes; none for a call that may change
    /// nothing.
    pub staging: Option<Arc<Staging>>,
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
    /// For a history tool: what the `history` interface answers.
    history: Option<HistoryState>,
    /// Each root of the call with its area: what the `documents`
    /// interface answers about.
    documents: Vec<(Arc<Root>, Option<fs::Area>)>,
    /// The tool the call is for, as the client named it: what the
    /// `documents` interface's `tool` answers (a search the host routes to
    /// the document reader is `search_files`).
    serves: String,
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
            // The pages a call dirties in the first 2 MiB of a memory stay
            // mapped for the slot's next call, zeroed with memset (wasmtime
            // finds them through the kernel's pagemap, so a call that
            // dirtied little costs little), instead of being given back
            // with madvise and faulted in again. The guests' 128 KiB
            // stack, statics and first heap pages (see
            // guest-tools/.cargo/config.toml) take 512 KiB: `read_file`'s
            // encoding tables put its heap at 324 KiB, and with a 256 KiB
            // window 8 calls in flight served half as many reads a second
            // (6,000 against 12,000; 9,800 with 512 KiB). 2 MiB also holds
            // a 100 KiB read or a 1,000-entry listing: against 512 KiB,
            // alternating the two builds, these took 0.84x and 0.94x the
            // time and a 1 MiB read 0.91x, a 4 KiB read the same; 4 MiB
            // gained more on the 1 MiB read only. A mix of tools with 8 in
            // flight ended 5-15% higher in RSS.
            .linear_memory_keep_resident(2 << 20)
            .table_keep_resident(64 << 10)
            // What stays resident is bounded by the slots used: past 16
            // unused slots kept for other tools, a new instance takes the
            // least recently used of them rather than a slot never used
            // (wasmtime's default of 100 would let all of them fill).
            .max_unused_warm_slots(16);
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
        bindings::history::add_to_linker::<CallState, wasmtime::component::HasSelf<CallState>>(
            &mut linker,
            |state| state,
        )?;
        bindings::documents::add_to_linker::<CallState, wasmtime::component::HasSelf<CallState>>(
            &mut linker,
            |state| state,
        )?;

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
    /// Returns its index (the last one's, for the history component, which
    /// is kept once per tool it serves). A component that imports a network interface is
    /// refused: the linker has wasmtime-wasi's sockets, but no call is ever
    /// granted a network, and a tool that needs one does not belong here.
    pub fn load(&mut self, component: &Component, source: String) -> wasmtime::Result<usize> {
        self.load_with(component, source, None)
    }

    /// [`Runtime::load`] of a third-party component, with what it was
    /// admitted with.
    pub fn load_with(
        &mut self,
        component: &Component,
        source: String,
        admission: Option<Admission>,
    ) -> wasmtime::Result<usize> {
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
        // The history interface answers about repositories and the deny
        // list: only the built-in component of the history tools gets it.
        let history = ty
            .imports(&self.engine)
            .any(|(name, _)| name == HISTORY_INTERFACE);
        if history && (admission.is_some() || source != BUILT_IN) {
            return Err(wasmtime::Error::msg(format!(
                "imports {HISTORY_INTERFACE}, which only the built-in history component may"
            )));
        }
        let documents = ty
            .imports(&self.engine)
            .any(|(name, _)| name == DOCUMENTS_INTERFACE);
        if documents && (admission.is_some() || source != BUILT_IN) {
            return Err(wasmtime::Error::msg(format!(
                "imports {DOCUMENTS_INTERFACE}, which only the built-in document reader may"
            )));
        }
        let instance_pre = self.linker.instantiate_pre(component)?;
        let pre = bindings::ToolComponentPre::new(instance_pre).map_err(|_| {
            if ty
                .exports(&self.engine)
                .any(|(name, _)| name == OLD_TOOL_INTERFACE)
            {
                return wasmtime::Error::msg(format!(
                    "is built against {OLD_TOOL_INTERFACE}, whose tools kept history \
                     themselves; the host now keeps every call's history and stages its \
                     changes: rebuild it against wit/ ({TOOL_INTERFACE}), dropping the \
                     `keeps-history` field and any use of the mounts' `trash` and `staging`"
                ));
            }
            wasmtime::Error::msg(format!(
                "does not export the tool interface ({TOOL_INTERFACE}); build it against wit/"
            ))
        })?;
        let call = component
            .get_export_index(None, TOOL_INTERFACE)
            .and_then(|tool| component.get_export_index(Some(&tool), "call"))
            .ok_or_else(|| wasmtime::Error::msg("does not export the tool interface's call"))?;
        let budget = admission
            .as_ref()
            .map_or_else(|| self.budget.clone(), |a| a.budget.clone());
        let (digest, entry) = match admission {
            Some(a) => (Some(a.digest), Some(a.entry)),
            None => (None, None),
        };
        let serves: Vec<Option<&str>> = if history {
            HISTORY_TOOLS.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        for name in serves {
            let mut state = CallState::empty(budget.timeout);
            state.history = name.map(|tool| HistoryState {
                tool: tool.to_string(),
                roots: vec![],
            });
            let mut store = self.store(state, &budget);
            let descriptor = pre
                .instantiate(&mut store)?
                .loom_fs_tool_tool()
                .call_describe(&mut store)?;
            if let Some(name) = name.filter(|n| *n != descriptor.name) {
                return Err(wasmtime::Error::msg(format!(
                    "asked to describe {name}, described {}",
                    descriptor.name
                )));
            }
            self.tools.push(Tool {
                descriptor,
                source: source.clone(),
                digest: digest.clone(),
                entry,
                budget: budget.clone(),
                history,
                documents,
                pre: pre.clone(),
                call,
            });
        }
        Ok(self.tools.len() - 1)
    }
}

/// Where the build wrote the built-in components as plain `.wasm` files.
pub fn builtin_dir() -> PathBuf {
    PathBuf::from(env!("LOOMFS_COMPONENTS_DIR"))
}

/// The built-in components, embedded in the binary by the build.
pub const BUILTINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
