//! Raw config → [`Config`]: every key judged, every problem collected (each
//! naming its root), in named stages: the global limits, the audit target,
//! the deny patterns, the roots, the output limit, the components, the
//! client roots. A config with any problem is refused whole.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::ConfigError;
use super::bounds::{
    AUDIT_BACKUPS, AUDIT_MAX_BYTES, Bound, CONCURRENT_CALLS, DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_READ_BYTES, LIST_ENTRIES, MAX_DOCUMENT_BYTES, MEMORY_BYTES, MIN_FREE_BYTES,
    NOTIFICATIONS_PER_SECOND, OUTPUT_BYTES, OUTPUT_PER_READ, QUOTA_BURST, QUOTA_PER_MINUTE,
    SEARCH_BYTES, SEARCH_RESULTS, SUBSCRIPTIONS, TIMEOUT_MS, TRASH_MAX_BYTES,
};
use super::component::{component_entries, trust_keys};
use super::discover::{absolute, real_dir, repository};
use super::parse::{RawConfig, RawRoot};
use super::validated::{AuditTarget, ClientRoots, Config, Limits, QuotaConfig};
use crate::policy::{DenyList, Permission, Perms, Role, Root};

/// Validates `raw` whole; relative paths resolve against `base`.
/// `read_only_flag` (the command line's) caps every root at read, as the
/// `read_only` key does.
pub(super) fn validate(
    raw: RawConfig,
    base: &Path,
    read_only_flag: bool,
) -> Result<Config, ConfigError> {
    let mut problems = Vec::new();
    let read_only = raw.read_only || read_only_flag;
    let audit_max_bytes = AUDIT_MAX_BYTES.take(raw.audit_log_max_bytes, &mut problems, "");
    let audit_backups = AUDIT_BACKUPS.take(raw.audit_log_backups, &mut problems, "") as u32;
    let min_free_bytes = MIN_FREE_BYTES.take(raw.min_free_bytes, &mut problems, "");
    let trash_max_bytes = TRASH_MAX_BYTES.take(raw.trash_max_bytes, &mut problems, "");
    let mut limits = limits(&raw, &mut problems);
    let quota = quota(&raw, &mut problems);
    let audit = audit_target(raw.audit_log.as_deref(), base, &mut problems);
    pattern_problems(&raw.deny, "deny: ", &mut problems);
    let defaults = RootDefaults {
        read_only,
        min_free_bytes,
        trash_max_bytes,
        // Reading N bytes costs the guest several times N (buffer, string, result).
        max_read_cap: limits.tool_memory_bytes / 4,
    };
    let roots = roots(raw.roots, &raw.deny, base, &defaults, &mut problems);
    limits.max_output_bytes = output_bytes(raw.max_output_bytes, &roots, &mut problems);
    let trust_keys = trust_keys(raw.trust.as_ref(), &mut problems);
    let components = component_entries(
        &raw.components,
        base,
        &roots,
        &limits,
        !trust_keys.is_empty(),
        &mut problems,
    );
    let client_roots = client_roots(raw.client_roots.as_deref(), &mut problems);
    if !problems.is_empty() {
        return Err(ConfigError::Invalid(problems));
    }
    Ok(Config {
        roots: roots.into_iter().map(Arc::new).collect(),
        read_only,
        landlock: raw.landlock,
        deny: raw.deny,
        audit,
        audit_max_bytes,
        audit_backups,
        limits,
        components,
        trust_keys,
        quota,
        client_roots,
    })
}

