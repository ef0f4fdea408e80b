//! `loom-fs-mcp trash undo`: the operator takes a call back. What it
//! replaced or removed returns to its place, what it put there goes to the
//! trash (the undo loses nothing either); a call whose places a later call
//! changed is refused, naming them; `--since` takes back the recent calls,
//! newest first.

mod common;

use std::path::Path;

use common::*;
use serde_json::json;

fn setup() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "a1\n").write("ws/b.txt", "b1\n");
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    (env, config)
}

fn undo(config: &Path, args: &[&str]) -> std::process::Output {
    command()
        .args(["trash", "undo", "--config"])
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_call_is_undone_whole_and_nothing_is_lost() {
    let (env, config) = setup();
    let client = start(&config).await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-a1\n+a2\n\
        *** Delete File: b.txt\n*** Add File: c.txt\n+c\n*** End Patch\n";
    call_ok(
        &client,
        "apply_patch",
        json!({"root": "ws", "patch": patch}),
    )
    .await;
    client.cancel().await.unwrap();
    let call = last_call(&env, "apply_patch");
    assert_eq!(read_ws(&env, "a.txt").as_deref(), Some("a2\n"));
    let out = undo(&config, &[&call]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("undid {call}")),
        "{out:?}"
    );
    assert_eq!(read_ws(&env, "a.txt").as_deref(), Some("a1\n"));
    assert_eq!(read_ws(&env, "b.txt").as_deref(), Some("b1\n"));
    assert_eq!(read_ws(&env, "c.txt"), None);
    // What the call had put there is in the trash now, under the undo.
    let kept: Vec<(String, Option<String>)> = env
        .trash("ws")
        .into_iter()
        .filter(|(s, _, _)| *s != call)
        .map(|(_, p, c)| {
            (
                p.display().to_string(),
                c.map(|c| String::from_utf8(c).unwrap()),
            )
        })
        .collect();
    assert!(
        kept.contains(&("a.txt".into(), Some("a2\n".into()))),
        "{kept:?}"
    );
    assert!(
        kept.contains(&("c.txt".into(), Some("c\n".into()))),
        "{kept:?}"
    );
    // Undone once: a second undo of the same call finds its places changed.
    let again = undo(&config, &[&call]);
    assert!(!again.status.success(), "{again:?}");
}

#[tokio::test]
async fn an_undo_is_refused_where_a_later_call_changed_a_place() {
    let (env, config) = setup();
    let client = start(&config).await;
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "a2\n"}),
    )
    .await;
    let first = last_call(&env, "write_file");
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "a3\n"}),
    )
    .await;
    client.cancel().await.unwrap();
    let out = undo(&config, &[&first]);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("ws/a.txt") && said.contains("nothing was undone"),
        "{said}"
    );
    assert_eq!(read_ws(&env, "a.txt").as_deref(), Some("a3\n"));
}

#[tokio::test]
async fn undo_since_takes_back_the_recent_calls_newest_first() {
    let (env, config) = setup();
    let client = start(&config).await;
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "a2\n"}),
    )
    .await;
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "a3\n"}),
    )
    .await;
    call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "b.txt"}),
    )
    .await;
    client.cancel().await.unwrap();
    let out = undo(&config, &["--since", "10m"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("undid")
            .count(),
        3,
        "{out:?}"
    );
    assert_eq!(read_ws(&env, "a.txt").as_deref(), Some("a1\n"));
    assert_eq!(read_ws(&env, "b.txt").as_deref(), Some("b1\n"));
}
