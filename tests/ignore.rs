//! Ignore files end to end (the real binary over stdio): `search_files` and
//! `list_directory` apply a root's `.gitignore` and `.ignore` files by
//! default, say what they left out, include it on request, and never make
//! an ignored file unreachable or a denied one visible.
//!
//! The oracle for `.gitignore` semantics is git itself: on the part of the
//! generated repository without `.ignore` files, what a search skips must
//! be exactly what `git check-ignore --no-index` reports, under a clean
//! configuration (no system or global config, no `info/exclude`). Without
//! `git` on the machine that comparison is skipped (said on stderr; failed
//! under `CI=true`); the `.ignore` cases are checked against fixed answers.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{Value, json};

/// Files in the large ignored build directory.
const BUILD_FILES: usize = 3_000;
const TOKEN: &str = "LOOMFS_IGNORE_TOKEN";

/// A repository as a user has it after a build. Comments say what git
/// decides for each case; the test does not trust them, it asks git.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write(
        "repo/.gitignore",
        "# build output\n\
         /target/\n\
         *.log\n\
         !keep.log\n\
         build/\n\
         /docs/*.html\n\
         scratch\n\
         **/gen/*.rs\n\
         vendor/\n\
         !vendor/keep.rs\n\
         /data/*\n\
         !/data/public/\n\
         \\#notes\n\
         *.{o,a}\n\
         trailing.txt   \n\
         \u{feff}not-a-bom.txt\n",
    )
    // Anchored, directory-only: the root's target/ is ignored, a nested
    // target/ is not.
    .write("repo/target/.gitignore", "*\n")
    .write("repo/target/debug/app.rs", format!("// {TOKEN}\n"))
    .write("repo/src/target/x.rs", format!("// {TOKEN}\n"))
    .write("repo/src/main.rs", format!("fn main() {{}} // {TOKEN}\n"))
    .write("repo/src/lib.rs", "pub fn lib() {}\n")
    // `*.log` with a negation.
    .write("repo/src/app.log", format!("{TOKEN}\n"))
    .write("repo/src/keep.log", format!("{TOKEN}\n"))
    // Directory-only, unanchored: any directory named build, not a file.
    .write("repo/src/build/out.rs", format!("// {TOKEN}\n"))
    .write("repo/notes/build", "a file named build\n")
    .write("repo/notes/#notes", "escaped hash\n")
    // Braces are themselves in git, not alternatives.
    .write("repo/notes/x.{o,a}", "literal braces\n")
    .write("repo/notes/x.o", "not ignored\n")
    .write("repo/notes/trailing.txt", "trailing spaces trimmed\n")
    // Anchored with a slash: only the root's docs/*.html, one level.
    .write("repo/docs/index.html", "<p>\n")
    .write("repo/docs/api/page.html", "<p>\n")
    .write("repo/src/docs/index.html", "<p>\n")
    // A name matching a file and a directory.
    .write("repo/scratch", "a file named scratch\n")
    .write("repo/src/scratch/s.rs", "//\n")
    .write("repo/src/gen/a.rs", "//\n")
    .write("repo/src/gen/a.txt", "//\n")
    .write("repo/src/sub/gen/b.rs", "//\n")
    // A file inside an excluded directory cannot be re-included.
    .write("repo/vendor/keep.rs", "//\n")
    .write("repo/vendor/other.rs", "//\n")
    .write("repo/data/file.csv", "1\n")
    .write("repo/data/private/p.csv", "1\n")
    .write("repo/data/public/q.csv", "1\n")
    // A nested .gitignore: relative anchoring, and a deeper file taking
    // precedence over the root's.
    .write(
        "repo/src/nested/.gitignore",
        "*.txt\n!important.txt\n/local/\n!app.log\n",
    )
    .write("repo/src/nested/a.txt", "a\n")
    .write("repo/src/nested/important.txt", "i\n")
    .write("repo/src/nested/app.log", "re-included\n")
    .write("repo/src/nested/local/x.rs", "//\n")
    .write("repo/src/nested/deeper/local/y.rs", "//\n")
    .write("repo/src/nested/deeper/.gitignore", "!*.txt\n")
    .write("repo/src/nested/deeper/b.txt", "b\n")
    // Denied: invisible with or without the switch.
    .write("repo/.env", format!("{TOKEN}=CANARY-DOTENV\n"))
    .write("repo/target/.env", format!("{TOKEN}=CANARY-TARGET\n"))
    // The .ignore part: `.ignore` takes precedence over `.gitignore`, at
    // any level.
    .write("repo/tools/.ignore", "*.gen\n!wanted.log\n")
    .write("repo/tools/.gitignore", "*.tmp\n!x.gen\n")
    .write("repo/tools/a.gen", "a\n")
    .write("repo/tools/x.gen", "x\n")
    .write("repo/tools/wanted.log", format!("{TOKEN}\n"))
    .write("repo/tools/other.log", "o\n")
    .write("repo/tools/b.tmp", "b\n")
    .write("repo/tools/main.rs", "//\n");
    // The large build directory: walking it would dominate any search.
    for n in 0..BUILD_FILES {
        env.write(
            &format!("repo/target/debug/deps/d{:02}/f{n:05}.rs", n % 50),
            format!("// {TOKEN} {n}\n"),
        );
    }
    let config = env.config(
        r#"
        max_search_results = 10000
        max_list_entries = 10000

        [[roots]]
        name = "repo"
        path = "repo"
        role = "reference"
        "#,
    );
    (env, config)
}

