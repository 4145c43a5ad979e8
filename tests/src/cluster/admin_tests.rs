//! The administration and system commands of the node model, answered as the 0.11.0 server
//! answers them: each command's success, its not-found answers, a taken name, the checks
//! made before consensus (status channel) and the leader-only admission (result section).
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::wire::{
    CompressionAlgorithm, Consumer, ConsumerKind, ConsumerOffsetInfo, ConsumerOffsetKey,
    DeleteStreamRequest, DeleteTopicRequest, ErrorCode, GetStreamRequest, GetTopicRequest,
    GetTopicsRequest, Identifier, Name, Operation, PollMessagesReply, SendMessagesReply,
    StoreConsumerOffsetRequest, StreamDetails, StreamSummary, TopicDetails, TopicSummary,
    TopicUpdateOptions, UpdateStreamRequest, UpdateTopicRequest, code,
};

use super::PURGE_RECONCILE;
use super::catalog::Lookup;
use super::testkit::{Client, cluster, encode, poll_body, seed_topic, send_body};

pub(super) fn id(text: &str) -> Identifier {
    Identifier::try_from(text).unwrap()
}

fn name(text: &str) -> Name {
    Name::new(text).unwrap()
}

fn update_stream(stream: Identifier, new_name: &str) -> Bytes {
    let request = UpdateStreamRequest {
        stream,
        name: name(new_name),
        options: Bytes::new(),
    };
    encode(|o| request.encode(o))
}

fn update_topic(
    stream: Identifier,
    topic: Identifier,
    new_name: &str,
    options: TopicUpdateOptions,
) -> Bytes {
    let request = UpdateTopicRequest::new(stream, topic, name(new_name), &options);
    encode(|o| request.encode(o))
}

/// A `[stream]` body: `DELETE_STREAM`'s and `PURGE_STREAM`'s are the same bytes.
fn stream_body(stream: Identifier) -> Bytes {
    encode(|o| DeleteStreamRequest { stream }.encode(o))
}

/// A `[stream][topic]` body: `DELETE_TOPIC`'s and `PURGE_TOPIC`'s are the same bytes.
fn topic_body(stream: Identifier, topic: Identifier) -> Bytes {
    encode(|o| DeleteTopicRequest { stream, topic }.encode(o))
}

pub(super) fn get_topic(
    client: &mut Client,
    state: &mut super::ClusterState,
    topic: Identifier,
) -> Option<TopicDetails> {
    let request = GetTopicRequest {
        stream: 0.into(),
        topic,
    };
    let body = client
        .read(state, code::GET_TOPIC, encode(|o| request.encode(o)))
        .body();
    (!body.is_empty()).then(|| TopicDetails::decode(&body).unwrap())
}

/// A plain consumer's key: a group's offset is written only by a member of the group that
/// owns the partition (see `handlers_offsets`), which these tests are not about.
pub(super) fn offset_key(partition_id: Option<u32>) -> ConsumerOffsetKey {
    ConsumerOffsetKey {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(9),
        },
        stream: 0.into(),
        topic: 0.into(),
        partition_id,
    }
}

pub(super) fn store_offset(partition: u32, offset: u64) -> Bytes {
    let request = StoreConsumerOffsetRequest {
        key: offset_key(Some(partition)),
        offset,
    };
    encode(|o| request.encode(o))
}

// ---- streams -----------------------------------------------------------------------

#[test]
fn get_streams_lists_every_stream_and_an_empty_cluster_answers_nothing() {
    let mut state = cluster(2);
    let mut client = Client::signed_in(&mut state, 1, 1);
    assert!(
        client
            .read(&mut state, code::GET_STREAMS, Bytes::new())
            .body()
            .is_empty()
    );
    seed_topic(&mut state, 2);
    state.catalog.create_stream("other", 5).unwrap();
    let body = client
        .read(&mut state, code::GET_STREAMS, Bytes::new())
        .body();
    let streams = StreamSummary::decode_list(&body).unwrap();
    let listed: Vec<(u32, &str, u32)> = streams
        .iter()
        .map(|s| (s.id, s.name.as_str(), s.topics_count))
        .collect();
    assert_eq!(listed, [(0, "s", 1), (1, "other", 0)]);
}

