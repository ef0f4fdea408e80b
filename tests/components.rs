//! Third-party components declared in the config (`[[components]]`): the
//! example tool built alone as its README says, served like a built-in; the
//! hostile fixture served the same way, every attack refused by the policing
//! filesystem and audited; and files that cannot be tools stopping the start
//! with the file and the reason.

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn example_wasm() -> &'static [u8] {
    static WASM: OnceLock<Vec<u8>> = OnceLock::new();
    WASM.get_or_init(|| build_wasm("examples/text-stats", "text_stats.wasm"))
}

fn hostile_wasm() -> &'static [u8] {
    static WASM: OnceLock<Vec<u8>> = OnceLock::new();
    WASM.get_or_init(|| build_wasm("tests/fixtures/hostile-tool", "hostile_tool.wasm"))
}

/// The audit lines of `tool`, parsed.
fn audit_of(env: &Env, tool: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["tool"] == tool)
        .collect()
}

const GUIDE: &str = "# Guide\n\nIntro words here.\n\n## Install\n\n```sh\n# not a heading\ncargo build\n```\n\n### From source ###\n\n#no-space is text\n## Use\n";

#[tokio::test]
async fn the_example_tool_loads_from_the_config_and_works_over_mcp() {
    let env = Env::new();
    env.write("docs/guide.md", GUIDE)
        .write("docs/.env", "CANARY-DOTENV\n")
        .write("docs/big.txt", "x".repeat(5000))
        .write("outside/secret.md", "# CANARY-OUTSIDE\n")
        .write("tools/text_stats.wasm", example_wasm())
        .symlink("../outside/secret.md", "docs/link_out.md")
        .fifo("docs/pipe");
    let config = env.config(
        &("audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\nmax_read_bytes = 4096\n\
         "
        .to_string()
            + &pinned("tools/text_stats.wasm", example_wasm())),
    );
    let before = env.snapshot_of("outside");
    let client = start(&config).await;

    let listed = tools(&client).await;
    let tool = listed
        .iter()
        .find(|t| t.name == "text_stats")
        .expect("text_stats is listed");
    // The roots it may act on, in its schema's root field.
    assert_eq!(
        tool.input_schema["properties"]["root"]["enum"],
        json!(["docs"]),
        "{:?}",
        tool.input_schema
    );
    let hints = tool.annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(true));
    // MCP gives these meaning only where readOnlyHint is false.
    assert_eq!(
        (hints.destructive_hint, hints.idempotent_hint),
        (None, None)
    );
    assert!(tool.output_schema.is_some());

    let r = call_ok(
        &client,
        "text_stats",
        json!({"root": "docs", "path": "guide.md"}),
    )
    .await;
    assert_eq!(
        structured(&r),
        &json!({
            "lines": 15, "words": 24, "bytes": GUIDE.len(),
            "outline": [
                {"level": 1, "title": "Guide", "line": 1},
                {"level": 2, "title": "Install", "line": 5},
                {"level": 3, "title": "From source", "line": 12},
                {"level": 2, "title": "Use", "line": 15},
            ]
        })
    );
    assert_eq!(
        text(&r),
        format!(
            "guide.md: 15 lines, 24 words, {} bytes\nGuide (line 1)\n  Install (line 5)\n    From source (line 12)\n  Use (line 15)",
            GUIDE.len()
        )
    );

    // resolve() stands in front of it like any built-in; its own checks
    // follow (type and size before opening).
    let refusals = [
        (
            ".env",
            "refused by rule 'deny': matches deny pattern '.env'",
        ),
        ("../outside/secret.md", "refused by rule 'confinement'"),
        ("link_out.md", "refused by rule 'confinement'"),
        ("pipe", "'pipe' is not a regular file"),
        (
            "big.txt",
            "'big.txt' is 5000 bytes; this root lets a tool read at most 4096 (max_read_bytes)",
        ),
        ("missing.md", "'missing.md' does not exist"),
    ];
    let mut results = vec![r];
    for (path, message) in refusals {
        let r = call(&client, "text_stats", json!({"root": "docs", "path": path})).await;
        assert_refused(&r, message);
        results.push(r);
    }
    let r = call(&client, "text_stats", json!({"root": "docs"})).await;
    assert_refused(&r, "invalid arguments: missing 'path'");
    results.push(r);
    assert_clean(&env, &results);
    client.cancel().await.unwrap();

    let lines = audit_of(&env, "text_stats");
    // Each line names the build that made the call: its digest's first
    // 12 hex digits.
    let short = &sha256_hex(example_wasm())[..12];
    assert!(lines.iter().all(|l| l["sha256"] == short), "{lines:?}");
    let rules: Vec<&Value> = lines.iter().map(|l| &l["rule"]).collect();
    assert_eq!(
        rules,
        [
            &Value::Null,
            &json!("deny"),
            &json!("confinement"),
            &json!("confinement"),
            &Value::Null,
            &Value::Null,
            &Value::Null,
        ],
        "{lines:?}"
    );
    assert_eq!(env.snapshot_of("outside"), before);
}

