//! Serving: the start-up checks and warnings, the kernel sandbox, the
//! staging sweep, then MCP over stdio or HTTP until the client goes. Under
//! stdio nothing here writes to stdout but the JSON-RPC channel.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::ServiceExt;

use super::args::{Cli, HttpArgs, Transport};
use super::http_flags::{http_options, limit_lines, short_of_descriptors};
use super::usage::{below_reserve, space_lines, trash_usage};
use super::{
    cache, descriptor_budget, dir_args, load_config, open_audit, plural, raise_open_file_limit,
    runtime, toolbox,
};
use crate::config::{AuditTarget, Config};
use crate::policy::Permission;
use crate::runtime::{Cache, Runtime};
use crate::server::http::conns::DescriptorBudget;
use crate::server::http::{self, HttpOptions};
use crate::server::mcp::Server;
use crate::server::stdio;
use crate::store;
use crate::store::audit::Audit;
use crate::store::staging;
use crate::store::trash;
use crate::sys::sandbox::{self, Plan, Status};
use crate::tools::Toolbox;

/// What an operator should know before serving this config.
pub(super) fn warnings_of(config: &Config, http: &HttpArgs, allow_root: bool) -> Vec<String> {
    let mut out = root_warnings(config);
    out.extend(below_reserve(config));
    if let Some(q) = config.quota {
        let largest = config
            .roots
            .iter()
            .map(|r| r.max_read_bytes)
            .max()
            .unwrap_or(0);
        if q.burst_bytes < largest {
            out.push(format!(
                "quota_burst_bytes ({}) is below the largest max_read_bytes ({largest}): a \
                 read_file of a file between them never fits in the quota",
                q.burst_bytes
            ));
        }
    }
    if rustix::process::geteuid().is_root() {
        out.push(if allow_root {
            format!("running as root (--allow-root): {ROOT_RISK}")
        } else {
            format!("running as root: {ROOT_RISK}; serve refuses to start unless --allow-root")
        });
    }
    if config.landlock {
        if !sandbox::available() {
            out.push(if cfg!(target_os = "linux") {
                "landlock = true, but this kernel has no Landlock: the server would run \
                 without the kernel sandbox"
                    .into()
            } else {
                format!(
                    "landlock = true, but {}: the server would run without the kernel sandbox",
                    sandbox::unavailable()
                )
            });
        }
        if let Some(dir) = sandbox::shared_audit_dir(config) {
            out.push(shared_audit_dir(&dir));
        }
    }
    if http.transport == Transport::Http {
        out.extend(exposure(http));
    }
    out
}

/// What each root exposes that it should not: the whole filesystem, the
/// home directory, keys, the audit log.
fn root_warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| std::fs::canonicalize(h).ok());
    for r in &config.roots {
        if r.path == Path::new("/") {
            out.push(format!(
                "root '{}' is the filesystem root: every file the server can read is exposed",
                r.name
            ));
        } else if home.as_deref().is_some_and(|h| h.starts_with(&r.path)) {
            out.push(format!(
                "root '{}' is or holds your home directory: dotfiles and keys the deny list does not name are exposed",
                r.name
            ));
        }
        if r.path.join(".ssh").exists() {
            out.push(format!(
                "root '{}' holds .ssh: denied by name, but a root should not contain keys at all",
                r.name
            ));
        }
        if let AuditTarget::File(log) = &config.audit {
            let log = log
                .parent()
                .and_then(|p| std::fs::canonicalize(p).ok())
                .map(|p| p.join(log.file_name().unwrap_or_default()));
            if log.is_some_and(|l| l.starts_with(&r.path)) {
                out.push(format!(
                    "the audit log is inside root '{}': tools can read it (and, where the role allows, change it)",
                    r.name
                ));
            }
        }
    }
    out
}

