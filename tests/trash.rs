//! End to end: the trash from the command line. The real server deletes
//! and overwrites over MCP; the real binary's `trash list`, `restore` and
//! `purge` then show, put back and remove what it kept, beside a running
//! server or after it stopped. Restores never replace anything and never
//! leave the root; purging is never a tool.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

use common::*;
use serde_json::json;

/// A workspace root with a file, a tree and a file to overwrite, a
/// reference root, a canary outside them, and a link out of the workspace.
fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("ws/a.txt", "alpha\n")
        .write("ws/tree/one.txt", "1\n")
        .write("ws/tree/deep/two.txt", "22\n")
        .write("ws/b.txt", "old b\n")
        .write("docs/readme.md", "docs\n")
        .write("outside/canary.txt", "CANARY-OUTSIDE\n")
        .symlink("../outside", "ws/out");
    let config = env.config(WS_AND_DOCS);
    (env, config)
}

/// Runs `loom-fs-mcp trash ARGS --config CONFIG`.
fn trash(config: &Path, args: &[&str]) -> Output {
    command()
        .arg("trash")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("run loom-fs-mcp trash")
}

/// Its stdout, which it must have exited 0 with.
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Its stderr, which it must have failed with, changing nothing on stdout.
fn refused(out: Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    id: String,
    root: String,
    path: String,
    at: SystemTime,
    size: u64,
    /// The call that kept it.
    call: String,
}

fn lines(stdout: &str) -> Vec<Line> {
    stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{l:?}");
            assert_eq!(f[3].len(), "2026-12-01T08:31:45.123456Z".len(), "{l:?}");
            Line {
                id: f[0].into(),
                root: f[1].into(),
                path: f[2].into(),
                at: humantime::parse_rfc3339(f[3]).unwrap_or_else(|e| panic!("{l:?}: {e}")),
                size: f[4].parse().unwrap(),
                call: f[5].into(),
            }
        })
        .collect()
}

fn list(config: &Path) -> Vec<Line> {
    lines(&ok(trash(config, &["list"])))
}

#[tokio::test]
async fn list_restore_purge_round_trip() {
    let (env, config) = fixture();
    let started = SystemTime::now();
    let client = start(&config).await;
    let mut results = Vec::new();
    for (tool, args) in [
        ("delete_file", json!({"root": "ws", "path": "a.txt"})),
        ("delete_file", json!({"root": "ws", "path": "tree"})),
        (
            "write_file",
            json!({"root": "ws", "path": "b.txt", "content": "new b\n"}),
        ),
    ] {
        let r = call(&client, tool, args).await;
        assert!(!is_error(&r), "{r:?}");
        results.push(r);
    }
    // The trash is the operator's: no tool lists, restores or purges it.
    for t in tools(&client).await {
        for word in ["trash", "restore", "purge"] {
            assert!(!t.name.contains(word), "{}", t.name);
        }
    }
    assert_clean(&env, &results);

    // Beside the running server: one line per entry, oldest first, no header.
    let first = list(&config);
    client.cancel().await.unwrap();
    let paths: Vec<(&str, &str, u64)> = first
        .iter()
        .map(|l| (l.root.as_str(), l.path.as_str(), l.size))
        .collect();
    assert_eq!(
        paths,
        [("ws", "a.txt", 6), ("ws", "tree", 5), ("ws", "b.txt", 6)]
    );
    let now = SystemTime::now();
    for (l, next) in first.iter().zip(first.iter().skip(1)) {
        assert!(l.at < next.at, "{first:?}");
    }
    for l in &first {
        assert!(
            l.at >= started - Duration::from_secs(1) && l.at <= now,
            "{l:?}"
        );
        assert_eq!(l.id.len(), 8, "{l:?}");
        assert!(l.id.bytes().all(|b| b.is_ascii_hexdigit()), "{l:?}");
    }
    let id = |path: &str| first.iter().find(|l| l.path == path).unwrap().id.clone();
    // Stable: the same IDs once the server is gone.
    assert_eq!(list(&config), first);
    assert!(ok(trash(&config, &["list", "--root", "docs"])).is_empty());
    assert_eq!(
        refused(trash(&config, &["list", "--root", "nope"])),
        "loom-fs-mcp: unknown root 'nope'; roots: ws, docs\n"
    );

    // Back where it was, byte for byte.
    let a = id("a.txt");
    assert_eq!(
        ok(trash(&config, &["restore", &a])),
        format!("restored {a}: ws/a.txt\n")
    );
    assert_eq!(std::fs::read(env.path("ws/a.txt")).unwrap(), b"alpha\n");
    assert_eq!(list(&config), first[1..]);

    // Occupied (write_file put new content there): refused, both kept.
    let b = id("b.txt");
    let before = env.snapshot();
    let why = refused(trash(&config, &["restore", &b]));
    assert!(why.contains("root 'ws': 'b.txt' is occupied"), "{why}");
    assert!(why.contains("--to NEW_PATH"), "{why}");
    // Elsewhere, but not out of the root, not through a link out, not
    // onto a denied name or into the trash.
    for (to, rule) in [
        ("../outside/b.txt", "confinement"),
        ("out/b.txt", "confinement"),
        ("/tmp/b.txt", "absolute_path"),
        (".env", "deny"),
        (".mcp-trash/b.txt", "deny"),
    ] {
        let why = refused(trash(&config, &["restore", &b, "--to", to]));
        assert!(
            why.contains(&format!("refused by rule '{rule}'")),
            "{to}: {why}"
        );
        assert!(
            !why.contains(&env.dir.to_string_lossy().to_string()),
            "{why}"
        );
    }
    assert!(refused(trash(&config, &["restore", &b, "--to", "a.txt"])).contains("occupied"));
    assert_eq!(env.snapshot(), before, "nothing changed anywhere");
    assert_eq!(std::fs::read(env.path("ws/b.txt")).unwrap(), b"new b\n");
    assert_eq!(list(&config), first[1..]);
    // A free path works; missing parents are made.
    assert_eq!(
        ok(trash(&config, &["restore", &b, "--to", "old/b.txt"])),
        format!("restored {b}: ws/old/b.txt\n")
    );
    assert_eq!(std::fs::read(env.path("ws/old/b.txt")).unwrap(), b"old b\n");

    // A directory comes back whole; a unique prefix of its ID will do.
    let tree = id("tree");
    assert_eq!(
        ok(trash(&config, &["restore", &tree[..5].to_uppercase()])),
        format!("restored {tree}: ws/tree\n")
    );
    assert_eq!(
        snapshot_dir(&env.path("ws/tree")),
        [
            ("deep".into(), None),
            ("deep/two.txt".into(), Some(b"22\n".to_vec())),
            ("one.txt".into(), Some(b"1\n".to_vec())),
        ]
    );
    assert!(list(&config).is_empty());
    assert!(env.trash("ws").is_empty());
    let left = trash_top(&env);
    assert!(
        left.is_empty(),
        "index files go with their entries: {left:?}"
    );
    let why = refused(trash(&config, &["restore", &tree]));
    assert!(
        why.contains(&format!("no trash entry has the ID {tree}")),
        "{why}"
    );
    let why = refused(trash(&config, &["restore", "../a.txt"]));
    assert!(why.contains("is not a trash ID"), "{why}");
}

