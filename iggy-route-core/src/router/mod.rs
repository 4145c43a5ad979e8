//! The link layer and the router's outer face: what the adapters drive.
//!
//! # Drive contract
//! A [`Router`] is a value that is driven; it never blocks, sleeps, reads the clock or
//! touches a socket.
//! 1. Feed exactly one input, with the instant it happened: [`Router::submit`] (or
//!    [`Router::submit_waiting`]), [`Router::handle_connected`], [`Router::handle_connect_failed`],
//!    [`Router::handle_closed`], [`Router::handle_read`], [`Router::handle_timeout`] or
//!    [`Router::sign_in_as`].
//! 2. Drain [`Router::poll_output`] until it returns `None`, carrying out each output:
//!    open the connection of a `Connect`, write the bytes of a `Transmit` in order, close
//!    on `Close`, hand a `Completed` to its caller, log an `Event`.
//! 3. Read [`Router::poll_timeout`] and wait until then (or until the next input); at that
//!    instant call `handle_timeout`. Extra `handle_timeout` calls are harmless.
//!
//! # Links
//! One coordinator link carries the session: its login, the roster, route lookups, topic
//! reads and plain polls. It moves to another node only when its own node cannot be
//! reached. Every node that is some partition's primary gets a small pool of data links,
//! each with its own login; sends go there and carry that link's identity, and routed
//! polls and offset writes first attach the coordinator's consumer session (14).

mod account;
mod admission;
mod classify;
mod encode;
mod frames;
mod group_commit;
mod groups;
mod lifecycle;
mod link;
mod link_table;
mod membership;
mod node;
mod output;
mod replies;
mod requests;
mod service;
mod session_loss;
mod timer;
mod waiting;
mod write;

pub use output::{CloseReason, ConnectError, Output};
pub use timer::TimerKind;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use tracing::{trace, warn};

use crate::config::Config;
use crate::event::Stats;
use crate::ids::{LinkId, NodeId, PartitionKey, RequestId, TopicKey};
use crate::request::Request;
use crate::rng::Rng;
use crate::routing::{Routing, RoutingCommands, Target};

use groups::Groups;
use link_table::LinkTable;
use node::Node;

/// Work for the coordinator link, done one exchange at a time in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CoordJob {
    Roster,
    Route(PartitionKey),
    Topic(TopicKey),
    Request(RequestId),
}

#[derive(Debug)]
struct Coordinator {
    link: Option<LinkId>,
    node: NodeId,
    /// The session's identity, once signed in: what data links attach to.
    identity: Option<(u128, u64)>,
    queue: VecDeque<CoordJob>,
    signed_in_once: bool,
    /// The user the links are signed in as (every sign-in reports it), to recognise a
    /// change of that user named by its numeric id (see `account`).
    user_id: Option<u32>,
    /// When the credentials last changed (see `account`): until the change settles, a
    /// node other than the metadata leader may not know them yet.
    credentials_changed_at: Option<Instant>,
}

/// The router: routing decisions plus the links that carry them. See the module
/// documentation for the drive contract.
#[derive(Debug)]
pub struct Router {
    config: Config,
    routing: Routing,
    rng: Rng,
    last_now: Instant,
    nodes: Vec<Node>,
    links: LinkTable,
    next_link: u64,
    coordinator: Coordinator,
    /// Every accepted request, until it completes.
    requests: BTreeMap<RequestId, requests::Entry>,
    /// Requests decided for a node, waiting for an idle data link to it.
    ready: BTreeMap<NodeId, VecDeque<RequestId>>,
    /// Requests a turn could not write (see [`Router::run_turns`]); empty between inputs.
    unsent: Vec<(RequestId, Target)>,
    outputs: VecDeque<Output>,
    stats: Stats,
    closed: bool,
    /// The consumer groups we joined, and the requests waiting for their member link.
    groups: Groups,
    /// Calls waiting for room (see `Router::submit_waiting`).
    waiting: waiting::WaitingLine,
    /// Some link signed in with credentials no longer used waits to be closed (see
    /// `account`); saves looking for one on every input.
    links_retiring: bool,
}

