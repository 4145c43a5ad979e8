//! The six defects a real Iggy cluster showed, each against the loopback
//! cluster set up as the real one behaves: no routing commands (discovery by refusal),
//! followers whose metadata reads lag the leader by 200 ms, and backups whose polls lag the
//! primary by 250 ms (`cluster::Lag::REAL_CLUSTER`, the default). Each test failed on the
//! code before its fix.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy, code};
use iggy_route_core::{Config, PollRequest};
use iggy_route_tests::cluster::{Lag, TestCluster};

fn message(text: &str) -> Message {
    Message {
        payload: Bytes::copy_from_slice(text.as_bytes()),
        ..Message::default()
    }
}

fn consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    }
}

/// A 3-node cluster like the real one: no routing commands, the real cluster's lag.
async fn real_like() -> TestCluster {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    cluster.set_routing_commands(false);
    assert_eq!(cluster.with_state(|state| state.lag()), Lag::REAL_CLUSTER);
    cluster
}

/// A client whose coordinator (its first seed) is `coordinator`.
async fn client_via(cluster: &TestCluster, coordinator: usize) -> iggy_route_tokio::Client {
    iggy_route_tokio::Client::connect(config_via(cluster, coordinator))
        .await
        .unwrap()
}

/// The configuration of [`client_via`].
fn config_via(cluster: &TestCluster, coordinator: usize) -> Config {
    let mut seeds: Vec<String> = vec![cluster.addr(coordinator).to_string()];
    seeds.extend(
        (0..cluster.node_count())
            .filter(|&node| node != coordinator)
            .map(|node| cluster.addr(node).to_string()),
    );
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.seeds = seeds;
    config.request_timeout = Duration::from_secs(10);
    config
}

fn routing_lookups(cluster: &TestCluster) -> u64 {
    (0..cluster.node_count())
        .map(|node| cluster.stats(node).requests(code::GET_POLL_ROUTING))
        .sum()
}

/// Defect 1: after our own metadata write, routes learned by refusal stay known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_our_metadata_write_known_primaries_are_not_rediscovered() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 3);
    for (partition, node) in [(0, 1), (1, 2), (2, 0)] {
        assert!(cluster.set_primary(stream, topic, partition, node));
    }
    let client = client_via(&cluster, 0).await;
    for partition in 0..3 {
        client
            .send(
                stream,
                topic,
                Partitioning::PartitionId(partition),
                vec![message("warm")],
            )
            .await
            .unwrap();
    }
    let after_warm_up = cluster.total_refusals();
    for round in 0..20 {
        if round % 5 == 0 {
            client
                .create_stream(&format!("other-{round}"))
                .await
                .unwrap();
        }
        for partition in 0..3 {
            client
                .send(
                    stream,
                    topic,
                    Partitioning::PartitionId(partition),
                    vec![message("m")],
                )
                .await
                .unwrap();
        }
    }
    assert_eq!(
        cluster.total_refusals(),
        after_warm_up,
        "no send refused after the routes were learned, across four metadata writes"
    );
    assert_eq!(client.stats().session_moves, 0);
    client.shutdown().await;
}

/// Defect 2: a topic we created through a follower coordinator is sent to at once, though
/// the follower reads it as absent for 200 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_through_a_follower_coordinator_is_sent_to_at_once() {
    let cluster = real_like().await;
    let client = client_via(&cluster, 1).await;
    let stream = client.create_stream("fresh").await.unwrap();
    let topic = client.create_topic(stream.id, "events", 2).await.unwrap();
    for (stream_ref, topic_ref) in [
        (
            Identifier::Numeric(stream.id),
            Identifier::Numeric(topic.summary.id),
        ),
        (
            Identifier::try_from("fresh").unwrap(),
            Identifier::try_from("events").unwrap(),
        ),
    ] {
        let receipt = client
            .send(
                stream_ref,
                topic_ref,
                Partitioning::PartitionId(1),
                vec![message("first")],
            )
            .await;
        assert!(receipt.is_ok(), "{receipt:?}");
    }
    client.shutdown().await;
}

/// Defect 3: partitions we added through a follower coordinator are sent to at once,
/// though the follower reads the old count for 200 ms, and a follower's partition plane
/// does not know the new partitions for as long (their primary is the leader, node 1, and
/// discovery asks node 0 first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_added_through_a_follower_coordinator_are_sent_to_at_once() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    cluster.set_metadata_leader(1);
    let client = client_via(&cluster, 2).await;
    client
        .send(
            stream,
            topic,
            Partitioning::PartitionId(0),
            vec![message("before")],
        )
        .await
        .unwrap();
    client.create_partitions(stream, topic, 2).await.unwrap();
    for partition in [2, 1] {
        let receipt = client
            .send(
                stream,
                topic,
                Partitioning::PartitionId(partition),
                vec![message("new")],
            )
            .await;
        assert!(receipt.is_ok(), "partition {partition}: {receipt:?}");
    }
    client.shutdown().await;
}

