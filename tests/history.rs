//! End to end: the history tool `git` (log, show, diff, blame, status)
//! through the real binary, on repositories the
//! tests make with the `git` CLI (clean environment), each answer compared
//! with what `git` says. Denied paths (`.env`, `id_rsa`) and their contents
//! never appear; a subdirectory root gets history only with `git_history`;
//! a repository whose config names commands everywhere git could run one
//! leaves no marker; `.git` stays denied to the other tools.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// What every secret file holds: never to be seen in an answer.
const CANARY: &str = "CANARY-secret";

/// Makes a repository at `dir`: 240 commits over 20 files, `.env` and
/// `sub/keys/id_rsa` committed, modified and deleted, a commit that touches
/// only `.env`, packed by `git gc` two thirds of the way and loose after.
fn make_repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    let commit = |n: u32, message: &str| {
        let date = format!("{} +0000", 1_700_000_000 + n * 60);
        let out = git_command(dir, &["add", "-A"]).output().unwrap();
        assert!(out.status.success());
        let out = git_command(dir, &["commit", "-q", "--allow-empty", "-m", message])
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let write = |rel: &str, text: String| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    for n in 0..240u32 {
        let file = format!("src/f{:02}.txt", n % 18);
        let old = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
        let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
        if lines.len() > 6 && n % 3 == 0 {
            lines.remove((n as usize * 7) % lines.len());
        }
        lines.insert((n as usize * 5) % (lines.len() + 1), format!("line {n}"));
        write(&file, lines.join("\n") + "\n");
        if n % 40 == 7 {
            write("README.md", format!("readme {n}\n"));
        }
        match n {
            3 => {
                write(".env", format!("TOKEN={CANARY}-1\n"));
                write("sub/keys/id_rsa", format!("{CANARY}-key-1\n"));
                write("sub/notes.txt", "notes\n".into());
            }
            50 => write(".env", format!("TOKEN={CANARY}-2\n")),
            90 => write("sub/keys/id_rsa", format!("{CANARY}-key-2\n")),
            160 => {
                let _ = std::fs::remove_file(dir.join("sub/keys/id_rsa"));
            }
            _ => {}
        }
        commit(n, &format!("change {n}"));
        if n == 120 {
            // Only a secret changes: its commit says its changes are hidden.
            write(".env", format!("TOKEN={CANARY}-3\n"));
            commit(n, "rotate the token");
        }
        if n == 160 {
            git(dir, &["gc", "-q"]);
        }
    }
    std::fs::remove_file(dir.join(".env")).unwrap();
    commit(241, "drop the env file");
}

fn config(root_path: &str, extra: &str) -> String {
    format!(
        "audit_log = \"audit.log\"\n[[roots]]\nname = \"r\"\npath = \"{root_path}\"\nrole = \"reference\"\n{extra}"
    )
}

/// Whether git's path is one the deny list hides (the built-in names the
/// tests use).
fn denied(path: &str) -> bool {
    path.split('/')
        .any(|c| c == ".env" || c.starts_with("id_rsa"))
}

/// `git log --numstat`'s files per commit, denied ones left out.
fn git_numstat(dir: &Path, n: usize) -> Vec<(String, Vec<(String, String)>)> {
    let out = git(
        dir,
        &[
            "log",
            &format!("-n{n}"),
            "--numstat",
            "--no-renames",
            "--format=@%H",
        ],
    );
    let mut commits: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in out.lines().filter(|l| !l.is_empty()) {
        if let Some(id) = line.strip_prefix('@') {
            commits.push((id.to_string(), vec![]));
        } else {
            let parts: Vec<&str> = line.split('\t').collect();
            if !denied(parts[2]) {
                let counts = format!("+{} -{}", parts[0], parts[1]);
                commits
                    .last_mut()
                    .unwrap()
                    .1
                    .push((parts[2].to_string(), counts));
            }
        }
    }
    commits
}

fn log_files(commit: &Value) -> Vec<(String, String)> {
    commit["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                format!("+{} -{}", f["added"], f["removed"]),
            )
        })
        .collect()
}

