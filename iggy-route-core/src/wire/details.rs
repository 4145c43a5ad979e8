//! Stream and topic reply payloads: `GET_STREAM` / `GET_TOPIC` replies and the
//! create-stream / create-topic payloads (§9.3).

#[cfg(feature = "server")]
use bytes::{BufMut, BytesMut};

use super::topics::{skip_options, whole_body};
use super::{Name, Reader, WireError};

const PARTITION_INFO_LEN: usize = 40;
const MIN_TOPIC_SUMMARY_LEN: usize = 49 + 2 + 8;

/// A `TopicHeader`: one topic in a stream listing, and the head of a topic reply.
/// Options blocks are written empty and skipped on decode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicSummary {
    /// Topic id.
    pub id: u32,
    /// Creation time, µs.
    pub created_at: u64,
    /// Partition count (what the SDK uses for partitioning).
    pub partitions_count: u32,
    /// Message expiry, µs (0 = never).
    pub message_expiry: u64,
    /// Compression algorithm: 1 = none, 2 = gzip (anything else fails the decode).
    pub compression: u8,
    /// Max topic size in bytes.
    pub max_topic_size: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Messages count.
    pub messages_count: u64,
    /// Topic name.
    pub name: Name,
}

impl TopicSummary {
    /// Read the wire form.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let id = r.u32()?;
        let created_at = r.u64()?;
        let partitions_count = r.u32()?;
        let message_expiry = r.u64()?;
        let compression = r.u8()?;
        if !(1..=2).contains(&compression) {
            return Err(WireError::InvalidValue {
                field: "compression algorithm",
                value: compression.into(),
            });
        }
        let value = Self {
            id,
            created_at,
            partitions_count,
            message_expiry,
            compression,
            max_topic_size: r.u64()?,
            size_bytes: r.u64()?,
            messages_count: r.u64()?,
            name: r.name()?,
        };
        skip_options(r)?;
        skip_options(r)?;
        Ok(value)
    }
}

#[cfg(feature = "server")]
impl TopicSummary {
    /// Append the wire form with empty options blocks.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u64_le(self.created_at);
        out.put_u32_le(self.partitions_count);
        out.put_u64_le(self.message_expiry);
        out.put_u8(self.compression);
        out.put_u64_le(self.max_topic_size);
        out.put_u64_le(self.size_bytes);
        out.put_u64_le(self.messages_count);
        self.name.encode(out);
        out.put_u32_le(0);
        out.put_u32_le(0);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        49 + self.name.encoded_len() + 8
    }
}

/// One `PartitionResponse` (40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PartitionInfo {
    /// Partition id.
    pub id: u32,
    /// Creation time, µs.
    pub created_at: u64,
    /// Segments count.
    pub segments_count: u32,
    /// Current offset.
    pub current_offset: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Messages count.
    pub messages_count: u64,
}

impl PartitionInfo {
    /// Read the 40-byte wire form.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            id: r.u32()?,
            created_at: r.u64()?,
            segments_count: r.u32()?,
            current_offset: r.u64()?,
            size_bytes: r.u64()?,
            messages_count: r.u64()?,
        })
    }
}

#[cfg(feature = "server")]
impl PartitionInfo {
    /// Append the 40-byte wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u64_le(self.created_at);
        out.put_u32_le(self.segments_count);
        out.put_u64_le(self.current_offset);
        out.put_u64_le(self.size_bytes);
        out.put_u64_le(self.messages_count);
    }
}

/// The `GET_TOPIC` reply (and create-topic payload): a summary, then exactly
/// `summary.partitions_count` partitions. Empty body = not found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicDetails {
    /// The topic header.
    pub summary: TopicSummary,
    /// Partitions; encode writes them as given, so keep `partitions_count` in step.
    pub partitions: Vec<PartitionInfo>,
}

