//! The queue every line to stdout goes through: whole lines, in order, so
//! rmcp's answers and the guard's never interleave.

use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::empty;

/// stdout and what is queued for it: whole lines, written in order; what a
/// cancelled write left stays queued for the next writer.
pub(super) struct Output<W> {
    writer: Option<W>,
    queued: Vec<u8>,
    /// How much of `queued` is already out.
    sent: usize,
}

impl<W: AsyncWrite + Unpin> Output<W> {
    /// An output writing to `writer`, nothing queued.
    pub(super) fn new(writer: W) -> Self {
        Output {
            writer: Some(writer),
            queued: Vec::new(),
            sent: 0,
        }
    }

    /// Closes the output: every later line fails at once.
    pub(super) fn close(&mut self) {
        self.writer = None;
    }

    /// Queues one whole line (ending in a newline) and writes the queue out.
    pub(super) async fn put(&mut self, line: Vec<u8>) -> std::io::Result<()> {
        if self.writer.is_none() {
            return Err(closed());
        }
        if self.sent == self.queued.len() {
            // Nothing waiting: the line itself becomes the queue, uncopied.
            (self.queued, self.sent) = (line, 0);
        } else {
            self.queued.extend_from_slice(&line);
        }
        self.drain().await
    }

    /// Writes out what is queued. Each write's progress is recorded as it
    /// completes, so a cancelled drain loses and repeats nothing. A failed
    /// write closes the output (a client that closed our stdout reads no
    /// more): what is queued is dropped, and every later line fails at once.
    pub(super) async fn drain(&mut self) -> std::io::Result<()> {
        let writer = self.writer.as_mut().ok_or_else(closed)?;
        while self.sent < self.queued.len() {
            let written = match writer.write(&self.queued[self.sent..]).await {
                Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
                other => other,
            };
            match written {
                Ok(n) => self.sent += n,
                Err(e) => {
                    (self.writer, self.queued, self.sent) = (None, Vec::new(), 0);
                    return Err(e);
                }
            }
        }
        empty(&mut self.queued);
        self.sent = 0;
        writer.flush().await
    }
}

/// The error of a line for an output that is closed.
fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PING_1: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    const PING_2: &str = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A client that closed our stdout gets nothing more queued for it: the
    /// first failed write drops the queue, every later line fails at once.
    #[test]
    fn a_failed_write_closes_the_output() {
        runtime().block_on(async {
            let (ours, theirs) = tokio::io::duplex(64);
            drop(theirs);
            let mut output = Output {
                writer: Some(ours),
                queued: Vec::new(),
                sent: 0,
            };
            assert!(output.put(PING_1.as_bytes().to_vec()).await.is_err());
            assert!(output.writer.is_none() && output.queued.is_empty());
            let again = output.put(PING_2.as_bytes().to_vec()).await.unwrap_err();
            assert_eq!(again.kind(), std::io::ErrorKind::NotConnected);
            assert!(output.queued.is_empty());
        });
    }
}
