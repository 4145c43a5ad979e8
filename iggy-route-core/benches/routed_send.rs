//! Cost of one routed send through the `Router` state machine in steady state: `submit`,
//! drain to the `Transmit`, `handle_read` of the node's reply, drain to the `Completed`.
//!
//! A tiny in-bench cluster of three nodes answers every frame at once (logins, roster,
//! topic, route lookups, sends), so after a warm-up the routes are known, the data links
//! are up, and each send is exactly one frame out and one frame in. Only the router's calls
//! are timed and only their allocations counted (a counting global allocator that is
//! switched on around them); building the request and the fake node's work are excluded.
//!
//! `cargo bench -p iggy-route-core` prints one line per batch size.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A benchmark measures wall time: it reads the clock, the code it measures does not.
#![allow(clippy::disallowed_methods)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ClusterMetadata, ClusterNode, ConsumerSession, Frame, Identifier, LoginRegisterReply, Message,
    Name, NodeRole, NodeStatus, Operation, PROTOCOL_VERSION, PartitionInfo, PollMessagesRequest,
    PollRouting, ReplyHeader, SendConfirmation, SendMessagesReply, SendMessagesRequest,
    TopicDetails, TopicSummary, code, decode_one, put_result_ok,
};
use iggy_route_core::{Config, Credentials, LinkId, Output, Request, Router, SendRequest};

/// Counts allocations (and reallocations) while `COUNTING` is on.
struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter has no
// effect on the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc`/`realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `dealloc`; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const NODES: usize = 3;
const PARTITIONS: u32 = 6;
const BASE_PORT: u16 = 9000;

/// Three nodes that admit a send only on the partition's primary (`p % 3`), like the
/// demo's `split` scenario, and answer everything else the router asks.
#[derive(Debug, Default)]
struct FakeCluster {
    next_session: u64,
    offsets: BTreeMap<u32, u64>,
}

impl FakeCluster {
    fn answer(&mut self, node: usize, frame: &[u8]) -> Bytes {
        let Ok(Frame::Request { header, body }) = decode_one(frame) else {
            panic!("the router sent something that is not one request frame");
        };
        let mut out = BytesMut::new();
        let (status, commit) = match header.operation {
            Operation::Register => {
                self.next_session += 1;
                put_result_ok(&mut out);
                LoginRegisterReply {
                    user_id: 1,
                    session: self.next_session,
                    server_protocol_version: PROTOCOL_VERSION,
                    server_version: Name::new("0.11.0").unwrap(),
                }
                .encode(&mut out);
                (0, self.next_session)
            }
            Operation::SendMessages => {
                let request = SendMessagesRequest::decode(&body).unwrap();
                let Partitioning::PartitionId(partition) = request.partitioning else {
                    panic!("the router must resolve partitions itself");
                };
                if partition as usize % NODES != node {
                    (58, 0)
                } else {
                    let offset = self.offsets.entry(partition).or_insert(0);
                    let base_offset = *offset;
                    *offset += request.messages.len() as u64;
                    SendMessagesReply {
                        confirmations: vec![SendConfirmation {
                            stream_id: 1,
                            topic_id: 1,
                            partition_id: partition,
                            base_offset,
                        }],
                    }
                    .encode(&mut out);
                    (0, 0)
                }
            }
            Operation::NonReplicated => (self.read(header.code, &header, &body, &mut out), 0),
            other => panic!("unexpected operation {other:?}"),
        };
        let mut reply = BytesMut::new();
        ReplyHeader::for_request(&header, status, commit, out.len()).encode(&mut reply);
        reply.extend_from_slice(&out);
        reply.freeze()
    }

    fn read(
        &self,
        command: u32,
        header: &iggy_route_core::wire::RequestHeader,
        body: &[u8],
        out: &mut BytesMut,
    ) -> u32 {
        match command {
            code::PING => 0,
            code::GET_CLUSTER_METADATA => {
                ClusterMetadata {
                    name: "bench".to_owned(),
                    nodes: (0..NODES).map(|n| node(n, n == 0)).collect(),
                }
                .encode(out);
                0
            }
            code::GET_TOPIC => {
                topic().encode(out);
                0
            }
            code::GET_POLL_ROUTING => {
                let request = PollMessagesRequest::decode(body).unwrap();
                let primary = request.partition_id.unwrap_or(0) as usize % NODES;
                PollRouting {
                    consumer_session: ConsumerSession {
                        client_id: header.client,
                        session: header.session,
                        metadata_watermark: 0,
                    },
                    primary: node(primary, true),
                }
                .encode(out);
                0
            }
            // InvalidCommand: nothing else is needed for sends.
            _ => 3,
        }
    }
}

fn node(index: usize, leader: bool) -> ClusterNode {
    ClusterNode {
        name: format!("node{index}"),
        ip: "127.0.0.1".to_owned(),
        tcp_port: BASE_PORT + index as u16,
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role: if leader {
            NodeRole::Leader
        } else {
            NodeRole::Follower
        },
        status: NodeStatus::Healthy,
    }
}

