//! Helpers shared by the routing scenario tests: a config, topic 1/1, sends, and a drain that
//! turns decisions into short strings for transcript comparisons.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::wildcard_enum_match_arm,
    unreachable_pub
)]
// A test needs one real instant as the origin of its timeline (`origin`); every other
// instant is derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{
    Attempt, Decision, RouteAnswer, Routing, Served, Target, TopicAnswer,
};
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{
    Config, Credentials, Event, NodeId, PartitionKey, PollRequest, Reply, Request, SendReceipt,
    SendRequest, TopicKey,
};

pub fn origin() -> Instant {
    Instant::now()
}

pub fn config() -> Config {
    Config::new(
        vec!["n0".into()],
        Credentials::user("iggy", "iggy").unwrap(),
    )
}

pub fn topic() -> TopicKey {
    TopicKey {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
    }
}

pub fn partition(p: u32) -> PartitionKey {
    PartitionKey {
        topic: topic(),
        partition: p,
    }
}

pub fn send(partitioning: Partitioning) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning,
        messages: vec![Message {
            id: 1,
            payload: Bytes::from_static(b"m"),
            ..Message::default()
        }],
    })
}

pub fn sent(node: u32) -> Attempt {
    Attempt::Done(Served::from(Reply::Sent(SendReceipt {
        partition_id: 0,
        base_offset: Some(0),
        messages: 1,
        node: NodeId(node),
        replica: None,
    })))
}

/// A plain consumer's poll of topic 1/1 (of `partition`, or of none) from offset 0.
pub fn poll(partition: Option<u32>, auto_commit: bool) -> Request {
    Request::Poll(PollRequest {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        },
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partition_id: partition,
        strategy: PollingStrategy::Offset(0),
        count: 10,
        auto_commit,
    })
}

/// Drains decisions as short strings, for transcript comparisons.
pub fn drain(routing: &mut Routing) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(decision) = routing.poll_decision() {
        out.push(match decision {
            Decision::Write {
                request, target, ..
            } => match target {
                Target::Node(node) => format!("write {} -> {}", request, node),
                Target::Coordinator => format!("write {} -> coordinator", request),
            },
            Decision::FetchRoute { partition } => format!("lookup {}", partition.partition),
            Decision::FetchTopic { .. } => "fetch topic".to_owned(),
            Decision::FetchRoster => "fetch roster".to_owned(),
            Decision::Completed { request, outcome } => {
                format!(
                    "completed {} {}",
                    request,
                    if outcome.is_ok() { "ok" } else { "err" }
                )
            }
            Decision::Event(Event::RouteLearned { partition, node }) => {
                format!("learned {} {}", partition.partition, node)
            }
            Decision::Event(Event::Refused { request, node }) => {
                format!("refused {request} {node}")
            }
            Decision::Event(event) => format!("{event:?}"),
        });
    }
    out
}

/// A routing layer that knows topic 1/1 has `partitions` partitions and, where given, the
/// primary of each partition.
pub fn warmed(t0: Instant, partitions: u32, primaries: &[(u32, u32)]) -> Routing {
    warmed_with(config(), t0, partitions, primaries)
}

/// [`warmed`] with `config` instead of the tests' default.
pub fn warmed_with(
    config: Config,
    t0: Instant,
    partitions: u32,
    primaries: &[(u32, u32)],
) -> Routing {
    let mut routing = Routing::new(config, 7, t0);
    for &(p, node) in primaries {
        let id = routing
            .admit(t0, send(Partitioning::PartitionId(p)))
            .unwrap();
        if routing.partition_count(&topic()).is_none() {
            routing.handle_topic(
                t0,
                &topic(),
                TopicAnswer::Found {
                    partitions_count: partitions,
                },
            );
        }
        routing.handle_route(
            t0,
            &partition(p),
            RouteAnswer::Primary {
                node: NodeId(node),
                watermark: 0,
            },
        );
        routing.handle_result(t0, id, Target::Node(NodeId(node)), sent(node));
    }
    drain(&mut routing);
    routing
}
