//! End to end: the trash budget (`trash_max_bytes`). The real server
//! refuses, before anything changes, a call that would keep more than a
//! root's trash may hold, and says how to get out; reads go on; `trash
//! purge`, run beside it as the operator would, makes room; the count
//! holds across a restart, a count left wrong, and two servers on one root.
//! The start-up lines, `check` and `trash list` show the trash against its
//! budget, with a warning at 80 %.

mod common;

use std::path::Path;
use std::process::{Output, Stdio};

use common::*;
use serde_json::json;

/// One workspace root whose trash may hold 5 KiB, beside a reference root.
fn budget() -> String {
    format!("trash_max_bytes = 5120\n{WS_AND_DOCS}")
}

/// The refusal's first words for a trash holding `held` of its 5 KiB.
fn refusal(held: &str) -> String {
    format!(
        "refused by rule 'trash_budget': root 'ws' keeps at most trash_max_bytes = 5120 (5 KiB) \
         in its trash, which holds {held}"
    )
}

/// A root with files of known sizes: `filler.bin` (4 KiB), `big.txt`
/// (2 KiB), `small.txt` (512 B), `tree/` (600 B in two files).
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/filler.bin", vec![b'f'; 4096])
        .write("ws/big.txt", vec![b'b'; 2048])
        .write("ws/small.txt", vec![b's'; 512])
        .write("ws/tree/a.txt", vec![b'a'; 400])
        .write("ws/tree/deep/b.txt", vec![b'c'; 200])
        .write("docs/readme.md", "docs\n");
    let config = env.config(&budget());
    (env, config)
}

/// Bytes of every file in `ws`'s trash entries, as the test sees them.
fn trash_bytes(env: &Env) -> u64 {
    env.trash("ws")
        .iter()
        .filter_map(|(_, _, content)| content.as_ref())
        .map(|c| c.len() as u64)
        .sum()
}

/// The count the servers share (`.mcp-trash/.size`): kept plus reserved.
fn shared_count(env: &Env) -> u64 {
    let text = std::fs::read_to_string(env.path("ws/.mcp-trash/.size")).unwrap();
    let mut lines = text.lines();
    let kept: u64 = lines
        .next()
        .unwrap()
        .strip_prefix("kept ")
        .unwrap()
        .parse()
        .unwrap();
    let held: u64 = lines
        .map(|l| l.split(' ').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    kept + held
}

fn overwrite(path: &str) -> serde_json::Value {
    json!({"root": "ws", "path": path, "content": "new\n"})
}

/// Runs `loom-fs-mcp trash ARGS --config CONFIG` to a successful end.
fn trash_cmd(config: &Path, args: &[&str]) -> Output {
    let out = command()
        .arg("trash")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("run loom-fs-mcp trash");
    assert!(out.status.success(), "{out:?}");
    out
}

#[tokio::test]
async fn a_change_past_the_budget_is_refused_before_anything_changes_until_a_purge() {
    let (env, config) = fixture();
    let client = start(&config).await;
    // 4 KiB kept: 1 KiB of room left.
    call_ok(&client, "write_file", overwrite("filler.bin")).await;
    assert_eq!(trash_bytes(&env), 4096);
    let before = env.snapshot_of("ws");

    // Overwriting 2 KiB would keep 2 KiB: refused, and so is every other
    // way of replacing it.
    let refused = [
        ("write_file", overwrite("big.txt")),
        (
            "edit_file",
            json!({"root": "ws", "path": "big.txt",
                   "edits": [{"old_text": "bbbb", "new_text": "x"}]}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": "more", "mode": "append"}),
        ),
        (
            "move_file",
            json!({"root": "ws", "source": "small.txt", "destination": "big.txt",
                   "overwrite": true}),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "small.txt", "destination": "big.txt",
                   "overwrite": true}),
        ),
    ];
    for (tool, args) in refused {
        let r = call(&client, tool, args).await;
        assert_refused(
            &r,
            &refusal("4 KiB (1 KiB left), and this change would keep 2 KiB"),
        );
        assert_refused(&r, "nothing was changed");
        assert_refused(&r, "loom-fs-mcp trash purge --older-than");
        assert_eq!(env.snapshot_of("ws"), before, "{tool}");
    }

    // Overwriting 512 B fits.
    call_ok(&client, "write_file", overwrite("small.txt")).await;
    assert_eq!(trash_bytes(&env), 4608);
    let before = env.snapshot_of("ws");
    // A directory larger than the room left (600 B against 512 B): nothing
    // of it moves.
    let r = call(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "tree"}),
    )
    .await;
    assert_refused(
        &r,
        &refusal("4.5 KiB (512 B left), and this change would keep 600 B"),
    );
    assert_eq!(env.snapshot_of("ws"), before);
    assert!(env.path("ws/tree/deep/b.txt").exists());

    // Reads go on; so does a change that keeps nothing (a new file).
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "big.txt"}),
    )
    .await;
    assert!(text(&r).starts_with("bbbb"), "{r:?}");
    call_ok(
        &client,
        "list_directory",
        json!({"root": "ws", "path": "tree"}),
    )
    .await;
    call_ok(
        &client,
        "search_files",
        json!({"root": "ws", "pattern": "*.txt"}),
    )
    .await;
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "new.txt", "content": "n"}),
    )
    .await;
    assert_eq!(trash_bytes(&env), 4608);
    assert_eq!(shared_count(&env), 4608);

    // The operator purges, as a separate process beside the server: the
    // refused calls are accepted.
    let purged = trash_cmd(&config, &["purge", "--older-than", "0s", "--root", "ws"]);
    assert!(
        String::from_utf8_lossy(&purged.stdout).contains("purged 2 entries (4608 bytes)"),
        "{purged:?}"
    );
    assert_eq!(shared_count(&env), 0);
    call_ok(&client, "write_file", overwrite("big.txt")).await;
    call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "tree"}),
    )
    .await;
    assert_eq!(trash_bytes(&env), 2648);
    assert_eq!(shared_count(&env), 2648);
    client.cancel().await.unwrap();

    let audit = audit(&env);
    for path in ["big.txt", "tree"] {
        assert!(
            audit.iter().any(|l| l["decision"] == "deny"
                && l["rule"] == "trash_budget"
                && l["path"] == path),
            "{path}: {audit:?}"
        );
    }
}

