//! `git status`: the index against `HEAD` (staged), the working tree
//! against the index (modified), and files in neither (untracked), under
//! the view. Working-tree files are compared by content (their blob id),
//! never through a filter or an fsmonitor; a file mode's executable bit is
//! not compared (WASI does not show it).

use crate::diff::{self, Change, ChangeKind};
use crate::show::FileDiff;
use crate::{Error, History, View, under};
use gix::ObjectId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What `git status --porcelain --untracked-files=all --no-renames` says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// The index against `HEAD`: root-relative path and how it changed.
    pub staged: Vec<(String, ChangeKind)>,
    /// The working tree against the index (`Modified` or `Deleted`).
    pub modified: Vec<(String, ChangeKind)>,
    /// Files neither in the index nor excluded by the ignore files.
    pub untracked: Vec<String>,
    /// How many paths the view hides among those.
    pub hidden: usize,
}

/// The status of the root's working tree, `root` (the root's directory:
/// the working tree's part under the view's scope). Ignore files are read
/// from the root down (`.gitignore` files and, for a root at the
/// repository's top, `.git/info/exclude`).
pub fn status(history: &History, root: &Path, view: &View<'_>) -> Result<Status, Error> {
    let repo = history.repo();
    let (mut hidden_staged, mut hidden_head) = (Files::new(), Files::new());
    let staged_files = index_files(history, view, &mut hidden_staged)?;
    let head_files = match repo.head_commit() {
        Ok(commit) => tree_files(&commit, view, &mut hidden_head)?,
        Err(_) => BTreeMap::new(),
    };
    let mut status = Status::default();
    for (path, (id, mode)) in &staged_files {
        match head_files.get(path) {
            None => status.staged.push((path.clone(), ChangeKind::Added)),
            Some((head_id, head_mode)) if head_id != id || head_mode != mode => {
                status.staged.push((path.clone(), ChangeKind::Modified))
            }
            Some(_) => {}
        }
    }
    for path in head_files.keys() {
        if !staged_files.contains_key(path) {
            status.staged.push((path.clone(), ChangeKind::Deleted));
        }
    }
    status.staged.sort_by(|a, b| a.0.cmp(&b.0));
    let hash = repo.object_hash();
    for (path, (id, mode)) in &staged_files {
        match worktree(root, path, *mode) {
            Worktree::Missing => status.modified.push((path.clone(), ChangeKind::Deleted)),
            Worktree::Submodule => {}
            Worktree::Unreadable => status.modified.push((path.clone(), ChangeKind::Modified)),
            Worktree::Content(data) => {
                let found = gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &data).ok();
                if found != Some(*id) {
                    status.modified.push((path.clone(), ChangeKind::Modified));
                }
            }
        }
    }
    status.untracked = untracked(root, view, &staged_files, history)?;
    // Only what changed between HEAD and the index: a hidden file's
    // working-tree copy is never read, and an unchanged one is not counted
    // (the count would tell how many hidden files there are).
    status.hidden = changed(&hidden_head, &hidden_staged).count();
    Ok(status)
}

/// Files by root-relative path: (blob, mode bits).
pub(crate) type Files = BTreeMap<String, (ObjectId, u32)>;

/// The paths whose entry differs between `a` and `b` (added, removed or
/// changed).
fn changed<'a>(a: &'a Files, b: &'a Files) -> impl Iterator<Item = &'a String> {
    let gone = a
        .iter()
        .filter(|(p, e)| b.get(*p) != Some(e))
        .map(|(p, _)| p);
    let new = b.keys().filter(|p| !a.contains_key(*p));
    gone.chain(new)
}

/// The root-relative path of a repository path the view shows; a hidden
/// one is noted in `hidden` with its entry, to count the hidden changes.
fn visible(
    view: &View<'_>,
    path: &gix::bstr::BStr,
    entry: (ObjectId, u32),
    hidden: &mut Files,
) -> Option<String> {
    let lossy = String::from_utf8_lossy(path);
    let rel = view.relative(&lossy)?;
    if std::str::from_utf8(path).is_err() || view.is_hidden(rel) {
        hidden.insert(rel.to_string(), entry);
        return None;
    }
    Some(rel.to_string())
}

