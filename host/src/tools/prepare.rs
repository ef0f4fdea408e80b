//! Before a call runs: every path argument resolved, the path locks taken
//! (and the resolution checked again under them), the reserve for what the
//! call will keep. A refusal here ends the call before any component
//! starts; nothing here writes a user's file.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use super::report::EarlyEnd;
use super::results::clip;
use super::{Control, Toolbox};
use crate::policy::{
    Denial, PathArg, Permission, Resolved, Rule, normalise_lexically, path_requests, resolve,
    resolve_within, shown_arg, with_quoted_note,
};
use crate::store::locks::{Key, LockError, Locked};

impl Toolbox {
    /// Resolves every declared path argument; the first refusal ends the
    /// call, except for a path in a list argument: that one is refused on
    /// its own (audited, and handed back to be shown to the guest).
    pub(super) fn resolve_all(
        &self,
        tool: &str,
        paths: &[PathArg],
        args: &JsonObject,
        control: &Control,
    ) -> Result<Resolution, EarlyEnd> {
        let client = control.client.as_deref();
        let narrowing = control.narrowing.as_deref();
        let mut resolution = Resolution::default();
        let requests = path_requests(paths, args).map_err(|text| EarlyEnd::new(text, None))?;
        for request in requests {
            let (root, path, op) = (request.root, request.path, request.op);
            // A scoped component's own roots; the session's client roots
            // narrow what is left (`client_roots = "narrow"`).
            let roots = self.entry(tool).map_or(&self.config.roots, |e| &e.roots);
            let resolved = if request.root_alone && op != Permission::Read {
                // The policing filesystem holds what the tool reaches to
                // the narrowing too.
                resolve_within(roots, root, op)
            } else {
                resolve(roots, root, path, op)
                    .and_then(|r| narrowing.map_or(Ok(()), |n| n.check(&r)).map(|()| r))
            };
            match resolved {
                Ok(r) => resolution.resolved.push(r),
                Err(denial) => {
                    let (root_c, path_c) = (clip(root), clip(path));
                    self.audit.log(
                        &self
                            .record(tool, &root_c, &path_c, op)
                            .denied(denial.rule)
                            .client(client),
                    );
                    if let Some((field, index)) = request.item {
                        resolution.refused.push(RefusedItem {
                            field: field.to_string(),
                            index,
                            message: format!(
                                "refused by rule '{}': {}",
                                denial.rule, denial.message
                            ),
                        });
                        continue;
                    }
                    return Err(refused_path(root, path, &denial));
                }
            }
        }
        Ok(resolution)
    }

    /// Resolves the call's paths, locks the places it changes, and
    /// resolves them again under the locks (a call that held them may have
    /// moved what a path leads to): when the places changed meanwhile, the
    /// locks are given back and taken again for the new ones. A refusal
    /// (a path, a lock not had in time, a cancellation) is the call's
    /// result, audited.
    pub(super) async fn resolve_and_lock(
        &self,
        tool: &str,
        paths: &[PathArg],
        arguments: &JsonObject,
        control: &Control,
        waits_until: tokio::time::Instant,
    ) -> Result<(Resolution, Locked), EarlyEnd> {
        let client = control.client.as_deref();
        let mut resolution = self.resolve_all(tool, paths, arguments, control)?;
        for _ in 0..RESOLVE_ROUNDS {
            let resolved = &resolution.resolved;
            if control.cancel.is_cancelled() {
                self.audit_refused(tool, resolved, Rule::Cancelled, client);
                return Err(EarlyEnd::new(
                    LockError::Cancelled.to_string(),
                    Some(Rule::Cancelled),
                ));
            }
            let keys = lock_keys(resolved);
            let locked = match self
                .calls
                .locks
                .lock(keys.clone(), waits_until, &control.cancel)
                .await
            {
                Ok(locked) => locked,
                Err(e) => {
                    let rule = lock_rule(&e);
                    self.audit_refused(tool, resolved, rule, client);
                    return Err(EarlyEnd::new(e.to_string(), Some(rule)));
                }
            };
            if keys.is_empty() {
                return Ok((resolution, locked));
            }
            let again = self.resolve_all(tool, paths, arguments, control)?;
            if same_places(&lock_keys(&again.resolved), &keys) {
                return Ok((again, locked));
            }
            resolution = again;
        }
        self.audit_refused(tool, &resolution.resolved, Rule::Locked, client);
        Err(EarlyEnd::new(
            "the places this call changes kept moving while it waited for them (other calls \
             moved or deleted what its paths lead to); try again"
                .into(),
            Some(Rule::Locked),
        ))
    }
}

