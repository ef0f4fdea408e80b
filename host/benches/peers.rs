//! loom-fs against its peers, `@modelcontextprotocol/server-filesystem`
//! (Node) and `rust-mcp-filesystem`, on the same seeded fixture, driven by
//! the same raw JSON-RPC client over stdio.
//!
//! The peers are installed once, pinned, under `target/peers/` (ignored, as
//! all of `target/` is): the Node server with `npm install --prefix`, the Rust
//! one with `cargo install --locked --root` (a few minutes the first time;
//! when it cannot be built, a visible `skipped` line says why and the bench
//! goes on without it).
//!
//! Criterion cannot interleave servers, so this bench measures by hand: for
//! each workload, rounds, and in each round one sample from each server in
//! turn, then one of the workload's floor (a baseline measured in the same
//! round) where it has one. It prints p50, p90 and reply bytes (the JSON-RPC
//! response line) per server, and the ratios of loom-fs's p50 to each peer's
//! and to the floor. Replies are only checked for being answers and not
//! errors (`error`, or `result.isError`); errors are counted per workload
//! and shown (with the first error's reply), never fatal. The floors:
//! spawning `cat` and reading a line back (for spawn → `initialize`);
//! loom-fs's `list_roots`, answered by its host alone, the protocol floor
//! (for `read_file` and `get_file_info`); a native temporary file, write,
//! fsync, rename of the same 4 KiB (for `write_file`), and the same with the
//! directory's fsync after it, as durable as loom-fs's write (a second row,
//! `write_4k_dur`); `find -prune` and
//! `grep -rl --exclude-dir` as whole processes on the noisy tree (for glob
//! and `contains`). After the table: `read_file` throughput with 8 requests
//! in flight on one session, and each server's RSS after start and after
//! 10,000 calls.
//!
//! The fixture: a 4 KiB and a 1 MiB text file, a directory of 1,000 files,
//! a tree exactly 3 levels deep (10 × 10 directories of 49 files, 5,010
//! entries, so the Node server's `directory_tree`, which has no depth, lists
//! the same), a 4 KiB and a 100 KiB file per server for writes and edits,
//! a 16 MiB file per loom-fs build for appends (4 KiB each; the peers have
//! no append),
//! and the noisy tree of `session/noisy.rs` (24,300 files, 24,000 of them
//! under `.venv/` and `node_modules/`). loom-fs serves it as one workspace
//! root (its audit log to stderr, which is null: an audit file is held by
//! one instance, and the spawn workload starts more beside the open
//! session); the peers get it as their allowed directory (rust-mcp-filesystem
//! with `--allow-write`). loom-fs prunes the noise by its deny list; the
//! peers are given `excludePatterns` for it (the Node server then prunes;
//! rust-mcp-filesystem walks everything first and filters after). Where a
//! peer has no tool for a workload (`copy_file`, Node's `contains`), its
//! cells say `n/a`.
//!
//! Then the same workloads through the official Python SDK
//! (`benches/peers_sdk.py`, `ClientSession.call_tool`, what real clients pay;
//! needs `pip install mcp`), in a second table.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench peers`. `LOOMFS_PEERS_WORKLOADS`
//! (comma-separated keys from the first column, `throughput`, `rss`) picks
//! workloads, `LOOMFS_PEERS_ROUNDS` sets every workload's rounds,
//! `LOOMFS_PEERS_SDK=0` skips the Python mode, `LOOMFS_PEERS_PYTHON` names
//! the interpreter,
//! `LOOMFS_PEERS_BASELINE` names another build of loom-fs (a
//! `loom-fs-mcp` binary) served beside this one as the column `before`,
//! `LOOMFS_PEERS_DIR` a directory to build the fixture in (another
//! filesystem), `LOOMFS_PEERS_OTHERS=0` leaves the two peers out,
//! `LOOMFS_PEERS_NOFILE` sets the open-file limit the servers inherit, if
//! the hard limit allows (rust-mcp-filesystem 0.4.5 holds a descriptor per
//! entry of a tree it searches, about 26,000 on the noisy tree, and answers
//! "Too many open files" below that: its glob and `contains` rows then show
//! errors).

#[allow(dead_code)]
mod session;

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use session::{BIN, CACHE_DIR, Session, noisy};

const NODE_PACKAGE: &str = "@modelcontextprotocol/server-filesystem";
const NODE_VERSION: &str = "2026.8.31";
const RUST_CRATE: &str = "rust-mcp-filesystem";
const RUST_VERSION: &str = "0.4.5";

/// Requests kept in flight by the throughput workload.
const IN_FLIGHT: usize = 8;
/// Calls of the throughput workload.
const THROUGHPUT_CALLS: usize = 1_000;
/// Calls between the two RSS readings.
const RSS_CALLS: usize = 10_000;

/// Where the peers are installed: beside the build, ignored by git.
fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("peers")
}

// ---------------------------------------------------------------- servers

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Loom,
    /// Another build of loom-fs (`LOOMFS_PEERS_BASELINE`), served the same
    /// way: the same workloads before and after a change, interleaved.
    Before,
    Node,
    Rust,
}

