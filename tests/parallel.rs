//! Parallel calls lose nothing: agents send several calls at once, and two
//! servers may share a folder. The real binary over stdio (rmcp's client
//! sends the calls together): parallel edits of one file all land, parallel
//! overwrites keep every version exactly once, a directory deleted while
//! files are written below it loses nothing; the same through two server
//! processes on one root; a file changed from outside between an edit's
//! read and its publish (held there by the test hook) is handled as
//! docs/transactions.md says; calls on other files go on meanwhile; no
//! temporary file is ever seen under a root, and what a killed server left
//! in the staging area goes at the next start. The kill test is
//! `tests/crash.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::future::join_all;
use serde_json::{Value, json};

const WORKSPACE: &str = "audit_log = \"audit.log\"\n\
    [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n";

/// A file of `n` lines, `line NN: original`.
fn lines(n: usize) -> String {
    (0..n).map(|i| format!("line {i:02}: original\n")).collect()
}

fn edit(i: usize) -> Value {
    json!({"root": "ws", "path": "e.txt", "edits": [{
        "old_text": format!("line {i:02}: original"),
        "new_text": format!("line {i:02}: changed by call {i}"),
    }]})
}

/// Every line changed by its call, nothing else.
fn all_changed(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i:02}: changed by call {i}\n"))
        .collect()
}

/// Sends `calls` at once and returns their results in the same order.
async fn together(client: &Client, calls: Vec<(&str, Value)>) -> Vec<rmcp::model::CallToolResult> {
    join_all(
        calls
            .into_iter()
            .map(|(name, args)| call(client, name, args)),
    )
    .await
}

/// What the staging area holds: it must be empty between calls.
fn staged(env: &Env, root: &str) -> Vec<PathBuf> {
    let dir = env.path(&format!("{root}/.mcp-trash/.staging"));
    if !dir.exists() {
        return vec![];
    }
    let all: Vec<PathBuf> = snapshot_dir(&dir).into_iter().map(|(p, _)| p).collect();
    let holds = |p: &PathBuf| all.iter().any(|q| q != p && q.starts_with(p));
    all.iter()
        // A server's own directory stays while it runs, and so do the
        // call directories it keeps, empty, for its next calls.
        .filter(|p| p.components().count() > 2 || p.components().count() == 2 && holds(p))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_edits_of_one_file_all_land() {
    for n in [8, 32] {
        let env = Env::new();
        env.write("ws/e.txt", lines(n));
        let config = env.config(WORKSPACE);
        let client = start(&config).await;
        let results = together(&client, (0..n).map(|i| ("edit_file", edit(i))).collect()).await;
        for (i, r) in results.iter().enumerate() {
            assert!(!is_error(r), "call {i} of {n}: {}", text(r));
            assert!(
                text(r).starts_with("applied 1 edit(s) to 'e.txt'"),
                "{}",
                text(r)
            );
        }
        // On disk, not in the replies: every change is there.
        assert_eq!(
            std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
            all_changed(n),
            "{n} parallel edits"
        );
        // Each call kept the version it replaced: n versions, all different.
        let kept: Vec<_> = env.trash("ws");
        assert_eq!(kept.len(), n);
        let mut versions: Vec<_> = kept.iter().map(|(_, _, c)| c.clone()).collect();
        versions.sort();
        versions.dedup();
        assert_eq!(versions.len(), n, "two calls kept the same version");
        assert!(staged(&env, "ws").is_empty());
        client.cancel().await.unwrap();
    }
}

/// Parallel overwrites of one file: every version that was ever on disk is
/// the file or in the trash, exactly once, and each call's reported trash
/// path holds a version (the one it replaced: together they are all the
/// versions but the last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_overwrites_keep_every_version_once() {
    let env = Env::new();
    let version = |k: usize, size: usize| format!("version {k}\n").repeat(size / 10 + 1);
    env.write("ws/w.txt", version(0, 100));
    let config = env.config(WORKSPACE);
    let client = start(&config).await;
    for round in 0..3 {
        let base = round * 100;
        let sizes = [
            1 << 10,
            2 << 20,
            4 << 10,
            512 << 10,
            100,
            1 << 20,
            64 << 10,
            8,
        ];
        let sent: Vec<String> = (1..=sizes.len())
            .map(|k| version(base + k, sizes[k - 1]))
            .collect();
        let before = std::fs::read_to_string(env.path("ws/w.txt")).unwrap();
        let calls = sent
            .iter()
            .map(|c| {
                (
                    "write_file",
                    json!({"root": "ws", "path": "w.txt", "content": c}),
                )
            })
            .collect();
        let results = together(&client, calls).await;
        assert_every_version_kept_once(
            &env,
            "ws",
            "w.txt",
            before,
            &sent,
            &results,
            &format!("round {round}"),
        );
    }
    assert!(staged(&env, "ws").is_empty());
    client.cancel().await.unwrap();
}