/// The hostile fixture, declared in the config, attacks from inside the
/// sandbox: a sourcecode root mounted read-write and a reference root
/// mounted read-only. Each attack is refused, audited with its rule, and
/// nothing on disk changes.
#[tokio::test]
async fn a_hostile_component_from_the_config_is_policed() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}\n")
        .write("src/.env", "CANARY-SRC-DOTENV\n")
        .write("ref/README.md", "readme\n")
        .write("ref/.env", "CANARY-DOTENV\n")
        .write("ref/id_rsa", "CANARY-KEY\n")
        .write("ref/notes.txt", "notes\n")
        .write("outside/secret.txt", "CANARY-OUTSIDE\n")
        .write("ws/doomed.txt", "keep me\n")
        .write("tools/hostile.wasm", hostile_wasm());
    let config = env.config(
        &("audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"src\"\npath = \"src\"\nrole = \"sourcecode\"\n\
         [[roots]]\nname = \"ref\"\npath = \"ref\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         "
        .to_string()
            + &pinned("tools/hostile.wasm", hostile_wasm())),
    );
    let before = env.snapshot();
    let client = start(&config).await;
    assert!(tools(&client).await.iter().any(|t| t.name == "hostile"));

    let attack = |args: Value| {
        let mut base = json!({"root": "src", "write_path": "scratch.txt", "read_root": "ref"});
        for (k, v) in args.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    };
    let attacks = [
        // Read .env, raw and through std.
        json!({"attack": "raw_read", "mount": "ref", "path": ".env"}),
        json!({"attack": "std_read", "mount": "ref", "path": ".env"}),
        // Write and truncate on the reference root.
        json!({"attack": "std_write", "mount": "ref", "path": "pwned.txt"}),
        json!({"attack": "raw_create", "mount": "ref", "path": "notes.txt"}),
        // Delete on the sourcecode root (mounted read-write: its role has no delete).
        json!({"attack": "raw_unlink", "mount": "src", "path": "main.rs"}),
        // Rename into the trash.
        json!({"attack": "raw_rename", "mount": "src", "from": "main.rs", "to": ".mcp-trash/x"}),
        // A symlink pointing out, and an escape with ../.
        json!({"attack": "raw_symlink", "mount": "src", "path": "out", "target": "../outside/secret.txt"}),
        json!({"attack": "std_read", "mount": "src", "path": "../outside/secret.txt"}),
        // Delete on a workspace root, whose role allows it, by a tool that
        // declared only write: the call gets no more than it declared.
        json!({"attack": "raw_unlink", "root": "ws", "mount": "ws", "path": "doomed.txt"}),
    ];
    let mut results = Vec::new();
    for a in &attacks {
        let r = call(&client, "hostile", attack(a.clone())).await;
        let report = text(&r);
        assert!(report.starts_with("refused"), "{a}: {report}");
        results.push(r);
    }
    // A listing of a directory holding .env and id_rsa shows neither.
    let r = call(
        &client,
        "hostile",
        attack(json!({"attack": "raw_list", "mount": "ref", "path": "."})),
    )
    .await;
    assert_eq!(text(&r), "ok: README.md,notes.txt");
    results.push(r);
    assert_clean(&env, &results);
    client.cancel().await.unwrap();

    let denials: Vec<String> = audit_of(&env, "hostile")
        .iter()
        .filter(|l| l["decision"] == "deny")
        .map(|l| format!("{} {} {}", l["root"], l["path"], l["rule"]))
        .collect();
    assert_eq!(
        denials,
        [
            r#""ref" ".env" "deny""#,
            r#""ref" ".env" "deny""#,
            r#""ref" "pwned.txt" "permission""#,
            r#""ref" "notes.txt" "permission""#,
            r#""src" "main.rs" "permission""#,
            r#""src" ".mcp-trash/x" "deny""#,
            r#""src" "out" "confinement""#,
            r#""src" "../outside/secret.txt" "confinement""#,
            r#""ws" "doomed.txt" "permission""#,
        ]
    );
    let mut after = env.snapshot();
    after.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
    assert_eq!(after, before);
}

