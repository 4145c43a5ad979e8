//! Chaos under load through the tokio adapter: several producers and a consumer run while
//! partition primaries move every second, a node is stopped and restarted every few
//! seconds, paused (now and then while another is stopped and restarted) and resumed, and
//! connections are dropped. At the end every acknowledged message is read back
//! exactly once, in order per partition and producer, and nothing is ever stored twice.
//!
//! `CHAOS_SECONDS` sets the length of the chaos phase (default 4, short for CI; the soak is
//! 600). Memory stays flat however long it runs: the producers' books hold one outcome per
//! batch, the checks stream through the log in chunks, and the cluster holds payloads only
//! for a window, rebuilding older ones from the message id (each payload is a function of
//! its id) and checking them against the checksum it kept.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, RequestError};
use iggy_route_tests::cluster::{ClusterConfig, Retention, TestCluster};
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

/// What a producer was told about one of its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    Acknowledged,
    /// Link lost in flight, or timed out in flight: stored once or not at all.
    Unknown,
    /// Failed for another reason, before anything was written.
    Failed,
}

/// One producer's books: what it was told about each batch, by batch number (its
/// sequence / [`BATCH`]). A byte per batch instead of 16 per id, so a 10-minute run's
/// books stay in the megabytes.
type Books = Vec<Told>;

/// The partition batch `batch` of `producer` went to.
fn partition_of(producer: u64, batch: u64) -> u32 {
    u32::try_from((producer + batch) % u64::from(PARTITIONS)).unwrap()
}

/// The payload of message `id`: a function of the id, so the cluster can rebuild it.
fn payload_of(id: u128) -> Bytes {
    Bytes::from(format!("p{}-{id}", (id >> 64).saturating_sub(1)))
}

fn message_id(producer: u64, sequence: u64) -> u128 {
    (u128::from(producer + 1) << 64) | u128::from(sequence)
}

/// A paused node and the ticks it was paused at and is resumed at.
#[derive(Debug, Clone, Copy)]
struct Pause {
    node: usize,
    since: u64,
    until: u64,
}

/// Longest pause, in 250 ms ticks: a little past the attempt timeout (2 s), as the real
/// nemesis's 15 s is past the real one (5 s).
const PAUSE_TICKS_MAX: u64 = 12;
/// How long a pause lasts before the other nodes elect new primaries, in ticks.
const ELECTION_TICKS: u64 = 6;