#[tokio::test]
async fn the_count_is_right_after_a_restart_and_when_left_wrong() {
    let (env, config) = fixture();
    let client = start(&config).await;
    call_ok(&client, "write_file", overwrite("filler.bin")).await;
    client.cancel().await.unwrap();

    // What a server killed mid-call leaves: a count far too high, with the
    // reservation of a process that is gone.
    let size_file = env.path("ws/.mcp-trash/.size");
    std::fs::write(
        &size_file,
        "kept 999999\nreserved 20261201T083145.123456Z 4294967295 999999 99999999999\n",
    )
    .unwrap();
    let mut server = spawn_stdio(&config, Stdio::piped());
    let started = stderr_until(&mut server, "warning: root 'ws': its trash holds");
    assert!(
        started.contains("  ws    trash holds 4 KiB of 5 KiB (trash_max_bytes, 80%)\n"),
        "{started}"
    );
    assert!(
        started.contains(
            "warning: root 'ws': its trash holds 4 KiB of its trash_max_bytes (5 KiB, 80%)"
        ),
        "{started}"
    );
    // Counted again (and written) before it said so.
    assert_eq!(shared_count(&env), 4096);
    server.kill().unwrap();
    server.wait().unwrap();

    // Left high while a server runs (an entry removed by hand): a call that
    // fits is never refused; a torn count is taken again from the trash.
    let client = start(&config).await;
    call_ok(&client, "list_directory", json!({"root": "ws"})).await;
    std::fs::write(&size_file, "kept 999999\n").unwrap();
    call_ok(&client, "write_file", overwrite("small.txt")).await;
    assert_eq!(shared_count(&env), 4608);
    std::fs::write(&size_file, "kept").unwrap();
    let r = call(&client, "write_file", overwrite("big.txt")).await;
    assert_refused(
        &r,
        &refusal("4.5 KiB (512 B left), and this change would keep 2 KiB"),
    );
    assert_eq!(shared_count(&env), 4608);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_one_root_share_the_count() {
    let (env, config) = fixture();
    env.write("ws/c1.txt", vec![b'1'; 3000])
        .write("ws/c2.txt", vec![b'2'; 3000]);
    // Each server its own audit log.
    let mut configs = Vec::new();
    for side in ["a", "b"] {
        let text = budget().replace("\"ws\"\nrole", "\"../ws\"\nrole");
        let text = text.replace("\"docs\"\nrole", "\"../docs\"\nrole");
        env.write(&format!("{side}/config.toml"), text);
        configs.push(env.path(&format!("{side}/config.toml")));
    }
    let a = start(&configs[0]).await;
    let b = start(&configs[1]).await;
    // Calls on different files, one in each server, at once: 6000 bytes
    // would pass 5 KiB, so exactly one is kept.
    let (ra, rb) = tokio::join!(
        call(&a, "write_file", overwrite("c1.txt")),
        call(&b, "write_file", overwrite("c2.txt")),
    );
    assert_eq!(
        is_error(&ra) as u8 + is_error(&rb) as u8,
        1,
        "{ra:?} {rb:?}"
    );
    let refused = if is_error(&ra) { &ra } else { &rb };
    assert_refused(
        refused,
        &refusal("2.9 KiB (2.1 KiB left), and this change would keep 2.9 KiB"),
    );
    assert_eq!(trash_bytes(&env), 3000);
    // Each sees what the other kept: b's start walked an empty trash.
    call_ok(&b, "write_file", overwrite("small.txt")).await;
    let r = call(&a, "write_file", overwrite("big.txt")).await;
    assert_refused(
        &r,
        &refusal("3.4 KiB (1.6 KiB left), and this change would keep 2 KiB"),
    );
    call_ok(&a, "delete_file", json!({"root": "ws", "path": "tree"})).await;
    let r = call(&b, "write_file", overwrite("big.txt")).await;
    assert_refused(
        &r,
        &refusal("4 KiB (1008 B left), and this change would keep 2 KiB"),
    );
    assert_eq!(trash_bytes(&env), 4112);
    assert_eq!(shared_count(&env), 4112);

    trash_cmd(&config, &["purge", "--older-than", "0s"]);
    call_ok(&a, "write_file", overwrite("big.txt")).await;
    let r = call(&b, "write_file", overwrite("filler.bin")).await;
    assert_refused(
        &r,
        &refusal("2 KiB (3 KiB left), and this change would keep 4 KiB"),
    );
    assert_eq!(trash_bytes(&env), 2048);
    assert_eq!(shared_count(&env), 2048);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn usage_is_shown_in_check_and_trash_list_with_a_warning_at_80_percent() {
    let (_env, config) = fixture();
    let client = start(&config).await;
    call_ok(&client, "write_file", overwrite("small.txt")).await;

    let (ok, out) = check(&config);
    assert!(ok, "{out}");
    assert!(
        out.contains(
            "trash (trash_max_bytes):\n  ws    trash holds 512 B of 5 KiB (trash_max_bytes, 10%)\n"
        ),
        "{out}"
    );
    assert!(!out.contains("docs  trash"), "{out}");
    assert!(!out.contains("its trash holds"), "{out}");

    call_ok(&client, "write_file", overwrite("filler.bin")).await;
    let (_, out) = check(&config);
    assert!(
        out.contains("ws    trash holds 4.5 KiB of 5 KiB (trash_max_bytes, 90%)"),
        "{out}"
    );
    assert!(
        out.contains(
            "  root 'ws': its trash holds 4.5 KiB of its trash_max_bytes (5 KiB, 90%): past it, \
             changes that would keep more are refused"
        ),
        "{out}"
    );

    let listed = trash_cmd(&config, &["list"]);
    let stdout = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let stderr = String::from_utf8(listed.stderr).unwrap();
    assert!(
        stderr.contains("loom-fs-mcp: ws    trash holds 4.5 KiB of 5 KiB (trash_max_bytes, 90%)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: root 'ws': its trash holds 4.5 KiB"),
        "{stderr}"
    );
    client.cancel().await.unwrap();
}

/// A root the server may delete in but not write gets no count file from
/// it: each delete counts the trash by a walk, and the budget holds.
#[tokio::test]
async fn a_delete_only_root_is_held_to_its_budget_by_walks() {
    let env = Env::new();
    env.write("ws/one/a.txt", vec![b'a'; 600])
        .write("ws/two/b.txt", vec![b'b'; 600]);
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\n\
         role = \"workspace\"\npermissions = [\"read\", \"delete\"]\ntrash_max_bytes = 1000\n",
    );
    let client = start(&config).await;
    call_ok(&client, "delete_file", json!({"root": "ws", "path": "one"})).await;
    let before = env.snapshot_of("ws");
    let r = call(&client, "delete_file", json!({"root": "ws", "path": "two"})).await;
    assert_refused(
        &r,
        "refused by rule 'trash_budget': root 'ws' keeps at most trash_max_bytes = 1000 \
         (1000 B) in its trash, which holds 600 B (400 B left), and this change would keep \
         600 B",
    );
    assert_eq!(env.snapshot_of("ws"), before);
    assert!(!env.path("ws/.mcp-trash/.size").exists());
    client.cancel().await.unwrap();
}
