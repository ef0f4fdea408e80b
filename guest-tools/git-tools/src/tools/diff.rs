//! `git` command `diff`: the changes between two revisions, or between one
//! and the working tree.

use std::path::Path;

use git_history::{FileDiff, diff_revisions, diff_worktree};
use loomfs_guest::tool::Answer;
use loomfs_guest::{Context, ToolError, is_false, is_zero, shown};
use schemars::JsonSchema;
use serde::Serialize;

use super::{FileChange, Repo, cut_note, error, file_change, hidden_line, relative};
use crate::format::diffs;

/// Its part of [`crate::git::GitArgs`].
pub(crate) struct DiffArgs {
    pub(crate) root: String,
    pub(crate) from: String,
    pub(crate) to: Option<String>,
    pub(crate) path: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct DiffResult {
    /// The files that differ.
    files: Vec<FileChange>,
    /// How many changed files the deny list hides.
    #[serde(skip_serializing_if = "is_zero")]
    hidden: u64,
    /// The diff was cut at the root's max_read_bytes.
    #[serde(skip_serializing_if = "is_false")]
    truncated: bool,
}

pub(crate) fn git_diff(ctx: Context, args: DiffArgs) -> Result<Answer<DiffResult>, ToolError> {
    let path = relative(args.path.as_deref().unwrap_or(""))?;
    let path = path.as_str();
    let repo = Repo::open(&ctx, &args.root)?;
    let (files, hidden): (Vec<FileDiff>, usize) = repo
        .with_view(|view| match &args.to {
            Some(to) => diff_revisions(&repo.history, &args.from, to, path, view),
            None => diff_worktree(
                &repo.history,
                &args.from,
                Path::new(&repo.mount.dir),
                path,
                view,
            ),
        })
        .map_err(error)?;
    let changed: Vec<FileChange> = files
        .iter()
        .map(|f| file_change(&f.change.path, f.change.kind, None))
        .collect();
    let mut text = String::new();
    for f in &files {
        text.push_str(&format!(
            "{} {}\n",
            f.change.kind.letter(),
            shown(&f.change.path)
        ));
    }
    if let Some(line) = hidden_line(hidden) {
        text.push_str(&format!("{line}\n"));
    }
    if files.is_empty() && hidden == 0 {
        text.push_str("No differences.\n");
    }
    let max = repo.mount.max_read_bytes;
    let (diff, whole) = diffs(&files, max);
    if !diff.is_empty() {
        text.push('\n');
        text.push_str(&diff);
    }
    let truncated = whole < files.len();
    let mut answer = Answer::new(
        text,
        DiffResult {
            files: changed,
            hidden: hidden as u64,
            truncated,
        },
    );
    if truncated {
        answer.text.push(cut_note(whole, files.len(), max));
    }
    Ok(answer)
}
