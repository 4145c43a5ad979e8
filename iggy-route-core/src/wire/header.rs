//! The 256-byte request, reply and eviction headers (§1.2 to §1.5).

use bytes::BufMut;
#[cfg(feature = "server")]
use bytes::BytesMut;

use super::codes::Operation;
pub use super::reply_header::ReplyHeader;
use super::{HEADER_SIZE, WireError, len_u32};

/// Command byte of a client request.
pub const COMMAND_REQUEST: u8 = 5;
/// Command byte of a reply.
pub const COMMAND_REPLY: u8 = 8;
/// Command byte of an eviction.
pub const COMMAND_EVICTION: u8 = 13;

const SIZE_OFFSET: usize = 48;
const COMMAND_OFFSET: usize = 60;

/// `xxh3_64(body)` widened to u128: the `request_checksum` stamp.
pub fn request_checksum(body: &[u8]) -> u128 {
    u128::from(twox_hash::XxHash3_64::oneshot(body))
}

pub(crate) fn frame_size(body_len: usize) -> u32 {
    len_u32(body_len.saturating_add(HEADER_SIZE))
}

/// Read a fixed-width little-endian field at a known offset of a 256-byte header.
pub(crate) fn field<const N: usize>(header: &[u8; HEADER_SIZE], offset: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = header.get(offset..offset + N) {
        out.copy_from_slice(src);
    }
    out
}

/// Validate the length and command byte, and return the header bytes.
pub(crate) fn header_bytes(bytes: &[u8], command: u8) -> Result<&[u8; HEADER_SIZE], WireError> {
    let header: &[u8; HEADER_SIZE] = bytes
        .get(..HEADER_SIZE)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated {
            offset: 0,
            need: HEADER_SIZE,
            have: bytes.len(),
        })?;
    let found = header[COMMAND_OFFSET];
    if found != command {
        return Err(WireError::UnknownCommand { byte: found });
    }
    Ok(header)
}

pub(crate) fn operation_at(
    header: &[u8; HEADER_SIZE],
    offset: usize,
) -> Result<Operation, WireError> {
    let byte = header[offset];
    Operation::from_u8(byte).ok_or(WireError::UnknownOperation { byte })
}

/// Write the common 128-byte prefix (§1.2).
pub(crate) fn put_prefix(
    out: &mut impl BufMut,
    cluster: u128,
    size: u32,
    view: u32,
    command: u8,
    replica: u8,
) {
    out.put_u128_le(0); // checksum
    out.put_u128_le(0); // checksum_body
    out.put_u128_le(cluster);
    out.put_u32_le(size);
    out.put_u32_le(view);
    out.put_u32_le(0); // release
    out.put_u8(command);
    out.put_u8(replica);
    out.put_bytes(0, 66);
}

macro_rules! le {
    ($ty:ty, $h:expr, $off:expr) => {
        <$ty>::from_le_bytes(field($h, $off))
    };
}
pub(crate) use le;

/// Client-to-server request header (§1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// Cluster id (the SDK sends 0).
    pub cluster: u128,
    /// Total frame size, header included.
    pub size: u32,
    /// View (the SDK sends 0).
    pub view: u32,
    /// Replica (the SDK sends 0).
    pub replica: u8,
    /// Client id, never 0 on a valid request.
    pub client: u128,
    /// `xxh3_64(body)` for metadata ops, Register and Logout; 0 otherwise.
    pub request_checksum: u128,
    /// Timestamp (the SDK sends 0).
    pub timestamp: u64,
    /// Request number (0 for Register).
    pub request: u64,
    /// The operation.
    pub operation: Operation,
    /// Session epoch (0 for Register).
    pub session: u64,
    /// User id (the server overwrites it).
    pub user_id: u32,
    /// Command code: bytes 196..200, only written and read for `NonReplicated`.
    pub code: u32,
}

impl RequestHeader {
    /// A request header for `body_len` bytes of body, with the operation the SDK
    /// uses for `code` passed in explicitly.
    pub fn new(
        operation: Operation,
        code: u32,
        client: u128,
        session: u64,
        request: u64,
        body_len: usize,
    ) -> Self {
        Self {
            size: frame_size(body_len),
            client,
            session,
            request,
            operation,
            code: if operation == Operation::NonReplicated {
                code
            } else {
                0
            },
            ..Self::default()
        }
    }

    /// Body length announced by `size`.
    pub fn body_len(&self) -> usize {
        (self.size as usize).saturating_sub(HEADER_SIZE)
    }

    /// The command code this request stands for: the reserved code for
    /// `NonReplicated`, the operation's code otherwise.
    pub fn command_code(&self) -> Option<u32> {
        if self.operation == Operation::NonReplicated {
            Some(self.code)
        } else {
            self.operation.code()
        }
    }

