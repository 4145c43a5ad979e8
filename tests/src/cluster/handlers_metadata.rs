//! The metadata family: `GET_CLUSTER_METADATA` (12), `GET_STREAM` (200), `GET_TOPIC` (300),
//! and the metadata writes `CREATE_STREAM` (202), `CREATE_TOPIC` (302) and
//! `CREATE_PARTITIONS` (402).
//!
//! Metadata writes are admitted only by the metadata leader; any other node answers with a
//! result-framed `TransientNotAccepted` `[1][0][58]` (protocol §8, "Login on backups"). Each
//! admitted write is one committed op, and the reply carries the new commit so the SDK's
//! metadata watermark moves (§5.8).

use bytes::BytesMut;
use iggy_route_core::wire::{
    ClusterMetadata, ClusterNode, CreatePartitionsRequest, CreateStreamRequest, CreateTopicRequest,
    ErrorCode, GetStreamRequest, GetTopicRequest, Identifier, Name, NodeRole, NodeStatus,
    PartitionInfo, StreamDetails, TopicDetails, TopicSummary,
};

use super::catalog::{CatalogError, Lookup, Stream, Topic};
use super::handlers_admin::MAX_PARTITIONS_PER_REQUEST;
use super::handlers_admin::codes::TOO_MANY_PARTITIONS;
use super::outcome::Outcome;
use super::partition::Partition;
use super::state::{ClusterState, NodeId};

/// A wire identifier as a catalog lookup.
pub(super) fn lookup(identifier: &Identifier) -> Lookup<'_> {
    match identifier {
        Identifier::Numeric(id) => Lookup::Id(*id),
        Identifier::Named(name) => Lookup::Name(name.as_str()),
    }
}

/// The `IggyError` code of a catalog failure.
pub(super) fn error_code(error: CatalogError) -> ErrorCode {
    ErrorCode::from_u32(error.code())
}

/// The roster entry of `node`, as both `GET_CLUSTER_METADATA` and the routing replies
/// describe it.
pub(super) fn roster_node(state: &ClusterState, node: NodeId, role: NodeRole) -> ClusterNode {
    let (name, addr) = match state.nodes().get(node) {
        Some(info) => (info.name.clone(), info.addr),
        None => (
            format!("node-{node}"),
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ),
    };
    ClusterNode {
        name,
        ip: addr.ip().to_string(),
        tcp_port: addr.port(),
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role,
        // §3.5: the real roster reports every node Healthy, stopped or not.
        status: NodeStatus::Healthy,
    }
}

/// `GET_CLUSTER_METADATA`: every node, exactly one of them `Leader`.
pub(super) fn cluster_metadata(state: &ClusterState) -> Outcome {
    let leader = state.metadata_leader();
    let nodes = (0..state.node_count())
        .map(|node| {
            let role = if node == leader {
                NodeRole::Leader
            } else {
                NodeRole::Follower
            };
            roster_node(state, node, role)
        })
        .collect();
    let metadata = ClusterMetadata {
        name: state.name().to_owned(),
        nodes,
    };
    let mut body = BytesMut::with_capacity(metadata.encoded_len());
    metadata.encode(&mut body);
    Outcome::ok(body.freeze(), state.commit())
}

/// `GET_STREAM` on `node`: the stream, or an empty body when it does not exist (§9.2). A
/// follower answers from its lagging copy ([`super::state::Lag`]).
pub(super) fn get_stream(node: NodeId, state: &ClusterState, body: &[u8]) -> Outcome {
    let commit = state.commit_seen_by(node);
    let Ok(request) = GetStreamRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    let horizon = state.metadata_horizon(node);
    match state
        .catalog
        .stream(lookup(&request.stream))
        .filter(|stream| known_by(horizon, stream.created_at))
    {
        Some(stream) => Outcome::ok(encode_stream(state, Some(node), stream), commit),
        None => Outcome::empty(commit),
    }
}

/// `GET_TOPIC` on `node`: the topic, or an empty body when it does not exist (§9.2). A
/// follower answers from its lagging copy: a topic created since reads as absent, and
/// partitions added since are missing.
pub(super) fn get_topic(node: NodeId, state: &ClusterState, body: &[u8]) -> Outcome {
    let commit = state.commit_seen_by(node);
    let Ok(request) = GetTopicRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidFormat, commit);
    };
    let horizon = state.metadata_horizon(node);
    let stream = lookup(&request.stream);
    let stream_known = state
        .catalog
        .stream(stream)
        .is_some_and(|found| known_by(horizon, found.created_at));
    match state.catalog.topic(stream, lookup(&request.topic)) {
        Ok(topic) if stream_known && known_by(horizon, topic.created_at) => {
            Outcome::ok(encode_topic(state, Some(node), topic), commit)
        }
        Ok(_) | Err(_) => Outcome::empty(commit),
    }
}

