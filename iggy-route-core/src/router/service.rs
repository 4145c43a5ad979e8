//! Turning routing decisions into work on links: the coordinator's queue, the per-node
//! ready queues, and opening data links as the pool allows.

use std::time::Instant;

use std::collections::VecDeque;

use tracing::debug;

use super::link::{Job, Link, LinkState};
use super::{CoordJob, Output, Router, encode};
use crate::event::LinkRole;
use crate::ids::{LinkId, NodeId};
use crate::routing::{Attempt, Decision, Target};
use crate::wire::{Operation, code};

impl Router {
    /// Finishes an input in turns (see [`Router::turn`]). A turn hands back to the routing
    /// layer only what it could not place; each such hand-back either marks a node tried
    /// for its lane (at most `max_nodes` per lane before the lane backs off or looks its
    /// route up) or releases a lane held by a request completed meanwhile, so
    /// `max_nodes + 2` turns place everything that can be placed. Should that bound ever be
    /// reached, the routing layer's remaining decisions stay queued and `poll_timeout`
    /// says `now`: the next `handle_timeout` goes on from there.
    pub(super) fn run_turns(&mut self, now: Instant) {
        let turns_max = self.config.max_nodes.saturating_add(2);
        for _ in 0..turns_max {
            self.turn(now);
            // A turn may also settle a request itself (a leave whose membership ended while
            // it waited for its member link): its decisions are applied by the next turn.
            if self.unsent.is_empty() && !self.routing.has_decisions() {
                return;
            }
            self.report_unsent(now);
        }
        debug!(
            turns_max,
            "turn bound reached; the rest waits for the next handle_timeout"
        );
    }

    /// One turn: every routing decision queued so far is applied once, then the
    /// coordinator gets its next job, then every node with waiting requests gets its idle
    /// links and, where its pool has room, new ones (nodes in id order, one new link per
    /// node per wave, so that pools grow evenly). Requests that cannot be written are
    /// collected in `unsent`, not handed to routing while the turn runs.
    fn turn(&mut self, now: Instant) {
        self.apply_decisions();
        self.serve_coordinator(now);
        self.serve_nodes(now);
    }

    /// Hands the requests a turn could not write back to the routing layer, as not sent.
    pub(super) fn report_unsent(&mut self, now: Instant) {
        let mut unsent = std::mem::take(&mut self.unsent);
        for (request, target) in unsent.drain(..) {
            self.routing
                .handle_result(now, request, target, Attempt::NotSent);
        }
        // The buffer keeps its capacity for the next turn.
        self.unsent = unsent;
    }

    fn apply_decisions(&mut self) {
        while let Some(decision) = self.routing.poll_decision() {
            match decision {
                Decision::Write {
                    request,
                    coalesced,
                    target,
                    partition,
                } => {
                    for rider in &coalesced {
                        if let Some(entry) = self.requests.get_mut(rider) {
                            entry.partition = partition;
                        }
                    }
                    if let Some(entry) = self.requests.get_mut(&request) {
                        entry.partition = partition;
                        entry.riders = coalesced;
                    }
                    match target {
                        Target::Node(node) => {
                            self.ready.entry(node).or_default().push_back(request);
                        }
                        Target::Coordinator => {
                            self.coordinator.queue.push_back(CoordJob::Request(request));
                        }
                    }
                }
                Decision::FetchRoute { partition } => {
                    self.queue_lookup(CoordJob::Route(partition));
                }
                Decision::FetchTopic { topic } => {
                    self.queue_lookup(CoordJob::Topic(topic));
                }
                Decision::FetchRoster => {
                    if !self.coordinator.queue.contains(&CoordJob::Roster) {
                        self.coordinator.queue.push_back(CoordJob::Roster);
                    }
                }
                Decision::Completed { request, outcome } => self.finish_request(request, outcome),
                Decision::Event(event) => self.outputs.push_back(Output::Event(event)),
            }
        }
    }

    /// Queues one of the router's own lookups on the coordinator ahead of the callers'
    /// requests waiting there (after the lookups queued before it): every request of a
    /// partition or topic waits for it, and a caller's session request that the node keeps
    /// answering by ending the session must not hold up everyone else's sends.
    fn queue_lookup(&mut self, job: CoordJob) {
        let queue = &mut self.coordinator.queue;
        let first_request = queue
            .iter()
            .position(|queued| matches!(queued, CoordJob::Request(_)));
        match first_request {
            Some(at) => queue.insert(at, job),
            None => queue.push_back(job),
        }
    }

    /// Connects the coordinator if it has no link, and writes its next job if it is idle
    /// (skipping requests that were completed while they waited).
    fn serve_coordinator(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        let Some(link_id) = self.coordinator.link else {
            self.connect_coordinator(now);
            return;
        };
        while self.links.get(&link_id).is_some_and(Link::is_idle) {
            let Some(job) = self.coordinator.queue.pop_front() else {
                return;
            };
            self.write_coordinator_job(now, link_id, job);
        }
    }

