//! A file's write stream that writes on the guest's own thread.
//!
//! wasmtime-wasi's file stream hands each `write` to tokio's blocking pool
//! and takes its result at the next `check-write`: two thread hand-offs for
//! every write a guest makes through a stream (how Rust's `std::fs::File`
//! writes under WASI p2), on a thread that is a blocking one already (a
//! guest runs on its own, and its context allows blocking it:
//! `allow_blocking_current_thread`). This stream writes at once, at its
//! offset (appends keep wasmtime-wasi's stream: no tool appends through a
//! stream, and its Linux `pwritev2` has an untidy fallback elsewhere). A failed
//! write fails that `write` itself, with the OS's code (so the meter around
//! the stream names a full disk and counts the write as nothing written),
//! and closes the stream. wasmtime-wasi's, whose writes are done later on
//! another thread, can only tell a failure at the next `check-write` or
//! `flush`: a guest that dropped its stream without one never learnt it.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;

use bytes::Bytes;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// How much a `check-write` permits: wasmtime-wasi's own figure.
const CAPACITY: usize = 64 * 1024;

pub(super) struct FileOutput {
    file: Arc<File>,
    /// Where the next write goes.
    offset: u64,
    /// Set by a failed write: every later use is told the stream is closed.
    closed: bool,
}

impl FileOutput {
    pub(super) fn new(file: Arc<File>, offset: u64) -> FileOutput {
        FileOutput {
            file,
            offset,
            closed: false,
        }
    }

    /// Ready for more, unless a write failed (the stream closed then).
    fn open(&self) -> StreamResult<()> {
        match self.closed {
            false => Ok(()),
            true => Err(StreamError::Closed),
        }
    }
}

#[async_trait::async_trait]
impl OutputStream for FileOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.open()?;
        // std's loop over short writes, EINTR retried; after a failure the
        // stream closes, so the offset no longer matters.
        match self.file.write_all_at(&bytes, self.offset) {
            Ok(()) => {
                self.offset += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.closed = true;
                Err(StreamError::LastOperationFailed(e.into()))
            }
        }
    }

    fn flush(&mut self) -> StreamResult<()> {
        // Nothing is held back: each write reached the file when made.
        self.open()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.open().map(|()| CAPACITY)
    }

    async fn cancel(&mut self) {}
}

#[async_trait::async_trait]
impl Pollable for FileOutput {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn file_in(dir: &tempfile::TempDir) -> Arc<File> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .unwrap();
        Arc::new(file)
    }

    #[test]
    fn writes_land_at_their_offset_and_in_order() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(dir.path().join("f"), b"0123456789").unwrap();
        let mut out = FileOutput::new(file_in(&dir), 2);
        assert_eq!(out.check_write().unwrap(), CAPACITY);
        out.write(Bytes::from_static(b"ab")).unwrap();
        out.write(Bytes::from_static(b"cd")).unwrap();
        out.flush().unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"01abcd6789");
    }

    #[test]
    fn a_failed_write_is_told_by_that_write_with_its_os_error_then_the_stream_is_closed() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(dir.path().join("f"), b"").unwrap();
        // Opened read-only: the write fails with EBADF.
        let file = Arc::new(File::open(dir.path().join("f")).unwrap());
        let mut out = FileOutput::new(file, 0);
        assert_eq!(out.check_write().unwrap(), CAPACITY);
        // Told at once: a guest that drops the stream now has been told.
        match out.write(Bytes::from_static(b"data")) {
            Err(StreamError::LastOperationFailed(e)) => {
                let os = e
                    .downcast_ref::<io::Error>()
                    .and_then(io::Error::raw_os_error);
                assert_eq!(os, Some(rustix::io::Errno::BADF.raw_os_error()));
            }
            other => panic!("expected the write's error, got {other:?}"),
        }
        assert!(matches!(out.check_write(), Err(StreamError::Closed)));
        assert!(matches!(out.flush(), Err(StreamError::Closed)));
        assert!(matches!(
            out.write(Bytes::from_static(b"x")),
            Err(StreamError::Closed)
        ));
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"");
    }
}
