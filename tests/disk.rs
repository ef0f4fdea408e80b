//! End to end: a full or read-only disk under a root, on a small tmpfs the
//! test mounts (the development machines and CI run as root). Every change
//! that does not fit answers a sentence naming the disk error and the root,
//! leaves the original byte for byte, and leaves no file behind, in the
//! root, its staging area or its trash. Where mounting is not allowed the
//! test says so on stderr and passes.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::json;

/// Every regular file under `dir`, relative to it, with its content, but
/// the root's lock file (the server's own).
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot_dir(dir)
        .into_iter()
        // The host's own state: the lock file and the trash's byte count.
        .filter(|(p, _)| p != Path::new(".mcp-trash/.locks") && p != Path::new(".mcp-trash/.size"))
        .filter_map(|(p, c)| c.map(|c| (p, c)))
        .collect()
}

const BIG: usize = 1_000_000;

/// A workspace root on a 2 MiB tmpfs holding `big.txt` (1,000,000 bytes,
/// `MARKER` at its end) and `fill.bin` (600 KiB): about 450 KiB are free,
/// so no new copy of `big.txt` fits.
fn full_disk(head: &str) -> Option<(Env, Tmpfs, PathBuf)> {
    let env = Env::new();
    let tmpfs = Tmpfs::mount(&env.path("ws"), "2m")?;
    let fs = rustix::fs::statvfs(env.path("ws")).unwrap();
    assert_eq!(
        fs.f_blocks * fs.f_frsize,
        2 << 20,
        "the root is the small tmpfs"
    );
    let mut big = "x".repeat(BIG - 7);
    big.push_str("MARKER\n");
    env.write("ws/big.txt", big)
        .write("ws/fill.bin", vec![7u8; 600 * 1024])
        .write("ws/small.txt", "small\n");
    let config = env.config(&format!(
        "audit_log = \"audit.log\"\n{head}\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n"
    ));
    Some((env, tmpfs, config))
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_that_do_not_fit_name_the_full_disk_and_leave_nothing() {
    let Some((env, _tmpfs, config)) = full_disk("min_free_bytes = 0") else {
        return;
    };
    let before = files(&env.path("ws"));
    let client = start(&config).await;
    let calls = [
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": "y".repeat(600 * 1024)}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new.txt", "content": "y".repeat(600 * 1024)}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "dir/new.txt", "content": "y".repeat(600 * 1024)}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": "more\n", "mode": "append"}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "big.txt",
                   "edits": [{"old_text": "MARKER", "new_text": "EDITED"}]}),
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "big.txt", "destination": "copy.txt"}),
        ),
    ];
    for (tool, args) in calls {
        let r = call(&client, tool, args).await;
        assert_refused(
            &r,
            "no space left on the disk that holds root 'ws' (ENOSPC)",
        );
        let t = text(&r);
        assert!(!t.contains("uncategorized"), "{t}");
        assert!(t.contains("Nothing was changed"), "{t}");
        assert_eq!(
            files(&env.path("ws")),
            before,
            "after {tool}: nothing changed"
        );
    }
    // Reads still work, and so does a change that fits.
    call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "small.txt"}),
    )
    .await;
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "small.txt", "content": "fits\n"}),
    )
    .await;
    client.cancel().await.unwrap();
    let audit = audit(&env);
    let stopped = audit
        .iter()
        .filter(|l| l["stopped"] == "disk" && l["path"] == "big.txt")
        .count();
    assert!(
        stopped >= 3,
        "audit lines of calls stopped by the disk: {audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_disk_is_named() {
    let Some((env, tmpfs, config)) = full_disk("min_free_bytes = 0") else {
        return;
    };
    let client = start(&config).await;
    // A first write makes the server's staging directory; then the disk
    // turns read-only under the running server.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "small.txt", "content": "one\n"}),
    )
    .await;
    tmpfs.remount("ro");
    let before = files(&env.path("ws"));
    for (tool, args) in [
        (
            "write_file",
            json!({"root": "ws", "path": "small.txt", "content": "two\n"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "other.txt", "content": "two\n"}),
        ),
        ("delete_file", json!({"root": "ws", "path": "small.txt"})),
    ] {
        let r = call(&client, tool, args).await;
        assert_refused(
            &r,
            "the disk that holds root 'ws' is mounted read-only (EROFS)",
        );
        assert_eq!(files(&env.path("ws")), before, "after {tool}");
    }
    tmpfs.remount("rw");
    client.cancel().await.unwrap();
}

