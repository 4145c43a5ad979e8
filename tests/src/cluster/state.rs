//! The shared, sans-IO model of one test cluster.
//!
//! Every node of a real Iggy cluster holds a replica of the same metadata (users, sessions,
//! streams, topics, partitions) and of every partition's log. All nodes of a test cluster
//! share this one `ClusterState`. What differs per node is *which role* it plays (the
//! metadata leader, one node, protocol §3.5; the primary of each partition, any node, §8)
//! and *how late* its copy is: a real follower answers metadata reads, and a real backup
//! serves polls, from a copy that lags the commit by up to half a second ([`Lag`]). A
//! request is admitted only where the model says the role sits.
//!
//! Nothing here does I/O or reads a clock: the driver (or a simulation) passes the time in
//! with [`ClusterState::set_now_micros`].

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use iggy_route_core::wire::{Password, Permissions, UserStatus};

use super::catalog::Catalog;
use super::log::Retention;
use super::revocations::{self, REBALANCING_TIMEOUT};
use super::sign_in_lag::{KnownSignIn, SignInHistory};
use super::tls::ServerCertificate;
use super::users::Users;

/// Index of a node in the cluster, `0..nodes`.
pub type NodeId = usize;

/// Settings of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Number of nodes, 1..=5.
    pub nodes: usize,
    /// When false, the routing commands 14, 103, 104 and 123 are answered with
    /// `InvalidCommand (3)`, as servers built before them do.
    pub routing_commands: bool,
    /// The cluster name reported by `GET_CLUSTER_METADATA`.
    pub name: String,
    /// How late followers and backups see what the leader and the primaries commit.
    pub lag: Lag,
    /// The id of the first stream and of each stream's first topic: 0 as on the real
    /// cluster (server 0.9.0-edge.5), 1 as on the servers the protocol document describes.
    pub first_id: u32,
    /// How much of each partition's payloads the cluster holds (see [`Retention`]).
    pub retention: Retention,
    /// When set, every node accepts TLS 1.2/1.3 connections only, presenting this
    /// certificate (made at start; see `TestCluster::tls_ca_file`). The model does not
    /// see it: it is the driver's, as TLS is the transport's.
    pub tls: Option<ServerCertificate>,
    /// How long a consumer group's pending revocation waits for its source to drain the
    /// partition before it completes anyway: the server's `rebalancing_timeout` (section
    /// `consumer_group`), 30 s by default (see `super::revocations`).
    pub rebalancing_timeout: Duration,
}

impl ClusterConfig {
    /// A cluster of `nodes` nodes with the routing commands enabled, the lag of a real
    /// cluster ([`Lag::REAL_CLUSTER`]) and its 0-based stream and topic ids.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            routing_commands: true,
            name: "iggy-route-test".to_owned(),
            lag: Lag::REAL_CLUSTER,
            first_id: 0,
            retention: Retention::default(),
            tls: None,
            rebalancing_timeout: REBALANCING_TIMEOUT,
        }
    }
}

/// How far behind the committing node the other nodes answer reads (observed on a real
/// 3-node cluster: `docs/real-cluster.md`, "What this server does").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    /// A node other than the metadata leader answers `GET_STREAM` and `GET_TOPIC` with the
    /// catalog as it was this long ago: a stream or topic created since reads as absent,
    /// partitions added since are missing, and the reply's `commit` is the commit of then.
    pub follower_metadata: Duration,
    /// A node other than the partition's primary serves a plain poll with only the messages
    /// stored at least this long ago (the primary serves everything at once).
    pub backup_messages: Duration,
    /// How long a partition write (a send, an offset store) takes to commit while the node
    /// after its primary in the replica chain is stopped: the primary waits for its prepare
    /// retransmit before the next replica acknowledges. Zero otherwise.
    pub commit_with_next_replica_down: Duration,
    /// How long every partition write takes to commit with all replicas up: zero models a
    /// commit as fast as loopback, a few ms a slow disk or a distant replica (the demo's
    /// `--slow-commit-ms`). Both waits are for the same acknowledgement, so a commit with the
    /// next replica down takes the longer of the two, not their sum.
    pub partition_commit: Duration,
}

impl Lag {
    /// Every node sees every commit at once (unit tests of the model, which set no clock).
    pub const NONE: Lag = Lag {
        follower_metadata: Duration::ZERO,
        backup_messages: Duration::ZERO,
        commit_with_next_replica_down: Duration::ZERO,
        partition_commit: Duration::ZERO,
    };

