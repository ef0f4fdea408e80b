//! Streamable HTTP, end to end: the real binary on an ephemeral loopback
//! port, spoken to by a minimal HTTP/1.1 client (so every header is the
//! test's own): both protocol eras, DNS-rebinding protection (`Host`,
//! `Origin`), the bearer token, the body cap, the session cap, the
//! loopback-only default, the client address in the audit log, and a
//! shutdown that lets a write in flight finish, and parallel edits of one
//! file through two sessions that all land; and clients that never finish
//! a request (half-open heads, bodies one byte a second), in floods larger
//! than the server's descriptor limit, while real clients are served.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Env, assert_fails_with, command, http_banner, scan};
use serde_json::{Value, json};

/// The server, with the address it printed.
struct Http {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(config: &Path, extra: &[&str]) -> Http {
    start_on(config, "127.0.0.1:0", extra).0
}

/// The server on `listen`, and what it said on stderr up to listening.
fn start_on(config: &Path, listen: &str, extra: &[&str]) -> (Http, String) {
    spawn_http(command(), config, listen, extra)
}

/// The server with `RLIMIT_NOFILE` at `limit` (soft and hard, so it cannot
/// raise it), and what it said on stderr up to listening.
fn start_limited(config: &Path, limit: u64, extra: &[&str]) -> (Http, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = command();
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs here.
    unsafe {
        cmd.pre_exec(move || {
            let limit = rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    spawn_http(cmd, config, "127.0.0.1:0", extra)
}

fn spawn_http(
    mut cmd: std::process::Command,
    config: &Path,
    listen: &str,
    extra: &[&str],
) -> (Http, String) {
    let mut child = cmd
        .arg("--config")
        .arg(config)
        .args(["--transport", "http", "--listen", listen])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, banner) = http_banner(&mut child);
    (Http { child, addr }, banner)
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body: one JSON document, or the `data:`
    /// lines of an event stream.
    fn messages(&self) -> Vec<Value> {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter(|d| !d.trim().is_empty())
                .map(|d| serde_json::from_str(d.trim()).unwrap())
                .collect()
        } else {
            vec![serde_json::from_str(&self.body).unwrap()]
        }
    }

    fn message(&self) -> Value {
        let mut all = self.messages();
        assert_eq!(all.len(), 1, "{all:?}");
        all.remove(0)
    }
}

/// A JSON-RPC POST to `/mcp`, accepting JSON or an event stream.
fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut all = vec![ACCEPT, JSON];
    all.extend_from_slice(headers);
    send(addr, "POST", "/mcp", &all, body)
}

/// One request on its own connection. A `Host` is added unless given.
fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    send_within(addr, method, path, headers, body, Duration::from_secs(30))
}

/// [`send`], the answer awaited at most `limit`.
fn send_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limit: Duration,
) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head += &format!("Host: {addr}\r\n");
    }
    for (n, v) in headers {
        head += &format!("{n}: {v}\r\n");
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413, 401) before reading a large body.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Response {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    scan(&body);
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    body
}

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "http-test", "version": "0"}}})
    .to_string()
}

