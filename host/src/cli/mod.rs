//! `loom-fs-mcp`: the command line. Serves MCP over stdio (the default),
//! checks a config, or lists, restores and purges the trash. Under stdio,
//! stdout is the JSON-RPC channel: everything else (banner, logs, audit)
//! goes to stderr. No other layer uses this one.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt;

use crate::config::{AuditTarget, Config, DirArg};
use crate::policy::{Permission, Role, Root};
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

mod check;
mod client_config;
mod component;
mod http_flags;
mod init;
mod serve;
mod trash_cmd;

use check::*;
use client_config::*;
use http_flags::*;
use init::*;
use serve::*;
use trash_cmd::*;

#[derive(Parser)]
#[command(
    name = "loom-fs-mcp",
    version,
    about = "A filesystem MCP server with roles; every tool runs as a WebAssembly component.",
    override_usage = "loom-fs-mcp [DIR]... [--sourcecode DIR...] [--workspace DIR...] [OPTIONS]\n       \
                      loom-fs-mcp --config FILE [DIR]... [OPTIONS]\n       \
                      loom-fs-mcp <COMMAND>"
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
    /// Directories to serve, no config file needed: each is a root named
    /// after its last component, read only unless a role flag before it
    /// says otherwise.
    #[arg(value_name = "DIR")]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    roles: RoleDirs,
    #[command(flatten)]
    http: HttpArgs,
}

