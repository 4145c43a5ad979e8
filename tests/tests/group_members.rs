//! Consumer-group membership through the tokio adapter, on the loopback cluster without
//! the routing commands (as the real server is): a join goes to the metadata leader and
//! its link becomes the group's member link, which no other request uses and no idle
//! timeout closes; syncs and group polls, wherever they are served, are answered as that
//! member; a leave ends the membership and the group rebalances; the session never moves.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, PollRequest};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::Client;

const STREAM: u32 = 0;
const TOPIC: u32 = 0;
const GROUP: &str = "billing";
const PARTITIONS: u32 = 6;
const PER_PARTITION: u128 = 10;

fn group_poll(partition: u32, from: u64) -> PollRequest {
    PollRequest {
        consumer: Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: Identifier::try_from(GROUP).unwrap(),
        },
        stream: Identifier::Numeric(STREAM),
        topic: Identifier::Numeric(TOPIC),
        partition_id: Some(partition),
        strategy: PollingStrategy::Offset(from),
        count: 4,
        auto_commit: false,
    }
}

fn config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config
}

/// A 3-node cluster whose six partitions are led by nodes 1, 2, 0, 1, 2, 0, each holding
/// ten messages, with the group created; the metadata leader is node `leader`.
async fn start(leader: usize) -> TestCluster {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    cluster.set_routing_commands(false);
    assert_eq!(
        cluster.create_stream_and_topic("orders", "events", PARTITIONS),
        (STREAM, TOPIC)
    );
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(STREAM, TOPIC, partition, (partition as usize + 1) % 3));
    }
    cluster.set_metadata_leader(leader);
    let producer = Client::connect(config(&cluster)).await.unwrap();
    for partition in 0..PARTITIONS {
        let messages = (0..PER_PARTITION)
            .map(|i| Message {
                id: u128::from(partition) * 1000 + i + 1,
                payload: Bytes::from(format!("p{partition}-{i}")),
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
    producer
        .create_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    producer.shutdown().await;
    cluster
}

async fn member_count(client: &Client) -> usize {
    client
        .get_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap()
        .unwrap()
        .members
        .len()
}

async fn assigned(client: &Client) -> Option<(u64, Vec<u32>)> {
    client
        .sync_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap()
        .map(|a| (a.generation, a.partitions))
}

/// Every message of `partition`, read by this member from wherever routing serves its
/// polls (a backup's copy may lag: empty answers are asked again, for up to 5 s).
async fn drain(client: &Client, partition: u32) -> Vec<u128> {
    let mut ids = Vec::new();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
    while ids.len() < PER_PARTITION as usize {
        assert!(
            tokio::time::Instant::now() < give_up,
            "partition {partition}: {} of {PER_PARTITION} read",
            ids.len()
        );
        let polled = client
            .poll_request(group_poll(partition, ids.len() as u64))
            .await
            .unwrap();
        assert_eq!(
            polled.partition_id, partition,
            "answered as the member, not told to re-sync"
        );
        if polled.messages.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ids.extend(polled.messages.iter().map(|m| m.id));
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_each_poll_their_own_partitions_and_read_every_message_once() {
    let cluster = start(2).await;
    let mut members = Vec::new();
    for _ in 0..3 {
        let client = Client::connect(config(&cluster)).await.unwrap();
        client
            .join_consumer_group(STREAM, TOPIC, GROUP)
            .await
            .unwrap();
        members.push(client);
    }
    assert_eq!(member_count(&members[0]).await, 3);
    let mut owned = BTreeSet::new();
    let mut read = Vec::new();
    for member in &members {
        let (_, partitions) = assigned(member).await.expect("a member");
        assert_eq!(partitions.len(), 2, "six partitions over three members");
        for partition in partitions {
            assert!(
                owned.insert(partition),
                "partition {partition} assigned twice"
            );
            read.extend(drain(member, partition).await);
        }
    }
    assert_eq!(owned, (0..PARTITIONS).collect());
    read.sort_unstable();
    let expected: Vec<u128> = (0..PARTITIONS)
        .flat_map(|p| (0..PER_PARTITION).map(move |i| u128::from(p) * 1000 + i + 1))
        .collect();
    assert_eq!(read, expected, "every message once across the group");
    for member in &members {
        let stats = member.stats();
        assert_eq!(stats.session_moves, 0);
        assert_eq!(stats.memberships_lost, 0);
        member.shutdown().await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_join_keeps_one_member_and_a_leave_rebalances_the_group() {
    let cluster = start(0).await;
    let first = Client::connect(config(&cluster)).await.unwrap();
    let second = Client::connect(config(&cluster)).await.unwrap();
    first
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    first
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    assert_eq!(member_count(&first).await, 1, "joined once");
    second
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    let (generation, shared) = assigned(&second).await.unwrap();
    assert_eq!(shared.len(), 3);
    assert_eq!(assigned(&first).await.unwrap().1.len(), 3);

    first
        .leave_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    assert_eq!(assigned(&first).await, None, "no longer a member");
    let (after, all) = assigned(&second).await.unwrap();
    assert!(after > generation, "the leave started a new generation");
    assert_eq!(all, (0..PARTITIONS).collect::<Vec<_>>());
    assert_eq!(member_count(&second).await, 1);
    // A leave is not a lost membership; a second leave is the server's to refuse.
    assert_eq!(first.stats().memberships_lost, 0);
    assert!(
        first
            .leave_consumer_group(STREAM, TOPIC, GROUP)
            .await
            .is_err()
    );
    first.shutdown().await;
    second.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_s_refusal_of_a_join_sends_it_to_the_leader() {
    let cluster = start(0).await;
    let client = Client::connect(config(&cluster)).await.unwrap();
    // The roster the client read names node 0; the leadership moves after.
    client.get_stream(STREAM).await.unwrap();
    cluster.set_metadata_leader(1);
    client
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    assert_eq!(
        assigned(&client).await.unwrap().1.len(),
        PARTITIONS as usize
    );
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_membership_outlives_idle_timeouts_and_primary_moves() {
    let cluster = start(1).await;
    let mut config = config(&cluster);
    config.data_link_idle_timeout = Duration::from_millis(100);
    config.heartbeat_interval = Duration::from_millis(150);
    let client = Client::connect(config).await.unwrap();
    client
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    let (generation, _) = assigned(&client).await.unwrap();
    let mut read = drain(&client, 0).await;
    // Past several idle timeouts and heartbeats, with every primary moved.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(STREAM, TOPIC, partition, (partition as usize + 2) % 3));
    }
    assert_eq!(
        assigned(&client).await,
        Some((generation, (0..PARTITIONS).collect())),
        "the same membership, no rebalance"
    );
    for partition in 1..PARTITIONS {
        read.extend(drain(&client, partition).await);
    }
    assert_eq!(
        read.len(),
        (PER_PARTITION * u128::from(PARTITIONS)) as usize
    );
    assert_eq!(member_count(&client).await, 1);
    let stats = client.stats();
    assert_eq!(stats.session_moves, 0);
    assert_eq!(stats.memberships_lost, 0);
    client.shutdown().await;
    cluster.shutdown().await;
}

/// The group's stored offset of `partition`, as the cluster holds it (on the primary).
fn stored(cluster: &TestCluster, partition: u32) -> Option<u64> {
    cluster.with_state(|state| {
        state
            .catalog
            .topic(
                iggy_route_tests::cluster::Lookup::Id(STREAM),
                iggy_route_tests::cluster::Lookup::Id(TOPIC),
            )
            .ok()?
            .group_offset(partition, GROUP)
    })
}

fn group_consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::try_from(GROUP).unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_s_offset_writes_are_stored_on_every_partition_s_primary() {
    // The leader (node 2) leads partitions 1 and 4; the others are led by nodes 0 and 1,
    // where the server fences a group's offset write from anyone but the member's own
    // connection, which sits on the leader.
    let cluster = start(2).await;
    let client = Client::connect(config(&cluster)).await.unwrap();
    client
        .join_consumer_group(STREAM, TOPIC, GROUP)
        .await
        .unwrap();
    for partition in 0..PARTITIONS {
        client
            .store_offset(group_consumer(), STREAM, TOPIC, partition, 3)
            .await
            .unwrap();
        assert_eq!(
            stored(&cluster, partition),
            Some(3),
            "partition {partition}"
        );
    }
    // Every primary moves: the next writes find the new ones.
    for partition in 0..PARTITIONS {
        assert!(cluster.set_primary(STREAM, TOPIC, partition, (partition as usize + 2) % 3));
    }
    for partition in 0..PARTITIONS {
        client
            .store_offset(group_consumer(), STREAM, TOPIC, partition, 7)
            .await
            .unwrap();
        assert_eq!(
            stored(&cluster, partition),
            Some(7),
            "partition {partition}"
        );
    }
    // An offset past the partition's end is the server's to refuse, typed.
    assert!(
        client
            .store_offset(group_consumer(), STREAM, TOPIC, 0, 1_000)
            .await
            .is_err()
    );
    let stats = client.stats();
    assert_eq!(stats.session_moves, 0);
    assert_eq!(stats.memberships_lost, 0);
    client.shutdown().await;
    cluster.shutdown().await;
}