impl Kind {
    /// loom-fs, this build or the baseline one: the same tools.
    fn is_loom(self) -> bool {
        matches!(self, Kind::Loom | Kind::Before)
    }
}

/// How to start one server on the fixture.
struct Server {
    kind: Kind,
    name: &'static str,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
}

impl Server {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd
    }

    fn open(&self) -> Session {
        Session::start(self.command().spawn().unwrap())
    }
}

fn loom(fx: &Fixture) -> Server {
    Server {
        kind: Kind::Loom,
        name: "loom-fs",
        program: BIN.into(),
        args: vec![
            "--config".into(),
            fx.config.clone().into(),
            "--allow-root".into(),
        ],
        env: vec![("LOOMFS_CACHE_DIR".into(), CACHE_DIR.into())],
    }
}

/// The build of loom-fs named by `LOOMFS_PEERS_BASELINE`, if any.
fn baseline(fx: &Fixture) -> Option<Server> {
    let bin = std::env::var_os("LOOMFS_PEERS_BASELINE")?;
    Some(Server {
        kind: Kind::Before,
        name: "before",
        program: bin,
        ..loom(fx)
    })
}

/// The pinned Node server, installed on first use.
fn node(fx: &Fixture) -> Result<Server, String> {
    let node_runs = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_runs {
        return Err("no `node` on PATH".into());
    }
    let prefix = peers_dir().join("node");
    let package = prefix.join("node_modules").join(NODE_PACKAGE);
    let installed = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .is_some_and(|p| p["version"] == NODE_VERSION);
    if !installed {
        eprintln!(
            "installing {NODE_PACKAGE}@{NODE_VERSION} into {}",
            prefix.display()
        );
        std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(format!("{NODE_PACKAGE}@{NODE_VERSION}"))
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("npm: {e}"))?;
        if !status.success() {
            return Err(format!("npm install failed ({status})"));
        }
    }
    Ok(Server {
        kind: Kind::Node,
        name: "node",
        program: "node".into(),
        args: vec![package.join("dist/index.js").into(), fx.dir.clone().into()],
        env: vec![],
    })
}

/// The pinned rust-mcp-filesystem, built on first use.
fn rust(fx: &Fixture) -> Result<Server, String> {
    let root = peers_dir().join("rust");
    let bin = root.join("bin").join(RUST_CRATE);
    let version = |bin: &Path| {
        Command::new(bin)
            .arg("--version")
            .output()
            .ok()
            .is_some_and(|o| String::from_utf8_lossy(&o.stdout).contains(RUST_VERSION))
    };
    if !version(&bin) {
        let log = peers_dir().join("rust-install.log");
        eprintln!(
            "installing {RUST_CRATE} {RUST_VERSION} into {} (a few minutes; log: {})",
            root.display(),
            log.display()
        );
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["install", "--locked", "--version", RUST_VERSION, "--root"])
            .arg(&root)
            .arg(RUST_CRATE)
            .env("CARGO_TARGET_DIR", peers_dir().join("rust-build"))
            .stdout(Stdio::null())
            .stderr(log_file)
            .status()
            .map_err(|e| format!("cargo: {e}"))?;
        if !status.success() || !version(&bin) {
            return Err(format!(
                "cargo install failed ({status}), see {}",
                log.display()
            ));
        }
    }
    Ok(Server {
        kind: Kind::Rust,
        name: "rust-mcp",
        program: bin.into(),
        args: vec!["--allow-write".into(), fx.dir.clone().into()],
        env: vec![],
    })
}

// ---------------------------------------------------------------- fixture

struct Fixture {
    _tmp: tempfile::TempDir,
    /// The directory every server serves (loom-fs as its root `fx`).
    dir: PathBuf,
    config: PathBuf,
}

/// The size of the file the append workload appends 4 KiB to.
const APPEND_BASE: usize = 16 << 20;

const EDIT_A: &str = "status = \"draft\"  # the line the edit workload changes";
const EDIT_B: &str = "status = \"final\"  # the line the edit workload changes";

/// `len` bytes of plain text lines.
fn lines(len: usize) -> String {
    let line = "The quick brown fox jumps over the lazy dog, 0123456789 abcdefghij\n";
    line.repeat(len / line.len() + 1)[..len].to_string()
}

/// The 4 KiB text of the page, the write files and every write, built once.
static PAGE_4K: LazyLock<String> = LazyLock::new(|| lines(4096));

/// Every server, in table order.
const KINDS: [Kind; 4] = [Kind::Loom, Kind::Before, Kind::Node, Kind::Rust];

/// 100 KiB holding `EDIT_A` once, in the middle.
fn edit_text() -> String {
    let half = lines(50 * 1024);
    format!("{half}{EDIT_A}\n{half}")
}

