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
//! A read is shortened to what the quota holds; a write may only be as long
//! as the quota's permit; with nothing left the operation fails with an
//! [`OutOfQuota`] error (`quota`, the WASI code for EDQUOT) and the call is
//! marked, so the host answers with the quota rule whatever the guest makes
//! of the error.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, Pollable, StreamError, StreamResult,
};

use super::fs::Activity;
use crate::quota::Quota;

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

    /// How many of `want` bytes may be read now.
    pub fn grant(&self, want: u64) -> Result<u64, OutOfQuota> {
        match &self.quota {
            None => Ok(want),
            Some(q) => q.take(want).map_err(|_| self.out()),
        }
    }

    /// A read granted `granted` bytes and got `got`: counts them and returns
    /// the rest to the quota.
    pub fn read(&self, granted: u64, got: u64) {
        self.activity.count_read(got);
        if let Some(q) = &self.quota {
            q.give_back(granted.saturating_sub(got));
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
    /// capped by the quota.
    fn permit(&self, stream: usize) -> Result<usize, OutOfQuota> {
        match &self.quota {
            None => Ok(stream),
            Some(_) if stream == 0 => Ok(0),
            Some(q) => match usize::try_from(q.available()).unwrap_or(usize::MAX) {
                0 => Err(self.out()),
                left => Ok(stream.min(left)),
            },
        }
    }

    fn out(&self) -> OutOfQuota {
        self.activity.mark_out_of_quota();
        OutOfQuota
    }

    /// Wraps a stream the guest is about to get.
    pub fn input(self: &Arc<Self>, inner: DynInputStream) -> DynInputStream {
        Box::new(Metered {
            inner,
            meter: Arc::clone(self),
        })
    }

    pub fn output(self: &Arc<Self>, inner: DynOutputStream) -> DynOutputStream {
        Box::new(Metered {
            inner,
            meter: Arc::clone(self),
        })
    }
}

fn failed(e: OutOfQuota) -> StreamError {
    StreamError::LastOperationFailed(wasmtime::Error::new(e))
}

/// A guest's file stream, counted and held to the quota.
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
}

#[async_trait::async_trait]
impl<S: Pollable> Pollable for Metered<S> {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[async_trait::async_trait]
impl InputStream for Metered<DynInputStream> {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let granted = self.meter.grant(size as u64).map_err(failed)?;
        let bytes = self.inner.read(granted as usize)?;
        self.meter.read(granted, bytes.len() as u64);
        Ok(bytes)
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        let granted = self.meter.grant(size as u64).map_err(failed)?;
        let bytes = self.inner.blocking_read(granted as usize).await;
        let got = bytes.as_ref().map_or(0, |b| b.len() as u64);
        self.meter.read(granted, got);
        bytes
    }

    // Skipping moves no byte to the guest: not counted.
    fn skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.skip(nelem)
    }

    async fn blocking_skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.blocking_skip(nelem).await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[async_trait::async_trait]
impl OutputStream for Metered<DynOutputStream> {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len() as u64;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.write(bytes);
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        let permit = self.inner.check_write()?;
        self.meter.permit(permit).map_err(failed)
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let len = bytes.len() as u64;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.blocking_write_and_flush(bytes).await;
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        let len = nelem as u64;
        self.meter.take_all(len).map_err(failed)?;
        let written = self.inner.write_zeroes(nelem);
        self.meter.wrote(len, if written.is_ok() { len } else { 0 });
        written
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        let permit = self.inner.write_ready().await?;
        self.meter.permit(permit).map_err(failed)
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::QuotaConfig;
    use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};

    fn meter(burst: u64) -> (Arc<Meter>, Arc<Activity>) {
        let activity = Arc::new(Activity::default());
        let quota = Quota::new(QuotaConfig {
            bytes_per_minute: 1024,
            burst_bytes: burst,
        });
        let meter = Arc::new(Meter::new(Arc::clone(&activity), Some(Arc::new(quota))));
        (meter, activity)
    }

    #[tokio::test]
    async fn stream_reads_are_counted_shortened_and_then_refused() {
        let (meter, activity) = meter(3000);
        let mut input = meter.input(Box::new(MemoryInputPipe::new(vec![7u8; 5000])));
        assert_eq!(input.blocking_read(2000).await.unwrap().len(), 2000);
        // Shortened to the 1000 bytes left (the refill over a few
        // microseconds is a fraction of a byte).
        assert_eq!(input.read(4000).unwrap().len(), 1000);
        assert!(matches!(
            input.read(10),
            Err(StreamError::LastOperationFailed(e)) if e.downcast_ref::<OutOfQuota>().is_some()
        ));
        assert_eq!(activity.bytes_read(), 3000);
        assert!(activity.out_of_quota());
    }

    #[tokio::test]
    async fn stream_writes_need_their_whole_length() {
        let (meter, activity) = meter(3000);
        let pipe = MemoryOutputPipe::new(1 << 20);
        let mut output = meter.output(Box::new(pipe.clone()));
        assert_eq!(
            output.check_write().unwrap(),
            3000,
            "permit capped by the quota"
        );
        output
            .blocking_write_and_flush(Bytes::from(vec![1u8; 2500]))
            .await
            .unwrap();
        assert!(
            output.write(Bytes::from(vec![1u8; 600])).is_err(),
            "500 left"
        );
        assert_eq!(
            pipe.contents().len(),
            2500,
            "a refused write writes nothing"
        );
        output.write(Bytes::from(vec![1u8; 500])).unwrap();
        assert!(output.check_write().is_err(), "nothing left");
        assert_eq!(pipe.contents().len(), 3000);
        assert_eq!(activity.bytes_written(), 3000);
        assert!(activity.out_of_quota());
    }

    #[tokio::test]
    async fn without_a_quota_everything_is_counted_and_nothing_refused() {
        let activity = Arc::new(Activity::default());
        let meter = Arc::new(Meter::new(Arc::clone(&activity), None));
        let mut input = meter.input(Box::new(MemoryInputPipe::new(vec![7u8; 5000])));
        assert_eq!(input.read(8000).unwrap().len(), 5000);
        let pipe = MemoryOutputPipe::new(1 << 20);
        let mut output = meter.output(Box::new(pipe.clone()));
        output.write(Bytes::from(vec![1u8; 4000])).unwrap();
        assert_eq!(
            (activity.bytes_read(), activity.bytes_written()),
            (5000, 4000)
        );
        assert!(!activity.out_of_quota());
    }
}
