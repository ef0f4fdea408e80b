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

/// What the first line of a source file over [`MAX_LINES`] says, then why.
const SIZE_REASON: &str = "// Over 600 lines:";

#[test]
fn the_file_size_rule_it_states_holds() {
    let text = document();
    let rule: String = text
        .split("\n\n")
        .find(|p| p.starts_with("**File size.**"))
        .expect("ARCHITECTURE.md states the file-size rule in a \"**File size.**\" paragraph")
        .to_owned();
    assert!(
        rule.contains(&format!("at most {MAX_LINES} lines")) && rule.contains(SIZE_REASON),
        "the rule no longer says \"at most {MAX_LINES} lines\" and \"{SIZE_REASON}\"; \
         change MAX_LINES and SIZE_REASON with it"
    );
    let root = repo();
    let (mut unreasoned, mut stale) = (Vec::new(), Vec::new());
    for path in held_files() {
        let text = fs::read_to_string(&path).expect("read a source file");
        let over = text.lines().count() > MAX_LINES;
        let reasoned = text
            .lines()
            .next()
            .is_some_and(|l| l.starts_with(SIZE_REASON) && l.len() > SIZE_REASON.len() + 10);
        let rel = path.strip_prefix(&root).expect("below the root");
        let rel = rel.to_string_lossy().replace('\\', "/");
        if over && !reasoned {
            unreasoned.push(rel);
        } else if !over && reasoned {
            stale.push(rel);
        }
    }
    assert!(
        unreasoned.is_empty(),
        "over {MAX_LINES} lines without a reason on their first line (\"{SIZE_REASON} …\"): \
         {unreasoned:?} (split the file, or say why it stays whole)"
    );
    assert!(
        stale.is_empty(),
        "a reason to be over {MAX_LINES} lines, but no longer are: {stale:?}; take it off"
    );
}

/// The most lines a non-test function of `host/src/` may span without a
/// reason in its doc comment (issue 49).
const MAX_FN_LINES: usize = 100;
/// What a longer function's doc comment says, then why.
const LONG_FN_REASON: &str = "Over 100 lines:";

/// The non-test code of a source file: the text before its test module
/// (a `#[cfg(…)]` naming `test`, then `mod`), as lines.
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| {
            let cfg = w[0].trim();
            cfg.starts_with("#[cfg(")
                && cfg.contains("test")
                && w[1].trim_start().starts_with("mod ")
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// The name of the function a line declares, if it does.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for qualifier in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// How many lines the function declared at `start` spans, to its closing
/// brace (strings, characters and comments are blanked before braces are
/// counted); `None` for a declaration without a body.
fn fn_span(lines: &[&str], start: usize) -> Option<usize> {
    let (mut depth, mut opened) = (0i64, false);
    for (i, line) in lines.iter().enumerate().skip(start) {
        let code = line.split("//").next().unwrap_or("");
        let mut in_str = false;
        let mut chars = code.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_str => {
                    chars.next();
                }
                '"' => in_str = !in_str,
                '\'' if !in_str => {
                    // A character literal ('{') or a lifetime ('a).
                    let quoted: String = chars.clone().take(3).collect();
                    if quoted.chars().nth(1) == Some('\'') {
                        chars.next();
                        chars.next();
                    }
                }
                '{' if !in_str => {
                    depth += 1;
                    opened = true;
                }
                '}' if !in_str => depth -= 1,
                _ => {}
            }
        }
        if !opened && code.trim_end().ends_with(';') {
            return None;
        }
        if opened && depth == 0 {
            return Some(i - start + 1);
        }
    }
    None
}

/// The doc comment above line `at`, attributes skipped.
fn doc_above<'a>(lines: &[&'a str], at: usize) -> Vec<&'a str> {
    let mut doc = Vec::new();
    for line in lines[..at].iter().rev() {
        let t = line.trim_start();
        if t.starts_with("#[") {
            continue;
        }
        match t.strip_prefix("///") {
            Some(text) => doc.push(text.trim()),
            None => break,
        }
    }
    doc
}

/// Each non-test function of `host/src/` over [`MAX_FN_LINES`] whose doc
/// comment gives no reason: `(file, line, name, lines)`.
fn long_functions_without_reason() -> Vec<(String, usize, String, usize)> {
    let root = repo();
    let mut found = Vec::new();
    for path in held_files()
        .into_iter()
        .filter(|p| p.starts_with(root.join("host/src")))
    {
        let text = fs::read_to_string(&path).expect("read a source file");
        let lines = code_lines(&text);
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = declared_fn(line) else {
                continue;
            };
            let Some(span) = fn_span(&lines, i) else {
                continue;
            };
            let reasoned = doc_above(&lines, i)
                .iter()
                .any(|l| l.starts_with(LONG_FN_REASON));
            if span > MAX_FN_LINES && !reasoned {
                let rel = path.strip_prefix(&root).expect("below the root");
                found.push((
                    rel.to_string_lossy().replace('\\', "/"),
                    i + 1,
                    name.to_string(),
                    span,
                ));
            }
        }
    }
    found
}

#[test]
fn no_function_is_over_100_lines_without_a_reason() {
    let long = long_functions_without_reason();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines whose doc comment gives no reason (a line \
         starting \"{LONG_FN_REASON}\"): split them into stages, or say why: {long:#?}"
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

#[test]
fn the_function_length_check_sees_a_long_function() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES);
    let text = format!("/// Adds.\nfn long() {{\n{body}}}\n\nfn short() {{ let s = \"}}\"; }}\n");
    let lines = code_lines(&text);
    assert_eq!(declared_fn(lines[1]), Some("long"));
    assert_eq!(fn_span(&lines, 1), Some(MAX_FN_LINES + 2));
    let short = lines
        .iter()
        .position(|l| l.starts_with("fn short"))
        .unwrap();
    assert_eq!(fn_span(&lines, short), Some(1));
    assert_eq!(doc_above(&lines, 1), vec!["Adds."]);
}