fn fixture() -> Fixture {
    // On the filesystem `LOOMFS_PEERS_DIR` names (a btrfs mount, to see
    // what reflinks change), else in the system's temporary directory.
    let tmp = match std::env::var_os("LOOMFS_PEERS_DIR") {
        Some(dir) => tempfile::TempDir::new_in(dir),
        None => tempfile::TempDir::new(),
    }
    .unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let dir = base.join("fx");
    let put = |rel: &str, content: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    };
    put("page-4k.txt", &PAGE_4K);
    put("page-1m.txt", &lines(1 << 20));
    let small = lines(64);
    for n in 0..1000 {
        put(&format!("list/f{n:04}.txt"), &small);
    }
    // Depth 3: 10 directories of 10 directories of 49 files, 5,010 entries.
    for a in 0..10 {
        for b in 0..10 {
            for n in 0..49 {
                put(&format!("tree/d{a}/e{b}/f{n:02}.txt"), &small);
            }
        }
    }
    for kind in KINDS {
        put(&format!("w/{kind:?}.txt"), &PAGE_4K);
        if kind.is_loom() {
            put(&format!("a/{kind:?}.txt"), &lines(APPEND_BASE));
        }
    }
    reset_edits(&dir);
    noisy::build(&dir.join("noisy"));
    std::fs::create_dir_all(dir.join("copies")).unwrap();
    // The audit log goes to stderr (null): an audit file is held by one
    // instance, and the spawn workload starts more beside the open session.
    let config = base.join("roots.toml");
    std::fs::write(
        &config,
        "audit_log = \"stderr\"\nmax_search_results = 1000\nmax_list_entries = 10000\n\
         [[roots]]\nname = \"fx\"\npath = \"fx\"\nrole = \"workspace\"\nmax_read_bytes = 4194304\n",
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        dir,
        config,
    }
}

/// Puts every server's edit file back to its first state (the edit
/// workload toggles it, round by round).
fn reset_edits(dir: &Path) {
    std::fs::create_dir_all(dir.join("e")).unwrap();
    for kind in KINDS {
        std::fs::write(dir.join(format!("e/{kind:?}.txt")), edit_text()).unwrap();
    }
}

// -------------------------------------------------------------- workloads

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Work {
    Spawn,
    ListRoots,
    Read4k,
    Read1m,
    Info,
    List1000,
    Tree5000,
    Write4k,
    Edit100k,
    Append16m,
    Glob,
    Contains,
    Copy1000,
}

/// A baseline measured in the same round as a workload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Floor {
    /// Spawning `cat` and reading one line back.
    Cat,
    /// loom-fs's `list_roots`, answered by the host alone.
    ListRoots,
    /// Temporary file, write, fsync, rename, in the same directory.
    NativeWrite,
    /// The same, then the directory's fsync: the rename durable too, as
    /// loom-fs's write is.
    DurableWrite,
    Find,
    Grep,
}

impl Floor {
    fn label(self) -> &'static str {
        match self {
            Floor::Cat => "cat",
            Floor::ListRoots => "list_roots",
            Floor::NativeWrite => "tmp+fsync+rename",
            Floor::DurableWrite => "tmp+fsync+rename+dir fsync",
            Floor::Find => "find -prune",
            Floor::Grep => "grep -rl --exclude-dir",
        }
    }
}

/// One row of the tables.
#[derive(Clone, Copy)]
struct Workload {
    work: Work,
    /// Its name in `LOOMFS_PEERS_WORKLOADS` and the first column.
    key: &'static str,
    label: &'static str,
    rounds: usize,
    floor: Option<Floor>,
}

const fn w(
    work: Work,
    key: &'static str,
    label: &'static str,
    rounds: usize,
    floor: Option<Floor>,
) -> Workload {
    Workload {
        work,
        key,
        label,
        rounds,
        floor,
    }
}

#[rustfmt::skip]
const WORKLOADS: &[Workload] = &[
    w(Work::Spawn, "spawn", "spawn -> initialize", 10, Some(Floor::Cat)),
    w(Work::ListRoots, "list_roots", "list_roots / list_allowed_directories", 50, None),
    w(Work::Read4k, "read_4k", "read_file 4 KiB", 50, Some(Floor::ListRoots)),
    w(Work::Read1m, "read_1m", "read_file 1 MiB", 20, None),
    w(Work::Info, "info", "get_file_info", 50, Some(Floor::ListRoots)),
    w(Work::List1000, "list_1000", "list 1,000 entries", 20, None),
    w(Work::Tree5000, "tree_5000", "tree depth 3, 5,010 entries", 10, None),
    w(Work::Write4k, "write_4k", "write_file 4 KiB overwrite", 30, Some(Floor::NativeWrite)),
    w(Work::Write4k, "write_4k_dur", "write_file 4 KiB, durable floor", 30, Some(Floor::DurableWrite)),
    w(Work::Edit100k, "edit_100k", "edit_file 1 line in 100 KiB", 30, None),
    w(Work::Append16m, "append_16m", "write_file append 4 KiB to 16 MiB", 10, None),
    w(Work::Glob, "glob", "glob *.py, noisy tree", 10, Some(Floor::Find)),
    w(Work::Contains, "contains", "contains token, noisy tree", 10, Some(Floor::Grep)),
    w(Work::Copy1000, "copy_1000", "copy 1,000-file directory", 5, None),
];

