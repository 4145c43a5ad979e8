//! The server-to-client reply header (§1.4).

#[cfg(feature = "server")]
use bytes::{BufMut, BytesMut};

use super::codes::Operation;
use super::header::{COMMAND_REPLY, field, header_bytes, le, operation_at};
#[cfg(feature = "server")]
use super::header::{RequestHeader, frame_size, put_prefix};
use super::{HEADER_SIZE, WireError};

const SIZE_OFFSET: usize = 48;

/// Server-to-client reply header (§1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyHeader {
    /// Cluster id.
    pub cluster: u128,
    /// Total frame size, header included.
    pub size: u32,
    /// View.
    pub view: u32,
    /// Replica.
    pub replica: u8,
    /// Echo of the request's stamp.
    pub request_checksum: u128,
    /// Context (0).
    pub context: u128,
    /// Echo of the request's client id.
    pub client: u128,
    /// Commit op (0 on deny replies).
    pub op: u64,
    /// Commit position; the SDK folds it into its metadata watermark.
    pub commit: u64,
    /// Timestamp echo.
    pub timestamp: u64,
    /// Echo of the request number.
    pub request: u64,
    /// Echo of the request's operation; controls body parsing.
    pub operation: Operation,
    /// 0 = OK, otherwise an error code with an empty body.
    pub status: u32,
}

impl ReplyHeader {
    /// Body length announced by `size`.
    pub fn body_len(&self) -> usize {
        (self.size as usize).saturating_sub(HEADER_SIZE)
    }

    /// Decode the first 256 bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let h = header_bytes(bytes, COMMAND_REPLY)?;
        Ok(Self {
            cluster: le!(u128, h, 32),
            size: le!(u32, h, SIZE_OFFSET),
            view: le!(u32, h, 52),
            replica: h[61],
            request_checksum: le!(u128, h, 128),
            context: le!(u128, h, 144),
            client: le!(u128, h, 160),
            op: le!(u64, h, 176),
            commit: le!(u64, h, 184),
            timestamp: le!(u64, h, 192),
            request: le!(u64, h, 200),
            operation: operation_at(h, 208)?,
            status: le!(u32, h, 216),
        })
    }
}

#[cfg(feature = "server")]
impl ReplyHeader {
    /// A reply to `request` carrying `body_len` bytes of body.
    pub fn for_request(request: &RequestHeader, status: u32, commit: u64, body_len: usize) -> Self {
        Self {
            cluster: request.cluster,
            size: frame_size(body_len),
            request_checksum: request.request_checksum,
            client: request.client,
            commit,
            request: request.request,
            operation: request.operation,
            status,
            ..Self::default()
        }
    }

    /// Append exactly 256 bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(HEADER_SIZE);
        put_prefix(
            out,
            self.cluster,
            self.size,
            self.view,
            COMMAND_REPLY,
            self.replica,
        );
        out.put_u128_le(self.request_checksum);
        out.put_u128_le(self.context);
        out.put_u128_le(self.client);
        out.put_u64_le(self.op);
        out.put_u64_le(self.commit);
        out.put_u64_le(self.timestamp);
        out.put_u64_le(self.request);
        out.put_u8(self.operation as u8);
        out.put_bytes(0, 7);
        out.put_u32_le(self.status);
        out.put_bytes(0, 36);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn nonzero(bytes: &[u8]) -> Vec<(usize, u8)> {
        bytes
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, b)| *b != 0)
            .collect()
    }

    #[test]
    fn deny_reply_header_matches_the_section_10_vector() {
        let request = RequestHeader::new(Operation::SendMessages, 0, 7, 100, 3, 10);
        let reply = ReplyHeader::for_request(&request, 58, 42, 0);
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        assert_eq!(
            nonzero(&out),
            vec![
                (49, 1),
                (60, 8),
                (160, 7),
                (184, 0x2a),
                (200, 3),
                (208, 0xa0),
                (216, 0x3a)
            ]
        );
        assert_eq!(ReplyHeader::decode(&out).unwrap(), reply);
    }
}
