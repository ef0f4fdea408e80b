//! The kernel sandbox (`landlock = true`): once started, the server restricts
//! itself with Landlock to its roots, its audit log and its cache, so that a
//! bug anywhere in it (the policing filesystem, wasmtime, a parser) cannot
//! reach other files. The rules below are the kernel's, not ours: they hold
//! for every thread of the process, whatever its code does.
//!
//! What the process keeps, by [`Plan::new`]:
//! - each root, by its effective permissions (see [`root_access`]);
//! - the audit log's directory: writing, truncating, creating and removing
//!   files there (rotation renames within it); the log is never read back.
//!   It must not hold or lie in a root, the cache or a component (the grant
//!   would widen theirs): such a config is refused;
//! - the compiled-component cache, for reading only: code a compromised
//!   server wrote there would run in every later start, so a sandboxed
//!   server compiles what is not cached and writes nothing (`check` fills
//!   the cache);
//! - each third-party component file, for reading.
//!
//! Everything else that Landlock governs is refused: opening any other file
//! or directory, creating, removing, renaming or linking anything elsewhere,
//! truncating, executing a program, ioctl on a device, connecting to a UNIX
//! socket by path (as far as the kernel's Landlock ABI goes; the status says
//! what it lacks). Landlock does not govern `stat`, `readlink` or `O_PATH`
//! opens: metadata outside the roots stays visible to the process, contents
//! do not. A file reopened through `/proc/self/fd` is checked as the file it
//! is, so the policing filesystem's reopen of a probe works in a root and
//! fails outside one.
//!
//! `landlock_restrict_self` applies to the calling thread and the threads it
//! starts afterwards, never to those already running: restrict before any
//! thread starts (see [`lone_thread`]). It cannot be undone.
//!
//! Landlock is Linux's; no other platform has a twin loom-fs uses. Elsewhere
//! the plan is still checked (`check` refuses an audit log in a root there
//! too), [`available`] is false and [`Plan::restrict_self`] says that no
//! kernel sandbox is available.

use std::fmt;
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, make_bitflags,
};

use crate::config::{AuditTarget, Config};
use crate::policy::{Permission, Perms};

/// The newest Landlock ABI whose filesystem rights are handled: a kernel with
/// an older one enforces what it knows (best effort) and the status says what
/// is missing.
#[cfg(target_os = "linux")]
const HANDLED: ABI = ABI::V9;

/// Opening a directory: every root needs it, since each call's roots are
/// opened (as directories) to be handed to its guest.
#[cfg(target_os = "linux")]
const OPEN_DIR: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadDir});

#[cfg(target_os = "linux")]
const READ: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});

/// Moving entries: what a delete (a move into the trash), an atomic
/// replacement (a rename over the target, the old file kept by a hard link)
/// and `move_file` do. Renaming an entry takes removing it from its
/// directory and making one of its type in the other, so every type a tool
/// may move is here but device nodes: making one would open the raw device
/// to whoever can create it, so the kernel refuses moving them.
#[cfg(target_os = "linux")]
const MOVE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    MakeReg | MakeDir | MakeSym | MakeFifo | MakeSock | RemoveFile | RemoveDir | Refer
});

/// Writing: changing contents and truncating, besides moving (a write
/// replaces by rename and keeps the old content in the trash).
#[cfg(target_os = "linux")]
const WRITE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    WriteFile | Truncate | MakeReg | MakeDir | MakeSym | MakeFifo | MakeSock | RemoveFile
        | RemoveDir | Refer
});

/// The audit log's directory: appending, truncating (`audit_log_backups = 0`),
/// and the renames of rotation (creating the new file, replacing a backup).
#[cfg(target_os = "linux")]
const AUDIT: BitFlags<AccessFs> =
    make_bitflags!(AccessFs::{WriteFile | Truncate | MakeReg | RemoveFile});

/// The cache: entries read (mapped), never written.
#[cfg(target_os = "linux")]
const CACHE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});

#[cfg(target_os = "linux")]
const COMPONENT: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile});

