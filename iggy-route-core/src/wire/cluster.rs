//! `GET_CLUSTER_METADATA` (12), `ATTACH_CONSUMER_SESSION` (14) and the routing
//! reply of `GET_POLL_ROUTING` (103) / `GET_CONSUMER_OFFSET_ROUTING` (123).

use bytes::{BufMut, BytesMut};

#[cfg(feature = "server")]
use super::len_u32;
use super::{Reader, WireError};

/// Smallest encoded `ClusterNode`: two empty strings, four ports, role, status.
const MIN_NODE_LEN: usize = 4 + 4 + 8 + 2;

/// A node's role in the metadata consensus group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NodeRole {
    /// The metadata leader (primary).
    Leader = 0,
    /// Any other node.
    Follower = 1,
}

/// A node's reported health. 5 and above fail the decode, as in the SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NodeStatus {
    /// Healthy.
    Healthy = 0,
    /// Starting.
    Starting = 1,
    /// Stopping.
    Stopping = 2,
    /// Unreachable.
    Unreachable = 3,
    /// Maintenance.
    Maintenance = 4,
}

/// One `ClusterNodeResponse`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterNode {
    /// Node name (the only node identity on the wire).
    pub name: String,
    /// Host or IP (IPv6 without brackets).
    pub ip: String,
    /// TCP port (0 = not exposed).
    pub tcp_port: u16,
    /// QUIC port.
    pub quic_port: u16,
    /// HTTP port.
    pub http_port: u16,
    /// WebSocket port.
    pub websocket_port: u16,
    /// Role.
    pub role: NodeRole,
    /// Status.
    pub status: NodeStatus,
}

impl ClusterNode {
    /// Read the wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let name = r.string_u32("node name")?;
        let ip = r.string_u32("node ip")?;
        let tcp_port = r.u16()?;
        let quic_port = r.u16()?;
        let http_port = r.u16()?;
        let websocket_port = r.u16()?;
        let role = match r.u8()? {
            0 => NodeRole::Leader,
            1 => NodeRole::Follower,
            other => {
                return Err(WireError::InvalidValue {
                    field: "node role",
                    value: other.into(),
                });
            }
        };
        let status = match r.u8()? {
            0 => NodeStatus::Healthy,
            1 => NodeStatus::Starting,
            2 => NodeStatus::Stopping,
            3 => NodeStatus::Unreachable,
            4 => NodeStatus::Maintenance,
            other => {
                return Err(WireError::InvalidValue {
                    field: "node status",
                    value: other.into(),
                });
            }
        };
        Ok(Self {
            name,
            ip,
            tcp_port,
            quic_port,
            http_port,
            websocket_port,
            role,
            status,
        })
    }

    /// `ip:tcp_port`, with brackets around IPv6 literals.
    pub fn tcp_address(&self) -> String {
        if self.ip.contains(':') {
            format!("[{}]:{}", self.ip, self.tcp_port)
        } else {
            format!("{}:{}", self.ip, self.tcp_port)
        }
    }
}

#[cfg(feature = "server")]
impl ClusterNode {
    /// Append the wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(len_u32(self.name.len()));
        out.put_slice(self.name.as_bytes());
        out.put_u32_le(len_u32(self.ip.len()));
        out.put_slice(self.ip.as_bytes());
        out.put_u16_le(self.tcp_port);
        out.put_u16_le(self.quic_port);
        out.put_u16_le(self.http_port);
        out.put_u16_le(self.websocket_port);
        out.put_u8(self.role as u8);
        out.put_u8(self.status as u8);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        MIN_NODE_LEN + self.name.len() + self.ip.len()
    }
}

/// The `GET_CLUSTER_METADATA` reply body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterMetadata {
    /// Cluster name.
    pub name: String,
    /// The roster, in server order.
    pub nodes: Vec<ClusterNode>,
}

impl ClusterMetadata {
    /// Decode a whole body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let name = r.string_u32("cluster name")?;
        let count = r.u32()? as usize;
        let mut nodes = Vec::with_capacity(count.min(r.remaining() / MIN_NODE_LEN));
        for _ in 0..count {
            nodes.push(ClusterNode::decode(&mut r)?);
        }
        r.finish("cluster metadata")?;
        Ok(Self { name, nodes })
    }

    /// The first node with role Leader and status Healthy (the SDK's rule).
    pub fn leader(&self) -> Option<&ClusterNode> {
        self.nodes
            .iter()
            .find(|n| n.role == NodeRole::Leader && n.status == NodeStatus::Healthy)
    }
}

