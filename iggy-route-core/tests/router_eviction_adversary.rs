//! Adversarial tests of evictions through the router's outer face (sans IO): requests the
//! server ends a session for, on every plane, alone and in storms, mixed with link losses,
//! 57 replays, merged send frames, withdrawals, short deadlines and shutdown.
//!
//! Every frame the router writes is decoded here and answered by a per-test script (the
//! fake cluster's answer, an eviction, a status, silence, a closed link, or held for later),
//! so each test can count exactly how often each request reached the wire.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

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

// 1. Blamed evictions -------------------------------------------------------------------------

/// Every reason that blames the request, on every plane (the session's link, the metadata
/// leader's data link, a partition primary's data link): the request ends in the instant
/// the eviction arrives with the reason and the SDK's code, is written once, and the
/// client goes on (a ping on the session and a send on the evicted partition's node).
#[test]
fn every_blamed_reason_on_every_plane_ends_the_request_at_once_and_it_is_never_written_again() {
    for reason in BLAMED {
        for (name, plane) in planes() {
            let mut h = Harness::new(|_| {});
            h.set_script(move |w, _| {
                if w.code == DOOMED {
                    Act::Evict(reason)
                } else {
                    Act::Answer
                }
            });
            let warm = h.submit(send_with_id(0, 1));
            assert!(h.outcome(warm).is_ok(), "{:?}", h.outcome(warm));
            let asked = h.now;
            let bad = h.submit(doomed(1, plane));
            assert_eq!(
                h.outcome(bad).as_ref().unwrap_err(),
                &RequestError::Evicted {
                    reason,
                    code: sdk_code(reason)
                },
                "{reason:?} on {name}"
            );
            assert_eq!(
                h.completed_at(bad),
                asked,
                "{reason:?} on {name}: not at once"
            );
            h.advance_to(Duration::from_secs(30));
            assert_eq!(h.writes_of(1), 1, "{reason:?} on {name}: written again");
            let pinged = h.submit(ping());
            let sent = h.submit(send_with_id(0, 2));
            let sent1 = h.submit(send_with_id(1, 3));
            h.advance_by(Duration::from_secs(2));
            for id in [pinged, sent, sent1] {
                assert!(
                    h.outcome(id).is_ok(),
                    "{reason:?} on {name}: the client did not go on: {:?}",
                    h.outcome(id)
                );
            }
        }
    }
}

/// A blamed eviction of a command held on a partition's only data link while sends to that
/// partition queue behind it: the command ends once, the sends all go (on a new sign-in),
/// each written once, and the command is not written again.
#[test]
fn sends_queued_behind_a_blamed_eviction_on_a_data_link_all_succeed_once() {
    let mut h = Harness::new(|config| config.data_links_per_node = 1);
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let bad = h.submit(doomed(7, partition_plane(0, true)));
    let sends: Vec<RequestId> = (10..30u128)
        .map(|id| h.submit(send_with_id(0, id)))
        .collect();
    assert_eq!(h.held.len(), 1, "the command is held on the wire");
    h.release(Act::Evict(EvictionReason::InvalidRequestBody));
    h.advance_by(Duration::from_secs(5));
    assert!(is_evicted(h.outcome(bad)), "{:?}", h.outcome(bad));
    for (id, message) in sends.iter().zip(10..30u128) {
        assert!(h.outcome(*id).is_ok(), "{:?}", h.outcome(*id));
        assert_eq!(h.writes_of_message(message).len(), 1, "message {message}");
    }
    assert_eq!(h.writes_of(7), 1);
}

// 2. Session-level evictions and mixes --------------------------------------------------------

/// A session-level eviction on every plane is written again once; a second one ends the
/// request with it and the SDK's code; never a third write.
#[test]
fn a_session_level_eviction_twice_ends_the_request_on_every_plane_after_exactly_two_writes() {
    for reason in SESSION_LEVEL {
        for (name, plane) in planes() {
            let mut h = Harness::new(|_| {});
            h.set_script(move |w, _| {
                if w.code == DOOMED {
                    Act::Evict(reason)
                } else {
                    Act::Answer
                }
            });
            let bad = h.submit(doomed(3, plane));
            h.advance_to(Duration::from_secs(40));
            assert_eq!(
                h.outcome(bad).as_ref().unwrap_err(),
                &RequestError::Evicted {
                    reason,
                    code: sdk_code(reason)
                },
                "{reason:?} on {name}"
            );
            assert_eq!(h.writes_of(3), 2, "{reason:?} on {name}");
            let sent = h.submit(send_with_id(0, 2));
            h.advance_by(Duration::from_secs(2));
            assert!(h.outcome(sent).is_ok(), "{:?}", h.outcome(sent));
        }
    }
}

