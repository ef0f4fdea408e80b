//! `search_files` end to end (the real binary over stdio), plus the one
//! property only the runtime can show: denied directories are never walked.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use loom_fs_mcp::policy::{Permission, Role};
use loom_fs_mcp::runtime::{
    self, Activity, Budget, Cache, CallMount, CallRequest, GuestLimits, Runtime,
};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

/// A project tree: useful files at three depths, a directory named like a
/// file, secrets and dependency directories holding the same names, symlinks
/// in and out, a binary file and a FIFO.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("proj/top.py", "print('top')\n")
        .write("proj/README.md", "# TOKEN in the readme\n")
        .write("proj/a.txt", "alpha\n")
        .write("proj/b1.txt", "b1\n")
        .write("proj/b2.txt", "b2\n")
        .write("proj/bx.txt", "bx\n")
        .mkdir("proj/dir.py")
        .write("proj/pkg/__init__.py", "")
        .write(
            "proj/pkg/mod.py",
            "import os\n\ndef load():\n    return TOKEN  # first\n\ndef save():\r\n    TOKEN = 2\r\n",
        )
        .write("proj/pkg/data.json", "{\"TOKEN\": 1}\n")
        .write("proj/pkg/sub/deep.py", "def deep():\n    pass\n")
        .write("proj/src/main.rs", "fn main() {}\n")
        .write("proj/src/pkg/inner.py", "x = 'TOKEN'\n")
        .write("proj/tests/test_one.py", "def test_one(): assert TOKEN\n")
        .write("proj/tests/unit/test_two.py", "def test_two(): pass\n")
        .write("proj/.github/ci.yml", "on: push\n")
        .write("proj/blob.py", b"\x7fELF\0\0TOKEN\0binary")
        // Denied: never listed, never read.
        .write("proj/.env", "TOKEN=CANARY-DOTENV\n")
        .write("proj/id_rsa.py", "TOKEN CANARY-KEY\n")
        .write("proj/.git/config.py", "TOKEN CANARY-GIT\n")
        .write("proj/node_modules/x/index.py", "TOKEN CANARY-NODE\n")
        .write("proj/.venv/lib/site.py", "TOKEN CANARY-VENV\n")
        .write("proj/pkg/__pycache__/mod.py", "TOKEN CANARY-PYCACHE\n")
        // Outside the root.
        .write("outside/leak.py", "TOKEN CANARY-OUTSIDE\n")
        .fifo("proj/pipe.py")
        .symlink("../outside", "proj/outdir")
        .symlink("../outside/leak.py", "proj/leak.py")
        .symlink(".env", "proj/alias.py")
        .symlink(".", "proj/loop")
        .symlink("../pkg", "proj/src/pkgloop");
    let config = env.config(
        r#"
        [[roots]]
        name = "proj"
        path = "proj"
        role = "reference"
        "#,
    );
    (env, config)
}

/// Writes `file` (beside the tree) serving `r/` as the reference root `r`,
/// with top-level `settings` and the root's own `root_settings` (TOML lines).
fn reference_r(env: &Env, file: &str, settings: &str, root_settings: &str) -> PathBuf {
    let path = env.path(file);
    std::fs::write(
        &path,
        format!(
            "{settings}\n[[roots]]\nname = \"r\"\npath = \"r\"\nrole = \"reference\"\n{root_settings}\n"
        ),
    )
    .unwrap();
    path
}

/// Each match as (path, line, preview), in the result's order.
fn found(r: &rmcp::model::CallToolResult) -> Vec<(String, Option<u64>, Option<String>)> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_string(),
                m["line"].as_u64(),
                m["preview"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn paths(r: &rmcp::model::CallToolResult) -> Vec<String> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect()
}

