//! What the administration reads answer, as the SDK's types: streams, topics and their
//! partitions, consumer groups, consumer offsets and the cluster's metadata.
//!
//! Lists come sorted by id (topics, partitions, group members), as the SDK sorts them.
//! iggy-route reads the options blocks of streams and topics without keeping them, so
//! every `options` map here is empty.

use iggy_common::{
    ClusterMetadata as SdkClusterMetadata, ClusterNode as SdkClusterNode, ClusterNodeRole,
    ClusterNodeStatus, CompressionAlgorithm, ConsumerGroup as SdkConsumerGroup,
    ConsumerGroupDetails as SdkConsumerGroupDetails, ConsumerGroupMember as SdkConsumerGroupMember,
    ConsumerOffsetInfo as SdkConsumerOffsetInfo, IggyByteSize, IggyError, IggyExpiry,
    IggyTimestamp, MaxTopicSize, Partition, ResourceOptions, Stream,
    StreamDetails as SdkStreamDetails, Topic, TopicDetails as SdkTopicDetails, TransportEndpoints,
};
use iggy_route_core::wire::{
    ClusterMetadata, ClusterNode, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerOffsetInfo,
    PartitionInfo, StreamDetails, StreamSummary, TopicDetails, TopicSummary,
};

use super::convert_messages::len_u32;

pub(super) fn sdk_stream(stream: StreamSummary) -> Stream {
    Stream {
        id: stream.id,
        created_at: IggyTimestamp::from(stream.created_at),
        name: stream.name.as_str().to_owned(),
        size: IggyByteSize::from(stream.size_bytes),
        messages_count: stream.messages_count,
        topics_count: stream.topics_count,
        options: ResourceOptions::new(),
    }
}

pub(super) fn sdk_streams(streams: Vec<StreamSummary>) -> Vec<Stream> {
    let mut streams: Vec<Stream> = streams.into_iter().map(sdk_stream).collect();
    streams.sort_by_key(|stream| stream.id);
    streams
}

pub(super) fn sdk_stream_details(stream: StreamDetails) -> Result<SdkStreamDetails, IggyError> {
    let topics = sdk_topics(stream.topics)?;
    Ok(SdkStreamDetails {
        id: stream.id,
        created_at: IggyTimestamp::from(stream.created_at),
        name: stream.name.as_str().to_owned(),
        size: IggyByteSize::from(stream.size_bytes),
        messages_count: stream.messages_count,
        topics_count: stream.topics_count,
        topics,
        options: ResourceOptions::new(),
    })
}

pub(super) fn sdk_topic(topic: TopicSummary) -> Result<Topic, IggyError> {
    Ok(Topic {
        id: topic.id,
        created_at: IggyTimestamp::from(topic.created_at),
        name: topic.name.as_str().to_owned(),
        size: IggyByteSize::from(topic.size_bytes),
        message_expiry: message_expiry(topic.message_expiry),
        compression_algorithm: CompressionAlgorithm::from_code(topic.compression)?,
        max_topic_size: MaxTopicSize::from(topic.max_topic_size),
        messages_count: topic.messages_count,
        partitions_count: topic.partitions_count,
        options: ResourceOptions::new(),
    })
}

pub(super) fn sdk_topics(topics: Vec<TopicSummary>) -> Result<Vec<Topic>, IggyError> {
    let mut topics = topics
        .into_iter()
        .map(sdk_topic)
        .collect::<Result<Vec<_>, _>>()?;
    topics.sort_by_key(|topic| topic.id);
    Ok(topics)
}

pub(super) fn sdk_topic_details(details: TopicDetails) -> Result<SdkTopicDetails, IggyError> {
    let topic = sdk_topic(details.summary)?;
    let mut partitions: Vec<Partition> =
        details.partitions.into_iter().map(sdk_partition).collect();
    partitions.sort_by_key(|partition| partition.id);
    Ok(SdkTopicDetails {
        id: topic.id,
        created_at: topic.created_at,
        name: topic.name,
        size: topic.size,
        message_expiry: topic.message_expiry,
        compression_algorithm: topic.compression_algorithm,
        max_topic_size: topic.max_topic_size,
        messages_count: topic.messages_count,
        partitions_count: topic.partitions_count,
        partitions,
        options: topic.options,
    })
}

/// A topic header's expiry: 0 reads as never, as the SDK reads it.
fn message_expiry(micros: u64) -> IggyExpiry {
    match micros {
        0 => IggyExpiry::NeverExpire,
        micros => IggyExpiry::from(micros),
    }
}

fn sdk_partition(partition: PartitionInfo) -> Partition {
    Partition {
        id: partition.id,
        created_at: IggyTimestamp::from(partition.created_at),
        segments_count: partition.segments_count,
        current_offset: partition.current_offset,
        size: IggyByteSize::from(partition.size_bytes),
        messages_count: partition.messages_count,
    }
}