impl Router {
    /// A router for the cluster at `config.seeds`. It starts by connecting the coordinator
    /// to the first seed; `seed` makes its client ids and backoff jitter reproducible.
    pub fn new(config: Config, seed: u64, now: Instant) -> Self {
        let nodes = config
            .seeds
            .iter()
            .take(config.max_nodes.max(1))
            .map(|addr| Node::new(addr))
            .collect();
        let routing = Routing::new(config.clone(), seed ^ 0x5EED_0F0B_00C0, now);
        let waiting = waiting::WaitingLine::new(config.max_pending_requests);
        let mut router = Self {
            config,
            routing,
            rng: Rng::new(seed),
            last_now: now,
            nodes,
            links: LinkTable::default(),
            next_link: 1,
            coordinator: Coordinator {
                link: None,
                node: NodeId(0),
                identity: None,
                queue: VecDeque::new(),
                signed_in_once: false,
                user_id: None,
                credentials_changed_at: None,
            },
            requests: BTreeMap::new(),
            ready: BTreeMap::new(),
            unsent: Vec::new(),
            outputs: VecDeque::new(),
            stats: Stats::default(),
            closed: false,
            groups: Groups::default(),
            waiting,
            links_retiring: false,
        };
        router.run_turns(now);
        router.refile_links();
        router
    }

    /// The transport connected `link`. Queues its login.
    pub fn handle_connected(&mut self, now: Instant, link: LinkId) {
        let now = self.clock(now);
        self.connected(now, link);
        self.settle(now);
    }

    /// The transport could not connect `link`.
    pub fn handle_connect_failed(&mut self, now: Instant, link: LinkId, reason: ConnectError) {
        let now = self.clock(now);
        trace!(%link, %reason, "connect failed");
        let connecting = self
            .links
            .get(&link)
            .is_some_and(|l| l.state == link::LinkState::Connecting);
        if connecting {
            self.connect_failed(now, link);
        } else {
            // Reported late, for a link that did connect: it is lost, and what is in
            // flight on it is settled as on any lost link (never silently dropped).
            self.link_gone(now, link);
        }
        self.settle(now);
    }

    /// `link` closed (by the peer, or an I/O error).
    pub fn handle_closed(&mut self, now: Instant, link: LinkId, reason: CloseReason) {
        let now = self.clock(now);
        trace!(%link, %reason, "closed");
        self.link_gone(now, link);
        self.settle(now);
    }

    /// Bytes that arrived on `link`, in order, split anywhere.
    pub fn handle_read(&mut self, now: Instant, link: LinkId, bytes: &[u8]) {
        let now = self.clock(now);
        self.read(now, link, bytes);
        self.settle(now);
    }

