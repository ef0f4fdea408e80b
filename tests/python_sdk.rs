//! End to end with another language's client: the official MCP Python SDK
//! connects to the real binary started with directories as arguments (no
//! config), lists its roots and reads a file. `scripts/test` installs the
//! SDK (pinned) into `.tools/python-sdk` and names it in
//! `LOOMFS_PYTHON_SDK`; without it, an SDK Python already has is used, and
//! without either the test is skipped with a line on stderr.

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// Python with the SDK, for a script that starts the real binary: the
/// server it starts inherits no flag variable, the tests' cache, quiet
/// logs, and leave to run as root.
fn sdk_python() -> Option<std::process::Command> {
    let mut cmd = python_with_sdk()?;
    for var in FLAG_VARS {
        cmd.env_remove(var);
    }
    cmd.env("LOOMFS_CACHE_DIR", cache_dir())
        .env("LOOMFS_LOG", "warn")
        .env("LOOMFS_ALLOW_ROOT", "1");
    Some(cmd)
}

#[test]
fn the_python_sdk_reads_a_file_from_a_directory_given_as_argument() {
    let Some(mut cmd) = sdk_python() else {
        return;
    };
    let env = Env::new();
    env.write("notes/todo.txt", "milk\neggs\n").mkdir("scratch");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/python_sdk_client.py");
    let out = cmd
        .arg(script)
        .arg(BIN)
        .args(["notes", "todo.txt"])
        .arg(env.path("notes"))
        .arg("--workspace")
        .arg(env.path("scratch"))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let (roots, text) = stdout.split_once('\n').unwrap();
    let roots: Value = serde_json::from_str(roots).unwrap();
    assert_eq!(
        roots,
        json!([
            {"name": "notes", "role": "reference", "permissions": ["read"]},
            {"name": "scratch", "role": "workspace", "permissions": ["read", "write", "delete"]},
        ])
    );
    assert_eq!(text, "milk\neggs\n");
}

/// Every capability of the tools that were merged (`read_multiple_files`
/// and `read_media_file` into `read_file`, `directory_tree` into
/// `list_directory`, the five `git_*` into `git`) is still reachable: each
/// former tool's example calls, translated, answer as the former tools
/// did, as recorded from a build before the merge
/// (`tests/fixtures/former_tools.json`; the script says how to record).
#[test]
fn each_former_tool_call_translated_answers_as_it_did() {
    let Some(mut cmd) = sdk_python() else {
        return;
    };
    let env = Env::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let out = cmd
        .arg(fixtures.join("former_tools.py"))
        .arg(BIN)
        .arg(env.path(""))
        .arg(fixtures.join("former_tools.json"))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("33 of 33 former calls answered as recorded"),
        "{stdout}"
    );
}