/// A root on a 2 MiB tmpfs with a tree of three 150 KiB files, keeping
/// 1,300,000 bytes free: about 300 KB may still be written.
#[tokio::test(flavor = "multi_thread")]
async fn the_reserve_is_kept_before_and_while_a_call_writes() {
    let env = Env::new();
    let Some(_tmpfs) = Tmpfs::mount(&env.path("ws"), "2m") else {
        return;
    };
    for i in 0..3 {
        env.write(&format!("ws/tree/f{i}.bin"), vec![b'a' + i; 150 * 1024]);
    }
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 1300000\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let before = files(&env.path("ws"));
    let client = start(&config).await;
    // Told before the call runs: its content alone breaks the reserve.
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "new.txt", "content": "y".repeat(400 * 1024)}),
    )
    .await;
    assert_refused(
        &r,
        "refused by rule 'reserve': root 'ws' keeps min_free_bytes = 1300000",
    );
    assert_refused(&r, "nothing was written");
    assert_refused(&r, "loom-fs-mcp trash purge --older-than");
    assert_eq!(files(&env.path("ws")), before);
    // A directory copy's size is not known before: its writes are held to
    // the reserve one by one, and the copy never appears.
    let r = call(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "tree", "destination": "tree2"}),
    )
    .await;
    assert_refused(
        &r,
        "refused by rule 'reserve': root 'ws' keeps min_free_bytes = 1300000",
    );
    assert_eq!(files(&env.path("ws")), before);
    assert!(!env.path("ws/tree2").exists());
    // What fits above the reserve is written.
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "new.txt", "content": "y".repeat(100 * 1024)}),
    )
    .await;
    client.cancel().await.unwrap();
    let audit = audit(&env);
    assert!(
        audit
            .iter()
            .any(|l| l["decision"] == "deny" && l["rule"] == "reserve" && l["path"] == "new.txt"),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l["stopped"] == "reserve" && l["path"] == "tree2"),
        "{audit:?}"
    );
}

