//! The sandbox holds against a hostile component: a fixture tool that ignores
//! what it is asked and attacks through raw WASI calls, invoked directly
//! through the WIT `call` (no `resolve()` in front of it). Only the host's
//! capability layer (preopens) and policing filesystem stand in the way.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{Env, root};
use loom_fs_mcp::config::{AuditTarget, Config};
use loom_fs_mcp::policy::{Permission, Role, Root};
use loom_fs_mcp::runtime::fs::Refusal;
use loom_fs_mcp::runtime::{
    Budget, Cache, CallError, CallMount, CallOutcome, CallRequest, GuestLimits, Runtime,
};
use loom_fs_mcp::store::audit::Audit;
use loom_fs_mcp::store::publish::publish;
use loom_fs_mcp::store::staging::Staging;
use loom_fs_mcp::tools::{Control, Toolbox};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Builds the fixture crate for wasm32-wasip2, once per test run.
fn hostile_wasm() -> &'static [u8] {
    static WASM: OnceLock<Vec<u8>> = OnceLock::new();
    WASM.get_or_init(|| common::build_wasm("tests/fixtures/hostile-tool", "hostile_tool.wasm"))
}

fn runtime_with(budget: Budget) -> Runtime {
    let mut rt = Runtime::new(budget).unwrap();
    let cache = Cache::at(common::cache_dir());
    let component = cache
        .component(rt.engine(), "hostile", hostile_wasm())
        .unwrap();
    rt.load(&component, "fixture".into()).unwrap();
    rt
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        runtime_with(Budget {
            memory_bytes: 64 << 20,
            timeout: Duration::from_secs(10),
            output_bytes: 16 << 20,
        })
    })
}

fn request(
    root: &Arc<Root>,
    writable: bool,
    args: &serde_json::Value,
    cancel: CancellationToken,
) -> CallRequest {
    // A writable mount as the most a call could ask: the root's role still
    // caps it.
    let op = if writable {
        Permission::Delete
    } else {
        Permission::Read
    };
    CallRequest {
        tool: "hostile".into(),
        mounts: vec![CallMount::unchecked(Arc::clone(root), op)],
        limits: GuestLimits {
            max_entries: 100,
            max_results: 100,
            max_search_bytes: 1 << 20,
        },
        arguments: args.to_string(),
        staging: writable.then(|| Arc::clone(staging())),
        cancel,
        activity: Arc::default(),
        quota: None,
    }
}

/// The staging area the tests' calls stage their changes in.
fn staging() -> &'static Arc<Staging> {
    static STAGING: OnceLock<Arc<Staging>> = OnceLock::new();
    STAGING.get_or_init(|| Arc::new(Staging::new()))
}

/// Runs one attack on `root`, preopened read-write or not, and publishes
/// what it changed (as the toolbox does for a call that succeeded).
/// Returns the component's report and the refusals the host recorded.
fn attack(root: &Arc<Root>, writable: bool, args: serde_json::Value) -> (String, Vec<Refusal>) {
    let outcome = runtime().call(0, request(root, writable, &args, CancellationToken::new()));
    let output = outcome
        .result
        .unwrap_or_else(|e| panic!("call failed: {e:?}"));
    let report = output.text.join("\n");
    match publish(&outcome.changes.changes, &stamp()) {
        Ok(_) => (report, outcome.refusals),
        Err(e) => (format!("refused: publish: {e}"), outcome.refusals),
    }
}

/// A fresh trash stamp.
fn stamp() -> String {
    loom_fs_mcp::store::trash_stamp()
}

fn fixture() -> Env {
    let env = Env::new();
    env.write("ref/README.md", "readme\n")
        .write("ref/.env", "CANARY-DOTENV\n")
        .write("ref/sub/.env", "CANARY-SUB\n")
        .write("ref/sub/x.txt", "x\n")
        .write("ref/id_rsa", "CANARY-KEY\n")
        .write("ref/.git/config", "CANARY-GIT\n")
        .write("ref/.DS_Store", "CANARY-DSSTORE\n")
        .write("ref/._README.md", "CANARY-APPLEDOUBLE\n")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .write("ws/keep.txt", "keep\n")
        .symlink(".env", "ref/alias")
        .symlink("sub", "ref/subalias")
        .symlink("../outside", "ref/linkdir")
        .symlink("../outside", "ws/linkdir")
        .symlink(".env", "ws/notes_alias")
        .symlink("new_target.txt", "ws/dangling_in")
        .symlink("sub/.env/..", "ref/sneaky");
    env
}

fn reference(env: &Env) -> Arc<Root> {
    root(env, "ref", Role::Reference, Role::Reference.ceiling())
}

