//! An adversary's checks of the drive contract (`router/mod.rs`), as an adapter sees it.
//!
//! The driver here only ever sleeps until `poll_timeout`, and probes the router with an
//! extra `handle_timeout` half-way there. That probe is the oracle for lost wake-ups: the
//! contract says extra `handle_timeout` calls are harmless, and anything a timeout does at
//! an instant before `poll_timeout` was due before the instant the router named, so the
//! router would have slept through it. At the named instant the reverse holds: a wake-up
//! for a link must do something on the wire, and a router that names the same instant again
//! and again without doing anything spins.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{EvictionHeader, Identifier, Message, Operation, RequestHeader};
use iggy_route_core::{
    AdminRequest, CloseReason, Config, ConnectError, Credentials, LinkId, Outcome, Output, Request,
    RequestError, RequestId, Router, SendRequest, TimerKind,
};

/// A small deterministic source for the random walks.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the fake node does with the next frame it answers on a link.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    Reply,
    /// The reply, in two reads.
    Split(usize),
    /// An eviction (`NoSession`) instead of the reply.
    Evict,
}

struct Sim {
    router: Router,
    cluster: FakeCluster,
    now: Instant,
    start: Instant,
    request_timeout: Duration,
    nodes: BTreeMap<LinkId, usize>,
    connecting: Vec<LinkId>,
    connected: BTreeSet<LinkId>,
    /// The frame written on each link and not answered yet (the protocol is lockstep).
    owed: BTreeMap<LinkId, Bytes>,
    /// Each accepted request's deadline.
    submitted: BTreeMap<RequestId, Instant>,
    completed: BTreeMap<RequestId, Outcome>,
    /// Sends written to the wire, per request frame identity (client, request number).
    sends_written: usize,
    log: Vec<String>,
}

impl Sim {
    fn new(cluster: FakeCluster, seed: u64, config: impl FnOnce(&mut Config)) -> Self {
        let now = Instant::now();
        let seeds = (0..cluster.nodes).map(addr).collect();
        let mut settings = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        config(&mut settings);
        let request_timeout = settings.request_timeout;
        let mut sim = Self {
            router: Router::new(settings, seed, now),
            cluster,
            now,
            start: now,
            request_timeout,
            nodes: BTreeMap::new(),
            connecting: Vec::new(),
            connected: BTreeSet::new(),
            owed: BTreeMap::new(),
            submitted: BTreeMap::new(),
            completed: BTreeMap::new(),
            sends_written: 0,
            log: Vec::new(),
        };
        sim.drain();
        sim
    }

    fn fail(&self, what: &str) -> ! {
        let tail: Vec<&String> = self.log.iter().rev().take(40).rev().collect();
        panic!("{what}\nlast steps:\n{tail:#?}");
    }

    /// Drains every output, checking what each promises; returns how many there were.
    fn drain(&mut self) -> usize {
        let mut count = 0;
        while let Some(output) = self.router.poll_output() {
            count += 1;
            match output {
                Output::Connect { link, addr, .. } => {
                    let node = (0..self.cluster.nodes)
                        .position(|n| addr == iggy_route_core::fuzzing::fake_cluster::addr(n))
                        .unwrap();
                    self.nodes.insert(link, node);
                    self.connecting.push(link);
                    self.log
                        .push(format!("{:?} connect {link} to node{node}", self.at()));
                }
                Output::Transmit { link, bytes } => {
                    if !self.connected.contains(&link) {
                        self.fail(&format!("transmit on {link}, which is not connected"));
                    }
                    if self.owed.contains_key(&link) {
                        self.fail(&format!(
                            "a second frame on {link} before the first's reply"
                        ));
                    }
                    let header = RequestHeader::decode(&bytes).unwrap();
                    if header.operation == Operation::SendMessages {
                        self.sends_written += 1;
                    }
                    self.log.push(format!(
                        "{:?} transmit {link} code {}",
                        self.at(),
                        header.code
                    ));
                    self.owed.insert(link, bytes);
                }
                Output::Close { link } => {
                    self.log.push(format!("{:?} close {link}", self.at()));
                    self.forget(link);
                }
                Output::Completed { id, outcome } => {
                    self.log.push(format!(
                        "{:?} completed {id} ok={}",
                        self.at(),
                        outcome.is_ok()
                    ));
                    let Some(&deadline) = self.submitted.get(&id) else {
                        self.fail(&format!("{id} completed but never accepted"));
                    };
                    if self.completed.contains_key(&id) {
                        self.fail(&format!("{id} completed twice"));
                    }
                    if self.now > deadline {
                        self.fail(&format!(
                            "{id} completed {:?} after its deadline",
                            self.now - deadline
                        ));
                    }
                    self.completed.insert(id, outcome);
                }
                Output::Event(_) => {}
            }
        }
        if let Some(at) = self.router.poll_timeout()
            && at < self.now
        {
            self.fail(&format!(
                "after a full drain the router asks to be woken {:?} ago",
                self.now - at
            ));
        }
        count
    }

