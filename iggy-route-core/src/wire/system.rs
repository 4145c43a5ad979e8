//! System reads: `GET_STATS` (10), `GET_ME` (20), `GET_CLIENT` (21) and `GET_CLIENTS`
//! (22). Their requests are empty except `GET_CLIENT`'s; `PING` (1) is empty both ways.
//!
//! Strings in these replies are `[len:u32][utf8]`, not `WireName`s: they are whatever the
//! host reports (a hostname, a kernel version, a peer address), of any length.

use bytes::{BufMut, BytesMut};

#[cfg(feature = "server")]
use super::len_u32;
use super::topics::whole_body;
use super::{Reader, WireError};

/// Size of one [`CacheMetric`] on the wire.
const CACHE_METRIC_LEN: usize = 32;
/// Size of one [`ConsumerGroupMembership`] on the wire.
const MEMBERSHIP_LEN: usize = 12;
/// Smallest encoded [`ClientInfo`] (empty address).
const MIN_CLIENT_INFO_LEN: usize = 17;

/// One partition's cache hit statistics in [`ServerStats`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CacheMetric {
    /// Stream id.
    pub stream_id: u32,
    /// Topic id.
    pub topic_id: u32,
    /// Partition id.
    pub partition_id: u32,
    /// Cache hits.
    pub hits: u64,
    /// Cache misses.
    pub misses: u64,
    /// Hit ratio, 0..=1.
    pub hit_ratio: f32,
}

/// The `GET_STATS` reply: every field of the 0.11.0 crate's `StatsResponse`, in wire
/// order. Times are µs; sizes are bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerStats {
    /// The server's process id.
    pub process_id: u32,
    /// CPU use of the server process, percent.
    pub cpu_usage: f32,
    /// CPU use of the host, percent.
    pub total_cpu_usage: f32,
    /// Memory used by the server process.
    pub memory_usage: u64,
    /// Host memory.
    pub total_memory: u64,
    /// Host memory available.
    pub available_memory: u64,
    /// How long the server has run, µs.
    pub run_time: u64,
    /// When the server started, µs since the epoch.
    pub start_time: u64,
    /// Bytes read from disk.
    pub read_bytes: u64,
    /// Bytes written to disk.
    pub written_bytes: u64,
    /// Bytes of messages held.
    pub messages_size_bytes: u64,
    /// Number of streams.
    pub streams_count: u32,
    /// Number of topics.
    pub topics_count: u32,
    /// Number of partitions.
    pub partitions_count: u32,
    /// Number of segments.
    pub segments_count: u32,
    /// Number of messages.
    pub messages_count: u64,
    /// Number of connected clients (of the node that answers).
    pub clients_count: u32,
    /// Number of consumer groups.
    pub consumer_groups_count: u32,
    /// Host name.
    pub hostname: String,
    /// Operating system name.
    pub os_name: String,
    /// Operating system version.
    pub os_version: String,
    /// Kernel version.
    pub kernel_version: String,
    /// Server version text.
    pub iggy_server_version: String,
    /// Server version as a number (`major·10⁶ + minor·10³ + patch`); `None` is sent as 0.
    pub iggy_server_semver: Option<u32>,
    /// Per-partition cache statistics.
    pub cache_metrics: Vec<CacheMetric>,
    /// Threads of the server process.
    pub threads_count: u32,
    /// Free space on the data volume.
    pub free_disk_space: u64,
    /// Size of the data volume.
    pub total_disk_space: u64,
}

