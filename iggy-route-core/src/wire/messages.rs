//! `SEND_MESSAGES` (101, operation 160) request and reply (§4.1, §4.2).

use bytes::{BufMut, Bytes, BytesMut};

#[cfg(feature = "server")]
use super::batch::BatchHeader;
#[cfg(feature = "server")]
use super::batch::read_batch;
use super::batch::{BATCH_HEADER_SIZE, MESSAGE_HEADER_SIZE, encode_batch};
use super::{HeaderError, Identifier, Reader, UserHeaders, WireError, len_u32};
use crate::partitioning::Partitioning;

/// One message to send.
///
/// ```
/// use iggy_route_core::wire::{HeaderKey, HeaderValue, Message, UserHeaders};
///
/// let plain = Message::new("hello");
/// let headers = UserHeaders::from([(HeaderKey::try_from("tenant")?, HeaderValue::from(7u32))]);
/// let keyed = Message::with_id(42, "hello").with_headers(&headers);
/// assert_eq!(keyed.headers()?, headers);
/// # Ok::<(), iggy_route_core::wire::HeaderError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Message {
    /// Message id; 0 is replaced with a random id when the message is sent, as the SDK
    /// does.
    pub id: u128,
    /// Producer-side timestamp, µs; the clients' send calls and producers fill in 0 with
    /// the time of the send.
    pub origin_timestamp: u64,
    /// Payload.
    pub payload: Bytes,
    /// The user headers as the wire carries them (the block [`UserHeaders::encode`]
    /// writes); may be empty. [`Message::with_headers`] and [`Message::headers`] are the
    /// typed way in and out. A send takes any block its frame can carry as it is,
    /// without reading it, as the server stores it: a block sealed by an encryptor, or
    /// any bytes of the program's own, goes out and comes back unchanged.
    pub user_headers: Bytes,
}

impl Message {
    /// A message with this payload and no headers; its id and timestamp are given when it
    /// is sent.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self {
            payload: payload.into(),
            ..Self::default()
        }
    }

    /// A message with this id and payload (a nonzero id is the caller's, for the server's
    /// deduplication or the reader's own use).
    pub fn with_id(id: u128, payload: impl Into<Bytes>) -> Self {
        Self {
            id,
            ..Self::new(payload)
        }
    }

    /// The message with these user headers, replacing any it had (of any number the
    /// frame can carry: [`UserHeaders::encoded_len`] says how many bytes they take).
    #[must_use]
    pub fn with_headers(self, headers: &UserHeaders) -> Self {
        Self {
            user_headers: headers.encode(),
            ..self
        }
    }

    /// The user headers, decoded from [`Message::user_headers`]; none for an empty block.
    /// A block that is not a whole sequence of valid entries is a [`HeaderError`].
    pub fn headers(&self) -> Result<UserHeaders, HeaderError> {
        UserHeaders::decode(&self.user_headers)
    }

    /// Size of this message's frame in a batch.
    pub fn frame_len(&self) -> usize {
        MESSAGE_HEADER_SIZE + self.payload.len() + self.user_headers.len()
    }
}

/// The `SEND_MESSAGES` body: a metadata section, then one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendMessagesRequest {
    /// Stream.
    pub stream: Identifier,
    /// Topic.
    pub topic: Identifier,
    /// Partitioning (the 0.11.0 SDK always sends `PartitionId`).
    pub partitioning: Partitioning,
    /// Messages, in order.
    pub messages: Vec<Message>,
}

impl SendMessagesRequest {
    fn metadata_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + self.partitioning.encoded_len() + 4
    }

    /// Append the body exactly as the 0.11.0 SDK encodes it.
    pub fn encode(&self, out: &mut BytesMut) {
        Self::encode_parts(
            &self.stream,
            &self.topic,
            &self.partitioning,
            self.messages.iter(),
            out,
        );
    }

    /// [`SendMessagesRequest::encode`] from borrowed parts, so a caller that keeps its
    /// messages elsewhere (or in several requests, merged into one batch) need not clone
    /// them into a request first.
    pub fn encode_parts<'a>(
        stream: &Identifier,
        topic: &Identifier,
        partitioning: &Partitioning,
        messages: impl Iterator<Item = &'a Message> + Clone,
        out: &mut BytesMut,
    ) {
        let metadata_len =
            stream.encoded_len() + topic.encoded_len() + partitioning.encoded_len() + 4;
        let (count, frames) = messages
            .clone()
            .fold((0usize, 0usize), |(count, bytes), m| {
                (count + 1, bytes + m.frame_len())
            });
        out.reserve(4 + metadata_len + BATCH_HEADER_SIZE + frames);
        out.put_u32_le(len_u32(metadata_len));
        stream.encode(out);
        topic.encode(out);
        partitioning.encode(out);
        out.put_u32_le(len_u32(count));
        encode_batch(0, 0, 0, messages, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        4 + self.metadata_len()
            + BATCH_HEADER_SIZE
            + self.messages.iter().map(Message::frame_len).sum::<usize>()
    }
}