/// A session-level eviction, then a blamed one: ends with the blamed reason after two
/// writes.
#[test]
fn a_session_eviction_then_a_blamed_one_ends_with_the_blamed_reason() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, nth| match (w.code, nth) {
            (DOOMED, 0) => Act::Evict(EvictionReason::NoSession),
            (DOOMED, _) => Act::Evict(EvictionReason::InvalidRequestOperation),
            _ => Act::Answer,
        });
        let bad = h.submit(doomed(4, plane));
        h.advance_to(Duration::from_secs(40));
        assert_eq!(
            h.outcome(bad).as_ref().unwrap_err(),
            &RequestError::Evicted {
                reason: EvictionReason::InvalidRequestOperation,
                code: ErrorCode::InvalidCommand
            },
            "{name}"
        );
        assert_eq!(h.writes_of(4), 2, "{name}");
    }
}

/// A session-level eviction, then the link goes silent (or closes) with the request in
/// flight again: a second session ended under it. A write ends `OutcomeUnknown`, a read
/// `ConnectionLost`; neither is written a third time.
#[test]
fn a_session_eviction_then_a_lost_link_ends_writes_unknown_and_reads_lost() {
    for second in [Act::Silent, Act::Close] {
        for (name, plane, write) in [
            ("session read", Plane::Session, false),
            ("metadata read", Plane::MetadataRead, false),
            ("partition read", partition_plane(1, false), false),
            ("partition write", partition_plane(0, true), true),
            ("metadata write", Plane::MetadataWrite, true),
        ] {
            let mut h = Harness::new(|config| {
                config.attempt_timeout = Duration::from_millis(500);
                config.request_timeout = Duration::from_secs(20);
            });
            h.set_script(move |w, nth| match (w.code, nth) {
                (DOOMED, 0) => Act::Evict(EvictionReason::NoSession),
                (DOOMED, _) => second,
                _ => Act::Answer,
            });
            let bad = h.submit(doomed(5, plane));
            h.advance_to(Duration::from_secs(30));
            let outcome = h.outcome(bad).clone();
            if write {
                assert!(
                    matches!(outcome, Err(RequestError::OutcomeUnknown { .. })),
                    "{name}, then {second:?}: {outcome:?}"
                );
            } else {
                assert!(
                    matches!(outcome, Err(RequestError::ConnectionLost { .. })),
                    "{name}, then {second:?}: {outcome:?}"
                );
            }
            assert_eq!(h.writes_of(5), 2, "{name}, then {second:?}");
        }
    }
}

/// The other order: a read whose link goes silent, written again, then evicted for the
/// session: that is the second session ended under it, so it ends (evicted), with no third
/// write.
#[test]
fn a_silent_link_then_a_session_eviction_ends_a_read_after_two_writes() {
    for (name, plane) in [
        ("session", Plane::Session),
        ("partition read", partition_plane(1, false)),
    ] {
        let mut h = Harness::new(|config| {
            config.attempt_timeout = Duration::from_millis(500);
            config.request_timeout = Duration::from_secs(20);
        });
        h.set_script(|w, nth| match (w.code, nth) {
            (DOOMED, 0) => Act::Silent,
            (DOOMED, _) => Act::Evict(EvictionReason::NoSession),
            _ => Act::Answer,
        });
        let bad = h.submit(doomed(6, plane));
        h.advance_to(Duration::from_secs(30));
        assert!(is_evicted(h.outcome(bad)), "{name}: {:?}", h.outcome(bad));
        assert_eq!(h.writes_of(6), 2, "{name}");
    }
}

/// Status 40 (`Unauthenticated`) and 30 (`StaleClient`) answer a request whose session
/// ended: mixed with a session-level eviction, the second such end finishes the request.
/// Never a third write, whatever the order.
#[test]
fn status_40_or_30_mixed_with_a_session_eviction_ends_the_request_after_two_writes() {
    for status in [40, 30] {
        for (first, second) in [
            (Act::Evict(EvictionReason::NoSession), Act::Status(status)),
            (Act::Status(status), Act::Evict(EvictionReason::NoSession)),
            (Act::Status(status), Act::Status(status)),
        ] {
            for (name, plane) in [
                ("session", Plane::Session),
                ("partition write", partition_plane(0, true)),
                ("metadata write", Plane::MetadataWrite),
            ] {
                let mut h = Harness::new(|config| {
                    config.request_timeout = Duration::from_secs(20);
                });
                h.set_script(move |w, nth| match (w.code, nth) {
                    (DOOMED, 0) => first,
                    (DOOMED, _) => second,
                    _ => Act::Answer,
                });
                let bad = h.submit(doomed(8, plane));
                h.advance_to(Duration::from_secs(30));
                assert!(
                    h.outcome(bad).is_err(),
                    "{name}: {first:?} then {second:?}: {:?}",
                    h.outcome(bad)
                );
                assert!(
                    !matches!(h.outcome(bad), Err(RequestError::TimedOut { .. })),
                    "{name}: {first:?} then {second:?}: ran out its deadline instead: {:?}",
                    h.outcome(bad)
                );
                assert!(
                    h.writes_of(8) <= 2,
                    "{name}: {first:?} then {second:?}: written {} times",
                    h.writes_of(8)
                );
                let sent = h.submit(send_with_id(0, 99));
                h.advance_by(Duration::from_secs(3));
                assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
            }
        }
    }
}

