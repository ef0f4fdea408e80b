//! The Streamable HTTP transport: `/mcp` (rmcp's `StreamableHttpService`)
//! and `GET /health`, for a shared endpoint.
//!
//! As safe as stdio by default: it listens on loopback only unless told
//! otherwise; requests whose `Host` is not the bound address or a loopback
//! name, and requests carrying a foreign `Origin`, are refused with 403 (DNS
//! rebinding: a web page must not reach a local server through the
//! browser); with `--auth-token-file`, every `/mcp` request must carry the
//! token (`Authorization: Bearer …`, compared in constant time) or gets 401.
//! Bodies are capped, sessions are capped and expire when idle. Both
//! protocol eras are served on the one endpoint: 2025 clients `initialize`
//! and keep an `Mcp-Session-Id` session; 2026-07-28 clients are stateless.
//!
//! `/health` answers `ok` without touching any root or the toolbox.
//!
//! Connections are served here, not by `axum::serve`, for the limits it
//! cannot set: hyper's header timeout, the least body rate ([`body`]), the
//! send timeout ([`send`]) and the connection caps ([`conns`]), so that
//! clients that never finish a request, or never read its answer, cannot
//! take the descriptors the tool calls need.

pub mod body;
pub mod conns;
pub mod removed;
pub mod send;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::Stream;
use http_body::Body as _;
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::server::mcp::{ClientAddr, Server};
use body::{Held, MinRate};
use conns::{ConnLimits, Conns, Ticket};
use send::SendTimeout;

/// How the endpoint is served. (No `Debug`: it holds the token.)
#[derive(Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// Bearer token every `/mcp` request must carry, if any.
    pub token: Option<String>,
    /// `Host` values accepted besides the bound address and loopback names.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted besides loopback origins.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    pub max_sessions: usize,
    /// A session with no request for this long is closed.
    pub session_idle: Duration,
    /// How long a shutdown waits for calls in flight.
    pub drain: Duration,
    /// Connection caps and time limits.
    pub conns: ConnLimits,
}

/// What the `/mcp` guard needs.
struct Gate {
    token: Option<String>,
    sessions: Arc<Sessions>,
    max_body_bytes: usize,
}

/// rmcp's in-memory sessions, at most `max` at once. The cap is kept where
/// sessions are made (one at a time, counted and inserted together), so no
/// request shape and no race gets past it; the guard in front only turns
/// the common case into a clear 503 before rmcp sees the request.
pub struct Sessions {
    inner: LocalSessionManager,
    max: usize,
    creating: tokio::sync::Mutex<()>,
}

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("all {0} sessions are in use (--max-sessions); try again later")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl Sessions {
    fn new(max: usize, idle: Duration) -> Sessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Sessions {
            inner,
            max,
            creating: tokio::sync::Mutex::new(()),
        }
    }

    async fn full(&self) -> bool {
        self.inner.sessions.read().await.len() >= self.max
    }
}

impl SessionManager for Sessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), SessionError> {
        let _one_at_a_time = self.creating.lock().await;
        if self.full().await {
            return Err(SessionError::Full(self.max));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// The `Host` values always accepted: loopback names, with any port.
const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// The router: `/health` and the guarded `/mcp`. `sessions_end` closes
/// every MCP session when fired.
pub fn router(server: Server, options: &HttpOptions, sessions_end: &CancellationToken) -> Router {
    let sessions = Arc::new(Sessions::new(options.max_sessions, options.session_idle));
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    hosts.push(options.listen.ip().to_string());
    hosts.push(options.listen.to_string());
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .iter()
        .map(|o| o.to_string())
        .collect();
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(sessions_end.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::clone(&sessions),
        config,
    );
    let gate = Arc::new(Gate {
        token: options.token.clone(),
        sessions,
        max_body_bytes: options.max_body_bytes,
    });
    let guarded = Router::new()
        .route_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(gate, guard));
    Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .merge(guarded)
}

/// Serves on `listener` until `stop` fires. Then it stops accepting, lets
/// the tool calls in flight finish (for at most `drain`: a write is never cut
/// short by a shutdown), closes the sessions, and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Server,
    options: &HttpOptions,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let sessions_end = CancellationToken::new();
    let app = router(server.clone(), options, &sessions_end);
    let mut serving = tokio::spawn(accept(listener, app, options.conns, stop.clone()));
    stop.cancelled().await;
    let deadline = tokio::time::Instant::now() + options.drain;
    while server.calls_in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every call has returned; its answer may still be on its way into its
    // stream. A request's stream closes by itself once answered, so give
    // them a moment before ending the sessions (and the idle streams that
    // never close), then cut whatever still hangs on at the deadline.
    let left = |at: tokio::time::Instant| at.saturating_duration_since(tokio::time::Instant::now());
    let settle = left(deadline).min(Duration::from_secs(1));
    let ended = match tokio::time::timeout(settle, &mut serving).await {
        Ok(ended) => Some(ended),
        Err(_) => {
            sessions_end.cancel();
            tokio::time::timeout(left(deadline).max(Duration::from_millis(200)), serving)
                .await
                .ok()
        }
    };
    sessions_end.cancel();
    match ended {
        Some(Ok(result)) => result,
        Some(Err(e)) => Err(std::io::Error::other(e)),
        None => Ok(()),
    }
}