/// Every regular file under `dir`, trash included, by content.
fn contents_under(dir: &Path) -> Vec<String> {
    snapshot_dir(dir)
        .into_iter()
        .filter_map(|(_, c)| c.map(|c| String::from_utf8_lossy(&c).into_owned()))
        .collect()
}

/// A directory deleted while files are written below it: whichever goes
/// first, every call answers what it did and nothing is lost (a file
/// written before the delete is in the trash with the directory; one
/// written after is in the directory made again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_deleted_while_files_are_written_below_it() {
    let env = Env::new();
    env.mkdir("ws");
    let config = env.config(WORKSPACE);
    let client = start(&config).await;
    for round in 0..5 {
        for i in 0..3 {
            env.write(&format!("ws/d/old-{i}.txt"), format!("old {round} {i}\n"));
        }
        let mut calls = vec![("delete_file", json!({"root": "ws", "path": "d"}))];
        for i in 0..6 {
            let content = format!("new {round} {i}\n");
            let path = format!("d/sub/new-{i}.txt");
            calls.insert(
                i % 3,
                (
                    "write_file",
                    json!({"root": "ws", "path": path, "content": content}),
                ),
            );
        }
        let results = together(&client, calls).await;
        for r in &results {
            assert!(!is_error(r), "round {round}: {}", text(r));
            let t = text(r);
            assert!(
                t.starts_with("deleted directory 'd'") || t.starts_with("wrote "),
                "round {round}: {t}"
            );
        }
        let everything = contents_under(&env.path("ws"));
        for i in 0..3 {
            let old = format!("old {round} {i}\n");
            assert!(everything.contains(&old), "round {round}: {old:?} lost");
        }
        for i in 0..6 {
            let new = format!("new {round} {i}\n");
            assert!(everything.contains(&new), "round {round}: {new:?} lost");
        }
        let _ = std::fs::remove_dir_all(env.path("ws/d"));
    }
    assert!(staged(&env, "ws").is_empty());
    client.cancel().await.unwrap();
}

/// Two servers on one folder (Claude Desktop and Claude Code on one
/// project): their edits of one file, sent together, all land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_on_one_root_lose_no_edit() {
    let env = Env::new();
    let n = 16;
    env.write("ws/e.txt", lines(n));
    let mut configs = Vec::new();
    for side in ["a", "b"] {
        let config = env.path(&format!("{side}/config.toml"));
        env.write(
            &format!("{side}/config.toml"),
            "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"../ws\"\nrole = \"workspace\"\n",
        );
        configs.push(config);
    }
    let a = start(&configs[0]).await;
    let b = start(&configs[1]).await;
    for round in 0..3 {
        std::fs::write(env.path("ws/e.txt"), lines(n)).unwrap();
        let calls = (0..n).map(|i| {
            let client = if i % 2 == 0 { &a } else { &b };
            call(client, "edit_file", edit(i))
        });
        let results = join_all(calls).await;
        for (i, r) in results.iter().enumerate() {
            assert!(!is_error(r), "round {round}, call {i}: {}", text(r));
        }
        assert_eq!(
            std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
            all_changed(n),
            "round {round}"
        );
    }
    // Both trash indexes of a shared stamp are whole: every version kept
    // lists once.
    let out = command()
        .args(["trash", "list", "--config"])
        .arg(&configs[0])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(listed, 3 * n, "{}", String::from_utf8_lossy(&out.stdout));
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// The test hook (`LOOMFS_TEST_HOOK_DIR`): a publish finding `armed` stops
/// there (renaming it `paused`) until `go` appears.
struct Hook {
    dir: PathBuf,
}

