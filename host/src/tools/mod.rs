//! The tool surface and the call path.
//!
//! The surface is derived from the config: a component is listed only if some
//! root grants the permission it needs, and its description names those
//! roots. A call goes: arguments → every declared path argument through
//! [`resolve`] (each refusal audited and returned as an `isError` result
//! naming the rule) → for a call that changes something, the locks of the
//! places it changes ([`crate::store::locks`]), then every path resolved again
//! under them → its trash stamp, a call slot, and for a tool that keeps
//! history a staging directory in each root it writes ([`crate::store::staging`])
//! → a fresh component instance that sees only the call's roots → result
//! mapped to MCP content, structured content and images.
//!
//! This module is transport-agnostic: stdio and HTTP serve the same
//! [`Toolbox`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub mod slots;

use crate::config::Config;
use crate::policy::{
    PathArg, Permission, Perms, Resolved, neutralised, noted, path_requests, resolve, shown_arg,
    shown_clipped,
};
use crate::runtime::{
    self, Activity, CallError, CallMount, CallRequest, DiskError, GuestLimits, Runtime, ToolError,
};
use crate::store::audit::{Audit, Record};
use crate::store::locks::{Key, LockError, Locked, PathLocks};
use crate::store::quota::{self, Quota};
use crate::store::staging::{CallDir, Staging};
use crate::store::trash;
use crate::sys::descriptors;
use crate::sys::space;
use slots::{SlotError, Slots};

/// Longest model-supplied string kept in an audit line (bytes).
const AUDIT_CLIP: usize = 1024;

/// Longest error text passed to the model for invalid arguments and for
/// any error of a third-party tool (bytes): they may quote arguments
/// megabytes long. A built-in tool's other errors are passed whole: they
/// show names, which are never cut, and resolve() lets no path through
/// that is longer than a path can be.
const ERROR_CLIP: usize = 4096;

/// What calling a listed tool does.
enum Action {
    ListRoots,
    Component {
        index: usize,
        paths: Vec<PathArg>,
        /// Whether the tool keeps replaced and deleted content in the trash.
        keeps_history: bool,
    },
}

/// What the transport gives a call: its stop switch, the counters its guest
/// updates while it runs, and who asked (a client address over HTTP).
#[derive(Default)]
pub struct Control {
    /// Fired to stop the call, waiting for a slot or running.
    pub cancel: CancellationToken,
    pub activity: Arc<Activity>,
    pub client: Option<String>,
}

struct Entry {
    tool: Tool,
    action: Action,
}

/// The tools of one server: config, runtime, audit and the listed surface.
pub struct Toolbox {
    config: Config,
    runtime: Runtime,
    audit: Audit,
    entries: Vec<Entry>,
    slots: Slots,
    /// The byte quota every call draws on, if the config sets one.
    quota: Option<Arc<Quota>>,
    /// Calls that change overlapping places wait for each other.
    locks: Arc<PathLocks>,
    /// Where tools that keep history write before they publish.
    staging: Staging,
}

/// A component whose self-description cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("component '{}' ({source_name}): {problem}", name.escape_debug())]
pub struct SurfaceError {
    name: String,
    source_name: String,
    problem: String,
}

