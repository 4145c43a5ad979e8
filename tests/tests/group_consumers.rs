//! The consumer API of both adapters as a consumer group, on the loopback cluster without
//! the routing commands (as the real server is): three members (two async, one blocking)
//! read a six-partition topic whose primaries sit on three nodes and move every 50 ms
//! while they read. Every message is handed out exactly once across the group, the
//! offsets each member commits are stored on each partition's primary, no session moves
//! and no membership is lost (each member joined once).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::Config;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_tests::cluster::{Lookup, TestCluster};
use iggy_route_tokio::{AutoCommit, ReceivedMessage};

const STREAM: u32 = 0;
const TOPIC: u32 = 0;
const GROUP: &str = "readers";
const PARTITIONS: u32 = 6;
const PER_PARTITION: u64 = 200;
const TOTAL: usize = (PER_PARTITION * PARTITIONS as u64) as usize;

fn config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(10);
    config
}

/// Each message's payload names its partition and place: `p{partition}-{i}`.
async fn fill(cluster: &TestCluster) {
    let producer = iggy_route_tokio::Client::connect(config(cluster))
        .await
        .unwrap();
    for partition in 0..PARTITIONS {
        for chunk in 0..PER_PARTITION / 50 {
            let messages = (0..50)
                .map(|i| Message {
                    payload: Bytes::from(format!("p{partition}-{}", chunk * 50 + i)),
                    ..Message::default()
                })
                .collect();
            producer
                .send(
                    STREAM,
                    TOPIC,
                    Partitioning::PartitionId(partition),
                    messages,
                )
                .await
                .unwrap();
        }
    }
    producer.shutdown().await;
}

/// Moves one partition's primary to the next node every 50 ms until `stop`.
fn mover(cluster: Arc<TestCluster>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut moves = 0;
        while !stop.load(Ordering::SeqCst) {
            let partition = moves % PARTITIONS;
            let now = cluster.primary(STREAM, TOPIC, partition).unwrap();
            assert!(cluster.set_primary(STREAM, TOPIC, partition, (now + 1) % 3));
            moves += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        moves
    })
}

