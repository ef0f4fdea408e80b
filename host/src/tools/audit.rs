//! A call's audit lines: one for each path it resolved (with what was kept
//! of it), one for each other place it changed, one for each refusal of
//! the policing filesystem, and the refusals before it ran.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::report::EarlyEnd;
use super::results::clip;
use super::run::Run;
use super::{Control, Toolbox};
use crate::policy::normalise_lexically;
use crate::policy::{Permission, Resolved, Rule};
use crate::runtime::fs::Refusal;
use crate::store::audit::Record;
use crate::store::publish::Published;

impl Toolbox {
    /// A line's record for `name`, carrying its component's digest.
    pub(super) fn record<'a>(
        &'a self,
        name: &'a str,
        root: &'a str,
        path: &'a str,
        op: Permission,
    ) -> Record<'a> {
        Record::new(name, root, path, op)
            .component(self.entry(name).and_then(|e| e.digest.as_deref()))
    }

    /// Fails closed: no call is served while a line could not be written.
    /// The refusal's own line waits with the others.
    pub(super) fn audit_writable(
        &self,
        tool: &str,
        index: usize,
        control: &Control,
    ) -> Result<(), EarlyEnd> {
        let Err(unwritable) = self.audit.writable() else {
            return Ok(());
        };
        let op = self.runtime.tools()[index].descriptor.permission.into();
        self.audit.log(
            &self
                .record(tool, "", "", op)
                .client(control.client.as_deref())
                .denied(Rule::Audit),
        );
        Err(EarlyEnd::new(unwritable.to_string(), Some(Rule::Audit)))
    }

    /// A line for each of `resolved`, refused by `rule` before the call ran.
    pub(super) fn audit_refused(
        &self,
        tool: &str,
        resolved: &[Resolved],
        rule: Rule,
        client: Option<&str>,
    ) {
        for r in resolved {
            self.audit.log(
                &self
                    .record(tool, &r.root().name, &clip(r.requested()), r.op())
                    .denied(rule)
                    .client(client),
            );
        }
    }

    /// The lines of a call that ran.
    pub(super) fn audit_call(
        &self,
        call: &Run<'_>,
        took: (Duration, u64, Option<Rule>),
        published: Option<&Published>,
        refusals: &[Refusal],
    ) {
        let named = self.audit_resolved(call, took, published);
        if let Some(p) = published {
            self.audit_unnamed(call, &named, p);
        }
        if call.resolved.is_empty() {
            // No path resolved (a tool without path arguments, or a list
            // whose every path was refused): one line for the call itself.
            let (elapsed, bytes, stopped) = took;
            let op = self.runtime.tools()[call.index]
                .descriptor
                .permission
                .into();
            self.audit.log(
                &self
                    .record(call.tool, "", "", op)
                    .client(call.client())
                    .took(elapsed, bytes)
                    .stopped(stopped)
                    .call(Some(&call.id)),
            );
        }
        for refusal in refusals {
            self.audit.log(
                &self
                    .record(call.tool, &refusal.root, &clip(&refusal.path), refusal.op)
                    .client(call.client())
                    .denied(refusal.rule)
                    .call(Some(&call.id)),
            );
        }
    }

    /// A line for each path the call resolved, with what was kept of it.
    /// The places named, each as resolved and as asked.
    fn audit_resolved(
        &self,
        call: &Run<'_>,
        (elapsed, bytes, stopped): (Duration, u64, Option<Rule>),
        published: Option<&Published>,
    ) -> Vec<(String, PathBuf)> {
        let mut named = Vec::new();
        // The archive member the document reader was asked for.
        let member = (call.tool == "read_document")
            .then(|| call.arguments.get("member")?.as_str().map(clip))
            .flatten();
        for r in &call.resolved {
            // The guest keeps the entry it was asked about (a symlink itself),
            // the host resolved its target: either may be what was kept.
            let asked = normalise_lexically(r.requested()).unwrap_or_default();
            let mut kept = kept_of(published, &r.root().name, r.real_rel());
            if kept.is_empty() {
                kept = kept_of(published, &r.root().name, &asked);
            }
            named.push((r.root().name.clone(), r.real_rel().to_path_buf()));
            named.push((r.root().name.clone(), asked));
            self.audit.log(
                &self
                    .record(call.tool, &r.root().name, &clip(r.requested()), r.op())
                    .client(call.client())
                    .took(elapsed, bytes)
                    .member(member.as_deref())
                    .kept(&kept)
                    .stopped(stopped)
                    .call(Some(&call.id)),
            );
        }
        named
    }

    /// A line for each place the call changed that no argument named (a
    /// third-party tool's own files, a patch's), and for each path that
    /// changed meanwhile and was kept before the call's version replaced it.
    fn audit_unnamed(&self, call: &Run<'_>, named: &[(String, PathBuf)], p: &Published) {
        let is_named = |root: &str, path: &Path| named.iter().any(|(r, n)| r == root && n == path);
        let mut others: Vec<(&str, &str, Permission)> = Vec::new();
        for k in p
            .kept
            .iter()
            .filter(|k| !is_named(&k.root, Path::new(&k.from)))
        {
            others.push((&k.root, &k.from, Permission::Delete));
        }
        for put in &p.put {
            let at = put.moved_from.as_deref().unwrap_or(&put.at);
            if !is_named(&put.root, Path::new(&put.at))
                && !is_named(&put.root, Path::new(at))
                && !others
                    .iter()
                    .any(|(r, f, _)| *r == put.root && *f == put.at)
            {
                others.push((&put.root, &put.at, Permission::Write));
            }
        }
        for (root, path, op) in others {
            let kept = kept_of(Some(p), root, Path::new(path));
            self.audit.log(
                &self
                    .record(call.tool, root, &clip(path), op)
                    .client(call.client())
                    .kept(&kept)
                    .call(Some(&call.id)),
            );
        }
        for d in &p.displaced {
            let to = [d.to.as_str()];
            self.audit.log(
                &self
                    .record(call.tool, &d.root, &clip(&d.from), Permission::Write)
                    .client(call.client())
                    .kept(&to)
                    .denied(Rule::ChangedMeanwhile)
                    .call(Some(&call.id)),
            );
        }
    }
}

/// Where the publish kept what stood at `path` in `root`.
fn kept_of<'a>(published: Option<&'a Published>, root: &str, path: &Path) -> Vec<&'a str> {
    published.map_or_else(Vec::new, |p| {
        p.kept
            .iter()
            .filter(|k| k.root == root && Path::new(&k.from) == path)
            .map(|k| k.to.as_str())
            .collect()
    })
}