impl Toolbox {
    /// Builds the surface from the loaded components and the config.
    pub fn new(config: Config, runtime: Runtime, audit: Audit) -> Result<Toolbox, SurfaceError> {
        let mut entries = vec![Entry {
            tool: list_roots_tool(),
            action: Action::ListRoots,
        }];
        for (index, loaded) in runtime.tools().iter().enumerate() {
            let d = &loaded.descriptor;
            let problem = |problem: String| SurfaceError {
                name: d.name.clone(),
                source_name: loaded.source.clone(),
                problem,
            };
            if !is_tool_name(&d.name) {
                return Err(problem(
                    "a tool name is 1 to 64 of a-z, 0-9 and '_', starting with a letter".into(),
                ));
            }
            if entries.iter().any(|e| e.tool.name == d.name) {
                return Err(problem("a tool of that name is already registered".into()));
            }
            let permission = Permission::from(d.permission);
            // A path argument may not do more than the tool declares: the
            // declaration decides where the tool is listed and how it is
            // annotated. Only a tool that changes things may need more on a
            // second root (a move deletes at its source).
            if let Some(p) = d.path_arguments.iter().find(|p| {
                Permission::from(p.permission) > permission
                    || p.across_roots.is_some_and(|a| {
                        Permission::from(a) > permission && permission == Permission::Read
                    })
            }) {
                return Err(problem(format!(
                    "path argument '{}' needs more than the tool declares ({permission})",
                    p.path_field
                )));
            }
            let roots: Vec<String> = config
                .roots
                .iter()
                .filter(|r| r.perms.contains(permission))
                .map(|r| format!("{} ({})", r.name, r.role))
                .collect();
            if roots.is_empty() {
                continue;
            }
            let input =
                schema(&d.input_schema).map_err(|e| problem(format!("input schema: {e}")))?;
            let output = d
                .output_schema
                .as_deref()
                .map(schema)
                .transpose()
                .map_err(|e| problem(format!("output schema: {e}")))?;
            let description = format!(
                "{}\n\nRoots it can act on: {}.",
                d.description,
                roots.join(", ")
            );
            // Hints follow the declared permission whatever the component says.
            let annotations = ToolAnnotations::new()
                .read_only(permission == Permission::Read)
                .destructive(
                    permission != Permission::Read && d.annotations.destructive
                        || permission == Permission::Delete,
                )
                .idempotent(d.annotations.idempotent)
                .open_world(false);
            let mut tool = Tool::new(d.name.clone(), description, Arc::new(input))
                .with_annotations(annotations);
            if let Some(output) = output {
                tool = tool.with_raw_output_schema(Arc::new(output));
            }
            let paths = d
                .path_arguments
                .iter()
                .map(|p| PathArg {
                    root_field: p.root_field.clone(),
                    root_fallback: p.root_fallback.clone(),
                    path_field: p.path_field.clone(),
                    op: p.permission.into(),
                    across_roots: p.across_roots.map(Into::into),
                    optional: p.optional,
                })
                .collect();
            entries.push(Entry {
                tool,
                action: Action::Component {
                    index,
                    paths,
                    keeps_history: d.keeps_history,
                },
            });
        }
        let slots = Slots::new(
            config.limits.max_concurrent_calls as usize,
            config.limits.tool_timeout,
        );
        let quota = config.quota.map(|q| Arc::new(Quota::new(q)));
        Ok(Toolbox {
            config,
            runtime,
            audit,
            entries,
            slots,
            quota,
            locks: PathLocks::new(),
            staging: Staging::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The listed tools, in a stable order.
    pub fn tools(&self) -> Vec<Tool> {
        self.entries.iter().map(|e| e.tool.clone()).collect()
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.entries
            .iter()
            .find(|e| e.tool.name == name)
            .map(|e| &e.tool)
    }

    /// Each listed tool, by name: the permission it needs and where it came
    /// from (`built-in` or its file), for `check`.
    pub fn surface(&self) -> BTreeMap<&str, (Permission, &str)> {
        self.entries
            .iter()
            .map(|e| {
                let entry = match &e.action {
                    Action::ListRoots => (Permission::Read, "built-in"),
                    Action::Component { index, .. } => {
                        let tool = &self.runtime.tools()[*index];
                        (tool.descriptor.permission.into(), tool.source.as_str())
                    }
                };
                (e.tool.name.as_ref(), entry)
            })
            .collect()
    }

    /// Calls tool `name`. Unknown tools are a protocol error; everything
    /// else, including refusals, is a tool result (`isError` when it failed).
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<JsonObject>,
        control: Control,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(entry) = self.entries.iter().find(|e| e.tool.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", shown_clipped(name)),
                None,
            ));
        };
        let arguments = arguments.unwrap_or_default();
        match &entry.action {
            Action::ListRoots => Ok(self.list_roots()),
            Action::Component {
                index,
                paths,
                keeps_history,
            } => {
                // Fails closed: no call is served while its line could not
                // be written (the refusal's own line waits with the others).
                if let Err(unwritable) = self.audit.writable() {
                    let op = self.runtime.tools()[*index].descriptor.permission.into();
                    self.audit.log(
                        &Record::new(name, "", "", op)
                            .client(control.client.as_deref())
                            .denied("audit"),
                    );
                    return Ok(error_result(unwritable.to_string()));
                }
                // Waiting for locks and then for a slot counts against the
                // call's deadline: together at most the tool timeout.
                let waits_until = tokio::time::Instant::now() + self.config.limits.tool_timeout;
                let (resolved, locked) = match self
                    .resolve_and_lock(name, paths, &arguments, &control, waits_until)
                    .await
                {
                    Ok(done) => done,
                    Err(refused) => return Ok(refused),
                };
                // Taken under the locks: a path's trash entries are in the
                // order its changes were made.
                let stamp = keeps_history.then(crate::store::trash_stamp);
                Ok(self
                    .run(Run {
                        tool: name,
                        index: *index,
                        resolved,
                        arguments,
                        stamp,
                        control,
                        locked,
                        waits_until,
                    })
                    .await)
            }
        }
    }