/// A 2025-11-25 session: initialize, then the initialized notification.
fn open_session(addr: SocketAddr) -> String {
    let r = post(addr, &[], initialize_body("2025-11-25").as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.message()["result"]["protocolVersion"], "2025-11-25");
    let session = r
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let r = post(
        addr,
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        note.as_bytes(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    session
}

fn in_session(addr: SocketAddr, session: &str, id: u32, method: &str, params: Value) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    post(
        addr,
        &[
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        body.as_bytes(),
    )
}

fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("docs/a.txt", "alpha\n")
        .write("docs/.env", "CANARY-DOTENV\n")
        .mkdir("ws")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n");
    let config = env.config(
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    (env, config)
}

#[test]
fn both_eras_are_served_on_one_endpoint_behind_the_rebinding_guard() {
    let (env, config) = fixture();
    let outside = env.snapshot_of("outside");
    let server = start(&config, &[]);
    let addr = server.addr;

    let health = send(addr, "GET", "/health", &[], b"");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    // 2025-11-25: initialize, a session, tools/list and a call.
    let session = open_session(addr);
    let list = in_session(addr, &session, 2, "tools/list", json!({})).message();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"delete_file"),
        "{names:?}"
    );
    let read = in_session(
        addr,
        &session,
        3,
        "tools/call",
        json!({"name": "read_file", "arguments": {"root": "docs", "path": "a.txt"}}),
    )
    .message();
    assert_eq!(read["result"]["content"][0]["text"], "alpha\n", "{read}");
    let denied = in_session(
        addr,
        &session,
        4,
        "tools/call",
        json!({"name": "read_file", "arguments": {"root": "docs", "path": ".env"}}),
    )
    .message();
    assert_eq!(denied["result"]["isError"], true);
    assert!(!denied.to_string().contains("CANARY"));
    // A protocol version the server does not speak, on a session request.
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string();
    let r = post(
        addr,
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        body.as_bytes(),
    );
    assert_eq!(r.status, 400, "{}", r.body);

    // 2026-07-28: stateless, server/discover and a call, version in _meta.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let discover =
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}});
    let r = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        discover.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.header("mcp-session-id").is_none());
    let found = r.message();
    assert!(found["result"].is_object(), "{found}");
    assert!(found.to_string().contains("loom-fs-mcp"), "{found}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"root": "docs", "path": "a.txt"}, "_meta": meta}});
    let r = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "read_file"),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.message()["result"]["content"][0]["text"], "alpha\n");

    // Methods 2026-07-28 removed: 404 and method not found, whether sent
    // whole or without their params (which rmcp would check first).
    for (id, method, params) in [
        (
            11,
            "logging/setLevel",
            json!({"_meta": meta, "level": "debug"}),
        ),
        (12, "logging/setLevel", json!({"_meta": meta})),
        (13, "resources/subscribe", json!({"_meta": meta})),
        (14, "resources/unsubscribe", json!({"_meta": meta})),
        (15, "initialize", json!({"_meta": meta})),
        (16, "ping", json!({"_meta": meta})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let r = post(
            addr,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ],
            body.to_string().as_bytes(),
        );
        assert_eq!(r.status, 404, "{method}: {}", r.body);
        let answer = r.message();
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        assert_eq!(answer["id"], id, "{method}: {answer}");
    }
    // A method of 2026-07-28 without its params is still invalid params.
    let bad =
        json!({"jsonrpc": "2.0", "id": 17, "method": "resources/read", "params": {"_meta": meta}});
    let r = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "resources/read"),
        ],
        bad.to_string().as_bytes(),
    );
    assert_eq!(r.message()["error"]["code"], -32602, "{}", r.body);

    // A 2026-era request naming a version the server does not speak.
    let mut unknown = discover.clone();
    unknown["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "server/discover"),
        ],
        unknown.to_string().as_bytes(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.message()["error"]["code"], -32022);

    // DNS rebinding: a foreign Origin or Host is refused; no Origin is fine
    // (every request above had none), a loopback Origin too.
    let init = initialize_body("2025-11-25");
    let r = post(addr, &[("Origin", "http://evil.example")], init.as_bytes());
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(addr, &[("Host", "evil.example")], init.as_bytes());
    assert_eq!(r.status, 403, "{}", r.body);
    let r = post(
        addr,
        &[("Origin", &format!("http://localhost:{}", addr.port()))],
        init.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // An oversized body is refused, not read.
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{{\"root\":\"ws\",\"path\":\"big\",\"content\":\"{}\"}}}}}}",
        "x".repeat(5 << 20)
    );
    let r = post(
        addr,
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        huge.as_bytes(),
    );
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(!env.path("ws/big").exists());

    // The audit line of an HTTP call names the client.
    let audit = std::fs::read_to_string(env.path("audit.log")).unwrap();
    let line: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == "read_file" && l["decision"] == "allow")
        .expect("an audit line for the read");
    assert!(
        line["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("127.0.0.1:")),
        "{line}"
    );
    assert_eq!(env.snapshot_of("outside"), outside);
}

#[test]
fn a_configured_token_is_required_and_checked() {
    let (env, config) = fixture();
    std::fs::write(env.path("token"), "s3cret-token\n").unwrap();
    let token_file = env.path("token").display().to_string();
    let server = start(&config, &["--auth-token-file", &token_file]);
    let init = initialize_body("2025-11-25");
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-toke"),
        Some("s3cret-token"),
    ] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = post(server.addr, &headers, init.as_bytes());
        assert_eq!(r.status, 401, "{auth:?}: {}", r.body);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert!(!r.body.contains("s3cret"));
    }
    let r = post(
        server.addr,
        &[("Authorization", "Bearer s3cret-token")],
        init.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The health check needs no token and touches no root.
    assert_eq!(send(server.addr, "GET", "/health", &[], b"").status, 200);
}

