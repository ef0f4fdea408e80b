//! Change subscriptions and client roots that only narrow, end to end over
//! stdio with the real binary: `resources/subscribe` (2025 era) and
//! `subscriptions/listen` (2026-07-28) tell a change made on disk, paced,
//! never one to a denied path; a subscription is resolved like a read; and
//! with `client_roots = "narrow"` a session is served only what lies under
//! its client's roots, in every call path.
//!
//! Timing: waits are generous and counts bounded, never exact, where the
//! server coalesces events.

// SEP-2577 deprecates roots and rmcp marks the 2025-era subscription
// methods legacy; clients still use both, and these tests check them.
#![allow(deprecated)]

mod common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ListRootsResult, ReadResourceRequestParams,
    ResourceUpdatedNotificationParam, Root as ClientRoot, ServerNotification,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, RequestContext, RunningService, ServiceError,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientServiceExt, ErrorData, RoleClient};
use serde_json::json;
use tokio::sync::mpsc;

#[derive(Debug, PartialEq, Eq)]
enum Heard {
    Updated(String),
    ListChanged,
}

/// A client that collects change notifications and answers `roots/list`
/// with what the test sets (declaring the `roots` capability).
#[derive(Clone)]
struct Listener {
    heard: mpsc::UnboundedSender<Heard>,
    roots: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Listener {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(Heard::Updated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::ListChanged);
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self.roots.lock().unwrap().clone();
        Ok(ListRootsResult::new(
            roots.into_iter().map(ClientRoot::new).collect(),
        ))
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .build();
        ClientConfig::new(capabilities, Implementation::new("subscriptions-test", "0"))
    }
}

type Session = RunningService<RoleClient, Listener>;

struct Started {
    client: Session,
    heard: mpsc::UnboundedReceiver<Heard>,
    roots: Arc<Mutex<Vec<String>>>,
    /// The server's process id (to kill it mid-call).
    pid: u32,
}

async fn start_listening(config: &std::path::Path, client_roots: Vec<String>) -> Started {
    let (tx, heard) = mpsc::unbounded_channel();
    let roots = Arc::new(Mutex::new(client_roots));
    let (transport, _) = TokioChildProcess::builder(server_command(config))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn loom-fs-mcp");
    let pid = transport.id().expect("the server's pid");
    let client = Listener {
        heard: tx,
        roots: Arc::clone(&roots),
    }
    .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
    .await
    .expect("MCP handshake");
    Started {
        client,
        heard,
        roots,
        pid,
    }
}

/// Everything heard within `wait`.
async fn collect(heard: &mut mpsc::UnboundedReceiver<Heard>, wait: Duration) -> Vec<Heard> {
    let until = tokio::time::Instant::now() + wait;
    let mut all = Vec::new();
    while let Ok(Some(h)) = tokio::time::timeout_at(until, heard.recv()).await {
        all.push(h);
    }
    all
}

/// The first notification heard within `wait`, if any.
async fn first(heard: &mut mpsc::UnboundedReceiver<Heard>, wait: Duration) -> Option<Heard> {
    tokio::time::timeout(wait, heard.recv())
        .await
        .ok()
        .flatten()
}

fn updated(uri: &str) -> Heard {
    Heard::Updated(uri.to_string())
}

fn tree(extra: &str) -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/notes.md", "# Notes\n")
        .write("ws/src/lib.rs", "pub fn f() {}\n")
        .write("ws/.env", "SECRET=canary\n")
        .write("ws/.git/config", "canary\n")
        .write("docs/guide.txt", "guide\n")
        .write("outside/secret.txt", "canary outside\n")
        .symlink("../outside/secret.txt", "ws/out.txt");
    let config = env.config(&format!("{extra}\n{WS_AND_DOCS}"));
    (env, config)
}

async fn subscribe(client: &Session, uri: &str) -> Result<(), ErrorData> {
    match client.subscribe(SubscribeRequestParams::new(uri)).await {
        Ok(()) => Ok(()),
        Err(ServiceError::McpError(e)) => Err(e),
        Err(other) => panic!("subscribe {uri}: {other}"),
    }
}