/// The tool and arguments of one sample of `work` for `kind`, or `None`
/// when that server has no such tool (`Spawn` is not a call).
fn call(work: Work, kind: Kind, dir: &Path, round: usize) -> Option<(&'static str, Value)> {
    let loom = kind.is_loom();
    // loom-fs names a root and a relative path; the peers an absolute path.
    let at = |rel: &str| -> Value {
        if loom {
            json!({"root": "fx", "path": rel})
        } else {
            json!({"path": dir.join(rel)})
        }
    };
    let with = |rel: &str, more: Value| -> Value {
        let mut args = at(rel);
        args.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        args
    };
    let read = if loom { "read_file" } else { "read_text_file" };
    let noise = json!(["**/node_modules", "**/.venv"]);
    Some(match work {
        Work::Spawn => return None,
        Work::ListRoots if loom => ("list_roots", json!({})),
        Work::ListRoots => ("list_allowed_directories", json!({})),
        Work::Read4k => (read, at("page-4k.txt")),
        Work::Read1m => (read, at("page-1m.txt")),
        Work::Info => ("get_file_info", at("page-4k.txt")),
        Work::List1000 => ("list_directory", at("list")),
        Work::Tree5000 => match kind {
            Kind::Loom | Kind::Before => ("list_directory", with("tree", json!({"depth": 3}))),
            Kind::Node => ("directory_tree", at("tree")),
            Kind::Rust => ("directory_tree", with("tree", json!({"max_depth": 3}))),
        },
        Work::Write4k => (
            "write_file",
            with(&format!("w/{kind:?}.txt"), json!({"content": *PAGE_4K})),
        ),
        Work::Edit100k => {
            let (old, new) = if round.is_multiple_of(2) {
                (EDIT_A, EDIT_B)
            } else {
                (EDIT_B, EDIT_A)
            };
            let edit = if loom {
                json!({"old_text": old, "new_text": new})
            } else {
                json!({"oldText": old, "newText": new})
            };
            (
                "edit_file",
                with(&format!("e/{kind:?}.txt"), json!({"edits": [edit]})),
            )
        }
        Work::Append16m if loom => (
            "write_file",
            with(
                &format!("a/{kind:?}.txt"),
                json!({"content": *PAGE_4K, "mode": "append"}),
            ),
        ),
        Work::Append16m => return None,
        Work::Glob => match kind {
            Kind::Loom | Kind::Before => (
                "search_files",
                with("noisy", json!({"pattern": "*.py", "max_results": 1000})),
            ),
            Kind::Node => (
                "search_files",
                with(
                    "noisy",
                    json!({"pattern": "**/*.py", "excludePatterns": noise}),
                ),
            ),
            Kind::Rust => (
                "search_files",
                with(
                    "noisy",
                    json!({"pattern": "*.py", "excludePatterns": noise}),
                ),
            ),
        },
        Work::Contains => match kind {
            Kind::Loom | Kind::Before => (
                "search_files",
                with("noisy", json!({"pattern": "*", "contains": noisy::TOKEN})),
            ),
            Kind::Node => return None,
            Kind::Rust => (
                "search_files_content",
                with(
                    "noisy",
                    json!({"pattern": "*", "query": noisy::TOKEN, "excludePatterns": noise}),
                ),
            ),
        },
        Work::Copy1000 if loom => (
            "copy_file",
            json!({"root": "fx", "source": "list", "destination": copy_destination(kind)}),
        ),
        Work::Copy1000 => return None,
    })
}

/// Where the copy workload copies to (removed after each sample).
fn copy_destination(kind: Kind) -> String {
    format!("copies/{kind:?}")
}

fn request(id: u64, tool: &str, args: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
    .to_string()
}

/// Whether a response line is an answer that is not an error.
fn answered(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| {
        v.get("error").is_none()
            && v.get("result").is_some()
            && v["result"]["isError"] != Value::Bool(true)
    })
}

// ---------------------------------------------------------------- samples

/// The samples of one server (or floor) for one workload.
#[derive(Default, Clone)]
struct Samples {
    times: Vec<Duration>,
    bytes: Vec<usize>,
    errors: usize,
    /// The server has no tool for this workload.
    missing: bool,
    /// The start of the first reply that was an error.
    first_error: Option<String>,
}

impl Samples {
    fn push(&mut self, time: Duration, bytes: usize, ok: bool) {
        self.times.push(time);
        self.bytes.push(bytes);
        if !ok {
            self.errors += 1;
        }
    }

    /// Keeps the start of `reply` when it is the first error.
    fn note(&mut self, ok: bool, reply: &str) {
        if !ok && self.first_error.is_none() {
            self.first_error = Some(reply.trim_end().chars().take(200).collect());
        }
    }

    fn quantile(&self, q: f64) -> Option<Duration> {
        let mut t = self.times.clone();
        t.sort();
        (!t.is_empty()).then(|| t[((t.len() - 1) as f64 * q).round() as usize])
    }

