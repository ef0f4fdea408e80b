//! The Windows primitives against a real Windows filesystem API: run
//! under Wine on Linux by `scripts/windows-test` (docs/platforms.md).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{AsHandle, OwnedHandle};
use std::path::Path;

use windows_sys::Wdk::Storage::FileSystem::{FILE_CREATE, FILE_DIRECTORY_FILE, FILE_OPEN};
use windows_sys::Win32::Foundation::{
    ERROR_CANT_RESOLVE_FILENAME, ERROR_DIRECTORY, ERROR_INVALID_NAME, ERROR_NOT_SAME_DEVICE,
};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_GENERIC_READ, FILE_GENERIC_WRITE, FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES,
    FILE_TRAVERSE,
};

use super::beneath::{beneath, wide};
use super::lock::{Lock, lock, unlock};
use super::nt::{self, Kind, Open, Target};
use super::rename::{hard_link, rename_noreplace, replace_keeping};
use super::{entries, info};

const DIR: Open = Open {
    access: FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES,
    disposition: FILE_OPEN,
    options: FILE_DIRECTORY_FILE,
};
const READ: Open = Open {
    access: FILE_GENERIC_READ,
    disposition: FILE_OPEN,
    options: 0,
};
const MOVE: Open = Open {
    access: DELETE | FILE_READ_ATTRIBUTES,
    disposition: FILE_OPEN,
    options: 0,
};

fn root(path: &Path) -> OwnedHandle {
    // A directory opens with backup semantics only.
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
        .unwrap()
        .into()
}

fn open(dir: &OwnedHandle, path: &str, how: Open, follow: bool) -> io::Result<OwnedHandle> {
    beneath(dir.as_handle(), &wide(OsStr::new(path)), how, follow)
}

fn read(h: OwnedHandle) -> String {
    io::read_to_string(fs::File::from(h)).unwrap()
}

fn code(e: io::Error) -> Option<i32> {
    e.raw_os_error()
}

/// A tree: `root/a/b/file.txt` ("inner"), `outside.txt` beside the root.
fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("root");
    fs::create_dir_all(r.join("a").join("b")).unwrap();
    fs::write(r.join("a").join("b").join("file.txt"), "inner").unwrap();
    fs::write(tmp.path().join("outside.txt"), "outside").unwrap();
    (tmp, r)
}

#[test]
fn one_name_is_opened_relative_to_the_directory_handle() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let a = nt::open_at(d.as_handle(), OsStr::new("a"), DIR).unwrap();
    assert_eq!(nt::kind(a.as_handle()).unwrap(), Kind::Directory);
    let b = nt::open_at(a.as_handle(), OsStr::new("b"), DIR).unwrap();
    let f = nt::open_at(b.as_handle(), OsStr::new("file.txt"), READ).unwrap();
    assert_eq!(nt::kind(f.as_handle()).unwrap(), Kind::Other);
    assert_eq!(read(f), "inner");
}

#[test]
fn what_is_not_one_name_is_refused_before_any_open() {
    let (_tmp, r) = tree();
    let d = root(&r);
    for name in [
        "",
        ".",
        "..",
        "a\\b",
        "a/b",
        "..\\outside.txt",
        "file.txt:stream",
        "C:x",
        "a\0",
    ] {
        let e = nt::open_at(d.as_handle(), OsStr::new(name), READ).unwrap_err();
        assert_eq!(code(e), Some(ERROR_INVALID_NAME as i32), "{name:?}");
    }
}

#[test]
fn a_path_is_walked_beneath_the_root_and_never_above_it() {
    let (_tmp, r) = tree();
    let d = root(&r);
    assert_eq!(
        read(open(&d, "a\\b\\file.txt", READ, true).unwrap()),
        "inner"
    );
    assert_eq!(
        read(open(&d, "a/./b//file.txt", READ, true).unwrap()),
        "inner"
    );
    assert_eq!(
        read(open(&d, "a\\..\\a\\b\\file.txt", READ, true).unwrap()),
        "inner"
    );
    for escape in [
        "..\\outside.txt",
        "a\\..\\..\\outside.txt",
        "\\outside.txt",
        "/x",
        "..",
    ] {
        let e = open(&d, escape, READ, true).unwrap_err();
        assert_eq!(code(e), Some(ERROR_NOT_SAME_DEVICE as i32), "{escape}");
    }
    let e = open(&d, "a\\b\\file.txt\\x", READ, true).unwrap_err();
    assert_eq!(code(e), Some(ERROR_DIRECTORY as i32));
    let e = open(&d, "a\\b\\file.txt\\", READ, true).unwrap_err();
    assert_eq!(code(e), Some(ERROR_DIRECTORY as i32));
    let e = open(&d, "a\\missing\\file.txt", READ, true).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    // A drive-relative or stream name is no name at all.
    for bad in ["C:x", "a\\b\\file.txt:stream"] {
        let e = open(&d, bad, READ, true).unwrap_err();
        assert_eq!(code(e), Some(ERROR_INVALID_NAME as i32), "{bad}");
    }
}