#[tokio::test]
async fn subscribing_is_declared_and_resolved_like_a_read() {
    let (env, config) = tree("");
    let Started { client, .. } = start_listening(&config, vec![]).await;
    let resources = client
        .peer_info()
        .unwrap()
        .capabilities
        .resources
        .clone()
        .unwrap();
    assert_eq!(resources.subscribe, Some(true));
    assert_eq!(resources.list_changed, Some(true));
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    subscribe(&client, "loomfs://ws/src").await.unwrap();
    // Denied, escaping, a symlink out, missing, no such root, not ours:
    // each refused exactly as a read of it is.
    for uri in [
        "loomfs://ws/.env",
        "loomfs://ws/.git/config",
        "loomfs://ws/%2E%2E/outside/secret.txt",
        "loomfs://ws/out.txt",
        "loomfs://ws/missing.txt",
        "loomfs://nope/x",
        "file:///etc/passwd",
    ] {
        let refused = subscribe(&client, uri).await.expect_err(uri);
        let read = match client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
        {
            Err(ServiceError::McpError(e)) => e,
            other => panic!("read {uri}: {other:?}"),
        };
        assert_eq!(refused.code, read.code, "{uri}");
        assert_eq!(refused.message, read.message, "{uri}");
        assert!(refused.message.starts_with("resource not found"), "{uri}");
        scan(&refused.message);
    }
    client.cancel().await.unwrap();
    let lines = audit(&env);
    let subscribed: Vec<_> = lines
        .iter()
        .filter(|l| l["tool"] == "resources/subscribe")
        .collect();
    assert!(
        subscribed
            .iter()
            .any(|l| l["path"] == ".env" && l["rule"] == "deny"),
        "{subscribed:?}"
    );
    assert!(
        subscribed
            .iter()
            .any(|l| l["path"] == "notes.md" && l["decision"] == "allow"),
        "{subscribed:?}"
    );
}

