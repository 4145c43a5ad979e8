//! The outer face against a node that misbehaves: 57 for ever, replies that answer nothing
//! in flight, bodies that do not decode, sign-ins answered with garbage. Each test walks
//! time forward deadline by deadline, as an adapter does, and asserts what the caller and
//! the wire see.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, Links, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{
    Config, Credentials, Event, LinkId, Outcome, Output, ProtocolViolation, Request, RequestError,
    RequestId, Router, SendRequest,
};

/// What the node does to the reply it owes for a frame (after the fake cluster made it).
type Script = Box<dyn FnMut(&str, Bytes) -> Vec<Bytes>>;

struct Harness {
    router: Router,
    cluster: FakeCluster,
    links: Links,
    now: Instant,
    start: Instant,
    script: Script,
    /// Every frame written: (instant, link, what the fake cluster calls it).
    written: Vec<(Instant, LinkId, String)>,
    connects: Vec<Instant>,
    completed: Vec<(RequestId, Outcome)>,
    events: Vec<Event>,
}

impl Harness {
    fn new(cluster: FakeCluster, config: impl FnOnce(&mut Config)) -> Self {
        let now = Instant::now();
        let seeds = (0..cluster.nodes).map(addr).collect();
        let mut settings = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        config(&mut settings);
        let mut harness = Self {
            router: Router::new(settings, 42, now),
            cluster,
            links: Links::new(),
            now,
            start: now,
            script: Box::new(|_, reply| vec![reply]),
            written: Vec::new(),
            connects: Vec::new(),
            completed: Vec::new(),
            events: Vec::new(),
        };
        harness.run();
        harness
    }

    /// From now on the node writes `sends(reply)` for each send instead of its reply, and
    /// answers everything else as the fake cluster does.
    fn on_sends(&mut self, mut sends: impl FnMut(Bytes) -> Vec<Bytes> + 'static) {
        self.script = Box::new(move |name, reply| {
            if name.starts_with("SEND") {
                sends(reply)
            } else {
                vec![reply]
            }
        });
    }

    /// Drains outputs: connects at once and answers every frame through the script.
    fn run(&mut self) {
        for _ in 0..100_000 {
            let Some(output) = self.router.poll_output() else {
                if let Some(deadline) = self.router.poll_timeout() {
                    assert!(deadline >= self.now, "a deadline in the past");
                }
                return;
            };
            match output {
                Output::Connect { link, addr, .. } => {
                    let index = (9000..9000 + self.cluster.nodes)
                        .position(|port| addr.ends_with(&port.to_string()))
                        .unwrap();
                    self.links.insert(link, index);
                    self.connects.push(self.now);
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    let node = self.links[&link];
                    let (name, reply) = self.cluster.answer(node, &bytes);
                    self.written.push((self.now, link, name.clone()));
                    let mut joined = BytesMut::new();
                    for part in (self.script)(&name, reply) {
                        joined.extend_from_slice(&part);
                    }
                    if !joined.is_empty() {
                        self.router.handle_read(self.now, link, &joined);
                    }
                }
                Output::Close { link } => {
                    self.links.remove(&link);
                }
                Output::Completed { id, outcome } => self.completed.push((id, outcome)),
                Output::Event(event) => self.events.push(event),
            }
        }
        panic!("router never went quiet");
    }

    /// Walks time forward, deadline by deadline, until `until` after the start.
    fn advance_to(&mut self, until: Duration) {
        for _ in 0..100_000 {
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

    fn send(&mut self, partition: u32) -> RequestId {
        let request = Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::PartitionId(partition),
            messages: vec![Message {
                payload: Bytes::from_static(b"hello"),
                ..Message::default()
            }],
        });
        let id = self.router.submit(self.now, request).unwrap();
        self.run();
        id
    }

    fn outcome(&self, id: RequestId) -> &Outcome {
        let mut found = self.completed.iter().filter(|(done, _)| *done == id);
        let (_, outcome) = found
            .next()
            .unwrap_or_else(|| panic!("{id} never completed"));
        assert!(found.next().is_none(), "{id} completed twice");
        outcome
    }

