//! The bytes a call reads and writes: counted while it runs (progress,
//! audit) and taken from the server's byte quota before they move.
//!
//! Descriptor reads and writes come through the policing filesystem, which
//! asks the [`Meter`] first. Streams (`read-via-stream`, `write-via-stream`,
//! `append-via-stream`) are wasmtime-wasi's own objects, which would move
//! bytes without the policing filesystem seeing them: each one is wrapped in
//! a [`Metered`] stream before the guest gets it, so no byte reaches or
//! leaves a file uncounted, whichever way a component does its I/O.
//!
//! A read asks the quota for at most [`MAX_READ_GRANT`] bytes (what
//! wasmtime-wasi reads in one operation) and is shortened to what it gets; a
//! write takes its whole length, or as much of a positional write as the
//! quota holds. With nothing left a write fails with an [`OutOfQuota`] error
//! (`quota`, the WASI code for EDQUOT), and a read probes one byte: finding
//! the end of the file costs nothing and succeeds, finding data fails. A
//! failure marks the call, so the host answers with the quota rule whatever
//! the guest makes of the error. A stream's write permit is capped by the
//! quota but never zero: a flush after the last byte still succeeds.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, Pollable, StreamError, StreamResult,
};

use super::activity::{Activity, DiskError};
use crate::policy::Root;
use crate::store::quota::Quota;

/// The most one read takes from the quota: wasmtime-wasi reads no more in
/// one operation, and a larger grant would hold bytes other calls could use.
pub const MAX_READ_GRANT: u64 = 64 * 1024;

/// What a read may ask for, and what it took from the quota (nothing for
/// the one-byte probe of an empty quota).
#[derive(Clone, Copy, Debug)]
pub struct ReadGrant {
    pub size: u64,
    taken: u64,
}

/// The error of an operation refused for want of quota.
#[derive(Debug, thiserror::Error)]
#[error("the byte quota is used up")]
pub struct OutOfQuota;

/// One call's byte counter, in front of the server's quota if there is one.
pub struct Meter {
    activity: Arc<Activity>,
    quota: Option<Arc<Quota>>,
}

impl Meter {
    pub fn new(activity: Arc<Activity>, quota: Option<Arc<Quota>>) -> Meter {
        Meter { activity, quota }
    }

    /// How much of a `want`-byte read may be asked for now.
    pub fn read_grant(&self, want: u64) -> ReadGrant {
        let Some(q) = &self.quota else {
            return ReadGrant {
                size: want,
                taken: 0,
            };
        };
        match q.take(want.min(MAX_READ_GRANT)) {
            Ok(taken) => ReadGrant { size: taken, taken },
            // Empty: a one-byte probe, taken from nothing.
            Err(_) => ReadGrant {
                size: want.min(1),
                taken: 0,
            },
        }
    }

    /// A read under `grant` got `got` bytes: counts them and returns what
    /// was not used. A probe that found data is refused.
    pub fn read_done(&self, grant: ReadGrant, got: u64) -> Result<(), OutOfQuota> {
        if let Some(q) = &self.quota {
            if grant.taken == 0 && got > 0 {
                return Err(self.out());
            }
            q.give_back(grant.taken.saturating_sub(got));
        }
        self.activity.count_read(got);
        Ok(())
    }

    /// How many of a positional write's `len` bytes may be written now.
    pub fn write_grant(&self, len: u64) -> Result<u64, OutOfQuota> {
        match &self.quota {
            None => Ok(len),
            Some(q) => q.take(len).map_err(|_| self.out()),
        }
    }

    /// A write granted `granted` bytes and wrote `wrote`.
    pub fn wrote(&self, granted: u64, wrote: u64) {
        self.activity.count_written(wrote);
        if let Some(q) = &self.quota {
            q.give_back(granted.saturating_sub(wrote));
        }
    }