/// Whether a copy complete up to `horizon` (µs; `None`: complete) holds what was created at
/// `created_at`.
pub(super) fn known_by(horizon: Option<u64>, created_at: u64) -> bool {
    horizon.is_none_or(|horizon| created_at <= horizon)
}

/// The metadata writes the model implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetadataCreate {
    Stream,
    Topic,
    Partitions,
}

/// A metadata write received by `node`.
pub(super) fn write(
    node: NodeId,
    state: &mut ClusterState,
    operation: MetadataCreate,
    body: &[u8],
) -> Outcome {
    if let Err(code) = admit_partitions_count(operation, body) {
        return Outcome::status(code, state.commit());
    }
    if node != state.metadata_leader() {
        return Outcome::result_rejected(ErrorCode::TransientNotAccepted, state.commit());
    }
    let applied = match operation {
        MetadataCreate::Stream => create_stream(state, body),
        MetadataCreate::Topic => create_topic(state, body),
        MetadataCreate::Partitions => create_partitions(state, body),
    };
    match applied {
        Ok(payload) => {
            let commit = state.bump_commit();
            Outcome::result_ok(&payload, commit)
        }
        // A body that does not decode is refused before it reaches the log, typed, on the
        // status channel: `InvalidCommand`, as the real server answered a `CREATE_STREAM`
        // and an `UPDATE_STREAM` of one byte (its dispatch decodes each such body first).
        Err(ErrorCode::InvalidFormat) => Outcome::status(ErrorCode::InvalidCommand, state.commit()),
        Err(code) => Outcome::result_rejected(code, state.commit()),
    }
}

/// The partitions count of one request, checked by any node before consensus as the
/// server does (`TooManyPartitions` on the status channel): a topic may be created with
/// 0..=1,000 partitions, and 1..=1,000 may be added at once. What the topic as a whole may
/// hold is checked after consensus (`InvalidPartitionsCount`).
fn admit_partitions_count(operation: MetadataCreate, body: &[u8]) -> Result<(), ErrorCode> {
    let (count, least) = match operation {
        MetadataCreate::Stream => return Ok(()),
        MetadataCreate::Topic => match CreateTopicRequest::decode(body) {
            Ok(request) => (request.partitions_count, 0),
            Err(_) => return Ok(()),
        },
        MetadataCreate::Partitions => match CreatePartitionsRequest::decode(body) {
            Ok(request) => (request.partitions_count, 1),
            Err(_) => return Ok(()),
        },
    };
    if (least..=MAX_PARTITIONS_PER_REQUEST).contains(&count) {
        Ok(())
    } else {
        Err(ErrorCode::from_u32(TOO_MANY_PARTITIONS))
    }
}

fn create_stream(state: &mut ClusterState, body: &[u8]) -> Result<BytesMut, ErrorCode> {
    let request = CreateStreamRequest::decode(body).map_err(|_| ErrorCode::InvalidFormat)?;
    let now = state.next_timestamp();
    let id = state
        .catalog
        .create_stream(request.name.as_str(), now)
        .map_err(error_code)?;
    let stream = state
        .catalog
        .stream(Lookup::Id(id))
        .ok_or(ErrorCode::StreamIdNotFound)?;
    Ok(encode_stream(state, None, stream))
}

fn create_topic(state: &mut ClusterState, body: &[u8]) -> Result<BytesMut, ErrorCode> {
    let request = CreateTopicRequest::decode(body).map_err(|_| ErrorCode::InvalidFormat)?;
    let now = state.next_timestamp();
    // §13.6: a new partition group starts in the metadata view of its creation, so its
    // primary is the metadata leader at that moment.
    let leader = state.metadata_leader();
    let stream = lookup(&request.stream);
    let id = state
        .catalog
        .create_topic(
            stream,
            request.name.as_str(),
            request.partitions_count,
            now,
            leader,
        )
        .map_err(error_code)?;
    let topic = state
        .catalog
        .topic(stream, Lookup::Id(id))
        .map_err(error_code)?;
    Ok(encode_topic(state, None, topic))
}

fn create_partitions(state: &mut ClusterState, body: &[u8]) -> Result<BytesMut, ErrorCode> {
    let request = CreatePartitionsRequest::decode(body).map_err(|_| ErrorCode::InvalidFormat)?;
    let now = state.next_timestamp();
    let leader = state.metadata_leader();
    state
        .catalog
        .create_partitions(
            lookup(&request.stream),
            lookup(&request.topic),
            request.partitions_count,
            now,
            leader,
        )
        .map_err(error_code)?;
    Ok(BytesMut::new())
}

