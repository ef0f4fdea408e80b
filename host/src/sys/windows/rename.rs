//! Renames by handle: `NtSetInformationFile` (what
//! `SetFileInformationByHandle` calls) with a rename information naming
//! the target relative to a directory handle (`RootDirectory`), never by a
//! full path. The NT call takes the name as given; Wine's
//! `SetFileInformationByHandle` makes it a path from the current
//! directory first.
//!
//! Windows has no exchange rename (Linux's `RENAME_EXCHANGE`, which a
//! publish uses to put the call's version over one it checked and bring
//! out whatever stood there). [`replace_keeping`] is its substitute: the
//! version standing is renamed aside first, then the new one put in its
//! place, both renames refusing to replace. Between the two the name is
//! absent: a reader there finds no file for that moment, a program that
//! creates the name in that moment keeps it (the second rename fails and
//! the call's version stays where it was), and a kill there leaves both
//! versions on disk under their own names, for the publish journal to
//! finish. Nothing is replaced, so nothing is lost.

use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};

use windows_sys::Wdk::Storage::FileSystem::{FileRenameInformation, NtSetInformationFile};
use windows_sys::Win32::Foundation::{ERROR_INVALID_NAME, HANDLE};
use windows_sys::Win32::Storage::FileSystem::FILE_RENAME_INFO;
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

use super::nt::{from_status, is_one_name};

/// Renames the file or directory `file` (a handle opened with `DELETE`
/// access) to `to_name` in the directory `to_dir`, failing with
/// `AlreadyExists` when something stands there. `to_name` must be one name
/// (as [`super::nt::open_at`] checks it).
pub fn rename_noreplace(
    file: BorrowedHandle<'_>,
    to_dir: BorrowedHandle<'_>,
    to_name: &OsStr,
) -> io::Result<()> {
    let name: Vec<u16> = to_name.encode_wide().collect();
    if !is_one_name(&name) {
        return Err(io::Error::from_raw_os_error(ERROR_INVALID_NAME as i32));
    }
    // FILE_RENAME_INFO (FILE_RENAME_INFORMATION's layout) ends in the
    // name, of any length: a buffer of u64s keeps its alignment.
    let head = std::mem::offset_of!(FILE_RENAME_INFO, FileName);
    let size = head + name.len() * 2;
    let mut buf = vec![0u64; size.div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFO>();
    // SAFETY: `buf` holds `size` bytes, aligned for FILE_RENAME_INFO; the
    // name is written within it, after the fixed fields.
    let status = unsafe {
        (*info).Anonymous.ReplaceIfExists = false;
        (*info).RootDirectory = to_dir.as_raw_handle() as HANDLE;
        (*info).FileNameLength = (name.len() * 2) as u32;
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            std::ptr::addr_of_mut!((*info).FileName).cast::<u16>(),
            name.len(),
        );
        let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
        NtSetInformationFile(
            file.as_raw_handle() as HANDLE,
            &mut io_status,
            info.cast(),
            size as u32,
            FileRenameInformation,
        )
    };
    if status < 0 {
        Err(from_status(status))
    } else {
        Ok(())
    }
}

/// Puts `new` (opened with `DELETE`) at `name` in `dir` over `standing`
/// (the file at that name, opened with `DELETE`), which is renamed to
/// `aside` in `dir` first: the substitute for an exchange rename (see the
/// module's docs for its window). Fails without a change if `aside` is
/// taken; if `name` is taken again between the two renames, `new` stays
/// where it was and the error says `AlreadyExists`.
pub fn replace_keeping(
    new: BorrowedHandle<'_>,
    standing: BorrowedHandle<'_>,
    dir: BorrowedHandle<'_>,
    name: &OsStr,
    aside: &OsStr,
) -> io::Result<()> {
    rename_noreplace(standing, dir, aside)?;
    rename_noreplace(new, dir, name)
}