/// The hunks of a unified diff, file by file (from each `@@` on).
fn hunks(diff: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            if let Some((path, text)) = current.take() {
                files.insert(path, text);
            }
            let path = rest.split(" b/").next().unwrap().to_string();
            current = Some((path, String::new()));
        } else if let Some((_, text)) = current.as_mut()
            && (line.starts_with("@@") || !text.is_empty())
        {
            text.push_str(line);
            text.push('\n');
        }
    }
    if let Some((path, text)) = current {
        files.insert(path, text);
    }
    files
}

fn names(files: &Value) -> BTreeSet<String> {
    files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f.as_str()
                .map_or_else(|| f["path"].as_str().unwrap().to_string(), str::to_string)
        })
        .collect()
}

fn git_names(out: &str) -> BTreeSet<String> {
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.rsplit('\t').next().unwrap().to_string())
        .filter(|p| !denied(p))
        .collect()
}

#[tokio::test]
async fn history_matches_git_and_never_shows_a_secret() {
    let env = Env::new();
    let repo = env.path("repo");
    make_repository(&repo);
    // The working tree: a tracked file changed and one staged, the secret
    // back, and an untracked file.
    std::fs::write(repo.join("src/f01.txt"), "rewritten\n").unwrap();
    std::fs::write(repo.join("src/f02.txt"), "staged\n").unwrap();
    git(&repo, &["add", "src/f02.txt"]);
    std::fs::write(repo.join(".env"), format!("TOKEN={CANARY}-4\n")).unwrap();
    std::fs::write(repo.join("new.txt"), "new\n").unwrap();
    let client = start(&env.config(&config("repo", ""))).await;
    let mut results = Vec::new();

    // git log: the same commits, the same files and line counts.
    let r = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "max_count": 60}),
    )
    .await;
    let expected = git_numstat(&repo, 60);
    let commits = structured(&r)["commits"].as_array().unwrap().clone();
    assert_eq!(commits.len(), 60);
    assert_eq!(structured(&r)["truncated"], json!(true));
    for (c, (id, files)) in commits.iter().zip(&expected) {
        assert_eq!(c["id"].as_str().unwrap(), id);
        assert_eq!(&log_files(c), files, "files of {id}");
    }
    results.push(r);

    // The secrets-only commit says its changes are hidden.
    let rotate = git(&repo, &["log", "--format=%H", "--grep=rotate the token"]);
    let rotate = rotate.trim();
    let r = call_ok(
        &client,
        "git",
        json!({"command": "show", "root": "r", "rev": rotate}),
    )
    .await;
    assert!(text(&r).contains("Its changes are hidden"), "{}", text(&r));
    assert_eq!(structured(&r)["hidden"], json!(1));
    results.push(r);
    let r = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "grep": "rotate the token"}),
    )
    .await;
    assert!(text(&r).contains("1 change hidden"), "{}", text(&r));
    results.push(r);

    // git show of commits: the same files, the same hunks.
    for rev in ["HEAD~3", "HEAD~80", "HEAD~150", "HEAD~238"] {
        let r = call_ok(
            &client,
            "git",
            json!({"command": "show", "root": "r", "rev": rev}),
        )
        .await;
        let expected = git(&repo, &["show", "--no-renames", "--format=", rev]);
        let want: BTreeMap<String, String> = hunks(&expected)
            .into_iter()
            .filter(|(p, _)| !denied(p))
            .collect();
        assert_eq!(hunks(&text(&r)), want, "git show {rev}");
        results.push(r);
    }

    // A file at a revision: its bytes, and a hidden one fails as a missing one.
    let r = call_ok(
        &client,
        "git",
        json!({"command": "show", "root": "r", "rev": "HEAD~100", "path": "src/f03.txt"}),
    )
    .await;
    assert_eq!(
        structured(&r)["content"].as_str().unwrap(),
        git(&repo, &["show", "HEAD~100:src/f03.txt"])
    );
    results.push(r);
    let missing = call(
        &client,
        "git",
        json!({"command": "show", "root": "r", "rev": "HEAD~100", "path": "nothing.txt"}),
    )
    .await;
    for secret in [".env", "sub/keys/id_rsa"] {
        let r = call(
            &client,
            "git",
            json!({"command": "show", "root": "r", "rev": "HEAD~100", "path": secret}),
        )
        .await;
        assert!(is_error(&r));
        assert_eq!(
            text(&r).replace(secret, "nothing.txt"),
            text(&missing),
            "a hidden file fails as a missing one"
        );
        results.push(r);
    }

    // git diff between revisions and to the working tree.
    let r = call_ok(
        &client,
        "git",
        json!({"command": "diff", "root": "r", "rev": "HEAD~200", "to": "HEAD~20"}),
    )
    .await;
    let expected = git(
        &repo,
        &[
            "diff",
            "--no-renames",
            "--name-status",
            "HEAD~200",
            "HEAD~20",
        ],
    );
    assert_eq!(names(&structured(&r)["files"]), git_names(&expected));
    assert!(structured(&r)["hidden"].as_u64().unwrap() >= 2);
    let full = git(&repo, &["diff", "--no-renames", "HEAD~200", "HEAD~20"]);
    let want: BTreeMap<String, String> = hunks(&full)
        .into_iter()
        .filter(|(p, _)| !denied(p))
        .collect();
    assert_eq!(hunks(&text(&r)), want);
    results.push(r);
    let r = call_ok(
        &client,
        "git",
        json!({"command": "diff", "root": "r", "rev": "HEAD"}),
    )
    .await;
    let expected = git(&repo, &["diff", "--no-renames", "--name-status", "HEAD"]);
    assert_eq!(names(&structured(&r)["files"]), git_names(&expected));
    results.push(r);

    // git blame: the same commit for every line.
    let r = call_ok(
        &client,
        "git",
        json!({"command": "blame", "root": "r", "path": "src/f05.txt", "rev": "HEAD~1"}),
    )
    .await;
    let porcelain = git(
        &repo,
        &["blame", "--porcelain", "HEAD~1", "--", "src/f05.txt"],
    );
    let mut want = BTreeMap::new();
    for line in porcelain.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        if parts.len() >= 3
            && parts[0].len() == 40
            && parts[0].bytes().all(|b| b.is_ascii_hexdigit())
        {
            want.insert(parts[2].parse::<u64>().unwrap(), parts[0].to_string());
        }
    }
    let got: BTreeMap<u64, String> = structured(&r)["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["line"].as_u64().unwrap(),
                l["commit"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, want);
    results.push(r);
    for secret in [".env", "sub/keys/id_rsa"] {
        let r = call(
            &client,
            "git",
            json!({"command": "blame", "root": "r", "path": secret, "rev": "HEAD~100"}),
        )
        .await;
        assert!(is_error(&r));
        results.push(r);
    }

    // git status: what `git status --porcelain` says, secrets left out.
    let r = call_ok(&client, "git", json!({"command": "status", "root": "r"})).await;
    let porcelain = git(
        &repo,
        &[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--no-renames",
        ],
    );
    let (mut staged, mut modified, mut untracked) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for line in porcelain.lines() {
        let (x, y, path) = (&line[0..1], &line[1..2], line[3..].to_string());
        if denied(&path) {
            continue;
        }
        if x == "?" {
            untracked.insert(path);
            continue;
        }
        if x != " " {
            staged.insert(path.clone());
        }
        if y != " " {
            modified.insert(path);
        }
    }
    let s = structured(&r);
    assert_eq!(names(&s["staged"]), staged);
    assert_eq!(names(&s["modified"]), modified);
    assert_eq!(names(&s["untracked"]), untracked);
    results.push(r);

    // Nothing secret, no host path, anywhere.
    for r in &results {
        let json = serde_json::to_string(r).unwrap();
        assert!(!json.contains(CANARY), "a secret was shown: {json}");
        assert!(
            !json.contains(".env") || json.contains("no such file"),
            "{json}"
        );
        assert!(
            !json.contains("id_rsa") || json.contains("no such file"),
            "{json}"
        );
    }
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
    // One audit line per call, like every tool's.
    let lines = audit(&env);
    let logged = lines
        .iter()
        .filter(|l| l["tool"] == json!("git") && l["root"] == json!("r"))
        .count();
    // Every call answered above wrote its line (some were not kept in
    // `results`).
    assert!(logged >= results.len(), "{logged} lines: {lines:?}");
}