#[test]
fn update_stream_renames_refuses_a_taken_name_and_a_missing_stream() {
    let mut state = cluster(2);
    seed_topic(&mut state, 1);
    state.catalog.create_stream("taken", 1).unwrap();
    let mut leader = Client::signed_in(&mut state, 0, 1);
    let before = state.commit();
    let renamed = leader.write(
        &mut state,
        Operation::UpdateStream,
        update_stream(id("s"), "s2"),
    );
    assert_eq!(renamed.result_code(), 0);
    assert!(renamed.result_payload().is_empty());
    assert_eq!(renamed.header().commit, before + 1);
    assert_eq!(state.catalog.stream(Lookup::Name("s2")).unwrap().id, 0);
    // Its own name is not taken.
    let same = leader.write(
        &mut state,
        Operation::UpdateStream,
        update_stream(0.into(), "s2"),
    );
    assert_eq!(same.result_code(), 0);

    let taken = leader.write(
        &mut state,
        Operation::UpdateStream,
        update_stream(0.into(), "taken"),
    );
    assert_eq!(
        taken.result_code(),
        ErrorCode::StreamNameAlreadyExists.as_u32()
    );
    let missing = leader.write(
        &mut state,
        Operation::UpdateStream,
        update_stream(9.into(), "x"),
    );
    assert_eq!(missing.result_code(), ErrorCode::StreamIdNotFound.as_u32());

    let mut follower = Client::signed_in(&mut state, 1, 2);
    let refused = follower.write(
        &mut state,
        Operation::UpdateStream,
        update_stream(0.into(), "y"),
    );
    assert_eq!(
        refused.result_code(),
        ErrorCode::TransientNotAccepted.as_u32()
    );
    assert_eq!(state.stats(1).refusals, 1);

    // Any option key is refused by name, before consensus, on any node.
    let with_option = UpdateStreamRequest {
        stream: 0.into(),
        name: name("z"),
        options: Bytes::from_static(&[2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v']),
    };
    let unsupported = follower.write(
        &mut state,
        Operation::UpdateStream,
        encode(|o| with_option.encode(o)),
    );
    assert_eq!(unsupported.status(), 4041);
    let garbage = leader.write(
        &mut state,
        Operation::UpdateStream,
        Bytes::from_static(&[7]),
    );
    assert_eq!(garbage.status(), ErrorCode::InvalidCommand.as_u32());
    assert!(state.catalog.stream(Lookup::Name("s2")).is_some());
}

#[test]
fn delete_stream_removes_it_and_its_id_goes_to_the_next_stream() {
    let mut state = cluster(1);
    seed_topic(&mut state, 1);
    let mut client = Client::signed_in(&mut state, 0, 1);
    let deleted = client.write(&mut state, Operation::DeleteStream, stream_body(id("s")));
    assert_eq!(deleted.result_code(), 0);
    let get = GetStreamRequest { stream: 0.into() };
    let body = client
        .read(&mut state, code::GET_STREAM, encode(|o| get.encode(o)))
        .body();
    assert!(body.is_empty());
    let again = client.write(&mut state, Operation::DeleteStream, stream_body(0.into()));
    assert_eq!(again.result_code(), ErrorCode::StreamIdNotFound.as_u32());
    assert_eq!(state.catalog.create_stream("next", 9), Ok(0));
}

/// Moves the model's clock past the wipe of a purge acknowledged just now.
fn let_the_purge_land(state: &mut super::ClusterState) {
    let delay = u64::try_from(PURGE_RECONCILE.as_micros()).unwrap();
    let now = state.now_micros();
    state.set_now_micros(now + delay);
}

/// The offsets (and payloads) a plain poll from offset 0 returns from `partition`.
fn polled(
    client: &mut Client,
    state: &mut super::ClusterState,
    partition: u32,
) -> PollMessagesReply {
    let answer = client.read(
        state,
        code::POLL_MESSAGES,
        poll_body(0, 0, partition, false),
    );
    PollMessagesReply::decode(&answer.body()).unwrap()
}

fn polled_payloads(
    client: &mut Client,
    state: &mut super::ClusterState,
    partition: u32,
) -> Vec<(u64, Bytes)> {
    polled(client, state, partition)
        .messages
        .into_iter()
        .map(|message| (message.offset, message.payload))
        .collect()
}

fn stored_offset(
    client: &mut Client,
    state: &mut super::ClusterState,
    partition: u32,
) -> Option<u64> {
    let answer = client.read(
        state,
        code::GET_CONSUMER_OFFSET,
        encode(|o| offset_key(Some(partition)).encode(o)),
    );
    ConsumerOffsetInfo::decode(&answer.body())
        .unwrap()
        .map(|info| info.stored_offset)
}

fn sent_base_offset(
    client: &mut Client,
    state: &mut super::ClusterState,
    partition: u32,
    payload: &str,
) -> u64 {
    let sent = client.write(
        state,
        Operation::SendMessages,
        send_body(0, 0, partition, &[payload]),
    );
    SendMessagesReply::decode(&sent.body())
        .unwrap()
        .confirmations[0]
        .base_offset
}

/// Two partitions, partition 0 holding `a`, `b` and a group offset at 1, partition 1 holding
/// `c`; the client is on node 0, the primary of both.
fn seeded_for_purge() -> (super::ClusterState, Client) {
    let mut state = cluster(2);
    seed_topic(&mut state, 2);
    let mut client = Client::signed_in(&mut state, 0, 1);
    client.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["a", "b"]),
    );
    client.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 1, &["c"]),
    );
    let stored = client.write(
        &mut state,
        Operation::StoreConsumerOffset,
        store_offset(0, 1),
    );
    assert_eq!(stored.result_code(), 0);
    (state, client)
}

