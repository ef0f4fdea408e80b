//! Resources, completion and logging, end to end over stdio: the roots'
//! files as `loomfs://ROOT/PATH` resources, listed, paged and read through
//! the same tool calls the model makes (so the deny list, `resolve()` and
//! the audit apply), a denied or escaping URI answered exactly as a missing
//! one, and path completion that never names a denied entry.

// SEP-2577 deprecates logging (rmcp marks its types so); clients still use
// it, and these tests check that it works.
#![allow(deprecated)]

mod common;

use std::collections::BTreeSet;

use base64::Engine as _;
use common::*;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, PaginatedRequestParams, ReadResourceRequestParams,
    Reference, ResourceContents,
};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::ServiceError;

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// `ws` and `docs` with text, an image, denied names, a symlink out and
/// one to a denied file.
fn tree(limits: &str) -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/notes.md", "# Notes\nhello\n")
        .write("ws/src/lib.rs", "pub fn f() {}\n")
        .write("ws/src/sub/deep.txt", "deep\n")
        .write("ws/.env", "SECRET=canary\n")
        .write("ws/src/id_rsa", "canary key\n")
        .write("ws/.git/config", "canary\n")
        .write("docs/guide.txt", "guide\n")
        .write("docs/img/dot.png", PNG)
        .write("outside/secret.txt", "canary outside\n")
        .symlink("../outside/secret.txt", "ws/out.txt")
        .symlink(".env", "ws/alias.txt");
    let config = env.config(&format!("{limits}\n{WS_AND_DOCS}"));
    (env, config)
}

fn read(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

/// The JSON-RPC error of a request that must fail.
fn rpc_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

#[tokio::test]
async fn templates_name_one_per_root() {
    let (_env, config) = tree("");
    let client = start(&config).await;
    let info = client.peer_info().expect("server info");
    assert!(info.capabilities.resources.is_some(), "{info:?}");
    assert!(info.capabilities.completions.is_some(), "{info:?}");
    let templates = client.list_all_resource_templates().await.unwrap();
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(uris, ["loomfs://ws/{+path}", "loomfs://docs/{+path}"]);
}

#[tokio::test]
async fn list_shows_every_readable_file_and_no_denied_one() {
    let (env, config) = tree("");
    let client = start(&config).await;
    let resources = client.list_all_resources().await.unwrap();
    scan(&serde_json::to_string(&resources).unwrap());
    let uris: BTreeSet<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "loomfs://ws/notes.md",
        "loomfs://ws/src/lib.rs",
        "loomfs://ws/src/sub/deep.txt",
        "loomfs://docs/guide.txt",
        "loomfs://docs/img/dot.png",
    ]
    .into();
    // Symlinks are not files of the root (the read would follow them).
    assert_eq!(uris, expected);
    let dot = resources
        .iter()
        .find(|r| r.uri.ends_with("dot.png"))
        .unwrap();
    assert_eq!(dot.size, Some(PNG.len() as u64));
    assert_eq!(dot.mime_type.as_deref(), Some("image/png"));
    assert_eq!(dot.name, "docs/img/dot.png");
    let text = serde_json::to_string(&resources).unwrap();
    assert!(!text.contains(env.dir.to_str().unwrap()));
}

#[tokio::test]
async fn list_pages_with_the_cursor_and_refuses_a_forged_one() {
    let (_env, config) = tree("max_list_entries = 2");
    let client = start(&config).await;
    let mut all = BTreeSet::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = client
            .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        pages += 1;
        assert!(pages < 50, "paging never ends");
        for r in page.resources {
            assert!(all.insert(r.uri.clone()), "{} listed twice", r.uri);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(pages >= 3, "{pages} pages");
    assert_eq!(all.len(), 5, "{all:?}");
    for forged in ["x", "9", "0:zz", "-1"] {
        let e = client
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some(forged.into())),
            ))
            .await
            .expect_err(forged);
        assert_eq!(rpc_error(e).code.0, -32602, "{forged}");
    }
}

