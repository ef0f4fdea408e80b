//! The kernel sandbox end to end (`landlock = true`): the real binary
//! restricts itself and still serves every kind of tool (reads, writes that
//! keep history, deletes, searches, a third-party component) with its audit
//! log rotating and its cache only read; every one of its threads is
//! restricted; `check` tells whether the sandbox is on; and serving as root
//! is refused without `--allow-root`. The proof that the kernel refuses what
//! the grants leave out, from inside a restricted process, is the unit test
//! `sandbox::tests::the_kernel_refuses_what_the_grants_leave_out`.
//!
//! Where the kernel has no Landlock the sandboxed tests say SKIPPED and pass;
//! where the tests do not run as root, so does the root test.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;
use serde_json::{Value, json};

fn landlock_available(test: &str) -> bool {
    let available = loom_fs_mcp::sys::sandbox::available();
    if !available {
        eprintln!("SKIPPED: kernel has no Landlock; {test} was not run");
    }
    available
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A reference root, a workspace, the audit log in a directory of its own
/// (rotated every 4 KiB), and a file outside; `extra` ends the config.
fn sandboxed(env: &Env, extra: &str) -> PathBuf {
    env.write("docs/readme.md", "docs\n")
        .write("docs/guide.md", "# Guide\n\nsome words here\n")
        .write("ws/a.txt", "old a\n")
        .write("ws/tree/one.txt", "1\n")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .mkdir("logs");
    env.config(&format!(
        "audit_log = \"logs/audit.log\"\n\
         audit_log_max_bytes = 4096\n\
         audit_log_backups = 2\n\
         landlock = true\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         {extra}"
    ))
}

/// `NoNewPrivs` of every thread of `pid`, by thread name. The sandbox sets
/// it on the thread that restricts itself, in the same step, and a thread
/// inherits it from the one that starts it: a thread showing 0 was running
/// before the restriction, and is not restricted.
fn no_new_privs(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        // A thread that ended since the listing has nothing to say.
        let (Ok(name), Ok(status)) = (
            std::fs::read_to_string(task.join("comm")),
            std::fs::read_to_string(task.join("status")),
        ) else {
            continue;
        };
        let flag = status
            .lines()
            .find_map(|l| l.strip_prefix("NoNewPrivs:"))
            .unwrap_or("?")
            .trim()
            .to_string();
        out.push((name.trim().to_string(), flag));
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_sandboxed_server_serves_every_kind_of_tool() {
    if !landlock_available("a_sandboxed_server_serves_every_kind_of_tool") {
        return;
    }
    let env = Env::new();
    let wasm = build_wasm("examples/text-stats", "text_stats.wasm");
    // Signed: its signature is read at load, after the sandbox is on.
    let author = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let signature = minisign::sign(Some(&author.pk), &author.sk, &wasm[..], None, None)
        .unwrap()
        .into_string();
    env.write("tools/text_stats.wasm", &wasm)
        .write("tools/text_stats.wasm.minisig", signature);
    // A root that may delete but not write: deletes work; no index is written.
    env.write("del/tree/x.txt", "x\n");
    let config = sandboxed(
        &env,
        &("[[roots]]\nname = \"del\"\npath = \"del\"\nrole = \"workspace\"\n\
           permissions = [\"read\", \"delete\"]\n"
            .to_string()
            + &pinned("tools/text_stats.wasm", &wasm)
            + &format!(
                "signed = true\n[trust]\nkeys = [\"{}\"]\n",
                author.pk.to_base64()
            )),
    );
    env.fifo("ws/pipe");
    let outside = env.snapshot_of("outside");
    let (client, pid) =
        start_with_pid(&config, &[], rmcp::service::ClientLifecycleMode::Initialize).await;
    let mut results = Vec::new();

    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "readme.md"}),
    )
    .await;
    assert_eq!(structured(&r)["content"], "docs\n");
    results.push(r);

    // A replacement keeps the old content in the trash (a hard link across
    // directories, then a rename over the target).
    let r = call_ok(
        &client,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "new a\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "new a\n"
    );
    let kept = structured(&r)["previous"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(env.path("ws").join(&kept)).unwrap(),
        "old a\n"
    );
    results.push(r);

    for (tool, args) in [
        (
            "edit_file",
            json!({"root": "ws", "path": "a.txt", "edits": [{"old_text": "new", "new_text": "edited"}]}),
        ),
        (
            "create_directory",
            json!({"root": "ws", "path": "made/deep"}),
        ),
        (
            "move_file",
            json!({"root": "ws", "source": "tree", "destination": "moved/tree"}),
        ),
        (
            "copy_file",
            json!({"root": "docs", "source": "readme.md", "destination": "copied.md", "destination_root": "ws"}),
        ),
        ("delete_file", json!({"root": "ws", "path": "a.txt"})),
        // A FIFO moves into the trash like any entry.
        ("delete_file", json!({"root": "ws", "path": "pipe"})),
        ("delete_file", json!({"root": "del", "path": "tree"})),
    ] {
        let r = call(&client, tool, args.clone()).await;
        assert!(!is_error(&r), "{tool} {args}: {r:?}");
        results.push(r);
    }
    assert_eq!(
        std::fs::read_to_string(env.path("ws/moved/tree/one.txt")).unwrap(),
        "1\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("ws/copied.md")).unwrap(),
        "docs\n"
    );
    assert!(env.path("ws/made/deep").is_dir());
    assert!(!env.path("ws/a.txt").exists() && !env.path("ws/pipe").exists());
    let trashed: Vec<String> = env
        .trash("ws")
        .into_iter()
        .map(|(_, p, _)| p.display().to_string())
        .collect();
    assert!(trashed.iter().any(|p| p == "pipe"), "{trashed:?}");
    // The delete-only root's trash: the tree, without an index (no file is
    // written in a root without write) and nothing else.
    let trash: Vec<String> = std::fs::read_dir(env.path("del/.mcp-trash"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        matches!(&trash[..], [stamp] if stamp.ends_with('Z')),
        "{trash:?}"
    );
    assert_eq!(
        std::fs::read_dir(env.path("del/.mcp-trash").join(&trash[0]))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>(),
        ["tree"]
    );
    // The workspace's trash has its indexes.
    assert!(
        std::fs::read_dir(env.path("ws/.mcp-trash"))
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".json"))
    );

    let r = call_ok(
        &client,
        "search_files",
        json!({"root": "docs", "pattern": "*.md", "contains": "words"}),
    )
    .await;
    assert_eq!(structured(&r)["matches"][0]["path"], "guide.md");
    results.push(r);

    // The third-party component was read under the sandbox and runs.
    let r = call_ok(
        &client,
        "text_stats",
        json!({"root": "docs", "path": "guide.md"}),
    )
    .await;
    assert_eq!(structured(&r)["lines"], 3);
    results.push(r);

    // Enough audit lines to rotate twice.
    for _ in 0..60 {
        call_ok(
            &client,
            "read_file",
            json!({"root": "docs", "path": "readme.md"}),
        )
        .await;
    }

    // Every thread of the server (the epoch ticker and tokio's workers
    // among them) started after the restriction.
    let threads = no_new_privs(pid);
    assert!(
        threads.iter().any(|(name, _)| name == "epoch-ticker"),
        "{threads:?}"
    );
    // (Proof only where the test itself runs without NoNewPrivs.)
    if std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .contains("NoNewPrivs:\t0")
    {
        assert!(threads.iter().all(|(_, flag)| flag == "1"), "{threads:?}");
    }
    client.cancel().await.unwrap();

    for file in ["logs/audit.log", "logs/audit.log.1", "logs/audit.log.2"] {
        let text = std::fs::read_to_string(env.path(file)).unwrap();
        assert!(!text.is_empty(), "{file} is empty");
        for line in text.lines() {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{file}: {e}: {line}"));
        }
    }
    assert!(!env.path("logs/audit.log.3").exists());
    assert_eq!(env.snapshot_of("outside"), outside);
    assert_clean(&env, &results);
}

