//! The tool surface and the call path, whatever the transport: nothing here
//! speaks MCP framing, and no call reaches a component but through it.
//!
//! The surface is derived from the config: a component is listed only if some
//! root grants the permission it needs, and its description names those
//! roots. A call goes: arguments → every declared path argument through
//! [`resolve`] (each refusal audited and returned as an `isError` result
//! naming the rule) → for a call that changes something, the locks of the
//! places it changes ([`crate::store::locks`]), then every path resolved again
//! under them → its id, a call slot → a fresh component instance that sees
//! only the call's roots, its changes staged → result mapped to MCP
//! content, structured content and images → for a call that succeeded, its
//! changes published together, every replaced or removed version kept in
//! the trash ([`crate::store::publish`]).
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

use crate::config::{ComponentEntry, Config};
use crate::policy::{
    LIST, Narrowing, PathArg, Permission, Perms, Resolved, Root, Rule, neutralised, path_requests,
    resolve, resolve_within, shown, shown_arg, shown_clipped, with_quoted_note,
};
use crate::runtime::{
    self, Activity, Area, CallError, CallMount, CallRequest, DiskError, GuestLimits, Runtime,
    ToolError,
};
use crate::store::audit::{Audit, Record};
use crate::store::locks::{Key, LockError, Locked, PathLocks};
use crate::store::quota::{self, Quota};
use crate::store::staging::{self, Staging};
use crate::store::trash;
use crate::sys::descriptors;
use crate::sys::space;
use slots::{SlotError, Slots};

mod guests;
mod prepare;
mod report;
mod resources;
mod results;
mod run;
pub mod slots;
mod watch;

use prepare::*;
pub use report::CallReport;
use report::EarlyEnd;
pub use resources::{ResourceContext, SCHEME, mime_of_name, parse_uri, resource_uri};
use results::*;
use run::*;
pub use watch::{Change, DEBOUNCE, Notifier, Watch};

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
    Component { index: usize, paths: Vec<PathArg> },
}

/// What the transport gives a call: its stop switch, the counters its guest
/// updates while it runs, and who asked (a client address over HTTP).
#[derive(Default)]
pub struct Control {
    /// Fired to stop the call, waiting for a slot or running.
    pub cancel: CancellationToken,
    pub activity: Arc<Activity>,
    pub client: Option<String>,
    /// What the session's client roots leave of the roots, when
    /// `client_roots = "narrow"` applies to it: every path is checked
    /// against it after `resolve()`.
    pub narrowing: Option<Arc<Narrowing>>,
}

struct Entry {
    tool: Tool,
    action: Action,
    /// The roots the tool is offered, with the permissions it has there:
    /// every root for a built-in; for a third-party tool, those its entry
    /// names (`roots`), capped by its `permissions`.
    roots: Vec<Arc<Root>>,
    /// The first digits of a third-party component's digest, for its
    /// audit lines.
    digest: Option<String>,
    /// Its calls' deadline and output limit (a third-party entry may set
    /// them lower than the server's).
    timeout: Duration,
    output_bytes: u64,
}

/// What `check` shows of one listed tool.
pub struct Surface<'a> {
    /// The permission it needs (after its entry's cap).
    pub need: Permission,
    /// `built-in` or its file.
    pub source: &'a str,
    /// The roots it may act on.
    pub roots: Vec<&'a str>,
    /// The permission it declares, when its entry caps it lower.
    pub declared: Option<Permission>,
}

/// The strongest permission at most `op` that `cap` holds (read, which
/// every cap holds, at least).
pub fn capped(op: Permission, cap: Option<Perms>) -> Permission {
    let Some(cap) = cap else {
        return op;
    };
    Permission::ALL
        .into_iter()
        .filter(|p| *p <= op && cap.contains(*p))
        .max()
        .unwrap_or(Permission::Read)
}