pub(super) fn name_of(text: &str) -> Name {
    // Catalog names come from decoded `Name`s or from `create_stream_and_topic`, whose
    // names a test chooses; an invalid one there is a bug in the test.
    Name::new(text).expect("catalog names are 1..=255 bytes of UTF-8")
}

/// The partitions of `topic` a copy complete up to `horizon` holds: partitions are only
/// ever added, so they are a prefix.
fn known_partitions(topic: &Topic, horizon: Option<u64>) -> &[Partition] {
    let known = topic
        .partitions
        .iter()
        .take_while(|partition| known_by(horizon, partition.created_at))
        .count();
    &topic.partitions[..known]
}

/// What `node` reports of a partition: a backup counts only the messages that reached it,
/// and every node counts from zero again as soon as a purge is acknowledged, before its
/// wipe lands (the server zeroes these shared counters in the purge's commit).
fn partition_info(state: &ClusterState, node: NodeId, partition: &Partition) -> PartitionInfo {
    let horizon = state.messages_horizon(node, partition.primary);
    PartitionInfo {
        id: partition.id,
        created_at: partition.created_at,
        segments_count: 1,
        current_offset: partition.reported_current_offset(horizon),
        size_bytes: partition.size_bytes(),
        messages_count: partition.messages_count(horizon),
    }
}

/// What `node` reports of a topic (`None`: the leader's full view, for write replies).
pub(super) fn topic_summary(
    state: &ClusterState,
    node: Option<NodeId>,
    topic: &Topic,
) -> TopicSummary {
    let horizon = node.and_then(|node| state.metadata_horizon(node));
    let partitions = known_partitions(topic, horizon);
    let messages_count = match node {
        Some(node) => partitions
            .iter()
            .map(|partition| partition_info(state, node, partition).messages_count)
            .sum(),
        None => topic.messages_count(),
    };
    TopicSummary {
        id: topic.id,
        created_at: topic.created_at,
        partitions_count: partitions.len() as u32,
        message_expiry: topic.message_expiry,
        compression: topic.compression,
        max_topic_size: topic.max_topic_size,
        size_bytes: topic.size_bytes(),
        messages_count,
        name: name_of(&topic.name),
    }
}

fn encode_stream(state: &ClusterState, node: Option<NodeId>, stream: &Stream) -> BytesMut {
    let horizon = node.and_then(|node| state.metadata_horizon(node));
    let topics: Vec<TopicSummary> = stream
        .topics
        .values()
        .filter(|topic| known_by(horizon, topic.created_at))
        .map(|topic| topic_summary(state, node, topic))
        .collect();
    let details = StreamDetails {
        id: stream.id,
        created_at: stream.created_at,
        topics_count: topics.len() as u32,
        size_bytes: stream.topics.values().map(Topic::size_bytes).sum(),
        messages_count: topics.iter().map(|topic| topic.messages_count).sum(),
        name: name_of(&stream.name),
        topics,
    };
    let mut out = BytesMut::new();
    details.encode(&mut out);
    out
}

