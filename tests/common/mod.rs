//! Shared harness for the end-to-end tests: temporary roots, a config, the
//! real `loom-fs-mcp` binary spawned over stdio, and an rmcp client.

#![allow(dead_code)] // each test file uses part of the harness

/// LazyFS mounts for the power-loss tests (scripts/test builds LazyFS).
pub mod lazyfs;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use loom_fs_mcp::policy::{DenyList, Perms, Role, Root};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, JsonObject,
    ProgressNotificationParam, ProtocolVersion, Tool,
};
use rmcp::service::{ClientLifecycleMode, NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientServiceExt, RoleClient};
use serde_json::Value;
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_loom-fs-mcp");

/// A config of two roots, `ws` (workspace) and `docs` (reference), with an
/// audit log beside them: what most end-to-end tests serve.
pub const WS_AND_DOCS: &str = r#"
audit_log = "audit.log"
[[roots]]
name = "ws"
path = "ws"
role = "workspace"
[[roots]]
name = "docs"
path = "docs"
role = "reference"
"#;

/// A config of one root, `ws` (workspace), and nothing else.
pub const WS: &str = r#"
[[roots]]
name = "ws"
path = "ws"
role = "workspace"
"#;

/// Compiled components are cached per test run, not in the user's home.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A command for the real binary with the test cache. The tests run as root
/// on the development machines and in CI, where serving needs
/// `--allow-root`: it is given here (a test of the refusal removes it).
pub fn command() -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    for var in FLAG_VARS {
        cmd.env_remove(var);
    }
    cmd.env("LOOMFS_CACHE_DIR", cache_dir())
        .env("LOOMFS_LOG", "warn")
        .env("LOOMFS_ALLOW_ROOT", "1");
    cmd
}

/// The environment counterparts of the command-line flags: a test's server
/// sees only the flags the test gives it.
pub const FLAG_VARS: [&str; 22] = [
    "LOOMFS_CONFIG",
    "LOOMFS_REFERENCE",
    "LOOMFS_SOURCECODE",
    "LOOMFS_WORKSPACE",
    "LOOMFS_READ_ONLY",
    "LOOMFS_ALLOW_ROOT",
    "LOOMFS_ALLOW_FILESYSTEM_ROOT",
    "LOOMFS_TRANSPORT",
    "LOOMFS_LISTEN",
    "LOOMFS_ALLOW_NON_LOOPBACK",
    "LOOMFS_AUTH_TOKEN_FILE",
    "LOOMFS_ALLOWED_HOSTS",
    "LOOMFS_ALLOWED_ORIGINS",
    "LOOMFS_MAX_BODY_BYTES",
    "LOOMFS_MAX_SESSIONS",
    "LOOMFS_SESSION_IDLE_SECS",
    "LOOMFS_HEADER_TIMEOUT_SECS",
    "LOOMFS_MIN_BODY_RATE",
    "LOOMFS_BODY_TIMEOUT_SECS",
    "LOOMFS_SEND_TIMEOUT_SECS",
    "LOOMFS_MAX_CONNECTIONS",
    "LOOMFS_MAX_CONNECTIONS_PER_CLIENT",
];

/// Asserts that the binary failed and said `needle` on stderr.
pub fn assert_fails_with(out: &std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it succeeded: {out:?}");
    assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
}

/// `check --config config`, run to its end.
pub fn check_output(config: &Path) -> std::process::Output {
    command()
        .arg("check")
        .arg("--config")
        .arg(config)
        .output()
        .expect("run check")
}

