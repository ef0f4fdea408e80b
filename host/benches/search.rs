//! `search_files` against `find` and `grep`, on a tree where most files are
//! noise the deny list prunes.
//!
//! The fixture is the noisy tree of `session/noisy.rs`, seeded and
//! reproducible: 300 useful files (240 `.py`, the rest `.md`/`.toml`/`.json`)
//! and 24,000 files under `.venv/` and `node_modules/`. A token sits in 10
//! useful files (and in noise files, which no search may report).
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

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use session::noisy::{self, TOKEN};
use session::{Session, one_root_config, output, printed_paths};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let root = dir.join("tree");
    let mut holders = noisy::build(&root);
    holders.sort();
    let config = one_root_config(&dir, "tree", 1000);

    let find = || output(&mut noisy::find_prune(&root));
    let grep = || output(&mut noisy::grep_exclude(&root));
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
        // Whole: a cut result says `truncated` (left out when false).
        assert!(found.get("truncated").is_none(), "cut: {}", found["note"]);
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