#[tokio::test]
async fn a_subscribed_file_changed_on_disk_is_told_once() {
    let (env, config) = tree("");
    let Started {
        client, mut heard, ..
    } = start_listening(&config, vec![]).await;
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    std::fs::write(env.path("ws/notes.md"), "# Notes\nchanged\n").unwrap();
    let started = std::time::Instant::now();
    let got = first(&mut heard, Duration::from_secs(5)).await;
    let took = started.elapsed();
    assert_eq!(got, Some(updated("loomfs://ws/notes.md")));
    assert!(took < Duration::from_secs(1), "told after {took:?}");
    // One write is one change: nothing more follows it.
    assert_eq!(collect(&mut heard, Duration::from_millis(800)).await, []);

    // A change made through the server's own write (staged, then renamed
    // over the file) is told too.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "notes.md", "content": "via the tool\n"}),
    )
    .await;
    // (A rename over the file is a name change too: a list change may come
    // with it, which only asks the client to list again.)
    let got = collect(&mut heard, Duration::from_secs(2)).await;
    let updates: Vec<&Heard> = got.iter().filter(|h| **h != Heard::ListChanged).collect();
    assert!(
        !updates.is_empty()
            && updates
                .iter()
                .all(|h| **h == updated("loomfs://ws/notes.md")),
        "{got:?}"
    );

    // Unsubscribed: quiet.
    client
        .unsubscribe(UnsubscribeRequestParams::new("loomfs://ws/notes.md"))
        .await
        .unwrap();
    std::fs::write(env.path("ws/notes.md"), "again\n").unwrap();
    let got = collect(&mut heard, Duration::from_secs(1)).await;
    assert!(
        !got.iter().any(|h| matches!(h, Heard::Updated(_))),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_burst_of_writes_is_told_a_bounded_number_of_times() {
    let (env, config) = tree("max_notifications_per_second = 5");
    let Started {
        client, mut heard, ..
    } = start_listening(&config, vec![]).await;
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    subscribe(&client, "loomfs://ws/src").await.unwrap();
    let burst = std::time::Instant::now();
    for i in 0..50 {
        std::fs::write(env.path("ws/notes.md"), format!("write {i}\n")).unwrap();
        std::fs::write(env.path(&format!("ws/src/f{i}.rs")), "x").unwrap();
    }
    let took = burst.elapsed();
    let got = collect(&mut heard, Duration::from_secs(3)).await;
    let notes = got
        .iter()
        .filter(|h| **h == updated("loomfs://ws/notes.md"))
        .count();
    let src = got
        .iter()
        .filter(|h| **h == updated("loomfs://ws/src"))
        .count();
    // At most one a debounce interval per URI while the burst lasted, plus
    // the last; and the session's budget (5 a second) over all of it.
    let per_uri = 2 + (took.as_millis() / 100) as usize;
    assert!(
        (1..=per_uri).contains(&notes),
        "{notes} for notes.md: {got:?}"
    );
    assert!((1..=per_uri).contains(&src), "{src} for src: {got:?}");
    assert!(got.len() <= 5 * 4 + 5, "{} in all: {got:?}", got.len());
}

#[tokio::test]
async fn a_change_to_a_denied_path_is_never_told() {
    let (env, config) = tree("");
    let Started {
        client, mut heard, ..
    } = start_listening(&config, vec![]).await;
    // The root itself and a file: the widest a client can ask for.
    subscribe(&client, "loomfs://ws/").await.unwrap();
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    std::fs::write(env.path("ws/.env"), "SECRET=changed\n").unwrap();
    std::fs::write(env.path("ws/.env.local"), "new secret\n").unwrap();
    std::fs::write(env.path("ws/.git/config"), "changed\n").unwrap();
    std::fs::write(env.path("ws/.git/HEAD"), "new\n").unwrap();
    std::fs::write(env.path("ws/src/id_rsa"), "key\n").unwrap();
    std::fs::remove_file(env.path("ws/.env")).unwrap();
    let got = collect(&mut heard, Duration::from_millis(1500)).await;
    assert_eq!(got, [], "a denied path was told");
    // The same session hears an allowed change: the quiet above is the
    // deny filter's, not a deaf watcher's.
    std::fs::write(env.path("ws/notes.md"), "changed\n").unwrap();
    let got = collect(&mut heard, Duration::from_secs(2)).await;
    assert!(
        got.contains(&updated("loomfs://ws/notes.md")) && got.contains(&updated("loomfs://ws/")),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_new_file_in_a_root_is_told_as_a_list_change() {
    let (env, config) = tree("");
    let Started {
        client, mut heard, ..
    } = start_listening(&config, vec![]).await;
    subscribe(&client, "loomfs://docs/guide.txt").await.unwrap();
    std::fs::write(env.path("docs/new.txt"), "new\n").unwrap();
    let got = collect(&mut heard, Duration::from_secs(2)).await;
    assert!(got.contains(&Heard::ListChanged), "{got:?}");
    assert!(
        !got.iter().any(|h| matches!(h, Heard::Updated(_))),
        "{got:?}"
    );
    std::fs::remove_file(env.path("docs/new.txt")).unwrap();
    let got = collect(&mut heard, Duration::from_secs(2)).await;
    assert_eq!(got, [Heard::ListChanged]);
}

#[tokio::test]
async fn subscriptions_per_session_are_capped() {
    let (_env, config) = tree("max_subscriptions = 2");
    let Started { client, .. } = start_listening(&config, vec![]).await;
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    subscribe(&client, "loomfs://ws/src/lib.rs").await.unwrap();
    // The same one again is no new subscription.
    subscribe(&client, "loomfs://ws/notes.md").await.unwrap();
    let e = subscribe(&client, "loomfs://docs/guide.txt")
        .await
        .expect_err("a third");
    assert!(e.message.contains("max_subscriptions"), "{e:?}");
    client
        .unsubscribe(UnsubscribeRequestParams::new("loomfs://ws/notes.md"))
        .await
        .unwrap();
    subscribe(&client, "loomfs://docs/guide.txt").await.unwrap();
}

#[tokio::test]
async fn listen_of_2026_tells_the_uris_a_read_could_reach() {
    let (env, config) = tree("");
    let client = start_with(&config, &[], discover()).await;
    // The tools loaded (a listen before that accepts every URI it names,
    // and watches those a read could reach).
    tools(&client).await;
    let filter = SubscriptionFilter::builder()
        .resources_list_changed()
        .resource_subscriptions([
            "loomfs://ws/notes.md",
            "loomfs://ws/.env",
            "loomfs://ws/nope",
        ])
        .build();
    let mut subscription = client.peer().listen(filter).await.expect("listen");
    let accepted = subscription.acknowledged().clone();
    assert_eq!(
        accepted.resource_subscriptions,
        Some(vec!["loomfs://ws/notes.md".to_string()])
    );
    assert_eq!(accepted.resources_list_changed, Some(true));
    // Give the listen a moment to watch (it starts after the
    // acknowledgment), then change a denied file and the subscribed one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(env.path("ws/.env"), "SECRET=changed\n").unwrap();
    std::fs::write(env.path("ws/notes.md"), "changed\n").unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("a notification in time")
        .expect("the stream");
    match next {
        Some(ServerNotification::ResourceUpdatedNotification(n)) => {
            assert_eq!(n.params.uri, "loomfs://ws/notes.md")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn narrow_serves_only_what_lies_under_a_client_root() {
    let (env, config) = tree("client_roots = \"narrow\"");
    let src = format!("file://{}", env.path("ws/src").display());
    let Started { client, roots, .. } = start_listening(&config, vec![src]).await;
    let listed = call_ok(&client, "list_roots", json!({})).await;
    let names: Vec<&str> = listed.structured_content.as_ref().unwrap()["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ws"]);
    let ok = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "src/lib.rs"}),
    )
    .await;
    assert!(text(&ok).contains("pub fn f"));
    for (root, path) in [
        ("ws", "notes.md"),
        ("ws", "."),
        ("ws", "src/../notes.md"),
        ("docs", "guide.txt"),
    ] {
        let refused = call(&client, "read_file", json!({"root": root, "path": path})).await;
        assert_eq!(refused.is_error, Some(true), "{root}/{path}");
        assert!(
            text(&refused).contains("'client_roots'"),
            "{}",
            text(&refused)
        );
        scan(&text(&refused));
    }
    // Inside it, the built-in tools work as anywhere: their guests get the
    // root preopened whole and pass its top on the way to the client root
    // (writes kept in the root's trash, which is outside the area).
    for (tool, args) in [
        (
            "write_file",
            json!({"root": "ws", "path": "src/new.rs", "content": "fn g() {}\n"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "src/lib.rs", "content": "pub fn f() { g() }\n"}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "src/new.rs", "edits": [{"old_text": "g()", "new_text": "h()"}]}),
        ),
        ("create_directory", json!({"root": "ws", "path": "src/m/n"})),
        (
            "move_file",
            json!({"root": "ws", "source": "src/new.rs", "destination": "src/m/new.rs"}),
        ),
        (
            "list_directory",
            json!({"root": "ws", "path": "src", "tree": true}),
        ),
        (
            "search_files",
            json!({"root": "ws", "path": "src", "pattern": "*.rs"}),
        ),
        ("delete_file", json!({"root": "ws", "path": "src/m"})),
    ] {
        let r = call(&client, tool, args.clone()).await;
        assert_ne!(r.is_error, Some(true), "{tool} {args}: {}", text(&r));
    }
    assert_eq!(
        std::fs::read_to_string(env.path("ws/src/lib.rs")).unwrap(),
        "pub fn f() { g() }\n"
    );
    assert!(!env.path("ws/src/m").exists());
    // A write outside the area changes nothing on disk.
    let before = (env.snapshot_of("ws"), env.snapshot_of("docs"));
    let refused = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "new.txt", "content": "x"}),
    )
    .await;
    assert!(
        text(&refused).contains("'client_roots'"),
        "{}",
        text(&refused)
    );
    assert_eq!((env.snapshot_of("ws"), env.snapshot_of("docs")), before);
    // Resources: the area only.
    let templates = client.list_all_resource_templates().await.unwrap();
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(uris, ["loomfs://ws/{+path}"]);
    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["loomfs://ws/src/lib.rs"]);
    assert!(subscribe(&client, "loomfs://docs/guide.txt").await.is_err());
    assert!(subscribe(&client, "loomfs://ws/notes.md").await.is_err());
    subscribe(&client, "loomfs://ws/src/lib.rs").await.unwrap();

    // The client's roots change to docs: ws is gone, docs is served; the
    // configured roots bound it still.
    *roots.lock().unwrap() = vec![format!("file://{}", env.path("docs").display())];
    client.notify_roots_list_changed().await.unwrap();
    let mut served = false;
    for _ in 0..50 {
        let r = call(
            &client,
            "read_file",
            json!({"root": "docs", "path": "guide.txt"}),
        )
        .await;
        if r.is_error != Some(true) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "docs not served after the roots changed");
    let refused = call(
        &client,
        "read_file",
        json!({"root": "ws", "path": "src/lib.rs"}),
    )
    .await;
    assert!(
        text(&refused).contains("'client_roots'"),
        "{}",
        text(&refused)
    );
}

