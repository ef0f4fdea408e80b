//! Bodies as the endpoint sees them: a request body that must keep up a
//! least rate, and a response body that tells the connection table when
//! the answer is over.
//!
//! hyper bounds how long a request's head may take, not its body: a client
//! could send its headers, then one byte a second for as long as the body
//! is long, and hold the connection meanwhile. [`MinRate`] cuts such a
//! body, the way Kestrel's `MinRequestBodyDataRate` does: after a grace
//! period (the header timeout), the bytes received must average at least
//! the rate since the body began to be read.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::conns;

/// A body cut for arriving too slowly.
#[derive(Debug, thiserror::Error)]
#[error("the request body arrived slower than {0} bytes per second")]
pub struct TooSlow(pub u64);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails with [`TooSlow`] when it falls below the
/// least rate, and tells the connection table when it is complete.
pub struct MinRate<B> {
    inner: B,
    /// Bytes per second; 0: no least rate.
    rate: u64,
    grace: Duration,
    /// When the body was first asked for: a handler that reads it late
    /// must not count its own delay against the client.
    started: Option<Instant>,
    received: u64,
    timer: Pin<Box<Sleep>>,
    request: Option<Arc<conns::Request>>,
    /// Set when the body was cut, for the answer to say why.
    cut: Arc<AtomicBool>,
    over: bool,
}

impl<B> MinRate<B> {
    pub fn new(
        inner: B,
        rate: u64,
        grace: Duration,
        request: Arc<conns::Request>,
        cut: Arc<AtomicBool>,
    ) -> MinRate<B> {
        MinRate {
            inner,
            rate,
            grace,
            started: None,
            received: 0,
            timer: Box::pin(tokio::time::sleep(grace)),
            request: Some(request),
            cut,
            over: false,
        }
    }

    /// When the bytes received so far stop being enough.
    fn deadline(&self, started: Instant) -> Instant {
        let nanos = u128::from(self.received) * 1_000_000_000 / u128::from(self.rate.max(1));
        started + self.grace + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn complete(&mut self) {
        self.over = true;
        if let Some(request) = self.request.take() {
            request.body_done();
        }
    }
}

impl<B> Body for MinRate<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.over {
            return Poll::Ready(None);
        }
        let started = *this.started.get_or_insert_with(Instant::now);
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.complete();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.over = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.complete();
                Poll::Ready(None)
            }
            Poll::Pending if this.rate == 0 => Poll::Pending,
            Poll::Pending => {
                let deadline = this.deadline(started);
                this.timer.as_mut().reset(deadline);
                if this.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.over = true;
                this.cut.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(TooSlow(this.rate).into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.over || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds its connection's [`conns::Request`] until
/// the last byte is out: until then the connection is answering, and
/// never gives way to another.
pub struct Held<B> {
    inner: B,
    request: Option<Arc<conns::Request>>,
}

impl<B> Held<B> {
    pub fn new(inner: B, request: Arc<conns::Request>) -> Held<B> {
        Held {
            inner,
            request: Some(request),
        }
    }
}

impl<B: Body + Unpin> Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            this.request = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::conns::{ConnLimits, Conns};
    use http_body_util::BodyExt;

    /// A body fed by hand, one chunk at a time.
    struct Fed(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Fed {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0
                .poll_recv(cx)
                .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
        }
    }

    fn request() -> Arc<conns::Request> {
        let conns = Conns::new(&ConnLimits {
            max: 4,
            per_client: 4,
            header_timeout: Duration::from_secs(1),
            min_body_rate: 1,
        });
        let ticket = conns.admit("127.0.0.1".parse().unwrap()).unwrap();
        Arc::new(ticket.request(false))
    }

    /// Sends `chunks` bytes, one every `every`, then ends the body.
    fn feed(chunks: usize, size: usize, every: Duration) -> Fed {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for _ in 0..chunks {
                tokio::time::sleep(every).await;
                if tx.send(Bytes::from(vec![b'x'; size])).await.is_err() {
                    return;
                }
            }
        });
        Fed(rx)
    }

    #[tokio::test]
    async fn a_body_below_the_rate_is_cut_after_the_grace() {
        let cut = Arc::new(AtomicBool::new(false));
        // One byte every 50 ms (20 B/s) against 1,000 B/s after 200 ms.
        let body = MinRate::new(
            feed(100, 1, Duration::from_millis(50)),
            1000,
            Duration::from_millis(200),
            request(),
            Arc::clone(&cut),
        );
        let err = body.collect().await.expect_err("cut");
        assert_eq!(
            err.to_string(),
            "the request body arrived slower than 1000 bytes per second"
        );
        assert!(cut.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn a_body_at_the_rate_or_within_the_grace_is_whole() {
        for (chunks, size, every) in [
            // Slow but over within the grace.
            (3, 1, Duration::from_millis(20)),
            // Past the grace, far above the rate.
            (20, 1000, Duration::from_millis(20)),
        ] {
            let cut = Arc::new(AtomicBool::new(false));
            let body = MinRate::new(
                feed(chunks, size, every),
                1000,
                Duration::from_millis(200),
                request(),
                Arc::clone(&cut),
            );
            let whole = body.collect().await.expect("whole").to_bytes();
            assert_eq!(whole.len(), chunks * size);
            assert!(!cut.load(Ordering::Relaxed));
        }
    }

    #[tokio::test]
    async fn no_rate_waits_for_ever() {
        let body = MinRate::new(
            feed(3, 1, Duration::from_millis(150)),
            0,
            Duration::from_millis(10),
            request(),
            Arc::new(AtomicBool::new(false)),
        );
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 3);
    }
}
