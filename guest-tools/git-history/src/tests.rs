//! Against the `git` CLI on repositories made here (run with a clean
//! environment: no system or global configuration).

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Repo {
    dir: PathBuf,
    home: PathBuf,
    tick: i64,
}

impl Repo {
    fn new(name: &str) -> Repo {
        let base = std::env::temp_dir().join(format!("git-history-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("repo");
        let home = base.join("home");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let repo = Repo {
            dir,
            home,
            tick: 1_700_000_000,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        command
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Ada Lovelace")
            .env("GIT_AUTHOR_EMAIL", "ada@example.com")
            .env("GIT_COMMITTER_NAME", "Charles Babbage")
            .env("GIT_COMMITTER_EMAIL", "charles@example.com");
        command
    }

    fn git(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, path: &str, content: &[u8]) {
        let full = self.dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }

    fn commit(&mut self, message: &str, author: Option<&str>) {
        self.tick += 3600;
        let date = format!("@{} +0130", self.tick);
        let mut command = self.command(&["add", "-A"]);
        assert!(command.status().unwrap().success());
        let mut command = self.command(&["commit", "-q", "--allow-empty", "-m", message]);
        command
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date);
        if let Some(author) = author {
            command.env("GIT_AUTHOR_NAME", author);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn history(&self) -> History {
        History::open(&self.dir.join(".git")).unwrap()
    }
}

fn nothing_hidden(_: &str) -> bool {
    false
}

fn secrets(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap();
    name == ".env" || name.starts_with(".env.") || name == "id_rsa"
}

/// Hundreds of commits over tens of files, in the root and in `sub/`, with
/// a secret and a key committed, changed and deleted, a binary file, a
/// merge, packed by `git gc` half-way, then loose objects on top.
fn big_repo(name: &str) -> Repo {
    let mut repo = Repo::new(name);
    for i in 0..240 {
        let file = i % 17;
        let dir = if file % 3 == 0 { "sub/" } else { "" };
        let mut text = String::new();
        for line in 0..(10 + i % 13) {
            text.push_str(&format!("line {line} of file {file}\n"));
        }
        text.push_str(&format!("change {i}\n    indented {}\n", i * 7));
        repo.write(&format!("{dir}f{file}.txt"), text.as_bytes());
        if i % 11 == 0 {
            repo.write(".env", format!("SECRET={i}\n").as_bytes());
        }
        if i % 29 == 0 {
            repo.write("sub/keys/id_rsa", format!("KEY {i}\n").as_bytes());
        }
        if i == 100 {
            std::fs::remove_file(repo.dir.join(".env")).unwrap();
        }
        if i == 150 {
            std::fs::remove_file(repo.dir.join("sub/keys/id_rsa")).unwrap();
        }
        if i % 50 == 7 {
            repo.write("data.bin", &[0, 1, 2, i as u8, 0, 255]);
        }
        if i == 60 {
            std::fs::remove_file(repo.dir.join("f4.txt")).unwrap();
        }
        let subject = if i % 5 == 0 {
            format!("fix: step {i}")
        } else {
            format!("step {i}")
        };
        let author = (i % 4 == 0).then_some("Grace Hopper");
        repo.commit(&format!("{subject}\n\nBody of {i}.\n"), author);
        if i == 120 {
            repo.git(&["gc", "-q"]);
        }
    }
    // A commit that touches nothing but secrets.
    repo.write(".env", b"SECRET=again\n");
    repo.commit("only the secret", None);
    // A branch merged back.
    repo.git(&["checkout", "-q", "-b", "side", "HEAD~3"]);
    repo.write("side.txt", b"from the side\n");
    repo.commit("side work", None);
    repo.git(&["checkout", "-q", "main"]);
    repo.tick += 3600;
    let date = format!("@{} +0000", repo.tick);
    let out = repo
        .command(&["merge", "-q", "--no-ff", "-m", "merge side", "side"])
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo
}

/// One commit of `git log` output: header fields, then its file lines.
#[derive(Debug, PartialEq, Eq)]
struct Logged {
    header: String,
    files: Vec<String>,
}

/// `git log ARGS` with one header line per commit and `--name-status`
/// (or `--numstat`) lines, `keep` choosing which file lines stay.
fn git_log(
    repo: &Repo,
    args: &[&str],
    stat: &str,
    keep: &dyn Fn(&str) -> Option<String>,
) -> Vec<Logged> {
    let mut all = vec![
        "log",
        "--no-renames",
        stat,
        "--format=%x01%H %an <%ae> %at %s",
    ];
    all.extend_from_slice(args);
    let out = repo.git(&all);
    let mut logged = Vec::new();
    for chunk in out.split('\u{1}').skip(1) {
        let mut lines = chunk.lines();
        let header = lines.next().unwrap().to_string();
        let files = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| {
                let path = l.rsplit('\t').next().unwrap();
                keep(path).map(|p| {
                    let fields: Vec<&str> = l.split('\t').collect();
                    format!("{}\t{p}", fields[..fields.len() - 1].join("\t"))
                })
            })
            .collect();
        logged.push(Logged { header, files });
    }
    logged
}

fn ours(entries: &[Entry], numstat: bool) -> Vec<Logged> {
    entries
        .iter()
        .map(|e| Logged {
            header: format!(
                "{} {} <{}> {} {}",
                e.id, e.author_name, e.author_email, e.author_time, e.subject
            ),
            files: e
                .changes
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if numstat {
                        match e.counts[i] {
                            Some((added, removed)) => format!("{added}\t{removed}\t{}", c.path),
                            None => format!("-\t-\t{}", c.path),
                        }
                    } else {
                        format!("{}\t{}", c.kind.letter(), c.path)
                    }
                })
                .collect(),
        })
        .collect()
}

fn query(rev: &str) -> LogQuery<'_> {
    LogQuery {
        rev,
        path: "",
        max_count: 500,
        since: None,
        author: None,
        grep: None,
        line_counts: false,
    }
}

