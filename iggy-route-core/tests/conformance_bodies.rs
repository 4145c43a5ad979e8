//! Body conformance against the published 0.11.0 crates: for every message type,
//! ours encodes to the bytes theirs encodes, and each side decodes the other's bytes.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use iggy_binary_protocol::primitives::ack_level::AckLevel;
use iggy_binary_protocol::requests::consumer_offsets as t_off;
use iggy_binary_protocol::requests::messages::PollMessagesRequest as TPoll;
use iggy_binary_protocol::requests::partitions::CreatePartitionsRequest as TCreateParts;
use iggy_binary_protocol::requests::streams::{
    CreateStreamRequest as TCreateStream, GetStreamRequest as TGetStream,
};
use iggy_binary_protocol::requests::system::AttachConsumerSessionRequest as TAttach;
use iggy_binary_protocol::requests::topics::{
    CreateTopicRequest as TCreateTopic, GetTopicRequest as TGetTopic,
};
use iggy_binary_protocol::requests::users::{
    LoginRegisterRequest as TLogin, LoginRegisterWithPatRequest as TLoginPat,
};
use iggy_binary_protocol::responses::consumer_offsets::ConsumerOffsetResponse as TOffsetInfo;
use iggy_binary_protocol::responses::messages::PollRoutingResponse as TRouting;
use iggy_binary_protocol::responses::streams::{
    GetStreamResponse as TStream, StreamResponse, TopicHeader,
};
use iggy_binary_protocol::responses::system::{
    ClusterMetadataResponse as TCluster, ClusterNodeResponse,
};
use iggy_binary_protocol::responses::topics::{GetTopicResponse as TTopic, PartitionResponse};
use iggy_binary_protocol::responses::users::LoginRegisterResponse as TLoginReply;
use iggy_binary_protocol::{
    ClientVersionInfo, WireConsumer, WireDecode, WireEncode, WireIdentifier, WireName, WireOptions,
    WirePollingStrategy,
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

fn version() -> ClientVersionInfo {
    ClientVersionInfo {
        protocol_version: 0x2C00,
        sdk_name: wname("rust-sdk"),
        sdk_version: wname("0.11.0"),
    }
}

#[test]
fn login_register_request_and_pat_variant() {
    let request = LoginRegisterRequest {
        protocol_version: PROTOCOL_VERSION,
        sdk_name: name(SDK_NAME),
        sdk_version: name(SDK_VERSION),
        username: name("iggy"),
        password: Password::new("secret").unwrap(),
        context: Bytes::from_static(b"ctx"),
    };
    let bytes = ours(|o| request.encode(o));
    let their = TLogin {
        version_info: version(),
        username: wname("iggy"),
        password: "secret".to_string().into(),
        client_context: Some("ctx".into()),
    };
    same(&their, &bytes);
    assert_eq!(
        LoginRegisterRequest::decode(&their.to_bytes()).unwrap(),
        request
    );

    let pat = LoginRegisterWithPatRequest {
        protocol_version: PROTOCOL_VERSION,
        sdk_name: name(SDK_NAME),
        sdk_version: name(SDK_VERSION),
        token: Password::new("tok").unwrap(),
        context: Bytes::new(),
    };
    let bytes = ours(|o| pat.encode(o));
    let their = TLoginPat {
        version_info: version(),
        token: "tok".to_string().into(),
        client_context: None,
    };
    same(&their, &bytes);
    assert_eq!(
        LoginRegisterWithPatRequest::decode(&their.to_bytes()).unwrap(),
        pat
    );
}

#[test]
fn login_register_reply() {
    let reply = LoginRegisterReply {
        user_id: 3,
        session: 101,
        server_protocol_version: 0x2C00,
        server_version: name("0.11.0"),
    };
    let their = TLoginReply {
        user_id: 3,
        session: 101,
        server_protocol_version: 0x2C00,
        server_version: wname("0.11.0"),
    };
    same(&their, &ours(|o| reply.encode(o)));
    assert_eq!(
        LoginRegisterReply::decode(&their.to_bytes()).unwrap(),
        reply
    );
}

fn node(role: NodeRole, status: NodeStatus) -> (ClusterNode, ClusterNodeResponse) {
    let ours = ClusterNode {
        name: "node-1".into(),
        ip: "::1".into(),
        tcp_port: 8090,
        quic_port: 8080,
        http_port: 3000,
        websocket_port: 8092,
        role,
        status,
    };
    let theirs = ClusterNodeResponse {
        name: "node-1".into(),
        ip: "::1".into(),
        tcp_port: 8090,
        quic_port: 8080,
        http_port: 3000,
        websocket_port: 8092,
        role: role as u8,
        status: status as u8,
    };
    (ours, theirs)
}

#[test]
fn cluster_metadata_reply() {
    let (a, ta) = node(NodeRole::Leader, NodeStatus::Healthy);
    let (b, tb) = node(NodeRole::Follower, NodeStatus::Maintenance);
    let ours_value = ClusterMetadata {
        name: "cluster".into(),
        nodes: vec![a, b],
    };
    let their = TCluster {
        name: "cluster".into(),
        nodes: vec![ta, tb],
    };
    same(&their, &ours(|o| ours_value.encode(o)));
    assert_eq!(
        ClusterMetadata::decode(&their.to_bytes()).unwrap(),
        ours_value
    );
}

#[test]
fn attach_consumer_session_and_poll_routing_reply() {
    let session = ConsumerSession {
        client_id: u128::MAX - 5,
        session: 77,
        metadata_watermark: 88,
    };
    let their_session = TAttach {
        client_id: u128::MAX - 5,
        session: 77,
        metadata_watermark: 88,
    };
    same(&their_session, &ours(|o| session.encode(o)));
    assert_eq!(
        ConsumerSession::decode(&their_session.to_bytes()).unwrap(),
        session
    );

    let (primary, their_primary) = node(NodeRole::Leader, NodeStatus::Healthy);
    let routing = PollRouting {
        consumer_session: session,
        primary,
    };
    let their = TRouting {
        consumer_session: their_session,
        primary: their_primary,
    };
    same(&their, &ours(|o| routing.encode(o)));
    assert_eq!(PollRouting::decode(&their.to_bytes()).unwrap(), routing);
}

fn consumer() -> (Consumer, WireConsumer) {
    (
        Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: Identifier::try_from("group").unwrap(),
        },
        WireConsumer::consumer_group(WireIdentifier::named("group").unwrap()),
    )
}