impl Hook {
    fn new(env: &Env) -> Hook {
        let dir = env.path("hook");
        std::fs::create_dir_all(&dir).unwrap();
        Hook { dir }
    }

    fn arm(&self) {
        std::fs::write(self.dir.join("armed"), "").unwrap();
    }

    /// Waits until a publish has stopped at the hook.
    async fn paused(&self) {
        for _ in 0..3000 {
            if self.dir.join("paused").exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("no publish reached the hook");
    }

    fn is_paused(&self) -> bool {
        self.dir.join("paused").exists()
    }

    fn go(&self) {
        std::fs::write(self.dir.join("go"), "").unwrap();
    }
}

/// The server with the hook, its client shared with the tasks that call.
async fn start_hooked(env: &Env) -> (Arc<Client>, Hook) {
    env.mkdir("ws");
    let hook = Hook::new(env);
    let config = env.config(WORKSPACE);
    let client = start_with_env(&config, &[("LOOMFS_TEST_HOOK_DIR", &hook.dir)]).await;
    (Arc::new(client), hook)
}

/// Runs `edit` on `ws/f.txt` holding `before`, held at its publish by the
/// hook while `outside` changes the file as another program would, and
/// returns the answer.
async fn edit_changed_from_outside(
    env: &Env,
    client: &Arc<Client>,
    hook: &Hook,
    edit: &Value,
    before: &str,
    outside: impl FnOnce(&Env),
) -> rmcp::model::CallToolResult {
    env.write("ws/f.txt", before);
    hook.arm();
    let pending = tokio::spawn({
        let client = Arc::clone(client);
        let args = edit.clone();
        async move { call(&client, "edit_file", args).await }
    });
    hook.paused().await;
    outside(env);
    hook.go();
    pending.await.unwrap()
}

/// An editor's atomic save of `content` over `ws/f.txt`: a new file renamed
/// over it.
fn saved_whole(env: &Env, content: &str) {
    std::fs::write(env.path("saved.tmp"), content).unwrap();
    std::fs::rename(env.path("saved.tmp"), env.path("ws/f.txt")).unwrap();
}

/// A file changed from outside (an editor, a build: no lock) between an
/// edit's read and its publish: the edit is applied again to the new
/// content when it still matches once, else the call fails naming the
/// conflict; never "edited" with a change lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outside_change_during_an_edit_is_never_lost() {
    let env = Env::new();
    let (client, hook) = start_hooked(&env).await;
    let edit_b = json!({"root": "ws", "path": "f.txt",
        "edits": [{"old_text": "b = 2", "new_text": "b = 20"}]});
    let file = || std::fs::read_to_string(env.path("ws/f.txt")).unwrap();
    let kept = |r: &rmcp::model::CallToolResult| {
        let previous = structured(r)["previous"].as_str().unwrap().to_string();
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap()
    };
    let before = "a = 1\nb = 2\nc = 3\n";