/// What the kernel lets the process do in a root with `perms`.
///
/// At the kernel, write and delete differ only in changing contents: loom-fs
/// never erases, so a delete is a move into the trash, and a write moves too
/// (atomic replacement, the old content kept). The policing filesystem keeps
/// the finer line between them.
#[cfg(target_os = "linux")]
pub fn root_access(perms: Perms) -> BitFlags<AccessFs> {
    let mut access = OPEN_DIR;
    if perms.contains(Permission::Read) {
        access |= READ;
    }
    if perms.contains(Permission::Write) {
        access |= WRITE;
    }
    if perms.contains(Permission::Delete) {
        access |= MOVE;
    }
    access
}

/// What a grant is for, in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    Root(String),
    AuditLog,
    Cache,
    Component,
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Purpose::Root(name) => write!(f, "root '{name}'"),
            Purpose::AuditLog => f.write_str("the audit log's directory"),
            Purpose::Cache => f.write_str("the component cache"),
            Purpose::Component => f.write_str("component"),
        }
    }
}

/// One path the process keeps, and what it may do there (beneath it, for a
/// directory).
#[derive(Clone, Debug)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only Landlock reads the grants")
)]
struct Grant {
    path: PathBuf,
    purpose: Purpose,
    /// A root's effective permissions (none for the other purposes).
    perms: Perms,
}

impl Grant {
    /// What the kernel lets the process do there.
    #[cfg(target_os = "linux")]
    fn access(&self) -> BitFlags<AccessFs> {
        match self.purpose {
            Purpose::Root(_) => root_access(self.perms),
            Purpose::AuditLog => AUDIT,
            Purpose::Cache => CACHE,
            Purpose::Component => COMPONENT,
        }
    }
}

/// The Landlock ABI a kernel enforces: Linux's; a type with no value
/// elsewhere, where nothing is ever enforced.
#[cfg(target_os = "linux")]
pub type Abi = ABI;
#[cfg(not(target_os = "linux"))]
pub type Abi = std::convert::Infallible;

/// Why the sandbox could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A path to keep could not be opened (a root removed since the config
    /// was loaded, say): the server does not start half-sandboxed.
    #[error("cannot open {purpose} ({}) for the kernel sandbox: {source}", path.display())]
    Open {
        purpose: Purpose,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The audit log's directory holds or lies in something the sandbox
    /// grants more narrowly.
    #[error(
        "the audit log's directory {} {} {what}: the kernel sandbox would let the server write \
         there; give the audit log a directory of its own",
        dir.display(), if *inside { "lies in" } else { "holds" }
    )]
    AuditOverlap {
        dir: PathBuf,
        what: Purpose,
        inside: bool,
    },
    /// The kernel refused the ruleset or the restriction.
    #[cfg(target_os = "linux")]
    #[error("the kernel sandbox could not be applied: {0}")]
    Landlock(#[from] landlock::RulesetError),
}

/// The sandbox for a config: built before restricting, applied once.
#[derive(Debug)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only Landlock reads the grants")
)]
pub struct Plan {
    grants: Vec<Grant>,
    /// Whether tools rename or link across directories (any root grants
    /// write or delete). A kernel whose Landlock always refuses that (ABI 1)
    /// then gets no sandbox rather than broken tools.
    renames: bool,
}