#[cfg(feature = "server")]
impl ClusterMetadata {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(len_u32(self.name.len()));
        out.put_slice(self.name.as_bytes());
        out.put_u32_le(len_u32(self.nodes.len()));
        for node in &self.nodes {
            node.encode(out);
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        8 + self.name.len()
            + self
                .nodes
                .iter()
                .map(ClusterNode::encoded_len)
                .sum::<usize>()
    }
}

/// A parent session's identity: the `ATTACH_CONSUMER_SESSION` body (32 bytes) and
/// the first part of a routing reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConsumerSession {
    /// The parent (coordinator) connection's client id.
    pub client_id: u128,
    /// The parent's session epoch.
    pub session: u64,
    /// The metadata floor.
    pub metadata_watermark: u64,
}

impl ConsumerSession {
    /// Encoded size: always 32.
    pub const ENCODED_LEN: usize = 32;

    /// Append the 32-byte wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u128_le(self.client_id);
        out.put_u64_le(self.session);
        out.put_u64_le(self.metadata_watermark);
    }

    /// Always 32.
    pub fn encoded_len(&self) -> usize {
        Self::ENCODED_LEN
    }

    /// Read the 32-byte wire form from a reader.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            client_id: r.u128()?,
            session: r.u64()?,
            metadata_watermark: r.u64()?,
        })
    }
}

#[cfg(feature = "server")]
impl ConsumerSession {
    /// Decode a whole `ATTACH_CONSUMER_SESSION` body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let value = Self::read(&mut r)?;
        r.finish("consumer session")?;
        Ok(value)
    }
}

/// The `PollRoutingResponse` body of 103 and 123.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PollRouting {
    /// The coordinator's identity, to present in ATTACH on the data connection.
    pub consumer_session: ConsumerSession,
    /// The partition's primary.
    pub primary: ClusterNode,
}

impl PollRouting {
    /// Decode a whole body.
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let consumer_session = ConsumerSession::read(&mut r)?;
        let primary = ClusterNode::decode(&mut r)?;
        r.finish("poll routing")?;
        Ok(Self {
            consumer_session,
            primary,
        })
    }
}

#[cfg(feature = "server")]
impl PollRouting {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.consumer_session.encode(out);
        self.primary.encode(out);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        ConsumerSession::ENCODED_LEN + self.primary.encoded_len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn node() -> ClusterNode {
        ClusterNode {
            name: "n0".into(),
            ip: "10.0.0.1".into(),
            tcp_port: 8090,
            quic_port: 0,
            http_port: 0,
            websocket_port: 0,
            role: NodeRole::Leader,
            status: NodeStatus::Healthy,
        }
    }

    #[test]
    fn cluster_metadata_matches_the_section_10_vector() {
        let metadata = ClusterMetadata {
            name: "c".into(),
            nodes: vec![node()],
        };
        let mut out = BytesMut::new();
        metadata.encode(&mut out);
        let expected = [
            0x01, 0, 0, 0, 0x63, 0x01, 0, 0, 0, 0x02, 0, 0, 0, 0x6e, 0x30, 0x08, 0, 0, 0, 0x31,
            0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x9a, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(&out[..], &expected);
        assert_eq!(out.len(), metadata.encoded_len());
        assert_eq!(ClusterMetadata::decode(&out).unwrap(), metadata);
        assert_eq!(metadata.leader().unwrap().tcp_address(), "10.0.0.1:8090");
    }

    #[test]
    fn unknown_status_fails_the_whole_roster() {
        let mut out = BytesMut::new();
        ClusterMetadata {
            name: "c".into(),
            nodes: vec![node()],
        }
        .encode(&mut out);
        let last = out.len() - 1;
        out[last] = 5;
        assert_eq!(
            ClusterMetadata::decode(&out),
            Err(WireError::InvalidValue {
                field: "node status",
                value: 5
            })
        );
    }

    #[test]
    fn huge_node_count_does_not_allocate_and_fails_truncated() {
        let body = [1, 0, 0, 0, b'c', 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            ClusterMetadata::decode(&body),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn poll_routing_and_attach_body_round_trip() {
        let session = ConsumerSession {
            client_id: 1 << 100,
            session: 7,
            metadata_watermark: 9,
        };
        let routing = PollRouting {
            consumer_session: session,
            primary: node(),
        };
        let mut out = BytesMut::new();
        routing.encode(&mut out);
        assert_eq!(PollRouting::decode(&out).unwrap(), routing);
        let mut attach = BytesMut::new();
        session.encode(&mut attach);
        assert_eq!(attach.len(), 32);
        assert_eq!(ConsumerSession::decode(&attach).unwrap(), session);
        assert!(ConsumerSession::decode(&attach[..31]).is_err());
    }
}
