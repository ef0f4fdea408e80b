//! The TOML config: parsed strictly, validated whole, never started degraded.
//!
//! Every table rejects unknown keys, so `base_deny = []` fails at load instead
//! of being ignored (the built-in deny list lives in code and cannot be
//! switched off). Validation collects every problem, each naming its root, and
//! the server refuses to start if there is any.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::policy::{DenyList, Permission, Perms, Role, Root};

/// Where audit lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditTarget {
    Stderr,
    File(PathBuf),
}

/// Limits of one tool call and of listings and searches.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_search_results: u32,
    pub max_search_bytes: u64,
    pub max_list_entries: u32,
    pub tool_timeout: Duration,
    pub tool_memory_bytes: u64,
    /// Guests running at once; more calls wait for a slot.
    pub max_concurrent_calls: u32,
    /// Most bytes of text, structured content and images one call may
    /// return; more is refused while it is read out of the guest.
    pub max_output_bytes: u64,
}

/// The byte quota's configured rate and burst (`store::quota` runs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaConfig {
    pub bytes_per_minute: u64,
    pub burst_bytes: u64,
}

/// A validated config.
#[derive(Debug)]
pub struct Config {
    pub roots: Vec<Arc<Root>>,
    pub read_only: bool,
    /// Whether the server restricts itself with Landlock after start
    /// (`landlock = true`; see `sandbox`).
    pub landlock: bool,
    /// The config-wide extra deny patterns, as written.
    pub deny: Vec<String>,
    pub audit: AuditTarget,
    pub audit_max_bytes: u64,
    pub audit_backups: u32,
    pub limits: Limits,
    /// Third-party tool components (`[[components]] path`), in config order.
    pub components: Vec<PathBuf>,
    /// The byte quota, if one is set (`quota_bytes_per_minute`).
    pub quota: Option<QuotaConfig>,
}

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path} is not valid TOML for loom-fs: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{}", Problems(.0))]
    Invalid(Vec<String>),
}

struct Problems<'a>(&'a [String]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config:")?;
        for p in self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    audit_log: Option<String>,
    audit_log_max_bytes: Option<u64>,
    audit_log_backups: Option<u64>,
    max_search_results: Option<u64>,
    max_search_bytes: Option<u64>,
    max_list_entries: Option<u64>,
    tool_timeout_ms: Option<u64>,
    tool_memory_bytes: Option<u64>,
    max_concurrent_calls: Option<u64>,
    max_output_bytes: Option<u64>,
    quota_bytes_per_minute: Option<u64>,
    quota_burst_bytes: Option<u64>,
    min_free_bytes: Option<u64>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    landlock: bool,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    roots: Vec<RawRoot>,
    #[serde(default)]
    components: Vec<RawComponent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComponent {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    name: String,
    path: String,
    role: String,
    permissions: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    max_read_bytes: Option<u64>,
    min_free_bytes: Option<u64>,
}

