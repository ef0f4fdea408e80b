//! The five commands of `git`: their arguments, results and calls, one
//! module each; here what they share (opening a root's repository, path
//! arguments, changed files, errors).

mod blame;
mod diff;
mod log;
mod show;
mod status;

use std::path::Path;

use git_history::{ChangeKind, Error, History, View};
use loomfs_guest::tool::About;
use loomfs_guest::{Context, Mount, PathArgument, Permission, ToolError, shown};
use schemars::JsonSchema;
use serde::Serialize;

pub(crate) use blame::{BlameArgs, BlameResult, git_blame};
pub(crate) use diff::{DiffArgs, DiffResult, git_diff};
pub(crate) use log::{LogArgs, LogResult, git_log};
pub(crate) use show::{ShowArgs, ShowResult, git_show};
pub(crate) use status::{StatusArgs, StatusResult, git_status};

use crate::format::change_name;
use crate::history;

/// The path argument of every history tool: the root alone. Their paths
/// name files in the repository's history, which the deny list judges
/// (through the host's `hidden`), not places on disk.
pub(crate) fn root_only(about: About) -> About {
    about.paths(vec![PathArgument {
        root_field: "root".into(),
        root_fallback: None,
        path_field: String::new(),
        permission: Permission::Read,
        across_roots: None,
        optional: true,
    }])
}

/// A path argument of a history tool, relative to the root as every tool's
/// paths are, with `.` dropped and `..` taken back. An absolute path, or one
/// that climbs above the root, is refused naming the rule (as `resolve()`
/// refuses them for the other tools) rather than matching nothing.
fn relative(path: &str) -> Result<String, ToolError> {
    // Not echoed: an absolute path is the client's view of the host.
    if path.starts_with('/') {
        return Err(ToolError::Refused(
            "absolute paths are refused; give a path relative to the root (rule absolute_path)"
                .into(),
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ToolError::Refused(format!(
                        "'{}' climbs above the root (rule confinement)",
                        shown(path)
                    )));
                }
            }
            name => parts.push(name),
        }
    }
    Ok(parts.join("/"))
}

/// A root's repository, opened for one call.
struct Repo<'c> {
    history: History,
    scope: String,
    root: String,
    mount: &'c Mount,
}

impl<'c> Repo<'c> {
    fn open(ctx: &'c Context, root: &str) -> Result<Repo<'c>, ToolError> {
        let mount = ctx.mounts.iter().find(|m| m.name == root).ok_or_else(|| {
            ToolError::InvalidArguments(format!("unknown root '{}'", shown(root)))
        })?;
        let repository = history::repository(root).ok_or_else(|| {
            ToolError::Refused(format!(
                "root '{}' offers no git history (rule git_history)",
                shown(root)
            ))
        })?;
        let history = History::open(Path::new(&repository.git_dir)).map_err(error)?;
        Ok(Repo {
            history,
            scope: repository.scope,
            root: root.to_string(),
            mount,
        })
    }

    /// Runs `f` with the view of this root: its scope, its deny list.
    fn with_view<R>(&self, f: impl FnOnce(&View<'_>) -> R) -> R {
        let root = self.root.clone();
        let hidden = move |path: &str| history::hidden(&root, path);
        let view = View::new(&self.scope, &hidden);
        f(&view)
    }
}

fn error(e: Error) -> ToolError {
    match e {
        Error::BadRevision(m) => ToolError::InvalidArguments(m),
        Error::NotFound(m) => ToolError::NotFound(m),
        Error::Refused(m) => ToolError::Refused(m),
        Error::Repository(m) => ToolError::Io(m),
    }
}

/// A file a commit or diff changed.
#[derive(Serialize, JsonSchema)]
pub struct FileChange {
    /// Path relative to the root.
    path: String,
    /// `added`, `modified` or `deleted`.
    change: &'static str,
    /// Lines added (absent for a binary file or where not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<u32>,
    /// Lines removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<u32>,
}

fn file_change(path: &str, kind: ChangeKind, counts: Option<(u32, u32)>) -> FileChange {
    FileChange {
        path: path.to_string(),
        change: change_name(kind),
        added: counts.map(|c| c.0),
        removed: counts.map(|c| c.1),
    }
}

/// The line saying how many changes the deny list hides.
fn hidden_line(hidden: usize) -> Option<String> {
    match hidden {
        0 => None,
        1 => Some("(1 change hidden by the deny list)".into()),
        n => Some(format!("({n} changes hidden by the deny list)")),
    }
}

/// The note of a diff cut at the root's read limit (`show` and `diff`).
fn cut_note(shown_files: usize, files: usize, max: u64) -> String {
    format!(
        "Truncated: the diff of {shown_files} of {files} files is shown, cut at the root's \
         max_read_bytes ({max} bytes); ask again with path for the others."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_path_is_relative_and_stays_in_the_root() {
        for (path, want) in [
            ("", ""),
            (".", ""),
            ("src", "src"),
            ("./src/", "src"),
            ("a//b/./c", "a/b/c"),
            ("a/../b", "b"),
            ("a/b/..", "a"),
        ] {
            assert_eq!(relative(path).unwrap(), want, "{path}");
        }
        for (path, rule) in [
            ("/", "absolute_path"),
            ("/etc/passwd", "absolute_path"),
            ("..", "confinement"),
            ("a/../..", "confinement"),
            ("../x", "confinement"),
        ] {
            match relative(path) {
                Err(ToolError::Refused(m)) => {
                    assert!(m.contains(&format!("(rule {rule})")), "{path}: {m}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
