//! The few file facts std does not expose on WASI as stable API (exact file
//! type, hard link count), read through wasi-libc's `stat`.

use std::ffi::CString;
use std::path::Path;

/// `stat` (following symlinks) or `lstat` of `path`; `None` if it fails.
pub fn stat(path: &Path, follow: bool) -> Option<libc::stat> {
    let c_path = CString::new(path.to_str()?).ok()?;
    // SAFETY: `c_path` is a valid NUL-terminated string and `st` is written
    // by the call before it is read.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let rc = if follow {
            libc::stat(c_path.as_ptr(), &mut st)
        } else {
            libc::lstat(c_path.as_ptr(), &mut st)
        };
        (rc == 0).then_some(st)
    }
}

/// Hard link count of `path` (symlinks followed).
pub fn link_count(path: &Path) -> Option<u64> {
    stat(path, true).map(|st| st.st_nlink)
}
