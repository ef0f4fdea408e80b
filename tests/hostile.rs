//! Hostile end to end: the real binary attacked over MCP stdio. Special
//! files, huge and growing files, hostile argument values in every field,
//! malformed JSON-RPC lines, and probes of the disk outside the roots.
//!
//! Every test checks afterwards that no canary content reached a response,
//! that nothing outside the root changed, and that a harmless call still
//! works. Every response goes through the harness's host-path scan.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::net::UnixListener;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use common::*;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

/// No call or read may take longer than this.
const LIMIT: Duration = Duration::from_secs(20);
/// Every canary's content starts with this; no response may hold it.
const CANARY: &str = "CANARY-";
/// Longest error text a model may be shown.
const MAX_ERROR_TEXT: usize = 5000;

/// What a `tools/call` got back.
#[derive(Debug)]
enum Answer {
    Tool(CallToolResult),
    Rpc {
        code: i32,
        message: String,
    },
    /// Anything else: a dropped session, a transport error.
    Broken(String),
}

impl Answer {
    fn tool(&self, what: &str) -> &CallToolResult {
        match self {
            Answer::Tool(r) => r,
            other => panic!(
                "{what}: expected a tool result, got {}",
                clip(&format!("{other:?}"))
            ),
        }
    }
}

/// At most 300 characters of `s`, for assertion messages (some arguments
/// and answers are megabytes long).
fn clip(s: &str) -> String {
    match s.char_indices().nth(300) {
        Some((cut, _)) => format!("{}… ({} bytes)", &s[..cut], s.len()),
        None => s.to_string(),
    }
}

/// Calls `name` with `args` (which must be an object), within [`LIMIT`];
/// scans the answer for host paths and canary content.
async fn ask(client: &Client, name: &str, args: Value) -> Answer {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(map);
    let answer = match tokio::time::timeout(LIMIT, client.call_tool(params)).await {
        Err(_) => panic!("tools/call {name} did not answer within {LIMIT:?}"),
        Ok(Ok(r)) => Answer::Tool(r),
        Ok(Err(ServiceError::McpError(e))) => Answer::Rpc {
            code: e.code.0,
            message: e.message.into_owned(),
        },
        Ok(Err(e)) => Answer::Broken(e.to_string()),
    };
    let seen = match &answer {
        Answer::Tool(r) => serde_json::to_string(r).unwrap(),
        Answer::Rpc { code, message } => format!("{code} {message}"),
        Answer::Broken(e) => e.clone(),
    };
    scan(&seen);
    assert!(
        !seen.contains(CANARY),
        "canary content in the answer to {name}: {}",
        clip(&seen)
    );
    answer
}

/// Asserts a tool error whose text holds `needle`.
fn refused(answer: &Answer, what: &str, needle: &str) {
    let r = answer.tool(what);
    let t = text(r);
    assert!(
        is_error(r) && t.contains(needle),
        "{what}: expected an error holding {needle:?}, got (isError {:?}) {:?}",
        r.is_error,
        clip(&t)
    );
}

/// A harmless read still answers.
async fn still_fine(client: &Client, root: &str, path: &str, content: &str) {
    let a = ask(client, "read_file", json!({"root": root, "path": path})).await;
    let r = a.tool("the harmless read afterwards");
    assert!(
        !is_error(r),
        "the harmless read afterwards failed: {}",
        text(r)
    );
    assert_eq!(structured(r)["content"], content);
}

/// A workspace root `ws` with a normal file, and a canary outside it.
fn workspace() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/ok.txt", "fine\n")
        .write("outside/canary.txt", "CANARY-OUTSIDE\n")
        .write("outside/dir/inner.txt", "CANARY-INNER\n");
    let config = env.config(WS);
    (env, config)
}

// ---------------------------------------------------------------------------
// a. special files

