//! The open flags of a guest's open, as the host opens a file for it:
//! which sync flags it refuses (as wasmtime-wasi does) and the access and
//! mode of an open for writing.

use rustix::fs::OFlags;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;

/// The sync flags wasmtime-wasi does not support on an open either.
pub(super) fn refuse_sync(flags: fs::DescriptorFlags) -> FsResult<()> {
    if flags.intersects(
        fs::DescriptorFlags::FILE_INTEGRITY_SYNC
            | fs::DescriptorFlags::DATA_INTEGRITY_SYNC
            | fs::DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Err(ErrorCode::Unsupported.into());
    }
    Ok(())
}

/// The open flags and mode of an open for writing: without the write
/// flag, for reading too (wasmtime-wasi's rule: the mode then refuses what
/// is not asked); truncating, and exclusive where a create asks it (the
/// caller adds the create).
pub(super) fn writing(flags: fs::DescriptorFlags, oflags: fs::OpenFlags) -> (OFlags, OpenMode) {
    let read =
        flags.contains(fs::DescriptorFlags::READ) || !flags.contains(fs::DescriptorFlags::WRITE);
    let (mut o, mut mode) = (OFlags::CLOEXEC, OpenMode::WRITE);
    if read {
        mode |= OpenMode::READ;
        o |= OFlags::RDWR;
    } else {
        o |= OFlags::WRONLY;
    }
    if oflags.contains(fs::OpenFlags::TRUNCATE) {
        o |= OFlags::TRUNC;
    }
    if oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) {
        o |= OFlags::EXCL;
    }
    (o, mode)
}