/// The audit log on a disk that fills up: the call whose line cannot be
/// written is answered, every call after it is refused (nothing happens
/// unrecorded), and once there is space the waiting lines are written
/// first, in order, and calls are served again.
#[tokio::test(flavor = "multi_thread")]
async fn an_audit_log_that_cannot_be_written_fails_closed_and_recovers() {
    let env = Env::new();
    let Some(_tmpfs) = Tmpfs::mount(&env.path("logs"), "256k") else {
        return;
    };
    env.write("ws/a.txt", "hello\n");
    let config = env.config(
        "audit_log = \"logs/audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let client = start(&config).await;
    let read = json!({"root": "ws", "path": "a.txt"});
    let r = call(&client, "read_file", read.clone()).await;
    assert!(!is_error(&r), "{r:?}");
    // Fill the log's disk.
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(env.path("logs/filler")).unwrap();
        while filler.write_all(&[0u8; 4096]).is_ok() {}
    }
    // The log's last block still holds a few lines. Lines are written after
    // their call: the call whose line does not fit is answered, and the
    // next one is refused.
    let mut answered = 0;
    let refused = loop {
        let r = call(&client, "read_file", read.clone()).await;
        if is_error(&r) {
            break r;
        }
        answered += 1;
        assert!(answered < 200, "the audit log's disk never filled");
    };
    assert!(answered >= 1);
    assert_refused(
        &refused,
        "refused by rule 'audit': the audit log cannot be written",
    );
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "b.txt", "content": "x"}),
    )
    .await;
    assert_refused(&r, "refused by rule 'audit'");
    assert!(!env.path("ws/b.txt").exists());
    // Space again: the waiting lines go first, and calls are served.
    std::fs::remove_file(env.path("logs/filler")).unwrap();
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "b.txt", "content": "x"}),
    )
    .await;
    client.cancel().await.unwrap();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(env.path("logs/audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("no torn line"))
        .collect();
    let seen: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_string(),
                l["rule"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = std::iter::repeat_n(("read_file", ""), 1 + answered)
        .chain([
            ("read_file", "audit"),
            ("write_file", "audit"),
            ("write_file", ""),
        ])
        .map(|(t, r)| (t.to_string(), r.to_string()))
        .collect();
    assert_eq!(seen, expected, "{lines:?}");
}

/// How a test stops the server.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// The client closes the server's stdin.
    Eof,
    /// SIGTERM, the client still connected.
    Term,
}

/// The audit log's disk is full when the server stops: the lines still
/// waiting are tried once more and, not fitting, written to stderr, each
/// as the log would have held it behind `audit-unwritten: `, then their
/// count. None is lost silently, and none is on stdout (the JSON-RPC
/// channel, which the client reads to its end without a stray line).
async fn audit_lines_waiting_at_exit_go_to_stderr(stop: Stop) {
    let env = Env::new();
    let Some(_tmpfs) = Tmpfs::mount(&env.path("logs"), "256k") else {
        return;
    };
    env.write("ws/a.txt", "hello\n");
    let config = env.config(
        "audit_log = \"logs/audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\n\
         path = \"ws\"\nrole = \"workspace\"\n",
    );
    let (client, pid, said) = start_command(server_command(&config)).await;
    let read = json!({"root": "ws", "path": "a.txt"});
    call_ok(&client, "read_file", read.clone()).await;
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(env.path("logs/filler")).unwrap();
        while filler.write_all(&[0u8; 4096]).is_ok() {}
    }
    let mut answered = 0;
    loop {
        let r = call(&client, "read_file", read.clone()).await;
        if is_error(&r) {
            assert_refused(&r, "refused by rule 'audit'");
            break;
        }
        answered += 1;
        assert!(answered < 200, "the audit log's disk never filled");
    }
    let r = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "b.txt", "content": "x"}),
    )
    .await;
    assert_refused(&r, "refused by rule 'audit'");
    let client = match stop {
        Stop::Eof => {
            client.cancel().await.unwrap();
            None
        }
        Stop::Term => {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid as i32).unwrap(),
                rustix::process::Signal::TERM,
            )
            .unwrap();
            Some(client)
        }
    };
    let said = tokio::time::timeout(std::time::Duration::from_secs(20), said)
        .await
        .expect("the server exits")
        .unwrap();
    if let Some(client) = client {
        assert!(said.contains("loom-fs-mcp: stopping"), "{said}");
        let _ = client.cancel().await;
    }
    // The call whose line did not fit, then the two refusals.
    let spilled: Vec<serde_json::Value> = said
        .lines()
        .filter_map(|l| l.strip_prefix("audit-unwritten: "))
        .map(|l| serde_json::from_str(l).expect("a whole audit line"))
        .collect();
    let seen: Vec<(&str, &str)> = spilled
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap(),
                l["rule"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("read_file", ""),
            ("read_file", "audit"),
            ("write_file", "audit")
        ],
        "{said}"
    );
    assert!(
        said.contains(
            "loom-fs-mcp: 3 audit line(s) could not be written to the audit log (No space left \
             on device (os error 28)) and are above, each behind 'audit-unwritten:'"
        ),
        "{said}"
    );
    // None of them reached the log.
    let logged = std::fs::read_to_string(env.path("logs/audit.log")).unwrap();
    assert!(!logged.contains("\"rule\":\"audit\""), "{logged}");
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_lines_waiting_when_stdin_closes_go_to_stderr() {
    audit_lines_waiting_at_exit_go_to_stderr(Stop::Eof).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_lines_waiting_at_sigterm_go_to_stderr() {
    audit_lines_waiting_at_exit_go_to_stderr(Stop::Term).await;
}

/// `check` and the start-up lines show each writable root's free space
/// against its reserve, and warn of a disk already below it.
#[test]
fn check_shows_free_space_against_the_reserve() {
    let env = Env::new();
    env.mkdir("ws").mkdir("docs").mkdir("tight");
    let config = env.config(
        "[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"tight\"\npath = \"tight\"\nrole = \"workspace\"\n\
         min_free_bytes = 1099511627776\n",
    );
    let (ok, out) = check(&config);
    assert!(ok, "{out}");
    assert!(out.contains("free space (min_free_bytes):"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("ws ")
                && l.contains("keeps 256 MiB (min_free_bytes)")),
        "{out}"
    );
    // A root tools cannot change has no reserve to show.
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("docs ") && l.contains("free")),
        "{out}"
    );
    assert!(
        out.contains("root 'tight': its disk has")
            && out.contains("below its min_free_bytes (1 TiB): every change there is refused"),
        "{out}"
    );
}