    /// Takes all `len` bytes of a write that cannot be shortened.
    fn take_all(&self, len: u64) -> Result<(), OutOfQuota> {
        match &self.quota {
            None => Ok(()),
            Some(q) => q.take_all(len).map_err(|_| self.out()),
        }
    }

    /// How much a stream may be told it can write: the stream's own permit,
    /// capped by the quota, but never 0 for a ready stream (waiting would not
    /// help; the write itself is refused).
    fn permit(&self, stream: usize) -> usize {
        match &self.quota {
            None => stream,
            Some(q) => {
                let left = usize::try_from(q.available()).unwrap_or(usize::MAX);
                stream.min(left.max(1))
            }
        }
    }

    fn out(&self) -> OutOfQuota {
        self.activity.mark_out_of_quota();
        OutOfQuota
    }

    /// Wraps a stream the guest is about to get.
    pub fn input(self: &Arc<Self>, inner: DynInputStream) -> DynInputStream {
        Box::new(MeteredInput {
            inner,
            meter: Arc::clone(self),
            probed: None,
        })
    }

    /// A write stream of a file in `root`: a disk error it meets (the
    /// stream's error keeps the OS's) is recorded for the call.
    /// Each write is first held to the root's reserve (`min_free_bytes`).
    pub fn output(self: &Arc<Self>, inner: DynOutputStream, root: Arc<Root>) -> DynOutputStream {
        Box::new(MeteredOutput {
            inner,
            meter: Arc::clone(self),
            root,
        })
    }
}

/// Holds a write of `len` bytes in `root` to its reserve: refused as a full
/// disk (`ENOSPC`), the call marked with the reserve it would break.
pub fn reserve(activity: &Activity, root: &Root, len: u64) -> std::io::Result<()> {
    crate::sys::space::check(root, len).map_err(|short| {
        activity.mark_disk_error(DiskError::Reserve(short), &root.name);
        std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error())
    })
}

fn failed(e: OutOfQuota) -> StreamError {
    StreamError::LastOperationFailed(wasmtime::Error::new(e))
}

/// A guest's file read stream, counted and held to the quota.
struct MeteredInput {
    inner: DynInputStream,
    meter: Arc<Meter>,
    /// What a refused probe read: the stream has moved past it, so it is
    /// the next read's first byte, once the quota allows.
    probed: Option<Bytes>,
}

/// A guest's file write stream, counted and held to the quota.
struct MeteredOutput {
    inner: DynOutputStream,
    meter: Arc<Meter>,
    root: Arc<Root>,
}

impl MeteredOutput {
    /// Records the disk error `result` carries, if any.
    fn record_disk_error<T>(&self, result: StreamResult<T>) -> StreamResult<T> {
        if let Err(StreamError::LastOperationFailed(e)) = &result
            && let Some(disk) = e
                .downcast_ref::<std::io::Error>()
                .and_then(DiskError::of_io)
        {
            self.meter.activity.mark_disk_error(disk, &self.root.name);
        }
        result
    }

    /// Refuses a write of `len` bytes that would leave less than the
    /// root's reserve free, as a full disk (the call's result names the
    /// reserve).
    fn reserve(&self, len: u64) -> StreamResult<()> {
        reserve(&self.meter.activity, &self.root, len)
            .map_err(|e| StreamError::LastOperationFailed(wasmtime::Error::new(e)))
    }
}

impl MeteredInput {
    /// Settles a read with the meter: a failed read took nothing, and what
    /// a refused probe read is kept for later.
    fn settle(&mut self, grant: ReadGrant, read: StreamResult<Bytes>) -> StreamResult<Bytes> {
        let got = read.as_ref().map_or(0, |b| b.len() as u64);
        match self.meter.read_done(grant, got) {
            Ok(()) => read,
            Err(e) => {
                self.probed = read.ok();
                Err(failed(e))
            }
        }
    }

    /// The probed byte, if there is one: given now if the quota allows.
    fn probed(&mut self, size: usize) -> Option<StreamResult<Bytes>> {
        let bytes = self.probed.take_if(|_| size > 0)?;
        let grant = self.meter.read_grant(bytes.len() as u64);
        Some(self.settle(grant, Ok(bytes)))
    }
}

