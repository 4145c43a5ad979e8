//! `POLL_MESSAGES` (100) and `POLL_MESSAGES_ON_PRIMARY` (104, same body) request
//! and reply (§5.1). 103 (`GET_POLL_ROUTING`) also uses the request body.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::read_batch;
#[cfg(feature = "server")]
use super::batch::{BatchHeader, FrameSpec, put_batch};
#[cfg(feature = "server")]
use super::len_u32;
use super::{Consumer, HeaderError, Identifier, PollingStrategy, Reader, UserHeaders, WireError};

/// `[flag:u8][partition_id:u32]`: 5 bytes either way, value 0 when `None`.
pub(crate) fn put_optional_partition(partition_id: Option<u32>, out: &mut BytesMut) {
    out.put_u8(u8::from(partition_id.is_some()));
    out.put_u32_le(partition_id.unwrap_or(0));
}

/// Read `[flag:u8][partition_id:u32]`; as in the crate, only flag 1 means `Some`.
#[cfg(feature = "server")]
pub(crate) fn read_optional_partition(r: &mut Reader<'_>) -> Result<Option<u32>, WireError> {
    let flag = r.u8()?;
    let value = r.u32()?;
    Ok((flag == 1).then_some(value))
}

/// The poll request body, shared by 100, 103 and 104.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PollMessagesRequest {
    /// Consumer or group.
    pub consumer: Consumer,
    /// Stream.
    pub stream: Identifier,
    /// Topic.
    pub topic: Identifier,
    /// Partition (required for a single consumer; `None` lets a group choose).
    pub partition_id: Option<u32>,
    /// Where to start.
    pub strategy: PollingStrategy,
    /// Maximum messages.
    pub count: u32,
    /// Whether the server commits the offset after the poll.
    pub auto_commit: bool,
}

impl PollMessagesRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.consumer.encode(out);
        self.stream.encode(out);
        self.topic.encode(out);
        put_optional_partition(self.partition_id, out);
        self.strategy.encode(out);
        out.put_u32_le(self.count);
        out.put_u8(u8::from(self.auto_commit));
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.consumer.encoded_len()
            + self.stream.encoded_len()
            + self.topic.encoded_len()
            + 5
            + 9
            + 4
            + 1
    }
}

#[cfg(feature = "server")]
impl PollMessagesRequest {
    /// Decode a whole body (as in the crate, any nonzero `auto_commit` is true).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self {
            consumer: Consumer::decode(&mut r)?,
            stream: Identifier::decode(&mut r)?,
            topic: Identifier::decode(&mut r)?,
            partition_id: read_optional_partition(&mut r)?,
            strategy: PollingStrategy::decode(&mut r)?,
            count: r.u32()?,
            auto_commit: r.u8()? != 0,
        };
        r.finish("poll messages request")?;
        Ok(value)
    }
}

/// One message of a poll reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PolledMessage {
    /// `base_offset + offset_delta`.
    pub offset: u64,
    /// Message id.
    pub id: u128,
    /// The batch's server timestamp, µs.
    pub timestamp: u64,
    /// `origin_timestamp + timestamp_delta`, µs.
    pub origin_timestamp: u64,
    /// Payload.
    pub payload: Bytes,
    /// The user headers as the wire carries them; [`PolledMessage::headers`] reads them
    /// typed.
    pub user_headers: Bytes,
}

impl PolledMessage {
    /// The user headers, decoded as the SDK 0.11.0 decodes them; none for an empty block.
    /// A block that is not a whole sequence of valid entries is a [`HeaderError`], never
    /// a panic: what a producer wrote is checked only for its layout on the way in.
    pub fn headers(&self) -> Result<UserHeaders, HeaderError> {
        UserHeaders::decode(&self.user_headers)
    }
}

/// The poll reply body: `[partition_id:u32][current_offset:u64][count:u32]` then
/// zero or more batch records (`count` is only a hint and is not checked).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PollMessagesReply {
    /// Partition served (`u32::MAX` is the consumer-group resync sentinel).
    pub partition_id: u32,
    /// The partition's current offset.
    pub current_offset: u64,
    /// Messages, in order.
    pub messages: Vec<PolledMessage>,
}

impl PollMessagesReply {
    /// Decode a whole body. Checks layout only, not checksums, like the SDK. A
    /// zero-length body is an error.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let partition_id = r.u32()?;
        let current_offset = r.u64()?;
        let _count_hint = r.u32()?;
        let mut messages = Vec::new();
        while r.remaining() > 0 {
            let (header, frames) = read_batch(&mut r, false)?;
            messages.extend(frames.iter().map(|f| {
                PolledMessage {
                    offset: header.base_offset.saturating_add(f.offset_delta.into()),
                    id: f.id,
                    timestamp: header.base_timestamp,
                    origin_timestamp: header
                        .origin_timestamp
                        .saturating_add(f.timestamp_delta.into()),
                    payload: Bytes::copy_from_slice(f.payload),
                    user_headers: Bytes::copy_from_slice(f.user_headers),
                }
            }));
        }
        Ok(Self {
            partition_id,
            current_offset,
            messages,
        })
    }
}

