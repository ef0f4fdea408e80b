//! `git` command `log`: the commits that touched the root (or a path in it),
//! newest first, each with the files it changed.

use git_history::{LogQuery, log};
use loomfs_guest::tool::Answer;
use loomfs_guest::{Context, ToolError, is_false, is_zero, shown};
use schemars::JsonSchema;
use serde::Serialize;

use super::{FileChange, Repo, error, file_change, hidden_line, relative};
use crate::format::{date, since};

/// Most commits one `git_log` call lists.
const MAX_COMMITS: u32 = 500;

/// Its part of [`crate::git::GitArgs`].
pub(crate) struct LogArgs {
    pub(crate) root: String,
    pub(crate) path: Option<String>,
    pub(crate) rev: Option<String>,
    pub(crate) max_count: Option<u32>,
    pub(crate) since: Option<String>,
    pub(crate) author: Option<String>,
    pub(crate) grep: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Commit {
    /// The commit id.
    id: String,
    author: String,
    email: String,
    /// Author date, ISO 8601 with the author's offset.
    date: String,
    /// The message's first line.
    subject: String,
    /// The files it changed against its first parent (none listed for a merge).
    files: Vec<FileChange>,
    /// Changed files not listed: the server's listing limit was reached.
    #[serde(skip_serializing_if = "is_zero")]
    files_not_listed: u64,
    /// How many changed files the deny list hides.
    #[serde(skip_serializing_if = "is_zero")]
    hidden: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct LogResult {
    /// Newest first.
    commits: Vec<Commit>,
    /// More commits matched than max_count, or the files listed reached the
    /// server's listing limit.
    #[serde(skip_serializing_if = "is_false")]
    truncated: bool,
}

pub(crate) fn git_log(ctx: Context, args: LogArgs) -> Result<Answer<LogResult>, ToolError> {
    let max_count = loomfs_guest::count_arg("max_count", args.max_count, 20, MAX_COMMITS, "")?;
    let since = match &args.since {
        Some(text) => Some(since(text).ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "'since' must be a day (2024-05-01) or a UTC time (2024-05-01T12:00:00Z), not '{}'",
                shown(text)
            ))
        })?),
        None => None,
    };
    let path = relative(args.path.as_deref().unwrap_or(""))?;
    let repo = Repo::open(&ctx, &args.root)?;
    let query = LogQuery {
        rev: args.rev.as_deref().unwrap_or("HEAD"),
        path: &path,
        max_count: max_count as usize,
        since,
        author: args.author.as_deref(),
        grep: args.grep.as_deref(),
        line_counts: true,
    };
    let (entries, more) = repo
        .with_view(|view| log(&repo.history, &query, view))
        .map_err(error)?;
    let mut text = String::new();
    let mut commits = Vec::new();
    // The files listed, over all commits, stop at the listing limit (one
    // commit can change tens of thousands).
    let mut room = ctx.limits.max_entries as usize;
    for e in entries {
        let when = date(e.author_time, e.author_offset);
        text.push_str(&format!(
            "{} {when} {} <{}>\n    {}\n",
            e.id,
            shown(&e.author_name),
            shown(&e.author_email),
            shown(&e.subject)
        ));
        let listed = e.changes.len().min(room);
        room -= listed;
        let mut files = Vec::with_capacity(listed);
        for (c, n) in e
            .changes
            .iter()
            .zip(e.counts.iter().chain(std::iter::repeat(&None)))
            .take(listed)
        {
            let counts = match n {
                Some((a, r)) => format!("+{a} -{r}"),
                None => "binary".into(),
            };
            text.push_str(&format!(
                "    {} {} {counts}\n",
                c.kind.letter(),
                shown(&c.path)
            ));
            files.push(file_change(&c.path, c.kind, *n));
        }
        let not_listed = e.changes.len() - listed;
        if not_listed > 0 {
            text.push_str(&format!("    ({not_listed} more files not listed)\n"));
        }
        if let Some(line) = hidden_line(e.hidden) {
            text.push_str(&format!("    {line}\n"));
        }
        commits.push(Commit {
            id: e.id,
            author: e.author_name,
            email: e.author_email,
            date: when,
            subject: e.subject,
            files,
            files_not_listed: not_listed as u64,
            hidden: e.hidden as u64,
        });
    }
    if commits.is_empty() {
        text.push_str("No commit matches.\n");
    }
    let files_cut = commits.iter().any(|c| c.files_not_listed > 0);
    let mut answer = Answer::new(
        text,
        LogResult {
            commits,
            truncated: more || files_cut,
        },
    );
    if more {
        answer.text.push(format!(
            "Truncated: more commits match than max_count ({max_count}); raise it (at most \
             {MAX_COMMITS}) or narrow with path, since, author or grep."
        ));
    }
    if files_cut {
        answer.text.push(format!(
            "Truncated: the files listed reached the server's listing limit ({} entries); \
             lower max_count or narrow with path.",
            ctx.limits.max_entries
        ));
    }
    Ok(answer)
}
