//! `git` command `status`: what is staged against `HEAD`, what the working
//! tree changed against the index, and the untracked files.

use std::path::Path;

use git_history::status;
use loomfs_guest::tool::Answer;
use loomfs_guest::{Context, ToolError, is_false, is_zero, shown};
use schemars::JsonSchema;
use serde::Serialize;

use super::{FileChange, Repo, error, file_change, hidden_line};

/// Its part of [`crate::git::GitArgs`].
pub(crate) struct StatusArgs {
    pub(crate) root: String,
}

#[derive(Serialize, JsonSchema)]
pub struct StatusResult {
    /// The index against HEAD.
    staged: Vec<FileChange>,
    /// The working tree against the index.
    modified: Vec<FileChange>,
    /// Files neither tracked nor ignored.
    untracked: Vec<String>,
    /// How many changed paths the deny list hides.
    #[serde(skip_serializing_if = "is_zero")]
    hidden: u64,
    /// More entries than the server's listing limit: the lists were cut.
    #[serde(skip_serializing_if = "is_false")]
    truncated: bool,
}

pub(crate) fn git_status(
    ctx: Context,
    args: StatusArgs,
) -> Result<Answer<StatusResult>, ToolError> {
    let repo = Repo::open(&ctx, &args.root)?;
    let found = repo
        .with_view(|view| status(&repo.history, Path::new(&repo.mount.dir), view))
        .map_err(error)?;
    let mut room = ctx.limits.max_entries as usize;
    let mut truncated = false;
    let mut take = |n: usize| {
        let k = n.min(room);
        room -= k;
        truncated |= k < n;
        k
    };
    let staged_n = take(found.staged.len());
    let modified_n = take(found.modified.len());
    let untracked_n = take(found.untracked.len());
    let mut text = String::new();
    let mut section = |title: &str, rows: Vec<String>| {
        if !rows.is_empty() {
            text.push_str(title);
            text.push('\n');
            for r in rows {
                text.push_str(&format!("  {r}\n"));
            }
        }
    };
    section(
        "Staged:",
        found.staged[..staged_n]
            .iter()
            .map(|(p, k)| format!("{} {}", k.letter(), shown(p)))
            .collect(),
    );
    section(
        "Modified:",
        found.modified[..modified_n]
            .iter()
            .map(|(p, k)| format!("{} {}", k.letter(), shown(p)))
            .collect(),
    );
    section(
        "Untracked:",
        found.untracked[..untracked_n]
            .iter()
            .map(|p| shown(p).into_owned())
            .collect(),
    );
    if let Some(line) = hidden_line(found.hidden) {
        text.push_str(&format!("{line}\n"));
    }
    if staged_n + modified_n + untracked_n == 0 && found.hidden == 0 {
        text.push_str("Clean: nothing staged, modified or untracked.\n");
    }
    let mut answer = Answer::new(
        text,
        StatusResult {
            staged: found.staged[..staged_n]
                .iter()
                .map(|(p, k)| file_change(p, *k, None))
                .collect(),
            modified: found.modified[..modified_n]
                .iter()
                .map(|(p, k)| file_change(p, *k, None))
                .collect(),
            untracked: found.untracked[..untracked_n].to_vec(),
            hidden: found.hidden as u64,
            truncated,
        },
    );
    if truncated {
        answer.text.push(format!(
            "Truncated at the server's listing limit ({} entries).",
            ctx.limits.max_entries
        ));
    }
    Ok(answer)
}
