//! A real Iggy cluster, for the suite that runs against one (`tests/real_cluster.rs`).
//!
//! - `IGGY_ROUTE_REAL_CLUSTER=host:port,host:port,...`: the nodes, in roster order (node
//!   `N` is the `N`th address). Without it the suite's tests print that they were skipped.
//! - `IGGY_ROUTE_REAL_CLUSTER_CTL=COMMAND`: a command that takes `kill N` and `start N`
//!   (such as `tests/real-cluster/cluster.sh`), for the tests that stop nodes. Without
//!   it those tests are skipped.
//! - `IGGY_ROUTE_REAL_CLUSTER_USER` / `IGGY_ROUTE_REAL_CLUSTER_PASSWORD`: the credentials,
//!   `iggy`/`iggy` by default (the server's root user).
//! - `IGGY_ROUTE_REAL_CLUSTER_TLS_CA=FILE` (and `IGGY_ROUTE_REAL_CLUSTER_TLS_DOMAIN=NAME`):
//!   every client connects with TLS, trusting the PEM file's authorities and checking the
//!   nodes' certificates against the name (by default each address's host).
//!
//! On a real cluster a new partition's group starts at view 0, so its primary is node 0; a
//! node's death moves the groups it leads to the next node after a view change (about
//! 20 s), and a restarted node rejoins in about 15 s. [`RealCluster::split_primaries`]
//! uses that to spread one topic's primaries over every node.

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    Consumer, ConsumerKind, Identifier, Message, Name, PollMessagesReply, PollingStrategy,
};
use iggy_route_core::{AdminRequest, Config, Credentials, PollRequest, Reply, Request, TlsConfig};

use crate::scripted::clients::{Adapter, TestClient};

/// A view change after a node dies: the server's heartbeat timeout (5 s) and its election,
/// with room to spare.
pub const ELECTION_WAIT: Duration = Duration::from_secs(20);
/// A restarted node rejoining its groups.
pub const REJOIN_WAIT: Duration = Duration::from_secs(15);

/// The cluster the environment names.
#[derive(Debug, Clone)]
pub struct RealCluster {
    /// Node addresses, in roster order.
    pub nodes: Vec<String>,
    username: String,
    password: String,
    ctl: Option<String>,
    tls: Option<TlsConfig>,
}

impl RealCluster {
    /// The cluster of `IGGY_ROUTE_REAL_CLUSTER`, or `None` (after printing that `test` is
    /// skipped) when it is not set.
    pub fn from_env(test: &str) -> Option<RealCluster> {
        let Some(nodes) = std::env::var("IGGY_ROUTE_REAL_CLUSTER")
            .ok()
            .filter(|value| !value.trim().is_empty())
        else {
            println!("{test}: skipped (IGGY_ROUTE_REAL_CLUSTER is not set)");
            return None;
        };
        let nodes = nodes
            .split(',')
            .map(|node| node.trim().to_owned())
            .collect();
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        Some(RealCluster {
            nodes,
            username: var("IGGY_ROUTE_REAL_CLUSTER_USER", "iggy"),
            password: var("IGGY_ROUTE_REAL_CLUSTER_PASSWORD", "iggy"),
            ctl: std::env::var("IGGY_ROUTE_REAL_CLUSTER_CTL")
                .ok()
                .filter(|value| !value.trim().is_empty()),
            tls: std::env::var("IGGY_ROUTE_REAL_CLUSTER_TLS_CA")
                .ok()
                .filter(|value| !value.trim().is_empty())
                .map(|ca_file| TlsConfig {
                    domain: std::env::var("IGGY_ROUTE_REAL_CLUSTER_TLS_DOMAIN").ok(),
                    ca_file: Some(ca_file.into()),
                }),
        })
    }

    /// A cluster given directly (the demo's `--cluster` and `--ctl`).
    pub fn new(
        nodes: Vec<String>,
        username: String,
        password: String,
        ctl: Option<String>,
    ) -> RealCluster {
        RealCluster {
            nodes,
            username,
            password,
            ctl,
            tls: None,
        }
    }

    /// Whether there is a control command.
    pub fn has_ctl(&self) -> bool {
        self.ctl.is_some()
    }

    /// Sends refused by backups so far, summed over the nodes, from the control command's
    /// `refusals` (the servers' logs): `None` without a control command or a readable
    /// answer.
    pub fn refusals(&self) -> Option<u64> {
        let ctl = self.ctl.as_ref()?;
        let output = ctl_command(ctl, "refusals").output().ok()?;
        let text = String::from_utf8(output.stdout).ok()?;
        text.split_whitespace()
            .map(|field| {
                field
                    .rsplit_once('=')
                    .and_then(|(_, n)| n.parse::<u64>().ok())
            })
            .sum()
    }

