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

use crate::policy::{DenyList, GIT_DIR_DENY, Permission, Perms, Repository, Role, Root};

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
    /// Resources one session may be subscribed to at once.
    pub max_subscriptions: u32,
    /// Change notifications one session is sent per second at most; more
    /// wait (coalesced per resource), none is dropped.
    pub max_notifications_per_second: u32,
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
    /// Third-party tool components (`[[components]]`), in config order.
    pub components: Vec<ComponentEntry>,
    /// The public keys a signed component may be signed by (`[trust] keys`).
    pub trust_keys: Vec<String>,
    /// The byte quota, if one is set (`quota_bytes_per_minute`).
    pub quota: Option<QuotaConfig>,
    /// What the client's own roots (`roots/list`) do to a session.
    pub client_roots: ClientRoots,
}

/// `client_roots`: what a 2025-era client's roots do. They never widen
/// anything: SEP-2577 deprecates roots as access control, so at most they
/// narrow what the configured roots serve to one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientRoots {
    /// The client's roots are not asked for (the default).
    #[default]
    Ignore,
    /// A session is served only the parts of the configured roots that lie
    /// under one of its client's roots.
    Narrow,
}

impl ClientRoots {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientRoots::Ignore => "ignore",
            ClientRoots::Narrow => "narrow",
        }
    }
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

/// A third-party component as its `[[components]]` entry admits it: the
/// file, what its bytes must be (pinned digest, signature), and what it is
/// given (roots, permissions, limits).
#[derive(Clone, Debug)]
pub struct ComponentEntry {
    /// The file, relative paths joined to the config's directory.
    pub path: PathBuf,
    /// The path as the config writes it, for messages.
    pub written: String,
    /// The digest its bytes must have (`sha256`, lowercase hex); `None`
    /// only with `unpinned = true`.
    pub sha256: Option<String>,
    /// Whether `<file>.minisig` must verify with a `[trust]` key.
    pub signed: bool,
    /// The roots it is offered (`roots`); `None`: every root.
    pub roots: Option<Vec<String>>,
    /// The most it may do on any root (`permissions`); `None`: what it
    /// declares.
    pub cap: Option<Perms>,
    /// `memory_bytes`, at most `tool_memory_bytes` (the global value by default).
    pub memory_bytes: u64,
    /// `timeout_ms`, at most `tool_timeout_ms`.
    pub timeout: Duration,
    /// `max_output_bytes`, at most the global `max_output_bytes`.
    pub max_output_bytes: u64,
}

impl ComponentEntry {
    /// Where its signature is read from: the file's name with `.minisig`
    /// appended, as `minisign -S` writes it.
    pub fn signature_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".minisig");
        PathBuf::from(name)
    }
}

#[derive(Default, Deserialize)]
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
    max_subscriptions: Option<u64>,
    max_notifications_per_second: Option<u64>,
    quota_bytes_per_minute: Option<u64>,
    quota_burst_bytes: Option<u64>,
    min_free_bytes: Option<u64>,
    trash_max_bytes: Option<u64>,
    client_roots: Option<String>,
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
    trust: Option<RawTrust>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComponent {
    path: String,
    sha256: Option<String>,
    #[serde(default)]
    unpinned: bool,
    #[serde(default)]
    signed: bool,
    roots: Option<Vec<String>>,
    permissions: Option<Vec<String>>,
    memory_bytes: Option<u64>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    #[serde(default)]
    keys: Vec<String>,
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
    trash_max_bytes: Option<u64>,
    /// Whether the history tools serve the root: by default yes when it is
    /// a repository's top, no when it lies below one.
    git_history: Option<bool>,
}

/// A numeric key: its default and the range outside which a value is absurd.
struct Bound {
    key: &'static str,
    default: u64,
    min: u64,
    max: u64,
}

