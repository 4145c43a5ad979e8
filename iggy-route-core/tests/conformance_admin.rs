//! Body conformance of the administration commands against the published 0.11.0 crates:
//! streams, topics, partitions, segments, consumer offsets and flush (the system reads are
//! in `conformance_system.rs`). For every request and reply, ours encodes to the bytes
//! theirs encodes for the same values, and each side decodes the other's bytes.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use iggy_binary_protocol::requests::consumer_offsets as t_off;
use iggy_binary_protocol::requests::messages::FlushUnsavedBufferRequest as TFlush;
use iggy_binary_protocol::requests::partitions::DeletePartitionsRequest as TDeleteParts;
use iggy_binary_protocol::requests::segments::DeleteSegmentsRequest as TDeleteSegments;
use iggy_binary_protocol::requests::streams::{
    DeleteStreamRequest as TDeleteStream, PurgeStreamRequest as TPurgeStream,
    UpdateStreamRequest as TUpdateStream,
};
use iggy_binary_protocol::requests::topics::{
    DeleteTopicRequest as TDeleteTopic, GetTopicsRequest as TGetTopics,
    PurgeTopicRequest as TPurgeTopic, UpdateTopicRequest as TUpdateTopic,
};
use iggy_binary_protocol::responses::consumer_offsets::ConsumerOffsetResponse as TOffsetInfo;
use iggy_binary_protocol::responses::streams::{
    GetStreamsResponse as TStreams, StreamResponse, TopicHeader,
};
use iggy_binary_protocol::responses::topics::GetTopicsResponse as TTopics;
use iggy_binary_protocol::{
    AckLevel, WireConsumer, WireDecode, WireEncode, WireIdentifier, WireName, WireOptions,
};
use iggy_route_core::wire::*;

