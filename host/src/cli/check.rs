//! `loom-fs-mcp check`: loads the config, the components and the cache as
//! serving would, and prints what the server would serve and what is wrong.
//! It serves nothing and changes no file but the compiled-component cache.

use anyhow::Context as _;

use super::args::{Cli, Transport};
use super::http_flags::{http_options, limit_lines, short_of_descriptors};
use super::serve::warnings_of;
use super::usage::{space_lines, trash_usage};
use super::{
    audit_problem, bytes_text, cache, descriptor_budget, load_config, open_file_limit_when_serving,
    runtime, toolbox,
};
use crate::config::{AuditTarget, ClientRoots, ComponentEntry, Config};
use crate::policy::Permission;
use crate::server::http::HttpOptions;
use crate::server::http::conns::DescriptorBudget;
use crate::store::audit::Audit;
use crate::store::trash;
use crate::sys::sandbox::Plan;
use crate::tools::Toolbox;

pub(super) fn check(cli: &Cli) -> anyhow::Result<()> {
    check_config(cli, load_config(cli)?)
}

/// `check` of a loaded config (`init` checks the file it wrote).
pub(super) fn check_config(cli: &Cli, config: Config) -> anyhow::Result<()> {
    let checked = load_as_serving(cli, config)?;
    let config = checked.toolbox.config();
    println!("config is valid");
    if config.read_only {
        println!("read-only: every root is capped at read");
    }
    print_roots(config);
    print_history(config);
    let trash_warnings = print_space_and_trash(config);
    print_tools(&checked.toolbox);
    print_serving(config);
    print_components(config);
    print_quota_and_landlock(config);
    print_transport(cli, &checked);
    let mut warnings: Vec<String> = checked.unused_cache.into_iter().collect();
    warnings.extend(
        config
            .components
            .iter()
            .filter(|c| c.sha256.is_none())
            .map(|c| {
                format!(
                    "component {} is unpinned (unpinned = true): whatever file is at that path is \
             served; pin it with the sha256 `loom-fs-mcp component add` prints",
                    c.path.display()
                )
            }),
    );
    warnings.extend(warnings_of(config, &cli.http, cli.allow_root));
    warnings.extend(trash_warnings);
    if let Some(options) = &checked.http {
        warnings.extend(short_of_descriptors(&options.conns, &checked.budget));
    }
    if !warnings.is_empty() {
        println!("warnings:");
        for w in warnings {
            println!("  {w}");
        }
    }
    Ok(())
}

/// What `check` loaded as serving would: the tool surface, the HTTP
/// options (under `--transport http`), the descriptor budget, and why the
/// component cache is not used, if it is not.
struct Checked {
    toolbox: Toolbox,
    http: Option<HttpOptions>,
    budget: DescriptorBudget,
    unused_cache: Option<String>,
}

/// Loads `config` as `serve` would, refusing what it would refuse: the
/// audit log is probed (not taken: `check` may run beside the server it
/// checks; nothing is audited here), the HTTP flags, the sandbox plan,
/// the runtime and every component.
fn load_as_serving(cli: &Cli, config: Config) -> anyhow::Result<Checked> {
    Audit::probe(&config.audit).with_context(|| audit_problem(&config))?;
    let budget = descriptor_budget(&config, open_file_limit_when_serving());
    let http = match cli.http.transport {
        Transport::Stdio => None,
        Transport::Http => Some(http_options(
            &cli.http,
            config.limits.tool_timeout,
            &budget,
        )?),
    };
    let (cache, unused_cache) = cache(&config);
    if config.landlock {
        Plan::new(&config, cache.dir())?;
    }
    let runtime = runtime(&config)?;
    let audit = Audit::open(&AuditTarget::Stderr, 0, 0)?;
    let toolbox = toolbox(config, audit, runtime, &cache)?;
    Ok(Checked {
        toolbox,
        http,
        budget,
        unused_cache,
    })
}

/// Each root: name, role, permissions and its own deny patterns; then the
/// config-wide deny patterns.
fn print_roots(config: &Config) {
    println!("roots:");
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in &config.roots {
        let line = format!("  {:width$}  {:<10}  {}", r.name, r.role.as_str(), r.perms);
        if r.extra_deny.is_empty() {
            println!("{line}");
        } else {
            println!("{line:<46}  deny += {}", r.extra_deny.join(", "));
        }
    }
    if !config.deny.is_empty() {
        println!("deny (every root) += {}", config.deny.join(", "));
    }
}

/// The roots that offer git history, and of which repository.
fn print_history(config: &Config) {
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let history: Vec<String> = config
        .roots
        .iter()
        .filter_map(|r| {
            let repository = r.repository.as_ref()?;
            Some(if repository.scope.is_empty() {
                format!("  {:width$}  the repository at the root", r.name)
            } else {
                format!(
                    "  {:width$}  the repository above the root, limited to {}/",
                    r.name, repository.scope
                )
            })
        })
        .collect();
    if !history.is_empty() {
        println!("git history (git_history):");
        for line in history {
            println!("{line}");
        }
    }
}