#[test]
fn log_matches_git_on_a_packed_and_loose_repository() {
    let repo = big_repo("log");
    let history = repo.history();
    let view = View::new("", &nothing_hidden);
    let all = |p: &str| Some(p.to_string());
    let (entries, truncated) = log(&history, &query("HEAD"), &view).unwrap();
    assert!(!truncated);
    assert_eq!(entries.len(), 243);
    assert_eq!(
        ours(&entries, false),
        git_log(&repo, &["-n", "500"], "--name-status", &all)
    );
    let mut q = query("HEAD~2");
    q.line_counts = true;
    q.max_count = 60;
    let (entries, truncated) = log(&history, &q, &view).unwrap();
    assert!(truncated);
    assert_eq!(
        ours(&entries, true),
        git_log(&repo, &["-n", "60", "HEAD~2"], "--numstat", &all)
    );
}

#[test]
fn log_filters_match_git() {
    let repo = big_repo("filters");
    let history = repo.history();
    let view = View::new("", &nothing_hidden);
    let all = |p: &str| Some(p.to_string());
    let mut q = query("main");
    q.path = "sub";
    assert_eq!(
        ours(&log(&history, &q, &view).unwrap().0, false),
        git_log(&repo, &["main", "--", "sub"], "--name-status", &all)
    );
    let mut q = query("HEAD");
    q.author = Some("Hopper");
    q.grep = Some("fix:");
    q.since = Some(1_700_000_000 + 3600 * 100);
    assert_eq!(
        ours(&log(&history, &q, &view).unwrap().0, false),
        git_log(
            &repo,
            &[
                "-F",
                "--author=Hopper",
                "--grep=fix:",
                "--since=@1700360000"
            ],
            "--name-status",
            &all
        )
    );
}

