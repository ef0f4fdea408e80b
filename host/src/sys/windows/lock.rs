//! Byte-range locks between processes (`LockFileEx`), the Windows twin of
//! the open-file-description locks the store takes on Linux: held by the
//! handle, released when it closes, and mandatory (a locked range cannot
//! be written through another handle, which Linux's advisory locks allow).

use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};

use windows_sys::Win32::Foundation::{ERROR_LOCK_VIOLATION, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{
    LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY, LockFileEx, UnlockFileEx,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

/// A lock's kind: shared (many readers) or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    Shared,
    Exclusive,
}

fn overlapped_at(start: u64) -> OVERLAPPED {
    // SAFETY: OVERLAPPED is plain data; all zeroes is valid.
    let mut o: OVERLAPPED = unsafe { std::mem::zeroed() };
    o.Anonymous.Anonymous.Offset = start as u32;
    o.Anonymous.Anonymous.OffsetHigh = (start >> 32) as u32;
    o
}

/// Locks `len` bytes of `file` from `start`. With `wait` false, a range
/// another handle holds answers `Ok(false)` at once; with `wait`, the call
/// blocks until it is free. `file` is a synchronous handle.
pub fn lock(
    file: BorrowedHandle<'_>,
    start: u64,
    len: u64,
    how: Lock,
    wait: bool,
) -> io::Result<bool> {
    let mut flags = 0;
    if how == Lock::Exclusive {
        flags |= LOCKFILE_EXCLUSIVE_LOCK;
    }
    if !wait {
        flags |= LOCKFILE_FAIL_IMMEDIATELY;
    }
    let mut o = overlapped_at(start);
    // SAFETY: a live handle and a live OVERLAPPED for a synchronous call.
    let ok = unsafe {
        LockFileEx(
            file.as_raw_handle() as HANDLE,
            flags,
            0,
            len as u32,
            (len >> 32) as u32,
            &mut o,
        )
    };
    if ok != 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Releases the range [`lock`] took.
pub fn unlock(file: BorrowedHandle<'_>, start: u64, len: u64) -> io::Result<()> {
    let mut o = overlapped_at(start);
    // SAFETY: as in `lock`.
    let ok = unsafe {
        UnlockFileEx(
            file.as_raw_handle() as HANDLE,
            0,
            len as u32,
            (len >> 32) as u32,
            &mut o,
        )
    };
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