/// What is wrong with a component's self-description, if anything: its
/// name, its path arguments against its permission, its schemas. (Whether
/// its name is taken is the surface's business.)
pub fn declaration_problem(d: &runtime::Descriptor) -> Option<String> {
    if !is_tool_name(&d.name) {
        return Some("a tool name is 1 to 64 of a-z, 0-9 and '_', starting with a letter".into());
    }
    let permission = Permission::from(d.permission);
    // A path argument may not do more than the tool declares: the
    // declaration decides where the tool is listed and how it is
    // annotated. Only a tool that changes things may need more on a
    // second root (a move deletes at its source).
    if let Some(p) = d.path_arguments.iter().find(|p| {
        Permission::from(p.permission) > permission
            || p.across_roots
                .is_some_and(|a| Permission::from(a) > permission && permission == Permission::Read)
    }) {
        return Some(format!(
            "path argument '{}' needs more than the tool declares ({permission})",
            p.path_field
        ));
    }
    // A list of paths is for reading: what a call keeps and locks is
    // reckoned per declared path argument.
    if let Some(p) = d.path_arguments.iter().find(|p| {
        p.path_field.ends_with(LIST)
            && (Permission::from(p.permission) != Permission::Read || p.across_roots.is_some())
    }) {
        return Some(format!(
            "path argument '{}' is a list of paths, which is for reading only",
            p.path_field
        ));
    }
    if let Err(e) = schema(&d.input_schema) {
        return Some(format!("input schema: {e}"));
    }
    if let Some(Err(e)) = d.output_schema.as_deref().map(schema) {
        return Some(format!("output schema: {e}"));
    }
    None
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
    /// Where calls stage what they change until it is published.
    staging: Arc<Staging>,
    /// When this server last swept each root's staging area (by name).
    swept: std::sync::Mutex<std::collections::HashMap<String, Instant>>,
    /// The watcher of the roots while some session watches them.
    hub: tokio::sync::Mutex<std::sync::Weak<watch::Hub>>,
    /// The threads the guests run on.
    guests: guests::GuestThreads,
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
        let (timeout, output_bytes) = (config.limits.tool_timeout, config.limits.max_output_bytes);
        let mut entries = vec![Entry {
            tool: list_roots_tool(),
            action: Action::ListRoots,
            roots: config.roots.clone(),
            digest: None,
            timeout,
            output_bytes,
        }];
        for (index, loaded) in runtime.tools().iter().enumerate() {
            let d = &loaded.descriptor;
            let problem = |problem: String| SurfaceError {
                name: d.name.clone(),
                source_name: loaded.source.clone(),
                problem,
            };
            if let Some(p) = declaration_problem(d) {
                return Err(problem(p));
            }
            if entries.iter().any(|e| e.tool.name == d.name) {
                return Err(problem("a tool of that name is already registered".into()));
            }
            let declared = Permission::from(d.permission);
            let admitted = loaded.entry.and_then(|i| config.components.get(i));
            let cap = admitted.and_then(|e| e.cap);
            let permission = capped(declared, cap);
            let mut view = tool_roots(&config, admitted);
            // The history tools are offered the roots whose history the
            // config lets them read, and none where there is none.
            if loaded.history {
                view.retain(|r| r.repository.is_some());
            }
            let roots: Vec<String> = view
                .iter()
                .filter(|r| r.perms.contains(permission))
                .map(|r| r.name.clone())
                .collect();
            if roots.is_empty() {
                continue;
            }
            let mut input =
                schema(&d.input_schema).map_err(|e| problem(format!("input schema: {e}")))?;
            let offered = offer_roots(&mut input, &d.path_arguments, &view, cap);
            let output = d
                .output_schema
                .as_deref()
                .map(schema)
                .transpose()
                .map_err(|e| problem(format!("output schema: {e}")))?;
            let capping = if permission < declared {
                format!(
                    "\n\nIt declares {declared}, but is capped at {permission} here: what it \
                     would do beyond that is refused."
                )
            } else {
                String::new()
            };
            // With no root field in its schema to name them, the description does.
            let named =
                (!offered).then(|| format!("\n\nRoots it can act on: {}.", roots.join(", ")));
            let description = format!("{}{capping}{}", d.description, named.unwrap_or_default());
            // Hints follow the (capped) permission whatever the component says.
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
            // A capped tool's path arguments ask no more than its cap: a
            // write it attempts anyway meets a read-only mount, refused by
            // the policing filesystem.
            let paths = d
                .path_arguments
                .iter()
                .map(|p| PathArg {
                    root_field: p.root_field.clone(),
                    root_fallback: p.root_fallback.clone(),
                    path_field: p.path_field.clone(),
                    op: capped(p.permission.into(), cap),
                    across_roots: p.across_roots.map(|a| capped(a.into(), cap)),
                    optional: p.optional,
                })
                .collect();
            entries.push(Entry {
                tool,
                action: Action::Component { index, paths },
                roots: view,
                digest: loaded.short_digest().map(str::to_string),
                timeout: loaded.budget.timeout,
                output_bytes: loaded.budget.output_bytes,
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
            staging: Arc::new(Staging::new()),
            swept: Default::default(),
            hub: Default::default(),
            guests: Default::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Guests running, or dropping what their call left: calls whose
    /// handler may be gone (the session ended) and that still finish.
    pub fn guests_busy(&self) -> usize {
        self.guests.busy()
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

    /// Each listed tool, by name: the permission it needs, where it came
    /// from (`built-in` or its file) and the roots it may act on, for `check`.
    pub fn surface(&self) -> BTreeMap<&str, Surface<'_>> {
        self.entries
            .iter()
            .map(|e| {
                let (need, source, declared) = match &e.action {
                    Action::ListRoots => (Permission::Read, "built-in", Permission::Read),
                    Action::Component { index, .. } => {
                        let tool = &self.runtime.tools()[*index];
                        let declared = tool.descriptor.permission.into();
                        let cap = tool
                            .entry
                            .and_then(|i| self.config.components.get(i))
                            .and_then(|c| c.cap);
                        (capped(declared, cap), tool.source.as_str(), declared)
                    }
                };
                let roots = e
                    .roots
                    .iter()
                    .filter(|r| r.perms.contains(need))
                    .map(|r| r.name.as_str())
                    .collect();
                let surface = Surface {
                    need,
                    source,
                    roots,
                    declared: (declared != need).then_some(declared),
                };
                (e.tool.name.as_ref(), surface)
            })
            .collect()
    }

    /// The listed tool `name`.
    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.tool.name == name)
    }

    /// An audit record of tool `name`, carrying its component's digest if
    /// it is a third-party one.
    fn record<'a>(
        &'a self,
        name: &'a str,
        root: &'a str,
        path: &'a str,
        op: Permission,
    ) -> Record<'a> {
        Record::new(name, root, path, op)
            .component(self.entry(name).and_then(|e| e.digest.as_deref()))
    }

    /// Calls tool `name`. Unknown tools are a protocol error; everything
    /// else, including refusals, is a tool result (`isError` when it failed).
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<JsonObject>,
        control: Control,
    ) -> Result<CallToolResult, ErrorData> {
        self.call_with_report(name, arguments, control)
            .await
            .map(|called| called.result)
    }

    /// [`Toolbox::call`], telling also which rule refused or stopped the
    /// call and whether a path was not there for it. The one call path:
    /// resources and completion go through it too.
    ///
    /// Each call runs in a `call` span (tool, root) and ends with a `call`
    /// event (rule, duration), both at `debug` on stderr
    /// (`LOOMFS_LOG=loom_fs_mcp=debug`);
    /// below that level the span is disabled and costs a level check.
    pub async fn call_with_report(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<JsonObject>,
        control: Control,
    ) -> Result<CallReport, ErrorData> {
        use tracing::Instrument as _;
        let span =
            tracing::debug_span!("call", tool = %shown_clipped(name), root = tracing::field::Empty);
        if span.is_disabled() {
            return self.dispatch(name, arguments, control).await;
        }
        if let Some(root) = arguments
            .as_ref()
            .and_then(|a| a.get("root"))
            .and_then(Value::as_str)
        {
            span.record("root", tracing::field::display(shown_clipped(root)));
        }
        let started = Instant::now();
        let report = self
            .dispatch(name, arguments, control)
            .instrument(span.clone())
            .await;
        let rule = match &report {
            Ok(r) => r.rule.map_or("none", Rule::as_str),
            Err(_) => "protocol",
        };
        tracing::debug!(
            parent: &span,
            rule,
            duration_us = started.elapsed().as_micros() as u64,
            "call"
        );
        report
    }

    /// Finds tool `name` and runs it: the body of [`Self::call_with_report`].
    async fn dispatch(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<JsonObject>,
        control: Control,
    ) -> Result<CallReport, ErrorData> {
        let Some(entry) = self.entries.iter().find(|e| e.tool.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", shown_clipped(name)),
                None,
            ));
        };
        let arguments = arguments.unwrap_or_default();
        match &entry.action {
            Action::ListRoots => Ok(CallReport {
                result: self.list_roots(control.narrowing.as_deref()),
                rule: None,
                path_missing: false,
            }),
            Action::Component { index, paths } => {
                // Fails closed: no call is served while its line could not
                // be written (the refusal's own line waits with the others).
                if let Err(unwritable) = self.audit.writable() {
                    let op = self.runtime.tools()[*index].descriptor.permission.into();
                    self.audit.log(
                        &self
                            .record(name, "", "", op)
                            .client(control.client.as_deref())
                            .denied(Rule::Audit),
                    );
                    return Ok(CallReport::failed(
                        unwritable.to_string(),
                        Some(Rule::Audit),
                    ));
                }
                // Waiting for locks and then for a slot counts against the
                // call's deadline: together at most the tool timeout.
                let waits_until = tokio::time::Instant::now() + entry.timeout;
                let (Resolution { resolved, refused }, locked) = match self
                    .resolve_and_lock(name, paths, &arguments, &control, waits_until)
                    .await
                {
                    Ok(done) => done,
                    Err(refused) => return Ok(refused.into()),
                };
                let mut arguments = arguments;
                RefusedItem::mark(&refused, &mut arguments);
                // Taken under the locks: a path's trash entries are in the
                // order its changes were made. The id of every call, also
                // the name of its trash entry.
                let id = crate::store::trash_stamp();
                Ok(self
                    .run(Run {
                        tool: name,
                        index: *index,
                        paths,
                        resolved,
                        arguments,
                        id,
                        control,
                        locked,
                        waits_until,
                    })
                    .await)
            }
        }
    }

    /// The roots, those a narrowing leaves nothing of left out.
    fn list_roots(&self, narrowing: Option<&Narrowing>) -> CallToolResult {
        let listed: Vec<&Arc<crate::policy::Root>> = self
            .config
            .roots
            .iter()
            .filter(|r| narrowing.is_none_or(|n| n.reaches(&r.name)))
            .collect();
        let roots: Vec<Value> = listed
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "role": r.role.as_str(),
                    "permissions": r.perms.iter().map(Permission::as_str).collect::<Vec<_>>(),
                })
            })
            .collect();
        let text = listed
            .iter()
            .map(|r| format!("{}\t{}\t{}", r.name, r.role, r.perms))
            .collect::<Vec<_>>()
            .join("\n");
        structured(
            vec![ContentBlock::text(text)],
            json!({ "roots": roots, "read_only": self.config.read_only }),
        )
    }
}

/// The roots a tool is offered: every root, or for a third-party tool
/// those its entry names, each with its permissions capped by the entry's
/// `permissions` (a root left with none is not offered).
fn tool_roots(config: &Config, entry: Option<&ComponentEntry>) -> Vec<Arc<Root>> {
    let Some(entry) = entry else {
        return config.roots.clone();
    };
    config
        .roots
        .iter()
        .filter(|r| {
            entry
                .roots
                .as_ref()
                .is_none_or(|names| names.contains(&r.name))
        })
        .filter_map(|r| match entry.cap {
            None => Some(Arc::clone(r)),
            Some(cap) if r.perms.intersect(cap) == r.perms => Some(Arc::clone(r)),
            Some(cap) if r.perms.intersect(cap).is_empty() => None,
            Some(cap) => Some(Arc::new(Root {
                perms: r.perms.intersect(cap),
                ..Root::clone(r)
            })),
        })
        .collect()
}

#[cfg(test)]
mod tests;
