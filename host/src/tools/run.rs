//! One call from its instance to its result: limits, mounts, the guest's
//! run, its result, the publish of what it changed, the audit lines. The
//! only place a component is called; it never resolves a path (`prepare`
//! has).
//!
//! A call is a transaction: the guest's changes are staged while it runs
//! (the policing filesystem's overlay), its result is judged, and only a
//! call whose result is a success is published, with the path locks of
//! every place it changed (taken now if its own did not cover them). What
//! the call saw having changed meanwhile (someone else's write), nothing is
//! published and the call runs once more on the new state, holding those
//! locks; a second conflict refuses it, naming the path.

use super::*;
use crate::store::publish::{self, Published, Refused};

/// How many times a call runs when what it saw changes before its publish.
const ATTEMPTS: u32 = 2;

/// How often a running server looks for what a server that is gone left in
/// a root it changes (a publish to finish).
const RECOVER_EVERY: Duration = Duration::from_secs(2);

impl Toolbox {
    pub(super) async fn run(self: &Arc<Self>, call: Run<'_>) -> CallReport {
        let Run {
            tool,
            index,
            paths,
            resolved,
            arguments,
            id,
            control,
            locked,
            waits_until,
        } = call;
        let mounts = call_mounts(&resolved, paths, &control);
        let client = control.client;
        let client = client.as_deref();
        let activity = Arc::clone(&control.activity);
        let limits = &self.config.limits;
        let changes_anything = resolved.iter().any(|r| r.op() != Permission::Read);
        let request = CallRequest {
            mounts,
            limits: GuestLimits {
                max_entries: limits.max_list_entries,
                max_results: limits.max_search_results,
                max_search_bytes: limits.max_search_bytes,
            },
            arguments: Value::Object(arguments).to_string(),
            staging: changes_anything.then(|| Arc::clone(&self.staging)),
            cancel: control.cancel,
            activity: control.activity,
            quota: self.quota.clone(),
        };
        if let Some(q) = &self.quota
            && let Err(empty) = q.ready(request.arguments.len() as u64)
        {
            self.audit_refused(tool, &resolved, Rule::Quota, client);
            return CallReport::failed(
                format!(
                    "refused by rule '{}': the byte quota is used up ({}); {}",
                    Rule::Quota,
                    quota_figures(q),
                    quota::retry_text(empty.retry_after)
                ),
                Some(Rule::Quota),
            );
        }
        if let Err((root, short)) = reserve_kept(&resolved, request.arguments.len() as u64) {
            self.audit_refused(tool, &resolved, Rule::Reserve, client);
            return CallReport::failed(
                format!(
                    "{}; nothing was written. To go on, {}",
                    short.text(&root),
                    space::Short::WAY_OUT
                ),
                Some(Rule::Reserve),
            );
        }
        // Room in each root's trash for what the call would keep, as its
        // arguments tell (not asked where no root it changes has a
        // budget); what it really keeps is reckoned at its publish.
        let estimate = kept_estimate(&resolved, paths);
        let budgeted = estimate.iter().any(|(r, _)| r.trash_max_bytes > 0);
        let in_flight = trash::in_flight(limits.tool_timeout);
        let slot = match self.slots.take(&request.cancel, waits_until).await {
            Ok(slot) => slot,
            Err(e) => {
                let rule = match e {
                    SlotError::Busy { .. } => Rule::Busy,
                    SlotError::Cancelled => Rule::Cancelled,
                };
                self.audit_refused(tool, &resolved, rule, client);
                return CallReport::failed(e.to_string(), Some(rule));
            }
        };
        let slot = Arc::new(slot);
        // The call's duration is its guest's, not its wait for a slot.
        let started = Instant::now();
        let built_in = self.runtime.tools()[index].is_built_in();
        let mut locked = Some(locked);
        let mut held = lock_keys(&resolved);
        let mut reservation: Option<trash::Reservation> = None;
        let mut reran: Option<(String, String)> = None;
        let request = Arc::new(request);
        let mut attempt = 1;
        let (ended, published) = loop {
            let this = Arc::clone(self);
            let req = Arc::clone(&request);
            let reserve = (budgeted && reservation.is_none()).then(|| estimate.clone());
            let id_now = id.clone();
            let slot_held = Arc::clone(&slot);
            // The spent instance is dropped after the answer, on the same
            // thread (its memory reset, off the answer's path); the slot
            // travels with the guest.
            let ran = self
                .guests
                .run_then(move || {
                    let reserved = match reserve {
                        Some(needs) => match trash::reserve(&needs, &id_now, in_flight) {
                            Ok(r) => Some(r),
                            Err(over) => {
                                return (Err(over), (runtime::FinishedInstance::none(), slot_held));
                            }
                        },
                        None => None,
                    };
                    let (outcome, spent) = this
                        .runtime
                        .call_keeping_instance(index, req.as_ref().clone());
                    (Ok((outcome, reserved)), (spent, slot_held))
                })
                .await;
            let (outcome, reserved) = match ran {
                Ok(Ok(done)) => done,
                Ok(Err((root, over))) => {
                    self.audit_refused(tool, &resolved, Rule::TrashBudget, client);
                    return CallReport::failed(
                        format!(
                            "{}; nothing was changed. To go on, {}",
                            over.text(&root),
                            trash::OverBudget::WAY_OUT
                        ),
                        Some(Rule::TrashBudget),
                    );
                }
                Err(_) => {
                    // Its thread dropped the answer: the guest's side
                    // panicked (the panic is on stderr).
                    tracing::error!(tool, "tool call panicked");
                    return CallReport::failed(
                        "the tool failed unexpectedly; the server log has details; nothing was \
                         changed"
                            .into(),
                        None,
                    );
                }
            };
            if reserved.is_some() {
                reservation = reserved;
            }
            let mut ended = self.judge(tool, index, outcome, &activity, built_in);
            let changes = std::mem::replace(&mut ended.changes, runtime::fs::CallChanges::none());
            if ended.result.is_error == Some(true) || changes.is_empty() {
                break (ended, None);
            }
            // Every place the call changed must be locked for its publish:
            // a third-party tool writes where it likes, and a patch's paths
            // sit in its text.
            let wanted = publish_keys(&changes.changes);
            if !wanted.iter().all(|k| covered(&held, k)) {
                drop(locked.take());
                let mut all = held.clone();
                all.extend(wanted.into_iter().filter(|k| !covered(&held, k)));
                match self
                    .locks
                    .lock(all.clone(), waits_until, &request.cancel)
                    .await
                {
                    Ok(now) => {
                        locked = Some(now);
                        held = all;
                    }
                    Err(e) => {
                        let rule = match e {
                            LockError::Busy { .. } => Rule::Locked,
                            LockError::Cancelled => Rule::Cancelled,
                            LockError::NoDescriptors => Rule::Descriptors,
                        };
                        ended.result = error_result(format!("{e}; nothing was changed"));
                        ended.stopped = Some(rule);
                        break (ended, None);
                    }
                }
            }
            let this = Arc::clone(self);
            let (id_now, tool_name) = (id.clone(), tool.to_string());
            let estimate_now = estimate.clone();
            let done = self
                .guests
                .run_then(move || {
                    let published =
                        this.publish(&changes, &id_now, &tool_name, &estimate_now, in_flight);
                    (published, changes)
                })
                .await;
            match done {
                Ok(Ok(published)) => break (ended, Some(published)),
                Ok(Err(Stopped::Conflict { root, path })) if attempt < ATTEMPTS => {
                    // Again on the new state, holding every lock its
                    // publish needed.
                    attempt += 1;
                    reran = Some((root, path));
                    continue;
                }
                Ok(Err(stop)) => {
                    let (text, rule) = stop.told();
                    ended.result = error_result(text);
                    ended.stopped = Some(rule);
                    break (ended, None);
                }
                Err(_) => {
                    tracing::error!(tool, "a publish panicked");
                    ended.result = error_result(
                        "the call's changes could not be published; the server log has details"
                            .into(),
                    );
                    ended.stopped = Some(Rule::Publish);
                    break (ended, None);
                }
            }
        };
        // What it kept is counted before its locks go.
        if let Some(reservation) = reservation {
            reservation.settle();
        }
        drop(locked);
        let elapsed = started.elapsed();
        let Ended {
            mut result,
            bytes,
            stopped,
            path_missing,
            refusals,
            ..
        } = ended;
        if let Some(published) = &published {
            note_kept(&mut result, published, &resolved);
        }
        if let Some((root, path)) = &reran {
            note_reran(&mut result, root, path);
        }
        self.audit_call(
            tool,
            index,
            &resolved,
            &id,
            (client, elapsed, bytes, stopped),
            published.as_ref(),
            &refusals,
        );
        // A limit that stopped the call, else the first rule the policing
        // filesystem applied (the guest may have gone on without it).
        let rule = stopped.or_else(|| refusals.first().map(|r| r.rule));
        CallReport {
            result,
            rule,
            path_missing,
        }
    }

