use super::*;

const STAMP: &str = "20261201T083145.123456Z";
const OTHER: &str = "20261201T083146.000001Z";
const HOUR: Duration = Duration::from_secs(3600);

/// A workspace root with a budget, in a fresh directory.
fn root(budget: u64) -> (tempfile::TempDir, Arc<Root>) {
    let tmp = tempfile::TempDir::new().unwrap();
    let path = fs::canonicalize(tmp.path()).unwrap();
    let mut root = Root::workspace_for_tests("ws", &path);
    root.trash_max_bytes = budget;
    (tmp, Arc::new(root))
}

/// `bytes` kept under `stamp`, as a guest keeps them.
fn keep(root: &Root, stamp: &str, name: &str, bytes: usize) {
    let dir = root.path.join(TRASH_DIR).join(stamp);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), vec![b'x'; bytes]).unwrap();
}

fn count(root: &Root) -> Count {
    Count::read(root).expect("a count file")
}

#[test]
fn the_count_file_reads_back_and_a_torn_one_reads_as_none() {
    let count = Count {
        kept: 10,
        held: vec![Held {
            stamp: STAMP.into(),
            pid: 7,
            bytes: 3,
            expires: 99,
        }],
    };
    let text = count.render();
    assert_eq!(text, format!("kept 10\nreserved {STAMP} 7 3 99\n"));
    assert_eq!(Count::parse(&text), Some(count.clone()));
    assert_eq!(count.total(), 13);
    for torn in [
        "",
        "kept ",
        "kept 10\nreserved",
        "kept 10\nreserved x 7 3 99\n",
    ] {
        assert_eq!(Count::parse(torn), None, "{torn:?}");
    }
    // A reservation whose call cannot be running any more is counted
    // as kept: the count stays high until a walk.
    assert_eq!(
        count.expired_folded(),
        Count {
            kept: 13,
            held: vec![]
        }
    );
}

#[test]
fn a_call_that_fits_reserves_and_settles_to_what_it_kept() {
    let (_tmp, ws) = root(1000);
    keep(&ws, STAMP, "old.txt", 300);
    assert_eq!(recount(&ws).unwrap(), 300);
    let reserved = reserve(&[(Arc::clone(&ws), 600)], OTHER, HOUR)
        .ok()
        .unwrap();
    assert_eq!(count(&ws).total(), 900);
    // It kept less than it said (a file that shrank meanwhile).
    keep(&ws, OTHER, "b.txt", 200);
    reserved.settle();
    assert_eq!(
        count(&ws),
        Count {
            kept: 500,
            held: vec![]
        }
    );
}

#[test]
fn a_call_past_the_budget_is_refused_after_a_recount_and_changes_nothing() {
    let (_tmp, ws) = root(1000);
    keep(&ws, STAMP, "old.txt", 300);
    recount(&ws).unwrap();
    let (name, over) = reserve(&[(Arc::clone(&ws), 701)], OTHER, HOUR)
        .err()
        .unwrap();
    assert_eq!(name, "ws");
    assert_eq!(
        over,
        OverBudget {
            budget: 1000,
            size: 300,
            needed: 701
        }
    );
    let text = over.text("ws");
    assert!(
        text.starts_with(
            "refused by rule 'trash_budget': root 'ws' keeps at most \
             trash_max_bytes = 1000 (1000 B) in its trash, which holds 300 B (700 B left), \
             and this change would keep 701 B"
        ),
        "{text}"
    );
    assert_eq!(count(&ws).total(), 300);
    // Exactly the room left fits; a call that keeps nothing always does.
    let reserved = reserve(&[(Arc::clone(&ws), 700)], OTHER, HOUR)
        .ok()
        .unwrap();
    assert!(reserve(&[(Arc::clone(&ws), 0)], "20261201T083147.000001Z", HOUR).is_ok());
    drop(reserved);
    assert_eq!(count(&ws).total(), 300);
}

