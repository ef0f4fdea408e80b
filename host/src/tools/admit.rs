//! Admission, after the locks and before the guest: the byte quota, each
//! written root's reserve, what the call would keep against the trash
//! budgets, and a call slot. A refusal here is audited and ends the call
//! before any component starts.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Toolbox;
use super::prepare::lock_keys;
use super::report::EarlyEnd;
use super::results::quota_figures;
use super::run::Run;
use super::slots::{Slot, SlotError};
use crate::policy::normalise_lexically;
use crate::policy::{PathArg, Permission, Resolved, Root, Rule};
use crate::runtime::CallRequest;
use crate::store::locks::{Key, Locked};
use crate::store::{quota, trash};
use crate::sys::space;

/// A call admitted to run: its request, its slot, its locks, and what it
/// may keep in the trash.
pub(super) struct Admitted {
    pub(super) request: Arc<CallRequest>,
    /// Travels with the guest, to be given back with its instance.
    pub(super) slot: Arc<Slot>,
    /// The path locks held, and the places they cover.
    pub(super) locked: Option<Locked>,
    pub(super) held: Vec<Key>,
    /// When waiting for locks must end (at a publish that needs more).
    pub(super) waits_until: tokio::time::Instant,
    /// What the call would keep in each root it changes, as its arguments
    /// tell, and whether any of those roots has a budget to reserve it in.
    pub(super) estimate: trash::Needs,
    pub(super) budgeted: bool,
    /// The room reserved in those budgets, once the guest first ran.
    pub(super) reservation: Option<trash::Reservation>,
    /// How long a reservation stays counted without its call settling it.
    pub(super) in_flight: Duration,
    /// When the call began to run: its duration is its guest's, not its
    /// wait for a slot.
    pub(super) started: Instant,
}

impl Toolbox {
    /// Admits `call`, holding `locked`: the quota, the reserve, a slot
    /// (waited for until `waits_until`).
    pub(super) async fn admit(
        &self,
        call: &Run<'_>,
        locked: Locked,
        waits_until: tokio::time::Instant,
    ) -> Result<Admitted, EarlyEnd> {
        let request = call.request(self);
        let arguments = request.arguments.len() as u64;
        self.check_quota(call, arguments)?;
        self.check_reserve(call, arguments)?;
        // Room in each root's trash for what the call would keep, as its
        // arguments tell (not asked where no root it changes has a
        // budget); what it really keeps is reckoned at its publish.
        let estimate = kept_estimate(&call.resolved, call.paths);
        let budgeted = estimate.iter().any(|(r, _)| r.trash_max_bytes > 0);
        let slot = match self.calls.slots.take(&request.cancel, waits_until).await {
            Ok(slot) => slot,
            Err(e) => {
                let rule = match e {
                    SlotError::Busy { .. } => Rule::Busy,
                    SlotError::Cancelled => Rule::Cancelled,
                };
                self.audit_refused(call.tool, &call.resolved, rule, call.client());
                return Err(EarlyEnd::new(e.to_string(), Some(rule)));
            }
        };
        Ok(Admitted {
            request: Arc::new(request),
            slot: Arc::new(slot),
            locked: Some(locked),
            held: lock_keys(&call.resolved),
            waits_until,
            estimate,
            budgeted,
            reservation: None,
            in_flight: trash::in_flight(self.config.limits.tool_timeout),
            started: Instant::now(),
        })
    }

    /// The byte quota has room for the call's arguments.
    fn check_quota(&self, call: &Run<'_>, arguments: u64) -> Result<(), EarlyEnd> {
        let Some(q) = &self.calls.quota else {
            return Ok(());
        };
        let Err(empty) = q.ready(arguments) else {
            return Ok(());
        };
        self.audit_refused(call.tool, &call.resolved, Rule::Quota, call.client());
        Err(EarlyEnd::new(
            format!(
                "refused by rule '{}': the byte quota is used up ({}); {}",
                Rule::Quota,
                quota_figures(q),
                quota::retry_text(empty.retry_after)
            ),
            Some(Rule::Quota),
        ))
    }

