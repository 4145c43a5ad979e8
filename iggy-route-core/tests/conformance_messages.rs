//! SEND_MESSAGES and POLL_MESSAGES conformance against the published 0.11.0 crates.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use iggy_binary_protocol::batch::{
    BatchIntegrity, calculate_batch_checksum, decode_batch_slice_with,
};
use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::responses::messages::{
    PollMessagesResponse, SendMessagesConfirmationResponse, SendMessagesResponse,
};
use iggy_binary_protocol::{WireDecode, WireEncode, WireIdentifier, WirePartitioning};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::*;

fn messages() -> Vec<Message> {
    vec![
        Message {
            id: 0xAABB,
            origin_timestamp: 1_000_005,
            payload: Bytes::from_static(b"xyz"),
            user_headers: Bytes::from_static(&[2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v']),
        },
        Message {
            id: 0xCCDD,
            origin_timestamp: 1_000_000,
            payload: Bytes::new(),
            user_headers: Bytes::new(),
        },
        Message {
            id: u128::MAX,
            origin_timestamp: 1_000_900,
            payload: Bytes::from(vec![7u8; 1000]),
            user_headers: Bytes::new(),
        },
    ]
}

fn their_send(
    stream: &WireIdentifier,
    partitioning: &WirePartitioning,
    msgs: &[Message],
) -> Vec<u8> {
    let raw: Vec<RawMessage<'_>> = msgs
        .iter()
        .map(|m| RawMessage {
            id: m.id,
            origin_timestamp: m.origin_timestamp,
            headers: (!m.user_headers.is_empty()).then_some(&m.user_headers[..]),
            payload: &m.payload,
        })
        .collect();
    let mut buf = BytesMut::new();
    SendMessagesEncoder::encode(
        &mut buf,
        stream,
        &WireIdentifier::numeric(3),
        partitioning,
        &raw,
    )
    .unwrap();
    buf.to_vec()
}

#[test]
fn send_messages_body_is_byte_identical_for_every_partitioning() {
    for (ours_p, theirs_p) in [
        (
            Partitioning::PartitionId(2),
            WirePartitioning::PartitionId(2),
        ),
        (Partitioning::Balanced, WirePartitioning::Balanced),
        (
            Partitioning::messages_key(&b"order-1"[..]).unwrap(),
            WirePartitioning::MessagesKey(b"order-1".to_vec()),
        ),
    ] {
        let request = SendMessagesRequest {
            stream: Identifier::try_from("orders").unwrap(),
            topic: 3.into(),
            partitioning: ours_p,
            messages: messages(),
        };
        let mut ours = BytesMut::new();
        request.encode(&mut ours);
        let theirs = their_send(
            &WireIdentifier::named("orders").unwrap(),
            &theirs_p,
            &messages(),
        );
        assert_eq!(&ours[..], &theirs[..]);
        assert_eq!(SendMessagesRequest::decode(&theirs).unwrap(), request);
    }
}

#[test]
fn our_send_batch_passes_their_checksum_verification() {
    let request = SendMessagesRequest {
        stream: 1.into(),
        topic: 3.into(),
        partitioning: Partitioning::PartitionId(0),
        messages: messages(),
    };
    let mut ours = BytesMut::new();
    request.encode(&mut ours);
    let metadata_len = u32::from_le_bytes(ours[..4].try_into().unwrap()) as usize;
    let batch = decode_batch_slice_with(&ours[4 + metadata_len..], BatchIntegrity::Verify).unwrap();
    assert_eq!(batch.message_count(), 3);
    assert_eq!(
        calculate_batch_checksum(&batch.header, batch.blob()),
        batch.header.batch_checksum
    );
    let ids: Vec<u128> = batch.iter().map(|m| m.header.id).collect();
    assert_eq!(ids, vec![0xAABB, 0xCCDD, u128::MAX]);
}

#[test]
fn send_messages_reply_both_ways() {
    let reply = SendMessagesReply {
        confirmations: vec![
            SendConfirmation {
                stream_id: 1,
                topic_id: 2,
                partition_id: 3,
                base_offset: 4,
            },
            SendConfirmation {
                stream_id: 5,
                topic_id: 6,
                partition_id: 7,
                base_offset: u64::MAX,
            },
        ],
    };
    let their = SendMessagesResponse {
        confirmations: vec![
            SendMessagesConfirmationResponse {
                stream_id: 1,
                topic_id: 2,
                partition_id: 3,
                base_offset: 4,
            },
            SendMessagesConfirmationResponse {
                stream_id: 5,
                topic_id: 6,
                partition_id: 7,
                base_offset: u64::MAX,
            },
        ],
    };
    let mut ours = BytesMut::new();
    reply.encode(&mut ours);
    assert_eq!(&ours[..], their.to_bytes().as_ref());
    let (decoded, used) = SendMessagesResponse::decode(&ours).unwrap();
    assert_eq!((decoded.confirmations.len(), used), (2, ours.len()));
    assert_eq!(SendMessagesReply::decode(&their.to_bytes()).unwrap(), reply);
}

#[test]
fn poll_reply_decodes_with_their_iterator_and_theirs_with_ours() {
    let polled = |offset: u64, timestamp: u64, origin: u64, payload: &'static [u8]| PolledMessage {
        offset,
        id: u128::from(offset) + 100,
        timestamp,
        origin_timestamp: origin,
        payload: Bytes::from_static(payload),
        user_headers: Bytes::from_static(&[2, 1, 0, 0, 0, b'a', 2, 1, 0, 0, 0, b'b']),
    };
    let reply = PollMessagesReply {
        partition_id: 1,
        current_offset: 42,
        messages: vec![
            polled(10, 500, 490, b"one"),
            polled(11, 500, 480, b"two"),
            polled(12, 600, 600, b""),
        ],
    };
    let mut ours = BytesMut::new();
    reply.encode(&mut ours);
    let theirs = PollMessagesResponse::decode(&ours).unwrap();
    assert_eq!(
        (theirs.header.partition_id, theirs.header.current_offset),
        (1, 42)
    );
    let views: Vec<_> = theirs.messages.map(|m| m.unwrap()).collect();
    assert_eq!(views.len(), 3);
    for (view, m) in views.iter().zip(&reply.messages) {
        assert_eq!(
            (view.offset, view.id, view.timestamp, view.origin_timestamp),
            (m.offset, m.id, m.timestamp, m.origin_timestamp)
        );
        assert_eq!(
            (view.payload, view.user_headers),
            (&m.payload[..], &m.user_headers[..])
        );
    }

    // A stored batch built by their encoder, re-stamped by a server and served back.
    let msgs = messages();
    let send = their_send(
        &WireIdentifier::numeric(1),
        &WirePartitioning::PartitionId(0),
        &msgs,
    );
    let metadata_len = u32::from_le_bytes(send[..4].try_into().unwrap()) as usize;
    let mut batch = send[4 + metadata_len..].to_vec();
    batch[..8].copy_from_slice(&1u64.to_le_bytes());
    batch[8..16].copy_from_slice(&100u64.to_le_bytes());
    batch[16..24].copy_from_slice(&777u64.to_le_bytes());
    let mut body = BytesMut::new();
    PollMessagesReply::encode_batches(1, 102, 3, &[&batch], &mut body);
    let decoded = PollMessagesReply::decode(&body).unwrap();
    let their_views: Vec<_> = PollMessagesResponse::decode(&body)
        .unwrap()
        .messages
        .map(|m| m.unwrap())
        .collect();
    assert_eq!(decoded.messages.len(), their_views.len());
    for ((m, view), sent) in decoded.messages.iter().zip(&their_views).zip(&msgs) {
        assert_eq!(
            (m.offset, m.id, m.timestamp, m.origin_timestamp),
            (view.offset, view.id, view.timestamp, view.origin_timestamp)
        );
        assert_eq!(
            (m.id, m.origin_timestamp, &m.payload),
            (sent.id, sent.origin_timestamp, &sent.payload)
        );
    }
    assert_eq!(decoded.messages[2].offset, 102);
}