whole_body!(ServerStats, "stats", |r| {
    let mut stats = ServerStats {
        process_id: r.u32()?,
        cpu_usage: f32::from_bits(r.u32()?),
        total_cpu_usage: f32::from_bits(r.u32()?),
        memory_usage: r.u64()?,
        total_memory: r.u64()?,
        available_memory: r.u64()?,
        run_time: r.u64()?,
        start_time: r.u64()?,
        read_bytes: r.u64()?,
        written_bytes: r.u64()?,
        messages_size_bytes: r.u64()?,
        streams_count: r.u32()?,
        topics_count: r.u32()?,
        partitions_count: r.u32()?,
        segments_count: r.u32()?,
        messages_count: r.u64()?,
        clients_count: r.u32()?,
        consumer_groups_count: r.u32()?,
        hostname: r.string_u32("hostname")?,
        os_name: r.string_u32("os name")?,
        os_version: r.string_u32("os version")?,
        kernel_version: r.string_u32("kernel version")?,
        iggy_server_version: r.string_u32("server version")?,
        iggy_server_semver: Some(r.u32()?).filter(|&semver| semver != 0),
        ..ServerStats::default()
    };
    let count = r.u32()? as usize;
    let mut metrics = Vec::with_capacity(count.min(r.remaining() / CACHE_METRIC_LEN));
    for _ in 0..count {
        metrics.push(CacheMetric {
            stream_id: r.u32()?,
            topic_id: r.u32()?,
            partition_id: r.u32()?,
            hits: r.u64()?,
            misses: r.u64()?,
            hit_ratio: f32::from_bits(r.u32()?),
        });
    }
    stats.cache_metrics = metrics;
    stats.threads_count = r.u32()?;
    stats.free_disk_space = r.u64()?;
    stats.total_disk_space = r.u64()?;
    stats
});

/// Append a `[len:u32][utf8]` string.
#[cfg(feature = "server")]
fn put_string(out: &mut BytesMut, text: &str) {
    out.put_u32_le(len_u32(text.len()));
    out.put_slice(text.as_bytes());
}

#[cfg(feature = "server")]
impl ServerStats {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.process_id);
        out.put_f32_le(self.cpu_usage);
        out.put_f32_le(self.total_cpu_usage);
        for value in [
            self.memory_usage,
            self.total_memory,
            self.available_memory,
            self.run_time,
            self.start_time,
            self.read_bytes,
            self.written_bytes,
            self.messages_size_bytes,
        ] {
            out.put_u64_le(value);
        }
        out.put_u32_le(self.streams_count);
        out.put_u32_le(self.topics_count);
        out.put_u32_le(self.partitions_count);
        out.put_u32_le(self.segments_count);
        out.put_u64_le(self.messages_count);
        out.put_u32_le(self.clients_count);
        out.put_u32_le(self.consumer_groups_count);
        for text in [
            &self.hostname,
            &self.os_name,
            &self.os_version,
            &self.kernel_version,
            &self.iggy_server_version,
        ] {
            put_string(out, text);
        }
        out.put_u32_le(self.iggy_server_semver.unwrap_or(0));
        out.put_u32_le(len_u32(self.cache_metrics.len()));
        for metric in &self.cache_metrics {
            out.put_u32_le(metric.stream_id);
            out.put_u32_le(metric.topic_id);
            out.put_u32_le(metric.partition_id);
            out.put_u64_le(metric.hits);
            out.put_u64_le(metric.misses);
            out.put_f32_le(metric.hit_ratio);
        }
        out.put_u32_le(self.threads_count);
        out.put_u64_le(self.free_disk_space);
        out.put_u64_le(self.total_disk_space);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        let strings = [
            &self.hostname,
            &self.os_name,
            &self.os_version,
            &self.kernel_version,
            &self.iggy_server_version,
        ]
        .iter()
        .map(|text| 4 + text.len())
        .sum::<usize>();
        108 + strings + 4 + 4 + CACHE_METRIC_LEN * self.cache_metrics.len() + 4 + 16
    }
}

/// One connected client (a `ClientResponse`), in `GET_CLIENTS` and at the head of the
/// `GET_CLIENT` / `GET_ME` reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientInfo {
    /// The server's id for the connection (the low 32 bits of its transport id), the one
    /// `GET_CLIENT` takes.
    pub client_id: u32,
    /// The signed-in user (`u32::MAX`: none).
    pub user_id: u32,
    /// Transport: 1 TCP, 2 QUIC, 4 WebSocket (kept as sent).
    pub transport: u8,
    /// The peer address, as text.
    pub address: String,
    /// How many consumer groups the client is a member of.
    pub consumer_groups_count: u32,
}