#[tokio::test]
async fn read_gives_text_and_an_image_blob_through_the_read_component() {
    let (env, config) = tree("");
    let client = start(&config).await;
    let r = client
        .read_resource(read("loomfs://ws/notes.md"))
        .await
        .unwrap();
    match &r.contents[..] {
        [
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            },
        ] => {
            assert_eq!(uri, "loomfs://ws/notes.md");
            assert_eq!(mime_type.as_deref(), Some("text/markdown"));
            assert_eq!(text, "# Notes\nhello\n");
        }
        other => panic!("{other:?}"),
    }
    let r = client
        .read_resource(read("loomfs://docs/img/dot.png"))
        .await
        .unwrap();
    match &r.contents[..] {
        [
            ResourceContents::BlobResourceContents {
                mime_type, blob, ..
            },
        ] => {
            assert_eq!(mime_type.as_deref(), Some("image/png"));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap();
            assert_eq!(bytes, PNG);
        }
        other => panic!("{other:?}"),
    }
    // The reads are the read_file component's: its audit lines, allowed,
    // with the bytes its output held.
    let lines = audit(&env);
    let reads: Vec<_> = lines
        .iter()
        .filter(|l| l["tool"] == "read_file" && l["decision"] == "allow")
        .collect();
    assert_eq!(reads.len(), 2, "{lines:?}");
    assert_eq!(reads[0]["path"], "notes.md");
    assert!(reads[0]["bytes"].as_u64().unwrap() > 0, "{:?}", reads[0]);
}

#[tokio::test]
async fn denied_escaping_and_missing_uris_fail_alike() {
    let (env, config) = tree("");
    let client = start(&config).await;
    let mut answers = Vec::new();
    for uri in [
        "loomfs://ws/.env",
        "loomfs://ws/src/id_rsa",
        "loomfs://ws/.git/config",
        "loomfs://ws/alias.txt",
        "loomfs://ws/out.txt",
        "loomfs://ws/../outside/secret.txt",
        "loomfs://ws/%2E%2E/outside/secret.txt",
        "loomfs://nope/x",
        "loomfs://ws/missing.txt",
        "file:///etc/passwd",
    ] {
        let e = rpc_error(client.read_resource(read(uri)).await.expect_err(uri));
        scan(&e.to_string());
        assert!(!e.message.contains(env.dir.to_str().unwrap()), "{e:?}");
        assert!(!e.message.contains("canary"), "{e:?}");
        // The same code, and the same message but for the URI itself.
        answers.push((e.code.0, e.message.replace(uri, "URI"), e.data));
    }
    for (code, message, data) in &answers {
        assert_eq!(*code, -32002, "{answers:?}");
        assert_eq!(message, "resource not found: URI", "{answers:?}");
        assert!(data.is_some());
    }
    // Each refusal was the deny list's or resolve()'s, audited as such.
    let denied: Vec<_> = audit(&env)
        .into_iter()
        .filter(|l| l["decision"] == "deny")
        .map(|l| l["rule"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(denied.iter().any(|r| r == "deny"), "{denied:?}");
    assert!(denied.iter().any(|r| r == "confinement"), "{denied:?}");
}

#[tokio::test]
async fn a_file_the_tool_refuses_says_why_without_a_host_path() {
    let (env, config) = tree("");
    env.write("ws/blob.bin", b"\0\x01\x02binary");
    let client = start(&config).await;
    let e = rpc_error(
        client
            .read_resource(read("loomfs://ws/blob.bin"))
            .await
            .expect_err("binary"),
    );
    assert_eq!(e.code.0, -32602, "{e:?}");
    assert!(e.message.contains("blob.bin"), "{e:?}");
    assert!(!e.message.contains(env.dir.to_str().unwrap()), "{e:?}");
}

async fn complete(client: &Client, template: &str, value: &str) -> Vec<String> {
    let params = CompleteRequestParams::new(
        Reference::for_resource(template),
        ArgumentInfo::new("path", value),
    );
    let r = client.complete(params).await.expect("completion/complete");
    scan(&serde_json::to_string(&r).unwrap());
    assert!(r.completion.values.len() <= 100);
    r.completion.values
}

#[tokio::test]
async fn completion_lists_entries_under_the_prefix_never_a_denied_one() {
    let (_env, config) = tree("");
    let client = start(&config).await;
    let ws = "loomfs://ws/{+path}";
    let root = complete(&client, ws, "").await;
    let root: BTreeSet<&str> = root.iter().map(String::as_str).collect();
    assert_eq!(
        root,
        ["alias.txt", "notes.md", "out.txt", "src/"].into(),
        "no .env, no .git"
    );
    assert_eq!(complete(&client, ws, "n").await, ["notes.md"]);
    assert_eq!(
        complete(&client, ws, "src/").await,
        ["src/lib.rs", "src/sub/"]
    );
    assert_eq!(complete(&client, ws, "src/s").await, ["src/sub/"]);
    assert_eq!(complete(&client, ws, "src/id").await, Vec::<String>::new());
    assert_eq!(complete(&client, ws, ".gi").await, Vec::<String>::new());
    assert_eq!(complete(&client, ws, ".git/").await, Vec::<String>::new());
    assert_eq!(complete(&client, ws, "../").await, Vec::<String>::new());
    let e = client
        .complete(CompleteRequestParams::new(
            Reference::for_resource("loomfs://other/{+path}"),
            ArgumentInfo::new("path", ""),
        ))
        .await
        .expect_err("unknown template");
    assert_eq!(rpc_error(e).code.0, -32602);
}

#[tokio::test]
async fn completion_is_capped_at_100() {
    let env = Env::new();
    for i in 0..150 {
        env.write(&format!("ws/f{i:03}.txt"), "x");
    }
    let config = env.config(WS);
    let client = start(&config).await;
    let params = CompleteRequestParams::new(
        Reference::for_resource("loomfs://ws/{+path}"),
        ArgumentInfo::new("path", "f"),
    );
    let r = client.complete(params).await.unwrap();
    assert_eq!(r.completion.values.len(), 100);
    assert_eq!(r.completion.total, Some(150));
    assert_eq!(r.completion.has_more, Some(true));
}

#[tokio::test]
async fn resources_answer_in_the_2026_era_too() {
    let (_env, config) = tree("");
    let client = start_with(&config, &[], discover()).await;
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 5);
    // The caching hints of 2026-07-28: never fresh, never shared (files
    // change at any time, and what a client sees depends on its roles).
    let page = client.list_resources(None).await.unwrap();
    assert_eq!(page.ttl_ms, Some(0));
    assert_eq!(page.cache_scope, Some(rmcp::model::CacheScope::Private));
    let templates = client.list_resource_templates(None).await.unwrap();
    assert_eq!(templates.ttl_ms, Some(0));
    let r = client
        .read_resource(read("loomfs://docs/guide.txt"))
        .await
        .unwrap();
    assert!(matches!(&r.contents[..],
        [ResourceContents::TextResourceContents { text, .. }] if text == "guide\n"));
    let e = rpc_error(
        client
            .read_resource(read("loomfs://ws/.env"))
            .await
            .expect_err("denied"),
    );
    // rmcp gives 2026-07-28 peers the standard code for a missing resource.
    assert_eq!(e.code.0, -32602, "{e:?}");
    assert!(e.message.starts_with("resource not found"), "{e:?}");
    // That version has no `logging/setLevel` (a request carries its own
    // level): method not found, as for `ping`.
    let e = rpc_error(
        client
            .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
            .await
            .expect_err("no setLevel in 2026-07-28"),
    );
    assert_eq!(e.code.0, -32601, "{e:?}");
}

/// A client that collects the log messages the server sends it.
struct Logs(tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>);

impl rmcp::ClientHandler for Logs {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(params);
    }
}