    fn sends_written(&self) -> usize {
        self.written
            .iter()
            .filter(|(_, _, name)| name.starts_with("SEND"))
            .count()
    }

    fn sends_written_after(&self, at: Instant) -> usize {
        self.written
            .iter()
            .filter(|(when, _, name)| *when > at && name.starts_with("SEND"))
            .count()
    }
}

/// Sets the `request` echo (bytes 200..208 of the reply header) of a reply frame.
fn with_request_number(reply: &Bytes, request: u64) -> Bytes {
    let mut frame = BytesMut::from(&reply[..]);
    frame[200..208].copy_from_slice(&request.to_le_bytes());
    frame.freeze()
}

/// A success reply with `body` instead of the body the node made (the size field follows).
fn with_body(reply: &Bytes, body: &[u8]) -> Bytes {
    let mut frame = BytesMut::from(&reply[..256]);
    frame.extend_from_slice(body);
    let size = u32::try_from(frame.len()).unwrap();
    frame[48..52].copy_from_slice(&size.to_le_bytes());
    frame.freeze()
}

#[test]
fn a_57_for_ever_is_replayed_within_the_deadline_only_and_the_lane_is_released() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |config| {
        config.request_timeout = Duration::from_secs(2);
    });
    h.send(0);
    h.cluster.not_committed = usize::MAX;
    let stuck = h.send(0);
    let deadline = h.now + Duration::from_secs(2);
    h.advance_to(Duration::from_secs(12));
    assert!(
        matches!(h.outcome(stuck), Err(RequestError::TimedOut { .. })),
        "{:?}",
        h.outcome(stuck)
    );
    assert_eq!(
        h.sends_written_after(deadline),
        0,
        "nothing is written for a request after its deadline"
    );
    let replays = h.sends_written() - 2;
    assert!(
        (1..=16).contains(&replays),
        "{replays} replays in the 2 s before the deadline (doubling from 20 ms)"
    );
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::ReplaysExhausted { request, .. } if *request == stuck
    )));
    // The partition is free again: the next send goes out and succeeds.
    h.cluster.not_committed = 0;
    let next = h.send(0);
    h.advance_to(Duration::from_secs(13));
    assert!(h.outcome(next).is_ok(), "{:?}", h.outcome(next));
}

#[test]
fn a_57_for_ever_runs_out_of_replays_before_a_long_deadline_and_the_outcome_is_unknown() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |config| {
        config.max_replays = 5;
    });
    h.send(0);
    h.cluster.not_committed = usize::MAX;
    let stuck = h.send(0);
    h.advance_to(Duration::from_secs(25));
    assert!(
        matches!(
            h.outcome(stuck),
            Err(RequestError::OutcomeUnknown { node: Some(_) })
        ),
        "{:?}",
        h.outcome(stuck)
    );
    assert_eq!(h.sends_written(), 2 + 5, "two first writes, five replays");
    assert_eq!(h.router.stats().replays, 5);
}

#[test]
fn a_reply_with_another_request_number_is_never_taken_as_a_success() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    h.send(0);
    h.on_sends(|reply| vec![with_request_number(&reply, 999)]);
    let stray = h.send(0);
    assert!(
        matches!(h.outcome(stray), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(stray)
    );
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::ProtocolViolation {
            violation: ProtocolViolation::MismatchedReply {
                got_request: 999,
                ..
            },
            ..
        }
    )));
    assert_eq!(h.router.stats().protocol_violations, 1);
}