#[test]
fn a_poll_on_the_primary_right_after_a_purge_ack_still_returns_the_old_messages() {
    for operation in [Operation::PurgeTopic, Operation::PurgeStream] {
        let (mut state, mut client) = seeded_for_purge();
        let body = if operation == Operation::PurgeTopic {
            topic_body(0.into(), 0.into())
        } else {
            stream_body(0.into())
        };
        let purged = client.write(&mut state, operation, body);
        assert_eq!(purged.result_code(), 0, "{operation:?}");
        // The server acknowledges the purge when it commits; each replica's reconciler
        // wipes the partition a pass later, so what was stored is still served meanwhile.
        let old = polled(&mut client, &mut state, 0);
        assert_eq!(
            old.messages
                .iter()
                .map(|message| (message.offset, message.payload.clone()))
                .collect::<Vec<_>>(),
            [(0, Bytes::from("a")), (1, Bytes::from("b"))],
            "{operation:?}: the wipe has not landed yet"
        );
        assert_eq!(old.current_offset, 1, "{operation:?}");
        assert_eq!(
            stored_offset(&mut client, &mut state, 0),
            Some(1),
            "{operation:?}: the consumer offsets go with the wipe, not with the ack"
        );
        // Up to the last microsecond before the wipe.
        let delay = u64::try_from(PURGE_RECONCILE.as_micros()).unwrap();
        let now = state.now_micros();
        state.set_now_micros(now + delay - 10);
        assert_eq!(
            polled_payloads(&mut client, &mut state, 1).len(),
            1,
            "{operation:?}"
        );
    }
}