/// A third party's text is not the project's: an escape sequence, a bell,
/// a C1 control, a CR and a bidi override in what the hostile fixture
/// returns (as a result or as an error) reach the client as inert
/// `\uXXXX` escapes, its tabs and line feeds as they are.
#[tokio::test]
async fn a_third_party_tool_s_text_reaches_the_client_escaped() {
    let env = Env::new();
    env.mkdir("src").write("tools/hostile.wasm", hostile_wasm());
    let config = env.config(
        &("[[roots]]\nname = \"src\"\npath = \"src\"\nrole = \"sourcecode\"\n\
         "
        .to_string()
            + &pinned("tools/hostile.wasm", hostile_wasm())),
    );
    let client = start(&config).await;
    let said = "\u{1b}[2J\u{1b}]0;title\u{7}red\u{9b}31m\tcol\nrtl\u{202e}txt.exe\rover";
    let escaped = r"\u001b[2J\u001b]0;title\u0007red\u009b31m".to_string()
        + "\tcol\n"
        + r"rtl\u202etxt.exe\u000dover";
    for as_error in [false, true] {
        let r = call(
            &client,
            "hostile",
            json!({"root": "src", "write_path": "x", "attack": "echo", "text": said,
                   "as_error": as_error}),
        )
        .await;
        assert_eq!(is_error(&r), as_error, "{r:?}");
        assert_eq!(text(&r), escaped);
    }
    client.cancel().await.unwrap();
}

/// `check` (and so a start) refuses a component that cannot be a tool,
/// naming the file and the reason.
#[test]
fn components_that_cannot_be_tools_stop_the_start() {
    let env = Env::new();
    env.mkdir("docs")
        .write("tools/notes.txt", "not wasm")
        .write("tools/module.wasm", b"\0asm\x01\0\0\0")
        .write("tools/empty.wasm", b"\0asm\x0d\0\x01\0")
        .write("tools/net.wasm", network_component())
        .write("tools/text_stats.wasm", example_wasm())
        .write("tools/again.wasm", example_wasm());
    let check = |components: &[&str]| -> (bool, String) {
        let mut text =
            "[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n".to_string();
        for c in components {
            text += &match std::fs::read(env.path(c)) {
                Ok(bytes) => pinned(c, &bytes),
                Err(_) => format!("[[components]]\npath = \"{c}\"\nunpinned = true\n"),
            };
        }
        let config = env.config(&text);
        let out = check_output(&config);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let file = |name: &str| env.path("tools").join(name).display().to_string();
    for (components, expected) in [
        (
            vec!["tools/missing.wasm"],
            "component 'tools/missing.wasm': No such file or directory (os error 2)".to_string(),
        ),
        (
            vec!["tools/notes.txt"],
            format!(
                "component {}: is not a WebAssembly component",
                file("notes.txt")
            ),
        ),
        (
            vec!["tools/module.wasm"],
            format!(
                "component {}: is a core WebAssembly module, not a component (build it for wasm32-wasip2)",
                file("module.wasm")
            ),
        ),
        (
            vec!["tools/empty.wasm"],
            format!(
                "component {}: does not export the tool interface (loom-fs:tool/tool@0.3.0); build it against wit/",
                file("empty.wasm")
            ),
        ),
        (
            vec!["tools/net.wasm"],
            format!(
                "component {}: imports wasi:sockets/tcp@0.2.6: loom-fs grants no network to tools",
                file("net.wasm")
            ),
        ),
        (
            vec!["tools/text_stats.wasm", "tools/again.wasm"],
            format!(
                "component 'text_stats' ({}): a tool of that name is already registered",
                file("again.wasm")
            ),
        ),
    ] {
        let (ok, stderr) = check(&components);
        assert!(!ok, "{components:?} was accepted");
        assert!(stderr.contains(&expected), "{components:?}: {stderr}");
    }
    let (ok, stderr) = check(&["tools/text_stats.wasm"]);
    assert!(ok, "{stderr}");
}

/// The smallest component that imports a network interface.
fn network_component() -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentImportSection, ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut types = ComponentTypeSection::new();
    types.instance(&InstanceType::new());
    let mut imports = ComponentImportSection::new();
    imports.import("wasi:sockets/tcp@0.2.6", ComponentTypeRef::Instance(0));
    let mut component = Component::new();
    component.section(&types).section(&imports);
    component.finish()
}

