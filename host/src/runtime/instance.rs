//! A call's instance, put together: [`CallMount`], a root as the call
//! sees it, which only a location `resolve()` let through can make; and
//! [`InstanceBuilder`], which preopens those mounts and nothing else (in
//! the spirit of wasmtime-wasi's `WasiCtxBuilder`, which it wraps), so the
//! runtime cannot be handed an unchecked path by construction.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::fs::{self, FsGuard, Mount};
use super::{CallRequest, CallState, HistoryState, MemoryLimiter, Runtime, Tool, bindings};
use crate::policy::{Permission, Resolved, Root};
use crate::sys::descriptors;

/// Most bytes of a guest's stderr kept, for the text of a crash.
const STDERR_BYTES: usize = 8 * 1024;

/// One root as a call sees it.
#[derive(Clone)]
pub struct CallMount {
    root: Arc<Root>,
    /// The most the call does there (its path arguments' strongest
    /// operation): the guest gets the root's permissions up to this, and a
    /// read-write preopen only beyond read.
    op: Permission,
    /// The paths (real, root-relative) the call was asked to delete: a
    /// directory among them is removed whole.
    deletes: Vec<PathBuf>,
    /// What the session's client roots leave of the root
    /// (`client_roots = "narrow"`), held by the policing filesystem to
    /// whatever the guest opens; `None`: the whole root.
    area: Option<fs::Area>,
}

impl CallMount {
    /// The mount of the root `resolved` lies on, for what it was resolved
    /// for. `named` says the path came from a path argument (not a tool's
    /// whole root): a delete of it removes it whole.
    pub fn of(resolved: &Resolved, named: bool) -> CallMount {
        let mut mount = CallMount {
            root: Arc::clone(resolved.root()),
            op: Permission::Read,
            deletes: Vec::new(),
            area: None,
        };
        mount.add(resolved, named);
        mount
    }

    /// Another location of the call on the same root (a second path
    /// argument): the mount does the most either needs.
    pub fn add(&mut self, resolved: &Resolved, named: bool) {
        debug_assert!(Arc::ptr_eq(&self.root, resolved.root()));
        self.op = self.op.max(resolved.op());
        if resolved.op() == Permission::Delete && named && !resolved.is_root() {
            self.deletes.push(resolved.real_rel().to_path_buf());
        }
    }

    /// A mount of `root` for `op` that no resolution checked, for the
    /// tests of what the policing filesystem holds a mount to by itself (a
    /// mount asking more than the root's role grants). Only in the tests'
    /// build (the `test-hooks` feature).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn unchecked(root: Arc<Root>, op: Permission) -> CallMount {
        CallMount {
            root,
            op,
            deletes: Vec::new(),
            area: None,
        }
    }

    /// The mount held to `area`, what the session's client roots leave of
    /// the root.
    pub fn narrowed(self, area: Option<fs::Area>) -> CallMount {
        CallMount { area, ..self }
    }

    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    pub fn writable(&self) -> bool {
        self.op != Permission::Read
    }
}

/// A call's instance being put together: the preopens of its mounts, what
/// the guest is told of them, and what the policing filesystem holds them
/// to.
pub(super) struct InstanceBuilder<'a> {
    tool: &'a Tool,
    wasi: WasiCtxBuilder,
    /// The policing filesystem's view of each preopen.
    policed: Vec<Mount>,
    /// What the guest is told of each root.
    told: Vec<bindings::Mount>,
    /// For a history tool: each root, where its git directory is, its area.
    history: Vec<(Arc<Root>, Option<String>, Option<fs::Area>)>,
    /// Each root and its area (what the `documents` interface answers).
    documents: Vec<(Arc<Root>, Option<fs::Area>)>,
}

