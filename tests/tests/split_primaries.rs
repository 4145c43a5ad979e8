//! Both adapters against the loopback cluster with partition primaries on different nodes,
//! under both discovery paths: the routing commands (103) served, and answered with
//! `InvalidCommand` so that primaries are found by refusal.
//!
//! The first scenario is the bug report's: alternating sends to partitions 0 and 1, whose
//! primaries differ, keep the session where it is, are never refused once the routes are
//! known, and take milliseconds instead of the SDK's 4 s.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::partitioning::{Partitioning, resolve_partition};
use iggy_route_core::wire::{
    Consumer, ConsumerKind, Identifier, Message, PollMessagesReply, PollingStrategy,
};
use iggy_route_core::{Config, NodeId, SendReceipt, Stats};
use iggy_route_tests::cluster::TestCluster;

/// Generous: the point is "milliseconds, not the SDK's seconds".
const SEND_LATENCY_MAX: Duration = Duration::from_millis(100);
/// A send that meets a moved primary: one refusal, one lookup, one write.
const REROUTED_SEND_LATENCY_MAX: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy)]
enum Adapter {
    Tokio,
    Mio,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Discovery {
    RoutingCommands,
    ByRefusal,
}

/// A cluster on its own tokio runtime. The runtime's workers serve the cluster, so the
/// test thread (and any producer threads) can make blocking calls.
struct Harness {
    cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
}

/// Every scenario ends with the check that nothing was logged at ERROR.
impl Drop for Harness {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            iggy_route_tests::error_events::assert_none();
        }
    }
}

impl Harness {
    fn start(nodes: usize, discovery: Discovery) -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TestCluster::start(nodes));
        cluster.set_routing_commands(discovery == Discovery::RoutingCommands);
        Self { cluster, runtime }
    }

    fn client(&self, adapter: Adapter) -> AnyClient {
        let mut config = Config::from_connection_string(&self.cluster.connection_string()).unwrap();
        // A stuck request fails the test in seconds rather than the default 30.
        config.request_timeout = Duration::from_secs(10);
        match adapter {
            Adapter::Tokio => {
                let client = self
                    .runtime
                    .block_on(iggy_route_tokio::Client::connect(config))
                    .unwrap();
                AnyClient::Tokio(client, self.runtime.handle().clone())
            }
            Adapter::Mio => AnyClient::Mio(iggy_route_mio::Client::connect(config).unwrap()),
        }
    }

    /// Logins per node: a session that moves, or a link that reconnects, shows here.
    fn logins(&self) -> Vec<u64> {
        (0..self.cluster.node_count())
            .map(|node| self.cluster.stats(node).logins)
            .collect()
    }
}

/// One scenario, written once, run on either adapter with blocking calls.
#[derive(Clone)]
enum AnyClient {
    Tokio(iggy_route_tokio::Client, tokio::runtime::Handle),
    Mio(iggy_route_mio::Client),
}

impl AnyClient {
    fn send(
        &self,
        stream: u32,
        topic: u32,
        partitioning: Partitioning,
        message: Message,
    ) -> SendReceipt {
        let messages = vec![message];
        match self {
            AnyClient::Tokio(client, runtime) => runtime
                .block_on(client.send(stream, topic, partitioning, messages))
                .unwrap(),
            AnyClient::Mio(client) => client.send(stream, topic, partitioning, messages).unwrap(),
        }
    }

    fn poll_from(&self, stream: u32, topic: u32, partition: u32, offset: u64) -> PollMessagesReply {
        let consumer = Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        };
        let strategy = PollingStrategy::Offset(offset);
        match self {
            AnyClient::Tokio(client, runtime) => runtime
                .block_on(client.poll(stream, topic, Some(partition), consumer, strategy, 100))
                .unwrap(),
            AnyClient::Mio(client) => client
                .poll(stream, topic, Some(partition), consumer, strategy, 100)
                .unwrap(),
        }
    }

    fn stats(&self) -> Stats {
        match self {
            AnyClient::Tokio(client, _) => client.stats(),
            AnyClient::Mio(client) => client.stats(),
        }
    }

    fn shutdown(&self) {
        match self {
            AnyClient::Tokio(client, runtime) => runtime.block_on(client.shutdown()),
            AnyClient::Mio(client) => client.shutdown(),
        }
    }
}

fn message(id: u128, payload: String) -> Message {
    Message {
        id,
        payload: Bytes::from(payload),
        ..Message::default()
    }
}

fn node(index: usize) -> NodeId {
    NodeId(u32::try_from(index).unwrap())
}

/// Runs a scenario for each adapter and each discovery path.
macro_rules! for_each_adapter_and_discovery {
    ($scenario:ident) => {
        mod $scenario {
            use super::{Adapter, Discovery};

            #[test]
            fn tokio_with_routing_commands() {
                super::$scenario(Adapter::Tokio, Discovery::RoutingCommands);
            }

            #[test]
            fn tokio_discovering_by_refusal() {
                super::$scenario(Adapter::Tokio, Discovery::ByRefusal);
            }

            #[test]
            fn mio_with_routing_commands() {
                super::$scenario(Adapter::Mio, Discovery::RoutingCommands);
            }

            #[test]
            fn mio_discovering_by_refusal() {
                super::$scenario(Adapter::Mio, Discovery::ByRefusal);
            }
        }
    };
}