#[test]
fn the_last_name_is_made_only_by_a_creating_open() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let make = Open {
        access: FILE_GENERIC_WRITE,
        disposition: FILE_CREATE,
        options: 0,
    };
    drop(open(&d, "a\\new.txt", make, false).unwrap());
    assert!(r.join("a").join("new.txt").is_file());
    let e = open(&d, "a\\new.txt", make, false).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    let e = open(&d, "a\\new2.txt\\", make, false).unwrap_err();
    assert_eq!(code(e), Some(ERROR_DIRECTORY as i32));
    assert!(!r.join("a").join("new2.txt").exists());
    let e = open(&d, "a\\gone\\new.txt", make, false).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    assert!(!r.join("a").join("gone").exists());
}

#[test]
fn held_directory_handles_outlive_a_rename_of_their_path() {
    // A directory renamed after it was entered: names under the handle
    // are still its own, not whatever now stands at the old path.
    let (_tmp, r) = tree();
    let d = root(&r);
    let a = open(&d, "a", DIR, true).unwrap();
    fs::rename(r.join("a"), r.join("moved")).unwrap();
    fs::create_dir_all(r.join("a").join("b")).unwrap();
    fs::write(r.join("a").join("b").join("file.txt"), "impostor").unwrap();
    assert_eq!(read(open(&a, "b\\file.txt", READ, true).unwrap()), "inner");
    let again = nt::reopen(a.as_handle(), DIR).unwrap();
    assert_eq!(
        nt::identity(again.as_handle()).unwrap(),
        nt::identity(a.as_handle()).unwrap()
    );
}

#[test]
fn identity_is_the_same_for_the_same_file_only() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let one = open(&d, "a\\b\\file.txt", READ, true).unwrap();
    let two = open(&d, "a\\b\\file.txt", READ, true).unwrap();
    fs::write(r.join("other.txt"), "x").unwrap();
    let other = open(&d, "other.txt", READ, true).unwrap();
    let id = nt::identity(one.as_handle()).unwrap();
    assert_eq!(id, nt::identity(two.as_handle()).unwrap());
    assert_ne!(id, nt::identity(other.as_handle()).unwrap());
}

#[test]
fn a_rename_never_replaces_and_is_relative_to_a_handle() {
    let (_tmp, r) = tree();
    fs::write(r.join("x.txt"), "x").unwrap();
    fs::write(r.join("y.txt"), "y").unwrap();
    let d = root(&r);
    let x = open(&d, "x.txt", MOVE, false).unwrap();
    let e = rename_noreplace(x.as_handle(), d.as_handle(), OsStr::new("y.txt")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read_to_string(r.join("y.txt")).unwrap(), "y");
    assert_eq!(fs::read_to_string(r.join("x.txt")).unwrap(), "x");
    let b = open(&d, "a\\b", DIR, true).unwrap();
    rename_noreplace(x.as_handle(), b.as_handle(), OsStr::new("x2.txt")).unwrap();
    assert!(!r.join("x.txt").exists());
    assert_eq!(
        fs::read_to_string(r.join("a").join("b").join("x2.txt")).unwrap(),
        "x"
    );
    for bad in ["..\\out.txt", "..", "x2.txt:s"] {
        let e = rename_noreplace(x.as_handle(), d.as_handle(), OsStr::new(bad)).unwrap_err();
        assert_eq!(code(e), Some(ERROR_INVALID_NAME as i32), "{bad}");
    }
}

#[test]
fn replace_keeping_puts_the_new_version_and_keeps_the_old_aside() {
    let (_tmp, r) = tree();
    fs::write(r.join("f.txt"), "old").unwrap();
    fs::write(r.join("staged"), "new").unwrap();
    let d = root(&r);
    let (new, old) = (
        open(&d, "staged", MOVE, false).unwrap(),
        open(&d, "f.txt", MOVE, false).unwrap(),
    );
    fs::write(r.join("taken"), "someone's").unwrap();
    let e = replace_keeping(
        new.as_handle(),
        old.as_handle(),
        d.as_handle(),
        OsStr::new("f.txt"),
        OsStr::new("taken"),
    )
    .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read_to_string(r.join("f.txt")).unwrap(), "old");
    assert_eq!(fs::read_to_string(r.join("taken")).unwrap(), "someone's");
    replace_keeping(
        new.as_handle(),
        old.as_handle(),
        d.as_handle(),
        OsStr::new("f.txt"),
        OsStr::new("f.txt.old"),
    )
    .unwrap();
    assert_eq!(fs::read_to_string(r.join("f.txt")).unwrap(), "new");
    assert_eq!(fs::read_to_string(r.join("f.txt.old")).unwrap(), "old");
    assert!(!r.join("staged").exists());
}

