//! A directory's entries from its handle (`NtQueryDirectoryFile`), the
//! twin of reading a directory descriptor: names as stored, with what the
//! listing itself says of each. `.` and `..` are left out.

use std::ffi::OsString;
use std::io;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};
use std::ptr::{null, null_mut};

use windows_sys::Wdk::Storage::FileSystem::{
    FILE_DIRECTORY_INFORMATION, FileDirectoryInformation, NtQueryDirectoryFile,
};
use windows_sys::Win32::Foundation::{HANDLE, STATUS_NO_MORE_FILES};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_REPARSE_POINT,
};
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

use super::nt::from_status;

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub directory: bool,
    /// A reparse point: maybe a link, which only opening it (with
    /// [`super::nt::kind`]) tells; never followed.
    pub reparse: bool,
    pub size: u64,
}

/// The entries of the directory `dir` (opened with `FILE_LIST_DIRECTORY`
/// and synchronous I/O, as [`super::nt::open_at`] opens), in the order the
/// filesystem keeps them.
pub fn entries(dir: BorrowedHandle<'_>) -> io::Result<Vec<Entry>> {
    let mut buf = vec![0u64; 64 * 1024 / 8];
    let mut out = Vec::new();
    let mut restart = true;
    loop {
        // SAFETY: the buffer is live and as long as said, aligned for the
        // structures the call writes into it.
        let status = unsafe {
            let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
            NtQueryDirectoryFile(
                dir.as_raw_handle() as HANDLE,
                null_mut(),
                None,
                null(),
                &mut io_status,
                buf.as_mut_ptr().cast(),
                (buf.len() * 8) as u32,
                FileDirectoryInformation,
                false,
                null(),
                restart,
            )
        };
        restart = false;
        if status == STATUS_NO_MORE_FILES {
            return Ok(out);
        }
        if status < 0 {
            return Err(from_status(status));
        }
        let bytes = buf.as_ptr().cast::<u8>();
        let mut at = 0usize;
        loop {
            // SAFETY: the call wrote a chain of FILE_DIRECTORY_INFORMATION
            // records into the buffer, each at an 8-byte aligned offset
            // within it, each name within its record.
            let (next, entry) = unsafe {
                let info = bytes.add(at).cast::<FILE_DIRECTORY_INFORMATION>();
                let name = std::slice::from_raw_parts(
                    std::ptr::addr_of!((*info).FileName).cast::<u16>(),
                    (*info).FileNameLength as usize / 2,
                );
                let attributes = (*info).FileAttributes;
                let entry = (name != [0x2e] && name != [0x2e, 0x2e]).then(|| Entry {
                    name: OsString::from_wide(name),
                    directory: attributes & FILE_ATTRIBUTE_DIRECTORY != 0,
                    reparse: attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0,
                    size: (*info).EndOfFile.max(0) as u64,
                });
                ((*info).NextEntryOffset as usize, entry)
            };
            out.extend(entry);
            if next == 0 {
                break;
            }
            at += next;
        }
    }
}
