//! The simulated nodes: the test cluster's sans-IO node model behind simulated sockets.
//!
//! One [`ClusterState`] is shared by all nodes, exactly as in the loopback driver; this
//! file plays the driver's part without tokio: it accepts connections while a node runs,
//! splits the bytes of each connection into frames, hands each request to that
//! connection's [`NodeConnection`], and returns the reply frames. A stopped node accepts
//! nothing and its connections are cut.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::wire::{DEFAULT_MAX_FRAME_SIZE, Frame, FrameDecoder, SendMessagesRequest};

use super::network::ConnId;
use crate::cluster::adversary::{Adversary, Verdict};
use crate::cluster::{ClusterConfig, ClusterState, Lookup, NodeConnection};

/// First port of the simulated nodes' addresses (never bound: nothing here opens a socket).
pub const BASE_PORT: u16 = 19_000;

/// A node's address as the roster reports it and the routers dial it.
pub fn node_addr(node: usize) -> String {
    format!("127.0.0.1:{}", usize::from(BASE_PORT) + node)
}

/// The node an address names, if it is one of ours.
pub fn node_of_addr(addr: &str, nodes: usize) -> Option<usize> {
    (0..nodes).find(|&node| node_addr(node) == addr)
}

#[derive(Debug)]
struct ServerConn {
    node: usize,
    model: NodeConnection,
    decoder: FrameDecoder,
}

/// What a node did with bytes that arrived.
#[derive(Debug, Default)]
pub struct Received {
    /// Reply frames, in order.
    pub replies: Vec<Bytes>,
    /// How long the replies wait for a commit (a partition write while the next replica of
    /// its chain is stopped; see `cluster::Lag`). Replies stay in order: all of them wait.
    pub commit_delay: Duration,
    /// The node closes the connection (an invalid or undecodable frame).
    pub close: bool,
}

/// The cluster of simulated nodes. See the module doc.
#[derive(Debug)]
pub struct SimNodes {
    /// The shared model of the whole cluster.
    pub state: ClusterState,
    running: Vec<bool>,
    /// Extra delay before each reply of a node (a slow node); the request is handled at once.
    reply_delay: Vec<Duration>,
    conns: BTreeMap<ConnId, ServerConn>,
    /// What the nodes do that an honest model would not (see `adversary.rs`).
    pub adversary: Adversary,
    /// The workload's topic, once created: whose partitions a not-committing node leads.
    topic: Option<SimTopic>,
    /// The nodes' addresses, in node order (they never change in a run).
    addrs: Vec<SocketAddr>,
}

/// The stream, topic and partition count the workload writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimTopic {
    /// Stream id.
    pub stream: u32,
    /// Topic id.
    pub topic: u32,
    /// Partitions.
    pub partitions: u32,
}

impl SimNodes {
    /// `nodes` running nodes with the routing commands on or off, and the given rebalancing
    /// timeout of the consumer groups (`ClusterConfig::rebalancing_timeout`).
    pub fn new(nodes: usize, routing_commands: bool, rebalancing_timeout: Duration) -> Self {
        let mut config = ClusterConfig::new(nodes);
        config.routing_commands = routing_commands;
        config.rebalancing_timeout = rebalancing_timeout;
        config.name = "iggy-route-sim".to_owned();
        // The simulation's checks read every payload back after every step, and its runs
        // are short: it holds them all, whatever a seed's workload.
        config.retention.payload_bytes = usize::MAX;
        let mut state = ClusterState::new(&config);
        let mut addrs = Vec::with_capacity(nodes);
        for node in 0..nodes {
            let port = BASE_PORT + u16::try_from(node).unwrap_or(0);
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            state.set_node_addr(node, addr);
            addrs.push(addr);
        }
        Self {
            state,
            running: vec![true; nodes],
            reply_delay: vec![Duration::ZERO; nodes],
            conns: BTreeMap::new(),
            adversary: Adversary::new(nodes),
            topic: None,
            addrs,
        }
    }