/// `check --config config`: whether it succeeded, and its stdout.
pub fn check(config: &Path) -> (bool, String) {
    let out = check_output(config);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Waits at most 10 s for `child` to exit (after its stdin closed) and
/// asserts it exited cleanly.
pub fn assert_exits_cleanly(child: &mut std::process::Child) {
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the server did not exit on EOF"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// The lines of the `audit.log` beside the config, parsed.
pub fn audit(env: &Env) -> Vec<Value> {
    fs::read_to_string(env.path("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect()
}

/// The real binary serving `config` over stdio, stdin and stdout piped.
pub fn spawn_stdio(config: &Path, stderr: Stdio) -> std::process::Child {
    command()
        .arg("--config")
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn loom-fs-mcp")
}

/// Reads `child`'s (piped) stderr up to the first line holding `needle` and
/// returns every line read, that one included; the rest is drained in the
/// background so the server never blocks on it. Panics if stderr ends first.
pub fn stderr_until(child: &mut std::process::Child, needle: &str) -> String {
    stderr_until_then(child, needle).0
}

/// Like [`stderr_until`], and the rest of stderr: the handle's thread
/// collects it until the child closes stderr (exits).
pub fn stderr_until_then(
    child: &mut std::process::Child,
    needle: &str,
) -> (String, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, Read};
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let read = stderr.read_line(&mut line).unwrap();
        assert!(
            read > 0,
            "the server ended before saying {needle:?}: {seen}"
        );
        seen += &line;
        if line.contains(needle) {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    (seen, rest)
}

/// A temporary tree: roots, files around them, and the config.
pub struct Env {
    _tmp: TempDir,
    /// Real path of the temporary directory (what must never leak).
    pub dir: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let tmp = TempDir::new().unwrap();
        let dir = fs::canonicalize(tmp.path()).unwrap();
        Env { _tmp: tmp, dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> &Env {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
        self
    }

    pub fn mkdir(&self, rel: &str) -> &Env {
        fs::create_dir_all(self.path(rel)).unwrap();
        self
    }

    pub fn symlink(&self, target: &str, rel: &str) -> &Env {
        std::os::unix::fs::symlink(target, self.path(rel)).unwrap();
        self
    }

    /// A chain of `levels` directories of 200-byte names under the
    /// existing directory `rel`, and at its end the file `name` holding
    /// `content`, made by descriptors (the chain's path is too long to
    /// name past 20 levels: over `PATH_MAX`).
    pub fn deep_chain(&self, rel: &str, levels: usize, name: &str, content: &[u8]) -> &Env {
        use rustix::fs::{Mode, OFlags};
        let step = "d".repeat(200);
        let mut at = rustix::fs::open(self.path(rel), OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..levels {
            rustix::fs::mkdirat(&at, step.as_str(), Mode::from_raw_mode(0o755)).unwrap();
            at = rustix::fs::openat(&at, step.as_str(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        }
        let file = rustix::fs::openat(
            &at,
            name,
            OFlags::CREATE | OFlags::WRONLY,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&file, content).unwrap();
        self
    }

    pub fn fifo(&self, rel: &str) -> &Env {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            self.path(rel),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        self
    }

    /// Writes `config.toml` with `text` and returns its path.
    pub fn config(&self, text: &str) -> PathBuf {
        let p = self.path("config.toml");
        fs::write(&p, text).unwrap();
        p
    }

    /// Every file under the temporary directory with its content, to prove
    /// that nothing changed.
    pub fn snapshot(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        self.snapshot_of("")
    }

    /// Every file under `rel` with its content. The host's own state in a
    /// root is no change a tool made and is left out: the lock file, the
    /// trash's byte count, the staging area with its (empty) server
    /// directories and the empty call directories a server keeps for its
    /// next calls, and a `.mcp-trash` that holds nothing else. Anything in
    /// a call directory (a call's leftovers) is kept in.
    pub fn snapshot_of(&self, rel: &str) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let all = snapshot_dir(&self.path(rel));
        let names = |p: &Path| -> Vec<String> {
            p.iter().map(|c| c.to_string_lossy().into_owned()).collect()
        };
        let host_state = |p: &Path| {
            let n = names(p);
            n.iter().position(|c| c == ".mcp-trash").is_some_and(|t| {
                let below = &n[t + 1..];
                matches!(below.first().map(String::as_str), Some(".locks" | ".size"))
                    && below.len() == 1
                    || matches!(below.first().map(String::as_str), Some(".staging"))
                        && below.len() <= 2
            })
        };
        let kept: Vec<_> = all.into_iter().filter(|(p, _)| !host_state(p)).collect();
        let holds_more = |dir: &Path| kept.iter().any(|(q, _)| q != dir && q.starts_with(dir));
        let call_dir = |p: &Path| {
            let n = names(p);
            n.iter().position(|c| c == ".mcp-trash").is_some_and(|t| {
                // A guest's call directory, kept empty for reuse; never
                // a `<call>-keep` one, which goes with its call.
                n.len() == t + 4 && n[t + 1] == ".staging" && !n[t + 3].ends_with("-keep")
            })
        };
        let kept: Vec<_> = kept
            .iter()
            .filter(|(p, c)| !(call_dir(p) && c.is_none() && !holds_more(p)))
            .cloned()
            .collect();
        let holds_more = |dir: &Path| kept.iter().any(|(q, _)| q != dir && q.starts_with(dir));
        kept.iter()
            .filter(|(p, c)| !(p.ends_with(".mcp-trash") && c.is_none() && !holds_more(p)))
            .cloned()
            .collect()
    }

    /// The entries of `<root>/.mcp-trash`: `(stamp, path inside it, content)`.
    /// The host's index of each stamp (`<stamp>.json`, a file) is no entry.
    pub fn trash(&self, root: &str) -> Vec<(String, PathBuf, Option<Vec<u8>>)> {
        let dir = self.path(&format!("{root}/.mcp-trash"));
        if !dir.exists() {
            return vec![];
        }
        let mut out = Vec::new();
        for stamp in fs::read_dir(&dir).unwrap() {
            let stamp = stamp.unwrap();
            // The staging area is the server's, not trash.
            if !stamp.file_type().unwrap().is_dir() || stamp.file_name() == ".staging" {
                continue;
            }
            let name = stamp.file_name().to_string_lossy().into_owned();
            let mut files = Vec::new();
            snapshot_into(&stamp.path(), &stamp.path(), &mut files);
            for (path, content) in files {
                out.push((name.clone(), path, content));
            }
        }
        out.sort();
        out
    }
}

/// Every entry under `dir` (relative to it) with a file's content.
pub fn snapshot_dir(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    snapshot_into(dir, dir, &mut out);
    out.sort();
    out
}

fn snapshot_into(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, Option<Vec<u8>>)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let ty = entry.file_type().unwrap();
        let rel = path.strip_prefix(base).unwrap().to_path_buf();
        if ty.is_dir() {
            out.push((rel, None));
            snapshot_into(base, &path, out);
        } else if ty.is_file() {
            out.push((rel, Some(fs::read(&path).unwrap())));
        } else {
            out.push((rel, None));
        }
    }
}

/// The root `name` (the directory of that name in `env`) as the runtime
/// sees it: built-in deny list, 1 MiB read cap.
pub fn root(env: &Env, name: &str, role: Role, perms: Perms) -> Arc<Root> {
    Arc::new(Root {
        name: name.into(),
        path: env.path(name),
        role,
        perms,
        deny: DenyList::new([]).unwrap(),
        extra_deny: vec![],
        max_read_bytes: 1 << 20,
        max_document_bytes: 64 << 20,
        min_free_bytes: 0,
        trash_max_bytes: 0,
        repository: None,
    })
}

pub type Client = RunningService<RoleClient, ()>;

/// Spawns the server on `config` and connects with the `initialize` handshake.
pub async fn start(config: &Path) -> Client {
    start_with(config, &[], ClientLifecycleMode::Initialize).await
}

pub async fn start_with(config: &Path, args: &[&str], lifecycle: ClientLifecycleMode) -> Client {
    start_with_pid(config, args, lifecycle).await.0
}

/// Like [`start_with`], and also returns the server's process id (to read
/// its `/proc/<pid>/status`, say).
pub async fn start_with_pid(
    config: &Path,
    args: &[&str],
    lifecycle: ClientLifecycleMode,
) -> (Client, u32) {
    let transport = child(config, args);
    let pid = transport.id().expect("the server's pid");
    let client = ().serve_with_lifecycle(transport, lifecycle).await.expect("MCP handshake");
    if let Some(info) = client.peer_info() {
        scan(&serde_json::to_string(&*info).unwrap());
    }
    (client, pid)
}

/// Spawns the server on `config` with `vars` added to its environment,
/// and connects with the `initialize` handshake.
pub async fn start_with_env(config: &Path, vars: &[(&str, &Path)]) -> Client {
    let transport = child_with(config, &[], vars);
    ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
        .expect("MCP handshake")
}

/// The real binary on `config` as an rmcp child-process transport.
fn child(config: &Path, args: &[&str]) -> TokioChildProcess {
    child_with(config, args, &[])
}

fn child_with(config: &Path, args: &[&str], vars: &[(&str, &Path)]) -> TokioChildProcess {
    let mut cmd = server_command(config);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    cmd.args(args);
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn loom-fs-mcp");
    transport
}

/// The real binary serving `config` over stdio, as a tokio command a test
/// may change further (its limits, say) before [`start_command`].
pub fn server_command(config: &Path) -> tokio::process::Command {
    let mut cmd = bare_server();
    cmd.arg("--config").arg(config);
    cmd
}

/// The real binary with no argument yet, in the tests' environment (see
/// [`with_server_env`]).
pub fn bare_server() -> tokio::process::Command {
    with_server_env(tokio::process::Command::new(BIN))
}

/// `cmd` (the binary, or a program that starts it) with the environment
/// every test's server gets: none of the flags' variables, the test
/// cache, quiet logs, `--allow-root`.
pub fn with_server_env(mut cmd: tokio::process::Command) -> tokio::process::Command {
    for var in FLAG_VARS {
        cmd.env_remove(var);
    }
    cmd.env("LOOMFS_CACHE_DIR", cache_dir())
        .env("LOOMFS_LOG", "warn")
        .env("LOOMFS_ALLOW_ROOT", "1");
    cmd
}

/// Spawns `cmd` (see [`server_command`]) and connects with the
/// `initialize` handshake; its stderr is collected by a task whose handle
/// gives everything the server said there once it closed stderr (exited).
pub async fn start_command(
    cmd: tokio::process::Command,
) -> (Client, u32, tokio::task::JoinHandle<String>) {
    use tokio::io::AsyncReadExt;
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loom-fs-mcp");
    let pid = transport.id().expect("the server's pid");
    let mut stderr = stderr.expect("piped stderr");
    let said = tokio::spawn(async move {
        let mut all = Vec::new();
        let _ = stderr.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all).into_owned()
    });
    match ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await {
        Ok(client) => (client, pid, said),
        Err(e) => {
            let said = tokio::time::timeout(std::time::Duration::from_secs(10), said).await;
            panic!("MCP handshake: {e}; the server said: {said:?}")
        }
    }
}

/// A client that collects the progress notifications the server sends.
pub struct ProgressClient(tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for ProgressClient {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params);
    }
}

pub type ProgressReceiver = tokio::sync::mpsc::UnboundedReceiver<ProgressNotificationParam>;

/// Spawns the server on `config` with a client that collects progress.
pub async fn start_collecting_progress(
    config: &Path,
) -> (RunningService<RoleClient, ProgressClient>, ProgressReceiver) {
    let (tx, progress) = tokio::sync::mpsc::unbounded_channel();
    let client = ProgressClient(tx)
        .serve_with_lifecycle(child(config, &[]), ClientLifecycleMode::Initialize)
        .await
        .expect("MCP handshake");
    (client, progress)
}

/// Sends `tools/call` with a progress token; the handle gives the token and
/// the response.
pub async fn call_with_progress<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    name: &str,
    args: Value,
) -> rmcp::service::RequestHandle<RoleClient> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(name.to_string()).with_arguments(args),
    ));
    client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("send tools/call")
}