/// The global limits of calls, listings, searches and sessions; the
/// output limit is left 0, set once the roots are known ([`output_bytes`]).
fn limits(raw: &RawConfig, problems: &mut Vec<String>) -> Limits {
    Limits {
        max_search_results: SEARCH_RESULTS.take(raw.max_search_results, problems, "") as u32,
        max_search_bytes: SEARCH_BYTES.take(raw.max_search_bytes, problems, ""),
        max_list_entries: LIST_ENTRIES.take(raw.max_list_entries, problems, "") as u32,
        tool_timeout: Duration::from_millis(TIMEOUT_MS.take(raw.tool_timeout_ms, problems, "")),
        tool_memory_bytes: MEMORY_BYTES.take(raw.tool_memory_bytes, problems, ""),
        max_concurrent_calls: CONCURRENT_CALLS.take(raw.max_concurrent_calls, problems, "") as u32,
        max_output_bytes: 0,
        max_subscriptions: SUBSCRIPTIONS.take(raw.max_subscriptions, problems, "") as u32,
        max_notifications_per_second: NOTIFICATIONS_PER_SECOND.take(
            raw.max_notifications_per_second,
            problems,
            "",
        ) as u32,
    }
}

/// `audit_log`: stderr by default or when so named, else a file (relative
/// to `base`); empty and stdout (the JSON-RPC channel under stdio) refused.
fn audit_target(audit_log: Option<&str>, base: &Path, problems: &mut Vec<String>) -> AuditTarget {
    match audit_log {
        None | Some("stderr") => AuditTarget::Stderr,
        Some("") => {
            problems.push("audit_log is empty: give a file path or \"stderr\"".into());
            AuditTarget::Stderr
        }
        Some("stdout") => {
            problems
                .push("audit_log cannot be stdout: under stdio it is the JSON-RPC channel".into());
            AuditTarget::Stderr
        }
        Some(path) => AuditTarget::File(absolute(base, path)),
    }
}

/// A problem, after `prefix`, for each deny pattern that does not compile.
fn pattern_problems(patterns: &[String], prefix: &str, problems: &mut Vec<String>) {
    for pattern in patterns {
        if let Err(e) = DenyList::new([pattern.as_str()]) {
            problems.push(format!("{prefix}{e}"));
        }
    }
}

/// What every root gets unless its table says otherwise, and the most it
/// may ask for.
struct RootDefaults {
    /// Every root capped at read (`read_only`, the key or the flag).
    read_only: bool,
    /// The config-wide `min_free_bytes`.
    min_free_bytes: u64,
    /// The config-wide `trash_max_bytes`.
    trash_max_bytes: u64,
    /// The most `max_read_bytes` may be, for a guest's memory to hold it.
    max_read_cap: u64,
}

/// The `[[roots]]`, each validated ([`root`]): one with a problem is left
/// out. None at all, and two that nest, are problems too.
fn roots(
    raw: Vec<RawRoot>,
    config_deny: &[String],
    base: &Path,
    defaults: &RootDefaults,
    problems: &mut Vec<String>,
) -> Vec<Root> {
    if raw.is_empty() {
        problems.push("no roots declared: add at least one [[roots]] table".into());
    }
    let mut roots: Vec<Root> = Vec::new();
    for r in raw {
        if let Some(root) = root(r, &roots, config_deny, base, defaults, problems) {
            roots.push(root);
        }
    }
    check_nesting(&roots, problems);
    roots
}

/// One `[[roots]]` table, validated against the roots `seen` before it:
/// its name, real path, role, permissions, deny patterns (the config's
/// and its own), byte limits and repository. `None` if any is a problem.
fn root(
    r: RawRoot,
    seen: &[Root],
    config_deny: &[String],
    base: &Path,
    defaults: &RootDefaults,
    problems: &mut Vec<String>,
) -> Option<Root> {
    let before = problems.len();
    name_problems(&r.name, seen, problems);
    let name = r.name.escape_debug().to_string();
    let path = real_dir(base, &r.path).map_err(|why| {
        problems.push(format!("root '{name}': path '{}' {why}", r.path));
    });
    let role = Role::parse(&r.role).ok_or_else(|| {
        problems.push(format!(
            "root '{name}': unknown role '{}' (expected reference, sourcecode or workspace)",
            r.role
        ));
    });
    let perms = role.and_then(|role| {
        let permissions = r.permissions.as_deref();
        root_perms(&name, role, permissions, defaults.read_only, problems)
    });
    let deny = DenyList::new(config_deny.iter().chain(&r.deny).map(String::as_str));
    pattern_problems(&r.deny, &format!("root '{name}': "), problems);
    let bytes = root_bytes(&r, &name, defaults, problems);
    let repository = path
        .as_ref()
        .ok()
        .and_then(|path| repository(&r.name, path, r.git_history, problems));
    if problems.len() > before {
        return None;
    }
    let (Ok(path), Ok(role), Ok(perms), Ok(deny)) = (path, role, perms, deny) else {
        return None;
    };
    Some(Root {
        name: r.name,
        path,
        role,
        perms,
        deny,
        extra_deny: r.deny,
        max_read_bytes: bytes.max_read_bytes,
        max_document_bytes: bytes.max_document_bytes,
        min_free_bytes: bytes.min_free_bytes,
        trash_max_bytes: bytes.trash_max_bytes,
        repository,
    })
}

