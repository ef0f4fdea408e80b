//! The MCP face of the [`Toolbox`]: an rmcp `ServerHandler`. It answers
//! the protocol only: every decision about a call is the toolbox's.
//!
//! Both protocol eras are answered: `initialize` (2024-11-05 … 2025-11-25)
//! and `server/discover` (2026-07-28), which rmcp handles from `get_info`.
//! A `notifications/cancelled` for a running call sets its cancel flag, and
//! the epoch check stops the guest within a tick. A call whose request
//! carries a progress token gets `notifications/progress` while it runs
//! (files and directories opened, bytes read and written so far), from the
//! policing filesystem's counters: any tool, built-in or not, reports
//! progress without doing anything for it.
//!
//! Logging: a client that sets a level (`logging/setLevel`, or the
//! 2026-07-28 request `_meta` `logLevel`) is told of the refusals and limits
//! its own tool calls meet (a result cut at a limit among them), as
//! `notifications/message` at `warning`, on its own session (each HTTP
//! session has its own level). Nothing is sent to a client that set no
//! level, and nothing about a resource read (whose refusal must look like a
//! missing file).
//!
//! The toolbox arrives after the server starts (components load while the
//! client's handshake is answered): tool requests wait for it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ReadResourceRequestParams, ReadResourceResponse, Reference, ServerCapabilities, ServerConfig,
    Tool,
};
#[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::runtime::Activity;
use crate::tools::{Asker, Called, Control, Toolbox};

/// The client's address, which the HTTP face puts in each request's
/// extensions for the audit log.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub SocketAddr);

/// How often a running call with a progress token reports progress. A call
/// that ends sooner sends none.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

const INSTRUCTIONS: &str = "Filesystem access to a few declared roots, each with a role that caps \
what may be done there. Call list_roots first; every other tool takes a root name and a path \
relative to that root. Refusals name the rule that bit.";

/// The toolbox, once loaded.
pub type Ready = tokio::sync::watch::Receiver<Option<Arc<Toolbox>>>;

#[derive(Clone)]
pub struct Server {
    toolbox: Ready,
    /// Tool calls being answered, across every session (for a shutdown
    /// that lets them finish).
    in_flight: Arc<AtomicUsize>,
    /// The least level of log message this session's client asked for;
    /// `None` until it sets one. One per session ([`Server::for_session`]).
    #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

/// Counts a call in flight while it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(count))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    pub fn new(toolbox: Ready) -> Server {
        Server {
            toolbox,
            in_flight: Arc::default(),
            log_level: Arc::default(),
        }
    }

    /// The handler of a new session: the same toolbox and count of calls
    /// in flight, its own log level (so no session hears of another's
    /// calls, nor at another's level).
    pub fn for_session(&self) -> Server {
        Server {
            log_level: Arc::default(),
            ..self.clone()
        }
    }

    /// Tells the client of the refusal or limit its call met, if it asked
    /// for messages at `warning` or below.
    #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
    async fn log_refusal(&self, tool: &str, called: &Called, context: &RequestContext<RoleServer>) {
        let structured = called.result.structured_content.as_ref();
        // A result cut at a limit (entries, results, the byte budget, the
        // time) is a limit hit too: its note says which.
        let cut =
            structured.and_then(|s| s.get("truncated")) == Some(&serde_json::Value::Bool(true));
        let (rule, message) = match called.rule {
            Some(rule) => {
                let text: Vec<&str> = called
                    .result
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                    .collect();
                (rule, text.join("\n"))
            }
            None if cut => {
                let note = structured
                    .and_then(|s| s.get("note"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the result was cut at a limit");
                ("truncated", note.to_string())
            }
            None => return,
        };
        let session = self.log_level.lock().map(|l| *l).unwrap_or(None);
        // A 2026-07-28 request carries its own level.
        let Some(level) = context.meta.log_level().or(session) else {
            return;
        };
        if (LoggingLevel::Warning as u8) < (level as u8) {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            serde_json::json!({ "tool": tool, "rule": rule, "message": message }),
        );
        param.logger = Some("loom-fs".into());
        // A client gone meanwhile is no error of the call's.
        let _ = context.peer.notify_logging_message(param).await;
    }

    /// Tool calls not answered yet.
    pub fn calls_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The toolbox, waiting for it to be loaded.
    async fn toolbox(&self) -> Result<Arc<Toolbox>, ErrorData> {
        let mut ready = self.toolbox.clone();
        let loaded = ready
            .wait_for(Option::is_some)
            .await
            .map_err(|_| ErrorData::internal_error("the tools failed to load", None))?;
        loaded
            .clone()
            .ok_or_else(|| ErrorData::internal_error("the tools failed to load", None))
    }
}

/// Who asks, for the audit line of the calls a request makes: the HTTP
/// client's address, when there is one.
fn client_of(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientAddr>())
        .map(|ClientAddr(addr)| addr.to_string())
}