type LogClient = rmcp::service::RunningService<rmcp::RoleClient, Logs>;
type LogReceiver = tokio::sync::mpsc::UnboundedReceiver<LoggingMessageNotificationParam>;

async fn log_client<T, E, A>(transport: T) -> (LogClient, LogReceiver)
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::ClientServiceExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = Logs(tx)
        .serve_with_lifecycle(transport, rmcp::service::ClientLifecycleMode::Initialize)
        .await
        .expect("MCP handshake");
    (client, rx)
}

async fn read_env(client: &LogClient) {
    let args = serde_json::json!({"root": "ws", "path": ".env"});
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("read_file")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(is_error(&r), "{r:?}");
}

/// The messages received so far, after the server has answered a ping-like
/// call (a message for a call is sent before the call's answer).
async fn drained(client: &LogClient, rx: &mut LogReceiver) -> Vec<LoggingMessageNotificationParam> {
    client.list_all_tools().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut got = Vec::new();
    while let Ok(m) = rx.try_recv() {
        got.push(m);
    }
    got
}

#[tokio::test]
async fn a_refused_call_is_logged_to_its_client_at_the_level_it_set() {
    let (env, config) = tree("max_list_entries = 2");
    let mut cmd = server_command(&config);
    cmd.stderr(std::process::Stdio::null());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let (client, mut rx) = log_client(transport).await;
    assert!(client.peer_info().unwrap().capabilities.logging.is_some());
    // No level set: nothing sent.
    read_env(&client).await;
    assert!(drained(&client, &mut rx).await.is_empty());
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap();
    read_env(&client).await;
    let got = drained(&client, &mut rx).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].level, LoggingLevel::Warning);
    assert_eq!(got[0].data["tool"], "read_file");
    assert_eq!(got[0].data["rule"], "deny");
    let text = serde_json::to_string(&got[0]).unwrap();
    assert!(!text.contains(env.dir.to_str().unwrap()), "{text}");
    // A call that succeeds is not logged.
    call_ok_logs(&client).await;
    assert!(drained(&client, &mut rx).await.is_empty());
    // One cut at a limit is, with its note.
    let args = serde_json::json!({"root": "ws", "depth": 3});
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("list_directory")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(!is_error(&r), "{r:?}");
    let got = drained(&client, &mut rx).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].data["rule"], "truncated");
    assert!(
        got[0].data["message"].as_str().unwrap().contains("cursor"),
        "{got:?}"
    );
    // Above warning: refusals are not sent.
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    read_env(&client).await;
    assert!(drained(&client, &mut rx).await.is_empty());
}

