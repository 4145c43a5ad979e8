// The harness of the router's eviction tests, included by `router_eviction_adversary.rs`
// and `router_eviction_budget.rs` (each test binary uses its own part of it).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, Links, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ErrorCode, EvictionHeader, EvictionReason, Frame, Identifier, Message, Operation, ReplyHeader,
    SendMessagesRequest, code, decode_one,
};
use iggy_route_core::{
    CloseReason, CommandRequest, Config, Credentials, LinkId, Outcome, Output, Plane, Request,
    RequestError, RequestId, Router, SendRequest, SubmitError,
};

/// The command code the scripts evict for.
const DOOMED: u32 = 9_999;

/// What the node does with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// The fake cluster's answer.
    Answer,
    /// The fake cluster's answer, then the node closes the link.
    AnswerThenClose,
    /// An eviction with this reason (the link stays open, as on the real server).
    Evict(EvictionReason),
    /// A reply header with this status and no body.
    Status(u32),
    /// No answer at all.
    Silent,
    /// The link closes with the frame unanswered.
    Close,
    /// Kept until the test answers it with [`Harness::release`].
    Hold,
}

/// One frame the router wrote.
#[derive(Debug, Clone)]
struct Written {
    at: Instant,
    link: LinkId,
    node: usize,
    /// The command code (`LOGIN_REGISTER` for a sign-in, `SEND_MESSAGES` for a send, the
    /// operation's code for a metadata write).
    code: u32,
    /// The body of a raw command (the tests tag each one).
    body: Bytes,
    /// A send's message ids.
    ids: Vec<u128>,
    /// Whether it is a sign-in (the register operation).
    register: bool,
}

/// Decides what the node does with a frame, given how many frames with the same code and
/// body were written before it (0 for the first).
type Script = Box<dyn FnMut(&Written, usize) -> Act>;

struct Harness {
    router: Router,
    cluster: FakeCluster,
    links: Links,
    now: Instant,
    start: Instant,
    script: Script,
    written: Vec<Written>,
    /// Instant and node of every connect.
    connects: Vec<(Instant, usize)>,
    completed: Vec<(RequestId, Outcome, Instant)>,
    held: VecDeque<(LinkId, Bytes)>,
    /// Outputs seen after the router was shut down, other than completions and closes.
    after_shutdown: Vec<String>,
    shut: bool,
}

impl Harness {
    /// Three nodes: 0 leads the metadata, partition 0's primary is node 1, partition 1's
    /// is node 2.
    fn new(config: impl FnOnce(&mut Config)) -> Self {
        Self::with_cluster(FakeCluster::new(3, vec![1, 2]), config)
    }

    fn with_cluster(cluster: FakeCluster, config: impl FnOnce(&mut Config)) -> Self {
        let now = Instant::now();
        let seeds = (0..cluster.nodes).map(addr).collect();
        let mut settings = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        config(&mut settings);
        let mut harness = Self {
            router: Router::new(settings, 7, now),
            cluster,
            links: Links::new(),
            now,
            start: now,
            script: Box::new(|_, _| Act::Answer),
            written: Vec::new(),
            connects: Vec::new(),
            completed: Vec::new(),
            held: VecDeque::new(),
            after_shutdown: Vec::new(),
            shut: false,
        };
        harness.run();
        harness
    }

    fn set_script(&mut self, script: impl FnMut(&Written, usize) -> Act + 'static) {
        self.script = Box::new(script);
    }

    fn run(&mut self) {
        for _ in 0..1_000_000 {
            let Some(output) = self.router.poll_output() else {
                if let Some(deadline) = self.router.poll_timeout() {
                    assert!(deadline >= self.now, "a deadline in the past");
                }
                return;
            };
            match output {
                Output::Connect { link, addr, .. } => {
                    if self.shut {
                        self.after_shutdown.push(format!("connect {addr}"));
                    }
                    let index = (9000..9000 + self.cluster.nodes)
                        .position(|port| addr.ends_with(&port.to_string()))
                        .unwrap();
                    self.links.insert(link, index);
                    self.connects.push((self.now, index));
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    if self.shut {
                        self.after_shutdown.push(format!("transmit on {link:?}"));
                    }
                    self.transmit(link, &bytes);
                }
                Output::Close { link } => {
                    self.links.remove(&link);
                    self.held.retain(|(held, _)| *held != link);
                }
                Output::Completed { id, outcome } => self.completed.push((id, outcome, self.now)),
                Output::Event(_) => {}
            }
        }
        panic!("router never went quiet");
    }