#[test]
fn a_purge_lands_after_its_delay_offsets_restart_at_zero_and_stored_offsets_are_gone() {
    for operation in [Operation::PurgeTopic, Operation::PurgeStream] {
        let (mut state, mut client) = seeded_for_purge();
        let body = if operation == Operation::PurgeTopic {
            topic_body(0.into(), 0.into())
        } else {
            stream_body(0.into())
        };
        assert_eq!(client.write(&mut state, operation, body).result_code(), 0);
        let_the_purge_land(&mut state);
        for partition in 0..2 {
            let reply = polled(&mut client, &mut state, partition);
            assert!(
                reply.messages.is_empty(),
                "{operation:?}: partition {partition}"
            );
            assert_eq!(reply.current_offset, 0);
        }
        assert_eq!(
            stored_offset(&mut client, &mut state, 0),
            None,
            "{operation:?}: offsets are wiped"
        );
        let topic = get_topic(&mut client, &mut state, 0.into()).unwrap();
        assert_eq!(topic.partitions.len(), 2, "partitions are kept");
        assert_eq!(sent_base_offset(&mut client, &mut state, 0, "d"), 0);
        assert_eq!(
            polled_payloads(&mut client, &mut state, 0),
            [(0, Bytes::from("d"))]
        );
        // An offset store is checked against the new log.
        let beyond = client.write(
            &mut state,
            Operation::StoreConsumerOffset,
            store_offset(0, 1),
        );
        assert_eq!(beyond.status(), ErrorCode::InvalidOffset.as_u32());
    }
}

#[test]
fn a_purged_topic_counts_zero_at_once_though_its_log_is_not_wiped_yet() {
    let (mut state, mut client) = seeded_for_purge();
    let purged = client.write(&mut state, Operation::PurgeStream, stream_body(0.into()));
    assert_eq!(purged.result_code(), 0);
    let topic = get_topic(&mut client, &mut state, 0.into()).unwrap();
    assert_eq!(
        (topic.summary.messages_count, topic.summary.size_bytes),
        (0, 0)
    );
    for partition in &topic.partitions {
        assert_eq!(
            (
                partition.messages_count,
                partition.current_offset,
                partition.size_bytes
            ),
            (0, 0, 0),
            "partition {}",
            partition.id
        );
    }
    let get = GetStreamRequest { stream: 0.into() };
    let body = client
        .read(&mut state, code::GET_STREAM, encode(|o| get.encode(o)))
        .body();
    let stream = StreamDetails::decode(&body).unwrap();
    assert_eq!((stream.messages_count, stream.size_bytes), (0, 0));
    assert_eq!(
        polled_payloads(&mut client, &mut state, 0).len(),
        2,
        "while polls still read the old log"
    );
}

#[test]
fn a_send_between_a_purge_ack_and_its_wipe_is_counted_then_wiped_with_the_rest() {
    let (mut state, mut client) = seeded_for_purge();
    let purged = client.write(
        &mut state,
        Operation::PurgeTopic,
        topic_body(0.into(), 0.into()),
    );
    assert_eq!(purged.result_code(), 0);
    // The partition's offset counter is reset by the wipe, so the send counts on; the
    // server fences every op assigned before its reset, so the wipe takes it too.
    assert_eq!(sent_base_offset(&mut client, &mut state, 0, "early"), 2);
    let topic = get_topic(&mut client, &mut state, 0.into()).unwrap();
    assert_eq!(topic.summary.messages_count, 1, "the counters count it");
    assert_eq!(
        (
            topic.partitions[0].messages_count,
            topic.partitions[0].current_offset
        ),
        (1, 2)
    );
    let_the_purge_land(&mut state);
    assert!(polled(&mut client, &mut state, 0).messages.is_empty());
    let topic = get_topic(&mut client, &mut state, 0.into()).unwrap();
    assert_eq!(topic.summary.messages_count, 0);
    assert_eq!(sent_base_offset(&mut client, &mut state, 0, "late"), 0);
}

