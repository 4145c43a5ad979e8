//! The end of a nemesis run: the cluster made whole (every node resumed and started), the
//! elections waited out, and every partition read back from its primary.
//!
//! The cluster is taken as settled once a round of probe sends (one message to each
//! partition, recorded like any other send) is acknowledged with every send under a
//! second. The probes also teach the reading client each partition's primary, and a poll
//! of one partition goes there (`PollFrom::Primary`, the default): the read sees every
//! acknowledged send. Every partition is also read from each node's own copy (a client
//! whose session is on that node, `PollFrom::AnyReplica`): when the server did not recover
//! a partition and no probe found its primary, the longest copy stands for it, and the
//! report says so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iggy_route_core::client::{Call, ClientError};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, Name, PollMessagesReply};
use iggy_route_core::{Config, PollFrom, Reply, SendReceipt};

use super::ledger::{Ended, Kind, SendCall, messages, payload};
use super::load::{DIRECT_BOUND, Load};
use crate::real_cluster::{RealCluster, poll};
use crate::scripted::clients::{Adapter, TestClient};

/// How long the cluster has to settle after the load before the run gives up on it.
const SETTLE_LIMIT: Duration = Duration::from_secs(180);
/// A probe round is clean when every send of it took less than this.
const CLEAN_PROBE: Duration = Duration::from_secs(1);
/// Messages per poll of the read.
const READ_BATCH: u32 = 1_000;

/// One stored message.
#[derive(Debug, Clone, Copy)]
pub struct Stored {
    /// Its offset.
    pub offset: u64,
    /// Its id.
    pub id: u128,
    /// Whether its payload is the one its id names.
    pub payload_ok: bool,
}

/// What the end of the run found.
#[derive(Debug, Default)]
pub struct Readback {
    /// When a probe round was clean, from the start of the run (`None`: never).
    pub settled_at: Option<Duration>,
    /// Probe rounds sent.
    pub probe_rounds: u32,
    /// Per partition, its messages from offset 0.
    pub logs: Vec<Vec<Stored>>,
    /// Per partition, the replica that admitted its last probe (where it was read).
    pub read_from: BTreeMap<u32, Option<u32>>,
    /// Per partition, how many messages each node's copy held (`None`: not read).
    pub copies: BTreeMap<u32, Vec<Option<usize>>>,
    /// Partitions read from their longest copy, no primary being known, and that node.
    pub longest_copy: BTreeMap<u32, usize>,
    /// Per partition, the group's stored offset.
    pub group_offsets: BTreeMap<u32, Option<u64>>,
    /// What went wrong while settling or reading.
    pub problems: Vec<String>,
}

/// Makes the cluster whole: every node resumed and started (both are no-ops on a node
/// that runs).
pub fn make_whole(cluster: &RealCluster) -> Vec<String> {
    let mut problems = Vec::new();
    for node in 0..cluster.nodes.len() {
        for action in ["resume", "start"] {
            if let Err(error) = cluster.try_ctl(action, node) {
                problems.push(format!("{action} node {node} at the end: {error}"));
            }
        }
    }
    problems
}

