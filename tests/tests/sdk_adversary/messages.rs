//! Messages.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, faults::*, guards::*, probes::*, secrets::*, session_states::*,
    users::*,
};

pub(crate) const ORIGIN: u64 = 1_700_000_000_000_000;

/// One message with a fixed origin timestamp (so two runs compare) and `headers`.
pub(crate) fn message(
    id: u128,
    payload: &[u8],
    headers: Option<BTreeMap<HeaderKey, HeaderValue>>,
) -> IggyMessage {
    let mut message = IggyMessage::builder()
        .id(id)
        .payload(Bytes::copy_from_slice(payload))
        .maybe_user_headers(headers)
        .build()
        .unwrap();
    message.header.origin_timestamp = ORIGIN + u64::try_from(id % 1_000_000).unwrap();
    message
}

/// A header of every `HeaderKind`, keyed by keys of several kinds.
pub(crate) fn every_kind_of_header() -> BTreeMap<HeaderKey, HeaderValue> {
    let mut headers = BTreeMap::new();
    headers.insert(
        HeaderKey::from_str("raw").unwrap(),
        HeaderValue::try_from(&[0u8, 255, 7][..]).unwrap(),
    );
    headers.insert(
        HeaderKey::from_str("string").unwrap(),
        HeaderValue::from_str("zażółć ✓").unwrap(),
    );
    headers.insert(
        HeaderKey::from_str("bool").unwrap(),
        HeaderValue::from(true),
    );
    headers.insert(HeaderKey::from_str("i8").unwrap(), HeaderValue::from(-8i8));
    headers.insert(
        HeaderKey::from_str("i16").unwrap(),
        HeaderValue::from(-16i16),
    );
    headers.insert(
        HeaderKey::from_str("i32").unwrap(),
        HeaderValue::from(-32i32),
    );
    headers.insert(
        HeaderKey::from_str("i64").unwrap(),
        HeaderValue::from(i64::MIN),
    );
    headers.insert(
        HeaderKey::from_str("i128").unwrap(),
        HeaderValue::from(i128::MIN + 1),
    );
    headers.insert(
        HeaderKey::from_str("u8").unwrap(),
        HeaderValue::from(u8::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u16").unwrap(),
        HeaderValue::from(u16::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u32").unwrap(),
        HeaderValue::from(u32::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u64").unwrap(),
        HeaderValue::from(u64::MAX),
    );
    headers.insert(
        HeaderKey::from_str("u128").unwrap(),
        HeaderValue::from(u128::MAX),
    );
    headers.insert(
        HeaderKey::from_str("f32").unwrap(),
        HeaderValue::from(-1.5f32),
    );
    headers.insert(
        HeaderKey::from_str("f64").unwrap(),
        HeaderValue::from(f64::MAX),
    );
    // Keys of kinds other than strings.
    headers.insert(HeaderKey::from(7u32), HeaderValue::from(false));
    headers.insert(
        HeaderKey::from(-1i64),
        HeaderValue::from_str("negative key").unwrap(),
    );
    headers.insert(
        HeaderKey::try_from(&[1u8, 2, 3][..]).unwrap(),
        HeaderValue::from(0.25f64),
    );
    headers
}

pub(crate) fn digest(bytes: &[u8]) -> String {
    format!(
        "{}B#{:08x}",
        bytes.len(),
        twox_hash::XxHash32::oneshot(0, bytes)
    )
}

pub(crate) fn show_id(id: u128) -> String {
    if id < 1_000_000 {
        id.to_string()
    } else {
        "minted".to_owned()
    }
}

pub(crate) fn show_polled(polled: &PolledMessages) -> String {
    let messages: Vec<String> = polled
        .messages
        .iter()
        .map(|m| {
            let map = m
                .user_headers_map()
                .map_err(|e| e.as_code())
                .map(|map| map.map(|map| digest(format!("{map:?}").as_bytes())));
            format!(
                "[off {} id {} origin {} hlen {} plen {} payload {} headers {:?} map {:?}]",
                m.header.offset,
                show_id(m.header.id),
                m.header.origin_timestamp,
                m.header.user_headers_length,
                m.header.payload_length,
                digest(&m.payload),
                m.user_headers.as_deref().map(digest),
                map,
            )
        })
        .collect();
    format!(
        "partition {} current {} count {} {}",
        polled.partition_id,
        polled.current_offset,
        polled.count,
        messages.join(" ")
    )
}

pub(crate) fn show_sent(sent: &SendMessagesResponse) -> String {
    let confirmations: Vec<String> = sent
        .confirmations
        .iter()
        .map(|c| {
            format!(
                "({} {} {} {})",
                c.stream_id, c.topic_id, c.partition_id, c.base_offset
            )
        })
        .collect();
    confirmations.join(" ")
}

pub(crate) async fn poll(
    client: &dyn Client,
    stream: &Identifier,
    topic: &Identifier,
    partition: Option<u32>,
    consumer: &Consumer,
    strategy: PollingStrategy,
    count: u32,
    auto_commit: bool,
) -> Result<PolledMessages, IggyError> {
    client
        .poll_messages(
            stream,
            topic,
            partition,
            consumer,
            &strategy,
            count,
            auto_commit,
        )
        .await
}

/// Polls until `partition` holds at least `count` messages from 0, within 5 s: a backup's
/// copy lags, and a program on the SDK would see them at once from the primary.
pub(crate) async fn settled(
    client: &dyn Client,
    stream: &Identifier,
    topic: &Identifier,
    partition: u32,
    count: usize,
) {
    let by = Instant::now() + Duration::from_secs(5);
    loop {
        let polled = poll(
            client,
            stream,
            topic,
            Some(partition),
            &Consumer::new(numeric(999)),
            PollingStrategy::offset(0),
            1000,
            false,
        )
        .await;
        if polled.as_ref().is_ok_and(|p| p.messages.len() >= count) || Instant::now() > by {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn messaging_day<'a>(
    world: &'a World,
    trace: &'a mut Trace,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let (client, other, spread) = (&*world.a, &*world.b, world.spread.clone());
        let stream_name = "shop";
        let created = client.create_stream(stream_name).await;
        trace.debug("create_stream", &created);
        trace.debug(
            "create_stream again",
            &client.create_stream(stream_name).await.map(|s| s.id),
        );
        let stream = named(stream_name);
        let s = created.as_ref().map(|s| s.id).unwrap_or(0);
        trace.debug("get_stream by name", &client.get_stream(&stream).await);
        trace.debug("get_stream by id", &client.get_stream(&numeric(s)).await);

        let options = TopicCreateOptions {
            partitions_count: Some(3),
            compression_algorithm: Some(CompressionAlgorithm::Gzip),
            message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(
                3_600_000_000,
            ))),
            max_topic_size: Some(MaxTopicSize::Custom(IggyByteSize::from(2_000_000_000))),
            ..TopicCreateOptions::default()
        };
        let created = client.create_topic(&stream, "orders", &options).await;
        trace.debug("create_topic", &created);
        let t = created.as_ref().map(|t| t.id).unwrap_or(0);
        spread(s, t, 3);
        let topic = named("orders");
        trace.debug("get_topic", &client.get_topic(&stream, &topic).await);
        trace.debug("get_topics", &client.get_topics(&stream).await);

        // Explicit partition, a header of every kind, an id of 0 to be minted.
        let mut batch = vec![
            message(1, b"one", Some(every_kind_of_header())),
            message(0, b"two: id minted", None),
            message(
                3,
                &[0u8; 300],
                Some(BTreeMap::from([(
                    HeaderKey::from_str("k").unwrap(),
                    HeaderValue::from(1u8),
                )])),
            ),
        ];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut batch)
            .await;
        trace.result("send partition 1", &sent, show_sent);
        trace.note("minted id is not 0", batch[1].header.id != 0);
        let minted = batch[1].header.id;
        // The same stream and topic by number.
        let mut batch = vec![message(4, b"four", None)];
        let sent = client
            .send_messages(
                &numeric(s),
                &numeric(t),
                &Partitioning::partition_id(1),
                &mut batch,
            )
            .await;
        trace.result("send partition 1 by number", &sent, show_sent);

        // Balanced: the SDK goes round from partition 0.
        for i in 0..5u128 {
            let mut one = vec![message(100 + i, b"balanced", None)];
            let sent = client
                .send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
                .await;
            trace.result(&format!("send balanced {i}"), &sent, show_sent);
        }
        // Keys of every kind.
        let keys = [
            ("str", Partitioning::messages_key_str("customer-7").unwrap()),
            (
                "bytes",
                Partitioning::messages_key(&[0, 1, 2, 3, 4, 5]).unwrap(),
            ),
            ("u32", Partitioning::messages_key_u32(77)),
            ("u64", Partitioning::messages_key_u64(u64::MAX)),
            (
                "u128",
                Partitioning::messages_key_u128(12_345_678_901_234_567_890),
            ),
        ];
        for (index, (kind, key)) in keys.iter().enumerate() {
            let mut one = vec![message(200 + index as u128, kind.as_bytes(), None)];
            let sent = client.send_messages(&stream, &topic, key, &mut one).await;
            trace.result(&format!("send keyed {kind}"), &sent, show_sent);
        }

        // What may not be sent.
        let mut one = vec![message(300, b"x", None)];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(3), &mut one)
            .await;
        trace.result("send to partition 3 of 3", &sent, show_sent);
        let sent = client
            .send_messages(
                &stream,
                &named("nope"),
                &Partitioning::partition_id(0),
                &mut one,
            )
            .await;
        trace.result("send to a missing topic", &sent, show_sent);
        let sent = client
            .send_messages(&named("nope"), &topic, &Partitioning::balanced(), &mut one)
            .await;
        trace.result("send balanced to a missing stream", &sent, show_sent);
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut [])
            .await;
        trace.result("send nothing", &sent, show_sent);

        for partition in 0..3 {
            let expected = [0, 4, 0][partition as usize];
            settled(client, &stream, &topic, partition, expected).await;
        }
        let consumer = Consumer::new(numeric(1));
        // Every polling strategy on partition 1.
        let strategies = [
            ("offset 0", PollingStrategy::offset(0)),
            ("offset 2", PollingStrategy::offset(2)),
            ("offset 99", PollingStrategy::offset(99)),
            ("first", PollingStrategy::first()),
            ("last", PollingStrategy::last()),
            (
                "timestamp 0",
                PollingStrategy::timestamp(IggyTimestamp::from(0)),
            ),
            (
                "timestamp max",
                PollingStrategy::timestamp(IggyTimestamp::from(u64::MAX)),
            ),
        ];
        for (name, strategy) in strategies {
            for count in [1, 2, 100] {
                let polled = poll(
                    client,
                    &stream,
                    &topic,
                    Some(1),
                    &consumer,
                    strategy,
                    count,
                    false,
                )
                .await;
                trace.result(&format!("poll {name} count {count}"), &polled, show_polled);
            }
        }
        let all = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::offset(0),
            10,
            false,
        )
        .await
        .unwrap();
        trace.note(
            "minted id read back",
            all.messages.get(1).map(|m| m.header.id == minted),
        );
        let third = all.messages.get(2).map_or(0, |m| m.header.timestamp);
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::timestamp(IggyTimestamp::from(third)),
            10,
            false,
        )
        .await;
        trace.result("poll from the third message's timestamp", &polled, |p| {
            format!(
                "{:?}",
                p.messages
                    .iter()
                    .map(|m| m.header.offset)
                    .collect::<Vec<_>>()
            )
        });
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &consumer,
            PollingStrategy::offset(0),
            0,
            false,
        )
        .await;
        trace.result("poll count 0", &polled, show_polled);
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(7),
            &consumer,
            PollingStrategy::offset(0),
            1,
            false,
        )
        .await;
        trace.result("poll partition 7", &polled, show_polled);
        let polled = poll(
            client,
            &stream,
            &named("nope"),
            Some(0),
            &consumer,
            PollingStrategy::offset(0),
            1,
            false,
        )
        .await;
        trace.result("poll a missing topic", &polled, show_polled);

        // Next with auto-commit walks the partition one message at a time.
        let walker = Consumer::new(named("walker"));
        for step in 0..6 {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &walker,
                PollingStrategy::next(),
                1,
                true,
            )
            .await;
            trace.result(
                &format!("poll next auto-commit {step}"),
                &polled,
                show_polled,
            );
        }
        let offset = client
            .get_consumer_offset(&walker, &stream, &topic, Some(1))
            .await;
        trace.debug("walker's offset", &offset);
        // Next without auto-commit does not move.
        let still = Consumer::new(numeric(2));
        for step in 0..2 {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &still,
                PollingStrategy::next(),
                1,
                false,
            )
            .await;
            trace.result(&format!("poll next no commit {step}"), &polled, show_polled);
        }

        // Consumer offsets.
        trace.debug(
            "get offset never stored",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "store offset 2",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(1), 2)
                .await,
        );
        trace.debug(
            "get offset 2",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        let polled = poll(
            client,
            &stream,
            &topic,
            Some(1),
            &still,
            PollingStrategy::next(),
            10,
            false,
        )
        .await;
        trace.result("poll next after store 2", &polled, show_polled);
        trace.debug(
            "store offset past the end",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(1), 1_000)
                .await,
        );
        trace.debug(
            "store offset on partition 9",
            &client
                .store_consumer_offset(&still, &stream, &topic, Some(9), 0)
                .await,
        );
        trace.debug(
            "get offset on partition 9",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(9))
                .await,
        );
        trace.debug(
            "get offset, no partition",
            &client
                .get_consumer_offset(&still, &stream, &topic, None)
                .await,
        );
        trace.debug(
            "delete offset",
            &client
                .delete_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "delete offset again",
            &client
                .delete_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );
        trace.debug(
            "get offset deleted",
            &client
                .get_consumer_offset(&still, &stream, &topic, Some(1))
                .await,
        );

        // Consumer groups polled without a partition by two members.
        let group = client
            .create_consumer_group(&stream, &topic, "billing")
            .await;
        trace.debug("create_consumer_group", &group);
        let billing = named("billing");
        let member = Consumer::group(billing.clone());
        trace.debug(
            "join",
            &client.join_consumer_group(&stream, &topic, &billing).await,
        );
        trace.debug(
            "join again",
            &client.join_consumer_group(&stream, &topic, &billing).await,
        );
        for step in 0..4 {
            let polled = poll(
                client,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::offset(0),
                10,
                false,
            )
            .await;
            trace.result(&format!("group poll alone {step}"), &polled, show_polled);
        }
        trace.debug(
            "second joins",
            &other.join_consumer_group(&stream, &topic, &billing).await,
        );
        // No explicit `refresh_consumer_group_assignments`: the SDK's `IggyClient` ignores
        // it (see the probes), so both clients go on with the assignment they read.
        let mut group_details = client.get_consumer_group(&stream, &topic, &billing).await;
        if let Ok(Some(details)) = group_details.as_mut() {
            details.members.sort_by_key(|m| m.partitions.clone());
            for member in &mut details.members {
                member.id = 0;
            }
        }
        trace.debug("group of two", &group_details);
        for step in 0..4 {
            let polled = poll(
                client,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::next(),
                10,
                true,
            )
            .await;
            trace.result(
                &format!("group poll first member {step}"),
                &polled,
                show_polled,
            );
            let polled = poll(
                other,
                &stream,
                &topic,
                None,
                &member,
                PollingStrategy::next(),
                10,
                true,
            )
            .await;
            trace.result(
                &format!("group poll second member {step}"),
                &polled,
                show_polled,
            );
        }
        for partition in 0..3 {
            let offset = client
                .get_consumer_offset(&member, &stream, &topic, Some(partition))
                .await;
            trace.debug(&format!("group offset on {partition}"), &offset);
        }
        trace.debug(
            "leave",
            &other.leave_consumer_group(&stream, &topic, &billing).await,
        );
        trace.debug(
            "leave again",
            &other.leave_consumer_group(&stream, &topic, &billing).await,
        );
        let polled = poll(
            other,
            &stream,
            &topic,
            None,
            &member,
            PollingStrategy::next(),
            10,
            false,
        )
        .await;
        trace.result("group poll by a member who left", &polled, show_polled);
        trace.debug(
            "get_consumer_groups",
            &client.get_consumer_groups(&stream, &topic).await.map(|g| {
                g.iter()
                    .map(|g| (g.id, g.name.clone(), g.partitions_count))
                    .collect::<Vec<_>>()
            }),
        );

        // Purge, partitions, renames, deletes.
        trace.debug("purge_topic", &client.purge_topic(&stream, &topic).await);
        let by = Instant::now() + Duration::from_secs(5);
        let mut emptied = false;
        while Instant::now() < by {
            let polled = poll(
                client,
                &stream,
                &topic,
                Some(1),
                &consumer,
                PollingStrategy::offset(0),
                10,
                false,
            )
            .await;
            if polled.is_ok_and(|p| p.messages.is_empty()) {
                emptied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trace.note("purged within 5 s", emptied);
        let mut again = vec![message(500, b"after purge", None)];
        let sent = client
            .send_messages(&stream, &topic, &Partitioning::partition_id(1), &mut again)
            .await;
        trace.result("send after purge", &sent, show_sent);
        trace.debug(
            "create_partitions 2",
            &client.create_partitions(&stream, &topic, 2).await,
        );
        spread(s, t, 5);
        let topic_now = client.get_topic(&stream, &topic).await;
        trace.result("partitions after create", &topic_now, |t| {
            format!("{:?}", t.as_ref().map(|t| t.partitions_count))
        });
        for i in 0..6u128 {
            let mut one = vec![message(600 + i, b"balanced after growth", None)];
            let sent = client
                .send_messages(&stream, &topic, &Partitioning::balanced(), &mut one)
                .await;
            trace.result(&format!("send balanced after growth {i}"), &sent, show_sent);
        }
        // The same topic named by number: the SDK keeps a cursor (and a partitions count)
        // per way of naming it.
        for i in 0..4u128 {
            let mut one = vec![message(650 + i, b"balanced by number", None)];
            let sent = client
                .send_messages(
                    &numeric(s),
                    &numeric(t),
                    &Partitioning::balanced(),
                    &mut one,
                )
                .await;
            trace.result(&format!("send balanced by number {i}"), &sent, show_sent);
        }
        trace.debug(
            "delete_partitions 4",
            &client.delete_partitions(&stream, &topic, 4).await,
        );
        trace.debug(
            "delete_partitions 9",
            &client.delete_partitions(&stream, &topic, 9).await,
        );
        trace.debug(
            "update_topic",
            &client
                .update_topic(&stream, &topic, "renamed", &TopicUpdateOptions::default())
                .await,
        );
        trace.debug(
            "get old topic name",
            &client.get_topic(&stream, &topic).await.map(|t| t.is_some()),
        );
        let renamed = named("renamed");
        let mut one = vec![message(700, b"renamed", None)];
        let sent = client
            .send_messages(&stream, &renamed, &Partitioning::partition_id(0), &mut one)
            .await;
        trace.result("send to the renamed topic", &sent, show_sent);
        trace.debug(
            "update_stream",
            &client
                .update_stream(&stream, "store", &StreamUpdateOptions::default())
                .await,
        );
        let store = named("store");
        trace.debug("get_streams", &client.get_streams().await);
        trace.debug("delete_topic", &client.delete_topic(&store, &renamed).await);
        trace.debug(
            "delete_topic again",
            &client.delete_topic(&store, &renamed).await,
        );
        trace.debug(
            "purge a missing topic",
            &client.purge_topic(&store, &renamed).await,
        );
        trace.debug("delete_stream", &client.delete_stream(&store).await);
        trace.debug("delete_stream again", &client.delete_stream(&store).await);
        trace.debug("purge_stream missing", &client.purge_stream(&store).await);
        trace.debug("get_streams at the end", &client.get_streams().await);
    })
}

#[ignore = "differs where documented: after create_partitions, iggy-route balances over the new count and the SDK over the count it first read"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_messaging_gives_the_same_results_as_the_sdk() {
    differential("messaging day", messaging_day, false).await;
}