#[test]
fn denied_names_cannot_be_opened_by_any_route() {
    let env = fixture();
    let before = env.snapshot();
    let r = reference(&env);
    for (kind, path) in [
        ("std_read", ".env"),
        ("std_read", "sub/.env"),
        ("std_read", "sub/../.env"),
        ("std_read", "alias"),
        ("std_read", "subalias/.env"),
        ("std_read", ".ENV"),
        ("std_read", ".git/config"),
        ("std_read", "id_rsa"),
        ("std_read", ".DS_Store"),
        ("std_read", ".ds_store"),
        ("raw_read", "._README.md"),
        ("std_stat", ".env"),
        ("std_stat", "alias"),
        ("raw_read", ".env"),
        ("raw_read", "sub/.env"),
        ("raw_read", "sub/../.env"),
        ("raw_read", "./sub/./../.env"),
        ("raw_read", "alias"),
        ("raw_read_nofollow", "alias"),
        ("raw_read", "subalias/.env"),
        ("raw_stat", ".env"),
        ("raw_stat", "alias"),
        ("raw_list", ".git"),
        ("raw_readlink", "alias"),
        ("raw_readlink", "sneaky"),
    ] {
        let (report, refusals) = attack(&r, false, json!({"attack": kind, "path": path}));
        assert!(report.starts_with("refused"), "{kind} {path}: {report}");
        assert!(!report.contains("CANARY"), "{kind} {path}: {report}");
        // Every refusal by policy is recorded for the audit log.
        if kind != "raw_read_nofollow" {
            assert!(
                refusals
                    .iter()
                    .any(|f| f.rule.as_str() == "deny" && f.root == "ref"),
                "{kind} {path}: {refusals:?}"
            );
        }
    }
    // An ordinary file still reads: the refusals are the policy, not breakage.
    let (ok, _) = attack(
        &r,
        false,
        json!({"attack": "raw_read", "path": "sub/x.txt"}),
    );
    assert_eq!(ok, "ok: x\n");
    assert_eq!(env.snapshot(), before);
}

#[test]
fn listings_never_show_denied_names() {
    let env = fixture();
    let r = reference(&env);
    for kind in ["std_list", "raw_list"] {
        let (report, _) = attack(&r, false, json!({"attack": kind, "path": "."}));
        assert_eq!(
            report, "ok: README.md,alias,linkdir,sneaky,sub,subalias",
            "{kind}"
        );
        let (sub, _) = attack(&r, false, json!({"attack": kind, "path": "sub"}));
        assert_eq!(sub, "ok: x.txt", "{kind}");
        // Through an alias of the directory too.
        let (alias, _) = attack(&r, false, json!({"attack": kind, "path": "subalias"}));
        assert_eq!(alias, "ok: x.txt", "{kind}");
    }
}

#[test]
fn escapes_are_refused() {
    let env = fixture();
    let r = reference(&env);
    for (kind, path) in [
        ("raw_read", "../outside/secret.txt"),
        ("raw_read", "linkdir/secret.txt"),
        ("raw_read", "sub/../../outside/secret.txt"),
        ("std_read", "../outside/secret.txt"),
        ("std_read", "linkdir/secret.txt"),
        ("raw_stat", "linkdir/secret.txt"),
        ("raw_list", "linkdir"),
    ] {
        let (report, _) = attack(&r, false, json!({"attack": kind, "path": path}));
        assert!(report.starts_with("refused"), "{kind} {path}: {report}");
        assert!(!report.contains("CANARY"), "{kind} {path}: {report}");
    }
}

/// The guest, not the host, does the I/O: a root its role lets write is
/// still unwritable when the call's preopen is read-only, and writable
/// when it is read-write.
#[test]
fn a_read_only_preopen_cannot_be_written_even_on_a_workspace_root() {
    let env = fixture();
    let ws = root(&env, "ws", Role::Workspace, Role::Workspace.ceiling());
    let before = env.snapshot();
    for args in [
        json!({"attack": "std_write", "path": "new.txt"}),
        json!({"attack": "std_write", "path": "keep.txt"}),
        json!({"attack": "raw_create", "path": "new.txt"}),
        json!({"attack": "raw_mkdir", "path": "newdir"}),
        json!({"attack": "raw_unlink", "path": "keep.txt"}),
        json!({"attack": "raw_rename", "from": "keep.txt", "to": "moved.txt"}),
        json!({"attack": "raw_symlink", "target": "keep.txt", "path": "link"}),
    ] {
        let (report, _) = attack(&ws, false, args.clone());
        assert!(report.starts_with("refused"), "{args}: {report}");
    }
    assert_eq!(
        env.snapshot(),
        before,
        "a read-only preopen changed nothing"
    );

    let (report, _) = attack(&ws, true, json!({"attack": "std_write", "path": "new.txt"}));
    assert_eq!(report, "ok: written");
    assert_eq!(std::fs::read(env.path("ws/new.txt")).unwrap(), b"PWNED");
}

