//! `loom-fs-mcp`: the command line. Serves MCP over stdio (the default),
//! checks a config, or lists, restores and purges the trash. Under stdio,
//! stdout is the JSON-RPC channel: everything else (banner, logs, audit)
//! goes to stderr.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt;

use crate::config::{AuditTarget, Config};
use crate::policy::{Permission, Root};
use crate::runtime::{self, Budget, Cache, Runtime};
use crate::server::http::conns::{self, ConnLimits, DescriptorBudget};
use crate::server::http::{self, HttpOptions};
use crate::server::mcp::Server;
use crate::server::stdio;
use crate::store;
use crate::store::audit::Audit;
use crate::store::staging;
use crate::store::trash;
use crate::sys::sandbox::{self, Plan, Status};
use crate::sys::space;
use crate::tools::Toolbox;

#[derive(Parser)]
#[command(
    name = "loom-fs-mcp",
    version,
    about = "A filesystem MCP server with roles; every tool runs as a WebAssembly component."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The config file (TOML): roots, roles, deny patterns, limits.
    #[arg(long, global = true, value_name = "FILE", env = "LOOMFS_CONFIG")]
    config: Option<PathBuf>,
    /// Cap every root at read, whatever its role.
    #[arg(long, global = true, env = "LOOMFS_READ_ONLY",
        value_parser = clap::builder::BoolishValueParser::new())]
    read_only: bool,
    /// Serve even as root (refused otherwise: root bypasses file
    /// permissions, so a bug in the server could reach any file).
    #[arg(long, global = true, env = "LOOMFS_ALLOW_ROOT",
        value_parser = clap::builder::BoolishValueParser::new())]
    allow_root: bool,
    #[command(flatten)]
    http: HttpArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    /// JSON-RPC lines on stdin/stdout (what a client that starts the server uses).
    Stdio,
    /// Streamable HTTP on `--listen`, endpoint `/mcp`.
    Http,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Serving (and `check` of a serving setup)")]
struct HttpArgs {
    /// How to serve MCP.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "stdio",
        env = "LOOMFS_TRANSPORT"
    )]
    transport: Transport,
    /// Address to listen on (HTTP); port 0 picks a free one.
    #[arg(
        long,
        global = true,
        value_name = "ADDR",
        default_value = "127.0.0.1:3000",
        env = "LOOMFS_LISTEN"
    )]
    listen: SocketAddr,
    /// Allow listening on an address that is not loopback.
    #[arg(long, global = true, env = "LOOMFS_ALLOW_NON_LOOPBACK",
        value_parser = clap::builder::BoolishValueParser::new())]
    allow_non_loopback: bool,
    /// File holding the bearer token every HTTP request must carry.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LOOMFS_AUTH_TOKEN_FILE"
    )]
    auth_token_file: Option<PathBuf>,
    /// A `Host` header value to accept besides the bound address and
    /// loopback names (repeatable).
    #[arg(
        long = "allowed-host",
        global = true,
        value_name = "HOST",
        env = "LOOMFS_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// An `Origin` to accept besides loopback origins, with its scheme
    /// (`https://app.example.com:443`; repeatable).
    #[arg(
        long = "allowed-origin",
        global = true,
        value_name = "ORIGIN",
        env = "LOOMFS_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// Largest HTTP request body.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = 4 << 20, env = "LOOMFS_MAX_BODY_BYTES")]
    max_body_bytes: usize,
    /// Most MCP sessions open at once (2025-era clients).
    #[arg(
        long,
        global = true,
        value_name = "N",
        default_value_t = 64,
        env = "LOOMFS_MAX_SESSIONS"
    )]
    max_sessions: usize,
    /// Seconds after which a session without requests is closed.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 300,
        env = "LOOMFS_SESSION_IDLE_SECS"
    )]
    session_idle_secs: u64,
    /// Seconds a request's head may take to arrive, from the connection's
    /// start or the end of the previous answer (so also how long a
    /// kept-alive connection may sit idle).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 5,
        env = "LOOMFS_HEADER_TIMEOUT_SECS"
    )]
    header_timeout_secs: u64,
    /// Least rate of a request body, in bytes per second: every window of
    /// --header-timeout-secs must bring the rate × the window (slower: 408,
    /// closed); 0 for none.
    #[arg(
        long,
        global = true,
        value_name = "BYTES_PER_SEC",
        default_value_t = 1024,
        env = "LOOMFS_MIN_BODY_RATE"
    )]
    min_body_rate: u64,
    /// Seconds a whole request body may take to arrive, however fast it
    /// goes (later: 408, closed).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 60,
        env = "LOOMFS_BODY_TIMEOUT_SECS"
    )]
    body_timeout_secs: u64,
    /// Seconds a write of an answer may wait without the client reading any
    /// of it (then the connection closes).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 30,
        env = "LOOMFS_SEND_TIMEOUT_SECS"
    )]
    send_timeout_secs: u64,
    /// Most HTTP connections open at once [default: what the descriptor
    /// limit leaves once tool calls have their share, at most 4096].
    #[arg(long, global = true, value_name = "N", env = "LOOMFS_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Most HTTP connections open at once from one client address (an IPv6
    /// client by its /64) [default: a quarter of --max-connections].
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "LOOMFS_MAX_CONNECTIONS_PER_CLIENT"
    )]
    max_connections_per_client: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate the config; print the roots and the tool surface it gives.
    Check,
    /// What tools deleted or replaced, kept in each root's `.mcp-trash`.
    /// Runs beside a server; never a tool.
    Trash {
        #[command(subcommand)]
        action: TrashAction,
    },
}

