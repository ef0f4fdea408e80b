//! ARCHITECTURE.md stays a map that is true of the tree: short enough to be
//! read whole, naming only modules that exist, and stating a file-size rule
//! that holds.
//!
//! What counts as a path (the rule the document states under "This
//! document"): a span in backticks with no whitespace and none of
//! `<>*:@|{}$` that ends in `.rs` or `/`, or whose first segment is a
//! top-level directory of the repository (`scripts/test`). A path holding a
//! `/` must exist from the repository root, `host/src/`, `host/` or
//! `guest-tools/` (so `runtime/fs/view.rs` and `guest/src/walk.rs` are
//! found); a bare file name (`layers.rs`) must exist somewhere in the tree.
//! MCP method names (`tools/call`), URIs and templates (`.mcp-trash/<stamp>/`)
//! are not paths by this rule.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The most ARCHITECTURE.md may weigh (issue 48): a map, not a diary.
const MAX_BYTES: usize = 30_000;
/// The file-size rule the document states, in lines.
const MAX_LINES: usize = 600;
/// Where a relative path in the document may start, besides the root.
const BASES: &[&str] = &["", "host/src", "host", "guest-tools"];
/// Directories never searched: build output, tools, VCS.
const SKIPPED_DIRS: &[&str] = &["target", ".git", ".tools", "node_modules"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

fn document() -> String {
    fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md")
}

/// The text's code spans, fenced blocks left out.
fn spans(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn is_path(span: &str) -> bool {
    if span.trim_end_matches('/').is_empty()
        || span
            .chars()
            .any(|c| c.is_whitespace() || "<>*:@|{}$".contains(c))
    {
        return false;
    }
    if span.ends_with(".rs") || span.ends_with('/') {
        return true;
    }
    match span.split_once('/') {
        Some((first, _)) => !first.is_empty() && repo().join(first).is_dir(),
        None => false,
    }
}

fn exists(span: &str) -> bool {
    let root = repo();
    if span.contains('/') {
        let dir = span.ends_with('/');
        let rel = span.trim_end_matches('/');
        BASES.iter().any(|base| {
            let path = root.join(base).join(rel);
            if dir { path.is_dir() } else { path.exists() }
        })
    } else {
        let mut found = false;
        walk(&root, &mut |path| {
            found |= path.file_name().is_some_and(|n| n == span);
        });
        found
    }
}

/// Calls `visit` on every file below `dir`, skipping [`SKIPPED_DIRS`].
fn walk(dir: &Path, visit: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            let name = entry.file_name();
            if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                walk(&path, visit);
            }
        } else if kind.is_file() {
            visit(&path);
        }
    }
}

#[test]
fn it_is_at_most_30_kb() {
    let size = document().len();
    assert!(
        size <= MAX_BYTES,
        "ARCHITECTURE.md is {size} bytes, over {MAX_BYTES}: keep it a map \
         (figures go to docs/benchmarks.md)"
    );
}

#[test]
fn every_path_it_names_exists() {
    let spans = spans(&document());
    let paths: BTreeSet<&str> = spans
        .iter()
        .map(String::as_str)
        .filter(|s| is_path(s))
        .collect();
    assert!(
        paths.len() > 50,
        "too few paths found ({}): is the rule right?",
        paths.len()
    );
    let missing: Vec<&str> = paths.into_iter().filter(|p| !exists(p)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (from the root, host/src/, host/ \
         or guest-tools/): {missing:?}"
    );
}

/// The source files the rule holds: `host/src/`, `names/src/` and each
/// `guest-tools/*/src/`, tests (`tests.rs`, a `tests/` directory) left out.
fn held_files() -> Vec<PathBuf> {
    let root = repo();
    let mut dirs = vec![root.join("host/src"), root.join("names/src")];
    for entry in fs::read_dir(root.join("guest-tools"))
        .expect("read guest-tools/")
        .flatten()
    {
        let src = entry.path().join("src");
        if src.is_dir() {
            dirs.push(src);
        }
    }
    let mut files = vec![];
    for dir in dirs {
        walk(&dir, &mut |path| {
            let test = path.file_name().is_some_and(|n| n == "tests.rs")
                || path
                    .strip_prefix(&dir)
                    .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "tests"));
            if path.extension().is_some_and(|e| e == "rs") && !test {
                files.push(path.to_path_buf());
            }
        });
    }
    files
}

#[test]
fn the_file_size_rule_it_states_holds() {
    let text = document();
    let rule: String = text
        .split("\n\n")
        .find(|p| p.starts_with("**File size.**"))
        .expect("ARCHITECTURE.md states the file-size rule in a \"**File size.**\" paragraph")
        .to_owned();
    assert!(
        rule.contains(&format!("at most {MAX_LINES} lines")),
        "the rule no longer says \"at most {MAX_LINES} lines\"; change MAX_LINES with it"
    );
    let listed: BTreeSet<String> = spans(&rule)
        .into_iter()
        .filter(|s| s.ends_with(".rs") && s.contains('/'))
        .collect();

    let root = repo();
    let mut over = BTreeSet::new();
    for path in held_files() {
        let lines = fs::read_to_string(&path)
            .expect("read a source file")
            .lines()
            .count();
        if lines > MAX_LINES {
            let rel = path.strip_prefix(&root).expect("below the root");
            over.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    let unlisted: Vec<&String> = over.difference(&listed).collect();
    let shrunk: Vec<&String> = listed.difference(&over).collect();
    assert!(
        unlisted.is_empty(),
        "over {MAX_LINES} lines and not among ARCHITECTURE.md's exceptions: {unlisted:?} \
         (split the file, or list it)"
    );
    assert!(
        shrunk.is_empty(),
        "listed as over {MAX_LINES} lines in ARCHITECTURE.md but no longer are (or are \
         gone): {shrunk:?}; take them off the list"
    );
}