/// With a read-write preopen, the policing filesystem still applies the role
/// and the deny list to every mutation.
#[test]
fn policy_holds_on_a_writable_preopen() {
    let env = fixture();
    let before = env.snapshot();
    // A reference root preopened read-write by mistake: policy still says read.
    let r = reference(&env);
    let (report, refusals) = attack(&r, true, json!({"attack": "std_write", "path": "new.txt"}));
    assert!(report.starts_with("refused"), "{report}");
    assert!(
        refusals.iter().any(|f| f.rule.as_str() == "permission"),
        "{refusals:?}"
    );

    // A sourcecode root (read, write): no delete, no denied names, no link out.
    let src = root(&env, "ws", Role::Sourcecode, Role::Sourcecode.ceiling());
    for (args, rule) in [
        (
            json!({"attack": "raw_unlink", "path": "keep.txt"}),
            "permission",
        ),
        (json!({"attack": "raw_create", "path": ".env"}), "deny"),
        (
            json!({"attack": "raw_create", "path": "sub/id_rsa"}),
            "deny",
        ),
        (json!({"attack": "raw_mkdir", "path": ".git"}), "deny"),
        (
            json!({"attack": "raw_rename", "from": "keep.txt", "to": ".mcp-trash"}),
            "deny",
        ),
        (
            json!({"attack": "raw_symlink", "target": "../outside/secret.txt", "path": "out"}),
            "confinement",
        ),
        (
            json!({"attack": "raw_symlink", "target": "/etc/passwd", "path": "abs"}),
            "confinement",
        ),
        (
            json!({"attack": "raw_symlink", "target": ".env", "path": "alias2"}),
            "deny",
        ),
        (
            json!({"attack": "raw_create", "path": "linkdir/payload.sh"}),
            "confinement",
        ),
        (
            json!({"attack": "std_write", "path": "../outside/secret.txt"}),
            "confinement",
        ),
        // Hard links join paths inside the root only.
        (
            json!({"attack": "raw_link", "from": "../outside/secret.txt", "to": "in.txt"}),
            "confinement",
        ),
        (
            json!({"attack": "raw_link", "from": "linkdir/secret.txt", "to": "in.txt"}),
            "confinement",
        ),
        (
            json!({"attack": "raw_link", "from": "keep.txt", "to": "id_rsa"}),
            "deny",
        ),
        // Creating through a dangling symlink: to a denied name, refused as
        // that name; to any other, refused as a name the call never gave.
        (
            json!({"attack": "raw_create", "path": "notes_alias"}),
            "deny",
        ),
        (
            json!({"attack": "raw_create", "path": "dangling_in"}),
            "confinement",
        ),
    ] {
        let (report, refusals) = attack(&src, true, args.clone());
        assert!(report.starts_with("refused"), "{args}: {report}");
        assert!(
            refusals.iter().any(|f| f.rule.as_str() == rule),
            "{args}: expected {rule} in {refusals:?}"
        );
    }
    assert_eq!(env.snapshot(), before, "nothing changed, inside or outside");
    assert!(!env.path("ws/.env").exists());
}

