//! The simulation loop: time jumps to the earliest of the next delivery, the next fault,
//! the next submit and the earliest `poll_timeout` of any router (quinn-proto's
//! `Pair::step`), and exactly one input is applied per step. Outputs are drained and the
//! invariants checked after every step (`drain.rs`).

use std::time::{Duration, Instant};

use iggy_route_core::{CloseReason, Config, ConnectError, Router, SubmitError};

use super::SimReport;
use super::faults::{Fault, FaultSchedule};
use super::group_check::GroupCheck;
use super::keyed_check::KeyedCheck;
use super::ledger::Ledger;
use super::members::{self, Members};
use super::network::{ConnId, Delivery, Network};
use super::nodes::{SimNodes, SimTopic};
use super::ops::Ops;
use super::opsbook::OpsBook;
use super::pauses::Pauses;
use super::rng::SimRng;
use super::scenario::{NODES, PARTITIONS, Scenario};
use super::trace::Trace;
use super::wiretap::Wiretap;
use super::workload::Workload;

/// Most steps one seed may take: a bound on the loop, far above what a run needs.
const STEPS_MAX: u64 = 1_000_000;
/// How long the run goes on after the last request completed and the last fault struck,
/// to watch the routers idle (heartbeats, idle links closing, no spinning).
const QUIET_PERIOD: Duration = Duration::from_millis(2_500);
/// The model's wall clock at simulated time zero (µs since the epoch), fixed so that
/// stored timestamps are the same on every run.
const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

/// What the next step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Next {
    Deliver,
    Fault,
    Submit,
    Op,
    Timeout(usize),
    Member(usize),
}

/// One run. See the module doc.
#[derive(Debug)]
pub(super) struct Simulation {
    pub(super) scenario: Scenario,
    pub(super) base: Instant,
    pub(super) now: Duration,
    pub(super) step: u64,
    pub(super) network: Network,
    pub(super) nodes: SimNodes,
    /// What paused nodes hold (`pauses.rs`).
    pub(super) pauses: Pauses,
    pub(super) topic: SimTopic,
    pub(super) routers: Vec<Router>,
    pub(super) configs: Vec<Config>,
    workload: Workload,
    pub(super) ops: Ops,
    faults: FaultSchedule,
    pub(super) ledger: Ledger,
    /// Where each key landed across the count change (`keyed_check.rs`).
    pub(super) keyed: KeyedCheck,
    pub(super) opsbook: OpsBook,
    pub(super) wiretap: Wiretap,
    pub(super) trace: Trace,
    /// The consumer-group members (`members.rs`).
    pub(super) members: Members,
    /// The checker of the group's promise (`group_check.rs`).
    pub(super) group_check: GroupCheck,
    /// Per router: whether `ops.rs` planned a join of the group for it.
    pub(super) raw_joiners: Vec<bool>,
    /// The node a connection attempt just failed to, during the step that reports it: the
    /// one case besides a stopped node in which the session may move. An attempt is the
    /// connect and the login: a link that ends before its login was answered counts (the
    /// core treats it as a failed connect, so that a node accepting and dropping every
    /// connection is not redialled in a loop).
    pub(super) connect_failed_node: Option<usize>,
    pub(super) session_moves: u64,
    /// The longest lane and the most pending requests any router had, as a fraction of
    /// their bounds in percent: shows how close the run came to them.
    pub(super) lane_peak_percent: u64,
    pub(super) pending_peak_percent: u64,
}

