//! The suite against a real Iggy cluster: see `iggy_route_tests::real_cluster` for the
//! environment it reads. Without `IGGY_ROUTE_REAL_CLUSTER` every test prints that it was
//! skipped and passes; without `IGGY_ROUTE_REAL_CLUSTER_CTL` the tests that stop nodes (and
//! the split of the primaries) are skipped.
//!
//! The tests share the cluster, so they run one at a time; the topic with split primaries
//! is made once and made again after a test has killed a node.

#![allow(clippy::unwrap_used)]

#[macro_use]
#[path = "sdk_day/mod.rs"]
mod sdk_day;

// Raw commands a user can get wrong, with this file's helpers. Under a directory of its own
// so that Cargo does not take it for a test target of its own.
#[path = "real_cluster/raw_commands.rs"]
mod raw_commands;

// Consumer-group members through the adapters' consumer API.
#[path = "real_cluster/groups.rs"]
mod groups;

#[path = "real_cluster/sdk_interop.rs"]
mod sdk_interop;

// A program written against the SDK's traits, on the SDK's client and on iggy-route.
#[path = "real_cluster/sdk_drop_in.rs"]
mod sdk_drop_in;

// A group named by name in one call and by number in the next.
#[path = "group_names/program.rs"]
mod group_names_program;

#[path = "real_cluster/group_names.rs"]
mod group_names;

// Own password and name changes, and run-time logins as another user. Named to run after
// the day tests: it makes the split topic, whose node bounces leave some partitions of the
// real server unable to commit for a while ("needs state transfer" in its log), and a day
// test's segment delete then timed out.
#[path = "real_cluster/user_accounts.rs"]
mod user_accounts;

// A consumer group's members on split primaries.
#[path = "real_cluster/consumer_group_members.rs"]
mod consumer_group_members;

// The coordinator's node killed under load.
#[path = "real_cluster/the_coordinators_node_killed.rs"]
mod the_coordinators_node_killed;

// What this client and another create, sent to at once.
#[path = "real_cluster/what_is_created.rs"]
mod what_is_created;

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::{Call, ClientError};
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy};
use iggy_route_core::{PollRequest, Reply, Request};
use iggy_route_tests::real_cluster::{
    RealCluster, admin, admitted_by, create_stream, create_topic, poll, read_all, send, unique_name,
};
use iggy_route_tests::scripted::clients::{Adapter, TestClient};

const ADAPTERS: [Adapter; 2] = [Adapter::Tokio, Adapter::Mio];

/// A topic whose primaries sit on different nodes.
#[derive(Debug, Clone)]
struct Split {
    stream: String,
    topic: String,
    partitions: u32,
}

static SERIAL: Mutex<Option<Split>> = Mutex::new(None);

fn serial() -> MutexGuard<'static, Option<Split>> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The split topic, made now if there is none: split by bouncing nodes when there is a
/// control command, else a topic of six partitions wherever the cluster puts them.
fn split(cluster: &RealCluster, fixture: &mut Option<Split>) -> Split {
    if let Some(split) = fixture {
        return split.clone();
    }
    let stream = unique_name("route-split");
    let topic = "events".to_owned();
    let coordinator = cluster.nodes.len() - 1;
    let client = cluster.client(Adapter::Tokio, coordinator);
    let partitions = if cluster.has_ctl() {
        cluster.split_primaries(&client, &stream, &topic)
    } else {
        admin(&client, create_stream(&stream));
        admin(&client, create_topic(&stream, &topic, 6));
        6
    };
    client.shutdown();
    let made = Split {
        stream,
        topic,
        partitions,
    };
    *fixture = Some(made.clone());
    made
}

fn fresh_id() -> u128 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let run = u128::from(std::process::id()) << 64;
    run | u128::from(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        | (u128::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs()),
        ) << 96)
}

#[test]
fn split_primaries_are_sent_to_without_session_moves_and_refused_only_while_learned() {
    let Some(cluster) = RealCluster::from_env("split_primaries") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let mut nodes = BTreeSet::new();
        let mut away_from_node0 = 0;
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, 0, "learn");
            let node = admitted_by(client.request(request)).unwrap();
            away_from_node0 += u64::from(node != 0);
            nodes.insert(node);
        }
        let learned = client.stats();
        println!(
            "{adapter:?}: learning: {} refusals, {} of them named the primary and were followed",
            learned.refusals, learned.refusal_views_followed
        );
        // Discovery tries node 0 first; its refusal names the primary (`view % 3`, roster
        // order), so each partition led elsewhere costs exactly one refusal.
        assert_eq!(
            learned.refusals, away_from_node0,
            "one refusal per partition led away from node 0"
        );
        assert_eq!(
            learned.refusal_views_followed, learned.refusals,
            "every refusal named the primary"
        );
        let started = Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "steady");
                admitted_by(client.request(request)).unwrap();
            }
        }
        let per_send = started.elapsed() / (rounds * split.partitions);
        let stats = client.stats();
        println!(
            "{adapter:?}: primaries on nodes {nodes:?}; {} refusals while learning, {} after; \
             {per_send:?} per send; {} session moves",
            learned.refusals,
            stats.refusals - learned.refusals,
            stats.session_moves
        );
        if cluster.has_ctl() {
            assert_eq!(
                nodes.len(),
                cluster.nodes.len(),
                "one primary node per node"
            );
        }
        assert_eq!(stats.refusals, learned.refusals, "no refusal once learned");
        assert_eq!(stats.session_moves, 0);
        client.shutdown();
    }
}