#[test]
fn a_subdirectory_root_sees_its_own_paths_only_and_never_a_secret() {
    let repo = big_repo("scope");
    let history = repo.history();
    let view = View::new("sub", &secrets);
    let (entries, _) = log(&history, &query("HEAD"), &view).unwrap();
    let theirs = git_log(&repo, &["--", "sub"], "--name-status", &|p: &str| {
        let rel = p.strip_prefix("sub/")?;
        (!secrets(rel)).then(|| rel.to_string())
    });
    assert_eq!(ours(&entries, false), theirs);
    // A commit that changed only the key in sub/ is listed with its
    // changes hidden, never named.
    let only_key: Vec<&Entry> = entries.iter().filter(|e| e.changes.is_empty()).collect();
    assert!(!only_key.is_empty());
    assert!(only_key.iter().all(|e| e.hidden > 0));
    for e in &entries {
        assert!(
            e.changes
                .iter()
                .all(|c| !c.path.contains("id_rsa") && !c.path.starts_with("sub/"))
        );
    }
}

#[test]
fn secrets_never_appear_in_log_show_or_file_reads() {
    let repo = big_repo("secrets");
    let history = repo.history();
    let view = View::new("", &secrets);
    let (entries, _) = log(&history, &query("HEAD"), &view).unwrap();
    let theirs = git_log(&repo, &["-n", "500"], "--name-status", &|p: &str| {
        (!secrets(p)).then(|| p.to_string())
    });
    assert_eq!(ours(&entries, false), theirs);
    let hidden_only = entries
        .iter()
        .find(|e| e.subject == "only the secret")
        .unwrap();
    assert!(hidden_only.changes.is_empty());
    assert_eq!(hidden_only.hidden, 1);
    for e in &entries {
        let shown = show_commit(&history, &e.id, "", &view).unwrap();
        for file in &shown.files {
            assert!(!secrets(&file.change.path));
            assert!(!file.hunks.as_deref().unwrap_or("").contains("SECRET="));
            assert!(!file.hunks.as_deref().unwrap_or("").contains("KEY "));
        }
    }
    // Hidden reads exactly as missing.
    let missing = show_file(&history, "HEAD", "no-such-file", &view).unwrap_err();
    let secret = show_file(&history, "HEAD", ".env", &view).unwrap_err();
    assert_eq!(
        missing,
        Error::NotFound("no-such-file: no such file at HEAD".into())
    );
    assert_eq!(secret, Error::NotFound(".env: no such file at HEAD".into()));
    let key = show_file(&history, "HEAD~120", "sub/keys/id_rsa", &view).unwrap_err();
    assert_eq!(
        key,
        Error::NotFound("sub/keys/id_rsa: no such file at HEAD~120".into())
    );
    // While it is there, unhidden.
    let open = View::new("", &nothing_hidden);
    assert_eq!(
        show_file(&history, "HEAD~120", "sub/keys/id_rsa", &open).unwrap(),
        b"KEY 116\n"
    );
}

/// Each file's hunks in a patch `git` printed, as they follow its header
/// (`binary` for a binary file), for the paths `keep` keeps (renamed).
fn patch_hunks(patch: &str, keep: &dyn Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    let mut theirs = BTreeMap::new();
    for part in patch.split("diff --git a/").skip(1) {
        let Some(path) = keep(part.split(' ').next().unwrap()) else {
            continue;
        };
        let body = match part.find("\n@@ ") {
            Some(at) => part[at + 1..].to_string(),
            None if part.contains("Binary files") => "binary".to_string(),
            None => String::new(),
        };
        theirs.insert(path, body);
    }
    theirs
}

fn hunks_of(files: &[FileDiff]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|f| {
            (
                f.change.path.clone(),
                f.hunks.clone().unwrap_or_else(|| "binary".into()),
            )
        })
        .collect()
}

