//! Resolving the partition a poll, routing query or offset request names, with the error
//! codes of protocol §13.1 (step 6a) for each level that misses.

use iggy_route_core::wire::{Consumer, ConsumerKind, ErrorCode, Identifier};

use super::catalog::Lookup;
use super::handlers_metadata::lookup;
use super::partition::{OffsetOwner, Partition};
use super::state::ClusterState;

/// A resolved partition, by numeric ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) stream_id: u32,
    pub(super) topic_id: u32,
    pub(super) partition_id: u32,
}

impl Target {
    pub(super) fn partition<'a>(&self, state: &'a ClusterState) -> Option<&'a Partition> {
        state
            .catalog
            .partition(
                Lookup::Id(self.stream_id),
                Lookup::Id(self.topic_id),
                self.partition_id,
            )
            .ok()
    }

    pub(super) fn partition_mut<'a>(
        &self,
        state: &'a mut ClusterState,
    ) -> Option<&'a mut Partition> {
        state
            .catalog
            .partition_mut(
                Lookup::Id(self.stream_id),
                Lookup::Id(self.topic_id),
                self.partition_id,
            )
            .ok()
    }
}

/// Resolve stream, topic and partition. A single consumer without a partition id reads
/// partition 0; a consumer group needs an explicit id, because the model keeps no group
/// assignments (the 0.11.0 SDK resolves group partitions client-side anyway).
pub(super) fn resolve(
    state: &ClusterState,
    consumer: &Consumer,
    stream: &Identifier,
    topic: &Identifier,
    partition_id: Option<u32>,
) -> Result<Target, ErrorCode> {
    let stream = state
        .catalog
        .stream(lookup(stream))
        .ok_or(ErrorCode::StreamIdNotFound)?;
    let topic = stream
        .topic(lookup(topic))
        .ok_or(ErrorCode::TopicIdNotFound)?;
    let partition_id = match (partition_id, consumer.kind) {
        (Some(id), _) => id,
        (None, ConsumerKind::Consumer) => 0,
        (None, ConsumerKind::ConsumerGroup) => return Err(ErrorCode::InvalidIdentifier),
    };
    topic
        .partition(partition_id)
        .ok_or(ErrorCode::PartitionNotFound)?;
    Ok(Target {
        stream_id: stream.id,
        topic_id: topic.id,
        partition_id,
    })
}

/// The key consumer offsets are stored under. A group's is its id, however the request
/// names the group: the server resolves the group first (`resolve_consumer_group_id`),
/// so a group polled by name and by number reads one offset, and a group created again
/// under an old name starts from nothing (seen on the real cluster). A group that does
/// not resolve keeps the key as named (its offset is then nobody's).
pub(super) fn offset_owner(
    state: &ClusterState,
    (stream, topic): (&Identifier, &Identifier),
    consumer: &Consumer,
) -> OffsetOwner {
    match (consumer.kind, &consumer.id) {
        (ConsumerKind::Consumer, Identifier::Numeric(id)) => OffsetOwner::ConsumerId(*id),
        (ConsumerKind::Consumer, Identifier::Named(name)) => {
            OffsetOwner::ConsumerName(name.as_str().to_owned())
        }
        (ConsumerKind::ConsumerGroup, group) => {
            let resolved = state
                .catalog
                .topic(lookup(stream), lookup(topic))
                .ok()
                .and_then(|topic| topic.groups.find(lookup(group)))
                .map(|found| found.id);
            match (resolved, group) {
                (Some(id), _) | (None, &Identifier::Numeric(id)) => OffsetOwner::GroupId(id),
                (None, Identifier::Named(name)) => OffsetOwner::GroupName(name.as_str().to_owned()),
            }
        }
    }
}