#[test]
fn sessions_are_capped_and_expire_when_idle() {
    let (_env, config) = fixture();
    let server = start(
        &config,
        &["--max-sessions", "1", "--session-idle-secs", "1"],
    );
    let first = open_session(server.addr);
    let r = post(server.addr, &[], initialize_body("2025-11-25").as_bytes());
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("--max-sessions"), "{}", r.body);
    // However the request dresses up, no second session is made: an
    // initialize claiming the stateless era, or naming another method.
    let init_2026 = initialize_body("2026-07-28");
    for headers in [
        vec![("MCP-Protocol-Version", "2026-07-28")],
        vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        vec![("Mcp-Method", "server/discover")],
    ] {
        for body in [&init_2026, &initialize_body("2025-11-25")] {
            let r = post(server.addr, &headers, body.as_bytes());
            assert!(
                r.header("mcp-session-id").is_none(),
                "{headers:?} opened a session: {} {}",
                r.status,
                r.body
            );
        }
    }
    // Idle for longer than a second, the session is gone, and its slot free.
    std::thread::sleep(Duration::from_millis(2500));
    let r = in_session(server.addr, &first, 2, "tools/list", json!({}));
    assert_eq!(r.status, 404, "{}", r.body);
    open_session(server.addr);
}

#[test]
fn a_non_loopback_address_needs_the_flag_and_gets_a_warning() {
    let (_env, config) = fixture();
    let out = command()
        .arg("--config")
        .arg(&config)
        .args(["--transport", "http", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_fails_with(
        &out,
        "refusing to listen on 0.0.0.0:0: not a loopback address",
    );
    let (_server, seen) = start_on(&config, "0.0.0.0:0", &["--allow-non-loopback"]);
    assert!(
        seen.contains("warning: listening on 0.0.0.0:0, which is not loopback: anyone who can reach it can use every root with its permissions, and no --auth-token-file is set"),
        "{seen}"
    );
}

/// SIGTERM while a write is being answered: the server stops accepting,
/// finishes the write, answers it, and exits.
#[test]
fn shutdown_finishes_a_write_in_flight() {
    let (env, config) = fixture();
    let mut server = start(&config, &["--max-body-bytes", "67108864"]);
    let session = open_session(server.addr);
    // About 20 MB: long enough to write that the signal lands mid-call.
    let content = "line of text\n".repeat(1_600_000);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "write_file", "arguments": {"root": "ws", "path": "big.txt", "content": content}}})
    .to_string();
    let addr = server.addr;
    let writer = std::thread::spawn(move || {
        let headers = [
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        post(addr, &headers, body.as_bytes())
    });
    // Signal once the call is running (its temporary file exists), or
    // after a while if it was quicker than that.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5)
        && !std::fs::read_dir(env.path("ws"))
            .unwrap()
            .any(|e| e.is_ok())
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = rustix::process::Pid::from_raw(server.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let r = writer.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = r.message();
    assert!(answer["result"]["isError"] != true, "{answer}");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/big.txt")).unwrap(),
        content
    );
    let status = wait_exit(&mut server.child, Duration::from_secs(20));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A bounded load on loopback: 32 clients, each with its own session, 1,000
/// `read_file` calls in all, every one answered without an error. The
/// throughput and the 99th percentile go to stderr (a figure, not an
/// assertion: the machines are shared).
#[test]
fn a_thousand_calls_from_32_clients_all_succeed() {
    const CLIENTS: usize = 32;
    const CALLS: usize = 1000;
    let (_env, config) = fixture();
    let server = start(&config, &["--max-sessions", "64"]);
    let addr = server.addr;
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let session = open_session(addr);
                let mut took = Vec::new();
                for n in (c..CALLS).step_by(CLIENTS) {
                    let call = Instant::now();
                    let r = in_session(
                        addr,
                        &session,
                        n as u32 + 10,
                        "tools/call",
                        json!({"name": "read_file", "arguments": {"root": "docs", "path": "a.txt"}}),
                    );
                    took.push(call.elapsed());
                    assert_eq!(r.status, 200, "{}", r.body);
                    let answer = r.message();
                    assert_eq!(answer["result"]["content"][0]["text"], "alpha\n", "{answer}");
                }
                took
            })
        })
        .collect();
    let mut took: Vec<Duration> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("a client failed"))
        .collect();
    let elapsed = started.elapsed();
    assert_eq!(took.len(), CALLS);
    took.sort();
    eprintln!(
        "{CALLS} calls from {CLIENTS} clients in {elapsed:?}: {:.0} calls/s, p50 {:?}, p99 {:?}",
        CALLS as f64 / elapsed.as_secs_f64(),
        took[CALLS / 2],
        took[CALLS * 99 / 100]
    );
}