/// A numeric key: its default and the range outside which a value is absurd.
struct Bound {
    key: &'static str,
    default: u64,
    min: u64,
    max: u64,
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

const AUDIT_MAX_BYTES: Bound = Bound {
    key: "audit_log_max_bytes",
    default: 8 * MIB,
    min: 4 * KIB,
    max: 64 * GIB,
};
const AUDIT_BACKUPS: Bound = Bound {
    key: "audit_log_backups",
    default: 3,
    min: 0,
    max: 1000,
};
const SEARCH_RESULTS: Bound = Bound {
    key: "max_search_results",
    default: 200,
    min: 1,
    max: 100_000,
};
const SEARCH_BYTES: Bound = Bound {
    key: "max_search_bytes",
    default: 64 * MIB,
    min: 1,
    max: 1024 * GIB,
};
const LIST_ENTRIES: Bound = Bound {
    key: "max_list_entries",
    default: 1000,
    min: 1,
    max: 100_000,
};
const TIMEOUT_MS: Bound = Bound {
    key: "tool_timeout_ms",
    default: 30_000,
    min: 10,
    max: 3_600_000,
};
// A guest is wasm32: 4 GiB is the most linear memory it can have.
const MEMORY_BYTES: Bound = Bound {
    key: "tool_memory_bytes",
    default: 256 * MIB,
    min: 16 * MIB,
    max: 4 * GIB,
};
// The default is worked out from the roots (see `output_bytes`).
const OUTPUT_BYTES: Bound = Bound {
    key: "max_output_bytes",
    default: 16 * MIB,
    min: 64 * KIB,
    max: 4 * GIB,
};
/// A whole read of a root's largest file comes back as text and again in the
/// structured result, with JSON's escapes: the output limit must hold this
/// many times `max_read_bytes`.
pub const OUTPUT_PER_READ: u64 = 4;
/// The runtime reserves one instance slot per call slot, plus one.
pub const MAX_CONCURRENT_CALLS: u64 = 64;
const CONCURRENT_CALLS: Bound = Bound {
    key: "max_concurrent_calls",
    default: 8,
    min: 1,
    max: MAX_CONCURRENT_CALLS,
};
const QUOTA_PER_MINUTE: Bound = Bound {
    key: "quota_bytes_per_minute",
    default: 0,
    min: KIB,
    max: 1024 * GIB,
};
const QUOTA_BURST: Bound = Bound {
    key: "quota_burst_bytes",
    default: 0,
    min: KIB,
    max: 1024 * GIB,
};
/// Free space kept on a root's disk. The default keeps 256 MiB: when an
/// agent fills a laptop's disk to the last byte, the system and the user's
/// own programs fail first (logs, editors saving, package managers), and
/// 256 MiB is a few minutes of them, yet small enough that no disk a person
/// is still working on is refused. 0 keeps none.
const MIN_FREE_BYTES: Bound = Bound {
    key: "min_free_bytes",
    default: 256 * MIB,
    min: 0,
    max: 1024 * GIB,
};

/// Default per-root read cap.
pub const DEFAULT_MAX_READ_BYTES: u64 = MIB;

impl Bound {
    fn take(&self, value: Option<u64>, problems: &mut Vec<String>, prefix: &str) -> u64 {
        match value {
            None => self.default,
            Some(v) if (self.min..=self.max).contains(&v) => v,
            Some(v) => {
                problems.push(format!(
                    "{prefix}{} = {v} is out of range ({} to {})",
                    self.key, self.min, self.max
                ));
                self.default
            }
        }
    }
}

impl Config {
    /// Reads and validates the config at `path`. `read_only` (the command-line
    /// flag) caps every root at read, as the `read_only` key does.
    pub fn load(path: &Path, read_only: bool) -> Result<Config, ConfigError> {
        let text = fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        Config::parse(&text, base, read_only).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })
    }

    /// Parses and validates config text; relative paths resolve against `base`.
    pub fn parse(text: &str, base: &Path, read_only: bool) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        validate(raw, base, read_only)
    }

    /// The root named `name`.
    pub fn root(&self, name: &str) -> Option<&Arc<Root>> {
        self.roots.iter().find(|r| r.name == name)
    }

    /// Whether some root grants `p`.
    pub fn grants(&self, p: Permission) -> bool {
        self.roots.iter().any(|r| r.perms.contains(p))
    }
}

