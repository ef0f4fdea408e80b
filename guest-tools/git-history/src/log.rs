//! `git log`: commits reachable from a revision, newest first by commit
//! time, each with the files it changed under the view.

use crate::diff::{self, Change, tree_changes};
use crate::{Error, History, View, under};
use gix::revision::walk::Sorting;
use gix::traverse::commit::simple::CommitTimeOrder;

/// What to list.
pub struct LogQuery<'q> {
    /// Where the walk starts.
    pub rev: &'q str,
    /// Only commits that changed something at or under this root-relative
    /// path (empty: anything under the root).
    pub path: &'q str,
    pub max_count: usize,
    /// Only commits made (committer time) at or after this Unix time.
    pub since: Option<i64>,
    /// Only commits whose author name or email contains this text.
    pub author: Option<&'q str>,
    /// Only commits whose message contains this text.
    pub grep: Option<&'q str>,
    /// Count lines added and removed per file (`--numstat`).
    pub line_counts: bool,
}

/// One commit of a log.
#[derive(Debug)]
pub struct Entry {
    pub id: String,
    pub author_name: String,
    pub author_email: String,
    /// Author time, seconds since the epoch, and its offset from UTC.
    pub author_time: i64,
    pub author_offset: i32,
    pub subject: String,
    pub parents: usize,
    /// Visible changed files against the first parent (none for a merge,
    /// as `git log` shows).
    pub changes: Vec<Change>,
    /// Lines added and removed per change, when asked (none for binary).
    pub counts: Vec<Option<(u32, u32)>>,
    /// How many changed files the view hides.
    pub hidden: usize,
}

/// The log, and whether more commits matched than `max_count`.
pub fn log(
    history: &History,
    query: &LogQuery<'_>,
    view: &View<'_>,
) -> Result<(Vec<Entry>, bool), Error> {
    let repo = history.repo();
    let start = history.commit(query.rev)?;
    let walk = repo
        .rev_walk([start.id])
        .sorting(Sorting::ByCommitTime(CommitTimeOrder::NewestFirst))
        .all()
        .map_err(|e| Error::Repository(format!("cannot walk the history: {e}")))?;
    let mut entries = Vec::new();
    for info in walk {
        let info = info.map_err(|e| Error::Repository(format!("cannot walk the history: {e}")))?;
        if let Some(since) = query.since
            && info.commit_time.is_some_and(|t| t < since)
        {
            continue;
        }
        let commit = info
            .object()
            .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))?;
        let decoded = commit
            .decode()
            .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))?;
        let author = decoded
            .author()
            .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))?;
        if let Some(needle) = query.author
            && !contains(author.name, needle)
            && !contains(author.email, needle)
        {
            continue;
        }
        if let Some(needle) = query.grep
            && !contains(decoded.message, needle)
        {
            continue;
        }
        let parents: Vec<gix::ObjectId> = decoded.parents().collect();
        let tree = decoded.tree();
        // Without a path, and on a root that is the repository's top, every
        // commit is listed (as `git log`); otherwise only those that changed
        // something there, as `git log -- <path>`.
        let filtered =
            !query.path.trim_matches('/').is_empty() && query.path != "." || view.has_scope();
        // A merge lists no files (as `git log` without `-m`); it counts as
        // touching the path when its tree differs there from every parent.
        let (changes, hidden, touches) = if parents.len() > 1 {
            let mut touches = true;
            for parent in &parents {
                let parent_tree = parent_tree(history, *parent)?;
                let (changes, hidden) = tree_changes(history, Some(parent_tree), tree, view)?;
                if !changes.iter().any(|c| under(&c.path, query.path))
                    && !hidden.iter().any(|h| under(h, query.path))
                {
                    touches = false;
                }
            }
            (Vec::new(), 0, touches || !filtered)
        } else {
            let old = match parents.first() {
                Some(parent) => Some(parent_tree(history, *parent)?),
                None => None,
            };
            let (changes, hidden) = tree_changes(history, old, tree, view)?;
            let changes: Vec<Change> = changes
                .into_iter()
                .filter(|c| under(&c.path, query.path))
                .collect();
            let hidden = hidden.iter().filter(|h| under(h, query.path)).count();
            let touches = !filtered || !changes.is_empty() || hidden > 0;
            (changes, hidden, touches)
        };
        if !touches {
            continue;
        }
        if entries.len() == query.max_count {
            return Ok((entries, true));
        }
        let counts = if query.line_counts {
            changes
                .iter()
                .map(|change| {
                    let before = diff::blob(history, change.old, change.old_is_blob)?;
                    let after = diff::blob(history, change.new, change.new_is_blob)?;
                    Ok((!diff::is_binary(&before) && !diff::is_binary(&after))
                        .then(|| diff::line_counts(&before, &after)))
                })
                .collect::<Result<Vec<_>, Error>>()?
        } else {
            Vec::new()
        };
        let time = author.time().unwrap_or_default();
        entries.push(Entry {
            id: commit.id.to_string(),
            author_name: author.name.to_string(),
            author_email: author.email.to_string(),
            author_time: time.seconds,
            author_offset: time.offset,
            subject: subject(decoded.message),
            parents: parents.len(),
            changes,
            counts,
            hidden,
        });
    }
    Ok((entries, false))
}

fn parent_tree(history: &History, parent: gix::ObjectId) -> Result<gix::ObjectId, Error> {
    let commit = history
        .repo()
        .find_commit(parent)
        .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))?;
    commit
        .tree_id()
        .map(|id| id.detach())
        .map_err(|e| Error::Repository(format!("cannot read a commit: {e}")))
}

fn contains(haystack: &gix::bstr::BStr, needle: &str) -> bool {
    use gix::bstr::ByteSlice;
    haystack.find(needle.as_bytes()).is_some()
}

/// The first paragraph of a message, its lines joined by spaces (git's
/// `%s`).
pub(crate) fn subject(message: &gix::bstr::BStr) -> String {
    let text = String::from_utf8_lossy(message);
    let text = text.trim_start_matches('\n');
    let paragraph = text.split("\n\n").next().unwrap_or("");
    paragraph
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string()
}