    /// The cluster, if it also has a control command; else prints that `test` is skipped.
    pub fn with_ctl_from_env(test: &str) -> Option<RealCluster> {
        let cluster = Self::from_env(test)?;
        if cluster.ctl.is_none() {
            println!("{test}: skipped (IGGY_ROUTE_REAL_CLUSTER_CTL is not set)");
            return None;
        }
        Some(cluster)
    }

    /// A configuration whose coordinator (first seed) is `node`, then the others in order.
    ///
    /// # Panics
    /// If the credentials are not valid wire values.
    pub fn config(&self, coordinator: usize) -> Config {
        let mut seeds = vec![self.nodes[coordinator % self.nodes.len()].clone()];
        seeds.extend(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(node, _)| *node != coordinator % self.nodes.len())
                .map(|(_, address)| address.clone()),
        );
        let credentials = Credentials::user(self.username.clone(), self.password.clone())
            .unwrap_or_else(|error| panic!("credentials: {error}"));
        let mut config = Config::new(seeds, credentials);
        // Longer than an election, so that a send waits one out rather than failing.
        config.request_timeout = Duration::from_secs(60);
        config.tls.clone_from(&self.tls);
        config
    }

    /// `iggy://user:password@address` of `node`, as the SDK 0.11.0 parses a connection
    /// string (one address); `None` on a TLS cluster, whose options it would need too.
    pub fn sdk_connection_string(&self, node: usize) -> Option<String> {
        if self.tls.is_some() {
            return None;
        }
        let address = &self.nodes[node % self.nodes.len()];
        Some(format!(
            "iggy://{}:{}@{address}",
            self.username, self.password
        ))
    }

    /// A client of `adapter` whose coordinator is `node`.
    ///
    /// # Panics
    /// If it cannot connect.
    pub fn client(&self, adapter: Adapter, coordinator: usize) -> TestClient {
        TestClient::connect(adapter, self.config(coordinator))
            .unwrap_or_else(|error| panic!("connect to {}: {error}", self.nodes[coordinator]))
    }

    /// Runs the control command with `action` (`kill` or `start`) and `node`.
    ///
    /// # Panics
    /// If there is no control command or it fails.
    pub fn ctl(&self, action: &str, node: usize) {
        if let Err(error) = self.try_ctl(action, node) {
            panic!("{error}");
        }
    }

    /// [`Self::ctl`], with a failure returned (the demo reports it and goes on: a real
    /// node may fail to come back, as one did with a corrupt journal after a `kill`).
    pub fn try_ctl(&self, action: &str, node: usize) -> Result<(), String> {
        let Some(ctl) = &self.ctl else {
            return Err(format!("no control command to {action} node {node}"));
        };
        let status = ctl_command(ctl, &format!("{action} {node}"))
            .status()
            .map_err(|error| format!("run {ctl}: {error}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{ctl} {action} {node}: {status}"))
        }
    }

    /// Kills `node`, waits out the election, starts it again and waits for it to rejoin:
    /// the groups `node` led now have their primary on another node.
    pub fn bounce(&self, node: usize) {
        self.ctl("kill", node);
        std::thread::sleep(ELECTION_WAIT);
        self.ctl("start", node);
        std::thread::sleep(REJOIN_WAIT);
    }

    /// Creates stream `stream` with topic `topic` of six partitions whose primaries sit on
    /// `nodes` nodes (1 to 3), the way ordinary failovers put them: new groups start on
    /// node 0, and a bounced node's groups move one node on. With 3: partitions 0-1 on
    /// node 2, 2-3 on node 1, 4-5 on node 0 (three bounces, about 2 minutes); with 2:
    /// 0-1 on node 1, 2-5 on node 0 (one bounce); with 1: all on node 0. Returns the
    /// partition count. Use a client whose coordinator is node 2, which is never bounced.
    ///
    /// # Panics
    /// If a metadata write fails.
    pub fn spread_primaries(
        &self,
        client: &TestClient,
        stream: &str,
        topic: &str,
        nodes: usize,
    ) -> u32 {
        self.spread_partitions(client, stream, topic, nodes, 6)
    }

    /// [`Self::spread_primaries`] with `partitions` partitions when they all stay on one
    /// node (`nodes` 0 or 1); spreading over more nodes makes six.
    pub fn spread_partitions(
        &self,
        client: &TestClient,
        stream: &str,
        topic: &str,
        nodes: usize,
        partitions: u32,
    ) -> u32 {
        admin(client, create_stream(stream));
        match nodes {
            0 | 1 => {
                admin(client, create_topic(stream, topic, partitions));
                return partitions;
            }
            2 => {
                admin(client, create_topic(stream, topic, 2)); // 0-1 on node 0
                self.bounce(0); // 0-1 on node 1
                admin(client, create_partitions(stream, topic, 4)); // 2-5 on node 0
            }
            _ => {
                admin(client, create_topic(stream, topic, 2)); // 0-1 on node 0
                self.bounce(0); // 0-1 on node 1
                admin(client, create_partitions(stream, topic, 2)); // 2-3 on node 0
                self.bounce(1); // 0-1 on node 2
                self.bounce(0); // 2-3 on node 1
                admin(client, create_partitions(stream, topic, 2)); // 4-5 on node 0
            }
        }
        6
    }

    /// [`Self::spread_primaries`] over three nodes.
    pub fn split_primaries(&self, client: &TestClient, stream: &str, topic: &str) -> u32 {
        self.spread_primaries(client, stream, topic, 3)
    }
}