/// Each match's path and line number.
fn path_lines(r: &rmcp::model::CallToolResult) -> Vec<(String, u64)> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().into(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

async fn search(client: &Client, args: Value) -> rmcp::model::CallToolResult {
    let r = call(client, "search_files", args.clone()).await;
    assert!(!is_error(&r), "{args}: {}", text(&r));
    r
}

#[tokio::test]
async fn glob_semantics() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let table: &[(&str, Option<&str>, &[&str])] = &[
        // No `/`: the base name, at any depth; nearest levels first,
        // sorted by name within a directory; a directory ends in `/`.
        (
            "*.py",
            None,
            &[
                "blob.py",
                "dir.py/",
                "top.py",
                "pkg/__init__.py",
                "pkg/mod.py",
                "tests/test_one.py",
                "pkg/sub/deep.py",
                "src/pkg/inner.py",
                "tests/unit/test_two.py",
            ],
        ),
        (
            "test_*.py",
            None,
            &["tests/test_one.py", "tests/unit/test_two.py"],
        ),
        // With `/`: the whole path relative to the searched directory, and
        // `*` never crosses a `/`.
        ("pkg/*.py", None, &["pkg/__init__.py", "pkg/mod.py"]),
        (
            "**/pkg/*.py",
            None,
            &["pkg/__init__.py", "pkg/mod.py", "src/pkg/inner.py"],
        ),
        (
            "pkg/**",
            None,
            &[
                "pkg/__init__.py",
                "pkg/data.json",
                "pkg/mod.py",
                "pkg/sub/",
                "pkg/sub/deep.py",
            ],
        ),
        (
            "*/*/*.py",
            None,
            &[
                "pkg/sub/deep.py",
                "src/pkg/inner.py",
                "tests/unit/test_two.py",
            ],
        ),
        ("./pkg/*.json", None, &["pkg/data.json"]),
        // `?` is one character, never `/`; classes and negated classes.
        ("b?.txt", None, &["b1.txt", "b2.txt", "bx.txt"]),
        ("b[0-9].txt", None, &["b1.txt", "b2.txt"]),
        ("b[!0-9].txt", None, &["bx.txt"]),
        ("{main.rs,top.py}", None, &["top.py", "src/main.rs"]),
        // Case matters; dot directories that are not denied are searched.
        ("*.PY", None, &[]),
        ("*.yml", None, &[".github/ci.yml"]),
        // `path` moves the start: the pattern is relative to it, results to the root.
        (
            "*",
            Some("tests"),
            &["tests/test_one.py", "tests/unit/", "tests/unit/test_two.py"],
        ),
        ("pkg/*.py", Some("src"), &["src/pkg/inner.py"]),
        ("unit/*", Some("tests/"), &["tests/unit/test_two.py"]),
    ];
    let mut results = Vec::new();
    for (pattern, path, expected) in table {
        let mut args = json!({"root": "proj", "pattern": pattern});
        if let Some(path) = path {
            args["path"] = json!(path);
        }
        let r = search(&client, args).await;
        assert_eq!(paths(&r), *expected, "pattern {pattern:?} under {path:?}");
        // Not truncated, nothing to note: both left out.
        let s = structured(&r);
        assert_eq!(s.get("truncated"), None);
        assert_eq!(s.get("note"), None);
        results.push(r);
    }
    // Everything, and nothing denied, behind a symlink or special.
    let r = search(&client, json!({"root": "proj", "pattern": "**"})).await;
    let all = paths(&r);
    assert_eq!(all.len(), 24, "{all:?}");
    for hidden in [
        ".env",
        "id_rsa",
        ".git",
        "node_modules",
        ".venv",
        "__pycache__",
        "outdir",
        "leak",
        "alias",
        "loop",
        "pkgloop",
        "pipe",
    ] {
        let shown = |p: &String| {
            p.split('/')
                .any(|c| c.starts_with(hidden) && c != ".github")
        };
        assert!(!all.iter().any(shown), "{hidden} in {all:?}");
    }
    results.push(r);
    let refs: Vec<&_> = results.iter().collect();
    assert_no_host_path(&env, &refs);
}

