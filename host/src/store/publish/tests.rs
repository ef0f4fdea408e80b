//! The publish on a real directory: what it keeps, what it puts, what it
//! refuses, and a kill after each step finished from the journal.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::plan::Plan;
use super::steps::{Outcome, run_step, sync_dirs};
use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: Arc<Root>,
    stage: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::TempDir::new().unwrap();
        let root = Arc::new(Root::workspace_for_tests("ws", tmp.path()));
        let stage = PathBuf::from(".mcp-trash/.staging/test/1");
        fs::create_dir_all(tmp.path().join(&stage)).unwrap();
        Fixture {
            _tmp: tmp,
            root,
            stage,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path.join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    fn identity(&self, rel: &str) -> Identity {
        Identity::of(&rustix::fs::lstat(&self.path(rel)).unwrap())
    }

    fn dev(&self) -> u64 {
        self.identity("").dev
    }

    /// A staged file with `text`, by its root-relative path.
    fn staged(&self, name: &str, text: &str) -> PathBuf {
        let rel = self.stage.join(name);
        fs::write(self.root.path.join(&rel), text).unwrap();
        rel
    }

    fn changes(&self, taken: Vec<Taken>, made: Vec<Made>) -> Changes {
        Changes {
            root: Arc::clone(&self.root),
            dev: self.dev(),
            stage: Some(self.stage.clone()),
            stages: vec![],
            taken,
            made,
        }
    }

    fn taken(&self, rel: &str, moved: bool) -> Taken {
        Taken {
            from: rel.into(),
            was: self.identity(rel),
            moved,
        }
    }
}

fn made(at: &str, new: New, check: Check) -> Made {
    Made {
        at: at.into(),
        new,
        check,
        times: None,
    }
}

