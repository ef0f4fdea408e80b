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
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\nmax_read_bytes = 4096\n\
         [[components]]\npath = \"tools/text_stats.wasm\"\n",
    );
    let before = env.snapshot_of("outside");
    let client = start(&config).await;

    let listed = tools(&client).await;
    let tool = listed
        .iter()
        .find(|t| t.name == "text_stats")
        .expect("text_stats is listed");
    let description = tool.description.as_deref().unwrap_or_default();
    assert!(
        description.ends_with("Roots it can act on: docs (reference)."),
        "{description}"
    );
    let hints = tool.annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.destructive_hint, Some(false));
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
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"src\"\npath = \"src\"\nrole = \"sourcecode\"\n\
         [[roots]]\nname = \"ref\"\npath = \"ref\"\nrole = \"reference\"\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         [[components]]\npath = \"tools/hostile.wasm\"\n",
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
        "[[roots]]\nname = \"src\"\npath = \"src\"\nrole = \"sourcecode\"\n\
         [[components]]\npath = \"tools/hostile.wasm\"\n",
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
            text += &format!("[[components]]\npath = \"{c}\"\n");
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
                "component {}: does not export the tool interface (loom-fs:tool/tool@0.2.0); build it against wit/",
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
        "audit_log = \"audit.log\"\ntool_memory_bytes = 2147483648\n\
         [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n\
         [[components]]\npath = \"tools/hostile.wasm\"\n",
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