// 3. Evictions after a 57 replay ---------------------------------------------------------------

/// A send answered 57 (outcome unknown: the first write may still commit) whose replay on
/// the same link is then evicted with a reason that blames it: it ends in that instant and
/// is not written a third time, on any session.
#[test]
fn a_blamed_eviction_of_a_57_replay_ends_the_send_and_it_is_not_written_again() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.ids.contains(&500) {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(0, 500));
    h.release(Act::Status(57));
    // The replay comes after the replay interval, on the same link.
    h.advance_by(Duration::from_millis(300));
    assert_eq!(h.held.len(), 1, "the 57 was replayed");
    let asked = h.now;
    h.release(Act::Evict(EvictionReason::InvalidRequestBody));
    let outcome = h.outcome(send).clone();
    assert!(
        matches!(
            outcome,
            Err(RequestError::Evicted { .. } | RequestError::OutcomeUnknown { .. })
        ),
        "{outcome:?}"
    );
    assert_eq!(h.completed_at(send), asked);
    h.advance_to(Duration::from_secs(30));
    assert_eq!(h.writes_of_message(500).len(), 2);
}

/// A send answered 57 (the first write may still commit), whose replay is evicted for the
/// session (`NoSession`): the server's dedup of that write went with the session, so writing
/// it again on a new session may store it twice. The send must end without a write on
/// another session (outcome unknown), as a write lost in flight does.
#[test]
fn a_session_eviction_of_a_57_replay_does_not_write_the_send_on_a_new_session() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.ids.contains(&600) {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(0, 600));
    h.release(Act::Status(57));
    h.advance_by(Duration::from_millis(300));
    assert_eq!(h.held.len(), 1, "the 57 was replayed");
    h.release(Act::Evict(EvictionReason::NoSession));
    h.advance_by(Duration::from_secs(2));
    // Whatever is held now is a third write: answer it as the node would (stored).
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_to(Duration::from_secs(30));
    let writes = h.writes_of_message(600);
    let links: Vec<LinkId> = writes.iter().map(|w| w.link).collect();
    assert_eq!(
        writes.len(),
        2,
        "a send of unknown outcome was written on a new session: {links:?}; outcome {:?}",
        h.outcome(send)
    );
    assert!(
        matches!(h.outcome(send), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(send)
    );
}

