//! End to end: the bytes tools read and write. The byte quota runs out,
//! names its rule and when to retry, loses nothing, and refills; a long
//! copy reports its progress in files and bytes.

mod common;

use std::time::Duration;

use common::*;
use rmcp::model::ServerResult;
use serde_json::{Value, json};

/// 60 KiB a minute is 1 KiB a second: nothing a test does in a few
/// seconds refills enough to matter (a call needs 4 KiB to start).
const SLOW: &str = "quota_bytes_per_minute = 61440\nquota_burst_bytes = 65536";

/// 1.5 MiB a minute is 25.6 KiB a second: the 64 KiB bucket is full again
/// 2.5 s after it runs dry.
const FAST: &str = "quota_bytes_per_minute = 1572864\nquota_burst_bytes = 65536";

/// A workspace with two files of 48 KiB, a small one, 40 files of 7 KiB and a
/// tree of three 30,000-byte files; `head` starts the config.
fn fixture(head: &str) -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "a".repeat(48 * 1024))
        .write("ws/keep.txt", "the original\n")
        .write("ws/big.txt", "x".repeat(48 * 1024) + "\nMARKER\n")
        .write("outside/canary.txt", "CANARY-OUTSIDE\n");
    for i in 0..40 {
        env.write(&format!("ws/many/f{i:02}.txt"), "needle ".repeat(1024));
    }
    for i in 0..3 {
        env.write(&format!("ws/tree/f{i}.txt"), format!("{i}").repeat(30_000));
    }
    let config = env.config(&format!(
        "{head}\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
    ));
    (env, config)
}

/// "retry in 250 ms", "retry in 3 s", "retry in 2m" → the duration.
fn retry_after(text: &str) -> Duration {
    let rest = &text[text.find("retry in ").expect("a retry time") + 9..];
    let when: String = rest
        .split(['(', ';', '.'])
        .next()
        .unwrap()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    humantime::parse_duration(&when).unwrap_or_else(|e| panic!("{when:?} in {text:?}: {e}"))
}

fn read(path: &str) -> Value {
    json!({"root": "ws", "path": path})
}

/// The names directly in `dir`.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_quota_runs_out_mid_call_then_refuses_to_start() {
    let (env, config) = fixture(&format!("audit_log = \"audit.log\"\n{SLOW}"));
    let client = start(&config).await;

    // 48 KiB of the 64 KiB burst.
    let first = call(&client, "read_file", read("a.txt")).await;
    assert!(!is_error(&first), "{first:?}");
    assert_eq!(text(&first).len(), 48 * 1024);

    // The next read gets the 16 KiB left, then nothing: refused, saying how
    // far it got and when to retry.
    let second = call(&client, "read_file", read("a.txt")).await;
    assert_refused(
        &second,
        "refused by rule 'quota': the byte quota ran out during the call",
    );
    let t = text(&second);
    assert!(
        t.contains("quota_bytes_per_minute = 61440, quota_burst_bytes = 65536"),
        "{t}"
    );
    assert!(t.contains("bytes read and 0 bytes written"), "{t}");
    assert!(!t.contains("aaaa"), "no partial content: {t}");
    assert!(retry_after(&t) > Duration::from_secs(50), "until full: {t}");

    // With the bucket empty a call does not even start, though it would
    // move no byte; a write waits for its whole content.
    let third = call(&client, "get_file_info", read("keep.txt")).await;
    assert_refused(&third, "refused by rule 'quota': the byte quota is used up");
    assert!(retry_after(&text(&third)) <= Duration::from_secs(4));
    let write = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "keep.txt", "content": "w".repeat(20_000)}),
    )
    .await;
    assert_refused(&write, "refused by rule 'quota': the byte quota is used up");
    assert!(
        retry_after(&text(&write)) > Duration::from_secs(10),
        "{write:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/keep.txt")).unwrap(),
        "the original\n"
    );
    // list_roots moves no file byte and is never metered.
    let roots = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&roots));
    assert_clean(&env, &[first, second, third, write, roots]);

    let log = audit(&env);
    let denied: Vec<&str> = log
        .iter()
        .filter(|l| l["rule"] == "quota" && l["decision"] == "deny")
        .map(|l| l["tool"].as_str().unwrap())
        .collect();
    assert_eq!(denied, ["get_file_info", "write_file"], "{log:?}");
    let stopped: Vec<&str> = log
        .iter()
        .filter(|l| l["stopped"] == "quota")
        .map(|l| l["tool"].as_str().unwrap())
        .collect();
    assert_eq!(stopped, ["read_file"], "{log:?}");
}