    fn list_roots(&self) -> CallToolResult {
        let roots: Vec<Value> = self
            .config
            .roots
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "role": r.role.as_str(),
                    "permissions": r.perms.iter().map(Permission::as_str).collect::<Vec<_>>(),
                })
            })
            .collect();
        let text = self
            .config
            .roots
            .iter()
            .map(|r| format!("{}\t{}\t{}", r.name, r.role, r.perms))
            .collect::<Vec<_>>()
            .join("\n");
        structured(
            vec![ContentBlock::text(text)],
            json!({ "roots": roots, "read_only": self.config.read_only }),
        )
    }

    /// Resolves every declared path argument; the first refusal ends the call.
    fn resolve_all(
        &self,
        tool: &str,
        paths: &[PathArg],
        args: &JsonObject,
        client: Option<&str>,
    ) -> Result<Vec<Resolved>, String> {
        let mut resolved = Vec::with_capacity(paths.len());
        for request in path_requests(paths, args)? {
            let (root, path, op) = (request.root, request.path, request.op);
            match resolve(&self.config.roots, root, path, op) {
                Ok(r) => resolved.push(r),
                Err(denial) => {
                    let (root_c, path_c) = (clip(root), clip(path));
                    self.audit.log(
                        &Record::new(tool, &root_c, &path_c, op)
                            .denied(denial.rule.as_str())
                            .client(client),
                    );
                    let (root, path) = (shown_arg(root), shown_arg(path));
                    return Err(noted(
                        format!(
                            "refused by rule '{}': {} (root '{root}', path '{path}')",
                            denial.rule, denial.message
                        ),
                        &[&root, &path],
                    ));
                }
            }
        }
        Ok(resolved)
    }

    /// Resolves the call's paths, locks the places it changes, and
    /// resolves them again under the locks (a call that held them may have
    /// moved what a path leads to): when the places changed meanwhile, the
    /// locks are given back and taken again for the new ones. A refusal
    /// (a path, a lock not had in time, a cancellation) is the call's
    /// result, audited.
    async fn resolve_and_lock(
        &self,
        tool: &str,
        paths: &[PathArg],
        arguments: &JsonObject,
        control: &Control,
        waits_until: tokio::time::Instant,
    ) -> Result<(Vec<Resolved>, Locked), CallToolResult> {
        let client = control.client.as_deref();
        let mut resolved = self
            .resolve_all(tool, paths, arguments, client)
            .map_err(error_result)?;
        for _ in 0..RESOLVE_ROUNDS {
            if control.cancel.is_cancelled() {
                self.audit_refused(tool, &resolved, "cancelled", client);
                return Err(error_result(LockError::Cancelled.to_string()));
            }
            let keys = lock_keys(&resolved);
            let locked = match self
                .locks
                .lock(keys.clone(), waits_until, &control.cancel)
                .await
            {
                Ok(locked) => locked,
                Err(e) => {
                    let rule = match e {
                        LockError::Busy { .. } => "locked",
                        LockError::Cancelled => "cancelled",
                        LockError::NoDescriptors => "descriptors",
                    };
                    self.audit_refused(tool, &resolved, rule, client);
                    return Err(error_result(e.to_string()));
                }
            };
            if keys.is_empty() {
                return Ok((resolved, locked));
            }
            let again = self
                .resolve_all(tool, paths, arguments, client)
                .map_err(error_result)?;
            if same_places(&lock_keys(&again), &keys) {
                return Ok((again, locked));
            }
            resolved = again;
        }
        self.audit_refused(tool, &resolved, "locked", client);
        Err(error_result(
            "the places this call changes kept moving while it waited for them (other calls \
             moved or deleted what its paths lead to); try again"
                .into(),
        ))
    }

    fn audit_refused(&self, tool: &str, resolved: &[Resolved], rule: &str, client: Option<&str>) {
        for r in resolved {
            self.audit.log(
                &Record::new(tool, &r.root().name, &clip(r.requested()), r.op())
                    .denied(rule)
                    .client(client),
            );
        }
    }

    /// A staging directory in each root the call writes, for a tool that
    /// keeps history (its mounts get their paths).
    fn stage(&self, mounts: &mut [CallMount], activity: &Activity) -> Result<Vec<CallDir>, String> {
        let mut dirs = Vec::new();
        for m in mounts {
            if !Perms::up_to(m.op)
                .intersect(m.root.perms)
                .contains(Permission::Write)
            {
                continue;
            }
            match self.staging.call_dir(&m.root) {
                Ok(dir) => {
                    m.staging = Some(dir.path().to_path_buf());
                    dirs.push(dir);
                }
                Err(e) => {
                    tracing::warn!(root = %m.root.name, "cannot make a staging directory: {e}");
                    let why = if descriptors::out_of_descriptors(&e) {
                        descriptors::NO_DESCRIPTORS.to_string()
                    } else if let Some(disk) = DiskError::of_io(&e) {
                        // The call's result names it, and its audit line.
                        activity.mark_disk_error(disk, &m.root.name);
                        disk.text(&m.root.name)
                    } else {
                        e.kind().to_string()
                    };
                    return Err(format!(
                        "root '{}': its staging directory (.mcp-trash/.staging) cannot be made: \
                         {why}; nothing was changed",
                        m.root.name,
                    ));
                }
            }
        }
        Ok(dirs)
    }

    async fn run(self: &Arc<Self>, call: Run<'_>) -> CallToolResult {
        let Run {
            tool,
            index,
            resolved,
            arguments,
            stamp,
            control,
            locked,
            waits_until,
        } = call;
        let mut mounts: Vec<CallMount> = Vec::new();
        for r in &resolved {
            match mounts.iter_mut().find(|m| m.root.name == r.root().name) {
                Some(m) => m.op = m.op.max(r.op()),
                None => mounts.push(CallMount {
                    root: Arc::clone(r.root()),
                    op: r.op(),
                    staging: None,
                }),
            }
        }
        let client = control.client;
        let client = client.as_deref();
        let activity = Arc::clone(&control.activity);
        let limits = &self.config.limits;
        let request = CallRequest {
            mounts,
            limits: GuestLimits {
                max_entries: limits.max_list_entries,
                max_results: limits.max_search_results,
                max_search_bytes: limits.max_search_bytes,
            },
            arguments: Value::Object(arguments).to_string(),
            stamp: stamp.clone(),
            cancel: control.cancel,
            activity: control.activity,
            quota: self.quota.clone(),
        };
        if let Some(q) = &self.quota
            && let Err(empty) = q.ready(request.arguments.len() as u64)
        {
            self.audit_refused(tool, &resolved, "quota", client);
            return error_result(format!(
                "refused by rule 'quota': the byte quota is used up ({}); {}",
                quota_figures(q),
                quota::retry_text(empty.retry_after)
            ));
        }
        if let Err((root, short)) = reserve_kept(&resolved, request.arguments.len() as u64) {
            self.audit_refused(tool, &resolved, "reserve", client);
            return error_result(format!(
                "{}; nothing was written. To go on, {}",
                short.text(&root),
                space::Short::WAY_OUT
            ));
        }
        let slot = match self.slots.take(&request.cancel, waits_until).await {
            Ok(slot) => slot,
            Err(e) => {
                let rule = match e {
                    SlotError::Busy { .. } => "busy",
                    SlotError::Cancelled => "cancelled",
                };
                self.audit_refused(tool, &resolved, rule, client);
                return error_result(e.to_string());
            }
        };
        // The call's duration is its guest's, not its wait for a slot.
        let started = Instant::now();
        let this = Arc::clone(self);
        let mut request = request;
        // The slot, the locks and the staging directories travel with the
        // guest's thread: a guest that outlives its caller still holds them,
        // and its staging directories go only once it is done.
        // Under the kernel sandbox no file is written in a root without
        // write (a grant to write its trash index would make every move into
        // that trash gain rights, which Landlock refuses): its trash lists
        // file by file.
        let indexed: Vec<Resolved> = resolved
            .iter()
            .filter(|r| !self.config.landlock || r.root().perms.contains(Permission::Write))
            .cloned()
            .collect();
        let outcome = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let stamp = request.stamp.clone();
            let staged = match stamp {
                Some(_) => this.stage(&mut request.mounts, &request.activity),
                None => Ok(Vec::new()),
            };
            let outcome = match staged {
                Ok(_staged) => this.runtime.call(index, request),
                Err(message) => runtime::CallOutcome::setup(message),
            };
            // Its index is written before its locks go: the next call on
            // these places finds it. File I/O, so on this thread.
            if let Some(stamp) = &stamp {
                trash::record_call(&indexed, stamp, &outcome.kept);
            }
            (outcome, locked)
        })
        .await;
        let elapsed = started.elapsed();
        let (outcome, _locked) = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::error!(tool, "tool call panicked: {e}");
                return error_result(
                    "the tool failed unexpectedly; the server log has details".into(),
                );
            }
        };
        let out_of_quota = activity.out_of_quota();
        let out_of_descriptors = activity.out_of_descriptors();
        // A disk error says what happened only where the call failed: a tool
        // that met one and went another way (a copy where a link failed)
        // still did what it says. A call cancelled or out of time says so.
        let disk = activity.disk_error().filter(|_| {
            matches!(&outcome.result, Err(e)
                if !matches!(e, CallError::Cancelled | CallError::Timeout(_)))
        });
        let stopped = match &outcome.result {
            _ if out_of_quota => Some("quota"),
            _ if out_of_descriptors => Some("descriptors"),
            _ if disk.is_some() => disk.as_ref().map(|(e, _)| e.rule()),
            Err(CallError::Cancelled) => Some("cancelled"),
            Err(CallError::Timeout(_)) => Some("timeout"),
            Err(CallError::Memory(_)) => Some("memory"),
            Err(CallError::Crashed(_)) => Some("crashed"),
            Err(CallError::OutputTooLarge(_)) => Some("output"),
            _ => None,
        };
        let built_in = self.runtime.tools()[index].is_built_in();
        let (result, bytes) = match (outcome.result, &self.quota, &disk) {
            (_, Some(q), _) if out_of_quota => (error_result(ran_out_of_quota(q, &activity)), 0),
            // Whatever the tool made of it: a search would have skipped a
            // directory, and its result would look complete.
            _ if out_of_descriptors => {
                tracing::warn!(
                    tool,
                    "a call found no file descriptor free (EMFILE): calls and connections hold \
                     them all; see the descriptor limit on the start-up lines"
                );
                (error_result(ran_out_of_descriptors()), 0)
            }
            (_, _, Some((error, root))) => {
                tracing::warn!(tool, root = %root, "a call met a disk error: {error:?}");
                (error_result(disk_failed(*error, root, built_in)), 0)
            }
            (Ok(output), _, _) => {
                to_result(tool, output, self.config.limits.max_output_bytes, built_in)
            }
            (Err(e), _, _) => (error_result(call_error_text(tool, e, built_in)), 0),
        };
        for r in &resolved {
            let path = clip(r.requested());
            // Where the previous content of this path went, if anywhere: the
            // guest keeps the entry it was asked about (a symlink itself, say),
            // the host resolved its target; either may match.
            let asked: PathBuf = r
                .requested()
                .split('/')
                .filter(|p| !p.is_empty() && *p != ".")
                .collect();
            let kept: Vec<&str> = outcome
                .kept
                .iter()
                .filter(|k| {
                    k.root == r.root().name
                        && (Path::new(&k.from) == r.real_rel() || Path::new(&k.from) == asked)
                })
                .map(|k| k.to.as_str())
                .collect();
            self.audit.log(
                &Record::new(tool, &r.root().name, &path, r.op())
                    .client(client)
                    .took(elapsed, bytes)
                    .kept(&kept)
                    .stopped(stopped),
            );
        }
        if resolved.is_empty() {
            // A tool without path arguments: one line for the call itself.
            let op = self.runtime.tools()[index].descriptor.permission.into();
            self.audit.log(
                &Record::new(tool, "", "", op)
                    .client(client)
                    .took(elapsed, bytes)
                    .stopped(stopped),
            );
        }
        for refusal in &outcome.refusals {
            self.audit.log(
                &Record::new(tool, &refusal.root, &clip(&refusal.path), refusal.op)
                    .client(client)
                    .denied(refusal.rule),
            );
        }
        result
    }
}

