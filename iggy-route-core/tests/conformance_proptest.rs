//! Property tests: every body type round-trips through our own codec, and the
//! frame decoder is total and split-invariant.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::*;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = Name> {
    "[a-z0-9._-]{1,40}".prop_map(|s| Name::new(s).unwrap())
}

fn identifier() -> impl Strategy<Value = Identifier> {
    prop_oneof![
        any::<u32>().prop_map(Identifier::Numeric),
        name().prop_map(Identifier::Named)
    ]
}

fn consumer() -> impl Strategy<Value = Consumer> {
    (any::<bool>(), identifier()).prop_map(|(group, id)| Consumer {
        kind: if group {
            ConsumerKind::ConsumerGroup
        } else {
            ConsumerKind::Consumer
        },
        id,
    })
}

fn strategy() -> impl Strategy<Value = PollingStrategy> {
    prop_oneof![
        any::<u64>().prop_map(PollingStrategy::Offset),
        any::<u64>().prop_map(PollingStrategy::Timestamp),
        Just(PollingStrategy::First),
        Just(PollingStrategy::Last),
        Just(PollingStrategy::Next),
    ]
}

fn partitioning() -> impl Strategy<Value = Partitioning> {
    prop_oneof![
        Just(Partitioning::Balanced),
        any::<u32>().prop_map(Partitioning::PartitionId),
        prop::collection::vec(any::<u8>(), 1..=255)
            .prop_map(|k| Partitioning::messages_key(k).unwrap()),
    ]
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn message() -> impl Strategy<Value = Message> {
    (any::<u128>(), 0..u64::from(u32::MAX), bytes(64), bytes(16)).prop_map(
        |(id, ts, payload, user_headers)| Message {
            id,
            origin_timestamp: 1_000_000 + ts,
            payload,
            user_headers,
        },
    )
}

fn node() -> impl Strategy<Value = ClusterNode> {
    (
        "[a-z0-9]{0,12}",
        "[0-9.:]{0,20}",
        any::<[u16; 4]>(),
        any::<bool>(),
        0..5u8,
    )
        .prop_map(|(name, ip, ports, leader, status)| ClusterNode {
            name,
            ip,
            tcp_port: ports[0],
            quic_port: ports[1],
            http_port: ports[2],
            websocket_port: ports[3],
            role: if leader {
                NodeRole::Leader
            } else {
                NodeRole::Follower
            },
            status: [
                NodeStatus::Healthy,
                NodeStatus::Starting,
                NodeStatus::Stopping,
                NodeStatus::Unreachable,
                NodeStatus::Maintenance,
            ][status as usize],
        })
}

fn session() -> impl Strategy<Value = ConsumerSession> {
    (any::<u128>(), any::<u64>(), any::<u64>()).prop_map(
        |(client_id, session, metadata_watermark)| ConsumerSession {
            client_id,
            session,
            metadata_watermark,
        },
    )
}

fn offset_key() -> impl Strategy<Value = ConsumerOffsetKey> {
    (consumer(), identifier(), identifier(), any::<Option<u32>>()).prop_map(
        |(consumer, stream, topic, partition_id)| ConsumerOffsetKey {
            consumer,
            stream,
            topic,
            partition_id,
        },
    )
}

fn summary() -> impl Strategy<Value = TopicSummary> {
    (
        any::<(u32, u64, u32, u64)>(),
        1..=2u8,
        any::<(u64, u64, u64)>(),
        name(),
    )
        .prop_map(
            |(
                (id, created_at, partitions_count, message_expiry),
                compression,
                (max_topic_size, size_bytes, messages_count),
                name,
            )| TopicSummary {
                id,
                created_at,
                partitions_count,
                message_expiry,
                compression,
                max_topic_size,
                size_bytes,
                messages_count,
                name,
            },
        )
}

fn partition_info() -> impl Strategy<Value = PartitionInfo> {
    any::<(u32, u64, u32, u64, u64, u64)>().prop_map(
        |(id, created_at, segments_count, current_offset, size_bytes, messages_count)| {
            PartitionInfo {
                id,
                created_at,
                segments_count,
                current_offset,
                size_bytes,
                messages_count,
            }
        },
    )
}

/// Encode, check `encoded_len`, decode, compare.
macro_rules! assert_round_trip {
    ($value:expr, $ty:ty) => {{
        let value = $value;
        let mut out = BytesMut::new();
        value.encode(&mut out);
        prop_assert_eq!(out.len(), value.encoded_len());
        prop_assert_eq!(<$ty>::decode(&out).unwrap(), value);
    }};
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn login_bodies_round_trip(user in name(), secret in "[ -~]{0,60}", ctx in bytes(20), session in 1..u64::MAX, user_id: u32) {
        let password = Password::new(secret).unwrap();
        assert_round_trip!(LoginRegisterRequest { protocol_version: PROTOCOL_VERSION, sdk_name: Name::new(SDK_NAME).unwrap(), sdk_version: Name::new(SDK_VERSION).unwrap(), username: user.clone(), password: password.clone(), context: ctx.clone() }, LoginRegisterRequest);
        assert_round_trip!(LoginRegisterWithPatRequest { protocol_version: 1, sdk_name: user.clone(), sdk_version: user.clone(), token: password, context: ctx }, LoginRegisterWithPatRequest);
        assert_round_trip!(LoginRegisterReply { user_id, session, server_protocol_version: PROTOCOL_VERSION, server_version: user }, LoginRegisterReply);
    }

    #[test]
    fn cluster_and_routing_bodies_round_trip(cluster in "[a-z]{0,10}", nodes in prop::collection::vec(node(), 0..5), s in session(), primary in node()) {
        assert_round_trip!(ClusterMetadata { name: cluster, nodes }, ClusterMetadata);
        assert_round_trip!(s, ConsumerSession);
        assert_round_trip!(PollRouting { consumer_session: s, primary }, PollRouting);
    }

    #[test]
    fn send_bodies_round_trip(stream in identifier(), topic in identifier(), p in partitioning(), messages in prop::collection::vec(message(), 0..6), confirmations in prop::collection::vec(any::<(u32, u32, u32, u64)>(), 0..4)) {
        assert_round_trip!(SendMessagesRequest { stream, topic, partitioning: p, messages }, SendMessagesRequest);
        let confirmations = confirmations.into_iter().map(|(stream_id, topic_id, partition_id, base_offset)| SendConfirmation { stream_id, topic_id, partition_id, base_offset }).collect();
        assert_round_trip!(SendMessagesReply { confirmations }, SendMessagesReply);
    }

    #[test]
    fn poll_bodies_round_trip(consumer in consumer(), stream in identifier(), topic in identifier(), partition_id: Option<u32>, strategy in strategy(), count: u32, auto_commit: bool, pid: u32, current: u64, raw in prop::collection::vec((0..3u64, 0..2u64, 0..1000u64, bytes(32)), 0..8)) {
        assert_round_trip!(PollMessagesRequest { consumer, stream, topic, partition_id, strategy, count, auto_commit }, PollMessagesRequest);
        let mut offset = 5;
        let messages: Vec<PolledMessage> = raw.into_iter().map(|(gap, ts, origin, payload)| {
            offset += gap;
            PolledMessage { offset, id: u128::from(offset), timestamp: 100 + ts, origin_timestamp: origin, payload, user_headers: Bytes::new() }
        }).collect();
        let reply = PollMessagesReply { partition_id: pid, current_offset: current, messages };
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        prop_assert_eq!(PollMessagesReply::decode(&out).unwrap(), reply);
    }

    #[test]
    fn offset_bodies_round_trip(key in offset_key(), offset: u64, info: (u32, u64, u64)) {
        assert_round_trip!(key.clone(), ConsumerOffsetKey);
        assert_round_trip!(StoreConsumerOffsetRequest { key: key.clone(), offset }, StoreConsumerOffsetRequest);
        assert_round_trip!(DeleteConsumerOffsetRequest { key }, DeleteConsumerOffsetRequest);
        let info = ConsumerOffsetInfo { partition_id: info.0, current_offset: info.1, stored_offset: info.2 };
        let mut out = BytesMut::new();
        info.encode(&mut out);
        prop_assert_eq!(ConsumerOffsetInfo::decode(&out).unwrap(), Some(info));
    }

    #[test]
    fn stream_and_topic_bodies_round_trip(stream in identifier(), topic in identifier(), n in name(), count: u32, topics in prop::collection::vec(summary(), 0..4), s in summary(), parts in prop::collection::vec(partition_info(), 0..4)) {
        assert_round_trip!(GetStreamRequest { stream: stream.clone() }, GetStreamRequest);
        assert_round_trip!(GetTopicRequest { stream: stream.clone(), topic: topic.clone() }, GetTopicRequest);
        assert_round_trip!(CreateStreamRequest { name: n.clone() }, CreateStreamRequest);
        assert_round_trip!(CreateTopicRequest { stream: stream.clone(), partitions_count: count, name: n.clone(), options: Bytes::new() }, CreateTopicRequest);
        assert_round_trip!(CreatePartitionsRequest { stream, topic, partitions_count: count }, CreatePartitionsRequest);
        let topics_count = topics.len() as u32;
        assert_round_trip!(StreamDetails { id: 1, created_at: 2, topics_count, size_bytes: 3, messages_count: 4, name: n, topics }, StreamDetails);
        let summary = TopicSummary { partitions_count: parts.len() as u32, ..s };
        assert_round_trip!(TopicDetails { summary, partitions: parts }, TopicDetails);
    }

    #[test]
    fn headers_round_trip(op in prop::sample::select(Operation::ALL), code: u32, client: u128, session: u64, request: u64, len in 0..10_000usize, status: u32, commit: u64, reason: u8) {
        let header = RequestHeader::new(op, code, client, session, request, len);
        let mut out = BytesMut::new();
        header.encode(&mut out);
        prop_assert_eq!(out.len(), 256);
        prop_assert_eq!(RequestHeader::decode(&out).unwrap(), header);
        let reply = ReplyHeader::for_request(&header, status, commit, len);
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        prop_assert_eq!(ReplyHeader::decode(&out).unwrap(), reply);
        let eviction = EvictionHeader { client, reason: EvictionReason::from_u8(reason), ..EvictionHeader::default() };
        let mut out = BytesMut::new();
        eviction.encode(&mut out);
        prop_assert_eq!(EvictionHeader::decode(&out).unwrap(), eviction);
    }

    #[test]
    fn arbitrary_bytes_split_anywhere_never_panic(data in prop::collection::vec(any::<u8>(), 0..2048), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(data.len() + 1)).collect();
        points.sort_unstable();
        let mut decoder = FrameDecoder::new(4096);
        let mut start = 0;
        for end in points.into_iter().chain([data.len()]) {
            let mut piece = &data[start..end];
            start = end;
            for _ in 0..=piece.len() {
                match decoder.decode(&mut piece) {
                    Ok(Some(_)) | Err(_) if !piece.is_empty() => {}
                    _ => break,
                }
            }
            prop_assert!(decoder.buffered() <= 4096);
        }
        iggy_route_core::fuzzing::decode_frame(&data);
    }

    #[test]
    fn valid_frames_split_arbitrarily_decode_to_the_same_frames(bodies in prop::collection::vec((any::<bool>(), bytes(300), any::<u64>()), 1..6), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10)) {
        let mut stream = BytesMut::new();
        let mut expected = Vec::new();
        for (is_reply, body, n) in bodies {
            let request = RequestHeader::new(Operation::NonReplicated, 1, 9, 1, n, body.len());
            let frame = if is_reply {
                Frame::Reply { header: ReplyHeader::for_request(&request, 0, n, body.len()), body }
            } else {
                Frame::Request { header: request, body }
            };
            frame.encode(&mut stream);
            expected.push(frame);
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
        let mut got = Vec::new();
        let mut start = 0;
        for end in points.into_iter().chain([stream.len()]) {
            let mut piece = &stream[start..end];
            start = end;
            while let Some(frame) = decoder.decode(&mut piece).unwrap() {
                got.push(frame);
            }
            prop_assert!(piece.is_empty());
        }
        prop_assert_eq!(got, expected);
        prop_assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn sizes_outside_the_window_are_typed_errors(size: u32, max in 256..100_000u32) {
        let mut header = BytesMut::new();
        RequestHeader::new(Operation::NonReplicated, 1, 1, 0, 0, 0).encode(&mut header);
        header[48..52].copy_from_slice(&size.to_le_bytes());
        let mut decoder = FrameDecoder::new(max);
        let mut input = &header[..];
        let result = decoder.decode(&mut input);
        if size < 256 {
            prop_assert_eq!(result, Err(WireError::FrameTooSmall { size }));
        } else if size > max {
            prop_assert_eq!(result, Err(WireError::FrameTooLarge { size, max }));
        } else {
            prop_assert_eq!(result.clone().ok().flatten().is_some(), size == 256);
        }
    }
}
