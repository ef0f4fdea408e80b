//! ARCHITECTURE.md stays a map that is true of the tree: short enough to be
//! read whole, naming only modules that exist, and stating a file-size rule
//! that holds. One invariant it states is checked here too: the modules of
//! the guest library (`guest-tools/guest/src/`) use each other in no circle
//! (the host's modules have `host/src/layers.rs`).
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

use std::collections::{BTreeMap, BTreeSet};
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

/// The guest library's modules (`guest-tools/guest/src/*.rs`, the crate
/// root left out: it declares them all) and, for each, the sibling modules
/// its code before any test module names through `crate::…` paths
/// (`crate::walk::Flow`, `crate::{sys, walk::Entry}`). Comment lines are
/// dropped, so a doc link is no use.
fn guest_module_uses() -> BTreeMap<String, BTreeSet<String>> {
    let src = repo().join("guest-tools/guest/src");
    let mut sources = BTreeMap::new();
    for entry in fs::read_dir(&src).expect("read guest/src").flatten() {
        let path = entry.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            let text = fs::read_to_string(&path).expect("read a guest module");
            sources.insert(name.to_owned(), text);
        }
    }
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    sources
        .iter()
        .map(|(name, text)| {
            let used = crate_paths(&code_before_tests(text))
                .into_iter()
                .filter(|m| modules.contains(m) && m != name)
                .collect();
            (name.clone(), used)
        })
        .collect()
}

/// A module's text before its test module (`#[cfg(test)]` then `mod`),
/// comment lines dropped.
fn code_before_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every `crate::` path in `code`, each item of a
/// `crate::{…}` group counted (`$crate::` is a macro's, left out).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas outside braces.
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.insert(ident(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

/// A circle in `uses` (module → modules it names), as `a -> b -> a`.
fn circle(uses: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    /// Depth-first from `module`; `path` is the chain that led here.
    fn visit<'a>(
        module: &'a str,
        uses: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|p| *p == module) {
            let mut cycle = path[i..].to_vec();
            cycle.push(module);
            return Some(cycle.join(" -> "));
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for next in uses.get(module).into_iter().flatten() {
            if let Some(c) = visit(next, uses, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    uses.keys()
        .find_map(|m| visit(m, uses, &mut Vec::new(), &mut done))
}

#[test]
fn the_guest_library_modules_do_not_use_each_other_in_a_circle() {
    let uses = guest_module_uses();
    assert!(
        uses.len() > 10 && uses.values().any(|u| !u.is_empty()),
        "too few guest modules or uses found ({}): is the reading right?",
        uses.len()
    );
    if let Some(cycle) = circle(&uses) {
        panic!(
            "a circle among the modules of guest-tools/guest/src: {cycle} \
             (move the shared piece so the uses go one way)"
        );
    }
}

#[test]
fn the_guest_circle_check_sees_a_circle() {
    let code = "use crate::{Kind, sys::{self, X}, walk};\nuse crate::page::Cursor;\n\
                let a = $crate::tool::x;\nlet b = crate::text::f();\n";
    let found = crate_paths(code);
    let expected: BTreeSet<String> = ["Kind", "sys", "walk", "page", "text"]
        .map(String::from)
        .into();
    assert_eq!(found, expected);
    let uses = [("walk", "ignores"), ("ignores", "walk"), ("page", "walk")]
        .iter()
        .fold(BTreeMap::new(), |mut m, (a, b)| {
            m.entry(a.to_string())
                .or_insert_with(BTreeSet::new)
                .insert(b.to_string());
            m
        });
    let cycle = circle(&uses).expect("walk and ignores use each other");
    assert!(
        cycle.contains("walk") && cycle.contains("ignores"),
        "{cycle}"
    );
}