fn validate(raw: RawConfig, base: &Path, read_only_flag: bool) -> Result<Config, ConfigError> {
    let mut problems = Vec::new();
    let read_only = raw.read_only || read_only_flag;

    let audit_max_bytes = AUDIT_MAX_BYTES.take(raw.audit_log_max_bytes, &mut problems, "");
    let audit_backups = AUDIT_BACKUPS.take(raw.audit_log_backups, &mut problems, "") as u32;
    let min_free_bytes = MIN_FREE_BYTES.take(raw.min_free_bytes, &mut problems, "");
    let limits = Limits {
        max_search_results: SEARCH_RESULTS.take(raw.max_search_results, &mut problems, "") as u32,
        max_search_bytes: SEARCH_BYTES.take(raw.max_search_bytes, &mut problems, ""),
        max_list_entries: LIST_ENTRIES.take(raw.max_list_entries, &mut problems, "") as u32,
        tool_timeout: Duration::from_millis(TIMEOUT_MS.take(
            raw.tool_timeout_ms,
            &mut problems,
            "",
        )),
        tool_memory_bytes: MEMORY_BYTES.take(raw.tool_memory_bytes, &mut problems, ""),
        max_concurrent_calls: CONCURRENT_CALLS.take(raw.max_concurrent_calls, &mut problems, "")
            as u32,
        // Set below, once the roots are known.
        max_output_bytes: 0,
    };
    let quota = quota(&raw, &mut problems);
    let audit = match raw.audit_log.as_deref() {
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
    };

    for pattern in &raw.deny {
        if let Err(e) = DenyList::new([pattern.as_str()]) {
            problems.push(format!("deny: {e}"));
        }
    }

    if raw.roots.is_empty() {
        problems.push("no roots declared: add at least one [[roots]] table".into());
    }
    // Reading N bytes costs the guest several times N (buffer, string, result).
    let max_read_cap = limits.tool_memory_bytes / 4;
    let mut roots: Vec<Root> = Vec::new();
    for r in raw.roots {
        let before = problems.len();
        if let Err(reason) = check_name(&r.name) {
            problems.push(format!(
                "root name '{}' is invalid: {reason}",
                r.name.escape_debug()
            ));
        } else if roots.iter().any(|seen| seen.name == r.name) {
            problems.push(format!("duplicate root name '{}'", r.name));
        }
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
            root_perms(
                &name,
                role,
                r.permissions.as_deref(),
                read_only,
                &mut problems,
            )
        });
        let deny = DenyList::new(raw.deny.iter().chain(&r.deny).map(String::as_str));
        for pattern in &r.deny {
            if let Err(e) = DenyList::new([pattern.as_str()]) {
                problems.push(format!("root '{name}': {e}"));
            }
        }
        let max_read_bytes = Bound {
            key: "max_read_bytes",
            default: DEFAULT_MAX_READ_BYTES.min(max_read_cap),
            min: 1,
            max: max_read_cap,
        }
        .take(r.max_read_bytes, &mut problems, &format!("root '{name}': "));
        let min_free_bytes = Bound {
            default: min_free_bytes,
            ..MIN_FREE_BYTES
        }
        .take(r.min_free_bytes, &mut problems, &format!("root '{name}': "));
        if problems.len() > before {
            continue;
        }
        if let (Ok(path), Ok(role), Ok(perms), Ok(deny)) = (path, role, perms, deny) {
            roots.push(Root {
                name: r.name,
                path,
                role,
                perms,
                deny,
                extra_deny: r.deny,
                max_read_bytes,
                min_free_bytes,
            });
        }
    }
    check_nesting(&roots, &mut problems);
    let mut limits = limits;
    limits.max_output_bytes = output_bytes(raw.max_output_bytes, &roots, &mut problems);

    let mut components: Vec<PathBuf> = Vec::new();
    for c in &raw.components {
        let path = absolute(base, &c.path);
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => problems.push(format!("component '{}': not a regular file", c.path)),
            Err(e) => problems.push(format!("component '{}': {e}", c.path)),
        }
        if components.contains(&path) {
            problems.push(format!("component '{}' is declared twice", c.path));
        }
        components.push(path);
    }

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
        quota,
    })
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

/// `~/` expands to the home directory; a relative path is relative to `base`.
fn absolute(base: &Path, path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(path)
}

