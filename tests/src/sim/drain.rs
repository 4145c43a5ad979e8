//! Carrying out a router's outputs, and the invariants checked after every step:
//! - a `Transmit` only on a link the router was told is connected and not yet gone;
//! - the refusal rule (see `wiretap.rs`);
//! - every request completes exactly once, and the log rules (see `ledger.rs`);
//! - the rules of polls, offset writes and admin requests (see `opsbook.rs`);
//! - the session moves only away from a node that is stopped or that a connect just
//!   failed to;
//! - lanes and the pending total stay within their configured bounds;
//! - after a drain, `poll_timeout` is `None` or not in the past, and after
//!   `handle_timeout` it is strictly later than now (no spinning).

use iggy_route_core::routing::RoutingCommands;
use iggy_route_core::{Event, Output};

use super::engine::Simulation;
use super::network::{ConnId, WriteResult};
use super::nodes::node_of_addr;
use super::scenario::NODES;
use crate::cluster::{Lookup, StoredMessage};

impl Simulation {
    /// Drain router `index` to `None`, carrying out each output.
    pub(super) fn drain(&mut self, index: usize, after_timeout: bool) {
        // Every output is consumed by one round, and a router queues a bounded number per
        // input; the bound only turns a bug into a failure instead of a hang.
        for _ in 0..100_000 {
            let Some(output) = self.routers[index].poll_output() else {
                self.check_deadline(index, after_timeout);
                return;
            };
            self.output(index, output);
        }
        self.fail(format_args!("router {index} produced outputs without end"));
    }

    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "`Output` is non_exhaustive: an output this simulation does not know fails the run"
    )]
    fn output(&mut self, index: usize, output: Output) {
        let now = self.now;
        match output {
            Output::Connect { link, node, addr } => {
                let id = ConnId {
                    router: index,
                    link,
                };
                self.trace
                    .line(now, format_args!("r{index} {link} connect {node} {addr}"));
                let Some(target) = node_of_addr(&addr, NODES) else {
                    self.fail(format_args!("router {index} dials unknown address {addr}"));
                };
                if !self.network.connect(now, id, target) {
                    self.fail(format_args!("router {index} reused link id {link}"));
                }
                self.wiretap.connect(index, link, target);
            }
            Output::Transmit { link, bytes } => {
                let id = ConnId {
                    router: index,
                    link,
                };
                self.trace.line(
                    now,
                    format_args!("r{index} {link} transmit {}B", bytes.len()),
                );
                let discovering =
                    self.routers[index].routing_commands() == RoutingCommands::Unsupported;
                let checked = self.wiretap.write(index, link, &bytes, now, discovering);
                if let Err(message) = checked {
                    self.fail(format_args!("{message}"));
                }
                match self.network.write(now, id, bytes) {
                    WriteResult::Sent | WriteResult::Lost => {}
                    WriteResult::NotConnected => self.fail(format_args!(
                        "router {index} transmits on {link}, which is {:?} for it",
                        self.network.view(id)
                    )),
                }
            }
            Output::Close { link } => {
                let id = ConnId {
                    router: index,
                    link,
                };
                self.trace.line(now, format_args!("r{index} {link} close"));
                if !self.network.close(id) {
                    self.fail(format_args!(
                        "router {index} closes {link}, which it never opened"
                    ));
                }
                self.router_closed(id);
                if let Some(node) = self.wiretap.unsigned_node(index, link) {
                    // A login that timed out: the attempt to reach that node failed.
                    self.connect_failed_node = Some(node);
                }
                self.wiretap.gone(index, link);
            }
            Output::Completed { id, outcome } => {
                self.trace
                    .line(now, format_args!("r{index} completed {id} {outcome:?}"));
                let result = if self.members.owns(index, id) {
                    self.member_completed(index, id, outcome)
                } else if self.opsbook.owns(index, id) {
                    self.op_completed(index, id, &outcome)
                } else {
                    self.ledger
                        .completed(index, id, &outcome)
                        .and_then(|()| self.opsbook.send_completed(index, id, &outcome))
                };
                if let Err(message) = result {
                    self.fail(format_args!("{message}"));
                }
            }
            Output::Event(event) => {
                self.trace
                    .line(now, format_args!("r{index} event {event:?}"));
                match event {
                    Event::SessionMoved { from, .. } => self.session_moved(index, from),
                    Event::PartitionsChanged { from, to, .. } => {
                        self.keyed.event(index, from, to, now);
                    }
                    _ => {}
                }
            }
        }
    }

    fn session_moved(&mut self, index: usize, from: iggy_route_core::NodeId) {
        self.session_moves += 1;
        let addr = self.routers[index].node_addr(from).unwrap_or_default();
        let Some(node) = node_of_addr(addr, NODES) else {
            self.fail(format_args!(
                "router {index} moved its session from unknown {from}"
            ));
        };
        let unreachable = !self.nodes.is_running(node) || self.connect_failed_node == Some(node);
        if !unreachable {
            self.fail(format_args!(
                "router {index} moved its session away from node {node}, which runs and did not \
                 just refuse a connect"
            ));
        }
    }

    fn check_deadline(&self, index: usize, after_timeout: bool) {
        let now = self.instant();
        let Some((deadline, reason)) = self.routers[index].next_timer() else {
            return;
        };
        if deadline < now || (after_timeout && deadline == now) {
            self.fail(format_args!(
                "router {index} asks for a timeout ({reason:?}) at {:?} after a full drain at \
                 {:?} (after handle_timeout: {after_timeout})",
                deadline.saturating_duration_since(self.base),
                self.now
            ));
        }
    }

    /// The checks that look at the whole run after each step.
    pub(super) fn check_step(&mut self) {
        self.check_ops();
        self.check_group();
        let topic = self.topic;
        let logs: Vec<&[StoredMessage]> = (0..topic.partitions)
            .map(|partition| {
                self.nodes
                    .state
                    .catalog
                    .partition(Lookup::Id(topic.stream), Lookup::Id(topic.topic), partition)
                    .map_or(&[][..], |found| {
                        // The simulation's cluster holds every payload (`SimNodes::new`).
                        found
                            .log
                            .complete()
                            .unwrap_or_else(|| panic!("the simulation's cluster dropped a payload"))
                    })
            })
            .collect();
        let mut result = Ok(());
        for (partition, log) in (0u32..).zip(&logs) {
            result = result.and_then(|()| self.ledger.scan(partition, log));
        }
        let result = result.and_then(|()| self.ledger.verify_acks(&logs));
        let keyed = &mut self.keyed;
        let result = result.and_then(|()| {
            (0u32..)
                .zip(&logs)
                .try_for_each(|(partition, log)| keyed.scan(partition, log))
        });
        if let Err(message) = result {
            self.fail(format_args!("{message}"));
        }
        for (index, router) in self.routers.iter().enumerate() {
            let config = &self.configs[index];
            let longest = router.lane_lengths().into_iter().max().unwrap_or(0);
            let pending = router.pending_count();
            let percent = |value: usize, bound: usize| (value * 100 / bound.max(1)) as u64;
            self.lane_peak_percent = self
                .lane_peak_percent
                .max(percent(longest, config.max_pending_per_lane));
            self.pending_peak_percent = self
                .pending_peak_percent
                .max(percent(pending, config.max_pending_requests));
            if longest > config.max_pending_per_lane {
                self.fail(format_args!(
                    "router {index} has a lane of {longest} requests, over its bound of {}",
                    config.max_pending_per_lane
                ));
            }
            if pending > config.max_pending_requests {
                self.fail(format_args!(
                    "router {index} holds {pending} requests, over its bound of {}",
                    config.max_pending_requests
                ));
            }
        }
    }
}