#[test]
fn byte_range_locks_exclude_other_handles() {
    let (_tmp, r) = tree();
    fs::write(r.join("lock"), "").unwrap();
    let one = fs::File::open(r.join("lock")).unwrap();
    let two = fs::File::open(r.join("lock")).unwrap();
    let (one, two) = (one.as_handle(), two.as_handle());
    assert!(lock(one, 0, 10, Lock::Exclusive, false).unwrap());
    assert!(!lock(two, 0, 10, Lock::Shared, false).unwrap());
    assert!(!lock(two, 5, 1, Lock::Exclusive, false).unwrap());
    // Another range is free.
    assert!(lock(two, 10, 10, Lock::Exclusive, false).unwrap());
    unlock(one, 0, 10).unwrap();
    assert!(lock(two, 0, 10, Lock::Shared, false).unwrap());
    // Shared with shared.
    assert!(lock(one, 0, 10, Lock::Shared, false).unwrap());
    // Exclusive while another handle shares it: refused.
    assert!(!lock(one, 0, 10, Lock::Exclusive, false).unwrap());
}

#[test]
fn reparse_data_is_read_as_a_relative_target_or_an_escape() {
    fn buffer(tag: u32, flags: Option<u32>, target: &str) -> Vec<u8> {
        let name: Vec<u8> = target.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut b = tag.to_le_bytes().to_vec();
        b.extend_from_slice(&0u16.to_le_bytes()); // data length, unread
        b.extend_from_slice(&0u16.to_le_bytes());
        for v in [0u16, name.len() as u16, 0, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(f) = flags {
            b.extend_from_slice(&f.to_le_bytes());
        }
        b.extend_from_slice(&name);
        b
    }
    let symlink = windows_sys::Win32::System::SystemServices::IO_REPARSE_TAG_SYMLINK;
    let junction = windows_sys::Win32::System::SystemServices::IO_REPARSE_TAG_MOUNT_POINT;
    assert_eq!(
        nt::parse_reparse(&buffer(symlink, Some(1), "..\\b")).unwrap(),
        Target::Relative("..\\b".encode_utf16().collect())
    );
    assert_eq!(
        nt::parse_reparse(&buffer(symlink, Some(0), "\\??\\C:\\x")).unwrap(),
        Target::Absolute
    );
    assert_eq!(
        nt::parse_reparse(&buffer(junction, None, "\\??\\C:\\x")).unwrap(),
        Target::Absolute
    );
    assert!(nt::parse_reparse(&buffer(0x8000_0017, None, "x")).is_err());
    assert!(nt::parse_reparse(&buffer(symlink, Some(1), "x")[..21]).is_err());
}

/// Symlinks made with `CreateSymbolicLinkW` (relative and absolute), walked.
/// Wine 8.0 makes no reparse points (its `CreateSymbolicLinkW` answers
/// success and makes nothing): this runs on real Windows only, with
/// `--include-ignored` (docs/platforms.md, "What Wine cannot show").
#[test]
#[ignore = "needs real Windows: Wine 8.0 makes no reparse points"]
fn links_are_followed_by_hand_inside_the_root_only() {
    let (tmp, r) = tree();
    let d = root(&r);
    let link = |target: &str, at: &str| std::os::windows::fs::symlink_file(target, r.join(at));
    link("a\\b\\file.txt", "in").unwrap();
    link("..\\outside.txt", "out").unwrap();
    link(&tmp.path().join("outside.txt").to_string_lossy(), "abs").unwrap();
    link("loop2", "loop1").unwrap();
    link("loop1", "loop2").unwrap();
    std::os::windows::fs::symlink_dir("a\\b", r.join("dirlink")).unwrap();
    assert_eq!(read(open(&d, "in", READ, true).unwrap()), "inner");
    assert_eq!(
        read(open(&d, "dirlink\\file.txt", READ, true).unwrap()),
        "inner"
    );
    for (path, want) in [
        ("out", ERROR_NOT_SAME_DEVICE),
        ("abs", ERROR_NOT_SAME_DEVICE),
        ("loop1", ERROR_CANT_RESOLVE_FILENAME),
    ] {
        let e = open(&d, path, READ, true).unwrap_err();
        assert_eq!(code(e), Some(want as i32), "{path}");
    }
    // Not followed at the last name: the link itself.
    let own = open(
        &d,
        "out",
        Open {
            access: FILE_READ_ATTRIBUTES,
            disposition: FILE_OPEN,
            options: 0,
        },
        false,
    )
    .unwrap();
    assert_eq!(nt::kind(own.as_handle()).unwrap(), Kind::Link);
}

#[test]
fn a_hard_link_is_a_second_name_that_never_replaces() {
    let (_tmp, r) = tree();
    fs::write(r.join("f.txt"), "kept").unwrap();
    fs::write(r.join("taken"), "someone's").unwrap();
    let d = root(&r);
    let b = open(&d, "a\\b", DIR, true).unwrap();
    let f = open(&d, "f.txt", READ, false).unwrap();
    hard_link(f.as_handle(), b.as_handle(), OsStr::new("kept.txt")).unwrap();
    assert_eq!(
        fs::read_to_string(r.join("a").join("b").join("kept.txt")).unwrap(),
        "kept"
    );
    assert_eq!(info::stat(f.as_handle()).unwrap().links, 2);
    let e = hard_link(f.as_handle(), d.as_handle(), OsStr::new("taken")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read_to_string(r.join("taken")).unwrap(), "someone's");
    let other = open(&d, "a\\b\\kept.txt", READ, false).unwrap();
    assert_eq!(
        nt::identity(other.as_handle()).unwrap(),
        nt::identity(f.as_handle()).unwrap()
    );
}

#[test]
fn a_directory_lists_its_entries_without_dot_and_dotdot() {
    let (_tmp, r) = tree();
    fs::write(r.join("a").join("one.txt"), "12345").unwrap();
    fs::create_dir(r.join("a").join("empty")).unwrap();
    let d = root(&r);
    let a = open(&d, "a", DIR, true).unwrap();
    let mut got: Vec<(String, bool, u64)> = entries::entries(a.as_handle())
        .unwrap()
        .into_iter()
        .map(|e| {
            (
                e.name.to_string_lossy().into_owned(),
                e.directory,
                if e.directory { 0 } else { e.size },
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("b".to_string(), true, 0),
            ("empty".to_string(), true, 0),
            ("one.txt".to_string(), false, 5)
        ]
    );
    // Many entries: more than one buffer of them.
    for i in 0..600 {
        fs::write(
            r.join("a")
                .join("empty")
                .join(format!("a-rather-long-file-name-{i:04}.txt")),
            "",
        )
        .unwrap();
    }
    let e = open(&d, "a\\empty", DIR, true).unwrap();
    assert_eq!(entries::entries(e.as_handle()).unwrap().len(), 600);
}

#[test]
fn stat_gives_size_links_kind_and_times() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let f = open(&d, "a\\b\\file.txt", READ, true).unwrap();
    let s = info::stat(f.as_handle()).unwrap();
    assert_eq!((s.directory, s.size, s.links), (false, 5, 1));
    let age = std::time::SystemTime::now()
        .duration_since(s.modified)
        .unwrap();
    assert!(age < std::time::Duration::from_secs(600), "{age:?}");
    let dir = info::stat(open(&d, "a", DIR, true).unwrap().as_handle()).unwrap();
    assert!(dir.directory);
    assert!(info::free_space(d.as_handle()).unwrap() > 0);
}

#[test]
fn removal_is_by_handle_and_refuses_a_full_directory() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let gone = Open {
        access: DELETE | FILE_READ_ATTRIBUTES,
        disposition: FILE_OPEN,
        options: 0,
    };
    let f = open(&d, "a\\b\\file.txt", gone, false).unwrap();
    info::remove(f.as_handle()).unwrap();
    drop(f);
    assert!(!r.join("a").join("b").join("file.txt").exists());
    let full = open(
        &d,
        "a",
        Open {
            options: FILE_DIRECTORY_FILE,
            ..gone
        },
        false,
    )
    .unwrap();
    assert!(info::remove(full.as_handle()).is_err());
    drop(full);
    assert!(r.join("a").join("b").is_dir());
    let empty = open(
        &d,
        "a\\b",
        Open {
            options: FILE_DIRECTORY_FILE,
            ..gone
        },
        false,
    )
    .unwrap();
    info::remove(empty.as_handle()).unwrap();
    drop(empty);
    assert!(!r.join("a").join("b").exists());
}

#[test]
fn a_written_file_syncs() {
    let (_tmp, r) = tree();
    let d = root(&r);
    let w = Open {
        access: FILE_GENERIC_WRITE,
        disposition: FILE_CREATE,
        options: 0,
    };
    let h = open(&d, "synced.txt", w, false).unwrap();
    let mut file = fs::File::from(h);
    io::Write::write_all(&mut file, b"on disk").unwrap();
    info::sync(file.as_handle()).unwrap();
    assert_eq!(fs::read_to_string(r.join("synced.txt")).unwrap(), "on disk");
}
