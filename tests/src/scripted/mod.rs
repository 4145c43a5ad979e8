//! A scripted single Iggy node for adversarial adapter tests.
//!
//! [`ScriptedNode`] listens on a loopback address and speaks just enough of protocol 0.11.0
//! for a router to sign in, read the roster (this node and any scripted peers), read topic 1/1,
//! look routes up (103, or `InvalidCommand`), send and ping. Unlike the test cluster it does
//! nothing clever with state; instead each test scripts how it misbehaves on the wire: how
//! replies are written ([`Delivery`]), how requests are read ([`Reading`]), one-shot
//! [`Fault`]s on the next replies of one command ([`On`]), standing answers (a status for
//! every send to a partition, a primary that route lookups name, a sign-in answered with
//! garbage: [`Login`]) and peers its roster names, so that two nodes can play a cluster.
//! It records when each connection was accepted and when each request arrived
//! ([`Arrival`]), for tests about timing and identities on the wire.
//!
//! It runs on plain threads (one to accept, one per connection) with blocking sockets, so a
//! script can write a byte, sleep, and close at exactly the point it wants, whatever runtime
//! the client under test uses. Every wait in it is bounded by short socket timeouts, and
//! dropping it stops every thread.

// Requests are matched by command code, and every command this node does not know gets the
// same `InvalidCommand`: listing the operations it never sees would say nothing more.
#![allow(clippy::wildcard_enum_match_arm)]

pub mod checks;
pub mod clients;
mod replies;

use replies::{bogus_reply, frame, reply_to, topic};

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ClusterMetadata, ClusterNode, ConsumerSession, ErrorCode, Frame, FrameDecoder, GetTopicRequest,
    Identifier, LoginRegisterReply, Name, NodeRole, NodeStatus, Operation, PROTOCOL_VERSION,
    PartitionInfo, PollMessagesRequest, PollRouting, ReplyHeader, RequestHeader, SendConfirmation,
    SendMessagesReply, SendMessagesRequest, TopicDetails, TopicSummary, code, put_result_ok,
};

/// The offset every bogus send confirmation carries, far above anything the node assigns,
/// so a test can tell a reply to nothing from a real one.
pub const BOGUS_OFFSET: u64 = 0x0BAD_0000_0000;

/// The name of the one topic (stream 1, topic 1); a bogus topic reply says "bogus".
pub const TOPIC_NAME: &str = "t";

/// How often blocked threads look at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(20);

/// Largest request frame the node reads (the router's default cap).
const MAX_REQUEST_FRAME: u32 = 64 * 1024 * 1024;

/// How the node writes its replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One write per reply.
    Whole,
    /// One write per byte, with a short pause after each, so the client reads them apart.
    ByteAtATime,
    /// Two writes per reply: the first `n` bytes, a pause, then the rest.
    SplitAt(usize),
}

/// How the node reads the client's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Reads of up to 64 KiB, no pause.
    Normal,
    /// Reads of at most `chunk` bytes, with `pause` after each.
    Slow {
        /// Largest read.
        chunk: usize,
        /// Pause after each read.
        pause: Duration,
    },
}

/// A command code the node answers with an eviction (`InvalidRequestBody`) every time.
pub const EVICTING_CODE: u32 = 9_999;

/// The command a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// `SEND_MESSAGES` (101).
    Send,
    /// `GET_TOPIC` (300).
    GetTopic,
}

/// One misbehaviour, applied to the reply to one request (the request itself is served:
/// a send is stored, as a real node that failed after committing would have stored it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Write the first half of the reply, then close the connection.
    CloseMidFrame,
    /// Write a reply header announcing a frame of `size` bytes and 16 bytes of body, then
    /// keep the connection open and read on: the client has to end it.
    AnnounceSize(u32),
    /// Write the reply and, in the same write, a second reply frame to the same request
    /// with a bogus body.
    TrailingFrame,
    /// Write the reply followed, in the same write, by 13 bytes that begin no frame.
    TrailingJunk,
    /// Write the reply; once the next request arrives on this connection, write a bogus
    /// copy of the old reply (its request number) ahead of the real answer, as a late
    /// duplicate would arrive.
    StaleBeforeNextReply,
    /// Write the reply with a request number one above the request's (bytes 200..208 of
    /// the header): a well-formed answer, to no request in flight.
    WrongRequestNumber,
    /// Write a status-0 reply whose body does not decode: for a send, a count of 2 and one
    /// confirmation at [`BOGUS_OFFSET`] (a lax decoder would take it); for a topic read,
    /// 7 bytes.
    UndecodableBody,
}

