//! The one list of the built-in tool components: the members of the guest
//! workspace (`guest-tools/Cargo.toml`) whose library is a `cdylib`, in the
//! order `members` names them. A component's `.wasm` is named after its
//! package (`read_file` makes `read_file.wasm`). `host/build.rs` builds and
//! embeds these; the tests read the same list (through `#[path]`) and check
//! other lists against it (the fuzz harness's tools).
//!
//! Read as text, not with a TOML parser (the build script has no
//! dependency): the manifests are ours and keep to `members = [...]` under
//! `[workspace]`, `name = "..."` under `[package]` and `crate-type = [...]`
//! under `[lib]`.

use std::fs;
use std::path::Path;

/// The package names of the tool crates of the guest workspace at
/// `guests` (each the name of the `.wasm` it produces), in `members`
/// order. Panics (failing the build or the test) on a manifest it cannot
/// read.
pub fn tool_crates(guests: &Path) -> Vec<String> {
    let workspace = read(&guests.join("Cargo.toml"));
    members(&workspace)
        .into_iter()
        .filter_map(|member| {
            let manifest = read(&guests.join(&member).join("Cargo.toml"));
            is_cdylib(&manifest).then(|| {
                package_name(&manifest)
                    .unwrap_or_else(|| panic!("{member}/Cargo.toml names no package"))
            })
        })
        .collect()
}

fn read(manifest: &Path) -> String {
    fs::read_to_string(manifest).unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()))
}

/// The `(section, line)` pairs of a manifest, comments and blank lines
/// left out; `section` is the last `[header]` above, without brackets.
fn lines(manifest: &str) -> Vec<(&str, &str)> {
    let mut section = "";
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.trim();
        } else if !line.is_empty() {
            found.push((section, line));
        }
    }
    found
}

/// The value of `key = ...` in `line`, if the line sets `key`.
fn value_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let (k, v) = line.split_once('=')?;
    (k.trim() == key).then(|| v.trim())
}

/// The quoted strings in `text`.
fn strings(text: &str) -> impl Iterator<Item = &str> {
    text.split('"').skip(1).step_by(2)
}

/// The workspace's `members`, on one line or several up to the `]`.
fn members(workspace: &str) -> Vec<String> {
    let mut list = String::new();
    let mut open = false;
    for (_, line) in lines(workspace)
        .into_iter()
        .filter(|(s, _)| *s == "workspace")
    {
        match value_of(line, "members") {
            Some(value) => {
                open = true;
                list.push_str(value);
            }
            None if open => list.push_str(line),
            None => continue,
        }
        if list.contains(']') {
            break;
        }
    }
    assert!(open, "guest-tools/Cargo.toml has no [workspace] members");
    strings(&list).map(str::to_owned).collect()
}

/// The `[package]` name.
fn package_name(manifest: &str) -> Option<String> {
    lines(manifest)
        .into_iter()
        .filter(|(s, _)| *s == "package")
        .find_map(|(_, line)| value_of(line, "name"))
        .and_then(|value| strings(value).next())
        .map(str::to_owned)
}

/// Whether the `[lib]` is a `cdylib` (a component).
fn is_cdylib(manifest: &str) -> bool {
    lines(manifest)
        .into_iter()
        .filter(|(s, _)| *s == "lib")
        .filter_map(|(_, line)| value_of(line, "crate-type"))
        .any(|value| strings(value).any(|t| t == "cdylib"))
}
