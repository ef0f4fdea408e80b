//! Bodies as the endpoint sees them: a request body that must keep up a
//! least rate, and a response body that tells the connection table when
//! the answer is over.
//!
//! hyper bounds how long a request's head may take, not its body: a client
//! could send its headers, then one byte a second for as long as the body
//! is long, and hold the connection meanwhile. [`MinRate`] cuts such a
//! body, the way Kestrel's `MinRequestBodyDataRate` does, but over a
//! window rather than on average since the body began (an average would
//! let a client send most of a large body at once, then hold the last byte
//! for as long as the bytes already sent buy at the rate, while the body
//! sits in memory): every window (the header timeout) must bring at least
//! the rate × the window in bytes, counted from when the body is first
//! read or the previous window's share was met. And a whole body must
//! arrive within an absolute time, however fast it goes, as Go's
//! `ReadTimeout` bounds a request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::conns;

/// Why a request body was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Cut {
    #[error("the request body arrived slower than {0} bytes per second (--min-body-rate)")]
    TooSlow(u64),
    #[error("the request body did not arrive whole within {0} s (--body-timeout-secs)")]
    TooLong(u64),
}

/// What a request body must keep up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyLimits {
    /// Bytes per second over each window; 0: no least rate.
    pub rate: u64,
    /// The window the rate is measured over.
    pub window: Duration,
    /// The most a whole body may take.
    pub whole: Duration,
}

impl BodyLimits {
    /// What a request body must keep up under `limits`: the rate over each
    /// header-timeout window, and the whole body's time.
    pub fn of(limits: &conns::ConnLimits) -> BodyLimits {
        BodyLimits {
            rate: limits.min_body_rate,
            window: limits.header_timeout,
            whole: limits.body_timeout,
        }
    }