#[tokio::test]
async fn bad_patterns_and_arguments_are_refused_with_the_reason() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let cases = [
        (json!({"pattern": ""}), "'pattern' is empty"),
        (json!({"pattern": "./"}), "'pattern' is empty"),
        (json!({"pattern": ".//etc/*"}), "is absolute"),
        (json!({"pattern": "/etc/*"}), "is absolute"),
        (json!({"pattern": "../outside/*"}), "contains '..'"),
        (json!({"pattern": "pkg/../../x"}), "contains '..'"),
        (json!({"pattern": "[abc"}), "unclosed character class"),
        (json!({"pattern": "a\u{0}b"}), "NUL byte"),
        (
            json!({"pattern": "x".repeat(1025)}),
            "longer than 1024 bytes",
        ),
        (
            json!({"pattern": "*", "contains": ""}),
            "'contains' is empty",
        ),
        (
            json!({"pattern": "*", "regex": true}),
            "'regex' applies to 'contains'",
        ),
        (
            json!({"pattern": "*", "contains": "(", "regex": true}),
            "invalid regular expression",
        ),
        (
            json!({"pattern": "*", "contains": "(\\w{100}){100}", "regex": true}),
            "is too large",
        ),
        (
            json!({"pattern": "*", "max_results": 0}),
            "'max_results' must be between 1 and 200",
        ),
        (
            json!({"pattern": "*", "max_results": 201}),
            "'max_results' must be between 1 and 200",
        ),
        (
            json!({"pattern": "*", "path": "top.py"}),
            "'top.py' is not a directory",
        ),
        (
            json!({"pattern": "*", "path": "nowhere"}),
            "'nowhere' does not exist",
        ),
        (
            json!({"pattern": "*", "path": "../outside"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"pattern": "*", "path": "outdir"}),
            "refused by rule 'confinement'",
        ),
        (
            json!({"pattern": "*", "path": "node_modules"}),
            "refused by rule 'deny'",
        ),
        (
            json!({"pattern": "*", "colour": "red"}),
            "unknown field `colour`",
        ),
    ];
    let mut results = Vec::new();
    for (mut args, needle) in cases {
        args["root"] = json!("proj");
        let r = call(&client, "search_files", args.clone()).await;
        assert_refused(&r, needle);
        results.push(r);
    }
    let refs: Vec<&_> = results.iter().collect();
    assert_no_host_path(&env, &refs);
}