impl Bound {
    const fn new(key: &'static str, default: u64, min: u64, max: u64) -> Bound {
        Bound {
            key,
            default,
            min,
            max,
        }
    }
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

const AUDIT_MAX_BYTES: Bound = Bound::new("audit_log_max_bytes", 8 * MIB, 4 * KIB, 64 * GIB);
const AUDIT_BACKUPS: Bound = Bound::new("audit_log_backups", 3, 0, 1000);
const SEARCH_RESULTS: Bound = Bound::new("max_search_results", 200, 1, 100_000);
const SEARCH_BYTES: Bound = Bound::new("max_search_bytes", 64 * MIB, 1, 1024 * GIB);
const LIST_ENTRIES: Bound = Bound::new("max_list_entries", 1000, 1, 100_000);
const TIMEOUT_MS: Bound = Bound::new("tool_timeout_ms", 30_000, 10, 3_600_000);
// A guest is wasm32: 4 GiB is the most linear memory it can have.
const MEMORY_BYTES: Bound = Bound::new("tool_memory_bytes", 256 * MIB, 16 * MIB, 4 * GIB);
// The default is worked out from the roots (see `output_bytes`).
const OUTPUT_BYTES: Bound = Bound::new("max_output_bytes", 16 * MIB, 64 * KIB, 4 * GIB);
/// A whole read of a root's largest file comes back as text and again in the
/// structured result, with JSON's escapes: the output limit must hold this
/// many times `max_read_bytes`.
pub const OUTPUT_PER_READ: u64 = 4;
/// The runtime reserves one instance slot per call slot, plus one.
pub const MAX_CONCURRENT_CALLS: u64 = 64;
const CONCURRENT_CALLS: Bound = Bound::new("max_concurrent_calls", 8, 1, MAX_CONCURRENT_CALLS);
/// Subscriptions per session: a client UI subscribes to the files it shows
/// (a few dozen); 256 leaves room without letting one session make the
/// server match every event against thousands of entries.
const SUBSCRIPTIONS: Bound = Bound::new("max_subscriptions", 256, 1, 100_000);
/// Change notifications per session per second: 20 keeps a build that
/// rewrites hundreds of files from flooding a client, while one file a
/// person saves is told at once.
const NOTIFICATIONS_PER_SECOND: Bound = Bound::new("max_notifications_per_second", 20, 1, 10_000);
const QUOTA_PER_MINUTE: Bound = Bound::new("quota_bytes_per_minute", 0, KIB, 1024 * GIB);
const QUOTA_BURST: Bound = Bound::new("quota_burst_bytes", 0, KIB, 1024 * GIB);
/// Free space kept on a root's disk. The default keeps 256 MiB: when an
/// agent fills a laptop's disk to the last byte, the system and the user's
/// own programs fail first (logs, editors saving, package managers), and
/// 256 MiB is a few minutes of them, yet small enough that no disk a person
/// is still working on is refused. 0 keeps none.
const MIN_FREE_BYTES: Bound = Bound::new("min_free_bytes", 256 * MIB, 0, 1024 * GIB);
/// Bytes a root's trash may hold. The default, 1 GiB, is under 1% of a
/// laptop's disk (128 GiB and up), so a runaway agent that overwrites a
/// large file again and again is stopped long before the disk is full,
/// yet it holds hundreds of thousands of versions of source files, which
/// is what an agent mostly rewrites. Past it, changes that would keep more
/// are refused (never an old version silently dropped) until the operator
/// purges. 0 turns the budget off.
const TRASH_MAX_BYTES: Bound = Bound::new("trash_max_bytes", GIB, 0, 1024 * 1024 * GIB);

/// A call's memory, time and output limits when no config sets them (what
/// `component inspect` runs a component's `describe` with).
pub fn default_call_limits() -> (u64, Duration, u64) {
    (
        MEMORY_BYTES.default,
        Duration::from_millis(TIMEOUT_MS.default),
        OUTPUT_BYTES.default,
    )
}

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

/// A directory named on the command line, and the role its flag gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirArg {
    pub path: PathBuf,
    pub role: Role,
}

impl Config {
    /// Reads and validates the config at `path`. `read_only` (the command-line
    /// flag) caps every root at read, as the `read_only` key does.
    pub fn load(path: &Path, read_only: bool) -> Result<Config, ConfigError> {
        Config::load_with(Some(path), &[], false, read_only)
    }