fn topic() -> TopicDetails {
    TopicDetails {
        summary: TopicSummary {
            id: 1,
            created_at: 0,
            partitions_count: PARTITIONS,
            message_expiry: 0,
            compression: 1,
            max_topic_size: 0,
            size_bytes: 0,
            messages_count: 0,
            name: Name::new("load").unwrap(),
        },
        partitions: (0..PARTITIONS)
            .map(|id| PartitionInfo {
                id,
                ..PartitionInfo::default()
            })
            .collect(),
    }
}

/// A router wired to the fake cluster, with its own fake clock.
struct Bench {
    router: Router,
    cluster: FakeCluster,
    links: BTreeMap<LinkId, usize>,
    now: Instant,
    completed: u64,
}

impl Bench {
    fn new() -> Self {
        let now = Instant::now();
        let seeds = (0..NODES)
            .map(|n| format!("127.0.0.1:{}", BASE_PORT + n as u16))
            .collect();
        let config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        Self {
            router: Router::new(config, 7, now),
            cluster: FakeCluster::default(),
            links: BTreeMap::new(),
            now,
            completed: 0,
        }
    }

    /// Drains every output, connecting and answering at once, until the router is quiet.
    /// Untimed: used for the warm-up.
    fn settle(&mut self) {
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, addr, .. } => {
                    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
                    self.links.insert(link, usize::from(port - BASE_PORT));
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    let reply = self.cluster.answer(self.links[&link], &bytes);
                    self.router.handle_read(self.now, link, &reply);
                }
                Output::Completed { outcome, .. } => {
                    outcome.unwrap();
                    self.completed += 1;
                }
                Output::Close { .. } | Output::Event(_) => {}
            }
        }
    }

    /// A send before the steady state: routes and links are still being set up, so it
    /// may take lookups, logins and connects, all answered untimed.
    fn warm_up_send(&mut self, request: Request) {
        let before = self.completed;
        self.now += Duration::from_micros(1);
        self.router.submit(self.now, request).unwrap();
        self.settle();
        assert_eq!(
            self.completed,
            before + 1,
            "a warm-up send did not complete"
        );
    }

    /// One steady-state send: returns the time spent in the router's calls.
    fn routed_send(&mut self, request: Request) -> Duration {
        self.now += Duration::from_micros(1);
        COUNTING.store(true, Ordering::Relaxed);
        let started = Instant::now();
        self.router.submit(self.now, request).unwrap();
        let transmit = loop {
            match self.router.poll_output() {
                Some(Output::Transmit { link, bytes }) => break (link, bytes),
                Some(Output::Event(_)) => {}
                other => panic!("expected one Transmit in steady state, got {other:?}"),
            }
        };
        let outbound = started.elapsed();
        COUNTING.store(false, Ordering::Relaxed);

        let (link, bytes) = transmit;
        let reply = self.cluster.answer(self.links[&link], &bytes);
        drop(bytes);
        self.now += Duration::from_micros(1);

        COUNTING.store(true, Ordering::Relaxed);
        let started = Instant::now();
        self.router.handle_read(self.now, link, &reply);
        let completed = loop {
            match self.router.poll_output() {
                Some(Output::Completed { outcome, .. }) => break outcome,
                Some(Output::Event(_)) => {}
                other => panic!("expected the Completed in steady state, got {other:?}"),
            }
        };
        let inbound = started.elapsed();
        // Dropping the reply is part of the router's cost to its caller.
        black_box(completed.unwrap());
        COUNTING.store(false, Ordering::Relaxed);
        self.completed += 1;
        // Heartbeats and other timers would fire here in a real driver; answer them
        // untimed so they cannot leak into the next send.
        self.router.handle_timeout(self.now);
        self.settle();
        outbound + inbound
    }
}