/// Every entry under `dir`, root-relative, directories included; not
/// `.git` (denied) and not what `skip` names.
fn all_entries(root: &Path, dir: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        if rel == ".git" || skip(&rel) {
            continue;
        }
        let is_dir = entry.file_type().unwrap().is_dir();
        out.push(rel);
        if is_dir {
            all_entries(root, &path, skip, out);
        }
    }
}

/// What `git check-ignore --no-index` says of `paths` in the repository at
/// `root`, under a clean configuration; `None` when git is not installed.
fn git_ignored(root: &Path, paths: &[String]) -> Option<BTreeSet<String>> {
    let home = tempfile::TempDir::new().unwrap();
    let git = |args: &[&str]| {
        let mut cmd = Command::new("git");
        cmd.current_dir(root)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        cmd
    };
    match git(&["init", "-q"]).status() {
        Ok(status) => assert!(status.success()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "git is not installed (required under CI)"
            );
            eprintln!("git is not installed: the comparison with git check-ignore is skipped");
            return None;
        }
        Err(e) => panic!("git: {e}"),
    }
    // No info/exclude: only the repository's own ignore files.
    let _ = std::fs::remove_file(root.join(".git/info/exclude"));
    let mut child = git(&["check-ignore", "--no-index", "--stdin", "-z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_bytes());
        input.push(0);
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    // 0: some ignored, 1: none.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    Some(
        out.stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8(p.to_vec()).unwrap())
            .collect(),
    )
}

async fn search(client: &Client, args: Value) -> rmcp::model::CallToolResult {
    let r = call(client, "search_files", args.clone()).await;
    assert!(!is_error(&r), "{args}: {}", text(&r));
    assert_eq!(structured(&r).get("truncated"), None, "{args}");
    r
}

/// Matched paths, without the `/` that ends a directory's.
fn found(r: &rmcp::model::CallToolResult) -> BTreeSet<String> {
    structured(r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["path"]
                .as_str()
                .unwrap()
                .trim_end_matches('/')
                .to_string()
        })
        .collect()
}

fn ignored_count(r: &rmcp::model::CallToolResult) -> u64 {
    // Left out when 0.
    structured(r)["ignored"].as_u64().unwrap_or(0)
}