impl Plan {
    /// What the server keeps for `config`, with the compiled-component
    /// cache at `cache` (granted if it exists: a sandboxed server does not
    /// make it). Refused: an audit log whose directory holds or lies in
    /// another grant.
    pub fn new(config: &Config, cache: Option<&Path>) -> Result<Plan, SandboxError> {
        let mut grants = Vec::new();
        for r in &config.roots {
            grants.push(Grant {
                path: r.path.clone(),
                purpose: Purpose::Root(r.name.clone()),
                perms: r.perms,
            });
            // The history tools read a repository above the root
            // (`git_history = true`) there, for reading only.
            if let Some(repository) = &r.repository
                && !repository.git.path.starts_with(&r.path)
            {
                grants.push(Grant {
                    path: repository.git.path.clone(),
                    purpose: Purpose::Root(r.name.clone()),
                    perms: repository.git.perms,
                });
            }
        }
        let cache = cache.map(|dir| Grant {
            path: real(dir),
            purpose: Purpose::Cache,
            perms: Perms::NONE,
        });
        grants.extend(config.components.iter().map(|c| Grant {
            path: real(&c.path),
            purpose: Purpose::Component,
            perms: Perms::NONE,
        }));
        // A signed component's signature is read at load too (after the
        // sandbox is on); one that is missing is refused then.
        grants.extend(
            config
                .components
                .iter()
                .filter(|c| c.signed && c.signature_path().is_file())
                .map(|c| Grant {
                    path: real(&c.signature_path()),
                    purpose: Purpose::Component,
                    perms: Perms::NONE,
                }),
        );
        if let AuditTarget::File(log) = &config.audit
            && let Some(dir) = log.parent()
        {
            let dir = real(dir);
            // The cache counts whether it exists yet or not: a start may
            // make it.
            let overlapping = grants.iter().chain(&cache).find(|g| overlap(&dir, &g.path));
            if let Some(g) = overlapping {
                return Err(SandboxError::AuditOverlap {
                    inside: dir.starts_with(&g.path),
                    dir,
                    what: g.purpose.clone(),
                });
            }
            grants.push(Grant {
                path: dir,
                purpose: Purpose::AuditLog,
                perms: Perms::NONE,
            });
        }
        // Granted only if it exists: a sandboxed server does not make it.
        grants.extend(cache.filter(|g| g.path.is_dir()));
        let renames = config
            .roots
            .iter()
            .any(|r| r.perms.contains(Permission::Write) || r.perms.contains(Permission::Delete));
        Ok(Plan { grants, renames })
    }

