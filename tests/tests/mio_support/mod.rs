//! What the mio adapter's backpressure and producer tests share: a loopback cluster on its
//! own runtime, clients with small bounds, numbered messages and reading a partition back.
//! Under a directory of its own so that Cargo does not take it for a test target.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::Config;
use iggy_route_core::wire::Message;
use iggy_route_tests::cluster::TestCluster;

/// A cluster on its own tokio runtime: the runtime's workers serve it, so the test thread
/// and its producer threads can make blocking calls.
pub struct Harness {
    pub cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
}

/// Every scenario ends with the check that nothing was logged at ERROR.
impl Drop for Harness {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            iggy_route_tests::error_events::assert_none();
        }
    }
}

impl Harness {
    /// `nodes` nodes with stream `0` and its topic `0` of `partitions` partitions, every
    /// primary on node 0.
    pub fn start(nodes: usize, partitions: u32) -> Self {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the cluster");
        let cluster = runtime.block_on(TestCluster::start(nodes));
        let ids = cluster.create_stream_and_topic("bp-stream", "bp-topic", partitions);
        assert_eq!(ids, (STREAM, TOPIC));
        Self { cluster, runtime }
    }

    /// A configuration for this cluster: a stuck request fails in seconds rather than the
    /// default 30 (but in far more than any request here takes on a loaded machine).
    pub fn config(&self) -> Config {
        let mut config = Config::from_connection_string(&self.cluster.connection_string())
            .expect("the cluster's connection string");
        config.request_timeout = Duration::from_secs(20);
        config
    }

    /// [`Harness::config`] with at most `total` requests pending in the router (and as
    /// many per partition).
    pub fn config_with_room(&self, total: usize) -> Config {
        let mut config = self.config();
        config.max_pending_requests = total;
        config.max_pending_per_lane = total;
        config
    }

    pub fn client(&self, config: Config) -> iggy_route_mio::Client {
        iggy_route_mio::Client::connect(config).expect("the mio client connects")
    }

    /// Holds every reply of every node for `delay` (zero ends it).
    pub fn delay_replies(&self, delay: Duration) {
        for node in 0..self.cluster.node_count() {
            self.cluster.set_reply_delay(node, delay);
        }
    }

    /// Payloads stored in a partition, in offset order.
    pub fn payloads(&self, partition: u32) -> Vec<String> {
        self.cluster
            .partition_log(STREAM, TOPIC, partition)
            .into_iter()
            .map(|stored| String::from_utf8(stored.payload.to_vec()).expect("utf-8 payloads"))
            .collect()
    }

    /// Stops the cluster (for a test that needs it gone mid-run).
    pub fn stop_every_node(&self) {
        for node in 0..self.cluster.node_count() {
            self.runtime.block_on(self.cluster.stop_node(node));
        }
    }
}

/// The stream and topic [`Harness::start`] creates (ids start at 0).
pub const STREAM: u32 = 0;
pub const TOPIC: u32 = 0;

/// A message whose payload is `payload`.
pub fn message(payload: impl Into<String>) -> Message {
    Message {
        payload: Bytes::from(payload.into()),
        ..Message::default()
    }
}

/// `tag/sequence` payloads, e.g. `t3/17`, read back by [`sequences_of`].
pub fn numbered(tag: &str, sequence: usize) -> Message {
    message(format!("{tag}/{sequence}"))
}

/// The sequence numbers of `tag`'s messages among `payloads`, in the order stored.
pub fn sequences_of(payloads: &[String], tag: &str) -> Vec<usize> {
    payloads
        .iter()
        .filter_map(|payload| payload.split_once('/'))
        .filter(|(found, _)| *found == tag)
        .map(|(_, sequence)| sequence.parse().expect("a numbered payload"))
        .collect()
}
