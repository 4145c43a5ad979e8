//! Stream, topic, partition and segment administration: the reads `GET_STREAMS` (201) and
//! `GET_TOPICS` (301), the metadata writes `UPDATE_STREAM` (204), `DELETE_STREAM` (203),
//! `PURGE_STREAM` (205), `UPDATE_TOPIC` (304), `DELETE_TOPIC` (303), `PURGE_TOPIC` (305),
//! `DELETE_PARTITIONS` (403) and `DELETE_SEGMENTS` (503), and `FLUSH_UNSAVED_BUFFER`
//! (102), as the 0.11.0 server answers them:
//! - a request the server checks before consensus (a body that does not decode, an option
//!   key an update may not carry, a partition count of 0) is denied on the status channel
//!   by whichever node receives it (`handle_client_request` in
//!   `core/server/src/dispatch.rs`);
//! - only the metadata leader admits the write; any other node answers a result-framed
//!   `TransientNotAccepted`, as for the creates ([`super::handlers_metadata`]);
//! - a missing stream, topic or partition, or a name another stream or topic holds, is a
//!   result-framed rejection with the committed op's code (`core/metadata/src/stm/stream.rs`,
//!   `result.rs`); success is `[0,0,0,0]` and moves the metadata commit;
//! - `DELETE_SEGMENTS` is committed as the `TruncatePartition` it resolves to (the node
//!   echoes that operation, see `NodeConnection::handle`). The model's partitions report one
//!   open segment, so there is never a sealed one to delete: success changes nothing, as a
//!   real no-op truncate does;
//! - a purge is acknowledged before its partitions are wiped, as the server's is: the
//!   counters `GET_TOPIC`, `GET_STREAM` and `GET_STATS` report read zero at once, but each
//!   partition's messages and consumer offsets stay, and polls still return them, until its
//!   reconciler pass resets it to an empty log at offset 0
//!   ([`super::state::PURGE_RECONCILE`] later); the partitions are kept. Deleting
//!   partitions removes the highest ids;
//! - the server has no flush and refuses it with `FeatureUnavailable` on every node.
//!
//! Followers lag only for what was created (as [`super::state::Lag`] describes): a delete,
//! rename or purge is seen by every node at once (a purge's wipe lands on every node at
//! once too, a fixed delay after its ack).

use bytes::BytesMut;
use iggy_route_core::wire::{
    DeletePartitionsRequest, DeleteSegmentsRequest, DeleteStreamRequest, DeleteTopicRequest,
    ErrorCode, GetTopicsRequest, PurgeStreamRequest, PurgeTopicRequest, StreamSummary,
    TopicSummary, TopicUpdateOptions, UpdateStreamRequest, UpdateTopicRequest, option_entries,
};

use super::catalog::{Lookup, Stream, Topic};
use super::handlers_metadata::{error_code, known_by, lookup, name_of, topic_summary};
use super::outcome::Outcome;
use super::state::{ClusterState, NodeId};

/// `IggyError` codes the wire's `ErrorCode` does not name.
pub(super) mod codes {
    /// `InvalidTopicSize`: a size cap below one segment.
    pub(super) const INVALID_TOPIC_SIZE: u32 = 1019;
    /// `TooManyPartitions`: a partitions change of 0 or above the per-request cap.
    pub(crate) const TOO_MANY_PARTITIONS: u32 = 2015;
    /// `UnsupportedOptionKey`.
    pub(super) const UNSUPPORTED_OPTION_KEY: u32 = 4041;
}

/// Most partitions one request may add or remove (`MAX_PARTITIONS_PER_REQUEST`).
pub(super) const MAX_PARTITIONS_PER_REQUEST: u32 = 1000;

/// Every topic's segment size: the server's default, as the model sets no other.
const SEGMENT_SIZE: u64 = 1 << 30;

/// The administrative writes this module answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AdminWrite {
    UpdateStream,
    DeleteStream,
    PurgeStream,
    UpdateTopic,
    DeleteTopic,
    PurgeTopic,
    DeletePartitions,
    DeleteSegments,
}

