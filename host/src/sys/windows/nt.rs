//! The handle calls the Windows backend is made of: an open of one name
//! relative to a directory handle (`NtCreateFile` with `RootDirectory`),
//! what a handle is (attributes, reparse tag, identity), and the target of
//! a reparse point. Nothing here resolves more than one name.

use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};
use std::ptr::{null, null_mut};

use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;

pub use crate::sys::by_hand::Kind;
use windows_sys::Wdk::Storage::FileSystem::{
    FILE_OPEN_REPARSE_POINT, FILE_SYNCHRONOUS_IO_NONALERT, NtCreateFile, NtQueryInformationFile,
    NtSetInformationFile,
};
use windows_sys::Win32::Foundation::{
    ERROR_INVALID_NAME, HANDLE, OBJ_CASE_INSENSITIVE, RtlNtStatusToDosError, UNICODE_STRING,
};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_TAG_INFO, FILE_ID_INFO,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FileAttributeTagInfo, FileIdInfo,
    GetFileInformationByHandleEx, MAXIMUM_REPARSE_DATA_BUFFER_SIZE, SYNCHRONIZE,
};
use windows_sys::Win32::System::IO::{DeviceIoControl, IO_STATUS_BLOCK};
use windows_sys::Win32::System::Ioctl::FSCTL_GET_REPARSE_POINT;
use windows_sys::Win32::System::SystemServices::{
    IO_REPARSE_TAG_MOUNT_POINT, IO_REPARSE_TAG_SYMLINK,
};

/// How one name is opened: `NtCreateFile`'s access mask, disposition
/// (`FILE_OPEN`, `FILE_CREATE`, …) and create options. Every open also
/// asks `SYNCHRONIZE` with synchronous I/O, shares read, write and delete
/// (a handle loom-fs holds never stops another program renaming or
/// removing the file), and compares names case-insensitively, as the
/// Win32 calls do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    pub access: u32,
    pub disposition: u32,
    pub options: u32,
}

/// Opens the single `name` relative to `dir`, never following a reparse
/// point at it (`FILE_OPEN_REPARSE_POINT`): a symlink or junction there is
/// opened itself. `name` must be one name: empty, `.`, `..`, or a name
/// holding `\`, `/`, `:` (a stream) or NUL is refused as an invalid name
/// before anything is opened.
pub fn open_at(dir: BorrowedHandle<'_>, name: &OsStr, how: Open) -> io::Result<OwnedHandle> {
    let wide: Vec<u16> = name.encode_wide().collect();
    if !is_one_name(&wide) {
        return Err(io::Error::from_raw_os_error(ERROR_INVALID_NAME as i32));
    }
    open_raw(dir, &wide, how)
}

/// Opens the object `dir` itself again, with `how`'s access: an empty name
/// relative to a handle is the handle's own file, whatever has been renamed
/// since (as Linux reopens a checked `O_PATH` descriptor).
pub fn reopen(handle: BorrowedHandle<'_>, how: Open) -> io::Result<OwnedHandle> {
    open_raw(handle, &[], how)
}

fn open_raw(dir: BorrowedHandle<'_>, wide: &[u16], how: Open) -> io::Result<OwnedHandle> {
    let bytes = u16::try_from(wide.len() * 2)
        .map_err(|_| io::Error::from_raw_os_error(ERROR_INVALID_NAME as i32))?;
    let name = UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: wide.as_ptr().cast_mut(),
    };
    let attributes = OBJECT_ATTRIBUTES {
        Length: size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: dir.as_raw_handle() as HANDLE,
        ObjectName: &name,
        Attributes: OBJ_CASE_INSENSITIVE,
        SecurityDescriptor: null(),
        SecurityQualityOfService: null(),
    };
    let mut handle: HANDLE = null_mut();
    // SAFETY: every pointer is to a live local of the right type; the
    // handle written is owned by the OwnedHandle made only on success.
    let status = unsafe {
        let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
        NtCreateFile(
            &mut handle,
            how.access | SYNCHRONIZE,
            &attributes,
            &mut io_status,
            null(),
            0,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            how.disposition,
            how.options | FILE_OPEN_REPARSE_POINT | FILE_SYNCHRONOUS_IO_NONALERT,
            null(),
            0,
        )
    };
    if status < 0 {
        return Err(from_status(status));
    }
    // SAFETY: NtCreateFile succeeded, so `handle` is open and ours.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle as _) })
}

/// One name: not empty, not `.` or `..`, and no separator, stream colon or
/// NUL in it.
pub(super) fn is_one_name(wide: &[u16]) -> bool {
    let dot = u16::from(b'.');
    !wide.is_empty()
        && wide != [dot]
        && wide != [dot, dot]
        && !wide.iter().any(|&c| {
            c == 0 || c == u16::from(b'\\') || c == u16::from(b'/') || c == u16::from(b':')
        })
}

/// An `NTSTATUS` as the Win32 error it stands for, so `io::ErrorKind`
/// reads it (`NotFound`, `AlreadyExists`, …).
pub(super) fn from_status(status: i32) -> io::Error {
    // SAFETY: a pure conversion of a status value.
    io::Error::from_raw_os_error(unsafe { RtlNtStatusToDosError(status) } as i32)
}

