//! Renames and hard links by handle: `NtSetInformationFile` (what
//! `SetFileInformationByHandle` calls) with a rename or link information
//! naming the target relative to a directory handle (`RootDirectory`),
//! never by a full path, and never replacing what stands there. The NT
//! call takes the name as given; Wine's `SetFileInformationByHandle` makes
//! it a path from the current directory first.
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

use windows_sys::Wdk::Storage::FileSystem::{FileLinkInformation, FileRenameInformation};
use windows_sys::Win32::Foundation::{ERROR_INVALID_NAME, HANDLE};
use windows_sys::Win32::Storage::FileSystem::FILE_RENAME_INFO;

use super::nt::{is_one_name, set_nt};

/// Renames the file or directory `file` (a handle opened with `DELETE`
/// access) to `to_name` in the directory `to_dir`, failing with
/// `AlreadyExists` when something stands there. `to_name` must be one name
/// (as [`super::nt::open_at`] checks it).
pub fn rename_noreplace(
    file: BorrowedHandle<'_>,
    to_dir: BorrowedHandle<'_>,
    to_name: &OsStr,
) -> io::Result<()> {
    set_name(file, FileRenameInformation, to_dir, to_name)
}

/// Gives the file `file` a second name, `name` in `dir` (a hard link),
/// failing with `AlreadyExists` when something stands there: the twin of
/// `linkat`, which the trash keeps versions with.
pub fn hard_link(
    file: BorrowedHandle<'_>,
    dir: BorrowedHandle<'_>,
    name: &OsStr,
) -> io::Result<()> {
    set_name(file, FileLinkInformation, dir, name)
}

/// A rename or link information (`FILE_RENAME_INFORMATION` and
/// `FILE_LINK_INFORMATION` share their layout) set on `file`.
fn set_name(
    file: BorrowedHandle<'_>,
    class: i32,
    dir: BorrowedHandle<'_>,
    name: &OsStr,
) -> io::Result<()> {
    let name: Vec<u16> = name.encode_wide().collect();
    if !is_one_name(&name) {
        return Err(io::Error::from_raw_os_error(ERROR_INVALID_NAME as i32));
    }
    // The structure ends in the name, of any length: a buffer of u64s
    // keeps its alignment.
    let head = std::mem::offset_of!(FILE_RENAME_INFO, FileName);
    let size = head + name.len() * 2;
    let mut buf = vec![0u64; size.div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFO>();
    // SAFETY: `buf` holds `size` bytes, aligned for FILE_RENAME_INFO; the
    // name is written within it, after the fixed fields; the buffer is
    // the class's structure, `size` bytes long.
    unsafe {
        (*info).Anonymous.ReplaceIfExists = false;
        (*info).RootDirectory = dir.as_raw_handle() as HANDLE;
        (*info).FileNameLength = (name.len() * 2) as u32;
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            std::ptr::addr_of_mut!((*info).FileName).cast::<u16>(),
            name.len(),
        );
        set_nt(file, class, info.cast(), size)
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