    /// Each root the call writes keeps its reserve after what it may write.
    fn check_reserve(&self, call: &Run<'_>, arguments: u64) -> Result<(), EarlyEnd> {
        let Err((root, short)) = reserve_kept(&call.resolved, arguments) else {
            return Ok(());
        };
        self.audit_refused(call.tool, &call.resolved, Rule::Reserve, call.client());
        Err(EarlyEnd::new(
            format!(
                "{}; nothing was written. To go on, {}",
                short.text(&root),
                space::Short::WAY_OUT
            ),
            Some(Rule::Reserve),
        ))
    }
}

/// Whether each root the call writes keeps its reserve free after what the
/// call may write there, told before it runs: its arguments (the content of
/// a write) and every existing file it names to read or write (a copy's
/// source, a file an edit or append rewrites whole while its old version
/// stays in the trash). An estimate from above: a move within a root writes
/// nothing, yet is counted as a copy. A root's reserve is checked again
/// write by write while the call runs (`runtime::fs`).
fn reserve_kept(resolved: &[Resolved], arguments: u64) -> Result<(), (String, space::Short)> {
    // The roots the call writes, each once; a call that writes none (a
    // read) has no reserve to keep, and its files are not looked at.
    let mut written: Vec<&Root> = Vec::new();
    for r in resolved.iter().filter(|r| r.op() == Permission::Write) {
        if !written.iter().any(|w| w.name == r.root().name) {
            written.push(r.root());
        }
    }
    if written.is_empty() {
        return Ok(());
    }
    let files: u64 = resolved
        .iter()
        .filter(|r| r.op() != Permission::Delete)
        .filter_map(|r| std::fs::symlink_metadata(r.root().path.join(r.real_rel())).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    for root in written {
        space::check(root, arguments.saturating_add(files)).map_err(|s| (root.name.clone(), s))?;
    }
    Ok(())
}

/// What the call would keep in the trash of each root it changes that has
/// a budget, told before it runs, under its path locks: the file standing
/// where it writes (the version a write, an edit, an append or an
/// overwriting move or copy replaces; through a symlink, the larger of the
/// link and its target) and the whole tree where it deletes (a symlink
/// itself, never what it leads to).
/// A path that leaves its place rather than being replaced there (a move's
/// source, the argument declaring a stronger operation across roots) keeps
/// nothing within its root; moved to another root it is counted as deleted,
/// an estimate from above (it is kept only when the move crosses
/// filesystems). Every root the call changes is named, with 0 if it keeps
/// nothing there, so its reservation covers what the call keeps anyway.
pub(super) fn kept_estimate(resolved: &[Resolved], paths: &[PathArg]) -> trash::Needs {
    let mut needs: trash::Needs = Vec::new();
    for (r, p) in resolved.iter().zip(paths) {
        let root = r.root();
        if root.trash_max_bytes == 0 || r.op() == Permission::Read {
            continue;
        }
        // The entry as named (a symlink itself) and where it leads.
        let real = root.path.join(r.real_rel());
        let named = normalise_lexically(r.requested())
            .map_or_else(|| real.clone(), |rel| root.path.join(rel));
        let file = |at: &Path| {
            std::fs::symlink_metadata(at)
                .ok()
                .filter(|m| m.is_file())
                .map_or(0, |m| m.len())
        };
        let bytes = match r.op() {
            _ if r.is_root() => 0,
            // A delete takes the entry as named, a link and not its target.
            Permission::Delete => trash::bytes_at(&named),
            // Through a symlink, the larger of the link and what it leads
            // to, whichever the tool replaces.
            Permission::Write if p.across_roots.is_none() => file(&named).max(file(&real)),
            _ => 0,
        };
        match needs.iter_mut().find(|(r, _)| Arc::ptr_eq(r, root)) {
            Some((_, sum)) => *sum = sum.saturating_add(bytes),
            None => needs.push((Arc::clone(root), bytes)),
        }
    }
    needs
}