    /// What a real cluster showed: a created stream appeared on a follower 172 ms later and
    /// added partitions up to ~500 ms later; a stored message reached a backup's polls
    /// 145-513 ms later (its commit broadcast runs every 500 ms). The model takes a fixed
    /// figure inside those ranges. With the next replica of a partition's chain killed, each
    /// commit waited for the 250 ms prepare retransmit (one send in flight: 4 sends/s).
    pub const REAL_CLUSTER: Lag = Lag {
        follower_metadata: Duration::from_millis(200),
        backup_messages: Duration::from_millis(250),
        commit_with_next_replica_down: Duration::from_millis(250),
        partition_commit: Duration::ZERO,
    };
}

/// How long after a purge (`PURGE_TOPIC`, `PURGE_STREAM`) is acknowledged every replica's
/// copy of each purged partition is wiped: its log reset to one empty segment at offset 0
/// and its consumer offsets cleared.
///
/// The server's purge commit only advances each partition's purge generation and zeroes the
/// shared counters that `GET_TOPIC`/`GET_STREAM`/`GET_STATS` read
/// (`core/metadata/src/stm/stream.rs`, `PurgeTopicRequest`/`PurgeStreamRequest`); the wipe
/// is done later by each shard's partition reconciler (`core/server/src/
/// partition_reconciler.rs`, `reconcile_partition_purges`), woken by the metadata commit
/// tick right after the apply (or, should that wake be dropped, by its periodic pass,
/// `reconcile_periodic_interval`, 1 s by default), which stages a `PurgePartition` for the
/// shard's pump: unlink the segments, plant a fresh one, delete the offset files, with an
/// fsync of each directory and of the generation record (`IggyPartition::purge`,
/// `core/partitions/src/iggy_partition.rs`). That is one wake plus a few file operations and
/// fsyncs: milliseconds on a disk, and a poll sent the moment the ack arrived was seen to
/// return the pre-purge messages. The model takes 10 ms, the common case, not the 1 s of a
/// dropped wake. Unlike [`Lag`], it is the same on every cluster, [`Lag::NONE`] included:
/// the wipe always comes after the ack, and a test sees it by moving the clock past it
/// ([`ClusterState::set_now_micros`]).
pub const PURGE_RECONCILE: Duration = Duration::from_millis(10);

/// Metadata commits remembered with their time, for followers' late answers.
const COMMIT_HISTORY_MAX: usize = 4096;

/// A registered client session, as the metadata client table would hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session fence epoch handed out by the login reply.
    pub session: u64,
    /// The authenticated user.
    pub user_id: u32,
    /// The node the session was registered through.
    pub node: NodeId,
}

/// Counters of one node, for tests to assert on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Requests received, by command code (replicated operations are counted under their
    /// command code, e.g. `SendMessages` under 101).
    pub requests_by_code: BTreeMap<u32, u64>,
    /// Replies carrying `TransientNotAccepted (58)`, on the status channel or in a result
    /// section: requests this node refused because it does not hold the needed role.
    pub refusals: u64,
    /// Successful logins (`LOGIN_REGISTER`).
    pub logins: u64,
    /// Logins refused (bad credentials, malformed, incompatible version).
    pub login_failures: u64,
    /// Eviction frames sent.
    pub evictions: u64,
    /// Connections open right now.
    pub open_connections: u64,
    /// Connections accepted since the cluster started.
    pub connections_total: u64,
}

impl NodeStats {
    /// Requests received with `code`.
    pub fn requests(&self, code: u32) -> u64 {
        self.requests_by_code.get(&code).copied().unwrap_or(0)
    }
}

/// A node as the roster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Roster name, `node-<index>`.
    pub name: String,
    /// The loopback address the node listens on (port 0 until the driver bound it).
    pub addr: SocketAddr,
    /// False while the driver has the node stopped.
    pub running: bool,
}

