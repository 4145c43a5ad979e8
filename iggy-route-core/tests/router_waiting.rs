//! Calls that wait for room (`Router::submit_waiting`), driven through the router's outer
//! face against a fake cluster whose send frames are held until the test answers them, so
//! that what holds the room, and when it frees, is exact. Each test is an adversary's
//! case: a deadline equal to now, a cancel of a request already let in, room freed by a
//! timeout rather than a reply, the session moving while calls wait.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, Links, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message, SendMessagesRequest};
use iggy_route_core::{
    CloseReason, Config, ConnectError, Credentials, Event, LinkId, LinkRole, Output, Reply,
    Request, RequestError, RequestId, Router, SendRequest, SubmitError, TimerKind,
};

const LONG: Duration = Duration::from_secs(60);

/// A one-message send to `partition` of topic 1/1 with `tag` as its payload.
fn send_of(partition: u32, tag: &str) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            payload: Bytes::from(tag.to_owned()),
            ..Message::default()
        }],
    })
}

fn tags_of(frame: &Bytes) -> Vec<String> {
    SendMessagesRequest::decode(&frame[256..])
        .unwrap()
        .messages
        .iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect()
}

/// A router on a three-node fake cluster (partition 0's primary node 1, partition 1's
/// node 2) whose send frames are held until the test answers them.
struct Held {
    router: Router,
    cluster: FakeCluster,
    links: Links,
    now: Instant,
    held: VecDeque<(LinkId, Bytes)>,
    /// Every send frame ever written, by payload tags.
    written: Vec<Vec<String>>,
    completed: Vec<(RequestId, Result<Reply, RequestError>)>,
    coordinator: Option<LinkId>,
    /// Connects to this node fail.
    unreachable: Option<usize>,
    moved: bool,
}

impl Held {
    fn new(config: impl FnOnce(&mut Config)) -> Self {
        let now = Instant::now();
        let cluster = FakeCluster::new(3, vec![1, 2]);
        let seeds = (0..cluster.nodes).map(addr).collect();
        let mut settings = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        settings.request_timeout = LONG;
        settings.attempt_timeout = LONG;
        settings.heartbeat_interval = LONG;
        config(&mut settings);
        let mut held = Self {
            router: Router::new(settings, 42, now),
            cluster,
            links: Links::new(),
            now,
            held: VecDeque::new(),
            written: Vec::new(),
            completed: Vec::new(),
            coordinator: None,
            unreachable: None,
            moved: false,
        };
        held.run();
        held
    }

    /// Drains outputs: connects, answers everything but sends, holds sends.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let Some(output) = self.router.poll_output() else {
                if let Some(at) = self.router.poll_timeout() {
                    assert!(at >= self.now, "a wake-up in the past");
                }
                return;
            };
            match output {
                Output::Connect { link, addr, .. } => {
                    let index = (9000..9000 + self.cluster.nodes)
                        .position(|port| addr.ends_with(&port.to_string()))
                        .unwrap();
                    if self.unreachable == Some(index) {
                        let reason = ConnectError::Unreachable;
                        self.router.handle_connect_failed(self.now, link, reason);
                        continue;
                    }
                    self.links.insert(link, index);
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    if SendMessagesRequest::decode(&bytes[256..]).is_ok() {
                        self.written.push(tags_of(&bytes));
                        self.held.push_back((link, bytes));
                    } else {
                        let node = self.links[&link];
                        let (_, reply) = self.cluster.answer(node, &bytes);
                        self.router.handle_read(self.now, link, &reply);
                    }
                }
                Output::Completed { id, outcome } => self.completed.push((id, outcome)),
                Output::Event(Event::LinkUp {
                    link,
                    role: LinkRole::Coordinator,
                    ..
                }) => self.coordinator = Some(link),
                Output::Event(Event::SessionMoved { .. }) => self.moved = true,
                Output::Close { .. } | Output::Event(_) => {}
            }
        }
        panic!("router never went quiet");
    }

    /// A send that goes in at once (and is held on the wire).
    fn send(&mut self, partition: u32, tag: &str) -> RequestId {
        let id = self
            .router
            .submit(self.now, send_of(partition, tag))
            .unwrap();
        self.run();
        id
    }

    /// A send that may wait for room until `LONG` from now.
    fn wait_send(&mut self, partition: u32, tag: &str) -> RequestId {
        let deadline = self.now + LONG;
        self.try_wait(partition, tag, deadline).unwrap()
    }

    fn try_wait(
        &mut self,
        partition: u32,
        tag: &str,
        deadline: Instant,
    ) -> Result<RequestId, SubmitError> {
        let result = self
            .router
            .submit_waiting(self.now, send_of(partition, tag), deadline);
        self.run();
        result
    }

    /// Answers the oldest held send frame.
    fn answer_oldest(&mut self) {
        let (link, bytes) = self.held.pop_front().unwrap();
        let node = self.links[&link];
        let (_, reply) = self.cluster.answer(node, &bytes);
        self.router.handle_read(self.now, link, &reply);
        self.run();
    }

    fn advance_to(&mut self, at: Instant) {
        self.now = at;
        self.router.handle_timeout(at);
        self.run();
    }

    /// How `id` completed (a success as `Ok(true)` for a send receipt), `None` while it
    /// has not.
    fn outcome(&self, id: RequestId) -> Option<Result<bool, RequestError>> {
        let mut found = self.completed.iter().filter(|(done, _)| *done == id);
        let first = found.next().map(|(_, outcome)| match outcome {
            Ok(reply) => Ok(matches!(reply, Reply::Sent(_))),
            Err(error) => Err(error.clone()),
        });
        assert!(found.next().is_none(), "{id} completed twice");
        first
    }

    fn succeeded(&self, id: RequestId) -> bool {
        self.outcome(id) == Some(Ok(true))
    }
}