pub(super) fn sdk_consumer_group(group: ConsumerGroupInfo) -> SdkConsumerGroup {
    SdkConsumerGroup {
        id: group.id,
        name: group.name.as_str().to_owned(),
        partitions_count: group.partitions_count,
        members_count: group.members_count,
    }
}

pub(super) fn sdk_consumer_groups(groups: Vec<ConsumerGroupInfo>) -> Vec<SdkConsumerGroup> {
    let mut groups: Vec<SdkConsumerGroup> = groups.into_iter().map(sdk_consumer_group).collect();
    groups.sort_by_key(|group| group.id);
    groups
}

pub(super) fn sdk_consumer_group_details(details: ConsumerGroupDetails) -> SdkConsumerGroupDetails {
    let group = sdk_consumer_group(details.info);
    let mut members: Vec<SdkConsumerGroupMember> = details
        .members
        .into_iter()
        .map(|member| SdkConsumerGroupMember {
            id: member.id,
            partitions_count: len_u32(member.partitions.len()),
            partitions: member.partitions,
        })
        .collect();
    members.sort_by_key(|member| member.id);
    SdkConsumerGroupDetails {
        id: group.id,
        name: group.name,
        partitions_count: group.partitions_count,
        members_count: group.members_count,
        members,
    }
}

pub(super) fn sdk_consumer_offset(offset: ConsumerOffsetInfo) -> SdkConsumerOffsetInfo {
    SdkConsumerOffsetInfo {
        partition_id: offset.partition_id,
        current_offset: offset.current_offset,
        stored_offset: offset.stored_offset,
    }
}

pub(super) fn sdk_cluster_metadata(
    metadata: ClusterMetadata,
) -> Result<SdkClusterMetadata, IggyError> {
    let nodes = metadata
        .nodes
        .into_iter()
        .map(sdk_cluster_node)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SdkClusterMetadata {
        name: metadata.name,
        nodes,
    })
}

fn sdk_cluster_node(node: ClusterNode) -> Result<SdkClusterNode, IggyError> {
    Ok(SdkClusterNode {
        name: node.name,
        ip: node.ip,
        endpoints: TransportEndpoints::new(
            node.tcp_port,
            node.quic_port,
            node.http_port,
            node.websocket_port,
        ),
        // The same codes on both sides: the role and status iggy-route decoded are valid.
        role: ClusterNodeRole::try_from(node.role as u8)?,
        status: ClusterNodeStatus::try_from(node.status as u8)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use iggy_route_core::wire::{Name, NodeRole, NodeStatus};

    use super::*;

    fn summary(id: u32, expiry: u64) -> TopicSummary {
        TopicSummary {
            id,
            created_at: 7,
            partitions_count: 2,
            message_expiry: expiry,
            compression: 2,
            max_topic_size: u64::MAX,
            size_bytes: 10,
            messages_count: 3,
            name: Name::new(format!("t{id}")).unwrap(),
        }
    }

    #[test]
    fn topics_read_as_the_sdk_reads_them_sorted_by_id() {
        let topics = sdk_topics(vec![summary(2, 0), summary(1, 60_000_000)]).unwrap();
        assert_eq!(topics.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(topics[1].message_expiry, IggyExpiry::NeverExpire);
        assert_eq!(topics[0].message_expiry, IggyExpiry::from(60_000_000));
        assert_eq!(topics[0].compression_algorithm, CompressionAlgorithm::Gzip);
        assert_eq!(topics[0].max_topic_size, MaxTopicSize::Unlimited);
        let details = TopicDetails {
            summary: summary(4, 0),
            partitions: vec![
                PartitionInfo {
                    id: 1,
                    ..PartitionInfo::default()
                },
                PartitionInfo {
                    id: 0,
                    current_offset: 9,
                    ..PartitionInfo::default()
                },
            ],
        };
        let details = sdk_topic_details(details).unwrap();
        assert_eq!(details.partitions[0].current_offset, 9);
        assert_eq!(details.name, "t4");
    }

    #[test]
    fn cluster_nodes_keep_their_roles_statuses_and_ports() {
        let metadata = ClusterMetadata {
            name: "c".into(),
            nodes: vec![ClusterNode {
                name: "n0".into(),
                ip: "127.0.0.1".into(),
                tcp_port: 8090,
                quic_port: 0,
                http_port: 0,
                websocket_port: 0,
                role: NodeRole::Leader,
                status: NodeStatus::Healthy,
            }],
        };
        let metadata = sdk_cluster_metadata(metadata).unwrap();
        let node = &metadata.nodes[0];
        assert_eq!(node.endpoints.tcp, 8090);
        assert_eq!(node.role, ClusterNodeRole::Leader);
        assert_eq!(node.status, ClusterNodeStatus::Healthy);
    }
}