#[tokio::test]
async fn narrow_with_a_client_root_outside_every_root_grants_nothing() {
    let (env, config) = tree("client_roots = \"narrow\"");
    // Outside every configured root, and one holding a root's parent's
    // sibling: neither grants anything.
    let outside = format!("file://{}", env.path("outside").display());
    let Started { client, .. } = start_listening(&config, vec![outside]).await;
    let listed = call_ok(&client, "list_roots", json!({})).await;
    assert_eq!(
        listed.structured_content.as_ref().unwrap()["roots"],
        json!([])
    );
    for (root, path) in [("ws", "notes.md"), ("docs", "guide.txt"), ("ws", "out.txt")] {
        let refused = call(&client, "read_file", json!({"root": root, "path": path})).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(!text(&refused).contains("canary"), "{}", text(&refused));
    }
    assert_eq!(client.list_all_resources().await.unwrap(), []);
    assert_eq!(client.list_all_resource_templates().await.unwrap(), []);
}

#[tokio::test]
async fn ignore_is_the_default_and_asks_nothing() {
    let (_env, config) = tree("");
    // The client would narrow to nothing; the server does not ask it.
    let Started { client, .. } = start_listening(&config, vec![]).await;
    let ok = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "guide.txt"}),
    )
    .await;
    assert!(text(&ok).contains("guide"));
}