#[tokio::test]
async fn special_files_are_refused_by_every_tool_that_opens_files() {
    let (env, config) = workspace();
    env.fifo("ws/pipe").symlink("pipe", "ws/pipe_link");
    let _listener = UnixListener::bind(env.path("ws/sock")).expect("bind a socket in the root");
    env.symlink("sock", "ws/sock_link");
    let mut specials = vec![("pipe", "fifo"), ("sock", "socket")];
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        env.path("ws/null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    ) {
        Ok(()) => {
            env.symlink("null", "ws/null_link");
            specials.push(("null", "char_device"));
        }
        Err(rustix::io::Errno::PERM) => {
            eprintln!("mknod refused (EPERM): the character device part is skipped")
        }
        Err(e) => panic!("mknod: {e}"),
    }
    let before = env.snapshot();
    let outside = env.snapshot_of("outside");
    let client = start(&config).await;

    for &(name, kind) in &specials {
        for path in [name.to_string(), format!("{name}_link")] {
            let p = path.as_str();
            let a = ask(&client, "read_file", json!({"root": "ws", "path": p})).await;
            refused(
                &a,
                &format!("read_file {p}"),
                &format!("'{p}' is a {kind} (special file): never opened"),
            );
            let a = ask(&client, "read_file", json!({"root": "ws", "path": p})).await;
            refused(
                &a,
                &format!("read_media_file {p}"),
                &format!("'{p}' is a {kind} (special file): never opened"),
            );
            // In a batch, the special file is an error line and the others are read.
            let a = ask(
                &client,
                "read_file",
                json!({"root": "ws", "paths": [p, "ok.txt"]}),
            )
            .await;
            let r = a.tool(&format!("read_multiple_files {p}"));
            assert!(!is_error(r), "read_multiple_files {p}: {}", text(r));
            assert_eq!(
                structured(r)["files"][0]["error"],
                format!("'{p}' is a {kind} (special file): never opened"),
                "read_multiple_files {p}"
            );
            assert_eq!(structured(r)["files"][1]["content"], "fine\n");
            let a = ask(
                &client,
                "edit_file",
                json!({"root": "ws", "path": p, "edits": [{"old_text": "a", "new_text": "b"}]}),
            )
            .await;
            refused(
                &a,
                &format!("edit_file {p}"),
                &format!("'{p}' is a {kind} (special file): never edited"),
            );
            let a = ask(
                &client,
                "write_file",
                json!({"root": "ws", "path": p, "content": "more\n", "mode": "append"}),
            )
            .await;
            refused(
                &a,
                &format!("write_file append {p}"),
                &format!("'{p}' is a {kind} (special file): never written"),
            );
            let a = ask(
                &client,
                "copy_file",
                json!({"root": "ws", "source": p, "destination": "copy.txt"}),
            )
            .await;
            refused(
                &a,
                &format!("copy_file {p}"),
                &format!("'{p}' is a {kind} (special file): never copied"),
            );
            // get_file_info names the type of what the path leads to.
            let a = ask(&client, "get_file_info", json!({"root": "ws", "path": p})).await;
            let r = a.tool(&format!("get_file_info {p}"));
            assert!(!is_error(r), "get_file_info {p}: {}", text(r));
            assert_eq!(structured(r)["type"], kind, "get_file_info {p}");
        }
    }

    // A search reading contents skips them all without hanging.
    for pattern in ["*", "**"] {
        let a = ask(
            &client,
            "search_files",
            json!({"root": "ws", "pattern": pattern, "contains": "fine"}),
        )
        .await;
        let r = a.tool("search_files contains");
        assert!(!is_error(r), "search_files: {}", text(r));
        let matches: Vec<&str> = structured(r)["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap())
            .collect();
        assert_eq!(matches, ["ok.txt"], "{}", text(r));
    }

    // The listing shows each with its type.
    let a = ask(&client, "list_directory", json!({"root": "ws"})).await;
    let r = a.tool("list_directory");
    assert!(!is_error(r), "{}", text(r));
    let listed: Vec<(String, String)> = listing(r).into_iter().map(|e| (e.path, e.kind)).collect();
    let mut expected = vec![("ok.txt".to_string(), "file".to_string())];
    for &(name, kind) in &specials {
        expected.push((name.to_string(), kind.to_string()));
        expected.push((format!("{name}_link"), "symlink".to_string()));
    }
    expected.sort();
    assert_eq!(listed, expected);
    // So does the tree, by type, never opening one.
    let a = ask(
        &client,
        "list_directory",
        json!({"root": "ws", "tree": true}),
    )
    .await;
    let r = a.tool("list_directory tree");
    assert!(!is_error(r), "{}", text(r));
    let types = &structured(r)["types"];
    for &(name, kind) in &specials {
        assert_eq!(types[name], kind, "{}", text(r));
        assert_eq!(types[format!("{name}_link")], "symlink", "{}", text(r));
    }

    still_fine(&client, "ws", "ok.txt", "fine\n").await;
    assert_eq!(
        env.snapshot_of("outside"),
        outside,
        "nothing outside changed"
    );
    assert_eq!(env.snapshot(), before, "nothing changed at all");
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------
// b. huge and growing files

/// Line `n` (1-based) of the generated text files: 100 bytes.
fn big_line(n: u64) -> String {
    format!("line {n:010} {}\n", "t".repeat(83))
}

const MIB: u64 = 1 << 20;

#[tokio::test]
async fn huge_and_growing_files_never_load_whole() {
    let (env, config) = workspace();
    // 200 MiB of nothing.
    File::create(env.path("ws/sparse.bin"))
        .unwrap()
        .set_len(200 * MIB)
        .unwrap();
    // 200 MiB of real text lines.
    let lines = 200 * MIB / 100;
    {
        let mut w =
            BufWriter::with_capacity(1 << 20, File::create(env.path("ws/big.txt")).unwrap());
        for n in 1..=lines {
            w.write_all(big_line(n).as_bytes()).unwrap();
        }
        w.flush().unwrap();
    }
    assert_eq!(
        fs::metadata(env.path("ws/big.txt")).unwrap().len(),
        200 * MIB
    );
    // 2 MiB to start with, and a thread appending while the calls run.
    {
        let mut w = BufWriter::new(File::create(env.path("ws/growing.txt")).unwrap());
        for n in 1..=(2 * MIB / 100) {
            w.write_all(big_line(n).as_bytes()).unwrap();
        }
        w.flush().unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let grower = {
        let stop = Arc::clone(&stop);
        let path = env.path("ws/growing.txt");
        std::thread::spawn(move || {
            let mut f = OpenOptions::new().append(true).open(path).unwrap();
            let chunk: String = (0..640).map(big_line).collect();
            let mut written = 0u64;
            while !stop.load(Ordering::Relaxed) && written < 300 * MIB {
                f.write_all(chunk.as_bytes()).unwrap();
                written += chunk.len() as u64;
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let outside = env.snapshot_of("outside");
    let (client, pid) =
        start_with_pid(&config, &[], rmcp::service::ClientLifecycleMode::Initialize).await;
    // Warm: the components are loaded and one call has run.
    still_fine(&client, "ws", "ok.txt", "fine\n").await;
    let rss_before = peak_rss(pid);

    for path in ["sparse.bin", "big.txt", "growing.txt"] {
        let a = ask(&client, "read_file", json!({"root": "ws", "path": path})).await;
        refused(
            &a,
            &format!("read_file whole {path}"),
            "over this root's read limit of 1.0 MiB",
        );
        let t = text(a.tool(path));
        assert!(t.starts_with(&format!("'{path}' is ")), "{t}");
        let a = ask(
            &client,
            "edit_file",
            json!({"root": "ws", "path": path, "edits": [{"old_text": "line 0000000001", "new_text": "x"}]}),
        )
        .await;
        refused(
            &a,
            &format!("edit_file {path}"),
            "over this root's read limit of 1.0 MiB; it cannot be edited whole",
        );
    }
    assert!(
        text(
            ask(
                &client,
                "read_file",
                json!({"root": "ws", "path": "big.txt"})
            )
            .await
            .tool("big.txt")
        )
        .contains("'big.txt' is 200.0 MiB, over this root's read limit of 1.0 MiB")
    );

    // By range: works, far into the file and at its end.
    for (args, first) in [
        (json!({"offset": 1_000_000, "limit": 3}), 1_000_000),
        (json!({"offset": 1, "limit": 2}), 1),
        (json!({"tail": 2}), lines - 1),
    ] {
        let tail = args.get("tail").is_some();
        let mut full = json!({"root": "ws", "path": "big.txt"});
        full.as_object_mut()
            .unwrap()
            .extend(args.as_object().unwrap().clone());
        let a = ask(&client, "read_file", full).await;
        let r = a.tool(&format!("read_file big.txt {args}"));
        assert!(!is_error(r), "read_file big.txt {args}: {}", text(r));
        let content = structured(r)["content"].as_str().unwrap();
        assert!(
            content.starts_with(&big_line(first)),
            "read_file big.txt {args}: {}",
            clip(content)
        );
        // A tail of a file over the read limit does not know its line
        // numbers (start_line 0).
        if !tail {
            assert_eq!(structured(r)["start_line"], first);
        }
    }
    for args in [json!({"offset": 1, "limit": 2}), json!({"tail": 1})] {
        let mut full = json!({"root": "ws", "path": "growing.txt"});
        full.as_object_mut()
            .unwrap()
            .extend(args.as_object().unwrap().clone());
        let a = ask(&client, "read_file", full).await;
        let r = a.tool(&format!("read_file growing.txt {args}"));
        assert!(!is_error(r), "read_file growing.txt {args}: {}", text(r));
        assert!(
            structured(r)["content"]
                .as_str()
                .unwrap()
                .starts_with("line "),
            "{}",
            clip(&text(r))
        );
    }

    // A search reading contents skips all three by size.
    let a = ask(
        &client,
        "search_files",
        json!({"root": "ws", "pattern": "*", "contains": "line 0000000001"}),
    )
    .await;
    let r = a.tool("search_files");
    assert!(!is_error(r), "search_files: {}", text(r));
    let s = structured(r);
    assert_eq!(s["skipped_too_large"], 3, "{}", text(r));
    assert_eq!(s["matches"], json!([]), "{}", text(r));

    // A copy streams.
    let a = ask(
        &client,
        "copy_file",
        json!({"root": "ws", "source": "big.txt", "destination": "copy.txt"}),
    )
    .await;
    let r = a.tool("copy_file big.txt");
    assert!(!is_error(r), "copy_file big.txt: {}", text(r));
    assert_eq!(
        fs::metadata(env.path("ws/copy.txt")).unwrap().len(),
        200 * MIB
    );

    stop.store(true, Ordering::Relaxed);
    grower.join().unwrap();
    let rss_after = peak_rss(pid);
    eprintln!(
        "server peak RSS: {} MiB before, {} MiB after",
        rss_before / MIB,
        rss_after / MIB
    );
    assert!(
        rss_after <= rss_before + 100 * MIB,
        "the server's peak RSS grew from {} MiB to {} MiB",
        rss_before / MIB,
        rss_after / MIB
    );
    still_fine(&client, "ws", "ok.txt", "fine\n").await;
    assert_eq!(
        env.snapshot_of("outside"),
        outside,
        "nothing outside changed"
    );
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------
// c. hostile argument values

/// The hostile values, with a label.
fn hostile_values() -> Vec<(&'static str, Value)> {
    let mut nested = json!([]);
    for _ in 0..63 {
        nested = json!([nested]);
    }
    let long_path: String = "abcdefgh/".repeat(4200 / 9 + 1)[..4200].to_string();
    vec![
        ("nul", json!("a.txt\u{0}/../../outside")),
        ("2MiB", json!("x".repeat(2 << 20))),
        ("4200-byte path", json!(long_path)),
        ("300-byte name", json!("n".repeat(300))),
        ("fullwidth dot", json!("\u{ff0e}env")),
        ("fullwidth slash", json!("a\u{ff0f}b")),
        ("backslashes", json!("..\\..\\x")),
        ("tilde", json!("~/x")),
        ("file url", json!("file:///etc/passwd")),
        ("absolute", json!("/etc/passwd")),
        ("symlink out", json!("link_out")),
        ("rtl override", json!("\u{202e}txt.exe")),
        ("empty", json!("")),
        ("-1", json!(-1)),
        ("1e300", json!(1e300)),
        ("u64::MAX", json!(u64::MAX)),
        ("true", json!(true)),
        ("null", Value::Null),
        ("array", json!(["a.txt", 1])),
        ("object", json!({"path": "a.txt"})),
        ("64-deep array", nested),
    ]
}

/// The rule (start of the refusal) each path value must meet, if any.
fn path_rule(label: &str) -> Option<String> {
    Some(match label {
        "nul" => "refused by rule 'nul_byte'".into(),
        "2MiB" => format!(
            "refused by rule 'too_long': path is {} bytes long; at most 4095 are allowed",
            2 << 20
        ),
        "4200-byte path" => {
            "refused by rule 'too_long': path is 4200 bytes long; at most 4095 are allowed".into()
        }
        "300-byte name" => "refused by rule 'too_long': a name in the path is 300 bytes long; \
                            at most 255 are allowed"
            .into(),
        "absolute" => "refused by rule 'absolute_path'".into(),
        "symlink out" => "refused by rule 'confinement'".into(),
        _ => return None,
    })
}

/// A zip holding `name` (for `read_document`'s `member`).
fn one_member_zip(name: &str, content: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    zip.start_file(name, zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(content).unwrap();
    zip.finish().unwrap();
    out.into_inner()
}

#[tokio::test]
async fn hostile_arguments_get_clear_answers() {
    let (env, config) = workspace();
    env.write("ws/a.txt", "version 1\n")
        .write("ws/sub/b.txt", "b\n")
        .write("ws/m.txt", "move me\n")
        .write("ws/c.txt", "copy me\n")
        .write("ws/d.txt", "delete me\n")
        .write("ws/r.zip", one_member_zip("a.txt", b"zipped\n"))
        .symlink("../outside/canary.txt", "ws/link_out");
    let outside = env.snapshot_of("outside");
    let client = start(&config).await;
    let names: Vec<String> = tools(&client)
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let bases = [
        ("list_roots", json!({}), &[][..]),
        (
            "read_file",
            json!({"root": "ws", "path": "a.txt", "offset": 1, "limit": 5}),
            &["path"][..],
        ),
        (
            "read_file",
            json!({"root": "ws", "path": "a.txt"}),
            &["path"][..],
        ),
        (
            "read_file",
            json!({"root": "ws", "paths": ["a.txt", "sub/b.txt"], "offset": 1, "limit": 5}),
            &[][..],
        ),
        (
            "list_directory",
            json!({"root": "ws", "path": "sub", "depth": 2, "details": true,
                   "sort_by": "size", "cursor": "1"}),
            &["path"][..],
        ),
        (
            "list_directory",
            json!({"root": "ws", "path": "sub", "depth": 2, "exclude": ["*.tmp"], "tree": true}),
            &["path"][..],
        ),
        (
            "get_file_info",
            json!({"root": "ws", "path": "a.txt"}),
            &["path"][..],
        ),
        (
            "read_document",
            json!({"root": "ws", "path": "r.zip", "member": "a.txt", "offset": 1, "limit": 5}),
            &["path"][..],
        ),
        (
            "search_files",
            json!({"root": "ws", "pattern": "*.txt", "path": "sub", "contains": "b",
                   "regex": false, "max_results": 10, "cursor": "0"}),
            &["path"][..],
        ),
        (
            // Served by the document reader's component.
            "search_files",
            json!({"root": "ws", "pattern": "*", "contains": "a", "context": 1,
                   "documents": true}),
            &["path"][..],
        ),
        (
            "write_file",
            json!({"root": "ws", "path": "new.txt", "content": "new\n", "mode": "overwrite"}),
            &["path"][..],
        ),
        (
            "edit_file",
            json!({"root": "ws", "path": "a.txt",
                   "edits": [{"old_text": "version", "new_text": "version",
                              "replace_all": false}], "dry_run": true}),
            &["path"][..],
        ),
        (
            "create_directory",
            json!({"root": "ws", "path": "newdir"}),
            &["path"][..],
        ),
        (
            "move_file",
            json!({"root": "ws", "source": "m.txt", "destination": "m2.txt",
                   "destination_root": "ws", "overwrite": false}),
            &["source", "destination"][..],
        ),
        (
            "copy_file",
            json!({"root": "ws", "source": "c.txt", "destination": "c2.txt",
                   "destination_root": "ws", "overwrite": true}),
            &["source", "destination"][..],
        ),
        (
            "delete_file",
            json!({"root": "ws", "path": "d.txt"}),
            &["path"][..],
        ),
        (
            "apply_patch",
            json!({"root": "ws", "patch": "*** Begin Patch\n*** Add File: p.txt\n+x\n*** End Patch\n",
                   "dry_run": true}),
            &[][..],
        ),
    ];
    let mut listed: Vec<&str> = bases.iter().map(|b| b.0).collect();
    listed.sort();
    listed.dedup();
    let mut names_sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    names_sorted.sort();
    assert_eq!(names_sorted, listed, "every tool is listed");

    let values = hostile_values();
    let mut failures = Vec::new();
    let mut calls = 0;
    // (tool results, tool errors, JSON-RPC errors)
    let mut kinds = (0, 0, 0);
    for (tool, base, path_fields) in &bases {
        let base = base.as_object().unwrap();
        // list_roots takes no field: attack it with an unexpected one.
        // Fields as JSON pointers: every top-level one, and those of an edit.
        let mut fields: Vec<String> = if base.is_empty() {
            vec!["/root".into()]
        } else {
            base.keys().map(|k| format!("/{k}")).collect()
        };
        if *tool == "edit_file" {
            fields.extend([
                "/edits/0/old_text".into(),
                "/edits/0/new_text".into(),
                "/edits/0/replace_all".into(),
            ]);
        }
        for pointer in &fields {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let field = pointer.trim_start_matches('/').replace('/', ".");
            let mut cases: Vec<(&str, Option<&Value>)> =
                values.iter().map(|(l, v)| (*l, Some(v))).collect();
            cases.push(("left out", None));
            for (label, value) in cases {
                let mut args = Value::Object(base.clone());
                let Some(Value::Object(at)) = args.pointer_mut(parent) else {
                    panic!("{pointer} in {}", Value::Object(base.clone()))
                };
                match value {
                    Some(v) => at.insert(key.to_string(), v.clone()),
                    None => at.remove(key),
                };
                calls += 1;
                let what = format!("{tool} with {field} = {label}");
                let answer = ask(&client, tool, args).await;
                match &answer {
                    Answer::Tool(r) if is_error(r) => kinds.1 += 1,
                    Answer::Tool(_) => kinds.0 += 1,
                    _ => kinds.2 += 1,
                }
                let shown = match &answer {
                    Answer::Tool(r) => {
                        let t = text(r);
                        if is_error(r) && (t.is_empty() || t.len() > MAX_ERROR_TEXT) {
                            failures.push(format!(
                                "{what}: error text of {} bytes: {}",
                                t.len(),
                                clip(&t)
                            ));
                        }
                        let rule =
                            path_rule(label).filter(|_| path_fields.contains(&field.as_str()));
                        if let Some(rule) = rule
                            && !(is_error(r) && t.starts_with(&rule))
                        {
                            failures.push(format!(
                                "{what}: expected {rule:?}, got (isError {:?}) {:?}",
                                r.is_error,
                                clip(&t)
                            ));
                        }
                        t
                    }
                    Answer::Rpc { code, message } => {
                        if *code != -32602 {
                            failures.push(format!(
                                "{what}: JSON-RPC error {code} (not -32602): {}",
                                clip(message)
                            ));
                        }
                        if message.is_empty() || message.len() > MAX_ERROR_TEXT {
                            failures.push(format!(
                                "{what}: JSON-RPC message of {} bytes: {}",
                                message.len(),
                                clip(message)
                            ));
                        }
                        if path_fields.contains(&field.as_str()) && path_rule(label).is_some() {
                            failures.push(format!(
                                "{what}: expected a rule, got JSON-RPC {code} {}",
                                clip(message)
                            ));
                        }
                        message.clone()
                    }
                    Answer::Broken(e) => panic!("{what}: the session broke: {e}"),
                };
                let lower = shown.to_lowercase();
                for bad in [
                    "unexpectedly",
                    "panick",
                    "trap",
                    "tool_memory_bytes",
                    "tool_timeout_ms",
                ] {
                    if lower.contains(bad) {
                        failures.push(format!("{what}: {bad:?} in {}", clip(&shown)));
                    }
                }
            }
        }
        let a = ask(&client, "list_roots", json!({})).await;
        assert!(!is_error(a.tool("list_roots")), "list_roots after {tool}");
    }
    eprintln!(
        "{calls} hostile calls: {} tool results, {} tool errors, {} JSON-RPC errors",
        kinds.0, kinds.1, kinds.2
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} answers were wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let a = ask(&client, "list_roots", json!({})).await;
    assert!(!is_error(a.tool("list_roots")));
    still_fine(&client, "ws", "ok.txt", "fine\n").await;
    assert_eq!(
        env.snapshot_of("outside"),
        outside,
        "nothing outside changed"
    );
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------
// d. malformed JSON-RPC lines

/// A raw JSON-lines session with the binary.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(config: &std::path::Path) -> Raw {
        let mut child = spawn_stdio(config, Stdio::null());
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message, or `None` when none came within [`LIMIT`].
    fn recv(&mut self, waiting_for: &str) -> Option<Value> {
        let line = match self.lines.recv_timeout(LIMIT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => return None,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                "the server closed stdout while waiting for {waiting_for} (exit: {:?})",
                self.child.try_wait()
            ),
        };
        scan(&line);
        assert!(!line.contains(CANARY), "{}", clip(&line));
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {}", clip(&line))),
        )
    }

    /// Reads messages until every id in `ids` has been answered, or no
    /// message came for [`LIMIT`]; returns what came, in order, and the ids
    /// still unanswered.
    fn until(&mut self, ids: &[Value], waiting_for: &str) -> (Vec<Value>, Vec<Value>) {
        let mut seen = Vec::new();
        let mut missing: Vec<Value> = ids.to_vec();
        while !missing.is_empty() {
            let Some(msg) = self.recv(waiting_for) else {
                break;
            };
            assert_eq!(msg["jsonrpc"], "2.0", "{}", clip(&msg.to_string()));
            if let Some(id) = msg.get("id") {
                missing.retain(|m| m != id);
            }
            seen.push(msg);
        }
        (seen, missing)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn malformed_json_rpc_lines_do_not_end_the_session() {
    let (env, config) = workspace();
    let outside = env.snapshot_of("outside");
    let mut raw = Raw::start(&config);
    raw.send(
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    let (init, _) = raw.until(&[json!(1)], "initialize");
    assert!(
        init.last().unwrap()["result"]["serverInfo"].is_object(),
        "{init:?}"
    );
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let huge_name = format!(
        r#"{{"jsonrpc":"2.0","id":"huge-name","method":"tools/call","params":{{"name":"{}","arguments":{{}}}}}}"#,
        "x".repeat(1 << 20)
    );
    // (label, line, the id its answer carries (null when the line has none
    // or is not JSON), its JSON-RPC error code)
    let cases: Vec<(&str, Vec<u8>, Value, i64)> = vec![
        ("garbage", b"{nope".to_vec(), Value::Null, -32700),
        ("empty object", b"{}".to_vec(), Value::Null, -32600),
        ("empty array", b"[]".to_vec(), Value::Null, -32600),
        (
            "lone surrogate",
            br#"{"jsonrpc":"2.0","id":"surrogate","method":"tools/call","params":{"name":"read_file","arguments":{"root":"ws","path":"\ud800"}}}"#.to_vec(),
            // Not valid JSON to serde: a parse error, which has no id.
            Value::Null, -32700,
        ),
        ("control bytes", b"\x01\x02\x1b[31m\x7f\x00{\x08}".to_vec(), Value::Null, -32700),
        ("100000-deep array", deep.into_bytes(), Value::Null, -32700),
        (
            "params 5",
            br#"{"jsonrpc":"2.0","id":"params-5","method":"tools/call","params":5}"#.to_vec(),
            json!("params-5"), -32602,
        ),
        (
            "name 7",
            br#"{"jsonrpc":"2.0","id":"name-7","method":"tools/call","params":{"name":7}}"#.to_vec(),
            json!("name-7"), -32602,
        ),
        (
            "arguments string",
            br#"{"jsonrpc":"2.0","id":"args-x","method":"tools/call","params":{"name":"read_file","arguments":"x"}}"#.to_vec(),
            json!("args-x"), -32602,
        ),
        (
            "unknown method",
            br#"{"jsonrpc":"2.0","id":"unknown","method":"nope/nothing","params":{}}"#.to_vec(),
            json!("unknown"), -32601,
        ),
        (
            "1 MiB tool name",
            huge_name.into_bytes(),
            json!("huge-name"), -32602,
        ),
    ];
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for (n, (label, line, id, code)) in cases.into_iter().enumerate() {
        raw.send(&line);
        let ping = json!(1000 + n);
        raw.send(
            json!({"jsonrpc": "2.0", "id": ping, "method": "tools/call",
                   "params": {"name": "list_roots", "arguments": {}}})
            .to_string()
            .as_bytes(),
        );
        let ids = [ping.clone(), id.clone()];
        let (seen, missing) = raw.until(&ids, &format!("the answers after {label}"));
        let Some(answer) = seen.iter().find(|m| m["id"] == ping) else {
            panic!(
                "after {label}, list_roots got no answer within {LIMIT:?}: the session is dead \
                 (seen: {})",
                clip(&format!("{seen:?}"))
            )
        };
        assert!(
            answer["result"]["structuredContent"]["roots"].is_array(),
            "list_roots after {label}: {}",
            clip(&answer.to_string())
        );
        let others: Vec<&Value> = seen.iter().filter(|m| m["id"] != ping).collect();
        for m in &others {
            if let Some(i) = m.get("id").filter(|i| !i.is_null())
                && &id != i
            {
                failures.push(format!("{label}: an answer with a foreign id {i}"));
            }
            let message = m["error"]["message"].as_str().unwrap_or("");
            if message.len() > MAX_ERROR_TEXT {
                failures.push(format!("{label}: error message of {} bytes", message.len()));
            }
        }
        report.push(format!(
            "{label}: {}",
            if others.is_empty() {
                "no answer".to_string()
            } else {
                others
                    .iter()
                    .map(|m| clip(&m.to_string()))
                    .collect::<Vec<_>>()
                    .join(" | ")
            }
        ));
        let Some(mine) = others.iter().find(|m| m["id"] == id) else {
            assert!(missing.contains(&id));
            failures.push(format!("{label}: no answer to id {id} within {LIMIT:?}"));
            continue;
        };
        let got = mine["error"]["code"].as_i64();
        if got != Some(code) {
            failures.push(format!(
                "{label}: expected JSON-RPC error {code}, got {}",
                clip(&mine.to_string())
            ));
        } else if code == -32602 && label != "1 MiB tool name" {
            let message = mine["error"]["message"].as_str().unwrap_or("");
            if !message.contains("tools/call") {
                failures.push(format!(
                    "{label}: the message should say what tools/call expects: {message:?}"
                ));
            }
        }
    }
    eprintln!("answers:\n{}", report.join("\n"));
    assert!(
        raw.child.try_wait().unwrap().is_none(),
        "the server is still running"
    );
    assert_eq!(
        env.snapshot_of("outside"),
        outside,
        "nothing outside changed"
    );
    assert!(
        failures.is_empty(),
        "{}\nanswers:\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}

// ---------------------------------------------------------------------------
// e. no oracle on the disk outside

/// A tool name and how to call it on one path.
type ToolCall = (&'static str, fn(&str) -> Value);

#[tokio::test]
async fn outside_paths_read_the_same_whether_they_exist_or_not() {
    let (env, config) = workspace();
    env.fifo("outside/fifo")
        .symlink("../outside/dir", "ws/link_dir")
        .symlink("../outside/nodir", "ws/link_missing_dir")
        .symlink("../outside/canary.txt", "ws/link_file")
        .symlink("../outside/nothing.txt", "ws/link_dangling");
    let before = env.snapshot();
    let client = start(&config).await;
    let pairs = [
        ("../outside/canary.txt", "../outside/nothing.txt"),
        ("link_dir", "link_missing_dir"),
        ("link_dir/inner.txt", "link_missing_dir/inner.txt"),
        ("link_file", "link_dangling"),
        ("../outside/fifo", "../outside/nofifo"),
        ("../outside/dir", "../outside/nodir"),
        ("../outside/dir/inner.txt", "../outside/nodir/inner.txt"),
    ];
    let calls: [ToolCall; 10] = [
        ("read_file", |p| json!({"root": "ws", "path": p})),
        ("get_file_info", |p| json!({"root": "ws", "path": p})),
        ("list_directory", |p| json!({"root": "ws", "path": p})),
        (
            "list_directory",
            |p| json!({"root": "ws", "path": p, "tree": true}),
        ),
        (
            "search_files",
            |p| json!({"root": "ws", "pattern": "*", "path": p, "contains": "C"}),
        ),
        (
            "write_file",
            |p| json!({"root": "ws", "path": p, "content": "x\n"}),
        ),
        (
            "edit_file",
            |p| json!({"root": "ws", "path": p, "edits": [{"old_text": "C", "new_text": "D"}]}),
        ),
        (
            "copy_file",
            |p| json!({"root": "ws", "source": p, "destination": "copied.txt"}),
        ),
        (
            "move_file",
            |p| json!({"root": "ws", "source": p, "destination": "moved.txt"}),
        ),
        ("delete_file", |p| json!({"root": "ws", "path": p})),
    ];
    let mut failures = Vec::new();
    for (existing, missing) in pairs {
        for (tool, args) in &calls {
            let mut answers = Vec::new();
            for path in [existing, missing] {
                let a = ask(&client, tool, args(path)).await;
                let r = a.tool(&format!("{tool} {path}"));
                let json = serde_json::to_string(r).unwrap().replace(path, "<PATH>");
                answers.push(json);
            }
            if answers[0] != answers[1] {
                failures.push(format!(
                    "{tool}: '{existing}' answers {}\n   while '{missing}' answers {}",
                    answers[0], answers[1]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    still_fine(&client, "ws", "ok.txt", "fine\n").await;
    assert_eq!(env.snapshot(), before, "nothing changed");
    client.cancel().await.unwrap();
}

// ---------------------------------------------------------------------------
// f. no file descriptor free

/// The soft descriptor limit of process `pid` set to `soft`, its hard
/// limit left as the test's (which the server inherited).
fn set_soft_nofile(pid: u32, soft: u64) {
    use rustix::process::{Pid, Resource, Rlimit, getrlimit, prlimit};
    let pid = Pid::from_raw(pid as i32).unwrap();
    let hard = getrlimit(Resource::Nofile).maximum;
    let soft = hard.map_or(soft, |h| soft.min(h));
    prlimit(
        Some(pid),
        Resource::Nofile,
        Rlimit {
            current: Some(soft),
            maximum: hard,
        },
    )
    .unwrap();
}

/// The descriptors process `pid` holds.
fn held_fds(pid: u32) -> std::collections::BTreeSet<u64> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
        .collect()
}

/// The descriptors process `pid` holds once it holds the same ones twice
/// in a row, 25 ms apart: a call's spent instance (its preopened
/// directories among what it holds) is dropped after its answer, on the
/// guest's thread, so right after an answer the server may still be
/// letting go of some.
fn settle_fds(pid: u32) -> std::collections::BTreeSet<u64> {
    let mut last = held_fds(pid);
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        let now = held_fds(pid);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the server's descriptors never settled: {last:?}");
}

/// The descriptor limit that leaves process `pid` exactly `spare`
/// descriptors to open: the limit is on numbers, and a new descriptor takes
/// the lowest free one, so `spare` free numbers must lie below it. Taken
/// once the server has let go of its last call's descriptors.
fn limit_leaving(pid: u32, spare: usize) -> u64 {
    let held = settle_fds(pid);
    (0..).filter(|n| !held.contains(n)).nth(spare).unwrap()
}

/// A call that finds no file descriptor free (the server's limit lowered,
/// while it runs, to leave it none, then a few more) fails saying EMFILE:
/// never a misleading error (access refused, does not exist) and never a
/// result that looks complete without being so; with the limit back, the
/// same calls succeed.
#[tokio::test]
async fn a_call_with_no_descriptor_free_says_emfile() {
    let (env, config) = workspace();
    for i in 0..12 {
        env.write(&format!("ws/tree/d{i}/f.txt"), "needle\n");
    }
    let (client, pid) =
        start_with_pid(&config, &[], rmcp::service::ClientLifecycleMode::Initialize).await;
    let calls = |round: u64| {
        [
            ("read_file", json!({"root": "ws", "path": "ok.txt"})),
            (
                "search_files",
                json!({"root": "ws", "path": "tree", "pattern": "*.txt", "contains": "needle"}),
            ),
            (
                "write_file",
                json!({"root": "ws", "path": "new.txt", "content": format!("round {round}\n")}),
            ),
        ]
    };
    // Whole: the answers each call gives with descriptors to spare.
    let whole = |name: &str, r: &CallToolResult, round: u64| match name {
        "read_file" => assert_eq!(structured(r)["content"], "fine\n"),
        "search_files" => {
            assert_eq!(structured(r)["matches"].as_array().unwrap().len(), 12);
            assert_eq!(structured(r).get("truncated"), None);
        }
        _ => assert_eq!(
            fs::read_to_string(env.path("ws/new.txt")).unwrap(),
            format!("round {round}\n")
        ),
    };
    for (name, args) in calls(0) {
        let a = ask(&client, name, args).await;
        let r = a.tool(name);
        assert!(!is_error(r), "{name}: {}", text(r));
        whole(name, r, 0);
    }
    let mut failed = Vec::new();
    for round in 1..=10u64 {
        let spare = (round - 1) as usize;
        set_soft_nofile(pid, limit_leaving(pid, spare));
        let before = fs::read_to_string(env.path("ws/new.txt")).unwrap();
        for (name, args) in calls(round) {
            // The call before may still be letting go of its descriptors.
            let _ = settle_fds(pid);
            let a = ask(&client, name, args).await;
            let r = a.tool(name);
            if is_error(r) {
                refused(&a, name, "EMFILE: too many open files");
                failed.push((spare, name));
                if name == "write_file" {
                    assert_eq!(fs::read_to_string(env.path("ws/new.txt")).unwrap(), before);
                }
            } else {
                whole(name, r, round);
            }
        }
        set_soft_nofile(pid, u64::MAX);
    }
    eprintln!("failed (spare descriptors, tool): {failed:?}");
    for name in ["read_file", "search_files", "write_file"] {
        assert!(
            failed.contains(&(0, name)),
            "{name} with none spare: {failed:?}"
        );
    }
    // Past its setup (the root's directory opened), in the guest: a search
    // needs more at once than a read.
    assert!(
        failed
            .iter()
            .any(|&(spare, name)| name == "search_files" && !failed.contains(&(spare, "read_file"))),
        "{failed:?}"
    );
    for (name, args) in calls(99) {
        let a = ask(&client, name, args).await;
        let r = a.tool(name);
        assert!(!is_error(r), "{name} with the limit back: {}", text(r));
        whole(name, r, 99);
    }
    still_fine(&client, "ws", "ok.txt", "fine\n").await;
}