    /// Whether connection `id` holds a consumer-group membership of `topic` on the nodes'
    /// side: its session's client id is a member of one of the topic's groups.
    pub fn holds_membership(&self, topic: SimTopic, id: ConnId) -> bool {
        let Some(client) = self
            .conns
            .get(&id)
            .and_then(|conn| conn.model.binding())
            .map(|binding| binding.client_id)
        else {
            return false;
        };
        self.state
            .catalog
            .topic(Lookup::Id(topic.stream), Lookup::Id(topic.topic))
            .is_ok_and(|found| {
                found
                    .groups
                    .all()
                    .any(|group| group.member(client).is_some())
            })
    }

    /// The members of group `group` of `topic`, each as the router whose connection signed
    /// in with the member's client id (`None`: no open connection did, or only one the
    /// router has closed and a paused node has not yet seen close: `closing`).
    pub fn group_members(
        &self,
        topic: SimTopic,
        group: u32,
        closing: &dyn Fn(ConnId) -> bool,
    ) -> Vec<Option<usize>> {
        let Ok(found) = self
            .state
            .catalog
            .topic(Lookup::Id(topic.stream), Lookup::Id(topic.topic))
        else {
            return Vec::new();
        };
        let Some(group) = found.groups.find(Lookup::Id(group)) else {
            return Vec::new();
        };
        group
            .members
            .iter()
            .map(|member| {
                self.conns
                    .iter()
                    .find(|(id, conn)| {
                        !closing(**id)
                            && conn
                                .model
                                .binding()
                                .is_some_and(|binding| binding.client_id == member.client)
                    })
                    .map(|(id, _)| id.router)
            })
            .collect()
    }

    /// Number of nodes.
    pub fn count(&self) -> usize {
        self.running.len()
    }

    /// Create the workload's stream and topic directly in the model, with the given
    /// primary for each partition.
    ///
    /// # Panics
    /// If the catalog rejects it (a bug in the simulation's setup).
    pub fn create_topic(&mut self, primaries: &[usize]) -> SimTopic {
        let partitions = u32::try_from(primaries.len()).unwrap_or(0);
        // The topic exists before the routers start: every node's copy holds it.
        let now = crate::cluster::PREEXISTING;
        let leader = self.state.metadata_leader();
        let stream = self
            .state
            .catalog
            .create_stream("sim", now)
            .unwrap_or_else(|error| panic!("create stream: {error:?}"));
        let topic = self
            .state
            .catalog
            .create_topic(Lookup::Id(stream), "events", partitions, now, leader)
            .unwrap_or_else(|error| panic!("create topic: {error:?}"));
        // With its consumer group (id 0), which the routers join.
        self.state
            .catalog
            .topic_mut(Lookup::Id(stream), Lookup::Id(topic))
            .unwrap_or_else(|error| panic!("find topic: {error:?}"))
            .groups
            .create("sim-group")
            .unwrap_or_else(|error| panic!("create group: {error:?}"));
        self.state.bump_commit();
        let created = SimTopic {
            stream,
            topic,
            partitions,
        };
        for (partition, &node) in (0u32..).zip(primaries) {
            self.set_primary(created, partition, node);
        }
        self.topic = Some(created);
        created
    }

    /// Move a partition's primary (a partition-only election).
    pub fn set_primary(&mut self, topic: SimTopic, partition: u32, node: usize) {
        let found = self.state.catalog.partition_mut(
            Lookup::Id(topic.stream),
            Lookup::Id(topic.topic),
            partition,
        );
        if let Ok(found) = found {
            found.primary = node;
        }
    }

    /// The primary of a partition of `topic`, if the partition exists.
    pub fn primary(&self, topic: SimTopic, partition: u32) -> Option<usize> {
        self.state
            .catalog
            .partition(Lookup::Id(topic.stream), Lookup::Id(topic.topic), partition)
            .ok()
            .map(|found| found.primary)
    }

