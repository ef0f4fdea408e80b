//! End to end: directories given on the command line serve as roots with
//! no config file. Read only unless a role flag before them says
//! otherwise; named after their last component, made distinct; `~/`
//! expanded; nested, missing, repeated and `/` refused at start with the
//! config file's messages; `check` and `trash` take the same arguments;
//! with `--config` both sets of roots are validated together.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// The real binary with `args` (no config unless they give one), `HOME`
/// set to `home`, as a tokio command for [`start_command`].
fn server<S: AsRef<OsStr>>(args: &[S], home: &Path) -> tokio::process::Command {
    let mut cmd = bare_server();
    cmd.args(args).env("HOME", home);
    cmd
}

/// The same as a finished process, run in `home`: `check`, `trash …`, or
/// a refused start.
fn run<S: AsRef<OsStr>>(args: &[S], home: &Path) -> std::process::Output {
    let mut cmd = command();
    cmd.env_remove("LOOMFS_CONFIG")
        .env("HOME", home)
        .current_dir(home)
        .args(args)
        .stdin(std::process::Stdio::null());
    cmd.output().expect("run loom-fs-mcp")
}

async fn roots(client: &Client) -> Value {
    structured(&call_ok(client, "list_roots", json!({})).await)["roots"].clone()
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn directories_alone_are_read_only_roots_named_after_them() {
    let env = Env::new();
    env.write("docs/guide.md", "# Guide\n")
        .write("src/app/main.rs", "fn main() {}\n");
    let (client, _, said) = start_command(server(
        &[env.path("docs"), env.path("src/app")],
        &env.path("."),
    ))
    .await;
    assert_eq!(
        roots(&client).await,
        json!([
            {"name": "docs", "role": "reference", "permissions": ["read"]},
            {"name": "app", "role": "reference", "permissions": ["read"]},
        ])
    );
    let names = tool_names(&tools(&client).await);
    for changing in [
        "write_file",
        "edit_file",
        "delete_file",
        "move_file",
        "copy_file",
    ] {
        assert!(
            !names.contains(&changing.to_string()),
            "{changing} offered: {names:?}"
        );
    }
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "app", "path": "main.rs"}),
    )
    .await;
    assert_eq!(text(&r), "fn main() {}\n");
    client.cancel().await.unwrap();
    // The start-up lines name each root's directory, and say how to write.
    let said = said.await.unwrap();
    let docs = std::fs::canonicalize(env.path("docs")).unwrap();
    assert!(
        said.contains(&format!("docs  is {}", docs.display())),
        "{said}"
    );
    assert!(said.contains("after --workspace"), "{said}");
}

#[tokio::test]
async fn a_role_flag_gives_its_role_to_every_directory_up_to_the_next() {
    let env = Env::new();
    for d in ["a", "b", "c", "d"] {
        env.write(&format!("{d}/x.txt"), d);
    }
    let args = [
        env.path("c").into_os_string(),
        "--workspace".into(),
        env.path("a").into_os_string(),
        env.path("b").into_os_string(),
        "--sourcecode".into(),
        env.path("d").into_os_string(),
    ];
    let (client, _, _) = start_command(server(&args, &env.path("."))).await;
    let roots = roots(&client).await;
    let role = |name: &str| {
        roots
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no root {name} in {roots}"))["role"]
            .clone()
    };
    assert_eq!(role("a"), "workspace");
    assert_eq!(role("b"), "workspace");
    assert_eq!(role("c"), "reference");
    assert_eq!(role("d"), "sourcecode");
    // Delete works on both workspace directories and on no other.
    for d in ["a", "b"] {
        call_ok(&client, "delete_file", json!({"root": d, "path": "x.txt"})).await;
        assert!(!env.path(&format!("{d}/x.txt")).exists());
    }
    for d in ["c", "d"] {
        let r = call(&client, "delete_file", json!({"root": d, "path": "x.txt"})).await;
        assert!(is_error(&r), "{d}: {r:?}");
        assert_eq!(
            std::fs::read(env.path(&format!("{d}/x.txt"))).unwrap(),
            d.as_bytes()
        );
    }
    // The sourcecode directory takes writes.
    call_ok(
        &client,
        "write_file",
        json!({"root": "d", "path": "x.txt", "content": "new"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(env.path("d/x.txt")).unwrap(), "new");
    client.cancel().await.unwrap();
}

#[test]
fn role_flags_have_environment_variables_and_the_flag_wins() {
    let env = Env::new();
    env.mkdir("a").mkdir("b").mkdir("c");
    let list = std::env::join_paths([env.path("a"), env.path("b")]).unwrap();
    let mut cmd = command();
    cmd.env_remove("LOOMFS_CONFIG")
        .env("LOOMFS_WORKSPACE", &list)
        .arg("check");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("  a  workspace   [read, write, delete]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  b  workspace   [read, write, delete]"),
        "{stdout}"
    );
    // The flag given on the command line wins over its variable.
    let out = cmd.arg("--workspace").arg(env.path("c")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("  c  workspace"), "{stdout}");
    assert!(!stdout.contains("  a  workspace"), "{stdout}");
}

#[tokio::test]
async fn a_leading_tilde_is_the_home_directory() {
    let env = Env::new();
    env.write("home/notes/todo.txt", "milk\n");
    let (client, _, _) = start_command(server(&["~/notes"], &env.path("home"))).await;
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "notes", "path": "todo.txt"}),
    )
    .await;
    assert_eq!(text(&r), "milk\n");
    client.cancel().await.unwrap();
}