/// A real MCP client (rmcp's Streamable HTTP client), in both eras: the
/// 2025-11-25 handshake with a session, and the 2026-07-28 discovery.
#[tokio::test]
async fn a_real_client_lists_and_calls_in_both_eras() {
    use rmcp::ClientServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::ClientLifecycleMode;
    use rmcp::transport::StreamableHttpClientTransport;
    let (_env, config) = fixture();
    let server = start(&config, &[]);
    let url = format!("http://{}/mcp", server.addr);
    for lifecycle in [ClientLifecycleMode::Initialize, common::discover()] {
        let label = format!("{lifecycle:?}");
        let transport = StreamableHttpClientTransport::from_uri(url.as_str());
        let client = ().serve_with_lifecycle(transport, lifecycle).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "search_files"), "{label}");
        let args = json!({"root": "docs", "path": "a.txt"});
        let r = client
            .call_tool(
                CallToolRequestParams::new("read_file")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(common::text(&r), "alpha\n", "{label}");
        scan(&serde_json::to_string(&r).unwrap());
        client.cancel().await.unwrap();
    }
}

/// Parallel edits of one file through two HTTP sessions of one server:
/// every call answers success and every change is in the file.
#[test]
fn parallel_edits_through_two_sessions_all_land() {
    let (env, config) = fixture();
    let n = 16;
    let original: String = (0..n).map(|i| format!("line {i:02}: original\n")).collect();
    env.write("ws/e.txt", &original);
    let server = start(&config, &[]);
    let sessions = [open_session(server.addr), open_session(server.addr)];
    for round in 0..3 {
        std::fs::write(env.path("ws/e.txt"), &original).unwrap();
        std::thread::scope(|scope| {
            let calls: Vec<_> = (0..n)
                .map(|i| {
                    let session = &sessions[i % 2];
                    let addr = server.addr;
                    scope.spawn(move || {
                        let args = json!({"name": "edit_file", "arguments": {
                            "root": "ws", "path": "e.txt", "edits": [{
                                "old_text": format!("line {i:02}: original"),
                                "new_text": format!("line {i:02}: changed by call {i}")}]}});
                        let id = u32::try_from(100 * round + i).unwrap();
                        in_session(addr, session, id, "tools/call", args).message()
                    })
                })
                .collect();
            for (i, call) in calls.into_iter().enumerate() {
                let answer = call.join().unwrap();
                assert_eq!(
                    answer["result"]["isError"], false,
                    "round {round}, call {i}: {answer}"
                );
            }
        });
        let expected: String = (0..n)
            .map(|i| format!("line {i:02}: changed by call {i}\n"))
            .collect();
        assert_eq!(
            std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
            expected,
            "round {round}"
        );
    }
}

/// The server's descriptor limit in the flood tests: low, so that a flood
/// larger than it is cheap, and high enough for one call's reserve.
const FLOOD_NOFILE: u64 = 600;
/// Half-open connections kept open at once by the flood: more than the
/// server could hold.
const FLOOD: usize = 700;
/// The header timeout the flood tests give the server.
const HEADER_SECS: u64 = 2;
/// The time a connection gets, beyond the header timeout, for the server to
/// close it: scheduling on a loaded machine, not a performance figure.
const SLACK: Duration = Duration::from_secs(4);
/// The slack for a lone connection (no flood): below the 5 s default
/// header timeout, so the tests tell that the flag is honoured.
const TIGHT_SLACK: Duration = Duration::from_millis(2500);
/// How long a real client's request may take during a flood before the
/// test calls it a hang.
const SERVED_WITHIN: Duration = Duration::from_secs(15);
/// Where floods come from: loopback addresses, the real client's among them.
const SOURCES: [[u8; 4]; 7] = [
    [127, 0, 0, 1],
    [127, 0, 0, 2],
    [127, 0, 0, 3],
    [127, 0, 0, 4],
    [127, 0, 0, 5],
    [127, 0, 0, 6],
    [127, 0, 0, 7],
];

/// The test process holds the flood's client ends: its soft descriptor
/// limit up to the hard one.
fn raise_own_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).unwrap();
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    assert!(
        now > 2 * FLOOD as u64,
        "the test needs {} descriptors",
        2 * FLOOD
    );
}

