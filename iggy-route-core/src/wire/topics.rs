//! Streams, topics and partitions: `GET_STREAM` (200), `CREATE_STREAM` (202),
//! `GET_TOPIC` (300), `CREATE_TOPIC` (302), `CREATE_PARTITIONS` (402) and their
//! reply payloads (§9.3).
//!
//! Reply shapes follow the crates: the create-stream reply payload is a
//! [`StreamDetails`] without topics, the create-topic reply payload is a
//! [`TopicDetails`], and the create-partitions reply payload is empty (all three
//! after the result section).

use bytes::{BufMut, Bytes, BytesMut};

use super::{Identifier, Name, Reader, WireError, validate_user_headers};

/// Read a `[len:u32][TLV]` options block and check it; the content is dropped.
pub(crate) fn skip_options(r: &mut Reader<'_>) -> Result<(), WireError> {
    let len = r.u32()? as usize;
    validate_user_headers(r.bytes(len)?).map(|_| ())
}

macro_rules! whole_body {
    ($name:ident, $what:literal, |$r:ident| $read:expr) => {
        impl $name {
            /// Decode a whole body.
            pub fn decode(body: &[u8]) -> Result<Self, WireError> {
                let mut $r = Reader::new(body);
                let value = $read;
                $r.finish($what)?;
                Ok(value)
            }
        }
    };
}
pub(crate) use whole_body;

/// The `CREATE_STREAM` body: the name, then a raw (unprefixed) options block,
/// which this crate always sends empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreateStreamRequest {
    /// Stream name.
    pub name: Name,
}

impl CreateStreamRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.name.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.name.encoded_len()
    }
}

#[cfg(feature = "server")]
impl CreateStreamRequest {
    /// Decode a whole body; a trailing options block is validated and dropped.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let name = r.name()?;
        validate_user_headers(r.rest())?;
        Ok(Self { name })
    }
}

/// The `CREATE_TOPIC` body: stream, partitions count, name, raw options block.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreateTopicRequest {
    /// Parent stream.
    pub stream: Identifier,
    /// Number of partitions to create.
    pub partitions_count: u32,
    /// Topic name.
    pub name: Name,
    /// Raw options TLV block (unprefixed, runs to the end of the body); empty = defaults.
    pub options: Bytes,
}

impl CreateTopicRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.stream.encode(out);
        out.put_u32_le(self.partitions_count);
        self.name.encode(out);
        out.put_slice(&self.options);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.stream.encoded_len() + 4 + self.name.encoded_len() + self.options.len()
    }
}

#[cfg(feature = "server")]
impl CreateTopicRequest {
    /// Decode a whole body; the options block is validated.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let stream = Identifier::decode(&mut r)?;
        let partitions_count = r.u32()?;
        let name = r.name()?;
        let options = r.rest();
        validate_user_headers(options)?;
        Ok(Self {
            stream,
            partitions_count,
            name,
            options: Bytes::copy_from_slice(options),
        })
    }
}

/// The `CREATE_PARTITIONS` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreatePartitionsRequest {
    /// Stream.
    pub stream: Identifier,
    /// Topic.
    pub topic: Identifier,
    /// How many partitions to add.
    pub partitions_count: u32,
}

impl CreatePartitionsRequest {
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
whole_body!(CreatePartitionsRequest, "create partitions request", |r| {
    CreatePartitionsRequest {
        stream: Identifier::decode(&mut r)?,
        topic: Identifier::decode(&mut r)?,
        partitions_count: r.u32()?,
    }
});

/// The `GET_STREAM` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GetStreamRequest {
    /// Stream.
    pub stream: Identifier,
}

impl GetStreamRequest {
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
whole_body!(GetStreamRequest, "get stream request", |r| {
    GetStreamRequest {
        stream: Identifier::decode(&mut r)?,
    }
});

/// The `GET_TOPIC` body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GetTopicRequest {
    /// Stream.
    pub stream: Identifier,
    /// Topic.
    pub topic: Identifier,
}

impl GetTopicRequest {
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
whole_body!(GetTopicRequest, "get topic request", |r| GetTopicRequest {
    stream: Identifier::decode(&mut r)?,
    topic: Identifier::decode(&mut r)?,
});

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn create_requests_round_trip() {
        let topic = CreateTopicRequest {
            stream: 1.into(),
            partitions_count: 3,
            name: Name::new("t").unwrap(),
            options: Bytes::from_static(&[2, 1, 0, 0, 0, b'k', 2, 1, 0, 0, 0, b'v']),
        };
        let mut out = BytesMut::new();
        topic.encode(&mut out);
        assert_eq!(CreateTopicRequest::decode(&out).unwrap(), topic);
        let stream = CreateStreamRequest {
            name: Name::new("s").unwrap(),
        };
        let mut out = BytesMut::new();
        stream.encode(&mut out);
        assert_eq!(&out[..], b"\x01s");
        assert_eq!(CreateStreamRequest::decode(&out).unwrap(), stream);
        let parts = CreatePartitionsRequest {
            stream: 1.into(),
            topic: 2.into(),
            partitions_count: 4,
        };
        let mut out = BytesMut::new();
        parts.encode(&mut out);
        assert_eq!(CreatePartitionsRequest::decode(&out).unwrap(), parts);
    }
}