/// The partitions `node` leads move to the first node not in `out`.
fn elect_away(cluster: &TestCluster, node: usize, out: &[Option<usize>]) {
    let Some(heir) = (1..NODES)
        .map(|step| (node + step) % NODES)
        .find(|n| !out.contains(&Some(*n)))
    else {
        return;
    };
    for partition in 0..PARTITIONS {
        let primary = cluster.primary(STREAM, TOPIC, partition);
        assert!(
            primary.is_some(),
            "the chaos topic has partition {partition}"
        );
        if primary == Some(node) {
            cluster.set_primary(STREAM, TOPIC, partition, heir);
        }
    }
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

async fn produce(client: Client, producer: u64, stop: Arc<Mutex<bool>>) -> Books {
    let mut books = Books::new();
    while !*stop.lock().unwrap() {
        // Each producer keeps to its own partitions' order by sending one batch at a time.
        let batch = books.len() as u64;
        let partition = partition_of(producer, batch);
        let messages = (0..BATCH)
            .map(|i| {
                let id = message_id(producer, batch * BATCH + i);
                Message {
                    id,
                    payload: payload_of(id),
                    ..Message::default()
                }
            })
            .collect();
        let outcome = client
            .send(
                STREAM,
                TOPIC,
                Partitioning::PartitionId(partition),
                messages,
            )
            .await;
        books.push(match outcome {
            Ok(receipt) => {
                assert_eq!(receipt.partition_id, partition);
                Told::Acknowledged
            }
            Err(ClientError::Request(
                RequestError::OutcomeUnknown { .. } | RequestError::TimedOut { .. },
            )) => Told::Unknown,
            Err(_) => Told::Failed,
        });
    }
    books
}

/// What the read-back found, over all partitions.
#[derive(Debug, Default)]
struct ReadBack {
    /// Messages read back through the client (every stored one).
    read: u64,
    /// Of those, messages of acknowledged batches.
    acknowledged: u64,
}

/// Reads `partition` from offset 0 to its end through the client, in chunks, and checks
/// each chunk against the cluster's log and the producers' books: the same ids at the same
/// offsets, payloads as sent, every message sent by a producer to this partition and
/// stored once (`seen` marks each message of each batch), acknowledged ones in the order of
/// their acknowledgements per producer.
async fn read_back(
    client: &Client,
    cluster: &TestCluster,
    partition: u32,
    books: &[Books],
    seen: &mut [Vec<u16>],
    totals: &mut ReadBack,
) {
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(7),
    };
    let len = cluster.partition_len(STREAM, TOPIC, partition);
    let mut last_acked: Vec<Option<u128>> = vec![None; books.len()];
    let mut offset = 0u64;
    loop {
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
            break;
        }
        let stored = cluster.partition_ids(STREAM, TOPIC, partition, offset, reply.messages.len());
        let read: Vec<u128> = reply.messages.iter().map(|m| m.id).collect();
        assert_eq!(
            read, stored,
            "partition {partition} at {offset}: the client reads back exactly the log"
        );
        for (at, message) in (offset..).zip(&reply.messages) {
            assert_eq!(message.offset, at, "partition {partition}: offsets");
            assert_eq!(
                message.payload,
                payload_of(message.id),
                "partition {partition} at {at}: payload"
            );
            let id = message.id;
            let producer = usize::try_from(id >> 64).unwrap().wrapping_sub(1);
            assert!(producer < books.len(), "{id:#x} stored but never sent");
            let sequence = u64::try_from(id & u128::from(u64::MAX)).unwrap();
            let batch = sequence / BATCH;
            let told = books[producer].get(usize::try_from(batch).unwrap());
            assert!(
                matches!(told, Some(Told::Acknowledged | Told::Unknown)),
                "{id:#x} stored but never sent (told {told:?})"
            );
            assert_eq!(
                partition_of(producer as u64, batch),
                partition,
                "{id:#x} stored in the wrong partition"
            );
            let mark = &mut seen[producer][usize::try_from(batch).unwrap()];
            let bit = 1u16 << (sequence % BATCH);
            assert_eq!(
                *mark & bit,
                0,
                "partition {partition}: {id:#x} was stored twice"
            );
            *mark |= bit;
            if told == Some(&Told::Acknowledged) {
                // A producer sends one batch at a time, so its acknowledgements come in the
                // order of its ids: the log keeps that order if its acknowledged ids rise.
                let last = &mut last_acked[producer];
                assert!(
                    last.is_none_or(|last| last < id),
                    "partition {partition}, producer {producer}: order"
                );
                *last = Some(id);
                totals.acknowledged += 1;
            }
        }
        totals.read += read.len() as u64;
        offset += read.len() as u64;
    }
    assert_eq!(
        offset, len,
        "partition {partition}: the client reads back the whole log"
    );
}