pub fn discover() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

pub async fn tools(client: &Client) -> Vec<Tool> {
    let tools = client.list_all_tools().await.expect("tools/list");
    scan(&serde_json::to_string(&tools).unwrap());
    tools
}

pub async fn call<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let r = client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| {
            scan(&e.to_string());
            panic!("tools/call {name}: {e}")
        });
    scan(&serde_json::to_string(&r).unwrap());
    r
}

/// Calls a tool that must succeed, and returns its result.
pub async fn call_ok<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let r = call(client, name, args).await;
    assert!(!is_error(&r), "{name}: {r:?}");
    r
}

/// Calls and returns the raw result, protocol errors included.
pub async fn try_call(
    client: &Client,
    name: &str,
    args: JsonObject,
) -> Result<CallToolResult, String> {
    let r = client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .map_err(|e| e.to_string());
    match &r {
        Ok(r) => scan(&serde_json::to_string(r).unwrap()),
        Err(e) => scan(e),
    }
    r
}

/// All text content of a result, joined by newlines.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

/// Asserts a tool error whose text contains `needle`.
pub fn assert_refused(r: &CallToolResult, needle: &str) {
    assert!(
        is_error(r),
        "expected an error containing {needle:?}, got {r:?}"
    );
    let t = text(r);
    assert!(t.contains(needle), "expected {needle:?} in {t:?}");
}

