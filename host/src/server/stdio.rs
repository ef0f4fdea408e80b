//! The stdio transport: rmcp's `Transport` over the client's pipes, with a
//! guard in front.
//!
//! rmcp drops a line it cannot parse without a word, and answers a request
//! it cannot type (`"params": 5`) without the request's id: a client waiting
//! on that id would wait forever. So every line is judged here first. One
//! that is not JSON gets `-32700` (id null, as JSON-RPC says); a request of
//! the wrong shape gets `-32600` or `-32602` with its own id; only
//! well-formed messages reach rmcp. A line longer than [`MAX_LINE`] is
//! answered and skipped: at most [`MAX_LINE`] bytes of it are ever held.
//!
//! A `tools/call` request, nearly every line a session sends, is parsed once
//! and straight into its type; other lines are judged as JSON, then typed
//! the way rmcp's own line transport types them (a notification it cannot
//! type is not answered, where rmcp's would answer it).
//!
//! Under stdio, stdout is the JSON-RPC channel: every line written to it
//! goes through one queue, whole lines only, rmcp's answers and the guard's.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Longest line accepted (rmcp's own default cap for line transports): a
/// `write_file` of several megabytes fits.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// A well-formed message: rmcp's.
    Forward,
    /// Malformed: this error response goes back instead.
    Answer(Value),
    /// Nothing to do (a blank line).
    Skip,
}

/// The process's stdin and stdout, for [`Guarded`]. When they are pipes (as
/// an MCP client starts a server) they are read and written on the runtime's
/// own event loop; tokio's `stdin()` and `stdout()` hand each read and write
/// to a blocking thread, a wake-up of another thread and back on every
/// request and every answer. Anything else (a terminal, a file) keeps
/// tokio's. The pipe becomes non-blocking, which the client's end, another
/// open file, does not see; a stdout that is also stderr's pipe stays
/// blocking, as stderr's writers expect.
pub fn std_streams() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let file = |fd| rustix::fs::fstat(fd).map(|st| crate::sys::stat::inode(&st));
    let shared = matches!((file(stdout.as_fd()), file(stderr.as_fd())), (Ok(a), Ok(b)) if a == b);
    let output: Box<dyn AsyncWrite + Unpin + Send> = match shared {
        true => Box::new(tokio::io::stdout()),
        false => match stdout
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Sender::from_owned_fd)
        {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdout()),
        },
    };
    (input, output)
}

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

/// The ids of the requests rmcp has and has not answered, and a wake-up
/// for the reader waiting at the end of the input.
#[derive(Default)]
struct InFlight {
    ids: std::sync::Mutex<std::collections::HashSet<rmcp::model::RequestId>>,
    answered: tokio::sync::Notify,
}

impl InFlight {
    fn asked(&self, id: rmcp::model::RequestId) {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
    }

    /// Notes a message handed to rmcp: a request is in flight until
    /// answered; a cancelled one gets no answer (the protocol says so) and
    /// is no longer waited for.
    fn note(&self, message: &Rx) {
        use rmcp::model::{ClientNotification, JsonRpcMessage};
        match message {
            JsonRpcMessage::Request(r) => self.asked(r.id.clone()),
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.answered(id);
                }
            }
            _ => {}
        }
    }

    fn answered(&self, id: &rmcp::model::RequestId) {
        if self
            .ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            self.answered.notify_waiters();
        }
    }

    /// Waits until every request handed on has been answered.
    async fn all_answered(&self) {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            // Registered before the check: an answer in between still wakes it.
            answered.as_mut().enable();
            if self
                .ids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
            {
                return;
            }
            answered.await;
        }
    }
}

/// stdout and what is queued for it: whole lines, written in order; what a
/// cancelled write left stays queued for the next writer.
struct Output<W> {
    writer: Option<W>,
    queued: Vec<u8>,
    /// How much of `queued` is already out.
    sent: usize,
}