#[test]
fn a_try_is_refused_while_a_call_waits_even_where_there_is_room_and_a_call_waits_behind() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 4;
        config.max_pending_per_lane = 1;
    });
    held.send(0, "first");
    let blocked = held.wait_send(0, "blocked");
    // Partition 1 has room, but a call waits: a try is refused with the bound it waits on.
    assert_eq!(
        held.router.submit(held.now, send_of(1, "tried")),
        Err(SubmitError::QueueFull { limit: 1 })
    );
    let behind = held.wait_send(1, "behind");
    assert_eq!(held.written, [vec!["first".to_owned()]]);
    held.answer_oldest();
    // "blocked" goes in, and "behind" with it: neither overtook the other.
    assert_eq!(
        held.written[1..],
        [vec!["blocked".to_owned()], vec!["behind".to_owned()]]
    );
    held.answer_oldest();
    held.answer_oldest();
    assert!(held.succeeded(blocked) && held.succeeded(behind));
    // With nothing waiting, a try goes in again.
    held.router.submit(held.now, send_of(1, "later")).unwrap();
}

#[test]
fn calls_are_let_in_in_arrival_order_and_complete_under_the_id_they_were_given() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    });
    held.send(0, "s0");
    held.send(0, "s1");
    let waiting: Vec<RequestId> = (2..4)
        .map(|n| held.wait_send(0, &format!("s{n}")))
        .collect();
    assert!(held.completed.is_empty());
    for _ in 0..4 {
        held.answer_oldest();
    }
    let order: Vec<String> = held.written.concat();
    assert_eq!(order, ["s0", "s1", "s2", "s3"]);
    for id in waiting {
        assert!(held.succeeded(id), "{id}: {:?}", held.outcome(id));
    }
}

#[test]
fn a_deadline_equal_to_now_never_waits_but_goes_in_where_there_is_room() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 1;
        config.max_pending_per_lane = 1;
    });
    let now = held.now;
    let went_in = held.try_wait(0, "room", now).unwrap();
    assert_eq!(held.written, [vec!["room".to_owned()]]);
    assert_eq!(
        held.try_wait(0, "no room", now),
        Err(SubmitError::QueueFull { limit: 1 })
    );
    // A deadline already past is the same.
    assert_eq!(
        held.try_wait(0, "past", now - Duration::from_millis(1)),
        Err(SubmitError::QueueFull { limit: 1 })
    );
    held.answer_oldest();
    assert!(held.succeeded(went_in));
    assert_eq!(held.completed.len(), 1, "the refused calls never complete");
}

#[test]
fn a_wait_ends_at_its_deadline_with_queue_full_naming_the_bound_it_waited_on() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 4;
        config.max_pending_per_lane = 1;
    });
    held.send(0, "holding");
    let deadline = held.now + Duration::from_millis(300);
    let waiting = held.try_wait(0, "waiting", deadline).unwrap();
    assert_eq!(
        held.router.next_timer(),
        Some((deadline, TimerKind::RoomWait))
    );
    held.advance_to(deadline - Duration::from_nanos(1));
    assert_eq!(held.outcome(waiting), None);
    held.advance_to(deadline);
    assert_eq!(
        held.outcome(waiting),
        Some(Err(RequestError::QueueFull { limit: 1 }))
    );
    // Room that frees up later lets nothing of it in.
    held.answer_oldest();
    assert_eq!(held.written.concat(), ["holding"]);
}

#[test]
fn the_line_holds_max_pending_requests_and_refuses_the_next_at_once() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    });
    held.send(0, "a");
    held.send(0, "b");
    held.wait_send(0, "c");
    held.wait_send(1, "d");
    let far = held.now + LONG;
    assert_eq!(
        held.try_wait(1, "e", far),
        Err(SubmitError::QueueFull { limit: 2 })
    );
    // One leaving the line makes room in it.
    held.answer_oldest();
    held.try_wait(1, "e", far).unwrap();
}

