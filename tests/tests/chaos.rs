//! Chaos under load through the tokio adapter: several producers and a consumer run while
//! partition primaries move every second, a node is stopped and restarted every few
//! seconds and connections are dropped. At the end every acknowledged message is read back
//! exactly once, in order per partition and producer, and nothing is ever stored twice.
//!
//! `CHAOS_SECONDS` sets the length of the chaos phase (default 4, short for CI; try 120).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, RequestError};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::{Client, ClientError};

const NODES: usize = 3;
/// The ids a fresh test cluster gives its first stream and topic (0-based, as on the real
/// cluster).
const STREAM: u32 = 0;
/// See [`STREAM`].
const TOPIC: u32 = 0;
const PARTITIONS: u32 = 6;
const PRODUCERS: u64 = 4;
const BATCH: u64 = 10;

/// What the producers were told about each message they sent.
#[derive(Debug, Default)]
struct Ledger {
    /// Acknowledged message ids per partition, in acknowledgement order per producer.
    acknowledged: BTreeMap<u32, Vec<u128>>,
    /// Ids whose outcome is unknown (link lost in flight, or timed out in flight).
    unknown: BTreeSet<u128>,
    /// Sends that failed for another reason (before anything was written).
    failed: u64,
}

fn message_id(producer: u64, sequence: u64) -> u128 {
    (u128::from(producer + 1) << 64) | u128::from(sequence)
}

fn producer_of(id: u128) -> u64 {
    u64::try_from(id >> 64).unwrap() - 1
}

/// A tiny seeded generator, so that a failing run can be repeated with its seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

async fn produce(
    client: Client,
    producer: u64,
    stop: Arc<Mutex<bool>>,
    ledger: Arc<Mutex<Ledger>>,
) {
    let mut sequence = 0u64;
    while !*stop.lock().unwrap() {
        // Each producer keeps to its own partitions' order by sending one batch at a time.
        let partition =
            u32::try_from((producer + sequence / BATCH) % u64::from(PARTITIONS)).unwrap();
        let ids: Vec<u128> = (0..BATCH)
            .map(|i| message_id(producer, sequence + i))
            .collect();
        let messages = ids
            .iter()
            .map(|&id| Message {
                id,
                payload: Bytes::from(format!("p{producer}-{id}")),
                ..Message::default()
            })
            .collect();
        sequence += BATCH;
        let outcome = client
            .send(
                STREAM,
                TOPIC,
                Partitioning::PartitionId(partition),
                messages,
            )
            .await;
        let mut ledger = ledger.lock().unwrap();
        match outcome {
            Ok(receipt) => {
                assert_eq!(receipt.partition_id, partition);
                ledger
                    .acknowledged
                    .entry(partition)
                    .or_default()
                    .extend(ids);
            }
            Err(ClientError::Request(
                RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { .. },
            )) => {
                ledger.unknown.extend(ids);
            }
            Err(_) => ledger.failed += 1,
        }
    }
}

/// Reads a partition from offset 0 to its end through the client.
async fn read_back(client: &Client, partition: u32) -> Vec<u128> {
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(7),
    };
    let mut ids = Vec::new();
    loop {
        let offset = u64::try_from(ids.len()).unwrap();
        let reply = client
            .poll(
                STREAM,
                TOPIC,
                Some(partition),
                consumer.clone(),
                PollingStrategy::Offset(offset),
                1000,
            )
            .await
            .unwrap();
        if reply.messages.is_empty() {
            return ids;
        }
        ids.extend(reply.messages.iter().map(|m| m.id));
    }
}