impl Simulation {
    /// Set up the run of `seed`. The real clock is read here once, for the base instant;
    /// the loop only ever adds simulated offsets to it.
    pub(super) fn new(seed: u64, verbose: bool) -> Self {
        let scenario = Scenario::from_seed(seed);
        let base = Instant::now();
        let mut nodes = SimNodes::new(
            NODES,
            scenario.routing_commands,
            scenario.rebalancing_timeout,
        );
        let mut rng = SimRng::new(seed, 0x70B1_C000);
        let primaries: Vec<usize> = (0..PARTITIONS).map(|_| rng.index(NODES)).collect();
        let topic = nodes.create_topic(&primaries);
        let workload = Workload::generate(&scenario, topic);
        let ops = Ops::generate(&scenario);
        let end = workload.end().max(ops.end());
        let raw_joiners = ops.joiners(scenario.routers);
        let members = Members::new(members::plan(&scenario, topic, end), scenario.routers);
        let faults = FaultSchedule::generate(&scenario, end + Duration::from_millis(500));
        let opsbook = OpsBook::new(scenario.routing_commands && !scenario.toggle_routing_commands);
        let network = Network::new(scenario.network, SimRng::new(seed, 0x0E7_4E7));
        let configs: Vec<Config> = (0..scenario.routers)
            .map(|index| scenario.router_config(index))
            .collect();
        let ledger = Ledger::new(scenario.delivery, PARTITIONS);
        let keyed = KeyedCheck::new(scenario.routers, PARTITIONS);
        let wiretap = Wiretap::new(scenario.routers, configs[0].route_backoff_initial);
        let mut trace = Trace::new(verbose);
        trace.line(
            Duration::ZERO,
            format_args!("scenario {scenario:?} primaries {primaries:?}"),
        );
        let mut sim = Self {
            scenario,
            base,
            now: Duration::ZERO,
            step: 0,
            network,
            nodes,
            pauses: Pauses::new(NODES),
            topic,
            routers: Vec::new(),
            configs,
            workload,
            ops,
            faults,
            ledger,
            keyed,
            opsbook,
            wiretap,
            trace,
            members,
            group_check: GroupCheck::default(),
            raw_joiners,
            connect_failed_node: None,
            session_moves: 0,
            lane_peak_percent: 0,
            pending_peak_percent: 0,
        };
        for index in 0..sim.scenario.routers {
            let seed = sim.scenario.router_seed(index);
            let router = Router::new(sim.configs[index].clone(), seed, base);
            sim.routers.push(router);
            sim.drain(index, false);
        }
        sim
    }

    /// Run to the end and check the final invariants.
    pub(super) fn run(mut self) -> SimReport {
        let mut quiet_from: Option<Duration> = None;
        loop {
            if self.step >= STEPS_MAX {
                self.fail(format_args!("the step bound of {STEPS_MAX} was reached"));
            }
            let settled = self.workload.next_at().is_none()
                && self.ops.next_at().is_none()
                && self.faults.remaining() == 0
                && self.ledger.all_completed()
                && self.opsbook.all_completed()
                && self.members.all_done();
            if settled && quiet_from.is_none() {
                quiet_from = Some(self.now);
            }
            let Some((at, next)) = self.next_event() else {
                break;
            };
            if quiet_from.is_some_and(|from| at > from + QUIET_PERIOD) {
                break;
            }
            if at > self.horizon() {
                self.fail(format_args!(
                    "simulated time ran past the horizon {:?}",
                    self.horizon()
                ));
            }
            self.now = self.now.max(at);
            self.step += 1;
            self.connect_failed_node = None;
            self.apply(next);
            self.check_step();
        }
        if let Err(message) = self.ledger.finish().and_then(|()| {
            let routers = &self.routers;
            self.opsbook.finish(&|router| {
                routers
                    .get(router)
                    .map_or(0, |r| r.stats().memberships_lost)
            })
        }) {
            self.fail(format_args!("{message}"));
        }
        if let Err(message) = self.finish_members() {
            self.fail(format_args!("{message}"));
        }
        self.report()
    }

    /// Everything must be over by then: the last submit, plus a request's whole life,
    /// plus slack for the quiet period.
    fn horizon(&self) -> Duration {
        self.workload
            .end()
            .max(self.ops.end())
            .max(self.members.end())
            + Duration::from_secs(2)
            + self.configs[0].request_timeout
            + QUIET_PERIOD
    }