/// One call on its way to its guest: resolved, locked and stamped.
struct Run<'a> {
    tool: &'a str,
    index: usize,
    resolved: Vec<Resolved>,
    arguments: JsonObject,
    stamp: Option<String>,
    control: Control,
    locked: Locked,
    /// When waiting for a slot must end (the locks took their part).
    waits_until: tokio::time::Instant,
}

/// Whether each root the call writes keeps its reserve free after what the
/// call may write there, told before it runs: its arguments (the content of
/// a write) and every existing file it names to read or write (a copy's
/// source, a file an edit or append rewrites whole while its old version
/// stays in the trash). An estimate from above: a move within a root writes
/// nothing, yet is counted as a copy. A root's reserve is checked again
/// write by write while the call runs (`runtime::fs`).
fn reserve_kept(resolved: &[Resolved], arguments: u64) -> Result<(), (String, space::Short)> {
    let files: u64 = resolved
        .iter()
        .filter(|r| r.op() != Permission::Delete)
        .filter_map(|r| std::fs::symlink_metadata(r.root().path.join(r.real_rel())).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let mut checked: Vec<&str> = Vec::new();
    for r in resolved.iter().filter(|r| r.op() == Permission::Write) {
        let root = r.root();
        if checked.contains(&root.name.as_str()) {
            continue;
        }
        checked.push(&root.name);
        space::check(root, arguments.saturating_add(files)).map_err(|s| (root.name.clone(), s))?;
    }
    Ok(())
}

/// How many times a call resolves its paths again because what they lead
/// to moved while it waited for their locks, before it gives up.
const RESOLVE_ROUNDS: usize = 8;

/// The places a call changes: every path it resolved for more than
/// reading, where it leads (symlinks followed), and, where that differs,
/// the entry it names (a tool replaces or moves a symlink itself, so a
/// change of the directory holding the link must wait too).
fn lock_keys(resolved: &[Resolved]) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    for r in resolved.iter().filter(|r| r.op() != Permission::Read) {
        let entry = lexical(r.requested());
        for rel in [Some(r.real_rel().to_path_buf()), entry]
            .into_iter()
            .flatten()
        {
            if !keys
                .iter()
                .any(|k| Arc::ptr_eq(&k.root, r.root()) && k.rel == rel)
            {
                keys.push(Key {
                    root: Arc::clone(r.root()),
                    rel,
                });
            }
        }
    }
    keys
}

