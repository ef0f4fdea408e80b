//! [`Guarded`], the transport rmcp is served with: it reads the client's
//! lines, hands the well-formed ones to rmcp (the rest to the line guard's
//! answers), and at the end of the input holds on until the requests in
//! flight are answered.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Mutex;

use super::in_flight::InFlight;
use super::judge::{Line, answer_line, error, judge};
use super::output::Output;
use super::{MAX_LINE, Rx, Tx, empty};

/// The stdio transport rmcp is served with: lines read from `input` and
/// judged here, rmcp's messages and the guard's answers written to `output`.
pub struct Guarded<R, W> {
    input: BufReader<R>,
    /// The line being read: what a cancelled read left of it stays here
    /// (rmcp polls `receive` in a `select!`).
    line: Vec<u8>,
    /// Dropping the rest of an over-long line, already answered.
    skipping: bool,
    /// The guard's answer, not yet handed to the output.
    answer: Option<Vec<u8>>,
    /// An answer of the guard's may still be in the output's queue.
    owed: bool,
    output: Arc<Mutex<Output<W>>>,
    /// The requests handed to rmcp and not answered yet.
    in_flight: Arc<InFlight>,
    /// How long the end of the input waits for them (see [`Self::receive`]).
    answer_wait: std::time::Duration,
}

/// What reading came to.
enum Read {
    /// A whole line is in `line`.
    Line,
    /// The line was over [`MAX_LINE`]: dropped, to be answered.
    Over,
    /// The end of input.
    End,
}

impl<R, W> Guarded<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The transport over `input` and `output`; the end of the input
    /// waits for no answer unless told to ([`Self::answering_for`]).
    pub fn new(input: R, output: W) -> Self {
        Self {
            input: BufReader::with_capacity(READ_BUFFER, input),
            line: Vec::new(),
            skipping: false,
            answer: None,
            owed: false,
            output: Arc::new(Mutex::new(Output::new(output))),
            in_flight: Arc::default(),
            answer_wait: std::time::Duration::ZERO,
        }
    }

    /// Lets the end of the input wait up to `wait` for the requests still
    /// running to be answered (the server passes what a call may take).
    pub fn answering_for(mut self, wait: std::time::Duration) -> Self {
        self.answer_wait = wait;
        self
    }

    /// Reads on until `self.line` holds a whole line, its newline included
    /// (the input's last line may have none). A line over [`MAX_LINE`] is
    /// dropped as it comes, never held: its bytes past the cap are read and
    /// thrown away (`skipping`) on the next calls.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                self.skipping = false;
                return Ok(match self.line.is_empty() {
                    true => Read::End,
                    false => Read::Line,
                });
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.skipping {
                self.input.consume(take);
                self.skipping = newline.is_none();
                continue;
            }
            if self.line.len() + newline.unwrap_or(available.len()) > MAX_LINE {
                self.input.consume(take);
                empty(&mut self.line);
                self.skipping = newline.is_none();
                return Ok(Read::Over);
            }
            self.line.extend_from_slice(&available[..take]);
            self.input.consume(take);
            if newline.is_some() {
                return Ok(Read::Line);
            }
        }
    }

    /// Writes out the guard's answer, if one waits, and whatever else is
    /// queued (what a cancelled write left).
    async fn settle_answer(&mut self) -> std::io::Result<()> {
        let mut output = self.output.lock().await;
        if let Some(answer) = self.answer.take() {
            self.owed = true;
            output.put(answer).await?;
        } else {
            output.drain().await?;
        }
        self.owed = false;
        Ok(())
    }
}

/// How long the last answers may take to reach the client at the end.
const CLOSING: std::time::Duration = std::time::Duration::from_secs(5);

/// What the line reader keeps of the client's input at a time.
const READ_BUFFER: usize = 1 << 16;