/// The same for a metadata write answered 57 in its result section (in flight on the
/// leader), whose replay is evicted for the session.
#[test]
fn a_session_eviction_of_a_metadata_write_57_replay_does_not_write_it_on_a_new_session() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let delete = code::DELETE_STREAM;
    h.cluster.not_committed = 1;
    h.set_script(move |w, nth| {
        if w.code == delete && nth == 1 {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    let call = iggy_route_core::client::Call::delete_stream(1u32).unwrap();
    let id = h.submit(call.request);
    h.advance_to(Duration::from_secs(30));
    let writes = h.writes_of_code(delete);
    assert_eq!(
        writes,
        2,
        "a metadata write of unknown outcome was written on a new session; outcome {:?}",
        h.outcome(id)
    );
    assert!(
        matches!(h.outcome(id), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(id)
    );
}

// 4. Merged send frames --------------------------------------------------------------------------

/// Sends merged into one frame behind a write in flight, the merged frame evicted with a
/// reason that blames it: every rider completes exactly once, and none that ended evicted
/// is written again; the partition goes on.
#[test]
fn a_merged_send_frame_evicted_for_the_request_ends_each_rider_once_and_none_is_rewritten() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let head = h.submit(send_with_id(0, 100));
    let riders: Vec<(RequestId, u128)> = (101..109u128)
        .map(|id| (h.submit(send_with_id(0, id)), id))
        .collect();
    h.release(Act::Answer);
    assert!(h.outcome(head).is_ok());
    assert_eq!(h.held.len(), 1, "the riders go in one frame");
    assert!(h.written.last().unwrap().ids.len() > 1, "merged");
    h.release(Act::Evict(EvictionReason::InvalidRequestBodySize));
    // From now on sends are answered.
    h.set_script(|_, _| Act::Answer);
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_to(Duration::from_secs(40));
    for (id, message) in &riders {
        let outcome = h.outcome(*id).clone();
        let writes = h.writes_of_message(*message).len();
        if is_evicted(&outcome) {
            assert_eq!(writes, 1, "rider {message} evicted yet written again");
        } else {
            assert!(writes <= 2, "rider {message}: {writes} writes, {outcome:?}");
        }
    }
    let after = h.submit(send_with_id(0, 200));
    h.advance_by(Duration::from_secs(2));
    assert!(h.outcome(after).is_ok(), "{:?}", h.outcome(after));
}

/// A merged frame evicted for the session twice: each rider completes once and is written
/// at most twice.
#[test]
fn a_merged_send_frame_evicted_for_the_session_twice_ends_each_rider_after_two_writes() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let head = h.submit(send_with_id(0, 100));
    let riders: Vec<(RequestId, u128)> = (101..105u128)
        .map(|id| (h.submit(send_with_id(0, id)), id))
        .collect();
    h.release(Act::Answer);
    assert!(h.outcome(head).is_ok());
    h.release(Act::Evict(EvictionReason::NoSession));
    h.advance_by(Duration::from_secs(2));
    // Evict every send frame written from now on too.
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    while !h.held.is_empty() {
        h.release(Act::Evict(EvictionReason::NoSession));
    }
    h.advance_to(Duration::from_secs(40));
    for (id, message) in &riders {
        let outcome = h.outcome(*id).clone();
        assert!(outcome.is_err(), "{outcome:?}");
        let writes = h.writes_of_message(*message).len();
        assert!(writes <= 2, "rider {message}: {writes} writes, {outcome:?}");
    }
}

// 5. Storms and the sign-in budget ----------------------------------------------------------------

/// Sixty raw commands on every plane, a third evicted for the session, the rest blamed, with
/// sends to both partitions among them, all at once: each completes exactly once, a blamed
/// one is written at most once and a session-level one at most twice, every send succeeds,
/// and no node sees more than 2 x (links per node + 1) new links in any one second.
#[test]
fn a_storm_of_mixed_evictions_on_every_plane_keeps_sign_ins_within_budget() {
    let links_per_node = 2;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(60);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    let warm1 = h.submit(send_with_id(1, 2));
    assert!(h.outcome(warm).is_ok() && h.outcome(warm1).is_ok());
    h.set_script(|w, _| match tag_of(w) {
        Some(tag) if tag % 3 == 0 => Act::Evict(EvictionReason::NoSession),
        Some(tag) => Act::Evict(BLAMED[(tag % 6) as usize]),
        None => Act::Answer,
    });
    let planes = planes();
    let mut doomed_ids = Vec::new();
    let mut sends = Vec::new();
    for tag in 0..60u64 {
        let plane = planes[(tag % planes.len() as u64) as usize].1.clone();
        doomed_ids.push((tag, h.submit_quiet(doomed(tag, plane))));
        if tag % 2 == 0 {
            let message = 1_000 + u128::from(tag);
            sends.push((
                message,
                h.submit_quiet(send_with_id((tag % 4 / 2) as u32, message)),
            ));
        }
    }
    h.run();
    h.advance_to(Duration::from_secs(90));
    for (tag, id) in &doomed_ids {
        let outcome = h.outcome(*id);
        assert!(is_evicted(outcome), "tag {tag}: {outcome:?}");
        let most = if tag % 3 == 0 { 2 } else { 1 };
        assert!(
            h.writes_of(*tag) <= most,
            "tag {tag}: {} writes",
            h.writes_of(*tag)
        );
        assert!(h.writes_of(*tag) >= 1, "tag {tag} evicted without a write");
    }
    for (message, id) in &sends {
        assert!(
            h.outcome(*id).is_ok(),
            "send {message}: {:?}",
            h.outcome(*id)
        );
        assert_eq!(h.writes_of_message(*message).len(), 1);
    }
    let budget = 2 * (links_per_node + 1);
    for node in 0..3 {
        let most = h.most_connects_in_a_second(node);
        assert!(
            most <= budget,
            "node {node}: {most} links opened in one second"
        );
        let logins = h.most_logins_in_a_second(node);
        assert!(
            logins <= budget,
            "node {node}: {logins} sign-ins in one second"
        );
    }
    assert_eq!(h.router.pending_count(), 0);
}

/// Deadlines shorter than the sign-in budget's wait: forty blamed evictions on the session
/// need forty sessions, far more than a second's budget. Every request ends by its own
/// deadline (evicted, or timed out), exactly once, and none is written after its deadline.
#[test]
fn deadlines_shorter_than_the_sign_in_wait_end_on_time_and_nothing_is_written_late() {
    let timeout = Duration::from_millis(700);
    let mut h = Harness::new(|config| {
        config.request_timeout = timeout;
        config.data_links_per_node = 1;
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    let mut all = Vec::new();
    for round in 0..4u64 {
        for i in 0..10u64 {
            let tag = round * 100 + i;
            let plane = if i % 2 == 0 {
                Plane::Session
            } else {
                partition_plane(0, true)
            };
            let submitted = h.now;
            all.push((tag, h.submit(doomed(tag, plane)), submitted));
        }
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let mut timed_out = 0;
    for (tag, id, submitted) in &all {
        let outcome = h.outcome(*id).clone();
        let done = h.completed_at(*id);
        assert!(
            done <= *submitted + timeout,
            "tag {tag} ended {:?} after submit, deadline {timeout:?}: {outcome:?}",
            done - *submitted
        );
        match outcome {
            Err(RequestError::Evicted { .. }) => assert_eq!(h.writes_of(*tag), 1, "tag {tag}"),
            Err(RequestError::TimedOut { .. }) => {
                timed_out += 1;
                assert!(h.writes_of(*tag) <= 1, "tag {tag}");
            }
            other => panic!("tag {tag}: {other:?}"),
        }
        for w in h.written.iter().filter(|w| tag_of(w) == Some(*tag)) {
            assert!(
                w.at <= *submitted + timeout,
                "tag {tag} written after its deadline"
            );
        }
    }
    assert!(timed_out < all.len(), "nothing was evicted at all");
    let budget = 2 * (1 + 1);
    for node in 0..3 {
        assert!(h.most_connects_in_a_second(node) <= budget, "node {node}");
    }
}

/// A node that drops every data link right after signing it in: sends to its partition keep
/// asking for links, and the node still sees at most 2 x (links + 1) in any one second.
#[test]
fn a_node_that_drops_every_data_link_after_its_sign_in_is_not_stormed() {
    let links_per_node = 3;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(5);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.node == 1 && w.code == code::LOGIN_REGISTER {
            Act::AnswerThenClose
        } else {
            Act::Answer
        }
    });
    for round in 0..20u128 {
        for i in 0..5u128 {
            h.submit_quiet(send_with_id(0, 10_000 + round * 10 + i));
        }
        h.run();
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let budget = 2 * (links_per_node + 1);
    let most = h.most_connects_in_a_second(1);
    assert!(most <= budget, "node 1: {most} links opened in one second");
    assert_eq!(h.router.pending_count(), 0);
}

// 6. Withdrawal -----------------------------------------------------------------------------------

/// Requests waiting for a session the budget holds back are withdrawn: they complete
/// `Withdrawn` at once, exactly once, and are never written. Withdrawing one that is over
/// (evicted), or twice, does nothing.
#[test]
fn withdrawn_requests_waiting_for_the_sign_in_budget_are_never_written() {
    let mut h = Harness::new(|config| {
        config.request_timeout = Duration::from_secs(30);
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    // Twenty requests that each end the session, all on the session's lane.
    let doomed_ids: Vec<(u64, RequestId)> = (0..20u64)
        .map(|tag| (tag, h.submit_quiet(doomed(tag, Plane::Session))))
        .collect();
    h.run();
    h.advance_by(Duration::from_millis(100));
    let mut withdrawn = Vec::new();
    let mut kept = Vec::new();
    for (tag, id) in &doomed_ids {
        if h.completions(*id) > 0 {
            assert!(!h.router.withdraw(h.now, *id), "tag {tag} is over");
            continue;
        }
        if h.writes_of(*tag) == 0 && tag % 2 == 0 {
            assert!(h.router.withdraw(h.now, *id), "tag {tag} was never written");
            assert!(!h.router.withdraw(h.now, *id), "withdrawn twice");
            withdrawn.push((*tag, *id));
        } else {
            kept.push((*tag, *id));
        }
    }
    h.run();
    assert!(
        !withdrawn.is_empty(),
        "nothing was left waiting to withdraw"
    );
    for (_, id) in &withdrawn {
        assert!(
            matches!(h.outcome(*id), Err(RequestError::Withdrawn)),
            "{:?}",
            h.outcome(*id)
        );
    }
    h.advance_to(Duration::from_secs(40));
    for (tag, id) in &withdrawn {
        assert_eq!(h.writes_of(*tag), 0, "withdrawn tag {tag} was written");
        assert_eq!(h.completions(*id), 1);
    }
    for (tag, id) in &kept {
        assert!(
            is_evicted(h.outcome(*id)),
            "tag {tag}: {:?}",
            h.outcome(*id)
        );
    }
    for (_, id) in &doomed_ids {
        assert!(!h.router.withdraw(h.now, *id));
    }
    h.run();
    for (_, id) in &doomed_ids {
        assert_eq!(h.completions(*id), 1);
    }
}

/// A request evicted for the session and waiting to be written again has been on the wire:
/// whatever `withdraw` says about it, it completes exactly once, and if it was withdrawn it
/// is never written again.
#[test]
fn withdrawing_a_request_between_its_session_eviction_and_its_rewrite_completes_it_once() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|config| {
            config.request_timeout = Duration::from_secs(30);
            config.max_pending_requests = 10_000;
        });
        h.set_script(|w, _| match tag_of(w) {
            Some(0) => Act::Evict(EvictionReason::InvalidRequestBody),
            Some(_) => Act::Evict(EvictionReason::NoSession),
            None => Act::Answer,
        });
        // Burn the budget, so the rewrite waits.
        let burners: Vec<RequestId> = (100..112u64)
            .map(|tag| h.submit_quiet(doomed(tag, plane.clone())))
            .collect();
        let victim = h.submit_quiet(doomed(1, plane.clone()));
        h.run();
        let mut withdrew = None;
        for _ in 0..200 {
            if h.completions(victim) > 0 {
                break;
            }
            if h.writes_of(1) == 1 {
                withdrew = Some(h.router.withdraw(h.now, victim));
                h.run();
                break;
            }
            h.advance_by(Duration::from_millis(20));
        }
        let Some(withdrew) = withdrew else {
            continue;
        };
        let writes_then = h.writes_of(1);
        h.advance_to(Duration::from_secs(60));
        assert_eq!(h.completions(victim), 1, "{name}");
        if withdrew {
            assert!(
                matches!(h.outcome(victim), Err(RequestError::Withdrawn)),
                "{name}: {:?}",
                h.outcome(victim)
            );
            assert_eq!(
                h.writes_of(1),
                writes_then,
                "{name}: withdrawn, then written"
            );
        } else {
            assert!(
                !matches!(h.outcome(victim), Err(RequestError::Withdrawn)),
                "{name}: withdraw said no, yet {:?}",
                h.outcome(victim)
            );
        }
        for id in burners {
            assert_eq!(h.completions(id), 1, "{name}");
        }
    }
}

// 7. Shutdown ---------------------------------------------------------------------------------------

/// Shutdown in the middle of a storm of evictions: every request completes exactly once,
/// nothing is dialled or written afterwards, and new requests are refused.
#[test]
fn shutdown_during_an_eviction_storm_completes_everything_once_and_writes_nothing_after() {
    let mut h = Harness::new(|config| {
        config.request_timeout = Duration::from_secs(30);
        config.max_pending_requests = 10_000;
    });
    h.set_script(|w, _| match tag_of(w) {
        Some(tag) if tag % 2 == 0 => Act::Evict(EvictionReason::NoSession),
        Some(_) => Act::Evict(EvictionReason::InvalidRequestOperation),
        None => Act::Answer,
    });
    let planes = planes();
    let mut ids = Vec::new();
    for tag in 0..50u64 {
        let plane = planes[(tag % planes.len() as u64) as usize].1.clone();
        ids.push(h.submit_quiet(doomed(tag, plane)));
        ids.push(h.submit_quiet(send_with_id((tag % 2) as u32, 5_000 + u128::from(tag))));
    }
    h.run();
    h.advance_by(Duration::from_millis(1_500));
    h.router.shutdown(h.now);
    h.shut = true;
    h.run();
    h.advance_by(Duration::from_secs(40));
    for id in &ids {
        assert_eq!(h.completions(*id), 1, "{id}");
    }
    assert!(h.after_shutdown.is_empty(), "{:?}", h.after_shutdown);
    assert!(matches!(
        h.router.submit(h.now, ping()),
        Err(SubmitError::Closed)
    ));
    assert_eq!(h.router.pending_count(), 0);
}

// 8. Login codes as raw commands ---------------------------------------------------------------------

/// A login code as a raw command is refused at submit on every plane, with any body, in the
/// middle of an eviction storm, and nothing is written for it.
#[test]
fn login_codes_are_refused_at_submit_on_every_plane_even_during_a_storm() {
    let mut h = Harness::new(|config| config.max_pending_requests = 10_000);
    h.set_script(|w, _| {
        if w.code == DOOMED {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    for tag in 0..10 {
        h.submit_quiet(doomed(tag, Plane::Session));
    }
    h.run();
    let pending = h.router.pending_count();
    for login in [38u32, 40, 44, 45] {
        for (name, plane) in planes() {
            for body in [Bytes::new(), Bytes::from_static(&[0; 64])] {
                let request = Request::Command(CommandRequest {
                    code: login,
                    body,
                    plane: plane.clone(),
                });
                assert_eq!(
                    h.router.submit(h.now, request).unwrap_err(),
                    SubmitError::SessionCommand { code: login },
                    "{login} on {name}"
                );
            }
        }
    }
    assert_eq!(h.router.pending_count(), pending);
    h.advance_to(Duration::from_secs(40));
    for login in [38u32, 44, 45] {
        assert_eq!(h.writes_of_code(login), 0, "code {login} was written");
    }
    // Logins are only ever written as sign-ins (register operation), never as a command.
    assert!(
        h.written
            .iter()
            .all(|w| w.code != code::LOGIN_REGISTER || w.register)
    );
}

// 9. Odd arrivals ---------------------------------------------------------------------------------

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

/// The route lookup (103) a send waits for is evicted with a reason that blames it (an
/// internal request, not the caller's): the send is not ended as evicted for it, completes
/// once, and succeeds on the next session.
#[test]
fn a_blamed_eviction_of_an_internal_lookup_does_not_end_the_send_waiting_for_it() {
    let mut h = Harness::new(|config| config.request_timeout = Duration::from_secs(10));
    let mut evicted = false;
    h.set_script(move |w, _| {
        if w.code == code::GET_POLL_ROUTING && !evicted {
            evicted = true;
            Act::Evict(EvictionReason::InvalidRequestBody)
        } else {
            Act::Answer
        }
    });
    let send = h.submit(send_with_id(1, 42));
    h.advance_to(Duration::from_secs(20));
    assert!(h.outcome(send).is_ok(), "{:?}", h.outcome(send));
    assert_eq!(h.writes_of_message(42).len(), 1);
}

/// An eviction that arrives after the request's deadline ended it (the frame held on the
/// wire past the deadline): the request completed once, as timed out, and is not completed
/// again; the client goes on.
#[test]
fn an_eviction_after_the_deadline_does_not_complete_the_request_twice() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|config| {
            config.request_timeout = Duration::from_secs(1);
            config.attempt_timeout = Duration::from_secs(5);
        });
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(1, plane));
        assert_eq!(h.held.len(), 1, "{name}");
        h.advance_by(Duration::from_millis(1_500));
        assert!(
            matches!(h.outcome(bad), Err(RequestError::TimedOut { .. })),
            "{name}: {:?}",
            h.outcome(bad)
        );
        // The link may have been closed for the late exchange; if not, the late eviction
        // arrives on it.
        let late = !h.held.is_empty() && h.links.contains_key(&h.held[0].0);
        assert!(late, "{name}: the link of the late exchange is gone");
        h.release(Act::Evict(EvictionReason::InvalidRequestBody));
        h.advance_by(Duration::from_secs(5));
        assert_eq!(h.completions(bad), 1, "{name}");
        h.set_script(|_, _| Act::Answer);
        let sent = h.submit(send_with_id(0, 9));
        let pinged = h.submit(ping());
        h.advance_by(Duration::from_secs(2));
        assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
        assert!(h.outcome(pinged).is_ok(), "{name}: {:?}", h.outcome(pinged));
    }
}

/// An eviction delivered one byte at a time ends the request as a whole one does.
#[test]
fn an_eviction_split_byte_by_byte_ends_the_request_as_a_whole_one_does() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(2, plane));
        let (link, frame) = h.held.pop_front().unwrap();
        let Ok(Frame::Request { header, .. }) = decode_one(&frame) else {
            unreachable!()
        };
        let eviction = eviction_frame(header.client, EvictionReason::InvalidRequestBody);
        for byte in eviction.iter() {
            h.router
                .handle_read(h.now, link, std::slice::from_ref(byte));
            h.run();
        }
        assert_eq!(
            h.outcome(bad).as_ref().unwrap_err(),
            &RequestError::Evicted {
                reason: EvictionReason::InvalidRequestBody,
                code: ErrorCode::InvalidCommand
            },
            "{name}"
        );
        h.set_script(|_, _| Act::Answer);
        h.advance_to(Duration::from_secs(20));
        assert_eq!(h.writes_of(2), 1, "{name}");
    }
}