/// `path` (root-relative, as the model wrote it) with `.` dropped and `..`
/// taken back lexically; `None` if it climbs above the root (then only the
/// resolved place is locked).
fn lexical(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if !out.pop() {
                    return None;
                }
            }
            name => out.push(name),
        }
    }
    Some(out)
}

fn same_places(a: &[Key], b: &[Key]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| Arc::ptr_eq(&a.root, &b.root) && a.rel == b.rel)
}

/// What a call that ran out of quota answers, whatever its guest made of
/// the refused operation (a search might have skipped the file, and its
/// result would look complete; a tool's own error would only say that an
/// I/O operation failed).
fn ran_out_of_quota(q: &Quota, activity: &Activity) -> String {
    // The call needed more than the bucket held: retrying before it is full
    // again would only run out sooner.
    format!(
        "refused by rule 'quota': the byte quota ran out during the call, after {} bytes read \
         and {} bytes written ({}); {} (a call that needs more than quota_burst_bytes never \
         fits: read by range, copy in parts). {UNFINISHED}",
        activity.bytes_read(),
        activity.bytes_written(),
        quota_figures(q),
        quota::retry_text(q.until_full().max(Duration::from_millis(1))),
    )
}

/// What a call that stopped part way has changed.
const UNFINISHED: &str = "write_file and edit_file change nothing unless they finish, and a \
     directory copy appears only whole; what else the tool had done stays done";