    /// The call's result from its guest's outcome, before anything is
    /// published: a call the host stopped, or whose result it refuses, or
    /// that met a limit on the way, is an error and publishes nothing.
    fn judge(
        &self,
        tool: &str,
        index: usize,
        outcome: runtime::CallOutcome,
        activity: &Activity,
        built_in: bool,
    ) -> Ended {
        let out_of_quota = activity.out_of_quota();
        let out_of_descriptors = activity.out_of_descriptors();
        // A disk error says what happened only where the call failed: a tool
        // that met one and went another way still did what it says. A call
        // cancelled or out of time says so.
        let disk = activity.disk_error().filter(|_| {
            matches!(&outcome.result, Err(e)
                if !matches!(e, CallError::Cancelled | CallError::Timeout(_)))
        });
        // The host's bound on what one call stages: refused at the
        // operation, and the call's answer, whatever the tool made of it.
        let staged_too_much = outcome
            .refusals
            .iter()
            .find(|r| r.rule == Rule::Overlay)
            .map(|r| r.root.clone());
        let stopped = match &outcome.result {
            _ if out_of_quota => Some(Rule::Quota),
            _ if staged_too_much.is_some() => Some(Rule::Overlay),
            _ if out_of_descriptors => Some(Rule::Descriptors),
            _ if disk.is_some() => disk.as_ref().map(|(e, _)| e.rule()),
            Err(CallError::Cancelled) => Some(Rule::Cancelled),
            Err(CallError::Timeout(_)) => Some(Rule::Timeout),
            Err(CallError::Memory(_)) => Some(Rule::Memory),
            Err(CallError::Crashed(_)) => Some(Rule::Crashed),
            Err(CallError::OutputTooLarge(_)) => Some(Rule::Output),
            _ => None,
        };
        // A path the tool found missing (a denied name answers as a missing
        // one in the policing filesystem, so it is among these).
        let path_missing = matches!(
            &outcome.result,
            Err(CallError::Tool(ToolError::NotFound(_)))
        );
        let (result, bytes) = match (outcome.result, &self.quota, &disk) {
            (_, Some(q), _) if out_of_quota => (error_result(ran_out_of_quota(q, activity)), 0),
            _ if let Some(root) = &staged_too_much => (error_result(overlay_full(root)), 0),
            // Whatever the tool made of it: a search would have skipped a
            // directory, and its result would look complete.
            _ if out_of_descriptors => {
                tracing::warn!(
                    tool,
                    "a call found no file descriptor free (EMFILE): calls and connections hold \
                     them all; see the descriptor limit on the start-up lines"
                );
                (error_result(ran_out_of_descriptors()), 0)
            }
            (_, _, Some((error, root))) => {
                tracing::warn!(tool, root = %root, "a call met a disk error: {error:?}");
                (error_result(disk_failed(*error, root)), 0)
            }
            (Ok(output), _, _) => {
                let limit = self
                    .entry(tool)
                    .map_or(self.config.limits.max_output_bytes, |e| e.output_bytes);
                to_result(tool, output, limit, built_in)
            }
            (Err(e), _, _) => {
                let server = &self.config.limits;
                let entry_limit = match &e {
                    CallError::Timeout(limit) => *limit < server.tool_timeout,
                    CallError::Memory(limit) => *limit < server.tool_memory_bytes,
                    CallError::OutputTooLarge(limit) => *limit < server.max_output_bytes,
                    _ => false,
                };
                let text = call_error_text(tool, e, built_in, entry_limit);
                (error_result(text), 0)
            }
        };
        let _ = index;
        Ended {
            result,
            bytes,
            stopped,
            path_missing,
            refusals: outcome.refusals,
            changes: outcome.changes,
        }
    }

