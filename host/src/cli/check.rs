//! `loom-fs-mcp check`: loads the config, the components and the cache as
//! serving would, and prints what the server would serve and what is wrong.
//! It serves nothing and changes no file but the compiled-component cache.

use super::*;

pub(super) fn check(cli: &Cli) -> anyhow::Result<()> {
    check_config(cli, load_config(cli)?)
}

/// `check` of a loaded config (`init` checks the file it wrote).
pub(super) fn check_config(cli: &Cli, config: Config) -> anyhow::Result<()> {
    // `check` may run beside the server it checks: it makes sure the audit
    // log can be opened, but does not take it; nothing is audited here.
    Audit::probe(&config.audit).with_context(|| audit_problem(&config))?;
    // What `serve` would refuse, `check` refuses too.
    let budget = descriptor_budget(&config, open_file_limit_when_serving());
    let http = match cli.http.transport {
        Transport::Stdio => None,
        Transport::Http => Some(http_options(
            &cli.http,
            config.limits.tool_timeout,
            &budget,
        )?),
    };
    let (cache, unused) = cache(&config);
    if config.landlock {
        Plan::new(&config, cache.dir())?;
    }
    let runtime = runtime(&config)?;
    let audit = Audit::open(&AuditTarget::Stderr, 0, 0)?;
    let toolbox = toolbox(config, audit, runtime, &cache)?;
    let config = toolbox.config();
    println!("config is valid");
    if config.read_only {
        println!("read-only: every root is capped at read");
    }
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
    let third_party = config.components.len();
    println!(
        "components: {} built-in, {third_party} third-party",
        runtime::BUILTINS.len()
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
    match &http {
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
            for line in limit_lines(&options.conns, &budget) {
                println!("  {line}");
            }
        }
    }
    let mut warnings: Vec<String> = unused.into_iter().collect();
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
    if let Some(options) = &http {
        warnings.extend(short_of_descriptors(&options.conns, &budget));
    }
    if !warnings.is_empty() {
        println!("warnings:");
        for w in warnings {
            println!("  {w}");
        }
    }
    Ok(())
}

/// A component's pin and signature, as `check` shows them (the start
/// already refused a file that does not match).
fn trust_line(c: &crate::config::ComponentEntry) -> String {
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
fn client_roots_text(client_roots: crate::config::ClientRoots) -> &'static str {
    match client_roots {
        crate::config::ClientRoots::Ignore => {
            "ignore (the client's roots are not asked for; every session is served these roots)"
        }
        crate::config::ClientRoots::Narrow => {
            "narrow: a 2025-era session is served only the parts of these roots under a root \
             its client declares (roots/list); a client root outside them all grants nothing, \
             and none ever widens (2026-07-28 sessions have no client roots: not narrowed)"
        }
    }
}

/// Whether tools may change `root` (so its reserve matters).
pub(super) fn writes(root: &Root) -> bool {
    root.perms.contains(Permission::Write)
}

/// For each root tools may change, its disk's free space against its
/// reserve, as `check` and the start-up lines show them.
pub(super) fn space_lines(config: &Config) -> Vec<String> {
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    config
        .roots
        .iter()
        .filter(|r| writes(r))
        .map(|r| {
            let free = space::free_bytes(&r.path).map_or_else(
                |e| format!("free space unknown ({e})"),
                |f| format!("{} free", space::human(f)),
            );
            format!(
                "{:width$}  {free} on its disk, keeps {} (min_free_bytes)",
                r.name,
                space::human(r.min_free_bytes)
            )
        })
        .collect()
}

/// A warning for each root tools may change whose disk has less free than
/// its reserve already.
pub(super) fn below_reserve(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for r in config.roots.iter().filter(|r| writes(r)) {
        if let Ok(free) = space::free_bytes(&r.path)
            && free < r.min_free_bytes
        {
            out.push(format!(
                "root '{}': its disk has {} free, below its min_free_bytes ({}): every change \
                 there is refused until space is freed",
                r.name,
                space::human(free),
                space::human(r.min_free_bytes)
            ));
        }
    }
    out
}

/// Whether tools may keep something in `root`'s trash (so its budget
/// matters).
pub(super) fn keeps(root: &Root) -> bool {
    root.perms.contains(Permission::Write) || root.perms.contains(Permission::Delete)
}

/// For each root tools may keep something in (of `only`, if named), its
/// trash against its budget (`check`, the start-up lines and `trash list`
/// show them), and a warning for each at [`trash::WARN_PERCENT`] of its
/// budget or past it. `usage` counts a root's trash: a walk, or the
/// server's count taken at start.
pub(super) fn trash_usage(
    config: &Config,
    only: Option<&str>,
    usage: impl Fn(&Root) -> std::io::Result<trash::Usage>,
) -> (Vec<String>, Vec<String>) {
    let roots = config
        .roots
        .iter()
        .filter(|r| keeps(r) && only.is_none_or(|name| name == r.name));
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let (mut lines, mut warnings) = (Vec::new(), Vec::new());
    for r in roots {
        match usage(r) {
            Ok(usage) => {
                lines.push(format!("{:width$}  trash holds {}", r.name, usage.text()));
                warnings.extend(usage.warning(&r.name));
            }
            Err(e) => lines.push(format!(
                "{:width$}  trash size unknown ({e}); trash_max_bytes {}",
                r.name,
                space::human(r.trash_max_bytes)
            )),
        }
    }
    (lines, warnings)
}