#[test]
fn no_refusal_after_our_own_metadata_writes() {
    let Some(cluster) = RealCluster::from_env("no_refusal_after_our_own_metadata_writes") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 1);
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, 0, "learn");
            admitted_by(client.request(request)).unwrap();
        }
        let learned = client.stats().refusals;
        for round in 0..12 {
            if round % 4 == 0 {
                admin(&client, create_stream(&unique_name("route-other")));
            }
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "after");
                admitted_by(client.request(request)).unwrap();
            }
        }
        assert_eq!(client.stats().refusals, learned, "{adapter:?}");
        assert_eq!(client.stats().session_moves, 0);
        client.shutdown();
    }
}

#[test]
fn every_partition_reads_its_own_writes_and_stored_equals_acknowledged() {
    let Some(cluster) = RealCluster::from_env("read_your_writes") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let mut acknowledged: Vec<BTreeSet<u128>> =
            vec![BTreeSet::new(); split.partitions as usize];
        for round in 0..5 {
            for partition in 0..split.partitions {
                let id = fresh_id();
                let sent = client.request(send(&split.stream, &split.topic, partition, id, "ryw"));
                let Ok(Reply::Sent(receipt)) = sent else {
                    panic!("{adapter:?} send to {partition}: {sent:?}");
                };
                acknowledged[partition as usize].insert(id);
                let offset = receipt.base_offset.unwrap();
                let read = client.request(poll(&split.stream, &split.topic, partition, offset, 1));
                let Ok(Reply::Polled(polled)) = read else {
                    panic!("{adapter:?} poll of {partition}: {read:?}");
                };
                assert_eq!(
                    polled.messages.first().map(|m| m.id),
                    Some(id),
                    "{adapter:?} round {round}: partition {partition} at {offset} right after \
                     its acknowledgement"
                );
            }
        }
        for partition in 0..split.partitions {
            let stored = read_all(&client, &split.stream, &split.topic, partition);
            let unique: BTreeSet<u128> = stored.iter().copied().collect();
            assert_eq!(unique.len(), stored.len(), "no message stored twice");
            let missing: Vec<&u128> = acknowledged[partition as usize]
                .difference(&unique)
                .collect();
            assert!(
                missing.is_empty(),
                "{adapter:?} {partition}: lost {missing:?}"
            );
        }
        client.shutdown();
    }
}