/// An eviction followed, in the same read, by a reply to the same request (a node that
/// both answers and evicts): the request completes exactly once, and the client goes on.
#[test]
fn an_eviction_with_a_reply_to_the_same_request_behind_it_completes_once() {
    for (name, plane) in planes() {
        let mut h = Harness::new(|_| {});
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Hold
            } else {
                Act::Answer
            }
        });
        let bad = h.submit(doomed(3, plane));
        let (link, frame) = h.held.pop_front().unwrap();
        let Ok(Frame::Request { header, .. }) = decode_one(&frame) else {
            unreachable!()
        };
        let mut both =
            BytesMut::from(&eviction_frame(header.client, EvictionReason::NoSession)[..]);
        ReplyHeader::for_request(&header, 0, 0, 0).encode(&mut both);
        h.router.handle_read(h.now, link, &both);
        h.run();
        h.set_script(|w, _| {
            if w.code == DOOMED {
                Act::Evict(EvictionReason::InvalidRequestBody)
            } else {
                Act::Answer
            }
        });
        h.advance_to(Duration::from_secs(30));
        assert_eq!(h.completions(bad), 1, "{name}: {:?}", h.outcome(bad));
        assert!(h.writes_of(3) <= 2, "{name}");
        let sent = h.submit(send_with_id(0, 9));
        h.advance_by(Duration::from_secs(2));
        assert!(h.outcome(sent).is_ok(), "{name}: {:?}", h.outcome(sent));
    }
}