#[test]
fn poll_messages_request_for_100_103_104() {
    for (partition_id, strategy, their_strategy, auto_commit) in [
        (
            Some(3),
            PollingStrategy::Offset(9),
            WirePollingStrategy::offset(9),
            true,
        ),
        (
            None,
            PollingStrategy::Next,
            WirePollingStrategy::next(),
            false,
        ),
        (
            Some(0),
            PollingStrategy::Timestamp(5),
            WirePollingStrategy::timestamp(5),
            true,
        ),
        (
            None,
            PollingStrategy::First,
            WirePollingStrategy::first(),
            true,
        ),
        (
            None,
            PollingStrategy::Last,
            WirePollingStrategy::last(),
            false,
        ),
    ] {
        let (c, tc) = consumer();
        let request = PollMessagesRequest {
            consumer: c,
            stream: 1.into(),
            topic: Identifier::try_from("t").unwrap(),
            partition_id,
            strategy,
            count: 10,
            auto_commit,
        };
        let their = TPoll {
            consumer: tc,
            stream_id: WireIdentifier::numeric(1),
            topic_id: WireIdentifier::named("t").unwrap(),
            partition_id,
            strategy: their_strategy,
            count: 10,
            auto_commit,
        };
        same(&their, &ours(|o| request.encode(o)));
        assert_eq!(
            PollMessagesRequest::decode(&their.to_bytes()).unwrap(),
            request
        );
    }
}