/// Top-most ignored entries: ignored, with no ignored directory above.
fn topmost(ignored: &BTreeSet<String>) -> BTreeSet<String> {
    ignored
        .iter()
        .filter(|p| {
            let mut parent = Path::new(p.as_str()).parent();
            while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
                if ignored.contains(dir.to_str().unwrap()) {
                    return false;
                }
                parent = dir.parent();
            }
            true
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn search_skips_exactly_what_git_ignores() {
    let (env, config) = fixture();
    let root = env.path("repo");
    let mut entries = Vec::new();
    all_entries(
        &root,
        &root,
        &|rel| rel == "tools" || rel == ".env" || rel == "target/.env",
        &mut entries,
    );
    let entries: BTreeSet<String> = entries.into_iter().collect();
    let client = start(&config).await;

    // Without the switch: everything, the .ignore part aside.
    let include = search(
        &client,
        json!({"root": "repo", "pattern": "*", "ignored": "include"}),
    )
    .await;
    let everything: BTreeSet<String> = found(&include)
        .into_iter()
        .filter(|p| p != "tools" && !p.starts_with("tools/"))
        .collect();
    assert_eq!(everything, entries);
    assert_eq!(ignored_count(&include), 0);
    assert!(include.structured_content.as_ref().unwrap()["note"].is_null());

    let skip = search(&client, json!({"root": "repo", "pattern": "*"})).await;
    let visible: BTreeSet<String> = found(&skip)
        .into_iter()
        .filter(|p| p != "tools" && !p.starts_with("tools/"))
        .collect();
    let skipped: BTreeSet<String> = entries.difference(&visible).cloned().collect();
    assert!(visible.is_subset(&entries));

    // The cases this fixture is made of, whatever git says.
    for path in [
        "target",
        "target/debug/app.rs",
        "src/app.log",
        "src/build",
        "docs/index.html",
        "scratch",
        "src/scratch",
        "src/gen/a.rs",
        "src/sub/gen/b.rs",
        "vendor/keep.rs",
        "data/file.csv",
        "data/private",
        "src/nested/a.txt",
        "src/nested/local",
        "notes/#notes",
        "notes/trailing.txt",
    ] {
        assert!(skipped.contains(path), "{path} should be skipped");
    }
    for path in [
        "src/main.rs",
        "src/target/x.rs",
        "src/keep.log",
        "notes/build",
        "docs/api/page.html",
        "src/docs/index.html",
        "src/gen/a.txt",
        "data/public/q.csv",
        "src/nested/important.txt",
        "src/nested/app.log",
        "src/nested/deeper/local/y.rs",
        "src/nested/deeper/b.txt",
        ".gitignore",
    ] {
        assert!(visible.contains(path), "{path} should be searched");
    }

    if let Some(by_git) = git_ignored(&root, &entries.iter().cloned().collect::<Vec<_>>()) {
        let only_git: Vec<_> = by_git.difference(&skipped).collect();
        let only_us: Vec<_> = skipped.difference(&by_git).collect();
        assert!(
            only_git.is_empty() && only_us.is_empty(),
            "ignored by git only: {only_git:?}; skipped by search only: {only_us:?}"
        );
        // The count: every top-most ignored entry met, each once (a
        // directory's contents are not counted); `*` matches every file.
        let met = topmost(&by_git);
        let tools_ignored = 4; // a.gen, x.gen, other.log, b.tmp (below)
        assert_eq!(ignored_count(&skip), met.len() as u64 + tools_ignored);
        // `*.rs`: ignored directories, and ignored files named *.rs.
        let rs = search(&client, json!({"root": "repo", "pattern": "*.rs"})).await;
        let expected = met
            .iter()
            .filter(|p| root.join(p).is_dir() || p.ends_with(".rs"))
            .count();
        assert_eq!(ignored_count(&rs), expected as u64, "{}", text(&rs));
    }

    // The .ignore part on its own: `.ignore` decides before `.gitignore`,
    // in either direction.
    let tools = search(
        &client,
        json!({"root": "repo", "path": "tools", "pattern": "*"}),
    )
    .await;
    assert_eq!(
        found(&tools),
        [
            "tools/.gitignore",
            "tools/.ignore",
            "tools/main.rs",
            "tools/wanted.log"
        ]
        .map(String::from)
        .into(),
        "{}",
        text(&tools)
    );
    assert_eq!(ignored_count(&tools), 4);
    assert_clean(&env, &[include, skip, tools]);
}

#[tokio::test]
async fn contains_skips_ignored_and_says_so() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let args = json!({"root": "repo", "pattern": "*", "contains": TOKEN});
    let skip = search(&client, args.clone()).await;
    assert_eq!(
        found(&skip),
        [
            "src/keep.log",
            "src/main.rs",
            "src/target/x.rs",
            "tools/wanted.log"
        ]
        .map(String::from)
        .into(),
        "{}",
        text(&skip)
    );
    // target/ and src/build/ and src/app.log (a file matching `*`) are
    // among what was left out; the 3,000 build files are not counted.
    let n = ignored_count(&skip);
    assert!((3..100).contains(&n), "{n}");
    let t = text(&skip);
    assert!(
        t.contains(&format!("{n} ignored entries were left out")) && t.contains("\"include\""),
        "{t}"
    );
    // Never walked: only what lies outside target/ was read.
    assert!(structured(&skip)["scanned_bytes"].as_u64().unwrap() < 10_000);

    let mut include = args.clone();
    include["ignored"] = json!("include");
    let include = search(&client, include).await;
    let all = found(&include);
    assert!(all.contains("target/debug/app.rs"));
    assert!(all.contains("src/app.log"));
    assert!(all.contains("src/build/out.rs"));
    assert_eq!(all.len(), 4 + 3 + BUILD_FILES, "{}", text(&include));
    assert_eq!(ignored_count(&include), 0);
    // Denied stays invisible either way.
    for r in [&skip, &include] {
        let t = text(r);
        assert!(!t.contains(".env") && !t.contains("CANARY"), "{t}");
    }
    assert_clean(&env, &[skip, include]);
}

#[tokio::test]
async fn a_search_below_the_root_honours_the_ignore_files_above() {
    let (env, config) = fixture();
    let client = start(&config).await;
    // The root's `*.log`, `build/`, `scratch`, `**/gen/*.rs` apply in src/.
    let src = search(
        &client,
        json!({"root": "repo", "path": "src", "pattern": "*"}),
    )
    .await;
    let paths = found(&src);
    for ignored in [
        "src/app.log",
        "src/build",
        "src/scratch",
        "src/gen/a.rs",
        "src/nested/a.txt",
    ] {
        assert!(!paths.contains(ignored), "{ignored}: {}", text(&src));
    }
    assert!(paths.contains("src/keep.log") && paths.contains("src/gen/a.txt"));
    // Two levels down: the root's `*.log` and src/nested's `*.txt`, each
    // with its own negation, and `/local/` anchored to src/nested.
    let deeper = search(
        &client,
        json!({"root": "repo", "path": "src/nested/deeper", "pattern": "*"}),
    )
    .await;
    assert_eq!(
        found(&deeper),
        [
            "src/nested/deeper/.gitignore",
            "src/nested/deeper/b.txt",
            "src/nested/deeper/local",
            "src/nested/deeper/local/y.rs"
        ]
        .map(String::from)
        .into()
    );
    let nested = search(
        &client,
        json!({"root": "repo", "path": "src/nested", "pattern": "*.log"}),
    )
    .await;
    assert_eq!(found(&nested), ["src/nested/app.log".to_string()].into());
    // `.ignore` of tools/ applies to a search started below it.
    env.write("repo/tools/sub/c.gen", "c\n")
        .write("repo/tools/sub/c.rs", "//\n");
    let sub = search(
        &client,
        json!({"root": "repo", "path": "tools/sub", "pattern": "*"}),
    )
    .await;
    assert_eq!(found(&sub), ["tools/sub/c.rs".to_string()].into());
    assert_eq!(ignored_count(&sub), 1);
    // A directory named directly is searched even though it is ignored.
    let named = search(
        &client,
        json!({"root": "repo", "path": "target/debug", "pattern": "app.rs", "contains": TOKEN}),
    )
    .await;
    assert_eq!(found(&named), ["target/debug/app.rs".to_string()].into());
    assert_eq!(ignored_count(&named), 0);
    assert!(text(&named).contains("itself excluded"), "{}", text(&named));
    assert_clean(&env, &[src, deeper, nested, sub, named]);
}

#[tokio::test]
async fn listings_mark_ignored_entries_and_do_not_descend() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let list = |args: Value| {
        let client = &client;
        async move {
            let r = call(client, "list_directory", args.clone()).await;
            assert!(!is_error(&r), "{args}: {}", text(&r));
            r
        }
    };
    // Root-relative paths, marked ignored or not.
    let entries = |r: &rmcp::model::CallToolResult| -> Vec<(String, bool)> {
        let dir = structured(r)["path"].as_str().unwrap();
        listing(r)
            .into_iter()
            .map(|e| match dir {
                "." => (e.path, e.ignored),
                dir => (format!("{dir}/{}", e.path), e.ignored),
            })
            .collect()
    };

    let deep = list(json!({"root": "repo", "depth": 10})).await;
    let listed = entries(&deep);
    let marked: BTreeSet<String> = listed
        .iter()
        .filter(|(_, i)| *i)
        .map(|(p, _)| p.clone())
        .collect();
    // Shown once, marked, not descended.
    for dir in [
        "target",
        "src/build",
        "src/scratch",
        "vendor",
        "data/private",
        "src/nested/local",
    ] {
        assert!(marked.contains(dir), "{dir}: {}", text(&deep));
        let below = format!("{dir}/");
        assert!(
            !listed.iter().any(|(p, _)| p.starts_with(&below)),
            "{dir} descended"
        );
    }
    assert!(listed.iter().any(|(p, i)| p == "src/keep.log" && !i));
    assert_eq!(
        structured(&deep)["ignored"].as_array().unwrap().len(),
        marked.len()
    );
    assert!(listed.len() < 100, "{}", listed.len());
    let t = text(&deep);
    // The mark is a column of its own, the first line says so.
    assert!(
        t.lines()
            .next()
            .unwrap()
            .ends_with("then ! if ignored), path"),
        "{t}"
    );
    assert!(t.lines().any(|l| l == "d! target/"), "{t}");
    assert!(t.lines().any(|l| l == "- src/main.rs"), "{t}");
    assert!(
        t.contains("ignored directories") && t.contains("\"include\""),
        "{t}"
    );
    assert!(!t.contains(".env"), "{t}");

    // Every mark is git's answer, off the .ignore part.
    let root = env.path("repo");
    let paths: Vec<String> = listed
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| !p.starts_with("tools"))
        .collect();
    if let Some(by_git) = git_ignored(&root, &paths) {
        let ours: BTreeSet<String> = marked
            .iter()
            .filter(|p| !p.starts_with("tools"))
            .cloned()
            .collect();
        assert_eq!(ours, by_git);
    }
    let tools: BTreeSet<String> = marked
        .iter()
        .filter(|p| p.starts_with("tools/"))
        .cloned()
        .collect();
    assert_eq!(
        tools,
        [
            "tools/a.gen",
            "tools/b.tmp",
            "tools/other.log",
            "tools/x.gen"
        ]
        .map(String::from)
        .into()
    );

    // The switch lists inside, still marked.
    let named = list(json!({"root": "repo", "path": "target/debug", "depth": 3})).await;
    let below = entries(&named);
    assert!(below.contains(&("target/debug/deps/d07".to_string(), false)));
    assert!(
        below.iter().all(|(_, i)| !i),
        "named directly: {}",
        text(&named)
    );
    assert!(text(&named).contains("itself excluded"), "{}", text(&named));
    let include = list(json!({"root": "repo", "depth": 3, "ignored": "include"})).await;
    let inside = entries(&include);
    assert!(inside.contains(&("target/debug/app.rs".to_string(), true)));
    assert!(inside.contains(&("src/build/out.rs".to_string(), true)));
    assert!(inside.contains(&("src/main.rs".to_string(), false)));
    assert!(!text(&include).contains("not listed inside"));
    assert!(!text(&include).contains(".env"));

    // Depth 1: marked, nothing to say about descending.
    let top = list(json!({"root": "repo"})).await;
    assert!(entries(&top).contains(&("target".to_string(), true)));
    assert!(structured(&top)["note"].is_null(), "{}", text(&top));
    assert_clean(&env, &[deep, named, include, top]);
}

