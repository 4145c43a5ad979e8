//! What the routing layer knows, read without changing it.

use super::lane::Lane;
use super::{LaneKey, Pending, Roster, Routing, RoutingCommands};
use crate::event::Stats;
use crate::ids::{NodeId, PartitionKey, RequestId, TopicKey};

impl Routing {
    /// A request not yet completed.
    pub(super) fn live(&self, id: RequestId) -> Option<&Pending> {
        self.pending.get(&id).filter(|p| !p.completed)
    }

    /// The partition chosen for a pending request, once its topic's partition count was
    /// known.
    pub fn partition_of(&self, id: RequestId) -> Option<u32> {
        self.live(id).and_then(|p| p.partition)
    }

    /// The partition count known for a topic, if it is known.
    pub fn partition_count(&self, topic: &TopicKey) -> Option<u32> {
        self.topics
            .get(topic)
            .and_then(|t| t.info)
            .map(|(count, _)| count)
    }

    /// The roster as last read.
    pub(crate) fn roster(&self) -> &Roster {
        &self.roster
    }

    /// The metadata leader as the last roster named it.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether the cluster answers the routing commands.
    pub fn routing_commands(&self) -> RoutingCommands {
        self.routing_commands
    }

    /// The client's metadata watermark.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// The route a partition has now, if any.
    pub fn route(&self, partition: &PartitionKey) -> Option<NodeId> {
        self.lanes
            .get(&LaneKey::Partition(partition.clone()))
            .and_then(|lane| lane.route)
            .map(|route| route.node)
    }

    /// Requests accepted and not yet completed.
    pub fn pending_count(&self) -> usize {
        self.pending.values().filter(|p| !p.completed).count()
    }

    /// Every lane's length (waiting plus in flight), in key order, for invariant checks.
    pub fn lane_lengths(&self) -> Vec<usize> {
        self.lanes.values().map(Lane::len).collect()
    }
}
