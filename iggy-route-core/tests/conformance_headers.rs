//! Conformance of headers, codes and partitioning against the published 0.11.0 crates.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use iggy_binary_protocol as theirs;
use iggy_route_core::partitioning::resolve_partition;
use iggy_route_core::wire::{
    ErrorCode, EvictionHeader, EvictionReason, Operation, ReplyHeader, RequestHeader, code,
};
use theirs::consensus::{Command, ConsensusHeader};

/// The 256 bytes of one of their `#[repr(C)]`, padding-free (`NoUninit`) headers.
fn their_bytes<H: ConsensusHeader>(header: &H) -> Vec<u8> {
    assert_eq!(size_of::<H>(), 256);
    // SAFETY: every consensus header is `NoUninit` (no padding, no uninit bytes)
    // and exactly 256 bytes long, so viewing it as bytes is sound.
    unsafe { std::slice::from_raw_parts((header as *const H).cast::<u8>(), 256) }.to_vec()
}

/// Read their header from bytes after checking the enum bytes hold valid values.
fn their_header<H: ConsensusHeader + Copy>(bytes: &[u8], operation_offset: Option<usize>) -> H {
    assert_eq!(bytes.len(), 256);
    if let Some(offset) = operation_offset {
        assert!(theirs::Operation::is_known_code(bytes[offset]));
    }
    assert!(matches!(bytes[60], 5 | 8 | 13));
    // SAFETY: the length is 256, the only enum fields (command, operation and the
    // eviction reason, checked by the callers) hold valid discriminants, and every
    // other field accepts any bit pattern.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<H>()) }
}

/// Their `Operation` for a byte they know.
fn their_op(byte: u8) -> theirs::Operation {
    assert!(theirs::Operation::is_known_code(byte));
    // SAFETY: `Operation` is `#[repr(u8)]` and `is_known_code` checked the byte
    // is one of its discriminants.
    unsafe { std::mem::transmute::<u8, theirs::Operation>(byte) }
}

fn ours<F: Fn(&mut BytesMut)>(encode: F) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

#[test]
fn request_header_is_byte_identical_both_ways() {
    for op in Operation::ALL {
        let mut header = RequestHeader::new(*op, 103, 0xdead_beef << 64 | 7, 42, 9, 33);
        header.request_checksum = 0x1234;
        header.user_id = 5;
        header.cluster = 77;
        let bytes = ours(|out| header.encode(out));
        let mut expected = theirs::RequestHeader {
            cluster: 77,
            size: 256 + 33,
            command: Command::Request,
            client: header.client,
            request_checksum: 0x1234,
            request: 9,
            operation: their_op(*op as u8),
            session: 42,
            user_id: 5,
            ..theirs::RequestHeader::default()
        };
        if *op == Operation::NonReplicated {
            expected.reserved[..4].copy_from_slice(&103u32.to_le_bytes());
        }
        assert_eq!(bytes, their_bytes(&expected), "operation {op:?}");
        let decoded: theirs::RequestHeader = their_header(&bytes, Some(176));
        assert_eq!(decoded.operation as u8, *op as u8);
        assert_eq!(
            RequestHeader::decode(&their_bytes(&expected)).unwrap(),
            header
        );
    }
}

#[test]
fn reply_header_is_byte_identical_both_ways() {
    let request = RequestHeader::new(Operation::StoreConsumerOffset, 0, 99, 3, 4, 10);
    let mut reply = ReplyHeader::for_request(&request, 58, 42, 4);
    reply.op = 11;
    reply.timestamp = 12;
    reply.context = 13;
    let bytes = ours(|out| reply.encode(out));
    let expected = theirs::ReplyHeader {
        size: 260,
        command: Command::Reply,
        client: 99,
        op: 11,
        commit: 42,
        timestamp: 12,
        context: 13,
        request: 4,
        operation: theirs::Operation::StoreConsumerOffset,
        status: 58,
        ..theirs::ReplyHeader::default()
    };
    assert_eq!(bytes, their_bytes(&expected));
    let decoded: theirs::ReplyHeader = their_header(&bytes, Some(208));
    assert!(decoded.validate().is_ok());
    assert_eq!(ReplyHeader::decode(&their_bytes(&expected)).unwrap(), reply);
}

#[test]
fn eviction_header_is_byte_identical_both_ways() {
    for byte in 1..=15u8 {
        let reason = EvictionReason::from_u8(byte);
        let (max, min) = if byte == 14 { (0x2C00, 0x2C00) } else { (0, 0) };
        let ours_header = EvictionHeader {
            cluster: 0,
            client: 5,
            server_protocol_version: max,
            server_protocol_version_min: min,
            reason,
        };
        let bytes = ours(|out| ours_header.encode(out));
        let mut expected =
            theirs::EvictionHeader::new(0, 0, 0, 5, theirs::EvictionReason::NoSession);
        expected.server_protocol_version = max;
        expected.server_protocol_version_min = min;
        let mut their = their_bytes(&expected);
        their[255] = byte;
        assert_eq!(bytes, their, "reason {byte}");
        let decoded: theirs::EvictionHeader = their_header(&bytes, None);
        assert!(decoded.validate().is_ok(), "reason {byte}");
        assert_eq!(EvictionHeader::decode(&their).unwrap(), ours_header);
        let sdk = iggy_common::eviction_reason_to_error(decoded.reason, max, min);
        assert_eq!(
            ours_header.error_code().as_u32(),
            sdk.as_code(),
            "reason {byte}"
        );
    }
}

