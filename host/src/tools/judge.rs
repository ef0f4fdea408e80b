//! A guest's outcome judged, before anything is published: a call the host
//! stopped, or whose result it refuses, or that met a limit on the way, is
//! an error and publishes nothing.

use rmcp::model::CallToolResult;

use super::Toolbox;
use super::results::{
    call_error_text, disk_failed, error_result, overlay_full, ran_out_of_descriptors,
    ran_out_of_quota, to_result,
};
use crate::policy::Rule;
use crate::runtime::fs::{CallChanges, Refusal};
use crate::runtime::{Activity, CallError, CallOutcome, DiskError, ToolError};

/// A call's outcome, judged.
pub(super) struct Ended {
    pub(super) result: CallToolResult,
    pub(super) bytes: u64,
    /// The limit that stopped it, if one did.
    pub(super) stopped: Option<Rule>,
    pub(super) path_missing: bool,
    pub(super) refusals: Vec<Refusal>,
    pub(super) changes: CallChanges,
}

impl Ended {
    /// The call stopped by `rule` after its guest ran: `text` is its
    /// answer.
    pub(super) fn stop(&mut self, text: String, rule: Rule) {
        self.result = error_result(text);
        self.stopped = Some(rule);
    }
}

/// What the host saw of a call besides its result: the limits it met.
struct Limits {
    out_of_quota: bool,
    out_of_descriptors: bool,
    /// The root where the call staged more than the overlay holds.
    staged_too_much: Option<String>,
    /// A disk error, where the call failed (a tool that met one and went
    /// another way still did what it says; a call cancelled or out of time
    /// says so).
    disk: Option<(DiskError, String)>,
}

impl Limits {
    fn of(outcome: &CallOutcome, activity: &Activity) -> Limits {
        Limits {
            out_of_quota: activity.out_of_quota(),
            out_of_descriptors: activity.out_of_descriptors(),
            // The host's bound on what one call stages: refused at the
            // operation, and the call's answer, whatever the tool made of it.
            staged_too_much: outcome
                .refusals
                .iter()
                .find(|r| r.rule == Rule::Overlay)
                .map(|r| r.root.clone()),
            disk: activity.disk_error().filter(|_| {
                matches!(&outcome.result, Err(e)
                    if !matches!(e, CallError::Cancelled | CallError::Timeout(_)))
            }),
        }
    }

    /// The rule that stopped the call, if one did: a limit of the host's
    /// first, then how the guest ended.
    fn stopped(&self, result: &Result<crate::runtime::Output, CallError>) -> Option<Rule> {
        match result {
            _ if self.out_of_quota => Some(Rule::Quota),
            _ if self.staged_too_much.is_some() => Some(Rule::Overlay),
            _ if self.out_of_descriptors => Some(Rule::Descriptors),
            _ if let Some((e, _)) = &self.disk => Some(e.rule()),
            Err(CallError::Cancelled) => Some(Rule::Cancelled),
            Err(CallError::Timeout(_)) => Some(Rule::Timeout),
            Err(CallError::Memory(_)) => Some(Rule::Memory),
            Err(CallError::Crashed(_)) => Some(Rule::Crashed),
            Err(CallError::OutputTooLarge(_)) => Some(Rule::Output),
            _ => None,
        }
    }
}

impl Toolbox {
    /// The call's result from its guest's outcome, and the bytes it
    /// returned.
    pub(super) fn judge(
        &self,
        tool: &str,
        outcome: CallOutcome,
        activity: &Activity,
        index: usize,
    ) -> Ended {
        let limits = Limits::of(&outcome, activity);
        let stopped = limits.stopped(&outcome.result);
        // A path the tool found missing (a denied name answers as a missing
        // one in the policing filesystem, so it is among these).
        let path_missing = matches!(
            &outcome.result,
            Err(CallError::Tool(ToolError::NotFound(_)))
        );
        let built_in = self.runtime.tools()[index].is_built_in();
        let (result, bytes) = match self.limit_result(tool, &limits, activity) {
            Some(text) => (error_result(text), 0),
            None => self.guest_result(tool, outcome.result, built_in),
        };
        Ended {
            result,
            bytes,
            stopped,
            path_missing,
            refusals: outcome.refusals,
            changes: outcome.changes,
        }
    }

    /// The answer of a call that met a limit of the host's, whatever the
    /// tool made of it (a search would have skipped a directory, and its
    /// result would look complete).
    fn limit_result(&self, tool: &str, limits: &Limits, activity: &Activity) -> Option<String> {
        if let (Some(q), true) = (&self.calls.quota, limits.out_of_quota) {
            return Some(ran_out_of_quota(q, activity));
        }
        if let Some(root) = &limits.staged_too_much {
            return Some(overlay_full(root));
        }
        if limits.out_of_descriptors {
            tracing::warn!(
                tool,
                "a call found no file descriptor free (EMFILE): calls and connections hold \
                 them all; see the descriptor limit on the start-up lines"
            );
            return Some(ran_out_of_descriptors());
        }
        let (error, root) = limits.disk.as_ref()?;
        tracing::warn!(tool, root = %root, "a call met a disk error: {error:?}");
        Some(disk_failed(*error, root))
    }

    /// The answer from what the guest returned, under the output limit, or
    /// from how it failed.
    fn guest_result(
        &self,
        tool: &str,
        result: Result<crate::runtime::Output, CallError>,
        built_in: bool,
    ) -> (CallToolResult, u64) {
        match result {
            Ok(output) => {
                let limit = self
                    .entry(tool)
                    .map_or(self.config.limits.max_output_bytes, |e| e.output_bytes);
                to_result(tool, output, limit, built_in)
            }
            Err(e) => {
                let server = &self.config.limits;
                let entry_limit = match &e {
                    CallError::Timeout(limit) => *limit < server.tool_timeout,
                    CallError::Memory(limit) => *limit < server.tool_memory_bytes,
                    CallError::OutputTooLarge(limit) => *limit < server.max_output_bytes,
                    _ => false,
                };
                (
                    error_result(call_error_text(tool, e, built_in, entry_limit)),
                    0,
                )
            }
        }
    }
}