#[test]
fn purge_stream_refuses_a_missing_stream() {
    let (mut state, mut client) = seeded_for_purge();
    let missing = client.write(&mut state, Operation::PurgeStream, stream_body(id("nope")));
    assert_eq!(missing.result_code(), ErrorCode::StreamIdNotFound.as_u32());
    let_the_purge_land(&mut state);
    assert_eq!(
        polled_payloads(&mut client, &mut state, 0).len(),
        2,
        "nothing was purged"
    );
}

// ---- topics ------------------------------------------------------------------------

#[test]
fn get_topics_counts_the_topics_and_a_missing_stream_lists_as_empty() {
    let mut state = cluster(1);
    seed_topic(&mut state, 3);
    state
        .catalog
        .create_topic(Lookup::Id(0), "u", 1, 2, 0)
        .unwrap();
    let mut client = Client::signed_in(&mut state, 0, 1);
    let request = |stream: Identifier| encode(|o| GetTopicsRequest { stream }.encode(o));
    let body = client
        .read(&mut state, code::GET_TOPICS, request(id("s")))
        .body();
    let topics = TopicSummary::decode_list(&body).unwrap();
    let listed: Vec<(u32, &str, u32)> = topics
        .iter()
        .map(|t| (t.id, t.name.as_str(), t.partitions_count))
        .collect();
    assert_eq!(listed, [(0, "t", 3), (1, "u", 1)]);
    let body = client
        .read(&mut state, code::GET_TOPICS, request(7.into()))
        .body();
    assert_eq!(body.as_ref(), &[0, 0, 0, 0]);
    let garbage = client.read(&mut state, code::GET_TOPICS, Bytes::from_static(&[1, 3]));
    assert_eq!(garbage.status(), ErrorCode::InvalidCommand.as_u32());
}

#[test]
fn update_topic_renames_and_changes_only_the_settings_it_carries() {
    let mut state = cluster(1);
    seed_topic(&mut state, 1);
    state
        .catalog
        .create_topic(Lookup::Id(0), "u", 1, 2, 0)
        .unwrap();
    let mut client = Client::signed_in(&mut state, 0, 1);
    let options = TopicUpdateOptions {
        compression_algorithm: Some(CompressionAlgorithm::Gzip),
        message_expiry: Some(60_000_000),
        max_topic_size: Some(u64::MAX),
    };
    let updated = client.write(
        &mut state,
        Operation::UpdateTopic,
        update_topic(0.into(), id("t"), "t2", options),
    );
    assert_eq!(updated.result_code(), 0);
    let topic = get_topic(&mut client, &mut state, id("t2"))
        .unwrap()
        .summary;
    assert_eq!(
        (
            topic.id,
            topic.compression,
            topic.message_expiry,
            topic.max_topic_size
        ),
        (0, 2, 60_000_000, u64::MAX)
    );
    // 0 is the server-default sentinel: it leaves the expiry alone.
    let only_name = TopicUpdateOptions {
        message_expiry: Some(0),
        ..TopicUpdateOptions::default()
    };
    let renamed = client.write(
        &mut state,
        Operation::UpdateTopic,
        update_topic(0.into(), 0.into(), "t3", only_name),
    );
    assert_eq!(renamed.result_code(), 0);
    let topic = get_topic(&mut client, &mut state, 0.into())
        .unwrap()
        .summary;
    assert_eq!(
        (topic.name.as_str(), topic.message_expiry),
        ("t3", 60_000_000)
    );

    let none = TopicUpdateOptions::default();
    let cases = [
        (
            update_topic(0.into(), id("u"), "t3", none),
            ErrorCode::TopicNameAlreadyExists,
        ),
        (
            update_topic(0.into(), 9.into(), "x", none),
            ErrorCode::TopicIdNotFound,
        ),
        (
            update_topic(9.into(), 0.into(), "x", none),
            ErrorCode::StreamIdNotFound,
        ),
    ];
    for (body, expected) in cases {
        let answer = client.write(&mut state, Operation::UpdateTopic, body);
        assert_eq!(answer.result_code(), expected.as_u32());
    }
}