/// Under a file size limit (`ulimit -f`, `RLIMIT_FSIZE`, inherited from
/// whoever starts the server), a write past it fails with `EFBIG`: the
/// server ignores `SIGXFSZ`, which would otherwise end it mid-call. Each
/// change that would pass the limit answers the named error, leaves the
/// original byte for byte and nothing behind, and the server goes on.
/// Needs no mount: the limit is the process's own.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_size_limit_is_named_and_the_server_goes_on() {
    const LIMIT: u64 = 256 * 1024;
    let env = Env::new();
    let mut big = "x".repeat(200 * 1024 - 7);
    big.push_str("MARKER\n");
    env.write("ws/big.txt", &big)
        .write("ws/small.txt", "small\n");
    let config = env.config(
        "audit_log = \"audit.log\"\nmin_free_bytes = 0\n[[roots]]\nname = \"ws\"\npath = \"ws\"\n\
         role = \"workspace\"\n",
    );
    // Components are compiled (and cached) without the limit first: under
    // it, the memory image of a freshly compiled component (a memfd) could
    // not be written, and the server would stop at load with EFBIG.
    assert!(check_output(&config).status.success());
    let mut cmd = server_command(&config);
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(LIMIT),
                maximum: Some(LIMIT),
            };
            rustix::process::setrlimit(rustix::process::Resource::Fsize, limit)
                .map_err(std::io::Error::from)
        });
    }
    // An audit log just below the limit: its next lines pass it, and it
    // rotates early rather than refuse every call.
    let filler = format!("{}\n", json!({"tool": "filler", "path": "x".repeat(1000)}));
    std::fs::write(
        env.path("audit.log"),
        filler.repeat(LIMIT as usize / filler.len()),
    )
    .unwrap();
    let before = files(&env.path("ws"));
    let (client, pid, said) = start_command(cmd).await;
    let past = "y".repeat(300 * 1024);
    for (tool, args) in [
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": past}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "big.txt", "content": "z".repeat(100 * 1024),
                   "mode": "append"}),
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new.txt", "content": past}),
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "big.txt",
                   "edits": [{"old_text": "MARKER", "new_text": "y".repeat(100 * 1024)}]}),
        ),
    ] {
        let r = call(&client, tool, args).await;
        assert_refused(
            &r,
            "the file would be larger than the disk that holds root 'ws' or the server's file \
             size limit allows (EFBIG)",
        );
        assert!(text(&r).contains("Nothing was changed"), "{}", text(&r));
        assert_eq!(
            files(&env.path("ws")),
            before,
            "after {tool}: nothing changed, no temporary file left in the root, its staging \
             area or its trash"
        );
        assert!(
            rustix::process::test_kill_process(rustix::process::Pid::from_raw(pid as i32).unwrap())
                .is_ok(),
            "the server is alive after {tool}"
        );
    }
    // Still serving: a read, and a change within the limit (its trash
    // index and audit lines are far below it).
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "ws", "path": "big.txt", "tail": 1}),
    )
    .await;
    assert!(text(&r).contains("MARKER"), "{}", text(&r));
    call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "small.txt", "content": "fits\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read(env.path("ws/big.txt")).unwrap(),
        big.as_bytes()
    );
    client.cancel().await.unwrap();
    let said = said.await.unwrap();
    assert!(
        !said.contains("SIGXFSZ") && !said.contains("panicked"),
        "{said}"
    );
    let audit = audit(&env);
    assert!(
        audit
            .iter()
            .filter(|l| l["stopped"] == "disk" && l["decision"] == "allow")
            .count()
            >= 3,
        "{audit:?}"
    );
    assert!(audit.iter().all(|l| l["tool"] != "filler"), "{audit:?}");
    let rotated = std::fs::read_to_string(env.path("audit.log.1")).unwrap();
    assert!(rotated.lines().all(|l| l.contains("filler")));
}