fn untracked(
    root: &Path,
    view: &View<'_>,
    tracked: &BTreeMap<String, (ObjectId, u32)>,
    history: &History,
) -> Result<Vec<String>, Error> {
    let mut walk = ignore::WalkBuilder::new(root);
    walk.standard_filters(false)
        .git_ignore(true)
        .require_git(false)
        .parents(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git");
    if !view.has_scope() {
        walk.add_ignore(history.repo().git_dir().join("info").join("exclude"));
    }
    let mut found = Vec::new();
    for entry in walk.build() {
        let Ok(entry) = entry else {
            continue;
        };
        if entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else {
            continue;
        };
        if tracked.contains_key(rel) || view.is_hidden(rel) {
            continue;
        }
        found.push(rel.to_string());
    }
    found.sort();
    Ok(found)
}

/// The index's files (stage 0 and conflicts alike) under the view: path →
/// (blob, mode bits). Read and decoded here, not by `open_index`: its
/// reader asks `filetime` for the file's time, which panics under WASI.
pub(crate) fn index_files(
    history: &History,
    view: &View<'_>,
    hidden: &mut Files,
) -> Result<Files, Error> {
    let repo = history.repo();
    let damaged =
        |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read the index: {e}"));
    let index = match std::fs::read(repo.index_path()) {
        Ok(data) => {
            gix::index::State::from_bytes(
                &data,
                filetime::FileTime::zero(),
                repo.object_hash(),
                Default::default(),
            )
            .map_err(|e| damaged(&e))?
            .0
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(damaged(&e)),
    };
    let mut files = BTreeMap::new();
    for entry in index.entries() {
        let id = (entry.id, entry.mode.bits());
        if let Some(rel) = visible(view, entry.path(&index), id, hidden) {
            files.insert(rel, id);
        }
    }
    Ok(files)
}

/// A commit's files under the view: path → (blob, mode bits).
pub(crate) fn tree_files(
    commit: &gix::Commit<'_>,
    view: &View<'_>,
    hidden: &mut Files,
) -> Result<Files, Error> {
    let damaged = |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read a tree: {e}"));
    let tree = commit.tree().map_err(|e| damaged(&e))?;
    let entries = tree
        .traverse()
        .breadthfirst
        .files()
        .map_err(|e| damaged(&e))?;
    let mut files = BTreeMap::new();
    for file in entries {
        if file.mode.is_tree() {
            continue;
        }
        let id = (file.oid, u32::from(file.mode.value()));
        if let Some(rel) = visible(view, file.filepath.as_ref(), id, hidden) {
            files.insert(rel, id);
        }
    }
    Ok(files)
}

/// What the working tree holds at a tracked path.
pub(crate) enum Worktree {
    Missing,
    /// A submodule's checkout: not looked into.
    Submodule,
    /// The host refused it, or something else than the index's kind of
    /// entry stands there: changed, never read.
    Unreadable,
    /// A file's bytes, or a symlink's target.
    Content(Vec<u8>),
}

pub(crate) fn worktree(root: &Path, path: &str, mode: u32) -> Worktree {
    let full = root.join(path);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Worktree::Missing,
        Err(_) => return Worktree::Unreadable,
    };
    let read = match mode & 0o170000 {
        0o160000 => return Worktree::Submodule,
        0o120000 if meta.file_type().is_symlink() => {
            std::fs::read_link(&full).map(|t| t.to_string_lossy().into_owned().into_bytes())
        }
        0o100000 if meta.is_file() => std::fs::read(&full),
        _ => return Worktree::Unreadable,
    };
    match read {
        Ok(data) => Worktree::Content(data),
        Err(_) => Worktree::Unreadable,
    }
}

/// The changes from revision `from` to the working tree (`root`, the
/// root's directory) at or under the root-relative `path`, as `git diff
/// --no-renames FROM -- PATH`: tracked files (those in the index) by their
/// working-tree content, a file of `from` no longer tracked as deleted;
/// untracked files are not listed. Also how many changed files the view
/// hides there.
pub fn diff_worktree(
    history: &History,
    from: &str,
    root: &Path,
    path: &str,
    view: &View<'_>,
) -> Result<(Vec<FileDiff>, usize), Error> {
    let commit = history.commit(from)?;
    let (mut hidden_old, mut hidden_tracked) = (Files::new(), Files::new());
    let old = tree_files(&commit, view, &mut hidden_old)?;
    let tracked = index_files(history, view, &mut hidden_tracked)?;
    let hash = history.repo().object_hash();
    let mut files = Vec::new();
    let paths: BTreeSet<&String> = old.keys().chain(tracked.keys()).collect();
    for rel in paths.into_iter().filter(|p| under(p, path)) {
        let before = old.get(rel);
        let now = match tracked.get(rel) {
            Some((_, mode)) => match worktree(root, rel, *mode) {
                Worktree::Content(data) => Some((data, *mode)),
                Worktree::Missing => None,
                Worktree::Submodule => continue,
                // Unreadable: left out rather than shown as something
                // it may not be.
                Worktree::Unreadable => continue,
            },
            None => None,
        };
        let (kind, old_id, new_id, new_data) = match (before, now) {
            (None, None) => continue,
            (None, Some((data, _))) => (ChangeKind::Added, None, Some(blob_id(hash, &data)?), data),
            (Some((id, _)), None) => (ChangeKind::Deleted, Some(*id), None, Vec::new()),
            (Some((id, old_mode)), Some((data, mode))) => {
                let new_id = blob_id(hash, &data)?;
                if new_id == *id && *old_mode == mode {
                    continue;
                }
                (ChangeKind::Modified, Some(*id), Some(new_id), data)
            }
        };
        let old_is_blob = before.is_some_and(|(_, mode)| mode & 0o170000 != 0o160000);
        let before_data = diff::blob(history, old_id, old_is_blob)?;
        let hunks = (!diff::is_binary(&before_data) && !diff::is_binary(&new_data))
            .then(|| diff::unified(&before_data, &new_data));
        files.push(FileDiff {
            change: Change {
                path: rel.clone(),
                kind,
                old: old_id,
                new: new_id,
                old_is_blob,
                new_is_blob: new_id.is_some(),
            },
            hunks,
        });
    }
    // A hidden file's working-tree copy is never read: what is counted is
    // how it changed from `from` to the index.
    let hidden = changed(&hidden_old, &hidden_tracked)
        .filter(|h| under(h, path))
        .count();
    Ok((files, hidden))
}

fn blob_id(hash: gix::hash::Kind, data: &[u8]) -> Result<ObjectId, Error> {
    gix::objs::compute_hash(hash, gix::objs::Kind::Blob, data)
        .map_err(|e| Error::Repository(format!("cannot hash a file: {e}")))
}