#[tokio::test]
async fn contains_finds_lines_in_text_files_only() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let r = search(
        &client,
        json!({"root": "proj", "pattern": "*.py", "contains": "TOKEN"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(
        s["matches"],
        json!([
            {"path": "pkg/mod.py", "line": 4, "preview": "return TOKEN  # first"},
            {"path": "pkg/mod.py", "line": 7, "preview": "TOKEN = 2"},
            {"path": "tests/test_one.py", "line": 1, "preview": "def test_one(): assert TOKEN"},
            {"path": "src/pkg/inner.py", "line": 1, "preview": "x = 'TOKEN'"},
        ])
    );
    // top.py, blob.py, the three in pkg, tests, src: the files named *.py.
    assert_eq!(s["examined_files"], json!(8));
    assert_eq!(s["skipped_binary"], json!(1));
    // Zero and false are left out.
    assert_eq!(s.get("skipped_too_large"), None);
    assert_eq!(s.get("truncated"), None);
    assert_eq!(s["note"], json!("1 binary files were not searched"));
    let t = text(&r);
    assert!(
        t.starts_with("pkg/mod.py:4: return TOKEN  # first\n"),
        "{t}"
    );
    assert!(!t.contains("CANARY"), "{t}");

    // A regular expression, with `^` at line starts.
    let r = search(
        &client,
        json!({"root": "proj", "pattern": "*.py", "contains": "^def \\w+\\(\\)", "regex": true}),
    )
    .await;
    let found = path_lines(&r);
    assert_eq!(
        found,
        [
            ("pkg/mod.py".to_string(), 3),
            ("pkg/mod.py".to_string(), 6),
            ("tests/test_one.py".to_string(), 1),
            ("pkg/sub/deep.py".to_string(), 1),
            ("tests/unit/test_two.py".to_string(), 1),
        ]
    );

    // Nothing found says what was looked at.
    let r = search(
        &client,
        json!({"root": "proj", "pattern": "*.rs", "contains": "CANARY"}),
    )
    .await;
    assert_eq!(
        text(&r),
        "no file under '.' matches '*.rs' containing 'CANARY' (1 files examined, 13 B scanned)"
    );
    // Denied files, files behind symlinks and outside the root are never read.
    let r = search(
        &client,
        json!({"root": "proj", "pattern": "**", "contains": "CANARY"}),
    )
    .await;
    assert_eq!(paths(&r), Vec::<String>::new());
    assert_no_host_path(&env, &[&r]);
}

/// A file is read in one read when that brings it whole (up to 64 KiB,
/// known by the read coming back short), else in several after a stat:
/// either way every line is searched, up to the file's last byte.
#[tokio::test]
async fn contains_reads_files_whole_on_either_side_of_one_read() {
    let env = Env::new();
    let sizes = [0, 1, 65_535, 65_536, 65_537, 300_000];
    let mut want = Vec::new();
    for len in sizes {
        // Lines of 16 bytes, the last one holding the token where the
        // file is long enough, cut to `len`.
        let mut body = "0123456789abcde\n".repeat(len / 16 + 1).into_bytes();
        body.truncate(len);
        if len >= 16 {
            body[len - 6..].copy_from_slice(b"TOKEN\n");
            let line = body[..len - 6].iter().filter(|&&b| b == b'\n').count() + 1;
            want.push((format!("f{len}.txt"), line as u64));
        }
        env.write(&format!("r/f{len}.txt"), body);
    }
    let mut binary = vec![b'a'; 100_000];
    binary[10] = 0;
    binary[99_000..99_005].copy_from_slice(b"TOKEN");
    env.write("r/blob.bin", binary);
    let config = reference_r(&env, "r.toml", "", "");
    let client = start(&config).await;
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*", "contains": "TOKEN"}),
    )
    .await;
    let s = structured(&r);
    let mut found = path_lines(&r);
    found.sort();
    want.sort();
    assert_eq!(found, want, "{s}");
    assert_eq!(s["examined_files"], json!(7));
    assert_eq!(s["skipped_binary"], json!(1));
    // The text files whole, and the binary one's head (one read).
    let text_bytes: u64 = sizes.iter().sum::<usize>() as u64;
    assert_eq!(s["scanned_bytes"], json!(text_bytes + 65_536), "{s}");
}

#[tokio::test]
async fn limits_cut_the_search_and_say_so() {
    let env = Env::new();
    for i in 0..6 {
        env.write(&format!("r/f{i}.txt"), format!("hit {i}\nagain\n"));
    }
    env.write("r/big.txt", "hit\n".repeat(100))
        .write("r/z/deep.txt", "hit deep\n");
    let config = reference_r(
        &env,
        "r.toml",
        "max_search_results = 20\nmax_search_bytes = 50",
        "max_read_bytes = 100",
    );
    let client = start(&config).await;

    // Exactly as many matches as allowed: complete, not truncated.
    let r = search(
        &client,
        json!({"root": "r", "pattern": "f*", "max_results": 6}),
    )
    .await;
    assert_eq!(paths(&r).len(), 6);
    assert_eq!(structured(&r).get("truncated"), None);
    // One more exists: truncated, and the kept ones are the nearest.
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*.txt", "max_results": 7}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true));
    assert_eq!(
        paths(&r),
        [
            "big.txt", "f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt"
        ]
    );
    assert!(
        s["note"]
            .as_str()
            .unwrap()
            .starts_with("stopped at 7 matches"),
        "{s}"
    );
    assert!(text(&r).contains("stopped at 7 matches"));

    // The byte budget (50 B: four files of 12 B) and the read cap (big.txt).
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*.txt", "contains": "again"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(paths(&r), ["f0.txt", "f1.txt", "f2.txt", "f3.txt"]);
    assert_eq!(s["scanned_bytes"], json!(48));
    assert_eq!(s["skipped_too_large"], json!(1));
    assert_eq!(s["truncated"], json!(true));
    let note = s["note"].as_str().unwrap();
    assert!(
        note.starts_with("stopped after scanning 48 B (max_search_bytes)"),
        "{note}"
    );
    assert!(
        note.contains("1 files larger than 100 B (max_read_bytes) were not searched"),
        "{note}"
    );

    // The result limit counts lines, not files.
    let client = start(&reference_r(&env, "whole.toml", "", "")).await;
    let r = search(
        &client,
        json!({"root": "r", "pattern": "big.txt", "contains": "hit", "max_results": 20}),
    )
    .await;
    assert_eq!(structured(&r)["matches"].as_array().unwrap().len(), 20);
    assert_eq!(structured(&r)["truncated"], json!(true));
}

#[tokio::test]
async fn a_cut_search_pages_with_a_cursor_to_the_whole_set() {
    let env = Env::new();
    for i in 0..5 {
        env.write(
            &format!("r/f{i}.txt"),
            format!("hit {i}a\nmiss\nhit {i}b\nhit {i}c\n"),
        );
        env.write(&format!("r/d{i}/g{i}.txt"), format!("hit d{i}\n"));
    }
    env.write("r/.gitignore", "d4/\n");
    let client = start(&reference_r(&env, "r.toml", "", "")).await;
    for (args, cap) in [
        // 15 lines in f*.txt, 4 in d*/ (d4 ignored): cut inside files too.
        (
            json!({"root": "r", "pattern": "*.txt", "contains": "hit"}),
            4,
        ),
        // Names only: files and directories.
        (json!({"root": "r", "pattern": "*"}), 3),
    ] {
        let whole = search(&client, args.clone()).await;
        assert_eq!(structured(&whole).get("next_cursor"), None);
        let pages = found(&whole).len().div_ceil(cap);
        assert!(pages >= 4, "{}", text(&whole));
        let mut capped = args.clone();
        capped["max_results"] = json!(cap);
        let (all, n) = all_pages(&client, "search_files", capped).await;
        assert_eq!(n, pages, "{args}");
        let paged: Vec<_> = all.iter().flat_map(found).collect();
        // The same matches in the same order: none twice, none missing.
        assert_eq!(paged, found(&whole), "{args}");
        assert!(
            text(&all[0]).contains(&format!(
                "call again with cursor: \"{}\" to go on",
                structured(&all[0])["next_cursor"].as_str().unwrap()
            )),
            "{}",
            text(&all[0])
        );
    }
    // A cursor inside a file's lines says how many of them were given.
    let first = search(
        &client,
        json!({"root": "r", "pattern": "*.txt", "contains": "hit", "max_results": 2}),
    )
    .await;
    assert_eq!(
        structured(&first)["next_cursor"],
        "6+2",
        "f0.txt's third hit"
    );

    // The byte budget pages too: 3 files of 26 B fit in 100 B.
    let budget = reference_r(&env, "budget.toml", "max_search_bytes = 100", "");
    let client = start(&budget).await;
    let args = json!({"root": "r", "pattern": "f*.txt", "contains": "miss"});
    let (all, n) = all_pages(&client, "search_files", args).await;
    assert_eq!(n, 2);
    let paged: Vec<String> = all.iter().flat_map(paths).collect();
    assert_eq!(paged, ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt"]);
    assert!(
        structured(&all[0])["note"]
            .as_str()
            .unwrap()
            .starts_with("stopped after scanning 78 B (max_search_bytes)"),
        "{}",
        text(&all[0])
    );
}

/// Each matching line once, with its number: matches ending in a newline,
/// empty matches, CRLF line ends.
#[tokio::test]
async fn matching_lines_are_numbered_as_an_editor_would() {
    let env = Env::new();
    env.write("r/lf.txt", "xa\nya\nza\n")
        .write("r/blank.txt", "a\n\nb\n")
        .write("r/crlf.txt", "foo\r\nbar foo\r\n");
    let config = reference_r(&env, "r.toml", "", "");
    let client = start(&config).await;
    let lines = |r: &rmcp::model::CallToolResult| -> Vec<(String, u64, String)> {
        found(r)
            .into_iter()
            .map(|(path, line, preview)| (path, line.unwrap(), preview.unwrap()))
            .collect()
    };
    let r = search(
        &client,
        json!({"root": "r", "pattern": "lf.txt", "contains": "a\n"}),
    )
    .await;
    assert_eq!(
        lines(&r),
        [
            ("lf.txt".into(), 1, "xa".into()),
            ("lf.txt".into(), 2, "ya".into()),
            ("lf.txt".into(), 3, "za".into())
        ]
    );
    let r = search(
        &client,
        json!({"root": "r", "pattern": "blank.txt", "contains": "^$", "regex": true}),
    )
    .await;
    assert_eq!(lines(&r), [("blank.txt".into(), 2, String::new())]);
    let r = search(
        &client,
        json!({"root": "r", "pattern": "crlf.txt", "contains": "foo$", "regex": true}),
    )
    .await;
    assert_eq!(
        lines(&r),
        [
            ("crlf.txt".into(), 1, "foo".into()),
            ("crlf.txt".into(), 2, "bar foo".into())
        ]
    );
}

/// A name WASI cannot carry (not UTF-8) is skipped and counted; the rest of
/// its directory is still searched.
#[tokio::test]
async fn names_that_are_not_utf8_are_skipped_not_fatal() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("r/f{i:02}.txt"), "hit\n");
    }
    std::fs::write(
        env.path("r")
            .join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")),
        "hit\n",
    )
    .unwrap();
    let config = reference_r(&env, "r.toml", "", "");
    let client = start(&config).await;
    for args in [
        json!({"root": "r", "pattern": "*.txt"}),
        json!({"root": "r", "pattern": "*.txt", "contains": "hit"}),
    ] {
        let r = search(&client, args).await;
        assert_eq!(paths(&r).len(), 30, "{}", text(&r));
        let s = structured(&r);
        assert_eq!(s.get("truncated"), None);
        assert!(
            s["note"]
                .as_str()
                .unwrap()
                .starts_with("1 directory entries could not be read and were skipped"),
            "{s}"
        );
    }
}