#[test]
fn diff_between_revisions_matches_git() {
    let repo = big_repo("diff");
    let history = repo.history();
    let open = View::new("", &nothing_hidden);
    for (from, to) in [
        ("HEAD~200", "HEAD"),
        ("HEAD~3", "HEAD~1"),
        ("HEAD", "HEAD~150"),
    ] {
        let (files, hidden) = diff_revisions(&history, from, to, "", &open).unwrap();
        assert_eq!(hidden, 0);
        let patch = repo.git(&["diff", "--no-renames", from, to]);
        assert_eq!(
            hunks_of(&files),
            patch_hunks(&patch, &|p| Some(p.to_string())),
            "{from}..{to}"
        );
    }
    // Under a subdirectory root with secrets hidden, limited to a path.
    let sub = View::new("sub", &secrets);
    let (files, hidden) = diff_revisions(&history, "HEAD~200", "HEAD", "", &sub).unwrap();
    assert_eq!(hidden, 1, "sub/keys/id_rsa");
    let patch = repo.git(&["diff", "--no-renames", "HEAD~200", "HEAD", "--", "sub"]);
    let keep = |p: &str| {
        p.strip_prefix("sub/")
            .filter(|r| !secrets(r))
            .map(str::to_string)
    };
    assert_eq!(hunks_of(&files), patch_hunks(&patch, &keep));
    assert!(!files.is_empty());
    let (files, hidden) = diff_revisions(&history, "HEAD~200", "HEAD", "keys", &sub).unwrap();
    assert!(files.is_empty());
    assert_eq!(hidden, 1);
}

#[test]
fn show_matches_git() {
    let repo = big_repo("show");
    let history = repo.history();
    let view = View::new("", &nothing_hidden);
    for rev in [
        "HEAD~1", "HEAD~5", "HEAD~60", "HEAD~130", "HEAD~200", "HEAD~241",
    ] {
        let shown = show_commit(&history, rev, "", &view).unwrap();
        let git = repo.git(&["show", "--no-renames", "--format=%H%n%P%n%B%x01", rev]);
        let (head, patch) = git.split_once('\u{1}').unwrap();
        let mut head_lines = head.lines();
        assert_eq!(head_lines.next().unwrap(), shown.id);
        assert_eq!(head_lines.next().unwrap(), shown.parents.join(" "));
        assert_eq!(
            shown.message,
            head.split_once('\n').unwrap().1.split_once('\n').unwrap().1
        );
        assert_eq!(
            hunks_of(&shown.files),
            patch_hunks(patch, &|p| Some(p.to_string())),
            "{rev}"
        );
    }
    for (rev, path) in [
        ("HEAD", "f1.txt"),
        ("HEAD~30", "sub/f3.txt"),
        ("HEAD~200", "data.bin"),
    ] {
        let out = repo
            .command(&["show", &format!("{rev}:{path}")])
            .output()
            .unwrap();
        assert_eq!(show_file(&history, rev, path, &view).unwrap(), out.stdout);
    }
    let sub = View::new("sub", &nothing_hidden);
    assert_eq!(
        show_file(&history, "HEAD", "f3.txt", &sub).unwrap(),
        std::fs::read(repo.dir.join("sub/f3.txt")).unwrap()
    );
    assert!(matches!(
        show_file(&history, "HEAD", "../f1.txt", &sub),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        show_file(&history, "HEAD", "f1.txt", &sub),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        show_commit(&history, "nope", "", &view),
        Err(Error::BadRevision(_))
    ));
    assert!(matches!(
        show_commit(&history, "--output=x", "", &view),
        Err(Error::BadRevision(_))
    ));
}

#[test]
fn unified_hunks_match_gits_format() {
    let before = b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n";
    let after = b"a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\nadded";
    assert_eq!(
        unified(before, after),
        "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -12,3 +12,4 @@ k\n l\n m\n n\n+added\n\\ No newline at end of file\n"
    );
    assert_eq!(unified(b"", b"x\n"), "@@ -0,0 +1 @@\n+x\n");
    assert_eq!(unified(b"x\n", b""), "@@ -1 +0,0 @@\n-x\n");
}