#[tokio::test]
async fn a_subdirectory_root_gets_history_only_with_git_history() {
    let env = Env::new();
    let repo = env.path("repo");
    make_repository(&repo);

    // Without the setting: no history tool is offered.
    let client = start(&env.config(&config("repo/sub", ""))).await;
    let listed: Vec<String> = tools(&client)
        .await
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(listed.iter().all(|n| !n.starts_with("git_")), "{listed:?}");
    assert!(listed.contains(&"read_file".to_string()));
    client.cancel().await.unwrap();

    // With it: everything is limited to the root's paths, and `check` says so.
    let with = env.config(&config("repo/sub", "git_history = true"));
    let (ok, said) = check(&with);
    assert!(ok, "{said}");
    assert!(
        said.contains(
            "git history (git_history):\n  r  the repository above the root, limited to sub/\n"
        ),
        "{said}"
    );
    let client = start(&with).await;
    let r = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "max_count": 500}),
    )
    .await;
    let ids: Vec<String> = structured(&r)["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = git(&repo, &["log", "--format=%H", "--", "sub"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids, want);
    for c in structured(&r)["commits"].as_array().unwrap() {
        for f in c["files"].as_array().unwrap() {
            assert_eq!(
                f["path"],
                json!("notes.txt"),
                "a path outside the root: {f}"
            );
        }
    }
    assert!(!text(&r).contains("src/"), "{}", text(&r));
    // A file above the root fails as a missing one.
    let r = call(
        &client,
        "git",
        json!({"command": "show", "root": "r", "rev": "HEAD", "path": "../README.md"}),
    )
    .await;
    assert!(is_error(&r));
    let r2 = call_ok(
        &client,
        "git",
        json!({"command": "show", "root": "r", "rev": "HEAD~200"}),
    )
    .await;
    assert!(!text(&r2).contains("src/"), "{}", text(&r2));
    assert_no_host_path(&env, &[&r, &r2]);

    // `git_history = true` where no repository holds the root is refused.
    std::fs::create_dir_all(env.path("plain")).unwrap();
    let out = check_output(&env.config(&config("plain", "git_history = true")));
    assert_fails_with(&out, "git_history = true, but no git repository holds it");
}