    /// Every frame of one write, one at a time.
    fn transmit(&mut self, link: LinkId, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let size = u32::from_le_bytes(rest[48..52].try_into().unwrap()) as usize;
            let (frame, tail) = rest.split_at(size);
            rest = tail;
            if !self.links.contains_key(&link) {
                // Closed by an earlier frame of this write.
                return;
            }
            self.frame(link, frame);
        }
    }

    fn frame(&mut self, link: LinkId, frame: &[u8]) {
        let Ok(Frame::Request { header, body }) = decode_one(frame) else {
            panic!("the router wrote something that is not a request frame");
        };
        let node = self.links[&link];
        let code = match header.operation {
            Operation::Register => code::LOGIN_REGISTER,
            Operation::SendMessages => code::SEND_MESSAGES,
            Operation::NonReplicated => header.code,
            other => other.code().unwrap_or(0),
        };
        let ids = if header.operation == Operation::SendMessages {
            SendMessagesRequest::decode(&body)
                .unwrap()
                .messages
                .iter()
                .map(|m| m.id)
                .collect()
        } else {
            Vec::new()
        };
        let written = Written {
            at: self.now,
            link,
            node,
            code,
            body: if header.operation == Operation::NonReplicated {
                body.clone()
            } else {
                Bytes::new()
            },
            ids,
            register: header.operation == Operation::Register,
        };
        let nth = self
            .written
            .iter()
            .filter(|w| w.code == written.code && w.body == written.body)
            .count();
        let act = (self.script)(&written, nth);
        self.written.push(written);
        self.act(link, node, frame, act);
    }

    fn act(&mut self, link: LinkId, node: usize, frame: &[u8], act: Act) {
        let Ok(Frame::Request { header, .. }) = decode_one(frame) else {
            unreachable!();
        };
        match act {
            Act::Answer | Act::AnswerThenClose => {
                // The fake cluster has no consumer-session attachment (14): served here,
                // as the server does, with an empty success.
                let reply = if header.operation == Operation::NonReplicated
                    && header.code == code::ATTACH_CONSUMER_SESSION
                {
                    let mut out = BytesMut::new();
                    ReplyHeader::for_request(&header, 0, 0, 0).encode(&mut out);
                    out.freeze()
                } else {
                    self.cluster.answer(node, frame).1
                };
                self.router.handle_read(self.now, link, &reply);
                if act == Act::AnswerThenClose && self.links.remove(&link).is_some() {
                    self.router.handle_closed(self.now, link, CloseReason::Peer);
                }
            }
            Act::Evict(reason) => {
                let mut out = BytesMut::new();
                EvictionHeader {
                    client: header.client,
                    reason,
                    ..EvictionHeader::default()
                }
                .encode(&mut out);
                self.router.handle_read(self.now, link, &out);
            }
            Act::Status(status) => {
                let mut out = BytesMut::new();
                ReplyHeader::for_request(&header, status, 0, 0).encode(&mut out);
                self.router.handle_read(self.now, link, &out);
            }
            Act::Silent => {}
            Act::Close => {
                if self.links.remove(&link).is_some() {
                    self.router.handle_closed(self.now, link, CloseReason::Peer);
                }
            }
            Act::Hold => self.held.push_back((link, Bytes::copy_from_slice(frame))),
        }
    }

    /// Answers the oldest held frame with `act`.
    fn release(&mut self, act: Act) {
        let (link, frame) = self.held.pop_front().expect("a held frame");
        let node = self.links[&link];
        self.act(link, node, &frame, act);
        self.run();
    }

    fn advance_to(&mut self, until: Duration) {
        for _ in 0..1_000_000 {
            let Some(next) = self.router.poll_timeout() else {
                break;
            };
            if next > self.start + until {
                break;
            }
            self.now = next.max(self.now);
            self.router.handle_timeout(self.now);
            self.run();
        }
        self.now = self.now.max(self.start + until);
    }

    fn advance_by(&mut self, by: Duration) {
        let until = self.now + by - self.start;
        self.advance_to(until);
    }

    fn submit(&mut self, request: Request) -> RequestId {
        let id = self.router.submit(self.now, request).unwrap();
        self.run();
        id
    }

    fn submit_quiet(&mut self, request: Request) -> RequestId {
        self.router.submit(self.now, request).unwrap()
    }

    fn completions(&self, id: RequestId) -> usize {
        self.completed
            .iter()
            .filter(|(done, ..)| *done == id)
            .count()
    }

    /// The one outcome of `id` (panics if it completed never or twice).
    fn outcome(&self, id: RequestId) -> &Outcome {
        let mut found = self.completed.iter().filter(|(done, ..)| *done == id);
        let (_, outcome, _) = found
            .next()
            .unwrap_or_else(|| panic!("{id} never completed"));
        assert!(found.next().is_none(), "{id} completed twice");
        outcome
    }

    fn completed_at(&self, id: RequestId) -> Instant {
        self.completed
            .iter()
            .find(|(done, ..)| *done == id)
            .map(|(_, _, at)| *at)
            .unwrap_or_else(|| panic!("{id} never completed"))
    }

    /// Frames written for the raw command tagged `tag`.
    fn writes_of(&self, tag: u64) -> usize {
        let body = tag_body(tag);
        self.written
            .iter()
            .filter(|w| w.code == DOOMED && w.body == body)
            .count()
    }

    fn writes_of_code(&self, code: u32) -> usize {
        self.written.iter().filter(|w| w.code == code).count()
    }

    /// Writes of message `id` in send frames.
    fn writes_of_message(&self, id: u128) -> Vec<&Written> {
        self.written
            .iter()
            .filter(|w| w.ids.contains(&id))
            .collect()
    }

    /// The most links opened to one node within any one second.
    fn most_connects_in_a_second(&self, node: usize) -> usize {
        let at: Vec<Instant> = self
            .connects
            .iter()
            .filter(|(_, n)| *n == node)
            .map(|(at, _)| *at)
            .collect();
        at.iter()
            .map(|from| {
                at.iter()
                    .filter(|t| **t >= *from && **t < *from + Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// Writes of sign-ins to `node` within any one second, at most.
    fn most_logins_in_a_second(&self, node: usize) -> usize {
        let at: Vec<Instant> = self
            .written
            .iter()
            .filter(|w| w.node == node && w.code == code::LOGIN_REGISTER)
            .map(|w| w.at)
            .collect();
        at.iter()
            .map(|from| {
                at.iter()
                    .filter(|t| **t >= *from && **t < *from + Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

fn tag_body(tag: u64) -> Bytes {
    Bytes::copy_from_slice(&tag.to_le_bytes())
}

fn tag_of(w: &Written) -> Option<u64> {
    (w.code == DOOMED && w.body.len() == 8)
        .then(|| u64::from_le_bytes(w.body[..].try_into().unwrap()))
}

/// A raw command with code `DOOMED`, tagged `tag` in its body.
fn doomed(tag: u64, plane: Plane) -> Request {
    Request::Command(CommandRequest {
        code: DOOMED,
        body: tag_body(tag),
        plane,
    })
}

fn ping() -> Request {
    Request::Command(CommandRequest {
        code: code::PING,
        body: Bytes::new(),
        plane: Plane::Session,
    })
}

fn partition_plane(partition: u32, write: bool) -> Plane {
    Plane::Partition {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partition,
        write,
    }
}

/// A send of one message with id `id` to `partition` of topic 1/1.
fn send_with_id(partition: u32, id: u128) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            id,
            payload: Bytes::from(format!("m{id}")),
            ..Message::default()
        }],
    })
}

/// What the 0.11.0 SDK reports for a reason (`iggy_common::eviction_reason_to_error`),
/// written out here rather than read from the code under test.
fn sdk_code(reason: EvictionReason) -> ErrorCode {
    match reason {
        EvictionReason::MalformedLogin => ErrorCode::InvalidFormat,
        EvictionReason::InvalidCredentials => ErrorCode::InvalidCredentials,
        EvictionReason::StaleClient => ErrorCode::StaleClient,
        EvictionReason::NoSession
        | EvictionReason::SessionTooLow
        | EvictionReason::SessionReleaseMismatch
        | EvictionReason::UserInactive
        | EvictionReason::SessionError => ErrorCode::Unauthenticated,
        _ => ErrorCode::InvalidCommand,
    }
}

const BLAMED: [EvictionReason; 6] = [
    EvictionReason::InvalidRequestOperation,
    EvictionReason::InvalidRequestBody,
    EvictionReason::InvalidRequestBodySize,
    EvictionReason::MalformedLogin,
    EvictionReason::ClientReleaseTooLow,
    EvictionReason::ClientReleaseTooHigh,
];

const SESSION_LEVEL: [EvictionReason; 5] = [
    EvictionReason::NoSession,
    EvictionReason::SessionTooLow,
    EvictionReason::SessionReleaseMismatch,
    EvictionReason::SessionError,
    EvictionReason::UserInactive,
];

fn planes() -> Vec<(&'static str, Plane)> {
    vec![
        ("session", Plane::Session),
        ("metadata read", Plane::MetadataRead),
        ("metadata write", Plane::MetadataWrite),
        ("partition 0 write", partition_plane(0, true)),
        ("partition 1 read", partition_plane(1, false)),
    ]
}

fn is_evicted(outcome: &Outcome) -> bool {
    matches!(outcome, Err(RequestError::Evicted { .. }))
}

fn eviction_frame(client: u128, reason: EvictionReason) -> Bytes {
    let mut out = BytesMut::new();
    EvictionHeader {
        client,
        reason,
        ..EvictionHeader::default()
    }
    .encode(&mut out);
    out.freeze()
}
