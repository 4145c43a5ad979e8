//! The session-terminal Eviction header (§1.5).

#[cfg(feature = "server")]
use bytes::{BufMut, BytesMut};

use super::WireError;
use super::error_code::{ErrorCode, EvictionReason};
use super::header::{COMMAND_EVICTION, field, header_bytes};
#[cfg(feature = "server")]
use super::{HEADER_SIZE, header::put_prefix};

macro_rules! le {
    ($ty:ty, $h:expr, $off:expr) => {
        <$ty>::from_le_bytes(field($h, $off))
    };
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

#[cfg(feature = "server")]
impl EvictionHeader {
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
}