#[test]
fn an_undecodable_success_body_for_a_send_is_unknown_not_a_success() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    h.send(0);
    h.on_sends(|reply| vec![with_body(&reply, &[0xFF; 7])]);
    let garbled = h.send(0);
    assert!(
        matches!(h.outcome(garbled), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(garbled)
    );
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::ProtocolViolation {
            violation: ProtocolViolation::MalformedReply(_),
            ..
        }
    )));
    // An empty success body is still a success without a confirmation (as in the SDK).
    h.on_sends(|reply| vec![with_body(&reply, &[])]);
    let bare = h.send(0);
    h.advance_to(Duration::from_secs(1));
    match h.outcome(bare) {
        Ok(iggy_route_core::Reply::Sent(receipt)) => assert_eq!(receipt.base_offset, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_duplicated_reply_closes_the_link_and_the_next_write_is_never_answered_by_it() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    h.send(0);
    // The node writes each send's reply twice. The first copy answers the send; the second
    // arrives with nothing in flight.
    h.on_sends(|reply| vec![reply.clone(), reply]);
    let first = h.send(0);
    assert!(h.outcome(first).is_ok(), "{:?}", h.outcome(first));
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::ProtocolViolation {
            violation: ProtocolViolation::Unsolicited,
            ..
        }
    )));
    // The stale copy of a send's reply, delivered while the next send is in flight, has
    // the previous request number: a mismatch, so the next send is unknown, not a success.
    let mut previous: Option<Bytes> = None;
    h.on_sends(move |reply| match previous.replace(reply.clone()) {
        Some(stale) => vec![stale],
        None => vec![reply],
    });
    let second = h.send(0);
    assert!(h.outcome(second).is_ok());
    let third = h.send(0);
    assert!(
        matches!(h.outcome(third), Err(RequestError::OutcomeUnknown { .. })),
        "{:?}",
        h.outcome(third)
    );
}

#[test]
fn a_node_that_accepts_tcp_and_answers_sign_ins_with_garbage_is_redialled_with_growing_waits() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    // From now on the node accepts every connection and answers every frame with garbage;
    // the working session is cut, so each later sign-in meets the garbage.
    h.script = Box::new(|_, _| vec![Bytes::from(vec![0xAB; 300])]);
    h.connects.clear();
    let link = *h.links.keys().next().unwrap();
    h.router
        .handle_closed(h.now, link, iggy_route_core::CloseReason::Peer);
    h.run();
    h.advance_to(Duration::from_secs(10));
    let gaps: Vec<Duration> = h.connects.windows(2).map(|w| w[1] - w[0]).collect();
    // 50 ms doubling to the 2 s cap, each jittered to between half and all of it: about a
    // dozen dials in 10 s. A TCP connect that reset the count would dial every ~40 ms.
    assert!(
        h.connects.len() <= 15,
        "{} dials in 10 s: {gaps:?}",
        h.connects.len()
    );
    assert!(gaps.len() >= 5, "{gaps:?}");
    assert!(gaps[4] > gaps[0] * 4, "waits grow: {gaps:?}");
}

#[test]
fn the_start_of_a_duplicate_in_the_same_read_closes_the_link_before_the_next_request() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    h.send(0);
    // The node writes the reply and then the first 100 bytes of a copy of it. The copy's
    // rest would arrive later, glued to the front of the next reply.
    h.on_sends(|reply| vec![reply.clone(), reply.slice(..100)]);
    let first = h.send(0);
    assert!(h.outcome(first).is_ok(), "{:?}", h.outcome(first));
    assert!(h.events.iter().any(|e| matches!(
        e,
        Event::ProtocolViolation {
            violation: ProtocolViolation::Unsolicited,
            ..
        }
    )));
    h.script = Box::new(|_, reply| vec![reply]);
    let second = h.send(0);
    h.advance_to(Duration::from_secs(1));
    assert!(h.outcome(second).is_ok(), "{:?}", h.outcome(second));
}

/// The reply frame `reply` with `status` and no body, as a node answers a request it will
/// not serve.
fn with_status(reply: &Bytes, status: u32) -> Bytes {
    let mut header = iggy_route_core::wire::ReplyHeader::decode(&reply[..256]).unwrap();
    header.status = status;
    header.size = 256;
    let mut frame = BytesMut::new();
    header.encode(&mut frame);
    frame.freeze()
}