#[test]
fn acknowledged_messages_survive_moving_primaries_stopped_nodes_and_dropped_links() {
    iggy_route_tests::error_events::install();
    let seconds: u64 = std::env::var("CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1995);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let cluster = TestCluster::start(NODES).await;
        let (stream, topic) = cluster.create_stream_and_topic("chaos", "load", PARTITIONS);
        assert_eq!((stream, topic), (STREAM, TOPIC));
        for partition in 0..PARTITIONS {
            cluster.set_primary(STREAM, TOPIC, partition, partition as usize % NODES);
        }
        let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
        config.request_timeout = Duration::from_secs(8);
        config.attempt_timeout = Duration::from_secs(2);
        config.connect_timeout = Duration::from_millis(500);
        let client = Client::connect(config).await.unwrap();

        let stop = Arc::new(Mutex::new(false));
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| tokio::spawn(produce(client.clone(), p, Arc::clone(&stop), Arc::clone(&ledger))))
            .collect();
        let consumer = {
            let client = client.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut polls = 0u64;
                while !*stop.lock().unwrap() {
                    let consumer = Consumer { kind: ConsumerKind::Consumer, id: Identifier::Numeric(1) };
                    let partition = u32::try_from(polls % u64::from(PARTITIONS)).unwrap();
                    // Errors are expected while nodes are down; the checks come at the end.
                    let _ = client.poll(STREAM, TOPIC, Some(partition), consumer, PollingStrategy::Offset(0), 50).await;
                    polls += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                polls
            })
        };

        // Chaos: every 250 ms one event, chosen by the seeded dice.
        let mut dice = Dice(seed | 1);
        let mut stopped: Option<(usize, u32)> = None;
        for tick in 0..seconds * 4 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if let Some((node, since)) = stopped
                && tick - u64::from(since) >= 4
            {
                cluster.restart_node(node).await;
                stopped = None;
            }
            match dice.next(4) {
                0 | 1 => {
                    let partition = u32::try_from(dice.next(u64::from(PARTITIONS))).unwrap();
                    let live: Vec<usize> = (0..NODES).filter(|n| Some(*n) != stopped.map(|s| s.0)).collect();
                    let node = live[usize::try_from(dice.next(live.len() as u64)).unwrap()];
                    cluster.set_primary(STREAM, TOPIC, partition, node);
                }
                2 if stopped.is_none() => {
                    let node = usize::try_from(dice.next(NODES as u64)).unwrap();
                    cluster.stop_node(node).await;
                    // The cluster fails over: the stopped node's partitions get new primaries.
                    for partition in 0..PARTITIONS {
                        if cluster.primary(1, 1, partition) == Some(node) {
                            cluster.set_primary(STREAM, TOPIC, partition, (node + 1) % NODES);
                        }
                    }
                    stopped = Some((node, u32::try_from(tick).unwrap()));
                }
                _ => cluster.drop_connections(usize::try_from(dice.next(NODES as u64)).unwrap()),
            }
        }
        if let Some((node, _)) = stopped {
            cluster.restart_node(node).await;
        }
        *stop.lock().unwrap() = true;
        for producer in producers {
            producer.await.unwrap();
        }
        let polls = consumer.await.unwrap();

        // Every producer has finished: take the ledger out of its lock for the checks.
        let ledger = std::mem::take(&mut *ledger.lock().unwrap());
        let acknowledged: usize = ledger.acknowledged.values().map(Vec::len).sum();
        assert!(acknowledged > 0, "nothing was acknowledged: {ledger:?}");
        for partition in 0..PARTITIONS {
            let log: Vec<u128> = cluster.partition_log(STREAM, TOPIC, partition).iter().map(|m| m.id).collect();
            let read = read_back(&client, partition).await;
            assert_eq!(read, log, "partition {partition}: the client reads back exactly the log");
            let unique: BTreeSet<u128> = log.iter().copied().collect();
            assert_eq!(unique.len(), log.len(), "partition {partition}: a message was stored twice");
            let acked = ledger.acknowledged.get(&partition).cloned().unwrap_or_default();
            let acked_set: BTreeSet<u128> = acked.iter().copied().collect();
            for id in &acked {
                assert!(unique.contains(id), "partition {partition}: acknowledged {id:#x} is missing");
            }
            for id in &log {
                assert!(
                    acked_set.contains(id) || ledger.unknown.contains(id),
                    "{id:#x} stored but never sent"
                );
            }
            // Per producer, the log keeps the order in which its sends were acknowledged.
            for producer in 0..PRODUCERS {
                let in_log: Vec<u128> = log
                    .iter()
                    .copied()
                    .filter(|id| producer_of(*id) == producer && acked_set.contains(id))
                    .collect();
                let in_ack: Vec<u128> = acked.iter().copied().filter(|id| producer_of(*id) == producer).collect();
                assert_eq!(in_log, in_ack, "partition {partition}, producer {producer}: order");
            }
        }
        let stats = client.stats();
        println!(
            "chaos: {seconds} s, {acknowledged} acknowledged, {} unknown, {} failed sends, {polls} polls, \
             {} refusals, {} session moves, {} reconnects",
            ledger.unknown.len(),
            ledger.failed,
            stats.refusals,
            stats.session_moves,
            stats.reconnects
        );
        client.shutdown().await;
        cluster.shutdown().await;
    });
    iggy_route_tests::error_events::assert_none();
}