impl Bench {
    /// One round of coalescing on one partition: a send goes out, `riders` sends queue
    /// behind it, its reply releases them as one merged frame, whose reply completes them
    /// all. Returns the time spent in the router's calls for the riders (the lone send's
    /// round is timed by `routed_send`), with allocations counted over the same calls.
    fn coalesced_round(&mut self, riders: usize, payload: &Bytes) -> Duration {
        let single = |payload: &Bytes| {
            Request::Send(SendRequest {
                stream: Identifier::Numeric(1),
                topic: Identifier::Numeric(1),
                partitioning: Partitioning::PartitionId(0),
                messages: vec![Message {
                    payload: payload.clone(),
                    ..Message::default()
                }],
            })
        };
        self.now += Duration::from_micros(1);
        self.router.submit(self.now, single(payload)).unwrap();
        let (link, bytes) = self.next_transmit();
        let first_reply = self.cluster.answer(self.links[&link], &bytes);
        let requests: Vec<Request> = (0..riders).map(|_| single(payload)).collect();

        COUNTING.store(true, Ordering::Relaxed);
        let started = Instant::now();
        for request in requests {
            self.router.submit(self.now, request).unwrap();
        }
        let queued = started.elapsed();
        COUNTING.store(false, Ordering::Relaxed);

        // The lone send's reply releases the riders as one frame.
        self.router.handle_read(self.now, link, &first_reply);
        let mut done = 0;
        let merged = loop {
            match self.router.poll_output() {
                Some(Output::Transmit { link, bytes }) => break (link, bytes),
                Some(Output::Completed { outcome, .. }) => {
                    outcome.unwrap();
                    done += 1;
                }
                Some(Output::Event(_)) => {}
                other => panic!("expected the merged Transmit, got {other:?}"),
            }
        };
        assert_eq!(done, 1, "the lone send completes first");
        let (link, bytes) = merged;
        let reply = self.cluster.answer(self.links[&link], &bytes);
        drop(bytes);
        self.now += Duration::from_micros(1);

        COUNTING.store(true, Ordering::Relaxed);
        let started = Instant::now();
        self.router.handle_read(self.now, link, &reply);
        let mut completed = 0;
        while let Some(output) = self.router.poll_output() {
            if let Output::Completed { outcome, .. } = output {
                black_box(outcome.unwrap());
                completed += 1;
            }
        }
        let answered = started.elapsed();
        COUNTING.store(false, Ordering::Relaxed);
        assert_eq!(completed, riders, "every rider completes from one reply");
        self.completed += 1 + riders as u64;
        self.router.handle_timeout(self.now);
        self.settle();
        queued + answered
    }

    fn next_transmit(&mut self) -> (LinkId, Bytes) {
        loop {
            match self.router.poll_output() {
                Some(Output::Transmit { link, bytes }) => return (link, bytes),
                Some(Output::Event(_)) => {}
                other => panic!("expected one Transmit in steady state, got {other:?}"),
            }
        }
    }
}

/// The cost per message of a coalesced send: 1-message sends queued behind a write in
/// flight, merged `riders` to a frame (the router's share only: submit, the merged frame's
/// encoding, the reply's decoding and one receipt per caller).
fn measure_coalesced(riders: usize, rounds: u64) {
    let payload = Bytes::from(vec![b'x'; 100]);
    let mut bench = Bench::new();
    bench.settle();
    for batch in 0..1_000 {
        bench.warm_up_send(send_request(batch, 1, &payload));
    }
    let coalesced_before = bench.router.stats().coalesced;
    ALLOCATIONS.store(0, Ordering::Relaxed);
    let mut in_router = Duration::ZERO;
    for _ in 0..rounds {
        in_router += bench.coalesced_round(riders, &payload);
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    let stats = bench.router.stats();
    assert_eq!(stats.refusals, 0, "steady state must not see refusals");
    let sends = rounds * riders as u64;
    assert_eq!(
        stats.coalesced - coalesced_before,
        rounds * (riders as u64 - 1),
        "each round is one merged frame"
    );
    println!(
        "coalesced send,   1 x 100 B, {riders} per frame: {:>6.0} ns/message, {:>5.2} allocations/message ({sends} sends in {rounds} frames)",
        in_router.as_nanos() as f64 / sends as f64,
        allocations as f64 / sends as f64,
    );
}

fn send_request(batch: u64, messages: usize, payload: &Bytes) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::messages_key_u64(batch),
        messages: (0..messages)
            .map(|_| Message {
                payload: payload.clone(),
                ..Message::default()
            })
            .collect(),
    })
}

fn measure(messages: usize, sends: u64) {
    let payload = Bytes::from(vec![b'x'; 100]);
    let mut bench = Bench::new();
    bench.settle();
    // Warm-up: learn every partition's route and open the data links.
    for batch in 0..1_000 {
        bench.warm_up_send(send_request(batch, messages, &payload));
    }
    ALLOCATIONS.store(0, Ordering::Relaxed);
    let mut in_router = Duration::ZERO;
    for batch in 0..sends {
        let request = send_request(1_000 + batch, messages, &payload);
        in_router += bench.routed_send(request);
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    let stats = bench.router.stats();
    assert_eq!(stats.refusals, 0, "steady state must not see refusals");
    println!(
        "routed send, {messages:>3} x 100 B per batch: {:>6.0} ns/send, {:>5.1} allocations/send ({sends} sends; {} lookups, {} session moves)",
        in_router.as_nanos() as f64 / sends as f64,
        allocations as f64 / sends as f64,
        stats.lookups,
        stats.session_moves,
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let sends = if quick { 2_000 } else { 200_000 };
    for messages in [1, 100] {
        measure(messages, sends);
    }
    let rounds = sends / 100;
    for riders in [10, 100] {
        measure_coalesced(riders, rounds);
    }
}
