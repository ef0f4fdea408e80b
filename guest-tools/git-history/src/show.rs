//! `git show`: a commit with its message and diff, or a file's content at a
//! revision.

use crate::diff::{self, Change, tree_changes};
use crate::log::subject;
use crate::{Error, History, View, under};
use loomfs_names::shown;

/// One changed file of a commit.
#[derive(Debug)]
pub struct FileDiff {
    pub change: Change,
    /// The unified diff's hunks; none for binary content.
    pub hunks: Option<String>,
}

/// A commit as `git show` gives it.
#[derive(Debug)]
pub struct CommitShow {
    pub id: String,
    pub parents: Vec<String>,
    pub author_name: String,
    pub author_email: String,
    pub author_time: i64,
    pub author_offset: i32,
    pub subject: String,
    /// The whole message.
    pub message: String,
    /// Changed files against the first parent (the empty tree for a root
    /// commit), limited to `path`.
    pub files: Vec<FileDiff>,
    /// How many changed files the view hides there.
    pub hidden: usize,
}

/// The commit `rev` names, with the diff of what it changed at or under the
/// root-relative `path` (empty: everywhere under the root). A merge is
/// diffed against its first parent.
pub fn show_commit(
    history: &History,
    rev: &str,
    path: &str,
    view: &View<'_>,
) -> Result<CommitShow, Error> {
    let commit = history.commit(rev)?;
    let damaged =
        |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read a commit: {e}"));
    let decoded = commit.decode().map_err(|e| damaged(&e))?;
    let author = decoded.author().map_err(|e| damaged(&e))?;
    let parents: Vec<gix::ObjectId> = decoded.parents().collect();
    let old = match parents.first() {
        Some(parent) => Some(
            history
                .repo()
                .find_commit(*parent)
                .map_err(|e| damaged(&e))?
                .tree_id()
                .map_err(|e| damaged(&e))?
                .detach(),
        ),
        None => None,
    };
    let (changes, hidden) = tree_changes(history, old, decoded.tree(), view)?;
    let mut files = Vec::new();
    for change in changes.into_iter().filter(|c| under(&c.path, path)) {
        let before = diff::blob(history, change.old, change.old_is_blob)?;
        let after = diff::blob(history, change.new, change.new_is_blob)?;
        let hunks = (!diff::is_binary(&before) && !diff::is_binary(&after))
            .then(|| diff::unified(&before, &after));
        files.push(FileDiff { change, hunks });
    }
    let time = author.time().unwrap_or_default();
    Ok(CommitShow {
        id: commit.id.to_string(),
        parents: parents.iter().map(ToString::to_string).collect(),
        author_name: author.name.to_string(),
        author_email: author.email.to_string(),
        author_time: time.seconds,
        author_offset: time.offset,
        subject: subject(decoded.message),
        message: String::from_utf8_lossy(decoded.message).into_owned(),
        files,
        hidden: hidden.iter().filter(|h| under(h, path)).count(),
    })
}

/// The bytes of the file at the root-relative `path` in revision `rev`. A
/// path the view hides, or one outside the root, fails exactly as a missing
/// one.
pub fn show_file(
    history: &History,
    rev: &str,
    path: &str,
    view: &View<'_>,
) -> Result<Vec<u8>, Error> {
    let commit = history.commit(rev)?;
    let rel = path.trim_matches('/');
    let missing = || Error::NotFound(format!("{}: no such file at {}", shown(rel), shown(rev)));
    if rel.is_empty()
        || rel == "."
        || rel
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(missing());
    }
    if view.is_hidden(rel) {
        return Err(missing());
    }
    let tree = commit
        .tree()
        .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))?;
    let entry = tree
        .lookup_entry_by_path(view.in_repo(rel))
        .map_err(|e| Error::Repository(format!("cannot read a tree: {e}")))?
        .ok_or_else(missing)?;
    if entry.mode().is_tree() {
        return Err(Error::NotFound(format!(
            "{}: a directory at {}, not a file",
            shown(rel),
            shown(rev)
        )));
    }
    if !entry.mode().is_blob_or_symlink() {
        return Err(Error::NotFound(format!(
            "{}: a submodule at {}, not a file",
            shown(rel),
            shown(rev)
        )));
    }
    let object = entry
        .object()
        .map_err(|e| Error::Repository(format!("cannot read a file's content: {e}")))?;
    Ok(object.detach().data)
}

/// The changes from revision `from` to revision `to` at or under the
/// root-relative `path`: the visible files with their hunks, and how many
/// changed files the view hides there (`git diff --no-renames FROM TO`).
pub fn diff_revisions(
    history: &History,
    from: &str,
    to: &str,
    path: &str,
    view: &View<'_>,
) -> Result<(Vec<FileDiff>, usize), Error> {
    let tree = |rev: &str| -> Result<gix::ObjectId, Error> {
        history
            .commit(rev)?
            .tree_id()
            .map(|id| id.detach())
            .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))
    };
    let (changes, hidden) = tree_changes(history, Some(tree(from)?), tree(to)?, view)?;
    let mut files = Vec::new();
    for change in changes.into_iter().filter(|c| under(&c.path, path)) {
        files.push(file_diff(history, change)?);
    }
    Ok((files, hidden.iter().filter(|h| under(h, path)).count()))
}

fn file_diff(history: &History, change: Change) -> Result<FileDiff, Error> {
    let before = diff::blob(history, change.old, change.old_is_blob)?;
    let after = diff::blob(history, change.new, change.new_is_blob)?;
    let hunks = (!diff::is_binary(&before) && !diff::is_binary(&after))
        .then(|| diff::unified(&before, &after));
    Ok(FileDiff { change, hunks })
}
