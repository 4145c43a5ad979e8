//! Users, permissions, personal access tokens, the server's statistics and its clients,
//! between the SDK's types and iggy-route's. Lists come sorted as the SDK sorts them (users
//! and clients by id, tokens by name); `options` maps are empty (see `convert_admin`).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use iggy_common::{
    CacheMetrics, CacheMetricsKey, ClientInfo as SdkClientInfo, ClientInfoDetails,
    ConsumerGroupInfo as SdkGroupMembership, GlobalPermissions as SdkGlobalPermissions,
    IggyByteSize, IggyDuration, IggyError, IggyTimestamp, Permissions as SdkPermissions,
    PersonalAccessTokenExpiry, PersonalAccessTokenInfo as SdkTokenInfo, ResourceOptions, Stats,
    StreamPermissions as SdkStreamPermissions, TopicPermissions as SdkTopicPermissions,
    UserInfo as SdkUserInfo, UserInfoDetails, UserStatus as SdkUserStatus,
};
use iggy_route_core::wire::{
    ClientDetails, ClientInfo, GlobalPermissions, Permissions, PersonalAccessTokenInfo,
    ServerStats, StreamPermissions, TokenExpiry, TopicPermissions, UserDetails, UserInfo,
    UserStatus,
};

/// The user id a client that has not signed in reports.
const NO_USER_ID: u32 = u32::MAX;

pub(super) fn route_user_status(status: SdkUserStatus) -> UserStatus {
    match status {
        SdkUserStatus::Active => UserStatus::Active,
        SdkUserStatus::Inactive => UserStatus::Inactive,
    }
}

fn sdk_user_status(status: UserStatus) -> SdkUserStatus {
    match status {
        UserStatus::Active => SdkUserStatus::Active,
        UserStatus::Inactive => SdkUserStatus::Inactive,
    }
}

fn sdk_user(user: UserInfo) -> SdkUserInfo {
    SdkUserInfo {
        id: user.id,
        created_at: IggyTimestamp::from(user.created_at),
        status: sdk_user_status(user.status),
        username: user.username.as_str().to_owned(),
        options: ResourceOptions::new(),
    }
}

pub(super) fn sdk_users(users: Vec<UserInfo>) -> Vec<SdkUserInfo> {
    let mut users: Vec<SdkUserInfo> = users.into_iter().map(sdk_user).collect();
    users.sort_by_key(|user| user.id);
    users
}

pub(super) fn sdk_user_details(user: UserDetails) -> UserInfoDetails {
    UserInfoDetails {
        id: user.id,
        created_at: IggyTimestamp::from(user.created_at),
        status: sdk_user_status(user.status),
        username: user.username.as_str().to_owned(),
        permissions: user.permissions.map(sdk_permissions),
        options: ResourceOptions::new(),
    }
}

/// The SDK's permissions as iggy-route sends them: streams and topics in id order (the
/// SDK's maps are sorted). An id past `u32::MAX` cannot be sent: `InvalidStreamId` or
/// `InvalidTopicId`.
pub(super) fn route_permissions(permissions: &SdkPermissions) -> Result<Permissions, IggyError> {
    let global = &permissions.global;
    let mut streams = Vec::new();
    for (&stream_id, stream) in permissions.streams.iter().flatten() {
        let mut topics = Vec::new();
        for (&topic_id, topic) in stream.topics.iter().flatten() {
            topics.push(TopicPermissions {
                topic_id: u32::try_from(topic_id).map_err(|_| IggyError::InvalidTopicId)?,
                manage_topic: topic.manage_topic,
                read_topic: topic.read_topic,
                poll_messages: topic.poll_messages,
                send_messages: topic.send_messages,
            });
        }
        streams.push(StreamPermissions {
            stream_id: u32::try_from(stream_id).map_err(|_| IggyError::InvalidStreamId)?,
            manage_stream: stream.manage_stream,
            read_stream: stream.read_stream,
            manage_topics: stream.manage_topics,
            read_topics: stream.read_topics,
            poll_messages: stream.poll_messages,
            send_messages: stream.send_messages,
            topics,
        });
    }
    Ok(Permissions {
        global: GlobalPermissions {
            manage_servers: global.manage_servers,
            read_servers: global.read_servers,
            manage_users: global.manage_users,
            read_users: global.read_users,
            manage_streams: global.manage_streams,
            read_streams: global.read_streams,
            manage_topics: global.manage_topics,
            read_topics: global.read_topics,
            poll_messages: global.poll_messages,
            send_messages: global.send_messages,
        },
        streams,
    })
}