/// What a call that found no file descriptor free answers.
fn ran_out_of_descriptors() -> String {
    format!(
        "{} during the call, so it could not finish; try again in a moment. {UNFINISHED}",
        descriptors::NO_DESCRIPTORS
    )
}

/// What a call that failed on a disk error answers, whatever the tool made
/// of the error (its own text would say only that an operation failed).
/// What was left as it was is said for built-in tools only: the server
/// cannot know how a third-party tool writes.
fn disk_failed(error: DiskError, root: &str, built_in: bool) -> String {
    let way_out = match error {
        DiskError::Reserve(_) => format!("; {}", space::Short::WAY_OUT),
        _ => String::new(),
    };
    let left = if built_in {
        format!("What it was replacing is unchanged and no partial file is left: {UNFINISHED}")
    } else {
        "What the tool had done before it stopped stays done.".to_string()
    };
    format!(
        "{}, so the call could not finish. {left}{way_out}",
        error.text(root)
    )
}

fn quota_figures(q: &Quota) -> String {
    let c = q.config();
    format!(
        "quota_bytes_per_minute = {}, quota_burst_bytes = {}",
        c.bytes_per_minute, c.burst_bytes
    )
}

fn list_roots_tool() -> Tool {
    let input = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let output = json!({
        "type": "object",
        "properties": {
            "roots": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "role": {"type": "string", "enum": ["reference", "sourcecode", "workspace"]},
                    "permissions": {"type": "array", "items": {"type": "string", "enum": ["read", "write", "delete"]}}
                },
                "required": ["name", "role", "permissions"]
            }},
            "read_only": {"type": "boolean"}
        },
        "required": ["roots", "read_only"]
    });
    let as_object = |v: Value| match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    Tool::new(
        "list_roots",
        "List the roots this server exposes, with their role and permissions. Every other tool \
         names a root and a path relative to it. Roles: reference = read; sourcecode = read, \
         write; workspace = read, write, delete.",
        Arc::new(as_object(input)),
    )
    .with_raw_output_schema(Arc::new(as_object(output)))
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

fn clip(s: &str) -> String {
    clip_to(s, AUDIT_CLIP)
}

/// `s`, cut to at most `max` bytes at a character boundary, `…` marking a cut.
fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let cut = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &s[..cut])
}

