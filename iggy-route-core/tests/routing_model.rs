//! A model check of the routing layer: random sequences of requests, answers, refusals,
//! route and roster replies, watermark moves and the passage of time, with the router's
//! promises checked after every step.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; the core never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{
    Attempt, Decision, RouteAnswer, Routing, RoutingCommands, Served, Target, TopicAnswer,
};
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message};
use iggy_route_core::{
    Config, Credentials, NodeId, PartitionKey, Reply, Request, RequestError, RequestId,
    SendReceipt, SendRequest, StoreOffsetRequest, TopicKey,
};
use proptest::prelude::*;

const NODES: u32 = 3;
const PARTITIONS: u32 = 3;
const LANE_LIMIT: usize = 4;
const PENDING_LIMIT: usize = 12;

#[derive(Debug, Clone)]
enum Op {
    Submit { partition: u32, store: bool },
    AnswerTopic { found: bool, unavailable: bool },
    AnswerRoute { pick: usize, node: u32, kind: u8 },
    AnswerRoster { leader: u32 },
    Result { pick: usize, kind: u8 },
    Advance { ms: u64 },
    Watermark,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PARTITIONS + 1, any::<bool>()).prop_map(|(partition, store)| Op::Submit { partition, store }),
        2 => (any::<bool>(), any::<bool>()).prop_map(|(found, unavailable)| Op::AnswerTopic { found: found || unavailable, unavailable }),
        3 => (any::<usize>(), 0..NODES, 0u8..10).prop_map(|(pick, node, kind)| Op::AnswerRoute { pick, node, kind }),
        1 => (0..NODES).prop_map(|leader| Op::AnswerRoster { leader }),
        5 => (any::<usize>(), 0u8..10).prop_map(|(pick, kind)| Op::Result { pick, kind }),
        2 => (0u64..3_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Watermark),
    ]
}

fn topic() -> TopicKey {
    TopicKey {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
    }
}

fn request(partition: u32, store: bool) -> Request {
    if store {
        return Request::StoreOffset(StoreOffsetRequest {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(1),
            },
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partition_id: partition,
            offset: 1,
        });
    }
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            id: 1,
            payload: Bytes::from_static(b"x"),
            ..Message::default()
        }],
    })
}

/// What the model knows of the system under test.
#[derive(Default)]
struct Model {
    submitted: BTreeMap<RequestId, u32>,
    completed: BTreeSet<RequestId>,
    /// Writes released and not yet answered: request -> (partition, node).
    in_flight: BTreeMap<RequestId, (u32, NodeId)>,
    lookups: BTreeSet<u32>,
    topic_fetch: bool,
    roster_fetch: bool,
    /// Route answers per partition so far (the "newer route" clock).
    route_news: BTreeMap<u32, u64>,
    /// Refusals: request -> (node, route news then, time then).
    refused: BTreeMap<RequestId, (NodeId, u64, Instant)>,
    /// The sends merged behind each request in flight.
    riders: BTreeMap<RequestId, Vec<RequestId>>,
}

struct Run {
    routing: Routing,
    model: Model,
    now: Instant,
}

