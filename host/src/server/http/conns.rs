//! Connections: how many the endpoint holds, how many one client may hold,
//! and which one gives way when they are all taken.
//!
//! Every open connection is a file descriptor, and so is every file a tool
//! call opens: a client that opens connections and never finishes a request
//! (half-open, two header lines and then nothing) would otherwise take every
//! descriptor the process may have, and the server would stop accepting
//! anyone, tool calls included. So the process's descriptor limit is shared
//! out ([`DescriptorBudget`]): the server's own needs and what `max_concurrent_calls`
//! calls may hold are set aside first, and connections get what is left.
//!
//! Within that, [`Conns`] admits a connection while there are fewer than
//! `max` in all and fewer than `per_client` from its address. Beyond either
//! cap, the connection that has waited longest gives way (beyond the total
//! cap, the longest waiting of the address holding the most connections,
//! so that one address's flood closes its own connections, not the
//! kept-alive ones of other clients): waiting for a
//! request's head since it opened, kept alive since its last answer, or
//! receiving a request body since its head (no call has started for it
//! yet). A client's connection that was just answered and is about to be
//! used again is the last to go; one that has sent half a head, or a body a
//! byte a second, for seconds is among the first. (Closing a kept-alive
//! connection just as its client reuses it would fail that request.) A
//! connection whose request is being answered never gives way. Only when
//! every connection in the way is being answered is the new one refused,
//! closed at once: a client gets a slot or a fast failure, never a hang.
//! A connection told to close stays counted until its task has closed it
//! (its [`Ticket`] drops), and the new one waits for that (briefly, in the
//! accept loop, not yet served), so the sockets open never exceed the caps;
//! while one closes for a cap, no other is closed for that cap.
//! The time limits that close the waiting ones anyway are hyper's header
//! timeout and the body's least rate (see [`super::body`]).
//!
//! An event stream (`GET /mcp`) is being answered for as long as the client
//! keeps it, and rmcp lets a session open one again and again: so streams
//! have caps of their own, a quarter of the connection caps, beyond which
//! the client's oldest stream closes (beyond the total, the oldest of the
//! address holding the most). Streams thus never hold more than a quarter
//! of the connections.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sys::descriptors::MAX_DESCRIPTORS;

/// Descriptors the server holds whatever it serves: stdin, stdout and
/// stderr, the audit log (two while it rotates), the listener, tokio's
/// epoll, wakers and signal pipe, the memory images wasmtime maps for each
/// core module, the compiled-component cache while it loads.
pub const SERVER_RESERVE: u64 = 96;

/// Per root, for the server's life or beside any call: its staging
/// directory's lock, its trash and path-lock files.
pub const PER_ROOT: u64 = 4;

/// What a call's host side holds beside its guest's descriptors (which
/// [`MAX_DESCRIPTORS`] caps, preopens included): the `O_PATH` probes of the
/// operation in progress, a publish's two parent directories, the files a
/// walk's read-ahead holds.
pub const PER_CALL_HOST: u64 = 8 + crate::runtime::fs::READ_AHEAD_DESCRIPTORS as u64;

/// The most connections the default allows, however high the descriptor
/// limit: each holds hyper's buffers (kilobytes to hundreds of them), and
/// 64 sessions, the default cap, need far fewer.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 4096;

/// How the process's descriptor limit is shared out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// The soft `RLIMIT_NOFILE` the server runs with.
    pub limit: u64,
    /// Set aside for the server itself and its roots.
    pub server: u64,
    /// Set aside for tool calls: what `calls` calls may hold at once.
    pub calls: u64,
    /// `max_concurrent_calls`.
    pub concurrent_calls: u32,
}

impl DescriptorBudget {
    pub fn new(limit: u64, roots: usize, concurrent_calls: u32) -> DescriptorBudget {
        let roots = roots as u64;
        let per_call = MAX_DESCRIPTORS as u64 + PER_CALL_HOST + PER_ROOT * roots;
        DescriptorBudget {
            limit,
            server: SERVER_RESERVE + PER_ROOT * roots,
            calls: per_call * u64::from(concurrent_calls),
            concurrent_calls,
        }
    }