/// `snake_case`, as MCP clients expect tool names: `[a-z][a-z0-9_]{0,63}`.
fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parses a JSON Schema text; it must be an object.
fn schema(text: &str) -> Result<JsonObject, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn structured(content: Vec<ContentBlock>, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(value);
    result
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Host bytes one JSON value of a structured result takes once parsed
/// (`serde_json::Value` is 32 bytes; a map entry holds its key and node):
/// what [`to_result`] charges against `max_output_bytes` before parsing.
const JSON_VALUE_COST: u64 = 48;

/// Maps a component's output to an MCP result, with its size in bytes. The
/// text of a third-party tool is [`neutralised`]: the project did not write
/// it, so nothing says its names went through the naming rule. Structured
/// content is passed as it is (exact names; JSON escapes its controls), but
/// counted before it is parsed: a result of tiny values (`[0,0,0,…]`) would
/// take sixteen times its size once parsed, so each value is charged
/// [`JSON_VALUE_COST`] against `max_output`.
fn to_result(
    tool: &str,
    output: runtime::Output,
    max_output: u64,
    built_in: bool,
) -> (CallToolResult, u64) {
    let mut bytes = 0u64;
    let mut content = Vec::new();
    for text in output.text {
        bytes += text.len() as u64;
        let text = if built_in {
            text
        } else {
            neutralised(&text).into_owned()
        };
        content.push(ContentBlock::text(text));
    }
    for image in output.images {
        bytes += image.data.len() as u64;
        let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
        content.push(ContentBlock::image(data, image.mime_type));
    }
    let Some(text) = output.structured else {
        return (CallToolResult::success(content), bytes);
    };
    match json_values(&text) {
        Ok(values) if values.saturating_mul(JSON_VALUE_COST) > max_output => {
            return (
                error_result(format!(
                    "the tool's structured result holds {values} JSON values, more than \
                     max_output_bytes ({max_output}) allows at {JSON_VALUE_COST} bytes each; ask \
                     for less: a range of lines, a narrower search, a smaller depth"
                )),
                0,
            );
        }
        // Malformed or too deep: said below, by the parse itself.
        _ => {}
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => (structured(content, value), bytes),
        Err(e) => {
            tracing::error!(tool, "tool returned malformed structured output: {e}");
            (
                error_result(format!(
                    "tool '{tool}' returned malformed structured output"
                )),
                0,
            )
        }
    }
}

/// How many values (scalars, arrays, objects) a JSON text holds, counted
/// without building them; serde_json's depth limit (128) applies.
fn json_values(text: &str) -> serde_json::Result<u64> {
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    struct Count(u64);

    impl<'de> Deserialize<'de> for Count {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
            d.deserialize_any(Counter)
        }
    }

    struct Counter;

    impl<'de> Visitor<'de> for Counter {
        type Value = Count;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_str<E>(self, _: &str) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_unit<E>(self) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
            let mut n = 1u64;
            while let Some(Count(c)) = seq.next_element::<Count>()? {
                n = n.saturating_add(c);
            }
            Ok(Count(n))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
            let mut n = 1u64;
            while map.next_key::<IgnoredAny>()?.is_some() {
                let Count(c) = map.next_value::<Count>()?;
                n = n.saturating_add(c);
            }
            Ok(Count(n))
        }
    }

    serde_json::from_str::<Count>(text).map(|Count(n)| n)
}