/// Waits for the cluster to settle, then reads every partition back through a new client
/// whose session is on node 0, and from each of the `nodes` nodes' copies.
pub fn settle_and_read(load: &Load, config: &dyn Fn(usize) -> Config, nodes: usize) -> Readback {
    let mut readback = Readback::default();
    let begun = Instant::now();
    let reader = loop {
        match TestClient::connect(Adapter::Tokio, config(0)) {
            Ok(reader) => break reader,
            Err(error) if begun.elapsed() > SETTLE_LIMIT => {
                readback
                    .problems
                    .push(format!("no reading client: {error}"));
                return readback;
            }
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    };
    settle(load, &reader, &mut readback, begun);
    let replicas: Vec<Option<TestClient>> = (0..nodes)
        .map(|node| {
            let mut config = config(node);
            config.poll_from = PollFrom::AnyReplica;
            TestClient::connect(Adapter::Tokio, config).ok()
        })
        .collect();
    for partition in 0..load.partitions {
        // A node's copy that cannot be read is only a note: the primary's read decides.
        let mut ignored = Vec::new();
        let copies: Vec<Option<Vec<Stored>>> = replicas
            .iter()
            .map(|client| {
                let client = client.as_ref()?;
                Some(read(load, client, partition, &mut ignored))
            })
            .collect();
        readback.copies.insert(
            partition,
            copies
                .iter()
                .map(|copy| copy.as_ref().map(Vec::len))
                .collect(),
        );
        let known = readback
            .read_from
            .get(&partition)
            .is_some_and(Option::is_some);
        let log = if known {
            read(load, &reader, partition, &mut readback.problems)
        } else {
            let longest = (0..copies.len())
                .max_by_key(|node| copies[*node].as_ref().map_or(0, Vec::len))
                .unwrap_or(0);
            readback.longest_copy.insert(partition, longest);
            copies
                .into_iter()
                .nth(longest)
                .flatten()
                .unwrap_or_default()
        };
        readback.logs.push(log);
        readback
            .group_offsets
            .insert(partition, group_offset(load, &reader, partition));
    }
    for client in replicas.into_iter().flatten() {
        client.shutdown();
    }
    reader.shutdown();
    readback
}

fn settle(load: &Load, reader: &TestClient, readback: &mut Readback, begun: Instant) {
    let mut ids = load.ledger.source("probe", Adapter::Tokio);
    while begun.elapsed() < SETTLE_LIMIT {
        readback.probe_rounds += 1;
        let mut clean = true;
        for partition in 0..load.partitions {
            let (first, seq) = ids.take(1);
            let started = load.ledger.now();
            let sent = probe(load, reader, partition, messages(first, 1));
            let ended_at = load.ledger.now();
            clean &= sent.is_ok() && ended_at - started < CLEAN_PROBE;
            let ended = Ended::of(sent.as_ref());
            if let Ended::Acked { replica, .. } = &ended {
                readback.read_from.insert(partition, *replica);
            }
            load.ledger.send(SendCall {
                source: ids.source,
                seq,
                kind: Kind::Partition(partition),
                first_id: first,
                count: 1,
                started,
                ended_at,
                bound: DIRECT_BOUND,
                ended,
            });
        }
        if clean {
            readback.settled_at = Some(load.ledger.now());
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    readback
        .problems
        .push(format!("no clean probe round within {SETTLE_LIMIT:?}"));
}

/// A send of `messages` to `partition` through the reading client.
fn probe(
    load: &Load,
    reader: &TestClient,
    partition: u32,
    messages: Vec<Message>,
) -> Result<SendReceipt, ClientError> {
    let mut call = Call::send(
        load.stream.as_str(),
        load.topic.as_str(),
        Partitioning::partition_id(partition),
        messages,
    )?;
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        });
    call.stamp_origin_timestamps(micros);
    let Call { request, reply } = call;
    reply.extract(reader.request(request)?)
}

/// Every message of `partition` from offset 0, read from its primary.
fn read(
    load: &Load,
    reader: &TestClient,
    partition: u32,
    problems: &mut Vec<String>,
) -> Vec<Stored> {
    let mut log: Vec<Stored> = Vec::new();
    let mut failures = 0;
    loop {
        let from = log.last().map_or(0, |last| last.offset + 1);
        let request = poll(&load.stream, &load.topic, partition, from, READ_BATCH);
        match reader.request(request) {
            Ok(Reply::Polled(PollMessagesReply { messages, .. })) => {
                if messages.is_empty() {
                    return log;
                }
                log.extend(messages.iter().map(|message| Stored {
                    offset: message.offset,
                    id: message.id,
                    payload_ok: message.payload == payload(message.id),
                }));
            }
            other => {
                failures += 1;
                if failures >= 5 {
                    problems.push(format!(
                        "partition {partition}: read from {from} failed: {other:?}"
                    ));
                    return log;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

fn group_offset(load: &Load, reader: &TestClient, partition: u32) -> Option<u64> {
    let group = Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::Named(Name::new(&load.group).ok()?),
    };
    let call = Call::get_consumer_offset(
        group,
        load.stream.as_str(),
        load.topic.as_str(),
        Some(partition),
    )
    .ok()?;
    let Call { request, reply } = call;
    let info = reply.extract(reader.request(request).ok()?).ok()??;
    Some(info.stored_offset)
}