/// A write that passed the checks made before consensus.
enum Change {
    UpdateStream(UpdateStreamRequest),
    DeleteStream(DeleteStreamRequest),
    PurgeStream(PurgeStreamRequest),
    UpdateTopic(UpdateTopicRequest, TopicUpdateOptions),
    DeleteTopic(DeleteTopicRequest),
    PurgeTopic(PurgeTopicRequest),
    DeletePartitions(DeletePartitionsRequest),
    DeleteSegments(DeleteSegmentsRequest),
}

/// An administrative write received by `node`.
pub(super) fn write(
    node: NodeId,
    state: &mut ClusterState,
    operation: AdminWrite,
    body: &[u8],
) -> Outcome {
    let commit = state.commit();
    let change = match admit(operation, body) {
        Ok(change) => change,
        Err(code) => return Outcome::status(code, commit),
    };
    if node != state.metadata_leader() {
        return Outcome::result_rejected(ErrorCode::TransientNotAccepted, commit);
    }
    match apply(state, change) {
        Ok(()) => Outcome::result_ok(&[], state.bump_commit()),
        Err(code) => Outcome::result_rejected(code, commit),
    }
}

/// The checks any node makes before consensus; their failures go on the status channel.
fn admit(operation: AdminWrite, body: &[u8]) -> Result<Change, ErrorCode> {
    let malformed = |_| ErrorCode::InvalidCommand;
    let change = match operation {
        AdminWrite::UpdateStream => {
            let request = UpdateStreamRequest::decode(body).map_err(malformed)?;
            // Streams have no updatable option: any key is refused by name.
            let entries = option_entries(&request.options).map_err(malformed)?;
            if !entries.is_empty() {
                return Err(ErrorCode::from_u32(codes::UNSUPPORTED_OPTION_KEY));
            }
            Change::UpdateStream(request)
        }
        AdminWrite::DeleteStream => {
            Change::DeleteStream(DeleteStreamRequest::decode(body).map_err(malformed)?)
        }
        AdminWrite::PurgeStream => {
            Change::PurgeStream(PurgeStreamRequest::decode(body).map_err(malformed)?)
        }
        AdminWrite::UpdateTopic => {
            let request = UpdateTopicRequest::decode(body).map_err(malformed)?;
            let options = TopicUpdateOptions::parse(&request.options)
                .map_err(|error| ErrorCode::from_u32(error.code()))?;
            // A cap below one segment can never be enforced (0 means "server default"
            // and leaves the cap alone; `u64::MAX` is unlimited).
            if options
                .max_topic_size
                .is_some_and(|size| size != 0 && size < SEGMENT_SIZE)
            {
                return Err(ErrorCode::from_u32(codes::INVALID_TOPIC_SIZE));
            }
            Change::UpdateTopic(request, options)
        }
        AdminWrite::DeleteTopic => {
            Change::DeleteTopic(DeleteTopicRequest::decode(body).map_err(malformed)?)
        }
        AdminWrite::PurgeTopic => {
            Change::PurgeTopic(PurgeTopicRequest::decode(body).map_err(malformed)?)
        }
        AdminWrite::DeletePartitions => {
            let request = DeletePartitionsRequest::decode(body).map_err(malformed)?;
            if !(1..=MAX_PARTITIONS_PER_REQUEST).contains(&request.partitions_count) {
                return Err(ErrorCode::from_u32(codes::TOO_MANY_PARTITIONS));
            }
            Change::DeletePartitions(request)
        }
        AdminWrite::DeleteSegments => {
            Change::DeleteSegments(DeleteSegmentsRequest::decode(body).map_err(malformed)?)
        }
    };
    Ok(change)
}