#[test]
fn a_replaced_file_is_kept_and_the_new_one_put_in_its_place() {
    let f = Fixture::new();
    f.write("a.txt", "old\n");
    fs::set_permissions(
        f.path("a.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let staged = f.staged("f1", "new\n");
    let c = f.changes(
        vec![f.taken("a.txt", false)],
        vec![made(
            "a.txt",
            New::Staged(staged),
            Check::Replaces("a.txt".into()),
        )],
    );
    let done = publish(&[c], "S1").unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("new\n"));
    assert_eq!(f.read(".mcp-trash/S1/a.txt").as_deref(), Some("old\n"));
    assert_eq!(done.kept.len(), 1);
    assert_eq!(done.kept[0].to, ".mcp-trash/S1/a.txt");
    let mode = fs::metadata(f.path("a.txt")).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

#[test]
fn a_change_since_the_call_saw_it_publishes_nothing() {
    let f = Fixture::new();
    f.write("a.txt", "old\n");
    f.write("b.txt", "b\n");
    let taken = vec![f.taken("a.txt", false), f.taken("b.txt", false)];
    // Someone else changes a.txt (a different size) after the call saw it.
    f.write("a.txt", "changed by someone else\n");
    let staged = f.staged("f1", "new\n");
    let c = f.changes(
        taken,
        vec![made(
            "a.txt",
            New::Staged(staged),
            Check::Replaces("a.txt".into()),
        )],
    );
    let e = publish(&[c], "S1").unwrap_err();
    assert!(
        matches!(e, Refused::Conflict { ref path, .. } if path == Path::new("a.txt")),
        "{e:?}"
    );
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("changed by someone else\n")
    );
    assert_eq!(f.read("b.txt").as_deref(), Some("b\n"));
    assert!(!f.path(".mcp-trash/S1").exists());
}

#[test]
fn a_new_file_where_something_appeared_publishes_nothing() {
    let f = Fixture::new();
    let staged = f.staged("f1", "new\n");
    let c = f.changes(
        vec![],
        vec![made(
            "n.txt",
            New::Staged(staged),
            Check::Free("n.txt".into()),
        )],
    );
    f.write("n.txt", "theirs\n");
    assert!(matches!(publish(&[c], "S1"), Err(Refused::Conflict { .. })));
    assert_eq!(f.read("n.txt").as_deref(), Some("theirs\n"));
}

/// A rename of a directory, a file written in it, a removal and a new
/// directory: published in an order that works, each kept version in the
/// trash.
#[test]
fn moves_removals_and_new_entries_publish_together() {
    let f = Fixture::new();
    f.write("a/x.txt", "x\n");
    f.write("a/y.txt", "y\n");
    f.write("gone.txt", "gone\n");
    let staged = f.staged("f1", "x2\n");
    let c = f.changes(
        vec![
            f.taken("a", true),
            f.taken("a/x.txt", false),
            f.taken("gone.txt", false),
        ],
        vec![
            made("b", New::Moved("a".into()), Check::Free("b".into())),
            made(
                "b/x.txt",
                New::Staged(staged),
                Check::Replaces("a/x.txt".into()),
            ),
            made("n", New::Dir, Check::Free("n".into())),
        ],
    );
    let done = publish(&[c], "S1").unwrap();
    assert!(!f.path("a").exists());
    assert_eq!(f.read("b/x.txt").as_deref(), Some("x2\n"));
    assert_eq!(f.read("b/y.txt").as_deref(), Some("y\n"));
    assert!(f.path("n").is_dir());
    assert!(!f.path("gone.txt").exists());
    assert_eq!(f.read(".mcp-trash/S1/gone.txt").as_deref(), Some("gone\n"));
    assert_eq!(f.read(".mcp-trash/S1/a/x.txt").as_deref(), Some("x\n"));
    assert_eq!(done.kept.len(), 2);
}

/// A swap of two files by three renames: both lifted, both put back
/// crossed.
#[test]
fn a_swap_publishes() {
    let f = Fixture::new();
    f.write("a", "A\n");
    f.write("b", "B\n");
    let c = f.changes(
        vec![f.taken("a", true), f.taken("b", true)],
        vec![
            made("a", New::Moved("b".into()), Check::Replaces("a".into())),
            made("b", New::Moved("a".into()), Check::Replaces("b".into())),
        ],
    );
    publish(&[c], "S1").unwrap();
    assert_eq!(f.read("a").as_deref(), Some("B\n"));
    assert_eq!(f.read("b").as_deref(), Some("A\n"));
}

/// The journal's promise: a kill after any step, then the journal run
/// again (as recovery runs it), ends with every change published, each
/// kept version once in the trash, nothing left in the stage.
#[test]
fn a_kill_after_any_step_is_finished_from_the_journal() {
    let setup = || {
        let f = Fixture::new();
        f.write("a.txt", "old a\n");
        f.write("b.txt", "old b\n");
        f.write("d/c.txt", "c\n");
        let sa = f.staged("f1", "new a\n");
        let sb = f.staged("f2", "new b\n");
        let c = f.changes(
            vec![
                f.taken("a.txt", false),
                f.taken("b.txt", false),
                f.taken("d", true),
            ],
            vec![
                made("a.txt", New::Staged(sa), Check::Replaces("a.txt".into())),
                made("b.txt", New::Staged(sb), Check::Replaces("b.txt".into())),
                made("e", New::Moved("d".into()), Check::Free("e".into())),
            ],
        );
        (f, c)
    };
    let (_f, c) = setup();
    let steps = Plan::new(&[&c], "S1").unwrap().steps.len();
    for kill_after in 0..=steps {
        let (f, c) = setup();
        let plan = Plan::new(&[&c], "S1").unwrap();
        plan.check().unwrap();
        assert!(plan.needs_journal());
        let journal =
            super::journal::write(&plan.roots, &plan.stamp, &plan.steps, &plan.stages).unwrap();
        let mut out = Outcome::default();
        for step in &plan.steps[..kill_after] {
            run_step(&plan.roots, &plan.stamp, step, &mut out);
        }
        // Killed here: the journal is in the stage; recovery finishes it.
        drop(journal);
        let stage = crate::sys::beneath::beneath(
            crate::sys::beneath::open_root(&f.root).unwrap(),
            &f.stage,
        )
        .unwrap();
        let recovered = recover_in(&f.root, &stage).unwrap().expect("a journal");
        assert_eq!(
            f.read("a.txt").as_deref(),
            Some("new a\n"),
            "after step {kill_after}"
        );
        assert_eq!(f.read("b.txt").as_deref(), Some("new b\n"));
        assert_eq!(f.read("e/c.txt").as_deref(), Some("c\n"));
        assert!(!f.path("d").exists());
        assert_eq!(f.read(".mcp-trash/S1/a.txt").as_deref(), Some("old a\n"));
        assert_eq!(f.read(".mcp-trash/S1/b.txt").as_deref(), Some("old b\n"));
        assert_eq!(recovered.published.kept.len(), 2, "after step {kill_after}");
        assert!(!f.path(&format!("{}/journal", f.stage.display())).exists());
        let left: Vec<_> = fs::read_dir(f.path(f.stage.to_str().unwrap()))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "nothing staged is left: {left:?}");
        let _ = sync_dirs;
    }
}