/// iggy-route's permissions as the SDK's: no streams (or no topics) reads as `None`, as the
/// SDK reads it.
pub(super) fn sdk_permissions(permissions: Permissions) -> SdkPermissions {
    let global = permissions.global;
    let streams: BTreeMap<usize, SdkStreamPermissions> = permissions
        .streams
        .into_iter()
        .map(|stream| {
            let topics: BTreeMap<usize, SdkTopicPermissions> = stream
                .topics
                .into_iter()
                .map(|topic| {
                    let permissions = SdkTopicPermissions {
                        manage_topic: topic.manage_topic,
                        read_topic: topic.read_topic,
                        poll_messages: topic.poll_messages,
                        send_messages: topic.send_messages,
                    };
                    (as_usize(topic.topic_id), permissions)
                })
                .collect();
            let permissions = SdkStreamPermissions {
                manage_stream: stream.manage_stream,
                read_stream: stream.read_stream,
                manage_topics: stream.manage_topics,
                read_topics: stream.read_topics,
                poll_messages: stream.poll_messages,
                send_messages: stream.send_messages,
                topics: (!topics.is_empty()).then_some(topics),
            };
            (as_usize(stream.stream_id), permissions)
        })
        .collect();
    SdkPermissions {
        global: SdkGlobalPermissions {
            manage_servers: global.manage_servers,
            read_servers: global.read_servers,
            manage_users: global.manage_users,
            read_users: global.read_users,
            manage_streams: global.manage_streams,
            read_streams: global.read_streams,
            manage_topics: global.manage_topics,
            read_topics: global.read_topics,
            poll_messages: global.poll_messages,
            send_messages: global.send_messages,
        },
        streams: (!streams.is_empty()).then_some(streams),
    }
}

fn as_usize(id: u32) -> usize {
    usize::try_from(id).unwrap_or(usize::MAX)
}

/// The SDK's token expiry by its wire value: 0 the server's default, `u64::MAX` never,
/// anything else that many µs.
pub(super) fn route_token_expiry(expiry: PersonalAccessTokenExpiry) -> TokenExpiry {
    match u64::from(expiry) {
        0 => TokenExpiry::ServerDefault,
        u64::MAX => TokenExpiry::Never,
        micros => TokenExpiry::After(Duration::from_micros(micros)),
    }
}

pub(super) fn sdk_tokens(tokens: Vec<PersonalAccessTokenInfo>) -> Vec<SdkTokenInfo> {
    let mut tokens: Vec<SdkTokenInfo> = tokens
        .into_iter()
        .map(|token| SdkTokenInfo {
            name: token.name.as_str().to_owned(),
            expiry_at: (token.expiry_at != 0).then(|| IggyTimestamp::from(token.expiry_at)),
        })
        .collect();
    tokens.sort_by(|a, b| a.name.cmp(&b.name));
    tokens
}

pub(super) fn sdk_stats(stats: ServerStats) -> Stats {
    let cache_metrics: HashMap<CacheMetricsKey, CacheMetrics> = stats
        .cache_metrics
        .into_iter()
        .map(|metric| {
            let key = CacheMetricsKey {
                stream_id: metric.stream_id,
                topic_id: metric.topic_id,
                partition_id: metric.partition_id,
            };
            let value = CacheMetrics {
                hits: metric.hits,
                misses: metric.misses,
                hit_ratio: metric.hit_ratio,
            };
            (key, value)
        })
        .collect();
    Stats {
        process_id: stats.process_id,
        cpu_usage: stats.cpu_usage,
        total_cpu_usage: stats.total_cpu_usage,
        memory_usage: IggyByteSize::from(stats.memory_usage),
        total_memory: IggyByteSize::from(stats.total_memory),
        available_memory: IggyByteSize::from(stats.available_memory),
        run_time: IggyDuration::from(stats.run_time),
        start_time: IggyTimestamp::from(stats.start_time),
        read_bytes: IggyByteSize::from(stats.read_bytes),
        written_bytes: IggyByteSize::from(stats.written_bytes),
        messages_size_bytes: IggyByteSize::from(stats.messages_size_bytes),
        streams_count: stats.streams_count,
        topics_count: stats.topics_count,
        partitions_count: stats.partitions_count,
        segments_count: stats.segments_count,
        messages_count: stats.messages_count,
        clients_count: stats.clients_count,
        consumer_groups_count: stats.consumer_groups_count,
        hostname: stats.hostname,
        os_name: stats.os_name,
        os_version: stats.os_version,
        kernel_version: stats.kernel_version,
        iggy_server_version: stats.iggy_server_version,
        iggy_server_semver: stats.iggy_server_semver,
        cache_metrics,
        threads_count: stats.threads_count,
        free_disk_space: IggyByteSize::from(stats.free_disk_space),
        total_disk_space: IggyByteSize::from(stats.total_disk_space),
    }
}

