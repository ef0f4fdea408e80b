//! The binary from the command line: `check`, refusals of bad configs, the
//! start-up banner on stderr, a clean stdout and a clean exit on EOF.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::*;

fn roots(env: &Env) -> std::path::PathBuf {
    env.mkdir("docs").mkdir("work");
    env.config(
        r#"
        deny = ["*.sqlite3"]
        [[roots]]
        name = "docs"
        path = "docs"
        role = "reference"
        [[roots]]
        name = "work"
        path = "work"
        role = "workspace"
        permissions = ["read", "write"]
        deny = ["*.tmp", "*.log"]
        "#,
    )
}

#[test]
fn check_prints_roots_and_tool_surface() {
    let env = Env::new();
    let config = roots(&env);
    let out = check_output(&config);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "config is valid");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  docs  reference   [read]")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  work  workspace   [read, write]")
                && l.ends_with("deny += *.tmp, *.log")),
        "{stdout}"
    );
    assert!(
        stdout.contains("deny (every root) += *.sqlite3"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  read    get_file_info, list_directory, list_roots, read_document, read_file, search_files"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  write   copy_file, create_directory, edit_file, move_file, write_file"),
        "{stdout}"
    );
    // `work` narrows its role to read and write: no root grants delete.
    assert!(stdout.contains("  delete  (none)"), "{stdout}");

    let ro = command()
        .args(["check", "--read-only", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8(ro.stdout).unwrap();
    assert!(
        stdout.contains("read-only: every root is capped at read"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("  work  workspace   [read]")),
        "{stdout}"
    );
}

#[test]
fn bad_configs_exit_non_zero_with_the_reason() {
    let env = Env::new();
    env.mkdir("docs").mkdir("docs/inner");
    for (text, reason) in [
        (
            "[[roots]]\nname = \"d\"\npath = \"nowhere\"\nrole = \"reference\"\n",
            "root 'd': path 'nowhere' does not exist",
        ),
        (
            "[[roots]]\nname = \"d\"\npath = \"docs\"\nrole = \"reference\"\npermissions = [\"write\"]\n",
            "root 'd' (role reference) cannot grant write",
        ),
        (
            "[[roots]]\nname = \"a\"\npath = \"docs\"\nrole = \"reference\"\n[[roots]]\nname = \"b\"\npath = \"docs/inner\"\nrole = \"reference\"\n",
            "root 'b' lies inside root 'a'",
        ),
        ("base_deny = []\n", "unknown field `base_deny`"),
        ("", "no roots declared"),
    ] {
        let config = env.config(text);
        for args in [&["check"][..], &[][..]] {
            let out = command()
                .args(args)
                .arg("--config")
                .arg(&config)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{text} {args:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(reason), "{reason} not in {stderr}");
            if args.is_empty() {
                assert!(
                    out.stdout.is_empty(),
                    "serve wrote to stdout: {:?}",
                    out.stdout
                );
            }
        }
    }
}

#[test]
fn no_config_and_unopenable_audit_log_refuse_to_start() {
    let out = command().output().unwrap();
    assert_fails_with(
        &out,
        "no directory and no config given: name the directories to serve",
    );

    let env = Env::new();
    env.mkdir("docs")
        .write("blocker", "a file, not a directory");
    let config = env.config(
        "audit_log = \"blocker/audit.log\"\n[[roots]]\nname = \"d\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let out = command().arg("--config").arg(&config).output().unwrap();
    assert_fails_with(&out, "cannot open the audit log");
    assert!(out.stdout.is_empty());
}

/// Speaks raw JSON-RPC to the binary: stdout carries nothing but JSON-RPC
/// messages, stderr carries the banner and the audit lines, and closing
/// stdin ends the process cleanly.
#[test]
fn stdout_is_only_json_rpc_and_eof_exits_cleanly() {
    let env = Env::new();
    let config = roots(&env);
    env.write("docs/a.txt", "hello\n");
    let mut child = spawn_stdio(&config, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":"a.txt"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":"../x"}}}"#,
    ];
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut line = String::new();
    while seen.len() < 3 {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "stdout closed early"
        );
        let msg: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line:?}"));
        assert_eq!(msg["jsonrpc"], "2.0", "{line}");
        seen.push(msg);
    }
    drop(stdin);
    assert_exits_cleanly(&mut child);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(rest.trim().is_empty(), "extra stdout: {rest:?}");

    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let mut lines = stderr.lines();
    assert_eq!(lines.next(), Some("loom-fs-mcp 0.1.0: 2 roots"));
    assert_eq!(lines.next(), Some("  docs  reference   [read]"));
    assert_eq!(lines.next(), Some("  work  workspace   [read, write]"));
    // The free space of each root tools may change, against its reserve.
    let space = lines.next().unwrap_or_default();
    assert!(
        space.starts_with("  work  ")
            && space.ends_with("free on its disk, keeps 256 MiB (min_free_bytes)"),
        "{space:?}"
    );
    // The trash's usage is said by the component loader, which runs beside
    // this announcement: either may come first.
    assert_eq!(
        lines.find(|l| !l.contains("trash holds")),
        Some("serving MCP over stdio"),
        "{stderr}"
    );
    // The audit lines (audit_log defaults to stderr): one allow, one deny.
    let audit: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(audit.len(), 2, "{stderr}");
    let deny = audit.iter().find(|a| a["decision"] == "deny").unwrap();
    assert_eq!(deny["rule"], "confinement");
    assert_eq!(deny["path"], "../x");
    let allow = audit.iter().find(|a| a["decision"] == "allow").unwrap();
    assert_eq!(allow["bytes"], 6);
    assert_eq!(allow["tool"], "read_file");
}