/// Globs compile to linear-time automata: forty stars against a long name
/// answer well inside a tight time limit (a backtracking matcher would need
/// longer than the universe has).
#[tokio::test]
async fn star_bomb_patterns_stay_linear() {
    let env = Env::new();
    let long = "a".repeat(250);
    env.write(&format!("r/{long}"), "x\n")
        .write(&format!("r/d/{long}"), "x\n");
    let config = reference_r(&env, "r.toml", "tool_timeout_ms = 2000", "");
    let client = start(&config).await;
    let bomb = "*a".repeat(40) + "b";
    let r = search(&client, json!({"root": "r", "pattern": bomb})).await;
    assert_eq!(paths(&r), Vec::<String>::new());
    assert_eq!(structured(&r).get("truncated"), None, "{}", text(&r));
    let bomb = format!("**/{}", "*a".repeat(40));
    let r = search(&client, json!({"root": "r", "pattern": bomb})).await;
    assert_eq!(paths(&r), [long.clone(), format!("d/{long}")]);
}

/// A directory that cannot be read (here: its path is longer than the
/// system allows) is skipped and counted, never fatal.
#[tokio::test]
async fn unreadable_directories_are_skipped() {
    let env = Env::new();
    env.write("r/a/found.txt", "needle\n");
    // 30 levels of 200-byte names: 6000 bytes, over PATH_MAX.
    env.deep_chain("r", 30, "found.txt", b"needle\n");
    let config = reference_r(&env, "r.toml", "", "");
    let client = start(&config).await;
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*.txt", "contains": "needle"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(paths(&r), ["a/found.txt"]);
    assert_eq!(s.get("truncated"), None);
    let note = s["note"].as_str().unwrap();
    assert!(
        note.contains("directories could not be read and were skipped"),
        "{note}"
    );
    assert_no_host_path(&env, &[&r]);
}