/// Results too large for the host are refused as they are read out of the
/// guest, never taken in first: a 64 MiB and a 1 GiB structured result, a
/// 200 MiB text and ten million empty text blocks each get an error naming
/// `max_output_bytes` (16 MiB here), audited as stopped by `output`. The
/// server's peak resident memory grows by no more than what the guest
/// itself held (its linear memory lives in the server's address space) and
/// 48 MiB. Structured JSON of a million tiny values, small as text, is
/// refused by what it would take once parsed; JSON nested too deep is
/// refused by its depth, not a crash.
#[tokio::test]
async fn oversized_results_are_refused_as_they_are_read() {
    const MIB: u64 = 1 << 20;
    let env = Env::new();
    env.mkdir("ws").write("tools/hostile.wasm", hostile_wasm());
    let config = env.config(
        &("audit_log = \"audit.log\"\ntool_memory_bytes = 2147483648\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         "
        .to_string()
            + &pinned("tools/hostile.wasm", hostile_wasm())),
    );
    let (client, pid) =
        start_with_pid(&config, &[], rmcp::service::ClientLifecycleMode::Initialize).await;
    let big = |kind: &str, bytes: u64| {
        json!({"attack": "big_output", "kind": kind, "bytes": bytes,
            "root": "ws", "write_path": "x.txt"})
    };
    let small = call(&client, "hostile", big("", 0)).await;
    assert!(!is_error(&small), "{small:?}");
    let baseline = peak_rss(pid);
    // In the order of what the guest itself must hold, so that each peak
    // is bounded by its own case.
    for (kind, bytes, guest) in [
        ("structured", 64 * MIB, 64 * MIB),
        ("text", 200 * MIB, 200 * MIB),
        // 12 bytes per empty string in the guest, 8 more to return it.
        ("many", 10_000_000, 200_000_000),
        ("structured", 1024 * MIB, 1024 * MIB),
    ] {
        let r = call(&client, "hostile", big(kind, bytes)).await;
        assert_refused(&r, "would take more than 16777216 bytes");
        assert!(text(&r).contains("(max_output_bytes)"), "{}", text(&r));
        let peak = peak_rss(pid);
        assert!(
            peak <= baseline + guest + 48 * MIB,
            "{kind} {bytes}: peak {} MiB, from {} MiB",
            peak / MIB,
            baseline / MIB
        );
    }
    // Under the limit as text, but a million values once parsed.
    let zeros = call(&client, "hostile", big("zeros", 2 * MIB)).await;
    assert_refused(
        &zeros,
        "JSON values, more than max_output_bytes (16777216) allows",
    );
    assert!(peak_rss(pid) <= baseline + 1024 * MIB + 48 * MIB);
    let deep = call(&client, "hostile", big("deep", 100_000)).await;
    assert_refused(&deep, "tool 'hostile' returned malformed structured output");
    // Still serving.
    let again = call(&client, "hostile", big("", 0)).await;
    assert!(!is_error(&again), "{again:?}");
    let stopped: Vec<Value> = audit_of(&env, "hostile")
        .into_iter()
        .filter(|l| l["stopped"] == "output" && l["path"] == "x.txt")
        .collect();
    assert_eq!(stopped.len(), 4, "{stopped:?}");
}

/// Starts the server on `config` (stdin kept open) and returns what it said
/// on stderr when it refused to start; panics if it serves instead.
fn start_refused(config: &std::path::Path) -> String {
    let mut child = spawn_stdio(config, std::process::Stdio::piped());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not refuse to start");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success(), "it started");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    stderr
}