/// The risk of the HTTP address, if it is not loopback: said by `serve` on
/// start and by `check` among its warnings.
pub(super) fn exposure(http: &HttpArgs) -> Option<String> {
    (!http.listen.ip().is_loopback()).then(|| {
        format!(
            "listening on {}, which is not loopback: anyone who can reach it can use every \
             root with its permissions{}",
            http.listen,
            if http.auth_token_file.is_none() {
                ", and no --auth-token-file is set"
            } else {
                " if they hold the token"
            }
        )
    })
}

/// Serves MCP until the client goes: start-up checks and lines, the
/// sandbox, the components loaded meanwhile (see [`spawn_loader`]), then
/// stdio or HTTP; a guest still running finishes before the process ends.
pub(super) fn serve(cli: &Cli) -> anyhow::Result<()> {
    refuse_root(cli)?;
    let config = load_config(cli)?;
    // A call may wait for a slot, then run, each up to the tool timeout.
    let drain = config.limits.tool_timeout * 2 + std::time::Duration::from_secs(1);
    let budget = descriptor_budget(&config, raise_open_file_limit());
    let audit = open_audit(&config)?;
    // Kept to close the log at exit: lines still waiting to be written (a
    // full disk) are tried once more, and go to stderr if they cannot be.
    let audit_at_exit = audit.clone();
    print_start(cli, &config);
    let http = http_for_serving(cli, &config, &budget)?;
    // Read before the sandbox, which hides the cgroup files that tell.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cache = cache_for_serving(&config)?;
    let runtime = runtime(&config)?;
    let (ready, loaded) = tokio::sync::watch::channel(None);
    spawn_loader(config, audit, runtime, cache, ready)?;
    let rt = async_runtime(http.is_some(), workers)?;
    let server = Server::new(loaded);
    let guests = server.clone();
    let served = match http {
        None => {
            eprintln!("serving MCP over stdio");
            rt.block_on(serve_stdio(server, drain))
        }
        Some(options) => rt.block_on(serve_http(server, options)),
    };
    // A guest still running finishes before the process ends (as long as
    // a call may wait for a slot and then run).
    rt.block_on(guests.guests_finished(drain));
    audit_at_exit.close();
    served
}

/// The start-up lines on stderr: the version and roots, the names chosen
/// for directories given on the command line, each root's free space
/// against its reserve, and how paths are resolved when not by openat2.
fn print_start(cli: &Cli, config: &Config) {
    eprintln!(
        "loom-fs-mcp {}: {} root{}{}",
        env!("CARGO_PKG_VERSION"),
        config.roots.len(),
        if config.roots.len() == 1 { "" } else { "s" },
        if config.read_only { " (read-only)" } else { "" }
    );
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let dirs = dir_args(cli);
    for r in &config.roots {
        eprintln!("  {:width$}  {:<10}  {}", r.name, r.role.as_str(), r.perms);
    }
    if !dirs.is_empty() {
        // Directories given on the command line: the names chosen for them.
        for r in &config.roots {
            eprintln!("  {:width$}  is {}", r.name, r.path.display());
        }
        if !config.grants(Permission::Write) {
            eprintln!(
                "  (read only: tools may write in a directory given after --sourcecode, \
                 and write and delete after --workspace)"
            );
        }
    }
    for line in space_lines(config) {
        eprintln!("  {line}");
    }
    for warning in below_reserve(config) {
        eprintln!("warning: {warning}");
    }
    if crate::sys::openat2::portable() {
        eprintln!(
            "resolution: the portable walk, not openat2 (LOOMFS_PORTABLE_RESOLVE=1, for tests)"
        );
    }
}

/// Under `--transport http`, the endpoint's options, with the address's
/// risk, the connection limits and a shortage of descriptors said on
/// stderr; `None` under stdio.
fn http_for_serving(
    cli: &Cli,
    config: &Config,
    budget: &DescriptorBudget,
) -> anyhow::Result<Option<HttpOptions>> {
    if cli.http.transport == Transport::Stdio {
        return Ok(None);
    }
    let options = http_options(&cli.http, config.limits.tool_timeout, budget)?;
    if let Some(risk) = exposure(&cli.http) {
        eprintln!("warning: {risk}");
    }
    for line in limit_lines(&options.conns, budget) {
        eprintln!("{line}");
    }
    if let Some(short) = short_of_descriptors(&options.conns, budget) {
        eprintln!("warning: {short}");
    }
    Ok(Some(options))
}

