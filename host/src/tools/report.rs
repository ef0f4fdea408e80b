//! What a call came to ([`CallReport`]) and what a call that ended before
//! its component ran says ([`EarlyEnd`]).

use rmcp::model::CallToolResult;

use super::results::error_result;
use crate::policy::Rule;

/// What a call came to: its result, and what the faces that do more than
/// pass it on need to know (a resource read answers a refused path as a
/// missing one; a client that asked for log messages is told of refusals
/// and limits).
pub struct CallReport {
    pub result: CallToolResult,
    /// The rule that refused or stopped the call (`deny`, `quota`,
    /// `timeout`, …), if one did.
    pub rule: Option<Rule>,
    /// Whether the call failed because a path it names is not there for it:
    /// refused by `resolve()`, or not found by the tool (which is also what
    /// the policing filesystem makes of a denied name).
    pub path_missing: bool,
}

impl CallReport {
    pub(super) fn failed(text: String, rule: Option<Rule>) -> CallReport {
        CallReport {
            result: error_result(text),
            rule,
            path_missing: false,
        }
    }
}

/// A call that ended before its component ran: its text and what
/// [`CallReport`] says of it.
pub(super) struct EarlyEnd {
    pub(super) text: String,
    pub(super) rule: Option<Rule>,
    pub(super) path_missing: bool,
}

impl EarlyEnd {
    pub(super) fn new(text: String, rule: Option<Rule>) -> EarlyEnd {
        EarlyEnd {
            text,
            rule,
            path_missing: false,
        }
    }
}

impl From<EarlyEnd> for CallReport {
    fn from(end: EarlyEnd) -> CallReport {
        CallReport {
            result: error_result(end.text),
            rule: end.rule,
            path_missing: end.path_missing,
        }
    }
}