/// wasmtime-wasi's two filesystem-permission advisories, against the
/// host's own filesystem (which does these operations itself, so
/// wasmtime's fixes do not cover it): RUSTSEC-2026-0149, an open of an
/// existing file with `truncate` emptying it through a read-only preopen,
/// and RUSTSEC-2026-0188, a hard link or rename checked only against its
/// source's preopen. Each is refused and nothing changes, on either root.
#[test]
fn wasi_permission_advisories_hold_in_the_policing_filesystem() {
    let env = fixture();
    let before = env.snapshot();
    let ws = root(&env, "ws", Role::Workspace, Role::Workspace.ceiling());
    // An open with `truncate` for reading only, on a reference root and on
    // a workspace root preopened read-only.
    for (root, path) in [
        (reference(&env), "README.md"),
        (Arc::clone(&ws), "keep.txt"),
    ] {
        let (report, _) = attack(
            &root,
            false,
            json!({"attack": "raw_truncate", "path": path}),
        );
        assert!(report.starts_with("refused"), "{path}: {report}");
    }
    // Links and renames between a writable root and a read-only one, in
    // both directions: into the read-only root (a new name there) and out
    // of it (a writable name for its file, or its file taken away).
    let both = |first: &Arc<Root>, writable_first: bool, second: &Arc<Root>| {
        let mount = |root: &Arc<Root>, writable: bool| {
            CallMount::unchecked(
                Arc::clone(root),
                if writable {
                    Permission::Delete
                } else {
                    Permission::Read
                },
            )
        };
        (mount(first, writable_first), mount(second, !writable_first))
    };
    let r = reference(&env);
    for (from_ws, attack_name, from, to) in [
        (true, "raw_link_to", "keep.txt", "linked.txt"),
        (true, "raw_rename_to", "keep.txt", "moved.txt"),
        (false, "raw_link_to", "README.md", "linked.md"),
        (false, "raw_rename_to", "README.md", "stolen.md"),
    ] {
        let (first, second) = if from_ws {
            both(&ws, true, &r)
        } else {
            both(&r, false, &ws)
        };
        let to_mount = second.root().name.clone();
        let args = json!({"attack": attack_name, "from": from, "to": to, "to_mount": to_mount});
        let mut req = request(&ws, true, &args, CancellationToken::new());
        req.mounts = vec![first, second];
        let outcome = runtime().call(0, req);
        let report = outcome
            .result
            .unwrap_or_else(|e| panic!("call failed: {e:?}"))
            .text
            .join("\n");
        assert!(report.starts_with("refused"), "{args}: {report}");
    }
    assert_eq!(env.snapshot(), before, "nothing changed on either root");
}

#[test]
fn a_call_cannot_exhaust_the_servers_descriptors() {
    let env = fixture();
    let r = reference(&env);
    let (report, refusals) = attack(&r, false, json!({"attack": "open_many"}));
    assert!(report.starts_with("refused: after 25"), "{report}");
    assert!(
        refusals
            .iter()
            .any(|f| f.rule.as_str() == "too_many_descriptors")
    );
    // The next call starts afresh.
    let (ok, _) = attack(
        &r,
        false,
        json!({"attack": "raw_read", "path": "README.md"}),
    );
    assert_eq!(ok, "ok: readme\n");
}

/// A guest that loops, hoards memory or sleeps is stopped by the call's
/// limits with an error saying which; a cancelled call stops within ticks;
/// the runtime serves the next call normally.
#[test]
fn runaway_guests_are_stopped_by_the_limits() {
    let env = fixture();
    let r = reference(&env);
    let rt = runtime_with(Budget {
        memory_bytes: 32 << 20,
        timeout: Duration::from_millis(300),
        output_bytes: 16 << 20,
    });
    let run = |attack: &str, cancel: CancellationToken| -> (CallOutcome, Duration) {
        let started = std::time::Instant::now();
        let outcome = rt.call(0, request(&r, false, &json!({"attack": attack}), cancel));
        (outcome, started.elapsed())
    };
    for attack in ["spin", "sleep"] {
        let (outcome, took) = run(attack, CancellationToken::new());
        assert!(
            matches!(outcome.result, Err(CallError::Timeout(t)) if t == Duration::from_millis(300)),
            "{attack}: {:?}",
            outcome.result.err()
        );
        assert!(took < Duration::from_secs(5), "{attack} took {took:?}");
    }
    let (hog, _) = run("hog", CancellationToken::new());
    assert!(
        matches!(hog.result, Err(CallError::Memory(m)) if m == 32 << 20),
        "{:?}",
        hog.result.err()
    );

    // Cancelled while running wasm, and while asleep in a host call: both
    // end at once, long before the 10 s deadline of this runtime.
    for attack in ["spin", "sleep"] {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            trigger.cancel();
        });
        let started = Instant::now();
        let outcome = runtime().call(0, request(&r, false, &json!({"attack": attack}), cancel));
        let took = started.elapsed();
        canceller.join().unwrap();
        assert!(
            matches!(outcome.result, Err(CallError::Cancelled)),
            "{attack}: {:?}",
            outcome.result.err()
        );
        assert!(
            took < Duration::from_secs(5),
            "{attack}: cancelled after {took:?}"
        );
    }

    let ok = rt.call(
        0,
        request(
            &r,
            false,
            &json!({"attack": "raw_read", "path": "README.md"}),
            CancellationToken::new(),
        ),
    );
    assert_eq!(ok.result.unwrap().text, ["ok: readme\n"]);
}