fn asker(context: &RequestContext<RoleServer>) -> Asker {
    Asker {
        cancel: context.ct.clone(),
        client: client_of(context),
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_resources()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("loom-fs-mcp", env!("CARGO_PKG_VERSION")).with_title("loom-fs"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.toolbox().await?.tools(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.toolbox.borrow().as_ref()?.tool(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _counted = InFlight::new(&self.in_flight);
        let toolbox = self.toolbox().await?;
        let activity = Arc::new(Activity::default());
        let reporter = context.meta.get_progress_token().map(|token| {
            tokio::spawn(report_progress(
                context.peer.clone(),
                token,
                Arc::clone(&activity),
            ))
        });
        let client = client_of(&context);
        let control = Control {
            cancel: context.ct.clone(),
            activity,
            client,
        };
        let called = toolbox
            .call_traced(&request.name, request.arguments, control)
            .await;
        if let Some(reporter) = reporter {
            // Stopped before the response goes out: no progress after it.
            reporter.abort();
            let _ = reporter.await;
        }
        let called = called?;
        self.log_refusal(&request.name, &called, &context).await;
        Ok(called.result.into())
    }

    #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut level = self
            .log_level
            .lock()
            .map_err(|_| ErrorData::internal_error("the log level is unavailable", None))?;
        *level = Some(request.level);
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(self.toolbox().await?.resource_templates())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let _counted = InFlight::new(&self.in_flight);
        let cursor = request.and_then(|r| r.cursor);
        self.toolbox()
            .await?
            .list_resources(cursor.as_deref(), &asker(&context))
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let _counted = InFlight::new(&self.in_flight);
        self.toolbox()
            .await?
            .read_resource(&request.uri, &asker(&context))
            .await
            .map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let Reference::Resource(template) = &request.r#ref else {
            return Err(ErrorData::invalid_params(
                "this server has no prompts to complete",
                None,
            ));
        };
        let _counted = InFlight::new(&self.in_flight);
        let completion = self
            .toolbox()
            .await?
            .complete_path(
                &template.uri,
                &request.argument.name,
                &request.argument.value,
                &asker(&context),
            )
            .await?;
        Ok(CompleteResult::new(completion))
    }

    /// A request rmcp could not type: an unknown method, or a known one whose
    /// params do not fit (rmcp would call both "method not found").
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(unfit_request(&request.method))
    }
}

/// The methods this server answers, with the params each expects.
const METHODS: &[(&str, &str)] = &[
    (
        "completion/complete",
        r#"{"ref": {"type": "ref/resource", "uri": string}, "argument": {"name": string, "value": string}}"#,
    ),
    (
        "logging/setLevel",
        r#"{"level": "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency"}"#,
    ),
    ("resources/list", r#"{"cursor"?: string}"#),
    ("resources/read", r#"{"uri": string}"#),
    ("resources/templates/list", r#"{"cursor"?: string}"#),
    ("tools/call", r#"{"name": string, "arguments"?: object}"#),
    ("tools/list", r#"{"cursor"?: string}"#),
    (
        "initialize",
        r#"{"protocolVersion": string, "capabilities": object, "clientInfo": object}"#,
    ),
    ("ping", "{}"),
    (
        "server/discover",
        r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": string, ...}}"#,
    ),
];

fn unfit_request(method: &str) -> ErrorData {
    match METHODS.iter().find(|(m, _)| *m == method) {
        Some((m, expected)) => ErrorData::invalid_params(
            format!("invalid params for '{m}': expected {expected}"),
            None,
        ),
        None => ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("unknown method '{}'", crate::policy::shown_clipped(method)),
            None,
        ),
    }
}

/// Sends a progress notification every [`PROGRESS_EVERY`] while the call
/// makes progress; aborted when the call ends.
async fn report_progress(peer: Peer<RoleServer>, token: ProgressToken, activity: Arc<Activity>) {
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first tick is immediate: nothing to report yet.
    ticks.tick().await;
    let mut reported = 0;
    loop {
        ticks.tick().await;
        let (opened, read, written) = (
            activity.opened(),
            activity.bytes_read(),
            activity.bytes_written(),
        );
        // Opens and bytes both only grow, so their sum does: a walk of many
        // small files and one large read both move it.
        let progress = opened + read + written;
        if progress == reported {
            continue;
        }
        reported = progress;
        let message = format!(
            "{opened} files and directories opened, {} directories read, {read} bytes read, \
             {written} bytes written",
            activity.dirs_read()
        );
        let param =
            ProgressNotificationParam::new(token.clone(), progress as f64).with_message(message);
        if peer.notify_progress(param).await.is_err() {
            return;
        }
    }
}