    // Changed in place on another line: both changes end up in the file,
    // and what the edit replaced, the outside version, is what it kept.
    let r = edit_changed_from_outside(&env, &client, &hook, &edit_b, before, |env| {
        std::fs::write(env.path("ws/f.txt"), "a = 100\nb = 2\nc = 3\n").unwrap()
    })
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("'f.txt' in root 'ws' was changed by someone else while the call ran"),
        "{}",
        text(&r)
    );
    assert_eq!(file(), "a = 100\nb = 20\nc = 3\n");
    assert_eq!(kept(&r), "a = 100\nb = 2\nc = 3\n");

    // Replaced whole by a version where the edited text is gone: the
    // conflict is named and the outside version stays.
    let r = edit_changed_from_outside(&env, &client, &hook, &edit_b, before, |env| {
        saved_whole(env, "a = 1\nb = 3\nc = 3\n")
    })
    .await;
    assert_refused(
        &r,
        "'f.txt' in root 'ws' was changed by someone else while the call ran",
    );
    assert!(text(&r).contains("read it again"), "{}", text(&r));
    assert_eq!(file(), "a = 1\nb = 3\nc = 3\n");

    // Replaced whole, the edited line still there: applied again, and the
    // outside version is the one kept.
    let r = edit_changed_from_outside(&env, &client, &hook, &edit_b, before, |env| {
        saved_whole(env, "a = 1\nb = 2\nc = 300\n")
    })
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(file(), "a = 1\nb = 20\nc = 300\n");
    assert_eq!(kept(&r), "a = 1\nb = 2\nc = 300\n");
    assert!(staged(&env, "ws").is_empty());
}

/// While one call is held at its publish (the hook), with its lock and its
/// slot: a call on another file runs and answers (disjoint calls run in
/// parallel), a read of the held file answers (reads never wait), and a
/// call on the held file waits for it. Checked by the order of the
/// answers, not by timing: the held call cannot answer before the test
/// lets it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disjoint_calls_run_while_one_is_held() {
    let env = Env::new();
    env.write("ws/a.txt", "one\n").write("ws/b.txt", "two\n");
    let (client, hook) = start_hooked(&env).await;
    hook.arm();
    let held = tokio::spawn({
        let client = Arc::clone(&client);
        async move {
            call(
                &client,
                "write_file",
                json!({"root": "ws", "path": "a.txt", "content": "A1\n"}),
            )
            .await
        }
    });
    hook.paused().await;
    // The held call's temporary file is complete and out of sight.
    let listing = call(&client, "list_directory", json!({"root": "ws"})).await;
    assert!(
        !text(&listing).contains("loom-fs-write"),
        "{}",
        text(&listing)
    );
    assert_eq!(listed_paths(&listing), ["a.txt", "b.txt"]);
    let other = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "b.txt", "content": "B1\n"}),
    )
    .await;
    assert!(!is_error(&other), "{}", text(&other));
    let read = call(&client, "read_file", json!({"root": "ws", "path": "a.txt"})).await;
    assert_eq!(text(&read), "one\n");
    assert!(
        hook.is_paused() && !held.is_finished(),
        "the held call went on"
    );
    // A call on the held file: it must wait; a later disjoint one does not.
    let same = tokio::spawn({
        let client = Arc::clone(&client);
        async move {
            call(
                &client,
                "write_file",
                json!({"root": "ws", "path": "a.txt", "content": "A2\n"}),
            )
            .await
        }
    });
    let later = call(
        &client,
        "create_directory",
        json!({"root": "ws", "path": "c"}),
    )
    .await;
    assert!(!is_error(&later), "{}", text(&later));
    assert!(!same.is_finished(), "a call on the held file did not wait");
    hook.go();
    let first = held.await.unwrap();
    let second = same.await.unwrap();
    assert!(!is_error(&first) && !is_error(&second));
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "A2\n"
    );
    // Each kept exactly what it replaced.
    let kept_by = |r: &rmcp::model::CallToolResult| {
        let previous = structured(r)["previous"].as_str().unwrap().to_string();
        std::fs::read_to_string(env.path(&format!("ws/{previous}"))).unwrap()
    };
    assert_eq!(kept_by(&first), "one\n");
    assert_eq!(kept_by(&second), "A1\n");
}

