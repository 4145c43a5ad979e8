//! Fuzzing entry points (not part of the public API).

pub mod fake_cluster;
mod router_ops;

pub use router_ops::{OpsSummary, router_ops};

use bytes::BytesMut;

use crate::wire::{
    ClusterMetadata, ConsumerOffsetInfo, ConsumerOffsetKey, ConsumerSession,
    CreatePartitionsRequest, CreateStreamRequest, CreateTopicRequest, DeleteConsumerOffsetRequest,
    Frame, FrameDecoder, GetStreamRequest, GetTopicRequest, LoginRegisterReply,
    LoginRegisterRequest, LoginRegisterWithPatRequest, PollMessagesReply, PollMessagesRequest,
    PollRouting, SendMessagesReply, SendMessagesRequest, StoreConsumerOffsetRequest, StreamDetails,
    TopicDetails, decode_one, reply_payload, split_result,
};

/// Decode `data` then, on success, encode and decode again and require equality.
macro_rules! round_trip {
    ($ty:ty, $bytes:expr) => {
        if let Ok(value) = <$ty>::decode($bytes) {
            let mut out = BytesMut::new();
            value.encode(&mut out);
            assert_eq!(
                out.len(),
                value.encoded_len(),
                "encoded_len of {}",
                stringify!($ty)
            );
            let again = <$ty>::decode(&out);
            assert_eq!(
                again.as_ref().ok(),
                Some(&value),
                "round trip of {}",
                stringify!($ty)
            );
        }
    };
}

/// The administration and system decoders (streams, topics, partitions, segments,
/// offsets, flush, stats, clients): none may panic, and what decodes round-trips.
fn decode_admin_bodies(body: &[u8]) {
    use crate::wire::{
        ClientDetails, ClientInfo, DeletePartitionsRequest, DeleteSegmentsRequest,
        DeleteStreamRequest, DeleteTopicRequest, FlushUnsavedBufferRequest, GetClientRequest,
        GetTopicsRequest, PurgeStreamRequest, PurgeTopicRequest, ServerStats, StreamSummary,
        TopicSummary, TopicUpdateOptions, UpdateStreamRequest, UpdateTopicRequest,
    };
    round_trip!(UpdateStreamRequest, body);
    round_trip!(DeleteStreamRequest, body);
    round_trip!(PurgeStreamRequest, body);
    round_trip!(GetTopicsRequest, body);
    round_trip!(UpdateTopicRequest, body);
    round_trip!(DeleteTopicRequest, body);
    round_trip!(PurgeTopicRequest, body);
    round_trip!(DeletePartitionsRequest, body);
    round_trip!(DeleteSegmentsRequest, body);
    round_trip!(FlushUnsavedBufferRequest, body);
    round_trip!(GetClientRequest, body);
    round_trip!(ClientDetails, body);
    // Lists drop options blocks, and stats hold floats (a NaN is not equal to itself):
    // decode only, then require our encoding of the value to decode again.
    if let Ok(streams) = StreamSummary::decode_list(body) {
        let mut out = BytesMut::new();
        StreamSummary::encode_list(&streams, &mut out);
        assert_eq!(StreamSummary::decode_list(&out).ok(), Some(streams));
    }
    if let Ok(topics) = TopicSummary::decode_list(body) {
        let mut out = BytesMut::new();
        TopicSummary::encode_list(&topics, &mut out);
        assert_eq!(TopicSummary::decode_list(&out).ok(), Some(topics));
    }
    if let Ok(clients) = ClientInfo::decode_list(body) {
        let mut out = BytesMut::new();
        ClientInfo::encode_list(&clients, &mut out);
        assert_eq!(ClientInfo::decode_list(&out).ok(), Some(clients));
    }
    if let Ok(stats) = ServerStats::decode(body) {
        let mut out = BytesMut::new();
        stats.encode(&mut out);
        assert_eq!(out.len(), stats.encoded_len());
        assert!(ServerStats::decode(&out).is_ok());
    }
    if let Ok(options) = TopicUpdateOptions::parse(body) {
        assert_eq!(
            TopicUpdateOptions::parse(&options.to_bytes()).ok(),
            Some(options)
        );
    }
}