/// The shared state of one cluster: see the module doc.
#[derive(Debug)]
pub struct ClusterState {
    name: String,
    nodes: Vec<NodeInfo>,
    users: Users,
    /// Credentials replaced by committed changes, for followers that lag (see
    /// `sign_in_lag`).
    sign_ins: SignInHistory,
    sessions: BTreeMap<u128, SessionRecord>,
    /// Streams, topics, partitions, logs and consumer offsets.
    pub catalog: Catalog,
    /// How much of each partition's payloads is held.
    pub retention: Retention,
    metadata_leader: NodeId,
    /// The metadata commit counter, the watermark source of §5.8.
    commit: u64,
    routing_commands: bool,
    stats: Vec<NodeStats>,
    now_micros: u64,
    last_timestamp: u64,
    lag: Lag,
    /// `(time µs, commit)` of recent metadata commits, oldest first, at most
    /// [`COMMIT_HISTORY_MAX`].
    commit_history: VecDeque<(u64, u64)>,
    /// How long the reply just built waits for its commit (see [`Lag`]): set by the
    /// handler, taken by whoever writes the reply.
    reply_commit_delay: Duration,
    /// The last transport id handed to a connection.
    last_transport_id: u128,
    /// The partition (stream, topic, partition ids) of the send just refused for not being
    /// its primary: set by the handler, taken by the driver, which timestamps it (the
    /// demo's recovery times start at a move's first refusal).
    refused_send: Option<(u32, u32, u32)>,
    /// See [`ClusterConfig::rebalancing_timeout`].
    rebalancing_timeout: Duration,
    /// The clock (µs) up to which the pending revocations were settled.
    revocations_settled_to: u64,
}

impl ClusterState {
    /// A fresh cluster: the root user, no streams, node 0 the metadata leader.
    ///
    /// # Panics
    /// If `config.nodes` is not in 1..=5 (a bug in the test, not peer input).
    pub fn new(config: &ClusterConfig) -> Self {
        assert!(
            (1..=5).contains(&config.nodes),
            "a test cluster has 1 to 5 nodes, not {}",
            config.nodes
        );
        let nodes = (0..config.nodes)
            .map(|index| NodeInfo {
                name: format!("node-{index}"),
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                running: true,
            })
            .collect();
        Self {
            name: config.name.clone(),
            nodes,
            users: Users::new(),
            sessions: BTreeMap::new(),
            catalog: Catalog::new(config.first_id),
            retention: config.retention.clone(),
            metadata_leader: 0,
            commit: 0,
            routing_commands: config.routing_commands,
            stats: vec![NodeStats::default(); config.nodes],
            now_micros: 0,
            last_timestamp: 0,
            lag: config.lag,
            commit_history: VecDeque::new(),
            sign_ins: SignInHistory::default(),
            reply_commit_delay: Duration::ZERO,
            last_transport_id: 0,
            refused_send: None,
            rebalancing_timeout: config.rebalancing_timeout,
            revocations_settled_to: 0,
        }
    }

    /// Notes that a send to this partition was just refused by a node that is not its
    /// primary.
    pub fn note_refused_send(&mut self, stream: u32, topic: u32, partition: u32) {
        self.refused_send = Some((stream, topic, partition));
    }

    /// The partition of the send refused by the request just handled, if one was.
    pub fn take_refused_send(&mut self) -> Option<(u32, u32, u32)> {
        self.refused_send.take()
    }

    // ---- nodes and roles -------------------------------------------------------------

    /// The cluster name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Every node, in roster order.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Record the address a node listens on.
    pub fn set_node_addr(&mut self, node: NodeId, addr: SocketAddr) {
        if let Some(info) = self.nodes.get_mut(node) {
            info.addr = addr;
        }
    }

    /// Record whether a node is running (the roster still lists stopped nodes, as a real
    /// cluster's static roster does).
    pub fn set_node_running(&mut self, node: NodeId, running: bool) {
        if let Some(info) = self.nodes.get_mut(node) {
            info.running = running;
        }
        // What a node holds in memory only dies with it: the groups' last polled offsets.
        if !running {
            revocations::forget_node(&mut self.catalog, node);
        }
    }

    /// The node the roster reports as `Leader`.
    pub fn metadata_leader(&self) -> NodeId {
        self.metadata_leader
    }

    /// Move the metadata leader (a metadata-only election: partition primaries stay).
    ///
    /// # Panics
    /// If `node` is not a node of this cluster.
    pub fn set_metadata_leader(&mut self, node: NodeId) {
        assert!(node < self.nodes.len(), "no node {node}");
        self.metadata_leader = node;
    }

    /// Whether the routing commands 14/103/104/123 are served.
    pub fn routing_commands(&self) -> bool {
        self.routing_commands
    }