fn ours(encode: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn wname(s: &str) -> WireName {
    WireName::new(s).unwrap()
}

/// Their bytes equal ours, and their decode of our bytes re-encodes to the same.
fn same<T: WireEncode + WireDecode>(their: &T, our_bytes: &[u8]) {
    assert_eq!(their.to_bytes().as_ref(), our_bytes);
    let (decoded, used) = T::decode(our_bytes).unwrap();
    assert_eq!(used, our_bytes.len());
    assert_eq!(decoded.to_bytes().as_ref(), our_bytes);
}

/// A named stream and a numeric topic, on both sides.
fn ids() -> (Identifier, Identifier, WireIdentifier, WireIdentifier) {
    (
        Identifier::try_from("orders").unwrap(),
        Identifier::Numeric(7),
        WireIdentifier::named("orders").unwrap(),
        WireIdentifier::numeric(7),
    )
}

// ---- streams -----------------------------------------------------------------------

fn stream(id: u32, text: &str) -> (StreamSummary, StreamResponse) {
    (
        StreamSummary {
            id,
            created_at: 1_700_000_000_000_000 + u64::from(id),
            topics_count: id + 1,
            size_bytes: 1000,
            messages_count: 20,
            name: name(text),
        },
        StreamResponse {
            id,
            created_at: 1_700_000_000_000_000 + u64::from(id),
            topics_count: id + 1,
            size_bytes: 1000,
            messages_count: 20,
            name: wname(text),
            options: WireOptions::empty(),
        },
    )
}

#[test]
fn get_streams_reply() {
    let (a, ta) = stream(0, "orders");
    let (b, tb) = stream(1, "payments");
    let list = vec![a, b];
    let their = TStreams {
        streams: vec![ta, tb],
    };
    same(&their, &ours(|o| StreamSummary::encode_list(&list, o)));
    assert_eq!(StreamSummary::decode_list(&their.to_bytes()).unwrap(), list);
    // A stream's options block is read and dropped: theirs may carry one.
    let mut with_options = their.streams[0].clone();
    with_options.options = WireOptions::from_bytes(Bytes::from_static(&[
        2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v',
    ]))
    .unwrap();
    let decoded = StreamSummary::decode_list(&with_options.to_bytes()).unwrap();
    assert_eq!(decoded, list[..1]);
}

#[test]
fn update_delete_purge_stream_requests() {
    let (stream, _, their_stream, _) = ids();
    let update = UpdateStreamRequest {
        stream: stream.clone(),
        name: name("orders-v2"),
        options: Bytes::new(),
    };
    let their = TUpdateStream {
        stream_id: their_stream.clone(),
        name: wname("orders-v2"),
        options: WireOptions::empty(),
    };
    same(&their, &ours(|o| update.encode(o)));
    assert_eq!(
        UpdateStreamRequest::decode(&their.to_bytes()).unwrap(),
        update
    );
    // The SDK's raw stream options (every key refused by the server, but well-formed).
    let raw = BTreeMap::from([("retention".to_owned(), "7 days".to_owned())]);
    let their_options = iggy_common::StreamUpdateOptions { raw }.to_wire().unwrap();
    let update = UpdateStreamRequest {
        options: Bytes::copy_from_slice(their_options.as_bytes()),
        ..update
    };
    let their = TUpdateStream {
        options: their_options,
        ..their
    };
    same(&their, &ours(|o| update.encode(o)));
    assert_eq!(
        UpdateStreamRequest::decode(&their.to_bytes()).unwrap(),
        update
    );

    let delete = DeleteStreamRequest {
        stream: stream.clone(),
    };
    let their = TDeleteStream {
        stream_id: their_stream.clone(),
    };
    same(&their, &ours(|o| delete.encode(o)));
    assert_eq!(
        DeleteStreamRequest::decode(&their.to_bytes()).unwrap(),
        delete
    );

    let purge = PurgeStreamRequest {
        stream: Identifier::Numeric(3),
    };
    let their = TPurgeStream {
        stream_id: WireIdentifier::numeric(3),
    };
    same(&their, &ours(|o| purge.encode(o)));
    assert_eq!(
        PurgeStreamRequest::decode(&their.to_bytes()).unwrap(),
        purge
    );
}

// ---- topics ------------------------------------------------------------------------

fn topic(id: u32, text: &str) -> (TopicSummary, TopicHeader) {
    (
        TopicSummary {
            id,
            created_at: 10 + u64::from(id),
            partitions_count: 3,
            message_expiry: 60_000_000,
            compression: 2,
            max_topic_size: u64::MAX,
            size_bytes: 5,
            messages_count: 6,
            name: name(text),
        },
        TopicHeader {
            id,
            created_at: 10 + u64::from(id),
            partitions_count: 3,
            message_expiry: 60_000_000,
            compression_algorithm: 2,
            max_topic_size: u64::MAX,
            size_bytes: 5,
            messages_count: 6,
            name: wname(text),
            options: WireOptions::empty(),
            derived_options: WireOptions::empty(),
        },
    )
}

#[test]
fn get_topics_request_and_reply() {
    let (stream, _, their_stream, _) = ids();
    let request = GetTopicsRequest { stream };
    let their = TGetTopics {
        stream_id: their_stream,
    };
    same(&their, &ours(|o| request.encode(o)));
    assert_eq!(
        GetTopicsRequest::decode(&their.to_bytes()).unwrap(),
        request
    );

    let (a, ta) = topic(0, "events");
    let (b, tb) = topic(1, "audit");
    let list = vec![a, b];
    let their = TTopics {
        topics: vec![ta, tb],
    };
    same(&their, &ours(|o| TopicSummary::encode_list(&list, o)));
    assert_eq!(TopicSummary::decode_list(&their.to_bytes()).unwrap(), list);
    // A missing stream lists as empty: `[0,0,0,0]`.
    let empty = TTopics { topics: Vec::new() };
    same(&empty, &ours(|o| TopicSummary::encode_list(&[], o)));
    assert!(
        TopicSummary::decode_list(&empty.to_bytes())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn update_topic_request_with_every_setting() {
    let (stream, topic, their_stream, their_topic) = ids();
    let settings = [
        TopicUpdateOptions::default(),
        TopicUpdateOptions {
            compression_algorithm: Some(CompressionAlgorithm::Gzip),
            message_expiry: Some(3_600_000_000),
            max_topic_size: Some(10 << 30),
        },
        TopicUpdateOptions {
            compression_algorithm: Some(CompressionAlgorithm::None),
            message_expiry: Some(u64::MAX),
            max_topic_size: None,
        },
        TopicUpdateOptions {
            compression_algorithm: None,
            message_expiry: None,
            max_topic_size: Some(u64::MAX),
        },
    ];
    for options in settings {
        // The SDK's own options type builds their block.
        let sdk = iggy_common::TopicUpdateOptions {
            compression_algorithm: options.compression_algorithm.map(|c| match c {
                CompressionAlgorithm::None => iggy_common::CompressionAlgorithm::None,
                CompressionAlgorithm::Gzip => iggy_common::CompressionAlgorithm::Gzip,
            }),
            message_expiry: options.message_expiry.map(|micros| match micros {
                u64::MAX => iggy_common::IggyExpiry::NeverExpire,
                micros => iggy_common::IggyExpiry::ExpireDuration(micros.into()),
            }),
            max_topic_size: options.max_topic_size.map(|bytes| match bytes {
                u64::MAX => iggy_common::MaxTopicSize::Unlimited,
                bytes => iggy_common::MaxTopicSize::Custom(bytes.into()),
            }),
            raw: BTreeMap::new(),
        };
        let request =
            UpdateTopicRequest::new(stream.clone(), topic.clone(), name("events-v2"), &options);
        let their = TUpdateTopic {
            stream_id: their_stream.clone(),
            topic_id: their_topic.clone(),
            name: wname("events-v2"),
            options: sdk.to_wire().unwrap(),
        };
        same(&their, &ours(|o| request.encode(o)));
        let decoded = UpdateTopicRequest::decode(&their.to_bytes()).unwrap();
        assert_eq!(decoded, request);
        assert_eq!(
            TopicUpdateOptions::parse(&decoded.options).unwrap(),
            options
        );
        // What we parse, the SDK's parser reads the same way.
        let theirs = iggy_common::TopicCreateOptions::parse(
            &WireOptions::from_bytes(decoded.options.clone()).unwrap(),
        )
        .unwrap();
        assert_eq!(theirs.compression_algorithm, sdk.compression_algorithm);
        assert_eq!(theirs.max_topic_size, sdk.max_topic_size);
        assert_eq!(theirs.message_expiry, sdk.message_expiry);
    }
}

#[test]
fn delete_and_purge_topic_requests() {
    let (stream, topic, their_stream, their_topic) = ids();
    let delete = DeleteTopicRequest {
        stream: stream.clone(),
        topic: topic.clone(),
    };
    let their = TDeleteTopic {
        stream_id: their_stream.clone(),
        topic_id: their_topic.clone(),
    };
    same(&their, &ours(|o| delete.encode(o)));
    assert_eq!(
        DeleteTopicRequest::decode(&their.to_bytes()).unwrap(),
        delete
    );

    let purge = PurgeTopicRequest {
        stream: Identifier::Numeric(0),
        topic: Identifier::try_from("events").unwrap(),
    };
    let their = TPurgeTopic {
        stream_id: WireIdentifier::numeric(0),
        topic_id: WireIdentifier::named("events").unwrap(),
    };
    same(&their, &ours(|o| purge.encode(o)));
    assert_eq!(PurgeTopicRequest::decode(&their.to_bytes()).unwrap(), purge);
}

// ---- partitions, segments, flush ---------------------------------------------------

#[test]
fn delete_partitions_and_segments_and_flush_requests() {
    let (stream, topic, their_stream, their_topic) = ids();
    let partitions = DeletePartitionsRequest {
        stream: stream.clone(),
        topic: topic.clone(),
        partitions_count: 2,
    };
    let their = TDeleteParts {
        stream_id: their_stream.clone(),
        topic_id: their_topic.clone(),
        partitions_count: 2,
    };
    same(&their, &ours(|o| partitions.encode(o)));
    assert_eq!(
        DeletePartitionsRequest::decode(&their.to_bytes()).unwrap(),
        partitions
    );

    let segments = DeleteSegmentsRequest {
        stream: stream.clone(),
        topic: topic.clone(),
        partition_id: 3,
        segments_count: 9,
    };
    let their = TDeleteSegments {
        stream_id: their_stream.clone(),
        topic_id: their_topic.clone(),
        partition_id: 3,
        segments_count: 9,
    };
    same(&their, &ours(|o| segments.encode(o)));
    assert_eq!(
        DeleteSegmentsRequest::decode(&their.to_bytes()).unwrap(),
        segments
    );

    for fsync in [true, false] {
        let flush = FlushUnsavedBufferRequest {
            stream: stream.clone(),
            topic: topic.clone(),
            partition_id: 1,
            fsync,
        };
        let their = TFlush {
            stream_id: their_stream.clone(),
            topic_id: their_topic.clone(),
            partition_id: 1,
            fsync,
        };
        same(&their, &ours(|o| flush.encode(o)));
        assert_eq!(
            FlushUnsavedBufferRequest::decode(&their.to_bytes()).unwrap(),
            flush
        );
    }
}

// ---- consumer offsets --------------------------------------------------------------

#[test]
fn get_and_delete_consumer_offset_with_and_without_a_partition() {
    let (stream, topic, their_stream, their_topic) = ids();
    for (kind, their_consumer) in [
        (
            ConsumerKind::Consumer,
            WireConsumer::consumer(WireIdentifier::numeric(42)),
        ),
        (
            ConsumerKind::ConsumerGroup,
            WireConsumer::consumer_group(WireIdentifier::named("readers").unwrap()),
        ),
    ] {
        let consumer = Consumer {
            kind,
            id: match kind {
                ConsumerKind::Consumer => Identifier::Numeric(42),
                ConsumerKind::ConsumerGroup => Identifier::try_from("readers").unwrap(),
            },
        };
        for partition_id in [Some(2), None] {
            let key = ConsumerOffsetKey {
                consumer: consumer.clone(),
                stream: stream.clone(),
                topic: topic.clone(),
                partition_id,
            };
            let their = t_off::GetConsumerOffsetRequest {
                consumer: their_consumer.clone(),
                stream_id: their_stream.clone(),
                topic_id: their_topic.clone(),
                partition_id,
            };
            same(&their, &ours(|o| key.encode(o)));
            assert_eq!(ConsumerOffsetKey::decode(&their.to_bytes()).unwrap(), key);

            let delete = DeleteConsumerOffsetRequest { key: key.clone() };
            let their = t_off::DeleteConsumerOffsetRequest {
                consumer: their_consumer.clone(),
                stream_id: their_stream.clone(),
                topic_id: their_topic.clone(),
                partition_id,
                ack: AckLevel::Quorum,
            };
            same(&their, &ours(|o| delete.encode(o)));
            assert_eq!(
                DeleteConsumerOffsetRequest::decode(&their.to_bytes()).unwrap(),
                delete
            );
        }
    }
}

#[test]
fn get_consumer_offset_reply_and_its_empty_form() {
    let info = ConsumerOffsetInfo {
        partition_id: 2,
        current_offset: 1_000,
        stored_offset: 998,
    };
    let their = TOffsetInfo {
        partition_id: 2,
        current_offset: 1_000,
        stored_offset: 998,
    };
    same(&their, &ours(|o| info.encode(o)));
    assert_eq!(
        ConsumerOffsetInfo::decode(&their.to_bytes()).unwrap(),
        Some(info)
    );
    // The SDK reads an empty payload as "no offset stored" before decoding anything.
    assert_eq!(ConsumerOffsetInfo::decode(&[]).unwrap(), None);
}
