//! `iggy_route_tokio::Client` held as a program written against the SDK 0.11.0 holds its
//! client, `Arc<dyn iggy_common::Client>` (feature `sdk`): every method of the trait and its
//! supertraits, against the loopback cluster, each checked by what it did (a stream created
//! is then found, messages sent come back byte for byte at their offsets, a missing stream is
//! the code the SDK gets for it from the same cluster).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iggy::prelude::*;
use iggy_route_core::wire::Password;
use iggy_route_core::{Config, Credentials};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::iggy_common::DiagnosticEvent;

/// How long a read waits for a backup's copy to catch up with a write (the loopback
/// cluster's copies lag by up to 250 ms).
const CATCH_UP: Duration = Duration::from_secs(5);

fn config(cluster: &TestCluster) -> Config {
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(5);
    config
}

/// What a program written against the SDK holds: only the line that builds it differs.
async fn sdk_client(config: Config) -> Arc<dyn Client> {
    Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap())
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

fn numeric(id: u32) -> Identifier {
    Identifier::numeric(id).unwrap()
}

fn code<T: std::fmt::Debug>(result: Result<T, IggyError>) -> u32 {
    match result {
        Err(error) => error.as_code(),
        Ok(value) => panic!("expected an error, got {value:?}"),
    }
}

fn message(id: u128, payload: &str, header: Option<(&str, &str)>) -> IggyMessage {
    let headers = header.map(|(key, value)| {
        BTreeMap::from([(
            HeaderKey::from_str(key).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        )])
    });
    IggyMessage::builder()
        .id(id)
        .payload(Bytes::from(payload.to_owned()))
        .maybe_user_headers(headers)
        .build()
        .unwrap()
}