/// An eviction on an idle coordinator (nothing in flight): no request pays for it, and the
/// next ones succeed on a new session.
#[test]
fn an_unsolicited_eviction_on_an_idle_link_costs_no_request() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    let links: Vec<LinkId> = h.links.keys().copied().collect();
    for link in links {
        h.router
            .handle_read(h.now, link, &eviction_frame(0, EvictionReason::NoSession));
        h.run();
    }
    let pinged = h.submit(ping());
    let sent = h.submit(send_with_id(0, 2));
    let sent1 = h.submit(send_with_id(1, 3));
    h.advance_by(Duration::from_secs(3));
    for id in [pinged, sent, sent1] {
        assert!(h.outcome(id).is_ok(), "{:?}", h.outcome(id));
    }
}

/// A send queued behind a held write of its partition (so it would ride the next merged
/// frame) is withdrawn: it completes `Withdrawn`, its message is never written, and the
/// other riders still go.
#[test]
fn a_withdrawn_rider_never_rides_the_merged_frame() {
    let mut h = Harness::new(|_| {});
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.code == code::SEND_MESSAGES {
            Act::Hold
        } else {
            Act::Answer
        }
    });
    let head = h.submit(send_with_id(0, 100));
    let riders: Vec<RequestId> = (101..106u128)
        .map(|id| h.submit(send_with_id(0, id)))
        .collect();
    assert!(h.router.withdraw(h.now, riders[2]));
    h.run();
    assert!(matches!(h.outcome(riders[2]), Err(RequestError::Withdrawn)));
    h.set_script(|_, _| Act::Answer);
    h.release(Act::Answer);
    while !h.held.is_empty() {
        h.release(Act::Answer);
    }
    h.advance_by(Duration::from_secs(2));
    assert!(h.outcome(head).is_ok());
    assert!(
        h.writes_of_message(103).is_empty(),
        "the withdrawn rider was written"
    );
    for (i, id) in riders.iter().enumerate() {
        if i != 2 {
            assert!(h.outcome(*id).is_ok(), "{:?}", h.outcome(*id));
        }
    }
}