    /// Whether `node` is running.
    pub fn is_running(&self, node: usize) -> bool {
        self.running.get(node).copied().unwrap_or(false)
    }

    /// The reply delay of `node`.
    pub fn reply_delay(&self, node: usize) -> Duration {
        self.reply_delay.get(node).copied().unwrap_or_default()
    }

    /// Make `node` slow (or fast again with `Duration::ZERO`).
    pub fn set_reply_delay(&mut self, node: usize, delay: Duration) {
        if let Some(slot) = self.reply_delay.get_mut(node) {
            *slot = delay;
        }
    }

    /// A connection request reached `node`: accepted only while it runs.
    pub fn accept(&mut self, id: ConnId, node: usize) -> bool {
        if !self.is_running(node) {
            return false;
        }
        let model = NodeConnection::open(&mut self.state, node);
        let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
        self.conns.insert(
            id,
            ServerConn {
                node,
                model,
                decoder,
            },
        );
        true
    }

    /// Bytes arrived on `id` at simulated time `now`; `now_micros` is the model's clock for
    /// the timestamps.
    pub fn receive(
        &mut self,
        id: ConnId,
        mut bytes: &[u8],
        now: Duration,
        now_micros: u64,
    ) -> Received {
        let mut received = Received::default();
        let Some(conn) = self.conns.get_mut(&id) else {
            return received;
        };
        self.state.set_now_micros(now_micros);
        // Each round consumes at least one byte or ends; the input's length bounds it.
        for _ in 0..=bytes.len() {
            match conn.decoder.decode(&mut bytes) {
                Ok(Some(Frame::Request { header, body })) => {
                    let node = conn.node;
                    let (state, topic) = (&self.state, self.topic);
                    // The workload writes one topic: whether this node leads its partition.
                    let leads = |_: &SendMessagesRequest, partition: u32| {
                        topic.is_some_and(|topic| {
                            state
                                .catalog
                                .partition(
                                    Lookup::Id(topic.stream),
                                    Lookup::Id(topic.topic),
                                    partition,
                                )
                                .is_ok_and(|found| found.primary == node)
                        })
                    };
                    let leader = self.state.metadata_leader() == node;
                    if let Verdict::Instead(reply) =
                        self.adversary
                            .before(node, now, (&header, &body), leader, leads)
                    {
                        received.replies.push(reply);
                        continue;
                    }
                    match conn.model.handle(&mut self.state, node, header, body) {
                        Some(reply) => {
                            let addrs = &self.addrs;
                            let reply = self.adversary.reply(node, addrs, now, &header, reply);
                            received.replies.push(reply);
                            received.commit_delay = received
                                .commit_delay
                                .max(self.state.take_reply_commit_delay());
                        }
                        None => {
                            received.close = true;
                            return received;
                        }
                    }
                }
                Ok(None) => return received,
                Ok(Some(Frame::Reply { .. } | Frame::Eviction(_))) | Err(_) => {
                    received.close = true;
                    return received;
                }
            }
            if bytes.is_empty() {
                return received;
            }
        }
        received
    }

    /// The connection is gone on the node side: its session ends.
    pub fn close(&mut self, id: ConnId) {
        if let Some(mut conn) = self.conns.remove(&id) {
            conn.model.close(&mut self.state);
        }
    }

    /// Stop `node`: it accepts nothing until restarted. The caller cuts its connections.
    pub fn stop(&mut self, node: usize) {
        if let Some(running) = self.running.get_mut(node) {
            *running = false;
        }
        self.state.set_node_running(node, false);
    }

    /// Restart a stopped node; the model keeps its data, as a restarted replica would.
    pub fn restart(&mut self, node: usize) {
        if let Some(running) = self.running.get_mut(node) {
            *running = true;
        }
        self.state.set_node_running(node, true);
    }
}