/// Overwrites of `root/file` sent at once: from disk, not from the replies,
/// what stands at the path and every version the calls say they kept, set
/// against what was there `before` and what was `sent`. Each call must have
/// succeeded and kept exactly the version it replaced: none lost, none kept
/// twice.
pub fn assert_every_version_kept_once(
    env: &Env,
    root: &str,
    file: &str,
    before: String,
    sent: &[String],
    results: &[CallToolResult],
    what: &str,
) {
    let mut seen = vec![fs::read_to_string(env.path(&format!("{root}/{file}"))).unwrap()];
    for r in results {
        assert!(!is_error(r), "{what}: {}", text(r));
        let previous = structured(r)["previous"].as_str().expect("a kept version");
        seen.push(fs::read_to_string(env.path(&format!("{root}/{previous}"))).unwrap());
    }
    let mut expected = sent.to_vec();
    expected.push(before);
    expected.sort();
    seen.sort();
    assert!(seen == expected, "{what}: a version lost or kept twice");
}

pub fn structured(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structured content")
}

/// Every page of a listing or a search, following `next_cursor` from the
/// first (each page checked: no error, truncated exactly when it gives a
/// cursor), and the number of pages.
pub async fn all_pages(client: &Client, tool: &str, args: Value) -> (Vec<CallToolResult>, usize) {
    let mut pages = Vec::new();
    let mut args = args;
    loop {
        let r = call_ok(client, tool, args.clone()).await;
        let next = structured(&r).get("next_cursor").cloned();
        assert_eq!(
            structured(&r).get("truncated").is_some(),
            next.is_some(),
            "a page is truncated exactly when it gives a cursor"
        );
        pages.push(r);
        match next {
            Some(next) => args["cursor"] = next,
            None => break,
        }
        assert!(pages.len() < 100, "no end of pages");
    }
    let n = pages.len();
    (pages, n)
}

