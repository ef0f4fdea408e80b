//! A connection's socket, as hyper writes to it: a write that makes no
//! progress for the send timeout fails the connection.
//!
//! hyper bounds how long a request's head may take, never how long an
//! answer may take to go out: a client that never reads (a small receive
//! buffer, a large `read_file` result) would keep its connection answering,
//! so never giving way, for ever, and enough of them would hold every
//! connection. [`SendTimeout`] bounds the time between two writes that
//! make progress, as nginx's `send_timeout` does: an answer a slow client
//! reads slowly still goes out; one nobody reads is cut. A connection with
//! nothing to write (an idle event stream) waits for nothing here.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A write that made no progress for too long.
#[derive(Debug, thiserror::Error)]
#[error("the client read nothing of the answer for {0} s (--send-timeout-secs)")]
pub struct SendStalled(pub u64);

/// `inner`, whose writes fail once one has waited `limit` without
/// progress.
pub struct SendTimeout<S> {
    inner: S,
    limit: Duration,
    /// Armed when a write first finds the socket full; disarmed by any
    /// progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> SendTimeout<S> {
    pub fn new(inner: S, limit: Duration) -> SendTimeout<S> {
        SendTimeout {
            inner,
            limit,
            stalled: None,
        }
    }

    /// A write's outcome, given the time it has waited.
    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            SendStalled(limit.as_secs()),
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.progress(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.progress(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    // A socket's flush and shutdown wait for no reader: they are neither
    // timed nor taken for progress.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        // A pipe of 64 bytes whose far end is never read.
        let (near, _far) = tokio::io::duplex(64);
        let mut near = SendTimeout::new(near, Duration::from_millis(200));
        let since = tokio::time::Instant::now();
        let err = near.write_all(&[0u8; 4096]).await.expect_err("stalled");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("--send-timeout-secs"), "{err}");
        let took = since.elapsed();
        assert!(took >= Duration::from_millis(190), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_gets_everything() {
        use tokio::io::AsyncReadExt;
        let (near, mut far) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => return got.len(),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        // 50 ms between reads, each making room, against a 400 ms limit:
        // 1 KiB takes 800 ms, twice the limit, and goes out whole.
        let mut near = SendTimeout::new(near, Duration::from_millis(400));
        near.write_all(&[1u8; 1024]).await.expect("whole");
        near.shutdown().await.unwrap();
        drop(near);
        assert_eq!(reader.await.unwrap(), 1024);
    }
}