    /// The config at `path` if one is given, with a root for each of `dirs`
    /// besides (named after its last component, see [`dir_roots`]), all
    /// validated together: a directory nested in a config root, or given
    /// twice, is refused as two such roots in the file would be. Without a
    /// file, every other setting takes its default. `/` is refused unless
    /// `allow_filesystem_root`.
    pub fn load_with(
        path: Option<&Path>,
        dirs: &[DirArg],
        allow_filesystem_root: bool,
        read_only: bool,
    ) -> Result<Config, ConfigError> {
        let (mut raw, base) = match path {
            Some(path) => {
                let text = fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                let raw: RawConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                })?;
                let base = path.parent().unwrap_or(Path::new("."));
                let base = if base.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    base
                };
                (raw, base.to_path_buf())
            }
            None => (RawConfig::default(), PathBuf::from(".")),
        };
        let mut problems = Vec::new();
        let taken: Vec<String> = raw.roots.iter().map(|r| r.name.clone()).collect();
        for (name, dir) in dir_roots(dirs, &taken) {
            let Some(text) = dir.path.to_str() else {
                problems.push(format!(
                    "directory {} is not valid UTF-8: give it in a config file's root, renamed",
                    dir.path.display()
                ));
                continue;
            };
            if dir.path.parent().is_none() && dir.path.has_root() && !allow_filesystem_root {
                problems.push(format!(
                    "directory '{text}' is the whole filesystem: refused unless \
                     --allow-filesystem-root is given"
                ));
                continue;
            }
            raw.roots.push(RawRoot {
                name,
                path: text.to_string(),
                role: dir.role.as_str().to_string(),
                permissions: None,
                deny: Vec::new(),
                max_read_bytes: None,
                min_free_bytes: None,
                trash_max_bytes: None,
                git_history: None,
            });
        }
        match validate(raw, &base, read_only) {
            Err(ConfigError::Invalid(mut more)) => {
                if !dirs.is_empty() {
                    // Said of a file; the directories' own problems say more.
                    more.retain(|p| !p.starts_with("no roots declared"));
                }
                problems.append(&mut more);
                Err(ConfigError::Invalid(problems))
            }
            _ if !problems.is_empty() => Err(ConfigError::Invalid(problems)),
            result => result,
        }
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
    let trash_max_bytes = TRASH_MAX_BYTES.take(raw.trash_max_bytes, &mut problems, "");
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
        max_subscriptions: SUBSCRIPTIONS.take(raw.max_subscriptions, &mut problems, "") as u32,
        max_notifications_per_second: NOTIFICATIONS_PER_SECOND.take(
            raw.max_notifications_per_second,
            &mut problems,
            "",
        ) as u32,
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
        let trash_max_bytes = Bound {
            default: trash_max_bytes,
            ..TRASH_MAX_BYTES
        }
        .take(
            r.trash_max_bytes,
            &mut problems,
            &format!("root '{name}': "),
        );
        let repository = path
            .as_ref()
            .ok()
            .and_then(|path| repository(&r.name, path, r.git_history, &mut problems));
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
                trash_max_bytes,
                repository,
            });
        }
    }
    check_nesting(&roots, &mut problems);
    let mut limits = limits;
    limits.max_output_bytes = output_bytes(raw.max_output_bytes, &roots, &mut problems);

    let trust_keys = trust_keys(raw.trust.as_ref(), &mut problems);
    let mut components: Vec<ComponentEntry> = Vec::new();
    for c in &raw.components {
        let entry = component_entry(
            c,
            base,
            &roots,
            &limits,
            !trust_keys.is_empty(),
            &mut problems,
        );
        if components.iter().any(|seen| seen.path == entry.path) {
            problems.push(format!("component '{}' is declared twice", c.path));
        }
        components.push(entry);
    }

    let client_roots = match raw.client_roots.as_deref() {
        None | Some("ignore") => ClientRoots::Ignore,
        Some("narrow") => ClientRoots::Narrow,
        Some(other) => {
            problems.push(format!(
                "client_roots = '{}' is not one of \"ignore\", \"narrow\"",
                other.escape_debug()
            ));
            ClientRoots::Ignore
        }
    };

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

