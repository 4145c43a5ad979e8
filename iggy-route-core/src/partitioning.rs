//! How a send picks its partition (§4.3).
//!
//! The 0.11.0 SDK resolves partitioning client-side and always sends
//! `PartitionId` on the wire: `Balanced` is a per-topic round-robin cursor (kept by
//! the router), and `MessagesKey` is `XxHash32(seed 0, key) % partitions_count`.

use bytes::Bytes;

use crate::wire::WireError;

/// Longest messages key, in bytes.
pub const MAX_MESSAGES_KEY_LENGTH: usize = 255;

/// Where a batch of messages should go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Partitioning {
    /// Round-robin over the topic's partitions.
    Balanced,
    /// An explicit, 0-based partition id.
    PartitionId(u32),
    /// Hash this key (1..=255 bytes) to a partition.
    MessagesKey(Bytes),
}

impl Partitioning {
    /// Round-robin.
    pub fn balanced() -> Self {
        Self::Balanced
    }

    /// An explicit partition.
    pub fn partition_id(partition_id: u32) -> Self {
        Self::PartitionId(partition_id)
    }

    /// A messages key; fails unless it is 1..=255 bytes long.
    ///
    /// The key's partition is `XxHash32(key) % partitions_count`, as in the SDK 0.11.0, so
    /// messages of one key keep their order only while the count stays. Adding partitions
    /// (by this client or another) moves most keys: a send resolved against the new count
    /// may be stored before sends of the same key still queued for the old partition. This
    /// client reads a topic's count again when the count it holds is a second old (without
    /// holding sends for it), so another client's new partitions are followed within about
    /// a second and a round trip; the SDK 0.11.0 keeps a count for the client's life.
    /// Each change is reported as `Event::PartitionsChanged` (logged at info level).
    pub fn messages_key(key: impl Into<Bytes>) -> Result<Self, WireError> {
        let key = key.into();
        if key.is_empty() || key.len() > MAX_MESSAGES_KEY_LENGTH {
            return Err(WireError::InvalidLength {
                field: "messages key",
                len: key.len(),
            });
        }
        Ok(Self::MessagesKey(key))
    }

    /// A messages key made of the little-endian bytes of a u32.
    pub fn messages_key_u32(value: u32) -> Self {
        Self::MessagesKey(Bytes::copy_from_slice(&value.to_le_bytes()))
    }

    /// A messages key made of the little-endian bytes of a u64.
    pub fn messages_key_u64(value: u64) -> Self {
        Self::MessagesKey(Bytes::copy_from_slice(&value.to_le_bytes()))
    }

    /// A messages key made of the little-endian bytes of a u128.
    pub fn messages_key_u128(value: u128) -> Self {
        Self::MessagesKey(Bytes::copy_from_slice(&value.to_le_bytes()))
    }
}

/// `XxHash32(seed 0, key)`, the SDK's `calculate_32`.
pub fn hash_key(key: &[u8]) -> u32 {
    twox_hash::XxHash32::oneshot(0, key)
}

/// The partition a messages key maps to: `XxHash32(seed 0, key) % partitions_count`,
/// or `None` for a topic without partitions.
pub fn resolve_partition(key: &[u8], partitions_count: u32) -> Option<u32> {
    hash_key(key).checked_rem(partitions_count)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn xxhash32_matches_the_sdk_test_vectors() {
        assert_eq!(hash_key(b"order-1"), 0xc209_e3e8);
        assert_eq!(hash_key(b"order-2"), 0x7d08_9a0d);
        assert_eq!(hash_key(b"abc"), 0x32d1_53ff);
    }

    #[test]
    fn resolve_partition_is_hash_modulo_count() {
        assert_eq!(resolve_partition(b"order-1", 3), Some(0xc209_e3e8 % 3));
        assert_eq!(resolve_partition(b"abc", 1), Some(0));
        assert_eq!(resolve_partition(b"abc", 0), None);
    }

    #[test]
    fn messages_key_length_is_validated() {
        assert!(Partitioning::messages_key(Bytes::new()).is_err());
        assert!(Partitioning::messages_key(vec![1u8; 256]).is_err());
        assert!(Partitioning::messages_key(vec![1u8; 255]).is_ok());
        assert_eq!(
            Partitioning::messages_key_u32(7),
            Partitioning::MessagesKey(Bytes::from_static(&[7, 0, 0, 0]))
        );
        assert_eq!(
            Partitioning::messages_key_u128(1).clone(),
            Partitioning::messages_key(1u128.to_le_bytes().to_vec()).unwrap()
        );
    }
}