    /// Switch the routing commands on or off.
    pub fn set_routing_commands(&mut self, enabled: bool) {
        self.routing_commands = enabled;
    }

    // ---- metadata commit and time ----------------------------------------------------

    /// The metadata commit counter.
    pub fn commit(&self) -> u64 {
        self.commit
    }

    /// Advance the metadata commit by one op and return it: every metadata write and every
    /// login is one committed op.
    pub fn bump_commit(&mut self) -> u64 {
        self.commit_at(self.now_micros)
    }

    /// [`ClusterState::bump_commit`], for an op the model applies late: committed at
    /// `at` µs, no earlier than every commit before it.
    fn commit_at(&mut self, at: u64) -> u64 {
        self.commit += 1;
        if self.commit_history.len() == COMMIT_HISTORY_MAX {
            self.commit_history.pop_front();
        }
        self.commit_history.push_back((at, self.commit));
        self.commit
    }

    /// The lag this cluster models.
    pub fn lag(&self) -> Lag {
        self.lag
    }

    /// Change the lag from now on.
    pub fn set_lag(&mut self, lag: Lag) {
        self.lag = lag;
    }

    /// The instant (µs) up to which `node`'s metadata copy is complete: `None` when it is
    /// complete (the metadata leader, or no lag modelled).
    pub fn metadata_horizon(&self, node: NodeId) -> Option<u64> {
        if node == self.metadata_leader || self.lag.follower_metadata.is_zero() {
            return None;
        }
        Some(self.horizon(self.lag.follower_metadata))
    }

    /// The metadata commit `node` has applied: the leader's commit, or a follower's as of
    /// its horizon (0 when the history no longer reaches back that far, as a real shard
    /// without the metadata plane answers).
    pub fn commit_seen_by(&self, node: NodeId) -> u64 {
        match self.metadata_horizon(node) {
            None => self.commit,
            Some(horizon) => self
                .commit_history
                .iter()
                .rev()
                .find(|(at, _)| *at <= horizon)
                .map_or(0, |(_, commit)| *commit),
        }
    }

    /// The instant (µs) up to which a non-primary `node` of a partition whose primary is
    /// `primary` holds its messages: `None` when it holds them all.
    pub fn messages_horizon(&self, node: NodeId, primary: NodeId) -> Option<u64> {
        if node == primary || self.lag.backup_messages.is_zero() {
            return None;
        }
        Some(self.horizon(self.lag.backup_messages))
    }

    /// A partition write admitted by `primary` was just applied: its reply waits for the
    /// commit ([`Lag::partition_commit`]), longer while the node after `primary` in the
    /// replica chain is stopped.
    pub fn note_partition_commit(&mut self, primary: NodeId) {
        let count = self.nodes.len();
        let next_down = count > 1
            && self
                .nodes
                .get((primary + 1) % count)
                .is_some_and(|next| !next.running);
        self.reply_commit_delay = if next_down {
            self.lag
                .commit_with_next_replica_down
                .max(self.lag.partition_commit)
        } else {
            self.lag.partition_commit
        };
    }

    /// How long the reply just built must wait before it is written; resets to zero.
    pub fn take_reply_commit_delay(&mut self) -> Duration {
        std::mem::take(&mut self.reply_commit_delay)
    }

    fn horizon(&self, lag: Duration) -> u64 {
        let lag_micros = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        self.now_micros.saturating_sub(lag_micros)
    }

    /// A new connection's transport id: the server's own number for it, which its replies
    /// carry in `client` instead of the request's client id (seen on the real cluster).
    pub fn next_transport_id(&mut self) -> u128 {
        self.last_transport_id += 1;
        self.last_transport_id
    }

    /// Tell the model the wall-clock time (µs since the epoch). The time moving on is what
    /// applies a purge whose wipe has come due ([`PURGE_RECONCILE`]) and completes the
    /// consumer groups' pending revocations ([`ClusterState::settle_revocations`]).
    pub fn set_now_micros(&mut self, now_micros: u64) {
        self.now_micros = now_micros;
        self.settle();
    }

    /// Everything the passing time does: [`ClusterState::settle_purges`] and
    /// [`ClusterState::settle_revocations`]. Done whenever the clock is set and before
    /// every request is handled.
    pub fn settle(&mut self) {
        self.settle_purges();
        self.settle_revocations();
    }

