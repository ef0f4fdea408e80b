//! Change subscriptions: `notifications/resources/updated` for a subscribed
//! file or directory, `notifications/resources/list_changed` when a root
//! gains or loses entries. Transport-agnostic: a session hands in a
//! [`Notifier`] that sends a [`Change`] its own way (a 2025-era peer, or a
//! 2026-07-28 `subscriptions/listen` sink).
//!
//! A subscription is resolved like a read ([`Toolbox::subscription`]):
//! `resolve()` with the read permission (confinement, the deny list, the
//! session's narrowing), audited, and a URI refused or naming nothing gets
//! the same resource-not-found error as a read. Its real location is what is
//! matched, so a symlink subscribed is told of changes to its target.
//!
//! One inotify watcher (the `notify` crate) serves every session: each
//! readable root watched recursively, symlinks not followed, started by the
//! first session that needs it and closed when the last one ends (its
//! [`Watch`] dropped). An event is filtered before any session hears of it:
//! a path whose root-relative form has a denied component (`.env`, anything
//! under `.git`, the trash) is dropped there, so no notification ever names,
//! or is caused by, a denied path. Then each session matches it against its
//! own subscriptions and narrowing only: over HTTP, a session hears of its
//! own subscriptions and nothing else.
//!
//! Paced per session: a change is sent [`DEBOUNCE`] after the first event
//! that caused it, the events meanwhile coalesced into it (per URI, and one
//! key for list changes), and at most `max_notifications_per_second`
//! changes go out; past that they wait, still coalesced, none dropped.
//! A session subscribes to at most `max_subscriptions` URIs.
//!
//! Not watched: what lies under a symlinked directory (its target may be
//! anywhere). A directory the server cannot read, or inotify's per-user
//! watch limit, ends the walk of that root where it was met: the rest of
//! the root stays quiet, and stderr says why.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use rmcp::ErrorData;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Toolbox;
use super::resources::not_found;
use super::resources::{ResourceContext, parse_uri};
use super::results::clip;
use crate::policy::{Narrowing, Root, Rule};
use crate::policy::{Permission, resolve};
use crate::store::audit::Record;

/// The least time between the first event of a change and its notification:
/// a save (open, write, close, rename) is one change.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// What a session is told.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// A subscribed resource (this URI, as the client subscribed it) changed.
    Updated(String),
    /// A readable root gained or lost an entry.
    ListChanged,
}

/// Sends a change to the session's client; `false` once the client is gone.
pub type Notifier = Box<dyn Fn(Change) -> BoxFuture<'static, bool> + Send + Sync>;

/// Where a subscription points: its root and real root-relative path.
#[derive(Clone, Debug)]
pub struct Target {
    root: String,
    real: PathBuf,
    dir: bool,
}

#[derive(Default)]
struct Interest {
    subscriptions: HashMap<String, Target>,
    list_changes: bool,
    narrowing: Option<Arc<Narrowing>>,
}

impl Interest {
    fn admits(&self, root: &str, rel: &Path) -> bool {
        self.narrowing.as_ref().is_none_or(|n| n.admits(root, rel))
    }
}

/// One session's side of the watcher.
#[derive(Default)]
struct Session {
    interest: Mutex<Interest>,
    dirty: Mutex<HashSet<Change>>,
    wake: Notify,
}

impl Session {
    /// An event at `rel` in `root` (not denied); `names` when an entry
    /// appeared, went or was renamed.
    fn note(&self, root: &Root, rel: &Path, names: bool) {
        let Ok(interest) = self.interest.lock() else {
            return;
        };
        if !interest.admits(&root.name, rel) {
            return;
        }
        let mut changes = Vec::new();
        if names && interest.list_changes {
            changes.push(Change::ListChanged);
        }
        for (uri, target) in &interest.subscriptions {
            let hit = target.root == root.name
                && (target.real == rel || (target.dir && rel.parent() == Some(&target.real)));
            if hit {
                changes.push(Change::Updated(uri.clone()));
            }
        }
        drop(interest);
        if changes.is_empty() {
            return;
        }
        if let Ok(mut dirty) = self.dirty.lock() {
            dirty.extend(changes);
        }
        self.wake.notify_one();
    }
}

