//! The validated config: what the rest of the server reads. Only
//! validation (`validate.rs`, `component.rs`) builds these.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::{Permission, Perms, Root};

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

impl Config {
    /// The root named `name`.
    pub fn root(&self, name: &str) -> Option<&Arc<Root>> {
        self.roots.iter().find(|r| r.name == name)
    }

    /// Whether some root grants `p`.
    pub fn grants(&self, p: Permission) -> bool {
        self.roots.iter().any(|r| r.perms.contains(p))
    }
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