/// Pipes are read and written on the server's event loop; anything else
/// keeps tokio's blocking stdio: a stdin that is a file, and a stdout that
/// is also stderr's pipe (`2>&1`), which stderr's writers expect blocking.
/// Both serve the session whole.
#[test]
fn stdin_from_a_file_and_stderr_on_stdout_still_serve() {
    let env = Env::new();
    let config = roots(&env);
    env.write("docs/a.txt", "hello\n");
    let requests = env.path("requests.jsonl");
    std::fs::write(
        &requests,
        [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":"a.txt"}}}"#,
            "",
        ]
        .join("\n"),
    )
    .unwrap();
    // The components cached first (`check` compiles and caches them): the
    // session ends at the file's end, and rmcp answers what is in flight
    // then for at most 5 s, which compiling every component on a loaded
    // machine can take.
    let checked = command()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = command()
        .arg("--config")
        .arg(&config)
        .stdin(std::fs::File::open(&requests).unwrap())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .expect("spawn loom-fs-mcp");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut reader, &mut out).unwrap();
    assert_exits_cleanly(&mut child);
    let answers: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with(r#"{"jsonrpc""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 2, "{out}");
    assert_eq!(answers[1]["id"], 2, "{out}");
    assert_eq!(
        answers[1]["result"]["content"][0]["text"], "hello\n",
        "{out}"
    );
    assert!(out.contains("serving MCP over stdio"), "{out}");
}

#[test]
fn audit_lines_go_to_the_configured_file() {
    let env = Env::new();
    env.write("docs/a.txt", "hello\n");
    let config = env.config(
        "audit_log = \"logs/audit.log\"\n[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let mut child = spawn_stdio(&config, Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    for r in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"docs","path":".env"}}}"#,
    ] {
        writeln!(stdin, "{r}").unwrap();
    }
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        stdout.read_line(&mut line).unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let log = std::fs::read_to_string(env.path("logs/audit.log")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(entry["tool"], "read_file");
    assert_eq!(entry["root"], "docs");
    assert_eq!(entry["path"], ".env");
    assert_eq!(entry["op"], "read");
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["rule"], "deny");
}