    fn next_event(&self) -> Option<(Duration, Next)> {
        let mut best: Option<(Duration, Next)> = None;
        let mut consider = |at: Option<Duration>, next: Next| {
            if let Some(at) = at
                && best.is_none_or(|current| (at, next) < current)
            {
                best = Some((at, next));
            }
        };
        consider(self.network.next_at(), Next::Deliver);
        consider(self.faults.next_at(), Next::Fault);
        consider(self.workload.next_at(), Next::Submit);
        consider(self.ops.next_at(), Next::Op);
        for (index, router) in self.routers.iter().enumerate() {
            let at = router
                .poll_timeout()
                .map(|t| t.saturating_duration_since(self.base));
            consider(at, Next::Timeout(index));
        }
        for (k, member) in self.members.list.iter().enumerate() {
            consider(member.wake, Next::Member(k));
        }
        best
    }

    pub(super) fn instant(&self) -> Instant {
        self.base + self.now
    }

    fn apply(&mut self, next: Next) {
        match next {
            Next::Deliver => {
                if let Some(delivery) = self.network.pop_due(self.now) {
                    self.deliver(delivery);
                }
            }
            Next::Fault => {
                if let Some(fault) = self.faults.pop_due(self.now) {
                    self.strike(fault);
                }
            }
            Next::Submit => self.submit(),
            Next::Op => self.submit_op(),
            Next::Timeout(index) => {
                self.trace.line(self.now, format_args!("r{index} timeout"));
                let now = self.instant();
                self.routers[index].handle_timeout(now);
                self.drain(index, true);
            }
            Next::Member(k) => self.step_member(k),
        }
    }

    fn deliver(&mut self, delivery: Delivery) {
        let now = self.instant();
        match delivery {
            Delivery::Syn(id) => {
                let node = self.network.node_of(id).unwrap_or(usize::MAX);
                let accepted = self.nodes.accept(id, node);
                self.trace_conn(id, format_args!("syn n{node} accepted={accepted}"));
                if accepted {
                    self.network.accept(self.now, id);
                } else {
                    self.network.refuse(self.now, id);
                }
            }
            Delivery::Connected(id) => {
                self.trace_conn(id, format_args!("connected"));
                self.routers[id.router].handle_connected(now, id.link);
                self.drain(id.router, false);
            }
            Delivery::ConnectFailed(id) => {
                self.trace_conn(id, format_args!("connect failed"));
                self.connect_failed_node = self.network.node_of(id);
                self.wiretap.gone(id.router, id.link);
                self.routers[id.router].handle_connect_failed(
                    now,
                    id.link,
                    ConnectError::Unreachable,
                );
                self.drain(id.router, false);
            }
            Delivery::ToNode(id, bytes) => {
                let node = self.network.node_of(id).unwrap_or(usize::MAX);
                if self.pauses.is_paused(node) {
                    self.trace_conn(id, format_args!("to paused n{node} {}B", bytes.len()));
                    self.pauses.hold(node, id, bytes);
                } else {
                    self.trace_conn(id, format_args!("to n{node} {}B", bytes.len()));
                    self.node_reads(node, id, &bytes);
                }
            }
            Delivery::ToRouter(id, bytes) => {
                self.trace_conn(id, format_args!("read {}B", bytes.len()));
                // A link that ends on what its node answered before the login succeeded (a
                // garbage or stray answer) is a failed attempt to reach that node, after
                // which the session may move.
                if let Some(node) = self.wiretap.unsigned_node(id.router, id.link) {
                    self.connect_failed_node = Some(node);
                }
                self.wiretap.read(id.router, id.link, &bytes, self.now);
                self.routers[id.router].handle_read(now, id.link, &bytes);
                self.drain(id.router, false);
            }
            Delivery::Closed(id) => {
                self.trace_conn(id, format_args!("closed by peer"));
                if let Some(node) = self.wiretap.unsigned_node(id.router, id.link) {
                    self.connect_failed_node = Some(node);
                }
                self.wiretap.gone(id.router, id.link);
                self.routers[id.router].handle_closed(now, id.link, CloseReason::Peer);
                self.drain(id.router, false);
            }
        }
    }