/// After a logout (or an eviction the node answers with a status), the coordinator's own
/// reads come back 40. They were not served under a live session: the router signs in
/// again and asks again, instead of taking 40 for "unavailable" until the caller's
/// deadline (found by a reviewer: every send after `logout_user` timed out).
#[test]
fn a_logged_out_coordinator_signs_in_again_for_the_router_s_own_reads() {
    use std::cell::Cell;
    use std::rc::Rc;
    let mut h = Harness::new(FakeCluster::new(2, vec![1, 1]), |config| {
        config.request_timeout = Duration::from_secs(5);
    });
    let logins = h.cluster.logins;
    let logged_out = Rc::new(Cell::new(true));
    let session = Rc::clone(&logged_out);
    h.script = Box::new(move |name, reply| {
        if name == "LOGIN" {
            session.set(false);
        }
        let coordinator_read = name.starts_with("GET_TOPIC") || name.starts_with("ROUTE");
        if session.get() && coordinator_read {
            vec![with_status(&reply, 40)]
        } else {
            vec![reply]
        }
    });
    let balanced = Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::Balanced,
        messages: vec![Message {
            payload: Bytes::from_static(b"after logout"),
            ..Message::default()
        }],
    });
    let id = h.router.submit(h.now, balanced).unwrap();
    h.run();
    h.advance_to(Duration::from_secs(6));
    assert!(h.outcome(id).is_ok(), "{:?}", h.outcome(id));
    assert!(!logged_out.get(), "the coordinator signed in again");
    assert!(
        h.cluster.logins >= logins + 2,
        "a new session for the coordinator, and one for the data link to node 1"
    );
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, Event::SessionMoved { .. })),
        "a lost session is signed in again where it was, not moved: {:?}",
        h.events
    );
}

/// A node that signs every link in and then breaks the protocol (here: every reply comes
/// twice) is a failing node: it is redialled after a growing backoff, not at once. A
/// successful sign-in alone used to reset the backoff, and the reviewer saw 26,000
/// sign-ins in 9 s against such a node.
#[test]
fn a_node_that_signs_links_in_then_breaks_the_protocol_is_redialled_with_backoff() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    assert_eq!(h.connects.len(), 1);
    h.script = Box::new(|_, reply| vec![reply.clone(), reply]);
    let coordinator = *h.links.keys().next().unwrap();
    let dropped_at = h.now;
    h.router
        .handle_closed(h.now, coordinator, iggy_route_core::CloseReason::Peer);
    h.run();
    h.advance_to(Duration::from_secs(4));
    let redials = h.connects.iter().filter(|&&at| at >= dropped_at).count();
    // 50 ms doubling to 2 s, jittered: about 7 tries in 4 s; at once, thousands.
    assert!(
        (2..=12).contains(&redials),
        "{redials} redials in 4 s of a node that breaks every signed-in link"
    );
    let violations = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::ProtocolViolation { .. }))
        .count();
    assert!(violations >= 2, "each link was closed for its violation");
}

/// A metadata write answered "not committed yet" (57) in its result section, as the real
/// leader answers writes still in flight: the outcome is unknown, so the same bytes are
/// written again on the same link until it is answered, never reported as the server's
/// refusal (the real cluster showed `create_topic` failing with `TransientNotCommitted`
/// under concurrent writes).
#[test]
fn a_metadata_write_answered_57_in_its_result_section_is_replayed_not_failed() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |config| {
        config.request_timeout = Duration::from_secs(5);
    });
    h.cluster.not_committed = 3;
    let call = iggy_route_core::client::Call::delete_stream(1u32).unwrap();
    let id = h.router.submit(h.now, call.request).unwrap();
    h.run();
    h.advance_to(Duration::from_secs(4));
    assert!(h.outcome(id).is_ok(), "{:?}", h.outcome(id));
    let writes: Vec<(LinkId, String)> = h
        .written
        .iter()
        .filter(|(_, _, name)| name.starts_with("DeleteStream"))
        .map(|(_, link, name)| (*link, name.clone()))
        .collect();
    assert_eq!(writes.len(), 4, "three 57s, then the answer: {writes:?}");
    assert!(
        writes.iter().all(|(link, _)| *link == writes[0].0),
        "every replay on the same link: {writes:?}"
    );
    assert_eq!(h.router.stats().replays, 3);
}

