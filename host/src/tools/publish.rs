//! The publish of a call's changes, on a guest thread, under the locks of
//! every place they touch: first what a server that stopped part-way left
//! in these roots, then the trash budget for what the call keeps, then the
//! changes (`store::publish`), then the trash index.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Toolbox;
use super::results::disk_failed;
use crate::policy::{Root, Rule, shown};
use crate::runtime::{self, DiskError};
use crate::store::locks::Key;
use crate::store::publish::{self, Published, Refused};
use crate::store::{staging, trash};

/// How often a running server looks for what a server that is gone left in
/// a root it changes (a publish to finish).
const RECOVER_EVERY: Duration = Duration::from_secs(2);

impl Toolbox {
    /// Publishes a call's changes, on a guest thread (file I/O), under the
    /// locks of every place they touch: first what a server that stopped
    /// part-way left in these roots, then the trash budget for what the
    /// call keeps, then the changes, then the trash index.
    pub(super) fn publish(
        &self,
        changes: &runtime::fs::CallChanges,
        id: &str,
        tool: &str,
        estimate: &trash::Needs,
        in_flight: Duration,
    ) -> Result<Published, Stopped> {
        let roots: Vec<Arc<Root>> = changes
            .changes
            .iter()
            .map(|c| Arc::clone(&c.root))
            .collect();
        for root in &roots {
            self.recover_now_and_then(root);
        }
        let mut extra = Vec::new();
        for c in &changes.changes {
            if c.root.trash_max_bytes == 0 {
                continue;
            }
            let keeps = kept_bytes(c);
            let estimated = estimate
                .iter()
                .find(|(r, _)| Arc::ptr_eq(r, &c.root))
                .map_or(0, |(_, n)| *n);
            if keeps > estimated {
                extra.push((Arc::clone(&c.root), keeps - estimated));
            }
        }
        let more = if extra.is_empty() {
            None
        } else {
            Some(
                trash::reserve(&extra, id, in_flight)
                    .map_err(|(root, over)| Stopped::OverBudget { root, over })?,
            )
        };
        let published = publish::publish(&changes.changes, id).map_err(|e| match e {
            Refused::Conflict { root, path } => Stopped::Conflict {
                root,
                path: path.to_string_lossy().into_owned(),
            },
            Refused::Io { root, error } => {
                tracing::error!(root = %root, "a call's changes could not be published: {error}");
                match error.raw_os_error().and_then(DiskError::of_errno) {
                    Some(disk) => Stopped::Disk { root, disk },
                    None => Stopped::Io { root },
                }
            }
        })?;
        trash::record_published(&roots, id, tool, &published);
        if let Some(more) = more {
            more.settle();
        }
        Ok(published)
    }

    /// Sweeps `root`'s staging areas ([`staging::sweep`]) if this server
    /// has not for [`RECOVER_EVERY`]: a publish a server killed part-way
    /// left is finished by the next server to publish in that root, without
    /// a restart, and its kept versions are indexed. Cheap when there is
    /// nothing: a listing of the area.
    fn recover_now_and_then(&self, root: &Arc<Root>) {
        {
            let mut last = self.calls.swept.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            match last.get(&root.name) {
                Some(at) if now.duration_since(*at) < RECOVER_EVERY => return,
                _ => {
                    last.insert(root.name.clone(), now);
                }
            }
        }
        match staging::sweep(root, false) {
            Ok(swept) => {
                for r in &swept.recovered {
                    tracing::warn!(root = %root.name, stamp = %r.stamp, "finished a publish a stopped server left");
                }
                trash::record_recovered(std::slice::from_ref(root), &swept.recovered);
            }
            Err(e) => tracing::warn!(root = %root.name, "cannot clear the staging area: {e}"),
        }
    }
}

/// Why a call's changes were not published.
pub(super) enum Stopped {
    /// What the call saw at `path` changed before its publish.
    Conflict { root: String, path: String },
    /// What it keeps would pass a root's trash budget.
    OverBudget {
        root: String,
        over: trash::OverBudget,
    },
    /// The publish could not be prepared in `root`.
    Io { root: String },
    /// A disk error (a full disk, a read-only one...) in `root`.
    Disk { root: String, disk: DiskError },
    /// The publish's thread panicked (the panic is on stderr).
    Panicked,
}

impl Stopped {
    /// What the model is told, and the rule.
    pub(super) fn told(self) -> (String, Rule) {
        match self {
            Stopped::Conflict { root, path } => (
                format!(
                    "refused by rule '{}': '{}' in root '{root}' was changed by someone else \
                     while the call ran, twice; nothing was changed; read it again",
                    Rule::Conflict,
                    shown(&path)
                ),
                Rule::Conflict,
            ),
            Stopped::OverBudget { root, over } => (
                format!(
                    "{}; nothing was changed. To go on, {}",
                    over.text(&root),
                    trash::OverBudget::WAY_OUT
                ),
                Rule::TrashBudget,
            ),
            Stopped::Disk { root, disk } => (disk_failed(disk, &root), disk.rule()),
            Stopped::Io { root } => (
                format!(
                    "the call's changes could not be published in root '{root}' (the server log \
                     says why); nothing was changed"
                ),
                Rule::Publish,
            ),
            Stopped::Panicked => (
                "the call's changes could not be published; the server log has details".into(),
                Rule::Publish,
            ),
        }
    }
}

/// The path locks a publish of `changes` needs: every place they touch.
pub(super) fn publish_keys(changes: &[publish::Changes]) -> Vec<Key> {
    changes
        .iter()
        .flat_map(|c| {
            c.places().into_iter().map(|rel| Key {
                root: Arc::clone(&c.root),
                rel,
            })
        })
        .collect()
}

/// Whether a lock held on one of `held` covers `key` (the same place or
/// one above it).
pub(super) fn covered(held: &[Key], key: &Key) -> bool {
    held.iter()
        .any(|h| Arc::ptr_eq(&h.root, &key.root) && key.rel.starts_with(&h.rel))
}

/// What publishing `c` keeps in its root's trash, in bytes: each file or
/// link it replaces or removes, each directory it removes whole.
fn kept_bytes(c: &publish::Changes) -> u64 {
    use publish::Kind;
    c.taken
        .iter()
        .filter(|t| !t.moved)
        .map(|t| match t.was.kind {
            Kind::Dir => trash::bytes_at(&c.root.path.join(&t.from)),
            _ => u64::try_from(t.was.size).unwrap_or(0),
        })
        .sum()
}