#[test]
fn every_named_error_code_matches_iggy_common() {
    for code in ErrorCode::NAMED {
        let theirs = iggy_common::IggyError::from_code(code.as_u32());
        assert_eq!(
            theirs.as_code(),
            code.as_u32(),
            "{code:?} is not an IggyError code"
        );
        let name: &'static str = iggy_common::IggyError::from_code_as_string(code.as_u32());
        assert_ne!(name, "unknown error code", "{code:?}");
    }
}

#[test]
fn operations_and_code_mapping_match_the_crate() {
    for byte in 0..=255u8 {
        assert_eq!(
            Operation::from_u8(byte).is_some(),
            theirs::Operation::is_known_code(byte)
        );
    }
    for op in Operation::ALL {
        let their = their_op(*op as u8);
        assert_eq!(op.is_metadata(), their.is_metadata(), "{op:?}");
        assert_eq!(op.is_partition(), their.is_partition(), "{op:?}");
        assert_eq!(op.is_result_framed(), their.is_result_framed(), "{op:?}");
    }
    let all_codes = [
        code::PING,
        code::GET_STATS,
        code::GET_SNAPSHOT_FILE,
        code::GET_CLUSTER_METADATA,
        code::DESCRIBE_OPTIONS,
        code::ATTACH_CONSUMER_SESSION,
        code::GET_ME,
        code::GET_CLIENT,
        code::GET_CLIENTS,
        code::GET_USER,
        code::GET_USERS,
        code::CREATE_USER,
        code::DELETE_USER,
        code::UPDATE_USER,
        code::UPDATE_PERMISSIONS,
        code::CHANGE_PASSWORD,
        code::LOGIN_USER,
        code::LOGOUT_USER,
        code::LOGIN_REGISTER,
        code::GET_PERSONAL_ACCESS_TOKENS,
        code::CREATE_PERSONAL_ACCESS_TOKEN,
        code::DELETE_PERSONAL_ACCESS_TOKEN,
        code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
        code::LOGIN_REGISTER_WITH_PAT,
        code::POLL_MESSAGES,
        code::SEND_MESSAGES,
        code::FLUSH_UNSAVED_BUFFER,
        code::GET_POLL_ROUTING,
        code::POLL_MESSAGES_ON_PRIMARY,
        code::GET_CONSUMER_OFFSET,
        code::STORE_CONSUMER_OFFSET,
        code::DELETE_CONSUMER_OFFSET,
        code::GET_CONSUMER_OFFSET_ROUTING,
        code::GET_STREAM,
        code::GET_STREAMS,
        code::CREATE_STREAM,
        code::DELETE_STREAM,
        code::UPDATE_STREAM,
        code::PURGE_STREAM,
        code::GET_TOPIC,
        code::GET_TOPICS,
        code::CREATE_TOPIC,
        code::DELETE_TOPIC,
        code::UPDATE_TOPIC,
        code::PURGE_TOPIC,
        code::CREATE_PARTITIONS,
        code::DELETE_PARTITIONS,
        code::DELETE_SEGMENTS,
        code::GET_CONSUMER_GROUP,
        code::GET_CONSUMER_GROUPS,
        code::CREATE_CONSUMER_GROUP,
        code::DELETE_CONSUMER_GROUP,
        code::JOIN_CONSUMER_GROUP,
        code::LEAVE_CONSUMER_GROUP,
        code::SYNC_CONSUMER_GROUP,
    ];
    for c in all_codes {
        assert!(
            theirs::codes::command_name(c).is_ok(),
            "code {c} unknown to the crate"
        );
        let expected = match c {
            code::LOGIN_REGISTER | code::LOGIN_REGISTER_WITH_PAT => theirs::Operation::Register,
            code::LOGOUT_USER => theirs::Operation::Logout,
            other => theirs::lookup_command(other)
                .and_then(|meta| meta.operation)
                .unwrap_or(theirs::Operation::NonReplicated),
        };
        assert_eq!(Operation::for_code(c) as u8, expected as u8, "code {c}");
    }
}

#[test]
fn partitioning_matches_iggy_common_hashing() {
    for key in [
        &b"order-1"[..],
        b"order-2",
        b"abc",
        b"k",
        &[0u8; 255],
        &7u64.to_le_bytes(),
    ] {
        let hash = iggy_common::calculate_32(key);
        for count in [1u32, 2, 3, 7, 1000] {
            assert_eq!(resolve_partition(key, count), Some(hash % count));
        }
    }
}
