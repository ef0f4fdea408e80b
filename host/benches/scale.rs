//! `search_files` on large trees against `find`, `grep -rl` and `rg -l`.
//!
//! For each size (1,000, 10,000 and 100,000 files by default) a seeded tree
//! of useful source files is built as `docs/benchmarks.md` describes: files
//! of 1–4 KiB of code-like text, 50 per directory, in directories nested two
//! deep under the root (`dNN/eNN/`), so a file sits three levels down. Ten
//! files are named `*_zebra.py`; ten others hold [`TOKEN`]. loom-fs serves
//! the tree as one reference root with room for every byte of it
//! (`max_search_bytes`; its audit log to stderr, which is null: an audit
//! file is held by one server, and a baseline serves beside it), so both
//! searches walk the whole tree:
//! - **glob**: `search_files` of `*_zebra.py` against the process
//!   `find ROOT -name '*_zebra.py'`;
//! - **contains**: `search_files` of `*` holding the token (every file
//!   read) against `grep -rl TOKEN ROOT` and `rg -l TOKEN ROOT`.
//!
//! Both sides must find the same files before anything is timed. Then, in
//! each round, one sample of every command in turn (interleaved: the
//! machines are shared and noisy, and a ratio of two figures from the same
//! rounds holds where absolute times drift); the page cache is warm (each
//! command ran once before). Prints the medians and their ratios.
//!
//! `rg` comes from Debian's `ripgrep` package: when it is missing, the
//! bench installs it with `apt-get` if it runs as root, else prints a
//! `skipped` line and leaves its column out.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench scale`.
//! `LOOMFS_SCALE_BASELINE` names another build of loom-fs (a `loom-fs-mcp`
//! binary), measured in the same rounds: a last column gives this build's
//! medians against it.
//! `LOOMFS_SCALE_FILES` (comma-separated counts) picks the sizes,
//! `LOOMFS_SCALE_ROUNDS` the rounds (default 5), `LOOMFS_SCALE_DIR` a
//! directory to build the trees in (another filesystem).

#[allow(dead_code)]
mod session;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use session::{Session, code_text, output, printed_paths};

/// The token ten files of each tree hold.
const TOKEN: &str = "LOOMFS_SCALE_NEEDLE_5d21";
const SEED: u64 = 0x5ca1e;
const WORDS: &[&str] = &[
    "def", "return", "self", "import", "value", "config", "for", "in", "if", "else", "items",
    "result", "path", "name", "=", "(", ")", ":", "None", "True", "async", "await",
];
/// Files per directory, and directories per directory above them.
const PER_DIR: usize = 50;

/// A built tree: its root and what each search must find there.
struct Tree {
    files: usize,
    bytes: u64,
    zebras: Vec<String>,
    holders: Vec<String>,
}

/// Builds a tree of `files` files under `root` (see the module).
fn build(root: &Path, files: usize) -> Tree {
    let mut rng = fastrand::Rng::with_seed(SEED ^ files as u64);
    let mut picks: Vec<usize> = (0..files).collect();
    rng.shuffle(&mut picks);
    let (zebras, holders) = (&picks[..10], &picks[10..20]);
    let mut tree = Tree {
        files,
        bytes: 0,
        zebras: Vec::new(),
        holders: Vec::new(),
    };
    for i in 0..files {
        let dir = format!(
            "d{:02}/e{:02}",
            i / (PER_DIR * PER_DIR),
            (i / PER_DIR) % PER_DIR
        );
        let name = if zebras.contains(&i) {
            format!("f{i:06}_zebra.py")
        } else {
            format!("f{i:06}.py")
        };
        let holds = holders.contains(&i);
        let len = rng.usize(1024..4096);
        let text = code_text(&mut rng, len, WORDS, holds.then_some(TOKEN));
        std::fs::create_dir_all(root.join(&dir)).unwrap();
        std::fs::write(root.join(&dir).join(&name), &text).unwrap();
        tree.bytes += text.len() as u64;
        let rel = format!("{dir}/{name}");
        if zebras.contains(&i) {
            tree.zebras.push(rel.clone());
        }
        if holds {
            tree.holders.push(rel);
        }
    }
    tree.zebras.sort();
    tree.holders.sort();
    tree
}

/// Whether `rg` runs, installing Debian's `ripgrep` first when it does not
/// and this runs as root with `apt-get`.
fn ripgrep() -> bool {
    let runs = || Command::new("rg").arg("--version").output().is_ok();
    if runs() {
        return true;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if root {
        eprintln!("scale: installing ripgrep from Debian's packages");
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", "ripgrep"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
    }
    if runs() {
        return true;
    }
    eprintln!("scale: rg -l: skipped (ripgrep is not installed, and apt-get could not install it)");
    false
}

/// The paths of a `search_files` answer, sorted; the search must be whole.
fn found(answer: &str) -> Vec<String> {
    let answer: Value = serde_json::from_str(answer).unwrap();
    let found = &answer["result"]["structuredContent"];
    assert!(found.get("truncated").is_none(), "cut: {}", found["note"]);
    let mut paths: Vec<String> = found["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no matches: {answer}"))
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
}

