//! The stdio transport: JSON-RPC lines between the client and rmcp, with a
//! guard in front.
//!
//! rmcp drops a line it cannot parse without a word, and answers a request
//! it cannot type (`"params": 5`) without the request's id: a client waiting
//! on that id would wait forever. So every line is read here first. One that
//! is not JSON gets `-32700` (id null, as JSON-RPC says); a request of the
//! wrong shape gets `-32600` or `-32602` with its own id; only well-formed
//! messages reach rmcp, unchanged. A line longer than [`MAX_LINE`] is
//! answered and skipped: at most [`MAX_LINE`] bytes of it are ever held.
//! rmcp is served with the same cap, so no line passes here and dies there.
//!
//! Under stdio, stdout is the JSON-RPC channel: the one task here that
//! writes it forwards rmcp's lines and the guard's answers, whole lines each.

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Longest line accepted (rmcp's own default cap for line transports): a
/// `write_file` of several megabytes fits.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// Answers waiting for stdout; past this, reading stdin waits too (a client
/// that never reads cannot grow the server's memory).
const QUEUED_ANSWERS: usize = 64;

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

/// The process's stdin and stdout, for [`guarded`]. When they are pipes (as
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

/// rmcp's side of the guard, to hand to `serve`.
pub type Io = rmcp::transport::async_rw::AsyncRwTransport<
    rmcp::RoleServer,
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
>;

/// Serves rmcp through the guard: returns rmcp's side, and spawns the tasks
/// that move lines between it and `input`/`output`. The handle ends once
/// rmcp's writer is dropped and every line it wrote is out: await it before
/// exiting.
pub fn guarded<R, W>(input: R, output: W) -> (Io, tokio::task::JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let ((reads, writes), flushed) = pipes(input, output);
    let io = rmcp::transport::async_rw::AsyncRwTransport::new_server(reads, writes)
        .with_max_line_length(MAX_LINE);
    (io, flushed)
}

/// The guard's plumbing: what rmcp reads and writes, and the two tasks.
fn pipes<R, W>(
    input: R,
    output: W,
) -> (
    (tokio::io::DuplexStream, tokio::io::DuplexStream),
    tokio::task::JoinHandle<()>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(1 << 16);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(1 << 16);
    let (answers, answered) = mpsc::channel(QUEUED_ANSWERS);
    tokio::spawn(read_side(input, to_rmcp, answers));
    let flushed = tokio::spawn(write_side(from_rmcp, answered, output));
    ((rmcp_reads, rmcp_writes), flushed)
}

/// Client → rmcp: each line judged, forwarded or answered. At the client's
/// end of input, rmcp's input ends too.
async fn read_side<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: tokio::io::DuplexStream,
    answers: mpsc::Sender<Value>,
) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_LINE as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let verdict = if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            if skip_line(&mut reader).await.is_err() {
                break;
            }
            Verdict::Answer(error(
                Value::Null,
                -32600,
                format!("invalid request: a message may be at most {MAX_LINE} bytes"),
            ))
        } else {
            triage(&line)
        };
        match verdict {
            Verdict::Forward => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Verdict::Answer(response) => {
                if answers.send(response).await.is_err() {
                    break;
                }
            }
            Verdict::Skip => {}
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Reads and drops the rest of an over-long line.
async fn skip_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// rmcp and the guard → client: whole lines, flushed one by one. A line of
/// rmcp's is written only once complete (`read_until` keeps what it read
/// when the other branch wins), so an answer never lands inside it.
async fn write_side<W: AsyncWrite + Unpin>(
    from_rmcp: tokio::io::DuplexStream,
    mut answered: mpsc::Receiver<Value>,
    mut output: W,
) {
    let mut rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        let written = tokio::select! {
            read = rmcp.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => {
                    // rmcp is done; the guard's last answers still go out
                    // (its reader ends, and drops the sender, at input's end).
                    while let Some(answer) = answered.recv().await {
                        if write_answer(&mut output, &answer).await.is_err() {
                            break;
                        }
                    }
                    break;
                }
                Ok(_) => {
                    let written = write_line(&mut output, &line).await;
                    line.clear();
                    written
                }
            },
            Some(answer) = answered.recv() => write_answer(&mut output, &answer).await,
        };
        if written.is_err() {
            break;
        }
    }
}

async fn write_answer<W: AsyncWrite + Unpin>(
    output: &mut W,
    answer: &Value,
) -> std::io::Result<()> {
    let mut text = answer.to_string().into_bytes();
    text.push(b'\n');
    write_line(output, &text).await
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, line: &[u8]) -> std::io::Result<()> {
    output.write_all(line).await?;
    output.flush().await
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

    /// Runs the guard on `input` with a stand-in for rmcp that writes
    /// `rmcp_says` and ends: what rmcp was given, and what the client got.
    fn exchange(input: Vec<u8>, rmcp_says: &[u8]) -> (String, String) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (client_out, client_in) = tokio::io::duplex(1 << 16);
            let ((mut reads, mut writes), flushed) = pipes(std::io::Cursor::new(input), client_out);
            let mut forwarded = String::new();
            reads.read_to_string(&mut forwarded).await.unwrap();
            writes.write_all(rmcp_says).await.unwrap();
            drop(writes);
            flushed.await.unwrap();
            let mut got = String::new();
            BufReader::new(client_in)
                .read_to_string(&mut got)
                .await
                .unwrap();
            (forwarded, got)
        })
    }

    const PING_1: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    const PING_2: &str = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";

    /// The guard's own answer to the last line still goes out when input
    /// ends right after it (and rmcp's output ends with it).
    #[test]
    fn answers_are_not_lost_at_the_end_of_input() {
        for _ in 0..50 {
            let (_, got) = exchange(format!("{PING_1}{{nope\n").into_bytes(), b"");
            assert!(got.contains("-32700"), "{got:?}");
        }
    }

    /// A line over the cap is answered and skipped; the next one passes.
    #[test]
    fn an_over_long_line_is_answered_and_the_session_goes_on() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.push(b'\n');
        input.extend_from_slice(PING_2.as_bytes());
        let (forwarded, got) = exchange(input, b"");
        assert_eq!(forwarded, PING_2);
        assert!(got.contains("at most 16777216 bytes"), "{got:?}");
    }

    #[test]
    fn lines_pass_through_whole_and_answers_come_out_between_them() {
        // The last line has no newline: it is forwarded with one.
        let input = format!("{PING_1}{{nope\n{}", PING_2.trim_end());
        let reply = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
        let (forwarded, got) = exchange(input.into_bytes(), reply.as_bytes());
        assert_eq!(forwarded, format!("{PING_1}{PING_2}"));
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 2, "{got}");
        assert!(lines.contains(&reply.trim_end()));
        let parse_error: Value = serde_json::from_str(
            lines
                .iter()
                .find(|l| l.contains("-32700"))
                .expect("the guard's answer"),
        )
        .unwrap();
        assert_eq!(parse_error["id"], Value::Null);
    }
}