#[test]
fn consumer_offset_bodies_120_121_122_123() {
    let (c, tc) = consumer();
    let key = ConsumerOffsetKey {
        consumer: c,
        stream: 1.into(),
        topic: 2.into(),
        partition_id: Some(4),
    };
    let get = t_off::GetConsumerOffsetRequest {
        consumer: tc.clone(),
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::numeric(2),
        partition_id: Some(4),
    };
    same(&get, &ours(|o| key.encode(o)));
    assert_eq!(ConsumerOffsetKey::decode(&get.to_bytes()).unwrap(), key);

    let store = StoreConsumerOffsetRequest {
        key: key.clone(),
        offset: 12,
    };
    let their = t_off::StoreConsumerOffsetRequest {
        consumer: tc.clone(),
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::numeric(2),
        partition_id: Some(4),
        offset: 12,
        ack: AckLevel::Quorum,
    };
    same(&their, &ours(|o| store.encode(o)));
    assert_eq!(
        StoreConsumerOffsetRequest::decode(&their.to_bytes()).unwrap(),
        store
    );
    let no_ack = t_off::StoreConsumerOffsetRequest {
        ack: AckLevel::NoAck,
        ..their
    };
    assert_eq!(
        StoreConsumerOffsetRequest::decode(&no_ack.to_bytes()).unwrap(),
        store
    );

    let delete = DeleteConsumerOffsetRequest { key: key.clone() };
    let their = t_off::DeleteConsumerOffsetRequest {
        consumer: tc,
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::numeric(2),
        partition_id: Some(4),
        ack: AckLevel::Quorum,
    };
    same(&their, &ours(|o| delete.encode(o)));
    assert_eq!(
        DeleteConsumerOffsetRequest::decode(&their.to_bytes()).unwrap(),
        delete
    );

    let info = ConsumerOffsetInfo {
        partition_id: 4,
        current_offset: 100,
        stored_offset: 12,
    };
    let their = TOffsetInfo {
        partition_id: 4,
        current_offset: 100,
        stored_offset: 12,
    };
    same(&their, &ours(|o| info.encode(o)));
    assert_eq!(
        ConsumerOffsetInfo::decode(&their.to_bytes()).unwrap(),
        Some(info)
    );
}

#[test]
fn stream_and_topic_requests() {
    let get_stream = GetStreamRequest {
        stream: Identifier::try_from("s").unwrap(),
    };
    same(
        &TGetStream {
            stream_id: WireIdentifier::named("s").unwrap(),
        },
        &ours(|o| get_stream.encode(o)),
    );
    let get_topic = GetTopicRequest {
        stream: 1.into(),
        topic: 2.into(),
    };
    let their = TGetTopic {
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::numeric(2),
    };
    same(&their, &ours(|o| get_topic.encode(o)));
    assert_eq!(
        GetTopicRequest::decode(&their.to_bytes()).unwrap(),
        get_topic
    );

    let create_stream = CreateStreamRequest {
        name: name("orders"),
    };
    let their = TCreateStream {
        name: wname("orders"),
        options: WireOptions::empty(),
    };
    same(&their, &ours(|o| create_stream.encode(o)));
    assert_eq!(
        CreateStreamRequest::decode(&their.to_bytes()).unwrap(),
        create_stream
    );

    let options = Bytes::from_static(&[2, 3, 0, 0, 0, b'k', b'e', b'y', 2, 1, 0, 0, 0, b'v']);
    let create_topic = CreateTopicRequest {
        stream: 1.into(),
        partitions_count: 3,
        name: name("t"),
        options: options.clone(),
    };
    let their = TCreateTopic {
        stream_id: WireIdentifier::numeric(1),
        partitions_count: 3,
        name: wname("t"),
        options: WireOptions::from_bytes(options).unwrap(),
    };
    same(&their, &ours(|o| create_topic.encode(o)));
    assert_eq!(
        CreateTopicRequest::decode(&their.to_bytes()).unwrap(),
        create_topic
    );

    let create_parts = CreatePartitionsRequest {
        stream: 1.into(),
        topic: 2.into(),
        partitions_count: 5,
    };
    let their = TCreateParts {
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::numeric(2),
        partitions_count: 5,
    };
    same(&their, &ours(|o| create_parts.encode(o)));
    assert_eq!(
        CreatePartitionsRequest::decode(&their.to_bytes()).unwrap(),
        create_parts
    );
}