#[tokio::test]
async fn a_hostile_repository_config_runs_nothing() {
    let env = Env::new();
    let repo = env.path("repo");
    make_repository(&repo);
    let marker = env.path("marker");
    let touch = format!("touch {}", marker.display());
    for (key, value) in [
        ("core.pager", touch.clone()),
        ("core.fsmonitor", touch.clone()),
        ("core.sshCommand", touch.clone()),
        ("core.hooksPath", env.path("hooks").display().to_string()),
        ("diff.external", touch.clone()),
        ("diff.evil.textconv", touch.clone()),
        ("filter.evil.clean", touch.clone()),
        ("filter.evil.smudge", touch.clone()),
        ("filter.evil.process", touch.clone()),
        ("credential.helper", format!("!{touch}")),
        ("alias.log", format!("!{touch}")),
        ("include.path", env.path("included").display().to_string()),
    ] {
        git(&repo, &["config", key, &value]);
    }
    std::fs::write(repo.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    for hooks in [repo.join(".git/hooks"), env.path("hooks")] {
        std::fs::create_dir_all(&hooks).unwrap();
        for hook in [
            "post-checkout",
            "pre-commit",
            "post-index-change",
            "fsmonitor-watchman",
        ] {
            let p = hooks.join(hook);
            std::fs::write(&p, format!("#!/bin/sh\n{touch}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    std::fs::write(repo.join("src/f01.txt"), "changed\n").unwrap();
    // The control: git itself runs what the config names.
    let _ = git_command(&repo, &["diff"]).output().unwrap();
    assert!(marker.exists(), "the control run of git made no marker");
    std::fs::remove_file(&marker).unwrap();

    let client = start(&env.config(&config("repo", ""))).await;
    let mut results = vec![
        call_ok(
            &client,
            "git",
            json!({"command": "log", "root": "r", "max_count": 5}),
        )
        .await,
        call_ok(
            &client,
            "git",
            json!({"command": "show", "root": "r", "rev": "HEAD~1"}),
        )
        .await,
        call_ok(
            &client,
            "git",
            json!({"command": "diff", "root": "r", "rev": "HEAD"}),
        )
        .await,
        call_ok(
            &client,
            "git",
            json!({"command": "blame", "root": "r", "path": "src/f01.txt", "rev": "HEAD"}),
        )
        .await,
        call_ok(&client, "git", json!({"command": "status", "root": "r"})).await,
    ];
    results.push(
        call_ok(
            &client,
            "git",
            json!({"command": "show", "root": "r", "rev": "HEAD", "path": "src/f01.txt"}),
        )
        .await,
    );
    assert!(!marker.exists(), "a command the repository names was run");
    // Its config is never echoed.
    for r in &results {
        let json = serde_json::to_string(r).unwrap();
        assert!(!json.contains("touch "), "{json}");
    }
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn git_stays_denied_to_every_other_tool() {
    let env = Env::new();
    let repo = env.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    std::fs::create_dir_all(env.path("plain")).unwrap();
    let text_config = config("repo", "")
        + "[[roots]]\nname = \"plain\"\npath = \"plain\"\nrole = \"reference\"\n";
    let client = start(&env.config(&text_config)).await;
    // The history tools are offered the root with a repository only.
    let listed = tools(&client).await;
    let git = listed.iter().find(|t| t.name == "git").expect("git listed");
    assert_eq!(
        git.input_schema["properties"]["root"]["enum"],
        json!(["r"]),
        "{:?}",
        git.input_schema
    );
    assert!(is_error(
        &call(&client, "git", json!({"command": "log", "root": "plain"})).await
    ));
    assert_refused(
        &call(
            &client,
            "read_file",
            json!({"root": "r", "path": ".git/config"}),
        )
        .await,
        "deny",
    );
    assert_refused(
        &call(
            &client,
            "list_directory",
            json!({"root": "r", "path": ".git"}),
        )
        .await,
        "deny",
    );
    let listing = call_ok(&client, "list_directory", json!({"root": "r", "depth": 3})).await;
    assert!(!text(&listing).contains(".git"), "{}", text(&listing));
    let found = call_ok(
        &client,
        "search_files",
        json!({"root": "r", "pattern": "**", "contains": "main"}),
    )
    .await;
    assert!(!text(&found).contains(".git"), "{}", text(&found));
    assert!(!text(&found).contains("HEAD"), "{}", text(&found));
}

/// The host interface that answers about repositories and the deny list is
/// the built-in component's alone: the same component given as a file, as
/// a third-party one would be, is refused.
#[test]
fn only_the_built_in_component_may_import_the_history_interface() {
    let wasm = loom_fs_mcp::runtime::builtin_dir().join("git_tools.wasm");
    let out = command()
        .args(["component", "inspect"])
        .arg(&wasm)
        .output()
        .expect("run component inspect");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "accepted: no: it imports loom-fs:tool/history@0.3.0, which only the built-in \
             history component may"
        ),
        "{said}"
    );
}

/// Under the kernel sandbox (`landlock = true`), a root below a
/// repository's top with `git_history = true` still reads the repository:
/// its git directory, above the root, is granted for reading.
#[tokio::test]
async fn a_sandboxed_server_reads_a_repository_above_its_root() {
    if !loom_fs_mcp::sys::sandbox::available() {
        eprintln!("SKIPPED: kernel has no Landlock; the sandboxed history test was not run");
        return;
    }
    let env = Env::new();
    let repo = env.path("repo");
    make_repository(&repo);
    env.mkdir("logs");
    let config = env.config(
        "audit_log = \"logs/audit.log\"\nlandlock = true\n\
         [[roots]]\nname = \"r\"\npath = \"repo/sub\"\nrole = \"reference\"\ngit_history = true\n",
    );
    let client = start(&config).await;
    let r = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "max_count": 500}),
    )
    .await;
    let ids: Vec<&str> = structured(&r)["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let want = git(&repo, &["log", "--format=%H", "--", "sub"]);
    assert_eq!(ids, want.lines().collect::<Vec<_>>());
    let r = call_ok(&client, "git", json!({"command": "status", "root": "r"})).await;
    assert_no_host_path(&env, &[&r]);
}

/// A log's files stop at the listing limit, over all its commits (one
/// commit can change tens of thousands): the rest are counted, the answer
/// says it was cut, and it is never refused as too large.
#[tokio::test]
async fn a_log_lists_files_up_to_the_listing_limit() {
    let env = Env::new();
    let repo = env.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for n in 0..30 {
        std::fs::write(repo.join(format!("f{n:02}.txt")), "one\n").unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "thirty files"]);
    std::fs::write(repo.join("f00.txt"), "two\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "one file"]);
    let client =
        start(&env.config(&format!("max_list_entries = 10\n{}", config("repo", "")))).await;
    let r = call_ok(&client, "git", json!({"command": "log", "root": "r"})).await;
    let s = structured(&r);
    assert_eq!(s["truncated"], json!(true), "{}", text(&r));
    let commits = s["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2);
    // Newest first: its one file, then nine of the thirty.
    assert_eq!(commits[0]["files"].as_array().unwrap().len(), 1);
    assert_eq!(commits[1]["files"].as_array().unwrap().len(), 9);
    assert_eq!(commits[1]["files_not_listed"], json!(21));
    assert!(
        text(&r).contains("(21 more files not listed)"),
        "{}",
        text(&r)
    );
    assert!(
        text(&r).contains("listing limit (10 entries)"),
        "{}",
        text(&r)
    );
    // Within the limit no file is left out (the log is cut by max_count).
    let r = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "max_count": 1}),
    )
    .await;
    let commit = &structured(&r)["commits"][0];
    assert_eq!(commit["files"].as_array().unwrap().len(), 1);
    assert!(commit.get("files_not_listed").is_none(), "{commit}");
    assert!(!text(&r).contains("not listed"), "{}", text(&r));
}

