//! The canonical message batch (§4.1): a 256-byte batch header followed by
//! message frames, each a 48-byte header, the payload, then the user headers.
//! Sends carry one; stored batches are served back to polls as batch records.

use bytes::{BufMut, BytesMut};
use twox_hash::XxHash3_64;

use super::messages::Message;
use super::{Reader, WireError, len_u32};

/// Size of the batch header.
pub const BATCH_HEADER_SIZE: usize = 256;
/// Size of each message frame header.
pub const MESSAGE_HEADER_SIZE: usize = 48;

/// The 256-byte batch header; bytes 52..256 are reserved and must be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchHeader {
    /// Stamped by the server (0 from producers).
    pub partition_id: u64,
    /// Stamped by the server (0 from producers).
    pub base_offset: u64,
    /// Stamped by the server, µs (0 from producers).
    pub base_timestamp: u64,
    /// The smallest origin timestamp in the batch, µs.
    pub origin_timestamp: u64,
    /// 256 plus the length of all frames.
    pub batch_length: u64,
    /// Streaming xxh3 over the header fields and every frame checksum.
    pub batch_checksum: u64,
    /// Number of frames.
    pub message_count: u32,
}

impl BatchHeader {
    /// Append exactly 256 bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.partition_id);
        out.put_u64_le(self.base_offset);
        out.put_u64_le(self.base_timestamp);
        out.put_u64_le(self.origin_timestamp);
        out.put_u64_le(self.batch_length);
        out.put_u64_le(self.batch_checksum);
        out.put_u32_le(self.message_count);
        out.put_bytes(0, BATCH_HEADER_SIZE - 52);
    }

    /// Decode the first 256 bytes of `bytes`; `batch_length` must cover the header.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let header = Self {
            partition_id: r.u64()?,
            base_offset: r.u64()?,
            base_timestamp: r.u64()?,
            origin_timestamp: r.u64()?,
            batch_length: r.u64()?,
            batch_checksum: r.u64()?,
            message_count: r.u32()?,
        };
        if r.bytes(BATCH_HEADER_SIZE - 52)?.iter().any(|b| *b != 0) {
            return Err(WireError::NonZeroReserved {
                field: "batch header",
            });
        }
        if header.batch_length < BATCH_HEADER_SIZE as u64 {
            return Err(WireError::InvalidLength {
                field: "batch length",
                len: usize::try_from(header.batch_length).unwrap_or(usize::MAX),
            });
        }
        Ok(header)
    }

    /// The batch checksum over this header's fields and the given frame checksums.
    pub fn checksum(&self, frame_checksums: impl IntoIterator<Item = u64>) -> u64 {
        // One-shot over the concatenation equals the crate's streaming hash (the
        // `alloc` feature that streaming needs is not enabled here).
        let mut input = Vec::with_capacity(44);
        for field in [
            self.partition_id,
            self.base_offset,
            self.base_timestamp,
            self.origin_timestamp,
            self.batch_length,
        ] {
            input.extend_from_slice(&field.to_le_bytes());
        }
        input.extend_from_slice(&self.message_count.to_le_bytes());
        for checksum in frame_checksums {
            input.extend_from_slice(&checksum.to_le_bytes());
        }
        XxHash3_64::oneshot(&input)
    }
}

/// One frame to write: deltas are relative to the batch's base offset and origin.
pub(crate) struct FrameSpec<'a> {
    pub(crate) id: u128,
    pub(crate) offset_delta: u32,
    pub(crate) timestamp_delta: u32,
    pub(crate) payload: &'a [u8],
    pub(crate) user_headers: &'a [u8],
}

/// A frame read from a batch, borrowing its payload and headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawFrame<'a> {
    pub(crate) checksum: u64,
    pub(crate) id: u128,
    pub(crate) offset_delta: u32,
    pub(crate) timestamp_delta: u32,
    pub(crate) payload: &'a [u8],
    pub(crate) user_headers: &'a [u8],
}

