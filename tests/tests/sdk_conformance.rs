//! The published SDK `iggy 0.11.0`, as an independent client, against the loopback cluster.
//!
//! If the real SDK can sign in, create, send, poll, route and store offsets here, the node
//! model speaks the protocol the way a real 0.11.0 server does. The last test reproduces the
//! bug report: with partition primaries split, every alternating send stalls for two 2 s
//! refusal windows and moves the SDK's session to another node.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::partitioning::resolve_partition;
use iggy_route_tests::cluster::{ClusterConfig, TestCluster};

/// Connect and sign in through `node` with the root credentials.
async fn sdk_client(cluster: &TestCluster, node: usize) -> IggyClient {
    let client = IggyClient::from_connection_string(&cluster.sdk_connection_string(node)).unwrap();
    client.connect().await.unwrap();
    client
}

async fn connected_node(client: &IggyClient, cluster: &TestCluster) -> usize {
    let address = client.get_connection_info().await.server_address;
    cluster
        .addrs()
        .iter()
        .position(|addr| addr.to_string() == address)
        .unwrap_or_else(|| panic!("the SDK is connected to {address}, not to a cluster node"))
}

fn id(value: u32) -> Identifier {
    Identifier::numeric(value).unwrap()
}

fn message(id: u128, payload: &str, header: Option<(&str, &str)>) -> IggyMessage {
    let headers = header.map(|(key, value)| {
        BTreeMap::from([(
            HeaderKey::try_from(key).unwrap(),
            HeaderValue::try_from(value).unwrap(),
        )])
    });
    IggyMessage::builder()
        .id(id)
        .payload(Bytes::from(payload.to_owned()))
        .maybe_user_headers(headers)
        .build()
        .unwrap()
}