#[tokio::test]
async fn ignored_files_stay_reachable_by_name() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let read = call(
        &client,
        "read_file",
        json!({"root": "repo", "path": "target/debug/app.rs"}),
    )
    .await;
    assert!(
        !is_error(&read) && text(&read).contains(TOKEN),
        "{}",
        text(&read)
    );
    let info = call(
        &client,
        "get_file_info",
        json!({"root": "repo", "path": "src/app.log"}),
    )
    .await;
    assert!(!is_error(&info), "{}", text(&info));
    // Denied stays unreachable, ignored or not.
    for path in [".env", "target/.env"] {
        let r = call(&client, "read_file", json!({"root": "repo", "path": path})).await;
        assert!(is_error(&r), "{path}");
        assert!(!text(&r).contains("CANARY"));
    }
    assert_clean(&env, &[read, info]);
}

#[tokio::test]
async fn ignore_files_are_read_through_the_policy() {
    let env = Env::new();
    env.write("r/.gitignore", "*.out\n")
        // Denied for this root: its rules do not count.
        .write("r/.ignore", "*.rs\n")
        .write("r/a.out", "a\n")
        .write("r/a.rs", "a\n")
        .write("r/sub/b.rs", "b\n")
        .write("r/sub/b.out", "b\n")
        // A symlinked ignore file is not followed (git does not either).
        .write("r/other/rules", "*\n")
        .write("r/other/c.rs", "c\n")
        .symlink("rules", "r/other/.gitignore");
    let config = env.config(
        r#"
        audit_log = "audit.log"
        [[roots]]
        name = "r"
        path = "r"
        role = "reference"
        deny = [".ignore"]
        "#,
    );
    let client = start(&config).await;
    let r = search(&client, json!({"root": "r", "pattern": "*"})).await;
    // The denied .ignore does not count: a.rs and sub/b.rs are searched;
    // the .gitignore does: a.out and sub/b.out are not. (Symlinks, the
    // linked .gitignore too, are never search results.)
    assert_eq!(
        found(&r),
        [
            ".gitignore",
            "a.rs",
            "other",
            "other/c.rs",
            "other/rules",
            "sub",
            "sub/b.rs",
        ]
        .map(String::from)
        .into(),
        "{}",
        text(&r)
    );
    assert_eq!(ignored_count(&r), 2);
    assert!(!text(&r).contains("could not be read"), "{}", text(&r));

    // Started below the root, the rules above the start still count, and
    // the denied .ignore up there is never asked for: the audit log has no
    // refusal of a file nobody named.
    let below = search(&client, json!({"root": "r", "pattern": "*", "path": "sub"})).await;
    assert_eq!(
        found(&below),
        ["sub/b.rs"].map(String::from).into(),
        "{}",
        text(&below)
    );
    let refused: Vec<_> = audit(&env)
        .into_iter()
        .filter(|line| line["decision"] == "deny")
        .collect();
    assert!(refused.is_empty(), "{refused:?}");

    // An unreadable one is said, never fatal.
    env.write("r/locked/.gitignore", "*\n")
        .write("r/locked/d.rs", "d\n");
    let locked = env.path("r/locked/.gitignore");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anything: only a real user sees the refusal.
    if std::fs::read(&locked).is_err() {
        let r = search(&client, json!({"root": "r", "pattern": "*.rs"})).await;
        assert!(found(&r).contains("locked/d.rs"));
        assert!(text(&r).contains("1 ignore files"), "{}", text(&r));
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_clean(&env, &[r]);
}

/// An ignore file the walk cannot use, one over the 1 MiB cap and one whose
/// thousands of wildcard lines are more than the matcher may build, is not
/// applied, and the result says how many were left out; a usable one beside
/// them still applies.
#[tokio::test]
async fn ignore_files_that_cannot_be_used_are_said() {
    let env = Env::new();
    let over_cap = format!("*.rs\n{}", "# padding line\n".repeat(70_000));
    assert!(over_cap.len() > 1 << 20);
    let complex = format!("*.rs\n{}", format!("{}\n", "?".repeat(200)).repeat(4_000));
    assert!(complex.len() < 1 << 20);
    env.write("r/big/.gitignore", &over_cap)
        .write("r/big/x.rs", "x\n")
        .write("r/complex/.gitignore", &complex)
        .write("r/complex/y.rs", "y\n")
        .write("r/fine/.gitignore", "*.rs\n")
        .write("r/fine/z.rs", "z\n")
        // Just under the walk's wildcard budget: built within the guest's
        // memory (the call is not stopped).
        .write(
            "r/heavy/.gitignore",
            format!("*.rs\n{}", format!("{}\n", "?".repeat(200)).repeat(240)),
        )
        .write("r/heavy/w.rs", "w\n");
    let config = env.config(
        r#"
        audit_log = "audit.log"
        [[roots]]
        name = "r"
        path = "r"
        role = "reference"
        "#,
    );
    let client = start(&config).await;
    let r = search(&client, json!({"root": "r", "pattern": "*.rs"})).await;
    assert_eq!(
        found(&r),
        ["big/x.rs", "complex/y.rs"].map(String::from).into(),
        "{}",
        text(&r)
    );
    assert_eq!(ignored_count(&r), 2, "fine/z.rs and heavy/w.rs");
    assert!(
        text(&r).contains("2 ignore files (.gitignore, .ignore) could not be used"),
        "{}",
        text(&r)
    );
    assert_clean(&env, &[r]);
}