/// A problem if a root's name is not a valid name ([`check_name`]) or is
/// one a root `seen` before already has.
fn name_problems(name: &str, seen: &[Root], problems: &mut Vec<String>) {
    if let Err(reason) = check_name(name) {
        problems.push(format!(
            "root name '{}' is invalid: {reason}",
            name.escape_debug()
        ));
    } else if seen.iter().any(|root| root.name == name) {
        problems.push(format!("duplicate root name '{name}'"));
    }
}

/// A root's byte limits, as validated.
struct RootBytes {
    max_read_bytes: u64,
    max_document_bytes: u64,
    min_free_bytes: u64,
    trash_max_bytes: u64,
}

/// A root's `max_read_bytes` (at most what a guest's memory holds),
/// `min_free_bytes` and `trash_max_bytes` (the config-wide values by
/// default); `name` (escaped) names the root in a problem.
fn root_bytes(
    r: &RawRoot,
    name: &str,
    defaults: &RootDefaults,
    problems: &mut Vec<String>,
) -> RootBytes {
    let prefix = format!("root '{name}': ");
    let max_read_bytes = Bound {
        key: "max_read_bytes",
        default: DEFAULT_MAX_READ_BYTES.min(defaults.max_read_cap),
        min: 1,
        max: defaults.max_read_cap,
    }
    .take(r.max_read_bytes, problems, &prefix);
    let max_document_bytes = Bound {
        default: DEFAULT_MAX_DOCUMENT_BYTES.min(defaults.max_read_cap),
        max: defaults.max_read_cap,
        ..MAX_DOCUMENT_BYTES
    }
    .take(r.max_document_bytes, problems, &prefix);
    let min_free_bytes = Bound {
        default: defaults.min_free_bytes,
        ..MIN_FREE_BYTES
    }
    .take(r.min_free_bytes, problems, &prefix);
    let trash_max_bytes = Bound {
        default: defaults.trash_max_bytes,
        ..TRASH_MAX_BYTES
    }
    .take(r.trash_max_bytes, problems, &prefix);
    RootBytes {
        max_read_bytes,
        max_document_bytes,
        min_free_bytes,
        trash_max_bytes,
    }
}

/// `client_roots`: `ignore` (the default) or `narrow`.
fn client_roots(value: Option<&str>, problems: &mut Vec<String>) -> ClientRoots {
    match value {
        None | Some("ignore") => ClientRoots::Ignore,
        Some("narrow") => ClientRoots::Narrow,
        Some(other) => {
            problems.push(format!(
                "client_roots = '{}' is not one of \"ignore\", \"narrow\"",
                other.escape_debug()
            ));
            ClientRoots::Ignore
        }
    }
}

/// `max_output_bytes`: as set, or by default 16 MiB or enough for a whole read
/// of every root's largest file, whichever is more. Set below what a root's
/// `max_read_bytes` needs, it is refused: `read_file` would fail there.
fn output_bytes(set: Option<u64>, roots: &[Root], problems: &mut Vec<String>) -> u64 {
    let needed = |r: &Root| r.max_read_bytes.saturating_mul(OUTPUT_PER_READ);
    let Some(value) = set else {
        let most = roots.iter().map(needed).max().unwrap_or(0);
        return OUTPUT_BYTES.default.max(most).min(OUTPUT_BYTES.max);
    };
    let value = OUTPUT_BYTES.take(Some(value), problems, "");
    for r in roots.iter().filter(|r| needed(r) > value) {
        problems.push(format!(
            "max_output_bytes = {value} is below {OUTPUT_PER_READ} times root '{}''s max_read_bytes \
             ({}): a whole read of its largest file (text plus structured copy) would be refused",
            r.name.escape_debug(),
            r.max_read_bytes
        ));
    }
    value
}

