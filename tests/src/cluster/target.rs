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

/// The key consumer offsets are stored under.
pub(super) fn offset_owner(consumer: &Consumer) -> OffsetOwner {
    match (consumer.kind, &consumer.id) {
        (ConsumerKind::Consumer, Identifier::Numeric(id)) => OffsetOwner::ConsumerId(*id),
        (ConsumerKind::Consumer, Identifier::Named(name)) => {
            OffsetOwner::ConsumerName(name.as_str().to_owned())
        }
        (ConsumerKind::ConsumerGroup, Identifier::Numeric(id)) => OffsetOwner::GroupId(*id),
        (ConsumerKind::ConsumerGroup, Identifier::Named(name)) => {
            OffsetOwner::GroupName(name.as_str().to_owned())
        }
    }
}