    /// Restricts the calling thread, and every thread it starts from now on,
    /// to the grants. Irreversible. Call it before any other thread starts.
    #[cfg(target_os = "linux")]
    pub fn restrict_self(self) -> Result<Status, SandboxError> {
        let mut ruleset = Ruleset::default();
        if self.renames {
            // Without the refer right the kernel refuses every rename across
            // directories: no sandbox at all rather than write tools broken.
            ruleset = ruleset
                .set_compatibility(CompatLevel::SoftRequirement)
                .handle_access(AccessFs::Refer)?;
        }
        let mut created = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(HANDLED))?
            .create()?;
        for grant in &self.grants {
            let fd = PathFd::new(&grant.path).map_err(|e| SandboxError::Open {
                purpose: grant.purpose.clone(),
                path: grant.path.clone(),
                source: match e {
                    landlock::PathFdError::OpenCall { source, .. } => source,
                    other => std::io::Error::other(other.to_string()),
                },
            })?;
            created = created.add_rule(PathBeneath::new(fd, grant.access()))?;
        }
        let status = created.restrict_self()?;
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi,
            LandlockStatus::NotEnabled => {
                return Ok(Status::NotEnforced(
                    "this kernel has Landlock but it is not enabled (add landlock to the \
                     lsm= boot parameter)"
                        .into(),
                ));
            }
            LandlockStatus::NotImplemented => {
                return Ok(Status::NotEnforced("this kernel has no Landlock".into()));
            }
        };
        if status.ruleset == RulesetStatus::NotEnforced {
            // Only the soft requirement on renames can leave a kernel that
            // has Landlock without a sandbox.
            return Ok(Status::NotEnforced(format!(
                "this kernel's Landlock (ABI {abi}) refuses every rename across directories, \
                 which the write tools need"
            )));
        }
        Ok(Status::Enforced {
            abi,
            missing: missing(abi),
            kept: self.summary(),
        })
    }

    /// No kernel sandbox off Linux: the server says so and runs without.
    #[cfg(not(target_os = "linux"))]
    pub fn restrict_self(self) -> Result<Status, SandboxError> {
        Ok(Status::NotEnforced(unavailable()))
    }

    /// "2 roots, the audit log and the cache".
    #[cfg(target_os = "linux")]
    fn summary(&self) -> String {
        let count = |p: fn(&Purpose) -> bool| self.grants.iter().filter(|g| p(&g.purpose)).count();
        let roots = count(|p| matches!(p, Purpose::Root(_)));
        let components = count(|p| *p == Purpose::Component);
        let mut parts = vec![format!("{roots} root{}", if roots == 1 { "" } else { "s" })];
        if count(|p| *p == Purpose::AuditLog) > 0 {
            parts.push("the audit log".into());
        }
        if count(|p| *p == Purpose::Cache) > 0 {
            parts.push("the cache (read-only)".into());
        }
        if components > 0 {
            parts.push(format!(
                "{components} component file{}",
                if components == 1 { "" } else { "s" }
            ));
        }
        match parts.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// `path` with its symlinks resolved, as far as it exists: what a grant
/// reaches is the real place.
pub fn real(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(found) = std::fs::canonicalize(at) {
            return missing.iter().rev().fold(found, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether one of two paths holds the other (or they are the same).
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// What this kernel's Landlock cannot restrict, of what is handled.
#[cfg(target_os = "linux")]
fn missing(abi: ABI) -> Vec<&'static str> {
    let lacking = AccessFs::from_all(HANDLED) & !AccessFs::from_all(abi);
    [
        (AccessFs::Truncate, "truncating files"),
        (AccessFs::IoctlDev, "ioctl on devices"),
        (AccessFs::ResolveUnix, "connecting to UNIX sockets by path"),
    ]
    .into_iter()
    .filter(|(right, _)| lacking.contains(*right))
    .map(|(_, what)| what)
    .collect()
}

/// Whether the sandbox took hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Status {
    /// Restricted. `missing`: what this kernel's Landlock (`abi`) does not
    /// cover; `kept`: what the process still reaches, in words.
    Enforced {
        abi: Abi,
        missing: Vec<&'static str>,
        kept: String,
    },
    /// Not restricted at all, and why.
    NotEnforced(String),
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Enforced { abi, missing, kept } => {
                write!(f, "process restricted to {kept}")?;
                if !missing.is_empty() {
                    write!(
                        f,
                        "; partially: this kernel (Landlock ABI {abi}) does not restrict {}",
                        missing.join(", ")
                    )?;
                }
                Ok(())
            }
            Status::NotEnforced(why) => {
                write!(f, "{why}; the server runs without the kernel sandbox")
            }
        }
    }
}

/// Whether this kernel has Landlock (for `check`; nothing is restricted).
#[cfg(target_os = "linux")]
pub fn available() -> bool {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .is_ok()
}

/// Landlock is Linux's: no kernel sandbox elsewhere.
#[cfg(not(target_os = "linux"))]
pub fn available() -> bool {
    false
}

/// Why there is no kernel sandbox on this platform, in words.
pub fn unavailable() -> String {
    format!(
        "no kernel sandbox is available on {}: Landlock is Linux's",
        std::env::consts::OS
    )
}

/// Whether the calling thread is the process's only one, as it must be when
/// the sandbox is applied (`None` if `/proc` cannot tell).
pub fn lone_thread() -> Option<bool> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(tasks.count() == 1)
}

/// The directory of the audit log, if it holds other files than the log's
/// own (`audit.log`, its backups and lock): the sandbox lets the server
/// create, write and remove files anywhere under it.
pub fn shared_audit_dir(config: &Config) -> Option<PathBuf> {
    let AuditTarget::File(log) = &config.audit else {
        return None;
    };
    let (dir, name) = (log.parent()?, log.file_name()?);
    let entries = std::fs::read_dir(dir).ok()?;
    let own = |entry: &std::fs::DirEntry| {
        let file = entry.file_name();
        let (file, name) = (file.as_encoded_bytes(), name.as_encoded_bytes());
        file.starts_with(name) && entry.file_type().is_ok_and(|t| t.is_file())
    };
    let shared = entries.flatten().any(|e| !own(&e));
    shared.then(|| dir.to_path_buf())
}

#[cfg(test)]
mod tests;