/// How the node answers a sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    /// A session, as a server does.
    Normal,
    /// 300 bytes of `0xEE`, which begin no frame; the connection stays open (the client
    /// has to end it).
    Garbage,
}

/// One request as the node read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// When the node decoded it.
    pub at: Instant,
    /// Which connection, by accept order from 0 (the index into [`ScriptedNode::accepted`]).
    pub connection: usize,
    /// Its command code (login counted as `LOGIN_REGISTER`, send as `SEND_MESSAGES`).
    pub command: u32,
    /// Its request number (header bytes 200..208).
    pub request: u64,
    /// Its client id (header bytes 128..144), the server's deduplication identity.
    pub client: u128,
    /// For a send that decodes: its partition.
    pub partition: Option<u32>,
    /// For a send that decodes: its messages' ids, in order.
    pub message_ids: Vec<u128>,
}

/// What the node has seen. Counters only grow.
#[derive(Debug, Clone, Default)]
pub struct NodeStats {
    /// Connections accepted.
    pub connections: usize,
    /// Connections the client closed (EOF or reset seen by the node).
    pub closed_by_client: usize,
    /// Requests by command code (login counted as `LOGIN_REGISTER`).
    pub requests: BTreeMap<u32, usize>,
    /// Faults carried out.
    pub faults: usize,
    /// Sends answered with a scripted status (and not stored).
    pub refused_sends: usize,
}

impl NodeStats {
    /// Requests of one command code.
    pub fn requests(&self, code: u32) -> usize {
        self.requests.get(&code).copied().unwrap_or(0)
    }
}

/// One batch the node stored, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    /// The partition.
    pub partition: u32,
    /// The offset assigned to its first message.
    pub base_offset: u64,
    /// Its messages' payloads.
    pub payloads: Vec<Bytes>,
}

#[derive(Debug)]
struct Script {
    delivery: Delivery,
    reading: Reading,
    routing_commands: bool,
    /// The `ip` the roster and routes name for this node.
    roster_host: String,
    partitions: u32,
    faults: VecDeque<(On, Fault)>,
    /// Other nodes the roster names (as healthy followers), after this one.
    peers: Vec<SocketAddr>,
    /// The primary route lookups name; `None`: this node.
    route_primary: Option<SocketAddr>,
    /// A status every send to a partition is answered with (`None` key: every partition).
    send_status: BTreeMap<Option<u32>, u32>,
    login: Login,
}

#[derive(Debug, Default)]
struct State {
    next_session: u64,
    offsets: BTreeMap<u32, u64>,
    stored: Vec<StoredBatch>,
    stats: NodeStats,
    accepted: Vec<Instant>,
    arrivals: Vec<Arrival>,
}

#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    script: Mutex<Script>,
    state: Mutex<State>,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A one-node Iggy server whose wire behaviour a test scripts. See the module docs.
#[derive(Debug)]
pub struct ScriptedNode {
    shared: Arc<Shared>,
}

impl ScriptedNode {
    /// A node on `127.0.0.1`, port chosen by the OS, topic 1/1 with 3 partitions.
    pub fn start() -> ScriptedNode {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::start_on(addr).unwrap_or_else(|error| panic!("bind {addr}: {error}"))
    }