#[test]
fn nothing_the_repository_config_names_is_run() {
    let mut repo = Repo::new("hostile");
    let marker = repo.dir.parent().unwrap().join("marker");
    let touch = format!("touch {}", marker.display());
    repo.write("a.txt", b"one\n");
    repo.write(".gitattributes", b"*.txt filter=evil diff=evil\n");
    repo.commit("first", None);
    repo.write("a.txt", b"two\n");
    repo.commit("second", None);
    for (key, value) in [
        ("core.pager", touch.as_str()),
        ("core.fsmonitor", touch.as_str()),
        ("core.sshCommand", touch.as_str()),
        ("core.hooksPath", "hooks-elsewhere"),
        ("diff.external", touch.as_str()),
        ("diff.evil.textconv", touch.as_str()),
        ("diff.evil.command", touch.as_str()),
        ("filter.evil.clean", touch.as_str()),
        ("filter.evil.smudge", touch.as_str()),
        ("filter.evil.process", touch.as_str()),
        ("credential.helper", touch.as_str()),
        ("alias.lg", &format!("!{touch}")),
    ] {
        repo.git(&["config", key, value]);
    }
    // An included file naming the same commands.
    let included = repo.dir.parent().unwrap().join("included");
    std::fs::write(
        &included,
        format!("[core]\n\tpager = {touch}\n[diff]\n\texternal = {touch}\n"),
    )
    .unwrap();
    repo.git(&["config", "include.path", included.to_str().unwrap()]);
    let hooks = repo.dir.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "post-checkout",
        "pre-commit",
        "post-index-change",
        "reference-transaction",
    ] {
        let path = hooks.join(hook);
        std::fs::write(&path, format!("#!/bin/sh\n{touch}\n")).unwrap();
        // Git for Windows runs a hook without an executable bit.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let history = repo.history();
    let view = View::new("", &nothing_hidden);
    let mut q = query("HEAD");
    q.line_counts = true;
    let (entries, _) = log(&history, &q, &view).unwrap();
    assert_eq!(entries.len(), 2);
    let shown = show_commit(&history, "HEAD", "", &view).unwrap();
    assert_eq!(
        shown.files[0].hunks.as_deref(),
        Some("@@ -1 +1 @@\n-one\n+two\n")
    );
    assert_eq!(
        show_file(&history, "HEAD", "a.txt", &view).unwrap(),
        b"two\n"
    );
    assert!(
        !marker.exists(),
        "a command from the repository's config ran"
    );
    // The repository's configuration does run it under `git` (its external
    // diff): the test would see it.
    let _ = repo.command(&["diff", "HEAD~1", "HEAD"]).output();
    assert!(marker.exists());
}

