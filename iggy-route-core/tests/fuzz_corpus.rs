//! Replays the committed fuzz corpus (`fuzz/corpus/decode_frame`) through the
//! fuzz entry point, so CI catches regressions without a fuzzer.
//!
//! Regenerate the valid seeds with
//! `IGGY_ROUTE_WRITE_CORPUS=1 cargo test -p iggy-route-core --test fuzz_corpus -- --ignored`.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::*;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/decode_frame")
}

#[test]
fn every_corpus_file_replays_without_panic() {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("the fuzz corpus folder exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the fuzz corpus is empty");
    for path in files {
        let data = std::fs::read(&path).unwrap();
        iggy_route_core::fuzzing::decode_frame(&data);
    }
}

fn request(op: Operation, code: u32, body: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut b = BytesMut::new();
    body(&mut b);
    let mut out = BytesMut::new();
    encode_request(
        &RequestHeader::new(op, code, 0x1234, 100, 1, 0),
        &b,
        &mut out,
    );
    out.to_vec()
}

fn reply(op: Operation, status: u32, body: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut b = BytesMut::new();
    body(&mut b);
    let req = RequestHeader::new(op, 0, 0x1234, 100, 1, 0);
    let mut out = BytesMut::new();
    ReplyHeader::for_request(&req, status, 7, b.len()).encode(&mut out);
    out.extend_from_slice(&b);
    out.to_vec()
}

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