    /// Append exactly 256 bytes (to a `BytesMut`, or over a 256-byte slice).
    pub fn encode(&self, out: &mut impl BufMut) {
        put_prefix(
            out,
            self.cluster,
            self.size,
            self.view,
            COMMAND_REQUEST,
            self.replica,
        );
        out.put_u128_le(self.client);
        out.put_u128_le(self.request_checksum);
        out.put_u64_le(self.timestamp);
        out.put_u64_le(self.request);
        out.put_u8(self.operation as u8);
        out.put_bytes(0, 7);
        out.put_u64_le(self.session);
        out.put_u32_le(self.user_id);
        let code = if self.operation == Operation::NonReplicated {
            self.code
        } else {
            0
        };
        out.put_u32_le(code);
        out.put_bytes(0, 56);
    }

    /// Decode the first 256 bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let h = header_bytes(bytes, COMMAND_REQUEST)?;
        let operation = operation_at(h, 176)?;
        Ok(Self {
            cluster: le!(u128, h, 32),
            size: le!(u32, h, SIZE_OFFSET),
            view: le!(u32, h, 52),
            replica: h[61],
            client: le!(u128, h, 128),
            request_checksum: le!(u128, h, 144),
            timestamp: le!(u64, h, 160),
            request: le!(u64, h, 168),
            operation,
            session: le!(u64, h, 184),
            user_id: le!(u32, h, 192),
            code: if operation == Operation::NonReplicated {
                le!(u32, h, 196)
            } else {
                0
            },
        })
    }
}

/// Append a whole request frame: `template` with `size` set to `256 + body.len()`
/// and `request_checksum` stamped as the SDK does (xxh3 of the body for Register,
/// Logout, DeleteSegments and metadata ops; 0 for partition ops and `NonReplicated`).
#[cfg(feature = "server")]
pub fn encode_request(template: &RequestHeader, body: &[u8], out: &mut BytesMut) {
    let mut header = *template;
    header.size = frame_size(body.len());
    header.request_checksum = if header.operation.is_checksummed() {
        request_checksum(body)
    } else {
        0
    };
    out.reserve(HEADER_SIZE + body.len());
    header.encode(out);
    out.put_slice(body);
}

/// The `size` field of a header prefix, if at least 52 bytes are present.
pub(crate) fn size_field(bytes: &[u8]) -> Option<u32> {
    let raw: [u8; 4] = bytes.get(SIZE_OFFSET..SIZE_OFFSET + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw))
}

/// The command byte of a header prefix.
pub(crate) fn command_byte(bytes: &[u8]) -> Option<u8> {
    bytes.get(COMMAND_OFFSET).copied()
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
    fn ping_request_header_matches_the_section_10_vector() {
        let client = u128::from_le_bytes([16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
        let header = RequestHeader::new(Operation::NonReplicated, 1, client, 100, 1, 0);
        let mut out = BytesMut::new();
        header.encode(&mut out);
        assert_eq!(out.len(), 256);
        let mut expected = vec![(49, 1), (60, 5)];
        expected.extend((0..16).map(|i| (128 + i, 16 - i as u8)));
        expected.extend([(168, 1), (176, 2), (184, 0x64), (196, 1)]);
        assert_eq!(nonzero(&out), expected);
        assert_eq!(RequestHeader::decode(&out).unwrap(), header);
    }

    #[test]
    fn code_is_only_carried_by_non_replicated_requests() {
        let mut header = RequestHeader::new(Operation::SendMessages, 101, 1, 1, 1, 0);
        assert_eq!(header.code, 0);
        header.code = 101;
        let mut out = BytesMut::new();
        header.encode(&mut out);
        assert_eq!(&out[196..200], &[0, 0, 0, 0]);
        assert_eq!(
            RequestHeader::decode(&out).unwrap().command_code(),
            Some(101)
        );
    }

    #[test]
    fn register_requests_are_stamped_and_sends_are_not() {
        let body = b"hello";
        let mut out = BytesMut::new();
        encode_request(
            &RequestHeader::new(Operation::Register, 40, 1, 0, 0, 0),
            body,
            &mut out,
        );
        let decoded = RequestHeader::decode(&out).unwrap();
        assert_eq!(decoded.request_checksum, request_checksum(body));
        assert_eq!(decoded.size, 261);
        let mut out = BytesMut::new();
        encode_request(
            &RequestHeader::new(Operation::SendMessages, 0, 1, 1, 1, 0),
            body,
            &mut out,
        );
        assert_eq!(RequestHeader::decode(&out).unwrap().request_checksum, 0);
    }

    #[test]
    fn wrong_command_unknown_operation_and_short_input_are_typed_errors() {
        let mut out = BytesMut::new();
        RequestHeader::default().encode(&mut out);
        assert_eq!(
            ReplyHeader::decode(&out),
            Err(WireError::UnknownCommand { byte: 5 })
        );
        out[176] = 4;
        assert_eq!(
            RequestHeader::decode(&out),
            Err(WireError::UnknownOperation { byte: 4 })
        );
        assert!(matches!(
            RequestHeader::decode(&out[..255]),
            Err(WireError::Truncated { .. })
        ));
    }
}