/// A connection to `to` from loopback address `from`.
fn connect_from(from: [u8; 4], to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::from((from, 0)).into())?;
    socket.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(socket.into())
}

/// Whether the server has closed `stream` (non-blocking): it reads the end
/// of the stream (after any answer), or a reset (the server closed with
/// bytes of ours unread).
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// A config whose server reserves descriptors for one call only, so that a
/// low limit leaves room for connections.
fn flood_fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("docs/a.txt", "alpha\n").mkdir("ws");
    let config = env.config(
        "audit_log = \"audit.log\"\nmax_concurrent_calls = 1\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    (env, config)
}

/// The caps the server announced: (connections, per client address).
fn announced_caps(banner: &str) -> (usize, usize) {
    let line = banner
        .lines()
        .find_map(|l| l.strip_prefix("connections: at most "))
        .unwrap_or_else(|| panic!("no connections line in: {banner}"));
    let (max, rest) = line.split_once(", ").unwrap();
    let per_client = rest.split(' ').next().unwrap();
    (max.parse().unwrap(), per_client.parse().unwrap())
}

/// What a flood saw: how many connections it opened, and those the server
/// did not close in time.
struct Flooded {
    opened: usize,
    /// Most connections open at once.
    peak: usize,
    late: Vec<String>,
}