/// One entry of a `list_directory` result, read back from its structured
/// form: the path relative to the directory listed (a directory's without
/// its trailing `/`), the type, whether it is marked ignored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    pub path: String,
    pub kind: String,
    pub ignored: bool,
}

/// The entries of a `list_directory` result, in its order (see [`Listed`]):
/// a type from `types`, or `directory` for a path ending in `/`, or `file`.
pub fn listing(r: &CallToolResult) -> Vec<Listed> {
    let s = structured(r);
    let ignored: Vec<&str> = s["ignored"]
        .as_array()
        .map(|a| a.iter().map(|p| p.as_str().unwrap()).collect())
        .unwrap_or_default();
    s["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let path = e.as_str().or_else(|| e[0].as_str()).expect("a path");
            let kind = match (s["types"][path].as_str(), path.strip_suffix('/')) {
                (Some(kind), _) => kind,
                (None, Some(_)) => "directory",
                (None, None) => "file",
            };
            Listed {
                path: path.strip_suffix('/').unwrap_or(path).to_string(),
                kind: kind.to_string(),
                ignored: ignored.contains(&path),
            }
        })
        .collect()
}

/// The paths of a `list_directory` result, relative to the directory
/// listed, a directory's without its `/`.
pub fn listed_paths(r: &CallToolResult) -> Vec<String> {
    listing(r).into_iter().map(|e| e.path).collect()
}