impl<R, W> rmcp::transport::Transport<rmcp::RoleServer> for Guarded<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: Tx) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let answered = match &item {
            rmcp::model::JsonRpcMessage::Response(r) => Some(r.id.clone()),
            rmcp::model::JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let in_flight = self.in_flight.clone();
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        async move {
            let sent = match line {
                Ok(line) => output.lock().await.put(line).await,
                Err(e) => Err(e.into()),
            };
            // Answered even when the client can no longer read it: the end
            // of the input must not wait for an answer that cannot arrive.
            if let Some(id) = answered {
                in_flight.answered(&id);
            }
            sent
        }
    }

    /// The next message for rmcp. At the end of the input it first waits
    /// (up to [`Self::answering_for`]) until the requests already handed on
    /// are answered: rmcp gives the calls in flight when the input ends only
    /// 5 s, and a client that writes its requests and closes its end (a
    /// file on stdin, `echo … |`) expects every answer.
    async fn receive(&mut self) -> Option<Rx> {
        loop {
            if (self.answer.is_some() || self.owed) && self.settle_answer().await.is_err() {
                return None;
            }
            match self.read_line().await {
                Err(_) => return None,
                Ok(Read::End) => {
                    let _ =
                        tokio::time::timeout(self.answer_wait, self.in_flight.all_answered()).await;
                    return None;
                }
                Ok(Read::Over) => {
                    self.answer = Some(answer_line(&error(
                        Value::Null,
                        -32600,
                        format!("invalid request: a message may be at most {MAX_LINE} bytes"),
                    )))
                }
                Ok(Read::Line) => {
                    // (A line without its newline is the input's last: the
                    // next read finds the end again.)
                    let judged = judge(&self.line);
                    empty(&mut self.line);
                    match judged {
                        Line::Message(message) => {
                            self.in_flight.note(&message);
                            return Some(*message);
                        }
                        Line::Answer(answer) => self.answer = Some(answer),
                        Line::Skip => {}
                    }
                }
            }
        }
    }

    /// Writes out what is queued, giving a client that has stopped reading
    /// [`CLOSING`] to take it, and closes the output.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = tokio::time::timeout(CLOSING, async {
            // With the guard's answer a cancelled `receive` left, if any.
            let drained = self.settle_answer().await;
            self.output.lock().await.close();
            drained
        });
        closed.await.unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not read the last answers",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncWriteExt;

    use rmcp::transport::Transport;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Runs the transport on `input` to its end, sending `reply` (rmcp's
    /// side) after the first message: what rmcp was given, and what the
    /// client got.
    fn exchange(input: Vec<u8>, reply: Option<Tx>) -> (Vec<Value>, String) {
        runtime().block_on(async {
            let (client_out, client_in) = tokio::io::duplex(1 << 16);
            let reading = tokio::spawn(async move {
                let mut got = String::new();
                BufReader::new(client_in)
                    .read_to_string(&mut got)
                    .await
                    .unwrap();
                got
            });
            let mut transport = Guarded::new(std::io::Cursor::new(input), client_out);
            let mut reply = reply;
            let mut given = Vec::new();
            while let Some(message) = transport.receive().await {
                given.push(serde_json::to_value(&message).unwrap());
                if let Some(reply) = reply.take() {
                    transport.send(reply).await.unwrap();
                }
            }
            transport.close().await.unwrap();
            drop(transport);
            (given, reading.await.unwrap())
        })
    }

    use tokio::io::AsyncReadExt;

    const PING_1: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    const PING_2: &str = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";

    fn ping(n: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": n, "method": "ping"})
    }

    /// The guard's own answer to the last line still goes out when input
    /// ends right after it.
    #[test]
    fn answers_are_not_lost_at_the_end_of_input() {
        for _ in 0..50 {
            let (given, got) = exchange(format!("{PING_1}{{nope\n").into_bytes(), None);
            assert_eq!(given, [ping(1)]);
            assert!(got.contains("-32700"), "{got:?}");
        }
    }

    /// A line over the cap is answered and skipped; the next one passes. A
    /// line of exactly the cap (its newline aside) passes.
    #[test]
    fn an_over_long_line_is_answered_and_the_session_goes_on() {
        let mut input = vec![b'x'; MAX_LINE + 1];
        input.push(b'\n');
        let mut longest = PING_1.trim_end().as_bytes().to_vec();
        longest.resize(MAX_LINE, b' ');
        input.extend_from_slice(&longest);
        input.push(b'\n');
        input.extend_from_slice(PING_2.as_bytes());
        let (given, got) = exchange(input, None);
        assert_eq!(given, [ping(1), ping(2)]);
        assert_eq!(got.lines().count(), 1, "{got}");
        assert!(got.contains("at most 16777216 bytes"), "{got:?}");
    }

    #[test]
    fn lines_pass_through_whole_and_answers_come_out_between_them() {
        // The last line has no newline: it is taken all the same.
        let input = format!("{PING_1}{{nope\n{}", PING_2.trim_end());
        let reply = Tx::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::NumberOrString::Number(1),
        );
        let (given, got) = exchange(input.into_bytes(), Some(reply));
        assert_eq!(given, [ping(1), ping(2)]);
        let lines: Vec<Value> = got
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{got}");
        assert!(
            lines
                .iter()
                .any(|l| l["id"] == 1 && l["result"].is_object()),
            "{got}"
        );
        let parse_error = lines.iter().find(|l| l["error"]["code"] == -32700).unwrap();
        assert_eq!(parse_error["id"], Value::Null);
    }

    /// A read that rmcp cancels halfway through a line (it polls `receive`
    /// in a `select!`) loses none of it.
    #[test]
    fn a_cancelled_read_keeps_the_half_line() {
        runtime().block_on(async {
            let (mut client, server_in) = tokio::io::duplex(1 << 16);
            let mut transport = Guarded::new(server_in, tokio::io::sink());
            let (head, tail) = PING_1.split_at(10);
            client.write_all(head.as_bytes()).await.unwrap();
            let waited =
                tokio::time::timeout(std::time::Duration::from_millis(20), transport.receive())
                    .await;
            assert!(waited.is_err(), "a half line is no message");
            client.write_all(tail.as_bytes()).await.unwrap();
            let message = transport.receive().await.unwrap();
            assert_eq!(serde_json::to_value(&message).unwrap(), ping(1));
        });
    }

    /// The end of the input waits for the requests rmcp still has: it
    /// comes only once each is answered (rmcp would give them 5 s), and at
    /// once when none is left or with no wait set.
    #[test]
    fn the_end_of_the_input_waits_for_the_answers() {
        runtime().block_on(async {
            let input = std::io::Cursor::new(PING_1.as_bytes().to_vec());
            let mut transport = Guarded::new(input, tokio::io::sink())
                .answering_for(std::time::Duration::from_secs(30));
            let message = transport.receive().await.unwrap();
            assert_eq!(serde_json::to_value(&message).unwrap(), ping(1));
            let answer: Tx =
                serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
            let answering = transport.send(answer);
            let waited =
                tokio::time::timeout(std::time::Duration::from_millis(50), transport.receive())
                    .await;
            assert!(waited.is_err(), "the end waits while ping 1 is unanswered");
            answering.await.unwrap();
            let end = tokio::time::timeout(std::time::Duration::from_secs(5), transport.receive());
            assert!(end.await.unwrap().is_none(), "answered: the input ends");
            let mut unwaited = Guarded::new(std::io::Cursor::new(PING_2), tokio::io::sink());
            assert!(unwaited.receive().await.is_some());
            let end = tokio::time::timeout(std::time::Duration::from_secs(1), unwaited.receive());
            assert!(
                end.await.unwrap().is_none(),
                "no wait set: the input ends at once"
            );
            let (ours, theirs) = tokio::io::duplex(64);
            drop(theirs);
            let mut gone = Guarded::new(std::io::Cursor::new(PING_1), ours)
                .answering_for(std::time::Duration::from_secs(30));
            assert!(gone.receive().await.is_some());
            let answer: Tx =
                serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
            assert!(gone.send(answer).await.is_err(), "the client closed its end");
            let end = tokio::time::timeout(std::time::Duration::from_secs(1), gone.receive());
            assert!(end.await.unwrap().is_none(), "an answer that failed is not waited for");
            let cancelled = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":2}}\n";
            let input = std::io::Cursor::new(format!("{PING_2}{cancelled}").into_bytes());
            let mut transport = Guarded::new(input, tokio::io::sink())
                .answering_for(std::time::Duration::from_secs(30));
            assert!(transport.receive().await.is_some());
            assert!(transport.receive().await.is_some());
            let end = tokio::time::timeout(std::time::Duration::from_secs(1), transport.receive());
            assert!(end.await.unwrap().is_none(), "a cancelled request is not waited for");
        });
    }

    /// An answer of the guard's that a cancelled `receive` left unwritten
    /// goes out at the close.
    #[test]
    fn the_close_writes_an_answer_left_unwritten() {
        runtime().block_on(async {
            let (client_out, mut client_in) = tokio::io::duplex(1 << 16);
            let mut transport = Guarded::new(tokio::io::empty(), client_out);
            transport.answer = Some(answer_line(&error(Value::Null, -32700, "x".into())));
            transport.close().await.unwrap();
            drop(transport);
            let mut got = String::new();
            client_in.read_to_string(&mut got).await.unwrap();
            assert!(got.ends_with("\n") && got.contains("-32700"), "{got:?}");
        });
    }

    /// What the shortcut leaves still reaches rmcp, or the guard's answer.
    #[test]
    fn lines_the_shortcut_leaves_are_judged_as_before() {
        let line = |s: &str| format!("{s}\n");
        let input = [
            line(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":7}}"#),
            line(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":5}"#),
            line(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}"#),
            line(r#"{"jsonrpc":"2.0","id":6,"error":5}"#),
            line(r#"{"jsonrpc":"2.0","id":{},"error":5}"#),
            line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#),
        ]
        .concat();
        let (given, got) = exchange(input.into_bytes(), None);
        let methods: Vec<_> = given
            .iter()
            .map(|m| (m["id"].clone(), m["method"].clone()))
            .collect();
        assert_eq!(
            methods,
            [
                (json!(3), json!("tools/call")),
                (json!(5), json!("tools/list")),
                // rmcp's catch-all for a notification it cannot type.
                (Value::Null, json!("notifications/cancelled"))
            ]
        );
        let answers: Vec<(Value, Value)> = got
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
            .collect();
        assert_eq!(
            answers,
            [
                (json!(4), json!(-32602)),
                // A response's id is the server's: never echoed.
                (Value::Null, json!(-32600)),
                (Value::Null, json!(-32600))
            ],
            "{got}"
        );
    }
}