/// Floods `addr` from [`SOURCES`] in turn until `stop`, up to a thousand
/// connections a second: each started by `begin`, then fed `feed` once a
/// second, and held at least the header timeout (as an attacker would);
/// [`FLOOD`] open at once, the oldest replaced by new ones. Every 50 ms the
/// open ones are looked at: one the server has closed goes once held long
/// enough; one still open the header timeout + [`SLACK`] after its start
/// is late. `started` counts the connections opened so far.
fn flood(
    addr: SocketAddr,
    begin: Vec<u8>,
    feed: Option<u8>,
    stop: Arc<AtomicBool>,
    started: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Flooded> {
    let hold = Duration::from_secs(HEADER_SECS);
    let within = hold + SLACK;
    std::thread::spawn(move || {
        let mut open: Vec<(TcpStream, Instant)> = Vec::new();
        let mut late = Vec::new();
        let mut opened = 0;
        let mut peak = 0;
        let mut looked = Instant::now();
        let mut fed = Instant::now();
        while !(stop.load(Ordering::Relaxed) && open.is_empty()) {
            if looked.elapsed() >= Duration::from_millis(50) {
                open.retain_mut(|(stream, at)| {
                    if at.elapsed() < hold && !stop.load(Ordering::Relaxed) {
                        return true;
                    }
                    if closed_by_server(stream) {
                        return false;
                    }
                    if at.elapsed() < within {
                        return true;
                    }
                    late.push(format!(
                        "a connection still open {:?} after it began",
                        at.elapsed()
                    ));
                    false
                });
                looked = Instant::now();
            }
            if let Some(byte) = feed
                && fed.elapsed() >= Duration::from_secs(1)
            {
                for (stream, _) in &mut open {
                    let _ = stream.write_all(&[byte]);
                }
                fed = Instant::now();
            }
            if stop.load(Ordering::Relaxed) || open.len() >= FLOOD {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            // A flood, not a benchmark of connect().
            std::thread::sleep(Duration::from_millis(1));
            let Ok(mut stream) = connect_from(SOURCES[opened % SOURCES.len()], addr) else {
                continue;
            };
            // The server may have closed it already (another took its place).
            let _ = stream.write_all(&begin);
            stream.set_nonblocking(true).unwrap();
            open.push((stream, Instant::now()));
            peak = peak.max(open.len());
            opened += 1;
            started.store(opened, Ordering::Relaxed);
        }
        Flooded { opened, peak, late }
    })
}

/// Waits until the flood has opened `n` connections.
fn wait_for_flood(started: &AtomicUsize, n: usize) {
    let since = Instant::now();
    while started.load(Ordering::Relaxed) < n {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "the flood did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a real client does during a flood, each step bounded: `/health`,
/// and rmcp's client's `initialize`, `tools/list` and a call.
fn real_client_is_served(addr: SocketAddr) {
    let health = send_within(addr, "GET", "/health", &[], b"", SERVED_WITHIN);
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use rmcp::ClientServiceExt;
        use rmcp::model::CallToolRequestParams;
        use rmcp::service::ClientLifecycleMode;
        use rmcp::transport::StreamableHttpClientTransport;
        let served = tokio::time::timeout(SERVED_WITHIN, async {
            let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
            let client =
                ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                    .await
                    .expect("initialize during the flood");
            let args = json!({"root": "docs", "path": "a.txt"});
            let r = client
                .call_tool(
                    CallToolRequestParams::new("read_file")
                        .with_arguments(args.as_object().unwrap().clone()),
                )
                .await
                .expect("a call during the flood");
            assert_eq!(common::text(&r), "alpha\n");
            client.cancel().await.unwrap();
        })
        .await;
        assert!(served.is_ok(), "the real client hung for {SERVED_WITHIN:?}");
    });
}

/// A real client served again and again, until the flood has opened
/// twice [`FLOOD`] connections: the first ones full the caps, the later
/// ones take each other's place while the client is served.
fn served_while_flooding(addr: SocketAddr, started: &AtomicUsize) {
    let since = Instant::now();
    let mut rounds = 0;
    while rounds < 2 || started.load(Ordering::Relaxed) < 2 * FLOOD {
        real_client_is_served(addr);
        rounds += 1;
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "the flood stalled at {}",
            started.load(Ordering::Relaxed)
        );
    }
    eprintln!("a real client served {rounds} times during the flood");
}

/// Once the flood is under way, a real client is served while it goes on;
/// then it is stopped, and every one of its connections must have peaked
/// above the server's descriptor limit and been closed in time.
fn served_until_the_flood_ends(
    addr: SocketAddr,
    started: &AtomicUsize,
    stop: &AtomicBool,
    flooding: std::thread::JoinHandle<Flooded>,
) {
    wait_for_flood(started, FLOOD);
    served_while_flooding(addr, started);
    stop.store(true, Ordering::Relaxed);
    let flooded = flooding.join().unwrap();
    eprintln!(
        "the flood opened {} connections, {} at most at once",
        flooded.opened, flooded.peak
    );
    assert!(flooded.peak as u64 > FLOOD_NOFILE);
    assert!(
        flooded.late.is_empty(),
        "{} of {} not closed in time: {:?}",
        flooded.late.len(),
        flooded.opened,
        &flooded.late[..flooded.late.len().min(5)]
    );
}

/// The descriptor limit applied and announced: the caps leave the calls'
/// reserve free.
fn assert_caps_below_limit(banner: &str) -> (usize, usize) {
    let (max, per_client) = announced_caps(banner);
    assert!(
        banner.contains(&format!("descriptor limit {FLOOD_NOFILE}: ")),
        "{banner}"
    );
    assert!((max as u64) < FLOOD_NOFILE / 2, "{banner}");
    assert!(per_client < max, "{banner}");
    assert!(!banner.contains("warning"), "{banner}");
    (max, per_client)
}

/// The server of the flood tests: its descriptor limit at [`FLOOD_NOFILE`]
/// (the test's own raised to hold the flood), its header timeout
/// [`HEADER_SECS`], its caps announced below the limit. With its banner.
fn flood_server() -> (Env, Http, String) {
    raise_own_limit();
    let (env, config) = flood_fixture();
    let header = HEADER_SECS.to_string();
    let (server, banner) =
        start_limited(&config, FLOOD_NOFILE, &["--header-timeout-secs", &header]);
    assert_caps_below_limit(&banner);
    (env, server, banner)
}

/// Clients that open connections, send two header lines and then nothing
/// (half-open requests), more at once than the server has descriptors,
/// from seven addresses, the real client's among them: the server holds at
/// most its caps, closes every one of them within the header timeout, and
/// serves `/health` and a real MCP client meanwhile.
#[test]
fn half_open_requests_beyond_the_descriptor_limit_are_closed_and_clients_served() {
    let (_env, server, _) = flood_server();
    let addr = server.addr;
    let begin = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n").into_bytes();

    // Alone, under every cap, a half-open head is closed by the header
    // timeout, and so is a kept-alive connection left idle after an answer.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(&begin).unwrap();
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    let since = Instant::now();
    for stream in [&mut half, &mut idle] {
        stream.set_nonblocking(true).unwrap();
    }
    let mut open = vec![
        ("a half-open head", half),
        ("an idle kept-alive connection", idle),
    ];
    // Closed by the timeout given, not the 5 s default: no earlier than it,
    // and before the default would.
    let header_timeout = Duration::from_secs(HEADER_SECS);
    while !open.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
        open.retain_mut(|(what, stream)| {
            assert!(
                since.elapsed() < header_timeout + TIGHT_SLACK,
                "{what} was not closed by the header timeout"
            );
            if !closed_by_server(stream) {
                return true;
            }
            let at = since.elapsed();
            assert!(
                at >= header_timeout - Duration::from_millis(500),
                "{what} was closed after {at:?}, before the header timeout"
            );
            false
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let flooding = flood(addr, begin, None, Arc::clone(&stop), Arc::clone(&started));
    served_until_the_flood_ends(addr, &started, &stop, flooding);
    // And the server is well, with a fresh connection.
    let health = send_within(addr, "GET", "/health", &[], b"", SERVED_WITHIN);
    assert_eq!(health.status, 200);
}

/// The same with clients that send a whole head, then the body one byte a
/// second: each body is cut (408) or its connection gives way to another,
/// within the header timeout, and real clients are served meanwhile.
#[test]
fn bodies_sent_a_byte_a_second_are_cut_and_clients_served() {
    let (_env, server, banner) = flood_server();
    assert!(
        banner.contains(
            "a body at 1024 bytes/s or more over every 2 s; a whole body within 60 s; an \
             answer's write waits at most 30 s for the client to read"
        ),
        "{banner}"
    );
    let addr = server.addr;
    let begin = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
    )
    .into_bytes();

    // One alone is answered 408, saying why, and closed.
    let mut one = TcpStream::connect(addr).unwrap();
    one.write_all(&begin).unwrap();
    one.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let since = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let closed = loop {
        assert!(
            since.elapsed() < Duration::from_secs(HEADER_SECS) + SLACK,
            "a slow body was not cut: {}",
            String::from_utf8_lossy(&answer)
        );
        let _ = one.write_all(b" ");
        match one.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => std::thread::sleep(Duration::from_millis(800)),
        }
    };
    assert!(closed);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("the request body arrived slower than 1024 bytes per second"),
        "{answer}"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let flooding = flood(
        addr,
        begin,
        Some(b' '),
        Arc::clone(&stop),
        Arc::clone(&started),
    );
    served_until_the_flood_ends(addr, &started, &stop, flooding);
}

/// Reads `stream` until the server closes it, at most `limit`: what it
/// said, and when it closed (`None`: not within `limit`).
fn answer_and_close(
    stream: &mut TcpStream,
    since: Instant,
    limit: Duration,
) -> (String, Option<Duration>) {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while since.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (lossy(&answer), Some(since.elapsed())),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (lossy(&answer), Some(since.elapsed())),
        }
    }
    (lossy(&answer), None)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A body sent all but its last byte at once, then held: the bytes sent
