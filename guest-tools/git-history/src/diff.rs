//! Changes between two trees, seen through a [`View`], and line diffs of
//! blobs rendered as git's unified format.

use crate::{Error, History, View};
use gix::ObjectId;
use gix::diff::tree::recorder;
use imara_diff::{Algorithm, Diff, InternedInput};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
}

impl ChangeKind {
    /// git's `--name-status` letter.
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Deleted => 'D',
            ChangeKind::Modified => 'M',
        }
    }
}

/// A file that differs between two trees (directories are not changes).
#[derive(Clone, Debug)]
pub struct Change {
    /// Root-relative path.
    pub path: String,
    pub kind: ChangeKind,
    /// The blob before (none when added) and after (none when deleted).
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
    /// Whether each side is a blob (a file or symlink) rather than a
    /// submodule's commit.
    pub old_is_blob: bool,
    pub new_is_blob: bool,
}

/// The visible changes from `old` (none: the empty tree) to `new` under the
/// view, in path order, and the root-relative paths of the changed files it
/// hides (never to be shown: to count, and to match against a path filter).
pub(crate) fn tree_changes(
    history: &History,
    old: Option<ObjectId>,
    new: ObjectId,
    view: &View<'_>,
) -> Result<(Vec<Change>, Vec<String>), Error> {
    let repo = history.repo();
    let damaged = |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read a tree: {e}"));
    // On a root below the repository's top, only the root's own tree is
    // compared (its paths are then root-relative already): a commit that
    // changed nothing there costs two lookups.
    let (old, new) = if view.has_scope() {
        let old = match old {
            Some(id) => subtree(history, id, view.scope())?,
            None => None,
        };
        (old, subtree(history, new, view.scope())?)
    } else {
        (old, Some(new))
    };
    if old == new {
        return Ok((Vec::new(), Vec::new()));
    }
    let data = |id: Option<ObjectId>| -> Result<Vec<u8>, Error> {
        match id {
            Some(id) => Ok(repo.find_object(id).map_err(|e| damaged(&e))?.detach().data),
            None => Ok(Vec::new()),
        }
    };
    let old_data = data(old)?;
    let new_data = data(new)?;
    let mut recorder = gix::diff::tree::Recorder::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&old_data, repo.object_hash()),
        gix::objs::TreeRefIter::from_bytes(&new_data, repo.object_hash()),
        gix::diff::tree::State::default(),
        &repo.objects,
        &mut recorder,
    )
    .map_err(|e| damaged(&e))?;
    let mut changes = Vec::new();
    let mut hidden = Vec::new();
    for record in recorder.records {
        let (path, kind, old, new, old_mode, new_mode) = match record {
            recorder::Change::Addition {
                entry_mode,
                oid,
                path,
                ..
            } => (
                path,
                ChangeKind::Added,
                None,
                Some(oid),
                None,
                Some(entry_mode),
            ),
            recorder::Change::Deletion {
                entry_mode,
                oid,
                path,
                ..
            } => (
                path,
                ChangeKind::Deleted,
                Some(oid),
                None,
                Some(entry_mode),
                None,
            ),
            recorder::Change::Modification {
                previous_entry_mode,
                previous_oid,
                entry_mode,
                oid,
                path,
            } => (
                path,
                ChangeKind::Modified,
                Some(previous_oid),
                Some(oid),
                Some(previous_entry_mode),
                Some(entry_mode),
            ),
        };
        let is_tree = |mode: Option<gix::objs::tree::EntryMode>| mode.is_some_and(|m| m.is_tree());
        // A directory is not a change (its files are, each on its own); a
        // file that became a directory, or the reverse, is the file's
        // deletion or addition.
        let (kind, old, new, old_mode, new_mode) = match (is_tree(old_mode), is_tree(new_mode)) {
            (true, true) => continue,
            (true, false) if new_mode.is_none() => continue,
            (false, true) if old_mode.is_none() => continue,
            (true, false) => (ChangeKind::Added, None, new, None, new_mode),
            (false, true) => (ChangeKind::Deleted, old, None, old_mode, None),
            (false, false) => (kind, old, new, old_mode, new_mode),
        };
        let utf8 = std::str::from_utf8(&path).ok();
        let lossy = String::from_utf8_lossy(&path);
        let rel: &str = &lossy;
        // A name that is not UTF-8 cannot be matched against the deny list
        // the way the host matches names: it stays hidden.
        if utf8.is_none() || view.is_hidden(rel) {
            hidden.push(rel.to_string());
            continue;
        }
        let blob =
            |mode: Option<gix::objs::tree::EntryMode>| mode.is_some_and(|m| m.is_blob_or_symlink());
        changes.push(Change {
            path: rel.to_string(),
            kind,
            old,
            new,
            old_is_blob: blob(old_mode),
            new_is_blob: blob(new_mode),
        });
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((changes, hidden))
}