/// Runs `fixtures/python_sdk_subscriptions.py MODE ARG` against the binary
/// on `config` with the official Python SDK (see tests/python_sdk.rs for
/// where it comes from); `None`, with a line on stderr, without the SDK.
fn python_sdk(mode: &str, arg: &str, config: &std::path::Path) -> Option<serde_json::Value> {
    let mut cmd = python_with_sdk()?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/python_sdk_subscriptions.py");
    for var in FLAG_VARS {
        cmd.env_remove(var);
    }
    let out = cmd
        .arg(script)
        .args([mode, arg, BIN, "--config"])
        .arg(config)
        .env("LOOMFS_CACHE_DIR", cache_dir())
        .env("LOOMFS_LOG", "warn")
        .env("LOOMFS_ALLOW_ROOT", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    scan(&stdout);
    assert!(!stdout.contains("canary"), "{stdout}");
    Some(serde_json::from_str(&stdout).unwrap())
}

/// The official Python SDK subscribes and changes files itself: one write
/// told once within a second, a burst of 50 a bounded number of times,
/// denied files never, a new file as `list_changed`.
#[test]
fn the_python_sdk_hears_changes_and_never_a_denied_one() {
    let (env, config) = tree("");
    let Some(got) = python_sdk("watch", env.dir.to_str().unwrap(), &config) else {
        return;
    };
    let single = got["single"].as_array().unwrap();
    assert_eq!(single.len(), 1, "{got}");
    assert_eq!(single[0]["uri"], "loomfs://ws/notes.md", "{got}");
    assert!(single[0]["after"].as_f64().unwrap() < 1.0, "{got}");
    let burst = got["burst"].as_array().unwrap();
    assert!((1..=10).contains(&burst.len()), "{got}");
    assert_eq!(got["denied"], json!([]), "{got}");
    let new_file = got["new_file"].as_array().unwrap();
    assert!(
        new_file
            .iter()
            .any(|e| e["method"] == "notifications/resources/list_changed"),
        "{got}"
    );
}

/// The official Python SDK answers `roots/list`: a client root under `ws`
/// hides `docs` and the rest of `ws`; one outside every root grants nothing.
#[test]
fn the_python_sdk_narrows_by_its_roots() {
    let (env, config) = tree("client_roots = \"narrow\"");
    let src = format!("file://{}", env.path("ws/src").display());
    let Some(got) = python_sdk("narrow", &src, &config) else {
        return;
    };
    assert_eq!(got["roots"], json!(["ws"]), "{got}");
    let reads = &got["reads"];
    assert_eq!(reads["ws/src/lib.rs"]["is_error"], false, "{got}");
    for refused in ["ws/notes.md", "docs/guide.txt"] {
        assert_eq!(reads[refused]["is_error"], true, "{got}");
        let text = reads[refused]["text"].as_str().unwrap();
        assert!(text.contains("'client_roots'"), "{got}");
    }
    assert_eq!(got["templates"], json!(["loomfs://ws/{+path}"]), "{got}");
    assert_eq!(got["uris"], json!(["loomfs://ws/src/lib.rs"]), "{got}");

    let outside = format!("file://{}", env.path("outside").display());
    let got = python_sdk("narrow", &outside, &config).unwrap();
    assert_eq!(got["roots"], json!([]), "{got}");
    for read in got["reads"].as_object().unwrap().values() {
        assert_eq!(read["is_error"], true, "{got}");
    }
    assert_eq!(got["templates"], json!([]), "{got}");
    assert_eq!(got["uris"], json!([]), "{got}");
}

/// The server's inotify instances (its watcher holds one while some
/// session watches).
fn inotify_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(Result::ok)
                .filter(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|t| t.to_string_lossy().contains("inotify"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn over_http_each_session_hears_only_its_own_and_the_watch_ends_with_them() {
    use rmcp::transport::StreamableHttpClientTransport;
    let (env, config) = tree("");
    let server = http_server(&config);
    let pid = server.child.id();
    let session = || async {
        let (tx, heard) = mpsc::unbounded_channel();
        let client = Listener {
            heard: tx,
            roots: Arc::default(),
        }
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(server.url.as_str()),
            ClientLifecycleMode::Initialize,
        )
        .await
        .expect("MCP handshake");
        (client, heard)
    };
    let (a, mut a_heard) = session().await;
    let (b, mut b_heard) = session().await;
    assert_eq!(inotify_fds(pid), 0, "nothing watched before a subscription");
    subscribe(&a, "loomfs://ws/notes.md").await.unwrap();
    subscribe(&b, "loomfs://ws/src/lib.rs").await.unwrap();
    assert_eq!(inotify_fds(pid), 1, "one watcher for both sessions");
    std::fs::write(env.path("ws/notes.md"), "changed\n").unwrap();
    let got = collect(&mut a_heard, Duration::from_millis(1500)).await;
    assert_eq!(got, [updated("loomfs://ws/notes.md")]);
    assert_eq!(collect(&mut b_heard, Duration::from_millis(300)).await, []);
    std::fs::write(env.path("ws/src/lib.rs"), "changed\n").unwrap();
    let got = collect(&mut b_heard, Duration::from_millis(1500)).await;
    assert_eq!(got, [updated("loomfs://ws/src/lib.rs")]);
    assert_eq!(collect(&mut a_heard, Duration::from_millis(300)).await, []);
    // Both sessions end: their watches, and the watcher, go.
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    let mut left = inotify_fds(pid);
    for _ in 0..50 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = inotify_fds(pid);
    }
    assert_eq!(left, 0, "the watcher outlived its sessions");
}

fn hostile_wasm() -> &'static [u8] {
    static WASM: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    WASM.get_or_init(|| build_wasm("tests/fixtures/hostile-tool", "hostile_tool.wasm"))
}