/// Run every body decoder over `body`; none may panic, and values that decode
/// must re-encode to bytes that decode to the same value.
pub fn decode_bodies(body: &[u8]) {
    round_trip!(LoginRegisterRequest, body);
    round_trip!(LoginRegisterWithPatRequest, body);
    round_trip!(LoginRegisterReply, body);
    round_trip!(ClusterMetadata, body);
    round_trip!(ConsumerSession, body);
    round_trip!(PollRouting, body);
    round_trip!(SendMessagesRequest, body);
    round_trip!(SendMessagesReply, body);
    round_trip!(PollMessagesRequest, body);
    round_trip!(ConsumerOffsetKey, body);
    round_trip!(StoreConsumerOffsetRequest, body);
    round_trip!(DeleteConsumerOffsetRequest, body);
    round_trip!(CreateTopicRequest, body);
    round_trip!(CreatePartitionsRequest, body);
    round_trip!(GetStreamRequest, body);
    round_trip!(GetTopicRequest, body);
    round_trip!(TopicDetails, body);
    round_trip!(StreamDetails, body);
    decode_admin_bodies(body);
    // Not byte-preserving (options dropped, batches regrouped): decode only, then
    // check that our own encoding of the decoded value round-trips.
    if let Ok(value) = CreateStreamRequest::decode(body) {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(CreateStreamRequest::decode(&out).ok(), Some(value));
    }
    if let Ok(value) = PollMessagesReply::decode(body) {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(PollMessagesReply::decode(&out).ok(), Some(value));
    }
    if let Ok(Some(value)) = ConsumerOffsetInfo::decode(body) {
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(ConsumerOffsetInfo::decode(&out).ok(), Some(Some(value)));
    }
    let _ = split_result(body);
}

fn check_frame(frame: &Frame) {
    let mut out = BytesMut::new();
    frame.encode(&mut out);
    assert_eq!(
        decode_one(&out).as_ref().ok(),
        Some(frame),
        "frame round trip"
    );
    match frame {
        Frame::Request { body, .. } => decode_bodies(body),
        Frame::Reply { header, body } => {
            decode_bodies(body);
            if let Ok(payload) = reply_payload(header, body.clone()) {
                decode_bodies(&payload);
            }
        }
        Frame::Eviction(header) => {
            let _ = header.error_code();
        }
    }
}

/// Split `data` at a few points derived from its first bytes, feed the pieces to a
/// [`FrameDecoder`], and run every decoder over whatever comes out. Panics only
/// if the codec misbehaves.
pub fn decode_frame(data: &[u8]) {
    let seed = data.iter().take(4).fold(0usize, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(*b as usize)
    });
    let len = data.len().max(1);
    let mut cuts = [seed % len, (seed / 7) % len, (seed / 131) % len];
    cuts.sort_unstable();
    let mut decoder = FrameDecoder::new(1 << 20);
    let mut start = 0;
    for end in cuts.into_iter().chain([data.len()]) {
        let mut piece = data.get(start..end.max(start)).unwrap_or(&[]);
        start = end.max(start);
        // Bounded: every iteration consumes bytes or ends the loop.
        for _ in 0..=piece.len() {
            let before = piece.len();
            match decoder.decode(&mut piece) {
                Ok(Some(frame)) => check_frame(&frame),
                Ok(None) => break,
                Err(_) if decoder.is_poisoned() => return,
                Err(_) => {}
            }
            if piece.is_empty() && before == 0 {
                break;
            }
        }
    }
    assert!(decoder.buffered() <= 1 << 20);
    let _ = decode_one(data);
    decode_bodies(data);
}