    fn median_bytes(&self) -> Option<usize> {
        let mut b = self.bytes.clone();
        b.sort();
        (!b.is_empty()).then(|| b[b.len() / 2])
    }
}

/// One running server and its session (kept across workloads).
struct Live<'a> {
    server: &'a Server,
    session: Session,
}

/// Starts `server`: the time to its `initialize` answer, and the session
/// (whose `line` is that answer).
fn sample_spawn(server: &Server) -> (Duration, Session) {
    let start = Instant::now();
    let s = server.open();
    (start.elapsed(), s)
}

fn sample_call(s: &mut Session, tool: &str, args: &Value) -> (Duration, usize, bool) {
    let line = request(1, tool, args);
    let start = Instant::now();
    // A server that is gone answers nothing: an empty line, an error.
    if s.send(&line).is_err() || s.recv().is_err() {
        s.line.clear();
    }
    let time = start.elapsed();
    (time, s.line.trim_end().len(), answered(&s.line))
}

fn sample_floor(floor: Floor, dir: &Path, loom: &mut Session) -> (Duration, usize, bool) {
    let start = Instant::now();
    let (bytes, ok) = match floor {
        Floor::Cat => {
            // The session's own start: `initialize` written, its echo read.
            let cat = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let s = Session::start(cat);
            return (start.elapsed(), s.line.len(), true);
        }
        Floor::ListRoots => {
            return sample_call(loom, "list_roots", &json!({}));
        }
        Floor::NativeWrite | Floor::DurableWrite => {
            let tmp = dir.join("w/.native.tmp");
            let mut f = std::fs::File::create(&tmp).unwrap();
            f.write_all(PAGE_4K.as_bytes()).unwrap();
            f.sync_all().unwrap();
            drop(f);
            std::fs::rename(&tmp, dir.join("w/native.txt")).unwrap();
            if floor == Floor::DurableWrite {
                std::fs::File::open(dir.join("w"))
                    .unwrap()
                    .sync_all()
                    .unwrap();
            }
            (0, true)
        }
        Floor::Find => {
            let out = noisy::find_prune(&dir.join("noisy")).output().unwrap();
            (out.stdout.len(), out.status.success())
        }
        Floor::Grep => {
            let out = noisy::grep_exclude(&dir.join("noisy")).output().unwrap();
            (out.stdout.len(), out.status.success())
        }
    };
    (start.elapsed(), bytes, ok)
}

/// Every selected workload, interleaved round by round: per round one
/// sample from each server in turn, then the floor.
fn run_raw(
    lives: &mut [Live],
    dir: &Path,
    works: &[Workload],
) -> BTreeMap<&'static str, (Vec<Samples>, Samples)> {
    let mut table = BTreeMap::new();
    for &Workload {
        work,
        key,
        rounds,
        floor,
        ..
    } in works
    {
        let mut per: Vec<Samples> = vec![Samples::default(); lives.len()];
        let mut floor_samples = Samples::default();
        for round in 0..rounds {
            for (i, live) in lives.iter_mut().enumerate() {
                let kind = live.server.kind;
                let spawned;
                // The reply: the spawned server's to `initialize`, or the
                // open session's to the call.
                let ((time, bytes, ok), reply) = if work == Work::Spawn {
                    let time;
                    (time, spawned) = sample_spawn(live.server);
                    let line = &spawned.line;
                    ((time, line.len(), answered(line)), line)
                } else {
                    let Some((tool, args)) = call(work, kind, dir, round) else {
                        per[i].missing = true;
                        continue;
                    };
                    let sample = sample_call(&mut live.session, tool, &args);
                    (sample, &live.session.line)
                };
                per[i].push(time, bytes, ok);
                per[i].note(ok, reply);
                if work == Work::Copy1000 {
                    let _ = std::fs::remove_dir_all(dir.join(copy_destination(kind)));
                }
            }
            if let Some(floor) = floor {
                let loom = &mut lives[0].session;
                let (time, bytes, ok) = sample_floor(floor, dir, loom);
                floor_samples.push(time, bytes, ok);
            }
        }
        table.insert(key, (per, floor_samples));
    }
    table
}

/// `calls` read_file 4 KiB calls on `s` with `IN_FLIGHT` outstanding;
/// the time they took and how many came back as errors (or not at all).
fn pipelined(s: &mut Session, kind: Kind, dir: &Path, calls: usize) -> (Duration, usize) {
    let (tool, args) = call(Work::Read4k, kind, dir, 0).unwrap();
    let lines: Vec<String> = (0..calls)
        .map(|n| request(n as u64 + 1, tool, &args))
        .collect();
    let mut replies = Vec::with_capacity(calls);
    let start = Instant::now();
    let mut sent = 0;
    while sent < calls.min(IN_FLIGHT) {
        let _ = s.send(&lines[sent]);
        sent += 1;
    }
    while replies.len() < calls {
        if s.recv().unwrap_or(0) == 0 {
            break;
        }
        replies.push(std::mem::take(&mut s.line));
        if sent < calls {
            let _ = s.send(&lines[sent]);
            sent += 1;
        }
    }
    let time = start.elapsed();
    // Matched by id after the clock stops: every id once, each an answer.
    let mut ids = HashSet::new();
    let mut errors = calls - replies.len();
    for reply in &replies {
        let id = serde_json::from_str::<Value>(reply)
            .ok()
            .and_then(|v| v["id"].as_u64());
        if !answered(reply) || !id.is_some_and(|id| ids.insert(id)) {
            errors += 1;
        }
    }
    (time, errors)
}