#[test]
#[ignore = "writes the seed corpus; run with IGGY_ROUTE_WRITE_CORPUS=1"]
fn write_seed_corpus() {
    if std::env::var_os("IGGY_ROUTE_WRITE_CORPUS").is_none() {
        return;
    }
    let node = ClusterNode {
        name: "n0".into(),
        ip: "127.0.0.1".into(),
        tcp_port: 8090,
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role: NodeRole::Leader,
        status: NodeStatus::Healthy,
    };
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: 1.into(),
    };
    let key = ConsumerOffsetKey {
        consumer: consumer.clone(),
        stream: 1.into(),
        topic: 1.into(),
        partition_id: Some(0),
    };
    let poll = PollMessagesRequest {
        consumer,
        stream: 1.into(),
        topic: 1.into(),
        partition_id: Some(0),
        strategy: PollingStrategy::Next,
        count: 10,
        auto_commit: true,
    };
    let message = Message {
        id: 1,
        origin_timestamp: 5,
        payload: Bytes::from_static(b"hi"),
        user_headers: Bytes::new(),
    };
    let session = ConsumerSession {
        client_id: 0x1234,
        session: 100,
        metadata_watermark: 7,
    };
    let summary = TopicSummary {
        id: 1,
        created_at: 1,
        partitions_count: 1,
        message_expiry: 0,
        compression: 1,
        max_topic_size: 0,
        size_bytes: 0,
        messages_count: 0,
        name: n("t"),
    };
    let mut seeds: Vec<(&str, Vec<u8>)> = vec![
        (
            "ping_request",
            request(Operation::NonReplicated, code::PING, |_| {}),
        ),
        ("ping_reply", reply(Operation::NonReplicated, 0, |_| {})),
        (
            "login_request",
            request(Operation::Register, code::LOGIN_REGISTER, |o| {
                LoginRegisterRequest {
                    protocol_version: PROTOCOL_VERSION,
                    sdk_name: n(SDK_NAME),
                    sdk_version: n(SDK_VERSION),
                    username: n("iggy"),
                    password: Password::new("iggy").unwrap(),
                    context: Bytes::new(),
                }
                .encode(o)
            }),
        ),
        (
            "login_pat_request",
            request(Operation::Register, code::LOGIN_REGISTER_WITH_PAT, |o| {
                LoginRegisterWithPatRequest {
                    protocol_version: PROTOCOL_VERSION,
                    sdk_name: n(SDK_NAME),
                    sdk_version: n(SDK_VERSION),
                    token: Password::new("token").unwrap(),
                    context: Bytes::new(),
                }
                .encode(o)
            }),
        ),
        (
            "login_reply",
            reply(Operation::Register, 0, |o| {
                put_result_ok(o);
                LoginRegisterReply {
                    user_id: 1,
                    session: 100,
                    server_protocol_version: PROTOCOL_VERSION,
                    server_version: n("0.11.0"),
                }
                .encode(o)
            }),
        ),
        (
            "cluster_metadata_reply",
            reply(Operation::NonReplicated, 0, |o| {
                ClusterMetadata {
                    name: "c".into(),
                    nodes: vec![node.clone()],
                }
                .encode(o)
            }),
        ),
        (
            "send_request",
            request(Operation::SendMessages, code::SEND_MESSAGES, |o| {
                SendMessagesRequest {
                    stream: 1.into(),
                    topic: 1.into(),
                    partitioning: Partitioning::PartitionId(0),
                    messages: vec![message.clone()],
                }
                .encode(o)
            }),
        ),
        (
            "send_reply",
            reply(Operation::SendMessages, 0, |o| {
                SendMessagesReply {
                    confirmations: vec![SendConfirmation {
                        stream_id: 1,
                        topic_id: 1,
                        partition_id: 0,
                        base_offset: 0,
                    }],
                }
                .encode(o)
            }),
        ),
        ("send_refused", reply(Operation::SendMessages, 58, |_| {})),
        (
            "poll_request",
            request(Operation::NonReplicated, code::POLL_MESSAGES, |o| {
                poll.encode(o)
            }),
        ),
        (
            "poll_reply",
            reply(Operation::NonReplicated, 0, |o| {
                PollMessagesReply {
                    partition_id: 0,
                    current_offset: 0,
                    messages: vec![PolledMessage {
                        offset: 0,
                        id: 1,
                        timestamp: 9,
                        origin_timestamp: 5,
                        payload: Bytes::from_static(b"hi"),
                        user_headers: Bytes::new(),
                    }],
                }
                .encode(o)
            }),
        ),
        (
            "poll_routing_request",
            request(Operation::NonReplicated, code::GET_POLL_ROUTING, |o| {
                poll.encode(o)
            }),
        ),
        (
            "poll_routing_reply",
            reply(Operation::NonReplicated, 0, |o| {
                PollRouting {
                    consumer_session: session,
                    primary: node.clone(),
                }
                .encode(o)
            }),
        ),
        (
            "attach_request",
            request(
                Operation::NonReplicated,
                code::ATTACH_CONSUMER_SESSION,
                |o| session.encode(o),
            ),
        ),
        (
            "offset_routing_request",
            request(
                Operation::NonReplicated,
                code::GET_CONSUMER_OFFSET_ROUTING,
                |o| key.encode(o),
            ),
        ),
        (
            "store_offset_request",
            request(
                Operation::StoreConsumerOffset,
                code::STORE_CONSUMER_OFFSET,
                |o| {
                    StoreConsumerOffsetRequest {
                        key: key.clone(),
                        offset: 3,
                    }
                    .encode(o)
                },
            ),
        ),
        (
            "delete_offset_request",
            request(
                Operation::DeleteConsumerOffset,
                code::DELETE_CONSUMER_OFFSET,
                |o| DeleteConsumerOffsetRequest { key: key.clone() }.encode(o),
            ),
        ),
        (
            "store_offset_reply",
            reply(Operation::StoreConsumerOffset, 0, put_result_ok),
        ),
        (
            "offset_info_reply",
            reply(Operation::NonReplicated, 0, |o| {
                ConsumerOffsetInfo {
                    partition_id: 0,
                    current_offset: 5,
                    stored_offset: 3,
                }
                .encode(o)
            }),
        ),
        (
            "get_topic_reply",
            reply(Operation::NonReplicated, 0, |o| {
                TopicDetails {
                    summary: summary.clone(),
                    partitions: vec![PartitionInfo::default()],
                }
                .encode(o)
            }),
        ),
        (
            "get_stream_reply",
            reply(Operation::NonReplicated, 0, |o| {
                StreamDetails {
                    id: 1,
                    created_at: 1,
                    topics_count: 1,
                    size_bytes: 0,
                    messages_count: 0,
                    name: n("s"),
                    topics: vec![summary.clone()],
                }
                .encode(o)
            }),
        ),
        (
            "create_stream_request",
            request(Operation::CreateStream, code::CREATE_STREAM, |o| {
                CreateStreamRequest { name: n("s") }.encode(o)
            }),
        ),
        (
            "create_topic_request",
            request(Operation::CreateTopic, code::CREATE_TOPIC, |o| {
                CreateTopicRequest {
                    stream: 1.into(),
                    partitions_count: 2,
                    name: n("t"),
                    options: Bytes::new(),
                }
                .encode(o)
            }),
        ),
        (
            "create_partitions_request",
            request(Operation::CreatePartitions, code::CREATE_PARTITIONS, |o| {
                CreatePartitionsRequest {
                    stream: 1.into(),
                    topic: 1.into(),
                    partitions_count: 1,
                }
                .encode(o)
            }),
        ),
        (
            "rejected_reply",
            reply(Operation::CreateStream, 0, |o| put_result_rejection(58, o)),
        ),
        ("eviction", {
            let mut o = BytesMut::new();
            EvictionHeader {
                client: 0x1234,
                reason: EvictionReason::StaleClient,
                ..EvictionHeader::default()
            }
            .encode(&mut o);
            o.to_vec()
        }),
    ];
    let mut too_small = seeds[0].1.clone();
    too_small[48..52].copy_from_slice(&100u32.to_le_bytes());
    let mut bad_command = seeds[0].1.clone();
    bad_command[60] = 6;
    let mut bad_checksum = seeds[6].1.clone();
    let last = bad_checksum.len() - 1;
    bad_checksum[last] ^= 0xff;
    let mut two_frames = seeds[0].1.clone();
    two_frames.extend_from_slice(&seeds[1].1);
    seeds.extend([
        ("malformed_size_too_small", too_small),
        ("malformed_unknown_command", bad_command),
        ("malformed_send_checksum", bad_checksum),
        ("two_frames", two_frames),
    ]);
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