    /// Publishes a call's changes, on a guest thread (file I/O), under the
    /// locks of every place they touch: first what a server that stopped
    /// part-way left in these roots, then the trash budget for what the
    /// call keeps, then the changes, then the trash index.
    fn publish(
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
            let mut last = self.swept.lock().unwrap_or_else(|p| p.into_inner());
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

    /// The audit lines of a call: one for each path it resolved (with what
    /// was kept of it), one for each other place it changed, one for each
    /// refusal of the policing filesystem.
    fn audit_call(
        &self,
        tool: &str,
        index: usize,
        resolved: &[Resolved],
        id: &str,
        (client, elapsed, bytes, stopped): (Option<&str>, Duration, u64, Option<Rule>),
        published: Option<&Published>,
        refusals: &[runtime::fs::Refusal],
    ) {
        let kept_of = |root: &str, path: &Path| -> Vec<&str> {
            published.map_or_else(Vec::new, |p| {
                p.kept
                    .iter()
                    .filter(|k| k.root == root && Path::new(&k.from) == path)
                    .map(|k| k.to.as_str())
                    .collect()
            })
        };
        let mut named: Vec<(&str, PathBuf)> = Vec::new();
        for r in resolved {
            let path = clip(r.requested());
            // The guest keeps the entry it was asked about (a symlink itself),
            // the host resolved its target: either may be what was kept.
            let asked = lexical(r.requested()).unwrap_or_default();
            let mut kept = kept_of(&r.root().name, r.real_rel());
            if kept.is_empty() {
                kept = kept_of(&r.root().name, &asked);
            }
            named.push((&r.root().name, r.real_rel().to_path_buf()));
            named.push((&r.root().name, asked));
            self.audit.log(
                &self
                    .record(tool, &r.root().name, &path, r.op())
                    .client(client)
                    .took(elapsed, bytes)
                    .kept(&kept)
                    .stopped(stopped)
                    .call(Some(id)),
            );
        }
        // Places the call changed that no argument named (a third-party
        // tool's own files, a patch's).
        if let Some(p) = published {
            let mut others: Vec<(&str, &str, Permission)> = Vec::new();
            for k in &p.kept {
                if !named
                    .iter()
                    .any(|(r, n)| *r == k.root && n == Path::new(&k.from))
                {
                    others.push((&k.root, &k.from, Permission::Delete));
                }
            }
            for put in &p.put {
                let at = put.moved_from.as_deref().unwrap_or(&put.at);
                if !named
                    .iter()
                    .any(|(r, n)| *r == put.root && (n == Path::new(&put.at) || n == Path::new(at)))
                    && !others
                        .iter()
                        .any(|(r, f, _)| *r == put.root && *f == put.at)
                {
                    others.push((&put.root, &put.at, Permission::Write));
                }
            }
            for (root, path, op) in others {
                let kept = kept_of(root, Path::new(path));
                self.audit.log(
                    &self
                        .record(tool, root, &clip(path), op)
                        .client(client)
                        .kept(&kept)
                        .call(Some(id)),
                );
            }
            for d in &p.displaced {
                let to = [d.to.as_str()];
                self.audit.log(
                    &self
                        .record(tool, &d.root, &clip(&d.from), Permission::Write)
                        .client(client)
                        .kept(&to)
                        .denied(Rule::ChangedMeanwhile)
                        .call(Some(id)),
                );
            }
        }
        if resolved.is_empty() {
            // No path resolved (a tool without path arguments, or a list
            // whose every path was refused): one line for the call itself.
            let op = self.runtime.tools()[index].descriptor.permission.into();
            self.audit.log(
                &self
                    .record(tool, "", "", op)
                    .client(client)
                    .took(elapsed, bytes)
                    .stopped(stopped)
                    .call(Some(id)),
            );
        }
        for refusal in refusals {
            self.audit.log(
                &self
                    .record(tool, &refusal.root, &clip(&refusal.path), refusal.op)
                    .client(client)
                    .denied(refusal.rule)
                    .call(Some(id)),
            );
        }
    }
}

/// A call's outcome, judged.
struct Ended {
    result: CallToolResult,
    bytes: u64,
    /// The limit that stopped it, if one did.
    stopped: Option<Rule>,
    path_missing: bool,
    refusals: Vec<runtime::fs::Refusal>,
    changes: runtime::fs::CallChanges,
}

/// Why a call's changes were not published.
enum Stopped {
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
}

impl Stopped {
    /// What the model is told, and the rule.
    fn told(self) -> (String, Rule) {
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
        }
    }
}

