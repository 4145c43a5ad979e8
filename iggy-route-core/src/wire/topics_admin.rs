//! Topic, partition and segment administration: `UPDATE_TOPIC` (304), `DELETE_TOPIC`
//! (303), `PURGE_TOPIC` (305), `DELETE_PARTITIONS` (403), `DELETE_SEGMENTS` (503) and
//! `FLUSH_UNSAVED_BUFFER` (102).
//!
//! All of them answer an empty payload (after the result section where the reply's
//! operation is result-framed); [`empty_reply`] reads it.

use bytes::{BufMut, Bytes, BytesMut};

use super::options::TopicUpdateOptions;
#[cfg(feature = "server")]
use super::topics::whole_body;
use super::{Identifier, Name, WireError};
#[cfg(feature = "server")]
use super::{Reader, validate_user_headers};

/// Read an empty reply payload. Whatever bytes come are accepted and dropped, as the SDK
/// does (its `EmptyResponse` reads nothing), so a server that ever attaches a payload to
/// one of these replies does not fail a request that succeeded.
pub fn empty_reply(_payload: &[u8]) -> Result<(), WireError> {
    Ok(())
}

/// The `UPDATE_TOPIC` body: stream, topic, the new name, then the options block to the end
/// of the body. In 0.11.0 every setting (compression, message expiry, max topic size) rides
/// the options block; there is no fixed settings field, and no replication factor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpdateTopicRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// Its new name (its current one keeps it unchanged).
    pub name: Name,
    /// Raw options block (unprefixed); [`TopicUpdateOptions::to_bytes`] builds it and
    /// `TopicUpdateOptions::parse` (the server half of the codec) reads it.
    pub options: Bytes,
}

impl UpdateTopicRequest {
    /// A request carrying typed settings.
    pub fn new(
        stream: Identifier,
        topic: Identifier,
        name: Name,
        options: &TopicUpdateOptions,
    ) -> Self {
        Self {
            stream,
            topic,
            name,
            options: options.to_bytes(),
        }
    }

    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        self.name.encode(out);
        out.put_slice(&self.options);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len()
            + self.topic.encoded_len()
            + self.name.encoded_len()
            + self.options.len()
    }
}

#[cfg(feature = "server")]
impl UpdateTopicRequest {
    /// Decode a whole body; the options block is checked structurally only, so that the
    /// caller can tell an unknown key (`UnsupportedOptionKey`) from a malformed body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let stream = Identifier::decode(&mut r)?;
        let topic = Identifier::decode(&mut r)?;
        let name = r.name()?;
        let options = r.rest();
        validate_user_headers(options)?;
        Ok(Self {
            stream,
            topic,
            name,
            options: Bytes::copy_from_slice(options),
        })
    }
}

/// A body that is a stream and a topic identifier.
macro_rules! topic_body {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The stream.
            pub stream: Identifier,
            /// The topic.
            pub topic: Identifier,
        }

        impl $name {
            /// Append the body.
            pub fn encode(&self, out: &mut BytesMut) {
                self.stream.encode(out);
                self.topic.encode(out);
            }

            /// Encoded size in bytes.
            pub fn encoded_len(&self) -> usize {
                self.stream.encoded_len() + self.topic.encoded_len()
            }
        }

        #[cfg(feature = "server")]
        whole_body!($name, $what, |r| $name {
            stream: Identifier::decode(&mut r)?,
            topic: Identifier::decode(&mut r)?,
        });
    };
}

topic_body!(
    /// The `DELETE_TOPIC` body.
    DeleteTopicRequest,
    "delete topic request"
);
topic_body!(
    /// The `PURGE_TOPIC` body.
    PurgeTopicRequest,
    "purge topic request"
);

/// The `DELETE_PARTITIONS` body: remove the topic's last `partitions_count` partitions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeletePartitionsRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// How many partitions to remove, from the highest id down.
    pub partitions_count: u32,
}

impl DeletePartitionsRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        out.put_u32_le(self.partitions_count);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + 4
    }
}
#[cfg(feature = "server")]
whole_body!(DeletePartitionsRequest, "delete partitions request", |r| {
    DeletePartitionsRequest {
        stream: Identifier::decode(&mut r)?,
        topic: Identifier::decode(&mut r)?,
        partitions_count: r.u32()?,
    }
});

/// The `DELETE_SEGMENTS` body: remove the partition's oldest `segments_count` sealed
/// segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeleteSegmentsRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The partition.
    pub partition_id: u32,
    /// How many segments to remove.
    pub segments_count: u32,
}