/// The component cache as serving uses it (with a warning if it is not
/// used), after the kernel sandbox is applied when `landlock = true`: a
/// sandboxed server only reads the cache, since what it wrote there would
/// run in every later start.
fn cache_for_serving(config: &Config) -> anyhow::Result<Cache> {
    let (cache, unused) = cache(config);
    if let Some(why) = unused {
        eprintln!("warning: {why}");
    }
    if !config.landlock {
        return Ok(cache);
    }
    restrict(config, cache.dir())?;
    Ok(cache.read_only())
}

/// Starts the thread that sweeps the staging areas, recounts the trashes
/// and loads the components, then sends the tool surface on `ready`. The
/// client's handshake needs no component: it is answered at once, and
/// tool requests wait for the surface; a component that fails to load
/// stops the server with the reason.
fn spawn_loader(
    config: Config,
    audit: Audit,
    runtime: Runtime,
    cache: Cache,
    ready: tokio::sync::watch::Sender<Option<Arc<Toolbox>>>,
) -> anyhow::Result<()> {
    let sandboxed = config.landlock;
    std::thread::Builder::new()
        .name("load-components".into())
        .spawn(move || {
            sweep_staging(&config);
            count_trash(&config);
            match toolbox(config, audit, runtime, &cache) {
                Ok(toolbox) => {
                    // Said before the first call is served: a client that
                    // ends the server after it still reads it.
                    if cache.missed() && sandboxed {
                        eprintln!(
                            "landlock: components not in the cache were compiled and not cached (a \
                         sandboxed server never writes code for later starts); run `loom-fs-mcp \
                         check` with this config once to cache them"
                        );
                    }
                    let _ = ready.send(Some(Arc::new(toolbox)));
                }
                Err(e) => {
                    eprintln!("loom-fs-mcp: {e:#}");
                    std::process::exit(1);
                }
            }
        })
        .context("cannot start the component loader")?;
    Ok(())
}

