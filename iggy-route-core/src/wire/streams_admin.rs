//! Stream administration: `GET_STREAMS` (201), `DELETE_STREAM` (203), `UPDATE_STREAM`
//! (204), `PURGE_STREAM` (205), and `GET_TOPICS` (301), whose body is a stream too.
//!
//! Reply shapes follow the 0.11.0 crate: `GET_STREAMS` answers stream headers back to back
//! until the payload ends (an empty payload is no streams); `GET_TOPICS` answers
//! `[count:u32]` and that many topic headers; update, delete and purge answer an empty
//! payload after their result section.

#[cfg(feature = "server")]
use bytes::BufMut;
use bytes::{Bytes, BytesMut};

use super::details::TopicSummary;
use super::topics::skip_options;
#[cfg(feature = "server")]
use super::topics::whole_body;
#[cfg(feature = "server")]
use super::validate_user_headers;
use super::{Identifier, Name, Reader, WireError};

/// Smallest encoded stream header: the fixed fields, a one-byte name, an empty options
/// block.
const MIN_STREAM_SUMMARY_LEN: usize = 32 + 2 + 4;
/// Smallest encoded topic header: the fixed fields, a one-byte name, two empty options
/// blocks.
const MIN_TOPIC_SUMMARY_LEN: usize = 49 + 2 + 8;

/// A `StreamResponse`: one stream in a `GET_STREAMS` listing (the head of
/// [`StreamDetails`](super::StreamDetails), without its topics). The options block is
/// written empty and checked then dropped on decode, as for the other headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Creation time, µs.
    pub created_at: u64,
    /// Number of topics.
    pub topics_count: u32,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Messages count.
    pub messages_count: u64,
    /// Stream name.
    pub name: Name,
}

impl StreamSummary {
    /// Read one header.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let value = Self {
            id: r.u32()?,
            created_at: r.u64()?,
            topics_count: r.u32()?,
            size_bytes: r.u64()?,
            messages_count: r.u64()?,
            name: r.name()?,
        };
        skip_options(r)?;
        Ok(value)
    }

    /// Decode a `GET_STREAMS` payload: headers until the payload ends.
    pub fn decode_list(payload: &[u8]) -> Result<Vec<Self>, WireError> {
        let mut r = Reader::new(payload);
        let mut streams = Vec::with_capacity(payload.len() / MIN_STREAM_SUMMARY_LEN);
        while r.remaining() > 0 {
            streams.push(Self::read(&mut r)?);
        }
        Ok(streams)
    }
}

#[cfg(feature = "server")]
impl StreamSummary {
    /// Append one header with an empty options block.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u64_le(self.created_at);
        out.put_u32_le(self.topics_count);
        out.put_u64_le(self.size_bytes);
        out.put_u64_le(self.messages_count);
        self.name.encode(out);
        out.put_u32_le(0);
    }

    /// Encoded size of one header.
    pub fn encoded_len(&self) -> usize {
        32 + self.name.encoded_len() + 4
    }

    /// Append a `GET_STREAMS` payload.
    pub fn encode_list(streams: &[Self], out: &mut BytesMut) {
        for stream in streams {
            stream.encode(out);
        }
    }
}

impl TopicSummary {
    /// Decode a `GET_TOPICS` payload: `[count:u32]` then exactly that many headers. An
    /// empty payload is no topics too, as the SDK reads it.
    pub fn decode_list(payload: &[u8]) -> Result<Vec<Self>, WireError> {
        if payload.is_empty() {
            return Ok(Vec::new());
        }
        let mut r = Reader::new(payload);
        let count = r.u32()? as usize;
        let mut topics = Vec::with_capacity(count.min(r.remaining() / MIN_TOPIC_SUMMARY_LEN));
        for _ in 0..count {
            topics.push(Self::read(&mut r)?);
        }
        r.finish("topic list")?;
        Ok(topics)
    }
}

#[cfg(feature = "server")]
impl TopicSummary {
    /// Append a `GET_TOPICS` payload: the count, then the headers.
    pub fn encode_list(topics: &[Self], out: &mut BytesMut) {
        out.put_u32_le(super::len_u32(topics.len()));
        for topic in topics {
            topic.encode(out);
        }
    }
}