impl DeleteSegmentsRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        out.put_u32_le(self.partition_id);
        out.put_u32_le(self.segments_count);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + 8
    }
}
#[cfg(feature = "server")]
whole_body!(DeleteSegmentsRequest, "delete segments request", |r| {
    DeleteSegmentsRequest {
        stream: Identifier::decode(&mut r)?,
        topic: Identifier::decode(&mut r)?,
        partition_id: r.u32()?,
        segments_count: r.u32()?,
    }
});

/// The `FLUSH_UNSAVED_BUFFER` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlushUnsavedBufferRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The partition.
    pub partition_id: u32,
    /// Whether to fsync after writing.
    pub fsync: bool,
}

impl FlushUnsavedBufferRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        self.topic.encode(out);
        out.put_u32_le(self.partition_id);
        out.put_u8(u8::from(self.fsync));
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + self.topic.encoded_len() + 5
    }
}
#[cfg(feature = "server")]
whole_body!(
    FlushUnsavedBufferRequest,
    "flush unsaved buffer request",
    |r| {
        FlushUnsavedBufferRequest {
            stream: Identifier::decode(&mut r)?,
            topic: Identifier::decode(&mut r)?,
            partition_id: r.u32()?,
            // As in the crate: any nonzero byte means fsync.
            fsync: r.u8()? != 0,
        }
    }
);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::CompressionAlgorithm;

    fn bytes_of(encode: impl Fn(&mut BytesMut)) -> BytesMut {
        let mut out = BytesMut::new();
        encode(&mut out);
        out
    }

    /// Every strict prefix of a fixed-layout body fails to decode, and so does one
    /// trailing byte.
    fn rejects_prefixes_and_trailing<T>(
        body: &[u8],
        decode: impl Fn(&[u8]) -> Result<T, WireError>,
    ) {
        for cut in 0..body.len() {
            assert!(decode(&body[..cut]).is_err(), "prefix of {cut} bytes");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn update_topic_round_trips_with_typed_options() {
        let options = TopicUpdateOptions {
            compression_algorithm: Some(CompressionAlgorithm::None),
            message_expiry: None,
            max_topic_size: Some(1 << 30),
        };
        let request = UpdateTopicRequest::new(
            1.into(),
            Identifier::try_from("t").unwrap(),
            Name::new("t2").unwrap(),
            &options,
        );
        let out = bytes_of(|o| request.encode(o));
        assert_eq!(out.len(), request.encoded_len());
        let decoded = UpdateTopicRequest::decode(&out).unwrap();
        assert_eq!(decoded, request);
        assert_eq!(
            TopicUpdateOptions::parse(&decoded.options).unwrap(),
            options
        );
        assert!(UpdateTopicRequest::decode(&out[..out.len() - 1]).is_err());
        assert!(UpdateTopicRequest::decode(&[1, 4, 1, 0, 0, 0, 3]).is_err());
    }

    #[test]
    fn fixed_bodies_round_trip_and_reject_every_prefix() {
        let delete = DeleteTopicRequest {
            stream: 1.into(),
            topic: Identifier::try_from("t").unwrap(),
        };
        let out = bytes_of(|o| delete.encode(o));
        assert_eq!(out.len(), delete.encoded_len());
        assert_eq!(DeleteTopicRequest::decode(&out).unwrap(), delete);
        rejects_prefixes_and_trailing(&out, PurgeTopicRequest::decode);

        let partitions = DeletePartitionsRequest {
            stream: 1.into(),
            topic: 2.into(),
            partitions_count: 3,
        };
        let out = bytes_of(|o| partitions.encode(o));
        assert_eq!(out.len(), partitions.encoded_len());
        assert_eq!(DeletePartitionsRequest::decode(&out).unwrap(), partitions);
        rejects_prefixes_and_trailing(&out, DeletePartitionsRequest::decode);

        let segments = DeleteSegmentsRequest {
            stream: 1.into(),
            topic: 2.into(),
            partition_id: 0,
            segments_count: 5,
        };
        let out = bytes_of(|o| segments.encode(o));
        assert_eq!(out.len(), segments.encoded_len());
        assert_eq!(DeleteSegmentsRequest::decode(&out).unwrap(), segments);
        rejects_prefixes_and_trailing(&out, DeleteSegmentsRequest::decode);

        let flush = FlushUnsavedBufferRequest {
            stream: 1.into(),
            topic: 2.into(),
            partition_id: 4,
            fsync: true,
        };
        let mut out = bytes_of(|o| flush.encode(o));
        assert_eq!(out.len(), flush.encoded_len());
        assert_eq!(FlushUnsavedBufferRequest::decode(&out).unwrap(), flush);
        rejects_prefixes_and_trailing(&out, FlushUnsavedBufferRequest::decode);
        let last = out.len() - 1;
        out[last] = 7;
        assert!(FlushUnsavedBufferRequest::decode(&out).unwrap().fsync);
        assert!(DeleteSegmentsRequest::decode(&[3, 0, 0]).is_err());
    }
}
