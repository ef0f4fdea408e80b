//! `search_files` against `find` and `grep`, on a tree where most files are
//! noise the deny list prunes.
//!
//! The fixture is built here, seeded and reproducible: 300 useful files (240
//! `.py`, the rest `.md`/`.toml`/`.json`, 100 B – 4 KiB, in nested packages)
//! and 24,000 files under `.venv/` and `node_modules/`, nested like real
//! site-packages. A token sits in 10 useful files (and in noise files, which
//! no search may report).
//!
//! Measured in one run, each as a whole round trip:
//! - `search/search_files_py`: `search_files` of `*.py`, through MCP over
//!   stdio (component call included), against `search/find_prune`: the
//!   process `find ROOT -name node_modules -prune -o -name .venv -prune -o
//!   -name '*.py' -print`;
//! - `search/search_files_contains`: `search_files` of `*` containing the
//!   token, against `search/grep_exclude`: the process `grep -rl
//!   --exclude-dir=.venv --exclude-dir=node_modules TOKEN ROOT`.
//!
//! With `LOOMFS_BENCH_REFERENCE` naming `@modelcontextprotocol/server-filesystem`'s
//! `dist/index.js`, also `reference/search_files_py`: that server's
//! `search_files` of `**/*.py` on the same tree (it walks the noise too).
//!
//! Run with `cargo bench -p loom-fs-mcp --bench search`.

mod session;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use session::{Session, code_text, one_root_config, output, printed_paths};

const TOKEN: &str = "LOOMFS_NEEDLE_7f3a";
const SEED: u64 = 0x10_0f5;

/// Words of the generated code-like text.
const WORDS: &[&str] = &[
    "def", "return", "self", "import", "value", "config", "for", "in", "if", "else", "items",
    "result", "path", "name", "=", "(", ")", ":", "None", "True",
];

/// Text of `len` bytes made of code-like lines, with the token when asked.
fn text(rng: &mut fastrand::Rng, len: usize, token: bool) -> String {
    code_text(rng, len, WORDS, token.then_some(TOKEN))
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Builds the tree under `root`; returns the useful files holding the token.
fn build(root: &Path) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut holders = Vec::new();
    // 300 useful files: 20 packages of 3 modules and 12 files; 10 hold the token.
    let token_at: Vec<usize> = (0..10).map(|i| i * 30 + 7).collect();
    for n in 0..300 {
        let package = n / 15;
        let rel = match n % 15 {
            0 => format!("app/pkg{package:02}/README.md"),
            1 => format!("app/pkg{package:02}/pyproject.toml"),
            2 => format!("app/pkg{package:02}/data/schema.json"),
            3 => format!("app/pkg{package:02}/tests/test_{n:03}.py"),
            i if i < 8 => format!("app/pkg{package:02}/core/mod_{n:03}.py"),
            _ => format!("app/pkg{package:02}/mod_{n:03}.py"),
        };
        let has = token_at.contains(&n);
        let len = rng.usize(100..=4096);
        write(&root.join(&rel), &text(&mut rng, len, has));
        if has {
            holders.push(rel);
        }
    }
    // 24,000 noise files: 12,000 in site-packages, 12,000 in node_modules.
    for n in 0..12_000 {
        let package = n / 60;
        let rel = format!(
            ".venv/lib/python3.12/site-packages/dist{package:03}/sub{}/m{n:05}.py",
            (n / 20) % 3
        );
        let len = rng.usize(100..=4096);
        write(&root.join(rel), &text(&mut rng, len, n % 500 == 0));
    }
    for n in 0..12_000 {
        let package = n / 40;
        let rel = format!(
            "node_modules/lib{package:03}/{}/f{n:05}.js",
            ["lib", "dist"][n % 2]
        );
        let len = rng.usize(100..=4096);
        write(&root.join(rel), &text(&mut rng, len, n % 500 == 0));
    }
    holders
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let root = dir.join("tree");
    let mut holders = build(&root);
    holders.sort();
    let config = one_root_config(&dir, "tree", 1000);

    let find = || {
        output(Command::new("find").arg(&root).args([
            "-name",
            "node_modules",
            "-prune",
            "-o",
            "-name",
            ".venv",
            "-prune",
            "-o",
            "-name",
            "*.py",
            "-print",
        ]))
    };
    let grep = || {
        output(
            Command::new("grep")
                .args([
                    "-rl",
                    "--exclude-dir=.venv",
                    "--exclude-dir=node_modules",
                    TOKEN,
                ])
                .arg(&root),
        )
    };
    let py = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_files","arguments":{"root":"tree","pattern":"*.py","max_results":1000}}}"#;
    let contains = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"search_files","arguments":{{"root":"tree","pattern":"*","contains":"{TOKEN}"}}}}}}"#
    );

    // Both sides find the same things before anything is timed.
    let printed = |out: String| printed_paths(&out, &root);
    let mut s = Session::open(&config);
    let mut found = |request: &str| -> Vec<String> {
        s.request(request);
        let answer: Value = serde_json::from_str(&s.line).unwrap();
        let found = &answer["result"]["structuredContent"];
        assert_eq!(found["truncated"], Value::Bool(false), "{found}");
        let mut paths: Vec<String> = found["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect();
        paths.sort();
        paths
    };
    let by_search = found(py);
    assert_eq!(by_search.len(), 240);
    assert_eq!(by_search, printed(find()));
    assert_eq!(found(&contains), holders);
    assert_eq!(printed(grep()), holders);

    let mut group = c.benchmark_group("search");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("find_prune", |b| b.iter(find));
    group.bench_function("search_files_py", |b| b.iter(|| s.request(py)));
    group.bench_function("grep_exclude", |b| b.iter(grep));
    group.bench_function("search_files_contains", |b| b.iter(|| s.request(&contains)));
    group.finish();
    drop(s);

    let Some(mut r) = session::reference(&root) else {
        return;
    };
    let search = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"search_files","arguments":{{"path":"{}","pattern":"**/*.py"}}}}}}"#,
        root.display()
    );
    r.request(&search);
    assert!(r.line.contains("mod_"), "{}", r.line);
    let mut group = c.benchmark_group("reference");
    group.sample_size(10);
    group.bench_function("search_files_py", |b| b.iter(|| r.request(&search)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