/// A third-party component under `narrow` gets its root preopened whole,
/// yet the policing filesystem holds it to the client's roots: every path
/// outside them, reached by name, by `..` or through a symlink, answers as
/// a missing one (exactly as a name never there), a listing above the
/// client root shows only the way to it, nothing is written, renamed or
/// linked across its edge, and `roots/list_changed` moves the edge for the
/// next call. On disk nothing outside the client root is read or touched.
#[tokio::test]
async fn narrow_holds_a_component_to_the_client_roots_inside_its_preopen() {
    let env = Env::new();
    env.write("ws/notes.md", "CANARY-NOTES\n")
        .write("ws/other/secret.md", "CANARY-OTHER\n")
        .write("ws/src/lib.rs", "pub fn f() {}\n")
        .write("ws/src/deep/mod.rs", "mod x;\n")
        .write("ws/.env", "CANARY-DOTENV\n")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .write("docs/guide.txt", "guide\n")
        .write("tools/hostile.wasm", hostile_wasm())
        .symlink("../notes.md", "ws/src/up.md")
        .symlink("../other", "ws/src/to_other");
    let config = env.config(
        &("client_roots = \"narrow\"\n".to_string()
            + WS_AND_DOCS
            + &pinned("tools/hostile.wasm", hostile_wasm())),
    );
    let src = format!("file://{}", env.path("ws/src").display());
    let Started { client, roots, .. } = start_listening(&config, vec![src]).await;
    let before_ws = env.snapshot_of("ws");
    // Access times set before the files' change times: a read updates
    // them (`relatime`, the default), so they tell whether one happened.
    let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let outside_area = ["ws/notes.md", "ws/other/secret.md"];
    for p in outside_area {
        std::fs::File::options()
            .write(true)
            .open(env.path(p))
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_accessed(long_ago))
            .unwrap();
    }
    let read_since = || {
        outside_area
            .iter()
            .filter(|p| std::fs::metadata(env.path(p)).unwrap().accessed().unwrap() != long_ago)
            .collect::<Vec<_>>()
    };
    let hostile = |attack: serde_json::Value| {
        let mut args = json!({"root": "ws", "write_path": "src/scratch.txt", "read_path": "src"});
        for (k, v) in attack.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    let mut results = Vec::new();
    let mut run = async |attack: serde_json::Value| {
        let r = call(&client, "hostile", hostile(attack.clone())).await;
        let said = text(&r);
        results.push(r);
        said
    };

    // Inside the client root the component works.
    assert_eq!(
        run(json!({"attack": "raw_read", "path": "src/lib.rs"})).await,
        "ok: pub fn f() {}\n"
    );
    assert_eq!(
        run(json!({"attack": "raw_list", "path": "src"})).await,
        "ok: deep,lib.rs,to_other,up.md"
    );
    // Outside it, every route answers as a name that was never there.
    let missing = run(json!({"attack": "probe", "path": "never-there.md"})).await;
    assert!(
        missing.starts_with("stat: ErrorCode { code: 20, name: \"no-entry\""),
        "{missing}"
    );
    for path in [
        "notes.md",
        "other/secret.md",
        "other",
        "src/../notes.md",
        "src/up.md",
        "src/to_other/secret.md",
        "src/deep/../../notes.md",
        "other/../src/lib.rs",
    ] {
        let probed = run(json!({"attack": "probe", "path": path})).await;
        assert_eq!(probed, missing, "{path}");
        for attack in ["raw_read", "std_read", "raw_stat", "std_stat"] {
            let said = run(json!({"attack": attack, "path": path})).await;
            assert!(said.starts_with("refused"), "{attack} {path}: {said}");
            assert!(
                said.contains("no-entry") || said.contains("NotFound"),
                "{attack} {path}: {said}"
            );
        }
    }
    // From a directory opened inside the area (or above it), `..` leads
    // out no further.
    assert_eq!(
        run(json!({"attack": "raw_read_from", "dir": "src/deep", "path": "mod.rs"})).await,
        "ok: mod x;\n"
    );
    for (dir, path) in [
        ("src", "../notes.md"),
        ("src/deep", "../../other/secret.md"),
        ("src/deep", "../../src/../notes.md"),
        (".", "notes.md"),
    ] {
        let said = run(json!({"attack": "raw_read_from", "dir": dir, "path": path})).await;
        assert!(said.contains("no-entry"), "{dir} {path}: {said}");
    }
    let said = run(json!({"attack": "raw_read_nofollow", "path": "src/up.md"})).await;
    assert!(said.starts_with("refused"), "{said}");
    let said = run(json!({"attack": "raw_readlink", "path": "src/up.md"})).await;
    assert!(said.starts_with("refused"), "{said}");
    // A listing above the client root shows only the way to it; one
    // beside it, or reached through a symlink, nothing.
    assert_eq!(
        run(json!({"attack": "raw_list", "path": "."})).await,
        "ok: src"
    );
    assert_eq!(
        run(json!({"attack": "std_list", "path": "."})).await,
        "ok: src"
    );
    assert_eq!(
        run(json!({"attack": "raw_list", "path": "src/.."})).await,
        "ok: src"
    );
    for path in ["other", "src/to_other"] {
        let said = run(json!({"attack": "raw_list", "path": path})).await;
        assert!(said.starts_with("refused"), "{path}: {said}");
    }
    // Nothing is written, made, renamed or linked across the edge.
    for attack in [
        json!({"attack": "std_write", "path": "notes.md"}),
        json!({"attack": "std_write", "path": "new.md"}),
        json!({"attack": "raw_create", "path": "other/secret.md"}),
        json!({"attack": "raw_create", "path": "src/../planted.md"}),
        json!({"attack": "raw_create", "path": "src/up.md"}),
        json!({"attack": "raw_create", "path": "src/to_other/planted.md"}),
        json!({"attack": "raw_mkdir", "path": "newdir"}),
        json!({"attack": "raw_mkdir", "path": "src/to_other/newdir"}),
        json!({"attack": "raw_rename", "from": "notes.md", "to": "src/stolen.md"}),
        json!({"attack": "raw_rename", "from": "src/lib.rs", "to": "lib.rs"}),
        json!({"attack": "raw_rename", "from": "src/lib.rs", "to": "other/lib.rs"}),
        json!({"attack": "raw_rename", "from": "src", "to": "moved"}),
        json!({"attack": "raw_rename", "from": "other", "to": "src/other"}),
        json!({"attack": "raw_link", "from": "notes.md", "to": "src/hard.md"}),
        json!({"attack": "raw_link", "from": "src/lib.rs", "to": "hard.rs"}),
        json!({"attack": "raw_symlink", "path": "link", "target": "src/lib.rs"}),
    ] {
        let said = run(attack.clone()).await;
        assert!(said.starts_with("refused"), "{attack}: {said}");
    }
    assert_eq!(
        read_since(),
        [] as [&&str; 0],
        "read outside the client root"
    );
    assert_clean(&env, &results);
    assert_eq!(env.snapshot_of("ws"), before_ws);
    let denials: Vec<String> = std::fs::read_to_string(env.path("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["tool"] == "hostile" && l["decision"] == "deny")
        .map(|l| l["rule"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(denials.iter().any(|r| r == "client_roots"), "{denials:?}");

    // The client's roots change to `other`: the next call is held there.
    *roots.lock().unwrap() = vec![format!("file://{}", env.path("ws/other").display())];
    client.notify_roots_list_changed().await.unwrap();
    let args = |attack: serde_json::Value| {
        let mut args =
            json!({"root": "ws", "write_path": "other/scratch.txt", "read_path": "other"});
        for (k, v) in attack.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    let mut moved = false;
    for _ in 0..50 {
        let r = call(
            &client,
            "hostile",
            args(json!({"attack": "raw_read", "path": "other/secret.md"})),
        )
        .await;
        if text(&r) == "ok: CANARY-OTHER\n" {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(moved, "the new client root was not served");
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_read", "path": "src/lib.rs"})),
    )
    .await;
    assert!(text(&r).starts_with("refused"), "{}", text(&r));
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_list", "path": "."})),
    )
    .await;
    assert_eq!(text(&r), "ok: other");
}

/// The history tools under `narrow`: they answer for a whole root (a
/// repository's past is not places on disk), so a session whose client root
/// lies below a root is refused them there, naming the rule, with nothing
/// of the history shown; with the root itself a client root, they answer.
#[tokio::test]
async fn narrow_refuses_history_below_a_root_and_serves_it_for_the_root() {
    let env = Env::new();
    env.write("ws/src/lib.rs", "pub fn f() {}\n")
        .write("ws/notes.md", "canary notes\n")
        .write("docs/guide.txt", "guide\n");
    let ws = env.path("ws");
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    let config = env.config(&format!("client_roots = \"narrow\"\n{WS_AND_DOCS}"));
    let src = format!("file://{}", env.path("ws/src").display());
    let Started { client, roots, .. } = start_listening(&config, vec![src]).await;
    for (tool, args) in [
        ("git", json!({"command": "log", "root": "ws"})),
        (
            "git",
            json!({"command": "show", "root": "ws", "rev": "HEAD", "path": "notes.md"}),
        ),
        (
            "git",
            json!({"command": "diff", "root": "ws", "rev": "HEAD"}),
        ),
        (
            "git",
            json!({"command": "blame", "root": "ws", "path": "src/lib.rs"}),
        ),
        ("git", json!({"command": "status", "root": "ws"})),
    ] {
        let r = call(&client, tool, args).await;
        assert_eq!(r.is_error, Some(true), "{tool}");
        assert!(text(&r).contains("'client_roots'"), "{tool}: {}", text(&r));
        assert!(!text(&r).contains("canary") && !text(&r).contains("first"));
        scan(&text(&r));
    }
    // The client declares the root itself: the history is served.
    *roots.lock().unwrap() = vec![format!("file://{}", ws.display())];
    client
        .notify_roots_list_changed()
        .await
        .expect("roots/list_changed");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = call_ok(&client, "git", json!({"command": "log", "root": "ws"})).await;
    assert!(text(&log).contains("first"), "{}", text(&log));
}

/// Under `narrow`, the policing filesystem's checks of the client roots sit
/// on every mutating path: overwrites of one file sent at once inside the
/// client root each keep the version they replaced (checked on disk), and a
/// kill -9 in the middle of a second burst leaves the file whole, every
/// version whole where it is, and nothing outside the area touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_parallel_overwrites_and_a_kill_lose_nothing() {
    let (env, config) = tree("client_roots = \"narrow\"");
    let outside = snapshot_dir(&env.path("ws"))
        .into_iter()
        .filter(|(p, _)| !p.starts_with("src") && !p.starts_with(".mcp-trash"))
        .collect::<Vec<_>>();
    let version = |k: usize| format!("version {k}\n").repeat(k * 997 % 4000 + 1);
    let src = format!("file://{}", env.path("ws/src").display());
    let Started { client, pid, .. } = start_listening(&config, vec![src.clone()]).await;
    let before = std::fs::read_to_string(env.path("ws/src/lib.rs")).unwrap();
    let sent: Vec<String> = (1..=8).map(version).collect();
    let results = futures::future::join_all(sent.iter().map(|c| {
        call(
            &client,
            "write_file",
            json!({"root": "ws", "path": "src/lib.rs", "content": c}),
        )
    }))
    .await;
    assert_every_version_kept_once(&env, "ws", "src/lib.rs", before, &sent, &results, "narrow");

    // A second burst, and the server killed while it runs.
    let last = std::fs::read_to_string(env.path("ws/src/lib.rs")).unwrap();
    let second: Vec<String> = (9..=24).map(version).collect();
    let client = Arc::new(client);
    let calls: Vec<_> = second
        .iter()
        .map(|c| {
            let client = Arc::clone(&client);
            let args = json!({"root": "ws", "path": "src/lib.rs", "content": c});
            tokio::spawn(async move {
                let _ = client
                    .call_tool(
                        rmcp::model::CallToolRequestParams::new("write_file")
                            .with_arguments(args.as_object().unwrap().clone()),
                    )
                    .await;
            })
        })
        .collect();
    // At a random point of the burst.
    tokio::time::sleep(Duration::from_millis(fastrand::u64(0..40))).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for c in calls {
        let _ = c.await;
    }
    // The file is one whole version; every file in the trash is one whole
    // version; outside the client root nothing changed.
    let mut versions: Vec<String> = second.clone();
    versions.extend(sent.iter().cloned());
    versions.push(last.clone());
    versions.push("pub fn f() {}\n".to_string());
    let now = std::fs::read_to_string(env.path("ws/src/lib.rs")).unwrap();
    assert!(versions.contains(&now), "torn: {} bytes", now.len());
    for (path, content) in snapshot_dir(&env.path("ws/.mcp-trash")) {
        let Some(content) = content else { continue };
        let text = String::from_utf8_lossy(&content).into_owned();
        // An index, or the temporary file one is written to before its
        // rename (`.<stamp>.json.<pid>.tmp`, left half-written by the kill).
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let index_temp = name.is_some_and(|n| n.contains(".json.") && n.ends_with(".tmp"));
        if path.extension().is_some_and(|e| e == "json")
            || index_temp
            || path.starts_with(".locks")
            || path.starts_with(".size")
        {
            continue;
        }
        if path.starts_with(".staging") {
            continue;
        }
        assert!(versions.contains(&text), "{} torn", path.display());
    }
    // Every version the second burst replaced is somewhere: the file, or
    // the trash (none replaced and lost).
    let everywhere: Vec<String> = snapshot_dir(&env.path("ws"))
        .into_iter()
        .filter_map(|(_, c)| c.map(|c| String::from_utf8_lossy(&c).into_owned()))
        .collect();
    assert!(
        everywhere.contains(&last),
        "the version before the kill is lost"
    );
    let after = snapshot_dir(&env.path("ws"))
        .into_iter()
        .filter(|(p, _)| !p.starts_with("src") && !p.starts_with(".mcp-trash"))
        .collect::<Vec<_>>();
    assert_eq!(after, outside);
}