#[test]
fn directories_are_checked_as_config_roots_are() {
    let env = Env::new();
    env.mkdir("one/app").mkdir("two/app").mkdir("outer/inner");
    let home = env.path(".");

    // Two with the same last component: `app` and `app-2`.
    let out = run(
        &[
            "check".as_ref(),
            env.path("one/app").as_os_str(),
            env.path("two/app").as_os_str(),
        ],
        &home,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("  app    reference   [read]"), "{stdout}");
    assert!(stdout.contains("  app-2  reference   [read]"), "{stdout}");

    // Nested, missing, the same one twice: refused with the file's messages.
    let outer = env.path("outer");
    let inner = env.path("outer/inner");
    let missing = env.path("nope");
    assert_fails_with(
        &run(&[outer.as_os_str(), inner.as_os_str()], &home),
        "root 'inner' lies inside root 'outer'",
    );
    assert_fails_with(&run(&[missing.as_os_str()], &home), "root 'nope': path");
    let out = run(&[missing.as_os_str()], &home);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not exist"),
        "{out:?}"
    );
    assert_fails_with(
        &run(&[outer.as_os_str(), outer.as_os_str()], &home),
        "roots 'outer' and 'outer-2' are the same directory",
    );
    // `/` only with the flag that accepts it.
    let out = run(&["check", "/"], &home);
    assert_fails_with(&out, "'/' is the whole filesystem");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("no roots declared"),
        "{out:?}"
    );
    let out = run(&["check", "--allow-filesystem-root", "/"], &home);
    assert!(out.status.success(), "{out:?}");
    // Nothing at all: the message says what to give.
    assert_fails_with(&run::<&str>(&[], &home), "name the directories to serve");
}

#[test]
fn a_subcommand_wins_over_a_directory_of_its_name() {
    let env = Env::new();
    env.mkdir("check");
    // `./check` is the directory, served: `check` is the subcommand.
    let out = run(&["check", "./check"], &env.path("."));
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("config is valid"), "{stdout}");
    assert!(stdout.contains("  check  reference   [read]"), "{stdout}");
}

#[test]
fn a_config_and_directories_are_validated_together() {
    let env = Env::new();
    env.mkdir("ws/sub").mkdir("other");
    let config = env.config(WS);
    let nested = env.path("ws/sub");
    let out = run(
        &[
            "check".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            nested.as_os_str(),
        ],
        &env.path("."),
    );
    assert_fails_with(&out, "root 'sub' lies inside root 'ws'");
    // A directory named like a config root gets a distinct name.
    env.mkdir("elsewhere/ws");
    let out = run(
        &[
            "check".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
            env.path("elsewhere/ws").as_os_str(),
        ],
        &env.path("."),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("  ws    workspace   [read, write, delete]"),
        "{stdout}"
    );
    assert!(stdout.contains("  ws-2  reference   [read]"), "{stdout}");
}

#[tokio::test]
async fn trash_takes_the_same_directories() {
    let env = Env::new();
    env.write("scratch/old.txt", "keep me\n");
    let dir = env.path("scratch");
    let args = ["--workspace".as_ref(), dir.as_os_str()];
    let (client, _, _) = start_command(server(&args, &env.path("."))).await;
    call_ok(
        &client,
        "delete_file",
        json!({"root": "scratch", "path": "old.txt"}),
    )
    .await;
    client.cancel().await.unwrap();
    assert!(!env.path("scratch/old.txt").exists());

    let out = run(
        &["trash".as_ref(), "list".as_ref(), dir.as_os_str()],
        &env.path("."),
    );
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    let line = listed
        .lines()
        .next()
        .unwrap_or_else(|| panic!("empty: {out:?}"));
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(fields[1..3], ["scratch", "old.txt"], "{line}");
    let out = run(
        &[
            "trash".as_ref(),
            "restore".as_ref(),
            fields[0].as_ref(),
            dir.as_os_str(),
        ],
        &env.path("."),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(env.path("scratch/old.txt")).unwrap(),
        "keep me\n"
    );
}

