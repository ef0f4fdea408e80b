//! `loom-fs-mcp`: the command line. Serves MCP over stdio (the default),
//! checks a config, or lists, restores and purges the trash. Under stdio,
//! stdout is the JSON-RPC channel: everything else (banner, logs, audit)
//! goes to stderr. No other layer uses this one.
//!
//! The command line's shape (`clap`) is `args.rs`; each command lives in
//! its own file (`check.rs`, `init.rs`, `client_config.rs`, `trash_cmd.rs`,
//! `component.rs`, `serve.rs`, with `http_flags.rs` for the HTTP flags);
//! `usage.rs` holds the space and trash lines several of them print. Here:
//! the dispatch, the directories and config the commands share, and the
//! start-up steps `check` and `serve` both take.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use crate::config::{AuditTarget, ComponentEntry, Config, DirArg};
use crate::policy::{Permission, Role};
use crate::runtime::{self, Budget, Cache, Runtime};
use crate::server::http::conns::DescriptorBudget;
use crate::store::audit::Audit;
use crate::sys::sandbox;
use crate::tools::Toolbox;

mod args;
mod check;
mod client_config;
mod component;
mod http_flags;
mod init;
mod serve;
mod trash_cmd;
mod usage;

use args::{Cli, Command, ComponentAction, TrashAction};
use check::check;
use client_config::client_config;
use init::init;
use serve::serve;
use trash_cmd::trash;

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
    entry: &ComponentEntry,
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