/// After a kill, a target someone else changed is not overwritten: the
/// call's version goes to the trash, and is told.
#[test]
fn recovery_never_overwrites_what_someone_else_put_there() {
    let f = Fixture::new();
    f.write("a.txt", "old a\n");
    let sa = f.staged("f1", "new a\n");
    let sn = f.staged("f2", "new n\n");
    let c = f.changes(
        vec![f.taken("a.txt", false)],
        vec![
            made("a.txt", New::Staged(sa), Check::Replaces("a.txt".into())),
            made("n.txt", New::Staged(sn), Check::Free("n.txt".into())),
        ],
    );
    let plan = Plan::new(&[&c], "S1").unwrap();
    plan.check().unwrap();
    super::journal::write(&plan.roots, &plan.stamp, &plan.steps, &plan.stages).unwrap();
    // Killed before any step; meanwhile someone writes both places.
    f.write("a.txt", "theirs a\n");
    f.write("n.txt", "theirs n\n");
    let stage =
        crate::sys::beneath::beneath(crate::sys::beneath::open_root(&f.root).unwrap(), &f.stage)
            .unwrap();
    let recovered = recover_in(&f.root, &stage).unwrap().unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("theirs a\n"));
    assert_eq!(f.read("n.txt").as_deref(), Some("theirs n\n"));
    assert_eq!(
        f.read(".mcp-trash/S1/n.txt.unpublished").as_deref(),
        Some("new n\n")
    );
    assert_eq!(
        f.read(".mcp-trash/S1/a.txt.unpublished").as_deref(),
        Some("new a\n")
    );
    assert_eq!(recovered.published.displaced.len(), 2);
}

/// A reboot after a power cut may number the filesystem anew (btrfs, LVM,
/// FUSE): the journal's identities, taken before it, still match.
#[test]
fn recovery_after_the_device_was_renumbered_finishes_the_publish() {
    let f = Fixture::new();
    f.write("a.txt", "old a\n");
    f.write("b.txt", "old b\n");
    let sa = f.staged("f1", "new a\n");
    let sb = f.staged("f2", "new b\n");
    let c = f.changes(
        vec![f.taken("a.txt", false), f.taken("b.txt", false)],
        vec![
            made("a.txt", New::Staged(sa), Check::Replaces("a.txt".into())),
            made("b.txt", New::Staged(sb), Check::Replaces("b.txt".into())),
        ],
    );
    let plan = Plan::new(&[&c], "S1").unwrap();
    plan.check().unwrap();
    super::journal::write(&plan.roots, &plan.stamp, &plan.steps, &plan.stages).unwrap();
    let mut out = Outcome::default();
    let half = plan.steps.len() / 2;
    for step in &plan.steps[..half] {
        run_step(&plan.roots, &plan.stamp, step, &mut out);
    }
    // Every device number in the journal, as the next boot might give it.
    let path = f.path(&format!("{}/{}", f.stage.display(), super::JOURNAL));
    let mut journal: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    fn renumber(v: &mut serde_json::Value) -> usize {
        match v {
            serde_json::Value::Object(map) => {
                let mut n = 0;
                for (k, v) in map.iter_mut() {
                    if k == "dev" && v.is_u64() {
                        *v = serde_json::json!(v.as_u64().unwrap() ^ 0x5a5a);
                        n += 1;
                    } else {
                        n += renumber(v);
                    }
                }
                n
            }
            serde_json::Value::Array(items) => items.iter_mut().map(renumber).sum(),
            _ => 0,
        }
    }
    assert!(
        renumber(&mut journal) > 0,
        "the journal names devices: {journal}"
    );
    fs::write(&path, serde_json::to_vec(&journal).unwrap()).unwrap();
    let stage =
        crate::sys::beneath::beneath(crate::sys::beneath::open_root(&f.root).unwrap(), &f.stage)
            .unwrap();
    let recovered = recover_in(&f.root, &stage).unwrap().unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("new a\n"));
    assert_eq!(f.read("b.txt").as_deref(), Some("new b\n"));
    assert_eq!(f.read(".mcp-trash/S1/a.txt").as_deref(), Some("old a\n"));
    assert_eq!(f.read(".mcp-trash/S1/b.txt").as_deref(), Some("old b\n"));
    assert!(
        recovered.published.displaced.is_empty(),
        "{:?}",
        recovered.published.displaced
    );
}

/// A journal that cannot be written in one root is no commit: nothing is
/// published, and the journal already written in another root is removed,
/// so that no sweep finishes half a call.
#[test]
fn a_journal_that_cannot_be_written_commits_nothing_in_any_root() {
    let (a, b) = (Fixture::new(), Fixture::new());
    a.write("a.txt", "old a\n");
    b.write("b.txt", "old b\n");
    b.write("c.txt", "old c\n");
    let staged = a.staged("f1", "new a\n");
    let in_a = a.changes(
        vec![a.taken("a.txt", false)],
        vec![made(
            "a.txt",
            New::Staged(staged),
            Check::Replaces("a.txt".into()),
        )],
    );
    // Two removals in `b`, with no stage there to hold its journal.
    let mut in_b = b.changes(
        vec![b.taken("b.txt", false), b.taken("c.txt", false)],
        vec![],
    );
    in_b.stage = None;
    assert!(publish(&[in_a, in_b], "S1").is_err());
    assert_eq!(a.read("a.txt").as_deref(), Some("old a\n"));
    assert_eq!(b.read("b.txt").as_deref(), Some("old b\n"));
    assert_eq!(b.read("c.txt").as_deref(), Some("old c\n"));
    let left: Vec<_> = fs::read_dir(a.path(".mcp-trash/.staging/test/1"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["f1"], "no journal is left to finish");
}
