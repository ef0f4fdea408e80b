//! `loom-fs-mcp trash list|restore|undo|purge`: the operator's side of the
//! trash, printed for a person. Works through `store::trash`, which holds the
//! rules; never runs a tool.

use super::args::{Cli, TrashAction};
use super::usage::trash_usage;
use super::{load_config, plural, raise_open_file_limit};
use crate::config::Config;
use crate::store::trash;

/// `trash list|restore|purge`: the operator's side of the trash. It opens
/// no audit log and loads no component, so it runs beside a server; stdout
/// carries its results (it is no JSON-RPC channel here). Every path it
/// prints goes through [`trash::escaped`]: the model chose the names.
pub(super) fn trash(cli: &Cli, action: &TrashAction) -> anyhow::Result<()> {
    let config = load_config(cli)?;
    // A tree in the trash is walked with a directory open per level.
    let _ = raise_open_file_limit();
    // Which calls may still be running follows from the server's tool
    // timeout: this config's `tool_timeout_ms` must be the server's.
    let now = trash::Now::with_timeout(config.limits.tool_timeout);
    let out = &mut std::io::stdout().lock();
    let done = match action {
        TrashAction::List { root, .. } => trash_list(out, &config, root.as_deref(), now),
        TrashAction::Restore { id, to, .. } => trash_restore(out, &config, id, to.as_deref(), now),
        TrashAction::Undo { call, since, .. } => trash_undo(out, &config, call.as_deref(), *since),
        TrashAction::Purge {
            older_than,
            root,
            dry_run,
            ..
        } => trash_purge(out, &config, root.as_deref(), *older_than, now, *dry_run),
    };
    match done {
        // `trash list | head`: the reader has seen enough.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        done => done,
    }
}

