//! What the store and the policing filesystem ask of a handle besides its
//! name: its size, link count and times (the twin of `fstat`), removal by
//! handle (the twin of `unlinkat`, with no name looked up again), a flush
//! to the disk (`fsync`) and the free space of its volume (`fstatvfs`).

use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle};
use std::time::{Duration, SystemTime};

use windows_sys::Wdk::Storage::FileSystem::{
    FILE_BASIC_INFORMATION, FILE_DISPOSITION_DELETE, FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE,
    FILE_DISPOSITION_INFORMATION, FILE_DISPOSITION_INFORMATION_EX,
    FILE_DISPOSITION_POSIX_SEMANTICS, FILE_STANDARD_INFORMATION, FileBasicInformation,
    FileDispositionInformation, FileDispositionInformationEx, FileFsFullSizeInformation,
    FileStandardInformation, NtQueryVolumeInformationFile,
};
use windows_sys::Wdk::System::SystemServices::FILE_FS_FULL_SIZE_INFORMATION;
use windows_sys::Win32::Foundation::{
    ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER, ERROR_NOT_SUPPORTED, HANDLE,
};
use windows_sys::Win32::Storage::FileSystem::FlushFileBuffers;
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

use super::nt::{from_status, query_nt, set_nt};

/// What `fstat` tells the Linux side, for a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub directory: bool,
    /// Bytes (the end of the file).
    pub size: u64,
    pub links: u32,
    pub modified: SystemTime,
    pub accessed: SystemTime,
    pub created: SystemTime,
}

/// `handle`'s size, link count and times (`FileStandardInformation`,
/// `FileBasicInformation`; opened with `FILE_READ_ATTRIBUTES`).
pub fn stat(handle: BorrowedHandle<'_>) -> io::Result<Stat> {
    let standard: FILE_STANDARD_INFORMATION = query_nt(handle, FileStandardInformation)?;
    let basic: FILE_BASIC_INFORMATION = query_nt(handle, FileBasicInformation)?;
    Ok(Stat {
        directory: standard.Directory,
        size: standard.EndOfFile.max(0) as u64,
        links: standard.NumberOfLinks,
        modified: system_time(basic.LastWriteTime),
        accessed: system_time(basic.LastAccessTime),
        created: system_time(basic.CreationTime),
    })
}

/// A Windows time (100 ns units since 1601) as a `SystemTime`.
pub(super) fn system_time(ticks: i64) -> SystemTime {
    /// 1601-01-01 to 1970-01-01, in 100 ns units.
    const UNIX_EPOCH_TICKS: i64 = 116_444_736_000_000_000;
    let since = ticks - UNIX_EPOCH_TICKS;
    let at = Duration::from_nanos(since.unsigned_abs() * 100);
    if since >= 0 {
        SystemTime::UNIX_EPOCH + at
    } else {
        SystemTime::UNIX_EPOCH - at
    }
}

/// Removes the file or empty directory `handle` (opened with `DELETE`):
/// its name goes at once, as `unlinkat` takes it (POSIX semantics), where
/// the system has them; elsewhere (older Windows, Wine) when the last
/// handle to it closes. A directory that is not empty is refused.
pub fn remove(handle: BorrowedHandle<'_>) -> io::Result<()> {
    let posix = FILE_DISPOSITION_INFORMATION_EX {
        Flags: FILE_DISPOSITION_DELETE
            | FILE_DISPOSITION_POSIX_SEMANTICS
            | FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE,
    };
    // SAFETY: the structure of each class, with its size.
    unsafe {
        match set_nt(
            handle,
            FileDispositionInformationEx,
            (&raw const posix).cast(),
            size_of_val(&posix),
        ) {
            // The class unknown (Wine, Windows before 10 1607: invalid
            // function or parameter) or the filesystem without it (FAT).
            Err(e)
                if matches!(
                    e.raw_os_error().map(|c| c as u32),
                    Some(ERROR_INVALID_FUNCTION | ERROR_INVALID_PARAMETER | ERROR_NOT_SUPPORTED)
                ) =>
            {
                let plain = FILE_DISPOSITION_INFORMATION { DeleteFile: true };
                set_nt(
                    handle,
                    FileDispositionInformation,
                    (&raw const plain).cast(),
                    size_of_val(&plain),
                )
            }
            other => other,
        }
    }
}

/// Flushes `handle`'s data and metadata to the disk (`FlushFileBuffers`;
/// opened with write access).
pub fn sync(handle: BorrowedHandle<'_>) -> io::Result<()> {
    // SAFETY: a live handle.
    if unsafe { FlushFileBuffers(handle.as_raw_handle() as HANDLE) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Bytes free to this process on the volume `handle` is on.
pub fn free_space(handle: BorrowedHandle<'_>) -> io::Result<u64> {
    // SAFETY: plain data, its size given; a live handle.
    let mut info: FILE_FS_FULL_SIZE_INFORMATION = unsafe { std::mem::zeroed() };
    let status = unsafe {
        let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
        NtQueryVolumeInformationFile(
            handle.as_raw_handle() as HANDLE,
            &mut io_status,
            (&raw mut info).cast(),
            size_of_val(&info) as u32,
            FileFsFullSizeInformation,
        )
    };
    if status < 0 {
        return Err(from_status(status));
    }
    let unit = u64::from(info.SectorsPerAllocationUnit) * u64::from(info.BytesPerSector);
    Ok((info.CallerAvailableAllocationUnits.max(0) as u64).saturating_mul(unit))
}
