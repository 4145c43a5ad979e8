//! The 256-byte request, reply and eviction headers (§1.2 to §1.5).

use bytes::{BufMut, BytesMut};

use super::codes::Operation;
use super::error_code::{ErrorCode, EvictionReason};
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

fn frame_size(body_len: usize) -> u32 {
    len_u32(body_len.saturating_add(HEADER_SIZE))
}

/// Read a fixed-width little-endian field at a known offset of a 256-byte header.
fn field<const N: usize>(header: &[u8; HEADER_SIZE], offset: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = header.get(offset..offset + N) {
        out.copy_from_slice(src);
    }
    out
}

/// Validate the length and command byte, and return the header bytes.
fn header_bytes(bytes: &[u8], command: u8) -> Result<&[u8; HEADER_SIZE], WireError> {
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

fn operation_at(header: &[u8; HEADER_SIZE], offset: usize) -> Result<Operation, WireError> {
    let byte = header[offset];
    Operation::from_u8(byte).ok_or(WireError::UnknownOperation { byte })
}

/// Write the common 128-byte prefix (§1.2).
fn put_prefix(out: &mut BytesMut, cluster: u128, size: u32, view: u32, command: u8, replica: u8) {
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

    /// Append exactly 256 bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(HEADER_SIZE);
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

    /// Body length announced by `size`.
    pub fn body_len(&self) -> usize {
        (self.size as usize).saturating_sub(HEADER_SIZE)
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

/// Session-terminal eviction, header only (§1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionHeader {
    /// Cluster id.
    pub cluster: u128,
    /// The evicted client id.
    pub client: u128,
    /// Max accepted protocol version (reason 14 only).
    pub server_protocol_version: u32,
    /// Min accepted protocol version (reason 14 only).
    pub server_protocol_version_min: u32,
    /// Why.
    pub reason: EvictionReason,
}

impl Default for EvictionHeader {
    fn default() -> Self {
        Self {
            cluster: 0,
            client: 0,
            server_protocol_version: 0,
            server_protocol_version_min: 0,
            reason: EvictionReason::NoSession,
        }
    }
}

impl EvictionHeader {
    /// The error the SDK raises for this eviction, including the degenerate-window
    /// rule for `IncompatibleProtocol`.
    pub fn error_code(&self) -> ErrorCode {
        let degenerate = self.server_protocol_version_min == 0
            || self.server_protocol_version < self.server_protocol_version_min;
        if self.reason == EvictionReason::IncompatibleProtocol && degenerate {
            return ErrorCode::Unauthenticated;
        }
        self.reason.error_code()
    }

    /// Append exactly 256 bytes (`size` is always 256).
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(HEADER_SIZE);
        put_prefix(
            out,
            self.cluster,
            HEADER_SIZE as u32,
            0,
            COMMAND_EVICTION,
            0,
        );
        out.put_u128_le(self.client);
        out.put_u32_le(self.server_protocol_version);
        out.put_u32_le(self.server_protocol_version_min);
        out.put_bytes(0, 103);
        out.put_u8(self.reason.as_u8());
    }

    /// Decode the first 256 bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let h = header_bytes(bytes, COMMAND_EVICTION)?;
        Ok(Self {
            cluster: le!(u128, h, 32),
            client: le!(u128, h, 128),
            server_protocol_version: le!(u32, h, 144),
            server_protocol_version_min: le!(u32, h, 148),
            reason: EvictionReason::from_u8(h[255]),
        })
    }
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
    fn eviction_round_trips_and_grades_degenerate_windows() {
        let eviction = EvictionHeader {
            client: 9,
            server_protocol_version: 0x2C00,
            server_protocol_version_min: 0x2C00,
            reason: EvictionReason::IncompatibleProtocol,
            ..EvictionHeader::default()
        };
        let mut out = BytesMut::new();
        eviction.encode(&mut out);
        assert_eq!((out[49], out[60], out[255]), (1, 13, 14));
        assert_eq!(EvictionHeader::decode(&out).unwrap(), eviction);
        assert_eq!(
            eviction.error_code(),
            ErrorCode::IncompatibleProtocolVersion
        );
        let degenerate = EvictionHeader {
            server_protocol_version_min: 0,
            ..eviction
        };
        assert_eq!(degenerate.error_code(), ErrorCode::Unauthenticated);
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