pub(super) fn sdk_client_info(client: ClientInfo) -> SdkClientInfo {
    let transport = match client.transport {
        1 => "TCP",
        2 => "QUIC",
        3 => "HTTP",
        4 => "WebSocket",
        _ => "Unknown",
    };
    SdkClientInfo {
        client_id: client.client_id,
        user_id: (client.user_id != NO_USER_ID).then_some(client.user_id),
        address: client.address,
        transport: transport.to_owned(),
        consumer_groups_count: client.consumer_groups_count,
    }
}

pub(super) fn sdk_clients(clients: Vec<ClientInfo>) -> Vec<SdkClientInfo> {
    let mut clients: Vec<SdkClientInfo> = clients.into_iter().map(sdk_client_info).collect();
    clients.sort_by_key(|client| client.client_id);
    clients
}

pub(super) fn sdk_client_details(details: ClientDetails) -> ClientInfoDetails {
    let client = sdk_client_info(details.client);
    let mut consumer_groups: Vec<SdkGroupMembership> = details
        .consumer_groups
        .into_iter()
        .map(|group| SdkGroupMembership {
            stream_id: group.stream_id,
            topic_id: group.topic_id,
            group_id: group.group_id,
        })
        .collect();
    consumer_groups.sort_by_key(|group| group.group_id);
    ClientInfoDetails {
        client_id: client.client_id,
        user_id: client.user_id,
        address: client.address,
        transport: client.transport,
        consumer_groups_count: client.consumer_groups_count,
        consumer_groups,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use iggy_common::{IggyDuration as SdkDuration, IggyExpiry};

    use super::*;

    #[test]
    fn permissions_round_trip_and_empty_maps_read_as_none() {
        let topic = SdkTopicPermissions {
            send_messages: true,
            ..SdkTopicPermissions::default()
        };
        let stream = SdkStreamPermissions {
            read_topics: true,
            topics: Some(BTreeMap::from([(4, topic)])),
            ..SdkStreamPermissions::default()
        };
        let permissions = SdkPermissions {
            global: SdkGlobalPermissions {
                read_users: true,
                ..SdkGlobalPermissions::default()
            },
            streams: Some(BTreeMap::from([(3, stream)])),
        };
        let routed = route_permissions(&permissions).unwrap();
        assert_eq!(routed.streams[0].topics[0].topic_id, 4);
        assert_eq!(sdk_permissions(routed), permissions);
        assert_eq!(sdk_permissions(Permissions::default()).streams, None);
        let too_big = SdkPermissions {
            streams: Some(BTreeMap::from([(
                usize::MAX,
                SdkStreamPermissions::default(),
            )])),
            ..SdkPermissions::default()
        };
        assert!(matches!(
            route_permissions(&too_big),
            Err(IggyError::InvalidStreamId)
        ));
    }

    #[test]
    fn token_expiries_keep_their_wire_values() {
        assert_eq!(
            route_token_expiry(IggyExpiry::ServerDefault),
            TokenExpiry::ServerDefault
        );
        assert_eq!(
            route_token_expiry(IggyExpiry::NeverExpire),
            TokenExpiry::Never
        );
        let hour = IggyExpiry::ExpireDuration(SdkDuration::from(3_600_000_000));
        assert_eq!(
            route_token_expiry(hour),
            TokenExpiry::After(Duration::from_secs(3600))
        );
    }

    #[test]
    fn a_client_without_a_user_reads_as_none() {
        let client = ClientInfo {
            client_id: 3,
            user_id: NO_USER_ID,
            transport: 1,
            address: "127.0.0.1:1".into(),
            consumer_groups_count: 0,
        };
        let client = sdk_client_info(client);
        assert_eq!((client.user_id, client.transport.as_str()), (None, "TCP"));
    }
}