/// The entry lines of a `list_directory` text (after its first line, and
/// before the totals of a listing with details), each as its path column: past the type column and the details when the first
/// line says there are some (a shown path is the rest of the line).
pub fn listing_lines(r: &CallToolResult) -> Vec<String> {
    let text = r.content[0].as_text().expect("text").text.clone();
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    let mut columns = 0;
    if head.contains("each line: type (") {
        columns += 1;
    }
    let details = head.contains("modified (UTC), path");
    if details {
        columns += 2;
    }
    let mut lines: Vec<&str> = lines.collect();
    // With details, the last line gives the totals.
    if details && lines.last().is_some_and(|l| l.starts_with("total: ")) {
        lines.pop();
    }
    lines
        .into_iter()
        .map(|l| l.splitn(columns + 1, ' ').last().unwrap().to_string())
        .collect()
}

/// The host paths no response may contain: where every test tree lives
/// (`<canonical temp dir>/.tmp…`, and `/tmp/.tmp` however the temp dir is
/// spelt) and the repository itself.
fn host_paths() -> &'static [String] {
    static PATHS: OnceLock<Vec<String>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let tmp = std::env::temp_dir();
        let tmp = fs::canonicalize(&tmp).unwrap_or(tmp);
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the repository holds host/");
        let repo = fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
        let mut paths = vec![
            format!("{}/.tmp", tmp.to_string_lossy().trim_end_matches('/')),
            "/tmp/.tmp".to_string(),
            repo.to_string_lossy().into_owned(),
        ];
        paths.dedup();
        paths
    })
}

/// The no-oracle scan: panics if server output (`json`: a serialized
/// response, an error text) names a host path.
pub fn scan(json: &str) {
    for host in host_paths() {
        if let Some(at) = json.find(host.as_str()) {
            let start = json[..at]
                .char_indices()
                .rev()
                .nth(200)
                .map_or(0, |(i, _)| i);
            let end = json[at..]
                .char_indices()
                .nth(400)
                .map_or(json.len(), |(i, _)| at + i);
            panic!(
                "host path {host:?} leaked in server output ({} bytes): …{}…",
                json.len(),
                &json[start..end]
            );
        }
    }
}

/// Asserts that no response mentions the host location of the test tree.
pub fn assert_no_host_path(env: &Env, results: &[&CallToolResult]) {
    let host = env.dir.to_string_lossy().to_string();
    for r in results {
        let json = serde_json::to_string(r).unwrap();
        scan(&json);
        assert!(!json.contains(&host), "host path leaked: {json}");
        assert!(!json.contains("/tmp/"), "host path leaked: {json}");
    }
}

/// Asserts that no response holds a canary's content (`CANARY…`, planted
/// in denied or outside files) or a host path.
pub fn assert_clean(env: &Env, results: &[CallToolResult]) {
    for r in results {
        let json = serde_json::to_string(r).unwrap();
        assert!(!json.contains("CANARY"), "a canary was read: {json}");
    }
    assert_no_host_path(env, &results.iter().collect::<Vec<_>>());
}

/// Builds the wasm32-wasip2 crate at `crate_dir` (relative to the
/// repository) on its own, as its author would (`cargo build --release
/// --target wasm32-wasip2`), in a target directory of the test run, and
/// returns the bytes of `artifact`. Cargo's variables that would leak into
/// the nested build are removed.
pub fn build_wasm(crate_dir: &str, artifact: &str) -> Vec<u8> {
    build_wasm_with(crate_dir, artifact, &[])
}

/// [`build_wasm`] with cargo `features` (built in a target directory of
/// their own).
pub fn build_wasm_with(crate_dir: &str, artifact: &str, features: &[&str]) -> Vec<u8> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("wasm-target{}", features.join("-")));
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "--features",
            &features.join(","),
        ])
        .current_dir(repo.join(crate_dir))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .expect("run cargo");
    assert!(status.success(), "building {crate_dir} failed");
    fs::read(target.join("wasm32-wasip2/release").join(artifact)).unwrap()
}