/// VmRSS of a process, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ----------------------------------------------------------------- output

fn fmt_time(d: Option<Duration>) -> String {
    let Some(d) = d else {
        return "-".into();
    };
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn fmt_bytes(b: Option<usize>) -> String {
    match b {
        None => "-".into(),
        Some(b) if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1 << 20) as f64),
        Some(b) if b >= 10 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        Some(b) => format!("{b} B"),
    }
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if !b.is_zero() => format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64()),
        _ => "-".into(),
    }
}

/// Prints one table: a row per workload, per server p50 / p90 / reply
/// bytes, the floor, and loom-fs's p50 over each peer's and the floor's.
fn print_table(
    title: &str,
    names: &[&str],
    works: &[Workload],
    table: &BTreeMap<&'static str, (Vec<Samples>, Samples)>,
    bytes_label: &str,
) {
    println!("\n{title}");
    let mut head = format!("| {:<10} | {:<38} |", "key", "workload");
    let mut rule = format!("|{:-<12}|{:-<40}|", "", "");
    for name in names {
        head.push_str(&format!(" {name} p50 | p90 | {bytes_label} |"));
        rule.push_str("---:|---:|---:|");
    }
    head.push_str(" floor p50 |");
    rule.push_str("---|");
    for name in &names[1..] {
        head.push_str(&format!(" {}/{name} |", names[0]));
        rule.push_str("---:|");
    }
    head.push_str(&format!(" {}/floor | errors |", names[0]));
    rule.push_str("---:|---|");
    println!("{head}\n{rule}");
    for &Workload {
        key,
        label,
        rounds,
        floor,
        ..
    } in works
    {
        let Some((per, floor_samples)) = table.get(key) else {
            continue;
        };
        let mut row = format!(
            "| {key:<10} | {:<38} |",
            format!("{label} ({rounds} rounds)")
        );
        for s in per {
            if s.missing {
                row.push_str(" n/a | n/a | n/a |");
            } else {
                row.push_str(&format!(
                    " {} | {} | {} |",
                    fmt_time(s.quantile(0.5)),
                    fmt_time(s.quantile(0.9)),
                    fmt_bytes(s.median_bytes())
                ));
            }
        }
        let floor_p50 = floor_samples.quantile(0.5);
        match floor {
            Some(f) if floor_p50.is_some() => {
                row.push_str(&format!(" {}: {} |", f.label(), fmt_time(floor_p50)))
            }
            _ => row.push_str(" - |"),
        }
        let loom_p50 = per[0].quantile(0.5);
        for s in &per[1..] {
            row.push_str(&format!(" {} |", ratio(loom_p50, s.quantile(0.5))));
        }
        row.push_str(&format!(" {} |", ratio(loom_p50, floor_p50)));
        let errors: Vec<String> = names
            .iter()
            .zip(per)
            .filter(|(_, s)| s.errors > 0)
            .map(|(n, s)| format!("{n}: {}/{}", s.errors, s.times.len()))
            .chain((floor_samples.errors > 0).then(|| format!("floor: {}", floor_samples.errors)))
            .collect();
        row.push_str(&format!(
            " {} |",
            if errors.is_empty() {
                "0".to_string()
            } else {
                errors.join(", ")
            }
        ));
        println!("{row}");
    }
    for &Workload { key, .. } in works {
        let Some((per, _)) = table.get(key) else {
            continue;
        };
        for (name, s) in names.iter().zip(per) {
            if let Some(error) = &s.first_error {
                println!("  {key}, {name}, first error: {error}");
            }
        }
    }
}

/// One line per server: calls/s, errors, and loom-fs's rate over the peer's
/// (above 1: loom-fs does more calls a second).
fn print_throughput(names: &[&str], rates: &[f64], errors: &[usize]) {
    for (i, name) in names.iter().enumerate() {
        let vs = if i == 0 {
            String::new()
        } else {
            format!("  loom-fs/{name} (calls/s): {:.2}×", rates[0] / rates[i])
        };
        println!(
            "  {name:<9} {:>8.0} calls/s  errors {}{vs}",
            rates[i], errors[i]
        );
    }
}

// ------------------------------------------------------------- python sdk

