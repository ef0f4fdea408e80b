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

use std::fmt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, make_bitflags,
};

use crate::config::{AuditTarget, Config};
use crate::policy::{Permission, Perms};

/// The newest Landlock ABI whose filesystem rights are handled: a kernel with
/// an older one enforces what it knows (best effort) and the status says what
/// is missing.
const HANDLED: ABI = ABI::V9;

/// Opening a directory: every root needs it, since each call's roots are
/// opened (as directories) to be handed to its guest.
const OPEN_DIR: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadDir});

const READ: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});

/// Moving entries: what a delete (a move into the trash), an atomic
/// replacement (a rename over the target, the old file kept by a hard link)
/// and `move_file` do. Renaming an entry takes removing it from its
/// directory and making one of its type in the other, so every type a tool
/// may move is here but device nodes: making one would open the raw device
/// to whoever can create it, so the kernel refuses moving them.
const MOVE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    MakeReg | MakeDir | MakeSym | MakeFifo | MakeSock | RemoveFile | RemoveDir | Refer
});

/// Writing: changing contents and truncating, besides moving (a write
/// replaces by rename and keeps the old content in the trash).
const WRITE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{
    WriteFile | Truncate | MakeReg | MakeDir | MakeSym | MakeFifo | MakeSock | RemoveFile
        | RemoveDir | Refer
});

/// The audit log's directory: appending, truncating (`audit_log_backups = 0`),
/// and the renames of rotation (creating the new file, replacing a backup).
const AUDIT: BitFlags<AccessFs> =
    make_bitflags!(AccessFs::{WriteFile | Truncate | MakeReg | RemoveFile});

/// The cache: entries read (mapped), never written.
const CACHE: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir});

const COMPONENT: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile});

/// What the kernel lets the process do in a root with `perms`.
///
/// At the kernel, write and delete differ only in changing contents: loom-fs
/// never erases, so a delete is a move into the trash, and a write moves too
/// (atomic replacement, the old content kept). The policing filesystem keeps
/// the finer line between them.
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
struct Grant {
    path: PathBuf,
    access: BitFlags<AccessFs>,
    purpose: Purpose,
}

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
    #[error("the kernel sandbox could not be applied: {0}")]
    Landlock(#[from] landlock::RulesetError),
}