/// A body that is one stream identifier, for the commands that take nothing else.
macro_rules! stream_body {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The stream.
            pub stream: Identifier,
        }

        impl $name {
            /// Append the body.
            pub fn encode(&self, out: &mut BytesMut) {
                self.stream.encode(out);
            }

            /// Encoded size in bytes.
            pub fn encoded_len(&self) -> usize {
                self.stream.encoded_len()
            }
        }

        #[cfg(feature = "server")]
        whole_body!($name, $what, |r| $name {
            stream: Identifier::decode(&mut r)?,
        });
    };
}

stream_body!(
    /// The `DELETE_STREAM` body.
    DeleteStreamRequest,
    "delete stream request"
);
stream_body!(
    /// The `PURGE_STREAM` body.
    PurgeStreamRequest,
    "purge stream request"
);
stream_body!(
    /// The `GET_TOPICS` body.
    GetTopicsRequest,
    "get topics request"
);

/// The `UPDATE_STREAM` body: the stream, its new name, then a raw options block to the end
/// of the body. Streams have no updatable option in 0.11.0 (the server refuses every key
/// with `UnsupportedOptionKey`), so a client sends it empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpdateStreamRequest {
    /// The stream.
    pub stream: Identifier,
    /// Its new name (its current one keeps it unchanged).
    pub name: Name,
    /// Raw options block (unprefixed, to the end of the body).
    pub options: Bytes,
}

impl UpdateStreamRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.name.encode(out);
        out.extend_from_slice(&self.options);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.name.encoded_len() + self.options.len()
    }
}

#[cfg(feature = "server")]
impl UpdateStreamRequest {
    /// Decode a whole body; the options block is checked structurally (its keys are for
    /// the server to judge).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let stream = Identifier::decode(&mut r)?;
        let name = r.name()?;
        let options = r.rest();
        validate_user_headers(options)?;
        Ok(Self {
            stream,
            name,
            options: Bytes::copy_from_slice(options),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn summary(id: u32, name: &str) -> StreamSummary {
        StreamSummary {
            id,
            created_at: 10 + u64::from(id),
            topics_count: 2,
            size_bytes: 3,
            messages_count: 4,
            name: Name::new(name).unwrap(),
        }
    }

    #[test]
    fn stream_lists_run_to_the_end_of_the_payload() {
        let streams = vec![summary(0, "a"), summary(1, "orders")];
        let mut out = BytesMut::new();
        StreamSummary::encode_list(&streams, &mut out);
        assert_eq!(out.len(), streams.iter().map(|s| s.encoded_len()).sum());
        assert_eq!(StreamSummary::decode_list(&out).unwrap(), streams);
        assert!(StreamSummary::decode_list(&[]).unwrap().is_empty());
        for cut in 1..out.len() {
            if cut == streams[0].encoded_len() {
                continue;
            }
            assert!(
                StreamSummary::decode_list(&out[..cut]).is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn topic_lists_are_counted_and_huge_counts_fail_cleanly() {
        let mut out = BytesMut::new();
        TopicSummary::encode_list(&[], &mut out);
        assert_eq!(&out[..], &[0, 0, 0, 0]);
        assert!(TopicSummary::decode_list(&out).unwrap().is_empty());
        out[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            TopicSummary::decode_list(&out),
            Err(WireError::Truncated { .. })
        ));
        assert!(TopicSummary::decode_list(&[1, 0, 0]).is_err());
        assert!(TopicSummary::decode_list(&[0, 0, 0, 0, 9]).is_err());
    }

    #[test]
    fn stream_bodies_round_trip_and_reject_garbage() {
        let delete = DeleteStreamRequest {
            stream: Identifier::try_from("orders").unwrap(),
        };
        let mut out = BytesMut::new();
        delete.encode(&mut out);
        assert_eq!(out.len(), delete.encoded_len());
        assert_eq!(DeleteStreamRequest::decode(&out).unwrap(), delete);
        assert!(PurgeStreamRequest::decode(&out[..3]).is_err());
        assert!(GetTopicsRequest::decode(&[9, 9]).is_err());

        let update = UpdateStreamRequest {
            stream: 3.into(),
            name: Name::new("renamed").unwrap(),
            options: Bytes::from_static(&[2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v']),
        };
        let mut out = BytesMut::new();
        update.encode(&mut out);
        assert_eq!(out.len(), update.encoded_len());
        assert_eq!(UpdateStreamRequest::decode(&out).unwrap(), update);
        assert!(UpdateStreamRequest::decode(&out[..out.len() - 1]).is_err());
        assert!(UpdateStreamRequest::decode(&[1, 4, 0, 0, 0, 0, 0]).is_err());
    }
}