/// The process's resident memory (`VmRSS:`) or its peak (`VmHWM:`), in KiB, where Linux
/// reports it.
fn rss_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn acknowledged_messages_survive_moved_primaries_stopped_and_paused_nodes_and_cut_links() {
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
        let retention = Retention {
            regenerate: Some(Arc::new(payload_of)),
            ..Retention::default()
        };
        let cluster = TestCluster::start_with(ClusterConfig { retention, ..ClusterConfig::new(NODES) }).await;
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
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| tokio::spawn(produce(client.clone(), p, Arc::clone(&stop))))
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

        // Chaos: every 250 ms one event, chosen by the seeded dice. A pause is a stopped
        // process (SIGSTOP): its links stay open and silent; one that outlasts the election
        // time loses its partitions to the other nodes, as the real cluster's do. A stop
        // drawn while a node is paused is the real nemesis's restart while paused.
        let mut dice = Dice(seed | 1);
        let mut pauses = 0u32;
        let mut stopped: Option<(usize, u64)> = None;
        let mut paused: Option<Pause> = None;
        for tick in 0..seconds * 4 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            // Every 30 s, how much is stored against how much memory is resident: the soak's
            // evidence that memory stays flat while the log grows.
            if tick % 120 == 119 {
                let stored: u64 = (0..PARTITIONS).map(|p| cluster.partition_len(STREAM, TOPIC, p)).sum();
                println!(
                    "chaos: at {} s, {stored} stored, RSS {} MiB",
                    (tick + 1) / 4,
                    rss_kib("VmRSS:").map_or_else(|| "unknown".to_owned(), |kib| (kib / 1024).to_string())
                );
            }
            if let Some((node, since)) = stopped
                && tick - since >= 4
            {
                cluster.restart_node(node).await;
                stopped = None;
            }
            if let Some(pause) = paused.as_mut() {
                if tick - pause.since == ELECTION_TICKS && pause.until - pause.since > ELECTION_TICKS {
                    let out = [Some(pause.node), stopped.map(|s| s.0)];
                    elect_away(&cluster, pause.node, &out);
                }
                if tick >= pause.until && stopped.is_none() {
                    cluster.resume_node(pause.node);
                    pauses += 1;
                    paused = None;
                }
            }
            let out = [paused.map(|p| p.node), stopped.map(|s| s.0)];
            let up: Vec<usize> = (0..NODES).filter(|n| !out.contains(&Some(*n))).collect();
            match dice.next(5) {
                0 | 1 => {
                    let partition = u32::try_from(dice.next(u64::from(PARTITIONS))).unwrap();
                    let node = up[usize::try_from(dice.next(up.len() as u64)).unwrap()];
                    cluster.set_primary(STREAM, TOPIC, partition, node);
                }
                2 if stopped.is_none() => {
                    let node = up[usize::try_from(dice.next(up.len() as u64)).unwrap()];
                    cluster.stop_node(node).await;
                    // The cluster fails over: the stopped node's partitions get new primaries.
                    elect_away(&cluster, node, &[Some(node), paused.map(|p| p.node)]);
                    stopped = Some((node, tick));
                }
                3 if paused.is_none() && stopped.is_none() => {
                    let node = usize::try_from(dice.next(NODES as u64)).unwrap();
                    let ticks = 1 + dice.next(PAUSE_TICKS_MAX);
                    cluster.pause_node(node);
                    paused = Some(Pause { node, since: tick, until: tick + ticks });
                }
                _ => cluster.drop_connections(up[usize::try_from(dice.next(up.len() as u64)).unwrap()]),
            }
        }
        if let Some((node, _)) = stopped {
            cluster.restart_node(node).await;
        }
        if let Some(pause) = paused {
            cluster.resume_node(pause.node);
            pauses += 1;
        }
        *stop.lock().unwrap() = true;
        let mut books = Vec::new();
        for producer in producers {
            books.push(producer.await.unwrap());
        }
        let polls = consumer.await.unwrap();

        let count = |told: Told| books.iter().flatten().filter(|t| **t == told).count() as u64;
        let (acknowledged, unknown, failed) =
            (count(Told::Acknowledged) * BATCH, count(Told::Unknown) * BATCH, count(Told::Failed));
        assert!(acknowledged > 0, "nothing was acknowledged");
        let mut seen: Vec<Vec<u16>> = books.iter().map(|b| vec![0; b.len()]).collect();
        let mut totals = ReadBack::default();
        for partition in 0..PARTITIONS {
            read_back(&client, &cluster, partition, &books, &mut seen, &mut totals).await;
        }
        let every = (1u16 << BATCH) - 1;
        for (producer, (told, seen)) in books.iter().zip(&seen).enumerate() {
            for (batch, (told, mark)) in told.iter().zip(seen).enumerate() {
                if *told == Told::Acknowledged {
                    assert_eq!(*mark, every, "producer {producer} batch {batch}: an acknowledged message is missing");
                }
            }
        }
        assert_eq!(totals.acknowledged, acknowledged);
        let stats = client.stats();
        println!(
            "chaos: {seconds} s, {pauses} pauses, {acknowledged} acknowledged, {unknown} unknown \
             (of which {} stored), {failed} failed sends, {polls} polls, {} refusals, {} session moves, {} reconnects; \
             read back {} stored messages, each once and in order per producer, every acknowledged \
             one among them; cluster refused {} sends; peak RSS {} MiB",
            totals.read - totals.acknowledged,
            stats.refusals,
            stats.session_moves,
            stats.reconnects,
            totals.read,
            cluster.total_refusals(),
            rss_kib("VmHWM:").map_or_else(|| "unknown".to_owned(), |kib| (kib / 1024).to_string()),
        );
        client.shutdown().await;
        cluster.shutdown().await;
    });
    iggy_route_tests::error_events::assert_none();
}
