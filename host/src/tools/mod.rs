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
//!
//! `Toolbox`'s `impl` is split over the files of the call's stages
//! (`prepare.rs`, `admit.rs`, `attempt.rs`, `judge.rs`, `publish.rs`,
//! `audit.rs`) and of the resources (`resources.rs`, `watch.rs`): each
//! stage needs the toolbox's config, audit log and call path, so it is a
//! method of it, and each file holds one stage and says which.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::policy::{Narrowing, Permission, Rule, shown_clipped};
use crate::runtime::{Activity, Runtime};
use crate::store::audit::Audit;
use results::structured;

mod admit;
mod attempt;
mod audit;
mod call;
mod catalogue;
mod guests;
mod judge;
mod prepare;
mod publish;
mod report;
mod resources;
mod results;
mod run;
pub mod slots;
mod watch;

use call::CallPath;
use catalogue::{Catalogue, Entry};
pub use catalogue::{Surface, SurfaceError, capped, declaration_problem};
pub use report::CallReport;
pub use resources::{ResourceContext, SCHEME, mime_of_name, parse_uri, resource_uri};
pub use watch::{Change, DEBOUNCE, Notifier, Watch};

/// Longest model-supplied string kept in an audit line (bytes).
const AUDIT_CLIP: usize = 1024;

/// Longest error text passed to the model for invalid arguments and for
/// any error of a third-party tool (bytes): they may quote arguments
/// megabytes long. A built-in tool's other errors are passed whole: they
/// show names, which are never cut, and resolve() lets no path through
/// that is longer than a path can be.
const ERROR_CLIP: usize = 4096;

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

/// The tools of one server: what they answer to (config, runtime, audit),
/// what it lists ([`Catalogue`]), what its calls share ([`CallPath`]),
/// the threads its guests run on, and the watcher of its roots.
pub struct Toolbox {
    config: Config,
    runtime: Runtime,
    audit: Audit,
    catalogue: Catalogue,
    calls: CallPath,
    /// The threads the guests run on.
    guests: guests::GuestThreads,
    /// The watcher of the roots while some session watches them.
    hub: tokio::sync::Mutex<std::sync::Weak<watch::Hub>>,
}

impl Toolbox {
    /// Builds the surface from the loaded components and the config.
    pub fn new(config: Config, runtime: Runtime, audit: Audit) -> Result<Toolbox, SurfaceError> {
        let catalogue = Catalogue::new(&config, &runtime)?;
        Ok(Toolbox {
            calls: CallPath::new(&config),
            config,
            runtime,
            audit,
            catalogue,
            guests: Default::default(),
            hub: Default::default(),
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
        self.catalogue.tools().cloned().collect()
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.catalogue.get(name).map(|e| &e.tool)
    }

    /// Each listed tool, by name: the permission it needs, where it came
    /// from (`built-in` or its file) and the roots it may act on, for `check`.
    pub fn surface(&self) -> BTreeMap<&str, Surface<'_>> {
        self.catalogue.surface(&self.config, &self.runtime)
    }

    /// The listed tool `name`.
    fn entry(&self, name: &str) -> Option<&Entry> {
        self.catalogue.get(name)
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
        let Some(entry) = self.catalogue.get(name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", shown_clipped(name)),
                None,
            ));
        };
        let arguments = arguments.unwrap_or_default();
        match entry.action.component(&arguments) {
            None => Ok(CallReport {
                result: self.list_roots(control.narrowing.as_deref()),
                rule: None,
                path_missing: false,
            }),
            Some((index, paths)) => Ok(self
                .call_component(name, index, paths, arguments, control, entry.timeout)
                .await),
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

#[cfg(test)]
mod tests;