#[derive(Subcommand)]
enum TrashAction {
    /// One line per entry: ID, root, original path, deleted at (RFC 3339,
    /// UTC), size in bytes; tab-separated, oldest first.
    List {
        /// Only this root's trash.
        #[arg(long, value_name = "NAME")]
        root: Option<String>,
    },
    /// Put an entry back at its original path; refused if something is
    /// there.
    Restore {
        /// The entry's ID as listed (or at least 4 of its first digits).
        id: String,
        /// Put it here instead (relative to the entry's root).
        #[arg(long = "to", value_name = "NEW_PATH")]
        to: Option<String>,
    },
    /// Remove for good the entries older than a duration.
    Purge {
        /// `30d`, `12h`, `90m`...; `0s` for every entry.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only this root's trash.
        #[arg(long, value_name = "NAME")]
        root: Option<String>,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOOMFS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Check) => check(&cli),
        Some(Command::Trash { action }) => trash(&cli, action),
        None => serve(&cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loom-fs-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let path = cli.config.as_deref().context(
        "no config given: pass --config FILE or set LOOMFS_CONFIG (roots.example.toml in the repository is a working example)",
    )?;
    Ok(Config::load(path, cli.read_only)?)
}

/// The audit log: a server that cannot audit must not start.
fn open_audit(config: &Config) -> anyhow::Result<Audit> {
    Audit::open(&config.audit, config.audit_max_bytes, config.audit_backups)
        .with_context(|| audit_problem(config))
}

fn audit_problem(config: &Config) -> String {
    match &config.audit {
        AuditTarget::File(path) => format!("cannot open the audit log {}", path.display()),
        AuditTarget::Stderr => "cannot use stderr for the audit log".into(),
    }
}

fn runtime(config: &Config) -> anyhow::Result<Runtime> {
    Runtime::new(Budget {
        memory_bytes: config.limits.tool_memory_bytes,
        timeout: config.limits.tool_timeout,
        output_bytes: config.limits.max_output_bytes,
    })
    .map_err(|e| anyhow::anyhow!("cannot start the WebAssembly runtime: {e}"))
}

/// Loads the built-in components, then the config's, and builds the tool
/// surface. A third-party component that cannot be a tool stops the start
/// with its file and the reason.
fn toolbox(
    config: Config,
    audit: Audit,
    mut runtime: Runtime,
    cache: &Cache,
) -> anyhow::Result<Toolbox> {
    for (name, wasm) in runtime::BUILTINS {
        let component = cache
            .component(runtime.engine(), name, wasm)
            .map_err(|e| anyhow::anyhow!("built-in component {name}: {e}"))?;
        runtime
            .load(&component, runtime::BUILT_IN.into())
            .map_err(|e| anyhow::anyhow!("built-in component {name}: {e}"))?;
    }
    for path in &config.components {
        let file = path.display().to_string();
        let fail = |why: String| anyhow::anyhow!("component {file}: {why}");
        let wasm = std::fs::read(path).map_err(|e| fail(format!("cannot be read: {e}")))?;
        runtime::check_component_bytes(&wasm).map_err(fail)?;
        let stem = path
            .file_stem()
            .map_or("component".into(), |s| s.to_string_lossy().into_owned());
        let component = cache
            .component(runtime.engine(), &format!("ext-{stem}"), &wasm)
            .map_err(|e| fail(format!("{e}")))?;
        runtime
            .load(&component, file.clone())
            .map_err(|e| fail(format!("{e}")))?;
    }
    Ok(Toolbox::new(config, runtime, audit)?)
}

/// Each call holds a few file descriptors (its roots, the files it opens):
/// use the hard limit, not the often small soft one. Returns the limit the
/// process then has.
fn raise_open_file_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// The descriptor limit `serve` would have: the hard limit, which it
/// raises its soft limit to.
fn open_file_limit_when_serving() -> u64 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.maximum.or(limit.current).unwrap_or(u64::MAX)
}