    /// What is left for connections once the server and the calls have
    /// their share.
    pub fn left(&self) -> u64 {
        self.limit.saturating_sub(self.server + self.calls)
    }

    /// The default `--max-connections`: what is left, at most
    /// [`DEFAULT_MAX_CONNECTIONS`]. A limit too low for the reserve still
    /// serves a quarter of it (and the caller warns: calls may then find
    /// no descriptor under a flood of connections).
    pub fn default_connections(&self) -> usize {
        let n = self
            .left()
            .max(self.limit / 4)
            .clamp(1, DEFAULT_MAX_CONNECTIONS);
        usize::try_from(n).unwrap_or(usize::MAX)
    }

    /// Whether `connections` fit beside the reserve.
    pub fn fits(&self, connections: usize) -> bool {
        connections as u64 <= self.left()
    }
}

/// The default `--max-connections-per-client`: a quarter of the total, so
/// one address never holds more than that while others wait.
pub fn default_per_client(max: usize) -> usize {
    (max / 4).max(1)
}

/// The most event streams (`GET /mcp`) for a connection cap: a quarter of
/// it, so that streams, which are answering for as long as they are open,
/// never hold more than that share of the connections.
pub fn default_streams(connections: usize) -> usize {
    (connections / 4).max(1)
}

/// The limits on the endpoint's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Most connections open at once.
    pub max: usize,
    /// Most connections open at once from one client address.
    pub per_client: usize,
    /// Most event streams open at once, and from one client address.
    pub max_streams: usize,
    pub per_client_streams: usize,
    /// How long a request's head may take to arrive, from the connection's
    /// start or the end of the previous response (so also how long a
    /// kept-alive connection may sit idle).
    pub header_timeout: Duration,
    /// Least rate of a request body, bytes per second, over each window of
    /// the header timeout; 0: none.
    pub min_body_rate: u64,
    /// The most a whole request body may take.
    pub body_timeout: Duration,
    /// The most a write of an answer may wait without progress.
    pub send_timeout: Duration,
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("all {0} connections are answering requests (--max-connections)")]
    Full(usize),
    #[error(
        "all {0} connections of this client are answering requests (--max-connections-per-client)"
    )]
    ClientFull(usize),
    /// Not refused yet: a connection is closing to make room; try again
    /// once a ticket drops ([`Conns::freed`]).
    #[error("a connection is closing to make room for it")]
    Closing,
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for a request's head, or for the rest of a request's body,
    /// since the table's tick `since`: it may give way.
    Waiting { since: u64 },
    /// A request is being answered: never closed for another.
    Answering,
    /// Told to close for another, and counted until its ticket drops (its
    /// task closes the socket), so that the sockets open never exceed the
    /// caps.
    Closing,
}

struct Conn {
    client: IpAddr,
    stage: Stage,
    /// Since when it has carried an event stream, if it does.
    stream: Option<u64>,
    close: CancellationToken,
}

/// Who may give way: (waiting since, id), the longest waiting first.
type Queue = BTreeSet<(u64, u64)>;

#[derive(Default)]
struct Client {
    /// Its connections, closing ones included.
    open: usize,
    closing: usize,
    yielding: Queue,
    /// Its event streams, the oldest first.
    streams: Queue,
}

#[derive(Default)]
struct Table {
    /// Counts ids and the starts of waits: a lower tick started earlier.
    tick: u64,
    conns: HashMap<u64, Conn>,
    clients: HashMap<IpAddr, Client>,
    /// Event streams open.
    streams: usize,
    /// Connections told to close whose tickets have not dropped yet.
    closing: usize,
}

