//! Read-only git history for the history tools: a repository's object
//! database, refs and revisions read with gitoxide (`gix`), never a `git`
//! process, and nothing the repository's configuration names is run.
//!
//! Everything a caller gets back is seen through a [`View`]: the part of the
//! repository its root covers (`scope`, the root's path below the
//! repository's top) and what the deny list hides there. A path outside the
//! scope or hidden never appears, and a hidden file at a revision reads as
//! missing. Paths given and returned are relative to the root.

mod blame;
mod diff;
mod log;
mod show;
mod status;

pub use blame::{BlameLine, blame};
pub use diff::{Change, ChangeKind, unified};
pub use log::{Entry, LogQuery, log};
pub use show::{CommitShow, FileDiff, diff_revisions, show_commit, show_file};
pub use status::{Status, diff_worktree, status};

use std::path::Path;

/// Why a history question has no answer. Messages name root-relative paths
/// and revisions only.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    /// The revision names nothing in this repository.
    BadRevision(String),
    /// No such path at that revision (or one the deny list hides).
    NotFound(String),
    /// A rule of the tool refused the request (a binary file to blame).
    Refused(String),
    /// The repository could not be read (damaged, unsupported format).
    Repository(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadRevision(m)
            | Error::NotFound(m)
            | Error::Refused(m)
            | Error::Repository(m) => f.write_str(m),
        }
    }
}

/// A repository opened for reading history, trusting nothing in it.
pub struct History {
    repo: gix::Repository,
}

impl History {
    /// Opens the git directory `git_dir` as it is (no discovery upwards) with
    /// gitoxide's isolated options: no system, global or user configuration,
    /// no includes, no environment variables, no attributes files, and the
    /// repository's own configuration treated as untrusted (paths and
    /// programs it names are ignored). Nothing this crate calls runs a
    /// program in any case: gitoxide's attributes, filter, blob-diff
    /// pipeline, credentials and fsmonitor features are off, so no
    /// filter, textconv, external diff, pager, hook or fsmonitor path is
    /// reached; and under WASI a process cannot be started at all.
    pub fn open(git_dir: &Path) -> Result<History, Error> {
        let options = gix::open::Options::isolated()
            .open_path_as_is(true)
            .with_enforced_trust(gix::sec::Trust::Reduced);
        let mut repo = gix::open_opts(git_dir, options)
            .map_err(|e| Error::Repository(format!("cannot open the repository: {e}")))?;
        // Caches of our own sizes, whatever the repository's config says:
        // decoded delta bases (a walk decodes the same bases again and
        // again) and whole objects (trees met again), within the guest's
        // memory.
        repo.objects.set_pack_cache(|| {
            Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
                32 << 20,
            ))
        });
        repo.object_cache_size(16 << 20);
        Ok(History { repo })
    }

    pub(crate) fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    /// The id of the commit a revision names.
    pub fn commit_id(&self, rev: &str) -> Result<String, Error> {
        Ok(self.commit(rev)?.id.to_string())
    }

    /// The commit a revision names (`HEAD`, a branch, a tag, an id or its
    /// prefix, `rev~2`...), peeled to a commit.
    pub(crate) fn commit(&self, rev: &str) -> Result<gix::Commit<'_>, Error> {
        let bad = || Error::BadRevision(format!("unknown revision {rev:?}"));
        if rev.is_empty() || rev.starts_with('-') || rev.contains(':') {
            return Err(bad());
        }
        let id = self.repo.rev_parse_single(rev).map_err(|_| bad())?;
        let object = id.object().map_err(|_| bad())?;
        object.peel_to_commit().map_err(|_| bad())
    }
}

/// What of the repository a caller may see.
pub struct View<'a> {
    /// The root's path below the repository's top, `/`-separated, without
    /// leading or trailing slash; empty when the root is the top.
    scope: String,
    /// Whether a root-relative path is hidden (the deny list).
    hidden: &'a dyn Fn(&str) -> bool,
}

impl<'a> View<'a> {
    pub fn new(scope: &str, hidden: &'a dyn Fn(&str) -> bool) -> View<'a> {
        View {
            scope: scope.trim_matches('/').to_string(),
            hidden,
        }
    }

    /// The root-relative form of a repository path, if it lies under the
    /// scope (the scope itself is not a file of it).
    pub fn relative<'p>(&self, repo_path: &'p str) -> Option<&'p str> {
        if self.scope.is_empty() {
            return Some(repo_path);
        }
        repo_path
            .strip_prefix(self.scope.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.is_empty())
    }

    /// The root's path below the repository's top (empty at the top).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// Whether the root lies below the repository's top.
    pub fn has_scope(&self) -> bool {
        !self.scope.is_empty()
    }

    /// The repository path of a root-relative one.
    pub fn in_repo(&self, rel: &str) -> String {
        let rel = rel.trim_matches('/');
        match (self.scope.is_empty(), rel.is_empty() || rel == ".") {
            (true, true) => String::new(),
            (true, false) => rel.to_string(),
            (false, true) => self.scope.clone(),
            (false, false) => format!("{}/{rel}", self.scope),
        }
    }

    /// Whether a root-relative path, or a directory above it, is hidden.
    pub fn is_hidden(&self, rel: &str) -> bool {
        let mut end = 0;
        for part in rel.split('/') {
            end += part.len();
            if (self.hidden)(&rel[..end]) {
                return true;
            }
            end += 1;
        }
        false
    }
}

/// Whether a root-relative path lies at or below `under` (a path filter;
/// empty or "." means everything).
pub(crate) fn under(path: &str, under: &str) -> bool {
    let under = under.trim_matches('/');
    under.is_empty()
        || under == "."
        || path == under
        || path
            .strip_prefix(under)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests;