/// How `limit` descriptors are shared out under this config.
fn descriptor_budget(config: &Config, limit: u64) -> DescriptorBudget {
    DescriptorBudget::new(
        limit,
        config.roots.len(),
        config.limits.max_concurrent_calls,
    )
}

fn check(cli: &Cli) -> anyhow::Result<()> {
    let config = load_config(cli)?;
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
    let space = space_lines(config);
    if !space.is_empty() {
        println!("free space (min_free_bytes):");
        for line in space {
            println!("  {line}");
        }
    }
    println!("tools:");
    let surface = toolbox.surface();
    for p in Permission::ALL {
        let names: Vec<&str> = surface
            .iter()
            .filter(|(_, (need, _))| *need == p)
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
    for (name, (need, source)) in &surface {
        let roots: Vec<&str> = config
            .roots
            .iter()
            .filter(|r| r.perms.contains(*need))
            .map(|r| r.name.as_str())
            .collect();
        println!(
            "  {name:width$}  {need:<6}  {:<24}  {source}",
            roots.join(", ")
        );
    }
    let third_party = config.components.len();
    println!(
        "components: {} built-in, {third_party} third-party",
        runtime::BUILTINS.len()
    );
    for path in &config.components {
        println!("  {}", path.display());
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
    warnings.extend(warnings_of(config, &cli.http, cli.allow_root));
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

/// Whether tools may change `root` (so its reserve matters).
fn writes(root: &Root) -> bool {
    root.perms.contains(Permission::Write)
}

/// For each root tools may change, its disk's free space against its
/// reserve, as `check` and the start-up lines show them.
fn space_lines(config: &Config) -> Vec<String> {
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
fn below_reserve(config: &Config) -> Vec<String> {
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

/// The compiled-component cache, and why it is not used if it is not: a
/// cache in a root that tools may change would let a tool plant compiled
/// code for the next start to run.
fn cache(config: &Config) -> (Cache, Option<String>) {
    let cache = Cache::from_env();
    let Some(dir) = cache.dir().map(sandbox::real) else {
        return (cache, None);
    };
    let changing = config.roots.iter().find(|r| {
        (r.perms.contains(Permission::Write) || r.perms.contains(Permission::Delete))
            && dir.starts_with(&r.path)
    });
    match changing {
        None => (cache, None),
        Some(r) => (
            Cache::none(),
            Some(format!(
                "the component cache {} lies in root '{}', which tools may change: it is not \
                 used (components are compiled at each start); set LOOMFS_CACHE_DIR to a \
                 directory outside the roots",
                dir.display(),
                r.name
            )),
        ),
    }
}

/// "1048576 bytes (1.0 MiB)": exact, and readable.
fn bytes_text(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, size)| bytes >= *size) {
        Some((unit, size)) => format!("{bytes} bytes ({:.1} {unit})", bytes as f64 / *size as f64),
        None => format!("{bytes} bytes"),
    }
}

/// What an operator should know before serving this config.
fn warnings_of(config: &Config, http: &HttpArgs, allow_root: bool) -> Vec<String> {
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
            out.push(
                "landlock = true, but this kernel has no Landlock: the server would run \
                 without the kernel sandbox"
                    .into(),
            );
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

/// The risk of the HTTP address, if it is not loopback: said by `serve` on
/// start and by `check` among its warnings.
fn exposure(http: &HttpArgs) -> Option<String> {
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

fn serve(cli: &Cli) -> anyhow::Result<()> {
    refuse_root(cli)?;
    let config = load_config(cli)?;
    let budget = descriptor_budget(&config, raise_open_file_limit());
    let audit = open_audit(&config)?;
    eprintln!(
        "loom-fs-mcp {}: {} root{}{}",
        env!("CARGO_PKG_VERSION"),
        config.roots.len(),
        if config.roots.len() == 1 { "" } else { "s" },
        if config.read_only { " (read-only)" } else { "" }
    );
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in &config.roots {
        eprintln!("  {:width$}  {:<10}  {}", r.name, r.role.as_str(), r.perms);
    }
    for line in space_lines(&config) {
        eprintln!("  {line}");
    }
    for warning in below_reserve(&config) {
        eprintln!("warning: {warning}");
    }
    let http = match cli.http.transport {
        Transport::Stdio => None,
        Transport::Http => {
            let options = http_options(&cli.http, config.limits.tool_timeout, &budget)?;
            if let Some(risk) = exposure(&cli.http) {
                eprintln!("warning: {risk}");
            }
            for line in limit_lines(&options.conns, &budget) {
                eprintln!("{line}");
            }
            if let Some(short) = short_of_descriptors(&options.conns, &budget) {
                eprintln!("warning: {short}");
            }
            Some(options)
        }
    };
    // Read before the sandbox, which hides the cgroup files that tell.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (cache, unused) = cache(&config);
    if let Some(why) = unused {
        eprintln!("warning: {why}");
    }
    // A sandboxed server only reads the cache: what it wrote there would
    // run in every later start.
    let cache = if config.landlock {
        restrict(&config, cache.dir())?;
        cache.read_only()
    } else {
        cache
    };
    let runtime = runtime(&config)?;
    // The client's handshake needs no component: answer it at once, and
    // load the components meanwhile. Tool requests wait for them; a
    // component that fails to load stops the server with the reason.
    let (ready, loaded) = tokio::sync::watch::channel(None);
    let sandboxed = config.landlock;
    std::thread::Builder::new()
        .name("load-components".into())
        .spawn(move || {
            sweep_staging(&config);
            match toolbox(config, audit, runtime, &cache) {
                Ok(toolbox) => {
                    let _ = ready.send(Some(Arc::new(toolbox)));
                    if cache.missed() && sandboxed {
                        eprintln!(
                            "landlock: components not in the cache were compiled and not cached (a \
                         sandboxed server never writes code for later starts); run `loom-fs-mcp \
                         check` with this config once to cache them"
                        );
                    }
                }
                Err(e) => {
                    eprintln!("loom-fs-mcp: {e:#}");
                    std::process::exit(1);
                }
            }
        })
        .context("cannot start the component loader")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match http {
        None => {
            eprintln!("serving MCP over stdio");
            rt.block_on(serve_stdio(Server::new(loaded)))
        }
        Some(options) => rt.block_on(serve_http(Server::new(loaded), options)),
    }
}

/// Removes what servers that are gone (killed mid-call) left in the
/// staging area of each root this server may write, and says so.
fn sweep_staging(config: &Config) {
    for root in config
        .roots
        .iter()
        .filter(|r| r.perms.contains(Permission::Write))
    {
        match staging::sweep(root, false) {
            Ok(swept) if !swept.is_empty() => eprintln!(
                "{}: removed the unfinished files of {} stopped {} from its staging area",
                root.name,
                swept.servers,
                plural(swept.servers, "server", "servers"),
            ),
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

const ROOT_RISK: &str =
    "root bypasses file permissions, so a bug in the server could reach any file on this machine";

/// Serving as root is refused unless `--allow-root` accepts the risk.
fn refuse_root(cli: &Cli) -> anyhow::Result<()> {
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
fn restrict(config: &Config, cache: Option<&Path>) -> anyhow::Result<()> {
    anyhow::ensure!(
        sandbox::lone_thread() != Some(false),
        "a thread started before the kernel sandbox, which would not cover it"
    );
    if let Some(dir) = sandbox::shared_audit_dir(config) {
        eprintln!("warning: {}", shared_audit_dir(&dir));
    }
    match Plan::new(config, cache)?.restrict_self()? {
        status @ Status::Enforced { .. } => eprintln!("landlock: {status}"),
        status @ Status::NotEnforced(_) => eprintln!("warning: {status}"),
    }
    Ok(())
}

fn shared_audit_dir(dir: &Path) -> String {
    format!(
        "the audit log's directory {} holds other files: the kernel sandbox lets the server \
         create, write and remove files anywhere under it; give the audit log a directory of \
         its own",
        dir.display()
    )
}

async fn serve_stdio(server: Server) -> anyhow::Result<()> {
    let (io, flushed) = stdio::guarded(tokio::io::stdin(), tokio::io::stdout());
    let service = server
        .serve(io)
        .await
        .context("MCP session failed to start")?;
    service
        .waiting()
        .await
        .context("MCP session ended with an error")?;
    // The session is over: let its last answers reach the client.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), flushed).await;
    Ok(())
}

async fn serve_http(server: Server, options: HttpOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let bound = listener.local_addr()?;
    eprintln!("serving MCP over HTTP on http://{bound}/mcp (health: http://{bound}/health)");
    let stop = tokio_util::sync::CancellationToken::new();
    let trigger = stop.clone();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("loom-fs-mcp: stopping: finishing the calls in flight");
        trigger.cancel();
    });
    http::serve(listener, server, &options, stop)
        .await
        .context("HTTP server failed")
}

/// The HTTP options from the command line, refusing what would be unsafe by
/// surprise: a non-loopback address needs `--allow-non-loopback` (and the
/// caller then says the risk, see [`exposure`]). Connection caps not given
/// come from the descriptor budget.
fn http_options(
    args: &HttpArgs,
    tool_timeout: std::time::Duration,
    budget: &DescriptorBudget,
) -> anyhow::Result<HttpOptions> {
    let token = match &args.auth_token_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the auth token file {}", path.display()))?;
            let token = text.trim();
            anyhow::ensure!(
                !token.is_empty(),
                "the auth token file {} is empty",
                path.display()
            );
            Some(token.to_string())
        }
    };
    let ip = args.listen.ip();
    if !ip.is_loopback() {
        anyhow::ensure!(
            args.allow_non_loopback,
            "refusing to listen on {}: not a loopback address; anyone who can reach it gets \
             the roots' permissions. Pass --allow-non-loopback (and --auth-token-file) if you mean it",
            args.listen
        );
    }
    anyhow::ensure!(args.max_sessions > 0, "--max-sessions must be at least 1");
    anyhow::ensure!(
        args.session_idle_secs > 0,
        "--session-idle-secs must be at least 1"
    );
    anyhow::ensure!(
        args.header_timeout_secs > 0,
        "--header-timeout-secs must be at least 1"
    );
    anyhow::ensure!(
        args.body_timeout_secs > 0,
        "--body-timeout-secs must be at least 1"
    );
    anyhow::ensure!(
        args.send_timeout_secs > 0,
        "--send-timeout-secs must be at least 1"
    );
    anyhow::ensure!(
        args.max_connections != Some(0),
        "--max-connections must be at least 1"
    );
    anyhow::ensure!(
        args.max_connections_per_client != Some(0),
        "--max-connections-per-client must be at least 1"
    );
    let max = args
        .max_connections
        .unwrap_or_else(|| budget.default_connections());
    let per_client = args
        .max_connections_per_client
        .unwrap_or_else(|| conns::default_per_client(max));
    anyhow::ensure!(
        per_client <= max,
        "--max-connections-per-client ({per_client}) is more than --max-connections ({max})"
    );
    Ok(HttpOptions {
        listen: args.listen,
        token,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        max_body_bytes: args.max_body_bytes,
        max_sessions: args.max_sessions,
        session_idle: std::time::Duration::from_secs(args.session_idle_secs),
        // A call may wait for a slot, then run, each up to the tool timeout.
        drain: tool_timeout * 2 + std::time::Duration::from_secs(1),
        conns: ConnLimits {
            max,
            per_client,
            max_streams: conns::default_streams(max),
            per_client_streams: conns::default_streams(per_client),
            header_timeout: std::time::Duration::from_secs(args.header_timeout_secs),
            min_body_rate: args.min_body_rate,
            body_timeout: std::time::Duration::from_secs(args.body_timeout_secs),
            send_timeout: std::time::Duration::from_secs(args.send_timeout_secs),
        },
    })
}

/// The connection limits, and where they come from: said by `serve` on
/// start and by `check`.
fn limit_lines(limits: &ConnLimits, budget: &DescriptorBudget) -> Vec<String> {
    let secs = limits.header_timeout.as_secs();
    vec![
        format!(
            "connections: at most {}, {} per client address (descriptor limit {}: {} kept for \
             {} tool {}, {} for the server)",
            limits.max,
            limits.per_client,
            budget.limit,
            budget.calls,
            budget.concurrent_calls,
            plural(budget.concurrent_calls as usize, "call", "calls"),
            budget.server,
        ),
        format!(
            "event streams (GET /mcp): at most {}, {} per client address (beyond them, the \
             client's oldest closes)",
            limits.max_streams, limits.per_client_streams,
        ),
        format!(
            "time limits: a request's head within {secs} s of the connection or of the previous \
             answer (so idle connections close after {secs} s); {}; a whole body within {} s; \
             an answer's write waits at most {} s for the client to read",
            if limits.min_body_rate == 0 {
                "no least body rate".to_string()
            } else {
                format!(
                    "a body at {} bytes/s or more over every {secs} s",
                    limits.min_body_rate
                )
            },
            limits.body_timeout.as_secs(),
            limits.send_timeout.as_secs(),
        ),
    ]
}

/// When the connections may take descriptors the tool calls need: the
/// descriptor limit is too low for the reserve, or `--max-connections`
/// is set above what it leaves.
fn short_of_descriptors(limits: &ConnLimits, budget: &DescriptorBudget) -> Option<String> {
    (!budget.fits(limits.max)).then(|| {
        format!(
            "the descriptor limit ({}) leaves {} descriptors for connections once {} are kept \
             for {} tool calls and {} for the server, fewer than the {} connections allowed: \
             with that many open, a tool call may find no descriptor (EMFILE). Raise the hard \
             limit (`ulimit -Hn`, systemd `LimitNOFILE=`), lower max_concurrent_calls, or \
             lower --max-connections",
            budget.limit,
            budget.left(),
            budget.calls,
            budget.concurrent_calls,
            budget.server,
            limits.max
        )
    })
}

/// `trash list|restore|purge`: the operator's side of the trash. It opens
/// no audit log and loads no component, so it runs beside a server; stdout
/// carries its results (it is no JSON-RPC channel here). Every path it
/// prints goes through [`trash::escaped`]: the model chose the names.
fn trash(cli: &Cli, action: &TrashAction) -> anyhow::Result<()> {
    let config = load_config(cli)?;
    // A tree in the trash is walked with a directory open per level.
    let _ = raise_open_file_limit();
    // Which calls may still be running follows from the server's tool
    // timeout: this config's `tool_timeout_ms` must be the server's.
    let now = trash::Now::with_timeout(config.limits.tool_timeout);
    let out = &mut std::io::stdout().lock();
    let done = match action {
        TrashAction::List { root } => trash_list(out, &config, root.as_deref(), now),
        TrashAction::Restore { id, to } => trash_restore(out, &config, id, to.as_deref(), now),
        TrashAction::Purge {
            older_than,
            root,
            dry_run,
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
fn trash_list(
    out: &mut impl std::io::Write,
    config: &Config,
    only: Option<&str>,
    now: trash::Now,
) -> anyhow::Result<()> {
    let listing = trash::list(&config.roots, only, now)?;
    not_listed_yet(listing.in_flight, now);
    trash_lines(out, &listing.entries)?;
    Ok(())
}

/// `trash restore`: finds the entry by ID among those `list` shows.
fn trash_restore(
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

/// `trash purge`: a line per entry removed, then the totals.
fn trash_purge(
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
fn trash_lines(out: &mut impl std::io::Write, entries: &[trash::Entry]) -> std::io::Result<()> {
    let ids = trash::short_ids(entries);
    entries
        .iter()
        .zip(ids)
        .try_for_each(|(e, id)| writeln!(out, "{}", e.line(id)))
}

/// Tells, on stderr, of trash directories a listing left out because
/// their calls may still be running.
fn not_listed_yet(count: usize, now: trash::Now) {
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

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}