    /// Time passed. Harmless to call early or often.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        self.settle(now);
    }

    /// Finishes an input: its decisions are applied, then whatever fell due by `now` while
    /// it was handled is done too (a heartbeat owed by a link whose long exchange has just
    /// ended, a deadline that passed before a read was delivered). So after any input
    /// `poll_timeout` names `now` or later, never an instant that nobody will serve.
    fn settle(&mut self, now: Instant) {
        self.close_retired_links(now);
        self.run_turns(now);
        self.routing.handle_timeout(now);
        self.refile_links();
        let links_due = self.links.next().is_some_and(|(at, _)| at <= now);
        if links_due {
            self.link_timers(now);
        }
        // The first turns left nothing to do; only what fell due since needs more.
        if links_due || self.routing.has_decisions() {
            self.run_turns(now);
            self.refile_links();
        }
        if !self.waiting.is_empty() {
            self.serve_waiting(now);
        }
    }

    /// Files the next deadline of every link changed by this input.
    fn refile_links(&mut self) {
        let (config, requests, last_now) = (&self.config, &self.requests, self.last_now);
        self.links
            .refile(|link| timer::link_deadline(link, config, requests, last_now));
    }

    /// The next output, or `None` when there is nothing to do.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        let output = self.outputs.pop_front()?;
        match &output {
            Output::Connect { link, node, addr } => trace!(%link, %node, %addr, "connect"),
            Output::Transmit { link, bytes } => trace!(%link, len = bytes.len(), "transmit"),
            Output::Close { link } => trace!(%link, "close"),
            Output::Completed { id, outcome } => {
                trace!(request = %id, ok = outcome.is_ok(), "completed")
            }
            Output::Event(event) => trace!(?event, "event"),
        }
        Some(output)
    }

    /// Counters since the router was made.
    pub fn stats(&self) -> Stats {
        let routing = self.routing.stats();
        Stats {
            reconnects: self.stats.reconnects,
            session_moves: self.stats.session_moves,
            replays: self.stats.replays,
            protocol_violations: self.stats.protocol_violations,
            memberships_lost: self.stats.memberships_lost,
            ..routing
        }
    }

    /// The server's replica id of `node` (its place in the roster), once the roster has
    /// been read.
    pub fn replica_of(&self, node: NodeId) -> Option<u32> {
        self.routing.roster().replica_of(node)
    }

    /// The node that carries the session now.
    #[cfg(feature = "internals")]
    pub fn coordinator_node(&self) -> NodeId {
        self.coordinator.node
    }

    /// The address of a node, as the router dials it.
    #[cfg(feature = "internals")]
    pub fn node_addr(&self, node: NodeId) -> Option<&str> {
        self.node(node).map(|n| n.addr.as_str())
    }

    /// The route a partition has now.
    #[cfg(feature = "internals")]
    pub fn route(&self, partition: &PartitionKey) -> Option<NodeId> {
        self.routing.route(partition)
    }

    /// Whether the cluster answers the routing commands.
    #[cfg(feature = "internals")]
    pub fn routing_commands(&self) -> RoutingCommands {
        self.routing.routing_commands()
    }

    /// Requests accepted and not yet completed.
    #[cfg(feature = "internals")]
    pub fn pending_count(&self) -> usize {
        self.requests.len()
    }

    /// Every lane's queue length (for bound checks in tests and simulations).
    #[cfg(feature = "internals")]
    pub fn lane_lengths(&self) -> Vec<usize> {
        self.routing.lane_lengths()
    }

    /// Open links, and how many are signed in.
    #[cfg(feature = "internals")]
    pub fn link_count(&self) -> (usize, usize) {
        let ready = self
            .links
            .values()
            .filter(|l| l.state == link::LinkState::Ready)
            .count();
        (self.links.len(), ready)
    }

    /// Fails every pending request with `Shutdown` (and every call waiting for room with
    /// `Closed`), closes every link, and takes no more requests.
    pub fn shutdown(&mut self, now: Instant) {
        let now = self.clock(now);
        self.closed = true;
        self.close_line();
        // A write already handed out on a link may have been admitted: its caller hears
        // "unknown", not "shut down", which says that nothing was stored.
        let mut on_the_wire = BTreeMap::new();
        for link in self.links.values() {
            let Some(in_flight) = &link.in_flight else {
                continue;
            };
            for id in in_flight.carried() {
                let write = self
                    .requests
                    .get(&id)
                    .is_some_and(|entry| entry.request.facts().kind.is_write());
                if write {
                    on_the_wire.insert(id, link.node);
                }
            }
        }
        self.routing.shutdown_with_unknown(now, &on_the_wire);
        let links: Vec<LinkId> = self.links.keys().copied().collect();
        for link in links {
            self.links.remove(&link);
            self.outputs.push_back(Output::Close { link });
        }
        self.coordinator.link = None;
        self.coordinator.queue.clear();
        self.ready.clear();
        self.run_turns(now);
        self.refile_links();
    }

    fn clock(&mut self, now: Instant) -> Instant {
        if now > self.last_now {
            self.last_now = now;
        }
        self.last_now
    }

    fn node(&self, node: NodeId) -> Option<&Node> {
        self.nodes.get(node.0 as usize)
    }

    /// Sign-ins one node may be asked for within a second: a full pool and a coordinator,
    /// twice over. A node that ends every session it signs in (an eviction for each
    /// request, a drop after each login) is so redialled a few times a second at most.
    fn sign_in_limit(&self) -> usize {
        2 * (self.config.data_links_per_node.max(1) + 1)
    }

    fn node_mut(&mut self, node: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(node.0 as usize)
    }

    /// The node id of an address, adding it when new (up to `max_nodes`).
    fn node_for_addr(&mut self, addr: &str) -> Option<NodeId> {
        if let Some(index) = self.nodes.iter().position(|n| same_addr(&n.addr, addr)) {
            return u32::try_from(index).ok().map(NodeId);
        }
        if self.nodes.len() >= self.config.max_nodes {
            warn!(%addr, "node table full; roster entry ignored");
            return None;
        }
        self.nodes.push(Node::new(addr));
        u32::try_from(self.nodes.len() - 1).ok().map(NodeId)
    }

    /// Message id 0 means "give it one", as in the SDK: a random id, here from the seeded
    /// source so that a run stays reproducible.
    fn stamp_message_ids(&mut self, mut request: Request) -> Request {
        if let Request::Send(send) = &mut request {
            for message in &mut send.messages {
                if message.id == 0 {
                    message.id = self.rng.client_id();
                }
            }
        }
        request
    }

    fn routing_supported(&self) -> bool {
        self.routing.routing_commands() != RoutingCommands::Unsupported
    }
}

/// Two spellings of one address: `localhost` and `127.0.0.1` are the same node, as in the
/// SDK's leader check.
fn same_addr(a: &str, b: &str) -> bool {
    fn normal(addr: &str) -> String {
        addr.replacen("localhost:", "127.0.0.1:", 1)
    }
    a == b || normal(a) == normal(b)
}