#[cfg(feature = "server")]
impl SendMessagesRequest {
    /// Decode a whole body, verifying the layout and every checksum.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let (request, _) = Self::decode_with_batch(body)?;
        Ok(request)
    }

    /// Decode a whole body and also return the batch header as sent.
    pub fn decode_with_batch(body: &[u8]) -> Result<(Self, BatchHeader), WireError> {
        let mut r = Reader::new(body);
        let metadata_len = r.u32()? as usize;
        let mut meta = Reader::new(r.bytes(metadata_len)?);
        let stream = Identifier::decode(&mut meta)?;
        let topic = Identifier::decode(&mut meta)?;
        let partitioning = Partitioning::decode(&mut meta)?;
        let count = meta.u32()?;
        meta.finish("send messages metadata")?;
        let (header, frames) = read_batch(&mut r, true)?;
        r.finish("send messages")?;
        if count != header.message_count {
            return Err(WireError::InvalidValue {
                field: "messages count",
                value: count.into(),
            });
        }
        let messages = frames
            .iter()
            .map(|f| Message {
                id: f.id,
                origin_timestamp: header
                    .origin_timestamp
                    .saturating_add(f.timestamp_delta.into()),
                payload: Bytes::copy_from_slice(f.payload),
                user_headers: Bytes::copy_from_slice(f.user_headers),
            })
            .collect();
        Ok((
            Self {
                stream,
                topic,
                partitioning,
                messages,
            },
            header,
        ))
    }
}

/// One confirmation in a send reply (20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendConfirmation {
    /// Numeric stream id.
    pub stream_id: u32,
    /// Numeric topic id.
    pub topic_id: u32,
    /// Partition id.
    pub partition_id: u32,
    /// Offset of the first message of the batch.
    pub base_offset: u64,
}

/// The `SEND_MESSAGES` reply body: `[count:u32]` then 20-byte confirmations. An
/// empty body decodes as no confirmations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendMessagesReply {
    /// Confirmations (the real server sends exactly one).
    pub confirmations: Vec<SendConfirmation>,
}

impl SendMessagesReply {
    /// Decode a whole body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        if body.is_empty() {
            return Ok(Self::default());
        }
        let mut r = Reader::new(body);
        let count = r.u32()? as usize;
        let mut confirmations = Vec::with_capacity(count.min(r.remaining() / 20));
        for _ in 0..count {
            confirmations.push(SendConfirmation {
                stream_id: r.u32()?,
                topic_id: r.u32()?,
                partition_id: r.u32()?,
                base_offset: r.u64()?,
            });
        }
        r.finish("send messages reply")?;
        Ok(Self { confirmations })
    }
}