/// The byte quota: off unless `quota_bytes_per_minute` is set; the burst is
/// a minute's worth unless `quota_burst_bytes` says otherwise.
fn quota(raw: &RawConfig, problems: &mut Vec<String>) -> Option<QuotaConfig> {
    let Some(per_minute) = raw.quota_bytes_per_minute else {
        if raw.quota_burst_bytes.is_some() {
            problems.push("quota_burst_bytes is set without quota_bytes_per_minute".into());
        }
        return None;
    };
    let bytes_per_minute = QUOTA_PER_MINUTE.take(Some(per_minute), problems, "");
    let burst_bytes = match raw.quota_burst_bytes {
        None => bytes_per_minute,
        burst => QUOTA_BURST.take(burst, problems, ""),
    };
    Some(QuotaConfig {
        bytes_per_minute,
        burst_bytes,
    })
}

/// A root name is what the model types: short, printable, one word.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("it is empty")
    } else if name.contains('/') {
        Err("it contains '/'")
    } else if name.chars().any(char::is_whitespace) {
        Err("it contains whitespace")
    } else if name.chars().any(char::is_control) {
        Err("it contains a control character")
    } else if name.chars().any(crate::policy::is_escaped) {
        // A root name is printed as it is in every message: none of what
        // the naming rule would have to escape (bidi, zero-width, …).
        Err("it contains an invisible or reordering character (a format character)")
    } else if name.starts_with('.') {
        Err("it starts with '.' (reserved)")
    } else if name.chars().count() > 64 {
        Err("it is longer than 64 characters")
    } else {
        Ok(())
    }
}

/// Effective permissions: role ceiling, narrowed by `permissions`, capped at
/// read when read-only. Widening and an empty result are refused.
fn root_perms(
    name: &str,
    role: Role,
    permissions: Option<&[String]>,
    read_only: bool,
    problems: &mut Vec<String>,
) -> Result<Perms, ()> {
    let before = problems.len();
    let mut asked = role.ceiling();
    if let Some(list) = permissions {
        asked = Perms::NONE;
        for p in list {
            match Permission::parse(p) {
                None => problems.push(format!(
                    "root '{name}': unknown permission '{p}' (expected read, write or delete)"
                )),
                Some(p) if !role.ceiling().contains(p) => {
                    problems.push(format!("root '{name}' (role {role}) cannot grant {p}"))
                }
                Some(p) => asked = asked.with(p),
            }
        }
    }
    if problems.len() > before {
        return Err(());
    }
    let cap = if read_only {
        Perms::of(&[Permission::Read])
    } else {
        Role::Workspace.ceiling()
    };
    let effective = asked.intersect(cap);
    if effective.is_empty() {
        problems.push(if asked.is_empty() {
            format!("root '{name}' grants no permission")
        } else {
            format!("root '{name}' grants no permission once read-only caps it at read")
        });
        return Err(());
    }
    Ok(effective)
}

/// Two roots where one contains the other would make the effective
/// permissions of the inner one ambiguous.
fn check_nesting(roots: &[Root], problems: &mut Vec<String>) {
    for (i, a) in roots.iter().enumerate() {
        for b in &roots[i + 1..] {
            if a.path == b.path {
                problems.push(format!(
                    "roots '{}' and '{}' are the same directory",
                    a.name, b.name
                ));
            } else if b.path.starts_with(&a.path) {
                problems.push(format!("root '{}' lies inside root '{}'", b.name, a.name));
            } else if a.path.starts_with(&b.path) {
                problems.push(format!("root '{}' lies inside root '{}'", a.name, b.name));
            }
        }
    }
}