    fn at(&self) -> Duration {
        self.now.saturating_duration_since(self.start)
    }

    fn forget(&mut self, link: LinkId) {
        self.connecting.retain(|l| *l != link);
        self.connected.remove(&link);
        self.owed.remove(&link);
    }

    /// Sleeps as an adapter does until `now + by`: to each `poll_timeout` in turn, probing
    /// half-way there with an extra `handle_timeout` that must find nothing to do.
    fn sleep(&mut self, by: Duration) {
        let until = self.now + by;
        let mut same = 0;
        let mut last: Option<Instant> = None;
        for _ in 0..10_000 {
            let Some((at, kind)) = self.router.next_timer() else {
                break;
            };
            if at > until {
                break;
            }
            if at > self.now {
                let probe = self.now + (at - self.now) / 2;
                if probe > self.now {
                    self.now = probe;
                    self.router.handle_timeout(probe);
                    let done = self.drain();
                    if done > 0 {
                        self.fail(&format!(
                            "a timeout at {probe:?} did {done} things, before the wake-up \
                             the router named ({kind:?} at {at:?}): a lost wake-up"
                        ));
                    }
                }
            }
            self.now = at.max(self.now);
            self.log.push(format!("wake for {kind:?}"));
            self.router.handle_timeout(self.now);
            let done = self.drain();
            let link_kind = matches!(
                kind,
                TimerKind::Connect
                    | TimerKind::Reply
                    | TimerKind::Replay
                    | TimerKind::Heartbeat
                    | TimerKind::Idle
                    | TimerKind::CoordinatorReconnect
            );
            if link_kind && done == 0 {
                self.fail(&format!(
                    "woken for {kind:?} at {at:?} and handle_timeout did nothing"
                ));
            }
            if done == 0 && last == Some(at) {
                same += 1;
                if same > 3 {
                    self.fail(&format!("the router spins at {at:?} for {kind:?}"));
                }
            } else {
                same = 0;
            }
            last = Some(at);
        }
        self.now = self.now.max(until);
        self.router.handle_timeout(self.now);
        self.drain();
    }

    fn submit(&mut self, request: Request) -> Option<RequestId> {
        let id = self.router.submit(self.now, request).ok()?;
        self.log.push(format!("submit {id}"));
        self.submitted.insert(id, self.now + self.request_timeout);
        self.drain();
        Some(id)
    }

    fn connect(&mut self, index: usize, fail: bool) {
        if self.connecting.is_empty() {
            return;
        }
        let link = self.connecting.remove(index % self.connecting.len());
        if fail {
            self.log.push(format!("connect failed {link}"));
            self.forget(link);
            self.router
                .handle_connect_failed(self.now, link, ConnectError::Unreachable);
        } else {
            self.log.push(format!("connected {link}"));
            self.connected.insert(link);
            self.router.handle_connected(self.now, link);
        }
        self.drain();
    }

    fn answer(&mut self, index: usize, how: Answer) {
        let Some(&link) = self.owed.keys().nth(index % self.owed.len().max(1)) else {
            return;
        };
        let frame = self.owed.remove(&link).unwrap();
        let node = self.nodes[&link];
        let (name, reply) = self.cluster.answer(node, &frame);
        let reply = if how == Answer::Evict && !name.starts_with("LOGIN") {
            let header = RequestHeader::decode(&frame).unwrap();
            let mut out = BytesMut::new();
            EvictionHeader {
                client: header.client,
                ..EvictionHeader::default()
            }
            .encode(&mut out);
            out.freeze()
        } else {
            reply
        };
        self.log.push(format!("answer {link}: {name}"));
        match how {
            Answer::Split(at) => {
                let at = at.min(reply.len());
                self.router.handle_read(self.now, link, &reply[..at]);
                self.drain();
                self.router.handle_read(self.now, link, &reply[at..]);
            }
            Answer::Reply | Answer::Evict => self.router.handle_read(self.now, link, &reply),
        }
        self.drain();
    }