/// A guest stopped mid-write (its deadline) changes nothing: neither the
/// temporary file it was writing nor the file it had finished appears.
#[test]
fn a_stopped_call_changes_nothing() {
    let env = fixture();
    let ws = root(&env, "ws", Role::Sourcecode, Role::Sourcecode.ceiling());
    let rt = runtime_with(Budget {
        memory_bytes: 32 << 20,
        timeout: Duration::from_millis(200),
        output_bytes: 16 << 20,
    });
    let outcome = rt.call(
        0,
        request(
            &ws,
            true,
            &json!({"attack": "temp_then_spin"}),
            CancellationToken::new(),
        ),
    );
    assert!(matches!(outcome.result, Err(CallError::Timeout(_))));
    assert!(
        outcome.changes.is_empty(),
        "a failed call publishes nothing"
    );
    assert!(!env.path("ws/.loom-fs-write-0123456789abcdef").exists());
    assert!(!env.path("ws/made-by-guest.txt").exists());
}

/// A `Toolbox` serving the hostile fixture, with `max_concurrent_calls`
/// slots and a tool timeout: the call path the MCP layer uses.
fn toolbox(env: &Env, slots: u32, timeout_ms: u64) -> Arc<Toolbox> {
    let config = env.config(&format!(
        "max_concurrent_calls = {slots}\ntool_timeout_ms = {timeout_ms}\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"sourcecode\"\n"
    ));
    let config = Config::load(&config, false).unwrap();
    let audit = Audit::open(&AuditTarget::File(env.path("audit.log")), 1 << 20, 0).unwrap();
    let rt = runtime_with(Budget {
        memory_bytes: 32 << 20,
        timeout: config.limits.tool_timeout,
        output_bytes: 16 << 20,
    });
    Arc::new(Toolbox::new(config, rt, audit).unwrap())
}

/// Calls the fixture through the toolbox on a task of its own.
fn spawn_call(
    tb: &Arc<Toolbox>,
    attack: &str,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<(String, bool)> {
    let (tb, cancel) = (Arc::clone(tb), cancel.clone());
    // A place of its own to declare: calls that change one place wait for
    // each other (see `tests/parallel.rs`), and these test the slots.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let args = json!({"attack": attack, "root": "ws", "write_path": format!("scratch-{n}.txt"),
        "path": "keep.txt"});
    tokio::spawn(async move {
        let serde_json::Value::Object(args) = args else {
            unreachable!()
        };
        let r = tb
            .call(
                "hostile",
                Some(args),
                Control {
                    cancel,
                    ..Control::default()
                },
            )
            .await
            .unwrap();
        let text = r
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<String>();
        assert!(!text.contains("CANARY"), "{text}");
        (text, r.is_error == Some(true))
    })
}

/// 64 calls in flight: one guest that never returns holds one of 8 slots,
/// and the 63 others are all served while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_call_does_not_hold_up_63_others() {
    let env = fixture();
    let before = env.snapshot();
    let tb = toolbox(&env, 8, 60_000);
    let stuck = CancellationToken::new();
    let slow = spawn_call(&tb, "spin", &stuck);
    let none = CancellationToken::new();
    let quick: Vec<_> = (0..63)
        .map(|_| spawn_call(&tb, "std_stat", &none))
        .collect();
    for call in quick {
        let (text, failed) = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("a quick call waited behind the slow one")
            .unwrap();
        // A stat of a file in the mount: quick.
        assert!(text == "ok: 5 bytes" && !failed, "{text}");
    }
    assert!(!slow.is_finished(), "the slow call ended early");
    stuck.cancel();
    let (text, failed) = slow.await.unwrap();
    assert!(
        failed && text == "the call was cancelled; nothing was changed",
        "{text}"
    );
    assert_unchanged_but_the_audit(&env, &before);
}

/// Nothing on disk changed but the toolbox's own config and audit log (the
/// snapshot leaves out the host's lock file).
fn assert_unchanged_but_the_audit(env: &Env, before: &[(std::path::PathBuf, Option<Vec<u8>>)]) {
    let ours = |p: &std::path::PathBuf| {
        p.to_string_lossy().starts_with("audit.log") || p.ends_with("config.toml")
    };
    let mut after = env.snapshot();
    after.retain(|(p, _)| !ours(p));
    let mut before = before.to_vec();
    before.retain(|(p, _)| !ours(p));
    assert_eq!(after, before);
}

