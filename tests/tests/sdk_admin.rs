//! The published SDK `iggy 0.11.0`, as an independent client, drives the stream, topic,
//! partition, segment, consumer-offset, flush and system commands against the loopback
//! cluster: if the real SDK decodes what the node model answers (including the
//! `TruncatePartition` reply to `DELETE_SEGMENTS`) and gets the error codes a 0.11.0 server
//! gives, the model speaks those commands the way the server does.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_tests::cluster::TestCluster;

async fn sdk_client(cluster: &TestCluster) -> IggyClient {
    let url = format!("iggy://iggy:iggy@{}", cluster.addr(0));
    let client = IggyClient::from_connection_string(&url).unwrap();
    client.connect().await.unwrap();
    client
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn code(result: Result<impl std::fmt::Debug, IggyError>) -> u32 {
    match result {
        Err(error) => error.as_code(),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

fn messages(count: u128) -> Vec<IggyMessage> {
    (1..=count)
        .map(|id| {
            IggyMessage::builder()
                .id(id)
                .payload(Bytes::from(format!("m{id}")))
                .build()
                .unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_administers_streams_topics_partitions_and_offsets() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(&cluster).await;
    client.ping().await.unwrap();
    client.create_stream("orders").await.unwrap();
    let options = TopicCreateOptions {
        partitions_count: Some(3),
        ..TopicCreateOptions::default()
    };
    client
        .create_topic(&named("orders"), "events", &options)
        .await
        .unwrap();
    let streams = client.get_streams().await.unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(
        (streams[0].name.as_str(), streams[0].topics_count),
        ("orders", 1)
    );
    let topics = client.get_topics(&named("orders")).await.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(
        (topics[0].name.as_str(), topics[0].partitions_count),
        ("events", 3)
    );
    assert!(client.get_topics(&named("nope")).await.unwrap().is_empty());

    client
        .update_stream(&named("orders"), "shop", &StreamUpdateOptions::default())
        .await
        .unwrap();
    let update = TopicUpdateOptions {
        compression_algorithm: Some(CompressionAlgorithm::Gzip),
        message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(60_000_000))),
        max_topic_size: Some(MaxTopicSize::Unlimited),
        raw: BTreeMap::new(),
    };
    client
        .update_topic(&named("shop"), &named("events"), "clicks", &update)
        .await
        .unwrap();
    let topic = client
        .get_topic(&named("shop"), &named("clicks"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(topic.compression_algorithm, CompressionAlgorithm::Gzip);
    assert_eq!(
        topic.message_expiry,
        IggyExpiry::ExpireDuration(IggyDuration::from(60_000_000))
    );
    assert_eq!(
        code(
            client
                .update_topic(&named("shop"), &named("missing"), "x", &update)
                .await
        ),
        2010
    );

    let (stream, topic) = (named("shop"), named("clicks"));
    client
        .send_messages(
            &stream,
            &topic,
            &Partitioning::partition_id(0),
            &mut messages(3),
        )
        .await
        .unwrap();
    let consumer = Consumer::new(Identifier::numeric(7).unwrap());
    client
        .store_consumer_offset(&consumer, &stream, &topic, Some(0), 1)
        .await
        .unwrap();
    let offset = client
        .get_consumer_offset(&consumer, &stream, &topic, Some(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((offset.stored_offset, offset.current_offset), (1, 2));
    client
        .delete_consumer_offset(&consumer, &stream, &topic, Some(0))
        .await
        .unwrap();
    let gone = client.get_consumer_offset(&consumer, &stream, &topic, Some(0));
    assert!(gone.await.unwrap().is_none());

    client.delete_segments(&stream, &topic, 0, 1).await.unwrap();
    assert_eq!(
        code(client.delete_segments(&stream, &topic, 9, 1).await),
        3007
    );
    assert_eq!(
        code(client.flush_unsaved_buffer(&stream, &topic, 0, true).await),
        IggyError::FeatureUnavailable.as_code()
    );

    client.purge_topic(&stream, &topic).await.unwrap();
    client.purge_stream(&stream).await.unwrap();
    let topic_details = client.get_topic(&stream, &topic).await.unwrap().unwrap();
    assert_eq!(topic_details.messages_count, 0);
    client.delete_partitions(&stream, &topic, 2).await.unwrap();
    let topic_details = client.get_topic(&stream, &topic).await.unwrap().unwrap();
    assert_eq!(topic_details.partitions_count, 1);

    client.delete_topic(&stream, &topic).await.unwrap();
    client.delete_stream(&stream).await.unwrap();
    assert!(client.get_streams().await.unwrap().is_empty());
    assert_eq!(code(client.delete_stream(&stream).await), 1009);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reads_stats_and_clients() {
    let cluster = TestCluster::start(1).await;
    let client = sdk_client(&cluster).await;
    client.create_stream("s").await.unwrap();
    let me = client.get_me().await.unwrap();
    let found = client.get_client(me.client_id).await.unwrap().unwrap();
    assert_eq!((found.client_id, found.user_id), (me.client_id, me.user_id));
    let clients = client.get_clients().await.unwrap();
    assert!(clients.iter().any(|c| c.client_id == me.client_id));
    assert!(client.get_client(u32::MAX).await.unwrap().is_none());
    let stats = client.get_stats().await.unwrap();
    assert_eq!(stats.streams_count, 1);
    assert_eq!(stats.clients_count, clients.len() as u32);
    cluster.shutdown().await;
}