/// `trash list`: one line per entry. What calls still running kept is only
/// counted, on stderr: its IDs are not final yet.
pub(super) fn trash_list(
    out: &mut impl std::io::Write,
    config: &Config,
    only: Option<&str>,
    now: trash::Now,
) -> anyhow::Result<()> {
    let listing = trash::list(&config.roots, only, now)?;
    not_listed_yet(listing.in_flight, now);
    trash_lines(out, &listing.entries)?;
    // On stderr: stdout is one line per entry, for scripts.
    let (usage, warnings) = trash_usage(config, only, trash::usage);
    for line in usage {
        eprintln!("loom-fs-mcp: {line}");
    }
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// `trash restore`: finds the entry by ID among those `list` shows.
pub(super) fn trash_restore(
    out: &mut impl std::io::Write,
    config: &Config,
    id: &str,
    to: Option<&str>,
    now: trash::Now,
) -> anyhow::Result<()> {
    let listing = trash::list(&config.roots, None, now)?;
    let found = trash::find(&listing.entries, id)
        .inspect_err(|_| not_listed_yet(listing.in_flight, now))?;
    let id = trash::short_ids(&listing.entries)[found];
    let restored = trash::restore(&config.roots, &listing.entries[found], to)?;
    writeln!(
        out,
        "restored {id}: {}/{}",
        restored.root.name,
        trash::escaped(&restored.path)
    )?;
    Ok(())
}

/// `trash undo`: each call undone as one transaction (see
/// `store::trash::undo`), under the path locks of what it touches, newest
/// first; the first refusal stops the rest.
pub(super) fn trash_undo(
    out: &mut impl std::io::Write,
    config: &Config,
    call: Option<&str>,
    since: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let calls = match (call, since) {
        (Some(call), _) => vec![call.to_string()],
        (None, Some(since)) => {
            trash::calls_since(&config.roots, std::time::SystemTime::now() - since)?
        }
        (None, None) => anyhow::bail!("name a call, or --since DURATION"),
    };
    if calls.is_empty() {
        writeln!(out, "no call changed anything in that time")?;
        return Ok(());
    }
    let staging = crate::store::staging::Staging::new();
    let locks = crate::store::locks::PathLocks::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    for (n, call) in calls.iter().enumerate() {
        let keys = trash::undo_places(&config.roots, call)?
            .into_iter()
            .map(|(root, rel)| crate::store::locks::Key { root, rel })
            .collect();
        let deadline = tokio::time::Instant::now() + config.limits.tool_timeout;
        let cancel = tokio_util::sync::CancellationToken::new();
        let locked = rt.block_on(async { locks.lock(keys, deadline, &cancel).await })?;
        let stamp = crate::store::trash_stamp();
        let undone = trash::undo(&config.roots, call, &staging, &stamp);
        drop(locked);
        match undone {
            Ok(u) => {
                writeln!(
                    out,
                    "undid {call}: {} put back; what it had put in place is kept in trash \
                     entry {} (call {})",
                    u.published.put.len(),
                    u.stamp,
                    u.stamp
                )?;
            }
            Err(e) if n > 0 => anyhow::bail!("undid {n} of {} calls; {call}: {e}", calls.len()),
            Err(e) => return Err(e.into()),
        }
    }
    for root in &config.roots {
        if root.trash_max_bytes > 0 {
            let _ = trash::recount(root);
        }
    }
    Ok(())
}

/// `trash purge`: a line per entry removed, then the totals.
pub(super) fn trash_purge(
    out: &mut impl std::io::Write,
    config: &Config,
    only: Option<&str>,
    older_than: std::time::Duration,
    now: trash::Now,
    dry_run: bool,
) -> anyhow::Result<()> {
    let purged = trash::purge(&config.roots, only, older_than, now, dry_run)?;
    trash_lines(out, &purged.entries)?;
    let n = purged.entries.len();
    let bytes: u64 = purged.entries.iter().map(|e| e.size).sum();
    writeln!(
        out,
        "{} {n} {} ({bytes} bytes) in {} {}",
        if dry_run { "would purge" } else { "purged" },
        plural(n, "entry", "entries"),
        purged.dirs,
        plural(purged.dirs, "trash directory", "trash directories"),
    )?;
    if purged.temps > 0 {
        writeln!(
            out,
            "{} {} leftover temporary index {}",
            if dry_run { "would remove" } else { "removed" },
            purged.temps,
            plural(purged.temps, "file", "files"),
        )?;
    }
    if !purged.staged.is_empty() {
        let servers = purged.staged.servers;
        writeln!(
            out,
            "{} the unfinished files of {servers} stopped {} from the staging area",
            if dry_run { "would remove" } else { "removed" },
            plural(servers, "server", "servers"),
        )?;
    }
    if purged.in_flight > 0 {
        writeln!(
            out,
            "left {} {} of calls that may still be running",
            purged.in_flight,
            plural(purged.in_flight, "trash directory", "trash directories"),
        )?;
    }
    Ok(())
}

/// One [`trash::Entry::line`] per entry, with the IDs to show.
pub(super) fn trash_lines(
    out: &mut impl std::io::Write,
    entries: &[trash::Entry],
) -> std::io::Result<()> {
    let ids = trash::short_ids(entries);
    entries
        .iter()
        .zip(ids)
        .try_for_each(|(e, id)| writeln!(out, "{}", e.line(id)))
}

/// Tells, on stderr, of trash directories a listing left out because
/// their calls may still be running.
pub(super) fn not_listed_yet(count: usize, now: trash::Now) {
    let within = humantime::format_duration(now.in_flight);
    match count {
        0 => {}
        1 => eprintln!(
            "loom-fs-mcp: 1 trash directory of a call that may still be running is not listed \
             yet; it is once the call ends (at most {within} after it started)"
        ),
        n => eprintln!(
            "loom-fs-mcp: {n} trash directories of calls that may still be running are not \
             listed yet; they are once their calls end (at most {within} after they started)"
        ),
    }
}
