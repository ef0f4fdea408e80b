//! The `git` tool: one tool, five read-only commands, so the model reads
//! the shared arguments (`root`, `path`, `rev`, line ranges) once. Each
//! command takes the arguments its own says; one it does not take is
//! refused by name, never ignored.

use loomfs_guest::tool::{About, Answer, Tool};
use loomfs_guest::{Context, Permission, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::{
    self, BlameArgs, BlameResult, DiffArgs, DiffResult, LogArgs, LogResult, ShowArgs, ShowResult,
    StatusArgs, StatusResult,
};

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    Log,
    Show,
    Diff,
    Blame,
    Status,
}

impl Command {
    fn name(self) -> &'static str {
        match self {
            Command::Log => "log",
            Command::Show => "show",
            Command::Diff => "diff",
            Command::Blame => "blame",
            Command::Status => "status",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitArgs {
    command: Command,
    root: String,
    /// Relative to the root (blame: required).
    path: Option<String>,
    /// Branch, tag, id or `HEAD~3` (show, diff: required).
    rev: Option<String>,
    to: Option<String>,
    /// First line, 1-based (show with path, blame).
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    #[schemars(range(min = 1))]
    limit: Option<u64>,
    /// log; default 20.
    #[schemars(range(min = 1, max = 500))]
    max_count: Option<u32>,
    /// log: a day (`2024-05-01`) or UTC time.
    since: Option<String>,
    /// log: name or email contains.
    author: Option<String>,
    /// log: message contains.
    grep: Option<String>,
}

/// The result of whichever command ran.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum GitResult {
    Log(LogResult),
    Show(ShowResult),
    Diff(DiffResult),
    Blame(BlameResult),
    Status(StatusResult),
}

pub struct Git;

impl Tool for Git {
    type Args = GitArgs;
    type Result = GitResult;

    fn about() -> About {
        tools::root_only(About::new(
            "git",
            "A root's git history. log: commits, newest first; show: a \
             commit, or with path a file at rev; diff: rev against to (default: working tree); \
             blame: each line's last commit; status.",
            Permission::Read,
        ))
    }

    fn call(ctx: Context, args: GitArgs) -> Result<Answer<GitResult>, ToolError> {
        let command = args.command;
        let given = |name: &str| match name {
            "path" => args.path.is_some(),
            "rev" => args.rev.is_some(),
            "to" => args.to.is_some(),
            "offset" => args.offset.is_some(),
            "limit" => args.limit.is_some(),
            "max_count" => args.max_count.is_some(),
            "since" => args.since.is_some(),
            "author" => args.author.is_some(),
            _ => args.grep.is_some(),
        };
        let takes: &[&str] = match command {
            Command::Log => &["path", "rev", "max_count", "since", "author", "grep"],
            Command::Show => &["path", "rev", "offset", "limit"],
            Command::Diff => &["path", "rev", "to"],
            Command::Blame => &["path", "rev", "offset", "limit"],
            Command::Status => &[],
        };
        let optional = [
            "path",
            "rev",
            "to",
            "offset",
            "limit",
            "max_count",
            "since",
            "author",
            "grep",
        ];
        if let Some(extra) = optional.iter().find(|a| given(a) && !takes.contains(a)) {
            return Err(ToolError::InvalidArguments(format!(
                "'{extra}' is not an argument of git {}",
                command.name()
            )));
        }
        let required = |value: Option<String>, what: &str| {
            value.ok_or_else(|| {
                ToolError::InvalidArguments(format!("git {} needs '{what}'", command.name()))
            })
        };
        let root = args.root;
        match command {
            Command::Log => tools::git_log(
                ctx,
                LogArgs {
                    root,
                    path: args.path,
                    rev: args.rev,
                    max_count: args.max_count,
                    since: args.since,
                    author: args.author,
                    grep: args.grep,
                },
            )
            .map(|a| a.map(GitResult::Log)),
            Command::Show => tools::git_show(
                ctx,
                ShowArgs {
                    root,
                    rev: required(args.rev, "rev")?,
                    path: args.path,
                    offset: args.offset,
                    limit: args.limit,
                },
            )
            .map(|a| a.map(GitResult::Show)),
            Command::Diff => tools::git_diff(
                ctx,
                DiffArgs {
                    root,
                    from: required(args.rev, "rev")?,
                    to: args.to,
                    path: args.path,
                },
            )
            .map(|a| a.map(GitResult::Diff)),
            Command::Blame => tools::git_blame(
                ctx,
                BlameArgs {
                    root,
                    path: required(args.path, "path")?,
                    rev: args.rev,
                    offset: args.offset,
                    limit: args.limit,
                },
            )
            .map(|a| a.map(GitResult::Blame)),
            Command::Status => {
                tools::git_status(ctx, StatusArgs { root }).map(|a| a.map(GitResult::Status))
            }
        }
    }
}