#[test]
fn a_damaged_or_missing_repository_is_an_error_not_a_panic() {
    let base = std::env::temp_dir().join(format!("git-history-{}-none", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    assert!(matches!(
        History::open(Path::new(&base)),
        Err(Error::Repository(_))
    ));
}

/// `git blame --porcelain`: per line, the commit and the line's number there.
fn git_blame(repo: &Repo, rev: &str, path: &str) -> Vec<(String, u32)> {
    let out = repo.git(&["blame", "--porcelain", rev, "--", path]);
    out.lines()
        .filter(|l| {
            l.len() > 41
                && l.as_bytes()[40] == b' '
                && l[..40].bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|l| {
            let mut fields = l.split(' ');
            let id = fields.next().unwrap().to_string();
            (id, fields.next().unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn blame_matches_git() {
    let repo = big_repo("blame");
    let history = repo.history();
    let open = View::new("", &nothing_hidden);
    for (rev, path) in [
        ("HEAD", "f1.txt"),
        ("HEAD", "side.txt"),
        ("HEAD", "f4.txt"),
        ("HEAD~30", "sub/f3.txt"),
        ("HEAD~100", "f16.txt"),
    ] {
        let (lines, text) = blame(&history, rev, path, &open).unwrap();
        let ours: Vec<(String, u32)> = lines
            .iter()
            .map(|l| (l.commit.clone(), l.original_line))
            .collect();
        assert_eq!(ours, git_blame(&repo, rev, path), "{rev} {path}");
        assert_eq!(
            text,
            repo.command(&["show", &format!("{rev}:{path}")])
                .output()
                .unwrap()
                .stdout
        );
    }
    let first = &blame(&history, "HEAD", "f1.txt", &open).unwrap().0[0];
    assert_eq!(first.author_name, "Ada Lovelace");
    assert_eq!(first.author_offset, 5400);
    // Under a subdirectory root, with secrets hidden.
    let sub = View::new("sub", &secrets);
    let (lines, _) = blame(&history, "HEAD", "f3.txt", &sub).unwrap();
    let ours: Vec<(String, u32)> = lines
        .iter()
        .map(|l| (l.commit.clone(), l.original_line))
        .collect();
    assert_eq!(ours, git_blame(&repo, "HEAD", "sub/f3.txt"));
    assert_eq!(
        blame(&history, "HEAD~120", "keys/id_rsa", &sub).unwrap_err(),
        Error::NotFound("keys/id_rsa: no such file at HEAD~120".into())
    );
    assert_eq!(
        blame(&history, "HEAD", ".env", &View::new("", &secrets)).unwrap_err(),
        Error::NotFound(".env: no such file at HEAD".into())
    );
    assert!(matches!(
        blame(&history, "HEAD", "data.bin", &open),
        Err(Error::Refused(_))
    ));
    assert!(matches!(
        blame(&history, "HEAD", "f1.txt", &sub),
        Err(Error::NotFound(_))
    ));
}

/// `git status --porcelain` as (X, Y, path) triples, `keep` choosing and
/// renaming paths; ours in the same form.
fn git_status(
    repo: &Repo,
    keep: &dyn Fn(&str) -> Option<String>,
) -> BTreeSet<(char, char, String)> {
    let out = repo.git(&[
        "status",
        "--porcelain=v1",
        "--untracked-files=all",
        "--no-renames",
    ]);
    out.lines()
        .filter_map(|l| {
            let mut chars = l.chars();
            let (x, y) = (chars.next().unwrap(), chars.next().unwrap());
            keep(&l[3..]).map(|p| (x, y, p))
        })
        .collect()
}

fn ours_status(status: &Status) -> BTreeSet<(char, char, String)> {
    let mut all: BTreeMap<String, (char, char)> = BTreeMap::new();
    for (path, kind) in &status.staged {
        all.entry(path.clone()).or_insert((' ', ' ')).0 = kind.letter();
    }
    for (path, kind) in &status.modified {
        all.entry(path.clone()).or_insert((' ', ' ')).1 = kind.letter();
    }
    let mut set: BTreeSet<(char, char, String)> =
        all.into_iter().map(|(p, (x, y))| (x, y, p)).collect();
    set.extend(status.untracked.iter().map(|p| ('?', '?', p.clone())));
    set
}

#[test]
fn status_matches_git() {
    let mut repo = Repo::new("status");
    for path in [
        "kept.txt",
        "edited.txt",
        "staged.txt",
        "both.txt",
        "removed.txt",
        "deleted.txt",
        "sub/a.txt",
        "sub/b.txt",
    ] {
        repo.write(path, format!("{path}\n").as_bytes());
    }
    repo.write(".env", b"SECRET=1\n");
    repo.write("sub/.env", b"SECRET=2\n");
    repo.write(".gitignore", b"*.log\nbuild/\n");
    repo.commit("base", None);
    // Secrets committed and unchanged: nothing to count (a count would
    // tell how many there are).
    let clean = status(&repo.history(), &repo.dir, &View::new("", &secrets)).unwrap();
    assert_eq!(clean.hidden, 0);
    repo.write("edited.txt", b"edited\n");
    repo.write("staged.txt", b"staged\n");
    repo.write("both.txt", b"staged\n");
    repo.write("new.txt", b"new\n");
    repo.write("sub/a.txt", b"changed\n");
    repo.write(".env", b"SECRET=2\n");
    repo.write("sub/.env", b"SECRET=3\n");
    repo.git(&["add", "staged.txt", "both.txt", "new.txt", ".env"]);
    repo.write("both.txt", b"and edited\n");
    repo.git(&["rm", "-q", "removed.txt"]);
    std::fs::remove_file(repo.dir.join("deleted.txt")).unwrap();
    repo.write("loose.txt", b"untracked\n");
    repo.write("deep/er/file.txt", b"untracked\n");
    repo.write("debug.log", b"ignored\n");
    repo.write("build/out.bin", b"ignored\n");
    repo.write("sub/new.txt", b"untracked\n");
    repo.write("sub/.env.local", b"SECRET=4\n");
    std::fs::write(repo.dir.join(".git/info/exclude"), b"excluded.txt\n").unwrap();
    repo.write("excluded.txt", b"excluded\n");
    let history = repo.history();
    let open = View::new("", &nothing_hidden);
    let ours = status(&history, &repo.dir, &open).unwrap();
    assert_eq!(
        ours_status(&ours),
        git_status(&repo, &|p| Some(p.to_string()))
    );
    assert_eq!(ours.hidden, 0);
    // Secrets hidden: none listed, each counted once.
    let guarded = status(&history, &repo.dir, &View::new("", &secrets)).unwrap();
    assert_eq!(
        ours_status(&guarded),
        git_status(&repo, &|p| (!secrets(p)).then(|| p.to_string()))
    );
    assert_eq!(
        guarded.hidden, 1,
        ".env, staged; sub/.env changed only in the working tree, which is never read, \
         and sub/.env.local is untracked"
    );
    // A subdirectory root: its own paths, relative to it.
    let sub = status(&history, &repo.dir.join("sub"), &View::new("sub", &secrets)).unwrap();
    let keep = |p: &str| {
        p.strip_prefix("sub/")
            .filter(|r| !secrets(r))
            .map(str::to_string)
    };
    assert_eq!(ours_status(&sub), git_status(&repo, &keep));
    assert!(!ours_status(&sub).is_empty());

    // The diff from a revision to the working tree.
    repo.write("edited.txt", b"one\ntwo\nthree\n");
    for (from, path) in [("HEAD", ""), ("HEAD", "sub")] {
        let (files, hidden) = diff_worktree(&history, from, &repo.dir, path, &open).unwrap();
        assert_eq!(hidden, 0);
        let mut args = vec!["diff", "--no-renames", from];
        if !path.is_empty() {
            args.extend(["--", path]);
        }
        let patch = repo.git(&args);
        assert_eq!(
            hunks_of(&files),
            patch_hunks(&patch, &|p| Some(p.to_string())),
            "{from} {path}"
        );
        assert!(!files.is_empty());
    }
    let (files, hidden) = diff_worktree(
        &history,
        "HEAD",
        &repo.dir.join("sub"),
        "",
        &View::new("sub", &secrets),
    )
    .unwrap();
    assert_eq!(
        hidden, 0,
        "sub/.env changed only in the working tree, which is never read"
    );
    let patch = repo.git(&["diff", "--no-renames", "HEAD", "--", "sub"]);
    assert_eq!(hunks_of(&files), patch_hunks(&patch, &keep));
    let kinds: BTreeSet<(String, char)> =
        diff_worktree(&history, "HEAD", &repo.dir, "", &View::new("", &secrets))
            .unwrap()
            .0
            .iter()
            .map(|f| (f.change.path.clone(), f.change.kind.letter()))
            .collect();
    let theirs: BTreeSet<(String, char)> = repo
        .git(&["diff", "--no-renames", "--name-status", "HEAD"])
        .lines()
        .filter_map(|l| {
            let (k, p) = l.split_once('\t')?;
            (!secrets(p)).then(|| (p.to_string(), k.chars().next().unwrap()))
        })
        .collect();
    assert_eq!(kinds, theirs);
}
