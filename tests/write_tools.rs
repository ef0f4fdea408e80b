//! End to end: the write and delete tools over stdio. Every change keeps
//! what it replaces or deletes in the root's trash; every refusal names its
//! rule; nothing outside the roots ever changes.

mod common;

use common::*;
use serde_json::{Value, json};

/// Roots of every role, a canary outside them, and the links that try to
/// reach it.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "version 1\n")
        .write("ws/sub/b.txt", "b\n")
        .write("ws/sub/.env", "CANARY-WS-DOTENV\n")
        .write("src/main.rs", "fn main() {}\n")
        .write("docs/readme.md", "docs\n")
        .write("outside/canary.txt", "CANARY-OUTSIDE\n")
        .symlink("../outside", "ws/linkdir")
        .symlink("../outside/new-file.txt", "ws/dangling_out")
        .symlink("a.txt", "ws/link_in");
    let config = env.config(
        r#"
        audit_log = "audit.log"
        [[roots]]
        name = "ws"
        path = "ws"
        role = "workspace"
        deny = ["*.secret"]
        [[roots]]
        name = "src"
        path = "src"
        role = "sourcecode"
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        "#,
    );
    (env, config)
}

#[tokio::test]
async fn the_surface_follows_the_roles() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let tools = tools(&client).await;
    let find = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    let roots = |name: &str| find(name).input_schema["properties"]["root"]["enum"].clone();
    for name in ["write_file", "create_directory"] {
        assert_eq!(roots(name), json!(["ws", "src"]), "{name}");
    }
    assert_eq!(roots("delete_file"), json!(["ws"]));
    let hints = |name: &str| {
        let a = find(name).annotations.clone().unwrap();
        (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
    };
    assert_eq!(hints("write_file"), (Some(false), Some(true), Some(false)));
    assert_eq!(hints("delete_file"), (Some(false), Some(true), Some(false)));
    assert_eq!(
        hints("create_directory"),
        (Some(false), Some(false), Some(true))
    );
    client.cancel().await.unwrap();

    // Without a delete grant, no delete tool.
    let only_src = env.config("[[roots]]\nname = \"src\"\npath = \"src\"\nrole = \"sourcecode\"\n");
    let client = start(&only_src).await;
    let names: Vec<String> = tools_names(&client).await;
    assert!(names.contains(&"write_file".to_string()));
    assert!(!names.contains(&"delete_file".to_string()), "{names:?}");
    client.cancel().await.unwrap();
}