/// A raw command on the session plane (the coordinator's link).
fn raw_command(code: u32) -> Request {
    Request::Command(iggy_route_core::CommandRequest {
        code,
        body: Bytes::new(),
        plane: iggy_route_core::Plane::Session,
    })
}

/// One node, a short attempt timeout, and command 9998 never answered (its link falls
/// silent under it).
fn swallowing_9998() -> Harness {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |config| {
        config.attempt_timeout = Duration::from_millis(500);
    });
    h.script = Box::new(|name, reply| {
        if name == "code 9998" {
            Vec::new()
        } else {
            vec![reply]
        }
    });
    h
}

impl Harness {
    fn command(&mut self, code: u32) -> RequestId {
        let id = self.router.submit(self.now, raw_command(code)).unwrap();
        self.run();
        id
    }

    fn written_named(&self, name: &str) -> usize {
        self.written.iter().filter(|(_, _, n)| n == name).count()
    }

    /// The most links opened within any one second.
    fn most_connects_in_a_second(&self) -> usize {
        self.connects
            .iter()
            .map(|from| {
                self.connects
                    .iter()
                    .filter(|at| **at >= *from && **at < *from + Duration::from_secs(1))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

#[test]
fn a_request_the_server_evicts_for_fails_at_once_and_is_never_written_again() {
    use iggy_route_core::wire::{ErrorCode, EvictionReason};
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    h.cluster
        .evict_codes
        .insert(9_999, EvictionReason::InvalidRequestBody);
    let logins = h.cluster.logins;
    let asked = h.now;
    let bad = h.command(9_999);
    // Answered in the same instant: no deadline, no replay.
    assert_eq!(
        h.outcome(bad).as_ref().unwrap_err(),
        &RequestError::Evicted {
            reason: EvictionReason::InvalidRequestBody,
            code: ErrorCode::InvalidCommand,
        }
    );
    assert_eq!(h.now, asked);
    h.advance_to(Duration::from_secs(40));
    assert_eq!(h.written_named("code 9999 EVICTED"), 1);
    // The session is signed in again once, for everyone else, and serves them.
    assert_eq!(h.cluster.logins, logins + 1);
    let send = h.send(0);
    assert!(h.outcome(send).is_ok(), "{:?}", h.outcome(send));
}

#[test]
fn a_session_eviction_is_written_again_once_and_then_ends_the_request() {
    use iggy_route_core::wire::{ErrorCode, EvictionReason, code};
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    // "No session" says nothing against the request: it goes again on a new session. A
    // second one in a row makes it the likely cause.
    h.cluster
        .evict_codes
        .insert(code::GET_ME, EvictionReason::NoSession);
    let logins = h.cluster.logins;
    let me = h.command(code::GET_ME);
    h.advance_to(Duration::from_secs(40));
    assert_eq!(
        h.outcome(me).as_ref().unwrap_err(),
        &RequestError::Evicted {
            reason: EvictionReason::NoSession,
            code: ErrorCode::Unauthenticated,
        }
    );
    assert_eq!(
        h.written_named(&format!("code {} EVICTED", code::GET_ME)),
        2
    );
    assert_eq!(h.cluster.logins, logins + 2);
}

#[test]
fn a_read_never_answered_twice_is_not_written_a_third_time() {
    // The node swallows this command: each time its link falls silent and is closed.
    let mut h = swallowing_9998();
    let silent = h.command(9_998);
    h.advance_to(Duration::from_secs(40));
    assert!(
        matches!(h.outcome(silent), Err(RequestError::ConnectionLost { .. })),
        "{:?}",
        h.outcome(silent)
    );
    assert_eq!(h.written_named("code 9998"), 2);
}

#[test]
fn requests_that_each_end_a_session_never_storm_a_node_with_sign_ins() {
    use iggy_route_core::wire::EvictionReason;
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |config| {
        config.max_pending_requests = 10_000;
    });
    // Every one of them ends the session it is written on, and a send waits among them.
    h.cluster
        .evict_codes
        .insert(9_999, EvictionReason::NoSession);
    // The partition's route is known, as it is for a producer already sending.
    let warm = h.send(0);
    assert!(h.outcome(warm).is_ok(), "{:?}", h.outcome(warm));
    // Each ends two sessions, a hundred sign-ins in all: more than a node's budget for
    // several seconds.
    let doomed: Vec<RequestId> = (0..50).map(|_| h.command(9_999)).collect();
    // A send of a partition whose route every new session makes stale (its sign-in moves
    // the metadata watermark): its lookup goes ahead of the doomed requests, on the
    // first session the budget allows.
    let send = h.send(0);
    h.advance_to(Duration::from_millis(1_100));
    assert!(h.outcome(send).is_ok(), "{:?}", h.outcome(send));
    h.advance_to(Duration::from_secs(40));
    for id in &doomed {
        assert!(
            matches!(h.outcome(*id), Err(RequestError::Evicted { .. })),
            "{:?}",
            h.outcome(*id)
        );
    }
    // A full pool and a coordinator, twice over, per second at most.
    let most = h.most_connects_in_a_second();
    assert!(most <= 18, "{most} links opened within one second");
}

#[test]
fn a_login_code_is_refused_before_anything_is_sent() {
    use iggy_route_core::SubmitError;
    use iggy_route_core::wire::code;
    let mut h = Harness::new(FakeCluster::new(1, vec![0]), |_| {});
    let written = h.written.len();
    for login in [
        code::LOGIN_USER,
        code::LOGIN_REGISTER,
        code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
        code::LOGIN_REGISTER_WITH_PAT,
    ] {
        assert_eq!(
            h.router.submit(h.now, raw_command(login)).unwrap_err(),
            SubmitError::SessionCommand { code: login }
        );
    }
    h.run();
    assert_eq!(h.written.len(), written);
}

#[test]
fn a_withdrawn_request_is_never_written_and_one_on_the_wire_completes_as_usual() {
    use iggy_route_core::wire::code;
    // The node swallows the first command, so the second waits behind it on the session.
    let mut h = swallowing_9998();
    let on_the_wire = h.command(9_998);
    let queued = h.command(code::GET_ME);
    assert!(h.router.withdraw(h.now, queued));
    assert!(!h.router.withdraw(h.now, on_the_wire));
    h.run();
    assert!(
        matches!(h.outcome(queued), Err(RequestError::Withdrawn)),
        "{:?}",
        h.outcome(queued)
    );
    h.advance_to(Duration::from_secs(40));
    assert_eq!(h.written_named(&format!("code {}", code::GET_ME)), 0);
    assert!(h.outcome(on_the_wire).is_err());
    // Withdrawing what is over does nothing.
    assert!(!h.router.withdraw(h.now, queued));
}

#[test]
fn a_receipt_names_the_servers_replica_id_of_the_node_that_admitted_it() {
    let mut h = Harness::new(FakeCluster::new(3, vec![2, 1]), |_| {});
    for (partition, replica) in [(0, 2), (1, 1)] {
        let id = h.send(partition);
        match h.outcome(id) {
            Ok(iggy_route_core::Reply::Sent(receipt)) => {
                assert_eq!(receipt.replica, Some(replica), "{receipt:?}");
                assert_eq!(h.router.replica_of(receipt.node), Some(replica));
            }
            other => panic!("{other:?}"),
        }
    }
}
