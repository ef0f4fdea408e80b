use std::fs::{self, File};

use super::*;
use crate::policy::{DenyList, Role};
use crate::store::Kept;
use crate::store::locks::LOCK_FILE;
use crate::store::staging::STAGING_DIR;
use std::os::unix::fs::symlink;
use tempfile::TempDir;

const STAMP: &str = "20261201T083145.123456Z";
const LATER: &str = "20261201T083146.000001Z";

/// A day after [`LATER`], beside a server with a 30 s tool timeout.
fn long_after() -> Now {
    Now {
        at: stamp_time(LATER).unwrap() + Duration::from_secs(86400),
        in_flight: in_flight(Duration::from_secs(30)),
    }
}

fn now_at(at: SystemTime, in_flight: Duration) -> Now {
    Now { at, in_flight }
}

struct Fixture {
    _tmp: TempDir,
    dir: PathBuf,
    roots: Vec<Arc<Root>>,
}

impl Fixture {
    /// Roots `ws` (workspace) and `docs` (reference), beside `outside`.
    fn new() -> Fixture {
        let tmp = TempDir::new().unwrap();
        let dir = fs::canonicalize(tmp.path()).unwrap();
        let roots = [("ws", Role::Workspace), ("docs", Role::Reference)]
            .into_iter()
            .map(|(name, role)| {
                fs::create_dir(dir.join(name)).unwrap();
                Arc::new(Root {
                    name: name.into(),
                    path: dir.join(name),
                    role,
                    perms: role.ceiling(),
                    deny: DenyList::new([]).unwrap(),
                    extra_deny: vec![],
                    max_read_bytes: 1 << 20,
                    max_document_bytes: 64 << 20,
                    min_free_bytes: 0,
                    trash_max_bytes: 0,
                    repository: None,
                })
            })
            .collect();
        fs::create_dir(dir.join("outside")).unwrap();
        Fixture {
            _tmp: tmp,
            dir,
            roots,
        }
    }

