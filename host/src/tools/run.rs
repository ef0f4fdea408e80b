//! One call from its instance to its result: limits, mounts, the guest's
//! run, what it kept and what it was refused, the audit line. The only place
//! a component is called; it never resolves a path (`prepare` has).

use super::*;

impl Toolbox {
    pub(super) async fn run(self: &Arc<Self>, call: Run<'_>) -> Called {
        let Run {
            tool,
            index,
            paths,
            resolved,
            arguments,
            stamp,
            control,
            locked,
            waits_until,
        } = call;
        let mut mounts: Vec<CallMount> = Vec::new();
        for r in &resolved {
            match mounts.iter_mut().find(|m| m.root.name == r.root().name) {
                Some(m) => m.op = m.op.max(r.op()),
                None => mounts.push(CallMount {
                    root: Arc::clone(r.root()),
                    op: r.op(),
                    staging: None,
                    keep: None,
                    // The guest is held to the client roots too, not only
                    // the paths it was given: a component may open others.
                    area: control.narrowing.as_ref().and_then(|n| {
                        Area::of(n.areas_of(&r.root().name).map(Path::to_path_buf).collect())
                    }),
                }),
            }
        }
        let client = control.client;
        let client = client.as_deref();
        let activity = Arc::clone(&control.activity);
        let limits = &self.config.limits;
        let request = CallRequest {
            mounts,
            limits: GuestLimits {
                max_entries: limits.max_list_entries,
                max_results: limits.max_search_results,
                max_search_bytes: limits.max_search_bytes,
            },
            arguments: Value::Object(arguments).to_string(),
            stamp: stamp.clone(),
            cancel: control.cancel,
            activity: control.activity,
            quota: self.quota.clone(),
        };
        if let Some(q) = &self.quota
            && let Err(empty) = q.ready(request.arguments.len() as u64)
        {
            self.audit_refused(tool, &resolved, "quota", client);
            return Called::failed(
                format!(
                    "refused by rule 'quota': the byte quota is used up ({}); {}",
                    quota_figures(q),
                    quota::retry_text(empty.retry_after)
                ),
                Some("quota"),
            );
        }
        if let Err((root, short)) = reserve_kept(&resolved, request.arguments.len() as u64) {
            self.audit_refused(tool, &resolved, "reserve", client);
            return Called::failed(
                format!(
                    "{}; nothing was written. To go on, {}",
                    short.text(&root),
                    space::Short::WAY_OUT
                ),
                Some("reserve"),
            );
        }
        // Room in each root's trash for what the call would keep (not
        // asked where no root the call changes has one), reserved on the
        // guest's thread before anything changes (file I/O: one thread hop
        // for both).
        let budgeted = resolved
            .iter()
            .any(|r| r.root().trash_max_bytes > 0 && r.op() != Permission::Read);
        let budget = match &stamp {
            Some(stamp) if budgeted => Some((
                stamp.clone(),
                resolved.clone(),
                paths.to_vec(),
                trash::in_flight(limits.tool_timeout),
            )),
            _ => None,
        };
        let slot = match self.slots.take(&request.cancel, waits_until).await {
            Ok(slot) => slot,
            Err(e) => {
                let rule = match e {
                    SlotError::Busy { .. } => "busy",
                    SlotError::Cancelled => "cancelled",
                };
                self.audit_refused(tool, &resolved, rule, client);
                return Called::failed(e.to_string(), Some(rule));
            }
        };
        // The call's duration is its guest's, not its wait for a slot.
        let started = Instant::now();
        let this = Arc::clone(self);
        let mut request = request;
        // The slot, the locks and the staging directories travel with the
        // guest's thread: a guest that outlives its caller still holds them,
        // and its staging directories go only once it is done.
        // Under the kernel sandbox no file is written in a root without
        // write (a grant to write its trash index would make every move into
        // that trash gain rights, which Landlock refuses): its trash lists
        // file by file.
        let indexed: Vec<Resolved> = resolved
            .iter()
            .filter(|r| !self.config.landlock || r.root().perms.contains(Permission::Write))
            .cloned()
            .collect();
        // Where each root's staging directory goes: the places the call
        // writes (see `stage`).
        let writes: Vec<(String, PathBuf)> = resolved
            .iter()
            .filter(|r| r.op() == Permission::Write)
            .map(|r| (r.root().name.clone(), r.real_rel().to_path_buf()))
            .collect();
        // The answer goes back as soon as the outcome is known; the spent
        // instance is dropped after it on the same thread (its memory
        // reset, off the answer's path), and the slot with it: no more
        // instances alive than slots.
        let outcome = self
            .guests
            .run_then(move || {
                let mut spent = runtime::Spent::none();
                let answer = (|| {
                    // Refused before anything changes when it would pass the budget.
                    let reservation = match budget {
                        Some((stamp, needs_of, paths, in_flight)) => Some(trash::reserve(
                            &kept_estimate(&needs_of, &paths),
                            &stamp,
                            in_flight,
                        )?),
                        None => None,
                    };
                    let stamp = request.stamp.clone();
                    let staged = match stamp {
                        Some(_) => this.stage(&mut request.mounts, &writes, &request.activity),
                        None => Ok(Vec::new()),
                    };
                    let outcome = match staged {
                        Ok(_staged) => {
                            let (outcome, left) = this.runtime.call_spent(index, request);
                            spent = left;
                            outcome
                        }
                        Err(message) => runtime::CallOutcome::setup(message),
                    };
                    // Its index is written before its locks go: the next call on
                    // these places finds it. File I/O, so on this thread.
                    if let Some(stamp) = &stamp {
                        trash::record_call(&indexed, stamp, &outcome.kept);
                    }
                    // What it kept is counted before its locks go too.
                    if let Some(reservation) = reservation {
                        reservation.settle();
                    }
                    Ok((outcome, locked))
                })();
                (answer, (spent, slot))
            })
            .await;
        let elapsed = started.elapsed();
        let (outcome, _locked) = match outcome {
            Ok(Ok(outcome)) => outcome,
            Ok(Err((root, over))) => {
                self.audit_refused(tool, &resolved, "trash_budget", client);
                return Called::failed(
                    format!(
                        "{}; nothing was changed. To go on, {}",
                        over.text(&root),
                        trash::OverBudget::WAY_OUT
                    ),
                    Some("trash_budget"),
                );
            }
            Err(_) => {
                // Its thread dropped the answer: the guest's side panicked
                // (the panic is on stderr).
                tracing::error!(tool, "tool call panicked");
                return Called::failed(
                    "the tool failed unexpectedly; the server log has details".into(),
                    None,
                );
            }
        };
        let out_of_quota = activity.out_of_quota();
        let out_of_descriptors = activity.out_of_descriptors();
        // A disk error says what happened only where the call failed: a tool
        // that met one and went another way (a copy where a link failed)
        // still did what it says. A call cancelled or out of time says so.
        let disk = activity.disk_error().filter(|_| {
            matches!(&outcome.result, Err(e)
                if !matches!(e, CallError::Cancelled | CallError::Timeout(_)))
        });
        let stopped = match &outcome.result {
            _ if out_of_quota => Some("quota"),
            _ if out_of_descriptors => Some("descriptors"),
            _ if disk.is_some() => disk.as_ref().map(|(e, _)| e.rule()),
            Err(CallError::Cancelled) => Some("cancelled"),
            Err(CallError::Timeout(_)) => Some("timeout"),
            Err(CallError::Memory(_)) => Some("memory"),
            Err(CallError::Crashed(_)) => Some("crashed"),
            Err(CallError::OutputTooLarge(_)) => Some("output"),
            _ => None,
        };
        let built_in = self.runtime.tools()[index].is_built_in();
        // A path the tool found missing (a denied name answers as a missing
        // one in the policing filesystem, so it is among these).
        let unseen = matches!(
            &outcome.result,
            Err(CallError::Tool(ToolError::NotFound(_)))
        );
        let (result, bytes) = match (outcome.result, &self.quota, &disk) {
            (_, Some(q), _) if out_of_quota => (error_result(ran_out_of_quota(q, &activity)), 0),
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
                (error_result(disk_failed(*error, root, built_in)), 0)
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
        for r in &resolved {
            let path = clip(r.requested());
            // Where the previous content of this path went, if anywhere: the
            // guest keeps the entry it was asked about (a symlink itself, say),
            // the host resolved its target; either may match.
            let asked: PathBuf = r
                .requested()
                .split('/')
                .filter(|p| !p.is_empty() && *p != ".")
                .collect();
            let kept: Vec<&str> = outcome
                .kept
                .iter()
                .filter(|k| {
                    k.root == r.root().name
                        && (Path::new(&k.from) == r.real_rel() || Path::new(&k.from) == asked)
                })
                .map(|k| k.to.as_str())
                .collect();
            self.audit.log(
                &self
                    .record(tool, &r.root().name, &path, r.op())
                    .client(client)
                    .took(elapsed, bytes)
                    .kept(&kept)
                    .stopped(stopped),
            );
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
                    .stopped(stopped),
            );
        }
        for refusal in &outcome.refusals {
            self.audit.log(
                &self
                    .record(tool, &refusal.root, &clip(&refusal.path), refusal.op)
                    .client(client)
                    .denied(refusal.rule),
            );
        }
        // A limit that stopped the call, else the first rule the policing
        // filesystem applied (the guest may have gone on without it).
        let rule = stopped.or_else(|| outcome.refusals.first().map(|r| r.rule));
        Called {
            result,
            rule,
            unseen,
        }
    }
}

/// One call on its way to its guest: resolved, locked and stamped.
pub(super) struct Run<'a> {
    pub(super) tool: &'a str,
    pub(super) index: usize,
    /// The tool's declared path arguments, in the order of `resolved`.
    pub(super) paths: &'a [PathArg],
    pub(super) resolved: Vec<Resolved>,
    pub(super) arguments: JsonObject,
    pub(super) stamp: Option<String>,
    pub(super) control: Control,
    pub(super) locked: Locked,
    /// When waiting for a slot must end (the locks took their part).
    pub(super) waits_until: tokio::time::Instant,
}