/// Each changeable root's free space and trash against their limits;
/// returns the trash warnings, said with the others at the end.
fn print_space_and_trash(config: &Config) -> Vec<String> {
    let space = space_lines(config);
    if !space.is_empty() {
        println!("free space (min_free_bytes):");
        for line in space {
            println!("  {line}");
        }
    }
    let (trash_lines, trash_warnings) = trash_usage(config, None, trash::usage);
    if !trash_lines.is_empty() {
        println!("trash (trash_max_bytes):");
        for line in trash_lines {
            println!("  {line}");
        }
    }
    trash_warnings
}

/// The tools by the permission they need, then each tool's need, roots
/// and source.
fn print_tools(toolbox: &Toolbox) {
    println!("tools:");
    let surface = toolbox.surface();
    for p in Permission::ALL {
        let names: Vec<&str> = surface
            .iter()
            .filter(|(_, s)| s.need == p)
            .map(|(n, _)| *n)
            .collect();
        let listed = if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        };
        println!("  {p:<6}  {listed}");
    }
    println!(
        "tool surface (each tool, what it needs, the roots it may act on, where it comes from):"
    );
    let width = surface.keys().map(|n| n.len()).max().unwrap_or(0);
    for (name, s) in &surface {
        let capped = match s.declared {
            Some(declared) => format!("  (declares {declared}, capped)"),
            None => String::new(),
        };
        println!(
            "  {name:width$}  {:<6}  {:<24}  {}{capped}",
            s.need,
            s.roots.join(", "),
            s.source
        );
    }
}

/// What a session is served besides tools: resources, subscriptions, and
/// what its client's roots do.
fn print_serving(config: &Config) {
    // Resources and completion are calls of these tools (list_directory,
    // read_file): a root is served as resources where they may read.
    let readable: Vec<&str> = config
        .roots
        .iter()
        .filter(|r| r.perms.contains(Permission::Read))
        .map(|r| r.name.as_str())
        .collect();
    println!(
        "resources: {}ROOT/{{+path}} for {} (read through read_file and list_directory, \
         with path completion); logging: refusals and limits of a client's calls, at warning",
        crate::tools::SCHEME,
        if readable.is_empty() {
            "no root".to_string()
        } else {
            readable.join(", ")
        }
    );
    println!(
        "subscriptions: resources/subscribe and subscriptions/listen, at most {} per session, \
         {} notifications a second per session, never of a denied path",
        config.limits.max_subscriptions, config.limits.max_notifications_per_second
    );
    println!("client_roots: {}", client_roots_text(config.client_roots));
}

/// How many components are built in and third-party; each third-party
/// one's file, trust, roots, permission cap and limits.
fn print_components(config: &Config) {
    let third_party = config.components.len();
    println!(
        "components: {} built-in, {third_party} third-party",
        crate::runtime::BUILTINS.len()
    );
    for c in &config.components {
        println!("  {}", c.path.display());
        println!("    {}", trust_line(c));
        if let Some(names) = &c.roots {
            println!("    roots: {}", names.join(", "));
        }
        if let Some(cap) = c.cap {
            let cap: Vec<&str> = cap.iter().map(Permission::as_str).collect();
            println!("    permissions: {} (at most)", cap.join(", "));
        }
        println!(
            "    limits: memory {}, timeout {} ms, output {}",
            bytes_text(c.memory_bytes),
            c.timeout.as_millis(),
            bytes_text(c.max_output_bytes)
        );
    }
}

/// The byte quota and the kernel sandbox, on or off.
fn print_quota_and_landlock(config: &Config) {
    match config.quota {
        None => println!("quota: off (no quota_bytes_per_minute)"),
        Some(q) => println!(
            "quota: {} per minute read and written by tools, bursts up to {}",
            bytes_text(q.bytes_per_minute),
            bytes_text(q.burst_bytes)
        ),
    }
    if config.landlock {
        println!(
            "landlock: on: serve restricts itself to its roots, the audit log and the cache \
             (read-only)"
        );
    } else {
        println!("landlock: off");
    }
}

/// The transport, and under HTTP its address, token and limits.
fn print_transport(cli: &Cli, checked: &Checked) {
    match &checked.http {
        None => println!("transport: stdio"),
        Some(options) => {
            println!(
                "transport: http on {} ({})",
                cli.http.listen,
                if cli.http.auth_token_file.is_some() {
                    "bearer token required"
                } else {
                    "no token"
                }
            );
            for line in limit_lines(&options.conns, &checked.budget) {
                println!("  {line}");
            }
        }
    }
}

/// A component's pin and signature, as `check` shows them (the start
/// already refused a file that does not match).
fn trust_line(c: &ComponentEntry) -> String {
    let pin = match &c.sha256 {
        Some(digest) => format!("pinned: sha256 {digest} (matches)"),
        None => "UNPINNED: any file at this path is served".into(),
    };
    let signed = if c.signed {
        format!(
            "signed: {} verifies with a [trust] key",
            c.signature_path().display()
        )
    } else {
        "not signed".into()
    };
    format!("{pin}; {signed}")
}

/// What `client_roots` does, for `check`.
fn client_roots_text(client_roots: ClientRoots) -> &'static str {
    match client_roots {
        ClientRoots::Ignore => {
            "ignore (the client's roots are not asked for; every session is served these roots)"
        }
        ClientRoots::Narrow => {
            "narrow: a 2025-era session is served only the parts of these roots under a root \
             its client declares (roots/list); a client root outside them all grants nothing, \
             and none ever widens (2026-07-28 sessions have no client roots: not narrowed)"
        }
    }
}