/// Apply an admitted write on the leader; a rejection carries the committed op's code.
fn apply(state: &mut ClusterState, change: Change) -> Result<(), ErrorCode> {
    let purge_due = state.purge_due_micros();
    let catalog = &mut state.catalog;
    match change {
        Change::UpdateStream(request) => catalog
            .rename_stream(lookup(&request.stream), request.name.as_str())
            .map_err(error_code),
        Change::DeleteStream(request) => catalog
            .delete_stream(lookup(&request.stream))
            .map(drop)
            .map_err(error_code),
        Change::PurgeStream(request) => catalog
            .purge_stream(lookup(&request.stream), purge_due)
            .map_err(error_code),
        Change::UpdateTopic(request, options) => {
            let (stream, topic) = (lookup(&request.stream), lookup(&request.topic));
            catalog
                .rename_topic(stream, topic, request.name.as_str())
                .map_err(error_code)?;
            // The rename resolved the topic, which may have been named by its old name.
            let topic = catalog
                .topic_mut(stream, Lookup::Name(request.name.as_str()))
                .map_err(error_code)?;
            if let Some(compression) = options.compression_algorithm {
                topic.compression = compression as u8;
            }
            // 0 is the "server default" sentinel, which leaves a setting alone.
            if let Some(expiry) = options.message_expiry.filter(|&expiry| expiry != 0) {
                topic.message_expiry = expiry;
            }
            if let Some(size) = options.max_topic_size.filter(|&size| size != 0) {
                topic.max_topic_size = size;
            }
            Ok(())
        }
        Change::DeleteTopic(request) => catalog
            .delete_topic(lookup(&request.stream), lookup(&request.topic))
            .map(drop)
            .map_err(error_code),
        Change::PurgeTopic(request) => catalog
            .purge_topic(lookup(&request.stream), lookup(&request.topic), purge_due)
            .map_err(error_code),
        Change::DeletePartitions(request) => catalog
            .delete_partitions(
                lookup(&request.stream),
                lookup(&request.topic),
                request.partitions_count,
            )
            .map_err(error_code),
        // Resolving the partition is all there is to do: no segment is ever sealed.
        Change::DeleteSegments(request) => catalog
            .partition(
                lookup(&request.stream),
                lookup(&request.topic),
                request.partition_id,
            )
            .map(drop)
            .map_err(error_code),
    }
}

/// `GET_STREAMS` on `node`: every stream its metadata copy holds, back to back.
pub(super) fn get_streams(node: NodeId, state: &ClusterState) -> Outcome {
    let commit = state.commit_seen_by(node);
    let horizon = state.metadata_horizon(node);
    let streams: Vec<StreamSummary> = state
        .catalog
        .streams()
        .filter(|stream| known_by(horizon, stream.created_at))
        .map(|stream| stream_summary(state, node, stream))
        .collect();
    let mut out = BytesMut::new();
    StreamSummary::encode_list(&streams, &mut out);
    Outcome::ok(out.freeze(), commit)
}

/// A stream's header as `node` reports it (the same figures as its `GET_STREAM`).
fn stream_summary(state: &ClusterState, node: NodeId, stream: &Stream) -> StreamSummary {
    let horizon = state.metadata_horizon(node);
    let topics: Vec<TopicSummary> = stream
        .topics
        .values()
        .filter(|topic| known_by(horizon, topic.created_at))
        .map(|topic| topic_summary(state, Some(node), topic))
        .collect();
    StreamSummary {
        id: stream.id,
        created_at: stream.created_at,
        topics_count: topics.len() as u32,
        size_bytes: stream.topics.values().map(Topic::size_bytes).sum(),
        messages_count: topics.iter().map(|topic| topic.messages_count).sum(),
        name: name_of(&stream.name),
    }
}

/// `GET_TOPICS` on `node`: the stream's topics, counted; a stream the node does not know
/// lists as empty, not as an error (the server's "legacy parity").
pub(super) fn get_topics(node: NodeId, state: &ClusterState, body: &[u8]) -> Outcome {
    let commit = state.commit_seen_by(node);
    let Ok(request) = GetTopicsRequest::decode(body) else {
        return Outcome::status(ErrorCode::InvalidCommand, commit);
    };
    let horizon = state.metadata_horizon(node);
    let topics: Vec<TopicSummary> = state
        .catalog
        .stream(lookup(&request.stream))
        .filter(|stream| known_by(horizon, stream.created_at))
        .map(|stream| {
            stream
                .topics
                .values()
                .filter(|topic| known_by(horizon, topic.created_at))
                .map(|topic| topic_summary(state, Some(node), topic))
                .collect()
        })
        .unwrap_or_default();
    let mut out = BytesMut::new();
    TopicSummary::encode_list(&topics, &mut out);
    Outcome::ok(out.freeze(), commit)
}

/// `FLUSH_UNSAVED_BUFFER`: the server has no on-demand flush and says so, whatever the
/// body, rather than acknowledge a durability it never gave.
pub(super) fn flush(state: &ClusterState) -> Outcome {
    Outcome::status(ErrorCode::FeatureUnavailable, state.commit())
}
