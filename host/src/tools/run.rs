//! One call on its way to its guest ([`Run`]): resolved, locked and given
//! its id; and what the runtime is asked for it, its mounts made from its
//! resolved locations only.

use std::path::Path;
use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

use super::prepare::{RefusedItem, Resolution};
use super::{Control, Toolbox};
use crate::policy::{PathArg, Permission, Resolved};
use crate::runtime::{Area, CallMount, CallRequest, GuestLimits};

/// One call on its way to its guest: resolved, locked and given its id.
pub(super) struct Run<'a> {
    pub(super) tool: &'a str,
    pub(super) index: usize,
    /// The tool's declared path arguments, in the order of `resolved`.
    pub(super) paths: &'a [PathArg],
    pub(super) resolved: Vec<Resolved>,
    /// The arguments as the guest gets them (a list's refused paths
    /// marked).
    pub(super) arguments: JsonObject,
    /// The call's id, also the name of its trash entry.
    pub(super) id: String,
    pub(super) control: Control,
}

impl<'a> Run<'a> {
    /// The call, under its locks: a list's refused paths marked in its
    /// arguments, and its id taken now (a path's trash entries are in the
    /// order its changes were made).
    pub(super) fn new(
        tool: &'a str,
        index: usize,
        paths: &'a [PathArg],
        resolution: Resolution,
        mut arguments: JsonObject,
        control: Control,
    ) -> Run<'a> {
        RefusedItem::mark(&resolution.refused, &mut arguments);
        Run {
            tool,
            index,
            paths,
            resolved: resolution.resolved,
            arguments,
            id: crate::store::trash_stamp(),
            control,
        }
    }

    pub(super) fn client(&self) -> Option<&str> {
        self.control.client.as_deref()
    }

    /// What the runtime is asked: the call's mounts, made from its
    /// resolved locations only, its limits and its arguments.
    pub(super) fn request(&self, toolbox: &Toolbox) -> CallRequest {
        let limits = &toolbox.config.limits;
        let changes_anything = self.resolved.iter().any(|r| r.op() != Permission::Read);
        CallRequest {
            tool: self.tool.to_string(),
            mounts: self.mounts(),
            limits: GuestLimits {
                max_entries: limits.max_list_entries,
                max_results: limits.max_search_results,
                max_search_bytes: limits.max_search_bytes,
            },
            arguments: Value::Object(self.arguments.clone()).to_string(),
            staging: changes_anything.then(|| Arc::clone(&toolbox.calls.staging)),
            cancel: self.control.cancel.clone(),
            activity: Arc::clone(&self.control.activity),
            quota: toolbox.calls.quota.clone(),
        }
    }

    /// The mounts of the call: each root it resolved a path on, with the
    /// most it does there and the paths it was asked to delete, held to
    /// the session's client roots (the guest is held to them too, not only
    /// the paths it was given: a component may open others).
    fn mounts(&self) -> Vec<CallMount> {
        let mut mounts: Vec<CallMount> = Vec::new();
        for (i, r) in self.resolved.iter().enumerate() {
            let named = self.paths.get(i).is_none_or(|p| !p.path_field.is_empty());
            match mounts.iter_mut().find(|m| m.root().name == r.root().name) {
                Some(m) => m.add(r, named),
                None => {
                    let area = self.control.narrowing.as_ref().and_then(|n| {
                        Area::of(n.areas_of(&r.root().name).map(Path::to_path_buf).collect())
                    });
                    mounts.push(CallMount::of(r, named).narrowed(area));
                }
            }
        }
        mounts
    }
}