/// A consumer that never sent does not know where a partition's primary is; the real server
/// keeps an auto-commit served by a backup on that backup alone. Its commits must reach the
/// primary all the same: once the consumer learns the primary (here by sending), its next
/// auto-commit poll goes on from where the last one ended, not from the start.
#[test]
fn auto_commit_polls_of_a_consumer_that_never_sent_are_committed_on_the_primary() {
    let Some(cluster) = RealCluster::from_env("durable_auto_commit") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    // Partition 0's primary is not node 0, where the consumer's session sits (with a split
    // by bounces; without one, wherever the cluster put it).
    let partition = 0;
    for adapter in ADAPTERS {
        let producer = cluster.client(adapter, cluster.nodes.len() - 1);
        for _ in 0..4 {
            admin(
                &producer,
                send(&split.stream, &split.topic, partition, fresh_id(), "ac"),
            );
        }
        producer.shutdown();
        let consumer_id = u32::try_from(fresh_id() & 0x7fff_ffff).unwrap();
        let auto_commit_poll = || {
            Request::Poll(PollRequest {
                consumer: Consumer {
                    kind: ConsumerKind::Consumer,
                    id: Identifier::Numeric(consumer_id),
                },
                stream: Identifier::Named(Name::new(&split.stream).unwrap()),
                topic: Identifier::Named(Name::new(&split.topic).unwrap()),
                partition_id: Some(partition),
                strategy: PollingStrategy::Next,
                count: 2,
                auto_commit: true,
            })
        };
        let offsets = |reply: Result<Reply, ClientError>| -> Vec<u64> {
            let Ok(Reply::Polled(polled)) = reply else {
                panic!("{adapter:?} auto-commit poll: {reply:?}");
            };
            polled.messages.iter().map(|m| m.offset).collect()
        };
        let consumer = cluster.client(adapter, 0);
        // A backup serves what replication has brought it so far.
        let started = Instant::now();
        let first = loop {
            let first = offsets(consumer.request(auto_commit_poll()));
            if !first.is_empty() || started.elapsed() > Duration::from_secs(10) {
                break first;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(first, [0, 1], "{adapter:?}: a new consumer starts at 0");
        admin(
            &consumer,
            send(&split.stream, &split.topic, partition, fresh_id(), "learn"),
        );
        let next = offsets(consumer.request(auto_commit_poll()));
        assert_eq!(
            next,
            [2, 3],
            "{adapter:?}: the poll on the primary goes on from the commit"
        );
        assert_eq!(consumer.stats().session_moves, 0);
        consumer.shutdown();
    }
}

/// A call through a test client: its request, its reply read as the call reads it.
fn call<T>(client: &TestClient, call: Call<T>) -> Result<T, ClientError> {
    let Call { request, reply } = call;
    reply.extract(client.request(request)?)
}

/// Eight threads send one message at a time to one partition, so sends queue behind the
/// write in flight and ride merged frames: the real server must take a merged batch, and
/// each caller's receipt must name the offset of its own message.
#[test]
fn merged_frames_give_each_caller_its_own_offset_on_the_real_server() {
    let Some(cluster) = RealCluster::from_env("merged_frames") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let receipts = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let (client, split, receipts) = (&client, &split, &receipts);
                scope.spawn(move || {
                    for _ in 0..40 {
                        let id = fresh_id();
                        let sent = client.request(send(&split.stream, &split.topic, 0, id, "m"));
                        let Ok(Reply::Sent(receipt)) = sent else {
                            panic!("{adapter:?}: {sent:?}");
                        };
                        receipts
                            .lock()
                            .unwrap()
                            .push((receipt.base_offset.unwrap(), id));
                    }
                });
            }
        });
        let coalesced = client.stats().coalesced;
        let receipts = receipts.into_inner().unwrap();
        let first = receipts.iter().map(|(offset, _)| *offset).min().unwrap();
        let count = u32::try_from(receipts.len()).unwrap();
        let read = client.request(poll(&split.stream, &split.topic, 0, first, count));
        let Ok(Reply::Polled(polled)) = read else {
            panic!("{adapter:?}: {read:?}");
        };
        for (offset, id) in &receipts {
            let stored = polled
                .messages
                .get(usize::try_from(offset - first).unwrap())
                .map(|m| m.id);
            assert_eq!(
                stored,
                Some(*id),
                "{adapter:?}: the receipt's offset {offset}"
            );
        }
        println!(
            "{adapter:?}: {} sends, {coalesced} of them merged behind another",
            receipts.len()
        );
        assert!(
            coalesced > 0,
            "{adapter:?}: nothing was merged, nothing was tested"
        );
        client.shutdown();
    }
}

/// The runtime the async client's calls of the SDK user's day are made on.
static DAY_RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

macro_rules! on_tokio {
    ($call:expr) => {
        DAY_RUNTIME.block_on($call)
    };
}

macro_rules! blocking {
    ($call:expr) => {
        $call
    };
}

macro_rules! connect_tokio {
    ($config:expr) => {
        DAY_RUNTIME.block_on(iggy_route_tokio::Client::connect($config))
    };
}

macro_rules! connect_mio {
    ($config:expr) => {
        iggy_route_mio::Client::connect($config)
    };
}

/// The day's place on the real cluster: the session on the last node, fresh names, and
/// primaries wherever the cluster put them.
fn day_place(cluster: &RealCluster, adapter: &str) -> sdk_day::Place {
    sdk_day::Place {
        root: sdk_day::quick(cluster.config(cluster.nodes.len() - 1)),
        prefix: unique_name(&format!("day-{adapter}")),
        spread: None,
        nodes: cluster.nodes.len(),
    }
}

/// An SDK user's day through the async client: messaging, streams and topics,
/// the system reads, users with limited permissions, tokens, logout.
#[test]
fn an_sdk_users_day_through_the_async_client() {
    let Some(cluster) = RealCluster::from_env("sdk_day_tokio") else {
        return;
    };
    let _serial = serial();
    let place = day_place(&cluster, "tokio");
    let client = connect_tokio!(place.root.clone()).unwrap();
    messaging_day!(client, place, on_tokio);
    metadata_day!(client, place, on_tokio);
    system_day!(client, place, on_tokio);
    users_day!(client, place, on_tokio, connect_tokio);
    logout_day!(client, on_tokio);
    on_tokio!(client.shutdown());
}

/// The same day through the blocking client.
#[test]
fn an_sdk_users_day_through_the_blocking_client() {
    let Some(cluster) = RealCluster::from_env("sdk_day_mio") else {
        return;
    };
    let _serial = serial();
    let place = day_place(&cluster, "mio");
    let client = connect_mio!(place.root.clone()).unwrap();
    messaging_day!(client, place, blocking);
    metadata_day!(client, place, blocking);
    system_day!(client, place, blocking);
    users_day!(client, place, blocking, connect_mio);
    logout_day!(client, blocking);
    client.shutdown();
}