#[test]
fn update_topic_options_are_checked_before_consensus() {
    let mut state = cluster(2);
    seed_topic(&mut state, 1);
    let mut follower = Client::signed_in(&mut state, 1, 1);
    let mut unknown = bytes::BytesMut::new();
    unknown.extend_from_slice(&[2, 12, 0, 0, 0]);
    unknown.extend_from_slice(b"segment_size");
    unknown.extend_from_slice(&[12, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let request = UpdateTopicRequest {
        stream: 0.into(),
        topic: 0.into(),
        name: name("t"),
        options: unknown.freeze(),
    };
    let answer = follower.write(
        &mut state,
        Operation::UpdateTopic,
        encode(|o| request.encode(o)),
    );
    assert_eq!(answer.status(), 4041);
    let small = TopicUpdateOptions {
        max_topic_size: Some(1024),
        ..TopicUpdateOptions::default()
    };
    let answer = follower.write(
        &mut state,
        Operation::UpdateTopic,
        update_topic(0.into(), 0.into(), "t", small),
    );
    assert_eq!(answer.status(), 1019);
    let fine = follower.write(
        &mut state,
        Operation::UpdateTopic,
        update_topic(0.into(), 0.into(), "t", TopicUpdateOptions::default()),
    );
    assert_eq!(fine.result_code(), ErrorCode::TransientNotAccepted.as_u32());
}

#[test]
fn delete_topic_removes_it_and_missing_levels_are_typed() {
    let mut state = cluster(1);
    seed_topic(&mut state, 1);
    let mut client = Client::signed_in(&mut state, 0, 1);
    let deleted = client.write(
        &mut state,
        Operation::DeleteTopic,
        topic_body(0.into(), id("t")),
    );
    assert_eq!(deleted.result_code(), 0);
    assert!(get_topic(&mut client, &mut state, 0.into()).is_none());
    let topic = client.write(
        &mut state,
        Operation::DeleteTopic,
        topic_body(0.into(), 0.into()),
    );
    assert_eq!(topic.result_code(), ErrorCode::TopicIdNotFound.as_u32());
    let stream = client.write(
        &mut state,
        Operation::DeleteTopic,
        topic_body(3.into(), 0.into()),
    );
    assert_eq!(stream.result_code(), ErrorCode::StreamIdNotFound.as_u32());
}

#[test]
fn purge_topic_wipes_its_partitions_only() {
    let mut state = cluster(1);
    seed_topic(&mut state, 1);
    state
        .catalog
        .create_topic(Lookup::Id(0), "u", 1, 2, 0)
        .unwrap();
    let mut client = Client::signed_in(&mut state, 0, 1);
    client.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 0, &["a"]),
    );
    client.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 1, 0, &["b"]),
    );
    let purged = client.write(
        &mut state,
        Operation::PurgeTopic,
        topic_body(0.into(), 0.into()),
    );
    assert_eq!(purged.result_code(), 0);
    assert_eq!(
        get_topic(&mut client, &mut state, 0.into())
            .unwrap()
            .summary
            .messages_count,
        0
    );
    assert_eq!(
        get_topic(&mut client, &mut state, 1.into())
            .unwrap()
            .summary
            .messages_count,
        1
    );
    let_the_purge_land(&mut state);
    assert_eq!(
        state
            .catalog
            .topic(Lookup::Id(0), Lookup::Id(0))
            .unwrap()
            .partitions[0]
            .log
            .len(),
        0
    );
    assert_eq!(
        state
            .catalog
            .topic(Lookup::Id(0), Lookup::Id(1))
            .unwrap()
            .partitions[0]
            .log
            .len(),
        1,
        "the other topic is not purged"
    );
    let missing = client.write(
        &mut state,
        Operation::PurgeTopic,
        topic_body(0.into(), id("x")),
    );
    assert_eq!(missing.result_code(), ErrorCode::TopicIdNotFound.as_u32());
}