    /// Complete every pending revocation the metadata leader's reconciler would have
    /// completed since the last call, each a committed metadata op at its tick (see
    /// `super::revocations`).
    pub fn settle_revocations(&mut self) {
        let from = self.revocations_settled_to;
        let to = self.now_micros;
        self.revocations_settled_to = from.max(to);
        if to <= from || !revocations::any_pending(&self.catalog) {
            return;
        }
        let (leader, timeout) = (self.metadata_leader, self.rebalancing_timeout);
        for at in revocations::settle(&mut self.catalog, leader, timeout, (from, to)) {
            self.commit_at(at);
        }
    }

    /// The clock as the driver or the simulation last set it (µs), unadjusted: what a
    /// revocation's age and the reconciler's ticks are measured on.
    pub fn clock_micros(&self) -> u64 {
        self.now_micros
    }

    /// See [`ClusterConfig::rebalancing_timeout`].
    pub fn rebalancing_timeout(&self) -> Duration {
        self.rebalancing_timeout
    }

    /// Change the rebalancing timeout from now on (revocations pending included).
    pub fn set_rebalancing_timeout(&mut self, timeout: Duration) {
        self.rebalancing_timeout = timeout;
    }

    /// Wipe every partition whose purge has come due by now ([`PURGE_RECONCILE`]). Done
    /// whenever the clock is set and before every request is handled, so nothing reads a
    /// log or an offset the real server would have wiped by then.
    pub fn settle_purges(&mut self) {
        let now = self.now_micros();
        self.catalog.settle_purges(now);
    }

    /// When a purge acknowledged now wipes its partitions ([`PURGE_RECONCILE`]).
    pub fn purge_due_micros(&self) -> u64 {
        let delay = u64::try_from(PURGE_RECONCILE.as_micros()).unwrap_or(u64::MAX);
        self.now_micros().saturating_add(delay)
    }

    /// A timestamp for a new record: the current time, made strictly increasing so that
    /// records stay ordered even when the clock is coarse or not set at all.
    pub fn next_timestamp(&mut self) -> u64 {
        self.last_timestamp = self.now_micros.max(self.last_timestamp + 1);
        self.last_timestamp
    }

    /// The current time (µs), never before the last timestamp handed out: what token
    /// expiry is checked against.
    pub fn now_micros(&self) -> u64 {
        self.now_micros.max(self.last_timestamp)
    }

    // ---- users and sessions ----------------------------------------------------------

    /// Add an active user with every global permission (a test's stand-in for an
    /// administrator); returns its id. A restricted user is made with
    /// [`ClusterState::users_mut`] or over the wire (`CREATE_USER`).
    ///
    /// # Panics
    /// If the username is not 3..=50 bytes or is taken, or the password is longer than
    /// 255 bytes: a bug in the test, not peer input.
    pub fn add_user(&mut self, username: &str, password: &str) -> u32 {
        let password = Password::new(password).expect("a test password of at most 255 bytes");
        let now = self.next_timestamp();
        self.users
            .create(
                username,
                password,
                UserStatus::Active,
                Some(Permissions::all()),
                now,
            )
            .map(|user| user.id)
            .unwrap_or_else(|code| panic!("cannot add user {username}: {code}"))
    }

    /// The user these credentials sign in, if they match an active user.
    pub fn authenticate(&self, username: &str, password: &str) -> Option<u32> {
        self.users.authenticate(username, password)
    }

    /// The user these credentials sign in on `node`: on a follower, as of its metadata
    /// horizon, so a password or name changed since is not known there yet and the one it
    /// replaced still is (see `sign_in_lag`).
    pub fn authenticate_on(&self, node: NodeId, username: &str, password: &str) -> Option<u32> {
        let Some(horizon) = self.metadata_horizon(node) else {
            return self.authenticate(username, password);
        };
        let active = |id: u32| {
            self.users
                .get(id)
                .is_some_and(|user| user.status == UserStatus::Active)
        };
        let stale = self.users.all().find(|user| {
            self.sign_ins.known_at(user.id, horizon) == KnownSignIn::AsOf { username, password }
        });
        if let Some(user) = stale {
            return active(user.id).then_some(user.id);
        }
        self.authenticate(username, password)
            .filter(|&id| self.sign_ins.known_at(id, horizon) == KnownSignIn::Current)
    }

