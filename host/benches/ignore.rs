//! `search_files` in a repository with a large ignored build directory,
//! against ripgrep (single-threaded) doing the same search.
//!
//! The fixture is built here, seeded and reproducible: a project of 2,400
//! source files (2,000 `.rs`, the rest `.md`/`.toml`, 200 B – 6 KiB, in
//! nested modules) whose `.gitignore` excludes `/target/`, and a `target/`
//! of 16,384 files of 64 KiB (1 GiB) nested as a build writes them. A token
//! sits in 12 source files and in many build files, which no search may
//! report.
//!
//! Measured in one run, each as a whole round trip:
//! - `ignore/search_files_contains`: `search_files` of `*` containing the
//!   token, through MCP over stdio, against `ignore/rg_l`: the process
//!   `rg -l -j1 --no-require-git TOKEN ROOT`;
//! - `ignore/search_files_glob`: `search_files` of `*.rs`, against
//!   `ignore/rg_files_glob`: `rg --files -j1 --no-require-git -g '*.rs' ROOT`;
//! - `ignore/search_files_glob_include`: the glob with `ignored: "include"`,
//!   which walks `target/` (what ignoring saves).
//!
//! `--no-require-git`: ripgrep applies `.gitignore` only inside a git
//! repository unless told otherwise; loom-fs applies it in any root.
//! Without `rg` on `PATH` the bench stops with a message.
//!
//! Run with `cargo bench -p loom-fs-mcp --bench ignore`.

// `reference()` (the reference server) is for the benches that compare with it.
#[allow(dead_code)]
mod session;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use session::{Session, code_text, one_root_config, output, printed_paths};

const TOKEN: &str = "LOOMFS_IGNORED_NEEDLE_51c2";
const SEED: u64 = 0x19_1e0;
/// Files in `target/` and the size of each: 1 GiB in all.
const BUILD_FILES: usize = 16_384;
const BUILD_FILE_BYTES: usize = 64 * 1024;

/// Words of the generated code-like text.
const WORDS: &[&str] = &[
    "fn", "let", "mut", "self", "use", "pub", "impl", "match", "Some", "None", "if", "else",
    "return", "=", "(", ")", "{", "}", ";", "value",
];

/// Text of `len` bytes made of code-like lines, with the token when asked.
fn text(rng: &mut fastrand::Rng, len: usize, token: bool) -> String {
    code_text(rng, len, WORDS, token.then_some(TOKEN))
}

fn write(path: &Path, content: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(content))
        .unwrap();
}

/// Builds the tree under `root`; returns the source files holding the token
/// and the `.rs` source files.
fn build(root: &Path) -> (Vec<String>, Vec<String>) {
    let mut rng = fastrand::Rng::with_seed(SEED);
    write(&root.join(".gitignore"), b"/target/\n*.swp\n");
    let (mut holders, mut rs) = (Vec::new(), Vec::new());
    for n in 0..2_400 {
        let krate = n / 200;
        let rel = match n % 12 {
            0 => format!("crates/c{krate:02}/README{n:04}.md"),
            1 => format!("crates/c{krate:02}/conf/c{n:04}.toml"),
            i if i < 6 => format!("crates/c{krate:02}/src/m{}/f{n:04}.rs", i % 3),
            _ => format!("crates/c{krate:02}/src/f{n:04}.rs"),
        };
        let has = n % 200 == 17;
        let len = rng.usize(200..=6 * 1024);
        write(&root.join(&rel), text(&mut rng, len, has).as_bytes());
        if has {
            holders.push(rel.clone());
        }
        if rel.ends_with(".rs") {
            rs.push(rel);
        }
    }
    // target/: what a build leaves, 1 GiB of it; a build file in eight
    // holds the token, and many are named *.rs like generated sources.
    let block = text(&mut rng, BUILD_FILE_BYTES, false).into_bytes();
    for n in 0..BUILD_FILES {
        let rel = format!(
            "target/{}/build/dep{:03}/out/g{n:05}.{}",
            ["debug", "release"][n % 2],
            n / 64,
            ["rs", "o", "rlib", "d"][n % 4]
        );
        let mut content = block[..BUILD_FILE_BYTES].to_vec();
        if n % 8 == 0 {
            content[..TOKEN.len()].copy_from_slice(TOKEN.as_bytes());
        }
        write(&root.join(rel), &content);
    }
    holders.sort();
    rs.sort();
    (holders, rs)
}

fn bench(c: &mut Criterion) {
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("rg (ripgrep) is not on PATH: install it to run this bench");
        return;
    }
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let root = dir.join("repo");
    let (holders, rs) = build(&root);
    let config = one_root_config(&dir, "repo", 20000);

    let rg_l = || {
        output(
            Command::new("rg")
                .args(["-l", "-j1", "--no-require-git", TOKEN])
                .arg(&root),
        )
    };
    let rg_files = || {
        output(
            Command::new("rg")
                .args(["--files", "-j1", "--no-require-git", "-g", "*.rs"])
                .arg(&root),
        )
    };
    let glob = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_files","arguments":{"root":"repo","pattern":"*.rs"}}}"#;
    let glob_include = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_files","arguments":{"root":"repo","pattern":"*.rs","ignored":"include"}}}"#;
    let contains = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"search_files","arguments":{{"root":"repo","pattern":"*","contains":"{TOKEN}"}}}}}}"#
    );

    // Both sides find the same things before anything is timed.
    let printed = |out: String| printed_paths(&out, &root);
    let mut s = Session::open(&config);
    let mut found = |request: &str| -> (Vec<String>, Value) {
        s.request(request);
        let answer: Value = serde_json::from_str(&s.line).unwrap();
        let found = answer["result"]["structuredContent"].clone();
        // Whole: a cut result says `truncated` (left out when false).
        assert!(found.get("truncated").is_none(), "cut: {}", found["note"]);
        let mut paths: Vec<String> = found["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect();
        paths.sort();
        paths.dedup();
        (paths, found)
    };
    let (by_glob, structured) = found(glob);
    assert_eq!(by_glob, rs);
    assert_eq!(structured["ignored"], 1, "{structured}");
    assert_eq!(printed(rg_files()), rs);
    let (by_contains, structured) = found(&contains);
    assert_eq!(by_contains, holders);
    assert_eq!(structured["ignored"], 1, "{structured}");
    assert_eq!(printed(rg_l()), holders);
    let (all, _) = found(glob_include);
    assert_eq!(all.len(), rs.len() + BUILD_FILES / 4);

    let mut group = c.benchmark_group("ignore");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("rg_l", |b| b.iter(rg_l));
    group.bench_function("search_files_contains", |b| b.iter(|| s.request(&contains)));
    group.bench_function("rg_files_glob", |b| b.iter(rg_files));
    group.bench_function("search_files_glob", |b| b.iter(|| s.request(glob)));
    group.bench_function("search_files_glob_include", |b| {
        b.iter(|| s.request(glob_include))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