impl Table {
    fn client(&mut self, key: IpAddr) -> &mut Client {
        self.clients.entry(key).or_default()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// `id` starts waiting now (and carries no event stream).
    fn wait(&mut self, id: u64) {
        self.end_stream(id);
        let since = self.next_tick();
        self.set_stage(id, Stage::Waiting { since });
    }

    /// `id` carries an event stream from now on. Beyond the caps, the
    /// oldest stream of its client's closes, or beyond the total, the
    /// oldest of the address holding the most.
    fn start_stream(&mut self, id: u64, max: usize, per_client: usize) {
        let Some(key) = self
            .conns
            .get(&id)
            .filter(|c| c.stage != Stage::Closing)
            .map(|c| c.client)
        else {
            return;
        };
        let client = self.client(key);
        let victim = if client.streams.len() >= per_client {
            client.streams.first().map(|&(_, id)| id)
        } else if self.streams >= max {
            self.clients
                .values()
                .filter_map(|c| {
                    let &(since, id) = c.streams.first()?;
                    Some((c.streams.len(), Reverse(since), id))
                })
                .max()
                .map(|(_, _, id)| id)
        } else {
            None
        };
        if let Some(victim) = victim {
            self.close(victim);
        }
        let since = self.next_tick();
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.stream = Some(since);
            self.streams += 1;
            self.client(key).streams.insert((since, id));
        }
    }

    fn end_stream(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let (Some(since), key) = (conn.stream.take(), conn.client) else {
            return;
        };
        self.streams -= 1;
        self.client(key).streams.remove(&(since, id));
    }

    /// Moves `id` to `stage`, in and out of the queues of who may yield.
    fn set_stage(&mut self, id: u64, stage: Stage) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.stage == Stage::Closing {
            return;
        }
        let (old, key) = (conn.stage, conn.client);
        conn.stage = stage;
        let client = self.client(key);
        if let Stage::Waiting { since } = old {
            client.yielding.remove(&(since, id));
        }
        if let Stage::Waiting { since } = stage {
            client.yielding.insert((since, id));
        }
    }

    /// Who gives way when the total cap is full: the longest-waiting
    /// connection of the address holding the most connections (of those
    /// with one that may give way; ties: the longest waiting), so that a
    /// flood from one address closes its own connections, not other
    /// clients' kept-alive ones.
    fn heaviest_yielding(&self) -> Option<u64> {
        self.clients
            .values()
            .filter_map(|c| {
                let &(since, id) = c.yielding.first()?;
                Some((c.open, Reverse(since), id))
            })
            .max()
            .map(|(_, _, id)| id)
    }

    /// Tells `id` to close: it stays counted, and gives way no more, until
    /// its ticket drops.
    fn close(&mut self, id: u64) {
        if self
            .conns
            .get(&id)
            .is_none_or(|c| c.stage == Stage::Closing)
        {
            return;
        }
        self.end_stream(id);
        self.set_stage(id, Stage::Closing);
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let (key, close) = (conn.client, conn.close.clone());
        self.closing += 1;
        self.client(key).closing += 1;
        close.cancel();
    }

    /// Forgets `id`, once its ticket drops.
    fn remove(&mut self, id: u64) {
        self.end_stream(id);
        let Some(conn) = self.conns.remove(&id) else {
            return;
        };
        if conn.stage == Stage::Closing {
            self.closing -= 1;
        }
        if let Some(client) = self.clients.get_mut(&conn.client) {
            match conn.stage {
                Stage::Waiting { since } => {
                    client.yielding.remove(&(since, id));
                }
                Stage::Closing => client.closing -= 1,
                Stage::Answering => {}
            }
            client.open -= 1;
            if client.open == 0 {
                self.clients.remove(&conn.client);
            }
        }
        conn.close.cancel();
    }
}

/// The connections of one endpoint.
pub struct Conns {
    table: Mutex<Table>,
    /// Told whenever a ticket drops.
    freed: tokio::sync::Notify,
    max: usize,
    per_client: usize,
    max_streams: usize,
    per_client_streams: usize,
}

