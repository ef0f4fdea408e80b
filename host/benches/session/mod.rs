//! What the benchmarks that speak MCP to the real binary share: spawning it
//! on a config and a session kept open across iterations.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub mod noisy;

pub const BIN: &str = env!("CARGO_BIN_EXE_loom-fs-mcp");
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;

/// The benchmarks' component cache (`LOOMFS_CACHE_DIR`), kept across runs.
pub const CACHE_DIR: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/bench-cache");

/// The binary on `config`, with the benchmarks' component cache (and
/// `--allow-root`, for benchmarks run as root).
pub fn spawn(config: &Path) -> Child {
    Command::new(BIN)
        .arg("--config")
        .arg(config)
        .arg("--allow-root")
        .env("LOOMFS_CACHE_DIR", CACHE_DIR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A session with `@modelcontextprotocol/server-filesystem` serving `dir`,
/// when `LOOMFS_BENCH_REFERENCE` names its `dist/index.js` (needs `node`);
/// otherwise says on stderr that the reference figures are skipped.
pub fn reference(dir: &Path) -> Option<Session> {
    let Some(script) = std::env::var_os("LOOMFS_BENCH_REFERENCE") else {
        eprintln!(
            "reference/*: skipped (set LOOMFS_BENCH_REFERENCE to server-filesystem's dist/index.js)"
        );
        return None;
    };
    let child = Command::new("node")
        .arg(script)
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(Session::start(child))
}

/// A session kept open across iterations.
pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The last response line.
    pub line: String,
}

impl Session {
    pub fn open(config: &Path) -> Session {
        Session::start(spawn(config))
    }

    pub fn start(mut child: Child) -> Session {
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Session {
            child,
            stdin,
            stdout,
            line: String::new(),
        };
        s.request(INITIALIZE);
        writeln!(
            s.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        s
    }

    /// Sends one JSON-RPC line and reads the response line.
    pub fn request(&mut self, json: &str) -> usize {
        self.send(json).unwrap();
        self.recv().unwrap()
    }

    /// Sends one JSON-RPC line without waiting for an answer; an error when
    /// the server is gone (benches that count failures rather than stop).
    pub fn send(&mut self, json: &str) -> std::io::Result<()> {
        writeln!(self.stdin, "{json}")
    }

    /// Reads the next line into `line`; its length, 0 at end of output.
    pub fn recv(&mut self) -> std::io::Result<usize> {
        self.line.clear();
        self.stdout.read_line(&mut self.line)
    }

    /// The server's process id.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The paths a reference tool (find, grep, rg) printed one a line under
/// `root`, relative to it and sorted, to compare with the server's. (Not
/// every bench compares with a reference tool.)
#[allow(dead_code)]
pub fn printed_paths(out: &str, root: &Path) -> Vec<String> {
    let prefix = format!("{}/", root.display());
    let mut paths: Vec<String> = out
        .lines()
        .map(|l| l.strip_prefix(&prefix).unwrap().to_string())
        .collect();
    paths.sort();
    paths
}

/// Text of `len` bytes made of code-like lines of `words`, holding `token`
/// once (on a line of its own, at a random place) when one is given.
#[allow(dead_code)]
pub fn code_text(
    rng: &mut fastrand::Rng,
    len: usize,
    words: &[&str],
    token: Option<&str>,
) -> String {
    let mut out = String::with_capacity(len + 64);
    let at = rng.usize(0..len.max(1));
    let mut placed = false;
    while out.len() < len {
        if let Some(token) = token
            && !placed
            && out.len() >= at
        {
            out.push_str(token);
            out.push('\n');
            placed = true;
        }
        for _ in 0..rng.usize(3..10) {
            out.push_str(words[rng.usize(..words.len())]);
            out.push(' ');
        }
        out.push('\n');
    }
    if let Some(token) = token
        && !placed
    {
        out.push_str(token);
        out.push('\n');
    }
    out
}

/// Runs a command to completion and returns its standard output (exit 1,
/// "nothing found" for grep and rg, is a success).
pub fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{out:?}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `dir/roots.toml`: one reference root, `dir/<name>`, an audit log
/// beside it, and room for `max_results` search results.
pub fn one_root_config(dir: &Path, name: &str, max_results: usize) -> std::path::PathBuf {
    let config = dir.join("roots.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = \"audit.log\"\nmax_search_results = {max_results}\n\
             [[roots]]\nname = \"{name}\"\npath = \"{name}\"\nrole = \"reference\"\n"
        ),
    )
    .unwrap();
    config
}