type Sessions = Arc<Mutex<Vec<Weak<Session>>>>;

/// The server's one watcher and the sessions it tells.
pub(super) struct Hub {
    sessions: Sessions,
    _watcher: Mutex<RecommendedWatcher>,
}

impl Hub {
    /// Watches every readable root (blocking: the watcher walks them).
    fn start(roots: Vec<Arc<Root>>) -> Result<Hub, notify::Error> {
        let sessions: Sessions = Arc::default();
        let told = Arc::clone(&sessions);
        let seen = roots.clone();
        let mut watcher = RecommendedWatcher::new(
            move |event: notify::Result<notify::Event>| match event {
                Ok(event) => dispatch(&seen, &told, &event),
                Err(e) => tracing::warn!("watching the roots: {e}"),
            },
            notify::Config::default().with_follow_symlinks(false),
        )?;
        for root in &roots {
            if let Err(e) = watcher.watch(&root.path, RecursiveMode::Recursive) {
                // Part of the root may be watched: subscriptions there work,
                // the rest is quiet. The operator reads why on stderr.
                tracing::warn!(root = %root.name, "cannot watch all of the root: {e}");
            }
        }
        Ok(Hub {
            sessions,
            _watcher: Mutex::new(watcher),
        })
    }
}

/// Hands one event to the sessions, unless it names a denied path.
fn dispatch(roots: &[Arc<Root>], sessions: &Mutex<Vec<Weak<Session>>>, event: &notify::Event) {
    let names = matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
    );
    // Opens and reads (the guests' own among them) change nothing.
    let changed = names
        || matches!(
            event.kind,
            EventKind::Modify(_) | EventKind::Access(AccessKind::Close(AccessMode::Write))
        );
    if !changed {
        return;
    }
    let live: Vec<Arc<Session>> = match sessions.lock() {
        Ok(mut list) => {
            list.retain(|s| s.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        }
        Err(_) => return,
    };
    for path in &event.paths {
        // Roots never nest (the config refuses it): one root at most.
        let Some((root, rel)) = roots
            .iter()
            .find_map(|r| path.strip_prefix(&r.path).ok().map(|rel| (r, rel)))
        else {
            continue;
        };
        let plain = rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || rel.as_os_str().is_empty() || root.deny.match_path(rel).is_some() {
            continue;
        }
        for session in &live {
            session.note(root, rel, names);
        }
    }
}

/// One session's subscriptions; dropping it ends them (and the watcher
/// with the last session).
pub struct Watch {
    toolbox: Arc<Toolbox>,
    session: Arc<Session>,
    _hub: Arc<Hub>,
    _stop: tokio_util::sync::DropGuard,
}

impl Watch {
    /// Subscribes to `uri` (idempotent). A URI `resolve()` refuses, or that
    /// names nothing, is not found, as for a read.
    pub fn subscribe(&self, uri: &str, resource_cx: &ResourceContext) -> Result<(), ErrorData> {
        let target =
            self.toolbox
                .subscription(uri, resource_cx.narrowing.as_deref(), resource_cx)?;
        let max = self.toolbox.config.limits.max_subscriptions as usize;
        let mut interest = self
            .session
            .interest
            .lock()
            .map_err(|_| ErrorData::internal_error("subscriptions unavailable", None))?;
        if !interest.subscriptions.contains_key(uri) && interest.subscriptions.len() >= max {
            return Err(ErrorData::invalid_params(
                format!(
                    "refused by rule '{}': this session is subscribed to {max} resources \
                     already; unsubscribe from one first",
                    Rule::MaxSubscriptions
                ),
                None,
            ));
        }
        interest.subscriptions.insert(uri.to_string(), target);
        Ok(())
    }

    /// Ends a subscription; one never made is no error.
    pub fn unsubscribe(&self, uri: &str) {
        if let Ok(mut interest) = self.session.interest.lock() {
            interest.subscriptions.remove(uri);
        }
    }

