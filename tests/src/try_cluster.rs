//! The cluster to try iggy-route on: what `iggy-route-test-cluster` does, as a library so
//! that a test runs it without a subprocess.
//!
//! It starts the loopback test cluster ([`TestCluster`]) on `127.0.0.1`, creates a stream
//! and a topic directly in its model (the examples' `example-stream`/`example-topic` by
//! default) and, with `--split`, puts partition `p`'s primary on node `p % nodes`, the
//! layout a real cluster reaches after ordinary failovers (`docs/design.md`, "Routing
//! rules"). A topic created over the wire would have every primary on the metadata leader,
//! which is why the layout is made here rather than by the client that first sends.
//!
//! By default the nodes answer the routing commands (14, 103, 104, 123) with
//! `InvalidCommand`, as the real 0.11.0-protocol server does (`docs/real-cluster.md`), so
//! a client finds primaries by refusal there too; `--routing-commands` serves them.

use std::fmt::{self, Write as _};
use std::io;
use std::time::Duration;

use clap::Parser;
use iggy_route_core::wire::Name;

use crate::cluster::{
    ClusterConfig, MAX_PARTITIONS_PER_TOPIC, NodeId, ServerCertificate, TestCluster,
};

/// The most nodes the loopback cluster runs.
pub const MAX_NODES: usize = 5;
/// The node that is the metadata leader, and the one the SDK's connection string names.
pub const LEADER: NodeId = 0;
/// How long [`TryCluster::shutdown`] waits for the nodes' tasks to end.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(5);

/// A loopback Iggy 0.11.0 test cluster on 127.0.0.1 to run the examples, your own program
/// or the SDK 0.11.0 against. It prints its connection string and its layout, then runs
/// until Ctrl-C (or `--seconds`).
#[derive(Debug, Clone, Parser)]
#[command(name = "iggy-route-test-cluster", version)]
pub struct Args {
    /// Nodes, 1 to 5.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Node `N` listens on port `PORT_BASE + N`; without it, the OS picks free ports.
    #[arg(long, value_name = "PORT_BASE", value_parser = clap::value_parser!(u16).range(1..))]
    pub port_base: Option<u16>,
    /// The stream to create (the examples' by default).
    #[arg(long, default_value = "example-stream")]
    pub stream: String,
    /// The topic to create in it.
    #[arg(long, default_value = "example-topic")]
    pub topic: String,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 3)]
    pub partitions: u32,
    /// Create no stream and no topic: the cluster starts empty.
    #[arg(long, conflicts_with = "split")]
    pub empty: bool,
    /// Put partition `p`'s primary on node `p % nodes` (without it, every primary is on
    /// the metadata leader, node 0).
    #[arg(long)]
    pub split: bool,
    /// Serve TLS only, with a certificate for `localhost` made at start; the connection
    /// string then names the CA file to trust.
    #[arg(long)]
    pub tls: bool,
    /// Serve the routing commands (14, 103, 104, 123), which the real server answers with
    /// `InvalidCommand`.
    #[arg(long)]
    pub routing_commands: bool,
    /// Stop after this many seconds instead of at Ctrl-C.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: Option<u64>,
}

/// Arguments that parse but describe no cluster this binary can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// `--nodes` outside 1..=5.
    Nodes(usize),
    /// `--partitions` outside 1..=[`MAX_PARTITIONS_PER_TOPIC`].
    Partitions(u32),
    /// `--split` on one node: there is nowhere to split to.
    SplitOnOneNode,
    /// A stream or topic name the wire cannot carry (empty, or over 255 bytes).
    Name(String),
    /// `--port-base` too high for the last node's port to exist.
    PortRange {
        /// The base asked for.
        base: u16,
        /// The nodes asked for.
        nodes: usize,
    },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nodes(nodes) => write!(f, "--nodes {nodes}: the cluster runs 1 to {MAX_NODES}"),
            Self::Partitions(count) => write!(
                f,
                "--partitions {count}: a topic has 1 to {MAX_PARTITIONS_PER_TOPIC} partitions"
            ),
            Self::SplitOnOneNode => write!(f, "--split needs at least 2 nodes"),
            Self::Name(name) => {
                write!(f, "{name:?} is not a stream or topic name (1 to 255 bytes)")
            }
            Self::PortRange { base, nodes } => write!(
                f,
                "--port-base {base}: {nodes} nodes would need ports up to {}",
                u32::from(*base) + *nodes as u32 - 1
            ),
        }
    }
}

impl std::error::Error for ArgsError {}

/// The stream and topic the cluster was started with, and where each partition is led.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The stream's name.
    pub stream: String,
    /// Its id.
    pub stream_id: u32,
    /// The topic's name.
    pub topic: String,
    /// Its id.
    pub topic_id: u32,
    /// Partition `p`'s primary is `primaries[p]`.
    pub primaries: Vec<NodeId>,
}