/// Append a batch record built from frames; fills lengths and both checksum kinds.
pub(crate) fn put_batch(mut header: BatchHeader, frames: &[FrameSpec<'_>], out: &mut BytesMut) {
    let start = out.len();
    let blob_len: usize = frames
        .iter()
        .map(|f| MESSAGE_HEADER_SIZE + f.payload.len() + f.user_headers.len())
        .sum();
    out.reserve(BATCH_HEADER_SIZE + blob_len);
    out.put_bytes(0, BATCH_HEADER_SIZE);
    let mut checksums = Vec::with_capacity(frames.len());
    for frame in frames {
        let frame_start = out.len();
        out.put_u64_le(0);
        out.put_u128_le(frame.id);
        out.put_u32_le(frame.offset_delta);
        out.put_u32_le(frame.timestamp_delta);
        out.put_u32_le(len_u32(frame.user_headers.len()));
        out.put_u32_le(len_u32(frame.payload.len()));
        out.put_u64_le(0);
        out.put_slice(frame.payload);
        out.put_slice(frame.user_headers);
        let checksum = XxHash3_64::oneshot(&out[frame_start + 8..]);
        out[frame_start..frame_start + 8].copy_from_slice(&checksum.to_le_bytes());
        checksums.push(checksum);
    }
    header.batch_length = (BATCH_HEADER_SIZE + blob_len) as u64;
    header.message_count = len_u32(frames.len());
    header.batch_checksum = header.checksum(checksums);
    let mut encoded = BytesMut::with_capacity(BATCH_HEADER_SIZE);
    header.encode(&mut encoded);
    out[start..start + BATCH_HEADER_SIZE].copy_from_slice(&encoded);
}

/// Append one batch record holding `messages` in order (offset deltas 0, 1, 2, ...),
/// with the origin timestamp set to the smallest message origin timestamp.
///
/// Producers pass zeros for `partition_id`, `base_offset` and `base_timestamp`;
/// a server stamps them when it stores or serves the batch.
pub fn encode_batch<'a>(
    partition_id: u32,
    base_offset: u64,
    base_timestamp: u64,
    messages: impl IntoIterator<Item = &'a Message, IntoIter: Clone>,
    out: &mut BytesMut,
) {
    let messages = messages.into_iter();
    let origin = messages
        .clone()
        .map(|m| m.origin_timestamp)
        .min()
        .unwrap_or(0);
    let frames: Vec<FrameSpec<'_>> = messages
        .enumerate()
        .map(|(index, m)| FrameSpec {
            id: m.id,
            offset_delta: len_u32(index),
            timestamp_delta: u32::try_from(m.origin_timestamp - origin).unwrap_or(u32::MAX),
            payload: &m.payload,
            user_headers: &m.user_headers,
        })
        .collect();
    let header = BatchHeader {
        partition_id: partition_id.into(),
        base_offset,
        base_timestamp,
        origin_timestamp: origin,
        ..BatchHeader::default()
    };
    put_batch(header, &frames, out);
}