/// The mounts of a call: each root it resolved a path on, with the most
/// it does there and the paths it was asked to delete.
fn call_mounts(resolved: &[Resolved], paths: &[PathArg], control: &Control) -> Vec<CallMount> {
    let mut mounts: Vec<CallMount> = Vec::new();
    for (i, r) in resolved.iter().enumerate() {
        let declared_path = paths.get(i).is_none_or(|p| !p.path_field.is_empty());
        let deletes = (r.op() == Permission::Delete && declared_path && !r.is_root())
            .then(|| r.real_rel().to_path_buf());
        match mounts.iter_mut().find(|m| m.root.name == r.root().name) {
            Some(m) => {
                m.op = m.op.max(r.op());
                m.deletes.extend(deletes);
            }
            None => mounts.push(CallMount {
                root: Arc::clone(r.root()),
                op: r.op(),
                deletes: deletes.into_iter().collect(),
                // The guest is held to the client roots too, not only
                // the paths it was given: a component may open others.
                area: control.narrowing.as_ref().and_then(|n| {
                    Area::of(n.areas_of(&r.root().name).map(Path::to_path_buf).collect())
                }),
            }),
        }
    }
    mounts
}

/// The path locks a publish of `changes` needs: every place they touch.
fn publish_keys(changes: &[crate::store::publish::Changes]) -> Vec<Key> {
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
fn covered(held: &[Key], key: &Key) -> bool {
    held.iter()
        .any(|h| Arc::ptr_eq(&h.root, &key.root) && key.rel.starts_with(&h.rel))
}

/// What publishing `c` keeps in its root's trash, in bytes: each file or
/// link it replaces or removes, each directory it removes whole.
fn kept_bytes(c: &crate::store::publish::Changes) -> u64 {
    use crate::store::publish::Kind;
    c.taken
        .iter()
        .filter(|t| !t.moved)
        .map(|t| match t.was.kind {
            Kind::Dir => trash::bytes_at(&c.root.path.join(&t.from)),
            _ => u64::try_from(t.was.size).unwrap_or(0),
        })
        .sum()
}

/// One call on its way to its guest: resolved, locked and given its id.
pub(super) struct Run<'a> {
    pub(super) tool: &'a str,
    pub(super) index: usize,
    /// The tool's declared path arguments, in the order of `resolved`.
    pub(super) paths: &'a [PathArg],
    pub(super) resolved: Vec<Resolved>,
    pub(super) arguments: JsonObject,
    /// The call's id, also the name of its trash entry.
    pub(super) id: String,
    pub(super) control: Control,
    pub(super) locked: Locked,
    /// When waiting for a slot must end (the locks took their part).
    pub(super) waits_until: tokio::time::Instant,
}