#[tokio::test]
async fn init_writes_a_config_the_server_starts_on_and_never_overwrites() {
    let env = Env::new();
    env.write("docs/a.md", "# A\n").mkdir("work");
    let home = env.path(".");
    let out = run(&["init", "docs", "--workspace", "work"], &home);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    // It ends with what `check` says of the file.
    assert!(said.contains("config is valid"), "{said}");
    assert!(
        said.contains("  work  workspace   [read, write, delete]"),
        "{said}"
    );
    let written = std::fs::read_to_string(env.path("roots.toml")).unwrap();
    let docs = std::fs::canonicalize(env.path("docs")).unwrap();
    assert!(
        written.contains(&format!("path = \"{}\"", docs.display())),
        "{written}"
    );
    assert!(
        written.contains("# trash_max_bytes = 1073741824"),
        "{written}"
    );

    // The server starts on it.
    let config = env.path("roots.toml");
    let (client, _, _) =
        start_command(server(&["--config".as_ref(), config.as_os_str()], &home)).await;
    let r = call_ok(
        &client,
        "read_file",
        json!({"root": "docs", "path": "a.md"}),
    )
    .await;
    assert_eq!(text(&r), "# A\n");
    client.cancel().await.unwrap();

    // A second init leaves the file as it is.
    let out = run(&["init", "work"], &home);
    assert_fails_with(&out, "roots.toml exists: init never overwrites a file");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), written);
    // --output names another.
    let out = run(&["init", "work", "--output", "other.toml"], &home);
    assert!(out.status.success(), "{out:?}");
    assert!(env.path("other.toml").exists());
}

#[test]
fn client_config_prints_entries_that_parse_with_absolute_paths() {
    let env = Env::new();
    env.mkdir("my docs").mkdir("work");
    let home = env.path(".");
    let docs = std::fs::canonicalize(env.path("my docs")).unwrap();
    let work = std::fs::canonicalize(env.path("work")).unwrap();
    let bin = std::fs::canonicalize(BIN).unwrap();
    let want_args = json!([docs, "--workspace", work]);
    let entry = |client: &str| {
        let out = run(
            &["client-config", client, "my docs", "--workspace", "work"],
            &home,
        );
        assert!(out.status.success(), "{client}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for (client, key) in [
        ("claude-desktop", "mcpServers"),
        ("lm-studio", "mcpServers"),
        ("cursor", "mcpServers"),
        ("vscode", "servers"),
    ] {
        let printed = entry(client);
        let v: Value =
            serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{client}: {e}: {printed}"));
        let server = &v[key]["loom-fs"];
        assert_eq!(server["command"], json!(bin), "{client}: {printed}");
        assert_eq!(server["args"], want_args, "{client}: {printed}");
    }
    let printed = entry("codex");
    let v: toml::Table = toml::from_str(&printed).unwrap();
    let server = &v["mcp_servers"]["loom-fs"];
    assert_eq!(server["command"].as_str(), bin.to_str());
    assert_eq!(server["args"].as_array().unwrap().len(), 3, "{printed}");
    assert_eq!(server["args"][0].as_str(), docs.to_str());
    // The claude-code line splits into exactly the binary and its arguments.
    let printed = entry("claude-code");
    let words = shlex::split(printed.trim()).unwrap();
    let docs = docs.to_str().unwrap();
    let work = work.to_str().unwrap();
    assert_eq!(
        words,
        [
            "claude",
            "mcp",
            "add",
            "loom-fs",
            "--",
            bin.to_str().unwrap(),
            docs,
            "--workspace",
            work
        ]
    );
    // What would not start is not printed.
    let out = run(&["client-config", "cursor", "nope"], &home);
    assert_fails_with(&out, "does not exist");
    assert!(out.stdout.is_empty());
}

/// The Claude Desktop bundle passes a folder picker left unset as its
/// literal placeholder, and a list as separate arguments after its flag.
#[test]
fn the_bundles_placeholders_count_as_no_folder() {
    let env = Env::new();
    env.mkdir("a").mkdir("b");
    let home = env.path(".");
    let a = env.path("a");
    let a = a.to_str().unwrap();
    let b = env.path("b");
    let b = b.to_str().unwrap();
    fn args<'a>(ro: &[&'a str], rw: &[&'a str], full: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["check", "--bundle", "--reference"];
        args.extend(ro);
        args.push("--sourcecode");
        args.extend(rw);
        args.push("--workspace");
        args.extend(full);
        args
    }
    let unset = |name: &'static str| -> &'static str {
        match name {
            "ro" => "${user_config.read_only_folders}",
            "rw" => "${user_config.read_write_folders}",
            _ => "${user_config.full_access_folders}",
        }
    };
    // One list filled, the others unset.
    let out = run(&args(&[unset("ro")], &[unset("rw")], &[a, b]), &home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("  a  workspace   [read, write, delete]"),
        "{stdout}"
    );
    assert!(stdout.contains("  b  workspace"), "{stdout}");
    let out = run(&args(&[a], &[b], &[unset("full")]), &home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("  a  reference"), "{stdout}");
    assert!(stdout.contains("  b  sourcecode"), "{stdout}");
    // All unset, or all empty: the settings' words.
    for all_none in [
        args(&[unset("ro")], &[unset("rw")], &[unset("full")]),
        args(&[], &[], &[]),
    ] {
        assert_fails_with(
            &run(&all_none, &home),
            "no folder chosen: in the extension's settings, choose at least one folder under 'Read-only folders'",
        );
    }
    // Any other placeholder is refused by name.
    assert_fails_with(
        &run(&args(&["${user_config.typo}"], &[], &[a]), &home),
        "argument '${user_config.typo}' is a placeholder the client did not fill in",
    );
}
