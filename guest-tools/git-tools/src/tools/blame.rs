//! `git` command `blame`: who last changed each line of a file.

use git_history::blame;
use loomfs_guest::tool::Answer;
use loomfs_guest::{Context, ToolError, is_false, shown};
use schemars::JsonSchema;
use serde::Serialize;

use super::{Repo, error, relative};
use crate::format::date;

/// Its part of [`crate::git::GitArgs`].
pub(crate) struct BlameArgs {
    pub(crate) root: String,
    pub(crate) path: String,
    pub(crate) rev: Option<String>,
    pub(crate) offset: Option<u64>,
    pub(crate) limit: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
pub struct BlamedLine {
    /// Line number, 1-based.
    line: u64,
    /// The commit that last changed it.
    commit: String,
    author: String,
    /// Author date, ISO 8601 with the author's offset.
    date: String,
    /// The line's text.
    text: String,
}

#[derive(Serialize, JsonSchema)]
pub struct BlameResult {
    path: String,
    lines: Vec<BlamedLine>,
    /// Lines in the file.
    total_lines: u64,
    /// More lines follow than were returned.
    #[serde(skip_serializing_if = "is_false")]
    truncated: bool,
}

pub(crate) fn git_blame(ctx: Context, args: BlameArgs) -> Result<Answer<BlameResult>, ToolError> {
    let rel = relative(&args.path)?;
    let rel = rel.as_str();
    let repo = Repo::open(&ctx, &args.root)?;
    let rev = args.rev.as_deref().unwrap_or("HEAD");
    let (blamed, bytes) = repo
        .with_view(|view| blame(&repo.history, rev, rel, view))
        .map_err(error)?;
    let text = String::from_utf8_lossy(&bytes);
    let contents: Vec<&str> = text.lines().collect();
    let total = blamed.len() as u64;
    let start = args.offset.unwrap_or(1);
    if start > total.max(1) {
        return Err(ToolError::InvalidArguments(format!(
            "offset {start} is past the end of '{}' ({total} lines)",
            shown(rel)
        )));
    }
    let limit = args.limit.unwrap_or(u64::from(ctx.limits.max_entries));
    let end = (start - 1).saturating_add(limit).min(total);
    let mut out = String::new();
    let mut lines = Vec::new();
    for n in start..=end {
        let Some(b) = blamed.get((n - 1) as usize) else {
            break;
        };
        let line = contents.get((n - 1) as usize).copied().unwrap_or("");
        let when = date(b.author_time, b.author_offset);
        out.push_str(&format!(
            "{} {} {} {n}) {}\n",
            &b.commit[..b.commit.len().min(12)],
            &when[..10],
            shown(&b.author_name),
            line
        ));
        lines.push(BlamedLine {
            line: n,
            commit: b.commit.clone(),
            author: b.author_name.clone(),
            date: when,
            text: line.to_string(),
        });
    }
    let truncated = end < total;
    let mut answer = Answer::new(
        out,
        BlameResult {
            path: rel.to_string(),
            lines,
            total_lines: total,
            truncated,
        },
    );
    if truncated {
        answer.text.push(format!(
            "Truncated: lines {start}-{end} of {total}; ask again with offset {}.",
            end + 1
        ));
    }
    Ok(answer)
}
