//! The guest's run and the publish of what it changed: run, judge, lock
//! every place it changed, publish; on a conflict (what the call saw
//! changed meanwhile) once more on the new state, holding those locks. The
//! only place a component is called.

use std::sync::Arc;
use std::time::Duration;

use super::Toolbox;
use super::admit::Admitted;
use super::judge::Ended;
use super::prepare::lock_rule;
use super::publish::{Stopped, covered, publish_keys};
use super::report::CallReport;
use super::run::Run;
use crate::policy::Rule;
use crate::runtime::{self, CallOutcome};
use crate::store::locks::LockError;
use crate::store::publish::Published;
use crate::store::trash;

/// How many times a call runs when what it saw changes before its publish.
const ATTEMPTS: u32 = 2;

/// A call that ran: its judged outcome, what it published, where a
/// conflict made it run again, and how long it took.
pub(super) struct Ran {
    pub(super) ended: Ended,
    pub(super) published: Option<Published>,
    pub(super) reran: Option<(String, String)>,
    pub(super) elapsed: Duration,
}

impl Toolbox {
    /// Runs the guest and publishes what it changed, once more on a
    /// conflict. What it kept is counted before its locks go. An error is
    /// a call that ended without a result of its guest's (the trash budget
    /// refused it, or its thread panicked).
    pub(super) async fn run_and_publish(
        self: &Arc<Self>,
        call: &Run<'_>,
        mut admitted: Admitted,
    ) -> Result<Ran, CallReport> {
        let mut reran = None;
        let mut attempt = 1;
        let (ended, published) = loop {
            let outcome = self.run_guest(call, &mut admitted).await?;
            let mut ended = self.judge(call.tool, outcome, &call.control.activity, call.index);
            let changes = std::mem::replace(&mut ended.changes, runtime::fs::CallChanges::none());
            if ended.result.is_error == Some(true) || changes.is_empty() {
                break (ended, None);
            }
            if let Err(e) = self.lock_for_publish(&changes, &mut admitted).await {
                ended.stop(format!("{e}; nothing was changed"), lock_rule(&e));
                break (ended, None);
            }
            match self.publish_on_thread(call, changes, &admitted).await {
                Ok(published) => break (ended, Some(published)),
                Err(Stopped::Conflict { root, path }) if attempt < ATTEMPTS => {
                    // Again on the new state, holding every lock its
                    // publish needed.
                    attempt += 1;
                    reran = Some((root, path));
                }
                Err(stop) => {
                    let (text, rule) = stop.told();
                    ended.stop(text, rule);
                    break (ended, None);
                }
            }
        };
        if let Some(reservation) = admitted.reservation.take() {
            reservation.settle();
        }
        drop(admitted.locked.take());
        Ok(Ran {
            ended,
            published,
            reran,
            elapsed: admitted.started.elapsed(),
        })
    }

    /// One run of the guest, on a guest thread, after a reservation in the
    /// trash budgets for what it would keep (the first time only). The
    /// spent instance is dropped after the answer, on the same thread (its
    /// memory reset, off the answer's path); the slot travels with it.
    async fn run_guest(
        self: &Arc<Self>,
        call: &Run<'_>,
        admitted: &mut Admitted,
    ) -> Result<CallOutcome, CallReport> {
        let this = Arc::clone(self);
        let request = Arc::clone(&admitted.request);
        let reserve = (admitted.budgeted && admitted.reservation.is_none())
            .then(|| admitted.estimate.clone());
        let (id, in_flight, index) = (call.id.clone(), admitted.in_flight, call.index);
        let slot = Arc::clone(&admitted.slot);
        let ran = self
            .guests
            .run_then(move || {
                let reserved = match reserve.map(|needs| trash::reserve(&needs, &id, in_flight)) {
                    Some(Err(over)) => {
                        return (Err(over), (runtime::FinishedInstance::none(), slot));
                    }
                    Some(Ok(r)) => Some(r),
                    None => None,
                };
                let (outcome, spent) = this
                    .runtime
                    .call_keeping_instance(index, request.as_ref().clone());
                (Ok((outcome, reserved)), (spent, slot))
            })
            .await;
        match ran {
            Ok(Ok((outcome, reserved))) => {
                if reserved.is_some() {
                    admitted.reservation = reserved;
                }
                Ok(outcome)
            }
            Ok(Err((root, over))) => {
                self.audit_refused(call.tool, &call.resolved, Rule::TrashBudget, call.client());
                Err(CallReport::failed(
                    format!(
                        "{}; nothing was changed. To go on, {}",
                        over.text(&root),
                        trash::OverBudget::WAY_OUT
                    ),
                    Some(Rule::TrashBudget),
                ))
            }
            Err(_) => {
                // Its thread dropped the answer: the guest's side panicked
                // (the panic is on stderr).
                tracing::error!(tool = call.tool, "tool call panicked");
                Err(CallReport::failed(
                    "the tool failed unexpectedly; the server log has details; nothing was \
                     changed"
                        .into(),
                    None,
                ))
            }
        }
    }

    /// Every place the call changed locked for its publish: a third-party
    /// tool writes where it likes, and a patch's paths sit in its text.
    /// Locks it lacks are taken with those it holds, all at once.
    async fn lock_for_publish(
        &self,
        changes: &runtime::fs::CallChanges,
        admitted: &mut Admitted,
    ) -> Result<(), LockError> {
        let wanted = publish_keys(&changes.changes);
        if wanted.iter().all(|k| covered(&admitted.held, k)) {
            return Ok(());
        }
        drop(admitted.locked.take());
        let mut all = admitted.held.clone();
        all.extend(wanted.into_iter().filter(|k| !covered(&admitted.held, k)));
        let now = self
            .calls
            .locks
            .lock(all.clone(), admitted.waits_until, &admitted.request.cancel)
            .await?;
        admitted.locked = Some(now);
        admitted.held = all;
        Ok(())
    }

    /// The publish of `changes`, on a guest thread (file I/O).
    async fn publish_on_thread(
        self: &Arc<Self>,
        call: &Run<'_>,
        changes: runtime::fs::CallChanges,
        admitted: &Admitted,
    ) -> Result<Published, Stopped> {
        let this = Arc::clone(self);
        let (id, tool) = (call.id.clone(), call.tool.to_string());
        let (estimate, in_flight) = (admitted.estimate.clone(), admitted.in_flight);
        let done = self
            .guests
            .run_then(move || {
                let published = this.publish(&changes, &id, &tool, &estimate, in_flight);
                (published, changes)
            })
            .await;
        done.unwrap_or_else(|_| {
            tracing::error!(tool = call.tool, "a publish panicked");
            Err(Stopped::Panicked)
        })
    }
}
