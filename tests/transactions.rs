//! Every call is a transaction the host keeps, whatever the component: a
//! test component of the tests' own (the hostile fixture, raw
//! `wasi:filesystem` calls, built to declare delete), served from the
//! config like any third party's, over MCP on stdio. What it replaces or
//! removes is kept in the trash under its call, as `trash list` shows; what
//! it does before failing (a trap, its deadline, its memory cap, a
//! cancellation, a tool error) changes nothing on disk.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// A workspace root `ws` with four files, the fixture served on it with a
/// short deadline and a small memory cap.
fn setup() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "alpha\n")
        .write("ws/b.txt", "bravo\n")
        .write("ws/c.txt", "charlie\n")
        .write("ws/d.txt", "delta\n")
        .write("ws/sub/e.txt", "echo\n")
        .write("tools/hostile.wasm", deleting_hostile_wasm());
    let config = env.config(
        &("audit_log = \"audit.log\"\nmin_free_bytes = 0\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
            .to_string()
            + &pinned("tools/hostile.wasm", deleting_hostile_wasm())
            + "timeout_ms = 1500\nmemory_bytes = 33554432\n"),
    );
    (env, config)
}

fn args(extra: Value) -> Value {
    let mut base = json!({"root": "ws", "write_path": "a.txt"});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

/// `trash list`'s lines: ID, root, path, deleted at, size, call.
fn trash_list(config: &std::path::Path) -> Vec<Vec<String>> {
    let out = command()
        .args(["trash", "list", "--config"])
        .arg(config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// The ids of the fixture's calls, in order, from their audit lines.
fn calls_of(env: &Env) -> Vec<String> {
    let mut calls: Vec<String> = Vec::new();
    for line in audit(env) {
        if line["tool"] != "hostile" {
            continue;
        }
        if let Some(call) = line["call"].as_str()
            && calls.last().map(String::as_str) != Some(call)
        {
            calls.push(call.to_string());
        }
    }
    calls
}

/// Truncate-and-write, overwrite in place, unlink, rename over an existing
/// file, create and append, each by raw `wasi:filesystem` calls: the call
/// sees its own change, the disk has it once the call answers, and every
/// version it replaced or removed is in the trash under that call.
#[tokio::test]
async fn a_raw_component_loses_nothing() {
    let (env, config) = setup();
    let client = start(&config).await;
    let steps = [
        (
            json!({"attack": "raw_truncate_write", "path": "a.txt", "data": "A2\n"}),
            "ok: wrote; reads A2\n",
        ),
        (
            json!({"attack": "raw_write_at", "path": "b.txt", "data": "BR", "offset": 0}),
            "ok: wrote; reads BRavo\n",
        ),
        (
            json!({"attack": "raw_unlink", "path": "c.txt"}),
            "ok: unlinked",
        ),
        (
            json!({"attack": "raw_rename", "from": "sub/e.txt", "to": "d.txt"}),
            "ok: renamed",
        ),
        (
            json!({"attack": "raw_create", "path": "new.txt"}),
            "ok: created",
        ),
        (
            json!({"attack": "raw_append", "path": "a.txt", "data": "more\n"}),
            "ok: wrote; reads A2\nmore\n",
        ),
    ];
    for (attack, said) in &steps {
        let r = call(&client, "hostile", args(attack.clone())).await;
        assert_eq!(
            text(&r).lines().next().unwrap_or(""),
            said.lines().next().unwrap(),
            "{attack}: {}",
            text(&r)
        );
        assert!(!is_error(&r), "{attack}: {}", text(&r));
    }
    client.cancel().await.unwrap();
    let read = |p: &str| std::fs::read_to_string(env.path(p)).ok();
    assert_eq!(read("ws/a.txt").as_deref(), Some("A2\nmore\n"));
    assert_eq!(read("ws/b.txt").as_deref(), Some("BRavo\n"));
    assert_eq!(read("ws/c.txt"), None);
    assert_eq!(read("ws/d.txt").as_deref(), Some("echo\n"));
    assert_eq!(read("ws/sub/e.txt"), None);
    assert_eq!(read("ws/new.txt").as_deref(), Some("PWNED"));
    // Each replaced or removed version, once, under the call that did it.
    let calls = calls_of(&env);
    assert_eq!(calls.len(), steps.len(), "{calls:?}");
    let listed = trash_list(&config);
    let kept: Vec<(String, String)> = listed
        .iter()
        .map(|l| (l[2].clone(), l[5].clone()))
        .collect();
    assert_eq!(
        kept,
        [
            ("a.txt".to_string(), calls[0].clone()),
            ("b.txt".to_string(), calls[1].clone()),
            ("c.txt".to_string(), calls[2].clone()),
            ("d.txt".to_string(), calls[3].clone()),
            ("a.txt".to_string(), calls[5].clone()),
        ]
    );
    let trashed = |call: &str, path: &str| {
        std::fs::read_to_string(env.path(&format!("ws/.mcp-trash/{call}/{path}"))).ok()
    };
    assert_eq!(trashed(&calls[0], "a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(trashed(&calls[1], "b.txt").as_deref(), Some("bravo\n"));
    assert_eq!(trashed(&calls[2], "c.txt").as_deref(), Some("charlie\n"));
    assert_eq!(trashed(&calls[3], "d.txt").as_deref(), Some("delta\n"));
    assert_eq!(trashed(&calls[5], "a.txt").as_deref(), Some("A2\n"));
    // Nothing staged is left in sight.
    assert!(
        env.snapshot_of("ws")
            .iter()
            .all(|(p, _)| !p.to_string_lossy().contains(".loom-fs")),
    );
}

/// A call that writes two files, then fails in any way, leaves the root
/// byte for byte as it was, and says that nothing was changed.
#[tokio::test]
async fn a_call_that_fails_changes_nothing() {
    let (env, config) = setup();
    let before = env.snapshot_of("ws");
    let client = start(&config).await;
    for (then, said) in [
        ("trap", "the tool failed unexpectedly"),
        ("spin", "the call took longer than 1500 ms"),
        ("hog", "the call needed more than 32 MiB of memory"),
        ("error", "failed after writing"),
    ] {
        let r = call(
            &client,
            "hostile",
            args(json!({"attack": "writes_then", "paths": ["a.txt", "new.txt"], "then": then})),
        )
        .await;
        assert!(is_error(&r), "{then}: {}", text(&r));
        assert!(text(&r).contains(said), "{then}: {}", text(&r));
        if then != "error" {
            assert!(
                text(&r).contains("nothing was changed"),
                "{then}: {}",
                text(&r)
            );
        }
        assert_eq!(env.snapshot_of("ws"), before, "{then} changed the root");
    }
    client.cancel().await.unwrap();
    assert_eq!(env.snapshot_of("ws"), before);
}

/// A call cancelled after its writes changes nothing either.
#[tokio::test]
async fn a_cancelled_call_changes_nothing() {
    let (env, config) = setup();
    let before = env.snapshot_of("ws");
    let client = std::sync::Arc::new(start(&config).await);
    let pending =
        tokio::spawn({
            let client = std::sync::Arc::clone(&client);
            async move {
                try_call(
                &client,
                "hostile",
                args(json!({"attack": "writes_then", "paths": ["a.txt", "b.txt"], "then": "sleep"}))
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .await
            }
        });
    tokio::time::sleep(Duration::from_millis(300)).await;
    pending.abort();
    let _ = pending.await;
    // The server stops the cancelled call; its changes go with it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(env.snapshot_of("ws"), before);
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_read", "path": "a.txt"})),
    )
    .await;
    assert_eq!(text(&r), "ok: alpha\n");
}

/// A component is given the roots of its call and nothing else: no trash,
/// no staging area.
#[tokio::test]
async fn a_component_is_given_only_the_roots_of_its_call() {
    let (_env, config) = setup();
    let client = start(&config).await;
    let r = call(&client, "hostile", args(json!({"attack": "preopens"}))).await;
    assert_eq!(text(&r), "ok: /ws");
    client.cancel().await.unwrap();
}

/// A directory removed by a call that was not asked to delete it must be
/// empty, hidden entries counted: the removal fails at the operation.
#[tokio::test]
async fn an_rmdir_that_meets_hidden_entries_fails_at_once() {
    let (env, config) = setup();
    env.write("ws/h/.env", "SECRET\n")
        .write("ws/h/x.txt", "x\n");
    let client = start(&config).await;
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_unlink", "path": "h/x.txt"})),
    )
    .await;
    assert!(text(&r).starts_with("ok: unlinked"), "{}", text(&r));
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_rmdir", "path": "h"})),
    )
    .await;
    assert!(text(&r).contains("not-empty"), "{}", text(&r));
    client.cancel().await.unwrap();
    assert!(env.path("ws/h/.env").exists());
}

/// The host memory one call's staged changes may take is bounded: a call
/// that changes more entries than that is refused at the operation, fails
/// naming the limit, and changes nothing.
#[tokio::test]
async fn a_call_that_stages_too_much_fails_naming_the_limit() {
    let env = Env::new();
    env.write("ws/a.txt", "alpha\n")
        .write("tools/hostile.wasm", deleting_hostile_wasm());
    let config = env.config(
        &("audit_log = \"audit.log\"\nmin_free_bytes = 0\ntool_timeout_ms = 120000\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
            .to_string()
            + &pinned("tools/hostile.wasm", deleting_hostile_wasm())),
    );
    let before = env.snapshot_of("ws");
    let client = start(&config).await;
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "mkdir_many", "path": "many", "count": 200_000})),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("more than 200000 entries")
            && text(&r).contains("root 'ws'")
            && text(&r).contains("Nothing was changed"),
        "{}",
        text(&r)
    );
    assert_eq!(env.snapshot_of("ws"), before);
    // The audit line names the rule.
    let audit = std::fs::read_to_string(env.path("audit.log")).unwrap();
    assert!(audit.contains("\"overlay\""), "{audit}");
    // A call within the bound goes through.
    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "mkdir_many", "path": "few", "count": 3})),
    )
    .await;
    assert_eq!(text(&r), "ok: made 3");
    assert!(env.path("ws/few/2").is_dir());
    client.cancel().await.unwrap();
}

