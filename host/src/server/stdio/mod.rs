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
//!
//! The parts: [`Guarded`] (`guarded`), the transport itself, reads the
//! lines and holds the end of the input until the requests in flight
//! (`in_flight`) are answered; `judge` is the line guard, each line's fate;
//! `output` is the queue every line to stdout goes through.

use tokio::io::{AsyncRead, AsyncWrite};

mod guarded;
mod in_flight;
mod judge;
mod output;

pub use guarded::Guarded;

/// Longest line accepted (rmcp's own default cap for line transports): a
/// `write_file` of several megabytes fits.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// A message from the client, as rmcp takes it.
type Rx = rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>;
/// A message to the client, as rmcp hands it.
type Tx = rmcp::service::TxJsonRpcMessage<rmcp::RoleServer>;

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
