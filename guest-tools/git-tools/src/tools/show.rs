//! `git` command `show`: a commit (message, parents, changed files, diff) or
//! a file's text at a revision, by lines.

use git_history::{show_commit, show_file};
use loomfs_guest::tool::Answer;
use loomfs_guest::{Context, ToolError, is_false, is_zero, shown};
use schemars::JsonSchema;
use serde::Serialize;

use super::{FileChange, Repo, cut_note, error, file_change, hidden_line, relative};
use crate::format::{date, diffs};

/// Its part of [`crate::git::GitArgs`].
pub(crate) struct ShowArgs {
    pub(crate) root: String,
    pub(crate) rev: String,
    pub(crate) path: Option<String>,
    pub(crate) offset: Option<u64>,
    pub(crate) limit: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
pub struct ShowResult {
    /// The commit id.
    id: String,
    /// A commit shown: its parents' ids.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parents: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    /// Author date, ISO 8601 with the author's offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    date: Option<String>,
    /// The whole message.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// The files the commit changed (against its first parent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    files: Vec<FileChange>,
    /// How many changed files the deny list hides.
    #[serde(skip_serializing_if = "is_zero")]
    hidden: u64,
    /// A file shown: its path.
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    /// A file shown: its size in bytes at rev.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    /// A file shown: the text of the lines returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// First line returned, 1-based.
    #[serde(skip_serializing_if = "is_zero")]
    start_line: u64,
    /// Last line returned.
    #[serde(skip_serializing_if = "is_zero")]
    end_line: u64,
    /// Lines in the file.
    #[serde(skip_serializing_if = "is_zero")]
    total_lines: u64,
    /// The diff was cut at the root's max_read_bytes.
    #[serde(skip_serializing_if = "is_false")]
    truncated: bool,
}

pub(crate) fn git_show(ctx: Context, args: ShowArgs) -> Result<Answer<ShowResult>, ToolError> {
    let path = args.path.as_deref().map(relative).transpose()?;
    let repo = Repo::open(&ctx, &args.root)?;
    match &path {
        Some(path) => show_text(&repo, &args, path),
        None => {
            let shown_commit = repo
                .with_view(|view| show_commit(&repo.history, &args.rev, "", view))
                .map_err(error)?;
            let when = date(shown_commit.author_time, shown_commit.author_offset);
            let mut text = format!(
                "commit {}\nAuthor: {} <{}>\nDate:   {when}\n\n",
                shown_commit.id,
                shown(&shown_commit.author_name),
                shown(&shown_commit.author_email)
            );
            for line in shown_commit.message.lines() {
                text.push_str(&format!("    {}\n", shown(line)));
            }
            text.push('\n');
            let files: Vec<FileChange> = shown_commit
                .files
                .iter()
                .map(|f| file_change(&f.change.path, f.change.kind, None))
                .collect();
            let hidden = shown_commit.hidden;
            if files.is_empty() && hidden > 0 {
                text.push_str("Its changes are hidden by the deny list.\n");
            } else if let Some(line) = hidden_line(hidden) {
                text.push_str(&format!("{line}\n"));
            }
            let max = repo.mount.max_read_bytes;
            let (diff, whole) = diffs(&shown_commit.files, max);
            text.push_str(&diff);
            let truncated = whole < shown_commit.files.len();
            let mut answer = Answer::new(
                text,
                ShowResult {
                    id: shown_commit.id,
                    parents: shown_commit.parents,
                    author: Some(shown_commit.author_name),
                    email: Some(shown_commit.author_email),
                    date: Some(when),
                    message: Some(shown_commit.message),
                    files,
                    hidden: hidden as u64,
                    path: None,
                    size: None,
                    content: None,
                    start_line: 0,
                    end_line: 0,
                    total_lines: 0,
                    truncated,
                },
            );
            if truncated {
                answer
                    .text
                    .push(cut_note(whole, shown_commit.files.len(), max));
            }
            Ok(answer)
        }
    }
}

/// `git_show` with a path: the file's text at the revision, by `read_file`'s
/// rules.
fn show_text(
    repo: &Repo<'_>,
    args: &ShowArgs,
    path: &str,
) -> Result<Answer<ShowResult>, ToolError> {
    let bytes = repo
        .with_view(|view| show_file(&repo.history, &args.rev, path, view))
        .map_err(error)?;
    let rel = path.trim_matches('/');
    let max = repo.mount.max_read_bytes;
    if bytes.len() as u64 > max {
        return Err(ToolError::Refused(format!(
            "'{}' at {} is {} bytes, more than the root's max_read_bytes ({max})",
            shown(rel),
            shown(&args.rev),
            bytes.len()
        )));
    }
    if loomfs_guest::content::is_binary(&bytes) {
        return Err(ToolError::Refused(format!(
            "'{}' at {} is a binary file",
            shown(rel),
            shown(&args.rev)
        )));
    }
    let id = repo.history.commit_id(&args.rev).map_err(error)?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len() as u64;
    let start = args.offset.unwrap_or(1);
    if start > total.max(1) {
        return Err(ToolError::InvalidArguments(format!(
            "offset {start} is past the end of '{}' ({total} lines)",
            shown(rel)
        )));
    }
    let end = args
        .limit
        .map_or(total, |n| (start - 1).saturating_add(n).min(total));
    let content: String = lines[(start - 1) as usize..end as usize].concat();
    let mut answer = Answer::new(
        content.clone(),
        ShowResult {
            id,
            parents: vec![],
            author: None,
            email: None,
            date: None,
            message: None,
            files: vec![],
            hidden: 0,
            path: Some(rel.to_string()),
            size: Some(bytes.len() as u64),
            content: Some(content),
            start_line: if end >= start { start } else { 0 },
            end_line: end,
            total_lines: total,
            truncated: false,
        },
    );
    if start > 1 || end < total {
        answer.text.push(format!(
            "Lines {start}-{end} of {total} of '{}' at {}.",
            shown(rel),
            shown(&args.rev)
        ));
    }
    Ok(answer)
}