/// What a killed server left in the staging area goes at the next start;
/// another live server's area stays; `trash purge` sweeps the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_servers_staging_files_go_at_the_next_start() {
    let env = Env::new();
    env.write("ws/f.txt", "keep\n");
    let dead = env.path("ws/.mcp-trash/.staging/4242-dead");
    std::fs::create_dir_all(dead.join("3")).unwrap();
    std::fs::write(
        dead.join("3/.loom-fs-write-0123456789abcdef"),
        "half a file",
    )
    .unwrap();
    // A live server's area: locked by a process that holds it open.
    let live = env.path("ws/.mcp-trash/.staging/4243-live");
    std::fs::create_dir_all(live.join("1")).unwrap();
    std::fs::write(live.join("1/.loom-fs-write-fedcba9876543210"), "half").unwrap();
    // A dead server that was idle: only the emptied call directories it
    // kept for reuse. Removed, and not counted as unfinished work.
    let idle = env.path("ws/.mcp-trash/.staging/4244-idle");
    std::fs::create_dir_all(idle.join("1")).unwrap();
    std::fs::create_dir_all(idle.join("2")).unwrap();
    let holder = std::fs::File::open(&live).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let config = env.config(WORKSPACE);
    let client = start(&config).await;
    // Tools are served once the start-up work is done.
    let _ = tools(&client).await;
    assert!(!dead.exists(), "a dead server's staging files stayed");
    assert!(
        !idle.exists(),
        "an idle dead server's call directories stayed"
    );
    assert!(
        live.join("1/.loom-fs-write-fedcba9876543210").exists(),
        "a live server's staging files were removed"
    );
    client.cancel().await.unwrap();
    drop(holder);
    // `trash purge` sweeps too (the live one is dead now).
    let out = command()
        .args(["trash", "purge", "--older-than", "1d", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("removed the unfinished files of 1 stopped server"),
        "{stdout}"
    );
    assert!(!live.exists());
    assert_eq!(
        std::fs::read_to_string(env.path("ws/f.txt")).unwrap(),
        "keep\n"
    );
}

/// The server with the hook over plain JSON-RPC lines on stdio, its
/// handshake done: the process, its stdin and its stdout.
fn stdio_hooked(
    config: &Path,
    hook: &Hook,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::{BufRead, Write};
    let mut child = command()
        .arg("--config")
        .arg(config)
        .env("LOOMFS_TEST_HOOK_DIR", &hook.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    writeln!(stdin, "{initialize}").unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":0"), "{line}");
    (child, stdin, stdout)
}

/// A call waiting for a lock waits at most the tool timeout, then is
/// refused naming the place and the limit (audited as `locked`); a call
/// cancelled while it waits never runs. Plain JSON-RPC lines over stdio,
/// so that the cancellation reaches the server after its request.
#[test]
fn a_wait_for_a_lock_ends_at_the_deadline_or_when_cancelled() {
    use std::io::{BufRead, Write};
    let env = Env::new();
    env.write("ws/a.txt", "one\n");
    let hook = Hook::new(&env);
    let config = env.config(
        "audit_log = \"audit.log\"\ntool_timeout_ms = 1500\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let (mut child, mut stdin, mut stdout) = stdio_hooked(&config, &hook);
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let tool = |id: u32, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
    };
    hook.arm();
    send(tool(
        1,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "A1\n"}),
    ));
    let mut line = String::new();
    for _ in 0..3000 {
        if hook.is_paused() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(hook.is_paused(), "no publish reached the hook");
    // Cancelled while it waits: it never runs (and, cancelled, gets no
    // answer).
    send(tool(
        2,
        "write_file",
        json!({"root": "ws", "path": "a.txt", "content": "CANCELLED\n"}),
    ));
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "changed my mind"}}),
    );
    // Not cancelled: refused once the wait reaches the tool timeout.
    send(tool(
        3,
        "edit_file",
        json!({"root": "ws", "path": "a.txt",
        "edits": [{"old_text": "one", "new_text": "two"}]}),
    ));
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let busy: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(busy["id"], 3, "{busy}");
    assert_eq!(busy["result"]["isError"], true, "{busy}");
    let message = busy["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with("'a.txt' in root 'ws' is being changed by another call")
            && message.contains("tool_timeout_ms"),
        "{message}"
    );
    assert!(hook.is_paused(), "the held call went on");
    hook.go();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    drop(stdin);
    assert_exits_cleanly(&mut child);
    let rules: Vec<String> = audit(&env)
        .iter()
        .filter(|l| l["decision"] == "deny")
        .map(|l| format!("{} {}", l["tool"], l["rule"]))
        .collect();
    assert_eq!(
        rules,
        [r#""write_file" "cancelled""#, r#""edit_file" "locked""#]
    );
    let everything = contents_under(&env.path("ws"));
    assert!(
        !everything.iter().any(|c| c.contains("CANCELLED")),
        "a cancelled call ran"
    );
    assert!(
        !everything.iter().any(|c| c.contains("two")),
        "a refused call ran"
    );
}