const DOCS: &str = "audit_log = \"audit.log\"\n\
                    [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n";

/// A pinned component loads, and its calls' audit lines carry its digest;
/// the same entry after one byte of the file changed is refused at start
/// and by `check`, naming the file and both digests; an entry with no pin
/// is refused unless it says `unpinned = true`, which `check` warns of.
#[tokio::test]
async fn a_component_is_served_only_as_pinned() {
    let env = Env::new();
    env.write("docs/guide.md", GUIDE)
        .write("tools/text_stats.wasm", example_wasm());
    let pinned_config =
        env.config(&(DOCS.to_string() + &pinned("tools/text_stats.wasm", example_wasm())));
    let digest = sha256_hex(example_wasm());
    let (ok, out) = check(&pinned_config);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("pinned: sha256 {digest} (matches)")),
        "{out}"
    );
    assert!(!out.contains("unpinned"), "{out}");
    let client = start(&pinned_config).await;
    call_ok(
        &client,
        "text_stats",
        json!({"root": "docs", "path": "guide.md"}),
    )
    .await;
    client.cancel().await.unwrap();
    let lines = audit_of(&env, "text_stats");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["sha256"], &digest[..12]);

    // One byte changed: a different file at the same path.
    let mut changed = example_wasm().to_vec();
    let last = changed.len() - 1;
    changed[last] ^= 0x01;
    env.write("tools/text_stats.wasm", &changed);
    let expected = format!(
        "component {}: its sha256 is {}, but the config pins {digest}",
        env.path("tools/text_stats.wasm").display(),
        sha256_hex(&changed)
    );
    let refused = start_refused(&pinned_config);
    assert!(refused.contains(&expected), "{refused}");
    assert_fails_with(&check_output(&pinned_config), &expected);

    // No pin at all.
    let bare =
        env.config(&(DOCS.to_string() + "[[components]]\npath = \"tools/text_stats.wasm\"\n"));
    let unpinned = "component 'tools/text_stats.wasm': not pinned: add sha256 = \"…\"";
    assert!(start_refused(&bare).contains(unpinned));
    assert_fails_with(&check_output(&bare), unpinned);
    // Said outright: served, and warned of.
    let said = env.config(
        &(DOCS.to_string() + "[[components]]\npath = \"tools/text_stats.wasm\"\nunpinned = true\n"),
    );
    env.write("tools/text_stats.wasm", example_wasm());
    let (ok, out) = check(&said);
    assert!(ok, "{out}");
    assert!(
        out.contains("UNPINNED: any file at this path is served"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "component {} is unpinned (unpinned = true)",
            env.path("tools/text_stats.wasm").display()
        )),
        "{out}"
    );
    let client = start(&said).await;
    assert!(tools(&client).await.iter().any(|t| t.name == "text_stats"));
    client.cancel().await.unwrap();
}

/// `signed = true`: a signature by a `[trust]` key, made as the minisign
/// tool makes it, admits the file; a signature over other bytes, none at
/// all, or one by a key not listed is refused with the reason.
#[tokio::test]
async fn a_signed_component_needs_a_good_signature_by_a_trusted_key() {
    let env = Env::new();
    env.write("docs/guide.md", GUIDE)
        .write("tools/text_stats.wasm", example_wasm());
    let author = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let stranger = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    let sign = |pair: &minisign::KeyPair, bytes: &[u8]| {
        minisign::sign(
            Some(&pair.pk),
            &pair.sk,
            bytes,
            Some("text-stats 0.1.0"),
            None,
        )
        .unwrap()
        .into_string()
    };
    let config = env.config(&format!(
        "{DOCS}{}signed = true\n[trust]\nkeys = [\"{}\"]\n",
        pinned("tools/text_stats.wasm", example_wasm()),
        author.pk.to_base64()
    ));
    let file = env.path("tools/text_stats.wasm").display().to_string();
    let sig = format!("{file}.minisig");

    env.write(
        "tools/text_stats.wasm.minisig",
        sign(&author, example_wasm()),
    );
    let (ok, out) = check(&config);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("signed: {sig} verifies with a [trust] key")),
        "{out}"
    );
    let client = start(&config).await;
    call_ok(
        &client,
        "text_stats",
        json!({"root": "docs", "path": "guide.md"}),
    )
    .await;
    client.cancel().await.unwrap();

    let mut other = example_wasm().to_vec();
    other.push(0);
    for (signature, reason) in [
        (
            Some(sign(&author, &other)),
            format!("its signature {sig} does not verify"),
        ),
        (None, format!("its signature {sig} cannot be read")),
        (
            Some(sign(&stranger, example_wasm())),
            format!("its signature {sig} was made by a key not in [trust] keys"),
        ),
        (
            Some("untrusted comment: x\nnot base64\n".into()),
            format!("its signature {sig} is not a minisign signature"),
        ),
    ] {
        match &signature {
            Some(text) => {
                env.write("tools/text_stats.wasm.minisig", text);
            }
            None => std::fs::remove_file(&sig).unwrap(),
        }
        let expected = format!("component {file}: {reason}");
        let refused = start_refused(&config);
        assert!(refused.contains(&expected), "{refused}");
        assert_fails_with(&check_output(&config), &expected);
    }
}