#[test]
fn a_count_left_high_never_refuses_a_call_that_fits() {
    let (_tmp, ws) = root(1000);
    keep(&ws, STAMP, "old.txt", 300);
    // A server killed mid-call left its reservation, and an entry was
    // removed by hand: the count says 1300.
    Count {
        kept: 300,
        held: vec![Held {
            stamp: OTHER.into(),
            pid: 1,
            bytes: 1000,
            expires: 0,
        }],
    }
    .write(&ws);
    fs::remove_dir_all(ws.path.join(TRASH_DIR).join(STAMP)).unwrap();
    let reserved = reserve(&[(Arc::clone(&ws), 900)], STAMP, HOUR)
        .ok()
        .unwrap();
    assert_eq!(count(&ws).total(), 900);
    drop(reserved);
    assert_eq!(count(&ws).total(), 0);
}

#[test]
fn a_recount_leaves_the_entry_of_a_call_in_flight_to_its_reservation() {
    let (_tmp, ws) = root(1000);
    let reserved = reserve(&[(Arc::clone(&ws), 400)], STAMP, HOUR)
        .ok()
        .unwrap();
    // Kept, not yet settled: a walk now must not count it twice.
    keep(&ws, STAMP, "a.txt", 400);
    assert_eq!(recount(&ws).unwrap(), 400);
    reserved.settle();
    assert_eq!(count(&ws).total(), 400);
    assert_eq!(usage(&ws).unwrap().size, 400);
}

#[test]
fn a_reservation_lives_while_its_window_is_open_and_its_process_is_there() {
    let now = unix_secs(SystemTime::now());
    let held = |pid, expires| Held {
        stamp: STAMP.into(),
        pid,
        bytes: 1,
        expires,
    };
    assert!(held(std::process::id(), now + 60).live(now));
    assert!(!held(std::process::id(), now - 1).live(now));
    // A process that is gone (a killed server): no wait for its window.
    assert!(!held(u32::MAX, now + 60).live(now));
    assert!(!held(i32::MAX as u32, now + 60).live(now));
}

#[test]
fn counting_a_root_without_a_trash_makes_nothing() {
    let (tmp, ws) = root(1000);
    assert_eq!(recount(&ws).unwrap(), 0);
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn a_root_without_a_budget_is_not_counted() {
    let (_tmp, ws) = root(0);
    let reserved = reserve(&[(Arc::clone(&ws), u64::MAX)], STAMP, HOUR);
    assert!(reserved.is_ok());
    assert!(!ws.path.join(TRASH_DIR).join(SIZE_FILE).exists());
}

#[test]
fn usage_reads_as_the_operator_reads_it_and_warns_at_80_percent() {
    let usage = |size, budget| Usage { size, budget };
    assert_eq!(
        usage(1536, 1 << 30).text(),
        "1.5 KiB of 1 GiB (trash_max_bytes, 0%)"
    );
    assert_eq!(usage(5, 0).text(), "5 B (no trash_max_bytes)");
    assert_eq!(usage(79, 100).warning("ws"), None);
    assert_eq!(usage(u64::MAX, 0).warning("ws"), None);
    let warning = usage(80, 100).warning("ws").unwrap();
    assert!(
        warning.starts_with("root 'ws': its trash holds 80 B of its trash_max_bytes (100 B, 80%)"),
        "{warning}"
    );
    assert!(warning.contains("loom-fs-mcp trash purge --older-than"));
}

#[test]
fn what_a_delete_would_keep_is_every_file_below_never_through_a_link() {
    let (_tmp, ws) = root(1000);
    let tree = ws.path.join("tree");
    fs::create_dir_all(tree.join("deep")).unwrap();
    fs::write(tree.join("a"), [0; 10]).unwrap();
    fs::write(tree.join("deep/b"), [0; 20]).unwrap();
    std::os::unix::fs::symlink("/usr", tree.join("link")).unwrap();
    assert_eq!(bytes_at(&tree), 30);
    assert_eq!(bytes_at(&tree.join("a")), 10);
    assert_eq!(bytes_at(&tree.join("link")), 0);
    assert_eq!(bytes_at(&tree.join("missing")), 0);
}
