//! End to end: the bytes tools read and write. The byte quota runs out,
//! names its rule and when to retry, loses nothing, and refills; a long
//! copy reports its progress in files and bytes.

mod common;

use std::time::Duration;

use common::*;
use rmcp::model::ServerResult;
use serde_json::{Value, json};

/// 1.5 MiB a minute is 25.6 KiB a second; the bucket holds 64 KiB (full
/// again 2.5 s after it runs dry) and a call needs 4 KiB to start (160 ms).
const QUOTA: &str = "quota_bytes_per_minute = 1572864\nquota_burst_bytes = 65536";

fn fixture(extra: &str) -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "a".repeat(48 * 1024))
        .write("ws/keep.txt", "the original\n")
        .write("outside/canary.txt", "CANARY-OUTSIDE\n");
    for i in 0..40 {
        env.write(&format!("ws/many/f{i:02}.txt"), "needle ".repeat(1024));
    }
    let config = env.config(&format!(
        "audit_log = \"audit.log\"\n{extra}\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
    ));
    (env, config)
}

/// "retry in 250 ms" / "retry in 3 s" → the duration.
fn retry_after(text: &str) -> Duration {
    let rest = &text[text.find("retry in ").expect("a retry time") + 9..];
    let mut words = rest.split([' ', ')', ';', '.']);
    let n: u64 = words.next().unwrap().parse().unwrap();
    match words.next().unwrap() {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        unit => panic!("unit {unit:?} in {text:?}"),
    }
}

fn read(path: &str) -> Value {
    json!({"root": "ws", "path": path})
}

#[tokio::test]
async fn the_quota_runs_out_says_when_to_retry_and_refills() {
    let (env, config) = fixture(QUOTA);
    let client = start(&config).await;
    let mut results = Vec::new();

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
        t.contains("quota_bytes_per_minute = 1572864, quota_burst_bytes = 65536"),
        "{t}"
    );
    assert!(!t.contains("aaaa"), "no partial content: {t}");
    let wait = retry_after(&t);
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(3),
        "{t}"
    );

    // With the bucket empty, a call does not even start.
    let third = call(&client, "get_file_info", read("keep.txt")).await;
    assert_refused(&third, "refused by rule 'quota': the byte quota is used up");
    assert!(retry_after(&text(&third)) <= Duration::from_millis(160));

    // A write that runs out leaves the file as it was and no temporary file.
    tokio::time::sleep(wait + Duration::from_millis(100)).await;
    let big = "b".repeat(200 * 1024);
    let write = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "keep.txt", "content": big}),
    )
    .await;
    assert_refused(&write, "rule 'quota'");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/keep.txt")).unwrap(),
        "the original\n"
    );
    let names: Vec<String> = std::fs::read_dir(env.path("ws"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| ["a.txt", "keep.txt", "many", ".mcp-trash"].contains(&n.as_str())),
        "{names:?}"
    );

    // A search that runs out must not look complete.
    tokio::time::sleep(retry_after(&text(&write)) + Duration::from_millis(100)).await;
    let search = call(
        &client,
        "search_files",
        json!({"root": "ws", "pattern": "many/*.txt", "contains": "needle"}),
    )
    .await;
    assert_refused(&search, "rule 'quota'");
    assert!(search.structured_content.is_none(), "{search:?}");

    // Refilled: the same read works again.
    tokio::time::sleep(retry_after(&text(&search)) + Duration::from_millis(100)).await;
    let again = call(&client, "read_file", read("a.txt")).await;
    assert!(!is_error(&again), "{again:?}");
    assert_eq!(text(&again).len(), 48 * 1024);
    // A call that moves no file bytes but list_roots is never metered.
    let roots = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&roots));

    results.extend([first, second, third, write, search, again, roots]);
    assert_clean(&env, &results);

    // The audit: the refused start is a denial by rule quota, the calls cut
    // short were stopped by it.
    let log = audit(&env);
    let denied: Vec<&Value> = log.iter().filter(|l| l["rule"] == "quota").collect();
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(denied[0]["tool"], "get_file_info");
    assert_eq!(denied[0]["decision"], "deny");
    let stopped: Vec<&str> = log
        .iter()
        .filter(|l| l["stopped"] == "quota")
        .map(|l| l["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        stopped,
        ["read_file", "write_file", "search_files"],
        "{log:?}"
    );
}

#[tokio::test]
async fn without_a_quota_nothing_is_refused() {
    let (env, config) = fixture("");
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
    let (env, config) = fixture(QUOTA);
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
