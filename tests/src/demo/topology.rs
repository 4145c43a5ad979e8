//! The embedded cluster of one run: a fresh 3-node loopback cluster with the demo topic,
//! its primaries placed for the scenario, and the counters the report reads from it.

use std::time::{Duration, Instant};

use crate::cluster::{ClusterConfig, Lag, Lookup, Retention, ServerCertificate, TestCluster};

use super::failover::Fault;
use super::{NODES, PARTITIONS, STREAM_NAME, Scenario, TOPIC_NAME};

/// The node that is the metadata leader in every embedded scenario, and where clients
/// start their session.
pub const SESSION_NODE: usize = 0;

/// A fresh cluster per run: logs start empty (so the stored count is exactly this run's)
/// and no client of an earlier run holds routes or sessions in it.
#[derive(Debug)]
pub struct EmbeddedCluster {
    cluster: TestCluster,
    /// The demo stream's id.
    pub stream: u32,
    /// The demo topic's id.
    pub topic: u32,
}

/// Cluster-side counters, read before and after the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterCounters {
    /// Refusals (status 58) on all nodes.
    pub refusals: u64,
    /// Successful logins on all nodes.
    pub logins: u64,
}

/// Payload bytes each partition of the demo's cluster holds. The demo reads back only
/// counts, never payloads, and the model keeps its whole state under one lock: with the
/// default 16 MiB window, growing or compacting a partition's window moved up to 12 MB
/// under that lock (11-13 ms to grow to 262,144 messages, 3-4 ms per compaction, measured
/// with 100-byte messages at 300,000 msg/s), and every request of every node waited
/// behind it: a stall the model made and a client's latency then counted.
const DEMO_PAYLOAD_WINDOW: usize = 1 << 20;

impl EmbeddedCluster {
    /// Starts the cluster on the current tokio runtime and lays the topic out for
    /// `scenario`: `single` keeps every primary on the metadata leader (node 0), `split`
    /// moves partition `p`'s primary to node `p % 3` as failovers would. Every commit of a
    /// partition write holds its reply for `commit` (see [`Lag::partition_commit`]). With
    /// `tls`, every node serves TLS only, and the connection strings say how to reach it.
    pub async fn start(scenario: Scenario, commit: Duration, tls: bool) -> Self {
        let config = ClusterConfig {
            lag: Lag {
                partition_commit: commit,
                ..Lag::REAL_CLUSTER
            },
            tls: tls.then_some(ServerCertificate::Valid),
            retention: Retention {
                payload_bytes: DEMO_PAYLOAD_WINDOW,
                regenerate: None,
            },
            ..ClusterConfig::new(NODES)
        };
        let cluster = TestCluster::start_with(config).await;
        cluster.set_metadata_leader(SESSION_NODE);
        let (stream, topic) = cluster.create_stream_and_topic(STREAM_NAME, TOPIC_NAME, PARTITIONS);
        for partition in 0..PARTITIONS {
            let primary = match scenario {
                Scenario::Split | Scenario::Moving | Scenario::Crash => partition as usize % NODES,
                Scenario::Single | Scenario::External => SESSION_NODE,
            };
            cluster.set_primary(stream, topic, partition, primary);
        }
        Self {
            cluster,
            stream,
            topic,
        }
    }

    /// iggy-route's connection string: every node as a seed (and the TLS options of a TLS
    /// cluster).
    pub fn connection_string(&self) -> String {
        self.cluster.connection_string()
    }

    /// The SDK's connection string: one node, the metadata leader (and the TLS options of
    /// a TLS cluster); `nodelay` turns Nagle's algorithm off on its socket.
    pub fn sdk_connection_string(&self, nodelay: bool) -> String {
        let base = self.cluster.sdk_connection_string(SESSION_NODE);
        if !nodelay {
            return base;
        }
        let separator = if base.contains('?') { '&' } else { '?' };
        format!("{base}{separator}nodelay=true")
    }

    /// Refusals and logins so far.
    pub fn counters(&self) -> ClusterCounters {
        ClusterCounters {
            refusals: self.cluster.total_refusals(),
            logins: self.cluster.total_logins(),
        }
    }

    /// Messages stored in the demo topic's partition logs.
    pub fn stored_messages(&self) -> u64 {
        let (stream, topic) = (self.stream, self.topic);
        self.cluster.with_state(|state| {
            state
                .catalog
                .topic(Lookup::Id(stream), Lookup::Id(topic))
                .map_or(0, |found| found.messages_count())
        })
    }

    /// Applies one fault of a `moving` or `crash` plan (from a thread outside the cluster's
    /// runtime, whose handle is `runtime`).
    pub fn apply(&self, runtime: &tokio::runtime::Handle, fault: &Fault) {
        let (stream, topic) = (self.stream, self.topic);
        match fault {
            Fault::Move { partition, to, .. } => {
                self.cluster.set_primary(stream, topic, *partition, *to);
            }
            Fault::Crash { node, .. } => runtime.block_on(self.cluster.stop_node(*node)),
            Fault::ViewChange { moves } => {
                for &(partition, to) in moves {
                    self.cluster.set_primary(stream, topic, partition, to);
                }
            }
            Fault::Restart { node } => runtime.block_on(self.cluster.restart_node(*node)),
        }
    }

    /// The sends to the demo topic refused by a node that was not the partition's
    /// primary, as offsets from `epoch` (refusals before it are left out) with the
    /// partition id.
    pub fn refused_sends_since(&self, epoch: Instant) -> Vec<(Duration, u32)> {
        self.cluster
            .refused_sends(self.stream, self.topic)
            .into_iter()
            .filter(|(at, _)| *at >= epoch)
            .map(|(at, partition)| (at.duration_since(epoch), partition))
            .collect()
    }

    /// Stops every node and waits for its tasks (call on the runtime it started on).
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}