fn call_error_text(tool: &str, e: CallError, built_in: bool) -> String {
    // A third-party tool's words are not the project's: clipped, and
    // neutralised like its results.
    // A built-in tool's errors show names by the rule, but may echo what
    // the model sent (a glob, a regex, a misspelt field): neutralised too,
    // which leaves the rule's own output alone (it holds no raw control).
    let from_tool = |m: String| {
        if built_in {
            neutralised(&m).into_owned()
        } else {
            neutralised(&clip_to(&m, ERROR_CLIP)).into_owned()
        }
    };
    match e {
        CallError::Tool(ToolError::InvalidArguments(m)) => {
            format!("invalid arguments: {}", from_tool(clip_to(&m, ERROR_CLIP)))
        }
        CallError::Tool(ToolError::NotFound(m) | ToolError::Refused(m) | ToolError::Io(m)) => {
            from_tool(m)
        }
        CallError::Timeout(limit) => format!(
            "the call took longer than {} ms and was stopped (tool_timeout_ms)",
            limit.as_millis()
        ),
        CallError::Cancelled => "the call was cancelled".into(),
        CallError::Memory(limit) => format!(
            "the call needed more than {} MiB of memory and was stopped (tool_memory_bytes)",
            limit / (1024 * 1024)
        ),
        CallError::Crashed(detail) => {
            tracing::error!(tool, "tool crashed: {detail}");
            "the tool failed unexpectedly; the server log has details".into()
        }
        CallError::Setup(m) => m,
        CallError::OutputTooLarge(limit) => format!(
            "the tool's result would take more than {limit} bytes of the server's memory and was \
             refused as it was read (max_output_bytes); ask for less: a range of lines, a \
             narrower search, a smaller depth"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Structured JSON is counted before it is parsed, and a result of many
    /// tiny values is refused by what it would take once parsed.
    #[test]
    fn structured_results_are_charged_per_value() {
        assert_eq!(
            json_values(r#"{"a": [1, 2, {"b": null}], "c": "x"}"#).unwrap(),
            7
        );
        assert_eq!(json_values("0").unwrap(), 1);
        assert!(json_values(&("[".repeat(200) + &"]".repeat(200))).is_err());
        let output = |structured: String| runtime::Output {
            text: vec!["t".into()],
            structured: Some(structured),
            images: vec![],
        };
        let zeros = format!("[{}0]", "0,".repeat(9_999));
        let (r, _) = to_result("t", output(zeros.clone()), 10_000 * JSON_VALUE_COST, true);
        assert_eq!(r.is_error, Some(true));
        let t = r.content[0].as_text().unwrap().text.clone();
        assert!(t.contains("holds 10001 JSON values"), "{t}");
        let (r, _) = to_result("t", output(zeros), 10_001 * JSON_VALUE_COST, true);
        assert_ne!(r.is_error, Some(true));
    }

    #[test]
    fn tool_names_are_snake_case() {
        for good in ["read_file", "a", "text_stats2", &"x".repeat(64)] {
            assert!(is_tool_name(good), "{good}");
        }
        for bad in ["", "Read", "2x", "_x", "a-b", "a b", "é", &"x".repeat(65)] {
            assert!(!is_tool_name(bad), "{bad}");
        }
    }

    /// What a built-in tool echoes of the model's input (a glob, a regex, a
    /// field name) reaches the model neutralised.
    #[test]
    fn built_in_errors_echo_no_raw_controls() {
        let echoed = call_error_text(
            "search_files",
            CallError::Tool(ToolError::InvalidArguments(
                "invalid range; '\u{202e}' > '\u{1b}'".into(),
            )),
            true,
        );
        assert!(
            !echoed.contains('\u{202e}') && !echoed.contains('\u{1b}'),
            "{echoed:?}"
        );
        assert!(
            echoed.starts_with("invalid arguments: invalid range"),
            "{echoed:?}"
        );
    }

    #[test]
    fn limit_errors_name_the_limit_and_no_detail() {
        let call_error_text = |tool, e| call_error_text(tool, e, true);
        let timeout = call_error_text("t", CallError::Timeout(Duration::from_millis(1500)));
        assert_eq!(
            timeout,
            "the call took longer than 1500 ms and was stopped (tool_timeout_ms)"
        );
        let memory = call_error_text("t", CallError::Memory(64 << 20));
        assert_eq!(
            memory,
            "the call needed more than 64 MiB of memory and was stopped (tool_memory_bytes)"
        );
        assert_eq!(
            call_error_text("t", CallError::OutputTooLarge(1 << 20)),
            "the tool's result would take more than 1048576 bytes of the server's memory and was \
             refused as it was read (max_output_bytes); ask for less: a range of lines, a \
             narrower search, a smaller depth"
        );
        let crash = call_error_text("t", CallError::Crashed("wasm trap at /home/me/x".into()));
        assert_eq!(
            crash,
            "the tool failed unexpectedly; the server log has details"
        );
        assert_eq!(
            call_error_text("t", CallError::Cancelled),
            "the call was cancelled"
        );
        let invalid = call_error_text(
            "t",
            CallError::Tool(ToolError::InvalidArguments("missing field `path`".into())),
        );
        assert_eq!(invalid, "invalid arguments: missing field `path`");
        let long = "é".repeat(3 * ERROR_CLIP);
        let clipped = call_error_text(
            "t",
            CallError::Tool(ToolError::InvalidArguments(long.clone())),
        );
        assert_eq!(
            clipped.len(),
            "invalid arguments: ".len() + ERROR_CLIP + "…".len()
        );
        assert!(clipped.ends_with("é…"));
        // A built-in's refusal shows whole names: never cut.
        let whole = call_error_text("t", CallError::Tool(ToolError::Refused(long.clone())));
        assert_eq!(whole, long);
    }

    #[test]
    fn a_third_party_tool_s_words_are_clipped_and_neutralised() {
        let long = "é".repeat(3 * ERROR_CLIP);
        let clipped = call_error_text("t", CallError::Tool(ToolError::Refused(long)), false);
        assert_eq!(clipped.len(), ERROR_CLIP + "…".len());
        let hostile = "\u{1b}[2J\u{202e}gnp.exe\nnext";
        let refused = call_error_text(
            "t",
            CallError::Tool(ToolError::NotFound(hostile.into())),
            false,
        );
        assert_eq!(refused, r"\u001b[2J\u202egnp.exe".to_string() + "\nnext");
        let output = runtime::Output {
            text: vec![hostile.into()],
            structured: Some(r#"{"name": "\u202e"}"#.into()),
            images: vec![],
        };
        let (theirs, _) = to_result("t", output.clone(), u64::MAX, false);
        assert_eq!(theirs.content[0].as_text().unwrap().text, refused);
        // Structured content keeps the exact text.
        assert_eq!(theirs.structured_content.unwrap()["name"], "\u{202e}");
        let (ours, _) = to_result("t", output, u64::MAX, true);
        assert_eq!(ours.content[0].as_text().unwrap().text, hostile);
    }
}