/// Whether `handle` is a directory, a link (a symlink or a junction: a
/// name-surrogate reparse point, never followed by the system for
/// loom-fs) or anything else. A reparse point that is not a link (a cloud
/// placeholder, a deduplicated file) is the file or directory it stands
/// for.
pub fn kind(handle: BorrowedHandle<'_>) -> io::Result<Kind> {
    let mut info = FILE_ATTRIBUTE_TAG_INFO {
        FileAttributes: 0,
        ReparseTag: 0,
    };
    query(handle, FileAttributeTagInfo, &mut info)?;
    let link = info.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
        && matches!(
            info.ReparseTag,
            IO_REPARSE_TAG_SYMLINK | IO_REPARSE_TAG_MOUNT_POINT
        );
    Ok(if link {
        Kind::Link
    } else if info.FileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0 {
        Kind::Directory
    } else {
        Kind::Other
    })
}

/// A file's identity: the volume's serial number and the file's 128-bit
/// ID on it (`FileIdInfo`); two handles with equal identities are the same
/// file, as a `(dev, ino)` pair is on Unix.
pub fn identity(handle: BorrowedHandle<'_>) -> io::Result<(u64, u128)> {
    // SAFETY: FILE_ID_INFO is plain data; all zeroes is a valid value.
    let mut info: FILE_ID_INFO = unsafe { std::mem::zeroed() };
    query(handle, FileIdInfo, &mut info)?;
    Ok((
        info.VolumeSerialNumber,
        u128::from_le_bytes(info.FileId.Identifier),
    ))
}

fn query<T>(handle: BorrowedHandle<'_>, class: i32, out: &mut T) -> io::Result<()> {
    // SAFETY: `out` is a live `T`, the size given is its size, and `class`
    // is the information class whose structure `T` is (callers pair them).
    let ok = unsafe {
        GetFileInformationByHandleEx(
            handle.as_raw_handle() as HANDLE,
            class,
            (out as *mut T).cast(),
            size_of::<T>() as u32,
        )
    };
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Where a link points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A symlink's relative target, its names in order (`\` separated on
    /// disk, `..` allowed): walked from the link's own directory.
    Relative(Vec<u16>),
    /// A junction, or a symlink to an absolute path: never beneath a root
    /// by construction (as an absolute symlink is not on Linux).
    Absolute,
}

/// The target of the link `handle` (opened with `FILE_OPEN_REPARSE_POINT`):
/// `FSCTL_GET_REPARSE_POINT`, the substitute name of a symlink's or a
/// junction's reparse data.
pub fn link_target(handle: BorrowedHandle<'_>) -> io::Result<Target> {
    let mut buf = vec![0u8; MAXIMUM_REPARSE_DATA_BUFFER_SIZE as usize];
    let mut got = 0u32;
    // SAFETY: the output buffer is live and as long as said; no input.
    let ok = unsafe {
        DeviceIoControl(
            handle.as_raw_handle() as HANDLE,
            FSCTL_GET_REPARSE_POINT,
            null(),
            0,
            buf.as_mut_ptr().cast(),
            buf.len() as u32,
            &mut got,
            null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    parse_reparse(&buf[..got as usize])
}

/// Reads a `REPARSE_DATA_BUFFER`: tag (4 bytes), data length (2),
/// reserved (2), then for both a symlink and a junction the substitute
/// name's offset and length and the print name's (2 each), a symlink's
/// flags (4; `SYMLINK_FLAG_RELATIVE` is 1), and the path buffer.
pub(super) fn parse_reparse(buf: &[u8]) -> io::Result<Target> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed reparse data");
    let u16_at = |at: usize| -> io::Result<u16> {
        buf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(bad)
    };
    let u32_at = |at: usize| -> io::Result<u32> {
        buf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(bad)
    };
    let tag = u32_at(0)?;
    let (path_buffer, relative) = match tag {
        IO_REPARSE_TAG_SYMLINK => (20, u32_at(16)? & 1 != 0),
        IO_REPARSE_TAG_MOUNT_POINT => (16, false),
        _ => return Err(bad()),
    };
    if !relative {
        return Ok(Target::Absolute);
    }
    let (offset, length) = (usize::from(u16_at(8)?), usize::from(u16_at(10)?));
    let start = path_buffer + offset;
    let bytes = buf.get(start..start + length).ok_or_else(bad)?;
    Ok(Target::Relative(
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect(),
    ))
}

/// Information of class `class` about `handle` (`NtQueryInformationFile`),
/// `T` being that class's structure.
pub(super) fn query_nt<T>(handle: BorrowedHandle<'_>, class: i32) -> io::Result<T> {
    // SAFETY: T is one of the plain-data FILE_*_INFORMATION structures
    // (callers pair it with its class); all zeroes is a valid value, and
    // the buffer given is its size.
    let mut out: T = unsafe { std::mem::zeroed() };
    let status = unsafe {
        let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
        NtQueryInformationFile(
            handle.as_raw_handle() as HANDLE,
            &mut io_status,
            (&mut out as *mut T).cast(),
            size_of::<T>() as u32,
            class,
        )
    };
    if status < 0 {
        Err(from_status(status))
    } else {
        Ok(out)
    }
}

/// Sets information of class `class` on `handle` (`NtSetInformationFile`)
/// from the `len` bytes at `info`.
///
/// # Safety
/// `info` points to `len` readable bytes holding class `class`'s structure.
pub(super) unsafe fn set_nt(
    handle: BorrowedHandle<'_>,
    class: i32,
    info: *const std::ffi::c_void,
    len: usize,
) -> io::Result<()> {
    // SAFETY: as the caller promised.
    let status = unsafe {
        let mut io_status: IO_STATUS_BLOCK = std::mem::zeroed();
        NtSetInformationFile(
            handle.as_raw_handle() as HANDLE,
            &mut io_status,
            info,
            len as u32,
            class,
        )
    };
    if status < 0 {
        Err(from_status(status))
    } else {
        Ok(())
    }
}