/// `roots` and `permissions` on an entry: the hostile fixture scoped to
/// one root is not offered the other (not listed for it, refused by
/// resolve(), and no preopen of it in the instance), and capped at read on
/// a workspace root it is listed read-only and its write is refused inside
/// the sandbox by the policing filesystem, audited, nothing written.
#[tokio::test]
async fn scope_and_cap_narrow_what_a_component_gets() {
    let env = Env::new();
    env.write("ws/keep.txt", "keep\n")
        .write("notes/secret.txt", "CANARY-NOTES\n")
        .write("tools/hostile.wasm", hostile_wasm());
    let config = env.config(&format!(
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         [[roots]]\nname = \"notes\"\npath = \"notes\"\nrole = \"workspace\"\n\
         {}roots = [\"ws\"]\npermissions = [\"read\"]\n",
        pinned("tools/hostile.wasm", hostile_wasm())
    ));
    let before = env.snapshot();
    let (ok, out) = check(&config);
    assert!(ok, "{out}");
    assert!(out.contains("roots: ws"), "{out}");
    assert!(out.contains("permissions: read (at most)"), "{out}");
    assert!(out.contains("(declares write, capped)"), "{out}");
    let client = start(&config).await;
    let listed = tools(&client).await;
    let tool = listed.iter().find(|t| t.name == "hostile").expect("listed");
    let description = tool.description.as_deref().unwrap_or_default();
    // Its schema has no root field: the description names its roots.
    assert!(
        description.ends_with("Roots it can act on: ws."),
        "{description}"
    );
    assert!(description.contains("It declares write, but is capped at read here"));
    let hints = tool.annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(true));
    // MCP gives these meaning only where readOnlyHint is false.
    assert_eq!(
        (hints.destructive_hint, hints.idempotent_hint),
        (None, None)
    );

    let mut results = Vec::new();
    // The other root does not exist for it.
    let r = call(
        &client,
        "hostile",
        json!({"attack": "preopens", "root": "notes", "write_path": "x"}),
    )
    .await;
    assert_refused(
        &r,
        "refused by rule 'unknown_root': unknown root 'notes'; roots: ws",
    );
    results.push(r);
    let r = call(
        &client,
        "hostile",
        json!({"attack": "preopens", "root": "ws", "write_path": "x"}),
    )
    .await;
    assert_eq!(text(&r), "ok: /ws");
    results.push(r);
    let r = call(
        &client,
        "hostile",
        json!({"attack": "std_read_absolute", "root": "ws", "write_path": "x",
               "path": "/notes/secret.txt"}),
    )
    .await;
    assert!(text(&r).starts_with("refused"), "{}", text(&r));
    assert!(!text(&r).contains("CANARY"));
    results.push(r);
    // A write where the cap allows only reading: the call runs, with a
    // read-only mount, and the write fails inside it.
    let r = call(
        &client,
        "hostile",
        json!({"attack": "std_write", "root": "ws", "write_path": "pwned.txt",
               "path": "pwned.txt"}),
    )
    .await;
    assert!(text(&r).starts_with("refused"), "{}", text(&r));
    results.push(r);
    let r = call(
        &client,
        "hostile",
        json!({"attack": "raw_unlink", "root": "ws", "write_path": "keep.txt",
               "path": "keep.txt"}),
    )
    .await;
    assert!(text(&r).starts_with("refused"), "{}", text(&r));
    results.push(r);
    assert_clean(&env, &results);
    client.cancel().await.unwrap();

    let lines = audit_of(&env, "hostile");
    let denials: Vec<String> = lines
        .iter()
        .filter(|l| l["decision"] == "deny")
        .map(|l| format!("{} {} {} {}", l["root"], l["path"], l["op"], l["rule"]))
        .collect();
    assert_eq!(
        denials,
        [
            r#""notes" "x" "read" "unknown_root""#,
            r#""ws" "pwned.txt" "write" "permission""#,
            r#""ws" "keep.txt" "delete" "permission""#,
        ]
    );
    let short = &sha256_hex(hostile_wasm())[..12];
    assert!(lines.iter().all(|l| l["sha256"] == short), "{lines:?}");
    let mut after = env.snapshot();
    after.retain(|(p, _)| !p.to_string_lossy().starts_with("audit.log"));
    assert_eq!(after, before);
}

