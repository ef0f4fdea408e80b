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
//! Change subscriptions (`tools::Watch`): 2025-era `resources/subscribe` and
//! `resources/unsubscribe` on the session's own watch, `notifications/
//! resources/list_changed` once the session has listed resources or
//! subscribed; 2026-07-28 `subscriptions/listen`, one watch per listen
//! request, ended with it. Each HTTP session has its own watch.
//!
//! Client roots (`client_roots = "narrow"`, 2025-era sessions only): after
//! `notifications/initialized` and on each `notifications/roots/
//! list_changed` the client is asked for its roots (`roots/list`); until it
//! answers, a request waits (then, unanswered, is served nothing), and
//! every call, read, listing and subscription of the session carries the
//! narrowing into the toolbox, which checks it after `resolve()`.
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
use rmcp::model::{SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::policy::Narrowing;
use crate::runtime::Activity;
use crate::tools::{CallReport, Change, Control, Notifier, ResourceContext, Toolbox, Watch};

mod session;
use session::legacy;

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

/// How long a request of a narrowed session waits for its client's roots
/// before it is served as if the client had declared none.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

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
    /// The session's watch of the roots, once it subscribed or listed
    /// resources (2025 era).
    watch: Arc<tokio::sync::Mutex<Option<Arc<Watch>>>>,
    /// What the session's client roots leave (`client_roots = "narrow"`):
    /// `None` until the client has answered `roots/list`.
    narrowing: Arc<tokio::sync::watch::Sender<Option<Arc<Narrowing>>>>,
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
            watch: Arc::default(),
            narrowing: Arc::new(tokio::sync::watch::Sender::new(None)),
        }
    }

    /// The handler of a new session: the same toolbox and count of calls
    /// in flight, its own log level (so no session hears of another's
    /// calls, nor at another's level).
    pub fn for_session(&self) -> Server {
        Server {
            log_level: Arc::default(),
            watch: Arc::default(),
            narrowing: Arc::new(tokio::sync::watch::Sender::new(None)),
            ..self.clone()
        }
    }

    /// Tells the client of the refusal or limit its call met, if it asked
    /// for messages at `warning` or below.
    #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
    async fn log_refusal(
        &self,
        tool: &str,
        called: &CallReport,
        context: &RequestContext<RoleServer>,
    ) {
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
                (rule.as_str(), text.join("\n"))
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

    /// Waits, for at most `limit`, until no guest runs: a session's end
    /// drops the handlers of its calls, not their guests, which finish
    /// (publishing or rolling back what they wrote) on threads the process
    /// would not wait for at exit.
    pub async fn guests_finished(&self, limit: Duration) {
        let Some(toolbox) = self.toolbox.borrow().clone() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + limit;
        while toolbox.guests_busy() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // SEP-2577 deprecates logging; clients still use it
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
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
        let narrowing = self.narrowing(&context).await?;
        let control = Control {
            cancel: context.ct.clone(),
            activity,
            client,
            narrowing,
        };
        let called = toolbox
            .call_with_report(&request.name, request.arguments, control)
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
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // 2026-07-28 removed it (a request carries its own `logLevel`):
        // a method that version does not have, as rmcp answers `ping`
        // and `resources/subscribe` there (over HTTP, 404).
        if !legacy(&context) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel",
                None,
            ));
        }
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let narrowing = self.narrowing(&context).await?;
        Ok(self
            .toolbox()
            .await?
            .resource_templates(narrowing.as_deref()))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let _counted = InFlight::new(&self.in_flight);
        let cursor = request.and_then(|r| r.cursor);
        let resource_cx = self.resource_cx(&context).await?;
        let listed = self
            .toolbox()
            .await?
            .list_resources(cursor.as_deref(), &resource_cx)
            .await?;
        // A 2025-era client that lists resources hears when the list
        // changes; the watcher starts meanwhile, not in the way of the list.
        if legacy(&context) {
            let (server, peer) = (self.clone(), context.peer.clone());
            tokio::spawn(async move {
                let _ = server.session_watch(&peer, resource_cx.narrowing).await;
            });
        }
        Ok(listed)
    }

    #[allow(deprecated)] // legacy-only in rmcp; the 2025 era uses it
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let resource_cx = self.resource_cx(&context).await?;
        let watch = self
            .session_watch(&context.peer, resource_cx.narrowing.clone())
            .await?;
        watch.subscribe(&request.uri, &resource_cx)
    }

    #[allow(deprecated)] // legacy-only in rmcp; the 2025 era uses it
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(watch) = self.watch.lock().await.as_ref() {
            watch.unsubscribe(&request.uri);
        }
        Ok(())
    }

    /// 2026-07-28: list changes, and the URIs a read could reach (refused
    /// or missing ones are left out of the acknowledgment, as a read
    /// answers them alike), at most `max_subscriptions`.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        let Some(toolbox) = self.toolbox.borrow().clone() else {
            // Before the tools are loaded nothing can be resolved: every
            // URI is accepted alike (no hint of which exist), and `listen`
            // watches only those a read could reach.
            accepted.resource_subscriptions = requested.resource_subscriptions.clone();
            return Some(accepted);
        };
        if let Some(uris) = &requested.resource_subscriptions {
            let max = toolbox.config().limits.max_subscriptions as usize;
            let resource_cx = ResourceContext::default();
            let reachable: Vec<String> = uris
                .iter()
                .filter(|uri| toolbox.subscription(uri, None, &resource_cx).is_ok())
                .take(max)
                .cloned()
                .collect();
            accepted.resource_subscriptions = (!reachable.is_empty()).then_some(reachable);
        }
        Some(accepted)
    }

    /// One watch for the listen request, until it is cancelled.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let toolbox = self.toolbox().await?;
        let sink = context.sink().clone();
        let notifier: Notifier = Box::new(move |change| {
            let sink = sink.clone();
            Box::pin(async move {
                match change {
                    Change::Updated(uri) => sink.notify_resource_updated(uri).await.is_ok(),
                    Change::ListChanged => sink.notify_resource_list_changed().await.is_ok(),
                }
            })
        });
        let watch = toolbox.watch(notifier).await?;
        let accepted = context.accepted();
        if accepted.resources_list_changed == Some(true) {
            watch.hear_list_changes();
        }
        let resource_cx = ResourceContext {
            client: client_of(context.request_context()),
            ..ResourceContext::default()
        };
        for uri in accepted.resource_subscriptions.iter().flatten() {
            // Accepted a moment ago; one gone since is simply not watched.
            let _ = watch.subscribe(uri, &resource_cx);
        }
        context.cancelled().await;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let server = self.clone();
        tokio::spawn(async move { server.refresh_roots(context.peer).await });
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let server = self.clone();
        tokio::spawn(async move { server.refresh_roots(context.peer).await });
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let _counted = InFlight::new(&self.in_flight);
        self.toolbox()
            .await?
            .read_resource(&request.uri, &self.resource_cx(&context).await?)
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
        let resource_cx = self.resource_cx(&context).await?;
        let completion = self
            .toolbox()
            .await?
            .complete_path(
                &template.uri,
                &request.argument.name,
                &request.argument.value,
                &resource_cx,
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
    ("resources/subscribe", r#"{"uri": string}"#),
    ("resources/unsubscribe", r#"{"uri": string}"#),
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