    /// From now on the session hears when a root gains or loses entries.
    pub fn hear_list_changes(&self) {
        if let Ok(mut interest) = self.session.interest.lock() {
            interest.list_changes = true;
        }
    }

    /// Restricts what the session hears to `narrowing`; subscriptions
    /// outside it go quiet (and stay refused to new subscribers).
    pub fn narrow(&self, narrowing: Option<Arc<Narrowing>>) {
        if let Ok(mut interest) = self.session.interest.lock() {
            interest.narrowing = narrowing;
        }
    }

    /// How many URIs the session is subscribed to.
    pub fn subscriptions(&self) -> usize {
        self.session
            .interest
            .lock()
            .map(|i| i.subscriptions.len())
            .unwrap_or(0)
    }
}

impl Toolbox {
    /// A new session's watch, its changes sent through `notifier`; starts
    /// the watcher if no session has it running.
    pub async fn watch(self: &Arc<Self>, notifier: Notifier) -> Result<Watch, ErrorData> {
        let hub = {
            let mut slot = self.hub.lock().await;
            match slot.upgrade() {
                Some(hub) => hub,
                None => {
                    let roots: Vec<Arc<Root>> = self
                        .config
                        .roots
                        .iter()
                        .filter(|r| r.perms.contains(Permission::Read))
                        .cloned()
                        .collect();
                    let hub = tokio::task::spawn_blocking(move || Hub::start(roots))
                        .await
                        .map_err(|_| ErrorData::internal_error("the watcher failed", None))?
                        .map_err(|e| {
                            tracing::warn!("cannot start watching the roots: {e}");
                            ErrorData::internal_error(
                                "changes cannot be watched on this server (see its log)",
                                None,
                            )
                        })?;
                    let hub = Arc::new(hub);
                    *slot = Arc::downgrade(&hub);
                    hub
                }
            }
        };
        let session = Arc::new(Session::default());
        if let Ok(mut sessions) = hub.sessions.lock() {
            sessions.push(Arc::downgrade(&session));
        }
        let stop = CancellationToken::new();
        tokio::spawn(pace(
            Arc::clone(&session),
            notifier,
            self.config.limits.max_notifications_per_second,
            stop.clone(),
        ));
        Ok(Watch {
            toolbox: Arc::clone(self),
            session,
            _hub: hub,
            _stop: stop.drop_guard(),
        })
    }

    /// What `uri` subscribes to: resolved like a read, audited as
    /// `resources/subscribe`.
    pub fn subscription(
        &self,
        uri: &str,
        narrowing: Option<&Narrowing>,
        resource_cx: &ResourceContext,
    ) -> Result<Target, ErrorData> {
        let Some((root, path)) = parse_uri(uri) else {
            return Err(not_found(uri));
        };
        let client = resource_cx.client.as_deref();
        let (root_c, path_c) = (clip(&root), clip(&path));
        let record = Record::new("resources/subscribe", &root_c, &path_c, Permission::Read);
        let resolved = resolve(&self.config.roots, &root, &path, Permission::Read)
            .and_then(|r| narrowing.map_or(Ok(()), |n| n.check(&r)).map(|()| r));
        match resolved {
            Err(denial) => {
                self.audit.log(&record.denied(denial.rule).client(client));
                Err(not_found(uri))
            }
            Ok(r) if !r.exists() => Err(not_found(uri)),
            Ok(r) => {
                self.audit.log(&record.client(client));
                let dir =
                    std::fs::metadata(r.root().path.join(r.real_rel())).is_ok_and(|m| m.is_dir());
                Ok(Target {
                    root: r.root().name.clone(),
                    real: r.real_rel().to_path_buf(),
                    dir,
                })
            }
        }
    }
}