/// With 2 slots held by sleeping guests, further calls wait; one cancelled
/// while it waits ends at once, the other runs as soon as a slot frees.
/// With one slot, a call still queued when its wait (the tool timeout) ends
/// is refused as busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_bound_wait_their_turn() {
    let env = fixture();
    let before = env.snapshot();
    let tb = toolbox(&env, 2, 60_000);
    let (a, b, d) = (
        CancellationToken::new(),
        CancellationToken::new(),
        CancellationToken::new(),
    );
    let none = CancellationToken::new();
    let first = spawn_call(&tb, "sleep", &a);
    let second = spawn_call(&tb, "sleep", &b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = spawn_call(&tb, "std_stat", &none);
    let fourth = spawn_call(&tb, "std_stat", &d);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished() && !fourth.is_finished());

    let started = Instant::now();
    d.cancel();
    let (text, failed) = fourth.await.unwrap();
    assert!(failed && text == "the call was cancelled", "{text}");
    // Cancelling a sleeping guest wakes it: its slot frees at once.
    a.cancel();
    let (text, _) = first.await.unwrap();
    assert_eq!(text, "the call was cancelled; nothing was changed");
    let (text, failed) = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .expect("the waiting call never got the freed slot")
        .unwrap();
    assert!(text == "ok: 5 bytes" && !failed, "{text}");
    assert!(started.elapsed() < Duration::from_secs(30));
    b.cancel();
    second.await.unwrap();

    // One slot, a 1.5 s timeout: the first sleeper holds it until its
    // deadline, the second takes it then and holds it another 1.5 s; the
    // third, queued behind both, gives up after waiting 1.5 s.
    drop(tb);
    let tb = toolbox(&env, 1, 1500);
    let mut calls = Vec::new();
    for _ in 0..3 {
        calls.push(spawn_call(&tb, "sleep", &none));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut texts = Vec::new();
    for call in calls {
        texts.push(call.await.unwrap().0);
    }
    let timed_out =
        "the call took longer than 1500 ms and was stopped (tool_timeout_ms); nothing was changed";
    assert_eq!(
        texts,
        [
            timed_out,
            timed_out,
            "all 1 call slots stayed taken for 1500 ms (max_concurrent_calls); try again later"
        ]
    );
    assert_unchanged_but_the_audit(&env, &before);
}