/// An entry's `timeout_ms` stops a spinning tool long before the server's
/// own `tool_timeout_ms`; larger limits than the server's are refused,
/// naming the key.
#[tokio::test]
async fn an_entry_s_limits_are_its_own_and_never_above_the_server_s() {
    let env = Env::new();
    env.mkdir("ws").write("tools/hostile.wasm", hostile_wasm());
    let entry = |limits: &str| {
        env.config(&format!(
            "audit_log = \"audit.log\"\ntool_timeout_ms = 60000\n\
             [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n{}{limits}\n",
            pinned("tools/hostile.wasm", hostile_wasm())
        ))
    };
    let config = entry("timeout_ms = 300");
    let client = start(&config).await;
    let started = std::time::Instant::now();
    let r = call(
        &client,
        "hostile",
        json!({"attack": "spin", "root": "ws", "write_path": "x"}),
    )
    .await;
    let took = started.elapsed();
    assert_refused(
        &r,
        "the call took longer than 300 ms and was stopped (timeout_ms of the tool's \
         [[components]] entry)",
    );
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    client.cancel().await.unwrap();
    let stopped: Vec<Value> = audit_of(&env, "hostile")
        .into_iter()
        .filter(|l| l["stopped"] == "timeout" && l["path"] == "x")
        .collect();
    assert_eq!(stopped.len(), 1, "{stopped:?}");

    for (limits, problem) in [
        (
            "timeout_ms = 60001",
            "timeout_ms = 60001 is more than the server's tool_timeout_ms (60000)",
        ),
        (
            "memory_bytes = 4294967296",
            "memory_bytes = 4294967296 is more than the server's tool_memory_bytes",
        ),
        (
            "max_output_bytes = 4294967296",
            "max_output_bytes = 4294967296 is more than the server's max_output_bytes",
        ),
    ] {
        assert_fails_with(
            &check_output(&entry(limits)),
            &format!("component 'tools/hostile.wasm': {problem}"),
        );
    }
}

/// An entry's `memory_bytes` and `max_output_bytes` stop a call the
/// server's own limits would let through, and the refusal names the
/// entry's key; a call within them still runs.
#[tokio::test]
async fn an_entry_s_memory_and_output_limits_stop_what_the_server_s_allow() {
    const MIB: u64 = 1 << 20;
    let env = Env::new();
    env.mkdir("ws").write("tools/hostile.wasm", hostile_wasm());
    let config = env.config(&format!(
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n{}\
         memory_bytes = {}\nmax_output_bytes = {}\n",
        pinned("tools/hostile.wasm", hostile_wasm()),
        32 * MIB,
        MIB
    ));
    let client = start(&config).await;
    let big = |kind: &str, bytes: u64| {
        json!({"attack": "big_output", "kind": kind, "bytes": bytes,
            "root": "ws", "write_path": "x.txt"})
    };
    // 64 MiB of text: more memory than the entry gives (the server's
    // default is 256 MiB).
    let r = call(&client, "hostile", big("text", 64 * MIB)).await;
    assert_refused(
        &r,
        "MiB of memory and was stopped (memory_bytes of the tool's [[components]] entry)",
    );
    // 2 MiB of text fits in memory but not in the entry's output limit
    // (the server's default is 16 MiB).
    let r = call(&client, "hostile", big("text", 2 * MIB)).await;
    assert_refused(
        &r,
        "would take more than 1048576 bytes of the server's memory and was refused as it was \
         read (max_output_bytes of the tool's [[components]] entry)",
    );
    let small = call(&client, "hostile", big("text", 1000)).await;
    assert!(!is_error(&small), "{small:?}");
    client.cancel().await.unwrap();
    let stopped: Vec<String> = audit_of(&env, "hostile")
        .into_iter()
        .filter(|l| l["path"] == "x.txt")
        .filter_map(|l| l["stopped"].as_str().map(str::to_string))
        .collect();
    assert_eq!(stopped, ["memory", "output"], "{stopped:?}");
}

