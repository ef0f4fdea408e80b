//! The read-ahead's own tests: order, what is kept, what it holds, its end.

use rustix::fs::{Mode, OFlags};

use super::*;

fn dir_of(files: &[(&str, &str)]) -> (tempfile::TempDir, OwnedFd) {
    let tmp = tempfile::TempDir::new().unwrap();
    for (name, text) in files {
        std::fs::write(tmp.path().join(name), text).unwrap();
    }
    let fd = rustix::fs::open(
        tmp.path(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    (tmp, fd)
}

/// A read-ahead that is on, whatever the environment says.
fn on() -> Ahead {
    let mut ahead = Ahead::default();
    ahead.off = false;
    ahead
}

/// This process's descriptors of `dir` and what is in it (other tests run
/// beside these).
fn fds_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.starts_with(dir))
        .count()
}

/// A directory of `n` files `f000`… (the i-th holding `text(i)`), opened,
/// and their names in order.
fn numbered(n: usize, text: fn(usize) -> String) -> (tempfile::TempDir, OwnedFd, Vec<Box<str>>) {
    let files: Vec<(String, String)> = (0..n).map(|i| (format!("f{i:03}"), text(i))).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (&a[..], &b[..])).collect();
    let (tmp, dir) = dir_of(&refs);
    let all = files.iter().map(|(n, _)| n.as_str().into()).collect();
    (tmp, dir, all)
}

fn names(n: &[&str]) -> Vec<Box<str>> {
    n.iter().map(|&s| s.into()).collect()
}

#[test]
fn the_files_asked_are_taken_in_order_with_their_heads() {
    let (_tmp, dir) = dir_of(&[("a", "one\n"), ("b", "two\n"), ("c", "three\n")]);
    let mut ahead = on();
    ahead.start(7, dir.as_fd(), names(&["a", "b", "c"]));
    assert!(ahead.reading(7));
    ahead.settle(3);
    // "a" passed over, "b" taken, "c" never asked for.
    let b = ahead.take(7, "b").expect("opened ahead");
    assert_eq!(b.head.as_deref(), Some(&b"two\n"[..]));
    assert_eq!(ahead.passed, 1);
    // Not asked of the worker: the guest's own open.
    assert!(ahead.take(7, "zz").is_none());
    assert!(ahead.take(8, "c").is_none());
}

#[test]
fn what_is_not_a_regular_file_is_not_kept() {
    let (tmp, dir) = dir_of(&[("f", "x\n")]);
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        tmp.path().join("p"),
        Mode::RUSR | Mode::WUSR,
    )
    .unwrap();
    std::os::unix::fs::symlink("f", tmp.path().join("l")).unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let mut ahead = on();
    ahead.start(1, dir.as_fd(), names(&["d", "f", "l", "p"]));
    ahead.settle(4);
    // The FIFO was opened without waiting, and not kept.
    assert!(ahead.take(1, "p").is_none());
    ahead.start(1, dir.as_fd(), names(&["d", "f", "l"]));
    ahead.settle(3);
    assert!(ahead.take(1, "d").is_none());
    assert!(ahead.take(1, "f").is_some());
    assert!(ahead.take(1, "l").is_none(), "a symlink is never followed");
}

#[test]
fn dropping_it_ends_the_worker_and_closes_its_files() {
    let (tmp, dir, all) = numbered(100, |i| "x".repeat(i));
    let open_fds = || fds_under(tmp.path());
    let before = open_fds();
    let mut ahead = on();
    ahead.start(3, dir.as_fd(), all);
    ahead.settle(2);
    assert!(ahead.take(3, "f001").is_some());
    // The worker holds at most AHEAD files (and the directory) ahead.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(open_fds() <= before + AHEAD + 2, "{} open", open_fds());
    drop(ahead);
    assert_eq!(open_fds(), before, "descriptors left open");
}

/// Files taken and dropped at once while the worker is held in a full
/// queue, and directories started one after another faster than the
/// worker takes them: what it holds stays within `MOST_HELD`.
#[test]
fn what_it_holds_is_bounded_whatever_the_guest_does() {
    let (tmp, dir, all) = numbered(300, |_| String::new());
    let open_fds = || fds_under(tmp.path());
    let before = open_fds();
    let mut ahead = on();
    ahead.start(3, dir.as_fd(), all.clone());
    for name in &all[..200] {
        ahead.settle(1);
        if let Some(opened) = ahead.take(3, name) {
            ahead.close(Box::new(opened.file));
        }
        assert!(open_fds() <= before + MOST_HELD, "{} open", open_fds());
    }
    for _ in 0..50 {
        ahead.start(3, dir.as_fd(), all.clone());
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(open_fds() <= before + MOST_HELD, "{} open", open_fds());
    drop(ahead);
    assert_eq!(open_fds(), before);
}

#[test]
fn passing_over_most_turns_it_off() {
    let (_tmp, dir, all) = numbered(400, |_| String::new());
    let mut ahead = on();
    ahead.start(3, dir.as_fd(), all);
    ahead.settle(100);
    assert!(ahead.take(3, "f399").is_none());
    assert!(ahead.off);
    assert!(!ahead.reading(3));
}