for_each_adapter_and_discovery!(
    alternating_sends_to_split_primaries_keep_the_session_and_take_milliseconds
);
for_each_adapter_and_discovery!(keyed_messages_over_three_primaries_are_admitted_once_in_order);
for_each_adapter_and_discovery!(moved_primary_costs_one_refusal_and_loses_nothing);

/// The bug report's test: partitions 0 and 1 on different primaries, one warm-up send to
/// each, then alternating sends.
fn alternating_sends_to_split_primaries_keep_the_session_and_take_milliseconds(
    adapter: Adapter,
    discovery: Discovery,
) {
    let harness = Harness::start(3, discovery);
    let cluster = &harness.cluster;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    harness
        .runtime
        .block_on(cluster.split_primaries(stream, topic, 0, 2, 2));
    let primaries = [0, 1].map(|partition| cluster.primary(stream, topic, partition).unwrap());
    assert_eq!(primaries, [0, 2], "the fixture must split the primaries");

    let client = harness.client(adapter);
    for partition in 0..2 {
        let payload = format!("warm-up {partition}");
        client.send(
            stream,
            topic,
            Partitioning::PartitionId(partition),
            message(0, payload),
        );
    }
    let logins = harness.logins();
    let refusals = cluster.total_refusals();
    let stats = client.stats();

    let mut latencies = Vec::new();
    for index in 0..20_u32 {
        let partition = index % 2;
        let started = Instant::now();
        let payload = format!("alternating {index}");
        let receipt = client.send(
            stream,
            topic,
            Partitioning::PartitionId(partition),
            message(0, payload),
        );
        latencies.push((partition, started.elapsed()));
        assert_eq!(receipt.partition_id, partition);
        assert_eq!(
            receipt.node,
            node(primaries[partition as usize]),
            "admitted by the primary"
        );
    }
    eprintln!(
        "{adapter:?}/{discovery:?}: per-send latency after warm-up (partition, time): {latencies:?}"
    );

    assert_eq!(
        harness.logins(),
        logins,
        "no send moved the session or opened a new link"
    );
    assert_eq!(client.stats().session_moves, 0);
    assert_eq!(
        cluster.total_refusals(),
        refusals,
        "no send after warm-up was refused"
    );
    assert_eq!(client.stats().refusals, stats.refusals);
    assert_eq!(client.stats().sends, stats.sends + 20);
    let slow: Vec<_> = latencies
        .iter()
        .filter(|(_, latency)| *latency >= SEND_LATENCY_MAX)
        .collect();
    assert!(
        slow.is_empty(),
        "sends slower than {SEND_LATENCY_MAX:?}: {slow:?}"
    );
    client.shutdown();
}

/// 1,000 keyed messages from 4 producer threads sharing one client, over 6 partitions whose
/// primaries are spread over 3 nodes.
fn keyed_messages_over_three_primaries_are_admitted_once_in_order(
    adapter: Adapter,
    discovery: Discovery,
) {
    const PARTITIONS: u32 = 6;
    const PRODUCERS: u128 = 4;
    const PER_PRODUCER: u128 = 250;
    let harness = Harness::start(3, discovery);
    let cluster = &harness.cluster;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", PARTITIONS);
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(stream, topic, partition, partition as usize % 3));
    }
    let client = harness.client(adapter);

    // Message id = producer * 1_000_000 + sequence + 1: unique, and it tells who sent it.
    let key_of = |id: u128| format!("customer-{}", id % 37);
    std::thread::scope(|scope| {
        for producer in 0..PRODUCERS {
            let client = client.clone();
            scope.spawn(move || {
                for sequence in 0..PER_PRODUCER {
                    let id = producer * 1_000_000 + sequence + 1;
                    let key = Partitioning::messages_key(key_of(id).into_bytes()).unwrap();
                    client.send(stream, topic, key, message(id, format!("payload {id}")));
                }
            });
        }
    });
    assert_eq!(client.stats().sends, (PRODUCERS * PER_PRODUCER) as u64);

    let mut seen = BTreeMap::new();
    for partition in 0..PARTITIONS {
        let log = cluster.partition_log(stream, topic, partition);
        // Each producer's messages appear in the order it sent them.
        let mut last_by_producer = BTreeMap::new();
        for stored in &log {
            let expected = resolve_partition(key_of(stored.id).as_bytes(), PARTITIONS).unwrap();
            assert_eq!(
                expected, partition,
                "message {} hashed to {expected}",
                stored.id
            );
            assert_eq!(stored.payload, format!("payload {}", stored.id).as_bytes());
            assert_ne!(
                stored.origin_timestamp, 0,
                "message {} was sent without a timestamp: the adapter stamps it",
                stored.id
            );
            let last = last_by_producer.insert(stored.id / 1_000_000, stored.id);
            assert!(
                last < Some(stored.id),
                "out of order in partition {partition}"
            );
            assert!(
                seen.insert(stored.id, partition).is_none(),
                "{} stored twice",
                stored.id
            );
        }
        // Read back by polling, through the client, and compare with the stored log.
        let mut polled = Vec::new();
        while polled.len() < log.len() {
            let reply = client.poll_from(stream, topic, partition, polled.len() as u64);
            assert!(
                !reply.messages.is_empty(),
                "poll of partition {partition} stalled"
            );
            polled.extend(reply.messages);
        }
        let polled: Vec<_> = polled
            .iter()
            .map(|m| (m.offset, m.id, m.payload.clone()))
            .collect();
        let stored: Vec<_> = log
            .iter()
            .map(|m| (m.offset, m.id, m.payload.clone()))
            .collect();
        assert_eq!(polled, stored, "partition {partition} reads back as stored");
    }
    assert_eq!(
        seen.len() as u128,
        PRODUCERS * PER_PRODUCER,
        "every message admitted once"
    );
    let used: std::collections::BTreeSet<_> = seen.values().collect();
    assert_eq!(
        used.len(),
        PARTITIONS as usize,
        "the keys spread over every partition"
    );
    client.shutdown();
}