async fn create_stream_and_topic(client: &IggyClient, partitions: u32) -> (u32, u32) {
    let stream = client.create_stream("orders").await.unwrap();
    let options = TopicCreateOptions {
        partitions_count: Some(partitions),
        ..TopicCreateOptions::default()
    };
    let topic = client
        .create_topic(&id(stream.id), "events", &options)
        .await
        .unwrap();
    (stream.id, topic.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_connects_signs_in_and_sees_one_leader_in_the_roster() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(&cluster, 0).await;
    client.ping().await.unwrap();
    let metadata = client.get_cluster_metadata().await.unwrap();
    assert_eq!(metadata.nodes.len(), 3);
    let leaders: Vec<_> = metadata
        .nodes
        .iter()
        .filter(|node| node.role == ClusterNodeRole::Leader)
        .collect();
    assert_eq!(leaders.len(), 1);
    assert_eq!(leaders[0].endpoints.tcp, cluster.addr(0).port());
    assert_eq!(connected_node(&client, &cluster).await, 0);
    assert_eq!(cluster.stats(0).logins, 1);
    assert!(cluster.stats(0).requests(1) >= 1, "the heartbeat pings");
    assert_eq!(cluster.stats(0).open_connections, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_on_a_follower_is_redirected_to_the_metadata_leader() {
    let cluster = TestCluster::start(3).await;
    cluster.set_metadata_leader(2);
    let client = sdk_client(&cluster, 0).await;
    assert_eq!(connected_node(&client, &cluster).await, 2);
    let (stream, topic) = create_stream_and_topic(&client, 2).await;
    assert_eq!((stream, topic), (0, 0), "0-based, as on the real cluster");
    assert_eq!(
        cluster.primary(stream, topic, 1),
        Some(2),
        "new partitions start on the leader"
    );
    assert_eq!(cluster.total_refusals(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_sends_to_explicit_partitions_and_polls_the_same_messages_back() {
    let cluster = TestCluster::start(1).await;
    let client = sdk_client(&cluster, 0).await;
    let (stream, topic) = create_stream_and_topic(&client, 3).await;
    let mut batch = vec![
        message(11, "first", Some(("kind", "created"))),
        message(12, "second", None),
        message(13, "third", Some(("kind", "shipped"))),
    ];
    let sent_headers: Vec<Option<Bytes>> = batch.iter().map(|m| m.user_headers.clone()).collect();
    client
        .send_messages(
            &id(stream),
            &id(topic),
            &Partitioning::partition_id(1),
            &mut batch,
        )
        .await
        .unwrap();
    let mut more = vec![message(14, "fourth", None)];
    client
        .send_messages(
            &id(stream),
            &id(topic),
            &Partitioning::partition_id(1),
            &mut more,
        )
        .await
        .unwrap();

    let polled = client
        .poll_messages(
            &id(stream),
            &id(topic),
            Some(1),
            &Consumer::new(id(7)),
            &PollingStrategy::offset(0),
            10,
            false,
        )
        .await
        .unwrap();
    assert_eq!(polled.partition_id, 1);
    assert_eq!(polled.current_offset, 3);
    let seen: Vec<(u64, u128, String)> = polled
        .messages
        .iter()
        .map(|m| (m.header.offset, m.header.id, m.payload_as_string().unwrap()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (0, 11, "first".to_owned()),
            (1, 12, "second".to_owned()),
            (2, 13, "third".to_owned()),
            (3, 14, "fourth".to_owned()),
        ]
    );
    for (polled, sent) in polled.messages.iter().zip(&sent_headers) {
        assert_eq!(&polled.user_headers.clone().filter(|h| !h.is_empty()), sent);
    }
    let kind = polled.messages[0]
        .get_user_header(&HeaderKey::try_from("kind").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(kind.as_str().unwrap(), "created");

    let log = cluster.partition_log(stream, topic, 1);
    assert_eq!(
        log.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![11, 12, 13, 14]
    );
    assert!(cluster.partition_log(stream, topic, 0).is_empty());
    assert_eq!(cluster.total_refusals(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_keyed_sends_land_on_the_hashed_partition() {
    let cluster = TestCluster::start(1).await;
    let client = sdk_client(&cluster, 0).await;
    let (stream, topic) = create_stream_and_topic(&client, 3).await;
    for (index, key) in ["order-1", "order-2", "abc"].into_iter().enumerate() {
        let mut batch = vec![message(100 + index as u128, key, None)];
        let partitioning = Partitioning::messages_key(key.as_bytes()).unwrap();
        client
            .send_messages(&id(stream), &id(topic), &partitioning, &mut batch)
            .await
            .unwrap();
        let partition = resolve_partition(key.as_bytes(), 3).unwrap();
        let log = cluster.partition_log(stream, topic, partition);
        assert!(
            log.iter().any(|m| m.payload.as_ref() == key.as_bytes()),
            "{key} must be stored in partition {partition}"
        );
        let polled = client
            .poll_messages(
                &id(stream),
                &id(topic),
                Some(partition),
                &Consumer::new(id(1)),
                &PollingStrategy::offset(0),
                10,
                false,
            )
            .await
            .unwrap();
        assert!(
            polled
                .messages
                .iter()
                .any(|m| m.header.id == 100 + index as u128)
        );
    }
    // The SDK read the partition count once, with GET_TOPIC.
    assert_eq!(cluster.stats(0).requests(300), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_routes_auto_commit_polls_and_offset_stores_to_the_partition_primary() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    let client = sdk_client(&cluster, 0).await;
    let mut batch = vec![message(1, "a", None), message(2, "b", None)];
    client
        .send_messages(
            &id(stream),
            &id(topic),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .unwrap();
    // A partition-only election: the primary moves, the metadata leader stays on node 0.
    assert!(cluster.set_primary(stream, topic, 0, 1));

    let polled = client
        .poll_messages(
            &id(stream),
            &id(topic),
            Some(0),
            &Consumer::new(id(5)),
            &PollingStrategy::next(),
            1,
            true,
        )
        .await
        .unwrap();
    assert_eq!(polled.messages.len(), 1);
    assert_eq!(polled.messages[0].header.id, 1);
    assert_eq!(cluster.consumer_offset(stream, topic, 0, 5), Some(0));
    assert!(
        cluster.stats(0).requests(103) >= 1,
        "routing asked on the coordinator"
    );
    assert!(
        cluster.stats(1).requests(14) >= 1,
        "the data connection attached"
    );
    assert!(
        cluster.stats(1).requests(104) >= 1,
        "the poll ran on the primary"
    );

    client
        .store_consumer_offset(&Consumer::new(id(5)), &id(stream), &id(topic), Some(0), 1)
        .await
        .unwrap();
    assert_eq!(cluster.consumer_offset(stream, topic, 0, 5), Some(1));
    assert!(cluster.stats(0).requests(123) >= 1);
    assert!(cluster.stats(1).requests(121) >= 1);
    let stored = client
        .get_consumer_offset(&Consumer::new(id(5)), &id(stream), &id(topic), Some(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.stored_offset, 1);

    // The session stayed on the coordinator throughout.
    assert_eq!(connected_node(&client, &cluster).await, 0);
    assert_eq!(cluster.total_refusals(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_against_a_server_without_routing_commands_gets_invalid_command() {
    let cluster = TestCluster::start_with(ClusterConfig {
        routing_commands: false,
        ..ClusterConfig::new(2)
    })
    .await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    let client = sdk_client(&cluster, 0).await;
    let mut batch = vec![message(1, "a", None)];
    client
        .send_messages(
            &id(stream),
            &id(topic),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .unwrap();
    // A manual poll is not routed, so it works on any server.
    let manual = client
        .poll_messages(
            &id(stream),
            &id(topic),
            Some(0),
            &Consumer::new(id(1)),
            &PollingStrategy::first(),
            10,
            false,
        )
        .await
        .unwrap();
    assert_eq!(manual.messages.len(), 1);
    // An auto-commit poll on a 2-node roster asks GET_POLL_ROUTING, which this server lacks.
    let routed = client
        .poll_messages(
            &id(stream),
            &id(topic),
            Some(0),
            &Consumer::new(id(1)),
            &PollingStrategy::first(),
            10,
            true,
        )
        .await
        .unwrap_err();
    assert_eq!(routed.as_code(), IggyError::InvalidCommand.as_code());
    assert_eq!(cluster.stats(0).requests(103), 1);
    assert_eq!(cluster.stats(1).requests(104), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_login_with_a_bad_password_fails() {
    let cluster = TestCluster::start(1).await;
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(cluster.addr(0).to_string())
        .build()
        .unwrap();
    client.connect().await.unwrap();
    let error = client
        .login_user("iggy", "not-the-password")
        .await
        .unwrap_err();
    assert_eq!(error.as_code(), IggyError::InvalidCredentials.as_code());
    assert_eq!(cluster.stats(0).login_failures, 1);
    assert_eq!(cluster.stats(0).logins, 0);
}

/// The bug report's scenario: partition 0's primary is node 0, partition 1's primary and
/// the metadata leader are node 2. Every alternating send waits out two refusal windows
/// (about 4 s) and then moves the SDK's only session to the other primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_sends_alternating_over_split_primaries_stall_and_move_the_session() {
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 1);
    let split = cluster.split_primaries(stream, topic, 0, 2, 2).await;
    assert_eq!(
        (
            cluster.primary(stream, topic, 0),
            cluster.primary(stream, topic, 1)
        ),
        (Some(0), Some(2))
    );
    assert_eq!(split.metadata_leader, 2);

    let client = sdk_client(&cluster, 2).await;
    let mut warm_up = vec![message(1, "warm-up", None)];
    client
        .send_messages(
            &id(stream),
            &id(topic),
            &Partitioning::partition_id(1),
            &mut warm_up,
        )
        .await
        .unwrap();
    assert_eq!(connected_node(&client, &cluster).await, 2);

    let logins_before = cluster.total_logins();
    let mut moves = Vec::new();
    for (index, partition) in [0u32, 1, 0, 1].into_iter().enumerate() {
        let from = connected_node(&client, &cluster).await;
        let mut batch = vec![message(10 + index as u128, "payload", None)];
        let started = Instant::now();
        client
            .send_messages(
                &id(stream),
                &id(topic),
                &Partitioning::partition_id(partition),
                &mut batch,
            )
            .await
            .unwrap();
        let took = started.elapsed();
        let to = connected_node(&client, &cluster).await;
        println!("send to partition {partition}: node {from} -> node {to} in {took:?}");
        moves.push((partition, from, to, took));
    }
    for &(partition, from, to, took) in &moves {
        assert!(
            took >= Duration::from_millis(3500),
            "partition {partition} send took {took:?}"
        );
        assert_ne!(
            from, to,
            "the send to partition {partition} moved the session"
        );
        assert_eq!(to, cluster.primary(stream, topic, partition).unwrap());
    }
    // Every move is a reconnect and a fresh sign-in.
    assert!(cluster.total_logins() - logins_before >= 4);
    // Roughly 40 refusals per 2 s window, two windows per send.
    assert!(
        cluster.total_refusals() >= 4 * 60,
        "refusals: {}",
        cluster.total_refusals()
    );
    let stored: Vec<u128> = cluster
        .partition_log(stream, topic, 0)
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(stored, vec![10, 12], "each send was admitted exactly once");
}
