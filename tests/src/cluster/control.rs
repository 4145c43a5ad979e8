//! Scripted faults and observation for a running [`TestCluster`].
//!
//! Every method takes the model lock briefly, so they are safe to call while clients run.

use iggy_route_core::wire::Name;

use super::catalog::Lookup;
use super::driver::TestCluster;
use super::partition::StoredMessage;
use super::state::{NodeId, NodeStats};

/// The creation time (µs) of what a test sets up directly in the model: it stands for
/// metadata made long before the test, which every node's copy holds (see
/// [`super::state::Lag`]).
pub const PREEXISTING: u64 = 0;

/// Where [`TestCluster::split_primaries`] put the roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPrimaries {
    /// Primary of partition 0.
    pub partition0_primary: NodeId,
    /// Primary of partition 1.
    pub partition1_primary: NodeId,
    /// The metadata leader afterwards.
    pub metadata_leader: NodeId,
}

impl TestCluster {
    /// The model locked, its clock moved to now: what the observers of logs and offsets
    /// read, so that a purge whose wipe has come due is seen as landed even when no
    /// request has reached the cluster since (see [`super::state::PURGE_RECONCILE`]).
    fn state_now(&self) -> std::sync::MutexGuard<'_, super::state::ClusterState> {
        let mut state = self.shared.state();
        state.set_now_micros(super::driver::now_micros());
        state
    }

    /// Move the primary of a partition (a partition-only election). Returns false if the
    /// partition does not exist.
    ///
    /// # Panics
    /// If `node` is not a node of this cluster.
    pub fn set_primary(&self, stream: u32, topic: u32, partition: u32, node: NodeId) -> bool {
        assert!(node < self.node_count(), "no node {node}");
        let mut state = self.shared.state();
        match state
            .catalog
            .partition_mut(Lookup::Id(stream), Lookup::Id(topic), partition)
        {
            Ok(found) => {
                found.primary = node;
                true
            }
            Err(_) => false,
        }
    }

    /// The primary of a partition, if it exists.
    pub fn primary(&self, stream: u32, topic: u32, partition: u32) -> Option<NodeId> {
        let state = self.shared.state();
        state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), partition)
            .ok()
            .map(|found| found.primary)
    }

    /// Move the metadata leader (a metadata-only election; partition primaries stay).
    ///
    /// # Panics
    /// If `node` is not a node of this cluster.
    pub fn set_metadata_leader(&self, node: NodeId) {
        self.shared.state().set_metadata_leader(node);
    }

    /// The node the roster names `Leader`.
    pub fn metadata_leader(&self) -> NodeId {
        self.shared.state().metadata_leader()
    }

    /// Serve (true) or refuse with `InvalidCommand` (false) the routing commands 14, 103,
    /// 104 and 123.
    pub fn set_routing_commands(&self, enabled: bool) {
        self.shared.state().set_routing_commands(enabled);
    }

    /// Create a stream and a topic directly in the model (no wire, no leader check); the
    /// partitions' primary is the current metadata leader. Returns `(stream_id, topic_id)`.
    ///
    /// # Panics
    /// If a name is taken or is not a valid wire name (1..=255 bytes).
    pub fn create_stream_and_topic(
        &self,
        stream_name: &str,
        topic_name: &str,
        partitions: u32,
    ) -> (u32, u32) {
        for name in [stream_name, topic_name] {
            assert!(Name::new(name).is_ok(), "{name:?} is not a valid wire name");
        }
        let mut state = self.shared.state();
        let now = PREEXISTING;
        let leader = state.metadata_leader();
        let stream = state
            .catalog
            .create_stream(stream_name, now)
            .unwrap_or_else(|error| panic!("create stream {stream_name}: {error:?}"));
        let topic = state
            .catalog
            .create_topic(Lookup::Id(stream), topic_name, partitions, now, leader)
            .unwrap_or_else(|error| panic!("create topic {topic_name}: {error:?}"));
        state.bump_commit();
        (stream, topic)
    }

    /// The bug report's fixture (`seed_split_primaries` plus its `create_partitions` step):
    /// partition 0's primary on `partition0_primary`, partition 1's on `partition1_primary`,
    /// and the metadata leader on `metadata_leader`.
    ///
    /// If the topic has a single partition, partition 1 is created the way the report
    /// describes: a metadata-only election moves the leader to `partition1_primary`, then
    /// the new partition is seeded from the metadata view, so that node becomes its primary
    /// (protocol §13.6). Finally the leader moves to `metadata_leader`.
    ///
    /// # Panics
    /// If the topic does not exist or a node id is out of range.
    pub async fn split_primaries(
        &self,
        stream: u32,
        topic: u32,
        partition0_primary: NodeId,
        partition1_primary: NodeId,
        metadata_leader: NodeId,
    ) -> SplitPrimaries {
        for node in [partition0_primary, partition1_primary, metadata_leader] {
            assert!(node < self.node_count(), "no node {node}");
        }
        let mut state = self.shared.state();
        let (stream_ref, topic_ref) = (Lookup::Id(stream), Lookup::Id(topic));
        let partitions = state
            .catalog
            .topic(stream_ref, topic_ref)
            .unwrap_or_else(|error| panic!("split_primaries on {stream}/{topic}: {error:?}"))
            .partitions
            .len();
        if partitions < 2 {
            state.set_metadata_leader(partition1_primary);
            let now = PREEXISTING;
            let count = 2 - partitions as u32;
            if let Err(error) = state.catalog.create_partitions(
                stream_ref,
                topic_ref,
                count,
                now,
                partition1_primary,
            ) {
                panic!("create partition 1 of {stream}/{topic}: {error:?}");
            }
            state.bump_commit();
        }
        let topic_model = state
            .catalog
            .topic_mut(stream_ref, topic_ref)
            .unwrap_or_else(|error| panic!("split_primaries on {stream}/{topic}: {error:?}"));
        for (partition, primary) in [(0, partition0_primary), (1, partition1_primary)] {
            if let Some(found) = topic_model.partition_mut(partition) {
                found.primary = primary;
            }
        }
        state.set_metadata_leader(metadata_leader);
        SplitPrimaries {
            partition0_primary,
            partition1_primary,
            metadata_leader,
        }
    }

    /// Counters of one node.
    pub fn stats(&self, node: NodeId) -> NodeStats {
        self.shared.state().stats(node)
    }

    /// Refusals (status or result 58) summed over all nodes.
    pub fn total_refusals(&self) -> u64 {
        self.shared.state().total_refusals()
    }

    /// Successful logins summed over all nodes.
    pub fn total_logins(&self) -> u64 {
        self.shared.state().total_logins()
    }

    /// Live sessions in the cluster.
    pub fn live_sessions(&self) -> usize {
        self.shared.state().live_sessions()
    }

    /// The stored log of a partition in full (empty if it does not exist).
    ///
    /// # Panics
    /// If a payload was dropped from the window and the cluster has no generator for it
    /// (a test this long checks ids with [`TestCluster::partition_ids`] instead).
    pub fn partition_log(&self, stream: u32, topic: u32, partition: u32) -> Vec<StoredMessage> {
        let state = self.state_now();
        let regenerate = state.retention.regenerate.clone();
        state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), partition)
            .map(|found| {
                let log = &found.log;
                log.read(0, log.next_offset(), regenerate.as_ref())
                    .unwrap_or_else(|evicted| panic!("partition {partition}: {evicted}"))
            })
            .unwrap_or_default()
    }

    /// Messages stored in a partition (0 if it does not exist).
    pub fn partition_len(&self, stream: u32, topic: u32, partition: u32) -> u64 {
        let state = self.state_now();
        state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), partition)
            .map_or(0, |found| found.log.next_offset())
    }

    /// The ids stored in a partition from offset `start` on, at most `count`, read from the
    /// log's index: what a long test checks without holding its payloads.
    pub fn partition_ids(
        &self,
        stream: u32,
        topic: u32,
        partition: u32,
        start: u64,
        count: usize,
    ) -> Vec<u128> {
        let state = self.state_now();
        state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), partition)
            .map(|found| found.log.ids(start, count))
            .unwrap_or_default()
    }

    /// Stored offset of a numeric consumer on a partition.
    pub fn consumer_offset(
        &self,
        stream: u32,
        topic: u32,
        partition: u32,
        consumer: u32,
    ) -> Option<u64> {
        let state = self.state_now();
        let found = state
            .catalog
            .partition(Lookup::Id(stream), Lookup::Id(topic), partition)
            .ok()?;
        found
            .offsets
            .get(&super::partition::OffsetOwner::ConsumerId(consumer))
            .copied()
    }

    /// Run `f` on the model under the lock, for checks the methods above do not cover.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut super::state::ClusterState) -> T) -> T {
        f(&mut self.shared.state())
    }
}