/// The workloads as data for `peers_sdk.py`: per server the tool and
/// arguments of each round (`null` where it has no tool).
fn sdk_spec(servers: &[Server], dir: &Path, works: &[Workload], throughput_rounds: usize) -> Value {
    let servers_json: Vec<Value> = servers
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "command": s.program.to_string_lossy(),
                "args": s.args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
                "env": s.env.iter().cloned().collect::<BTreeMap<_, _>>(),
                "throughput": call(Work::Read4k, s.kind, dir, 0)
                    .map(|(tool, args)| json!({"tool": tool, "arguments": args})),
                "cleanup": dir.join(copy_destination(s.kind)),
            })
        })
        .collect();
    let works_json: Vec<Value> = works
        .iter()
        .map(|w| {
            let calls: Vec<Value> = servers
                .iter()
                .map(|s| {
                    if w.work == Work::Spawn {
                        return Value::Null;
                    }
                    let per_round: Option<Vec<Value>> = (0..w.rounds)
                        .map(|r| {
                            call(w.work, s.kind, dir, r)
                                .map(|(tool, args)| json!({"tool": tool, "arguments": args}))
                        })
                        .collect();
                    per_round.map_or(Value::Null, Value::Array)
                })
                .collect();
            json!({
                "key": w.key,
                "spawn": w.work == Work::Spawn,
                "rounds": w.rounds,
                "calls": calls,
                "floor_list_roots": w.floor == Some(Floor::ListRoots),
                "cleanup": w.work == Work::Copy1000,
            })
        })
        .collect();
    json!({
        "servers": servers_json,
        "workloads": works_json,
        "throughput": {"calls": THROUGHPUT_CALLS, "in_flight": IN_FLIGHT, "rounds": throughput_rounds},
    })
}

/// Runs the Python SDK mode and prints its tables; says why when skipped.
fn run_sdk(
    servers: &[Server],
    dir: &Path,
    works: &[Workload],
    raw: &BTreeMap<&'static str, (Vec<Samples>, Samples)>,
    throughput_rounds: usize,
) {
    if std::env::var("LOOMFS_PEERS_SDK").is_ok_and(|v| v == "0") {
        println!("\npython SDK mode: skipped (LOOMFS_PEERS_SDK=0)");
        return;
    }
    let python = std::env::var_os("LOOMFS_PEERS_PYTHON").unwrap_or_else(|| "python3".into());
    let importable = Command::new(&python)
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        println!(
            "\npython SDK mode: skipped ({} cannot import mcp: pip install mcp)",
            python.to_string_lossy()
        );
        return;
    }
    reset_edits(dir);
    let spec_path = dir.parent().unwrap().join("sdk-spec.json");
    std::fs::write(
        &spec_path,
        sdk_spec(servers, dir, works, throughput_rounds).to_string(),
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers_sdk.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(&spec_path)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let Ok(result) = serde_json::from_slice::<Value>(&out.stdout) else {
        println!("\npython SDK mode: failed ({}), no figures", out.status);
        return;
    };
    // Back into the raw mode's shape; the native floors come from the raw
    // run (they do not depend on the client), list_roots from this one.
    let samples = |v: &Value| -> Samples {
        if v.is_null() {
            return Samples {
                missing: true,
                ..Samples::default()
            };
        }
        let times = v["times_us"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| Duration::from_secs_f64(t.as_f64().unwrap() / 1e6))
            .collect();
        let bytes = v["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as usize)
            .collect();
        Samples {
            times,
            bytes,
            errors: v["errors"].as_u64().unwrap() as usize,
            missing: false,
            first_error: v["first_error"].as_str().map(str::to_string),
        }
    };
    let mut table = BTreeMap::new();
    for &Workload { key, floor, .. } in works {
        let w = &result["workloads"][key];
        if w.is_null() {
            continue;
        }
        let per: Vec<Samples> = w["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(samples)
            .collect();
        let floor_samples = match floor {
            Some(Floor::ListRoots) => samples(&w["floor"]),
            Some(_) => raw.get(key).map(|r| r.1.clone()).unwrap_or_default(),
            None => Samples::default(),
        };
        table.insert(key, (per, floor_samples));
    }
    let names: Vec<&str> = servers.iter().map(|s| s.name).collect();
    print_table(
        "python SDK client (ClientSession.call_tool; bytes: the result re-serialised; \
         native floors from the raw run)",
        &names,
        works,
        &table,
        "result",
    );
    if let Some(t) = result["throughput"].as_array() {
        println!(
            "\npython SDK throughput: {THROUGHPUT_CALLS} read_file 4 KiB, {IN_FLIGHT} in flight, \
             one session (median of {throughput_rounds} rounds)"
        );
        let rates: Vec<f64> = t
            .iter()
            .map(|v| v["calls_per_s"].as_f64().unwrap_or(0.0))
            .collect();
        let errors: Vec<usize> = t
            .iter()
            .map(|v| v["errors"].as_u64().unwrap_or(0) as usize)
            .collect();
        print_throughput(&names, &rates, &errors);
    }
}

/// Warms every server and the page cache: one call of each workload (the
/// edit files are put back after, the copy removed).
fn warm(lives: &mut [Live], dir: &Path, works: &[Workload]) {
    for &Workload { work, .. } in works {
        for live in lives.iter_mut() {
            if let Some((tool, args)) = call(work, live.server.kind, dir, 0) {
                sample_call(&mut live.session, tool, &args);
            }
        }
        if work == Work::Copy1000 {
            let _ = std::fs::remove_dir_all(dir.join(copy_destination(Kind::Loom)));
        }
    }
    reset_edits(dir);
}

/// `THROUGHPUT_CALLS` pipelined reads on each open session, interleaved
/// round by round; prints the median rate of each server.
fn run_throughput(lives: &mut [Live], dir: &Path, rounds: usize) {
    println!(
        "\nthroughput: {THROUGHPUT_CALLS} read_file 4 KiB, {IN_FLIGHT} in flight, one session \
         (median of {rounds} rounds, interleaved)"
    );
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); lives.len()];
    let mut errors = vec![0; lives.len()];
    for _ in 0..rounds {
        for (i, live) in lives.iter_mut().enumerate() {
            let (time, e) = pipelined(&mut live.session, live.server.kind, dir, THROUGHPUT_CALLS);
            rates[i].push(THROUGHPUT_CALLS as f64 / time.as_secs_f64());
            errors[i] += e;
        }
    }
    let medians: Vec<f64> = rates
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect();
    let names: Vec<&str> = lives.iter().map(|l| l.server.name).collect();
    print_throughput(&names, &medians, &errors);
}