    /// `node` reads `bytes` from `id` and answers.
    fn node_reads(&mut self, node: usize, id: ConnId, bytes: &[u8]) {
        let micros = EPOCH_MICROS + self.now.as_micros() as u64;
        let received = self.nodes.receive(id, bytes, self.now, micros);
        let reply_at = self.now + self.nodes.reply_delay(node) + received.commit_delay;
        for reply in received.replies {
            self.network.reply(reply_at, id, reply);
        }
        if received.close {
            self.trace_conn(id, format_args!("node closes"));
            self.cut(id);
        }
    }

    /// The router closed `id`: the node forgets it, after reading what it holds of it if
    /// it is paused.
    pub(super) fn router_closed(&mut self, id: ConnId) {
        let node = self.network.node_of(id).unwrap_or(usize::MAX);
        if !self.pauses.defer_close(node, id) {
            self.nodes.close(id);
        }
    }

    /// `node` resumes: it reads what it was sent while paused, then closes what the routers
    /// closed meanwhile.
    fn resume(&mut self, node: usize) {
        let resumed = self.pauses.resume(node);
        for (id, bytes) in resumed.held {
            self.trace_conn(id, format_args!("resumed n{node} reads {}B", bytes.len()));
            self.node_reads(node, id, &bytes);
        }
        for id in resumed.closed {
            self.nodes.close(id);
        }
    }

    fn trace_conn(&mut self, id: ConnId, args: std::fmt::Arguments<'_>) {
        self.trace
            .line(self.now, format_args!("r{} {} {args}", id.router, id.link));
    }

    /// Break a connection on both sides: the node forgets it now, the router hears later.
    pub(super) fn cut(&mut self, id: ConnId) {
        self.network.cut(self.now, id);
        self.pauses.cut(id);
        if self.nodes.holds_membership(self.topic, id) {
            // The nodes end that membership now; the router hears of it only later, and
            // may end it itself first (a leave closing a busy member link), counting no loss.
            self.opsbook.membership_cut(id.router);
        }
        self.nodes.close(id);
    }

    fn strike(&mut self, fault: Fault) {
        self.trace.line(self.now, format_args!("fault {fault:?}"));
        match fault {
            Fault::CutLink { pick } => {
                let established = self.network.established();
                if !established.is_empty() {
                    let id = established[(pick % established.len() as u64) as usize];
                    self.trace_conn(id, format_args!("cut"));
                    self.cut(id);
                }
            }
            Fault::StopNode(node) => {
                for id in self.pauses.kill(node) {
                    self.nodes.close(id);
                }
                self.nodes.stop(node);
                for id in self.network.open_to(node) {
                    self.cut(id);
                }
            }
            Fault::RestartNode(node) => self.nodes.restart(node),
            // An election never picks a node that cannot take part in it.
            Fault::MovePrimary { node, .. } | Fault::MoveLeader(node)
                if self.pauses.is_paused(node) =>
            {
                self.trace
                    .line(self.now, format_args!("n{node} is paused: not elected"));
            }
            Fault::MovePrimary { partition, node } => {
                self.nodes.set_primary(self.topic, partition, node);
            }
            Fault::MoveLeader(node) => self.nodes.state.set_metadata_leader(node),
            Fault::PauseNode(node) => self.pauses.pause(node),
            Fault::ResumeNode(node) => self.resume(node),
            Fault::ElectAway { from, to } => {
                for partition in 0..self.topic.partitions {
                    if self.nodes.primary(self.topic, partition) == Some(from) {
                        self.nodes.set_primary(self.topic, partition, to);
                    }
                }
                if self.nodes.state.metadata_leader() == from {
                    self.nodes.state.set_metadata_leader(to);
                }
            }
            Fault::SlowNode { node, delay } => self.nodes.set_reply_delay(node, delay),
            Fault::RoutingCommands(enabled) => self.nodes.state.set_routing_commands(enabled),
            Fault::Misbehave {
                node,
                behaviour,
                lasts,
            } => self.nodes.adversary.set(node, behaviour, self.now + lasts),
            Fault::StrayReply { pick } => {
                let established = self.network.established();
                if !established.is_empty() {
                    let id = established[(pick % established.len() as u64) as usize];
                    let stray = self.nodes.adversary.stray_reply(pick);
                    self.trace_conn(id, format_args!("stray reply"));
                    self.network.reply(self.now, id, stray);
                }
            }
        }
    }