impl ClientInfo {
    /// Read one client.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            client_id: r.u32()?,
            user_id: r.u32()?,
            transport: r.u8()?,
            address: r.string_u32("client address")?,
            consumer_groups_count: r.u32()?,
        })
    }

    /// Decode a `GET_CLIENTS` payload: clients until the payload ends (empty: none).
    pub fn decode_list(payload: &[u8]) -> Result<Vec<Self>, WireError> {
        let mut r = Reader::new(payload);
        let mut clients = Vec::with_capacity(payload.len() / MIN_CLIENT_INFO_LEN);
        while r.remaining() > 0 {
            clients.push(Self::read(&mut r)?);
        }
        Ok(clients)
    }
}

#[cfg(feature = "server")]
impl ClientInfo {
    /// Append one client.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.client_id);
        out.put_u32_le(self.user_id);
        out.put_u8(self.transport);
        put_string(out, &self.address);
        out.put_u32_le(self.consumer_groups_count);
    }

    /// Encoded size of one client.
    pub fn encoded_len(&self) -> usize {
        MIN_CLIENT_INFO_LEN + self.address.len()
    }

    /// Append a `GET_CLIENTS` payload.
    pub fn encode_list(clients: &[Self], out: &mut BytesMut) {
        for client in clients {
            client.encode(out);
        }
    }
}

/// A consumer group a client belongs to (12 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConsumerGroupMembership {
    /// Stream id.
    pub stream_id: u32,
    /// Topic id.
    pub topic_id: u32,
    /// Consumer group id.
    pub group_id: u32,
}

/// The `GET_CLIENT` and `GET_ME` reply: the client, then exactly
/// `client.consumer_groups_count` memberships. `GET_CLIENT` answers an empty payload for
/// a client the node does not know.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientDetails {
    /// The client; encode writes its `consumer_groups_count` as given, so keep it equal to
    /// `consumer_groups.len()`.
    pub client: ClientInfo,
    /// Its consumer groups.
    pub consumer_groups: Vec<ConsumerGroupMembership>,
}

whole_body!(ClientDetails, "client details", |r| {
    let client = ClientInfo::read(&mut r)?;
    let count = client.consumer_groups_count as usize;
    let mut consumer_groups = Vec::with_capacity(count.min(r.remaining() / MEMBERSHIP_LEN));
    for _ in 0..count {
        consumer_groups.push(ConsumerGroupMembership {
            stream_id: r.u32()?,
            topic_id: r.u32()?,
            group_id: r.u32()?,
        });
    }
    ClientDetails {
        client,
        consumer_groups,
    }
});

impl ClientDetails {
    /// Decode a `GET_CLIENT` payload: `None` when empty.
    pub fn decode_optional(payload: &[u8]) -> Result<Option<Self>, WireError> {
        if payload.is_empty() {
            return Ok(None);
        }
        Self::decode(payload).map(Some)
    }
}

#[cfg(feature = "server")]
impl ClientDetails {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        self.client.encode(out);
        for group in &self.consumer_groups {
            out.put_u32_le(group.stream_id);
            out.put_u32_le(group.topic_id);
            out.put_u32_le(group.group_id);
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.client.encoded_len() + MEMBERSHIP_LEN * self.consumer_groups.len()
    }
}

/// The `GET_CLIENT` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GetClientRequest {
    /// The client, by the id [`ClientInfo::client_id`] reports.
    pub client_id: u32,
}

impl GetClientRequest {
    /// Append the body.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u32_le(self.client_id);
    }

    /// Always 4.
    pub fn encoded_len(&self) -> usize {
        4
    }
}
#[cfg(feature = "server")]
whole_body!(GetClientRequest, "get client request", |r| {
    GetClientRequest {
        client_id: r.u32()?,
    }
});