/// Role flags: every directory after one, up to the next, gets its role.
/// Directories are served in this order: those before any role flag, then
/// `--reference`'s, `--sourcecode`'s and `--workspace`'s. Each flag has an
/// environment variable (`LOOMFS_REFERENCE`, `LOOMFS_SOURCECODE`,
/// `LOOMFS_WORKSPACE`: directories separated as in `PATH`), used when the
/// flag gives no directory.
#[derive(clap::Args)]
#[command(next_help_heading = "Directories as roots (with or without --config)")]
struct RoleDirs {
    /// The directories that follow: read only (the role `reference`, what a
    /// directory gets without a flag). Directories separated as in `PATH`:
    /// [env: LOOMFS_REFERENCE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    reference: Vec<PathBuf>,
    /// The directories that follow: read and write, never delete (`sourcecode`).
    /// [env: LOOMFS_SOURCECODE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    sourcecode: Vec<PathBuf>,
    /// The directories that follow: read, write and delete (`workspace`);
    /// what is deleted or replaced is kept in the directory's `.mcp-trash`.
    /// [env: LOOMFS_WORKSPACE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    workspace: Vec<PathBuf>,
    /// Accept `/` as a directory to serve (refused otherwise: it is every
    /// file on the machine the server's user can reach).
    #[arg(long, global = true, env = "LOOMFS_ALLOW_FILESYSTEM_ROOT",
        value_parser = clap::builder::BoolishValueParser::new())]
    allow_filesystem_root: bool,
    /// Started by the Claude Desktop bundle: no folder chosen is said in
    /// the words of its settings.
    #[arg(long, global = true, hide = true)]
    bundle: bool,
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
    Check {
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Write a config file for the directories given (the current one if
    /// none), with every optional key shown at its default; then check it.
    Init {
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// The file to write; never overwritten.
        #[arg(long, value_name = "FILE", default_value = "roots.toml")]
        output: PathBuf,
    },
    /// Print the entry to paste into a client's configuration, to start
    /// this binary on the config or the directories given (never edits the
    /// client's file).
    ClientConfig {
        /// The client.
        #[arg(value_enum)]
        client: Client,
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// What tools deleted or replaced, kept in each root's `.mcp-trash`.
    /// Runs beside a server; never a tool.
    Trash {
        #[command(subcommand)]
        action: TrashAction,
    },
    /// Third-party tool components: what a file is, and the config entry
    /// that pins it. Needs no config.
    Component {
        #[command(subcommand)]
        action: ComponentAction,
    },
}

#[derive(Subcommand)]
enum ComponentAction {
    /// Print what a file is: its name, description, permission, path
    /// arguments, schemas, every import and export (WIT names), its
    /// sha256, and whether the server would accept it and why not (exits
    /// non-zero then).
    Inspect {
        /// The component file (`.wasm`).
        file: PathBuf,
    },
    /// Print the `[[components]]` entry that pins FILE by its sha256, to
    /// paste into the config (never edits it).
    Add {
        /// The component file (`.wasm`).
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum TrashAction {
    /// One line per entry: ID, root, original path, deleted at (RFC 3339,
    /// UTC), size in bytes, the call that kept it; tab-separated, oldest
    /// first.
    List {
        /// Only this root's trash.
        #[arg(long, value_name = "NAME")]
        root: Option<String>,
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Put an entry back at its original path; refused if something is
    /// there.
    Restore {
        /// The entry's ID as listed (or at least 4 of its first digits).
        id: String,
        /// Put it here instead (relative to the entry's root).
        #[arg(long = "to", value_name = "NEW_PATH")]
        to: Option<String>,
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Undo a call (its ID is the last column of `list` and the `call` of
    /// its audit lines): what it replaced or removed is put back, what it
    /// put in place goes to the trash; refused, naming the paths, where a
    /// later change touched them.
    Undo {
        /// The call's ID; or, with --since, none.
        #[arg(value_name = "CALL", required_unless_present = "since")]
        call: Option<String>,
        /// Undo every call of the last DURATION (`10m`, `2h`...), newest
        /// first, stopping at the first one refused.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, conflicts_with = "call")]
        since: Option<std::time::Duration>,
        /// Directories served as roots, as when serving.
        #[arg(long = "dir", value_name = "DIR")]
        dirs: Vec<PathBuf>,
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
        /// Directories served as roots, as when serving.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
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
    crate::sys::space::ignore_file_size_signal();
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Check { .. }) => check(&cli),
        Some(Command::Init { output, .. }) => init(&cli, output),
        Some(Command::ClientConfig { client, .. }) => client_config(&cli, *client),
        Some(Command::Trash { action }) => trash(&cli, action),
        Some(Command::Component { action }) => match action {
            ComponentAction::Inspect { file } => component::inspect(file),
            ComponentAction::Add { file } => component::add(file),
        },
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

/// The config file, the directories on the command line, or both.
fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let dirs = dir_args(cli);
    refuse_placeholders(cli, &dirs)?;
    anyhow::ensure!(
        cli.config.is_some() || !dirs.is_empty(),
        "no directory and no config given: name the directories to serve \
         (`loom-fs-mcp ~/project`, read only; `--workspace DIR` to let tools write and delete \
         there), or pass --config FILE (roots.example.toml in the repository is a working \
         example)"
    );
    Ok(Config::load_with(
        cli.config.as_deref(),
        &dirs,
        cli.roles.allow_filesystem_root,
        cli.read_only,
    )?)
}

/// The directories named on the command line, with their roles: those
/// before any role flag (after the subcommand, for `check` and `trash`)
/// are read only.
fn dir_args(cli: &Cli) -> Vec<DirArg> {
    let plain = match &cli.command {
        None => &cli.dirs,
        Some(
            Command::Check { dirs }
            | Command::Init { dirs, .. }
            | Command::ClientConfig { dirs, .. },
        ) => dirs,
        Some(Command::Trash { action }) => match action {
            TrashAction::List { dirs, .. }
            | TrashAction::Restore { dirs, .. }
            | TrashAction::Undo { dirs, .. }
            | TrashAction::Purge { dirs, .. } => dirs,
        },
        Some(Command::Component { .. }) => &cli.dirs,
    };
    let with = |dirs: &[PathBuf], role| {
        dirs.iter()
            .map(move |path| DirArg {
                path: path.clone(),
                role,
            })
            .collect::<Vec<_>>()
    };
    let mut all = with(plain, Role::Reference);
    for (given, role) in [
        (&cli.roles.reference, Role::Reference),
        (&cli.roles.sourcecode, Role::Sourcecode),
        (&cli.roles.workspace, Role::Workspace),
    ] {
        all.extend(with(&role_dirs(given, role), role));
    }
    // A picker of the bundle left unset reaches us as its placeholder: no
    // directory.
    all.retain(|d| placeholder(&d.path).is_none_or(|name| !is_picker(name)));
    all
}

/// The folder pickers of the Claude Desktop bundle (`bundle/manifest.json`,
/// one list per role): a client passes one left unset as the literal
/// `${user_config.NAME}`.
pub(super) const PICKERS: [(&str, &str); 3] = [
    ("read_only_folders", "Read-only folders"),
    ("read_write_folders", "Read and write folders"),
    ("full_access_folders", "Read, write and delete folders"),
];

fn is_picker(name: &str) -> bool {
    PICKERS.iter().any(|(picker, _)| *picker == name)
}

/// `NAME` of an argument that is the literal `${user_config.NAME}`.
fn placeholder(path: &Path) -> Option<&str> {
    path.to_str()?
        .strip_prefix("${user_config.")?
        .strip_suffix('}')
}

/// Refuses a placeholder the client did not fill that is not one of the
/// bundle's pickers (a typo in a manifest, a client that does not expand
/// them), and, from the bundle, no folder chosen at all.
fn refuse_placeholders(cli: &Cli, dirs: &[DirArg]) -> anyhow::Result<()> {
    let given = cli
        .dirs
        .iter()
        .chain(&cli.roles.reference)
        .chain(&cli.roles.sourcecode)
        .chain(&cli.roles.workspace);
    let mut from_bundle = cli.roles.bundle;
    for path in given {
        match placeholder(path) {
            Some(name) if is_picker(name) => from_bundle = true,
            Some(_) => anyhow::bail!(
                "argument '{}' is a placeholder the client did not fill in: give a directory",
                path.display()
            ),
            None => {}
        }
    }
    if from_bundle && dirs.is_empty() && cli.config.is_none() {
        let pickers: Vec<String> = PICKERS
            .iter()
            .map(|(_, title)| format!("'{title}'"))
            .collect();
        anyhow::bail!(
            "no folder chosen: in the extension's settings, choose at least one folder under {}",
            pickers.join(", ")
        );
    }
    Ok(())
}

/// A role flag's directories: as given, or if none are, those of its
/// environment variable (`LOOMFS_WORKSPACE` for `--workspace`), a list
/// separated as `PATH` is.
fn role_dirs(given: &[PathBuf], role: Role) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let var = format!("LOOMFS_{}", role.as_str().to_uppercase());
    std::env::var_os(var)
        .map(|list| {
            std::env::split_paths(&list)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
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
    for (index, entry) in config.components.iter().enumerate() {
        let (component, admission) = admit(&config, entry, index, runtime.engine(), cache)?;
        let file = entry.path.display().to_string();
        runtime
            .load_with(&component, file.clone(), Some(admission))
            .map_err(|e| anyhow::anyhow!("component {file}: {e}"))?;
    }
    Ok(Toolbox::new(config, runtime, audit)?)
}

/// A `[[components]]` file, admitted: read once, its digest checked
/// against the pin and its signature against the trusted keys, then
/// compiled from those same bytes (or mapped from the cache entry of that
/// digest). Every refusal names the file and why.
fn admit(
    config: &Config,
    entry: &crate::config::ComponentEntry,
    index: usize,
    engine: &wasmtime::Engine,
    cache: &Cache,
) -> anyhow::Result<(wasmtime::component::Component, runtime::Admission)> {
    let file = entry.path.display().to_string();
    let fail = |why: String| anyhow::anyhow!("component {file}: {why}");
    let wasm = std::fs::read(&entry.path).map_err(|e| fail(format!("cannot be read: {e}")))?;
    let digest = runtime::admit::sha256_hex(&wasm);
    if let Some(pin) = &entry.sha256
        && *pin != digest
    {
        return Err(fail(format!(
            "its sha256 is {digest}, but the config pins {pin}: the file is not the one that was \
             pinned (refused; if the change is wanted, pin the new digest)"
        )));
    }
    if entry.signed {
        let sig = entry.signature_path();
        let shown = sig.display().to_string();
        let text = std::fs::read_to_string(&sig).map_err(|e| {
            fail(runtime::admit::SignatureError::Missing(shown.clone(), e.to_string()).to_string())
        })?;
        runtime::admit::verify_signature(&wasm, &text, &shown, &config.trust_keys)
            .map_err(|e| fail(e.to_string()))?;
    }
    runtime::check_component_bytes(&wasm).map_err(fail)?;
    let stem = entry
        .path
        .file_stem()
        .map_or("component".into(), |s| s.to_string_lossy().into_owned());
    let component = cache
        .component_of(engine, &format!("ext-{stem}"), &wasm, &digest)
        .map_err(|e| fail(format!("{e}")))?;
    Ok((
        component,
        runtime::Admission {
            digest,
            entry: index,
            budget: Budget {
                memory_bytes: entry.memory_bytes,
                timeout: entry.timeout,
                output_bytes: entry.max_output_bytes,
            },
        },
    ))
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

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}