/// buy no time beyond the window (the header timeout), so it is cut with
/// 408 one window later, not after the minutes an average since the body
/// began would allow (while the body sits in the server's memory).
#[test]
fn a_body_sent_at_once_then_held_is_cut_within_a_window() {
    let (_env, config) = flood_fixture();
    let header = HEADER_SECS.to_string();
    let server = start(&config, &["--header-timeout-secs", &header]);
    let addr = server.addr;
    let len = 100_000;
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
    .into_bytes();
    request.extend(std::iter::repeat_n(b' ', len - 1));
    stream.write_all(&request).unwrap();
    let since = Instant::now();
    let (answer, closed) = answer_and_close(&mut stream, since, Duration::from_secs(30));
    let closed = closed.unwrap_or_else(|| panic!("not cut within 30 s: {answer}"));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--min-body-rate"), "{answer}");
    let window = Duration::from_secs(HEADER_SECS);
    assert!(
        closed >= window - Duration::from_millis(500) && closed < window + TIGHT_SLACK,
        "cut after {closed:?}"
    );
}

/// A client that asks for a large result and never reads it (a tiny
/// receive buffer): the server's write stalls, and the connection is
/// closed once it has made no progress for the send timeout, the answer
/// cut short; it would otherwise stay answering, never giving way, for
/// ever. Another client is served meanwhile, under a cap of two.
#[test]
fn an_answer_nobody_reads_is_cut_after_the_send_timeout() {
    let env = Env::new();
    // 12 MiB: more than the loopback socket buffers hold (4 MiB to send).
    let line = "x".repeat(1023) + "\n";
    env.write("docs/big.txt", line.repeat(12 * 1024));
    let config = env.config(
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         max_read_bytes = 16777216\n",
    );
    let send_secs = 2;
    let server = start(
        &config,
        &[
            "--send-timeout-secs",
            &send_secs.to_string(),
            "--max-connections",
            "2",
            "--max-connections-per-client",
            "2",
        ],
    );
    let addr = server.addr;
    let session = open_session(addr);

    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stalled: TcpStream = socket.into();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"root": "docs", "path": "big.txt"}}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{call}",
        call.len()
    );
    stalled.write_all(head.as_bytes()).unwrap();
    let since = Instant::now();

    // Served meanwhile, beside the stalled connection.
    std::thread::sleep(Duration::from_secs(1));
    let health = send_within(addr, "GET", "/health", &[], b"", Duration::from_secs(5));
    assert_eq!(health.status, 200);

    // Reading only once the server has had the send timeout (and time to
    // make the result) to give up: a server that waited gives it all.
    std::thread::sleep(Duration::from_secs(send_secs + 5).saturating_sub(since.elapsed()));
    let (answer, closed) = answer_and_close(&mut stalled, Instant::now(), Duration::from_secs(30));
    assert!(closed.is_some(), "the server kept the stalled connection");
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(300)]
    );
    assert!(
        answer.len() < 12 << 20,
        "the whole answer went out ({} bytes): the write was never cut",
        answer.len()
    );
    // The place is free again.
    let health = send_within(addr, "GET", "/health", &[], b"", Duration::from_secs(5));
    assert_eq!(health.status, 200);
}