/// A write still running when the session ends (stdin closed) finishes
/// before the process does: the server waits for its guest, and the new
/// content is on disk once it has exited. Plain JSON-RPC lines over stdio.
#[test]
fn a_write_in_flight_when_stdin_closes_lands_before_the_exit() {
    use std::io::Write;
    let env = Env::new();
    env.write("ws/a.txt", "old\n");
    let hook = Hook::new(&env);
    let config = env.config(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let (mut child, mut stdin, _stdout) = stdio_hooked(&config, &hook);
    hook.arm();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "write_file", "arguments": {"root": "ws", "path": "a.txt", "content": "new\n"}}})
    )
    .unwrap();
    for _ in 0..3000 {
        if hook.is_paused() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(hook.is_paused(), "no publish reached the hook");
    // The session ends with the write held at its publish. Past the 5 s
    // the server gives its last answers to be written, it still waits.
    drop(stdin);
    std::thread::sleep(Duration::from_secs(6));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server exited with a write in flight"
    );
    hook.go();
    assert_exits_cleanly(&mut child);
    assert_eq!(
        std::fs::read_to_string(env.path("ws/a.txt")).unwrap(),
        "new\n",
        "the write was lost"
    );
}

/// Another process's lock is waited for. The test holds, as another server
/// would, the byte that stands for `e.txt` in the root's `.mcp-trash/.locks`
/// (an OFD lock on the first 62 bits of the path's SHA-256, see
/// `host/src/store/locks.rs`): an edit of `e.txt` waits for it and is refused at
/// the tool timeout, a write of another file goes ahead; once the lock is
/// released, the edit runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_another_process_is_waited_for() {
    use sha2::{Digest, Sha256};
    use std::os::fd::AsRawFd;
    let env = Env::new();
    env.write("ws/e.txt", "one\n").mkdir("ws/.mcp-trash");
    let config = env.config(
        "audit_log = \"audit.log\"\ntool_timeout_ms = 1000\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
    );
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(env.path("ws/.mcp-trash/.locks"))
        .unwrap();
    let digest = Sha256::digest(b"e.txt");
    let byte = (u64::from_be_bytes(digest[..8].try_into().unwrap()) >> 2) as i64;
    // SAFETY: a zeroed flock is valid; the descriptor is open.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = byte;
    lock.l_len = 1;
    let held = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) };
    assert_eq!(held, 0, "{}", std::io::Error::last_os_error());
    let client = start(&config).await;
    let edit = json!({"root": "ws", "path": "e.txt",
        "edits": [{"old_text": "one", "new_text": "two"}]});
    let r = call(&client, "edit_file", edit.clone()).await;
    assert_refused(&r, "'e.txt' in root 'ws' is being changed by another call");
    assert_eq!(
        std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
        "one\n"
    );
    let other = call(
        &client,
        "write_file",
        json!({"root": "ws", "path": "f.txt", "content": "f\n"}),
    )
    .await;
    assert!(!is_error(&other), "{}", text(&other));
    drop(file);
    let r = call(&client, "edit_file", edit).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(env.path("ws/e.txt")).unwrap(),
        "two\n"
    );
    client.cancel().await.unwrap();
}