async fn tools_names(client: &Client) -> Vec<String> {
    tools(client)
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

#[tokio::test]
async fn write_file_modes() {
    let (env, config) = fixture();
    let outside = env.snapshot_of("outside");
    let client = start(&config).await;

    // Create with parents.
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "new/deep/n.txt", "content": "hello\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/new/deep/n.txt")).unwrap(),
        "hello\n"
    );
    let s = structured(&r);
    assert_eq!(
        (
            s["created"].clone(),
            s["bytes"].clone(),
            s["previous"].clone()
        ),
        (json!(true), json!(6), Value::Null)
    );

    // Overwrite keeps the old content in the trash.
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "version 2\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "version 2\n"
    );
    let previous = structured(&r)["previous"].as_str().unwrap().to_string();
    assert!(
        previous.starts_with(".mcp-trash/") && previous.ends_with("/a.txt"),
        "{previous}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap(),
        "version 1\n"
    );
    assert!(text(&r).contains(&format!("kept 'a.txt' as it was at {previous}")));
    let line = audit(&env)
        .into_iter()
        .rev()
        .find(|l| l["tool"] == "write_file")
        .unwrap();
    assert_eq!(line["trash"], json!([previous]));
    assert_eq!(line["decision"], "allow");

    // Create refuses an existing file and changes nothing.
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "x", "mode": "create"}),
    )
    .await;
    assert_refused(&r, "'a.txt' already exists (mode create)");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "version 2\n"
    );

    // Append to an existing file and to a new one.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "more\n", "mode": "append"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "version 2\nmore\n"
    );
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "log/new.txt", "content": "1\n", "mode": "append"}),
    )
    .await;
    assert_eq!(structured(&r)["created"], true);
    assert_eq!(
        std::fs::read_to_string(env.path("ws/log/new.txt")).unwrap(),
        "1\n"
    );
    // Appending to a file with another hard link would change that name too.
    std::fs::hard_link(env.path("ws/sub/b.txt"), env.path("ws/b-link.txt")).unwrap();
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "b-link.txt", "content": "x", "mode": "append"}),
    )
    .await;
    assert_refused(&r, "has other hard links");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/sub/b.txt")).unwrap(),
        "b\n"
    );

    // Create mode on a new file on a sourcecode root.
    call_ok(
        &client,
        "write_file",
        json!({"root": "src", "path": "lib.rs", "content": "// lib\n", "mode": "create"}),
    )
    .await;

    // No temporary file is left behind.
    let leftovers: Vec<_> = env
        .snapshot_of("ws")
        .into_iter()
        .filter(|(p, _)| p.to_string_lossy().contains(".loom-fs-write-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(env.snapshot_of("outside"), outside);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn write_refusals_name_the_rule() {
    let (env, config) = fixture();
    let before = env.snapshot();
    let client = start(&config).await;
    let mut results = Vec::new();
    for (args, needle) in [
        (
            json!({"root": "docs", "path": "readme.md", "content": "x"}),
            "refused by rule 'permission': root 'docs' (role reference) grants [read], not write",
        ),
        (
            json!({"root": "ws", "path": ".", "content": "x"}),
            "refused by rule 'root_itself': the root itself cannot be written, moved or deleted",
        ),
        (
            json!({"root": "ws", "path": "sub/..", "content": "x"}),
            "refused by rule 'root_itself'",
        ),
        (
            json!({"root": "ws", "path": "", "content": "x"}),
            "refused by rule 'empty_path'",
        ),
        (
            json!({"root": "ws", "path": "sub", "content": "x"}),
            "'sub' is a directory; a directory is never written",
        ),
        (
            json!({"root": "ws", "path": "../outside/canary.txt", "content": "x"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "linkdir/payload.sh", "content": "x"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "dangling_out", "content": "x"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": ".env", "content": "x"}),
            "refused by rule 'deny': matches deny pattern '.env'",
        ),
        (
            json!({"root": "ws", "path": ".mcp-trash/x", "content": "x"}),
            "matches deny pattern '.mcp-trash'",
        ),
        (
            json!({"root": "ws", "path": "sub/.git/config", "content": "x"}),
            "matches deny pattern '.git'",
        ),
        (
            json!({"root": "ws", "path": "a.txt", "content": "x", "mode": "truncate"}),
            "invalid arguments",
        ),
    ] {
        let r = call(&client, "write_file", args.clone()).await;
        assert_refused(&r, needle);
        results.push(r);
    }
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
    let mut after = env.snapshot();
    after.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
    let mut before = before;
    before.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
    assert_eq!(after, before, "nothing changed anywhere");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn create_directory_with_parents() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = call(
        &client,
        "create_directory",
        json!({"root": "src", "path": "a/b/c"}),
    )
    .await;
    assert_eq!(structured(&r)["created"], true);
    assert!(env.path("src/a/b/c").is_dir());
    let again = call(
        &client,
        "create_directory",
        json!({"root": "src", "path": "a/b/c"}),
    )
    .await;
    assert!(!is_error(&again));
    assert_eq!(structured(&again)["created"], false);
    let file = call(
        &client,
        "create_directory",
        json!({"root": "src", "path": "main.rs"}),
    )
    .await;
    assert_refused(&file, "'main.rs' exists and is not a directory");
    let denied = call(
        &client,
        "create_directory",
        json!({"root": "src", "path": "x/node_modules"}),
    )
    .await;
    assert_refused(&denied, "matches deny pattern 'node_modules'");
    let out = call(
        &client,
        "create_directory",
        json!({"root": "ws", "path": "linkdir/evil"}),
    )
    .await;
    assert_refused(&out, "refused by rule 'confinement'");
    assert!(!env.path("outside/evil").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn delete_moves_to_the_trash() {
    let (env, config) = fixture();
    let outside = env.snapshot_of("outside");
    let client = start(&config).await;

    let r = call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "a.txt"}),
    )
    .await;
    assert!(!env.path("ws/a.txt").exists());
    let trash = structured(&r)["trash"].as_str().unwrap().to_string();
    let stamp = trash
        .strip_prefix(".mcp-trash/")
        .unwrap()
        .strip_suffix("/a.txt")
        .unwrap()
        .to_string();
    // <UTC timestamp>: 20261129T203000.123456Z
    assert_eq!(stamp.len(), 23, "{stamp}");
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T',
        "{stamp}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{trash}"))).unwrap(),
        "version 1\n"
    );

    // A directory goes whole, denied entries included (nothing is erased).
    let r = call_ok(&client, "delete_file", json!({"root": "ws", "path": "sub"})).await;
    assert_eq!(structured(&r)["type"], "directory");
    let entries: Vec<(std::path::PathBuf, Option<Vec<u8>>)> = env
        .trash("ws")
        .into_iter()
        .filter(|(s, _, _)| *s != stamp)
        .map(|(_, p, c)| (p, c))
        .collect();
    assert!(
        entries.contains(&("sub/b.txt".into(), Some(b"b\n".to_vec()))),
        "{entries:?}"
    );
    assert!(entries.contains(&("sub/.env".into(), Some(b"CANARY-WS-DOTENV\n".to_vec()))));

    // A symlink is deleted, not its target; one pointing out of the root is
    // refused like any path that leaves it.
    let r = call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "link_in"}),
    )
    .await;
    assert_eq!(structured(&r)["type"], "symlink");
    let r = call(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "linkdir"}),
    )
    .await;
    assert_refused(&r, "refused by rule 'confinement'");
    assert_eq!(env.snapshot_of("outside"), outside);

    // The trash is invisible to every tool.
    let listing = call(&client, "list_directory", json!({"root": "ws"})).await;
    assert!(!text(&listing).contains(".mcp-trash"), "{}", text(&listing));
    let peek = call(&client, "read_file", json!({"root": "ws", "path": trash})).await;
    assert_refused(&peek, "matches deny pattern '.mcp-trash'");

    // The audit line says where it went.
    let line = audit(&env)
        .into_iter()
        .find(|l| l["tool"] == "delete_file")
        .unwrap();
    assert_eq!(line["op"], "delete");
    assert_eq!(line["trash"], json!([trash]));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn delete_refusals() {
    let (env, config) = fixture();
    let client = start(&config).await;
    for (args, needle) in [
        (
            json!({"root": "src", "path": "main.rs"}),
            "refused by rule 'permission': root 'src' (role sourcecode) grants [read, write], not delete",
        ),
        (
            json!({"root": "ws", "path": "."}),
            "refused by rule 'root_itself'",
        ),
        (
            json!({"root": "ws", "path": "sub/.."}),
            "refused by rule 'root_itself'",
        ),
        (
            json!({"root": "ws", "path": ""}),
            "refused by rule 'empty_path'",
        ),
        (
            json!({"root": "ws", "path": ".mcp-trash"}),
            "matches deny pattern '.mcp-trash'",
        ),
        (
            json!({"root": "ws", "path": "sub/.env"}),
            "matches deny pattern '.env'",
        ),
        (
            json!({"root": "ws", "path": "../outside/canary.txt"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "linkdir/canary.txt"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"root": "ws", "path": "missing.txt"}),
            "'missing.txt' does not exist",
        ),
    ] {
        let r = call(&client, "delete_file", args.clone()).await;
        assert_refused(&r, needle);
    }
    assert!(env.path("src/main.rs").exists());
    assert!(env.path("outside/canary.txt").exists());
    assert!(env.path("ws/sub/.env").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn edit_file_all_or_nothing_with_a_diff() {
    let (env, config) = fixture();
    env.write(
        "ws/code.py",
        "def f():\n    return 1\n\ndef g():\n    return 1\n",
    );
    env.write("ws/dos.txt", "alpha\r\nbeta\r\ngamma\r\n");
    env.write("ws/aaa.txt", "aaa\n");
    let client = start(&config).await;

    let dry = call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "code.py", "dry_run": true,
        "edits": [{"old_text": "def f():\n    return 1", "new_text": "def f():\n    return 2"}]}),
    )
    .await;
    let diff = structured(&dry)["diff"].as_str().unwrap().to_string();
    assert!(
        diff.starts_with("--- a/code.py\n+++ b/code.py\n@@ -1,5 +1,5 @@\n"),
        "{diff}"
    );
    assert!(diff.contains("\n-    return 1\n+    return 2\n"), "{diff}");
    assert_eq!(structured(&dry)["applied"], false);
    assert_eq!(
        std::fs::read_to_string(env.path("ws/code.py")).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 1\n"
    );
    assert!(env.trash("ws").is_empty(), "a dry run keeps nothing");

    // Ambiguous, missing, and the all-or-nothing rule.
    let multi = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "code.py",
        "edits": [{"old_text": "return 1", "new_text": "return 3"}]}),
    )
    .await;
    assert_refused(&multi, "edit 1: old_text matches 2 times in 'code.py'");
    let partial = call(&client, "edit_file", json!({"root": "ws", "path": "code.py",
        "edits": [{"old_text": "def f():", "new_text": "def h():"}, {"old_text": "nowhere", "new_text": "x"}]})).await;
    assert_refused(
        &partial,
        "edit 2: old_text was not found in 'code.py', even ignoring whitespace at line ends, \
         and no region of it is alike; nothing was changed",
    );
    let overlap = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "aaa.txt",
        "edits": [{"old_text": "aa", "new_text": "b"}]}),
    )
    .await;
    assert_refused(&overlap, "edit 1: old_text matches 2 times");
    let empty = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "code.py",
        "edits": [{"old_text": "", "new_text": "x"}]}),
    )
    .await;
    assert_refused(&empty, "edit 1: old_text is empty");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/code.py")).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 1\n"
    );

    // Applied in order; the second edit sees the first's result.
    let done = call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "code.py", "edits": [
        {"old_text": "def f():\n    return 1", "new_text": "def f():\n    return 2"},
        {"old_text": "return 2", "new_text": "return 20"}]}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/code.py")).unwrap(),
        "def f():\n    return 20\n\ndef g():\n    return 1\n"
    );
    let previous = structured(&done)["previous"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 1\n"
    );
    assert!(text(&done).contains("+    return 20"));

    // CRLF files keep CRLF, whatever line breaks the edit uses.
    call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "dos.txt",
        "edits": [{"old_text": "alpha\nbeta", "new_text": "one\ntwo"}]}),
    )
    .await;
    assert_eq!(
        std::fs::read(env.path("ws/dos.txt")).unwrap(),
        b"one\r\ntwo\r\ngamma\r\n"
    );

    let denied = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "sub/.env",
        "edits": [{"old_text": "CANARY", "new_text": "x"}]}),
    )
    .await;
    assert_refused(&denied, "matches deny pattern '.env'");
    let reference = call(
        &client,
        "edit_file",
        json!({"root": "docs", "path": "readme.md",
        "edits": [{"old_text": "docs", "new_text": "x"}]}),
    )
    .await;
    assert_refused(
        &reference,
        "root 'docs' (role reference) grants [read], not write",
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn move_within_and_across_roots() {
    let (env, config) = fixture();
    env.write("ws/dir/inner/f.txt", "f\n")
        .write("ws/dir/hidden.secret", "CANARY-SECRET\n");
    let outside = env.snapshot_of("outside");
    let client = start(&config).await;

    call_ok(
        &client,
        "move_file",
        json!({"root": "ws", "source": "a.txt", "destination": "moved/a.txt"}),
    )
    .await;
    assert!(!env.path("ws/a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.path("ws/moved/a.txt")).unwrap(),
        "version 1\n"
    );

    // Overwrite semantics: refused without the flag, kept in the trash with it.
    env.write("ws/other.txt", "other\n");
    let r = call(
        &client,
        "move_file",
        json!({"root": "ws", "source": "other.txt", "destination": "moved/a.txt"}),
    )
    .await;
    assert_refused(&r, "destination 'moved/a.txt' exists; pass overwrite: true");
    assert!(env.path("ws/other.txt").exists());
    let r = call_ok(&client, "move_file", json!({"root": "ws", "source": "other.txt", "destination": "moved/a.txt", "overwrite": true})).await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/moved/a.txt")).unwrap(),
        "other\n"
    );
    let previous = structured(&r)["previous"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap(),
        "version 1\n"
    );
    let line = audit(&env)
        .into_iter()
        .rev()
        .find(|l| l["tool"] == "move_file" && l["path"] == "moved/a.txt")
        .unwrap();
    assert_eq!(line["trash"], json!([previous]));

    // Across roots: a file from a workspace to a sourcecode root.
    call_ok(&client, "move_file", json!({"root": "ws", "source": "moved/a.txt", "destination": "from-ws.txt", "destination_root": "src"})).await;
    assert_eq!(
        std::fs::read_to_string(env.path("src/from-ws.txt")).unwrap(),
        "other\n"
    );
    // Out of a sourcecode root takes delete there.
    let r = call(&client, "move_file", json!({"root": "src", "source": "main.rs", "destination": "main.rs", "destination_root": "ws"})).await;
    assert_refused(
        &r,
        "root 'src' (role sourcecode) grants [read, write], not delete",
    );
    assert!(env.path("src/main.rs").exists());
    // Within its root a directory moves whole, hidden entries included.
    call_ok(
        &client,
        "move_file",
        json!({"root": "ws", "source": "dir", "destination": "renamed"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/renamed/hidden.secret")).unwrap(),
        "CANARY-SECRET\n"
    );
    // To another root it is copied then deleted: what the source root's
    // deny list hides there is never copied where another list may show
    // it, and is kept in the source root's trash with the rest.
    let r = call_ok(
        &client,
        "move_file",
        json!({"root": "ws", "source": "renamed", "destination": "dir", "destination_root": "src"}),
    )
    .await;
    assert!(env.path("src/dir").is_dir());
    assert!(!env.path("src/dir/hidden.secret").exists());
    assert!(!env.path("ws/renamed").exists());
    let kept = env
        .trash("ws")
        .into_iter()
        .find(|(_, p, _)| p.ends_with("renamed/hidden.secret"))
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(kept.2.as_deref(), Some(&b"CANARY-SECRET\n"[..]));
    assert_eq!(env.snapshot_of("outside"), outside);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn move_and_copy_refusals_on_either_operand() {
    let (env, config) = fixture();
    let before = {
        let mut s = env.snapshot();
        s.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
        s
    };
    let client = start(&config).await;
    let mut results = Vec::new();
    for tool in ["move_file", "copy_file"] {
        for (args, needle) in [
            (
                json!({"root": "ws", "source": ".", "destination": "x"}),
                if tool == "move_file" {
                    "refused by rule 'root_itself'"
                } else {
                    "cannot copy '.' into itself"
                },
            ),
            (
                json!({"root": "ws", "source": "", "destination": "x"}),
                if tool == "move_file" {
                    "refused by rule 'empty_path'"
                } else {
                    "cannot copy '.' into itself"
                },
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "."}),
                "refused by rule 'root_itself'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "sub/.."}),
                "refused by rule 'root_itself'",
            ),
            (
                json!({"root": "ws", "source": "sub", "destination": "sub/inner"}),
                "into itself",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": ".env"}),
                "matches deny pattern '.env'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "x/.git/config"}),
                "matches deny pattern '.git'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": ".mcp-trash/a.txt"}),
                "matches deny pattern '.mcp-trash'",
            ),
            (
                json!({"root": "ws", "source": "sub/.env", "destination": "leak.txt"}),
                "matches deny pattern '.env'",
            ),
            (
                json!({"root": "ws", "source": "../outside/canary.txt", "destination": "in.txt"}),
                "refused by rule 'confinement'",
            ),
            (
                json!({"root": "ws", "source": "linkdir/canary.txt", "destination": "in.txt"}),
                "refused by rule 'confinement'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "../outside/a.txt"}),
                "refused by rule 'confinement'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "linkdir/payload.sh"}),
                "refused by rule 'confinement'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "dangling_out"}),
                "refused by rule 'confinement'",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "readme.md", "destination_root": "docs"}),
                "root 'docs' (role reference) grants [read], not write",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "x", "destination_root": "nope"}),
                "unknown root 'nope'",
            ),
            (
                json!({"root": "ws", "source": "missing.txt", "destination": "x"}),
                "'missing.txt' does not exist",
            ),
            (
                json!({"root": "ws", "source": "sub", "destination": "a.txt", "overwrite": true}),
                "a directory is only moved or copied to a new path",
            ),
            (
                json!({"root": "ws", "source": "a.txt", "destination": "sub", "overwrite": true}),
                "destination 'sub' is an existing directory",
            ),
        ] {
            let r = call(&client, tool, args.clone()).await;
            assert!(is_error(&r), "{tool} {args}: {r:?}");
            assert!(
                text(&r).contains(needle),
                "{tool} {args}: expected {needle:?} in {:?}",
                text(&r)
            );
            assert!(!text(&r).contains("CANARY"));
            results.push(r);
        }
    }
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
    let mut after = env.snapshot();
    after.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
    assert_eq!(after, before, "nothing changed anywhere");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn copy_files_and_trees() {
    let (env, config) = fixture();
    env.write("ws/tree/one.txt", "1\n")
        .write("ws/tree/deep/two.txt", "22\n")
        .write("ws/tree/.env", "CANARY-TREE-DOTENV\n")
        .write("ws/tree/node_modules/m.js", "CANARY-NODE\n")
        .symlink("one.txt", "ws/tree/alias")
        .fifo("ws/tree/pipe");
    let client = start(&config).await;

    let r = call_ok(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree", "destination": "copy/of/tree"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(
        (
            s["files"].clone(),
            s["directories"].clone(),
            s["bytes"].clone()
        ),
        (json!(2), json!(2), json!(5))
    );
    assert_eq!(
        s["skipped"],
        json!(["tree/alias (symlink)", "tree/pipe (fifo)"])
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/copy/of/tree/deep/two.txt")).unwrap(),
        "22\n"
    );
    assert!(
        !env.path("ws/copy/of/tree/.env").exists(),
        "denied entries are not copied"
    );
    assert!(!env.path("ws/copy/of/tree/node_modules").exists());
    assert!(!env.path("ws/copy/of/tree/alias").exists());
    assert!(env.path("ws/tree/one.txt").exists(), "the source stays");

    // A file across roots, from a reference root (read is enough there).
    call_ok(&client, "copy_file", json!({"root": "docs", "source": "readme.md", "destination": "docs-copy.md", "destination_root": "src"})).await;
    assert_eq!(
        std::fs::read_to_string(env.path("src/docs-copy.md")).unwrap(),
        "docs\n"
    );
    // Overwrite keeps the previous content.
    let r = call(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree/one.txt", "destination": "a.txt"}),
    )
    .await;
    assert_refused(&r, "destination 'a.txt' exists; pass overwrite: true");
    let r = call_ok(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree/one.txt", "destination": "a.txt", "overwrite": true}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "1\n"
    );
    let previous = structured(&r)["previous"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap(),
        "version 1\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn delete_needs_only_delete_and_writes_keep_modes() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("rd/old.txt", "old\n")
        .write("ws/private.yaml", "token: 1\n")
        .write("ws/run.sh", "#!/bin/sh\necho 1\n")
        .write("ws/target.txt", "target\n")
        .symlink("target.txt", "ws/link")
        .symlink("nowhere.txt", "ws/dangling");
    std::fs::set_permissions(
        env.path("ws/private.yaml"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::set_permissions(
        env.path("ws/run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"rd\"\npath = \"rd\"\nrole = \"workspace\"\npermissions = [\"read\", \"delete\"]\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let client = start(&config).await;

    // A root that grants read and delete, not write: delete works.
    call_ok(
        &client,
        "delete_file",
        json!({"root": "rd", "path": "old.txt"}),
    )
    .await;
    assert!(!env.path("rd/old.txt").exists());

    // Replacing a file keeps its permission bits.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "private.yaml", "content": "token: 2\n"}),
    )
    .await;
    let mode = |p: &str| std::fs::metadata(env.path(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("ws/private.yaml"), 0o600);
    call_ok(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "run.sh",
        "edits": [{"old_text": "echo 1", "new_text": "echo 2"}]}),
    )
    .await;
    assert_eq!(mode("ws/run.sh"), 0o750);

    // `.//x` is `x`.
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": ".//sub//new.txt", "content": "n\n"}),
    )
    .await;
    assert_eq!(structured(&r)["path"], "sub/new.txt");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/sub/new.txt")).unwrap(),
        "n\n"
    );

    // A symlink written over is kept (in the trash), never silently lost;
    // its target is untouched; the audit line says where the link went.
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "link", "content": "replaced\n"}),
    )
    .await;
    let previous = structured(&r)["previous"].as_str().unwrap().to_string();
    assert!(
        std::fs::symlink_metadata(env.path(&format!("ws/{previous}")))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/target.txt")).unwrap(),
        "target\n"
    );
    let line = audit(&env)
        .into_iter()
        .rev()
        .find(|l| l["path"] == "link")
        .unwrap();
    assert_eq!(line["trash"], json!([previous]));
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "dangling", "content": "x", "mode": "create"}),
    )
    .await;
    assert_refused(&r, "'dangling' already exists");
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "dangling", "content": "x\n", "mode": "append"}),
    )
    .await;
    let kept = structured(&r)["previous"].as_str().unwrap().to_string();
    assert!(
        std::fs::symlink_metadata(env.path(&format!("ws/{kept}")))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // An edit that changes nothing writes nothing and says so.
    let r = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "run.sh",
        "edits": [{"old_text": "echo 2", "new_text": "echo 2"}]}),
    )
    .await;
    assert!(
        text(&r).contains("unchanged; nothing was written"),
        "{}",
        text(&r)
    );
    assert_eq!(structured(&r)["applied"], false);
    client.cancel().await.unwrap();
}