#[tokio::test]
async fn purge_by_age_and_trash_without_an_index() {
    let (env, config) = fixture();
    // Older trash, with no index: each leaf is an entry.
    env.write(
        "ws/.mcp-trash/20200101T000000.000000Z/notes/n.txt",
        "note\n",
    )
    .mkdir("ws/.mcp-trash/20200101T000000.000000Z/empty")
    // Left by an index write that failed long ago: litter, not an entry.
    .write("ws/.mcp-trash/.20200101T000000.000000Z.json.4242.tmp", "{");
    std::fs::File::options()
        .write(true)
        .open(env.path("ws/.mcp-trash/.20200101T000000.000000Z.json.4242.tmp"))
        .unwrap()
        .set_modified(humantime::parse_rfc3339("2020-01-01T00:00:00Z").unwrap())
        .unwrap();
    let client = start(&config).await;
    call_ok(
        &client,
        "delete_file",
        json!({"root": "ws", "path": "a.txt"}),
    )
    .await;
    client.cancel().await.unwrap();

    let listed = list(&config);
    let shown: Vec<(&str, u64)> = listed.iter().map(|l| (l.path.as_str(), l.size)).collect();
    assert_eq!(shown, [("empty", 0), ("notes/n.txt", 5), ("a.txt", 6)]);
    let old = humantime::parse_rfc3339("2020-01-01T00:00:00Z").unwrap();
    assert_eq!((listed[0].at, listed[1].at), (old, old));

    // `--older-than` is required: no accidental purge of everything.
    let out = trash(&config, &["purge"]);
    assert_fails_with(&out, "--older-than");

    let line = |l: &Line| {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            l.id,
            l.root,
            l.path,
            humantime::format_rfc3339_micros(l.at),
            l.size,
            l.call
        )
    };
    let old_lines: String = listed[..2].iter().map(line).collect();
    let dry = ok(trash(
        &config,
        &["purge", "--older-than", "1h", "--dry-run"],
    ));
    assert_eq!(
        dry,
        format!(
            "{old_lines}would purge 2 entries (5 bytes) in 1 trash directory\n\
             would remove 1 leftover temporary index file\n"
        )
    );
    assert_eq!(list(&config), listed);
    let purged = ok(trash(&config, &["purge", "--older-than", "1h"]));
    assert_eq!(
        purged,
        format!(
            "{old_lines}purged 2 entries (5 bytes) in 1 trash directory\n\
             removed 1 leftover temporary index file\n"
        )
    );
    // What is younger than an hour stays, under the same ID.
    assert_eq!(list(&config), listed[2..]);
    let docs = ok(trash(
        &config,
        &["purge", "--older-than", "0s", "--root", "docs"],
    ));
    assert_eq!(docs, "purged 0 entries (0 bytes) in 0 trash directories\n");
    let all = ok(trash(&config, &["purge", "--older-than", "0s"]));
    assert_eq!(
        all,
        format!(
            "{}purged 1 entry (6 bytes) in 1 trash directory\n",
            line(&listed[2])
        )
    );
    assert!(list(&config).is_empty());
    let left = trash_top(&env);
    assert!(left.is_empty(), "{left:?}");
    assert!(!env.path("ws/a.txt").exists());
    assert_eq!(
        std::fs::read(env.path("outside/canary.txt")).unwrap(),
        b"CANARY-OUTSIDE\n"
    );
}

