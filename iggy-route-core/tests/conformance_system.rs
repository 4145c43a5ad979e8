//! Body conformance of the system commands against the published 0.11.0 crates: `PING`,
//! `GET_STATS`, `GET_ME`, `GET_CLIENT` and `GET_CLIENTS` (the empty requests of those
//! and of `GET_STREAMS` too). For every request and reply, ours encodes to the bytes theirs
//! encodes for the same values, and each side decodes the other's bytes.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use iggy_binary_protocol::requests::streams::GetStreamsRequest as TGetStreams;
use iggy_binary_protocol::requests::system::{
    GetClientRequest as TGetClient, GetClientsRequest as TGetClients, GetMeRequest as TGetMe,
    GetStatsRequest as TGetStats, PingRequest as TPing,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::clients::{
    ClientDetailsResponse as TClientDetails, ClientResponse as TClient,
    ConsumerGroupInfoResponse as TMembership, GetClientsResponse as TClients,
};
use iggy_binary_protocol::responses::system::get_stats::{
    CacheMetricEntry as TCacheMetric, StatsResponse as TStats,
};
use iggy_binary_protocol::{WireDecode, WireEncode};
use iggy_route_core::wire::*;

fn ours(encode: impl Fn(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out);
    out.to_vec()
}

/// Their bytes equal ours, and their decode of our bytes re-encodes to the same.
fn same<T: WireEncode + WireDecode>(their: &T, our_bytes: &[u8]) {
    assert_eq!(their.to_bytes().as_ref(), our_bytes);
    let (decoded, used) = T::decode(our_bytes).unwrap();
    assert_eq!(used, our_bytes.len());
    assert_eq!(decoded.to_bytes().as_ref(), our_bytes);
}

#[test]
fn empty_requests_and_replies_ping_stats_me_clients_streams() {
    for their in [
        TPing.to_bytes(),
        TGetStats.to_bytes(),
        TGetMe.to_bytes(),
        TGetClients.to_bytes(),
        TGetStreams.to_bytes(),
    ] {
        assert!(their.is_empty());
        assert!(decode_empty_request(&their).is_ok());
    }
    // Update, delete and purge answer an `EmptyResponse`; so does PING.
    assert!(EmptyResponse.to_bytes().is_empty());
    assert_eq!(empty_reply(&EmptyResponse.to_bytes()), Ok(()));
}

fn stats() -> (ServerStats, TStats) {
    let ours = ServerStats {
        process_id: 4242,
        cpu_usage: 25.5,
        total_cpu_usage: 50.25,
        memory_usage: 1 << 30,
        total_memory: 8 << 30,
        available_memory: 4 << 30,
        run_time: 3_600_000_000,
        start_time: 1_710_000_000_000_000,
        read_bytes: 1_000_000,
        written_bytes: 500_000,
        messages_size_bytes: 2_000_000,
        streams_count: 3,
        topics_count: 10,
        partitions_count: 30,
        segments_count: 90,
        messages_count: 50_000,
        clients_count: 5,
        consumer_groups_count: 2,
        hostname: "node-1".into(),
        os_name: "Linux".into(),
        os_version: "Debian 13".into(),
        kernel_version: "6.12.0".into(),
        iggy_server_version: "0.11.0".into(),
        iggy_server_semver: Some(11_000),
        cache_metrics: vec![
            CacheMetric {
                stream_id: 1,
                topic_id: 2,
                partition_id: 0,
                hits: 1000,
                misses: 50,
                hit_ratio: 0.95,
            },
            CacheMetric {
                stream_id: 2,
                topic_id: 3,
                partition_id: 1,
                hits: 0,
                misses: 100,
                hit_ratio: 0.0,
            },
        ],
        threads_count: 16,
        free_disk_space: 100 << 30,
        total_disk_space: 500 << 30,
    };
    let theirs = TStats {
        process_id: 4242,
        cpu_usage: 25.5,
        total_cpu_usage: 50.25,
        memory_usage: 1 << 30,
        total_memory: 8 << 30,
        available_memory: 4 << 30,
        run_time: 3_600_000_000,
        start_time: 1_710_000_000_000_000,
        read_bytes: 1_000_000,
        written_bytes: 500_000,
        messages_size_bytes: 2_000_000,
        streams_count: 3,
        topics_count: 10,
        partitions_count: 30,
        segments_count: 90,
        messages_count: 50_000,
        clients_count: 5,
        consumer_groups_count: 2,
        hostname: "node-1".into(),
        os_name: "Linux".into(),
        os_version: "Debian 13".into(),
        kernel_version: "6.12.0".into(),
        iggy_server_version: "0.11.0".into(),
        iggy_server_semver: Some(11_000),
        cache_metrics: vec![
            TCacheMetric {
                stream_id: 1,
                topic_id: 2,
                partition_id: 0,
                hits: 1000,
                misses: 50,
                hit_ratio: 0.95,
            },
            TCacheMetric {
                stream_id: 2,
                topic_id: 3,
                partition_id: 1,
                hits: 0,
                misses: 100,
                hit_ratio: 0.0,
            },
        ],
        threads_count: 16,
        free_disk_space: 100 << 30,
        total_disk_space: 500 << 30,
    };
    (ours, theirs)
}

#[test]
fn get_stats_reply() {
    let (value, their) = stats();
    same(&their, &ours(|o| value.encode(o)));
    assert_eq!(ServerStats::decode(&their.to_bytes()).unwrap(), value);
    // No semantic version travels as 0, both ways.
    let value = ServerStats {
        iggy_server_semver: None,
        cache_metrics: Vec::new(),
        ..value
    };
    let their = TStats {
        iggy_server_semver: None,
        cache_metrics: Vec::new(),
        ..their
    };
    same(&their, &ours(|o| value.encode(o)));
    assert_eq!(ServerStats::decode(&their.to_bytes()).unwrap(), value);
}

fn client(client_id: u32, address: &str, groups: u32) -> (ClientInfo, TClient) {
    (
        ClientInfo {
            client_id,
            user_id: 0,
            transport: 1,
            address: address.into(),
            consumer_groups_count: groups,
        },
        TClient {
            client_id,
            user_id: 0,
            transport: 1,
            address: address.into(),
            consumer_groups_count: groups,
        },
    )
}

#[test]
fn get_me_and_get_client_replies_with_consumer_groups() {
    let (info, their_info) = client(17, "127.0.0.1:50123", 2);
    let details = ClientDetails {
        client: info,
        consumer_groups: vec![
            ConsumerGroupMembership {
                stream_id: 0,
                topic_id: 1,
                group_id: 2,
            },
            ConsumerGroupMembership {
                stream_id: 3,
                topic_id: 4,
                group_id: 5,
            },
        ],
    };
    let their = TClientDetails {
        client: their_info,
        consumer_groups: vec![
            TMembership {
                stream_id: 0,
                topic_id: 1,
                group_id: 2,
            },
            TMembership {
                stream_id: 3,
                topic_id: 4,
                group_id: 5,
            },
        ],
    };
    same(&their, &ours(|o| details.encode(o)));
    assert_eq!(ClientDetails::decode(&their.to_bytes()).unwrap(), details);
    assert_eq!(
        ClientDetails::decode_optional(&their.to_bytes()).unwrap(),
        Some(details)
    );

    let request = GetClientRequest { client_id: 17 };
    let their = TGetClient { client_id: 17 };
    same(&their, &ours(|o| request.encode(o)));
    assert_eq!(
        GetClientRequest::decode(&their.to_bytes()).unwrap(),
        request
    );
}

#[test]
fn get_clients_reply() {
    let (a, ta) = client(1, "127.0.0.1:5000", 0);
    let (b, tb) = client(2, "[::1]:6000", 3);
    let list = vec![a, b];
    let their = TClients {
        clients: vec![ta, tb],
    };
    same(&their, &ours(|o| ClientInfo::encode_list(&list, o)));
    assert_eq!(ClientInfo::decode_list(&their.to_bytes()).unwrap(), list);
}
