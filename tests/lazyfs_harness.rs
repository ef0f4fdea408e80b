//! The LazyFS harness itself (tests/common/lazyfs.rs), not loom-fs: through
//! its mount, data written without fsync is gone after a power cut, data
//! fsynced (the file and its directory) survives, and so does a rename,
//! which LazyFS passes straight to the underlying directory. Needs
//! `LOOMFS_LAZYFS` (scripts/test builds LazyFS); without it the test says
//! SKIPPED, or fails under `CI=true`.

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use common::lazyfs::LazyFs;

/// Writes `content` to `path`, fsyncs it, then fsyncs its directory.
fn write_synced(path: &Path, content: &[u8]) {
    let mut file = File::create(path).unwrap();
    file.write_all(content).unwrap();
    file.sync_all().unwrap();
    File::open(path.parent().unwrap())
        .unwrap()
        .sync_all()
        .unwrap();
}

/// Asserts that the data written to `name` without fsync did not survive:
/// the file is gone, or (LazyFS passes the create through) shorter.
fn assert_lost(dir: &Path, name: &str, written: &[u8]) {
    let path = dir.join(name);
    if let Ok(after) = fs::read(&path) {
        assert!(
            after.len() < written.len(),
            "{path:?} kept its unsynced data after the power cut: {:?}",
            String::from_utf8_lossy(&after)
        );
    }
}

#[test]
fn a_power_cut_loses_unsynced_data_and_keeps_synced_data() {
    // Declared first, dropped last: after LazyFS is unmounted.
    let under = tempfile::TempDir::new().unwrap();
    let Some(mut lazyfs) = LazyFs::mount(under.path()) else {
        return;
    };
    let mnt = lazyfs.path().to_path_buf();

    let unsynced = b"written, never fsynced".as_slice();
    fs::write(mnt.join("unsynced.txt"), unsynced).unwrap();
    write_synced(&mnt.join("synced.txt"), b"fsynced, file and directory");
    write_synced(&mnt.join("old-name.txt"), b"fsynced, then renamed");
    // Not followed by a directory fsync: LazyFS passes renames (and creates
    // and unlinks) straight to the underlying directory, so a power cut
    // never undoes one.
    fs::rename(mnt.join("old-name.txt"), mnt.join("new-name.txt")).unwrap();

    // Before the cut the mount shows the unsynced data, which LazyFS holds
    // in its cache only.
    assert_eq!(fs::read(mnt.join("unsynced.txt")).unwrap(), unsynced);
    assert_lost(under.path(), "unsynced.txt", unsynced);

    lazyfs.power_cut();

    // The same seen through the mount and in the directory under it.
    for dir in [mnt.as_path(), under.path()] {
        assert_lost(dir, "unsynced.txt", unsynced);
        assert_eq!(
            fs::read(dir.join("synced.txt")).unwrap(),
            b"fsynced, file and directory"
        );
        assert_eq!(
            fs::read(dir.join("new-name.txt")).unwrap(),
            b"fsynced, then renamed"
        );
        assert!(!dir.join("old-name.txt").exists());
    }

    // A second cut works too (LazyFS's completion FIFO would not tell).
    let again = b"written after the first cut".as_slice();
    fs::write(mnt.join("unsynced-2.txt"), again).unwrap();
    assert_eq!(fs::read(mnt.join("unsynced-2.txt")).unwrap(), again);
    lazyfs.power_cut();
    assert_lost(&mnt, "unsynced-2.txt", again);
    assert_eq!(
        fs::read(mnt.join("synced.txt")).unwrap(),
        b"fsynced, file and directory"
    );
}
