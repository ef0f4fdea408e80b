//! `git status`: the index against `HEAD` (staged), the working tree
//! against the index (modified), and files in neither (untracked), under
//! the view. Working-tree files are compared by content (their blob id),
//! never through a filter or an fsmonitor; a file mode's executable bit is
//! not compared (WASI does not show it).

use crate::diff::ChangeKind;
use crate::{Error, History, View};
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
    let damaged =
        |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read the index: {e}"));
    // Read and decoded here, not by `open_index`: its reader asks the
    // file's time of `filetime`, which panics under WASI.
    let index = match std::fs::read(repo.index_path()) {
        Ok(data) => Some(
            gix::index::State::from_bytes(
                &data,
                filetime::FileTime::zero(),
                repo.object_hash(),
                Default::default(),
            )
            .map_err(|e| damaged(&e))?
            .0,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(damaged(&e)),
    };
    let mut hidden = BTreeSet::new();
    // path → (blob, mode bits) in the index (stage 0) and in HEAD's tree.
    let mut staged_files: BTreeMap<String, (ObjectId, u32)> = BTreeMap::new();
    if let Some(index) = &index {
        for entry in index.entries() {
            let path = entry.path(index);
            if let Some(rel) = visible(view, path, &mut hidden) {
                staged_files.insert(rel, (entry.id, entry.mode.bits()));
            }
        }
    }
    let mut head_files: BTreeMap<String, (ObjectId, u32)> = BTreeMap::new();
    if let Ok(commit) = repo.head_commit() {
        let tree = commit
            .tree()
            .map_err(|e| Error::Repository(format!("cannot read HEAD: {e}")))?;
        let files = tree
            .traverse()
            .breadthfirst
            .files()
            .map_err(|e| Error::Repository(format!("cannot read HEAD: {e}")))?;
        for file in files {
            if file.mode.is_tree() {
                continue;
            }
            if let Some(rel) = visible(view, file.filepath.as_ref(), &mut hidden) {
                head_files.insert(rel, (file.oid, u32::from(file.mode.value())));
            }
        }
    }
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
        let full = root.join(path);
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                status.modified.push((path.clone(), ChangeKind::Deleted));
                continue;
            }
            Err(_) => {
                // Unreadable (the host refused it, or a directory now
                // stands there): shown as changed, never read.
                status.modified.push((path.clone(), ChangeKind::Modified));
                continue;
            }
        };
        let is_link = mode & 0o170000 == 0o120000;
        let content = if is_link && meta.file_type().is_symlink() {
            std::fs::read_link(&full).map(|t| t.to_string_lossy().into_owned().into_bytes())
        } else if !is_link && meta.is_file() {
            std::fs::read(&full)
        } else if mode & 0o170000 == 0o160000 {
            // A submodule: its checkout is not looked into.
            continue;
        } else {
            status.modified.push((path.clone(), ChangeKind::Modified));
            continue;
        };
        let same = content
            .ok()
            .and_then(|data| gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &data).ok())
            .is_some_and(|found| found == *id);
        if !same {
            status.modified.push((path.clone(), ChangeKind::Modified));
        }
    }
    status.untracked = untracked(root, view, &staged_files, history)?;
    status.hidden = hidden.len();
    Ok(status)
}

/// The root-relative path of a repository path the view shows; a hidden
/// one is noted (by its path, so the same file in the index and in HEAD
/// counts once).
fn visible(
    view: &View<'_>,
    path: &gix::bstr::BStr,
    hidden: &mut BTreeSet<String>,
) -> Option<String> {
    let lossy = String::from_utf8_lossy(path);
    let rel = view.relative(&lossy)?;
    if std::str::from_utf8(path).is_err() || view.is_hidden(rel) {
        hidden.insert(rel.to_string());
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