#[async_trait::async_trait]
impl Pollable for MeteredInput {
    async fn ready(&mut self) {
        if self.probed.is_none() {
            self.inner.ready().await
        }
    }
}

#[async_trait::async_trait]
impl Pollable for MeteredOutput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[async_trait::async_trait]
impl InputStream for MeteredInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if let Some(read) = self.probed(size) {
            return read;
        }
        let grant = self.meter.read_grant(size as u64);
        let bytes = self.inner.read(grant.size as usize);
        self.settle(grant, bytes)
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        if let Some(read) = self.probed(size) {
            return read;
        }
        let grant = self.meter.read_grant(size as u64);
        let bytes = self.inner.blocking_read(grant.size as usize).await;
        self.settle(grant, bytes)
    }

    // Skipping moves no byte to the guest: not counted.
    fn skip(&mut self, nelem: usize) -> StreamResult<usize> {
        if nelem > 0 && self.probed.take().is_some() {
            return Ok(1);
        }
        self.inner.skip(nelem)
    }

    async fn blocking_skip(&mut self, nelem: usize) -> StreamResult<usize> {
        if nelem > 0 && self.probed.take().is_some() {
            return Ok(1);
        }
        self.inner.blocking_skip(nelem).await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[async_trait::async_trait]
impl OutputStream for MeteredOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len() as u64;
        self.reserve(len)?;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.write(bytes);
        let written = self.record_disk_error(written);
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    fn flush(&mut self) -> StreamResult<()> {
        let flushed = self.inner.flush();
        self.record_disk_error(flushed)
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        let permit = self.inner.check_write();
        Ok(self.meter.permit(self.record_disk_error(permit)?))
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len() as u64;
        self.reserve(len)?;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.blocking_write_and_flush(bytes).await;
        let written = self.record_disk_error(written);
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        let len = nelem as u64;
        self.reserve(len)?;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.write_zeroes(nelem);
        let written = self.record_disk_error(written);
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        let ready = self.inner.write_ready().await;
        Ok(self.meter.permit(self.record_disk_error(ready)?))
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::quota::QuotaConfig;
    use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};

    fn test_root() -> Arc<Root> {
        Arc::new(Root::workspace_for_tests("ws", std::path::Path::new("/")))
    }

    /// A quota of `burst` bytes that refills one byte a minute: nothing
    /// during a test, however slow the machine.
    fn meter(burst: u64) -> (Arc<Meter>, Arc<Activity>, Arc<Quota>) {
        let activity = Arc::new(Activity::default());
        let quota = Arc::new(Quota::new(QuotaConfig {
            bytes_per_minute: 1,
            burst_bytes: burst,
        }));
        let meter = Arc::new(Meter::new(Arc::clone(&activity), Some(Arc::clone(&quota))));
        (meter, activity, quota)
    }

    fn out_of_quota(e: &StreamError) -> bool {
        matches!(e, StreamError::LastOperationFailed(e) if e.downcast_ref::<OutOfQuota>().is_some())
    }

    #[tokio::test]
    async fn stream_reads_are_counted_shortened_and_then_refused() {
        let (meter, activity, _) = meter(3000);
        let mut input = meter.input(Box::new(MemoryInputPipe::new(vec![7u8; 5000])));
        assert_eq!(input.blocking_read(2000).await.unwrap().len(), 2000);
        assert_eq!(
            input.read(4000).unwrap().len(),
            1000,
            "shortened to what is left"
        );
        // Empty: the probe finds data.
        assert!(out_of_quota(&input.read(10).unwrap_err()));
        assert_eq!(activity.bytes_read(), 3000);
        assert!(activity.out_of_quota());
    }

    #[tokio::test]
    async fn a_refused_probe_loses_no_byte() {
        let (meter, activity, quota) = meter(3);
        let data: Vec<u8> = (0..10).collect();
        let mut input = meter.input(Box::new(MemoryInputPipe::new(data)));
        assert_eq!(&input.read(3).unwrap()[..], [0, 1, 2]);
        assert!(
            out_of_quota(&input.read(10).unwrap_err()),
            "the probe found 3"
        );
        assert!(out_of_quota(&input.read(10).unwrap_err()), "still empty");
        quota.give_back(3);
        assert_eq!(&input.read(10).unwrap()[..], [3], "the probed byte first");
        assert_eq!(&input.read(10).unwrap()[..], [4, 5]);
        assert_eq!(activity.bytes_read(), 6);
    }

    #[tokio::test]
    async fn the_end_of_a_file_is_found_with_the_quota_empty() {
        let (meter, activity, quota) = meter(3000);
        let mut input = meter.input(Box::new(MemoryInputPipe::new(vec![7u8; 3000])));
        assert_eq!(input.blocking_read(3000).await.unwrap().len(), 3000);
        assert_eq!(quota.available(), 0);
        assert!(matches!(input.read(100), Err(StreamError::Closed)));
        assert!(!activity.out_of_quota(), "finding the end costs nothing");
    }

    #[tokio::test]
    async fn a_failed_read_takes_nothing_and_one_grant_is_at_most_64_kib() {
        let (meter, _, quota) = meter(1 << 20);
        let mut input = meter.input(Box::new(MemoryInputPipe::new(Vec::<u8>::new())));
        assert!(matches!(input.read(100), Err(StreamError::Closed)));
        assert_eq!(quota.available(), 1 << 20);
        let grant = meter.read_grant(1 << 20);
        assert_eq!(grant.size, MAX_READ_GRANT);
        assert_eq!(quota.available(), (1 << 20) - MAX_READ_GRANT);
        meter.read_done(grant, 10).unwrap();
        assert_eq!(
            quota.available(),
            (1 << 20) - 10,
            "the unused part returned"
        );
    }

    #[tokio::test]
    async fn stream_writes_need_their_whole_length() {
        let (meter, activity, _) = meter(3000);
        let pipe = MemoryOutputPipe::new(1 << 20);
        let mut output = meter.output(Box::new(pipe.clone()), test_root());
        assert_eq!(
            output.check_write().unwrap(),
            3000,
            "permit capped by the quota"
        );
        output
            .blocking_write_and_flush(Bytes::from(vec![1u8; 2500]))
            .await
            .unwrap();
        assert!(out_of_quota(
            &output.write(Bytes::from(vec![1u8; 600])).unwrap_err()
        ));
        assert_eq!(
            pipe.contents().len(),
            2500,
            "a refused write writes nothing"
        );
        output.write(Bytes::from(vec![1u8; 500])).unwrap();
        // Empty: the stream stays ready (a flush after the last byte works),
        // and the next write is refused.
        assert_eq!(output.check_write().unwrap(), 1);
        output.flush().unwrap();
        assert!(output.write(Bytes::from(vec![1u8; 1])).is_err());
        assert_eq!(pipe.contents().len(), 3000);
        assert_eq!(activity.bytes_written(), 3000);
    }

    #[tokio::test]
    async fn without_a_quota_everything_is_counted_and_nothing_refused() {
        let activity = Arc::new(Activity::default());
        let meter = Arc::new(Meter::new(Arc::clone(&activity), None));
        let mut input = meter.input(Box::new(MemoryInputPipe::new(vec![7u8; 5000])));
        assert_eq!(input.read(8000).unwrap().len(), 5000);
        let pipe = MemoryOutputPipe::new(1 << 20);
        let mut output = meter.output(Box::new(pipe.clone()), test_root());
        output.write(Bytes::from(vec![1u8; 4000])).unwrap();
        assert_eq!(
            (activity.bytes_read(), activity.bytes_written()),
            (5000, 4000)
        );
        assert!(!activity.out_of_quota());
    }
}