/// Each server's RSS on a fresh process, after `initialize` and after
/// `RSS_CALLS` reads.
fn run_rss(servers: &[Server], dir: &Path) {
    println!(
        "\nRSS (VmRSS of the server process): after initialize, after {RSS_CALLS} read_file \
         4 KiB calls ({IN_FLIGHT} in flight)"
    );
    let mib = |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    for server in servers {
        let mut s = server.open();
        let before = rss_kib(s.pid());
        let (_, errors) = pipelined(&mut s, server.kind, dir, RSS_CALLS);
        let after = rss_kib(s.pid());
        println!(
            "  {:<9} {:>10} -> {:>10}  errors {errors}",
            server.name,
            mib(before),
            mib(after)
        );
    }
}

// ------------------------------------------------------------------- main

/// Sets this process's open-file limit, which every server inherits, to `n`
/// (the hard limit too when it is lower: needs root).
fn raise_nofile(n: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    let done = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && {
            limit.rlim_cur = n;
            limit.rlim_max = limit.rlim_max.max(n);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0
        }
    };
    if done {
        println!("open-file limit of every server: {n} (LOOMFS_PEERS_NOFILE)");
    } else {
        println!(
            "open-file limit: could not set {n} ({}), left as it was",
            std::io::Error::last_os_error()
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let selected: Option<Vec<String>> = std::env::var("LOOMFS_PEERS_WORKLOADS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let rounds: Option<usize> = std::env::var("LOOMFS_PEERS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok());
    let wanted = |key: &str| selected.as_ref().is_none_or(|s| s.iter().any(|k| k == key));
    let works: Vec<_> = WORKLOADS
        .iter()
        .filter(|w| wanted(w.key))
        .map(|&w| Workload {
            rounds: rounds.unwrap_or(w.rounds),
            ..w
        })
        .collect();
    let throughput_rounds = rounds.unwrap_or(3).max(1);

    if let Some(n) = std::env::var("LOOMFS_PEERS_NOFILE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        raise_nofile(n);
    }
    let started = Instant::now();
    let fx = fixture();
    let mut servers = vec![loom(&fx)];
    servers.extend(baseline(&fx));
    if std::env::var("LOOMFS_PEERS_OTHERS").is_ok_and(|v| v == "0") {
        println!("{NODE_PACKAGE}, {RUST_CRATE}: skipped (LOOMFS_PEERS_OTHERS=0)");
    } else {
        for (name, peer) in [(NODE_PACKAGE, node(&fx)), (RUST_CRATE, rust(&fx))] {
            match peer {
                Ok(s) => servers.push(s),
                Err(why) => println!("{name}: skipped ({why})"),
            }
        }
    }
    println!(
        "peers: loom-fs (this build), node = {NODE_PACKAGE}@{NODE_VERSION}, \
         rust-mcp = {RUST_CRATE} {RUST_VERSION}; fixture {} ({:.1} s to build and install)",
        fx.dir.display(),
        started.elapsed().as_secs_f64()
    );

    let names: Vec<&str> = servers.iter().map(|s| s.name).collect();
    let mut lives: Vec<Live> = servers
        .iter()
        .map(|server| Live {
            server,
            session: server.open(),
        })
        .collect();
    warm(&mut lives, &fx.dir, &works);
    let raw = run_raw(&mut lives, &fx.dir, &works);
    print_table(
        "raw JSON-RPC client over stdio (bytes: the response line)",
        &names,
        &works,
        &raw,
        "bytes",
    );

    let throughput = wanted("throughput");
    if throughput {
        run_throughput(&mut lives, &fx.dir, throughput_rounds);
    }
    drop(lives);

    if wanted("rss") {
        run_rss(&servers, &fx.dir);
    }

    run_sdk(
        &servers,
        &fx.dir,
        &works,
        &raw,
        if throughput { throughput_rounds } else { 0 },
    );
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
}
