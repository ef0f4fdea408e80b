//! The security core: roles and permissions, the deny list, and [`resolve`],
//! the one function that turns a model-supplied path into a location.
//!
//! Everything the model sends is untrusted. A path reaches the filesystem only
//! as a [`Resolved`], which only [`resolve`] can build, so a tool that forgot
//! to check cannot compile. The checks run in a fixed order (permission,
//! confinement, deny) and each refusal names the rule that bit with a
//! root-relative message: no host path ever reaches the model. Every name
//! in a message is shown by one rule ([`shown`], see `names.rs`), so no
//! name can forge a line of what the model reads.

mod deny;
mod lexical;
mod names;
mod narrow;
mod requests;
mod resolve;
mod rule;
// Applied on Windows builds; tested everywhere.
#[cfg_attr(not(windows), allow(dead_code))]
mod windows;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub use deny::{BUILTIN_DENY, DenyError, DenyList};
pub use lexical::normalise_lexically;
pub use names::{
    QUOTED_NOTE, is_escaped, is_quoted, neutralised, push_unicode_escape, shown, shown_arg,
    shown_clipped, with_quoted_note,
};
pub use narrow::Narrowing;
pub use requests::{LIST, MAX_LIST_PATHS, PathArg, PathRequest, path_requests};
pub use resolve::{Denial, MAX_NAME_BYTES, MAX_PATH_BYTES, Resolved, resolve, resolve_within};
pub use rule::Rule;

/// What may be done on a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Read,
    Write,
    Delete,
}

impl Permission {
    pub const ALL: [Permission; 3] = [Permission::Read, Permission::Write, Permission::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A set of permissions (at most three, so a bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Perms(u8);

impl Perms {
    pub const NONE: Perms = Perms(0);

    pub fn of(perms: &[Permission]) -> Perms {
        perms.iter().fold(Perms::NONE, |acc, &p| acc.with(p))
    }

    fn bit(p: Permission) -> u8 {
        1 << (p as u8)
    }

    pub fn with(self, p: Permission) -> Perms {
        Perms(self.0 | Perms::bit(p))
    }

    pub fn contains(self, p: Permission) -> bool {
        self.0 & Perms::bit(p) != 0
    }

    /// `op` and every weaker permission: what doing `op` may involve
    /// (a delete may read and write too).
    pub fn up_to(op: Permission) -> Perms {
        Perms::of(
            &Permission::ALL
                .into_iter()
                .filter(|p| *p <= op)
                .collect::<Vec<_>>(),
        )
    }

    pub fn intersect(self, other: Perms) -> Perms {
        Perms(self.0 & other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |&p| self.contains(p))
    }
}

impl fmt::Display for Perms {
    /// `[read, write]`, the form used in messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Permission::as_str).collect();
        f.pad(&format!("[{}]", names.join(", ")))
    }
}

/// A role caps what a root may grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read only: documentation, other projects.
    Reference,
    /// Read and write, never delete: the code being worked on.
    Sourcecode,
    /// Read, write and delete: a scratch area.
    Workspace,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Reference, Role::Sourcecode, Role::Workspace];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reference => "reference",
            Role::Sourcecode => "sourcecode",
            Role::Workspace => "workspace",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The most a root of this role may grant.
    pub fn ceiling(self) -> Perms {
        use Permission::*;
        match self {
            Role::Reference => Perms::of(&[Read]),
            Role::Sourcecode => Perms::of(&[Read, Write]),
            Role::Workspace => Perms::of(&[Read, Write, Delete]),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A declared root, validated: its real path, role and effective permissions.
/// (Cloned only to cap its permissions for one third-party tool.)
#[derive(Clone, Debug)]
pub struct Root {
    pub name: String,
    /// The root's real path (symlinks resolved once, at load).
    pub path: PathBuf,
    pub role: Role,
    /// Role ∩ `permissions` ∩ (read only if the server is read-only).
    pub perms: Perms,
    /// Built-in, config-wide and this root's own patterns.
    pub deny: DenyList,
    /// The root's own extra deny patterns, as written (for `check`).
    pub extra_deny: Vec<String>,
    pub max_read_bytes: u64,
    /// Largest document `read_document` takes whole (it reads a document
    /// whole, not by ranges as `read_file` does).
    pub max_document_bytes: u64,
    /// Free space kept on the root's disk: a change that would leave less
    /// is refused (`min_free_bytes`; 0 keeps none).
    pub min_free_bytes: u64,
    /// Bytes its trash may hold: a change that would keep more is refused
    /// (`trash_max_bytes`; 0 sets no budget).
    pub trash_max_bytes: u64,
    /// The git repository whose history the root offers, if it offers any
    /// (see [`Repository`]).
    pub repository: Option<Arc<Repository>>,
}

/// Names hidden in a repository's git directory besides the built-in deny
/// list: what git would run (`hooks`).
pub const GIT_DIR_DENY: &[&str] = &["hooks"];

/// The git repository a root offers history of, found when the config is
/// loaded: the root is its top (it has a `.git` directory of its own), or
/// lies below its top and says `git_history = true`.
#[derive(Clone, Debug)]
pub struct Repository {
    /// The root's path below the repository's top, `/`-separated; empty
    /// when the root is the top. Every history result is limited to it.
    pub scope: String,
    /// The repository's git directory as the history tools alone see it:
    /// a read-only root of its own (named as the root, for the audit),
    /// denying the built-in names and [`GIT_DIR_DENY`]. No other tool is
    /// ever given it; in the root itself `.git` stays denied.
    pub git: Arc<Root>,
}

// Its tests build on symlinks and descriptors: Unix only.
#[cfg(all(test, unix))]
impl Root {
    /// A workspace root `name` at `path`, for unit tests: the built-in deny
    /// list, a 1 MiB read cap.
    pub(crate) fn workspace_for_tests(name: &str, path: &std::path::Path) -> Root {
        Root {
            name: name.into(),
            path: path.to_path_buf(),
            role: Role::Workspace,
            perms: Role::Workspace.ceiling(),
            deny: DenyList::new([]).expect("the built-in deny list compiles"),
            extra_deny: vec![],
            max_read_bytes: 1 << 20,
            max_document_bytes: 64 << 20,
            min_free_bytes: 0,
            trash_max_bytes: 0,
            repository: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn up_to_an_operation_is_it_and_every_weaker_one() {
        use super::{Permission::*, Perms};
        assert_eq!(Perms::up_to(Read), Perms::of(&[Read]));
        assert_eq!(Perms::up_to(Write), Perms::of(&[Read, Write]));
        assert_eq!(Perms::up_to(Delete), Perms::of(&[Read, Write, Delete]));
    }

    use super::*;

    #[test]
    fn roles_are_ceilings() {
        assert_eq!(Role::Reference.ceiling().to_string(), "[read]");
        assert_eq!(Role::Sourcecode.ceiling().to_string(), "[read, write]");
        assert_eq!(
            Role::Workspace.ceiling().to_string(),
            "[read, write, delete]"
        );
    }

    #[test]
    fn perms_set_operations() {
        let rw = Perms::of(&[Permission::Read, Permission::Write]);
        assert!(rw.contains(Permission::Write));
        assert!(!rw.contains(Permission::Delete));
        assert_eq!(
            rw.intersect(Role::Reference.ceiling()).to_string(),
            "[read]"
        );
        assert!(Perms::NONE.is_empty());
        assert_eq!(Perms::NONE.to_string(), "[]");
    }

    #[test]
    fn names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("admin"), None);
        assert_eq!(Permission::parse("Read"), None);
    }
}