/// At shutdown a call still waiting for room ends `Closed`, an accepted send not yet
/// written ends `Shutdown` (nothing stored), and one on the wire ends `OutcomeUnknown`: its
/// node may have admitted it (it once ended `Shutdown`, which says nothing was stored).
#[test]
fn shutdown_ends_waiting_calls_closed_queued_ones_shut_down_and_written_ones_unknown() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    });
    let on_the_wire = held.send(0, "held");
    let queued = held.send(0, "queued");
    let waiting: Vec<RequestId> = (0..2)
        .map(|n| held.wait_send(0, &format!("w{n}")))
        .collect();
    assert_eq!(held.written.concat(), ["held"]);
    held.router.shutdown(held.now);
    held.run();
    for id in waiting {
        assert_eq!(held.outcome(id), Some(Err(RequestError::Closed)));
    }
    assert_eq!(held.outcome(queued), Some(Err(RequestError::Shutdown)));
    assert!(matches!(
        held.outcome(on_the_wire),
        Some(Err(RequestError::OutcomeUnknown { node: Some(_) }))
    ));
    assert_eq!(held.router.next_timer().map(|(_, kind)| kind), None);
    let far = held.now + LONG;
    assert_eq!(held.try_wait(0, "after", far), Err(SubmitError::Closed));
}

#[test]
fn a_withdrawn_call_leaves_the_line_is_never_sent_and_the_next_moves_up() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 1;
    });
    held.send(0, "holding");
    let first = held.wait_send(0, "withdrawn");
    let second = held.wait_send(0, "next");
    assert!(held.router.withdraw(held.now, first));
    held.run();
    assert_eq!(held.outcome(first), Some(Err(RequestError::Withdrawn)));
    // Twice is a no-op: it is gone.
    assert!(!held.router.withdraw(held.now, first));
    held.answer_oldest();
    held.answer_oldest();
    assert_eq!(held.written.concat(), ["holding", "next"]);
    assert!(held.succeeded(second));
}

#[test]
fn a_call_let_in_is_withdrawn_by_its_own_id_until_it_is_written() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    });
    held.send(0, "a");
    held.send(0, "b");
    let on_the_wire = held.wait_send(0, "c");
    let queued = held.wait_send(0, "d");
    // "b" and "c" ride one frame once "a" is answered; "d" is let in behind them but not
    // written: its partition has one write in flight.
    held.answer_oldest();
    held.answer_oldest();
    assert_eq!(held.written.concat(), ["a", "b", "c"]);
    assert_eq!(held.outcome(queued), None);
    assert!(
        !held.router.withdraw(held.now, on_the_wire),
        "written already"
    );
    assert!(held.router.withdraw(held.now, queued));
    held.run();
    assert_eq!(held.outcome(queued), Some(Err(RequestError::Withdrawn)));
    held.answer_oldest();
    assert!(held.succeeded(on_the_wire));
    assert!(held.held.is_empty());
    assert_eq!(held.written.concat(), ["a", "b", "c"]);
}

#[test]
fn room_held_by_a_timed_out_write_frees_when_its_attempt_ends_not_before() {
    let request_timeout = Duration::from_secs(1);
    let attempt_timeout = Duration::from_secs(3);
    let mut held = Held::new(|config| {
        config.max_pending_requests = 1;
        config.max_pending_per_lane = 1;
        config.request_timeout = request_timeout;
        config.attempt_timeout = attempt_timeout;
    });
    // A write answered first proves the link, so that losing it later backs nothing off.
    held.send(0, "warm-up");
    held.answer_oldest();
    let start = held.now;
    let timed_out = held.send(0, "silent");
    let waiting = held.wait_send(0, "waiting");
    held.advance_to(start + request_timeout);
    assert!(matches!(
        held.outcome(timed_out),
        Some(Err(RequestError::TimedOut { .. }))
    ));
    // Its write is still on the wire: the next write of its partition must not overtake it.
    assert_eq!(held.outcome(waiting), None);
    held.advance_to(start + attempt_timeout - Duration::from_nanos(1));
    assert_eq!(held.written.concat(), ["warm-up", "silent"]);
    held.advance_to(start + attempt_timeout);
    assert_eq!(held.written.concat(), ["warm-up", "silent", "waiting"]);
    held.held.pop_front();
    held.answer_oldest();
    assert!(held.succeeded(waiting));
}

#[test]
fn calls_keep_waiting_while_the_session_moves_and_go_in_when_room_frees() {
    let mut held = Held::new(|config| {
        config.max_pending_requests = 1;
        config.max_pending_per_lane = 1;
    });
    held.send(0, "holding");
    let waiting = held.wait_send(0, "waiting");
    let coordinator = held.coordinator.unwrap();
    held.unreachable = Some(0);
    held.router
        .handle_closed(held.now, coordinator, CloseReason::Peer);
    held.run();
    assert!(held.moved, "the session moved off node 0");
    assert_eq!(held.outcome(waiting), None);
    held.answer_oldest();
    held.answer_oldest();
    assert!(held.succeeded(waiting), "{:?}", held.outcome(waiting));
}