impl<'a> InstanceBuilder<'a> {
    pub(super) fn new(tool: &'a Tool) -> InstanceBuilder<'a> {
        let mut wasi = WasiCtxBuilder::new();
        // Before any preopen: each preopen captures it (2-5x cheaper calls).
        wasi.allow_blocking_current_thread(true);
        InstanceBuilder {
            tool,
            wasi,
            policed: Vec::new(),
            told: Vec::new(),
            history: Vec::new(),
            documents: Vec::new(),
        }
    }

    /// Preopens `m`'s root at `/<name>`, and for a history tool its git
    /// directory too. The error is the model's text.
    pub(super) fn mount(&mut self, m: &CallMount) -> Result<(), String> {
        let guest_dir = format!("/{}", m.root.name);
        let perms = if m.writable() {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        self.wasi
            .preopened_dir(&m.root.path, &guest_dir, perms)
            .map_err(|e| format!("root '{}' cannot be opened{}", m.root.name, why(&e)))?;
        self.told.push(bindings::Mount {
            name: m.root.name.clone(),
            dir: guest_dir.clone(),
            writable: m.writable(),
            max_read_bytes: m.root.max_read_bytes,
        });
        self.documents.push((Arc::clone(&m.root), m.area.clone()));
        self.policed.push(
            Mount::root(Arc::clone(&m.root), guest_dir, m.op)
                .narrowed(m.area.clone())
                .deleting(m.deletes.clone()),
        );
        if self.tool.history {
            let git_dir = self.mount_repository(&m.root)?;
            self.history
                .push((Arc::clone(&m.root), git_dir, m.area.clone()));
        }
        Ok(())
    }

    /// The root's git directory, for the history tools alone: read-only,
    /// seen through its own deny list (the built-in names and `hooks`), at
    /// a path no other tool is given. None for a root without one.
    fn mount_repository(&mut self, root: &Root) -> Result<Option<String>, String> {
        let Some(repository) = &root.repository else {
            return Ok(None);
        };
        let guest = format!("/.git/{}", root.name);
        let git = &repository.git;
        self.wasi
            .preopened_dir(&git.path, &guest, FsPerms::ReadOnly)
            .map_err(|e| {
                format!(
                    "root '{}': its repository cannot be opened{}",
                    root.name,
                    why(&e)
                )
            })?;
        self.policed.push(Mount::root(
            Arc::clone(git),
            guest.clone(),
            Permission::Read,
        ));
        Ok(Some(guest))
    }

    /// The store of the call (its deadline, memory cap, policing
    /// filesystem), what the guest is told, and the pipe that keeps its
    /// stderr.
    pub(super) fn build(
        mut self,
        runtime: &Runtime,
        req: &CallRequest,
    ) -> (Store<CallState>, bindings::Context, MemoryOutputPipe) {
        let stderr = MemoryOutputPipe::new(STDERR_BYTES);
        self.wasi.stderr(stderr.clone());
        let mut table = ResourceTable::new();
        // Streams, pollables and descriptors together; descriptors alone are
        // capped lower by the policing filesystem.
        table.set_max_capacity(4 * descriptors::MAX_DESCRIPTORS);
        let tool = self.tool;
        let budget = &tool.budget;
        let state = CallState {
            deadline: Instant::now() + budget.timeout,
            cancel: req.cancel.clone(),
            wasi: self.wasi.build(),
            table,
            limiter: MemoryLimiter {
                max: 0,
                used: 0,
                hit: false,
            },
            guard: FsGuard::new(
                self.policed,
                Arc::clone(&req.activity),
                req.quota.clone(),
                req.staging.clone(),
            ),
            history: tool.history.then(|| HistoryState {
                tool: tool.descriptor.name.clone(),
                roots: self.history,
            }),
            documents: self.documents,
            serves: req.tool.clone(),
        };
        let context = bindings::Context {
            mounts: self.told,
            limits: bindings::Limits {
                max_entries: req.limits.max_entries,
                max_results: req.limits.max_results,
                max_search_bytes: req.limits.max_search_bytes,
                time_limit_ms: u64::try_from(budget.timeout.as_millis()).unwrap_or(u64::MAX),
            },
        };
        (runtime.store(state, budget), context, stderr)
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
            documents: vec![],
            serves: String::new(),
        }
    }
}

/// The reason a root's directory did not open, when it is worth telling
/// the model (the rest are for the operator's log).
fn why(e: &wasmtime::Error) -> String {
    tracing::warn!("cannot open a root for a call: {e:?}");
    match e.downcast_ref::<std::io::Error>() {
        Some(e) if descriptors::out_of_descriptors(e) => {
            format!(": {}; try again", descriptors::NO_DESCRIPTORS)
        }
        _ => String::new(),
    }
}