/// A running cluster to try clients on.
#[derive(Debug)]
pub struct TryCluster {
    cluster: TestCluster,
    layout: Option<Layout>,
}

impl Args {
    /// The checks clap cannot make: each names the argument at fault.
    ///
    /// # Errors
    /// The first argument that describes no cluster.
    pub fn validate(&self) -> Result<(), ArgsError> {
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return Err(ArgsError::Nodes(self.nodes));
        }
        if let Some(base) = self.port_base {
            let last = u32::from(base) + self.nodes as u32 - 1;
            if last > u32::from(u16::MAX) {
                return Err(ArgsError::PortRange {
                    base,
                    nodes: self.nodes,
                });
            }
        }
        if self.split && self.nodes < 2 {
            return Err(ArgsError::SplitOnOneNode);
        }
        if self.empty {
            return Ok(());
        }
        if !(1..=MAX_PARTITIONS_PER_TOPIC).contains(&self.partitions) {
            return Err(ArgsError::Partitions(self.partitions));
        }
        for name in [&self.stream, &self.topic] {
            if Name::new(name.as_str()).is_err() {
                return Err(ArgsError::Name(name.clone()));
            }
        }
        Ok(())
    }
}

impl TryCluster {
    /// Starts the cluster `args` describe on the current tokio runtime (whose workers serve
    /// it for as long as it runs).
    ///
    /// # Errors
    /// An argument that describes no cluster, or a port that cannot be bound (`--port-base`
    /// on ports in use), or TLS certificates that cannot be made.
    pub async fn start(args: &Args) -> io::Result<Self> {
        args.validate()
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        let config = ClusterConfig {
            routing_commands: args.routing_commands,
            name: "iggy-route-test-cluster".to_owned(),
            tls: args.tls.then_some(ServerCertificate::Valid),
            ..ClusterConfig::new(args.nodes)
        };
        let cluster = TestCluster::try_start_on(config, args.port_base).await?;
        cluster.set_metadata_leader(LEADER);
        let layout = (!args.empty).then(|| {
            let (stream_id, topic_id) =
                cluster.create_stream_and_topic(&args.stream, &args.topic, args.partitions);
            let primaries = (0..args.partitions)
                .map(|partition| {
                    let primary = if args.split {
                        partition as usize % args.nodes
                    } else {
                        LEADER
                    };
                    cluster.set_primary(stream_id, topic_id, partition, primary);
                    primary
                })
                .collect();
            Layout {
                stream: args.stream.clone(),
                stream_id,
                topic: args.topic.clone(),
                topic_id,
                primaries,
            }
        });
        Ok(Self { cluster, layout })
    }

    /// `iggy://iggy:iggy@127.0.0.1:P0,127.0.0.1:P1,...`, every node a seed (and the TLS
    /// options of a TLS cluster): what iggy-route takes.
    pub fn connection_string(&self) -> String {
        self.cluster.connection_string()
    }

    /// The metadata leader's address alone: the SDK 0.11.0 takes one node.
    pub fn sdk_connection_string(&self) -> String {
        self.cluster.sdk_connection_string(LEADER)
    }

    /// The stream and topic made at start, unless `--empty`.
    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// The cluster itself, to observe its logs and counters.
    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }

    /// What the binary prints: the connection strings, then each node and the partitions
    /// it leads.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "connection string: {}", self.connection_string());
        let _ = writeln!(
            text,
            "SDK 0.11.0 (one node): {}",
            self.sdk_connection_string()
        );
        for (node, addr) in self.cluster.addrs().iter().enumerate() {
            let role = if node == LEADER {
                " (metadata leader)"
            } else {
                ""
            };
            let _ = write!(text, "node {node}: {addr}{role}");
            if let Some(layout) = &self.layout {
                let led: Vec<String> = layout
                    .primaries
                    .iter()
                    .enumerate()
                    .filter(|&(_, primary)| *primary == node)
                    .map(|(partition, _)| partition.to_string())
                    .collect();
                match led.len() {
                    0 => {}
                    1 => {
                        let _ = write!(text, ", primary of partition {}", led.join(""));
                    }
                    _ => {
                        let _ = write!(text, ", primary of partitions {}", led.join(", "));
                    }
                }
            }
            text.push('\n');
        }
        match &self.layout {
            Some(layout) => {
                let _ = writeln!(
                    text,
                    "stream {:?} (id {}), topic {:?} (id {}): {} partitions",
                    layout.stream,
                    layout.stream_id,
                    layout.topic,
                    layout.topic_id,
                    layout.primaries.len()
                );
            }
            None => text.push_str("no stream or topic: clients create their own\n"),
        }
        text
    }

    /// Stops every node, waiting at most a few seconds for their tasks to end.
    pub async fn shutdown(self) {
        let _ = tokio::time::timeout(SHUTDOWN_LIMIT, self.cluster.shutdown()).await;
    }
}