async fn call_ok_logs(client: &LogClient) {
    let args = serde_json::json!({"root": "ws", "path": "notes.md"});
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("read_file")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(!is_error(&r), "{r:?}");
}

#[tokio::test]
async fn over_http_each_session_hears_only_of_its_own_calls() {
    use rmcp::transport::StreamableHttpClientTransport;
    let (_env, config) = tree("");
    let server = http_server(&config);
    let (a, mut a_rx) =
        log_client(StreamableHttpClientTransport::from_uri(server.url.as_str())).await;
    let (b, mut b_rx) =
        log_client(StreamableHttpClientTransport::from_uri(server.url.as_str())).await;
    a.set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    // b set no level: its refusal is sent to nobody.
    read_env(&b).await;
    assert!(drained(&a, &mut a_rx).await.is_empty());
    assert!(drained(&b, &mut b_rx).await.is_empty());
    read_env(&a).await;
    let got = drained(&a, &mut a_rx).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(drained(&b, &mut b_rx).await.is_empty());
    // Resources answer over HTTP as over stdio.
    let resources = a.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 5);
    let e = a
        .read_resource(read("loomfs://ws/.env"))
        .await
        .expect_err("denied");
    assert_eq!(rpc_error(e).code.0, -32002);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// The official Python SDK (see tests/python_sdk.rs for where it comes