/// `ctl args` through the shell, without this process's `IGGY_*` variables: an Iggy
/// server started by the command refuses to start when it sees variables it does not know
/// (such as `IGGY_ROUTE_REAL_CLUSTER`).
///
/// It runs in the workspace's root, so that a relative command such as
/// `tests/real-cluster/cluster.sh` means the same from `cargo test` (whose tests run in
/// the crate's directory) as from the shell, and so does the state directory that script
/// keeps under its working directory.
fn ctl_command(ctl: &str, args: &str) -> Command {
    let mut command = Command::new("sh");
    command.arg("-c").arg(format!("{ctl} {args}"));
    if let Some(root) = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
        command.current_dir(root);
    }
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("IGGY_") {
            command.env_remove(key);
        }
    }
    command
}

/// A fresh name for this run's stream (the real cluster keeps what earlier runs made).
pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000)
}

fn named(name: &str) -> Identifier {
    Identifier::Named(Name::new(name).unwrap_or_else(|error| panic!("name {name}: {error}")))
}

/// `CREATE_STREAM`.
pub fn create_stream(name: &str) -> Request {
    Request::Admin(AdminRequest::CreateStream {
        name: Name::new(name).unwrap_or_else(|error| panic!("name {name}: {error}")),
    })
}

/// `CREATE_TOPIC` with `partitions` partitions.
pub fn create_topic(stream: &str, name: &str, partitions: u32) -> Request {
    Request::Admin(AdminRequest::CreateTopic {
        stream: named(stream),
        name: Name::new(name).unwrap_or_else(|error| panic!("name {name}: {error}")),
        partitions_count: partitions,
    })
}

/// `CREATE_PARTITIONS` adding `count`.
pub fn create_partitions(stream: &str, topic: &str, count: u32) -> Request {
    Request::Admin(AdminRequest::CreatePartitions {
        stream: named(stream),
        topic: named(topic),
        partitions_count: count,
    })
}

/// Runs a metadata request and panics if it fails.
pub fn admin(client: &TestClient, request: Request) -> Reply {
    let shown = format!("{request:?}");
    client
        .request(request)
        .unwrap_or_else(|error| panic!("{shown}: {error}"))
}

/// A send of one message with id `id` and payload `payload` to `partition`.
pub fn send(stream: &str, topic: &str, partition: u32, id: u128, payload: &str) -> Request {
    Request::Send(iggy_route_core::SendRequest {
        stream: named(stream),
        topic: named(topic),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            id,
            payload: Bytes::copy_from_slice(payload.as_bytes()),
            ..Message::default()
        }],
    })
}

/// A plain poll of `count` messages of `partition` from `offset`.
pub fn poll(stream: &str, topic: &str, partition: u32, offset: u64, count: u32) -> Request {
    Request::Poll(PollRequest {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        },
        stream: named(stream),
        topic: named(topic),
        partition_id: Some(partition),
        strategy: PollingStrategy::Offset(offset),
        count,
        auto_commit: false,
    })
}

/// Every message of `partition`, read from offset 0 to the end through `client`.
///
/// # Panics
/// If a poll fails or answers with something else.
pub fn read_all(client: &TestClient, stream: &str, topic: &str, partition: u32) -> Vec<u128> {
    let mut ids = Vec::new();
    let started = Instant::now();
    loop {
        let offset = ids.len() as u64;
        let reply = client.request(poll(stream, topic, partition, offset, 1000));
        let Ok(Reply::Polled(PollMessagesReply { messages, .. })) = reply else {
            panic!("poll of partition {partition} from {offset}: {reply:?}");
        };
        if messages.is_empty() || started.elapsed() > Duration::from_secs(120) {
            return ids;
        }
        ids.extend(messages.iter().map(|message| message.id));
    }
}

/// The node that admitted a send, or the error.
pub fn admitted_by(reply: Result<Reply, ClientError>) -> Result<u32, ClientError> {
    let reply = reply?;
    let Reply::Sent(receipt) = reply else {
        panic!("a send answered with {reply:?}");
    };
    Ok(receipt.node.0)
}