impl Run {
    fn new(seed: u64) -> Self {
        let now = Instant::now();
        let mut config = Config::new(vec!["n".into()], Credentials::user("u", "p").unwrap());
        config.max_pending_per_lane = LANE_LIMIT;
        config.max_pending_requests = PENDING_LIMIT;
        config.request_timeout = Duration::from_secs(10);
        Self {
            routing: Routing::new(config, seed, now),
            model: Model::default(),
            now,
        }
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now;
        match op {
            Op::Submit { partition, store } => {
                if let Ok(id) = self.routing.admit(now, request(*partition, *store)) {
                    self.model.submitted.insert(id, *partition);
                }
            }
            Op::AnswerTopic { found, unavailable } => {
                if std::mem::take(&mut self.model.topic_fetch) {
                    let answer = match (found, unavailable) {
                        (_, true) => TopicAnswer::Unavailable,
                        (true, false) => TopicAnswer::Found {
                            partitions_count: PARTITIONS,
                        },
                        (false, false) => TopicAnswer::NotFound,
                    };
                    self.routing.handle_topic(now, &topic(), answer);
                }
            }
            Op::AnswerRoute { pick, node, kind } => {
                let Some(&partition) = nth(&self.model.lookups, *pick) else {
                    return;
                };
                self.model.lookups.remove(&partition);
                let answer = match kind {
                    0 => RouteAnswer::Unavailable,
                    1 => RouteAnswer::Unsupported,
                    2 => RouteAnswer::Failed(RequestError::Server {
                        code: iggy_route_core::wire::ErrorCode::PartitionNotFound,
                    }),
                    _ => {
                        *self.model.route_news.entry(partition).or_default() += 1;
                        RouteAnswer::Primary {
                            node: NodeId(*node),
                            watermark: 0,
                        }
                    }
                };
                let key = PartitionKey {
                    topic: topic(),
                    partition,
                };
                self.routing.handle_route(now, &key, answer);
            }
            Op::AnswerRoster { leader } => {
                if std::mem::take(&mut self.model.roster_fetch) {
                    let nodes = (0..NODES).map(NodeId).collect();
                    self.routing
                        .handle_roster(now, nodes, Some(NodeId(*leader)));
                }
            }
            Op::Result { pick, kind } => {
                let Some((&id, &(partition, node))) = self
                    .model
                    .in_flight
                    .iter()
                    .nth(pick % self.model.in_flight.len().max(1))
                else {
                    return;
                };
                self.model.in_flight.remove(&id);
                let riders = self.model.riders.remove(&id).unwrap_or_default();
                let frame: Vec<RequestId> = std::iter::once(id).chain(riders).collect();
                let news = self.model.route_news.get(&partition).copied().unwrap_or(0);
                let attempt = match kind {
                    0..=2 => {
                        for &member in &frame {
                            self.model.refused.insert(member, (node, news, now));
                        }
                        Attempt::Refused
                    }
                    3 => Attempt::NotSent,
                    4 => Attempt::Unknown,
                    5 => Attempt::Failed(RequestError::Server {
                        code: iggy_route_core::wire::ErrorCode::Unauthorized,
                    }),
                    _ => Attempt::Done(Served::from(Reply::Sent(SendReceipt {
                        partition_id: partition,
                        base_offset: Some(0),
                        messages: 1,
                        node,
                        replica: None,
                    }))),
                };
                if matches!(attempt, Attempt::NotSent) {
                    // Not sent counts as a refusal for the no-replay rule too.
                    for &member in &frame {
                        self.model.refused.insert(member, (node, news, now));
                    }
                }
                self.routing
                    .handle_result(now, id, Target::Node(node), attempt);
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(*ms);
                self.routing.handle_timeout(self.now);
            }
            Op::Watermark => {
                let next = self.routing.watermark() + 1;
                self.routing.handle_watermark(now, next);
            }
        }
        self.drain_and_check();
    }