#[cfg(feature = "server")]
impl SendMessagesReply {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(len_u32(self.confirmations.len()));
        for c in &self.confirmations {
            out.put_u32_le(c.stream_id);
            out.put_u32_le(c.topic_id);
            out.put_u32_le(c.partition_id);
            out.put_u64_le(c.base_offset);
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        4 + 20 * self.confirmations.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::Name;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn first_send_vector_of_section_10() {
        let request = SendMessagesRequest {
            stream: 1.into(),
            topic: 1.into(),
            partitioning: Partitioning::PartitionId(0),
            messages: vec![Message {
                id: 1,
                origin_timestamp: 1_000_000,
                payload: Bytes::from_static(b"hi"),
                user_headers: Bytes::new(),
            }],
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        assert_eq!(out.len(), 332);
        assert_eq!(out.len(), request.encoded_len());
        assert_eq!(
            &out[..0x1a],
            &hex("16 00 00 00 01 04 01 00 00 00 01 04 01 00 00 00 02 04 00 00 00 00 01 00 00 00")[..]
        );
        assert_eq!(
            &out[0x32..0x4e],
            &hex(
                "40 42 0f 00 00 00 00 00 32 01 00 00 00 00 00 00 bd f2 15 76 aa ea 3e 8b 01 00 00 00"
            )[..]
        );
        assert_eq!(&out[0x11a..0x122], &hex("dc 8e 00 ca 42 0b 92 a9")[..]);
        assert_eq!(&out[0x11a + 36..0x11a + 40], &[2, 0, 0, 0]);
        assert_eq!(&out[out.len() - 2..], b"hi");
        assert_eq!(SendMessagesRequest::decode(&out).unwrap(), request);
    }

    #[test]
    fn second_send_vector_of_section_10() {
        let request = SendMessagesRequest {
            stream: Identifier::Named(Name::new("orders").unwrap()),
            topic: 3.into(),
            partitioning: Partitioning::PartitionId(2),
            messages: vec![
                Message {
                    id: 0xAABB,
                    origin_timestamp: 5,
                    payload: Bytes::from_static(b"xyz"),
                    user_headers: Bytes::from_static(&[1, 2, 3]),
                },
                Message {
                    id: 0xCCDD,
                    origin_timestamp: 7,
                    payload: Bytes::new(),
                    user_headers: Bytes::new(),
                },
            ],
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        assert_eq!(out.len(), 386);
        let meta = hex(
            "18 00 00 00 02 06 6f 72 64 65 72 73 01 04 03 00 00 00 02 04 02 00 00 00 02 00 00 00",
        );
        assert_eq!(&out[..meta.len()], &meta[..]);
        let batch = meta.len();
        assert_eq!(&out[batch + 24..batch + 32], &5u64.to_le_bytes());
        let frame1 = batch + 256;
        assert_eq!(&out[frame1 + 48..frame1 + 54], b"xyz\x01\x02\x03");
        let frame2 = frame1 + 54;
        assert_eq!(&out[frame2 + 24..frame2 + 32], &[1, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(SendMessagesRequest::decode(&out).unwrap(), request);
    }

    #[test]
    fn corrupted_send_is_a_typed_error() {
        let request = SendMessagesRequest {
            stream: 1.into(),
            topic: 1.into(),
            partitioning: Partitioning::Balanced,
            messages: vec![Message {
                payload: Bytes::from_static(b"p"),
                ..Message::default()
            }],
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        let last = out.len() - 1;
        out[last] = b'q';
        assert!(matches!(
            SendMessagesRequest::decode(&out),
            Err(WireError::ChecksumMismatch { .. })
        ));
        out[0] = 200;
        assert!(SendMessagesRequest::decode(&out).is_err());
    }

    #[test]
    fn constructors_fill_what_they_name_and_headers_go_in_and_out_typed() {
        let message = Message::new("hi");
        assert_eq!(
            message,
            Message {
                payload: Bytes::from_static(b"hi"),
                ..Message::default()
            }
        );
        assert_eq!(Message::with_id(9, vec![1u8]).id, 9);
        assert_eq!(message.headers(), Ok(UserHeaders::new()));
        let headers = UserHeaders::from([(
            crate::wire::HeaderKey::from(1u8),
            crate::wire::HeaderValue::from(true),
        )]);
        let message = message.with_headers(&headers);
        assert_eq!(message.user_headers, headers.encode());
        assert_eq!(message.headers(), Ok(headers));
        assert_eq!(
            message.with_headers(&UserHeaders::new()).user_headers,
            Bytes::new()
        );
        let malformed = Message {
            user_headers: Bytes::from_static(&[2, 1, 0, 0, 0]),
            ..Message::default()
        };
        assert!(matches!(
            malformed.headers(),
            Err(HeaderError::Malformed(_))
        ));
    }

    #[test]
    fn send_reply_round_trips_and_empty_body_means_none() {
        let reply = SendMessagesReply {
            confirmations: vec![SendConfirmation {
                stream_id: 1,
                topic_id: 2,
                partition_id: 3,
                base_offset: 4,
            }],
        };
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(SendMessagesReply::decode(&out).unwrap(), reply);
        assert_eq!(
            SendMessagesReply::decode(&[]).unwrap(),
            SendMessagesReply::default()
        );
        assert!(SendMessagesReply::decode(&[1, 0, 0, 0]).is_err());
    }
}