/// A node that evicts every sign-in for the session (`NoSession` in answer to the login):
/// whatever ends them, at most 2 x (links + 1) links are opened to it in any second.
#[test]
fn a_node_that_evicts_every_sign_in_is_dialled_within_budget() {
    let links_per_node = 2;
    let mut h = Harness::new(|config| {
        config.data_links_per_node = links_per_node;
        config.request_timeout = Duration::from_secs(3);
        config.max_pending_requests = 10_000;
    });
    let warm = h.submit(send_with_id(0, 1));
    assert!(h.outcome(warm).is_ok());
    h.set_script(|w, _| {
        if w.node == 1 && w.code == code::LOGIN_REGISTER {
            Act::Evict(EvictionReason::NoSession)
        } else {
            Act::Answer
        }
    });
    // End the data links' sessions so they must sign in again.
    let links: Vec<LinkId> = h
        .links
        .iter()
        .filter(|(_, node)| **node == 1)
        .map(|(link, _)| *link)
        .collect();
    for link in links {
        h.router
            .handle_read(h.now, link, &eviction_frame(0, EvictionReason::NoSession));
        h.run();
    }
    let mut ids = Vec::new();
    for round in 0..20u128 {
        for i in 0..4u128 {
            ids.push(h.submit_quiet(send_with_id(0, 10_000 + round * 10 + i)));
        }
        h.run();
        h.advance_by(Duration::from_millis(250));
    }
    h.advance_by(Duration::from_secs(10));
    let budget = 2 * (links_per_node + 1);
    let tried = h
        .written
        .iter()
        .filter(|w| w.node == 1 && w.code == code::LOGIN_REGISTER)
        .count();
    assert!(tried > budget, "the node was not pressed: {tried} sign-ins");
    let most = h.most_connects_in_a_second(1);
    assert!(most <= budget, "node 1: {most} links opened in one second");
    let logins = h.most_logins_in_a_second(1);
    assert!(logins <= budget, "node 1: {logins} sign-ins in one second");
    for id in ids {
        assert_eq!(h.completions(id), 1);
    }
}