fn encode_topic(state: &ClusterState, node: Option<NodeId>, topic: &Topic) -> BytesMut {
    let horizon = node.and_then(|node| state.metadata_horizon(node));
    let partitions = known_partitions(topic, horizon)
        .iter()
        .map(|partition| match node {
            Some(node) => partition_info(state, node, partition),
            None => partition_info(state, partition.primary, partition),
        })
        .collect();
    let details = TopicDetails {
        summary: topic_summary(state, node, topic),
        partitions,
    };
    let mut out = BytesMut::new();
    details.encode(&mut out);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testkit::{Client, cluster, encode};
    use super::*;
    use iggy_route_core::wire::{Operation, code};

    fn create_stream_body(name: &str) -> bytes::Bytes {
        let request = CreateStreamRequest {
            name: Name::new(name).unwrap(),
        };
        encode(|out| request.encode(out))
    }

    #[test]
    fn the_roster_names_every_node_with_one_leader() {
        let mut state = cluster(3);
        state.set_node_addr(1, "127.0.0.1:4001".parse().unwrap());
        state.set_metadata_leader(1);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let body = client
            .read(&mut state, code::GET_CLUSTER_METADATA, bytes::Bytes::new())
            .body();
        let metadata = ClusterMetadata::decode(&body).unwrap();
        assert_eq!(metadata.nodes.len(), 3);
        let leader = metadata.leader().unwrap();
        assert_eq!((leader.ip.as_str(), leader.tcp_port), ("127.0.0.1", 4001));
        let leaders = metadata
            .nodes
            .iter()
            .filter(|n| n.role == NodeRole::Leader)
            .count();
        assert_eq!(leaders, 1);
    }

    #[test]
    fn metadata_writes_are_admitted_only_on_the_leader() {
        let mut state = cluster(2);
        let mut follower = Client::signed_in(&mut state, 1, 1);
        let refused = follower.write(&mut state, Operation::CreateStream, create_stream_body("s"));
        assert_eq!(refused.result_code(), 58);
        assert_eq!(state.stats(1).refusals, 1);
        assert!(state.catalog.stream(Lookup::Name("s")).is_none());

        let mut leader = Client::signed_in(&mut state, 0, 2);
        let before = state.commit();
        let created = leader.write(&mut state, Operation::CreateStream, create_stream_body("s"));
        assert_eq!(created.result_code(), 0);
        assert_eq!(created.header().commit, before + 1);
        let details = StreamDetails::decode(&created.result_payload()).unwrap();
        assert_eq!(
            (details.id, details.name.as_str()),
            (0, "s"),
            "0-based, as on the real cluster"
        );
        let again = leader.write(&mut state, Operation::CreateStream, create_stream_body("s"));
        assert_eq!(
            again.result_code(),
            ErrorCode::StreamNameAlreadyExists.as_u32()
        );
    }

    /// As on the real cluster: a count no single request may carry is refused on the
    /// status channel by any node, before consensus, and changes nothing.
    #[test]
    fn partition_counts_out_of_range_are_refused_before_consensus() {
        let mut state = cluster(3);
        let (stream, topic) = super::super::testkit::seed_topic(&mut state, 2);
        let mut client = Client::signed_in(&mut state, 1, 1);
        for count in [0, 1_001] {
            let request = CreatePartitionsRequest {
                stream: Identifier::Numeric(stream),
                topic: Identifier::Numeric(topic),
                partitions_count: count,
            };
            let body = encode(|o| request.encode(o));
            let answer = client.write(&mut state, Operation::CreatePartitions, body);
            assert_eq!(
                answer.status(),
                2015,
                "{count} partitions: TooManyPartitions"
            );
        }
        let too_many = CreateTopicRequest {
            stream: Identifier::Numeric(stream),
            partitions_count: 1_001,
            name: name_of("too-many"),
            options: bytes::Bytes::new(),
        };
        let body = encode(|o| too_many.encode(o));
        let answer = client.write(&mut state, Operation::CreateTopic, body);
        assert_eq!(answer.status(), 2015, "TooManyPartitions");
        let topic = state
            .catalog
            .topic(Lookup::Id(stream), Lookup::Id(topic))
            .unwrap();
        assert_eq!(topic.partitions.len(), 2);
        assert!(
            state
                .catalog
                .topic(Lookup::Id(stream), Lookup::Name("too-many"))
                .is_err()
        );
    }

    #[test]
    fn new_partitions_start_on_the_current_metadata_leader() {
        let mut state = cluster(3);
        let (stream, topic) = super::super::testkit::seed_topic(&mut state, 1);
        state.set_metadata_leader(2);
        let mut client = Client::signed_in(&mut state, 2, 1);
        let request = CreatePartitionsRequest {
            stream: Identifier::Numeric(stream),
            topic: Identifier::Numeric(topic),
            partitions_count: 1,
        };
        let answer = client.write(
            &mut state,
            Operation::CreatePartitions,
            encode(|o| request.encode(o)),
        );
        assert_eq!(answer.result_code(), 0);
        let topic = state
            .catalog
            .topic(Lookup::Id(stream), Lookup::Id(topic))
            .unwrap();
        let primaries: Vec<NodeId> = topic.partitions.iter().map(|p| p.primary).collect();
        assert_eq!(primaries, vec![0, 2]);
    }

    #[test]
    fn get_stream_and_topic_answer_an_empty_body_when_missing() {
        let mut state = cluster(1);
        let (stream, topic) = super::super::testkit::seed_topic(&mut state, 2);
        let mut client = Client::signed_in(&mut state, 0, 1);
        let missing = GetStreamRequest {
            stream: Identifier::Numeric(9),
        };
        let body = client
            .read(&mut state, code::GET_STREAM, encode(|o| missing.encode(o)))
            .body();
        assert!(body.is_empty());
        let found = GetTopicRequest {
            stream: Identifier::Numeric(stream),
            topic: Identifier::Numeric(topic),
        };
        let body = client
            .read(&mut state, code::GET_TOPIC, encode(|o| found.encode(o)))
            .body();
        let details = TopicDetails::decode(&body).unwrap();
        assert_eq!(details.partitions.len(), 2);
        assert_eq!(details.summary.partitions_count, 2);
    }
}