/// Accepts connections until `stop` fires, each under the caps, then waits
/// for the open ones to finish their requests (they are told to close
/// after the one in progress).
async fn accept(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let conns = Conns::new(&limits);
    let mut http = http1::Builder::new();
    // hyper starts this timer when it waits for a request's head: on a new
    // connection, and again once a response is out, so it is also the
    // keep-alive idle timeout.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    // Each connection task holds a receiver: all are gone when `closed`.
    let (all_closed, open) = tokio::sync::watch::channel(());
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        match admit(&conns, peer).await {
            Ok(ticket) => {
                let connection = Connection {
                    ticket: Arc::new(ticket),
                    peer,
                    limits,
                    app: TowerToHyperService::new(app.clone()),
                };
                tokio::spawn(connection.run(stream, http.clone(), stop.clone(), open.clone()));
            }
            // Closed at once: a fast failure, where waiting would hang.
            Err(refused) => tracing::debug!(%peer, "connection refused: {refused}"),
        }
    }
    drop(listener);
    drop(open);
    all_closed.closed().await;
    Ok(())
}

/// Admits a connection from `peer`, waiting (at most a second: the accept
/// loop waits meanwhile, new connections stay in the listen queue, out of
/// the descriptor table) while another closes to make room for it.
async fn admit(conns: &Arc<Conns>, peer: SocketAddr) -> Result<Ticket, conns::Refused> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        let freed = conns.freed();
        let mut freed = pin!(freed);
        // Registered before the attempt, so a ticket dropped in between
        // is not missed.
        freed.as_mut().enable();
        match conns.admit(peer.ip()) {
            Err(conns::Refused::Closing) => {
                if tokio::time::timeout_at(deadline, freed).await.is_err() {
                    return Err(conns::Refused::Closing);
                }
            }
            admitted => return admitted,
        }
    }
}

/// Out of descriptors (or memory) for a new connection: connections
/// already open may close meanwhile; a pause keeps the loop from spinning.
/// Errors of the one connection (reset before it was accepted) are not
/// the listener's.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!("cannot accept a connection: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// One accepted connection.
struct Connection {
    ticket: Arc<Ticket>,
    peer: SocketAddr,
    limits: ConnLimits,
    app: TowerToHyperService<Router>,
}

impl Connection {
    /// Serves the connection until it ends, another takes its place (then
    /// it closes at once), or the server stops (then it closes after the
    /// request in progress).
    async fn run(
        self,
        stream: tokio::net::TcpStream,
        http: http1::Builder,
        stop: CancellationToken,
        _open: tokio::sync::watch::Receiver<()>,
    ) {
        let closing = self.ticket.closing().clone();
        let send_timeout = self.limits.send_timeout;
        let this = Arc::new(self);
        let service = hyper::service::service_fn(move |request| Arc::clone(&this).handle(request));
        let io = TokioIo::new(SendTimeout::new(stream, send_timeout));
        let mut conn = pin!(http.serve_connection(io, service));
        let mut draining = false;
        loop {
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!("connection ended: {e}");
                    }
                    break;
                }
                () = closing.cancelled() => break,
                () = stop.cancelled(), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }

    /// One request: its body under the least rate and the whole-body
    /// time, the client's address for the guard, the connection marked
    /// busy until the answer is out, and an event stream counted against
    /// the stream caps. A body cut for slowness or lateness gets 408 and
    /// the connection closes.
    async fn handle(
        self: Arc<Self>,
        request: axum::http::Request<hyper::body::Incoming>,
    ) -> Result<Response<Held<Body>>, Infallible> {
        let busy = Arc::new(self.ticket.request(request.body().is_end_stream()));
        let standalone = request.method() == Method::GET && request.uri().path() == "/mcp";
        let cut = Arc::new(OnceLock::new());
        let limits = body::BodyLimits::of(&self.limits);
        let mut request = request.map(|incoming| {
            Body::new(MinRate::new(
                incoming,
                limits,
                Arc::clone(&busy),
                Arc::clone(&cut),
            ))
        });
        request.extensions_mut().insert(ConnectInfo(self.peer));
        let response = self.app.call(request).await?;
        let response = match cut.get() {
            Some(why) => (
                StatusCode::REQUEST_TIMEOUT,
                [(header::CONNECTION, "close")],
                format!("{why}\n"),
            )
                .into_response(),
            None => response,
        };
        // Counted once rmcp has opened it, so that a request refused (no
        // token, no session) never closes another client's stream.
        if standalone && response.status() == StatusCode::OK && is_event_stream(&response) {
            busy.streaming();
        }
        Ok(response.map(|body| Held::new(body, busy)))
    }
}

fn is_event_stream<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"))
}

/// Auth, the session cap, and the client's address, before rmcp sees the
/// request (which then checks `Host`, `Origin` and the body size); after
/// it, a removed method's answer ([`removed`]).
async fn guard(
    State(gate): State<Arc<Gate>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &gate.token
        && !bearer_matches(request.headers(), token)
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "missing or wrong bearer token\n",
        )
            .into_response();
    }
    if opens_session(&request) && gate.sessions.full().await {
        let full = SessionError::Full(gate.sessions.max);
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{full}\n")).into_response();
    }
    request.extensions_mut().insert(ClientAddr(peer));
    removed::answer(request, next, gate.max_body_bytes).await
}

fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
}

/// Whether a request may open a session: a POST without a session id that
/// is not a stateless 2026-era request (those name a method other than
/// `initialize` in `Mcp-Method`). Only the guard's early 503 depends on
/// this; [`Sessions`] holds the cap whatever a request claims to be.
fn opens_session(request: &Request) -> bool {
    let headers = request.headers();
    let stateless = headers
        .get("mcp-method")
        .is_some_and(|m| m.as_bytes() != b"initialize");
    request.method() == Method::POST && !headers.contains_key("mcp-session-id") && !stateless
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_must_match_exactly() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert!(bearer_matches(&with("Bearer s3cret"), "s3cret"));
        for wrong in [
            "Bearer s3cre",
            "Bearer s3cret ",
            "bearer s3cret",
            "s3cret",
            "Bearer ",
        ] {
            assert!(!bearer_matches(&with(wrong), "s3cret"), "{wrong}");
        }
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