    /// The bytes each window must bring.
    fn quota(&self) -> u64 {
        let bytes = u128::from(self.rate) * self.window.as_millis() / 1000;
        u64::try_from(bytes).unwrap_or(u64::MAX).max(1)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails with [`Cut`] when it falls below the least
/// rate or runs past its time, and tells the connection table when it is
/// complete.
pub struct MinRate<B> {
    inner: B,
    limits: BodyLimits,
    /// When the body was first asked for: a handler that reads it late
    /// must not count its own delay against the client.
    started: Option<Instant>,
    /// When the current window began, and the bytes it has brought.
    window: Option<(Instant, u64)>,
    timer: Pin<Box<Sleep>>,
    request: Option<Arc<conns::Request>>,
    /// Set when the body was cut, for the answer to say why.
    cut: Arc<OnceLock<Cut>>,
    over: bool,
}

impl<B> MinRate<B> {
    pub fn new(
        inner: B,
        limits: BodyLimits,
        request: Arc<conns::Request>,
        cut: Arc<OnceLock<Cut>>,
    ) -> MinRate<B> {
        MinRate {
            inner,
            limits,
            started: None,
            window: None,
            timer: Box::pin(tokio::time::sleep(limits.window)),
            request: Some(request),
            cut,
            over: false,
        }
    }

    /// Counts `bytes` into the window; one whose share is met ends, and
    /// the next begins now.
    fn received(&mut self, bytes: u64) {
        let quota = self.limits.quota();
        if let Some((begun, got)) = &mut self.window {
            *got = got.saturating_add(bytes);
            if *got >= quota {
                *begun = Instant::now();
                *got = 0;
            }
        }
    }

    /// When the body is cut unless more arrives, and why.
    fn deadline(&self, started: Instant) -> (Instant, Cut) {
        let whole = (
            started + self.limits.whole,
            Cut::TooLong(self.limits.whole.as_secs()),
        );
        match self.window {
            Some((begun, _)) if self.limits.rate > 0 => {
                let slow = begun + self.limits.window;
                if slow < whole.0 {
                    (slow, Cut::TooSlow(self.limits.rate))
                } else {
                    whole
                }
            }
            _ => whole,
        }
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
        this.window.get_or_insert((started, 0));
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received(data.len() as u64);
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
            Poll::Pending => {
                let (deadline, why) = this.deadline(started);
                this.timer.as_mut().reset(deadline);
                if this.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.over = true;
                let _ = this.cut.set(why);
                Poll::Ready(Some(Err(why.into())))
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
    use crate::server::http::conns::{ConnLimits, Conns};
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
            max_streams: 1,
            per_client_streams: 1,
            header_timeout: Duration::from_secs(1),
            min_body_rate: 1,
            body_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(30),
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

    fn limits(rate: u64, window_ms: u64, whole_ms: u64) -> BodyLimits {
        BodyLimits {
            rate,
            window: Duration::from_millis(window_ms),
            whole: Duration::from_millis(whole_ms),
        }
    }

    /// Sends `chunks` as they come: (after how long, how many bytes); then
    /// holds the body open (unended) until `hold` has passed.
    fn feed_then_hold(chunks: Vec<(Duration, usize)>, hold: Duration) -> Fed {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for (after, size) in chunks {
                tokio::time::sleep(after).await;
                if tx.send(Bytes::from(vec![b'x'; size])).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(hold).await;
        });
        Fed(rx)
    }

    #[tokio::test]
    async fn a_body_below_the_rate_is_cut_after_the_window() {
        let cut = Arc::new(OnceLock::new());
        // One byte every 50 ms (20 B/s) against 1,000 B/s over 200 ms.
        let body = MinRate::new(
            feed(100, 1, Duration::from_millis(50)),
            limits(1000, 200, 60_000),
            request(),
            Arc::clone(&cut),
        );
        let err = body.collect().await.expect_err("cut");
        assert_eq!(
            err.to_string(),
            "the request body arrived slower than 1000 bytes per second (--min-body-rate)"
        );
        assert_eq!(cut.get(), Some(&Cut::TooSlow(1000)));
    }

    #[tokio::test]
    async fn a_body_sent_at_once_then_held_is_cut_one_window_later() {
        let cut = Arc::new(OnceLock::new());
        // 100,000 bytes at once would buy 100 s on average at 1,000 B/s:
        // over a window, the hold is cut once 300 ms bring nothing.
        let since = Instant::now();
        let body = MinRate::new(
            feed_then_hold(vec![(Duration::ZERO, 100_000)], Duration::from_secs(30)),
            limits(1000, 300, 60_000),
            request(),
            Arc::clone(&cut),
        );
        body.collect().await.expect_err("cut");
        let took = since.elapsed();
        assert_eq!(cut.get(), Some(&Cut::TooSlow(1000)));
        assert!(took >= Duration::from_millis(290), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_body_that_keeps_the_rate_but_takes_too_long_is_cut() {
        let cut = Arc::new(OnceLock::new());
        // 1,000 bytes every 100 ms: ten times the rate, for longer than
        // the whole body may take.
        let since = Instant::now();
        let body = MinRate::new(
            feed(100, 1000, Duration::from_millis(100)),
            limits(1000, 400, 700),
            request(),
            Arc::clone(&cut),
        );
        let err = body.collect().await.expect_err("cut");
        assert_eq!(cut.get(), Some(&Cut::TooLong(0)));
        assert!(err.to_string().contains("--body-timeout-secs"), "{err}");
        let took = since.elapsed();
        assert!(took >= Duration::from_millis(690), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_body_at_the_rate_or_within_the_window_is_whole() {
        for (chunks, size, every) in [
            // Slow but over within the first window.
            (3, 1, Duration::from_millis(20)),
            // Past the first window, far above the rate.
            (20, 1000, Duration::from_millis(20)),
            // Each window's share in one burst, late in the window.
            (4, 400, Duration::from_millis(100)),
        ] {
            let cut = Arc::new(OnceLock::new());
            let body = MinRate::new(
                feed(chunks, size, every),
                limits(1000, 400, 60_000),
                request(),
                Arc::clone(&cut),
            );
            let whole = body.collect().await.expect("whole").to_bytes();
            assert_eq!(whole.len(), chunks * size);
            assert!(cut.get().is_none());
        }
    }

    #[tokio::test]
    async fn no_rate_waits_until_the_whole_body_time() {
        let body = MinRate::new(
            feed(3, 1, Duration::from_millis(150)),
            limits(0, 10, 60_000),
            request(),
            Arc::new(OnceLock::new()),
        );
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 3);
    }
}
