//! What a call has done so far and the disk error it met: counters the
//! policing filesystem and the meter write while a call runs, and the
//! server reads for progress, the audit log and the result. Holds no
//! descriptor and makes no decision.

use std::sync::Mutex;

use crate::policy::Rule;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What a call has done so far, readable while it runs (for progress
/// notifications) and after (for tests and benchmarks).
#[derive(Debug, Default)]
pub struct Activity {
    opened: AtomicU64,
    dirs_read: AtomicU64,
    read: AtomicU64,
    written: AtomicU64,
    out_of_quota: AtomicBool,
    out_of_descriptors: AtomicBool,
    /// The first disk error an operation met, and the root on that disk.
    disk: Mutex<Option<(DiskError, String)>>,
}

impl Activity {
    /// Files and directories opened.
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Directories whose entries were read.
    pub fn dirs_read(&self) -> u64 {
        self.dirs_read.load(Ordering::Relaxed)
    }

    /// Bytes read from files.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Bytes written to files.
    pub fn bytes_written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether an operation was refused because the byte quota was used up.
    pub fn out_of_quota(&self) -> bool {
        self.out_of_quota.load(Ordering::Relaxed)
    }

    /// Whether an operation failed because the server had no file
    /// descriptor free (`EMFILE`, `ENFILE`).
    pub fn out_of_descriptors(&self) -> bool {
        self.out_of_descriptors.load(Ordering::Relaxed)
    }

    /// The first disk error (no space, quota, file too large, read-only)
    /// an operation of the call met, with the root whose disk it was.
    pub fn disk_error(&self) -> Option<(DiskError, String)> {
        self.disk.lock().ok().and_then(|d| d.clone())
    }

    pub fn mark_disk_error(&self, error: DiskError, root: &str) {
        if let Ok(mut d) = self.disk.lock() {
            d.get_or_insert_with(|| (error, root.to_string()));
        }
    }

    pub(super) fn count_opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_dir_read(&self) {
        self.dirs_read.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_read(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn count_written(&self, bytes: u64) {
        self.written.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn mark_out_of_quota(&self) {
        self.out_of_quota.store(true, Ordering::Relaxed);
    }

    pub(super) fn mark_out_of_descriptors(&self) {
        self.out_of_descriptors.store(true, Ordering::Relaxed);
    }
}

/// A disk error an operation met, named for the model: WASI has codes for
/// no space and file too large, but a guest's error text loses them, and it
/// folds a disk quota and a read-only filesystem into `io`. The policing
/// filesystem, which sees the OS error, records it for the call
/// ([`Activity::disk_error`]), and the result says it in place of
/// whatever the guest made of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// `ENOSPC`.
    NoSpace,
    /// `EDQUOT`.
    Quota,
    /// `EFBIG`: over the filesystem's largest file or the process's limit.
    TooLarge,
    /// `EROFS`.
    ReadOnly,
    /// Not an OS error: the write would have left less than the root's
    /// reserve free (`min_free_bytes`), and the host refused it.
    Reserve(crate::sys::space::Short),
}

impl DiskError {
    /// The disk error an OS error number is, if it is one.
    pub fn of_errno(errno: i32) -> Option<DiskError> {
        use rustix::io::Errno;
        match Errno::from_raw_os_error(errno) {
            Errno::NOSPC => Some(DiskError::NoSpace),
            Errno::DQUOT => Some(DiskError::Quota),
            Errno::FBIG => Some(DiskError::TooLarge),
            Errno::ROFS => Some(DiskError::ReadOnly),
            _ => None,
        }
    }

    /// The disk error an I/O error is, if it is one.
    pub fn of_io(e: &std::io::Error) -> Option<DiskError> {
        e.raw_os_error().and_then(DiskError::of_errno)
    }

    /// What happened on `root`'s disk, as a sentence's start.
    pub fn text(self, root: &str) -> String {
        match self {
            DiskError::NoSpace => {
                format!("no space left on the disk that holds root '{root}' (ENOSPC)")
            }
            DiskError::Quota => {
                format!("the disk quota is used up on the disk that holds root '{root}' (EDQUOT)")
            }
            DiskError::TooLarge => format!(
                "the file would be larger than the disk that holds root '{root}' or the server's \
                 file size limit allows (EFBIG)"
            ),
            DiskError::ReadOnly => {
                format!("the disk that holds root '{root}' is mounted read-only (EROFS)")
            }
            DiskError::Reserve(short) => short.text(root),
        }
    }

    /// The audit log's name for a call this error stopped.
    pub fn rule(self) -> Rule {
        match self {
            DiskError::Reserve(_) => Rule::Reserve,
            _ => Rule::Disk,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DiskError;
    use rustix::io::Errno;

    #[test]
    fn each_disk_error_is_named_with_its_root_and_code() {
        for (errno, error, code) in [
            (Errno::NOSPC, DiskError::NoSpace, "ENOSPC"),
            (Errno::DQUOT, DiskError::Quota, "EDQUOT"),
            (Errno::FBIG, DiskError::TooLarge, "EFBIG"),
            (Errno::ROFS, DiskError::ReadOnly, "EROFS"),
        ] {
            let io = std::io::Error::from_raw_os_error(errno.raw_os_error());
            assert_eq!(DiskError::of_io(&io), Some(error));
            let text = error.text("ws");
            assert!(text.contains("root 'ws'") && text.contains(code), "{text}");
        }
        assert_eq!(DiskError::of_errno(Errno::IO.raw_os_error()), None);
        assert_eq!(DiskError::of_errno(Errno::MFILE.raw_os_error()), None);
    }
}