    fn close(&mut self, index: usize) {
        let Some(&link) = self
            .connected
            .iter()
            .nth(index % self.connected.len().max(1))
        else {
            return;
        };
        self.log.push(format!("peer closed {link}"));
        self.forget(link);
        self.router.handle_closed(self.now, link, CloseReason::Peer);
        self.drain();
    }

    /// Connects and answers everything, sleeping in small steps, until every request's
    /// deadline has passed; then every request must have completed.
    /// Signs the coordinator in, learns partition 0's route and opens a data link to node 0
    /// with a first send, answered.
    fn warm_up(&mut self) {
        let warm = self.submit(send(0)).unwrap();
        for _ in 0..50 {
            while !self.connecting.is_empty() {
                self.connect(0, false);
            }
            if self.owed.is_empty() {
                break;
            }
            self.answer(0, Answer::Reply);
        }
        assert!(matches!(self.completed.get(&warm), Some(Ok(_))));
    }

    fn finish(&mut self) {
        let end = self.now + self.request_timeout + Duration::from_secs(1);
        while self.now < end {
            while !self.connecting.is_empty() {
                self.connect(0, false);
            }
            while !self.owed.is_empty() {
                self.answer(0, Answer::Reply);
            }
            self.sleep(Duration::from_millis(50));
        }
        let missing: Vec<_> = self
            .submitted
            .keys()
            .filter(|id| !self.completed.contains_key(id))
            .collect();
        if !missing.is_empty() {
            self.fail(&format!("never completed: {missing:?}"));
        }
    }
}

fn send(partition: u32) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            payload: Bytes::from_static(b"hello"),
            ..Message::default()
        }],
    })
}

fn get_topic() -> Request {
    Request::Admin(AdminRequest::GetTopic {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
    })
}

fn config(config: &mut Config) {
    config.request_timeout = Duration::from_secs(2);
    config.attempt_timeout = Duration::from_millis(700);
    config.heartbeat_interval = Duration::from_millis(400);
    config.data_link_idle_timeout = Duration::from_millis(900);
    config.connect_timeout = Duration::from_millis(500);
    config.max_replays = 3;
}

/// One random walk: requests, 57s, evictions, lost links and failed connects, late and
/// split replies, moved primaries, and time.
fn walk(seed: u64, steps: usize) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sim = Sim::new(FakeCluster::new(3, vec![0, 1, 2]), seed, config);
    for _ in 0..steps {
        let arg = rng.below(1 << 16) as usize;
        match rng.below(12) {
            0 | 1 => {
                sim.submit(send(rng.below(3) as u32));
            }
            2 => {
                sim.submit(get_topic());
            }
            3 | 4 => sim.connect(arg, rng.below(6) == 0),
            5..=7 => {
                let how = match rng.below(10) {
                    0 => Answer::Evict,
                    1 => Answer::Split(arg % 300),
                    _ => Answer::Reply,
                };
                sim.answer(arg, how);
            }
            8 => sim.close(arg),
            9 => sim.sleep(Duration::from_millis(rng.below(1_500))),
            10 => sim.cluster.not_committed += rng.below(3) as usize,
            _ => {
                let partition = rng.below(3) as usize;
                sim.cluster.primaries[partition] = rng.below(3) as usize;
            }
        }
    }
    if rng.below(4) == 0 {
        sim.router.shutdown(sim.now);
        sim.drain();
        let missing = sim.submitted.len() - sim.completed.len();
        assert_eq!(missing, 0, "shutdown left {missing} requests uncompleted");
        assert_eq!(
            sim.router.poll_timeout(),
            None,
            "a closed router has nothing to wait for"
        );
        assert!(sim.router.submit(sim.now, send(0)).is_err());
        return;
    }
    sim.cluster.not_committed = 0;
    sim.finish();
}

#[test]
fn random_walks_keep_the_drive_contract() {
    for seed in 1..=150 {
        walk(seed, 250);
    }
}

