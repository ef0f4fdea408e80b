//! The commands of docs/components.md ("Standalone wasmtime"), run as
//! written under the wasmtime CLI on a copy of `sample/`: every built-in
//! component answers `ok(...)` and does its job outside loom-fs. Needs a
//! `wasmtime` on `PATH`, which `scripts/test` (the README's test command)
//! installs, pinned. Without one the test says so on stderr and passes,
//! unless `CI=true`: then it fails.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn wasmtime_on_path() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("wasmtime"))
        .find(|p| p.is_file())
}

/// The shell block between the standalone markers of docs/components.md.
fn documented_block() -> String {
    let page =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/components.md"))
            .unwrap();
    let start = page
        .find("<!-- standalone:begin -->")
        .expect("begin marker");
    let end = page.find("<!-- standalone:end -->").expect("end marker");
    let block = &page[start..end];
    let body = block
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.rsplit_once("```"))
        .map(|(body, _)| body)
        .expect("a sh block between the markers");
    body.to_string()
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_documented_standalone_commands_run_under_wasmtime() {
    let Some(wasmtime) = wasmtime_on_path() else {
        // Under CI the promise must be checked, not skipped: `scripts/test`
        // installs the pinned CLI (docs/testing.md).
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no wasmtime on PATH under CI=true: run the tests with scripts/test, which installs \
             the pinned wasmtime CLI"
        );
        eprintln!("SKIPPED: no wasmtime on PATH; the standalone commands were not run");
        return;
    };
    let version = Command::new(&wasmtime).arg("--version").output().unwrap();
    eprintln!(
        "running the standalone commands of docs/components.md with {}",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let env = common::Env::new();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sample");
    let before = common::snapshot_dir(&sample);
    copy_tree(&sample, &env.path("sample"));
    // The documented block, then one call it describes as unenforced: a
    // standalone run reads the deny-listed `.env` like any file.
    let script = format!(
        "set -eu\n{}\ncall read_file \"$DOCS\" '{{\"root\": \"docs\", \"path\": \".env\"}}' \"$RO\"\n",
        documented_block()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&env.dir)
        .env("C", loom_fs_mcp::runtime::builtin_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let results: Vec<&str> = stdout.lines().collect();
    assert_eq!(results.len(), 15, "{stdout}\n{stderr}");
    for r in &results {
        assert!(r.starts_with("ok("), "{r}");
    }
    assert!(
        results[0].contains("# Sample documentation"),
        "{}",
        results[0]
    );
    // The tree, directories first, at the depth asked.
    assert!(
        results[4].contains("depth 2, directories first, then by name"),
        "{}",
        results[4]
    );
    assert!(
        results[1].contains("# Sample documentation") && results[1].contains("architecture.md"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("<svg") && results[2].contains("<rect"),
        "{}",
        results[2]
    );
    let last = results[results.len() - 1];
    assert!(last.contains("DEMO_TOKEN=not-a-real-secret"), "{last}");

    // The write tools did their work on the copy. Nothing is kept: keeping
    // is the host's, and there is none here. Each write went through a
    // temporary file and a rename, so none is left beside its target.
    let notes = env.path("sample/notes");
    assert_eq!(
        fs::read_to_string(notes.join("archive/draft.txt")).unwrap(),
        "first draft\n"
    );
    assert!(!notes.join("draft.txt").exists());
    assert!(!notes.join("archive/copy.txt").exists());
    assert_eq!(
        fs::read_to_string(notes.join("ideas.txt")).unwrap(),
        "an idea\n"
    );
    let todo = fs::read_to_string(notes.join("todo.txt")).unwrap();
    assert!(todo.starts_with("- read the README (twice)\n"), "{todo}");
    let names: Vec<String> = common::snapshot_dir(&notes)
        .into_iter()
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["archive", "archive/draft.txt", "ideas.txt", "todo.txt"],
        "no trash, no temporary file"
    );
    // The repository's own sample/ is untouched.
    assert_eq!(common::snapshot_dir(&sample), before);
}
