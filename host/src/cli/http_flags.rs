//! The HTTP flags made into the endpoint's options and connection limits,
//! and the start-up lines that say them. Checks values; opens nothing.

use anyhow::Context as _;

use super::args::HttpArgs;
use super::plural;
use crate::server::http::HttpOptions;
use crate::server::http::conns::{self, ConnLimits, DescriptorBudget};

/// The HTTP options from the command line, refusing what would be unsafe by
/// surprise: a non-loopback address needs `--allow-non-loopback` (and the
/// caller then says the risk, see
/// [`exposure`](super::serve::exposure)). Connection caps not given
/// come from the descriptor budget.
pub(super) fn http_options(
    args: &HttpArgs,
    tool_timeout: std::time::Duration,
    budget: &DescriptorBudget,
) -> anyhow::Result<HttpOptions> {
    let token = args
        .auth_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
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

/// The bearer token in the file `--auth-token-file` names, trimmed; an
/// empty one is refused.
fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the auth token file {}", path.display()))?;
    let token = text.trim();
    anyhow::ensure!(
        !token.is_empty(),
        "the auth token file {} is empty",
        path.display()
    );
    Ok(token.to_string())
}

/// The connection limits, and where they come from: said by `serve` on
/// start and by `check`.
pub(super) fn limit_lines(limits: &ConnLimits, budget: &DescriptorBudget) -> Vec<String> {
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
pub(super) fn short_of_descriptors(
    limits: &ConnLimits,
    budget: &DescriptorBudget,
) -> Option<String> {
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