    /// `user` signed in with `username` and `password` until a change committed now.
    pub fn sign_in_replaced(&mut self, user: u32, username: &str, password: &Password) {
        let now = self.now_micros;
        self.sign_ins.replaced(now, user, username, password);
    }

    /// Every user and personal access token.
    pub fn users(&self) -> &Users {
        &self.users
    }

    /// Every user and personal access token, mutably.
    pub fn users_mut(&mut self) -> &mut Users {
        &mut self.users
    }

    /// Register a session for `client_id`: one committed metadata op, whose number is the
    /// session epoch (protocol §3.2: the server uses the Register's commit op).
    pub fn register_session(&mut self, client_id: u128, user_id: u32, node: NodeId) -> u64 {
        let session = self.bump_commit();
        self.sessions.insert(
            client_id,
            SessionRecord {
                session,
                user_id,
                node,
            },
        );
        session
    }

    /// The live session registered for `client_id`.
    pub fn session(&self, client_id: u128) -> Option<SessionRecord> {
        self.sessions.get(&client_id).copied()
    }

    /// End a session (logout or the connection closed). Attachments to it die with it.
    pub fn end_session(&mut self, client_id: u128) {
        self.sessions.remove(&client_id);
        // A logout, a closed connection or an eviction ends the memberships too.
        self.catalog.session_ended(client_id);
    }

    /// Number of live sessions.
    pub fn live_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Every live session with its client id, by client id.
    pub fn sessions(&self) -> impl Iterator<Item = (u128, SessionRecord)> + '_ {
        self.sessions
            .iter()
            .map(|(client, record)| (*client, *record))
    }

    // ---- counters --------------------------------------------------------------------

    /// The counters of `node` (all zero for an unknown node).
    pub fn stats(&self, node: NodeId) -> NodeStats {
        self.stats.get(node).cloned().unwrap_or_default()
    }

    /// Mutable counters of `node`. Unknown nodes count into a scratch value, so a bad
    /// node id from a caller can never panic the model.
    pub fn stats_mut(&mut self, node: NodeId) -> &mut NodeStats {
        if node >= self.stats.len() {
            self.stats.resize_with(node + 1, NodeStats::default);
        }
        &mut self.stats[node]
    }

    /// Count one request with `code` on `node`.
    pub fn count_request(&mut self, node: NodeId, code: u32) {
        *self
            .stats_mut(node)
            .requests_by_code
            .entry(code)
            .or_insert(0) += 1;
    }

    /// Sum of refusals over all nodes.
    pub fn total_refusals(&self) -> u64 {
        self.stats.iter().map(|stats| stats.refusals).sum()
    }

    /// Sum of successful logins over all nodes.
    pub fn total_logins(&self) -> u64 {
        self.stats.iter().map(|stats| stats.logins).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cluster::users::ROOT_USER_ID;

    #[test]
    fn fresh_cluster_has_root_user_and_node_zero_as_leader() {
        let state = ClusterState::new(&ClusterConfig::new(3));
        assert_eq!(state.authenticate("iggy", "iggy"), Some(ROOT_USER_ID));
        assert_eq!(state.authenticate("iggy", "wrong"), None);
        assert_eq!(state.metadata_leader(), 0);
        assert_eq!(state.node_count(), 3);
        assert!(state.routing_commands());
    }

    #[test]
    fn every_session_gets_a_new_nonzero_epoch_from_the_commit() {
        let mut state = ClusterState::new(&ClusterConfig::new(1));
        let first = state.register_session(7, ROOT_USER_ID, 0);
        let second = state.register_session(8, ROOT_USER_ID, 0);
        assert!(first > 0);
        assert!(second > first);
        assert_eq!(state.commit(), second);
        state.end_session(7);
        assert_eq!(state.session(7), None);
        assert_eq!(state.session(8).map(|record| record.session), Some(second));
    }

    #[test]
    fn timestamps_increase_even_without_a_clock() {
        let mut state = ClusterState::new(&ClusterConfig::new(1));
        let first = state.next_timestamp();
        let second = state.next_timestamp();
        assert!(second > first);
        state.set_now_micros(1_000_000);
        assert_eq!(state.next_timestamp(), 1_000_000);
    }

    #[test]
    fn counters_of_an_unknown_node_do_not_panic() {
        let mut state = ClusterState::new(&ClusterConfig::new(1));
        state.count_request(9, 1);
        assert_eq!(state.stats(0).requests(1), 0);
    }
}