/// Raw JSON-RPC over the binary's stdio, for its stderr and its pid.
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: String,
    /// What the server writes on stderr after its banner, once it exits.
    rest: std::thread::JoinHandle<String>,
}

impl Raw {
    fn start(config: &Path, cache: &Path) -> Raw {
        let mut child = command()
            .arg("--config")
            .arg(config)
            .env("LOOMFS_CACHE_DIR", cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stderr, rest) = stderr_until_then(&mut child, "serving MCP over stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Raw {
            child,
            stdin,
            stdout,
            stderr,
            rest,
        }
    }

    /// Initializes and reads `docs/readme.md`, so every kind of thread has
    /// run (the loader, tokio's workers, a blocking thread for the call).
    fn read_once(&mut self) -> Value {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":"readme.md"}}}"#,
        ] {
            writeln!(self.stdin, "{line}").unwrap();
        }
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "stdout closed"
            );
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == 2 {
                return msg;
            }
        }
    }

    /// Closes stdin, waits for a clean exit, and returns what the server
    /// wrote on stderr after its banner.
    fn finish(self) -> String {
        let Raw {
            mut child,
            stdin,
            rest,
            ..
        } = self;
        drop(stdin);
        assert_exits_cleanly(&mut child);
        rest.join().unwrap()
    }
}