    fn submit(&mut self) {
        let Some(send) = self.workload.pop_due(self.now) else {
            return;
        };
        let now = self.instant();
        let router = send.router;
        let result = self.routers[router].submit(now, send.request.clone());
        self.trace.line(
            self.now,
            format_args!(
                "r{router} submit batch {} p{} -> {result:?}",
                send.batch, send.partition
            ),
        );
        let id = match result {
            Ok(id) => Some(id),
            Err(SubmitError::QueueFull { .. }) => None,
            Err(other) => self.fail(format_args!(
                "router {router} refused a valid send: {other}"
            )),
        };
        if let Err(message) = self.ledger.submitted(id, &send) {
            self.fail(format_args!("{message}"));
        }
        if let Some(id) = id {
            self.keyed.submitted(&send);
            self.opsbook
                .send_submitted(router, id, send.partition, self.now);
        }
        self.drain(router, false);
    }

    /// Panic with the seed, the step and the end of the trace.
    pub(super) fn fail(&self, message: std::fmt::Arguments<'_>) -> ! {
        panic!(
            "seed {seed}: step {step} at {now:?}: {message}\n(replay: SIM_SEED={seed})\nlast trace lines:\n{tail}",
            seed = self.scenario.seed,
            step = self.step,
            now = self.now,
            tail = self.trace.tail(),
        );
    }

    fn report(&self) -> SimReport {
        let tally = self.ledger.tally();
        let ops = self.opsbook.tally();
        let consumers = self.members.stats();
        let members = self.members.tally;
        SimReport {
            seed: self.scenario.seed,
            steps: self.step,
            simulated: self.now,
            trace_hash: self.trace.hash(),
            submitted: tally.submitted,
            rejected: tally.rejected,
            acked: tally.acked,
            unknown: tally.unknown,
            failed: tally.failed,
            refusals: self.wiretap.refusals,
            returns_after_refusal: self.wiretap.returns,
            session_moves: self.session_moves,
            lane_peak_percent: self.lane_peak_percent,
            pending_peak_percent: self.pending_peak_percent,
            polls_ok: ops.polls_ok,
            polled: ops.polled,
            stores_ok: ops.stores_ok,
            admin_ok: ops.admin_ok,
            ops_failed: ops.failed,
            new_partition_acks: ops.new_partition_acks,
            syncs_as_member: ops.syncs_as_member,
            group_polls_read: ops.group_polls_read,
            group_resyncs: ops.group_resyncs,
            evicted_requests: ops.evicted,
            memberships_lost: self
                .routers
                .iter()
                .map(|r| r.stats().memberships_lost)
                .sum(),
            adversary: self.nodes.adversary.counts,
            replays: self.routers.iter().map(|r| r.stats().replays).sum(),
            protocol_violations: self
                .routers
                .iter()
                .map(|r| r.stats().protocol_violations)
                .sum(),
            coalesced: self.routers.iter().map(|r| r.stats().coalesced).sum(),
            refusal_views_followed: self
                .routers
                .iter()
                .map(|r| r.stats().refusal_views_followed)
                .sum(),
            balanced_passed_over: self
                .routers
                .iter()
                .map(|r| r.stats().balanced_passed_over)
                .sum(),
            balanced_passed_stalled: self
                .routers
                .iter()
                .map(|r| r.stats().balanced_passed_stalled)
                .sum(),
            members_built: members.built,
            member_handouts: self.group_check.handed_out,
            member_redeliveries: self.group_check.redelivered,
            member_commits: consumers.commits,
            member_commits_fenced: consumers.commits_fenced,
            members_dropped: members.dropped,
            members_shut_down: members.shut_down,
            second_consumers_refused: members.refused,
            member_spin_waits: members.spin_waits,
            pauses: self.pauses.resumes,
            paused_reads: self.pauses.reads,
            paused_reads_closed: self.pauses.reads_closed,
            ..self.keyed.report()
        }
    }
}