    fn drain_and_check(&mut self) {
        let discovery = self.routing.routing_commands() == RoutingCommands::Unsupported;
        while let Some(decision) = self.routing.poll_decision() {
            match decision {
                Decision::Write {
                    request,
                    coalesced,
                    target,
                    partition: written,
                } => {
                    let Target::Node(node) = target else {
                        panic!("sends and offsets never go to the coordinator");
                    };
                    let partition = self.model.submitted[&request];
                    assert_eq!(written, Some(partition), "a write names its partition");
                    assert!(
                        !self.model.in_flight.values().any(|(p, _)| *p == partition),
                        "two writes in flight for partition {partition}: order could break"
                    );
                    // Every send merged into the frame obeys what the head obeys.
                    for id in std::iter::once(request).chain(coalesced.iter().copied()) {
                        assert_eq!(
                            self.model.submitted[&id], partition,
                            "{id} merged into a frame of another partition"
                        );
                        assert!(
                            !self.model.completed.contains(&id),
                            "{id} written after completing"
                        );
                        if let Some(&(refuser, news, at)) = self.model.refused.get(&id) {
                            let newer_route =
                                self.model.route_news.get(&partition).copied().unwrap_or(0) > news;
                            let new_round = discovery && self.now > at;
                            assert!(
                                refuser != node || newer_route || new_round,
                                "{id} written again to {node}, which refused it, with no newer route"
                            );
                        }
                    }
                    self.model.in_flight.insert(request, (partition, node));
                    self.model.riders.insert(request, coalesced);
                }
                Decision::FetchRoute { partition } => {
                    assert!(
                        self.model.lookups.insert(partition.partition),
                        "two lookups in flight for one partition"
                    );
                }
                Decision::FetchTopic { .. } => {
                    assert!(!self.model.topic_fetch, "two topic reads in flight");
                    self.model.topic_fetch = true;
                }
                Decision::FetchRoster => {
                    assert!(!self.model.roster_fetch, "two roster reads in flight");
                    self.model.roster_fetch = true;
                }
                Decision::Completed { request, .. } => {
                    assert!(
                        self.model.submitted.contains_key(&request),
                        "unknown {request} completed"
                    );
                    assert!(
                        self.model.completed.insert(request),
                        "{request} completed twice"
                    );
                }
                Decision::Event(_) => {}
            }
        }
        assert!(self.routing.pending_count() <= PENDING_LIMIT);
        for len in self.routing.lane_lengths() {
            assert!(
                len <= LANE_LIMIT,
                "a lane holds {len} requests, over its bound"
            );
        }
        if let Some(deadline) = self.routing.poll_timeout() {
            assert!(
                deadline > self.now,
                "deadline {deadline:?} not after now: a driver would spin"
            );
        }
    }

    /// Answers everything and lets every deadline pass: every request must be completed.
    fn finish(&mut self) {
        for id in self.model.in_flight.keys().copied().collect::<Vec<_>>() {
            let (_, node) = self.model.in_flight.remove(&id).unwrap();
            self.routing
                .handle_result(self.now, id, Target::Node(node), Attempt::Unknown);
            self.drain_and_check();
        }
        self.now += Duration::from_secs(60);
        self.routing.handle_timeout(self.now);
        self.drain_and_check();
        let missing: Vec<_> = self
            .model
            .submitted
            .keys()
            .filter(|id| !self.model.completed.contains(id))
            .collect();
        assert!(missing.is_empty(), "never completed: {missing:?}");
    }
}

fn nth(set: &BTreeSet<u32>, pick: usize) -> Option<&u32> {
    if set.is_empty() {
        return None;
    }
    set.iter().nth(pick % set.len())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn routing_keeps_its_promises_under_any_sequence(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..120)) {
        let mut run = Run::new(seed);
        for op in &ops {
            run.apply(op);
        }
        run.finish();
    }
}

#[test]
fn same_seed_same_decisions() {
    let ops: Vec<Op> = (0..60)
        .map(|i| match i % 6 {
            0 => Op::Submit {
                partition: i % 3,
                store: false,
            },
            1 => Op::AnswerTopic {
                found: true,
                unavailable: false,
            },
            2 => Op::AnswerRoute {
                pick: i as usize,
                node: i % 3,
                kind: 9,
            },
            3 => Op::Result { pick: 0, kind: 1 },
            4 => Op::AnswerRoute {
                pick: 0,
                node: 0,
                kind: 9,
            },
            _ => Op::Advance { ms: 7 },
        })
        .collect();
    let trace = |seed: u64| {
        let mut run = Run::new(seed);
        let mut timeouts = Vec::new();
        for op in &ops {
            run.apply(op);
            timeouts.push(run.routing.poll_timeout().map(|t| t - run.now));
        }
        (timeouts, run.routing.stats())
    };
    assert_eq!(trace(5), trace(5));
}