/// Denied directories are pruned before descent: the walk reads exactly the
/// directories that are not denied, however large the denied ones are.
#[test]
fn denied_directories_are_never_walked() {
    let env = Env::new();
    env.write("r/src/app.py", "TOKEN\n")
        .write("r/src/lib/util.py", "x\n")
        .write("r/docs/index.md", "x\n");
    for i in 0..40 {
        env.write(
            &format!("r/.venv/lib/site-packages/p{i}/sub/m.py"),
            "TOKEN\n",
        )
        .write(&format!("r/node_modules/n{i}/lib/index.py"), "TOKEN\n")
        .write(&format!("r/src/__pycache__/c{i}/x.py"), "TOKEN\n");
    }
    let root = root(&env, "r", Role::Reference, Role::Reference.ceiling());
    let mut rt = Runtime::new(Budget {
        memory_bytes: 64 << 20,
        timeout: Duration::from_secs(30),
        output_bytes: 16 << 20,
    })
    .unwrap();
    let cache = Cache::at(cache_dir());
    let (name, wasm) = runtime::BUILTINS
        .iter()
        .find(|(name, _)| *name == "search_files")
        .unwrap();
    let index = rt
        .load(
            &cache.component(rt.engine(), name, wasm).unwrap(),
            "built-in".into(),
        )
        .unwrap();
    for contains in [None, Some("TOKEN")] {
        let activity = Arc::new(Activity::default());
        let mut args = json!({"root": "r", "pattern": "*.py"});
        if let Some(c) = contains {
            args["contains"] = json!(c);
        }
        let out = rt.call(
            index,
            CallRequest {
                tool: "search_files".into(),
                mounts: vec![CallMount::unchecked(Arc::clone(&root), Permission::Read)],
                limits: GuestLimits {
                    max_entries: 1000,
                    max_results: 1000,
                    max_search_bytes: 1 << 20,
                },
                arguments: args.to_string(),
                staging: None,
                cancel: Default::default(),
                activity: Arc::clone(&activity),
                quota: None,
            },
        );
        let output = out.result.unwrap_or_else(|e| panic!("{e:?}"));
        let found: Value = serde_json::from_str(output.structured.as_deref().unwrap()).unwrap();
        let expected = match contains {
            None => json!(["src/app.py", "src/lib/util.py"]),
            Some(_) => json!(["src/app.py"]),
        };
        let got: Vec<&Value> = found["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["path"])
            .collect();
        assert_eq!(json!(got), expected);
        // The root, src, src/lib, docs: four directories, not 324.
        assert_eq!(activity.dirs_read(), 4, "{contains:?}");
        // Those four, plus the files read for `contains`.
        let files = if contains.is_some() { 2 } else { 0 };
        assert_eq!(activity.opened(), 4 + files, "{contains:?}");
    }
}

/// A long search reports progress to a client that gave a progress token,
/// and a client's cancellation stops the running guest: the audit log says
/// it was stopped, and the server goes on serving. Near its time limit a
/// search stops by itself and says so.
#[tokio::test]
async fn long_searches_report_progress_and_stop_when_cancelled() {
    let env = Env::new();
    // 40,000 files of 2 KiB in 200 directories: seconds of `contains` work.
    let body = "nothing to see here\n".repeat(100);
    for d in 0..200 {
        for f in 0..200 {
            env.write(&format!("r/d{d:03}/f{f:03}.txt"), &body);
        }
    }
    let audit = env.path("audit.jsonl");
    let config = reference_r(
        &env,
        "r.toml",
        &format!(
            "audit_log = \"{}\"\ntool_timeout_ms = 600000\nmax_search_bytes = 1000000000",
            audit.display()
        ),
        "",
    );
    let (client, mut progress) = start_collecting_progress(&config).await;
    let handle = call_with_progress(
        &client,
        "search_files",
        json!({"root": "r", "pattern": "*.txt", "contains": "needle"}),
    )
    .await;
    let token = handle.progress_token.clone();
    let first = tokio::time::timeout(Duration::from_secs(60), progress.recv())
        .await
        .expect("a progress notification while searching")
        .unwrap();
    assert_eq!(first.progress_token, token);
    assert!(first.progress > 0.0);
    assert!(
        first
            .message
            .as_deref()
            .unwrap()
            .contains("files and directories opened"),
        "{first:?}"
    );
    handle.cancel(Some("enough".into())).await.unwrap();

    // The server still answers, and the audit says the search was stopped.
    let r = call_with(&client, "list_roots", json!({})).await;
    assert!(!is_error(&r));
    let line = loop {
        let log = std::fs::read_to_string(&audit).unwrap_or_default();
        if let Some(line) = log
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["tool"] == "search_files")
        {
            break line;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(line["stopped"], json!("cancelled"), "{line}");
    // Fewer files were opened than exist: it did not run to the end.
    let last = std::iter::from_fn(|| progress.try_recv().ok())
        .last()
        .unwrap_or_else(|| first.clone());
    let opened: u64 = last
        .message
        .as_deref()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(opened < 40_000, "{last:?}");
    assert!(last.progress >= first.progress, "{last:?}");

    // Near the time limit the search stops by itself and answers with what
    // it has, marked truncated (300 ms: it stops after 150 ms).
    let quick = reference_r(
        &env,
        "quick.toml",
        "tool_timeout_ms = 300\nmax_search_bytes = 1000000000",
        "",
    );
    let client = start(&quick).await;
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*.txt", "contains": "needle"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true), "{s}");
    assert!(
        s["note"]
            .as_str()
            .unwrap()
            .starts_with("stopped near the time limit (300 ms)"),
        "{s}"
    );
    let examined = s["examined_files"].as_u64().unwrap();
    assert!(examined > 0 && examined < 40_000, "{s}");
}

async fn call_with<H: ClientHandler>(
    client: &rmcp::service::RunningService<RoleClient, H>,
    name: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(name.to_string()).with_arguments(args),
    ));
    match client.peer().send_request(request).await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("unexpected answer {other:?}"),
    }
}