/// One size: the tree, the checks, the rounds; the table's row.
fn measure(base: &Path, files: usize, rounds: usize, rg: bool, before: Option<&Path>) -> String {
    let dir = base.join(format!("scale-{files}"));
    let root = dir.join("tree");
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let tree = build(&root, files);
    eprintln!(
        "scale: {files} files ({:.1} MB) built in {:.1} s",
        tree.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let config = dir.join("roots.toml");
    std::fs::write(
        &config,
        "audit_log = \"stderr\"\nmax_search_results = 1000\n\
         max_search_bytes = 1099511627776\n\
         [[roots]]\nname = \"tree\"\npath = \"tree\"\nrole = \"reference\"\n",
    )
    .unwrap();
    let mut s = Session::open(&config);
    let mut old = before.map(|bin| {
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .arg("--allow-root")
            .env("LOOMFS_CACHE_DIR", session::CACHE_DIR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Session::start(child)
    });
    let glob = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_files","arguments":{"root":"tree","pattern":"*_zebra.py"}}}"#;
    let contains = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"search_files","arguments":{{"root":"tree","pattern":"*","contains":"{TOKEN}"}}}}}}"#
    );
    let find = || {
        output(
            Command::new("find")
                .arg(&root)
                .args(["-name", "*_zebra.py"]),
        )
    };
    let grep = || output(Command::new("grep").args(["-rl", TOKEN]).arg(&root));
    let rg_l = || output(Command::new("rg").args(["-l", TOKEN]).arg(&root));

    // The same answers first (which also warms the page cache).
    s.request(glob);
    assert_eq!(found(&s.line), tree.zebras);
    s.request(&contains);
    assert_eq!(found(&s.line), tree.holders);
    assert_eq!(printed_paths(&find(), &root), tree.zebras);
    assert_eq!(printed_paths(&grep(), &root), tree.holders);
    if rg {
        assert_eq!(printed_paths(&rg_l(), &root), tree.holders);
    }
    if let Some(old) = old.as_mut() {
        old.request(glob);
        assert_eq!(found(&old.line), tree.zebras);
        old.request(&contains);
        assert_eq!(found(&old.line), tree.holders);
    }

    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed()
    };
    let mut samples: [Vec<Duration>; 7] = Default::default();
    for _ in 0..rounds {
        samples[0].push(time(&mut || {
            s.request(glob);
        }));
        samples[1].push(time(&mut || {
            find();
        }));
        samples[2].push(time(&mut || {
            s.request(&contains);
        }));
        samples[3].push(time(&mut || {
            grep();
        }));
        if rg {
            samples[4].push(time(&mut || {
                rg_l();
            }));
        }
        if let Some(old) = old.as_mut() {
            samples[5].push(time(&mut || {
                old.request(glob);
            }));
            samples[6].push(time(&mut || {
                old.request(&contains);
            }));
        }
    }
    let [g, f, c, gr, r, og, oc] = samples.each_mut().map(|v| {
        if v.is_empty() {
            Duration::ZERO
        } else {
            median(v)
        }
    });
    let rg_cell = if rg {
        format!("{} / {} = {}", ms(c), ms(r), ratio(c, r))
    } else {
        "skipped".to_string()
    };
    let before_cell = if old.is_some() {
        format!(
            " glob {} ({}), contains {} ({}) |",
            ratio(g, og),
            ms(og),
            ratio(c, oc),
            ms(oc)
        )
    } else {
        String::new()
    };
    let row = format!(
        "| {} ({:.1}) | {} / {} = {} | {} / {} = {} | {} |{before_cell}",
        tree.files,
        tree.bytes as f64 / 1e6,
        ms(g),
        ms(f),
        ratio(g, f),
        ms(c),
        ms(gr),
        ratio(c, gr),
        rg_cell
    );
    drop((s, old));
    let _ = std::fs::remove_dir_all(&dir);
    row
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let sizes: Vec<usize> = std::env::var("LOOMFS_SCALE_FILES")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("LOOMFS_SCALE_FILES: counts"))
        .collect();
    let rounds: usize = std::env::var("LOOMFS_SCALE_ROUNDS")
        .map(|n| n.parse().expect("LOOMFS_SCALE_ROUNDS: a count"))
        .unwrap_or(5);
    let tmp = match std::env::var_os("LOOMFS_SCALE_DIR") {
        Some(dir) => tempfile::TempDir::new_in(dir),
        None => tempfile::TempDir::new(),
    }
    .unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let rg = ripgrep();
    let before = std::env::var_os("LOOMFS_SCALE_BASELINE").map(std::path::PathBuf::from);
    let mut rows = Vec::new();
    for files in sizes {
        rows.push(measure(&base, files, rounds, rg, before.as_deref()));
    }
    println!("medians of {rounds} interleaved rounds, page cache warm");
    let (head, rule) = if before.is_some() {
        (" this build / the baseline |", "---|")
    } else {
        ("", "")
    };
    println!(
        "| files (MB) | glob / `find -name` | contains / `grep -rl` | contains / `rg -l` |{head}"
    );
    println!("|---|---|---|---|{rule}");
    for row in rows {
        println!("{row}");
    }
}