/// Read one batch record from `r`: its header and frames. The frames must tile
/// `batch_length - 256` exactly and number `message_count`. With `verify`, every
/// frame checksum and the batch checksum are checked too.
pub(crate) fn read_batch<'a>(
    r: &mut Reader<'a>,
    verify: bool,
) -> Result<(BatchHeader, Vec<RawFrame<'a>>), WireError> {
    let header = BatchHeader::decode(r.bytes(BATCH_HEADER_SIZE)?)?;
    let blob_len = usize::try_from(header.batch_length)
        .map(|len| len - BATCH_HEADER_SIZE)
        .unwrap_or(usize::MAX);
    let mut blob = Reader::new(r.bytes(blob_len)?);
    let capacity = (header.message_count as usize).min(blob_len / MESSAGE_HEADER_SIZE);
    let mut frames = Vec::with_capacity(capacity);
    while blob.remaining() > 0 {
        let frame_bytes = blob.rest_view();
        let checksum = blob.u64()?;
        let id = blob.u128()?;
        let offset_delta = blob.u32()?;
        let timestamp_delta = blob.u32()?;
        let user_headers_len = blob.u32()? as usize;
        let payload_len = blob.u32()? as usize;
        if blob.u64()? != 0 {
            return Err(WireError::NonZeroReserved {
                field: "message frame",
            });
        }
        let payload = blob.bytes(payload_len)?;
        let user_headers = blob.bytes(user_headers_len)?;
        if verify {
            let covered = MESSAGE_HEADER_SIZE + payload_len + user_headers_len;
            let computed = frame_bytes.get(8..covered).map(XxHash3_64::oneshot);
            if computed != Some(checksum) {
                return Err(WireError::ChecksumMismatch {
                    field: "message frame",
                });
            }
        }
        frames.push(RawFrame {
            checksum,
            id,
            offset_delta,
            timestamp_delta,
            payload,
            user_headers,
        });
    }
    if frames.len() != header.message_count as usize {
        return Err(WireError::InvalidValue {
            field: "batch message count",
            value: header.message_count.into(),
        });
    }
    if verify && header.checksum(frames.iter().map(|f| f.checksum)) != header.batch_checksum {
        return Err(WireError::ChecksumMismatch { field: "batch" });
    }
    Ok((header, frames))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn message(id: u128, ts: u64, payload: &'static [u8]) -> Message {
        Message {
            id,
            origin_timestamp: ts,
            payload: Bytes::from_static(payload),
            user_headers: Bytes::new(),
        }
    }

    #[test]
    fn encoded_batch_reads_back_and_verifies() {
        let mut out = BytesMut::new();
        encode_batch(
            3,
            10,
            20,
            &[message(1, 5, b"a"), message(2, 9, b"bc")],
            &mut out,
        );
        assert_eq!(out.len(), 256 + 48 + 1 + 48 + 2);
        let mut r = Reader::new(&out);
        let (header, frames) = read_batch(&mut r, true).unwrap();
        assert_eq!(
            (
                header.partition_id,
                header.base_offset,
                header.origin_timestamp
            ),
            (3, 10, 5)
        );
        assert_eq!(frames[1].timestamp_delta, 4);
        assert_eq!(frames[1].offset_delta, 1);
        assert_eq!(frames[1].payload, b"bc");
    }

    #[test]
    fn flipped_payload_byte_fails_the_checksum_only_when_verifying() {
        let mut out = BytesMut::new();
        encode_batch(0, 0, 0, &[message(1, 5, b"abc")], &mut out);
        let last = out.len() - 1;
        out[last] ^= 1;
        let err = read_batch(&mut Reader::new(&out), true).unwrap_err();
        assert_eq!(
            err,
            WireError::ChecksumMismatch {
                field: "message frame"
            }
        );
        assert!(read_batch(&mut Reader::new(&out), false).is_ok());
    }

    #[test]
    fn reserved_bytes_and_short_lengths_are_rejected() {
        let mut out = BytesMut::new();
        encode_batch(0, 0, 0, &[], &mut out);
        out[100] = 1;
        assert!(matches!(
            BatchHeader::decode(&out),
            Err(WireError::NonZeroReserved { .. })
        ));
        out[100] = 0;
        out[32..40].copy_from_slice(&10u64.to_le_bytes());
        assert!(matches!(
            BatchHeader::decode(&out),
            Err(WireError::InvalidLength { .. })
        ));
    }

    #[test]
    fn message_count_must_match_the_frames() {
        let mut out = BytesMut::new();
        encode_batch(0, 0, 0, &[message(1, 1, b"x")], &mut out);
        out[48] = 2;
        assert!(matches!(
            read_batch(&mut Reader::new(&out), false),
            Err(WireError::InvalidValue { .. })
        ));
    }
}