/// Event streams (`GET /mcp`, open for as long as the client keeps them)
/// have caps of their own, a quarter of the connection caps: beyond the
/// client's, its oldest stream closes, so streams never hold the
/// connections and a client always gets the stream it just asked for.
#[test]
fn event_streams_beyond_their_cap_close_the_oldest() {
    let (_env, config) = fixture();
    let (server, banner) = start_on(
        &config,
        "127.0.0.1:0",
        &[
            "--max-connections",
            "16",
            "--max-connections-per-client",
            "8",
        ],
    );
    assert!(
        banner.contains("event streams (GET /mcp): at most 4, 2 per client address"),
        "{banner}"
    );
    let addr = server.addr;
    let session = open_session(addr);
    let open_stream = || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let head = format!(
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
             Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !lossy(&got).contains("\r\n\r\n") {
            let n = stream.read(&mut buf).expect("a stream's head");
            assert!(n > 0, "closed before its head: {}", lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        let got = lossy(&got);
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
        assert!(got.to_lowercase().contains("text/event-stream"), "{got}");
        stream.set_nonblocking(true).unwrap();
        stream
    };
    let mut first = open_stream();
    let mut second = open_stream();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!closed_by_server(&mut first));
    let mut third = open_stream();
    let since = Instant::now();
    while !closed_by_server(&mut first) {
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "the oldest stream was not closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!closed_by_server(&mut second));
    assert!(!closed_by_server(&mut third));
    // The session is still served.
    let list = in_session(addr, &session, 2, "tools/list", json!({}));
    assert_eq!(list.status, 200, "{}", list.body);
}

/// `check --transport http` shows the limits, and says when the descriptor
/// limit cannot give the connections what they are allowed.
#[test]
fn check_shows_the_connection_limits() {
    let (_env, config) = flood_fixture();
    let out = command()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .args(["--transport", "http", "--header-timeout-secs", "7"])
        .args(["--max-connections", "100", "--min-body-rate", "0"])
        .args(["--send-timeout-secs", "9", "--body-timeout-secs", "11"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("  connections: at most 100, 25 per client address (descriptor limit "),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  event streams (GET /mcp): at most 25, 6 per client address (beyond them, the \
             client's oldest closes)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  time limits: a request's head within 7 s of the connection or of the previous \
             answer (so idle connections close after 7 s); no least body rate; a whole body \
             within 11 s; an answer's write waits at most 9 s for the client to read"
        ),
        "{stdout}"
    );
    // More connections than the descriptors leave: a warning naming EMFILE.
    let out = command()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .args(["--transport", "http", "--max-connections", "100000000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let warnings = stdout.split_once("warnings:").map_or("", |(_, w)| w);
    assert!(
        warnings.contains("fewer than the 100000000 connections allowed")
            && warnings.contains("(EMFILE)"),
        "{stdout}"
    );
    // Caps that contradict each other are refused.
    let out = command()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .args(["--transport", "http", "--max-connections", "10"])
        .args(["--max-connections-per-client", "11"])
        .output()
        .unwrap();
    assert_fails_with(
        &out,
        "--max-connections-per-client (11) is more than --max-connections (10)",
    );
}