    fn write_coordinator_job(&mut self, now: Instant, link_id: LinkId, job: CoordJob) {
        match job {
            CoordJob::Roster => {
                self.transmit(
                    now,
                    link_id,
                    Job::Roster,
                    Operation::NonReplicated,
                    code::GET_CLUSTER_METADATA,
                    &[],
                );
            }
            CoordJob::Route(partition) => {
                let body = encode::route_lookup_body(
                    &partition.topic.stream,
                    &partition.topic.topic,
                    partition.partition,
                );
                self.transmit(
                    now,
                    link_id,
                    Job::Route(partition),
                    Operation::NonReplicated,
                    code::GET_POLL_ROUTING,
                    &body,
                );
            }
            CoordJob::Topic(topic) => {
                let body = encode::get_topic_body(&topic.stream, &topic.topic);
                self.transmit(
                    now,
                    link_id,
                    Job::Topic(topic),
                    Operation::NonReplicated,
                    code::GET_TOPIC,
                    &body,
                );
            }
            CoordJob::Request(request) => {
                self.write_request(now, link_id, request, Target::Coordinator);
            }
        }
    }

    /// Gives idle data links the requests waiting for their node, and opens links where
    /// requests wait and the pool has room: one new link per node per wave, nodes in id
    /// order, at most a pool's worth of waves.
    fn serve_nodes(&mut self, now: Instant) {
        if self.groups.has_waiting() {
            self.serve_member_waiting(now);
        }
        let waves = self.config.data_links_per_node.max(1);
        for wave in 0..waves {
            let mut opened = false;
            let mut after: Option<NodeId> = None;
            while let Some(node) = self.next_waiting_node(after) {
                after = Some(node);
                if wave == 0 {
                    self.write_to_idle_links(now, node);
                }
                opened |= self.grow_pool(now, node);
            }
            if !opened {
                return;
            }
        }
    }

    /// The first node after `after` (in id order) with requests waiting.
    fn next_waiting_node(&self, after: Option<NodeId>) -> Option<NodeId> {
        let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.ready
            .range((from, std::ops::Bound::Unbounded))
            .find(|(_, queue)| !queue.is_empty())
            .map(|(node, _)| *node)
    }

    /// Writes waiting requests on the node's idle data links, in link id order.
    fn write_to_idle_links(&mut self, now: Instant, node: NodeId) {
        loop {
            let idle = self
                .links
                .values()
                .find(|l| l.node == node && l.in_pool() && l.is_idle())
                .map(|l| l.id);
            let Some(link) = idle else {
                return;
            };
            let Some(request) = self.ready.get_mut(&node).and_then(VecDeque::pop_front) else {
                return;
            };
            self.write_request(now, link, request, Target::Node(node));
        }
    }

    /// Opens one more data link to the node if requests wait for one and the pool has
    /// room; or, for a node unknown or failing with no link open, hands its requests back
    /// as not sent, so that routing looks elsewhere at once. Whether it did either.
    fn grow_pool(&mut self, now: Instant, node: NodeId) -> bool {
        let waiting = self.ready.get(&node).map_or(0, VecDeque::len);
        if waiting == 0 {
            return false;
        }
        let (open, starting) = self
            .links
            .values()
            .filter(|l| l.node == node && l.in_pool())
            .fold((0usize, 0usize), |(open, starting), l| {
                (
                    open + 1,
                    starting + usize::from(l.state != LinkState::Ready),
                )
            });
        // One link being opened at a time per waiting request, up to the pool size.
        if open >= self.config.data_links_per_node.max(1) || starting >= waiting {
            return false;
        }
        let limit = self.sign_in_limit();
        let Some(entry) = self.node(node) else {
            self.unsend_all(node);
            return true;
        };
        if entry.backing_off(now) && open == 0 {
            self.unsend_all(node);
            return true;
        }
        // In its backoff with links open, or out of sign-ins for now (which says nothing
        // of the node's health, so its requests wait rather than go elsewhere): the
        // `NodeRetry` timer wakes the router when a link may be opened.
        if entry.ready_at(now, limit).is_some() {
            return false;
        }
        self.open_link(now, node, LinkRole::Data);
        true
    }

    /// Every request waiting for `node` is handed back as not sent (by the next
    /// [`Router::report_unsent`]).
    pub(super) fn unsend_all(&mut self, node: NodeId) {
        if let Some(waiting) = self.ready.remove(&node) {
            self.unsent.extend(
                waiting
                    .into_iter()
                    .map(|request| (request, Target::Node(node))),
            );
        }
    }
}
