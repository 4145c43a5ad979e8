//! Messages, their headers and offsets, and consumer groups through the SDK traits.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_with_user_headers_come_back_byte_identical_with_their_offsets() {
    let cluster = TestCluster::start(3).await;
    let (stream_id, topic_id) = cluster.create_stream_and_topic("orders", "events", 3);
    // No partition is led by the metadata leader (node 0): a send that reached any node but
    // its partition's primary would be refused.
    for partition in 0..3 {
        assert!(cluster.set_primary(stream_id, topic_id, partition, 1 + partition as usize % 2));
    }
    let client = sdk_client(config(&cluster)).await;
    let (stream, topic) = (named("orders"), named("events"));

    let mut messages = vec![
        message(11, "first", Some(("trace", "t-1"))),
        message(12, "second", None),
        message(0, "third", Some(("tenant", "acme"))),
    ];
    let sent = client
        .send_messages(
            &stream,
            &topic,
            &Partitioning::partition_id(1),
            &mut messages,
        )
        .await
        .unwrap();
    assert_ne!(
        messages[2].header.id, 0,
        "an id was minted and kept in the message"
    );
    let confirmations: Vec<(u32, u32, u32, u64)> = sent
        .confirmations
        .iter()
        .map(|c| (c.stream_id, c.topic_id, c.partition_id, c.base_offset))
        .collect();
    assert_eq!(confirmations, [(stream_id, topic_id, 1, 0)]);

    let polled = poll_until(&*client, (&stream, &topic), 1, 0, 3).await;
    assert_eq!(polled.partition_id, 1);
    for (offset, (got, sent)) in polled.messages.iter().zip(&messages).enumerate() {
        assert_eq!(got.header.offset, offset as u64);
        assert_eq!(got.header.id, sent.header.id);
        assert_eq!(got.payload, sent.payload);
        assert_eq!(
            got.user_headers, sent.user_headers,
            "user headers byte for byte"
        );
        assert_eq!(
            got.user_headers_map().unwrap(),
            sent.user_headers_map().unwrap()
        );
    }
    let from_second = client
        .poll_messages_with_strategy_for(
            &stream,
            &topic,
            Some(1),
            &Consumer::new(numeric(70)),
            &|partition| PollingStrategy::offset(u64::from(partition)),
            10,
            false,
        )
        .await
        .unwrap();
    assert_eq!(from_second.messages[0].header.offset, 1);

    // An auto-commit poll commits on the primary; the stored offset follows.
    let reader = Consumer::new(named("reader"));
    let committed = client
        .poll_messages(
            &stream,
            &topic,
            Some(1),
            &reader,
            &PollingStrategy::next(),
            10,
            true,
        )
        .await
        .unwrap();
    assert_eq!(committed.messages.len(), 3);
    stored_offset_becomes(&*client, &reader, (&stream, &topic), 1, Some(2)).await;
    client
        .store_consumer_offset(&reader, &stream, &topic, Some(1), 1)
        .await
        .unwrap();
    stored_offset_becomes(&*client, &reader, (&stream, &topic), 1, Some(1)).await;
    client
        .delete_consumer_offset(&reader, &stream, &topic, Some(1))
        .await
        .unwrap();
    stored_offset_becomes(&*client, &reader, (&stream, &topic), 1, None).await;
    assert_eq!(
        code(
            client
                .store_consumer_offset(&reader, &stream, &topic, None, 1)
                .await
        ),
        IggyError::ResourceNotFound(String::new()).as_code()
    );

    // Balanced sends go round the partitions; one key always to the same partition.
    let mut balanced = BTreeSet::new();
    for i in 0..3 {
        let mut one = vec![message(100 + i, "balanced", None)];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
            .await
            .unwrap();
        balanced.insert(sent.confirmations[0].partition_id);
    }
    assert_eq!(balanced, BTreeSet::from([0, 1, 2]));
    let key = Partitioning::messages_key_str("customer-7").unwrap();
    let mut keyed = BTreeSet::new();
    for i in 0..2 {
        let mut one = vec![message(200 + i, "keyed", None)];
        let sent = client
            .send_messages(&stream, &topic, &key, &mut one)
            .await
            .unwrap();
        keyed.insert(sent.confirmations[0].partition_id);
    }
    assert_eq!(keyed.len(), 1);

    let mut lost = vec![message(300, "lost", None)];
    let missing = client
        .send_messages(&named("nope"), &topic, &Partitioning::balanced(), &mut lost)
        .await;
    // As the SDK's own read of the topic answers a balanced send to a missing stream.
    assert_eq!(
        code(missing),
        IggyError::TopicIdNotFound(named("nope"), topic.clone()).as_code()
    );
    let missing = client
        .send_messages(
            &named("nope"),
            &topic,
            &Partitioning::partition_id(0),
            &mut lost,
        )
        .await;
    // As the server answers the SDK's send to a partition of a stream that does not exist.
    assert_eq!(
        code(missing),
        IggyError::ResourceNotFound(String::new()).as_code()
    );
    assert_eq!(
        code(client.flush_unsaved_buffer(&stream, &topic, 0, true).await),
        IggyError::FeatureUnavailable.as_code()
    );
    client.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_groups_and_group_polls_without_a_partition() {
    let cluster = TestCluster::start(3).await;
    let (stream_id, topic_id) = cluster.create_stream_and_topic("shop", "orders", 3);
    for partition in 0..3 {
        assert!(cluster.set_primary(stream_id, topic_id, partition, partition as usize));
    }
    let client = sdk_client(config(&cluster)).await;
    let (stream, topic) = (named("shop"), named("orders"));
    for partition in 0..3u32 {
        let mut two = vec![
            message(u128::from(partition) * 10 + 1, "a", None),
            message(u128::from(partition) * 10 + 2, "b", None),
        ];
        let partitioning = Partitioning::partition_id(partition);
        client
            .send_messages(&stream, &topic, &partitioning, &mut two)
            .await
            .unwrap();
    }

    let created = client
        .create_consumer_group(&stream, &topic, "billing")
        .await
        .unwrap();
    assert_eq!(
        (created.id, created.partitions_count, created.members_count),
        (0, 3, 0)
    );
    assert_eq!(
        code(
            client
                .create_consumer_group(&stream, &topic, "billing")
                .await
        ),
        5004
    );
    let groups = client.get_consumer_groups(&stream, &topic).await.unwrap();
    assert_eq!(
        groups
            .iter()
            .map(|g| (g.id, g.name.as_str()))
            .collect::<Vec<_>>(),
        [(0, "billing")]
    );
    let billing = named("billing");
    assert!(
        client
            .get_consumer_group(&stream, &topic, &numeric(9))
            .await
            .unwrap()
            .is_none()
    );

    let group = Consumer::group(billing.clone());
    let from_start = PollingStrategy::offset(0);
    let poll = || client.poll_messages(&stream, &topic, None, &group, &from_start, 10, false);
    assert_eq!(code(poll().await), 5006, "not a member yet");
    client
        .join_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    let details = client
        .get_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(details.members_count, 1);
    assert_eq!(details.members[0].partitions, [0, 1, 2]);

    // Without a partition, the member's own partitions are polled in turn.
    let mut read: BTreeMap<u32, Vec<u128>> = BTreeMap::new();
    let give_up = tokio::time::Instant::now() + CATCH_UP;
    while read.len() < 3 || read.values().any(|ids| ids.len() < 2) {
        assert!(tokio::time::Instant::now() < give_up, "read {read:?}");
        let polled = poll().await.unwrap();
        let ids = polled.messages.iter().map(|m| m.header.id).collect();
        read.insert(polled.partition_id, ids);
    }
    assert_eq!(
        read,
        BTreeMap::from([(0, vec![1, 2]), (1, vec![11, 12]), (2, vec![21, 22])])
    );

    // A second member takes the excess; the first, its assignment refreshed as the SDK's
    // heartbeat refreshes it, then polls only what it kept, and each reads its own.
    let second = sdk_client(config(&cluster)).await;
    second
        .join_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    client.refresh_consumer_group_assignments().await;
    let polled_by = |member: Arc<dyn Client>, polls: usize| {
        let (stream, topic, group) = (stream.clone(), topic.clone(), group.clone());
        async move {
            let mut partitions = BTreeSet::new();
            for _ in 0..polls {
                let polled = member
                    .poll_messages(&stream, &topic, None, &group, &from_start, 10, false)
                    .await
                    .unwrap();
                partitions.insert(polled.partition_id);
            }
            partitions
        }
    };
    assert_eq!(polled_by(client.clone(), 4).await, BTreeSet::from([0, 1]));
    assert_eq!(polled_by(second.clone(), 2).await, BTreeSet::from([2]));
    let details = client
        .get_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(details.members_count, 2);
    second.shutdown().await.unwrap();

    client
        .leave_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    assert_eq!(code(poll().await), 5006, "no longer a member");
    assert_eq!(
        code(client.leave_consumer_group(&stream, &topic, &billing).await),
        5006
    );
    client
        .delete_consumer_group(&stream, &topic, &billing)
        .await
        .unwrap();
    assert_eq!(
        code(
            client
                .delete_consumer_group(&stream, &topic, &billing)
                .await
        ),
        5000
    );
    assert!(
        client
            .get_consumer_group(&stream, &topic, &billing)
            .await
            .unwrap()
            .is_none()
    );
    client.shutdown().await.unwrap();
    cluster.shutdown().await;
}