/// Read a `PING` (or any other empty) request body: nothing may follow.
#[cfg(feature = "server")]
pub fn decode_empty_request(body: &[u8]) -> Result<(), WireError> {
    Reader::new(body).finish("empty request")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stats() -> ServerStats {
        ServerStats {
            process_id: 7,
            cpu_usage: 12.5,
            hostname: "node-0".into(),
            iggy_server_version: "0.11.0".into(),
            iggy_server_semver: Some(11_000),
            cache_metrics: vec![CacheMetric {
                hit_ratio: 0.5,
                ..CacheMetric::default()
            }],
            total_disk_space: 9,
            ..ServerStats::default()
        }
    }

    #[test]
    fn stats_round_trip_and_fail_on_every_truncation() {
        let value = stats();
        let mut out = BytesMut::new();
        value.encode(&mut out);
        assert_eq!(out.len(), value.encoded_len());
        assert_eq!(ServerStats::decode(&out).unwrap(), value);
        for cut in 0..out.len() {
            assert!(ServerStats::decode(&out[..cut]).is_err(), "cut {cut}");
        }
        let no_semver = ServerStats {
            iggy_server_semver: None,
            ..value
        };
        let mut out = BytesMut::new();
        no_semver.encode(&mut out);
        assert_eq!(ServerStats::decode(&out).unwrap().iggy_server_semver, None);
    }

    #[test]
    fn huge_counts_and_lengths_fail_without_allocating() {
        let mut out = BytesMut::new();
        stats().encode(&mut out);
        // The hostname's length field sits right after the 108-byte numeric head.
        let mut long_name = out.clone();
        long_name[108..112].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            ServerStats::decode(&long_name),
            Err(WireError::Truncated { .. })
        ));
        let details = ClientDetails {
            client: ClientInfo {
                client_id: 1,
                user_id: 2,
                transport: 1,
                address: "127.0.0.1:5000".into(),
                consumer_groups_count: u32::MAX,
            },
            consumer_groups: Vec::new(),
        };
        let mut out = BytesMut::new();
        details.encode(&mut out);
        assert!(ClientDetails::decode(&out).is_err());
        assert!(ClientInfo::decode_list(&out[..5]).is_err());
    }

    #[test]
    fn clients_round_trip_and_get_client_may_be_empty() {
        let details = ClientDetails {
            client: ClientInfo {
                client_id: 3,
                user_id: 0,
                transport: 1,
                address: "[::1]:1".into(),
                consumer_groups_count: 1,
            },
            consumer_groups: vec![ConsumerGroupMembership {
                stream_id: 1,
                topic_id: 2,
                group_id: 3,
            }],
        };
        let mut out = BytesMut::new();
        details.encode(&mut out);
        assert_eq!(out.len(), details.encoded_len());
        assert_eq!(
            ClientDetails::decode_optional(&out).unwrap(),
            Some(details.clone())
        );
        assert_eq!(ClientDetails::decode_optional(&[]).unwrap(), None);
        assert!(ClientDetails::decode(&out[..out.len() - 1]).is_err());

        let clients = vec![details.client.clone(), details.client];
        let mut out = BytesMut::new();
        ClientInfo::encode_list(&clients, &mut out);
        assert_eq!(ClientInfo::decode_list(&out).unwrap(), clients);
        assert!(ClientInfo::decode_list(&[]).unwrap().is_empty());
        let mut bad_utf8 = out.clone();
        bad_utf8[13] = 0xff;
        assert!(ClientInfo::decode_list(&bad_utf8).is_err());

        let get = GetClientRequest { client_id: 9 };
        let mut out = BytesMut::new();
        get.encode(&mut out);
        assert_eq!(GetClientRequest::decode(&out).unwrap(), get);
        assert!(GetClientRequest::decode(&out[..3]).is_err());
        assert!(decode_empty_request(&[]).is_ok());
        assert!(decode_empty_request(&[0]).is_err());
    }
}