fn payload(received: &ReceivedMessage) -> String {
    String::from_utf8(received.message.payload.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_three_reads_every_message_once_while_primaries_move() {
    iggy_route_tests::error_events::install();
    let cluster = Arc::new(TestCluster::start(3).await);
    cluster.set_routing_commands(false);
    cluster.create_stream_and_topic("orders", "events", PARTITIONS);
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(STREAM, TOPIC, partition, partition as usize % 3));
    }
    cluster.set_metadata_leader(1);
    fill(&cluster).await;

    // Every member joins before any reads, so no partition changes hands mid-read.
    let tokio_clients = [
        iggy_route_tokio::Client::connect(config(&cluster))
            .await
            .unwrap(),
        iggy_route_tokio::Client::connect(config(&cluster))
            .await
            .unwrap(),
    ];
    let mio_client = iggy_route_mio::Client::connect(config(&cluster)).unwrap();
    let mut async_members = Vec::new();
    for client in &tokio_clients {
        let mut member = client
            .consumer(STREAM, TOPIC)
            .unwrap()
            .group(GROUP)
            .unwrap()
            .batch_length(7)
            .poll_interval(Duration::from_millis(20))
            .auto_commit(AutoCommit::AfterPoll)
            .build()
            .unwrap();
        member.join().await.unwrap();
        async_members.push(member);
    }
    let mut blocking_member = mio_client
        .consumer(STREAM, TOPIC)
        .unwrap()
        .group(GROUP)
        .unwrap()
        .batch_length(7)
        .poll_interval(Duration::from_millis(20))
        .auto_commit(AutoCommit::AfterPoll)
        .build()
        .unwrap();
    blocking_member.join().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let moves = mover(Arc::clone(&cluster), Arc::clone(&stop));
    // Each member reads until the group has read everything (a member may leave early and
    // hand its partitions, read to the end and committed, to the others).
    let group_read = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&group_read);
    let blocking = std::thread::spawn(move || {
        let mut read = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while counter.load(Ordering::SeqCst) < TOTAL {
            assert!(
                std::time::Instant::now() < deadline,
                "the blocking member stalled"
            );
            let soon = std::time::Instant::now() + Duration::from_millis(500);
            match blocking_member.next_before(soon) {
                Some(Ok(received)) => {
                    read.push(received);
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                Some(Err(error)) => panic!("blocking member: {error}"),
                None => {}
            }
        }
        let stats = blocking_member.stats();
        blocking_member.shutdown(true).unwrap();
        (read, stats)
    });
    let mut async_reads = Vec::new();
    for mut member in async_members {
        let counter = Arc::clone(&group_read);
        async_reads.push(tokio::spawn(async move {
            let mut read = Vec::new();
            let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
            while counter.load(Ordering::SeqCst) < TOTAL {
                assert!(
                    tokio::time::Instant::now() < give_up,
                    "stalled: the group read {} of {TOTAL}; this member {}, {:?}",
                    counter.load(Ordering::SeqCst),
                    read.len(),
                    member.stats()
                );
                // Another member's last message ends the wait too.
                let next = tokio::time::timeout(Duration::from_millis(500), member.next()).await;
                if next.is_err() && counter.load(Ordering::SeqCst) >= TOTAL {
                    break;
                }
                let Ok(next) = next else {
                    continue;
                };
                match next {
                    Some(Ok(received)) => {
                        read.push(received);
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                    Some(Err(error)) => panic!("async member: {error}"),
                    None => break,
                }
            }
            let stats = member.stats();
            member.shutdown(true).await.unwrap();
            (read, stats)
        }));
    }
    let mut all = Vec::new();
    let mut stats = Vec::new();
    for handle in async_reads {
        let (read, member) = handle.await.unwrap();
        all.extend(read);
        stats.push(member);
    }
    let (read, member) = tokio::task::spawn_blocking(move || blocking.join().unwrap())
        .await
        .unwrap();
    all.extend(read);
    stats.push(member);
    stop.store(true, Ordering::SeqCst);
    let moves = moves.await.unwrap();
    assert!(moves > 0, "no primary moved");

    // Exactly once across the group, in order within each partition.
    assert_eq!(all.len(), TOTAL, "messages handed out");
    let mut by_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for received in &all {
        let expected = format!("p{}-{}", received.partition_id, received.message.offset);
        assert_eq!(payload(received), expected);
        by_partition
            .entry(received.partition_id)
            .or_default()
            .push(received.message.offset);
    }
    for partition in 0..PARTITIONS {
        let offsets = &by_partition[&partition];
        assert_eq!(
            *offsets,
            (0..PER_PARTITION).collect::<Vec<_>>(),
            "partition {partition}"
        );
        // Each member committed what it handed out, on the partition's primary.
        let stored = cluster.with_state(|state| {
            state
                .catalog
                .topic(Lookup::Id(STREAM), Lookup::Id(TOPIC))
                .ok()?
                .group_offset(partition, GROUP)
        });
        assert_eq!(stored, Some(PER_PARTITION - 1), "partition {partition}");
    }
    for (member, stats) in stats.iter().enumerate() {
        assert_eq!(stats.joins, 1, "member {member} joined once: {stats:?}");
        assert_eq!(stats.commit_failures, 0, "member {member}: {stats:?}");
    }
    for client in &tokio_clients {
        let router = client.stats();
        assert_eq!(router.session_moves, 0);
        assert_eq!(router.memberships_lost, 0);
        client.shutdown().await;
    }
    let router = mio_client.stats();
    assert_eq!(router.session_moves, 0);
    assert_eq!(router.memberships_lost, 0);
    mio_client.shutdown();
    println!("{moves} primary moves while the group read {TOTAL} messages");
    Arc::try_unwrap(cluster).ok().unwrap().shutdown().await;
}