#[cfg(feature = "server")]
impl PollMessagesReply {
    /// Append the body: the prefix, then the messages as batch records. Runs of
    /// messages that share a timestamp and fit the u32 deltas share one record.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.partition_id);
        out.put_u64_le(self.current_offset);
        out.put_u32_le(len_u32(self.messages.len()));
        let mut rest = &self.messages[..];
        while let Some(first) = rest.first() {
            let mut min_origin = first.origin_timestamp;
            let mut max_origin = first.origin_timestamp;
            let mut end = 1;
            for m in &rest[1..] {
                let lo = min_origin.min(m.origin_timestamp);
                let hi = max_origin.max(m.origin_timestamp);
                let fits = m.timestamp == first.timestamp
                    && m.offset >= first.offset
                    && m.offset - first.offset <= u64::from(u32::MAX)
                    && hi - lo <= u64::from(u32::MAX);
                if !fits {
                    break;
                }
                (min_origin, max_origin, end) = (lo, hi, end + 1);
            }
            let (group, tail) = rest.split_at(end);
            let frames: Vec<FrameSpec<'_>> = group
                .iter()
                .map(|m| FrameSpec {
                    id: m.id,
                    offset_delta: u32::try_from(m.offset - first.offset).unwrap_or(u32::MAX),
                    timestamp_delta: u32::try_from(m.origin_timestamp - min_origin)
                        .unwrap_or(u32::MAX),
                    payload: &m.payload,
                    user_headers: &m.user_headers,
                })
                .collect();
            let header = BatchHeader {
                partition_id: self.partition_id.into(),
                base_offset: first.offset,
                base_timestamp: first.timestamp,
                origin_timestamp: min_origin,
                ..BatchHeader::default()
            };
            put_batch(header, &frames, out);
            rest = tail;
        }
    }

    /// Append a body that serves already-encoded batch records verbatim.
    pub fn encode_batches(
        partition_id: u32,
        current_offset: u64,
        message_count: u32,
        batches: &[&[u8]],
        out: &mut BytesMut,
    ) {
        out.put_u32_le(partition_id);
        out.put_u64_le(current_offset);
        out.put_u32_le(message_count);
        for batch in batches {
            out.put_slice(batch);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::ConsumerKind;

    #[test]
    fn poll_request_matches_the_section_10_vector() {
        let request = PollMessagesRequest {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: 7.into(),
            },
            stream: 1.into(),
            topic: 1.into(),
            partition_id: Some(1),
            strategy: PollingStrategy::Offset(0),
            count: 10,
            auto_commit: true,
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        let expected = [
            1, 1, 4, 7, 0, 0, 0, 1, 4, 1, 0, 0, 0, 1, 4, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0,
            0, 0, 0, 0, 10, 0, 0, 0, 1,
        ];
        assert_eq!(&out[..], &expected);
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(PollMessagesRequest::decode(&out).unwrap(), request);
    }

    fn polled(offset: u64, timestamp: u64, origin: u64, payload: &'static [u8]) -> PolledMessage {
        PolledMessage {
            offset,
            id: offset as u128 + 1,
            timestamp,
            origin_timestamp: origin,
            payload: Bytes::from_static(payload),
            user_headers: Bytes::new(),
        }
    }

    #[test]
    fn poll_reply_round_trips_across_several_batch_records() {
        let reply = PollMessagesReply {
            partition_id: 2,
            current_offset: 9,
            messages: vec![
                polled(3, 100, 50, b"a"),
                polled(4, 100, 40, b"b"),
                polled(5, 200, 60, b""),
            ],
        };
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        assert_eq!(out.len(), 16 + 2 * 256 + 3 * 48 + 2);
        assert_eq!(PollMessagesReply::decode(&out).unwrap(), reply);
    }

    #[test]
    fn a_polled_message_reads_its_headers_typed() {
        let headers = UserHeaders::from([(
            crate::wire::HeaderKey::try_from("k").unwrap(),
            crate::wire::HeaderValue::from(-1i32),
        )]);
        let mut message = polled(0, 1, 1, b"p");
        assert_eq!(message.headers(), Ok(UserHeaders::new()));
        message.user_headers = headers.encode();
        assert_eq!(message.headers(), Ok(headers));
        message.user_headers = Bytes::from_static(&[2, 1, 0, 0, 0, b'k']);
        assert!(matches!(message.headers(), Err(HeaderError::Malformed(_))));
    }

    #[test]
    fn empty_poll_is_the_sixteen_byte_prefix_and_empty_body_fails() {
        let reply = PollMessagesReply {
            partition_id: u32::MAX,
            ..PollMessagesReply::default()
        };
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(PollMessagesReply::decode(&out).unwrap(), reply);
        assert!(PollMessagesReply::decode(&[]).is_err());
        assert!(PollMessagesReply::decode(&out[..15]).is_err());
    }
}
