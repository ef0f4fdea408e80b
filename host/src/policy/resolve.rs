//! `resolve()`: the only way from a model-supplied string to a location.
//!
//! Refused before the three checks: an unknown root, a NUL byte, an absolute
//! path, an empty path for a mutation. Then, in this order:
//! 1. **permission**: the root grants the operation;
//! 2. **confinement**: the path, with every symlink followed (a missing tail
//!    appended to its deepest existing ancestor), never leaves the root, at
//!    any step of the walk — the same rule `openat2(RESOLVE_BENEATH)` applies
//!    under the guest, so what passes here also opens there;
//! 3. **deny**: no component matches the deny list, neither as requested nor
//!    as resolved (so `notes.txt → .env` is refused).
//!
//! Last, a write or delete whose target is the root itself (`.`, `sub/..`,
//! `link-to-dot`) is refused: a root can be neither replaced, moved nor
//! deleted.
//!
//! Messages are root-relative and never carry a host path.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{Permission, Root, Rule, shown_arg};

/// More symlinks than this in one resolution is a loop.
const MAX_SYMLINKS: u32 = 40;

/// Longest path and longest name Linux accepts (`PATH_MAX - 1`, `NAME_MAX`).
/// Longer ones are refused here: no lookup could succeed, and the guest
/// would only echo them back.
pub const MAX_PATH_BYTES: usize = 4095;
pub const MAX_NAME_BYTES: usize = 255;

/// A refusal: the rule that bit and the message for the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub rule: Rule,
    pub message: String,
}