fn topic(id: u32, partitions_count: u32) -> (TopicSummary, TopicHeader) {
    let ours = TopicSummary {
        id,
        created_at: 10,
        partitions_count,
        message_expiry: 0,
        compression: 2,
        max_topic_size: 1 << 30,
        size_bytes: 5,
        messages_count: 6,
        name: name("topic"),
    };
    let theirs = TopicHeader {
        id,
        created_at: 10,
        partitions_count,
        message_expiry: 0,
        compression_algorithm: 2,
        max_topic_size: 1 << 30,
        size_bytes: 5,
        messages_count: 6,
        name: wname("topic"),
        options: WireOptions::empty(),
        derived_options: WireOptions::empty(),
    };
    (ours, theirs)
}

#[test]
fn get_stream_reply_and_create_stream_payload() {
    let (t1, th1) = topic(1, 2);
    let (t2, th2) = topic(2, 0);
    let stream = StreamDetails {
        id: 1,
        created_at: 2,
        topics_count: 2,
        size_bytes: 3,
        messages_count: 4,
        name: name("s"),
        topics: vec![t1, t2],
    };
    let header = StreamResponse {
        id: 1,
        created_at: 2,
        topics_count: 2,
        size_bytes: 3,
        messages_count: 4,
        name: wname("s"),
        options: WireOptions::empty(),
    };
    let their = TStream {
        stream: header.clone(),
        topics: vec![th1, th2],
    };
    same(&their, &ours(|o| stream.encode(o)));
    assert_eq!(StreamDetails::decode(&their.to_bytes()).unwrap(), stream);

    // CREATE_STREAM's payload is a bare StreamResponse of an empty stream.
    let created = StreamDetails {
        topics_count: 0,
        topics: vec![],
        ..stream
    };
    let their = StreamResponse {
        topics_count: 0,
        ..header
    };
    same(&their, &ours(|o| created.encode(o)));
}

#[test]
fn get_topic_reply_and_create_topic_payload() {
    let (summary, header) = topic(7, 2);
    let parts: Vec<PartitionInfo> = (0..2)
        .map(|id| PartitionInfo {
            id,
            created_at: 1,
            segments_count: 2,
            current_offset: 3,
            size_bytes: 4,
            messages_count: 5,
        })
        .collect();
    let their_parts: Vec<PartitionResponse> = (0..2)
        .map(|id| PartitionResponse {
            id,
            created_at: 1,
            segments_count: 2,
            current_offset: 3,
            size_bytes: 4,
            messages_count: 5,
        })
        .collect();
    let details = TopicDetails {
        summary,
        partitions: parts,
    };
    let their = TTopic {
        topic: header,
        partitions: their_parts,
    };
    same(&their, &ours(|o| details.encode(o)));
    assert_eq!(TopicDetails::decode(&their.to_bytes()).unwrap(), details);
}

#[test]
fn result_section_framing_matches_the_crate() {
    use iggy_binary_protocol::{result_code, result_section_len};
    let mut ok = BytesMut::new();
    put_result_ok(&mut ok);
    ok.extend_from_slice(b"xyz");
    assert_eq!(result_code(&ok), Some(0));
    assert_eq!(
        split_result(&ok).unwrap(),
        Ok(&ok[result_section_len(&ok).unwrap()..])
    );
    let mut rejected = BytesMut::new();
    put_result_rejection(1009, &mut rejected);
    assert_eq!(result_code(&rejected), Some(1009));
    assert_eq!(
        split_result(&rejected).unwrap(),
        Err(ErrorCode::StreamIdNotFound)
    );
    for bad in [&[][..], &[1, 0, 0, 0], &[1, 0, 0, 0, 0, 0, 0, 0]] {
        assert_eq!(result_section_len(bad), None);
        assert!(split_result(bad).is_err());
    }
}