#[tokio::test]
async fn a_call_cut_short_loses_nothing() {
    let (env, config) = fixture(SLOW);

    // An edit of 40 KiB reads it and writes it once: it runs out while
    // writing, and the file stays as it was, with no temporary file beside
    // it.
    env.write("ws/mid.txt", "x".repeat(40 * 1024) + "\nMARKER\n");
    let client = start(&config).await;
    let before = std::fs::read(env.path("ws/mid.txt")).unwrap();
    let edit = call(
        &client,
        "edit_file",
        json!({"root": "ws", "path": "mid.txt", "edits": [{"old_text": "MARKER", "new_text": "edited"}]}),
    )
    .await;
    assert_refused(&edit, "rule 'quota'");
    assert!(!text(&edit).contains(" 0 bytes written"), "{edit:?}");
    assert_eq!(std::fs::read(env.path("ws/mid.txt")).unwrap(), before);
    assert!(
        names(&env.path("ws"))
            .iter()
            .all(|n| !n.starts_with(".loom-fs-write")),
        "{:?}",
        names(&env.path("ws"))
    );
    client.cancel().await.unwrap();

    // A fresh server, a full bucket: a tree copy of 90,000 bytes (read and
    // written: 180,000) stops on its second file. It was built out of
    // sight: nothing is left at the destination, nor in the staging area.
    let client = start(&config).await;
    let copy = call(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree", "destination": "copy"}),
    )
    .await;
    assert_refused(&copy, "rule 'quota'");
    assert!(
        !env.path("ws/copy").exists(),
        "{:?}",
        names(&env.path("ws"))
    );
    // (A server keeps its call directories, emptied, for its next calls.)
    let staging = env.path("ws/.mcp-trash/.staging");
    for server in std::fs::read_dir(&staging).unwrap() {
        for call in std::fs::read_dir(server.unwrap().path()).unwrap() {
            let left = names(&call.unwrap().path());
            assert!(left.is_empty(), "left in staging: {left:?}");
        }
    }
    assert_clean(&env, &[edit, copy]);
}

#[tokio::test]
async fn the_quota_refills() {
    let (env, config) = fixture(&format!("audit_log = \"audit.log\"\n{FAST}"));
    let client = start(&config).await;
    let first = call(&client, "read_file", read("a.txt")).await;
    assert!(!is_error(&first), "{first:?}");
    let second = call(&client, "read_file", read("a.txt")).await;
    assert_refused(&second, "rule 'quota'");
    let wait = retry_after(&text(&second));
    assert!(wait <= Duration::from_secs(3), "{second:?}");

    // Full again: the same read works, and a search that runs out (280 KiB
    // to scan) must not look complete.
    tokio::time::sleep(wait + Duration::from_millis(100)).await;
    let again = call(&client, "read_file", read("a.txt")).await;
    assert!(!is_error(&again), "{again:?}");
    assert_eq!(text(&again).len(), 48 * 1024);
    tokio::time::sleep(retry_after(&text(&second)) + Duration::from_millis(100)).await;
    let search = call(
        &client,
        "search_files",
        json!({"root": "ws", "pattern": "many/*.txt", "contains": "needle"}),
    )
    .await;
    assert_refused(&search, "rule 'quota'");
    assert!(search.structured_content.is_none(), "{search:?}");
    assert_clean(&env, &[first, second, again, search]);
    let stopped: Vec<String> = audit(&env)
        .iter()
        .filter(|l| l["stopped"] == "quota")
        .map(|l| l["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(stopped, ["read_file", "search_files"]);
}

#[tokio::test]
async fn without_a_quota_nothing_is_refused() {
    let (env, config) = fixture("audit_log = \"audit.log\"");
    let client = start(&config).await;
    for _ in 0..5 {
        let r = call(&client, "read_file", read("a.txt")).await;
        assert!(!is_error(&r), "{r:?}");
    }
    assert!(
        audit(&env)
            .iter()
            .all(|l| l["rule"].is_null() && l["stopped"].is_null())
    );
}

#[test]
fn check_shows_the_quota_and_warns_when_a_read_cannot_fit() {
    let (env, config) = fixture(FAST);
    let (ok, stdout) = check(&config);
    assert!(ok, "{stdout}");
    assert!(
        stdout.contains(
            "quota: 1572864 bytes (1.5 MiB) per minute read and written by tools, bursts up to \
             65536 bytes (64.0 KiB)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("quota_burst_bytes (65536) is below the largest max_read_bytes (1048576)"),
        "{stdout}"
    );
    let plain = env.config("[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n");
    assert!(check(&plain).1.contains("quota: off"));
}

/// A copy of a big tree reports progress while it runs: files opened and
/// bytes written grow, and the copy completes.
#[tokio::test]
async fn a_big_tree_copy_reports_progress() {
    let env = Env::new();
    let body = "x".repeat(4096);
    for d in 0..40 {
        for f in 0..100 {
            env.write(&format!("ws/tree/d{d:02}/f{f:03}.txt"), &body);
        }
    }
    let config = env.config(
        "tool_timeout_ms = 600000\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let (client, mut progress) = start_collecting_progress(&config).await;
    let handle = call_with_progress(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree", "destination": "copy"}),
    )
    .await;
    let token = handle.progress_token.clone();
    let response = handle.await_response().await.unwrap();
    let ServerResult::CallToolResult(result) = response else {
        panic!("{response:?}")
    };
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(structured(&result)["files"], json!(4000));

    let seen: Vec<_> = std::iter::from_fn(|| progress.try_recv().ok()).collect();
    assert!(!seen.is_empty(), "no progress during a copy of 4000 files");
    assert!(seen.iter().all(|p| p.progress_token == token));
    assert!(
        seen.windows(2).all(|w| w[0].progress < w[1].progress),
        "{seen:?}"
    );
    let last = seen.last().unwrap().message.clone().unwrap();
    assert!(last.contains("files and directories opened"), "{last}");
    let written: u64 = last
        .split(", ")
        .find_map(|part| part.strip_suffix(" bytes written"))
        .expect("bytes written in the message")
        .parse()
        .unwrap();
    assert!(written > 0 && written <= 4000 * 4096, "{last}");
    assert_eq!(
        snapshot_dir(&env.path("ws/copy")).len(),
        snapshot_dir(&env.path("ws/tree")).len()
    );
}