/// A denied name looks exactly like a missing one, whichever way it is
/// reached: asked for, or through a symlink; a file or a directory;
/// existing or not. Every lookup that follows a final symlink answers the
/// same for each.
#[test]
fn a_denied_name_looks_missing_whichever_way_it_is_reached() {
    let env = Env::new();
    env.write("r/secret.pem", "CANARY-PEM\n")
        .write("r/.git/config", "CANARY-GIT\n")
        .write("r/plain.txt", "plain\n")
        .symlink("secret.pem", "r/to_pem")
        .symlink("gone.pem", "r/to_gone_pem")
        .symlink(".git", "r/to_git")
        .symlink(".svn", "r/to_gone_git")
        .symlink("nothing.txt", "r/to_nothing")
        .symlink("sub/../secret.pem", "r/winding")
        .fifo("r/pipe.key")
        .symlink("pipe.key", "r/to_pipe");
    let r = root(&env, "r", Role::Reference, Role::Reference.ceiling());
    let probe = |path: &str| attack(&r, false, json!({"attack": "probe", "path": path}));
    let (missing, _) = probe("nothing.txt");
    assert!(
        missing.lines().all(|l| l.contains(r#"name: "no-entry""#)),
        "{missing}"
    );
    for path in [
        "to_pem",
        "to_gone_pem",
        "to_git",
        "to_gone_git",
        "secret.pem",
        "gone.pem",
        ".git",
        ".svn",
        ".git/config",
        "to_nothing",
        "winding",
        "pipe.key",
        "to_pipe",
        // Through a symlink to a denied name, and on past it.
        "to_git/..",
        "to_git/config",
        "to_git/",
        "to_gone_git/..",
        "to_pem/..",
        "to_pem/x",
        "to_pem/",
        "to_gone_pem/x",
        "to_git/../plain.txt",
        "to_gone_git/../plain.txt",
    ] {
        let (report, _) = probe(path);
        assert_eq!(report, missing, "{path} does not look missing");
    }
    // The existing ones were refused, and recorded as such for the audit.
    let (_, refusals) = probe("to_pem");
    assert!(
        refusals.iter().all(|r| r.rule.as_str() == "deny") && refusals.len() == 4,
        "{refusals:?}"
    );
    let (plain, _) = probe("plain.txt");
    assert!(plain.starts_with("stat: ok\nhash: ok\nopen: ok"), "{plain}");
    // Nor does making something through one tell.
    let w = root(&env, "r", Role::Workspace, Role::Workspace.ceiling());
    let create = |path: &str| attack(&w, true, json!({"attack": "raw_create", "path": path})).0;
    assert_eq!(
        create("to_git/../made.txt"),
        create("to_gone_git/../made.txt")
    );
    assert!(create("to_git/../made.txt").starts_with("refused"));
    assert!(!env.path("r/made.txt").exists());
}

/// A directory's link count and size say nothing about the entries the
/// deny list hides in it (on most filesystems each subdirectory adds a
/// link).
#[test]
fn a_directorys_metadata_hides_its_hidden_entries() {
    let env = Env::new();
    env.mkdir("r/d/.git/objects")
        .mkdir("r/d/node_modules/x")
        .mkdir("r/d/.venv")
        .mkdir("r/d/sub")
        .mkdir("r/e/sub");
    let r = root(&env, "r", Role::Reference, Role::Reference.ceiling());
    let (hidden, _) = attack(&r, false, json!({"attack": "dir_stat", "path": "d"}));
    let (plain, _) = attack(&r, false, json!({"attack": "dir_stat", "path": "e"}));
    assert_eq!(hidden, "ok: links 1 size 0");
    assert_eq!(hidden, plain);
}

/// Runs at least `attacks` calls of `args` on `root` while `a` and `b`
/// (paths in the env) trade places as fast as the kernel allows: exchanged
/// when both exist, else the one that exists renamed to the other's name
/// (an entry that comes and goes). Each call must answer within a minute
/// (an open held on a FIFO would hold the host thread past any timeout).
/// The race must be real (`race_was_real`): calls go on, up to eight times
/// `attacks`, until some have `reached` the entry the check saw and some
/// have not, since on a loaded machine the swapping thread can sit out a
/// whole first batch. Returns the reports.
fn attack_while_swapping(
    env: &Env,
    root: &Arc<Root>,
    (a, b): (&str, &str),
    args: serde_json::Value,
    attacks: usize,
    reached: fn(&str) -> bool,
) -> Vec<String> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let flipper = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (a, b) = (env.path(a), env.path(b));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if a.symlink_metadata().is_ok() && b.symlink_metadata().is_ok() {
                    renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                } else if a.symlink_metadata().is_ok() {
                    std::fs::rename(&a, &b).unwrap();
                } else {
                    std::fs::rename(&b, &a).unwrap();
                }
                swaps.fetch_add(1, Ordering::Relaxed);
                // A breath between swaps: a call's path from its check to
                // its open (a probe, a stage, a take) is longer than one
                // swap, and a swapper that never pauses changes the entry
                // inside every such window; the race needs both sides.
                let pause = std::time::Instant::now();
                while pause.elapsed() < std::time::Duration::from_micros(20) {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let root = Arc::clone(root);
    let swapped = Arc::clone(&swaps);
    std::thread::spawn(move || {
        let (mut hit, mut missed) = (false, false);
        for n in 0..attacks * 8 {
            // Until both sides were met and the entry swapped often
            // (`race_was_real`): on a busy machine the swapper gets fewer
            // turns per call, so the count of calls alone does not say it.
            if n >= attacks && hit && missed && swapped.load(Ordering::Relaxed) > 1000 {
                return;
            }
            let (report, _) = attack(&root, true, args.clone());
            if reached(&report) {
                hit = true;
            } else {
                missed = true;
            }
            if tx.send(report).is_err() {
                return;
            }
        }
    });
    let mut reports = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(report) => reports.push(report),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                stop.store(true, Ordering::Relaxed);
                let n = reports.len();
                panic!("call {n} did not answer: an open is held (a FIFO swapped in?)");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    race_was_real(&reports, swaps.load(Ordering::Relaxed), reached);
    reports
}

/// An open for writing that truncates, of a path whose directory is swapped
/// for a symlink to a denied directory between the check and the open: the
/// open reopens the inode the check saw, so the denied file is never
/// emptied (before, the open went by the path again, and `O_TRUNC` acted
/// before the opened descriptor's real name was checked).
#[test]
fn a_truncating_open_never_reaches_a_denied_file_swapped_in() {
    let env = Env::new();
    env.write("ws/d/config", "inside\n")
        .write("ws/.git/config", "CANARY-GIT\n")
        .symlink(".git", "ws/e");
    let ws = root(&env, "ws", Role::Sourcecode, Role::Sourcecode.ceiling());
    attack_while_swapping(
        &env,
        &ws,
        ("ws/d", "ws/e"),
        json!({"attack": "raw_create", "path": "d/config"}),
        400,
        |r| r.starts_with("ok"),
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/.git/config")).unwrap(),
        "CANARY-GIT\n",
        "the denied file was changed through the swapped directory"
    );
}

/// A file swapped for a FIFO between the check and the open for writing:
/// the open never waits on the FIFO (no reader would ever come, and the
/// call's timeout cannot stop a thread held in `open`); each call answers,
/// writing the file or refusing the FIFO.
#[test]
fn an_open_for_writing_never_waits_on_a_fifo_swapped_in() {
    let env = Env::new();
    env.write("ws/f", "data\n")
        .write("ws/keep.txt", "keep\n")
        .fifo("ws/p");
    let ws = root(&env, "ws", Role::Sourcecode, Role::Sourcecode.ceiling());
    attack_while_swapping(
        &env,
        &ws,
        ("ws/f", "ws/p"),
        json!({"attack": "raw_create", "path": "f"}),
        400,
        |r| r.starts_with("ok"),
    );
}

/// A directory swapped for a FIFO between the check and the open for
/// reading it: the open is of the directory the check saw, never of the
/// FIFO (an open for reading waits for a writer that never comes).
#[test]
fn an_open_of_a_directory_never_waits_on_a_fifo_swapped_in() {
    let env = Env::new();
    env.write("ws/d/x.txt", "x\n").fifo("ws/p");
    let ws = root(&env, "ws", Role::Reference, Role::Reference.ceiling());
    attack_while_swapping(
        &env,
        &ws,
        ("ws/d", "ws/p"),
        json!({"attack": "raw_list", "path": "d"}),
        400,
        |r| r == "ok: x.txt",
    );
}

/// A FIFO that comes and goes under a name a guest opens for reading: an
/// open that found the name missing answers it missing, and never opens it
/// again by the path (where it could meet the FIFO and wait for a writer
/// for ever, out of the timeout's reach); one that found the FIFO refuses
/// it. Every call answers.
#[test]
fn an_open_of_a_missing_name_never_waits_on_a_fifo_that_appears() {
    let env = Env::new();
    env.write("ws/keep.txt", "keep\n").fifo("ws/p");
    let ws = root(&env, "ws", Role::Reference, Role::Reference.ceiling());
    let reports = attack_while_swapping(
        &env,
        &ws,
        ("ws/p", "ws/f"),
        json!({"attack": "raw_read", "path": "f"}),
        2000,
        |r| r.contains("no-entry"),
    );
    assert!(
        reports.iter().all(|r| r.starts_with("refused")),
        "{:?}",
        reports.iter().find(|r| !r.starts_with("refused"))
    );
}

/// Lists the root, then reads `a` (which starts the read-ahead of the files
/// after it, `f` among them) and `f`, while `f` and `other` trade places:
/// every call answers, `f` read as the file or refused, never as what was
/// swapped in (a FIFO is never waited on, a symlink never followed),
/// whether the guest's open or the read-ahead met the swap.
fn read_listed_while_swapping(env: &Env, other: &str) {
    let ws = root(env, "ws", Role::Reference, Role::Reference.ceiling());
    let read = |r: &str| r == "ok: ok: first\n|ok: data\n";
    let reports = attack_while_swapping(
        env,
        &ws,
        ("ws/f", other),
        json!({"attack": "raw_list_then_read", "paths": ["a", "f"]}),
        400,
        read,
    );
    assert!(
        reports
            .iter()
            .all(|r| read(r) || r.starts_with("ok: ok: first\n|refused")),
        "{other}: {:?}",
        reports.iter().find(|r| !read(r))
    );
}

#[test]
fn a_listed_file_swapped_for_a_fifo_is_never_waited_on() {
    let env = Env::new();
    env.write("ws/a", "first\n")
        .write("ws/f", "data\n")
        .fifo("ws/p");
    read_listed_while_swapping(&env, "ws/p");
}

/// To a denied file, or to a file outside the root.
#[test]
fn a_listed_file_swapped_for_a_symlink_is_never_followed() {
    for target in [".env", "../outside/secret.txt"] {
        let env = Env::new();
        env.write("ws/a", "first\n")
            .write("ws/f", "data\n")
            .write("ws/.env", "CANARY-DOTENV\n")
            .write("outside/secret.txt", "CANARY-OUTSIDE\n")
            .symlink(target, "ws/l");
        read_listed_while_swapping(&env, "ws/l");
    }
}

/// The race was real: many swaps, and calls on both sides of it (some
/// reached the entry the check saw, some met the other one).
fn race_was_real(reports: &[String], swaps: u64, reached: fn(&str) -> bool) {
    let hits = reports.iter().filter(|r| reached(r)).count();
    assert!(swaps > 1000, "{swaps} swaps");
    assert!(
        hits > 0 && hits < reports.len(),
        "{hits} of {} reached the checked entry; another answer: {:?}",
        reports.len(),
        reports.iter().find(|r| !reached(r))
    );
}
