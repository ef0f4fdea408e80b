//! The five commands of `git`: their arguments, results and calls.

use std::path::Path;

use git_history::{
    ChangeKind, Error, FileDiff, History, LogQuery, View, blame, diff_revisions, diff_worktree,
    log, show_commit, show_file, status,
};
use loomfs_guest::tool::{About, Answer};
use loomfs_guest::{Context, Mount, PathArgument, Permission, ToolError, is_false, is_zero, shown};
use schemars::JsonSchema;
use serde::Serialize;

use crate::format::{change_name, date, diffs, since};
use crate::history;

/// Most commits one `git_log` call lists.
const MAX_COMMITS: u32 = 500;

/// The path argument of every history tool: the root alone. Their paths
/// name files in the repository's history, which the deny list judges
/// (through the host's `hidden`), not places on disk.
pub(crate) fn root_only(about: About) -> About {
    about.paths(vec![PathArgument {
        root_field: "root".into(),
        root_fallback: None,
        path_field: String::new(),
        permission: Permission::Read,
        across_roots: None,
        optional: true,
    }])
}

/// A path argument of a history tool, relative to the root as every tool's
/// paths are, with `.` dropped and `..` taken back. An absolute path, or one
/// that climbs above the root, is refused naming the rule (as `resolve()`
/// refuses them for the other tools) rather than matching nothing.
fn relative(path: &str) -> Result<String, ToolError> {
    // Not echoed: an absolute path is the client's view of the host.
    if path.starts_with('/') {
        return Err(ToolError::Refused(
            "absolute paths are refused; give a path relative to the root (rule absolute_path)"
                .into(),
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ToolError::Refused(format!(
                        "'{}' climbs above the root (rule confinement)",
                        shown(path)
                    )));
                }
            }
            name => parts.push(name),
        }
    }
    Ok(parts.join("/"))
}

/// A root's repository, opened for one call.
struct Repo<'c> {
    history: History,
    scope: String,
    root: String,
    mount: &'c Mount,
}

impl<'c> Repo<'c> {
    fn open(ctx: &'c Context, root: &str) -> Result<Repo<'c>, ToolError> {
        let mount = ctx.mounts.iter().find(|m| m.name == root).ok_or_else(|| {
            ToolError::InvalidArguments(format!("unknown root '{}'", shown(root)))
        })?;
        let repository = history::repository(root).ok_or_else(|| {
            ToolError::Refused(format!(
                "root '{}' offers no git history (rule git_history)",
                shown(root)
            ))
        })?;
        let history = History::open(Path::new(&repository.git_dir)).map_err(error)?;
        Ok(Repo {
            history,
            scope: repository.scope,
            root: root.to_string(),
            mount,
        })
    }

    /// Runs `f` with the view of this root: its scope, its deny list.
    fn with_view<R>(&self, f: impl FnOnce(&View<'_>) -> R) -> R {
        let root = self.root.clone();
        let hidden = move |path: &str| history::hidden(&root, path);
        let view = View::new(&self.scope, &hidden);
        f(&view)
    }
}

fn error(e: Error) -> ToolError {
    match e {
        Error::BadRevision(m) => ToolError::InvalidArguments(m),
        Error::NotFound(m) => ToolError::NotFound(m),
        Error::Refused(m) => ToolError::Refused(m),
        Error::Repository(m) => ToolError::Io(m),
    }
}

/// A file a commit or diff changed.
#[derive(Serialize, JsonSchema)]
pub struct FileChange {
    /// Path relative to the root.
    path: String,
    /// `added`, `modified` or `deleted`.
    change: &'static str,
    /// Lines added (absent for a binary file or where not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<u32>,
    /// Lines removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<u32>,
}

fn file_change(path: &str, kind: ChangeKind, counts: Option<(u32, u32)>) -> FileChange {
    FileChange {
        path: path.to_string(),
        change: change_name(kind),
        added: counts.map(|c| c.0),
        removed: counts.map(|c| c.1),
    }
}

/// The line saying how many changes the deny list hides.
fn hidden_line(hidden: usize) -> Option<String> {
    match hidden {
        0 => None,
        1 => Some("(1 change hidden by the deny list)".into()),
        n => Some(format!("({n} changes hidden by the deny list)")),
    }
}

// ---- git_log ----

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

// ---- git_show ----

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

/// The note of a diff cut at the root's read limit.
fn cut_note(shown_files: usize, files: usize, max: u64) -> String {
    format!(
        "Truncated: the diff of {shown_files} of {files} files is shown, cut at the root's \
         max_read_bytes ({max} bytes); ask again with path for the others."
    )
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

// ---- git_diff ----

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

// ---- git_blame ----

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

// ---- git_status ----

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_path_is_relative_and_stays_in_the_root() {
        for (path, want) in [
            ("", ""),
            (".", ""),
            ("src", "src"),
            ("./src/", "src"),
            ("a//b/./c", "a/b/c"),
            ("a/../b", "b"),
            ("a/b/..", "a"),
        ] {
            assert_eq!(relative(path).unwrap(), want, "{path}");
        }
        for (path, rule) in [
            ("/", "absolute_path"),
            ("/etc/passwd", "absolute_path"),
            ("..", "confinement"),
            ("a/../..", "confinement"),
            ("../x", "confinement"),
        ] {
            match relative(path) {
                Err(ToolError::Refused(m)) => {
                    assert!(m.contains(&format!("(rule {rule})")), "{path}: {m}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