    fn ws(&self) -> &Arc<Root> {
        &self.roots[0]
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// Keeps `from` (in `ws`) under `stamp` as a guest would, and
    /// records it.
    fn keep(&self, stamp: &str, from: &str) -> Kept {
        let to = format!("{TRASH_DIR}/{stamp}/{from}");
        let at = self.dir.join("ws").join(&to);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        fs::rename(self.dir.join("ws").join(from), at).unwrap();
        let kept = Kept {
            root: "ws".into(),
            from: from.into(),
            to,
        };
        record(self.ws(), stamp, std::slice::from_ref(&kept)).unwrap();
        kept
    }

    /// Every entry, long after any call could still be running.
    fn entries(&self) -> Vec<Entry> {
        list(&self.roots, None, long_after()).unwrap().entries
    }

    fn list(&self) -> Vec<(String, String, u64)> {
        self.entries()
            .into_iter()
            .map(|e| (e.stamp, e.from.to_string_lossy().into_owned(), e.size))
            .collect()
    }
}

#[test]
fn ids_are_stable_and_short() {
    // The SHA-256 of "ws\0.mcp-trash/20261201T083145.123456Z/a.txt":
    // the same on every platform and toolchain, forever.
    let to = Path::new(".mcp-trash/20261201T083145.123456Z/a.txt");
    let full = id("ws", to);
    assert_eq!(full.len(), FULL_ID_DIGITS);
    assert_eq!(&full[..16], "41816a2fe7fce690");
    assert_ne!(id("docs", to), full, "the root is part of the ID");

    let f = Fixture::new();
    f.write("ws/a.txt", "alpha\n");
    f.keep(STAMP, "a.txt");
    let entries = f.entries();
    assert_eq!(short_ids(&entries), [&full[..ID_DIGITS]]);
    assert_eq!(entries[0].to, to);
    assert_eq!(
        entries[0].line(&full[..ID_DIGITS]),
        format!(
            "{}\tws\ta.txt\t2026-12-01T08:31:45.123456Z\t6\t{STAMP}",
            &full[..ID_DIGITS]
        )
    );
}

#[test]
fn shared_digits_lengthen_the_shown_ids_only() {
    let f = Fixture::new();
    f.write("ws/a.txt", "a");
    f.keep(STAMP, "a.txt");
    let one = f.entries().remove(0);
    let with_id = |id: &str| Entry {
        id: id.into(),
        ..one.clone()
    };
    let entries = [
        with_id("abcdef0123"),
        with_id("abcdef0199"),
        with_id("12345678ff"),
    ];
    assert_eq!(short_ids(&entries), ["abcdef012", "abcdef019", "12345678"]);
    assert_eq!(find(&entries, "ABCDEF012").unwrap(), 0);
    assert_eq!(find(&entries, "1234").unwrap(), 2);
    assert!(matches!(
        find(&entries, "abcd"),
        Err(TrashError::AmbiguousId { count: 2, .. })
    ));
    assert!(matches!(
        find(&entries, "9999"),
        Err(TrashError::UnknownId(_))
    ));
    for bad in ["abc", "xyz12", "", "../a", &"a".repeat(65)] {
        assert!(
            matches!(find(&entries, bad), Err(TrashError::BadId(_))),
            "{bad}"
        );
    }
}

#[test]
fn stamps_are_read_as_times() {
    let at = stamp_time(STAMP).unwrap();
    assert_eq!(
        humantime::format_rfc3339_micros(at).to_string(),
        "2026-12-01T08:31:45.123456Z"
    );
    let made = crate::store::trash_stamp();
    assert!(stamp_time(&made).is_some(), "{made}");
    for bad in [
        "",
        "old",
        "20261201T083145.123456",
        "20261301T083145.123456Z",
        "2026120xT083145.123456Z",
        "20261201T083145.1234567Z",
    ] {
        assert!(stamp_time(bad).is_none(), "{bad}");
    }
}

#[test]
fn a_directory_kept_whole_is_one_entry_and_sizes_add_up() {
    let f = Fixture::new();
    f.write("ws/tree/one.txt", "1\n");
    f.write("ws/tree/deep/two.txt", "22\n");
    symlink("../../outside", f.dir.join("ws/tree/out")).unwrap();
    f.write("outside/big.txt", &"x".repeat(1000));
    f.keep(STAMP, "tree");
    f.write("ws/a/b.txt", "overwritten");
    f.keep(LATER, "a/b.txt");
    // Oldest first; the symlink counts for nothing, its target is not read.
    assert_eq!(
        f.list(),
        [
            (STAMP.to_string(), "tree".to_string(), 5),
            (LATER.to_string(), "a/b.txt".to_string(), 11),
        ]
    );
    let index = fs::read_to_string(f.dir.join(format!("ws/.mcp-trash/{STAMP}.json"))).unwrap();
    assert_eq!(
        index,
        format!(r#"{{"entries":[{{"from":"tree","to":".mcp-trash/{STAMP}/tree"}}]}}"#)
    );
}

#[test]
fn without_an_index_every_leaf_is_an_entry() {
    let f = Fixture::new();
    f.write(&format!("ws/.mcp-trash/{STAMP}/notes/n.txt"), "note");
    f.write(&format!("ws/.mcp-trash/{STAMP}/top.txt"), "top!!");
    fs::create_dir_all(f.dir.join(format!("ws/.mcp-trash/{STAMP}/empty"))).unwrap();
    symlink(
        "../../../../outside",
        f.dir.join(format!("ws/.mcp-trash/{STAMP}/link")),
    )
    .unwrap();
    // Not stamps: left alone.
    f.write("ws/.mcp-trash/old/x.txt", "x");
    f.write("ws/.mcp-trash/.20261201T083145.123456Z.json.1.tmp", "{");
    let got: Vec<(String, u64)> = f.list().into_iter().map(|(_, p, s)| (p, s)).collect();
    assert_eq!(
        got,
        [
            ("empty".to_string(), 0),
            ("link".to_string(), 0),
            ("notes/n.txt".to_string(), 4),
            ("top.txt".to_string(), 5),
        ]
    );
    // An index that cannot be read is the same as none.
    f.write(&format!("ws/.mcp-trash/{STAMP}.json"), "not json");
    assert_eq!(f.list().len(), 4);
}

#[test]
fn malformed_index_entries_are_ignored() {
    let f = Fixture::new();
    f.write(&format!("ws/.mcp-trash/{STAMP}/good.txt"), "good");
    f.write(&format!("ws/.mcp-trash/{LATER}/other.txt"), "other");
    f.write("ws/.mcp-trash/x.txt", "x");
    f.write("outside/secret.txt", "secret");
    let entries: Vec<serde_json::Value> = [
        ("good.txt", format!(".mcp-trash/{STAMP}/good.txt")),
        ("../escape", format!(".mcp-trash/{STAMP}/good.txt")),
        ("/abs", format!(".mcp-trash/{STAMP}/good.txt")),
        ("", format!(".mcp-trash/{STAMP}/good.txt")),
        ("./dot", format!(".mcp-trash/{STAMP}/good.txt")),
        (
            "a",
            format!(".mcp-trash/{STAMP}/../../../outside/secret.txt"),
        ),
        ("a", format!(".mcp-trash/{LATER}/other.txt")),
        ("a", ".mcp-trash/x.txt".to_string()),
        ("a", format!(".mcp-trash/{STAMP}")),
        ("a", format!("/.mcp-trash/{STAMP}/good.txt")),
        ("a", format!(".mcp-trash/{STAMP}/missing.txt")),
        ("again", format!(".mcp-trash/{STAMP}//good.txt")),
    ]
    .into_iter()
    .map(|(from, to)| serde_json::json!({"from": from, "to": to}))
    .collect();
    f.write(
        &format!("ws/.mcp-trash/{STAMP}.json"),
        &serde_json::json!({ "entries": entries }).to_string(),
    );
    let got: Vec<(String, String)> = f.list().into_iter().map(|(s, p, _)| (s, p)).collect();
    assert_eq!(
        got,
        [
            (STAMP.to_string(), "good.txt".to_string()),
            (LATER.to_string(), "other.txt".to_string()),
        ]
    );
}

#[test]
fn a_symlinked_trash_is_refused() {
    let f = Fixture::new();
    f.write("outside/.mcp-trash/20261201T083145.123456Z/a.txt", "a");
    symlink("../outside/.mcp-trash", f.dir.join("ws/.mcp-trash")).unwrap();
    let refused = list(&f.roots, None, long_after()).unwrap_err();
    assert!(matches!(refused, TrashError::Symlink { ref path, .. } if path == ".mcp-trash"));
    assert!(matches!(
        purge(&f.roots, None, Duration::ZERO, long_after(), false),
        Err(TrashError::Symlink { .. })
    ));
    assert!(
        f.dir
            .join("outside/.mcp-trash/20261201T083145.123456Z/a.txt")
            .exists()
    );
    // Nothing is recorded through it either.
    let kept = Kept {
        root: "ws".into(),
        from: "a.txt".into(),
        to: format!(".mcp-trash/{STAMP}/a.txt"),
    };
    assert!(record(f.ws(), STAMP, &[kept]).is_err());
    assert!(
        !f.dir
            .join(format!("outside/.mcp-trash/{STAMP}.json"))
            .exists()
    );

    fs::remove_file(f.dir.join("ws/.mcp-trash")).unwrap();
    fs::create_dir(f.dir.join("ws/.mcp-trash")).unwrap();
    symlink(
        "../../outside/.mcp-trash/20261201T083145.123456Z",
        f.dir.join(format!("ws/.mcp-trash/{STAMP}")),
    )
    .unwrap();
    let refused = list(&f.roots, None, long_after()).unwrap_err().to_string();
    assert_eq!(
        refused,
        format!(
            "root 'ws': .mcp-trash/{STAMP} is a symbolic link; the trash is never followed \
             through one (look at where it points, then remove it)"
        )
    );
    assert!(
        f.dir
            .join("outside/.mcp-trash/20261201T083145.123456Z/a.txt")
            .exists()
    );
}

#[test]
fn restore_puts_back_and_cleans_up() {
    let f = Fixture::new();
    f.write("ws/a/b/c.txt", "deep");
    f.write("ws/a/keep.txt", "stays");
    f.keep(STAMP, "a/b/c.txt");
    fs::remove_dir(f.dir.join("ws/a/b")).unwrap();
    let entries = f.entries();
    let restored = restore(&f.roots, &entries[0], None).unwrap();
    assert_eq!(restored.path, Path::new("a/b/c.txt"));
    assert_eq!(
        fs::read_to_string(f.dir.join("ws/a/b/c.txt")).unwrap(),
        "deep"
    );
    // The stamp is gone, index and all; the trash itself stays.
    let left = top(&f);
    assert!(left.is_empty(), "{left:?}");

    // Two entries in one stamp (a second record adds to the index):
    // restoring one keeps the other indexed.
    f.write("ws/x.txt", "x");
    f.write("ws/y.txt", "y");
    f.keep(LATER, "x.txt");
    f.keep(LATER, "y.txt");
    let entries = f.entries();
    assert_eq!(entries.len(), 2);
    restore(&f.roots, &entries[0], None).unwrap();
    assert_eq!(fs::read_to_string(f.dir.join("ws/x.txt")).unwrap(), "x");
    assert_eq!(f.list(), [(LATER.to_string(), "y.txt".to_string(), 1)]);
    let index = fs::read_to_string(f.dir.join(format!("ws/.mcp-trash/{LATER}.json"))).unwrap();
    assert_eq!(
        index,
        format!(r#"{{"entries":[{{"from":"y.txt","to":".mcp-trash/{LATER}/y.txt"}}]}}"#)
    );
}

#[test]
fn restore_refuses_occupied_escaping_and_denied_destinations() {
    let f = Fixture::new();
    f.write("ws/a.txt", "old");
    f.keep(STAMP, "a.txt");
    f.write("ws/a.txt", "new");
    symlink("../outside", f.dir.join("ws/out")).unwrap();
    symlink("missing.txt", f.dir.join("ws/dangling")).unwrap();
    let entry = f.entries().remove(0);
    let err = restore(&f.roots, &entry, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "root 'ws': 'a.txt' is occupied; nothing was changed (restore elsewhere with --to \
         NEW_PATH)"
    );
    for (to, rule) in [
        ("../outside/a.txt", Some(Rule::Confinement)),
        ("out/a.txt", Some(Rule::Confinement)),
        ("/etc/a.txt", Some(Rule::AbsolutePath)),
        (".env", Some(Rule::Deny)),
        (".mcp-trash/a.txt", Some(Rule::Deny)),
        ("", None),
        (".", None),
        ("dangling", None),
    ] {
        match (restore(&f.roots, &entry, Some(to)), rule) {
            (Err(TrashError::Refused { rule: got, .. }), Some(rule)) => {
                assert_eq!(got, rule, "{to}")
            }
            (Err(TrashError::Occupied { .. }), None) => {}
            (other, _) => panic!("{to}: {other:?}"),
        }
    }
    assert!(
        fs::read_dir(f.dir.join("outside"))
            .unwrap()
            .next()
            .is_none()
    );
    assert_eq!(fs::read_to_string(f.dir.join("ws/a.txt")).unwrap(), "new");
    assert_eq!(f.list().len(), 1);
    let restored = restore(&f.roots, &entry, Some("old/a.txt")).unwrap();
    assert_eq!(restored.path, Path::new("old/a.txt"));
    assert_eq!(
        fs::read_to_string(f.dir.join("ws/old/a.txt")).unwrap(),
        "old"
    );
    assert!(f.list().is_empty());
}

#[test]
fn the_final_move_never_replaces() {
    // What appears at the destination after the checks (a race) stays.
    let f = Fixture::new();
    f.write("ws/a.txt", "kept");
    f.keep(STAMP, "a.txt");
    f.write("ws/a.txt", "raced in");
    let to = PathBuf::from(format!(".mcp-trash/{STAMP}/a.txt"));
    let moved = move_into_place(f.ws(), &to, Path::new("a.txt"));
    assert!(matches!(moved, Err(Moved::Occupied)), "{moved:?}");
    assert_eq!(
        fs::read_to_string(f.dir.join("ws/a.txt")).unwrap(),
        "raced in"
    );
    assert_eq!(
        fs::read_to_string(f.dir.join("ws").join(&to)).unwrap(),
        "kept"
    );
    // A parent swapped for a symlink out is not followed.
    f.write("ws/sub/x", "x");
    fs::remove_dir_all(f.dir.join("ws/sub")).unwrap();
    symlink("../outside", f.dir.join("ws/sub")).unwrap();
    let moved = move_into_place(f.ws(), &to, Path::new("sub/a.txt"));
    assert!(matches!(moved, Err(Moved::Failed(_))), "{moved:?}");
    assert!(
        fs::read_dir(f.dir.join("outside"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn purge_goes_by_age_and_spares_calls_in_flight() {
    let f = Fixture::new();
    f.write("ws/a.txt", "a");
    f.keep(STAMP, "a.txt");
    f.write(&format!("ws/.mcp-trash/{LATER}/b.txt"), "bb");
    let at = stamp_time(LATER).unwrap();
    let hour = Duration::from_secs(3600);
    // Nothing is an hour old yet.
    let purged = purge(&f.roots, None, hour, now_at(at, Duration::ZERO), false).unwrap();
    assert!(purged.entries.is_empty());
    assert_eq!(f.list().len(), 2);
    // Dry: said, not done.
    let later = at + 2 * hour;
    let dry = purge(
        &f.roots,
        Some("ws"),
        hour,
        now_at(later, Duration::ZERO),
        true,
    )
    .unwrap();
    assert_eq!((dry.entries.len(), dry.dirs), (2, 2));
    assert_eq!(f.list().len(), 2);
    // The unindexed stamp may belong to a call still running.
    let purged = purge(&f.roots, None, Duration::ZERO, now_at(at, hour), false).unwrap();
    assert_eq!((purged.entries.len(), purged.in_flight), (1, 1));
    assert_eq!(purged.entries[0].from, Path::new("a.txt"));
    assert_eq!(f.list(), [(LATER.to_string(), "b.txt".to_string(), 2)]);
    let purged = purge(&f.roots, None, Duration::ZERO, now_at(later, hour), false).unwrap();
    assert_eq!(purged.entries.len(), 1);
    assert!(f.list().is_empty());
    assert!(top(&f).is_empty());
    assert!(matches!(
        purge(&f.roots, Some("nope"), hour, now_at(later, hour), false),
        Err(TrashError::UnknownRoot { .. })
    ));
}

/// The names at the top of `ws`'s trash.
fn top(f: &Fixture) -> Vec<String> {
    // The lock file and the staging area are the host's, no entries.
    let mut names: Vec<String> = fs::read_dir(f.dir.join("ws/.mcp-trash"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != LOCK_FILE && name != STAGING_DIR)
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_index_write_leaves_no_temporary_file() {
    use landlock::{
        ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus,
    };
    let f = Fixture::new();
    f.write(&format!("ws/.mcp-trash/{STAMP}/a.txt"), "a");
    let ws = Arc::clone(f.ws());
    let kept = Kept {
        root: "ws".into(),
        from: "a.txt".into(),
        to: format!(".mcp-trash/{STAMP}/a.txt"),
    };
    // As under Landlock on a root with `permissions = ["read", "delete"]`:
    // the kernel creates the temporary file, then refuses to open it for
    // writing. Only the spawned thread is restricted.
    let recorded = std::thread::spawn(move || {
        let granted =
            AccessFs::ReadDir | AccessFs::ReadFile | AccessFs::MakeReg | AccessFs::RemoveFile;
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI::V1))
            .unwrap()
            .create()
            .unwrap()
            .add_rule(PathBeneath::new(PathFd::new(&ws.path).unwrap(), granted))
            .unwrap()
            .restrict_self()
            .unwrap();
        (status.ruleset == RulesetStatus::FullyEnforced).then(|| record(&ws, STAMP, &[kept]))
    })
    .join()
    .unwrap();
    let Some(recorded) = recorded else {
        eprintln!("this kernel has no Landlock: skipped");
        return;
    };
    let e = recorded.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert_eq!(top(&f), [STAMP]);
}

#[test]
fn purge_removes_stale_temporary_index_files_only() {
    let f = Fixture::new();
    let at = stamp_time(LATER).unwrap();
    let hour = Duration::from_secs(3600);
    let temp = |pid, changed| {
        let name = temp_name(STAMP, pid);
        f.write(&format!("ws/.mcp-trash/{name}"), "{");
        File::options()
            .write(true)
            .open(f.dir.join("ws/.mcp-trash").join(&name))
            .unwrap()
            .set_modified(changed)
            .unwrap();
        name
    };
    let stale = temp(1, at - 2 * hour);
    let fresh = temp(2, at);
    f.write("ws/.mcp-trash/.notes.tmp", "not ours");
    assert!(is_temp_name(&stale) && !is_temp_name(".notes.tmp"));
    let now = now_at(at + Duration::from_secs(1), hour);
    // Litter, not entries: removed whatever `--older-than` says.
    let month = 30 * 24 * hour;
    let dry = purge(&f.roots, None, month, now, true).unwrap();
    assert_eq!((dry.temps, dry.entries.len()), (1, 0));
    assert_eq!(top(&f).len(), 3);
    let purged = purge(&f.roots, None, month, now, false).unwrap();
    assert_eq!(purged.temps, 1);
    // The fresh one may be an index being written right now.
    assert_eq!(top(&f), [fresh, ".notes.tmp".to_string()]);
}

#[test]
fn removal_goes_through_the_trash_opened_not_its_path() {
    // `.mcp-trash` swapped for a symlink out after it was opened:
    // between a purge's listing and its removal, or a restore's move
    // and its clean-up.
    let f = Fixture::new();
    f.write(&format!("ws/.mcp-trash/{STAMP}/a.txt"), "a");
    fs::create_dir_all(f.dir.join(format!("ws/.mcp-trash/{LATER}/x/y"))).unwrap();
    f.write(&format!("outside/{STAMP}/secret.txt"), "secret");
    fs::create_dir_all(f.dir.join(format!("outside/{LATER}/x/y"))).unwrap();
    let trash = TrashDir::open(f.ws()).unwrap().unwrap();
    let stamp = contents(f.ws(), &trash).unwrap().stamps.remove(0);
    assert_eq!(stamp.name, STAMP);
    fs::rename(f.dir.join("ws/.mcp-trash"), f.dir.join("ws/moved")).unwrap();
    symlink("../outside", f.dir.join("ws/.mcp-trash")).unwrap();

    remove_stamp(f.ws(), &trash, &stamp).unwrap();
    remove_emptied(&trash, &Path::new(LATER).join("x/y"));
    assert_eq!(
        fs::read_to_string(f.dir.join(format!("outside/{STAMP}/secret.txt"))).unwrap(),
        "secret"
    );
    assert!(f.dir.join(format!("outside/{LATER}/x/y")).is_dir());
    assert!(
        fs::read_dir(f.dir.join("ws/moved"))
            .unwrap()
            .next()
            .is_none(),
        "the trash opened is the one emptied"
    );
}

#[test]
fn purge_unlinks_symlinks_in_a_stamp_never_what_they_point_to() {
    let f = Fixture::new();
    f.write("outside/keep/file.txt", "outside");
    f.write(&format!("ws/.mcp-trash/{STAMP}/tree/deep/f.txt"), "f");
    let stamp_dir = f.dir.join(format!("ws/.mcp-trash/{STAMP}"));
    symlink(
        f.dir.join("outside/keep"),
        stamp_dir.join("tree/deep/dir_link"),
    )
    .unwrap();
    symlink(
        f.dir.join("outside/keep/file.txt"),
        stamp_dir.join("file_link"),
    )
    .unwrap();
    let purged = purge(&f.roots, None, Duration::ZERO, long_after(), false).unwrap();
    assert_eq!((purged.dirs, purged.entries.len()), (1, 3));
    assert!(top(&f).is_empty());
    assert_eq!(
        fs::read_to_string(f.dir.join("outside/keep/file.txt")).unwrap(),
        "outside"
    );
}

#[test]
fn a_call_in_flight_is_not_listed_until_its_index_is_written() {
    let f = Fixture::new();
    let window = Duration::from_secs(61);
    let running = now_at(stamp_time(STAMP).unwrap() + Duration::from_secs(1), window);
    // A call deleting `tree` has moved it into its stamp, and not ended.
    f.write("ws/tree/one.txt", "1");
    f.write("ws/tree/two.txt", "22");
    fs::create_dir_all(f.dir.join(format!("ws/.mcp-trash/{STAMP}"))).unwrap();
    let to = format!(".mcp-trash/{STAMP}/tree");
    fs::rename(f.dir.join("ws/tree"), f.dir.join("ws").join(&to)).unwrap();
    let listing = list(&f.roots, None, running).unwrap();
    assert_eq!((listing.entries.len(), listing.in_flight), (0, 1));
    // What is not listed cannot be restored: its leaves' IDs would
    // name nothing once the index makes the tree one entry.
    let leaf = id("ws", &Path::new(&to).join("one.txt"));
    assert!(matches!(
        find(&listing.entries, &leaf),
        Err(TrashError::UnknownId(_))
    ));
    let purged = purge(&f.roots, None, Duration::ZERO, running, false).unwrap();
    assert_eq!((purged.entries.len(), purged.in_flight), (0, 1));

    // It ends: one entry, under the ID it keeps from then on.
    let kept = Kept {
        root: "ws".into(),
        from: "tree".into(),
        to: to.clone(),
    };
    record(f.ws(), STAMP, &[kept]).unwrap();
    let tree = id("ws", Path::new(&to));
    for now in [running, long_after()] {
        let listing = list(&f.roots, None, now).unwrap();
        let ids: Vec<&str> = listing.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!((ids, listing.in_flight), (vec![tree.as_str()], 0));
    }

    // A call that never wrote its index (it failed, or its server
    // died) lists leaf by leaf once the window is past.
    f.write(&format!("ws/.mcp-trash/{LATER}/lost/x.txt"), "x");
    assert_eq!(list(&f.roots, None, running).unwrap().in_flight, 1);
    let past = now_at(stamp_time(LATER).unwrap() + window, window);
    let listing = list(&f.roots, None, past).unwrap();
    let paths: Vec<&Path> = listing.entries.iter().map(|e| e.from.as_path()).collect();
    assert_eq!(
        (paths, listing.in_flight),
        (vec![Path::new("tree"), Path::new("lost/x.txt")], 0)
    );
}
