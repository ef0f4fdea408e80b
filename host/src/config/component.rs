//! A `[[components]]` entry validated into a [`ComponentEntry`], in named
//! stages (the file, its pin, its roots, its permission cap, its limits),
//! and the `[trust] keys` its signature is checked with.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::bounds::{Bound, MEMORY_BYTES, OUTPUT_BYTES, TIMEOUT_MS};
use super::discover::absolute;
use super::parse::{RawComponent, RawTrust};
use super::validated::{ComponentEntry, Limits};
use crate::policy::{Permission, Perms, Root};

/// Every `[[components]]` entry, validated ([`component_entry`]), in
/// config order; the same file declared twice is a problem.
pub(super) fn component_entries(
    raw: &[RawComponent],
    base: &Path,
    roots: &[Root],
    limits: &Limits,
    have_keys: bool,
    problems: &mut Vec<String>,
) -> Vec<ComponentEntry> {
    let mut components: Vec<ComponentEntry> = Vec::new();
    for c in raw {
        let entry = component_entry(c, base, roots, limits, have_keys, problems);
        if components.iter().any(|seen| seen.path == entry.path) {
            problems.push(format!("component '{}' is declared twice", c.path));
        }
        components.push(entry);
    }
    components
}

/// `[trust] keys`: minisign public keys (the base64 line of a `.pub`
/// file), each checked here so that a typo is a config error, not a
/// signature that never verifies.
pub(super) fn trust_keys(trust: Option<&RawTrust>, problems: &mut Vec<String>) -> Vec<String> {
    let Some(trust) = trust else {
        return Vec::new();
    };
    if trust.keys.is_empty() {
        problems.push("[trust] keys is empty: list the public keys signed components use".into());
    }
    let mut keys = Vec::new();
    for (i, key) in trust.keys.iter().enumerate() {
        let key = key.trim();
        match minisign_verify::PublicKey::from_base64(key) {
            Ok(_) => keys.push(key.to_string()),
            Err(e) => problems.push(format!(
                "[trust] keys[{i}] is not a minisign public key (the base64 line of its .pub \
                 file): {e}"
            )),
        }
    }
    keys
}

/// One `[[components]]` entry, validated: the file exists, a pin or an
/// explicit `unpinned = true`, a signature only with trusted keys, roots
/// that exist, permissions that are permissions, limits within the
/// server's own.
fn component_entry(
    c: &RawComponent,
    base: &Path,
    roots: &[Root],
    limits: &Limits,
    have_keys: bool,
    problems: &mut Vec<String>,
) -> ComponentEntry {
    let at = format!("component '{}'", c.path);
    let path = absolute(base, &c.path);
    match fs::metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => problems.push(format!("{at}: not a regular file")),
        Err(e) => problems.push(format!("{at}: {e}")),
    }
    let sha256 = pin(c, &at, problems);
    if c.signed && !have_keys {
        problems.push(format!(
            "{at}: signed = true, but no [trust] keys are listed to check its signature with"
        ));
    }
    let scope = c
        .roots
        .as_ref()
        .map(|names| scope(names, &at, roots, problems));
    let cap = c.permissions.as_ref().map(|list| cap(list, &at, problems));
    let memory_bytes = lowered(
        &at,
        ("memory_bytes", c.memory_bytes),
        &MEMORY_BYTES,
        limits.tool_memory_bytes,
        problems,
    );
    let timeout_ms = lowered(
        &at,
        ("timeout_ms", c.timeout_ms),
        &TIMEOUT_MS,
        u64::try_from(limits.tool_timeout.as_millis()).unwrap_or(u64::MAX),
        problems,
    );
    let max_output_bytes = lowered(
        &at,
        ("max_output_bytes", c.max_output_bytes),
        &OUTPUT_BYTES,
        limits.max_output_bytes,
        problems,
    );
    ComponentEntry {
        path,
        written: c.path.clone(),
        sha256,
        signed: c.signed,
        roots: scope,
        cap,
        memory_bytes,
        timeout: Duration::from_millis(timeout_ms),
        max_output_bytes,
    }
}

/// The entry's pin (`sha256`, lowercased): required unless
/// `unpinned = true`, which contradicts a pin; it must be a SHA-256 digest.
/// `at` names the entry in a problem.
fn pin(c: &RawComponent, at: &str, problems: &mut Vec<String>) -> Option<String> {
    match (&c.sha256, c.unpinned) {
        (Some(_), true) => {
            problems.push(format!(
                "{at}: sha256 and unpinned = true contradict each other: keep the pin"
            ));
            None
        }
        (Some(pin), false) => {
            let pin = pin.trim().to_ascii_lowercase();
            if pin.len() != 64 || !pin.chars().all(|ch| ch.is_ascii_hexdigit()) {
                problems.push(format!(
                    "{at}: sha256 = \"{}\" is not a SHA-256 digest (64 hexadecimal digits)",
                    c.sha256.as_deref().unwrap_or_default().escape_debug()
                ));
            }
            Some(pin)
        }
        (None, true) => None,
        (None, false) => {
            problems.push(format!(
                "{at}: not pinned: add sha256 = \"…\" (`loom-fs-mcp component add FILE` \
                 prints it), or unpinned = true to serve whatever file is at that path"
            ));
            None
        }
    }
}

/// The entry's `roots`: not empty, each the name of a root.
fn scope(names: &[String], at: &str, roots: &[Root], problems: &mut Vec<String>) -> Vec<String> {
    if names.is_empty() {
        problems.push(format!(
            "{at}: roots is empty: name the roots it may act on"
        ));
    }
    for name in names {
        if !roots.iter().any(|r| &r.name == name) {
            problems.push(format!(
                "{at}: roots names '{}', which is not a root",
                name.escape_debug()
            ));
        }
    }
    names.to_vec()
}

/// The entry's `permissions` cap: known permissions, read among them.
fn cap(list: &[String], at: &str, problems: &mut Vec<String>) -> Perms {
    let mut cap = Perms::NONE;
    for p in list {
        match Permission::parse(p) {
            Some(p) => cap = cap.with(p),
            None => problems.push(format!(
                "{at}: unknown permission '{}' (expected read, write or delete)",
                p.escape_debug()
            )),
        }
    }
    if !cap.contains(Permission::Read) {
        problems.push(format!(
            "{at}: permissions must include read (a cap narrows what a tool may do; every \
             tool reads)"
        ));
    }
    cap
}

/// One of the entry's limits (`key`, its `value`): the server's own
/// (`max`, the global key `bound` names) when unset; more than that, or
/// less than `bound`'s least, is a problem.
fn lowered(
    at: &str,
    (key, value): (&str, Option<u64>),
    bound: &Bound,
    max: u64,
    problems: &mut Vec<String>,
) -> u64 {
    let (global, min) = (bound.key, bound.min);
    match value {
        None => max,
        Some(v) if v > max => {
            problems.push(format!(
                "{at}: {key} = {v} is more than the server's {global} ({max}): an entry \
                 may only lower it"
            ));
            max
        }
        Some(v) if v < min.min(max) => {
            problems.push(format!(
                "{at}: {key} = {v} is below the least allowed ({min})"
            ));
            max
        }
        Some(v) => v,
    }
}