/// The end of a call whose path `resolve()` refused: the rule, the
/// message, and the root and path as the model sent them (by the naming
/// rule). It answers as a missing path to a resource read.
fn refused_path(root: &str, path: &str, denial: &Denial) -> EarlyEnd {
    let (root, path) = (shown_arg(root), shown_arg(path));
    let text = with_quoted_note(
        format!(
            "refused by rule '{}': {} (root '{root}', path '{path}')",
            denial.rule, denial.message
        ),
        &[&root, &path],
    );
    EarlyEnd {
        path_missing: true,
        ..EarlyEnd::new(text, Some(denial.rule))
    }
}

/// A call's paths through `resolve()`: those allowed, and the elements of
/// list arguments refused on their own.
#[derive(Default)]
pub(super) struct Resolution {
    pub(super) resolved: Vec<Resolved>,
    pub(super) refused: Vec<RefusedItem>,
}

/// An element of a list argument that `resolve()` refused: the guest gets
/// `{"path": path, "refused": message}` in its place, to report, not open.
pub(super) struct RefusedItem {
    pub(super) field: String,
    pub(super) index: usize,
    pub(super) message: String,
}

impl RefusedItem {
    /// Puts each refusal in place of its path in the call's arguments.
    pub(super) fn mark(refused: &[RefusedItem], arguments: &mut JsonObject) {
        for r in refused {
            if let Some(slot) = arguments
                .get_mut(&r.field)
                .and_then(Value::as_array_mut)
                .and_then(|items| items.get_mut(r.index))
            {
                let path = slot.take();
                *slot = json!({ "path": path, "refused": r.message });
            }
        }
    }
}

/// How many times a call resolves its paths again because what they lead
/// to moved while it waited for their locks, before it gives up.
pub(super) const RESOLVE_ROUNDS: usize = 8;

/// The places a call changes: every path it resolved for more than
/// reading, where it leads (symlinks followed), and, where that differs,
/// the entry it names (a tool replaces or moves a symlink itself, so a
/// change of the directory holding the link must wait too).
pub(super) fn lock_keys(resolved: &[Resolved]) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    // The root alone, resolved for a tool whose paths are not arguments
    // (a patch's sit in its text): its places are locked at its publish.
    for r in resolved
        .iter()
        .filter(|r| r.op() != Permission::Read && !r.is_root())
    {
        let entry = normalise_lexically(r.requested());
        for rel in [Some(r.real_rel().to_path_buf()), entry]
            .into_iter()
            .flatten()
        {
            if !keys
                .iter()
                .any(|k| Arc::ptr_eq(&k.root, r.root()) && k.rel == rel)
            {
                keys.push(Key {
                    root: Arc::clone(r.root()),
                    rel,
                });
            }
        }
    }
    keys
}

pub(super) fn same_places(a: &[Key], b: &[Key]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| Arc::ptr_eq(&a.root, &b.root) && a.rel == b.rel)
}

/// The rule of a lock not had: held by another call until the deadline,
/// a cancellation, or no descriptor free.
pub(super) fn lock_rule(e: &LockError) -> Rule {
    match e {
        LockError::Busy { .. } => Rule::Locked,
        LockError::Cancelled => Rule::Cancelled,
        LockError::NoDescriptors => Rule::Descriptors,
    }
}