/// A send answered 57 (outcome unknown: it may commit) and then, while its replay waits,
/// an eviction. The eviction says the session is gone, not that the send was not
/// processed: the 57 already said it might have been. Under at-most-once the send must not
/// be written anywhere again, and the caller must not be told it succeeded once.
#[test]
fn an_eviction_after_a_57_does_not_make_a_send_unsent() {
    let mut sim = Sim::new(FakeCluster::new(1, vec![0]), 7, |config| {
        config.request_timeout = Duration::from_secs(5);
        config.replay_interval = Duration::from_millis(200);
    });
    sim.warm_up();
    let before = sim.sends_written;
    sim.cluster.not_committed = 1;
    let id = sim.submit(send(0)).unwrap();
    assert_eq!(sim.sends_written, before + 1);
    let data_link = *sim.owed.keys().next().unwrap();
    // The 57: the replay now waits on the link, nothing is owed on the wire.
    sim.answer(0, Answer::Reply);
    assert!(sim.owed.is_empty());
    // While it waits, the node evicts the session. The eviction is unsolicited (nothing is
    // on the wire); build it by hand.
    let mut eviction = BytesMut::new();
    EvictionHeader::default().encode(&mut eviction);
    sim.router.handle_read(sim.now, data_link, &eviction);
    sim.drain();
    for _ in 0..50 {
        while !sim.connecting.is_empty() {
            sim.connect(0, false);
        }
        if sim.owed.is_empty() {
            sim.sleep(Duration::from_millis(100));
            if sim.owed.is_empty() && sim.connecting.is_empty() {
                break;
            }
            continue;
        }
        sim.answer(0, Answer::Reply);
    }
    sim.sleep(Duration::from_secs(6));
    assert_eq!(
        sim.sends_written,
        before + 1,
        "a send that may have committed was written again (at-most-once)"
    );
    assert!(
        matches!(
            sim.completed.get(&id),
            Some(Err(RequestError::OutcomeUnknown { .. }))
        ),
        "{:?}",
        sim.completed.get(&id)
    );
}

/// An adapter that reports a connect failure late, for a link that did connect (a race of
/// its own, or a bug). Whatever was in flight there must still end, and must not hold the
/// partition for ever.
#[test]
fn a_late_connect_failure_for_a_busy_link_strands_nothing() {
    let mut sim = Sim::new(FakeCluster::new(1, vec![0]), 7, |config| {
        config.request_timeout = Duration::from_secs(2);
    });
    sim.warm_up();
    let busy = sim.submit(send(0)).unwrap();
    let link = *sim.owed.keys().next().unwrap();
    sim.forget(link);
    sim.router
        .handle_connect_failed(sim.now, link, ConnectError::Unreachable);
    sim.drain();
    sim.finish();
    assert!(sim.completed.contains_key(&busy));
    let next = sim.submit(send(0)).unwrap();
    sim.finish();
    assert!(
        matches!(sim.completed.get(&next), Some(Ok(_))),
        "the partition is free again: {:?}",
        sim.completed.get(&next)
    );
}

/// A send answered 57 (it may commit in the view it was prepared in) whose replay the same
/// node then refuses, the partition's primary having moved. The refusal speaks of the copy
/// written again, not of the first: under at-most-once the send is not written to the new
/// primary, and it ends in doubt, never "not stored".
#[test]
fn a_refusal_of_a_replay_after_a_57_leaves_the_send_in_doubt() {
    let mut sim = Sim::new(FakeCluster::new(2, vec![0]), 7, |config| {
        config.request_timeout = Duration::from_secs(5);
        config.replay_interval = Duration::from_millis(200);
    });
    sim.warm_up();
    let before = sim.sends_written;
    sim.cluster.not_committed = 1;
    let id = sim.submit(send(0)).unwrap();
    sim.answer(0, Answer::Reply);
    assert!(sim.owed.is_empty(), "the replay waits");
    sim.cluster.primaries = vec![1];
    sim.finish();
    assert_eq!(
        sim.sends_written,
        before + 2,
        "written once and replayed once, never to the new primary"
    );
    match sim.completed.get(&id) {
        Some(Err(error @ RequestError::OutcomeUnknown { .. })) => assert!(error.in_doubt()),
        other => panic!("{other:?}"),
    }
}