impl<W: AsyncWrite + Unpin> Output<W> {
    /// Queues one whole line (ending in a newline) and writes the queue out.
    async fn put(&mut self, line: Vec<u8>) -> std::io::Result<()> {
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
    async fn drain(&mut self) -> std::io::Result<()> {
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

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed")
}

/// The largest line buffer kept between lines.
const KEPT_BUFFER: usize = 1 << 16;

/// Empties `buffer`; a large line's allocation is not kept for the small
/// ones after it.
fn empty(buffer: &mut Vec<u8>) {
    match buffer.capacity() > KEPT_BUFFER {
        true => *buffer = Vec::new(),
        false => buffer.clear(),
    }
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

/// What one line comes to.
enum Line {
    Message(Box<Rx>),
    Answer(Vec<u8>),
    Skip,
}

type Rx = rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>;
type Tx = rmcp::service::TxJsonRpcMessage<rmcp::RoleServer>;

impl<R, W> Guarded<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(input: R, output: W) -> Self {
        Self {
            input: BufReader::with_capacity(READ_BUFFER, input),
            line: Vec::new(),
            skipping: false,
            answer: None,
            owed: false,
            output: Arc::new(Mutex::new(Output {
                writer: Some(output),
                queued: Vec::new(),
                sent: 0,
            })),
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
            self.output.lock().await.writer = None;
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

/// One line's fate: a well-formed message becomes rmcp's, a malformed one
/// gets the guard's answer.
fn judge(line: &[u8]) -> Line {
    if let Some(call) = tool_call(line) {
        return Line::Message(Box::new(call));
    }
    match triage(line) {
        Verdict::Skip => Line::Skip,
        Verdict::Answer(answer) => Line::Answer(answer_line(&answer)),
        Verdict::Forward => match serde_json::from_slice::<Rx>(line) {
            Ok(message) => Line::Message(Box::new(message)),
            // Well-formed JSON-RPC that no MCP message fits (rmcp types
            // every request and notification, with catch-alls for methods it
            // does not know: this is a response or error of another shape).
            // As rmcp did, it is answered with a null id: a response's id is
            // one of the server's own requests, which the client would take
            // for one of its own. A request keeps its id; a notification,
            // which rmcp would also have answered, gets no answer.
            Err(e) => match serde_json::from_slice::<Map<String, Value>>(line)
                .ok()
                .map(|mut message| (message.remove("id"), message.contains_key("method")))
            {
                None | Some((None, _)) => Line::Skip,
                Some((Some(id), request)) => Line::Answer(answer_line(&error(
                    match request && (id.is_string() || id.is_i64()) {
                        true => id,
                        false => Value::Null,
                    },
                    -32600,
                    format!(
                        "invalid request: {}",
                        crate::policy::shown_clipped(&e.to_string())
                    ),
                ))),
            },
        },
    }
}

/// The common case, parsed once and straight into its type: a `tools/call`
/// request with an id and object params, nothing else in it. rmcp's own
/// parse tries each message kind and then each of its 20-odd requests in
/// turn over a buffered copy of the line, after the guard has parsed it
/// once already. Anything else (`None`) takes that path.
fn tool_call(line: &[u8]) -> Option<Rx> {
    use rmcp::model::{CallToolRequest, ClientRequest, JsonRpcMessage, NumberOrString};
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: std::borrow::Cow<'a, str>,
        id: Value,
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
        #[serde(rename = "params")]
        _params: AnObject,
    }
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
        return None;
    }
    let id = match envelope.id {
        Value::String(id) => NumberOrString::String(id.into()),
        Value::Number(n) => NumberOrString::Number(n.as_i64()?),
        _ => return None,
    };
    let request: CallToolRequest = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::request(ClientRequest::from(request), id))
}

/// A JSON object, its contents skipped; anything else fails.
struct AnObject;

impl<'de> serde::Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = AnObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<AnObject, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(AnObject)
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

fn answer_line(answer: &Value) -> Vec<u8> {
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Judges one line: a JSON-RPC 2.0 request, notification or response is
/// forwarded; anything else is answered as JSON-RPC says.
fn triage(line: &[u8]) -> Verdict {
    // Exactly the bytes that would be forwarded are judged: JSON's own
    // whitespace only (a form feed is not JSON, and not skipped).
    if line
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Verdict::Skip;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Verdict::Answer(error(Value::Null, -32700, format!("parse error: {e}"))),
    };
    let Value::Object(message) = message else {
        return Verdict::Answer(error(
            Value::Null,
            -32600,
            "invalid request: a message is a JSON object (batches are not supported)".into(),
        ));
    };
    let id = message.get("id");
    // rmcp takes a string or an integer that fits an i64.
    let valid_id = id.is_some_and(|id| id.is_string() || id.is_i64());
    let answer_id = if valid_id {
        id.cloned().unwrap_or_default()
    } else {
        Value::Null
    };
    let invalid = |why: &str| {
        Verdict::Answer(error(
            answer_id.clone(),
            -32600,
            format!("invalid request: {why}"),
        ))
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    match (id, message.get("method")) {
        (_, Some(Value::String(method))) => {
            if id.is_some() && !valid_id {
                return invalid("\"id\" must be a string or an integer");
            }
            params_problem(&message, method).map_or(Verdict::Forward, |why| match id {
                Some(_) => Verdict::Answer(error(answer_id.clone(), -32602, why)),
                // A notification gets no answer, right or wrong.
                None => Verdict::Skip,
            })
        }
        (_, Some(_)) => invalid("\"method\" must be a string"),
        (Some(_), None) if message.contains_key("result") || message.contains_key("error") => {
            Verdict::Forward
        }
        _ => invalid("no \"method\": not a request or notification"),
    }
}

/// Why a message's params cannot be a method's: MCP's are always an object.
fn params_problem(message: &Map<String, Value>, method: &str) -> Option<String> {
    match message.get("params") {
        None | Some(Value::Object(_)) => None,
        Some(_) => Some(format!(
            "invalid params for '{}': params must be an object",
            crate::policy::shown_clipped(method)
        )),
    }
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> (Value, i64, String) {
        match triage(line.as_bytes()) {
            Verdict::Answer(v) => (
                v["id"].clone(),
                v["error"]["code"].as_i64().unwrap(),
                v["error"]["message"].as_str().unwrap().to_string(),
            ),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn well_formed_messages_go_to_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}"#,
            "  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n",
        ] {
            assert_eq!(triage(line.as_bytes()), Verdict::Forward, "{line}");
        }
        assert_eq!(triage(b"\n"), Verdict::Skip);
    }

    #[test]
    fn malformed_lines_are_answered_with_the_id_when_there_is_one() {
        let (id, code, message) =
            answer(r#"{"jsonrpc":"2.0","id":"p","method":"tools/call","params":5}"#);
        assert_eq!((id, code), (json!("p"), -32602));
        assert_eq!(
            message,
            "invalid params for 'tools/call': params must be an object"
        );
        let (id, code, _) = answer(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1]}"#);
        assert_eq!((id, code), (json!(7), -32602));
        for (line, code, message) in [
            (
                "{nope",
                -32700,
                "parse error: key must be a string at line 1 column 2",
            ),
            ("{}", -32600, "invalid request: \"jsonrpc\" must be \"2.0\""),
            (
                "[]",
                -32600,
                "invalid request: a message is a JSON object (batches are not supported)",
            ),
            (
                r#"{"jsonrpc":"2.0"}"#,
                -32600,
                "invalid request: no \"method\": not a request or notification",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                -32600,
                "invalid request: \"id\" must be a string or an integer",
            ),
        ] {
            assert_eq!(
                answer(line),
                (Value::Null, code, message.to_string()),
                "{line}"
            );
        }
        let (id, code, message) = answer(r#"{"jsonrpc":"2.0","id":9,"method":5}"#);
        assert_eq!(
            (id, code, message.as_str()),
            (
                json!(9),
                -32600,
                "invalid request: \"method\" must be a string"
            )
        );
        let deep = "[".repeat(100_000);
        assert_eq!(answer(&deep).1, -32700);
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\ud800"}}"#).1,
            -32700
        );
        // What rmcp would not take either: a form feed before the JSON, a
        // fractional id.
        assert_eq!(
            answer("\x0c{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}").1,
            -32700
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (
                Value::Null,
                -32600,
                "invalid request: \"id\" must be a string or an integer".to_string()
            )
        );
        // A notification of the wrong shape is dropped: notifications get no answer.
        assert_eq!(
            triage(br#"{"jsonrpc":"2.0","method":"n","params":5}"#),
            Verdict::Skip
        );
    }

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

    /// The `tools/call` shortcut gives rmcp exactly what its own parse
    /// gives, and leaves to that parse every line that is not a plain call.
    #[test]
    fn a_tool_call_is_typed_as_rmcp_types_it() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"ws","path":"a.txt"}}}"#,
            r#"{"id":"x\u00e9","method":"tools/call","jsonrpc":"2.0","params":{"name":"list_roots"}}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"w","arguments":{"content":"a\nb\"c","n":1.5,"big":18446744073709551615}}}"#,
            r#" {"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"x","arguments":{},"task":{"ttl":5}}} "#,
        ] {
            let fast = tool_call(line.as_bytes()).unwrap_or_else(|| panic!("{line}"));
            let rmcp: Rx = serde_json::from_slice(line.as_bytes()).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{rmcp:?}"), "{line}");
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&rmcp).unwrap()
            );
        }
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
        ] {
            assert!(tool_call(line.as_bytes()).is_none(), "{line}");
        }
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