/// Protocol versions over stdio, per spec: `initialize` with a version the
/// server does not speak is answered with one it does (the client decides);
/// a 2026-era request naming an unknown version is refused with the list.
#[test]
fn unknown_protocol_versions_are_negotiated_or_refused() {
    let env = Env::new();
    let config = roots(&env);
    let mut child = spawn_stdio(&config, Stdio::null());
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientInfo":{"name":"x","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let answers: Vec<serde_json::Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    child.wait().unwrap();
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).expect("an answer");
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-11-25");
    let refused = by_id(2);
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["requested"], "2099-01-01");
    assert!(
        refused["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("2026-07-28"))
    );
}

/// Every flag has an environment counterpart (for containers), named in
/// `--help`; a flag given on the command line wins over its variable.
#[test]
fn environment_variables_stand_in_for_flags_and_flags_win() {
    // Without the harness's own LOOMFS_ALLOW_ROOT, which --help would show.
    let help = command()
        .env_remove("LOOMFS_ALLOW_ROOT")
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for var in FLAG_VARS {
        assert!(
            help.contains(&format!("[env: {var}=]")),
            "{var} missing from --help"
        );
    }
    let env = Env::new();
    let config = roots(&env);
    // The config from LOOMFS_CONFIG, read-only from LOOMFS_READ_ONLY, which
    // takes the usual spellings of yes and no.
    for (value, read_only) in [
        ("true", true),
        ("1", true),
        ("yes", true),
        ("0", false),
        ("false", false),
    ] {
        let out = command()
            .arg("check")
            .env("LOOMFS_CONFIG", &config)
            .env("LOOMFS_READ_ONLY", value)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{value}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stdout.contains("read-only: every root is capped at read"),
            read_only,
            "{value}: {stdout}"
        );
    }
    // A flag wins: --config over a variable naming a missing file.
    let out = command()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .env("LOOMFS_CONFIG", env.path("missing.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A variable's bad value is refused like the flag's.
    let out = command()
        .arg("--config")
        .arg(&config)
        .env("LOOMFS_TRANSPORT", "carrier-pigeon")
        .output()
        .unwrap();
    assert_fails_with(&out, "carrier-pigeon");
}

/// A compiled-component cache in a root that tools may change is not used:
/// a tool could plant compiled code there for the next start to run. Both
/// `check` and the server say so, and nothing is written to it.
#[test]
fn a_cache_in_a_writable_root_is_not_used() {
    let env = Env::new();
    env.write("ws/a.txt", "a\n").write("docs/b.txt", "b\n");
    let config = env.config(
        "[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"sourcecode\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let warning = format!(
        "the component cache {} lies in root 'ws', which tools may change: it is not used",
        env.path("ws/.cache").display()
    );
    let out = command()
        .args(["check", "--config"])
        .arg(&config)
        .env("LOOMFS_CACHE_DIR", env.path("ws/.cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(&format!("  {warning}")), "{stdout}");
    assert!(
        !env.path("ws/.cache").exists(),
        "nothing cached in the root"
    );
    // In a read-only root it is used.
    let out = command()
        .args(["check", "--config"])
        .arg(&config)
        .env("LOOMFS_CACHE_DIR", env.path("docs/.cache"))
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("component cache"));
    assert!(env.path("docs/.cache").is_dir());
    // The server says it on start.
    let mut child = command()
        .arg("--config")
        .arg(&config)
        .env("LOOMFS_CACHE_DIR", env.path("ws/.cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = stderr_until(&mut child, "serving MCP over stdio");
    assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `check` on a config an operator should think twice about: a root that is
/// the home directory and holds `.ssh`, the audit log inside a root, and a
/// non-loopback HTTP address. It also shows the whole tool surface, with
/// the roots each tool may act on, and the transport.
#[test]
fn check_warns_about_risky_configs() {
    let env = Env::new();
    env.mkdir("home/.ssh").mkdir("docs");
    let config = env.config(
        "audit_log = \"docs/logs/audit.log\"\n\
         [[roots]]\nname = \"home\"\npath = \"~/\"\nrole = \"sourcecode\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    let out = command()
        .args([
            "check",
            "--transport",
            "http",
            "--listen",
            "0.0.0.0:3000",
            "--allow-non-loopback",
            "--config",
        ])
        .arg(&config)
        .env("HOME", env.path("home"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for expected in [
        "  read_file         read    home, docs                built-in",
        "  write_file        write   home                      built-in",
        "components: 13 built-in, 0 third-party",
        "resources: loomfs://ROOT/{+path} for home, docs (read through read_file and list_directory, with path completion); logging: refusals and limits of a client's calls, at warning",
        "subscriptions: resources/subscribe and subscriptions/listen, at most 256 per session, 20 notifications a second per session, never of a denied path",
        "client_roots: ignore (the client's roots are not asked for; every session is served these roots)",
        "transport: http on 0.0.0.0:3000 (no token)",
        "warnings:",
        "  root 'home' is or holds your home directory: dotfiles and keys the deny list does not name are exposed",
        "  root 'home' holds .ssh: denied by name, but a root should not contain keys at all",
        "  the audit log is inside root 'docs': tools can read it (and, where the role allows, change it)",
        "  listening on 0.0.0.0:3000, which is not loopback: anyone who can reach it can use every root with its permissions, and no --auth-token-file is set",
    ] {
        assert!(
            stdout.lines().any(|l| l == expected),
            "{expected:?} not in:\n{stdout}"
        );
    }
    // What serve would refuse, check refuses: no --allow-non-loopback.
    let out = command()
        .args([
            "check",
            "--transport",
            "http",
            "--listen",
            "0.0.0.0:3000",
            "--config",
        ])
        .arg(&config)
        .env("HOME", env.path("home"))
        .output()
        .unwrap();
    assert_fails_with(&out, "refusing to listen on 0.0.0.0:3000");
    // A plain config has no warnings.
    let plain = roots(&env);
    let out = check_output(&plain);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("transport: stdio"), "{stdout}");
    let warnings: Vec<&str> = stdout.lines().skip_while(|l| *l != "warnings:").collect();
    if rustix::process::geteuid().is_root() {
        // But running as root, as the tests do where they run as root.
        assert_eq!(
            warnings,
            [
                "warnings:",
                "  running as root (--allow-root): root bypasses file permissions, so a bug in \
                 the server could reach any file on this machine"
            ],
            "{stdout}"
        );
    } else {
        assert!(warnings.is_empty(), "{stdout}");
    }
}

/// Two servers on one audit file: the second is refused at start, with the
/// reason and what to do.
#[test]
fn a_second_server_on_the_same_audit_log_is_refused() {
    let env = Env::new();
    let config = env.config(
        "audit_log = \"audit.log\"\n\
         [[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n",
    );
    env.mkdir("docs");
    let mut first = spawn_stdio(&config, Stdio::piped());
    stderr_until(&mut first, "serving MCP over stdio");
    // `check` runs beside it: it does not take the log.
    let check = check_output(&config);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let second = command().arg("--config").arg(&config).output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        stderr.contains(&format!(
            "is in use by another loom-fs-mcp (pid {})",
            first.id()
        )) && stderr.contains("give each instance its own audit_log file"),
        "{stderr}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

/// STYLE.md's span per call: with `LOOMFS_LOG=debug` each call ends with a
/// `call` line on stderr naming the tool, the root, the rule that refused
/// it (`none` when none did) and its duration; at the default level there
/// is no such line.
#[tokio::test]
async fn each_call_is_traced_at_debug_and_only_then() {
    for (level, traced) in [("loom_fs_mcp=debug", true), ("warn", false)] {
        let env = Env::new();
        env.mkdir("work").write("work/a.txt", "a\n");
        let config = roots(&env);
        let mut cmd = server_command(&config);
        cmd.env("LOOMFS_LOG", level);
        let (client, _pid, said) = start_command(cmd).await;
        call_ok(
            &client,
            "read_file",
            serde_json::json!({"root": "work", "path": "a.txt"}),
        )
        .await;
        let r = call(
            &client,
            "read_file",
            serde_json::json!({"root": "work", "path": "x.tmp"}),
        )
        .await;
        assert!(is_error(&r));
        client.cancel().await.unwrap();
        let said = said.await.unwrap();
        let calls: Vec<&str> = said
            .lines()
            .filter(|l| l.contains("call{") && l.contains(" call "))
            .collect();
        if !traced {
            assert!(calls.is_empty(), "{said}");
            continue;
        }
        assert_eq!(calls.len(), 2, "{said}");
        for line in &calls {
            assert!(
                line.contains("tool=read_file") && line.contains("root=work"),
                "{line}"
            );
            assert!(line.contains("duration_us="), "{line}");
        }
        assert!(
            calls[0].contains("rule=\"none\"") || calls[0].contains("rule=none"),
            "{}",
            calls[0]
        );
        assert!(calls[1].contains("deny"), "{}", calls[1]);
    }
}

/// The test switches exist only in the tests' build (the `test-hooks`
/// feature): the binary a user builds, kept aside by scripts/test as
/// `LOOMFS_PLAIN_BIN`, neither holds a publish for `LOOMFS_TEST_HOOK_DIR`
/// nor takes the portable walk for `LOOMFS_PORTABLE_RESOLVE=1`, where the
/// tests' build does both.
#[tokio::test]
async fn a_release_binary_ignores_the_test_switches() {
    let Some(plain) = std::env::var_os("LOOMFS_PLAIN_BIN") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "LOOMFS_PLAIN_BIN is not set under CI=true: scripts/test builds it"
        );
        eprintln!("SKIPPED: LOOMFS_PLAIN_BIN is not set (scripts/test builds it)");
        return;
    };
    for (program, switches_live) in [(std::ffi::OsString::from(BIN), true), (plain, false)] {
        let env = Env::new();
        env.mkdir("work").write("work/a.txt", "old\n");
        let config = roots(&env);
        let hook = env.path("hook");
        std::fs::create_dir_all(&hook).unwrap();
        std::fs::write(hook.join("armed"), "").unwrap();
        let mut cmd = with_server_env(tokio::process::Command::new(&program));
        cmd.arg("--config")
            .arg(&config)
            .env("LOOMFS_TEST_HOOK_DIR", &hook)
            .env("LOOMFS_PORTABLE_RESOLVE", "1");
        let (client, _pid, said) = start_command(cmd).await;
        let client = std::sync::Arc::new(client);
        let writer = {
            let client = client.clone();
            tokio::spawn(async move {
                call_ok(
                    &client,
                    "write_file",
                    serde_json::json!({"root": "work", "path": "a.txt", "content": "new\n"}),
                )
                .await
            })
        };
        if switches_live {
            assert!(
                publish_held(&hook).await,
                "the tests' build holds the publish"
            );
            std::fs::write(hook.join("go"), "").unwrap();
        }
        writer.await.unwrap();
        assert_eq!(
            std::fs::read_to_string(env.path("work/a.txt")).unwrap(),
            "new\n"
        );
        assert_eq!(hook.join("armed").exists(), !switches_live, "{program:?}");
        std::sync::Arc::into_inner(client)
            .unwrap()
            .cancel()
            .await
            .unwrap();
        let said = said.await.unwrap();
        assert_eq!(
            said.contains("the portable walk"),
            switches_live,
            "{program:?}: {said}"
        );
    }
}
