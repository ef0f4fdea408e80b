//! The command line's shape, as `clap` reads it: the global flags, the
//! role flags, the serving flags and the subcommands. What each command
//! does lives in its own file; nothing here acts.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "loom-fs-mcp",
    version,
    about = "A filesystem MCP server with roles; every tool runs as a WebAssembly component.",
    override_usage = "loom-fs-mcp [DIR]... [--sourcecode DIR...] [--workspace DIR...] [OPTIONS]\n       \
                      loom-fs-mcp --config FILE [DIR]... [OPTIONS]\n       \
                      loom-fs-mcp <COMMAND>"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    /// The config file (TOML): roots, roles, deny patterns, limits.
    #[arg(long, global = true, value_name = "FILE", env = "LOOMFS_CONFIG")]
    pub(super) config: Option<PathBuf>,
    /// Cap every root at read, whatever its role.
    #[arg(long, global = true, env = "LOOMFS_READ_ONLY",
        value_parser = clap::builder::BoolishValueParser::new())]
    pub(super) read_only: bool,
    /// Serve even as root (refused otherwise: root bypasses file
    /// permissions, so a bug in the server could reach any file).
    #[arg(long, global = true, env = "LOOMFS_ALLOW_ROOT",
        value_parser = clap::builder::BoolishValueParser::new())]
    pub(super) allow_root: bool,
    /// Directories to serve, no config file needed: each is a root named
    /// after its last component, read only unless a role flag before it
    /// says otherwise.
    #[arg(value_name = "DIR")]
    pub(super) dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) roles: RoleDirs,
    #[command(flatten)]
    pub(super) http: HttpArgs,
}

/// Role flags: every directory after one, up to the next, gets its role.
/// Directories are served in this order: those before any role flag, then
/// `--reference`'s, `--sourcecode`'s and `--workspace`'s. Each flag has an
/// environment variable (`LOOMFS_REFERENCE`, `LOOMFS_SOURCECODE`,
/// `LOOMFS_WORKSPACE`: directories separated as in `PATH`), used when the
/// flag gives no directory.
#[derive(clap::Args)]
#[command(next_help_heading = "Directories as roots (with or without --config)")]
pub(super) struct RoleDirs {
    /// The directories that follow: read only (the role `reference`, what a
    /// directory gets without a flag). Directories separated as in `PATH`:
    /// [env: LOOMFS_REFERENCE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    pub(super) reference: Vec<PathBuf>,
    /// The directories that follow: read and write, never delete (`sourcecode`).
    /// [env: LOOMFS_SOURCECODE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    pub(super) sourcecode: Vec<PathBuf>,
    /// The directories that follow: read, write and delete (`workspace`);
    /// what is deleted or replaced is kept in the directory's `.mcp-trash`.
    /// [env: LOOMFS_WORKSPACE=]
    #[arg(long, global = true, value_name = "DIR", num_args = 0.., action = clap::ArgAction::Append)]
    pub(super) workspace: Vec<PathBuf>,
    /// Accept `/` as a directory to serve (refused otherwise: it is every
    /// file on the machine the server's user can reach).
    #[arg(long, global = true, env = "LOOMFS_ALLOW_FILESYSTEM_ROOT",
        value_parser = clap::builder::BoolishValueParser::new())]
    pub(super) allow_filesystem_root: bool,
    /// Started by the Claude Desktop bundle: no folder chosen is said in
    /// the words of its settings.
    #[arg(long, global = true, hide = true)]
    pub(super) bundle: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Transport {
    /// JSON-RPC lines on stdin/stdout (what a client that starts the server uses).
    Stdio,
    /// Streamable HTTP on `--listen`, endpoint `/mcp`.
    Http,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Serving (and `check` of a serving setup)")]
pub(super) struct HttpArgs {
    /// How to serve MCP.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "stdio",
        env = "LOOMFS_TRANSPORT"
    )]
    pub(super) transport: Transport,
    /// Address to listen on (HTTP); port 0 picks a free one.
    #[arg(
        long,
        global = true,
        value_name = "ADDR",
        default_value = "127.0.0.1:3000",
        env = "LOOMFS_LISTEN"
    )]
    pub(super) listen: SocketAddr,
    /// Allow listening on an address that is not loopback.
    #[arg(long, global = true, env = "LOOMFS_ALLOW_NON_LOOPBACK",
        value_parser = clap::builder::BoolishValueParser::new())]
    pub(super) allow_non_loopback: bool,
    /// File holding the bearer token every HTTP request must carry.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LOOMFS_AUTH_TOKEN_FILE"
    )]
    pub(super) auth_token_file: Option<PathBuf>,
    /// A `Host` header value to accept besides the bound address and
    /// loopback names (repeatable).
    #[arg(
        long = "allowed-host",
        global = true,
        value_name = "HOST",
        env = "LOOMFS_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub(super) allowed_hosts: Vec<String>,
    /// An `Origin` to accept besides loopback origins, with its scheme
    /// (`https://app.example.com:443`; repeatable).
    #[arg(
        long = "allowed-origin",
        global = true,
        value_name = "ORIGIN",
        env = "LOOMFS_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub(super) allowed_origins: Vec<String>,
    /// Largest HTTP request body.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = 4 << 20, env = "LOOMFS_MAX_BODY_BYTES")]
    pub(super) max_body_bytes: usize,
    /// Most MCP sessions open at once (2025-era clients).
    #[arg(
        long,
        global = true,
        value_name = "N",
        default_value_t = 64,
        env = "LOOMFS_MAX_SESSIONS"
    )]
    pub(super) max_sessions: usize,
    /// Seconds after which a session without requests is closed.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 300,
        env = "LOOMFS_SESSION_IDLE_SECS"
    )]
    pub(super) session_idle_secs: u64,
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
    pub(super) header_timeout_secs: u64,
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
    pub(super) min_body_rate: u64,
    /// Seconds a whole request body may take to arrive, however fast it
    /// goes (later: 408, closed).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 60,
        env = "LOOMFS_BODY_TIMEOUT_SECS"
    )]
    pub(super) body_timeout_secs: u64,
    /// Seconds a write of an answer may wait without the client reading any
    /// of it (then the connection closes).
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 30,
        env = "LOOMFS_SEND_TIMEOUT_SECS"
    )]
    pub(super) send_timeout_secs: u64,
    /// Most HTTP connections open at once [default: what the descriptor
    /// limit leaves once tool calls have their share, at most 4096].
    #[arg(long, global = true, value_name = "N", env = "LOOMFS_MAX_CONNECTIONS")]
    pub(super) max_connections: Option<usize>,
    /// Most HTTP connections open at once from one client address (an IPv6
    /// client by its /64) [default: a quarter of --max-connections].
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "LOOMFS_MAX_CONNECTIONS_PER_CLIENT"
    )]
    pub(super) max_connections_per_client: Option<usize>,
}

#[derive(Subcommand)]
pub(super) enum Command {
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
pub(super) enum ComponentAction {
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
pub(super) enum TrashAction {
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

/// The clients an entry can be printed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Client {
    ClaudeDesktop,
    ClaudeCode,
    LmStudio,
    Cursor,
    Vscode,
    Codex,
}