/// The sandbox for a config: built before restricting, applied once.
#[derive(Debug)]
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
                access: root_access(r.perms),
                purpose: Purpose::Root(r.name.clone()),
            });
        }
        let cache = cache.map(|dir| Grant {
            path: real(dir),
            access: CACHE,
            purpose: Purpose::Cache,
        });
        grants.extend(config.components.iter().map(|path| Grant {
            path: real(path),
            access: COMPONENT,
            purpose: Purpose::Component,
        }));
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
                access: AUDIT,
                purpose: Purpose::AuditLog,
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
            created = created.add_rule(PathBeneath::new(fd, grant.access))?;
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

    /// "2 roots, the audit log and the cache".
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
        abi: ABI,
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
pub fn available() -> bool {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .is_ok()
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
mod tests {
    use super::*;
    use std::fs;
    use std::io::ErrorKind;
    use std::os::fd::AsRawFd;
    use std::process::Command;

    #[test]
    fn an_audit_directory_over_another_grant_is_refused_however_it_is_spelt() {
        let tmp = tempfile::TempDir::new().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        tree(&base);
        let config = Config::parse(CONFIG, &base, false).unwrap();
        assert!(Plan::new(&config, Some(&base.join("cache"))).is_ok());
        // The cache in the audit log's directory, through a symlink, and
        // before it exists.
        std::os::unix::fs::symlink(base.join("logs"), base.join("link")).unwrap();
        for cache in ["link/cache", "logs/not-yet"] {
            let refused = Plan::new(&config, Some(&base.join(cache))).unwrap_err();
            assert!(
                refused.to_string().contains("holds the component cache"),
                "{cache}: {refused}"
            );
        }
        // The audit log beside the roots holds them.
        let beside = CONFIG.replace("logs/audit.log", "audit.log");
        let config = Config::parse(&beside, &base, false).unwrap();
        let refused = Plan::new(&config, None).unwrap_err();
        assert!(
            refused.to_string().contains("holds root 'ref'"),
            "{refused}"
        );
    }

    #[test]
    fn rights_follow_the_permissions() {
        let of = |perms: &[Permission]| root_access(Perms::of(perms));
        use Permission::*;
        assert_eq!(of(&[Read]), READ);
        assert!(!of(&[Read]).intersects(WRITE));
        assert_eq!(of(&[Read, Write]), READ | WRITE);
        assert_eq!(of(&[Read, Write, Delete]), READ | WRITE);
        // A delete moves into the trash: no content is changed.
        let delete = of(&[Read, Delete]);
        assert!(delete.contains(AccessFs::Refer | AccessFs::RemoveFile | AccessFs::MakeReg));
        assert!(!delete.intersects(AccessFs::WriteFile | AccessFs::Truncate));
        // Whatever the role: no program run, no device made or ioctl'd.
        for perms in [&[Read][..], &[Write], &[Read, Write, Delete]] {
            let access = of(perms);
            assert!(access.contains(AccessFs::ReadDir), "{perms:?}");
            assert!(
                !access.intersects(
                    AccessFs::Execute
                        | AccessFs::MakeChar
                        | AccessFs::MakeBlock
                        | AccessFs::IoctlDev
                        | AccessFs::ResolveUnix
                ),
                "{perms:?}"
            );
        }
    }

    #[test]
    fn what_the_status_says_by_kernel() {
        let on = |abi| Status::Enforced {
            abi,
            missing: missing(abi),
            kept: "1 root and the cache".into(),
        };
        assert_eq!(
            on(HANDLED).to_string(),
            "process restricted to 1 root and the cache"
        );
        assert_eq!(
            on(ABI::V7).to_string(),
            "process restricted to 1 root and the cache; partially: this kernel (Landlock ABI \
             7) does not restrict connecting to UNIX sockets by path"
        );
        assert_eq!(
            Status::NotEnforced("this kernel has no Landlock".into()).to_string(),
            "this kernel has no Landlock; the server runs without the kernel sandbox"
        );
        assert!(missing(HANDLED).is_empty());
        assert_eq!(missing(ABI::V7), ["connecting to UNIX sockets by path"]);
        assert_eq!(
            missing(ABI::V2),
            [
                "truncating files",
                "ioctl on devices",
                "connecting to UNIX sockets by path"
            ]
        );
    }

    /// The test tree: a reference root, a workspace root, the audit log's
    /// own directory, a component, and files outside all of them.
    fn tree(base: &Path) {
        for dir in [
            "ref/sub",
            "ws/sub",
            "ws/.mcp-trash",
            "logs",
            "cache",
            "tools",
            "outside",
        ] {
            fs::create_dir_all(base.join(dir)).unwrap();
        }
        fs::write(base.join("ref/a.txt"), "in ref\n").unwrap();
        fs::write(base.join("ws/b.txt"), "in ws\n").unwrap();
        fs::write(base.join("cache/e.cwasm"), "compiled\n").unwrap();
        fs::write(base.join("tools/tool.wasm"), "component\n").unwrap();
        fs::write(base.join("tools/other.wasm"), "not declared\n").unwrap();
        fs::write(base.join("outside/secret.txt"), "CANARY\n").unwrap();
        fs::write(base.join("secret-beside.txt"), "CANARY\n").unwrap();
    }

    const CONFIG: &str = r#"
        audit_log = "logs/audit.log"
        landlock = true
        [[roots]]
        name = "ref"
        path = "ref"
        role = "reference"
        [[roots]]
        name = "ws"
        path = "ws"
        role = "workspace"
        [[components]]
        path = "tools/tool.wasm"
    "#;

    const CHILD: &str = "LOOMFS_SANDBOX_TEST_DIR";

    /// Landlock cannot be undone, so the proof runs in a child: this test
    /// binary again, running only this test, with the tree's directory in
    /// [`CHILD`]. The child restricts itself as the server does, then tries
    /// every kind of access directly (no policing filesystem in the way)
    /// and prints one line per attempt; it fails on any surprise.
    #[test]
    fn the_kernel_refuses_what_the_grants_leave_out() {
        if let Some(dir) = std::env::var_os(CHILD) {
            return restricted_child(Path::new(&dir));
        }
        if !available() {
            eprintln!("SKIPPED: kernel has no Landlock; the in-process sandbox proof was not run");
            return;
        }
        let tmp = tempfile::TempDir::new().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        tree(&base);
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sandbox::tests::the_kernel_refuses_what_the_grants_leave_out",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &base)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        // The child's report, for `--nocapture`.
        print!("{stdout}");
        assert!(
            stdout.contains("landlock: process restricted to 2 roots, the audit log, the cache (read-only) and 1 component file"),
            "{stdout}"
        );
        assert!(stdout.contains("\nevery attempt made\n"), "{stdout}");
        // Nothing outside changed.
        assert_eq!(
            fs::read_to_string(base.join("outside/secret.txt")).unwrap(),
            "CANARY\n"
        );
        assert!(!base.join("outside/new.txt").exists());
        assert!(!base.join("ref/new.txt").exists());
    }

    /// Expects `result` to be what `allowed` says, printing the attempt.
    fn expect<T>(what: &str, allowed: bool, result: std::io::Result<T>) {
        match (allowed, result) {
            (true, Ok(_)) => println!("ok {what}: allowed"),
            (false, Err(e)) if e.kind() == ErrorKind::PermissionDenied => {
                println!("ok {what}: refused ({e})")
            }
            (true, Err(e)) => panic!("{what}: should be allowed, got {e}"),
            (false, Ok(_)) => panic!("{what}: should be refused, but it worked"),
            (false, Err(e)) => panic!("{what}: should be refused with EACCES, got {e}"),
        }
    }

    fn restricted_child(base: &Path) {
        let config = Config::parse(CONFIG, base, false).unwrap();
        // As the server does: the audit log is opened before restricting.
        let audit =
            crate::store::audit::Audit::open(&config.audit, config.audit_max_bytes, 0).unwrap();
        let status = Plan::new(&config, Some(&base.join("cache")))
            .unwrap()
            .restrict_self()
            .unwrap();
        println!("\nlandlock: {status}");
        assert!(matches!(status, Status::Enforced { .. }), "{status}");
        let at = |rel: &str| base.join(rel);

        // Reading.
        expect(
            "read a file in a read root",
            true,
            fs::read(at("ref/a.txt")),
        );
        expect("list a read root", true, fs::read_dir(at("ref/sub")));
        expect(
            "read a file outside",
            false,
            fs::read(at("outside/secret.txt")),
        );
        expect(
            "read a file beside the roots",
            false,
            fs::read(at("secret-beside.txt")),
        );
        expect("list the roots' parent", false, fs::read_dir(base));
        expect("read /etc/passwd", false, fs::read("/etc/passwd"));
        expect(
            "read the declared component",
            true,
            fs::read(at("tools/tool.wasm")),
        );
        expect(
            "read a file beside it",
            false,
            fs::read(at("tools/other.wasm")),
        );

        // Writing in a reference root fails at the kernel, policy or not.
        expect(
            "create a file in a read root",
            false,
            fs::write(at("ref/new.txt"), "x"),
        );
        expect(
            "open a read root's file for writing",
            false,
            fs::OpenOptions::new().append(true).open(at("ref/a.txt")),
        );
        expect(
            "make a directory in a read root",
            false,
            fs::create_dir(at("ref/d")),
        );
        expect(
            "rename in a read root",
            false,
            fs::rename(at("ref/a.txt"), at("ref/sub/a.txt")),
        );
        expect(
            "write outside",
            false,
            fs::write(at("outside/new.txt"), "x"),
        );
        expect(
            "empty a file outside",
            false,
            fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(at("outside/secret.txt")),
        );
        expect(
            "move a file out of a workspace",
            false,
            fs::rename(at("ws/b.txt"), at("outside/b.txt")),
        );
        expect(
            "run a program",
            false,
            Command::new(std::env::current_exe().unwrap())
                .arg("--list")
                .status(),
        );

        // A workspace: what the write tools do.
        expect(
            "write a file in a workspace",
            true,
            fs::write(at("ws/sub/c.txt"), "c"),
        );
        expect(
            "make a directory there",
            true,
            fs::create_dir(at("ws/.mcp-trash/stamp")),
        );
        expect(
            "keep a file in the trash by a hard link",
            true,
            fs::hard_link(at("ws/b.txt"), at("ws/.mcp-trash/stamp/b.txt")),
        );
        expect(
            "replace a file by rename",
            true,
            fs::rename(at("ws/sub/c.txt"), at("ws/b.txt")),
        );
        expect(
            "move a directory into the trash",
            true,
            fs::rename(at("ws/sub"), at("ws/.mcp-trash/stamp/sub")),
        );

        // The audit log rotates; it is never read back.
        drop(audit);
        expect(
            "rotate the audit log",
            true,
            fs::rename(at("logs/audit.log"), at("logs/audit.log.1")),
        );
        expect(
            "start a new audit log",
            true,
            fs::write(at("logs/audit.log"), "{}\n"),
        );
        expect("read the audit log", false, fs::read(at("logs/audit.log")));

        // The cache is read, never written: what a compromised server wrote
        // there would run in later starts.
        expect("read a cache entry", true, fs::read(at("cache/e.cwasm")));
        expect("list the cache", true, fs::read_dir(at("cache")));
        expect(
            "write a cache entry",
            false,
            fs::write(at("cache/new.cwasm"), "x"),
        );
        expect(
            "overwrite a cache entry",
            false,
            fs::OpenOptions::new().write(true).open(at("cache/e.cwasm")),
        );
        expect(
            "remove a cache entry",
            false,
            fs::remove_file(at("cache/e.cwasm")),
        );

        // A workspace's trash index: a temporary file, renamed.
        expect(
            "write a trash index",
            true,
            fs::write(at("ws/.mcp-trash/.stamp.json.tmp"), "{}"),
        );
        expect(
            "rename it into place",
            true,
            fs::rename(
                at("ws/.mcp-trash/.stamp.json.tmp"),
                at("ws/.mcp-trash/stamp.json"),
            ),
        );

        // `/proc/self/fd`: an `O_PATH` probe opens anywhere (Landlock does
        // not govern it), but reopening it for reading is checked as the
        // file itself, as the policing filesystem relies on.
        let reopen = |rel: &str| {
            let probe = rustix::fs::open(
                at(rel),
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            fs::read(format!("/proc/self/fd/{}", probe.as_raw_fd()))
        };
        expect("reopen a probe in a root", true, reopen("ref/a.txt"));
        expect(
            "reopen a probe outside",
            false,
            reopen("outside/secret.txt"),
        );
        expect(
            "the policing filesystem's self-test",
            true,
            crate::runtime::fs::self_test().map_err(std::io::Error::other),
        );
        println!("\nevery attempt made");
    }
}