/// The corners of the overlay, each checked on disk after the call: a
/// descriptor opened before the call's first write to a file reads the
/// version it opened; `set-size` keeps the replaced version; `set-times`
/// and `link-at` copy nothing (the same inode stays in place, nothing is
/// kept); a result the host refuses (`max_output_bytes`) changes nothing.
#[tokio::test]
async fn the_corners_of_a_staged_call() {
    use std::os::unix::fs::MetadataExt as _;
    let env = Env::new();
    env.write("ws/a.txt", "alpha\n")
        .write("ws/b.txt", "bravo\n")
        .write("ws/c.txt", "charlie\n")
        .write("ws/d.txt", "delta\n")
        .write("tools/hostile.wasm", deleting_hostile_wasm());
    let config = env.config(
        &("audit_log = \"audit.log\"\nmin_free_bytes = 0\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
            .to_string()
            + &pinned("tools/hostile.wasm", deleting_hostile_wasm())
            + "max_output_bytes = 65536\n"),
    );
    let inode = |p: &str| std::fs::metadata(env.path(p)).unwrap().ino();
    let (c_ino, d_ino) = (inode("ws/c.txt"), inode("ws/d.txt"));
    let client = start(&config).await;

    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "read_before_write", "path": "a.txt", "data": "A3\n"})),
    )
    .await;
    // The first line is the component's; the host adds what it kept.
    let first = |r: &rmcp::model::CallToolResult| text(r).lines().next().unwrap_or("").to_string();
    assert_eq!(
        first(&r),
        "ok: early reads \"alpha\\n\", late reads \"A3\\n\""
    );

    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_set_size", "path": "b.txt", "size": 2})),
    )
    .await;
    assert_eq!(first(&r), "ok: sized");

    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_set_times", "path": "c.txt", "mtime": 1_000_000_000u64})),
    )
    .await;
    assert_eq!(first(&r), "ok: touched");

    let r = call(
        &client,
        "hostile",
        args(json!({"attack": "raw_link", "from": "d.txt", "to": "linked.txt"})),
    )
    .await;
    assert_eq!(first(&r), "ok: linked");

    let before = env.snapshot_of("ws");
    let r = call(
        &client,
        "hostile",
        args(
            json!({"attack": "writes_then", "paths": ["a.txt", "fresh.txt"], "then": "big",
                    "kind": "text", "bytes": 100_000}),
        ),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("nothing was changed"), "{}", text(&r));
    assert_eq!(
        env.snapshot_of("ws"),
        before,
        "a refused result changed the root"
    );
    client.cancel().await.unwrap();

    let read = |p: &str| std::fs::read_to_string(env.path(p)).ok();
    assert_eq!(read("ws/a.txt").as_deref(), Some("A3\n"));
    assert_eq!(read("ws/b.txt").as_deref(), Some("br"));
    assert_eq!(read("ws/c.txt").as_deref(), Some("charlie\n"));
    let c = std::fs::metadata(env.path("ws/c.txt")).unwrap();
    assert_eq!((c.ino(), c.mtime()), (c_ino, 1_000_000_000));
    assert_eq!(inode("ws/linked.txt"), d_ino);
    assert_eq!(inode("ws/d.txt"), d_ino);
    // Kept: what the write and the set-size replaced; nothing else.
    let kept: Vec<String> = trash_list(&config)
        .into_iter()
        .map(|l| l[2].clone())
        .collect();
    assert_eq!(kept, ["a.txt", "b.txt"]);
    let calls = calls_of(&env);
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/.mcp-trash/{}/b.txt", calls[1]))).unwrap(),
        "bravo\n"
    );
}