/// The real path of a root directory, resolved once at load.
fn real_dir(base: &Path, path: &str) -> Result<PathBuf, &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    let real = fs::canonicalize(absolute(base, path)).map_err(|_| "does not exist")?;
    if !real.is_dir() {
        return Err("is not a directory");
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    struct Dirs {
        tmp: TempDir,
    }

    impl Dirs {
        fn new() -> Dirs {
            let tmp = TempDir::new().unwrap();
            for d in ["a", "b", "a/inner", "data", "data-secrets"] {
                fs::create_dir_all(tmp.path().join(d)).unwrap();
            }
            fs::write(tmp.path().join("file.txt"), "x").unwrap();
            Dirs { tmp }
        }

        fn base(&self) -> &Path {
            self.tmp.path()
        }

        fn parse(&self, text: &str) -> Result<Config, ConfigError> {
            Config::parse(text, self.base(), false)
        }

        fn problems(&self, text: &str) -> Vec<String> {
            match self.parse(text) {
                Err(ConfigError::Invalid(p)) => p,
                Err(other) => vec![other.to_string()],
                Ok(_) => vec![],
            }
        }
    }

    fn root(name: &str, path: &str, role: &str) -> String {
        format!("[[roots]]\nname = \"{name}\"\npath = \"{path}\"\nrole = \"{role}\"\n")
    }

    #[test]
    fn a_valid_config_loads_with_defaults() {
        let d = Dirs::new();
        let c = d
            .parse(&(root("a", "a", "sourcecode") + &root("b", "b", "reference")))
            .unwrap();
        assert_eq!(c.roots.len(), 2);
        assert_eq!(
            c.roots[0].path,
            fs::canonicalize(d.base().join("a")).unwrap()
        );
        assert_eq!(c.roots[0].perms.to_string(), "[read, write]");
        assert_eq!(c.roots[1].perms.to_string(), "[read]");
        assert_eq!(c.roots[0].max_read_bytes, DEFAULT_MAX_READ_BYTES);
        assert_eq!(c.audit, AuditTarget::Stderr);
        assert_eq!(c.audit_max_bytes, 8 * MIB);
        assert_eq!(c.audit_backups, 3);
        assert_eq!(c.limits.max_search_results, 200);
        assert_eq!(c.limits.max_search_bytes, 64 * MIB);
        assert_eq!(c.limits.tool_timeout, Duration::from_secs(30));
        assert_eq!(c.limits.max_concurrent_calls, 8);
        assert_eq!(c.limits.max_output_bytes, 16 * MIB);
        assert!(!c.read_only);
        assert!(!c.landlock);
        assert!(c.grants(Permission::Write));
        assert!(!c.grants(Permission::Delete));
    }

    /// The output limit follows the roots' read limits by default, and is
    /// refused below what a whole read of a root's largest file returns.
    #[test]
    fn the_output_limit_holds_a_whole_read() {
        let d = Dirs::new();
        let big = root("x", "a", "reference") + "max_read_bytes = 8388608\n";
        let c = d.parse(&big).unwrap();
        assert_eq!(c.limits.max_output_bytes, 4 * 8 * MIB);
        let small = format!("max_output_bytes = 1048576\n{big}");
        assert_eq!(
            d.problems(&small),
            [
                "max_output_bytes = 1048576 is below 4 times root 'x''s max_read_bytes (8388608): \
              a whole read of its largest file (text plus structured copy) would be refused"
            ]
        );
    }

    #[test]
    fn every_key_is_read() {
        let d = Dirs::new();
        let text = r#"
            audit_log = "logs/audit.log"
            audit_log_max_bytes = 65536
            audit_log_backups = 5
            max_search_results = 50
            max_search_bytes = 1000000
            max_list_entries = 300
            tool_timeout_ms = 5000
            tool_memory_bytes = 67108864
            max_concurrent_calls = 3
            max_output_bytes = 1048576
            min_free_bytes = 4096
            landlock = true
            deny = ["*.sqlite3", "*.dump"]
            [[roots]]
            name = "ws"
            path = "a"
            role = "workspace"
            permissions = ["read", "delete"]
            deny = ["*.tmp"]
            max_read_bytes = 2048
            min_free_bytes = 0
            [[roots]]
            name = "other"
            path = "b"
            role = "reference"
            max_read_bytes = 1024
        "#;
        let c = d.parse(text).unwrap();
        assert_eq!(c.audit, AuditTarget::File(d.base().join("logs/audit.log")));
        assert_eq!(c.audit_max_bytes, 65536);
        assert_eq!(c.audit_backups, 5);
        assert_eq!(c.limits.max_search_results, 50);
        assert_eq!(c.limits.max_search_bytes, 1_000_000);
        assert_eq!(c.limits.max_list_entries, 300);
        assert_eq!(c.limits.tool_timeout, Duration::from_millis(5000));
        assert_eq!(c.limits.tool_memory_bytes, 64 * MIB);
        assert_eq!(c.limits.max_concurrent_calls, 3);
        assert_eq!(c.limits.max_output_bytes, MIB);
        assert!(c.landlock);
        assert_eq!(c.deny, ["*.sqlite3", "*.dump"]);
        let r = &c.roots[0];
        assert_eq!(r.perms.to_string(), "[read, delete]");
        assert_eq!(r.extra_deny, ["*.tmp"]);
        assert_eq!(r.max_read_bytes, 2048);
        assert_eq!(r.min_free_bytes, 0);
        // The config-wide value is every other root's.
        assert_eq!(c.roots[1].min_free_bytes, 4096);
        assert!(r.deny.match_path(Path::new("x.tmp")).is_some());
        assert!(r.deny.match_path(Path::new("x.dump")).is_some());
        assert!(r.deny.match_path(Path::new(".env")).is_some());
    }

    #[test]
    fn the_quota_is_off_by_default_and_its_burst_is_a_minute() {
        let d = Dirs::new();
        let plain = root("a", "a", "workspace");
        assert_eq!(d.parse(&plain).unwrap().quota, None);
        let c = d
            .parse(&format!("quota_bytes_per_minute = 1048576\n{plain}"))
            .unwrap();
        let expected = QuotaConfig {
            bytes_per_minute: MIB,
            burst_bytes: MIB,
        };
        assert_eq!(c.quota, Some(expected));
        let c = d
            .parse(&format!(
                "quota_bytes_per_minute = 1048576\nquota_burst_bytes = 4096\n{plain}"
            ))
            .unwrap();
        assert_eq!(c.quota.unwrap().burst_bytes, 4096);
        assert_eq!(
            d.problems(&format!("quota_burst_bytes = 4096\n{plain}")),
            ["quota_burst_bytes is set without quota_bytes_per_minute"]
        );
        assert_eq!(
            d.problems(&format!("quota_bytes_per_minute = 10\n{plain}")),
            ["quota_bytes_per_minute = 10 is out of range (1024 to 1099511627776)"]
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_config_file() {
        let d = Dirs::new();
        let cfg = d.base().join("a/inner/roots.toml");
        fs::write(&cfg, root("up", "../../b", "reference")).unwrap();
        let c = Config::load(&cfg, false).unwrap();
        assert_eq!(
            c.roots[0].path,
            fs::canonicalize(d.base().join("b")).unwrap()
        );
    }

    #[test]
    fn a_root_through_a_symlink_is_resolved_once() {
        let d = Dirs::new();
        symlink(d.base().join("b"), d.base().join("link-to-b")).unwrap();
        let c = d.parse(&root("b", "link-to-b", "reference")).unwrap();
        assert_eq!(
            c.roots[0].path,
            fs::canonicalize(d.base().join("b")).unwrap()
        );
    }

    #[test]
    fn missing_and_non_directory_paths() {
        let d = Dirs::new();
        assert_eq!(
            d.problems(&root("x", "nowhere", "reference")),
            ["root 'x': path 'nowhere' does not exist"]
        );
        assert_eq!(
            d.problems(&root("x", "file.txt", "reference")),
            ["root 'x': path 'file.txt' is not a directory"]
        );
        assert_eq!(
            d.problems(&root("x", "", "reference")),
            ["root 'x': path '' is empty"]
        );
    }

    #[test]
    fn nested_roots_in_either_order_and_the_same_directory() {
        let d = Dirs::new();
        let outer_first = root("outer", "a", "reference") + &root("inner", "a/inner", "reference");
        assert_eq!(
            d.problems(&outer_first),
            ["root 'inner' lies inside root 'outer'"]
        );
        let inner_first = root("inner", "a/inner", "reference") + &root("outer", "a", "reference");
        assert_eq!(
            d.problems(&inner_first),
            ["root 'inner' lies inside root 'outer'"]
        );
        let twice = root("one", "a", "reference") + &root("two", "a/inner/..", "reference");
        assert_eq!(
            d.problems(&twice),
            ["roots 'one' and 'two' are the same directory"]
        );
        symlink(d.base().join("a"), d.base().join("alias")).unwrap();
        let via_link = root("one", "a", "reference") + &root("two", "alias", "reference");
        assert_eq!(
            d.problems(&via_link),
            ["roots 'one' and 'two' are the same directory"]
        );
        // Prefix siblings are not nested.
        let siblings = root("d", "data", "reference") + &root("s", "data-secrets", "reference");
        assert!(d.parse(&siblings).is_ok());
    }

    #[test]
    fn names() {
        let d = Dirs::new();
        let dup = root("a", "a", "reference") + &root("a", "b", "reference");
        assert_eq!(d.problems(&dup), ["duplicate root name 'a'"]);
        for (name, reason) in [
            ("", "it is empty"),
            ("a/b", "it contains '/'"),
            ("my docs", "it contains whitespace"),
            ("tab\\there", "it contains whitespace"),
            ("bell\\u0007", "it contains a control character"),
            (
                "rtl\\u202etxt",
                "it contains an invisible or reordering character (a format character)",
            ),
            (
                "zero\\u200bwidth",
                "it contains an invisible or reordering character (a format character)",
            ),
            ("..", "it starts with '.' (reserved)"),
            (".hidden", "it starts with '.' (reserved)"),
        ] {
            let problems = d.problems(&root(name, "a", "reference"));
            assert_eq!(problems.len(), 1, "{name}: {problems:?}");
            assert!(problems[0].ends_with(reason), "{name}: {problems:?}");
            assert!(problems[0].starts_with("root name '"), "{problems:?}");
        }
    }

    #[test]
    fn roles_and_permissions() {
        let d = Dirs::new();
        assert_eq!(
            d.problems(&root("x", "a", "admin")),
            ["root 'x': unknown role 'admin' (expected reference, sourcecode or workspace)"]
        );
        let widen = root("docs", "a", "reference") + "permissions = [\"read\", \"write\"]\n";
        assert_eq!(
            d.problems(&widen),
            ["root 'docs' (role reference) cannot grant write"]
        );
        let widen = root("src", "a", "sourcecode") + "permissions = [\"delete\"]\n";
        assert_eq!(
            d.problems(&widen),
            ["root 'src' (role sourcecode) cannot grant delete"]
        );
        let unknown = root("x", "a", "workspace") + "permissions = [\"execute\"]\n";
        assert_eq!(
            d.problems(&unknown),
            ["root 'x': unknown permission 'execute' (expected read, write or delete)"]
        );
        let empty = root("x", "a", "workspace") + "permissions = []\n";
        assert_eq!(d.problems(&empty), ["root 'x' grants no permission"]);
        let narrowed = root("x", "a", "workspace") + "permissions = [\"read\"]\n";
        assert_eq!(
            d.parse(&narrowed).unwrap().roots[0].perms.to_string(),
            "[read]"
        );
    }

    #[test]
    fn read_only_caps_every_root() {
        let d = Dirs::new();
        let text = root("w", "a", "workspace") + &root("s", "b", "sourcecode");
        let flag = Config::parse(&text, d.base(), true).unwrap();
        assert!(flag.read_only);
        assert!(flag.roots.iter().all(|r| r.perms.to_string() == "[read]"));
        let key = Config::parse(&format!("read_only = true\n{text}"), d.base(), false).unwrap();
        assert!(key.roots.iter().all(|r| r.perms.to_string() == "[read]"));
        assert!(!key.grants(Permission::Write));
        let write_only = root("w", "a", "workspace") + "permissions = [\"write\"]\n";
        let problems = match Config::parse(&write_only, d.base(), true) {
            Err(ConfigError::Invalid(p)) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            problems,
            ["root 'w' grants no permission once read-only caps it at read"]
        );
    }

    #[test]
    fn invalid_globs_anywhere() {
        let d = Dirs::new();
        let global = format!("deny = [\"[abc\"]\n{}", root("x", "a", "reference"));
        let problems = d.problems(&global);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with("deny: invalid deny pattern '[abc': "),
            "{problems:?}"
        );
        let local = root("x", "a", "reference") + "deny = [\"\"]\n";
        assert_eq!(d.problems(&local), ["root 'x': empty deny pattern"]);
    }

    #[test]
    fn no_roots() {
        let d = Dirs::new();
        assert_eq!(
            d.problems(""),
            ["no roots declared: add at least one [[roots]] table"]
        );
    }

    #[test]
    fn unknown_keys_anywhere() {
        let d = Dirs::new();
        for text in [
            format!("base_deny = []\n{}", root("x", "a", "reference")),
            root("x", "a", "reference") + "colour = \"red\"\n",
            format!(
                "{}[[components]]\npath = \"file.txt\"\nsha256 = \"00\"\n",
                root("x", "a", "reference")
            ),
        ] {
            let err = d.parse(&text).unwrap_err();
            assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
            assert!(err.to_string().contains("unknown field"), "{err}");
        }
    }

    #[test]
    fn components_are_files_relative_to_the_config() {
        let d = Dirs::new();
        let with = |paths: &[&str]| {
            let mut text = root("x", "a", "reference");
            for p in paths {
                text += &format!("[[components]]\npath = \"{p}\"\n");
            }
            text
        };
        let c = d.parse(&with(&["file.txt"])).unwrap();
        assert_eq!(c.components, [d.base().join("file.txt")]);
        assert!(d.parse(&with(&[])).unwrap().components.is_empty());
        assert_eq!(
            d.problems(&with(&["missing.wasm", "a", "file.txt", "./file.txt"])),
            [
                "component 'missing.wasm': No such file or directory (os error 2)",
                "component 'a': not a regular file",
                "component './file.txt' is declared twice",
            ]
        );
    }

    #[test]
    fn zero_and_absurd_limits() {
        let d = Dirs::new();
        for (line, message) in [
            (
                "max_search_results = 0",
                "max_search_results = 0 is out of range (1 to 100000)",
            ),
            (
                "audit_log_max_bytes = 10",
                "audit_log_max_bytes = 10 is out of range (4096 to 68719476736)",
            ),
            (
                "tool_timeout_ms = 0",
                "tool_timeout_ms = 0 is out of range (10 to 3600000)",
            ),
            (
                "tool_memory_bytes = 99999999999",
                "tool_memory_bytes = 99999999999 is out of range (16777216 to 4294967296)",
            ),
            (
                "max_list_entries = 0",
                "max_list_entries = 0 is out of range (1 to 100000)",
            ),
            (
                "max_search_bytes = 0",
                "max_search_bytes = 0 is out of range (1 to 1099511627776)",
            ),
            (
                "max_concurrent_calls = 0",
                "max_concurrent_calls = 0 is out of range (1 to 64)",
            ),
            (
                "max_concurrent_calls = 65",
                "max_concurrent_calls = 65 is out of range (1 to 64)",
            ),
            (
                "audit_log_backups = 5000",
                "audit_log_backups = 5000 is out of range (0 to 1000)",
            ),
            (
                "max_output_bytes = 1024",
                "max_output_bytes = 1024 is out of range (65536 to 4294967296)",
            ),
        ] {
            let text = format!("{line}\n{}", root("x", "a", "reference"));
            assert_eq!(d.problems(&text), [message]);
        }
        let huge = root("x", "a", "reference") + "min_free_bytes = 2199023255552\n";
        assert_eq!(
            d.problems(&huge),
            ["root 'x': min_free_bytes = 2199023255552 is out of range (0 to 1099511627776)"]
        );
        assert_eq!(
            d.problems(&format!(
                "min_free_bytes = 2199023255552\n{}",
                root("x", "a", "reference")
            )),
            ["min_free_bytes = 2199023255552 is out of range (0 to 1099511627776)"]
        );
        let zero = root("x", "a", "reference") + "max_read_bytes = 0\n";
        assert_eq!(
            d.problems(&zero),
            ["root 'x': max_read_bytes = 0 is out of range (1 to 67108864)"]
        );
        // A read cap the guest's memory could not hold.
        let big = root("x", "a", "reference") + "max_read_bytes = 1073741824\n";
        assert_eq!(
            d.problems(&big),
            ["root 'x': max_read_bytes = 1073741824 is out of range (1 to 67108864)"]
        );
        assert_eq!(
            d.problems(&format!(
                "audit_log = \"stdout\"\n{}",
                root("x", "a", "reference")
            )),
            ["audit_log cannot be stdout: under stdio it is the JSON-RPC channel"]
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let d = Dirs::new();
        let text = root("x", "nowhere", "reference") + &root("y", "a", "boss");
        let problems = d.problems(&text);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let shown = ConfigError::Invalid(problems).to_string();
        assert!(
            shown.starts_with("invalid config:\n  - root 'x'"),
            "{shown}"
        );
    }
}
