//! What is found rather than written: directories given on the command
//! line made roots, the git repository a root offers history of, and
//! paths made absolute (`~/`, the config's directory) and real.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::parse::RawRoot;
use crate::policy::{DenyList, GIT_DIR_DENY, Repository, Role, Root, normalise_lexically};

/// A directory named on the command line, and the role its flag gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirArg {
    pub path: PathBuf,
    pub role: Role,
}

/// The `[[roots]]` tables the directories on the command line stand for,
/// named apart from the config's own (`taken`, see [`dir_roots`]). A
/// directory whose path is not UTF-8, or that is `/` without
/// `allow_filesystem_root`, is a problem instead.
pub(super) fn dir_raw_roots(
    dirs: &[DirArg],
    taken: &[String],
    allow_filesystem_root: bool,
    problems: &mut Vec<String>,
) -> Vec<RawRoot> {
    let mut roots = Vec::new();
    for (name, dir) in dir_roots(dirs, taken) {
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
        roots.push(RawRoot::of_directory(name, text.to_string(), dir.role));
    }
    roots
}

/// The root name of each directory given on the command line: its last
/// component (`~/src/app` is `app`, see [`name_of_dir`]), made distinct
/// from the `taken` names and from each other by a suffix: two
/// directories called `app` are `app` and `app-2`. Each path is made
/// absolute ([`dir_path`]).
fn dir_roots(dirs: &[DirArg], taken: &[String]) -> Vec<(String, DirArg)> {
    let mut names: Vec<String> = taken.to_vec();
    let mut roots = Vec::new();
    for dir in dirs {
        let path = dir_path(&dir.path);
        let base = name_of_dir(&path);
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

/// A directory argument as an absolute path, `.` and `..` taken out by
/// spelling (a root's real path is resolved later; this only names it).
/// A `~/` at the start, or `~` alone, is the home directory (clients start
/// servers without a shell).
fn dir_path(given: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = match (given.to_str(), home) {
        (Some("~"), Some(home)) => home,
        (Some(text), _) => absolute(&cwd(), text),
        (None, _) => cwd().join(given),
    };
    normalise_lexically(&path).unwrap_or(path)
}

/// The name a directory at `path` gets before it is made distinct: its
/// last component made a valid name (a space or a character a name cannot
/// hold becomes `-`, leading dots go, at most 56 characters), `root` if
/// nothing is left.
fn name_of_dir(path: &Path) -> String {
    let last = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = last
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
    if name.is_empty() { "root".into() } else { name }
}

/// The current directory, `.` if it cannot be known.
fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// `~/` expands to the home directory; a relative path is relative to `base`.
pub(super) fn absolute(base: &Path, path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(path)
}

/// The real path of a root directory, resolved once at load.
pub(super) fn real_dir(base: &Path, path: &str) -> Result<PathBuf, &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    let real = fs::canonicalize(absolute(base, path)).map_err(|_| "does not exist")?;
    if !real.is_dir() {
        return Err("is not a directory");
    }
    Ok(real)
}

/// The repository whose history root `name` at `path` (a real directory)
/// offers, as [`Repository`] says: the nearest `.git` directory at or
/// above it, offered by default when it is the root's own and only with
/// `git_history = true` when it lies above. A `.git` that is a file or a
/// symlink (a linked worktree, a submodule) is not followed: the root
/// offers no history. `git_history = true` with no repository is a problem.
pub(super) fn repository(
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
            max_document_bytes: 0,
            min_free_bytes: 0,
            trash_max_bytes: 0,
            repository: None,
        }),
    }))
}