/// `component inspect` tells what a file is and whether the server would
/// take it, without a config: the example (accepted, every import and
/// export, its declaration and digest), a core module and a component
/// importing `wasi:sockets` (refused, and why). `component add` prints an
/// entry that a config then serves as is.
#[test]
fn component_inspect_and_add_need_no_config() {
    let env = Env::new();
    env.mkdir("docs")
        .write("tools/text_stats.wasm", example_wasm())
        .write("tools/module.wasm", core_module())
        .write("tools/net.wasm", network_component());
    let run = |action: &str, file: &str| {
        let out = command()
            .args(["component", action])
            .arg(env.path(file))
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run("inspect", "tools/text_stats.wasm");
    assert!(ok, "{err}");
    for line in [
        format!("sha256: {}", sha256_hex(example_wasm())),
        "kind: component".into(),
        "name: text_stats".into(),
        "permission: read".into(),
        "  path in root: read".into(),
        "input schema: {".into(),
        "output schema: {".into(),
        "  loom-fs:tool/tool@0.3.0".into(),
        "accepted: yes".into(),
    ] {
        assert!(out.contains(&line), "{line:?} not in {out}");
    }
    // Each schema on one line, as JSON a reader can paste.
    for (label, required) in [("input schema: ", "path"), ("output schema: ", "outline")] {
        let line = out.lines().find_map(|l| l.strip_prefix(label)).unwrap();
        let schema: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == required),
            "{label}{line}"
        );
    }
    let imports: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "imports:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(!imports.is_empty(), "{out}");
    assert!(
        imports.iter().all(|i| i.starts_with("  wasi:")),
        "{imports:?}"
    );

    let (ok, out, err) = run("inspect", "tools/module.wasm");
    assert!(!ok);
    assert!(out.contains("kind: core WebAssembly module"), "{out}");
    assert!(out.contains("  env::f"), "{out}");
    assert!(
        out.contains("accepted: no: it is a core WebAssembly module, not a component"),
        "{out}"
    );
    assert!(err.contains("would be refused"), "{err}");

    let (ok, out, _) = run("inspect", "tools/net.wasm");
    assert!(!ok);
    assert!(
        out.contains("imports:\n  wasi:sockets/tcp@0.2.6\n"),
        "{out}"
    );
    assert!(
        out.contains("accepted: no: it imports wasi:sockets/tcp@0.2.6: loom-fs grants no network"),
        "{out}"
    );

    let (ok, stanza, err) = run("add", "tools/text_stats.wasm");
    assert!(ok, "{err}");
    assert!(stanza.starts_with("[[components]]\npath = "), "{stanza}");
    assert!(
        stanza.contains(&format!("sha256 = \"{}\"", sha256_hex(example_wasm()))),
        "{stanza}"
    );
    let config = env.config(&format!(
        "[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n{stanza}"
    ));
    let (ok, out) = check(&config);
    assert!(ok, "{out}");
    assert!(out.contains("text_stats"), "{out}");
    let (ok, _, err) = run("add", "tools/net.wasm");
    assert!(!ok);
    assert!(err.contains("imports wasi:sockets/tcp@0.2.6"), "{err}");
}

/// A core module importing one function and exporting another.
fn core_module() -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection,
        ImportSection, Module, TypeSection,
    };
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut imports = ImportSection::new();
    imports.import("env", "f", EntityType::Function(0));
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut exports = ExportSection::new();
    exports.export("run", ExportKind::Func, 1);
    let mut code = CodeSection::new();
    let mut body = Function::new([]);
    body.instructions().end();
    code.function(&body);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&exports)
        .section(&code);
    module.finish()
}