#[cfg(feature = "server")]
impl TopicDetails {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.summary.encode(out);
        for p in &self.partitions {
            p.encode(out);
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.summary.encoded_len() + PARTITION_INFO_LEN * self.partitions.len()
    }
}
whole_body!(TopicDetails, "topic details", |r| {
    let summary = TopicSummary::read(&mut r)?;
    let count = summary.partitions_count as usize;
    let mut partitions = Vec::with_capacity(count.min(r.remaining() / PARTITION_INFO_LEN));
    for _ in 0..count {
        partitions.push(PartitionInfo::read(&mut r)?);
    }
    TopicDetails {
        summary,
        partitions,
    }
});

/// The `GET_STREAM` reply (and, without topics, the create-stream payload).
/// Empty body = not found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamDetails {
    /// Stream id.
    pub id: u32,
    /// Creation time, µs.
    pub created_at: u64,
    /// Topic count; encode writes it as given, so keep it equal to `topics.len()`.
    pub topics_count: u32,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Messages count.
    pub messages_count: u64,
    /// Stream name.
    pub name: Name,
    /// Topic headers.
    pub topics: Vec<TopicSummary>,
}

#[cfg(feature = "server")]
impl StreamDetails {
    /// Append the body (options block empty).
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.id);
        out.put_u64_le(self.created_at);
        out.put_u32_le(self.topics_count);
        out.put_u64_le(self.size_bytes);
        out.put_u64_le(self.messages_count);
        self.name.encode(out);
        out.put_u32_le(0);
        for t in &self.topics {
            t.encode(out);
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        32 + self.name.encoded_len()
            + 4
            + self
                .topics
                .iter()
                .map(TopicSummary::encoded_len)
                .sum::<usize>()
    }
}
whole_body!(StreamDetails, "stream details", |r| {
    let id = r.u32()?;
    let created_at = r.u64()?;
    let topics_count = r.u32()?;
    let size_bytes = r.u64()?;
    let messages_count = r.u64()?;
    let name = r.name()?;
    skip_options(&mut r)?;
    let mut topics =
        Vec::with_capacity((topics_count as usize).min(r.remaining() / MIN_TOPIC_SUMMARY_LEN));
    for _ in 0..topics_count {
        topics.push(TopicSummary::read(&mut r)?);
    }
    StreamDetails {
        id,
        created_at,
        topics_count,
        size_bytes,
        messages_count,
        name,
        topics,
    }
});

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn summary(partitions_count: u32) -> TopicSummary {
        TopicSummary {
            id: 1,
            created_at: 2,
            partitions_count,
            message_expiry: 0,
            compression: 1,
            max_topic_size: 0,
            size_bytes: 3,
            messages_count: 4,
            name: Name::new("t").unwrap(),
        }
    }

    #[test]
    fn topic_details_round_trip_and_layout() {
        let details = TopicDetails {
            summary: summary(2),
            partitions: vec![PartitionInfo::default(); 2],
        };
        let mut out = BytesMut::new();
        details.encode(&mut out);
        assert_eq!(out.len(), details.encoded_len());
        assert_eq!(out.len(), 50 + 1 + 8 + 80);
        assert_eq!(out[24], 1);
        assert_eq!(TopicDetails::decode(&out).unwrap(), details);
        out[24] = 0;
        assert!(TopicDetails::decode(&out).is_err());
    }

    #[test]
    fn stream_details_round_trip_and_huge_counts_fail_cleanly() {
        let stream = StreamDetails {
            id: 1,
            created_at: 2,
            topics_count: 1,
            size_bytes: 3,
            messages_count: 4,
            name: Name::new("s").unwrap(),
            topics: vec![summary(0)],
        };
        let mut out = BytesMut::new();
        stream.encode(&mut out);
        assert_eq!(out.len(), stream.encoded_len());
        assert_eq!(StreamDetails::decode(&out).unwrap(), stream);
        out[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            StreamDetails::decode(&out),
            Err(WireError::Truncated { .. })
        ));
    }
}