/// The hostile test component built with its `deletes` feature (raw
/// `wasi:filesystem` writes, renames and removals), once per test binary.
pub fn deleting_hostile_wasm() -> &'static [u8] {
    static WASM: OnceLock<Vec<u8>> = OnceLock::new();
    WASM.get_or_init(|| {
        build_wasm_with(
            "tests/fixtures/hostile-tool",
            "hostile_tool.wasm",
            &["deletes"],
        )
    })
}

/// Waits for the publish test hook (`LOOMFS_TEST_HOOK_DIR`) to hold a
/// publish; `false` if none came within 10 s (the step is past the plan's
/// last).
pub async fn publish_held(hook: &Path) -> bool {
    for _ in 0..2000 {
        if hook.join("paused").exists() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    false
}

/// The content of `ws/<p>` under the test's directory, if it is a file.
pub fn read_ws(env: &Env, p: &str) -> Option<String> {
    fs::read_to_string(env.path(&format!("ws/{p}"))).ok()
}

/// The id of the last audited call of `tool`.
pub fn last_call(env: &Env, tool: &str) -> String {
    audit(env)
        .iter()
        .rev()
        .find(|l| l["tool"] == tool && l["call"].is_string())
        .and_then(|l| l["call"].as_str().map(str::to_string))
        .expect("an audited call")
}

/// The SHA-256 of `bytes`, lowercase hex: what a `[[components]]` entry
/// pins (computed here from the built file, never written down).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `[[components]]` entry for the file `rel` (relative to the config),
/// pinned to the digest of `bytes` (what is written there).
pub fn pinned(rel: &str, bytes: &[u8]) -> String {
    format!(
        "[[components]]\npath = \"{rel}\"\nsha256 = \"{}\"\n",
        sha256_hex(bytes)
    )
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// A tmpfs mounted on a directory for the test's life.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) on `dir`,
    /// or says on stderr why it cannot and gives `None`.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(out) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs here ({}); the disk tests need root",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}); the disk tests need it");
                None
            }
        }
    }

    pub fn remount(&self, opts: &str) {
        let st = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "remount {opts}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The server over Streamable HTTP on a free loopback port; killed on drop.
pub struct HttpServer {
    pub child: std::process::Child,
    pub url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http_server(config: &std::path::Path) -> HttpServer {
    let mut child = command()
        .arg("--config")
        .arg(config)
        .args(["--transport", "http", "--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, _) = http_banner(&mut child);
    let url = format!("http://{addr}/mcp");
    HttpServer { child, url }
}

/// Waits for an HTTP server's start-up lines on stderr: the address it
/// serves on, and the lines.
pub fn http_banner(child: &mut std::process::Child) -> (std::net::SocketAddr, String) {
    let banner = stderr_until(child, "serving MCP over HTTP on http://");
    let addr = banner
        .lines()
        .find_map(|l| l.strip_prefix("serving MCP over HTTP on http://"))
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    (addr, banner)
}

/// `python3` with the official MCP Python SDK importable (`scripts/test`
/// installs it and names it in `LOOMFS_PYTHON_SDK`), for a test to add its
/// script to; `None`, with a SKIPPED line on stderr, without the SDK.
pub fn python_with_sdk() -> Option<std::process::Command> {
    let sdk = std::env::var_os("LOOMFS_PYTHON_SDK");
    let python = || {
        let mut cmd = std::process::Command::new("python3");
        if let Some(sdk) = &sdk {
            cmd.env("PYTHONPATH", sdk);
        }
        cmd
    };
    let importable = python()
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        eprintln!("SKIPPED: the MCP Python SDK is not installed (scripts/test installs it)");
        return None;
    }
    Some(python())
}

/// Runs the `git` CLI in `dir` with a clean environment (no system or
/// global config: `GIT_CONFIG_NOSYSTEM`, `HOME` the directory's parent, a
/// fixed author) and returns its stdout; panics if it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("git's output is UTF-8")
}

/// [`git`]'s command, not yet run.
pub fn git_command(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.parent().unwrap_or(dir))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.org")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.org")
        .stdin(Stdio::null());
    cmd
}