/// The tree at `path` (`/`-separated, below the top) in a tree, if there
/// is one.
fn subtree(history: &History, tree: ObjectId, path: &str) -> Result<Option<ObjectId>, Error> {
    let damaged = |e: &dyn std::fmt::Display| Error::Repository(format!("cannot read a tree: {e}"));
    let tree = history.repo().find_tree(tree).map_err(|e| damaged(&e))?;
    let entry = tree.lookup_entry_by_path(path).map_err(|e| damaged(&e))?;
    Ok(entry.filter(|e| e.mode().is_tree()).map(|e| e.object_id()))
}

/// Whether bytes are binary by git's rule: a NUL in the first 8000.
pub(crate) fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(8000)].contains(&0)
}

/// A blob's bytes, or none for an absent side or a submodule.
pub(crate) fn blob(
    history: &History,
    id: Option<ObjectId>,
    is_blob: bool,
) -> Result<Vec<u8>, Error> {
    match id {
        Some(id) if is_blob => Ok(history
            .repo()
            .find_object(id)
            .map_err(|e| Error::Repository(format!("cannot read a file's content: {e}")))?
            .detach()
            .data),
        Some(id) => Ok(format!("Subproject commit {id}\n").into_bytes()),
        None => Ok(Vec::new()),
    }
}

/// Lines added and removed between two texts (git's `--numstat`).
pub(crate) fn line_counts(before: &[u8], after: &[u8]) -> (u32, u32) {
    let input = InternedInput::new(before, after);
    let diff = line_diff(&input);
    (diff.count_additions(), diff.count_removals())
}

pub(crate) fn line_diff(input: &InternedInput<&[u8]>) -> Diff {
    let mut diff = Diff::compute(Algorithm::Myers, input);
    diff.postprocess_lines(input);
    diff
}

/// The hunks of a unified diff of two texts with three lines of context, as
/// git prints them (without the file header), function-name context
/// included.
pub fn unified(before: &[u8], after: &[u8]) -> String {
    const CONTEXT: u32 = 3;
    let input = InternedInput::new(before, after);
    let diff = line_diff(&input);
    let old: Vec<&[u8]> = input.before.iter().map(|&t| input.interner[t]).collect();
    let new: Vec<&[u8]> = input.after.iter().map(|&t| input.interner[t]).collect();
    let hunks: Vec<imara_diff::Hunk> = diff.hunks().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < hunks.len() {
        // Hunks closer than twice the context are printed as one.
        let mut j = i;
        while j + 1 < hunks.len() && hunks[j + 1].before.start - hunks[j].before.end <= 2 * CONTEXT
        {
            j += 1;
        }
        let first = &hunks[i];
        let last = &hunks[j];
        let start_before = first.before.start.saturating_sub(CONTEXT);
        let start_after = first.after.start - (first.before.start - start_before);
        let end_before = (last.before.end + CONTEXT).min(old.len() as u32);
        let end_after = last.after.end + (end_before - last.before.end);
        let len_before = end_before - start_before;
        let len_after = end_after - start_after;
        out.push_str(&format!(
            "@@ -{} +{} @@",
            range(start_before, len_before),
            range(start_after, len_after)
        ));
        if let Some(name) = function_line(&old, start_before) {
            out.push(' ');
            out.push_str(&name);
        }
        out.push('\n');
        let mut at = start_before;
        for hunk in &hunks[i..=j] {
            for line in &old[at as usize..hunk.before.start as usize] {
                push_line(&mut out, ' ', line);
            }
            for line in &old[hunk.before.start as usize..hunk.before.end as usize] {
                push_line(&mut out, '-', line);
            }
            for line in &new[hunk.after.start as usize..hunk.after.end as usize] {
                push_line(&mut out, '+', line);
            }
            at = hunk.before.end;
        }
        for line in &old[at as usize..end_before as usize] {
            push_line(&mut out, ' ', line);
        }
        i = j + 1;
    }
    out
}

/// `start,len` as git writes it: `len` left out when 1; an empty range
/// names the line before it.
fn range(start: u32, len: u32) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
}

/// git's default function-name rule: the nearest line above the hunk that
/// starts with a letter, `_` or `$`, trailing whitespace cut, at most 80
/// bytes.
fn function_line(old: &[&[u8]], before: u32) -> Option<String> {
    old[..before as usize].iter().rev().find_map(|line| {
        let first = *line.first()?;
        if !(first.is_ascii_alphabetic() || first == b'_' || first == b'$') {
            return None;
        }
        let cut = &line[..line.len().min(80)];
        let text = String::from_utf8_lossy(cut);
        Some(text.trim_end().to_string())
    })
}

fn push_line(out: &mut String, sign: char, line: &[u8]) {
    out.push(sign);
    out.push_str(&String::from_utf8_lossy(line));
    if !line.ends_with(b"\n") {
        out.push_str("\n\\ No newline at end of file\n");
    }
}