/// A root that may delete but not write cannot hold a publish journal (a
/// file written there) under the sandbox: a call removing one entry there
/// needs none and works; a component removing two is refused whole, naming
/// the root, and nothing changes.
#[tokio::test]
async fn a_delete_only_root_refuses_a_removal_of_several_entries_whole() {
    if !landlock_available("a_delete_only_root_refuses_a_removal_of_several_entries_whole") {
        return;
    }
    let env = Env::new();
    let wasm = build_wasm_with(
        "tests/fixtures/hostile-tool",
        "hostile_tool.wasm",
        &["deletes"],
    );
    env.write("tools/hostile.wasm", &wasm)
        .write("del/x1.txt", "1\n")
        .write("del/x2.txt", "2\n")
        .write("del/x3.txt", "3\n");
    let config = sandboxed(
        &env,
        &("[[roots]]\nname = \"del\"\npath = \"del\"\nrole = \"workspace\"\n\
           permissions = [\"read\", \"delete\"]\n"
            .to_string()
            + &pinned("tools/hostile.wasm", &wasm)
            + "roots = [\"del\"]\n"),
    );
    let before = env.snapshot_of("del");
    let client = start(&config).await;
    let r = call(
        &client,
        "hostile",
        json!({"root": "del", "write_path": "x1.txt", "attack": "raw_unlink_many",
               "paths": ["x1.txt", "x2.txt"]}),
    )
    .await;
    assert!(is_error(&r), "{r:?}");
    assert!(
        text(&r).contains("root 'del'") && text(&r).contains("nothing was changed"),
        "{}",
        text(&r)
    );
    // Nothing changed for the user, and nothing was kept: the trash holds
    // only the host's staging area.
    let visible = |env: &Env| -> Vec<_> {
        env.snapshot_of("del")
            .into_iter()
            .filter(|(p, _)| !p.starts_with(".mcp-trash"))
            .collect()
    };
    assert_eq!(visible(&env), before);
    let trash: Vec<_> = std::fs::read_dir(env.path("del/.mcp-trash"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(trash.iter().all(|n| n == ".staging"), "{trash:?}");
    // One removal needs no journal.
    let r = call(
        &client,
        "hostile",
        json!({"root": "del", "write_path": "x3.txt", "attack": "raw_unlink_many",
               "paths": ["x3.txt"]}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(!env.path("del/x3.txt").exists());
    assert!(env.path("del/x1.txt").exists() && env.path("del/x2.txt").exists());
    client.cancel().await.unwrap();
}

#[test]
fn the_start_says_the_process_is_restricted_and_every_thread_is() {
    if !landlock_available("the_start_says_the_process_is_restricted_and_every_thread_is") {
        return;
    }
    let env = Env::new();
    let config = sandboxed(&env, "");
    // A cache of its own, empty: the sandboxed server compiles what is not
    // cached and never writes the cache.
    let cache = env.path("cache");
    std::fs::create_dir(&cache).unwrap();
    let mut server = Raw::start(&config, &cache);
    assert!(
        server.stderr.lines().any(|l| l.starts_with(
            "landlock: process restricted to 2 roots, the audit log and the cache (read-only)"
        )),
        "{}",
        server.stderr
    );
    assert!(!server.stderr.contains("warning:"), "{}", server.stderr);
    let answer = server.read_once();
    assert_eq!(
        answer["result"]["structuredContent"]["content"], "docs\n",
        "{answer}"
    );
    let threads = no_new_privs(server.child.id());
    assert!(threads.len() > 2, "{threads:?}");
    assert!(threads.iter().all(|(_, flag)| flag == "1"), "{threads:?}");
    let rest = server.finish();
    assert!(
        rest.contains("landlock: components not in the cache were compiled and not cached"),
        "{rest}"
    );
    let cwasm = || {
        std::fs::read_dir(&cache)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cwasm")
            })
            .count()
    };
    assert_eq!(
        cwasm(),
        0,
        "a sandboxed server writes no code for later starts"
    );
    // `check` (not sandboxed) fills the cache, as the hint says; the next
    // sandboxed start then compiles nothing.
    let out = command()
        .args(["check", "--config"])
        .arg(&config)
        .env("LOOMFS_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        cwasm(),
        loom_fs_mcp::runtime::BUILTINS.len(),
        "every built-in component cached"
    );
    let mut server = Raw::start(&config, &cache);
    server.read_once();
    let rest = server.finish();
    assert!(!rest.contains("not cached"), "{rest}");

    // The control: without the sandbox, no line, and the threads are as the
    // test's own (NoNewPrivs 0 unless something above already set it).
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let plain = env.config("[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n");
    let mut server = Raw::start(&plain, &cache);
    assert!(!server.stderr.contains("landlock"), "{}", server.stderr);
    server.read_once();
    if own.contains("NoNewPrivs:\t0") {
        let threads = no_new_privs(server.child.id());
        assert!(threads.iter().all(|(_, flag)| flag == "0"), "{threads:?}");
    }
    server.finish();
}

#[test]
fn check_says_whether_the_sandbox_is_on_and_what_it_would_widen() {
    let env = Env::new();
    let config = sandboxed(&env, "");
    let (ok, stdout) = check(&config);
    assert!(ok, "{stdout}");
    assert!(
        stdout.lines().any(|l| l
            == "landlock: on: serve restricts itself to its roots, the audit log and the cache \
                (read-only)"),
        "{stdout}"
    );
    assert!(!stdout.contains("audit log's directory"), "{stdout}");
    // An audit log in a directory of other files: granted whole, a warning.
    env.write("shared/notes.txt", "not the log's\n");
    let shared = env.config(
        "audit_log = \"shared/audit.log\"\nlandlock = true\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let (ok, stdout) = check(&shared);
    assert!(ok, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "  the audit log's directory {} holds other files: the kernel sandbox lets the \
             server create, write and remove files anywhere under it; give the audit log a \
             directory of its own",
            env.path("shared").display()
        )),
        "{stdout}"
    );
    // An audit log beside the roots: its directory holds a root, whose role
    // the grant would override. Refused by check and by serve.
    let over = env.config(
        "audit_log = \"audit.log\"\nlandlock = true\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let refusal = format!(
        "the audit log's directory {} holds root 'docs': the kernel sandbox would let the \
         server write there; give the audit log a directory of its own",
        env.dir.display()
    );
    let out = command()
        .args(["check", "--config"])
        .arg(&over)
        .output()
        .unwrap();
    assert_fails_with(&out, &refusal);
    let out = command()
        .arg("--config")
        .arg(&over)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_fails_with(&out, &refusal);
    assert!(out.stdout.is_empty());
    let plain = env.config("[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n");
    let (_, stdout) = check(&plain);
    assert!(stdout.lines().any(|l| l == "landlock: off"), "{stdout}");
}

#[test]
fn serving_as_root_needs_allow_root() {
    if !is_root() {
        eprintln!("SKIPPED: not running as root; the root refusal was not tested");
        return;
    }
    let env = Env::new();
    env.write("docs/readme.md", "docs\n");
    let config = env.config("[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n");
    let serve = |allow: Option<&str>, args: &[&str]| {
        let mut cmd = command();
        cmd.env_remove("LOOMFS_ALLOW_ROOT");
        if let Some(value) = allow {
            cmd.env("LOOMFS_ALLOW_ROOT", value);
        }
        cmd.arg("--config")
            .arg(&config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for (allow, args) in [(None, &[][..]), (Some("0"), &[]), (Some("no"), &[])] {
        let out = serve(allow, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{allow:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "loom-fs-mcp: refusing to run as root: root bypasses file permissions, so a bug \
             in the server could reach any file on this machine; run loom-fs-mcp as an \
             ordinary user, or pass --allow-root (LOOMFS_ALLOW_ROOT=1) to accept the risk",
            "{allow:?}"
        );
        assert!(out.stdout.is_empty());
    }
    // Accepted: the server starts (and, with no client on its stdin, ends).
    for (allow, args) in [
        (None, &["--allow-root"][..]),
        (Some("1"), &[]),
        (Some("yes"), &[]),
    ] {
        let out = serve(allow, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("serving MCP over stdio") && !stderr.contains("refusing"),
            "{allow:?} {args:?}: {stderr}"
        );
    }
    // check does not refuse: it warns.
    let out = command()
        .env_remove("LOOMFS_ALLOW_ROOT")
        .arg("check")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.lines().any(|l| l
            == "  running as root: root bypasses file permissions, so a bug in the server could \
                reach any file on this machine; serve refuses to start unless --allow-root"),
        "{stdout}"
    );
}