impl Conns {
    pub fn new(limits: &ConnLimits) -> Arc<Conns> {
        Arc::new(Conns {
            table: Mutex::new(Table::default()),
            freed: tokio::sync::Notify::new(),
            max: limits.max.max(1),
            per_client: limits.per_client.clamp(1, limits.max.max(1)),
            max_streams: limits.max_streams.max(1),
            per_client_streams: limits
                .per_client_streams
                .clamp(1, limits.max_streams.max(1)),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic while holding it leaves counts that are still consistent
        // (each step is one insert or removal): keep going.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `ip`, or refuses it. At a cap, another
    /// connection is told to close (see the module docs) and this one must
    /// wait for it ([`Refused::Closing`]: try again once [`Conns::freed`]);
    /// while one closes for a cap, no other is closed for it.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refused> {
        let key = client_key(ip);
        let mut table = self.table();
        let (open, closing) = table
            .clients
            .get(&key)
            .map_or((0, 0), |c| (c.open, c.closing));
        if open >= self.per_client {
            if closing > 0 {
                return Err(Refused::Closing);
            }
            let oldest = table.client(key).yielding.first().copied();
            return match oldest {
                Some((_, id)) => {
                    table.close(id);
                    Err(Refused::Closing)
                }
                None => Err(Refused::ClientFull(self.per_client)),
            };
        }
        if table.conns.len() >= self.max {
            if table.closing > 0 {
                return Err(Refused::Closing);
            }
            return match table.heaviest_yielding() {
                Some(id) => {
                    table.close(id);
                    Err(Refused::Closing)
                }
                None => Err(Refused::Full(self.max)),
            };
        }
        let id = table.next_tick();
        let close = CancellationToken::new();
        table.conns.insert(
            id,
            Conn {
                client: key,
                stage: Stage::Answering,
                stream: None,
                close: close.clone(),
            },
        );
        table.client(key).open += 1;
        table.wait(id);
        Ok(Ticket {
            conns: Arc::clone(self),
            id,
            close,
        })
    }

    /// Fires when a ticket drops: a connection admitted with
    /// [`Refused::Closing`] may try again.
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.freed.notified()
    }

    /// How many connections are open, closing ones included.
    pub fn open(&self) -> usize {
        self.table().conns.len()
    }

    /// How many event streams are open.
    pub fn streams(&self) -> usize {
        self.table().streams
    }
}

/// IPv4 addresses count one by one; IPv6 ones by their /64, which one host
/// usually holds whole (it could otherwise take a new address per
/// connection).
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// An admitted connection's place; dropping it frees the place.
pub struct Ticket {
    conns: Arc<Conns>,
    id: u64,
    close: CancellationToken,
}

impl Ticket {
    /// Fires when the connection must close at once (another took its place).
    pub fn closing(&self) -> &CancellationToken {
        &self.close
    }

    /// A request's head has arrived: until the returned [`Request`] is
    /// dropped, the connection is receiving or answering it.
    pub fn request(&self, body_done: bool) -> Request {
        let mut table = self.conns.table();
        if body_done {
            table.set_stage(self.id, Stage::Answering);
        } else {
            table.wait(self.id);
        }
        Request {
            conns: Arc::clone(&self.conns),
            id: self.id,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.conns.table().remove(self.id);
        self.conns.freed.notify_waiters();
    }
}

/// A request in progress on a connection.
pub struct Request {
    conns: Arc<Conns>,
    id: u64,
}

impl Request {
    /// The whole body has arrived: from now on the connection is answering.
    pub fn body_done(&self) {
        self.conns.table().set_stage(self.id, Stage::Answering);
    }

    /// The answer is an event stream (`GET /mcp`), open until the request
    /// ends: it counts against the stream caps, and beyond them the oldest
    /// stream of the client (of the heaviest client, beyond the total)
    /// closes.
    pub fn streaming(&self) {
        let (max, per_client) = (self.conns.max_streams, self.conns.per_client_streams);
        self.conns.table().start_stream(self.id, max, per_client);
    }
}

impl Drop for Request {
    /// The answer is out: the connection waits for the next request.
    fn drop(&mut self) {
        self.conns.table().wait(self.id);
    }
}

#[cfg(test)]
mod tests;