impl Denial {
    fn new(rule: Rule, message: impl Into<String>) -> Denial {
        Denial {
            rule,
            message: message.into(),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A path that passed every check. Only [`resolve`] builds one, so holding a
/// `Resolved` is proof the checks ran.
#[derive(Clone, Debug)]
pub struct Resolved {
    root: Arc<Root>,
    requested: String,
    real: PathBuf,
    exists: bool,
    op: Permission,
}

impl Resolved {
    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    /// The path as the model wrote it (root-relative).
    pub fn requested(&self) -> &str {
        &self.requested
    }

    /// The real location, symlinks resolved, relative to the root (empty for
    /// the root itself).
    pub fn real_rel(&self) -> &Path {
        // `resolve` only builds a `Resolved` whose real path is under the root.
        self.real
            .strip_prefix(&self.root.path)
            .unwrap_or(Path::new(""))
    }

    /// Whether the path names the root itself (`.`, `sub/..`, ...).
    pub fn is_root(&self) -> bool {
        self.real == self.root.path
    }

    /// Whether the target existed when it was resolved.
    pub fn exists(&self) -> bool {
        self.exists
    }

    pub fn op(&self) -> Permission {
        self.op
    }
}

/// Resolves `path` on the root named `root` for operation `op`.
pub fn resolve(
    roots: &[Arc<Root>],
    root: &str,
    path: &str,
    op: Permission,
) -> Result<Resolved, Denial> {
    let Some(found) = roots.iter().find(|r| r.name == root) else {
        let known: Vec<&str> = roots.iter().map(|r| r.name.as_str()).collect();
        return Err(Denial::new(
            Rule::UnknownRoot,
            format!(
                "unknown root '{}'; roots: {}",
                shown_arg(root),
                known.join(", ")
            ),
        ));
    };
    if path.contains('\0') || root.contains('\0') {
        return Err(Denial::new(Rule::NulByte, "path contains a NUL byte"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(Denial::new(
            Rule::TooLong,
            format!(
                "path is {} bytes long; at most {MAX_PATH_BYTES} are allowed",
                path.len()
            ),
        ));
    }
    if let Some(name) = path.split('/').find(|n| n.len() > MAX_NAME_BYTES) {
        return Err(Denial::new(
            Rule::TooLong,
            format!(
                "a name in the path is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
                name.len()
            ),
        ));
    }
    if path.starts_with('/') {
        return Err(Denial::new(
            Rule::AbsolutePath,
            "absolute paths are refused; give a path relative to the root",
        ));
    }
    #[cfg(windows)]
    if let Some(why) = super::windows::refusal(path) {
        return Err(Denial::new(Rule::WindowsName, why));
    }
    if path.is_empty() && op != Permission::Read {
        return Err(Denial::new(
            Rule::EmptyPath,
            "empty path: name a file or directory inside the root",
        ));
    }
    if !found.perms.contains(op) {
        return Err(Denial::new(
            Rule::Permission,
            format!(
                "root '{}' (role {}) grants {}, not {op}",
                found.name, found.role, found.perms
            ),
        ));
    }
    let (real, exists) = confine(&found.path, Path::new(path))?;
    let real_rel = real.strip_prefix(&found.path).unwrap_or(Path::new(""));
    if let Some(pattern) = found
        .deny
        .match_path(Path::new(path))
        .or_else(|| found.deny.match_path(real_rel))
    {
        return Err(Denial::new(
            Rule::Deny,
            format!("matches deny pattern '{pattern}'"),
        ));
    }
    if op != Permission::Read && real == found.path {
        return Err(Denial::new(
            Rule::RootItself,
            "the root itself cannot be written, moved or deleted",
        ));
    }
    Ok(Resolved {
        root: Arc::clone(found),
        requested: path.to_string(),
        real,
        exists,
        op,
    })
}

/// The root named `root` itself, for `op` inside it at paths the call's
/// arguments do not name (a patch names its files in its text): only the
/// permission on the root is checked here; every path the tool reaches is
/// checked as it reaches it, by the policing filesystem, with the same
/// rules (confinement, the deny list as requested and as resolved).
pub fn resolve_within(roots: &[Arc<Root>], root: &str, op: Permission) -> Result<Resolved, Denial> {
    let Some(found) = roots.iter().find(|r| r.name == root) else {
        return resolve(roots, root, "", Permission::Read);
    };
    if !found.perms.contains(op) {
        return Err(Denial::new(
            Rule::Permission,
            format!(
                "root '{}' (role {}) grants {}, not {op}",
                found.name, found.role, found.perms
            ),
        ));
    }
    Ok(Resolved {
        root: Arc::clone(found),
        requested: String::new(),
        real: found.path.clone(),
        exists: true,
        op,
    })
}

/// Follows `rel` from `root` one component at a time, symlinks included,
/// and fails as soon as the walk leaves the root. Returns the real path and
/// whether it exists (a missing tail is appended as written).
fn confine(root: &Path, rel: &Path) -> Result<(PathBuf, bool), Denial> {
    let escape = || Denial::new(Rule::Confinement, "path escapes the root");
    let mut pending: VecDeque<OsString> = components(rel).collect();
    let mut cur = root.to_path_buf();
    // How many names at the end of `cur` do not exist: a `..` back out of
    // them lands on a directory that does, and the walk checks again from
    // there (`missing/../link_out` must meet the link).
    let mut missing = 0usize;
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            cur.pop();
            missing = missing.saturating_sub(1);
        } else if missing > 0 {
            cur.push(&part);
            missing += 1;
        } else {
            let next = cur.join(&part);
            match fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(Denial::new(
                            Rule::Confinement,
                            "path cannot be resolved: too many levels of symbolic links",
                        ));
                    }
                    let target = fs::read_link(&next).map_err(|_| escape())?;
                    if target.is_absolute() {
                        // Under the guest, RESOLVE_BENEATH refuses absolute
                        // links whatever they point to; so does this walk.
                        return Err(escape());
                    }
                    for c in components(&target).collect::<Vec<_>>().into_iter().rev() {
                        pending.push_front(c);
                    }
                    continue;
                }
                Ok(_) => cur = next,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    missing = 1;
                    cur = next;
                }
                // Anything else (no search permission, an I/O error) means
                // the walk cannot see what is there, so it cannot vouch for
                // what follows: refused rather than joined as text.
                Err(_) => {
                    return Err(Denial::new(
                        Rule::Confinement,
                        "path cannot be resolved: a directory on the way cannot be searched",
                    ));
                }
            }
        }
        if !cur.starts_with(root) {
            return Err(escape());
        }
    }
    Ok((cur, missing == 0))
}

/// The `..` and normal components of a relative path (`.` dropped).
fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_os_string()),
        Component::ParentDir => Some(OsStr::new("..").to_os_string()),
        _ => None,
    })
}

// Symlinks and descriptors: Unix only.
#[cfg(all(test, unix))]
mod tests;
