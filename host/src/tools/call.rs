//! A component's call, top-down ([`Toolbox::call_component`]): resolve →
//! lock → admit → run the guest → publish → answer. Each stage lives in the
//! file that owns it: `prepare.rs` (resolve, lock), `admit.rs` (quota,
//! reserve, trash budget, slot), `attempt.rs` (the guest's run and the
//! publish, once more on a conflict), `audit.rs` (the lines). Only
//! `attempt.rs` calls a component, and nothing after `prepare.rs` resolves
//! a path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::JsonObject;

use super::attempt::Ran;
use super::report::CallReport;
use super::results::{note_kept, note_reran};
use super::run::Run;
use super::slots::Slots;
use super::{Control, Toolbox};
use crate::config::Config;
use crate::policy::PathArg;
use crate::store::locks::PathLocks;
use crate::store::quota::Quota;
use crate::store::staging::Staging;

impl Toolbox {
    /// Calls component `index` as tool `name`: the first stage that ends
    /// it answers; every stage after the locks is audited with the call.
    pub(super) async fn call_component(
        self: &Arc<Self>,
        name: &str,
        index: usize,
        paths: &[PathArg],
        arguments: JsonObject,
        control: Control,
        timeout: Duration,
    ) -> CallReport {
        // Fails closed: no call is served while its line could not be
        // written (the refusal's own line waits with the others).
        if let Err(end) = self.audit_writable(name, index, &control) {
            return end.into();
        }
        // Waiting for locks and then for a slot counts against the call's
        // deadline: together at most the tool timeout.
        let waits_until = tokio::time::Instant::now() + timeout;
        let (resolution, locked) = match self
            .resolve_and_lock(name, paths, &arguments, &control, waits_until)
            .await
        {
            Ok(done) => done,
            Err(end) => return end.into(),
        };
        let call = Run::new(name, index, paths, resolution, arguments, control);
        let admitted = match self.admit(&call, locked, waits_until).await {
            Ok(admitted) => admitted,
            Err(end) => return end.into(),
        };
        match self.run_and_publish(&call, admitted).await {
            Ok(ran) => self.answer(&call, ran),
            Err(end) => end,
        }
    }

    /// The call's answer, once its locks are given back: its result with
    /// what was kept and whether it ran again, and its audit lines.
    fn answer(&self, call: &Run<'_>, ran: Ran) -> CallReport {
        let Ran {
            ended,
            published,
            reran,
            elapsed,
        } = ran;
        let mut result = ended.result;
        if let Some(published) = &published {
            note_kept(&mut result, published, &call.resolved);
        }
        if let Some((root, path)) = &reran {
            note_reran(&mut result, root, path);
        }
        self.audit_call(
            call,
            (elapsed, ended.bytes, ended.stopped),
            published.as_ref(),
            &ended.refusals,
        );
        // A limit that stopped the call, else the first rule the policing
        // filesystem applied (the guest may have gone on without it).
        let rule = ended
            .stopped
            .or_else(|| ended.refusals.first().map(|r| r.rule));
        CallReport {
            result,
            rule,
            path_missing: ended.path_missing,
        }
    }
}

/// What the calls of one server share: their slots, the byte quota, the
/// path locks, the staging area, and when each root was last swept.
pub(super) struct CallPath {
    pub(super) slots: Slots,
    /// The byte quota every call draws on, if the config sets one.
    pub(super) quota: Option<Arc<Quota>>,
    /// Calls that change overlapping places wait for each other.
    pub(super) locks: Arc<PathLocks>,
    /// Where calls stage what they change until it is published.
    pub(super) staging: Arc<Staging>,
    /// When this server last swept each root's staging area (by name).
    pub(super) swept: Mutex<HashMap<String, Instant>>,
}

impl CallPath {
    pub(super) fn new(config: &Config) -> CallPath {
        CallPath {
            slots: Slots::new(
                config.limits.max_concurrent_calls as usize,
                config.limits.tool_timeout,
            ),
            quota: config.quota.map(|q| Arc::new(Quota::new(q))),
            locks: PathLocks::new(),
            staging: Arc::new(Staging::new()),
            swept: Mutex::default(),
        }
    }
}