/// Partition 0's primary moves from node 2 to node 0 while a producer is sending to it
/// (and another producer to partition 1).
fn moved_primary_costs_one_refusal_and_loses_nothing(adapter: Adapter, discovery: Discovery) {
    const SENDS: u128 = 400;
    let harness = Harness::start(3, discovery);
    let cluster = &harness.cluster;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 2);
    harness
        .runtime
        .block_on(cluster.split_primaries(stream, topic, 2, 1, 0));
    let client = harness.client(adapter);
    for partition in 0..2 {
        let payload = format!("warm-up {partition}");
        client.send(
            stream,
            topic,
            Partitioning::PartitionId(partition),
            message(0, payload),
        );
    }
    let refusals = cluster.total_refusals();
    let client_refusals = client.stats().refusals;

    let (moved_at, results) = std::thread::scope(|scope| {
        let producers: Vec<_> = (0..2_u32)
            .map(|partition| {
                let client = client.clone();
                scope.spawn(move || {
                    (0..SENDS)
                        .map(|sequence| {
                            let id = u128::from(partition) * 1_000_000 + sequence + 1;
                            let started = Instant::now();
                            let receipt = client.send(
                                stream,
                                topic,
                                Partitioning::PartitionId(partition),
                                message(id, format!("payload {id}")),
                            );
                            (id, receipt.node, started.elapsed())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // Move the primary once a quarter of partition 0's sends are in.
        let waiting = Instant::now();
        while cluster.partition_log(stream, topic, 0).len() < (SENDS / 4) as usize {
            assert!(
                waiting.elapsed() < Duration::from_secs(10),
                "the producer stalled"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(cluster.set_primary(stream, topic, 0, 0));
        let moved_at = cluster.partition_log(stream, topic, 0).len();
        let results: Vec<_> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        (moved_at, results)
    });
    assert!(
        moved_at < SENDS as usize,
        "the move must land while sends are still going"
    );

    let partition0 = &results[0];
    let switch = partition0
        .iter()
        .position(|(_, node, _)| *node == NodeId(0));
    let switch = switch.expect("sends after the move were admitted by the new primary");
    assert!(
        partition0[..switch]
            .iter()
            .all(|(_, node, _)| *node == NodeId(2))
    );
    assert!(
        partition0[switch..]
            .iter()
            .all(|(_, node, _)| *node == NodeId(0))
    );
    let rerouted = partition0[switch].2;
    let slowest = results
        .iter()
        .flatten()
        .map(|(_, _, latency)| *latency)
        .max()
        .unwrap();
    eprintln!(
        "{adapter:?}/{discovery:?}: rerouted send took {rerouted:?}, slowest send {slowest:?}"
    );
    assert!(
        slowest < REROUTED_SEND_LATENCY_MAX,
        "slowest send took {slowest:?}"
    );

    assert_eq!(
        cluster.total_refusals(),
        refusals + 1,
        "refused once, then rerouted"
    );
    assert_eq!(client.stats().refusals, client_refusals + 1);
    assert_eq!(client.stats().session_moves, 0);
    for (partition, sent) in results.iter().enumerate() {
        let log = cluster.partition_log(stream, topic, partition as u32);
        // The first entry is the warm-up message.
        let stored: Vec<u128> = log.iter().skip(1).map(|m| m.id).collect();
        let expected: Vec<u128> = sent.iter().map(|(id, _, _)| *id).collect();
        assert_eq!(
            stored, expected,
            "partition {partition}: nothing lost, duplicated or reordered"
        );
    }
    client.shutdown();
}