/// Polls `partition` from `from` until it holds `count` messages there.
async fn poll_until(
    client: &dyn Client,
    (stream, topic): (&Identifier, &Identifier),
    partition: u32,
    from: u64,
    count: usize,
) -> PolledMessages {
    let consumer = Consumer::new(numeric(70));
    let give_up = tokio::time::Instant::now() + CATCH_UP;
    loop {
        let polled = client
            .poll_messages(
                stream,
                topic,
                Some(partition),
                &consumer,
                &PollingStrategy::offset(from),
                10,
                false,
            )
            .await
            .unwrap();
        if polled.messages.len() >= count {
            return polled;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "partition {partition}: {} of {count} messages",
            polled.messages.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The stored offset of `consumer` on `partition`, once a read shows `expected`.
async fn stored_offset_becomes(
    client: &dyn Client,
    consumer: &Consumer,
    (stream, topic): (&Identifier, &Identifier),
    partition: u32,
    expected: Option<u64>,
) {
    let give_up = tokio::time::Instant::now() + CATCH_UP;
    loop {
        let offset = client
            .get_consumer_offset(consumer, stream, topic, Some(partition))
            .await
            .unwrap()
            .map(|info| info.stored_offset);
        if offset == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "stored offset {offset:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

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
    assert_eq!(code(missing), 2010);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_tokens_and_system_reads_through_the_sdk_traits() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(config(&cluster)).await;

    let me = client.get_me().await.unwrap();
    assert_eq!(me.user_id, Some(0));
    let found = client.get_client(me.client_id).await.unwrap().unwrap();
    assert_eq!((found.client_id, found.user_id), (me.client_id, Some(0)));
    let clients = client.get_clients().await.unwrap();
    assert!(clients.iter().any(|c| c.client_id == me.client_id));
    assert!(client.get_client(u32::MAX).await.unwrap().is_none());
    client.create_stream("s").await.unwrap();
    assert_eq!(client.get_stats().await.unwrap().streams_count, 1);
    let metadata = client.get_cluster_metadata().await.unwrap();
    assert_eq!(metadata.nodes.len(), 3);
    assert_eq!(
        metadata
            .nodes
            .iter()
            .filter(|n| n.role == ClusterNodeRole::Leader)
            .count(),
        1
    );
    assert_eq!(
        client.heartbeat_interval().await.get_duration(),
        Duration::from_secs(5)
    );
    assert_eq!(
        code(client.describe_options(OptionsScope::Topic).await),
        IggyError::FeatureUnavailable.as_code()
    );
    // Sent to the node holding the session, which has no snapshots: its own code.
    let snapshot = client
        .snapshot(
            SnapshotCompression::Deflated,
            vec![SystemSnapshotType::Test],
        )
        .await;
    assert_eq!(code(snapshot), IggyError::InvalidCommand.as_code());

    let permissions = Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            0,
            StreamPermissions {
                read_topics: true,
                send_messages: true,
                ..StreamPermissions::default()
            },
        )])),
    };
    let alice = client
        .create_user(
            "alice",
            "alice-pw",
            UserStatus::Active,
            Some(permissions.clone()),
        )
        .await
        .unwrap();
    assert_eq!((alice.id, alice.username.as_str()), (1, "alice"));
    assert_eq!(alice.permissions.as_ref(), Some(&permissions));
    let users = client.get_users().await.unwrap();
    assert_eq!(users.iter().map(|u| u.id).collect::<Vec<_>>(), [0, 1]);
    let read_back = client.get_user(&named("alice")).await.unwrap().unwrap();
    assert_eq!(read_back.permissions, Some(permissions));
    assert!(client.get_user(&named("nobody")).await.unwrap().is_none());
    let taken = client.create_user("alice", "other-pw", UserStatus::Active, None);
    assert_eq!(code(taken.await), IggyError::UserAlreadyExists.as_code());
    let short = client.create_user("al", "alice-pw", UserStatus::Active, None);
    assert_eq!(code(short.await), IggyError::InvalidUsername.as_code());

    let alice = numeric(1);
    client
        .update_user(
            &alice,
            Some("alicia"),
            Some(UserStatus::Inactive),
            &UserUpdateOptions::default(),
        )
        .await
        .unwrap();
    let renamed = client.get_user(&alice).await.unwrap().unwrap();
    assert_eq!(
        (renamed.username.as_str(), renamed.status),
        ("alicia", UserStatus::Inactive)
    );
    // With options the update is the SDK's own body; this cluster drops the block.
    let with_options = UserUpdateOptions {
        raw: BTreeMap::from([("note".to_owned(), "x".to_owned())]),
    };
    client
        .update_user(&alice, Some("alice"), None, &with_options)
        .await
        .unwrap();
    let back = client.get_user(&alice).await.unwrap().unwrap();
    assert_eq!(
        (back.username.as_str(), back.status),
        ("alice", UserStatus::Inactive)
    );
    client.update_permissions(&alice, None).await.unwrap();
    assert_eq!(
        client.get_user(&alice).await.unwrap().unwrap().permissions,
        None
    );
    client
        .change_password(&alice, "alice-pw", "alice-pw-2")
        .await
        .unwrap();
    let too_short = client.change_password(&alice, "alice-pw-2", "pw");
    assert_eq!(code(too_short.await), IggyError::InvalidPassword.as_code());
    client.delete_user(&alice).await.unwrap();
    assert!(client.get_user(&alice).await.unwrap().is_none());
    assert_eq!(
        code(client.delete_user(&numeric(0)).await),
        IggyError::CannotDeleteUser(0).as_code()
    );

    let token = client
        .create_personal_access_token("ci", IggyExpiry::NeverExpire)
        .await
        .unwrap()
        .token;
    assert!(!token.is_empty());
    let tokens = client.get_personal_access_tokens().await.unwrap();
    assert_eq!(
        tokens
            .iter()
            .map(|t| (t.name.as_str(), t.expiry_at))
            .collect::<Vec<_>>(),
        [("ci", None)]
    );
    let mut with_token = config(&cluster);
    with_token.credentials =
        Credentials::PersonalAccessToken(Password::new(token.clone()).unwrap());
    let token_client = sdk_client(with_token).await;
    let identity = token_client
        .login_with_personal_access_token(&token)
        .await
        .unwrap();
    assert_eq!(identity.user_id, 0);
    assert_eq!(
        code(
            token_client
                .login_with_personal_access_token("another-token")
                .await
        ),
        IggyError::FeatureUnavailable.as_code()
    );
    assert_eq!(
        code(token_client.login_user("iggy", "iggy").await),
        IggyError::FeatureUnavailable.as_code()
    );
    token_client.shutdown().await.unwrap();
    client.delete_personal_access_token("ci").await.unwrap();
    assert!(
        client
            .get_personal_access_tokens()
            .await
            .unwrap()
            .is_empty()
    );
    client.shutdown().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_logouts_disconnects_shutdown_and_their_events() {
    let cluster = TestCluster::start(3).await;
    let client = sdk_client(config(&cluster)).await;
    let mut events = client.subscribe_events().await;

    assert_eq!(client.login_user("iggy", "iggy").await.unwrap().user_id, 0);
    assert_eq!(
        code(client.login_user("iggy", "not-the-password").await),
        IggyError::FeatureUnavailable.as_code()
    );
    assert_eq!(
        code(client.login_user("ab", "iggy").await),
        IggyError::InvalidUsername.as_code()
    );

    client.logout_user().await.unwrap();
    assert_eq!(
        code(client.get_streams().await),
        IggyError::Unauthenticated.as_code()
    );
    assert_eq!(
        code(client.get_stats().await),
        IggyError::Unauthenticated.as_code()
    );
    client.ping().await.unwrap();
    assert_eq!(client.login_user("iggy", "iggy").await.unwrap().user_id, 0);
    assert!(client.get_streams().await.unwrap().is_empty());

    client.disconnect().await.unwrap();
    assert_eq!(
        code(client.get_streams().await),
        IggyError::Disconnected.as_code()
    );
    assert_eq!(code(client.ping().await), IggyError::NotConnected.as_code());
    client.disconnect().await.unwrap();
    client.connect().await.unwrap();
    client.create_stream("back").await.unwrap();
    assert_eq!(client.get_streams().await.unwrap().len(), 1);

    client.shutdown().await.unwrap();
    assert_eq!(
        code(client.get_streams().await),
        IggyError::ClientShutdown.as_code()
    );
    assert_eq!(
        code(client.connect().await),
        IggyError::ClientShutdown.as_code()
    );
    client.shutdown().await.unwrap();

    let mut seen = Vec::new();
    while let Ok(Ok(event)) = tokio::time::timeout(Duration::from_secs(1), events.recv()).await {
        seen.push(event);
    }
    // In this order, with the session link's own events possibly in between (a logout makes
    // the router sign the link in again).
    let expected = [
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::SignedOut,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Disconnected,
        DiagnosticEvent::Connected,
        DiagnosticEvent::SignedIn,
        DiagnosticEvent::Shutdown,
    ];
    let mut rest = seen.iter();
    for event in expected {
        assert!(
            rest.any(|seen| *seen == event),
            "{event} missing in order from {seen:?}"
        );
    }
    assert_eq!(seen.last(), Some(&DiagnosticEvent::Shutdown));
    cluster.shutdown().await;
}
