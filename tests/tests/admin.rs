//! The stream, topic, partition, segment, consumer-offset, flush and system commands through
//! the tokio client against a three-node loopback cluster: each succeeds where the server
//! admits it, answers `None` or an empty list where the server answers an empty payload,
//! and fails with the server's own code where the server refuses it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    CompressionAlgorithm, Consumer, ConsumerKind, ErrorCode, Identifier, Message, PollingStrategy,
    TopicUpdateOptions,
};
use iggy_route_core::{Config, Credentials, RequestError};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::Client;

fn config(cluster: &TestCluster) -> Config {
    let seeds: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let mut config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
    config.connect_timeout = Duration::from_millis(300);
    config
}

fn server_code(result: Result<impl std::fmt::Debug, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Request(RequestError::Server { code })) => code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

fn messages(count: usize) -> Vec<Message> {
    (0..count)
        .map(|index| Message {
            payload: format!("m{index}").into(),
            ..Message::default()
        })
        .collect()
}

fn consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(7),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_topics_partitions_and_offsets_end_to_end() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let client = Client::connect(config(&cluster)).await.unwrap();
    client.ping().await.unwrap();
    assert!(client.get_streams().await.unwrap().is_empty());
    client.create_stream("orders").await.unwrap();
    client.create_topic("orders", "events", 3).await.unwrap();
    let streams = client.get_streams().await.unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(
        (streams[0].name.as_str(), streams[0].topics_count),
        ("orders", 1)
    );
    let topics = client.get_topics("orders").await.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(
        (topics[0].name.as_str(), topics[0].partitions_count),
        ("events", 3)
    );
    assert!(client.get_topics("missing").await.unwrap().is_empty());

    // Renames and settings.
    client.update_stream("orders", "orders-v2").await.unwrap();
    assert!(client.get_stream("orders").await.unwrap().is_none());
    let options = TopicUpdateOptions {
        compression_algorithm: Some(CompressionAlgorithm::Gzip),
        message_expiry: Some(60_000_000),
        max_topic_size: None,
    };
    client
        .update_topic("orders-v2", "events", "events-v2", options)
        .await
        .unwrap();
    let topic = client
        .get_topic("orders-v2", "events-v2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (topic.summary.compression, topic.summary.message_expiry),
        (2, 60_000_000)
    );
    client.create_stream("taken").await.unwrap();
    assert_eq!(
        server_code(client.update_stream("orders-v2", "taken").await),
        ErrorCode::StreamNameAlreadyExists
    );

    // Offsets on the partition's primary.
    client
        .send(
            "orders-v2",
            "events-v2",
            Partitioning::partition_id(0),
            messages(3),
        )
        .await
        .unwrap();
    client
        .store_offset(consumer(), "orders-v2", "events-v2", 0, 1)
        .await
        .unwrap();
    let offset = client
        .get_consumer_offset(consumer(), "orders-v2", "events-v2", Some(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((offset.stored_offset, offset.current_offset), (1, 2));
    client
        .delete_consumer_offset(consumer(), "orders-v2", "events-v2", Some(0))
        .await
        .unwrap();
    assert!(
        client
            .get_consumer_offset(consumer(), "orders-v2", "events-v2", Some(0))
            .await
            .unwrap()
            .is_none()
    );

    // Purge keeps the partitions and restarts their offsets, once its wipe has landed: the
    // server acknowledges it first, and a send before the wipe counts on from the old offsets
    // (and is wiped with them).
    client.purge_topic("orders-v2", "events-v2").await.unwrap();
    let acknowledged = std::time::Instant::now();
    loop {
        let polled = client
            .poll(
                "orders-v2",
                "events-v2",
                Some(0),
                consumer(),
                PollingStrategy::Offset(0),
                10,
            )
            .await
            .unwrap();
        if polled.messages.is_empty() {
            break;
        }
        assert!(
            acknowledged.elapsed() < Duration::from_secs(5),
            "partition 0 still holds {} messages {:?} after its purge was acknowledged",
            polled.messages.len(),
            acknowledged.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let receipt = client
        .send(
            "orders-v2",
            "events-v2",
            Partitioning::partition_id(0),
            messages(1),
        )
        .await
        .unwrap();
    assert_eq!(receipt.base_offset, Some(0));
    client.purge_stream("orders-v2").await.unwrap();

    client
        .delete_partitions("orders-v2", "events-v2", 2)
        .await
        .unwrap();
    let topic = client
        .get_topic("orders-v2", "events-v2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(topic.summary.partitions_count, 1);
    assert_eq!(
        server_code(client.delete_partitions("orders-v2", "events-v2", 5).await),
        ErrorCode::Other(2019)
    );

    assert_eq!(
        server_code(
            client
                .flush_unsaved_buffer("orders-v2", "events-v2", 0, true)
                .await
        ),
        ErrorCode::FeatureUnavailable
    );

    client.delete_topic("orders-v2", "events-v2").await.unwrap();
    assert!(client.get_topics("orders-v2").await.unwrap().is_empty());
    client.delete_stream("orders-v2").await.unwrap();
    assert_eq!(
        server_code(client.delete_stream("orders-v2").await),
        ErrorCode::StreamIdNotFound
    );
    let names: Vec<String> = client
        .get_streams()
        .await
        .unwrap()
        .iter()
        .map(|stream| stream.name.to_string())
        .collect();
    assert_eq!(names, ["taken"]);
    client.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_reads_describe_the_session_s_own_node() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let client = Client::connect(config(&cluster)).await.unwrap();
    client.create_stream("s").await.unwrap();
    let me = client.get_me().await.unwrap();
    let found = client.get_client(me.client.client_id).await.unwrap();
    assert_eq!(found, Some(me.clone()));
    let clients = client.get_clients().await.unwrap();
    assert!(clients.contains(&me.client));
    assert_eq!(client.get_client(u32::MAX).await.unwrap(), None);
    let stats = client.get_stats().await.unwrap();
    assert_eq!(stats.streams_count, 1);
    assert!(stats.clients_count >= 1);
    client.shutdown().await;
    cluster.shutdown().await;
}