    /// A node on `addr` (a loopback address; port 0 picks one).
    pub fn start_on(addr: SocketAddr) -> io::Result<ScriptedNode> {
        assert!(
            addr.ip().is_loopback(),
            "the scripted node binds loopback only"
        );
        let listener = TcpListener::bind(addr)?;
        // Non-blocking, so the accept thread can look at the stop flag between polls.
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            addr,
            script: Mutex::new(Script {
                delivery: Delivery::Whole,
                reading: Reading::Normal,
                routing_commands: true,
                roster_host: addr.ip().to_string(),
                partitions: 3,
                faults: VecDeque::new(),
                peers: Vec::new(),
                route_primary: None,
                send_status: BTreeMap::new(),
                login: Login::Normal,
            }),
            state: Mutex::new(State {
                next_session: 100,
                ..State::default()
            }),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        });
        let accepting = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("scripted-accept".to_owned())
            .spawn(move || accept_loop(&accepting, &listener))?;
        push_thread(&shared, thread);
        Ok(ScriptedNode { shared })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The address as a seed, `ip:port` (IPv6 in brackets).
    pub fn seed(&self) -> String {
        self.shared.addr.to_string()
    }

    /// How replies are written from now on.
    pub fn set_delivery(&self, delivery: Delivery) {
        self.shared.script().delivery = delivery;
    }

    /// How requests are read from now on.
    pub fn set_reading(&self, reading: Reading) {
        self.shared.script().reading = reading;
    }

    /// Whether 103 is answered (true) or refused with `InvalidCommand`, as servers built
    /// before the routing commands do.
    pub fn set_routing_commands(&self, supported: bool) {
        self.shared.script().routing_commands = supported;
    }

    /// The host the roster and route answers name for this node (default: its IP).
    pub fn set_roster_host(&self, host: &str) {
        self.shared.script().roster_host = host.to_owned();
    }

    /// Applies `fault` to the replies of the next `times` requests of command `on`.
    pub fn inject(&self, on: On, fault: Fault, times: usize) {
        let mut script = self.shared.script();
        for _ in 0..times {
            script.faults.push_back((on, fault));
        }
    }

    /// The roster names `peers` too, after this node (as healthy followers), so a client
    /// knows them as nodes of one cluster.
    pub fn set_roster_peers(&self, peers: Vec<SocketAddr>) {
        self.shared.script().peers = peers;
    }

    /// Route lookups (103) name `primary` for every partition from now on; `None` names
    /// this node again.
    pub fn set_route_primary(&self, primary: Option<SocketAddr>) {
        self.shared.script().route_primary = primary;
    }

    /// Every send to `partition` (`None`: to any partition without a status of its own) is
    /// answered with `status` and an empty body, and not stored; `status` `None` removes
    /// the rule. For example 57 (`TransientNotCommitted`) or 58 (`TransientNotAccepted`).
    pub fn set_send_status(&self, partition: Option<u32>, status: Option<u32>) {
        let mut script = self.shared.script();
        match status {
            Some(status) => script.send_status.insert(partition, status),
            None => script.send_status.remove(&partition),
        };
    }

    /// How sign-ins are answered from now on.
    pub fn set_login(&self, login: Login) {
        self.shared.script().login = login;
    }

    /// Faults injected and not carried out yet.
    pub fn faults_left(&self) -> usize {
        self.shared.script().faults.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> NodeStats {
        self.shared.state().stats.clone()
    }

    /// When each connection was accepted, in order.
    pub fn accepted(&self) -> Vec<Instant> {
        self.shared.state().accepted.clone()
    }

    /// Every request read, in arrival order.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.state().arrivals.clone()
    }

    /// Every batch stored, in arrival order.
    pub fn stored(&self) -> Vec<StoredBatch> {
        self.shared.state().stored.clone()
    }

    /// The length of the node's `GET_TOPIC` reply frame (header and body).
    pub fn topic_reply_len(&self) -> usize {
        let partitions = self.shared.script().partitions;
        let mut body = BytesMut::new();
        topic(TOPIC_NAME, partitions).encode(&mut body);
        iggy_route_core::wire::HEADER_SIZE + body.len()
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        loop {
            let threads = std::mem::take(
                &mut *self
                    .shared
                    .threads
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            if threads.is_empty() {
                return;
            }
            for thread in threads {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for ScriptedNode {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn push_thread(shared: &Shared, thread: JoinHandle<()>) {
    shared
        .threads
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(thread);
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    while !shared.stopped() {
        match listener.accept() {
            Ok((stream, _)) => {
                let connection = {
                    let mut state = shared.state();
                    state.stats.connections += 1;
                    state.accepted.push(Instant::now());
                    state.accepted.len() - 1
                };
                let serving = Arc::clone(shared);
                let spawned = std::thread::Builder::new()
                    .name("scripted-conn".to_owned())
                    .spawn(move || serve(&serving, stream, connection));
                match spawned {
                    Ok(thread) => push_thread(shared, thread),
                    Err(error) => panic!("scripted node: spawn: {error}"),
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// One connection: read frames (as the script says), answer each in order.
fn serve(shared: &Shared, mut stream: TcpStream, connection: usize) {
    // The accepted socket may inherit the listener's non-blocking mode on some systems.
    // A write timeout too: a client that stops reading must not keep the node from stopping.
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(STOP_CHECK)).is_err()
        || stream
            .set_write_timeout(Some(Duration::from_secs(2)))
            .is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut decoder = FrameDecoder::new(MAX_REQUEST_FRAME);
    let mut buffer = vec![0u8; 64 * 1024];
    // A late duplicate waiting for the next request (`Fault::StaleBeforeNextReply`).
    let mut stale: Option<Bytes> = None;
    while !shared.stopped() {
        let reading = shared.script().reading;
        let limit = match reading {
            Reading::Normal => buffer.len(),
            Reading::Slow { chunk, .. } => chunk.clamp(1, buffer.len()),
        };
        let read = match stream.read(&mut buffer[..limit]) {
            Ok(0) => {
                shared.state().stats.closed_by_client += 1;
                return;
            }
            Ok(read) => read,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(_) => {
                shared.state().stats.closed_by_client += 1;
                return;
            }
        };
        if let Reading::Slow { pause, .. } = reading {
            std::thread::sleep(pause);
        }
        let mut input = &buffer[..read];
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(Frame::Request { header, body })) => {
                    record_arrival(shared, connection, &header, &body);
                    if answer(shared, &mut stream, &header, &body, &mut stale).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                // A client that sends replies or bytes that are no frame is not what these
                // tests are about: drop the connection, as the server would.
                Ok(Some(_)) | Err(_) => return,
            }
        }
    }
}

/// Serves one request and writes its reply, faults included. `Err` ends the connection.
fn answer(
    shared: &Shared,
    stream: &mut TcpStream,
    header: &RequestHeader,
    body: &[u8],
    stale: &mut Option<Bytes>,
) -> io::Result<()> {
    let command = command_of(header);
    shared
        .state()
        .stats
        .requests
        .entry(command)
        .and_modify(|n| *n += 1)
        .or_insert(1);
    if command == code::LOGIN_REGISTER && shared.script().login == Login::Garbage {
        let delivery = shared.script().delivery;
        return deliver(stream, &[0xEE; 300], delivery);
    }
    if command == EVICTING_CODE {
        // Refused by ending the session, as the real server answers a request it will not
        // process (a legacy login code, a body its prepare step rejects); the connection
        // stays open, as there.
        let mut frame = BytesMut::new();
        iggy_route_core::wire::EvictionHeader {
            client: header.client,
            reason: iggy_route_core::wire::EvictionReason::InvalidRequestBody,
            ..iggy_route_core::wire::EvictionHeader::default()
        }
        .encode(&mut frame);
        let delivery = shared.script().delivery;
        return deliver(stream, &frame, delivery);
    }
    let reply = reply_to(shared, header, body);
    let on = match command {
        code::SEND_MESSAGES => Some(On::Send),
        code::GET_TOPIC => Some(On::GetTopic),
        _ => None,
    };
    let fault = on.and_then(|on| take_fault(shared, on));
    if fault.is_some() {
        shared.state().stats.faults += 1;
    }
    let delivery = shared.script().delivery;
    if let Some(late) = stale.take() {
        // The late duplicate goes first, as if it had been on the wire all along.
        deliver(stream, &late, delivery)?;
    }
    match fault {
        None => deliver(stream, &reply, delivery),
        Some(Fault::CloseMidFrame) => {
            deliver(stream, &reply[..reply.len() / 2], delivery)?;
            let _ = stream.shutdown(Shutdown::Both);
            Err(io::ErrorKind::ConnectionAborted.into())
        }
        Some(Fault::AnnounceSize(size)) => {
            let mut frame = BytesMut::from(&reply[..]);
            frame.resize(iggy_route_core::wire::HEADER_SIZE + 16, 0xA5);
            frame[48..52].copy_from_slice(&size.to_le_bytes());
            deliver(stream, &frame, delivery)
        }
        Some(Fault::TrailingFrame) => {
            let mut frame = BytesMut::from(&reply[..]);
            frame.extend_from_slice(&bogus_reply(shared, header, body));
            deliver(stream, &frame, delivery)
        }
        Some(Fault::TrailingJunk) => {
            let mut frame = BytesMut::from(&reply[..]);
            frame.extend_from_slice(&[0xEE; 13]);
            deliver(stream, &frame, delivery)
        }
        Some(Fault::StaleBeforeNextReply) => {
            *stale = Some(bogus_reply(shared, header, body));
            deliver(stream, &reply, delivery)
        }
        Some(Fault::WrongRequestNumber) => {
            let mut frame = BytesMut::from(&reply[..]);
            let wrong = header.request.wrapping_add(1);
            frame[200..208].copy_from_slice(&wrong.to_le_bytes());
            deliver(stream, &frame, delivery)
        }
        Some(Fault::UndecodableBody) => {
            let mut out = BytesMut::new();
            if command == code::SEND_MESSAGES {
                // Two confirmations announced, one present.
                out.extend_from_slice(&2u32.to_le_bytes());
                for word in [1u32, 1, 0] {
                    out.extend_from_slice(&word.to_le_bytes());
                }
                out.extend_from_slice(&BOGUS_OFFSET.to_le_bytes());
            } else {
                out.extend_from_slice(&[0xEE; 7]);
            }
            deliver(stream, &frame(header, 0, &out), delivery)
        }
    }
}

/// Writes down a request as it arrived (see [`Arrival`]).
fn record_arrival(shared: &Shared, connection: usize, header: &RequestHeader, body: &[u8]) {
    let at = Instant::now();
    let command = command_of(header);
    let (partition, message_ids) = if command == code::SEND_MESSAGES {
        match SendMessagesRequest::decode(body) {
            Ok(request) => (
                partition_of(&request),
                request.messages.iter().map(|m| m.id).collect(),
            ),
            Err(_) => (None, Vec::new()),
        }
    } else {
        (None, Vec::new())
    };
    shared.state().arrivals.push(Arrival {
        at,
        connection,
        command,
        request: header.request,
        client: header.client,
        partition,
        message_ids,
    });
}

fn partition_of(request: &SendMessagesRequest) -> Option<u32> {
    match request.partitioning {
        Partitioning::PartitionId(partition) => Some(partition),
        _ => None,
    }
}

fn take_fault(shared: &Shared, on: On) -> Option<Fault> {
    let mut script = shared.script();
    let index = script.faults.iter().position(|(o, _)| *o == on)?;
    script.faults.remove(index).map(|(_, fault)| fault)
}

/// Writes `bytes` as the delivery mode says.
fn deliver(stream: &mut TcpStream, bytes: &[u8], delivery: Delivery) -> io::Result<()> {
    match delivery {
        Delivery::Whole => stream.write_all(bytes),
        Delivery::ByteAtATime => {
            for byte in bytes {
                stream.write_all(std::slice::from_ref(byte))?;
                // Long enough for the client to read the byte on its own most of the time.
                std::thread::sleep(Duration::from_micros(50));
            }
            Ok(())
        }
        Delivery::SplitAt(at) => {
            let at = at.min(bytes.len());
            let (head, tail) = bytes.split_at(at);
            stream.write_all(head)?;
            if !head.is_empty() && !tail.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            stream.write_all(tail)
        }
    }
}

/// The command code of a request (login and send have operations of their own).
fn command_of(header: &RequestHeader) -> u32 {
    match header.operation {
        Operation::Register => code::LOGIN_REGISTER,
        Operation::SendMessages => code::SEND_MESSAGES,
        _ => header.code,
    }
}
