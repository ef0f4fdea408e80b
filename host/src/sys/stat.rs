//! The fields of a `stat` loom-fs compares, in one width on every Unix:
//! `dev_t` is `u64` on Linux and `i32` on macOS, the nanoseconds `u64` and
//! `i64`. Widening here keeps the comparisons
//! (an inode kept in the trash, a copy's version) free of casts elsewhere.

use rustix::fs::{FileType, Stat};

/// A file's identity: device and inode number.
#[allow(clippy::unnecessary_cast, reason = "dev_t is i32 on macOS")]
pub fn inode(st: &Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// The modification time, seconds and nanoseconds.
#[allow(clippy::unnecessary_cast, reason = "the nanoseconds are i64 on macOS")]
pub fn mtime(st: &Stat) -> (i64, u64) {
    (st.st_mtime as i64, st.st_mtime_nsec as u64)
}

/// The change time, seconds and nanoseconds.
#[allow(clippy::unnecessary_cast, reason = "the nanoseconds are i64 on macOS")]
pub fn ctime(st: &Stat) -> (i64, u64) {
    (st.st_ctime as i64, st.st_ctime_nsec as u64)
}

/// The file's type.
pub fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_itself_and_not_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let f = rustix::fs::stat(&file).unwrap();
        let d = rustix::fs::stat(dir.path()).unwrap();
        assert_eq!(inode(&f), inode(&rustix::fs::stat(&file).unwrap()));
        assert_ne!(inode(&f), inode(&d));
        assert_eq!(file_type(&f), FileType::RegularFile);
        assert_eq!(file_type(&d), FileType::Directory);
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        let since = modified.duration_since(std::time::UNIX_EPOCH).unwrap();
        assert_eq!(
            mtime(&f),
            (since.as_secs() as i64, u64::from(since.subsec_nanos()))
        );
    }
}
