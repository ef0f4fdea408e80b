//! Time-of-check races: a directory inside a root is swapped with a symlink
//! pointing out of it, atomically and without pause, while the tools read,
//! list, search and write through it. Whatever `resolve()` saw, the guest's
//! own opens go through the preopen (`openat2(RESOLVE_BENEATH)` underneath),
//! so nothing outside is ever read or changed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use rustix::fs::{CWD, RenameFlags, renameat_with};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_directory_for_an_outside_symlink_never_escapes() {
    let env = Env::new();
    env.write("ws/d/x.txt", "inside\n")
        .write("ws/d/deep/y.txt", "inside too\n")
        .write("outside/x.txt", "CANARY-OUTSIDE\n")
        .write("outside/deep/y.txt", "CANARY-OUTSIDE-DEEP\n")
        .symlink("../outside", "ws/other");
    let outside = env.snapshot_of("outside");
    let config = env.config(WS);
    let client = start(&config).await;

    // `ws/d` and `ws/other` trade places (a directory and a symlink to
    // `../outside`) as fast as the kernel allows, until the calls are done.
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let flipper = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (d, other) = (env.path("ws/d"), env.path("ws/other"));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                renameat_with(CWD, &d, CWD, &other, RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let calls = [
        ("read_file", json!({"root": "ws", "path": "d/x.txt"})),
        ("read_file", json!({"root": "ws", "path": "d/deep/y.txt"})),
        (
            "list_directory",
            json!({"root": "ws", "path": "d", "depth": 2}),
        ),
        ("get_file_info", json!({"root": "ws", "path": "d/x.txt"})),
        (
            "search_files",
            json!({"root": "ws", "path": "d", "pattern": "*", "contains": "-OUTSIDE"}),
        ),
        (
            "search_files",
            json!({"root": "ws", "pattern": "**", "contains": "-OUTSIDE"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "d/new.txt", "content": "written\n"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "d/x.txt", "content": "inside\n"}),
        ),
        (
            "create_directory",
            json!({"root": "ws", "path": "d/made/here"}),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "d/x.txt", "destination": "d/copy.txt", "overwrite": true}),
        ),
        ("delete_file", json!({"root": "ws", "path": "d/copy.txt"})),
    ];
    let (mut succeeded, mut refused) = (0, 0);
    for round in 0..40 {
        for (tool, args) in &calls {
            let r = call(&client, tool, args.clone()).await;
            let t = serde_json::to_string(&r).unwrap();
            assert!(
                !t.contains("CANARY-OUTSIDE"),
                "round {round}: {tool} read outside: {t}"
            );
            assert_no_host_path(&env, &[&r]);
            if is_error(&r) {
                refused += 1;
            } else {
                succeeded += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();

    // The race was real: many swaps during the calls, and calls on both sides
    // of it (some saw the directory, some the symlink and were refused).
    assert!(swaps.load(Ordering::Relaxed) > 1000, "{swaps:?}");
    assert!(
        succeeded > 0 && refused > 0,
        "{succeeded} ok, {refused} refused"
    );
    // Nothing outside was created, changed or removed.
    assert_eq!(env.snapshot_of("outside"), outside);
    // And the server still serves a harmless call.
    let r = call(&client, "list_roots", json!({})).await;
    assert!(!is_error(&r));
}
