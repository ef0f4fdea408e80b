//! `apply_patch` end to end: both patch formats, every kind of change in
//! one patch, all or nothing (a hunk that does not apply, a denied path),
//! the versions it replaces kept under its call, and eight overlapping
//! patches sent at once each applied exactly once.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;

fn setup() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write(
        "ws/src/a.py",
        "def a():\n    return 1\n\n\ndef b():\n    return 2\n",
    )
    .write("ws/src/old.txt", "remove me\n")
    .write("ws/src/move.txt", "move me\nline 2\n")
    .write("ws/crlf.txt", "one\r\ntwo\r\nthree\r\n")
    .write("ws/.env", "SECRET=1\n");
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    (env, config)
}

#[tokio::test]
async fn a_codex_patch_adds_updates_deletes_and_moves_in_one_call() {
    let (env, config) = setup();
    let client = start(&config).await;
    let patch = "*** Begin Patch\n\
        *** Add File: src/new.py\n\
        +print('new')\n\
        *** Update File: src/a.py\n\
        @@ def b():\n\
        -    return 2\n\
        +    return 20\n\
        *** Delete File: src/old.txt\n\
        *** Update File: src/move.txt\n\
        *** Move to: src/moved.txt\n\
        @@\n\
        \x20move me\n\
        -line 2\n\
        +line two\n\
        *** Update File: crlf.txt\n\
        @@\n\
        \x20one\n\
        -two\n\
        +TWO\n\
        *** End Patch\n";
    // A dry run shows the diff and changes nothing.
    let before = env.snapshot_of("ws");
    let r = call_ok(
        &client,
        "apply_patch",
        json!({"root": "ws", "patch": patch, "dry_run": true}),
    )
    .await;
    assert!(
        structured(&r)["diff"]
            .as_str()
            .unwrap()
            .contains("+    return 20"),
        "{r:?}"
    );
    assert_eq!(env.snapshot_of("ws"), before);
    let r = call_ok(
        &client,
        "apply_patch",
        json!({"root": "ws", "patch": patch}),
    )
    .await;
    client.cancel().await.unwrap();
    assert_eq!(
        read_ws(&env, "src/new.py").as_deref(),
        Some("print('new')\n")
    );
    assert_eq!(
        read_ws(&env, "src/a.py").as_deref(),
        Some("def a():\n    return 1\n\n\ndef b():\n    return 20\n")
    );
    assert_eq!(read_ws(&env, "src/old.txt"), None);
    assert_eq!(read_ws(&env, "src/move.txt"), None);
    assert_eq!(
        read_ws(&env, "src/moved.txt").as_deref(),
        Some("move me\nline two\n")
    );
    // Line endings kept as the file had them.
    assert_eq!(
        read_ws(&env, "crlf.txt").as_deref(),
        Some("one\r\nTWO\r\nthree\r\n")
    );
    // What it replaced or removed is kept, under one call.
    let trash = env.trash("ws");
    let stamps: std::collections::BTreeSet<&String> = trash.iter().map(|(s, _, _)| s).collect();
    assert_eq!(stamps.len(), 1, "{trash:?}");
    let kept = |p: &str| {
        trash
            .iter()
            .find(|(_, path, _)| path.ends_with(p))
            .and_then(|(_, _, c)| c.clone())
            .map(|c| String::from_utf8(c).unwrap())
    };
    assert_eq!(kept("src/old.txt").as_deref(), Some("remove me\n"));
    assert_eq!(
        kept("src/a.py").as_deref(),
        Some("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    );
    assert_eq!(kept("src/move.txt").as_deref(), Some("move me\nline 2\n"));
    // The audit names every file the call changed, under its id.
    let lines: Vec<String> = audit(&env)
        .iter()
        .filter(|l| l["tool"] == "apply_patch" && l["decision"] == "allow")
        .map(|l| l["path"].as_str().unwrap_or("").to_string())
        .collect();
    for p in [
        "src/new.py",
        "src/a.py",
        "src/old.txt",
        "src/moved.txt",
        "crlf.txt",
    ] {
        assert!(lines.iter().any(|l| l == p), "{p} not in {lines:?}");
    }
    assert!(text(&r).contains("kept 'src/a.py'"), "{}", text(&r));
}

#[tokio::test]
async fn a_unified_diff_applies() {
    let (env, config) = setup();
    let client = start(&config).await;
    let patch = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1,2 +1,2 @@\n def a():\n-    return 1\n+    return 10\n\
        --- /dev/null\n+++ b/notes/n.md\n@@ -0,0 +1 @@\n+# notes\n";
    call_ok(
        &client,
        "apply_patch",
        json!({"root": "ws", "patch": patch}),
    )
    .await;
    client.cancel().await.unwrap();
    assert!(read_ws(&env, "src/a.py").unwrap().contains("return 10"));
    assert_eq!(read_ws(&env, "notes/n.md").as_deref(), Some("# notes\n"));
}

/// A hunk that does not apply, or a denied path anywhere in the patch,
/// refuses all of it: no file changes.
#[tokio::test]
async fn a_patch_is_all_or_nothing() {
    let (env, config) = setup();
    let before = env.snapshot_of("ws");
    let client = start(&config).await;
    let bad_hunk = "*** Begin Patch\n\
        *** Add File: src/new.py\n+x\n\
        *** Update File: src/a.py\n@@\n-    return 3\n+    return 30\n\
        *** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({"root": "ws", "patch": bad_hunk}),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("src/a.py"), "{}", text(&r));
    assert_eq!(env.snapshot_of("ws"), before);
    for denied in [
        "*** Begin Patch\n*** Add File: src/ok.py\n+x\n*** Update File: .env\n@@\n-SECRET=1\n+SECRET=2\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-    return 1\n+    return 11\n*** Add File: keys/id_rsa\n+k\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-    return 1\n+    return 11\n*** Add File: ../outside.txt\n+k\n*** End Patch\n",
    ] {
        let r = call(
            &client,
            "apply_patch",
            json!({"root": "ws", "patch": denied}),
        )
        .await;
        assert!(is_error(&r), "{denied}: {}", text(&r));
        assert_eq!(env.snapshot_of("ws"), before, "{denied}");
    }
    client.cancel().await.unwrap();
    assert!(!env.path("outside.txt").exists());
}

/// Eight patches that each change one line of the same file, sent at
/// once: each is applied exactly once (the host runs a call whose file
/// changed meanwhile again, holding its locks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_overlapping_patches_are_each_applied_once() {
    let env = Env::new();
    let lines: String = (0..8).map(|i| format!("line {i}\n")).collect();
    env.write("ws/f.txt", &lines);
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let client = Arc::new(start(&config).await);
    let mut calls = Vec::new();
    for i in 0..8 {
        let client = Arc::clone(&client);
        calls.push(tokio::spawn(async move {
            let patch = format!(
                "*** Begin Patch\n*** Update File: f.txt\n@@\n-line {i}\n+line {i} patched\n*** End Patch\n"
            );
            call(&client, "apply_patch", json!({"root": "ws", "patch": patch})).await
        }));
    }
    for call in calls {
        let r = call.await.unwrap();
        assert!(!is_error(&r), "{}", text(&r));
    }
    let want: String = (0..8).map(|i| format!("line {i} patched\n")).collect();
    assert_eq!(std::fs::read_to_string(env.path("ws/f.txt")).unwrap(), want);
    // Every version in between kept once: eight calls, eight versions.
    assert_eq!(env.trash("ws").len(), 8, "{:?}", env.trash("ws"));
}