/// A name the model chose to reach the operator's terminal: it retitles
/// the window.
const HOSTILE: &str = "e\x1b]0;pwn\x07.txt";
/// As the naming rule shows it: a JSON string literal.
const HOSTILE_SHOWN: &str = r#""e\u001b]0;pwn\u0007.txt""#;

#[test]
fn paths_are_escaped_wherever_they_are_printed() {
    let (env, config) = fixture();
    env.write(
        &format!("ws/.mcp-trash/20200101T000000.000000Z/{HOSTILE}"),
        "first\n",
    )
    .write(
        &format!("ws/.mcp-trash/20200102T000000.000000Z/{HOSTILE}"),
        "second\n",
    );
    let raw = |out: &str| out.contains(['\x1b', '\x07']);
    let listed = list(&config);
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|l| l.path == HOSTILE_SHOWN), "{listed:?}");

    let restored = ok(trash(&config, &["restore", &listed[0].id]));
    assert_eq!(
        restored,
        format!("restored {}: ws/{HOSTILE_SHOWN}\n", listed[0].id)
    );
    assert_eq!(
        std::fs::read(env.path(&format!("ws/{HOSTILE}"))).unwrap(),
        b"first\n"
    );
    let why = refused(trash(&config, &["restore", &listed[1].id]));
    assert!(
        why.contains(&format!("'{HOSTILE_SHOWN}' is occupied")) && !raw(&why),
        "{why:?}"
    );
    let purged = ok(trash(&config, &["purge", "--older-than", "1h"]));
    assert!(
        purged.contains(&format!("\tws\t{HOSTILE_SHOWN}\t")) && !raw(&purged),
        "{purged:?}"
    );
}

/// A stamp for the present moment, as the server makes them.
fn stamp_now() -> (String, SystemTime) {
    let at = SystemTime::now();
    let rfc3339 = humantime::format_rfc3339_micros(at).to_string();
    (rfc3339.replace(['-', ':'], ""), at)
}

/// The ID `list` shows for what lies at `to` (root-relative) in `root`.
fn id_of(root: &str, to: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::new()
        .chain_update(root)
        .chain_update([0])
        .chain_update(to)
        .finalize();
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

#[test]
fn what_a_call_still_running_kept_is_listed_once_it_ends() {
    let env = Env::new();
    env.mkdir("ws");
    // The window a call may still be running in: twice this, and a second.
    let config = env.config(
        r#"
        audit_log = "audit.log"
        tool_timeout_ms = 1000
        [[roots]]
        name = "ws"
        path = "ws"
        role = "workspace"
        "#,
    );
    // What a call that has not ended (no index yet) moved into its stamp.
    let (stamp, at) = stamp_now();
    env.write(&format!("ws/.mcp-trash/{stamp}/tree/a.txt"), "a\n");
    let id = id_of("ws", &format!(".mcp-trash/{stamp}/tree/a.txt"));
    let note = "loom-fs-mcp: 1 trash directory of a call that may still be running is not \
                listed yet; it is once the call ends (at most 3s after it started)\n";

    let out = trash(&config, &["list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // Then what the trash holds, what is in flight included.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{note}loom-fs-mcp: ws  trash holds 2 B of 1 GiB (trash_max_bytes, 0%)\n")
    );
    // Not restored, nor purged, before then either.
    let why = refused(trash(&config, &["restore", &id]));
    assert_eq!(
        why,
        format!("{note}loom-fs-mcp: no trash entry has the ID {id} (see `trash list`)\n")
    );
    assert_eq!(
        ok(trash(
            &config,
            &["purge", "--older-than", "0s", "--dry-run"]
        )),
        "would purge 0 entries (0 bytes) in 0 trash directories\n\
         left 1 trash directory of calls that may still be running\n"
    );

    // This one never writes its index: past the window it lists leaf by
    // leaf, under the ID computed before.
    let past = at + Duration::from_millis(3100);
    std::thread::sleep(past.duration_since(SystemTime::now()).unwrap_or_default());
    let out = trash(&config, &["list"]);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("may still be running"),
        "{out:?}"
    );
    let listed = lines(&ok(out));
    let shown: Vec<(&str, &str)> = listed
        .iter()
        .map(|l| (l.id.as_str(), l.path.as_str()))
        .collect();
    assert_eq!(shown, [(id.as_str(), "tree/a.txt")]);
    assert_eq!(
        ok(trash(&config, &["restore", &id])),
        format!("restored {id}: ws/tree/a.txt\n")
    );
}

/// The names at the top of `ws/.mcp-trash` but the server's own (its
/// staging area, lock file and byte count).
fn trash_top(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.path("ws/.mcp-trash"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".staging" && name != ".locks" && name != ".size")
        .collect()
}
