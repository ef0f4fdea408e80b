//! The layer rule, checked on the source: a module uses the layers below
//! its own, never one above ([`LAYERS`], the order `lib.rs` declares), and
//! the modules of one directory do not use each other in a circle. Test
//! code is exempt (a test may drive a lower layer through a higher one).
//! It reads `crate::…` and `super::…` paths as text: a name brought in by
//! `use super::*` is not seen, so the files of one split module (which
//! share names through their parent's globs) are checked as one module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first.
const LAYERS: [&str; 8] = [
    "cli", "server", "tools", "runtime", "store", "sys", "config", "policy",
];

/// A source file's module path (`store/trash/list.rs` is
/// `["store", "trash", "list"]`) and its code before any test module.
fn sources() -> Vec<(Vec<String>, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
        .into_iter()
        .filter_map(|path| {
            let module = module_of(&src, &path)?;
            let text = std::fs::read_to_string(&path).unwrap();
            Some((module, code_part(&text)))
        })
        .collect()
}

/// None for the crate root, `main.rs`, this file and test files.
fn module_of(src: &Path, path: &Path) -> Option<Vec<String>> {
    let rel: PathBuf = path.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    let skip = matches!(parts.as_slice(), [one] if one == "lib" || one == "main" || one == "layers")
        || parts.iter().any(|p| p == "tests");
    (!skip && !parts.is_empty()).then_some(parts)
}

/// The text before the module's test module (`#[cfg(test)]` then `mod`),
/// comments dropped. A `#[cfg(test)]` on anything else ends nothing.
fn code_part(text: &str) -> String {
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

/// The items of a `{…}` group (after its `{`), split at its own commas:
/// nested groups stay whole inside their item.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The modules `text` names, as absolute module paths: `crate::a::b…` and
/// `super::…` (resolved against `module`), including inside
/// `crate::{a::x, b}` groups.
fn references(module: &[String], text: &str) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Vec<String> = if start == "crate::" {
                Vec::new()
            } else {
                // `super` is the parent module, whether this one is a
                // `mod.rs` or a file.
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let rest = &text[from..];
            let mut supers = rest;
            while let Some(r) = supers.strip_prefix("super::") {
                base.pop();
                supers = r;
            }
            if let Some(group) = supers.strip_prefix('{') {
                for item in group_items(group) {
                    let path: Vec<String> = item
                        .trim()
                        .split("::")
                        .take_while(|s| is_ident(s))
                        .map(String::from)
                        .collect();
                    if let Some(first) = path.first() {
                        let mut full = base.clone();
                        full.push(first.clone());
                        if path.len() > 1 {
                            full.push(path[1].clone());
                        }
                        found.insert(full);
                    }
                }
            } else {
                let path: Vec<String> = supers
                    .split("::")
                    .map(|s| {
                        s.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect::<String>()
                    })
                    .take_while(|s| is_ident(s))
                    .collect();
                let mut full = base;
                full.extend(path.into_iter().take(2));
                found.insert(full);
            }
        }
    }
    found
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        && s != "self"
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let rank = |layer: &str| LAYERS.iter().position(|l| *l == layer);
    let mut wrong = Vec::new();
    for (module, code) in sources() {
        let Some(own) = rank(&module[0]) else {
            wrong.push(format!("{}: not in LAYERS", module.join("::")));
            continue;
        };
        for target in references(&module, &code) {
            let Some(first) = target.first() else {
                continue;
            };
            match rank(first) {
                Some(r) if r >= own => {}
                Some(_) => wrong.push(format!("{} uses {}", module.join("::"), target.join("::"))),
                // Not a module of this crate (a name at the crate root).
                None => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports pointing up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_modules_of_a_directory_do_not_use_each_other_in_a_circle() {
    // For each parent module, the graph among its children: child A uses
    // child B when a file in A's subtree names something in B's.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for (module, code) in sources() {
        for target in references(&module, &code) {
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common < module.len() && common < target.len() {
                edges
                    .entry(module[..common].to_vec())
                    .or_default()
                    .insert((module[common].clone(), target[common].clone()));
            }
        }
    }
    for (parent, edges) in &edges {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in edges {
            next.entry(a).or_default().push(b);
        }
        // Depth-first search for a back edge.
        fn visit<'a>(
            n: &'a str,
            next: &BTreeMap<&'a str, Vec<&'a str>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) -> Option<String> {
            if let Some(i) = path.iter().position(|p| *p == n) {
                let mut cycle = path[i..].to_vec();
                cycle.push(n);
                return Some(cycle.join(" -> "));
            }
            if !done.insert(n) {
                return None;
            }
            path.push(n);
            for m in next.get(n).into_iter().flatten() {
                if let Some(c) = visit(m, next, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for n in next.keys() {
            if let Some(cycle) = visit(n, &next, &mut Vec::new(), &mut done) {
                panic!("a circle in crate::{}: {cycle}", parent.join("::"));
            }
        }
    }
}

#[test]
fn the_check_sees_an_import_that_points_up() {
    let module = vec!["store".to_string(), "locks".to_string()];
    let found = references(
        &module,
        "use crate::runtime::fs::TRASH_DIR;\nuse crate::{policy::Root, tools};\nuse super::trash;\n\
         use crate::{sys::{space, beneath}, server::mcp};",
    );
    assert!(found.contains(&vec!["runtime".to_string(), "fs".to_string()]));
    assert!(found.contains(&vec!["policy".to_string()]));
    assert!(found.contains(&vec!["tools".to_string()]));
    assert!(found.contains(&vec!["store".to_string(), "trash".to_string()]));
    assert!(found.contains(&vec!["sys".to_string()]));
    assert!(found.contains(&vec!["server".to_string(), "mcp".to_string()]));
}

#[test]
fn only_the_test_module_is_exempt() {
    let code = code_part(
        "enum E {\n    #[cfg(test)]\n    Fake,\n}\nuse crate::tools;\n#[cfg(test)]\nmod tests {\n    use crate::cli;\n}\n",
    );
    assert!(code.contains("crate::tools"), "{code}");
    assert!(!code.contains("crate::cli"), "{code}");
}