/// A path or revision the tools did not find is named in their answer by
/// the naming rule: a control character never reaches the text raw.
#[tokio::test]
async fn a_name_in_a_history_message_is_shown_escaped() {
    let env = Env::new();
    let repo = env.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let client = start(&env.config(&config("repo", ""))).await;
    let odd = "x\u{1b}[31m\nred.txt";
    for (tool, args) in [
        (
            "git",
            json!({"command": "show", "root": "r", "rev": "HEAD", "path": odd}),
        ),
        ("git", json!({"command": "blame", "root": "r", "path": odd})),
        (
            "git",
            json!({"command": "show", "root": "r", "rev": "HEAD", "path": "a.txt/\u{7}"}),
        ),
    ] {
        let r = call(&client, tool, args).await;
        assert_eq!(r.is_error, Some(true), "{tool}");
        let said = text(&r);
        assert!(said.contains("no such file"), "{tool}: {said}");
        assert!(
            !said.chars().any(|c| c.is_control() && c != '\n'),
            "{tool}: {said:?}"
        );
        assert!(
            !said.contains("x\u{1b}") && !said.contains("\nred"),
            "{said:?}"
        );
        scan(&said);
    }
}

/// A history path is relative to the root, as every tool's: an absolute one
/// (the root's own host path among them) or one that climbs above the root
/// is refused naming the rule, never answered as if it matched nothing
/// ("No differences", an empty log).
#[tokio::test]
async fn an_absolute_or_climbing_history_path_is_refused_naming_the_rule() {
    let env = Env::new();
    let repo = env.path("repo");
    make_repository(&repo);
    let client = start(&env.config(&config("repo", ""))).await;
    let host = repo.join("src").to_string_lossy().to_string();
    let mut results = Vec::new();
    for (path, rule) in [
        (host.as_str(), "absolute_path"),
        ("/src", "absolute_path"),
        ("..", "confinement"),
        ("src/../../repo/src", "confinement"),
    ] {
        for (tool, args) in [
            ("git", json!({"command": "log", "root": "r", "path": path})),
            (
                "git",
                json!({"command": "diff", "root": "r", "rev": "HEAD~3", "path": path}),
            ),
            (
                "git",
                json!({"command": "show", "root": "r", "rev": "HEAD", "path": path}),
            ),
            (
                "git",
                json!({"command": "blame", "root": "r", "path": path}),
            ),
        ] {
            let r = call(&client, tool, args).await;
            assert!(is_error(&r), "{tool} {path}: {}", text(&r));
            assert!(
                text(&r).contains(&format!("(rule {rule})")),
                "{tool} {path}: {}",
                text(&r)
            );
            results.push(r);
        }
    }
    // Within the root, `.` and `..` are taken as written elsewhere.
    let plain = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "path": "src"}),
    )
    .await;
    let spelled = call_ok(
        &client,
        "git",
        json!({"command": "log", "root": "r", "path": "./x/../src/"}),
    )
    .await;
    assert_eq!(structured(&plain), structured(&spelled));
    assert!(!structured(&plain)["commits"].as_array().unwrap().is_empty());
    assert_no_host_path(&env, &results.iter().collect::<Vec<_>>());
}
