//! The read-ahead (`host/src/runtime/fs/ahead.rs`): a search served with it
//! answers exactly as the guest alone does (the tests' build turns it off
//! with `LOOMFS_TEST_READ_AHEAD=0`), page by page, on a tree of everything
//! a walk meets; and no worker outlives its call, whether the call ends,
//! is cancelled or runs out of time.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use common::*;
use rmcp::service::ClientLifecycleMode;
use serde_json::{Value, json};

/// Where the token is, and everything else a walk meets: denied names,
/// ignored entries, symlinks in and out, a FIFO, a binary file, a file
/// over `max_read_bytes`, a name that is not UTF-8, a chain of directories
/// deeper than `PATH_MAX` (unreadable by path), and a directory of 200,000
/// entries.
fn tree(env: &Env) {
    env.write("r/.gitignore", "ignored_dir/\n*.log\n")
        .write("r/.env", "TOKEN in a denied file\n")
        .write("r/pkg/.git/config", "TOKEN in a denied directory\n")
        .write("r/node_modules/dep/index.js", "TOKEN in a dependency\n")
        .write("r/ignored_dir/x.txt", "TOKEN ignored\n")
        .write("r/a.log", "TOKEN in an ignored file\n")
        .write("r/bin.dat", "\0\0\0TOKEN in a binary file\n")
        .write("r/big.txt", "TOKEN in a file too large\n".repeat(2000))
        .write("outside/secret.txt", "TOKEN outside\n")
        .symlink("pkg/m1.py", "r/link_to_file")
        .symlink("pkg", "r/link_to_dir")
        .symlink("../outside", "r/link_out")
        .fifo("r/pkg/fifo");
    for d in 0..6 {
        for f in 0..60 {
            let text = if (d * 60 + f) % 7 == 3 {
                format!("line one\n  TOKEN at {d}/{f}\nline three\nTOKEN again\n")
            } else {
                "nothing here\n".repeat(f + 1)
            };
            env.write(&format!("r/pkg/d{d}/m{f:02}.py"), &text);
        }
    }
    env.write("r/pkg/m1.py", "TOKEN in m1\n");
    std::fs::write(
        env.path("r/pkg")
            .join(std::ffi::OsStr::from_bytes(b"bad\xffname.py")),
        "TOKEN in a name that is not UTF-8\n",
    )
    .unwrap();
    // 20 levels of 200-byte names: over PATH_MAX.
    std::fs::create_dir_all(env.path("r/deep")).unwrap();
    env.deep_chain("r/deep", 20, "deep.txt", b"TOKEN deep\n");
    // 200,000 entries, the token in a few of them and around them.
    let big = env.path("r/wide");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..200_000u32 {
        let text: &[u8] = if i % 40_000 == 17 {
            b"x\nTOKEN wide\n"
        } else {
            b""
        };
        std::fs::write(big.join(format!("w{i:06}.txt")), text).unwrap();
    }
}

fn config(env: &Env) -> std::path::PathBuf {
    let path = env.path("r.toml");
    std::fs::write(
        &path,
        "audit_log = \"stderr\"\nmax_search_results = 100000\n\
         [[roots]]\nname = \"r\"\npath = \"r\"\nrole = \"reference\"\nmax_read_bytes = 4096\n",
    )
    .unwrap();
    path
}