/// The async runtime the transport runs on. Under stdio the one client's
/// lines are read, dispatched and answered on this thread alone (guests
/// run on their own threads either way): a call's answer then goes out
/// without waking a second worker, one thread hand-off fewer per call,
/// and a 4 KiB `read_file` costs a fifth less CPU (see
/// docs/benchmarks.md, Design measurements). HTTP serves many connections
/// at once, on `workers` threads.
fn async_runtime(http: bool, workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = if http {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    rt.context("cannot start the async runtime")
}

/// Finishes the publishes servers that are gone (killed mid-call) had
/// committed, then removes what else they left in the staging area of each
/// root this server may change, and says so.
pub(super) fn sweep_staging(config: &Config) {
    for root in config
        .roots
        .iter()
        .filter(|r| r.perms.contains(Permission::Write) || r.perms.contains(Permission::Delete))
    {
        match staging::sweep(root, false) {
            Ok(swept) if !swept.is_empty() => {
                trash::record_recovered(std::slice::from_ref(root), &swept.recovered);
                if !swept.recovered.is_empty() {
                    eprintln!(
                        "{}: finished {} publish{} a stopped server had begun",
                        root.name,
                        swept.recovered.len(),
                        if swept.recovered.len() == 1 { "" } else { "es" },
                    );
                }
                eprintln!(
                    "{}: removed the unfinished files of {} stopped {} from its staging area",
                    root.name,
                    swept.servers,
                    plural(swept.servers, "server", "servers"),
                );
            }
            Ok(_) => {}
            Err(e) => eprintln!(
                "warning: {}: cannot clear its staging area ({}/{}): {e}",
                root.name,
                store::TRASH_DIR,
                staging::STAGING_DIR
            ),
        }
    }
}

/// Counts each root's trash afresh (a count left high by a server that
/// was killed comes right) and says, in the start-up lines, how full it is
/// against its budget; warns of one at 80 % of it or past.
pub(super) fn count_trash(config: &Config) {
    let (lines, warnings) = trash_usage(config, None, |root| {
        let size = if root.trash_max_bytes > 0 {
            trash::recount(root)?
        } else {
            trash::usage(root)?.size
        };
        Ok(trash::Usage {
            size,
            budget: root.trash_max_bytes,
        })
    });
    for line in lines {
        eprintln!("  {line}");
    }
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
}

pub(super) const ROOT_RISK: &str =
    "root bypasses file permissions, so a bug in the server could reach any file on this machine";

/// Serving as root is refused unless `--allow-root` accepts the risk.
pub(super) fn refuse_root(cli: &Cli) -> anyhow::Result<()> {
    anyhow::ensure!(
        cli.allow_root || !rustix::process::geteuid().is_root(),
        "refusing to run as root: {ROOT_RISK}; run loom-fs-mcp as an ordinary user, or pass \
         --allow-root (LOOMFS_ALLOW_ROOT=1) to accept the risk"
    );
    Ok(())
}

/// Applies the kernel sandbox (`landlock = true`). What needs the whole
/// filesystem is done (the config, the audit log, the token file) and no
/// thread has started: the runtime's epoch ticker, the component loader and
/// tokio's workers all start after this, restricted like this thread.
pub(super) fn restrict(config: &Config, cache: Option<&Path>) -> anyhow::Result<()> {
    anyhow::ensure!(
        sandbox::lone_thread() != Some(false),
        "a thread started before the kernel sandbox, which would not cover it"
    );
    if let Some(dir) = sandbox::shared_audit_dir(config) {
        eprintln!("warning: {}", shared_audit_dir(&dir));
    }
    // It opens the policing filesystem's `/proc/self/fd`, which the
    // sandbox would refuse afterwards (a directory outside the roots).
    crate::runtime::fs::self_test().map_err(anyhow::Error::msg)?;
    match Plan::new(config, cache)?.restrict_self()? {
        status @ Status::Enforced { .. } => eprintln!("landlock: {status}"),
        status @ Status::NotEnforced(_) => eprintln!("warning: {status}"),
    }
    Ok(())
}

pub(super) fn shared_audit_dir(dir: &Path) -> String {
    format!(
        "the audit log's directory {} holds other files: the kernel sandbox lets the server \
         create, write and remove files anywhere under it; give the audit log a directory of \
         its own",
        dir.display()
    )
}

pub(super) async fn serve_stdio(
    server: Server,
    answer_wait: std::time::Duration,
) -> anyhow::Result<()> {
    let (input, output) = stdio::std_streams();
    let service = server
        .serve(stdio::Guarded::new(input, output).answering_for(answer_wait))
        .await
        .context("MCP session failed to start")?;
    // SIGTERM or SIGINT ends the session as a closed stdin does, so that
    // what must be done at exit is (the audit lines still waiting).
    let cancel = service.cancellation_token();
    on_stop_signal("loom-fs-mcp: stopping", move || cancel.cancel())?;
    // rmcp's session ends by closing the transport, which writes out what
    // is still queued for the client.
    service
        .waiting()
        .await
        .context("MCP session ended with an error")?;
    Ok(())
}

/// At the first SIGTERM or SIGINT, says `message` on stderr and runs `stop`.
fn on_stop_signal(
    message: &'static str,
    stop: impl FnOnce() + Send + 'static,
) -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("{message}");
        stop();
    });
    Ok(())
}

pub(super) async fn serve_http(server: Server, options: HttpOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let bound = listener.local_addr()?;
    eprintln!("serving MCP over HTTP on http://{bound}/mcp (health: http://{bound}/health)");
    let stop = tokio_util::sync::CancellationToken::new();
    let trigger = stop.clone();
    on_stop_signal(
        "loom-fs-mcp: stopping: finishing the calls in flight",
        move || trigger.cancel(),
    )?;
    http::serve(listener, server, &options, stop)
        .await
        .context("HTTP server failed")
}