/// Sends the session's changes: each [`DEBOUNCE`] after its first event,
/// within the per-second budget, until the session's watch is dropped or
/// its client is gone.
async fn pace(session: Arc<Session>, notifier: Notifier, per_second: u32, stop: CancellationToken) {
    let mut due: HashMap<Change, Instant> = HashMap::new();
    let mut budget = Budget::new(per_second);
    loop {
        let next = due.values().min().copied();
        tokio::select! {
            () = stop.cancelled() => return,
            () = session.wake.notified() => {
                let fresh: Vec<Change> = session
                    .dirty
                    .lock()
                    .map(|mut d| d.drain().collect())
                    .unwrap_or_default();
                let at = Instant::now() + DEBOUNCE;
                for change in fresh {
                    due.entry(change).or_insert(at);
                }
            }
            () = sleep_until(next) => {
                let now = Instant::now();
                let ready: Vec<Change> = due
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(c, _)| c.clone())
                    .collect();
                for change in ready {
                    match budget.take(now) {
                        Ok(()) => {
                            due.remove(&change);
                            if !notifier(change).await {
                                return;
                            }
                        }
                        Err(wait) => {
                            due.insert(change, now + wait);
                        }
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A token bucket: `rate` a second, as many at once.
struct Budget {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl Budget {
    fn new(rate: u32) -> Budget {
        let rate = f64::from(rate.max(1));
        Budget {
            rate,
            tokens: rate,
            last: Instant::now(),
        }
    }

    /// Takes one token, or says how long until there is one.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_gives_its_rate_then_waits() {
        let start = Instant::now();
        let mut budget = Budget::new(3);
        budget.last = start;
        for _ in 0..3 {
            assert_eq!(budget.take(start), Ok(()));
        }
        let wait = budget.take(start).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(334));
        assert_eq!(budget.take(start + Duration::from_millis(400)), Ok(()));
    }

    fn root(dir: &Path) -> Root {
        Root::workspace_for_tests("r", dir)
    }

    #[test]
    fn a_session_hears_only_its_subscriptions_and_never_a_denied_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = root(dir.path());
        let session = Session::default();
        {
            let mut interest = session.interest.lock().unwrap();
            let target = |real: &str, dir: bool| Target {
                root: "r".into(),
                real: real.into(),
                dir,
            };
            interest
                .subscriptions
                .insert("loomfs://r/a.txt".into(), target("a.txt", false));
            interest
                .subscriptions
                .insert("loomfs://r/sub".into(), target("sub", true));
        }
        session.note(&root, Path::new("b.txt"), false);
        session.note(&root, Path::new("sub/deep/x"), true);
        assert!(session.dirty.lock().unwrap().is_empty());
        session.note(&root, Path::new("a.txt"), false);
        session.note(&root, Path::new("sub/new"), true);
        let dirty = session.dirty.lock().unwrap().clone();
        assert_eq!(
            dirty,
            HashSet::from([
                Change::Updated("loomfs://r/a.txt".into()),
                Change::Updated("loomfs://r/sub".into()),
            ])
        );
        // List changes only once asked for, and only for names.
        session.dirty.lock().unwrap().clear();
        session.interest.lock().unwrap().list_changes = true;
        session.note(&root, Path::new("c.txt"), false);
        assert!(session.dirty.lock().unwrap().is_empty());
        session.note(&root, Path::new("c.txt"), true);
        assert!(session.dirty.lock().unwrap().contains(&Change::ListChanged));

        // dispatch drops denied paths before any session sees them.
        session.dirty.lock().unwrap().clear();
        let session = Arc::new(session);
        let sessions = Mutex::new(vec![Arc::downgrade(&session)]);
        let roots = vec![Arc::new(root)];
        let event = |p: &str| {
            notify::Event::new(EventKind::Create(notify::event::CreateKind::File))
                .add_path(dir.path().join(p))
        };
        dispatch(&roots, &sessions, &event(".env"));
        dispatch(&roots, &sessions, &event(".git/index"));
        dispatch(&roots, &sessions, &event("../outside"));
        assert!(session.dirty.lock().unwrap().is_empty());
        dispatch(&roots, &sessions, &event("ok.txt"));
        assert!(session.dirty.lock().unwrap().contains(&Change::ListChanged));
    }
}
