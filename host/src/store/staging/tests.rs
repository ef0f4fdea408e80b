//! The staging area's unit tests: call directories, where each root
//! stages, the area made again, and what the sweep takes.

use super::*;

fn root(dir: &Path) -> Root {
    Root::workspace_for_tests("ws", dir)
}

#[test]
fn a_call_dir_is_emptied_when_dropped_and_reused() {
    let tmp = tempfile::TempDir::new().unwrap();
    let root = root(tmp.path());
    let staging = Staging::new();
    let dir = staging.call_dir(&root, None).unwrap();
    assert!(
        dir.path()
            .starts_with(tmp.path().join(".mcp-trash/.staging"))
    );
    std::fs::create_dir(dir.path().join("tree")).unwrap();
    std::fs::write(dir.path().join("tree/partial"), "half").unwrap();
    let path = dir.path().to_path_buf();
    let other = staging.call_dir(&root, None).unwrap();
    assert_ne!(other.path(), path);
    drop(dir);
    // Emptied, kept for the next call.
    assert!(path.is_dir() && std::fs::read_dir(&path).unwrap().next().is_none());
    assert!(other.path().exists());
    let again = staging.call_dir(&root, None).unwrap();
    assert_eq!(again.path(), path);
    // One that is no longer a directory is not given out again.
    drop(again);
    std::fs::remove_dir(&path).unwrap();
    std::os::unix::fs::symlink(tmp.path(), &path).unwrap();
    let fresh = staging.call_dir(&root, None).unwrap();
    assert_ne!(fresh.path(), path);
    assert!(fresh.path().is_dir());
    std::fs::remove_file(&path).unwrap();
    drop(fresh);
    // Removed by hand while the server runs: made again.
    drop(other);
    std::fs::remove_dir_all(tmp.path().join(".mcp-trash/.staging")).unwrap();
    assert!(staging.call_dir(&root, None).unwrap().path().exists());
}

/// Two roots of one name in two places (two configs, tests in one
/// process): each call stages in its own root, never in the other's.
#[test]
fn roots_of_one_name_stage_each_in_their_own_place() {
    let (a, b) = (
        tempfile::TempDir::new().unwrap(),
        tempfile::TempDir::new().unwrap(),
    );
    let staging = Staging::new();
    for _ in 0..2 {
        for tmp in [&a, &b] {
            let dir = staging.call_dir(&root(tmp.path()), None).unwrap();
            let own = tmp.path().join(".mcp-trash/.staging");
            assert!(
                dir.path().starts_with(&own),
                "{:?} not in {own:?}",
                dir.path()
            );
        }
    }
}

/// A server's directory removed under it (by hand, or a sweep that
/// took it): the next call makes a new one, under a new name, and the
/// old one going leaves the new one alone.
#[test]
fn an_area_removed_under_the_server_is_made_again() {
    let tmp = tempfile::TempDir::new().unwrap();
    let root = root(tmp.path());
    let staging = Staging::new();
    let first = staging.call_dir(&root, None).unwrap();
    let area = first.path().parent().unwrap().to_path_buf();
    drop(first);
    std::fs::remove_dir_all(&area).unwrap();
    for _ in 0..3 {
        let dir = staging.call_dir(&root, None).unwrap();
        assert!(dir.path().is_dir(), "{:?}", dir.path());
        assert_ne!(dir.path().parent().unwrap(), area);
        std::fs::write(dir.path().join("f"), "x").unwrap();
    }
}

/// A call that writes on another filesystem inside the root stages at
/// its top (here a plain directory stands for it); the area there is
/// listed in the root's, and a gone server's is swept there too.
#[test]
fn a_call_stages_at_the_top_it_is_given_and_the_sweep_finds_it() {
    let tmp = tempfile::TempDir::new().unwrap();
    let root = root(tmp.path());
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let staging = Staging::new();
    let dir = staging.call_dir(&root, Some(Path::new("sub"))).unwrap();
    assert!(
        dir.path()
            .starts_with(tmp.path().join("sub/.mcp-trash/.staging"))
    );
    let listed = std::fs::read_to_string(tmp.path().join(".mcp-trash/.staging/nested")).unwrap();
    assert_eq!(listed, "737562\n");
    // Listed once, however many calls.
    drop(staging.call_dir(&root, Some(Path::new("sub"))).unwrap());
    let root_fd = beneath::open_root(&root).unwrap();
    note_nested(&root_fd, Path::new("sub")).unwrap();
    assert_eq!(
        std::fs::read_to_string(tmp.path().join(".mcp-trash/.staging/nested")).unwrap(),
        listed
    );
    let guest = dir.path().to_path_buf();
    std::fs::write(guest.join("temp"), "x").unwrap();
    drop(dir);
    assert!(!guest.join("temp").exists());
    // A killed server's leftovers there.
    let dead = tmp.path().join("sub/.mcp-trash/.staging/1-dead");
    std::fs::create_dir_all(dead.join("7")).unwrap();
    std::fs::write(dead.join("7/partial"), "half").unwrap();
    assert_eq!(sweep(&root, false).unwrap().servers, 1);
    assert!(!dead.exists());
    // A listed top that is gone, or a line that is no plain path: skipped.
    std::fs::write(
        tmp.path().join(".mcp-trash/.staging/nested"),
        "737562\n676f6e65\n2e2e\nzz\n",
    )
    .unwrap();
    assert!(sweep(&root, false).unwrap().is_empty());
}

/// A live server's area is left alone, even its call directories; a
/// gone server's is removed whole.
#[test]
fn the_sweep_takes_only_what_gone_servers_left() {
    let tmp = tempfile::TempDir::new().unwrap();
    let root = root(tmp.path());
    let live = Staging::new();
    let running = live.call_dir(&root, None).unwrap();
    std::fs::write(running.path().join("temp"), "x").unwrap();
    // A server that was killed: its directory, unlocked.
    let dead = tmp.path().join(".mcp-trash/.staging/1-dead");
    std::fs::create_dir_all(dead.join("7")).unwrap();
    std::fs::write(dead.join("7/partial"), "half").unwrap();
    // One killed before it had a call: removed, not counted.
    std::fs::create_dir_all(tmp.path().join(".mcp-trash/.staging/2-idle")).unwrap();
    let dry = sweep(&root, true).unwrap();
    assert_eq!(dry.servers, 1);
    assert!(dead.exists());
    assert_eq!(sweep(&root, false).unwrap().servers, dry.servers);
    assert!(!dead.exists());
    assert!(!tmp.path().join(".mcp-trash/.staging/2-idle").exists());
    assert!(running.path().join("temp").exists());
    assert!(sweep(&root, false).unwrap().is_empty());
    assert!(running.path().join("temp").exists());
    // No staging area at all: nothing to do.
    let empty = tempfile::TempDir::new().unwrap();
    assert!(sweep(&self::root(empty.path()), false).unwrap().is_empty());
}