/// `context: N` gives the lines around each match, numbered, as `rg -C`
/// does: ranges that overlap or touch read as one, no line shown twice,
/// `--` between those that do not; the file's ends cut them.
#[tokio::test]
async fn context_shows_the_lines_around_each_match_merged() {
    let env = Env::new();
    let content: String = (1..=20)
        .map(|i| {
            let hit = if [5, 7, 15, 20].contains(&i) {
                " HIT"
            } else {
                ""
            };
            format!("  n{i}{hit}\n")
        })
        .collect();
    env.write("r/a.py", &content)
        .write("r/b.py", "HIT first\nsecond\n");
    let config = reference_r(&env, "r.toml", "", "");
    let client = start(&config).await;
    let r = search(
        &client,
        json!({"root": "r", "pattern": "*.py", "contains": "HIT", "context": 2}),
    )
    .await;
    let n = |range: std::ops::RangeInclusive<u32>| -> Vec<String> {
        range.map(|i| format!("  n{i}")).collect()
    };
    let matches = structured(&r)["matches"].clone();
    let got: Vec<(String, u64, String, Vec<String>, Vec<String>)> = matches
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let lines = |k: &str| -> Vec<String> {
                m[k].as_array()
                    .map(|a| a.iter().map(|l| l.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default()
            };
            (
                m["path"].as_str().unwrap().into(),
                m["line"].as_u64().unwrap(),
                m["preview"].as_str().unwrap().into(),
                lines("before"),
                lines("after"),
            )
        })
        .collect();
    let none = Vec::<String>::new;
    assert_eq!(
        got,
        [
            ("a.py".into(), 5, "  n5 HIT".into(), n(3..=4), n(6..=6)),
            ("a.py".into(), 7, "  n7 HIT".into(), none(), n(8..=9)),
            (
                "a.py".into(),
                15,
                "  n15 HIT".into(),
                n(13..=14),
                n(16..=17)
            ),
            ("a.py".into(), 20, "  n20 HIT".into(), n(18..=19), none()),
            (
                "b.py".into(),
                1,
                "HIT first".into(),
                none(),
                vec!["second".to_string()]
            ),
        ]
    );
    let expected = "a.py-3-   n3\na.py-4-   n4\na.py:5:   n5 HIT\na.py-6-   n6\n\
        a.py:7:   n7 HIT\na.py-8-   n8\na.py-9-   n9\n--\na.py-13-   n13\na.py-14-   n14\n\
        a.py:15:   n15 HIT\na.py-16-   n16\na.py-17-   n17\na.py-18-   n18\na.py-19-   n19\n\
        a.py:20:   n20 HIT\n--\nb.py:1: HIT first\nb.py-2- second\n";
    assert_eq!(text(&r), expected);

    // Without context, as before: trimmed previews, no context fields.
    let r = search(
        &client,
        json!({"root": "r", "pattern": "a.py", "contains": "n5 "}),
    )
    .await;
    assert_eq!(
        structured(&r)["matches"],
        json!([{"path": "a.py", "line": 5, "preview": "n5 HIT"}])
    );

    for (args, says) in [
        (
            json!({"root": "r", "pattern": "*.py", "contains": "HIT", "context": 11}),
            "at most 10",
        ),
        (
            json!({"root": "r", "pattern": "*.py", "context": 2}),
            "'context' applies to 'contains'",
        ),
    ] {
        let r = call(&client, "search_files", args.clone()).await;
        assert!(is_error(&r), "{args}");
        assert!(text(&r).contains(says), "{args}: {}", text(&r));
    }
}
