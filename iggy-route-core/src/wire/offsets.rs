//! Consumer offsets: `GET_CONSUMER_OFFSET` (120), `STORE_CONSUMER_OFFSET` (121),
//! `DELETE_CONSUMER_OFFSET` (122) and the `GET_CONSUMER_OFFSET_ROUTING` (123)
//! request, which is the same prefix body (§5.6).

use bytes::{BufMut, BytesMut};

use super::poll::put_optional_partition;
#[cfg(feature = "server")]
use super::poll::read_optional_partition;
use super::{Consumer, Identifier, Reader, WireError};

/// `[consumer][stream][topic][flag:u8][partition_id:u32]`: the body of 120 and 123,
/// and the prefix of 121 and 122.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerOffsetKey {
    /// Consumer or group.
    pub consumer: Consumer,
    /// Stream.
    pub stream: Identifier,
    /// Topic.
    pub topic: Identifier,
    /// Partition.
    pub partition_id: Option<u32>,
}

impl ConsumerOffsetKey {
    /// Append the wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        self.consumer.encode(out);
        self.stream.encode(out);
        self.topic.encode(out);
        put_optional_partition(self.partition_id, out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.consumer.encoded_len() + self.stream.encoded_len() + self.topic.encoded_len() + 5
    }
}

#[cfg(feature = "server")]
impl ConsumerOffsetKey {
    /// Read the wire form from a reader.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            consumer: Consumer::decode(r)?,
            stream: Identifier::decode(r)?,
            topic: Identifier::decode(r)?,
            partition_id: read_optional_partition(r)?,
        })
    }

    /// Decode a whole 120 / 123 body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self::read(&mut r)?;
        r.finish("consumer offset key")?;
        Ok(value)
    }
}

#[cfg(feature = "server")]
fn read_ack(r: &mut Reader<'_>) -> Result<(), WireError> {
    match r.u8()? {
        0 | 1 => Ok(()),
        other => Err(WireError::InvalidValue {
            field: "ack level",
            value: other.into(),
        }),
    }
}

/// The `STORE_CONSUMER_OFFSET` body: key, offset, ack (always written as 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreConsumerOffsetRequest {
    /// Which offset.
    pub key: ConsumerOffsetKey,
    /// The offset to store.
    pub offset: u64,
}

impl StoreConsumerOffsetRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.key.encode(out);
        out.put_u64_le(self.offset);
        out.put_u8(1);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.key.encoded_len() + 9
    }
}

#[cfg(feature = "server")]
impl StoreConsumerOffsetRequest {
    /// Decode a whole body (ack 0 or 1).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let key = ConsumerOffsetKey::read(&mut r)?;
        let offset = r.u64()?;
        read_ack(&mut r)?;
        r.finish("store consumer offset request")?;
        Ok(Self { key, offset })
    }
}

/// The `DELETE_CONSUMER_OFFSET` body: key, ack (always written as 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeleteConsumerOffsetRequest {
    /// Which offset.
    pub key: ConsumerOffsetKey,
}

impl DeleteConsumerOffsetRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.key.encode(out);
        out.put_u8(1);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.key.encoded_len() + 1
    }
}

#[cfg(feature = "server")]
impl DeleteConsumerOffsetRequest {
    /// Decode a whole body (ack 0 or 1).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let key = ConsumerOffsetKey::read(&mut r)?;
        read_ack(&mut r)?;
        r.finish("delete consumer offset request")?;
        Ok(Self { key })
    }
}

/// The `GET_CONSUMER_OFFSET` reply (20 bytes); an empty body means no offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConsumerOffsetInfo {
    /// Partition.
    pub partition_id: u32,
    /// The partition's current offset.
    pub current_offset: u64,
    /// The stored consumer offset.
    pub stored_offset: u64,
}

#[cfg(feature = "server")]
impl ConsumerOffsetInfo {
    /// Append the 20-byte body.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.partition_id);
        out.put_u64_le(self.current_offset);
        out.put_u64_le(self.stored_offset);
    }

    /// Always 20.
    pub fn encoded_len(&self) -> usize {
        20
    }
}

impl ConsumerOffsetInfo {
    /// Decode a reply body: `None` when empty (no offset stored for the consumer).
    pub fn decode(body: &[u8]) -> Result<Option<Self>, WireError> {
        if body.is_empty() {
            return Ok(None);
        }
        let mut r = Reader::new(body);
        let value = Self {
            partition_id: r.u32()?,
            current_offset: r.u64()?,
            stored_offset: r.u64()?,
        };
        r.finish("consumer offset info")?;
        Ok(Some(value))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::ConsumerKind;

    fn key() -> ConsumerOffsetKey {
        ConsumerOffsetKey {
            consumer: Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: 5.into(),
            },
            stream: 1.into(),
            topic: 2.into(),
            partition_id: Some(0),
        }
    }

    #[test]
    fn offset_bodies_round_trip_with_ack_one() {
        let store = StoreConsumerOffsetRequest {
            key: key(),
            offset: 42,
        };
        let mut out = BytesMut::new();
        store.encode(&mut out);
        assert_eq!(out.len(), store.encoded_len());
        assert_eq!(out[out.len() - 1], 1);
        assert_eq!(StoreConsumerOffsetRequest::decode(&out).unwrap(), store);
        let last = out.len() - 1;
        out[last] = 0;
        assert_eq!(StoreConsumerOffsetRequest::decode(&out).unwrap(), store);
        out[last] = 2;
        assert!(StoreConsumerOffsetRequest::decode(&out).is_err());

        let delete = DeleteConsumerOffsetRequest { key: key() };
        let mut out = BytesMut::new();
        delete.encode(&mut out);
        assert_eq!(DeleteConsumerOffsetRequest::decode(&out).unwrap(), delete);
        assert!(ConsumerOffsetKey::decode(&out).is_err());
        assert_eq!(
            ConsumerOffsetKey::decode(&out[..out.len() - 1]).unwrap(),
            key()
        );
    }

    #[test]
    fn offset_info_is_optional() {
        assert_eq!(ConsumerOffsetInfo::decode(&[]).unwrap(), None);
        let info = ConsumerOffsetInfo {
            partition_id: 1,
            current_offset: 2,
            stored_offset: 3,
        };
        let mut out = BytesMut::new();
        info.encode(&mut out);
        assert_eq!(ConsumerOffsetInfo::decode(&out).unwrap(), Some(info));
        assert!(ConsumerOffsetInfo::decode(&out[..19]).is_err());
    }
}