/// Every page of the search `args`, following `next_cursor`.
async fn pages(client: &Client, args: &Value) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut args = args.clone();
    loop {
        let r = call(client, "search_files", args.clone()).await;
        assert!(!is_error(&r), "{r:?}");
        let s = r.structured_content.clone().unwrap();
        let next = s.get("next_cursor").cloned();
        pages.push(json!({"structured": s, "text": r.content}));
        match next {
            Some(cursor) => args["cursor"] = cursor,
            None => return pages,
        }
        assert!(pages.len() < 200, "pages without end");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_answer_as_the_guest_alone_does() {
    let env = Env::new();
    tree(&env);
    let config = config(&env);
    let ahead = start(&config).await;
    let alone = start_with_env(&config, &[("LOOMFS_TEST_READ_AHEAD", Path::new("0"))]).await;
    let searches = [
        json!({"root": "r", "pattern": "*", "contains": "TOKEN"}),
        json!({"root": "r", "path": "pkg", "pattern": "*", "contains": "TOKEN", "max_results": 5}),
        json!({"root": "r", "pattern": "*.py", "contains": "TOK.N (at|again)", "regex": true, "context": 1}),
        json!({"root": "r", "pattern": "*", "contains": "TOKEN", "ignored": "include"}),
        json!({"root": "r", "pattern": "m0*.py", "contains": "TOKEN"}),
        json!({"root": "r", "pattern": "*.py"}),
        json!({"root": "r", "path": "wide", "pattern": "*", "contains": "TOKEN", "max_results": 2}),
    ];
    for args in &searches {
        let with = pages(&ahead, args).await;
        let without = pages(&alone, args).await;
        assert_eq!(with, without, "{args}");
    }
    // The searches found what the tree holds, and passed what it hides.
    let all = pages(&ahead, &searches[0]).await;
    let s = &all[0]["structured"];
    let found: Vec<&str> = s["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    for expected in [
        "pkg/m1.py",
        "pkg/d0/m03.py",
        "pkg/d5/m53.py",
        "wide/w000017.txt",
    ] {
        assert!(found.contains(&expected), "{expected} not in {found:?}");
    }
    let text = serde_json::to_string(&all).unwrap();
    for hidden in [
        "denied",
        "dependency",
        "ignored",
        "outside",
        "binary",
        "too large",
    ] {
        assert!(
            !text.contains(&format!("TOKEN {hidden}")),
            "{hidden}: {text}"
        );
        assert!(!text.contains(&format!("in a {hidden}")), "{hidden}");
    }
    assert!(s["skipped_binary"].as_u64() >= Some(1), "{s}");
    assert!(s["skipped_too_large"].as_u64() >= Some(1), "{s}");
    assert!(s["ignored"].as_u64() >= Some(2), "{s}");
    // The second search was cut into pages (the cursors were followed).
    assert!(pages(&ahead, &searches[1]).await.len() > 3);
}

/// The server's read-ahead threads alive now.
fn workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "loomfs-ahead")
        .count()
}

/// Waits (a few seconds at most) until no read-ahead thread is left.
async fn no_workers_left(pid: u32, after: &str) {
    for _ in 0..200 {
        if workers(pid) == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("a read-ahead thread outlived its call ({after})");
}

/// The server on root `r` of `env` with the time limit `timeout_ms`, and
/// its process id.
async fn serve(env: &Env, timeout_ms: u64) -> (Client, u32) {
    let path = env.path("r.toml");
    std::fs::write(
        &path,
        format!(
            "audit_log = \"stderr\"\ntool_timeout_ms = {timeout_ms}\n\
             max_search_bytes = 1000000000\n\
             [[roots]]\nname = \"r\"\npath = \"r\"\nrole = \"reference\"\n"
        ),
    )
    .unwrap();
    start_with_pid(&path, &[], ClientLifecycleMode::Initialize).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_worker_outlives_its_call() {
    let env = Env::new();
    let body = "nothing to see here\n".repeat(50);
    for d in 0..100 {
        for f in 0..200 {
            env.write(&format!("r/d{d:03}/f{f:03}.txt"), &body);
        }
    }
    let (client, pid) = serve(&env, 60_000).await;
    let search = json!({"root": "r", "pattern": "*.txt", "contains": "needle"});

    // A search that ends.
    let r = call(&client, "search_files", search.clone()).await;
    assert!(!is_error(&r), "{r:?}");
    no_workers_left(pid, "a search that ended").await;

    // A search cancelled while its worker reads ahead.
    let handle = call_with_progress(&client, "search_files", search.clone()).await;
    let seen = async {
        while workers(pid) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), seen)
        .await
        .expect("a worker while the search runs");
    handle.cancel(Some("enough".into())).await.unwrap();
    let r = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&r));
    no_workers_left(pid, "a cancelled search").await;
    drop(client);

    // A search stopped by its time limit.
    let (client, pid) = serve(&env, 50).await;
    let r = call(&client, "search_files", search).await;
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        text.contains("time") || text.contains("truncated"),
        "not stopped by its time limit: {text}"
    );
    no_workers_left(pid, "a search out of time").await;
}