/// `[trust] keys`: minisign public keys (the base64 line of a `.pub`
/// file), each checked here so that a typo is a config error, not a
/// signature that never verifies.
fn trust_keys(trust: Option<&RawTrust>, problems: &mut Vec<String>) -> Vec<String> {
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
    let sha256 = match (&c.sha256, c.unpinned) {
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
    };
    if c.signed && !have_keys {
        problems.push(format!(
            "{at}: signed = true, but no [trust] keys are listed to check its signature with"
        ));
    }
    let scope = c.roots.as_ref().map(|names| {
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
        names.clone()
    });
    let cap = c.permissions.as_ref().map(|list| {
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
    });
    let mut within =
        |key: &'static str, global: &'static str, value: Option<u64>, min: u64, max: u64| {
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
        };
    let memory_bytes = within(
        "memory_bytes",
        MEMORY_BYTES.key,
        c.memory_bytes,
        MEMORY_BYTES.min,
        limits.tool_memory_bytes,
    );
    let timeout_ms = within(
        "timeout_ms",
        TIMEOUT_MS.key,
        c.timeout_ms,
        TIMEOUT_MS.min,
        u64::try_from(limits.tool_timeout.as_millis()).unwrap_or(u64::MAX),
    );
    let max_output_bytes = within(
        "max_output_bytes",
        OUTPUT_BYTES.key,
        c.max_output_bytes,
        OUTPUT_BYTES.min,
        limits.max_output_bytes,
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

/// The repository whose history root `name` at `path` (a real directory)
/// offers, as [`Repository`] says: the nearest `.git` directory at or
/// above it, offered by default when it is the root's own and only with
/// `git_history = true` when it lies above. A `.git` that is a file or a
/// symlink (a linked worktree, a submodule) is not followed: the root
/// offers no history. `git_history = true` with no repository is a problem.
fn repository(
    name: &str,
    path: &Path,
    git_history: Option<bool>,
    problems: &mut Vec<String>,
) -> Option<Arc<Repository>> {
    if git_history == Some(false) {
        return None;
    }
    let found = path.ancestors().find_map(|top| {
        let git = top.join(".git");
        let meta = fs::symlink_metadata(&git).ok()?;
        Some((top, meta.is_dir().then_some(git)))
    });
    let (top, git) = match found {
        Some((top, Some(git))) if git.join("HEAD").is_file() => (top, git),
        _ => {
            if git_history == Some(true) {
                problems.push(format!(
                    "root '{}': git_history = true, but no git repository holds it (a \
                     `.git` directory at or above it)",
                    name.escape_debug()
                ));
            }
            return None;
        }
    };
    if top != path && git_history != Some(true) {
        return None;
    }
    let scope: Vec<&str> = path
        .strip_prefix(top)
        .ok()?
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    let git = fs::canonicalize(&git).ok()?;
    let deny = DenyList::new(GIT_DIR_DENY.iter().copied()).ok()?;
    Some(Arc::new(Repository {
        scope: scope.join("/"),
        git: Arc::new(Root {
            name: name.to_string(),
            path: git,
            role: Role::Reference,
            perms: Role::Reference.ceiling(),
            deny,
            extra_deny: GIT_DIR_DENY.iter().map(|s| s.to_string()).collect(),
            max_read_bytes: 0,
            min_free_bytes: 0,
            trash_max_bytes: 0,
            repository: None,
        }),
    }))
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

/// The root name of each directory given on the command line: its last
/// component (`~/src/app` is `app`), made a valid name (a space or a
/// character a name cannot hold becomes `-`, leading dots go), and made
/// distinct from the `taken` names and from each other by a suffix: two
/// directories called `app` are `app` and `app-2`. A `~/` at the start is
/// the home directory (clients start servers without a shell).
fn dir_roots(dirs: &[DirArg], taken: &[String]) -> Vec<(String, DirArg)> {
    let mut names: Vec<String> = taken.to_vec();
    let mut roots = Vec::new();
    for dir in dirs {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let path = match (dir.path.to_str(), home) {
            (Some("~"), Some(home)) => home,
            (Some(text), _) => absolute(&cwd(), text),
            (None, _) => cwd().join(&dir.path),
        };
        let path = lexical(&path);
        let last = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut base: String = last
            .trim_start_matches('.')
            .chars()
            .map(|c| {
                if c == '/' || c.is_whitespace() || c.is_control() || crate::policy::is_escaped(c) {
                    '-'
                } else {
                    c
                }
            })
            .take(56)
            .collect();
        if base.is_empty() {
            base = "root".into();
        }
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        names.push(name.clone());
        roots.push((
            name,
            DirArg {
                path,
                role: dir.role,
            },
        ));
    }
    roots
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `path` with `.` and `..` taken out by spelling (a root's real path is
/// resolved later; this only names it).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
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
mod tests;