/// from; skipped with a line on stderr without it): templates, every page
/// of the listing, text and PNG reads, denied, escaping and missing URIs,
/// completion, and a refusal's log message after `setLevel`.
#[test]
fn the_python_sdk_lists_pages_reads_completes_and_hears_refusals() {
    use std::io::Write;
    use std::process::Stdio;
    let Some(mut cmd) = python_with_sdk() else {
        return;
    };
    let (env, config) = tree("max_list_entries = 2");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/python_sdk_resources.py");
    for var in FLAG_VARS {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .arg(script)
        .arg(BIN)
        .arg("--config")
        .arg(&config)
        .env("LOOMFS_CACHE_DIR", cache_dir())
        .env("LOOMFS_LOG", "warn")
        .env("LOOMFS_ALLOW_ROOT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let uris = [
        "loomfs://ws/notes.md",
        "loomfs://docs/img/dot.png",
        "loomfs://ws/.env",
        "loomfs://ws/missing.txt",
        "loomfs://ws/alias.txt",
        "loomfs://ws/out.txt",
        "loomfs://ws/../outside/secret.txt",
    ];
    child
        .stdin
        .take()
        .unwrap()
        .write_all(uris.join("\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    scan(&stdout);
    assert!(!stdout.contains(env.dir.to_str().unwrap()));
    assert!(!stdout.contains("canary"));
    let got: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for cap in ["resources", "completions", "logging"] {
        assert!(got["capabilities"].get(cap).is_some(), "{cap}: {got}");
    }
    assert_eq!(
        got["templates"],
        serde_json::json!(["loomfs://ws/{+path}", "loomfs://docs/{+path}"])
    );
    assert!(got["pages"].as_u64().unwrap() >= 3, "{got}");
    let listed: BTreeSet<&str> = got["uris"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u.as_str())
        .collect();
    assert_eq!(listed.len(), got["uris"].as_array().unwrap().len());
    assert_eq!(
        listed,
        [
            "loomfs://ws/notes.md",
            "loomfs://ws/src/lib.rs",
            "loomfs://ws/src/sub/deep.txt",
            "loomfs://docs/guide.txt",
            "loomfs://docs/img/dot.png",
        ]
        .into()
    );
    let reads = &got["reads"];
    assert_eq!(
        reads["loomfs://ws/notes.md"]["contents"][0]["text"],
        "# Notes\nhello\n"
    );
    let png = &reads["loomfs://docs/img/dot.png"]["contents"][0];
    assert_eq!(png["mimeType"], "image/png");
    let blob = base64::engine::general_purpose::STANDARD
        .decode(png["blob"].as_str().unwrap())
        .unwrap();
    assert_eq!(blob, PNG);
    let missing = &reads["loomfs://ws/missing.txt"]["error"];
    assert_eq!(missing["code"], -32002, "{reads}");
    for uri in &uris[2..] {
        let e = &reads[*uri]["error"];
        assert_eq!(e["code"], missing["code"], "{uri}: {reads}");
        assert_eq!(
            e["message"].as_str().unwrap().replace(uri, "URI"),
            missing["message"]
                .as_str()
                .unwrap()
                .replace("loomfs://ws/missing.txt", "URI"),
            "{uri}"
        );
    }
    let completions = &got["completions"];
    assert_eq!(
        completions["src/"],
        serde_json::json!(["src/lib.rs", "src/sub/"])
    );
    assert_eq!(completions["src/i"], serde_json::json!([]));
    assert_eq!(completions[".e"], serde_json::json!([]));
    assert!(
        !completions[""]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == ".env" || v == ".git/"),
        "{completions}"
    );
    assert_eq!(got["refused_is_error"], true);
    let logs = got["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["level"], "warning");
    assert_eq!(logs[0]["data"]["rule"], "deny");
}

/// A resource read is the read component's, under the policing
/// filesystem: a name flipped between a file and a symlink to a denied
/// file while it is read, many times, never gives the denied content
/// (resolve() may see the file, and the guest's open the symlink: the
/// policing filesystem answers that open as a missing file).
#[tokio::test]
async fn a_read_raced_with_a_symlink_to_a_denied_file_never_gives_it() {
    let (env, config) = tree("");
    let client = start(&config).await;
    env.write("ws/flip.txt", "plain\n");
    let flip = env.path("ws/flip.txt");
    let tmp = env.path("ws/flip.tmp");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&tmp);
                if n.is_multiple_of(2) {
                    let _ = std::os::unix::fs::symlink(".env", &tmp);
                } else {
                    let _ = std::fs::write(&tmp, "plain\n");
                }
                let _ = std::fs::rename(&tmp, &flip);
                n += 1;
                // Each state lasts about as long as a read's two looks.
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let (mut plain, mut missing) = (0, 0);
    for _ in 0..300 {
        match client.read_resource(read("loomfs://ws/flip.txt")).await {
            Ok(r) => {
                let text = serde_json::to_string(&r).unwrap();
                assert!(!text.contains("canary"), "{text}");
                plain += 1;
            }
            Err(e) => {
                let e = rpc_error(e);
                assert_eq!(e.code.0, -32002, "{e:?}");
                missing += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    let lines = audit(&env);
    let count = |decision: &str| {
        lines
            .iter()
            .filter(|l| {
                l["tool"] == "read_file" && l["path"] == "flip.txt" && l["decision"] == decision
            })
            .count()
    };
    // A read that ran the component has an `allow` line; one of those that
    // did not give the file was refused by the policing filesystem, which
    // audits its own `deny` line. Every read answered as missing was
    // refused by one or the other.
    let (ran, denied) = (count("allow"), count("deny"));
    eprintln!(
        "{plain} reads of the file, {missing} answered as missing, {} of them by the policing \
         filesystem after resolve() let the read run",
        ran - plain
    );
    assert!(ran >= plain, "{ran} {plain}");
    assert!(
        denied >= missing,
        "{denied} deny lines for {missing} refused reads"
    );
}
