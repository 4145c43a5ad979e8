//! Streams, topics, partitions and segments through the SDK traits.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_topics_partitions_and_segments_through_the_sdk_traits() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(config(&cluster)).await;
    client.connect().await.unwrap();
    client.ping().await.unwrap();

    let created = client.create_stream("orders").await.unwrap();
    assert_eq!((created.name.as_str(), created.topics_count), ("orders", 0));
    let found = client.get_stream(&named("orders")).await.unwrap().unwrap();
    assert_eq!((found.id, found.name.as_str()), (created.id, "orders"));
    assert!(client.get_stream(&named("nope")).await.unwrap().is_none());

    let options = TopicCreateOptions {
        partitions_count: Some(3),
        message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(60_000_000))),
        segment_size: Some(IggyByteSize::from(16 * 1024 * 1024)),
        ..TopicCreateOptions::default()
    };
    let topic = client
        .create_topic(&named("orders"), "events", &options)
        .await
        .unwrap();
    assert_eq!((topic.name.as_str(), topic.partitions_count), ("events", 3));
    assert_eq!(
        topic.partitions.iter().map(|p| p.id).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    // The topic's options went in the SDK's own block (this cluster checks the block and
    // keeps no option); iggy-route's router, which did not see the create as its own, finds
    // the new topic's partitions for a send.
    let mut first = vec![message(1, "first", Some(("k", "v")))];
    let events = named("events");
    let sent = client
        .send_messages(
            &named("orders"),
            &events,
            &Partitioning::balanced(),
            &mut first,
        )
        .await
        .unwrap();
    let partition = sent.confirmations[0].partition_id;
    let polled = poll_until(&*client, (&named("orders"), &events), partition, 0, 1).await;
    assert_eq!(polled.messages[0].user_headers, first[0].user_headers);
    let stream = client.get_stream(&named("orders")).await.unwrap().unwrap();
    assert_eq!(stream.topics.len(), 1);
    assert_eq!(stream.topics[0].name, "events");
    let topics = client.get_topics(&named("orders")).await.unwrap();
    assert_eq!(
        topics
            .iter()
            .map(|t| (t.name.as_str(), t.partitions_count))
            .collect::<Vec<_>>(),
        [("events", 3)]
    );
    assert!(client.get_topics(&named("nope")).await.unwrap().is_empty());
    assert_eq!(
        code(client.create_topic(&named("nope"), "t", &options).await),
        1009
    );

    let (stream, topic) = (named("orders"), named("events"));
    let update = TopicUpdateOptions {
        compression_algorithm: Some(CompressionAlgorithm::Gzip),
        message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(90_000_000))),
        max_topic_size: Some(MaxTopicSize::Unlimited),
        raw: BTreeMap::new(),
    };
    client
        .update_topic(&stream, &topic, "clicks", &update)
        .await
        .unwrap();
    let clicks = client
        .get_topic(&stream, &named("clicks"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(clicks.compression_algorithm, CompressionAlgorithm::Gzip);
    assert_eq!(
        clicks.message_expiry,
        IggyExpiry::ExpireDuration(IggyDuration::from(90_000_000))
    );
    assert_eq!(clicks.max_topic_size, MaxTopicSize::Unlimited);
    // `raw` keys ride the SDK's own options block, and the server judges them: a key it
    // does not update, and a known key whose value it cannot read.
    let raw = |key: &str, value: &str| TopicUpdateOptions {
        raw: BTreeMap::from([(key.to_owned(), value.to_owned())]),
        ..TopicUpdateOptions::default()
    };
    let topic = named("clicks");
    let unsupported = raw("preallocate_segments", "true");
    assert_eq!(
        code(
            client
                .update_topic(&stream, &topic, "clicks", &unsupported)
                .await
        ),
        IggyError::UnsupportedOptionKey(String::new()).as_code()
    );
    let unreadable = raw("message_expiry", "7 days");
    assert_eq!(
        code(
            client
                .update_topic(&stream, &topic, "clicks", &unreadable)
                .await
        ),
        IggyError::InvalidOptionValue(String::new()).as_code()
    );
    assert_eq!(
        code(
            client
                .update_topic(&stream, &named("missing"), "x", &update)
                .await
        ),
        2010
    );

    client
        .update_stream(&stream, "shop", &StreamUpdateOptions::default())
        .await
        .unwrap();
    let stream = named("shop");
    assert!(client.get_stream(&stream).await.unwrap().is_some());
    let stream_option = StreamUpdateOptions {
        raw: BTreeMap::from([("retention".to_owned(), "1".to_owned())]),
    };
    assert_eq!(
        code(client.update_stream(&stream, "shop", &stream_option).await),
        IggyError::UnsupportedOptionKey(String::new()).as_code()
    );

    client.create_partitions(&stream, &topic, 2).await.unwrap();
    let grown = client.get_topic(&stream, &topic).await.unwrap().unwrap();
    assert_eq!(grown.partitions_count, 5);
    client.delete_partitions(&stream, &topic, 1).await.unwrap();
    let shrunk = client.get_topic(&stream, &topic).await.unwrap().unwrap();
    assert_eq!(shrunk.partitions_count, 4);

    client.delete_segments(&stream, &topic, 0, 1).await.unwrap();
    assert_eq!(
        code(client.delete_segments(&stream, &topic, 9, 1).await),
        3007
    );
    client.purge_topic(&stream, &topic).await.unwrap();
    client.purge_stream(&stream).await.unwrap();
    let purged = client.get_topic(&stream, &topic).await.unwrap().unwrap();
    assert_eq!((purged.messages_count, purged.partitions_count), (0, 4));

    client.delete_topic(&stream, &topic).await.unwrap();
    assert!(client.get_topic(&stream, &topic).await.unwrap().is_none());
    client.delete_stream(&stream).await.unwrap();
    assert!(client.get_streams().await.unwrap().is_empty());
    assert_eq!(code(client.delete_stream(&stream).await), 1009);
    client.shutdown().await.unwrap();
    cluster.shutdown().await;
}