/// Balanced and keyed sends right after partitions we added through a follower
/// coordinator resolve against the new count: the follower's read of the topic carries its
/// metadata commit, below the one our write moved the client to, so it is read again until
/// the follower has applied the write. (Before, the follower's old count of 1 sent all four
/// balanced sends to partition 0.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_sends_right_after_partitions_we_added_through_a_follower_use_them() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    // Strict turns (no passing over a partition whose primary is still being found), so
    // that only the count decides.
    let mut config = config_via(&cluster, 2);
    config.balanced_skips_stalled = false;
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    client
        .send(
            stream,
            topic,
            Partitioning::Balanced,
            vec![message("before")],
        )
        .await
        .unwrap();
    client.create_partitions(stream, topic, 3).await.unwrap();
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let receipt = client
            .send(stream, topic, Partitioning::Balanced, vec![message("new")])
            .await
            .unwrap();
        partitions.insert(receipt.partition_id);
    }
    assert_eq!(
        partitions.len(),
        4,
        "four balanced sends over four partitions"
    );
    client.shutdown().await;
}

/// Defect 4: a poll right after our acknowledged send sees it, though the coordinator is
/// a backup of the partition whose copy lags by 250 ms. Plain and auto-commit polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_right_after_an_acknowledged_send_sees_it() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 2);
    assert!(cluster.set_primary(stream, topic, 1, 2));
    let client = client_via(&cluster, 0).await;
    for round in 0..5u64 {
        let text = format!("m{round}");
        let receipt = client
            .send(
                stream,
                topic,
                Partitioning::PartitionId(1),
                vec![message(&text)],
            )
            .await
            .unwrap();
        let plain = client
            .poll(
                stream,
                topic,
                Some(1),
                consumer(),
                PollingStrategy::Offset(round),
                10,
            )
            .await
            .unwrap();
        assert_eq!(
            plain.messages.first().map(|m| m.payload.clone()),
            Some(Bytes::from(text.clone())),
            "round {round}: acknowledged at offset {:?}",
            receipt.base_offset
        );
        let committing = client
            .poll_request(PollRequest {
                consumer: consumer(),
                stream: Identifier::Numeric(stream),
                topic: Identifier::Numeric(topic),
                partition_id: Some(1),
                strategy: PollingStrategy::Next,
                count: 10,
                auto_commit: true,
            })
            .await
            .unwrap();
        assert_eq!(
            committing.messages.last().map(|m| m.payload.clone()),
            Some(Bytes::from(text)),
            "round {round}: the auto-commit poll reads the primary, which commits it"
        );
    }
    assert_eq!(
        cluster.consumer_offset(stream, topic, 1, 1),
        Some(4),
        "every auto-commit landed on the primary"
    );
    client.shutdown().await;
}

/// Defect 5: the demo's stored count, taken at once after the sends, counts every
/// acknowledged message although the node answering it (the metadata leader) is a backup
/// of both partitions, whose copies lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_count_right_after_the_sends_counts_every_acknowledged_message() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 2);
    assert!(cluster.set_primary(stream, topic, 0, 1));
    assert!(cluster.set_primary(stream, topic, 1, 2));
    let client = client_via(&cluster, 0).await;
    for partition in [0, 1, 0, 1, 1] {
        client
            .send(
                stream,
                topic,
                Partitioning::PartitionId(partition),
                vec![message("m")],
            )
            .await
            .unwrap();
    }
    let config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    let stored = iggy_route_tests::demo::route_tokio::stored_messages(&config, stream, topic).await;
    assert_eq!(stored, Some(5));
    client.shutdown().await;
}

/// Defect 6: a cluster without routing commands is asked once per client, not once per
/// partition (each such request is a WARN line in the server's log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_missing_routing_commands_are_asked_for_once_per_client() {
    let cluster = real_like().await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 8);
    let client = client_via(&cluster, 0).await;
    // Every partition's first send at once: eight lanes that all want a route.
    let mut sends = tokio::task::JoinSet::new();
    for partition in 0..8 {
        let client = client.clone();
        sends.spawn(async move {
            client
                .send(
                    stream,
                    topic,
                    Partitioning::PartitionId(partition),
                    vec![message("m")],
                )
                .await
        });
    }
    while let Some(receipt) = sends.join_next().await {
        receipt.unwrap().unwrap();
    }
    assert_eq!(routing_lookups(&cluster), 1);
    client.shutdown().await;
}
