//! What the link layer reports back: attempt results, lookup answers, rosters, watermarks.

use std::time::{Duration, Instant};

use tracing::debug;

use super::lane::{Lookup, Route};
use super::{
    Attempt, Decision, LaneKey, Place, RequestKind, Routing, RoutingCommands, Served, Target,
    TimerKey,
};
use crate::event::Event;
use crate::ids::{NodeId, PartitionKey, RequestId};
use crate::request::RequestError;
use crate::wire::ErrorCode;

impl Routing {
    /// The outcome of one attempt of `request`, written to `target`. For a frame that
    /// carried coalesced sends (see [`Decision::Write`]) it applies to each of them.
    pub fn handle_result(
        &mut self,
        now: Instant,
        request: RequestId,
        target: Target,
        attempt: Attempt,
    ) {
        let now = self.clock(now);
        let Some(pending) = self.pending.get(&request) else {
            return;
        };
        let place = pending.place.clone();
        let mut frame = FrameMembers::One([request]);
        if let Place::Lane(key) = &place {
            match self.lanes.get_mut(key) {
                Some(lane) if lane.active == Some(request) => {
                    lane.active = None;
                    if !lane.riders.is_empty() {
                        let mut members = std::mem::take(&mut lane.riders);
                        members.insert(0, request);
                        frame = FrameMembers::Many(members);
                    }
                }
                // A report for a request that is not in flight: nothing to act on.
                Some(_) | None => return,
            }
            // Requests their deadlines completed while in flight only held the lane.
            frame.retain(|id| {
                let over = self.pending.get(&id).is_none_or(|p| p.completed);
                if over {
                    self.pending.remove(&id);
                }
                !over
            });
            if frame.as_slice().is_empty() {
                self.pump_lane(now, key);
                return;
            }
        }
        let frame = frame.as_slice();
        match attempt {
            Attempt::NotSent | Attempt::Unknown if self.read_of_the_leader(&place, frame[0]) => {
                self.read_at_the_session(now, frame[0]);
            }
            Attempt::Done(served) => self.served(now, frame, &place, target, &served),
            Attempt::Refused | Attempt::RefusedNaming(_)
                if self.pending[&frame[0]].maybe_applied_at.is_some()
                    && !self.may_write_again(&self.pending[&frame[0]].facts.kind) =>
            {
                // A copy written before (answered 57) may still commit: refused now, it is
                // not written anywhere else.
                self.stats.refusals += 1;
                let node = node_of(target);
                let error = RequestError::OutcomeUnknown { node };
                self.complete_frame(now, frame, &place, &Err(error));
            }
            Attempt::Refused | Attempt::RefusedNaming(_) => {
                self.stats.refusals += 1;
                // The node answers: an election, not a silence (see `Lane::silent_since`).
                if let Place::Lane(key) = &place
                    && let Some(lane) = self.lanes.get_mut(key)
                {
                    lane.silent_since = None;
                }
                if let Target::Node(node) = target {
                    self.decisions.push_back(Decision::Event(Event::Refused {
                        request: frame[0],
                        node,
                    }));
                }
                let named = if let Attempt::RefusedNaming(named) = attempt {
                    Some(named)
                } else {
                    None
                };
                self.retry_elsewhere(now, frame, &place, target, named);
            }
            Attempt::NotSent => {
                if let Place::Lane(key) = &place
                    && let Some(lane) = self.lanes.get_mut(key)
                {
                    lane.silent_since.get_or_insert(now);
                }
                self.retry_elsewhere(now, frame, &place, target, None);
            }
            Attempt::NotYet(wait) => self.retry_after(now, frame, &place, wait),
            Attempt::Unknown => {
                for id in frame {
                    if let Some(pending) = self.pending.get_mut(id) {
                        pending.maybe_applied_at = Some(target);
                    }
                }
                if self.may_write_again(&self.pending[&frame[0]].facts.kind) {
                    self.requeue(now, frame, &place);
                } else {
                    let node = node_of(target);
                    let error = RequestError::OutcomeUnknown { node };
                    self.complete_frame(now, frame, &place, &Err(error));
                }
            }
            Attempt::Failed(RequestError::Server { code })
                if code.is_not_found()
                    && matches!(place, Place::Lane(LaneKey::Partition(_)))
                    && self.doubt_wait(now, self.deadline_of(frame[0])).is_some() =>
            {
                // Shortly after our own metadata write, a node whose partition plane has
                // not applied it yet does not know the partition (seen on the real
                // cluster right after `CREATE_PARTITIONS`). Nothing was admitted: try the
                // next node, as after a refusal, within the request's deadline.
                debug!(request = %frame[0], ?code, "partition unknown to the node soon after our write; trying elsewhere");
                self.retry_elsewhere(now, frame, &place, target, None);
            }
            Attempt::Failed(RequestError::Server {
                code: ErrorCode::InvalidOffset,
            }) if self.copy_may_lag(&place, frame[0], target) => {
                // The server checks an offset write against the node's own copy before it
                // checks for the primary, and a backup's copy lags the primary's: "past the
                // end" from one node says nothing yet. The next node is asked; once every
                // node has said it, it is believed.
                debug!(request = %frame[0], "offset past this node's copy, which may lag; trying elsewhere");
                if let (Some(pending), Some(node)) =
                    (self.pending.get_mut(&frame[0]), node_of(target))
                {
                    pending.past_end_from = Some(node);
                }
                self.retry_elsewhere(now, frame, &place, target, None);
            }
            Attempt::Failed(RequestError::Server { code })
                if code.is_not_found() && matches!(place, Place::Lane(LaneKey::Partition(_))) =>
            {
                // Another client's new topic, read moments ago (often from the leader),
                // that this partition's node has not applied yet. Nothing was admitted:
                // the same node is asked again once it may have (see `unknown_yet_wait`).
                match self.unknown_yet_wait(now, frame[0]) {
                    Some(wait) => {
                        debug!(request = %frame[0], ?code, ?wait, "partition unknown to its node, though just read; sending again");
                        self.retry_after(now, frame, &place, wait);
                    }
                    None => self.fail_frame(now, frame, &place, RequestError::Server { code }),
                }
            }
            Attempt::Failed(error) => self.fail_frame(now, frame, &place, error),
        }
    }

    /// A node admitted and answered the frame.
    fn served(
        &mut self,
        now: Instant,
        frame: &[RequestId],
        place: &Place,
        target: Target,
        served: &Served,
    ) {
        let head = frame[0];
        // A reply to a read any replica serves says nothing of the primary.
        let proves_primary = self
            .pending
            .get(&head)
            .is_some_and(|p| !self.served_by_any_replica(&p.facts));
        if let (Place::Lane(key @ LaneKey::Partition(partition)), Target::Node(node)) =
            (place, target)
        {
            if proves_primary {
                self.admitted(key, partition, node);
            } else if let Some(lane) = self.lanes.get_mut(key) {
                // A served read ends a round of failed links, and teaches nothing.
                lane.tried.clear();
                lane.backoff_streak = 0;
            }
        }
        if *place == Place::Lane(LaneKey::MetadataLeader)
            && let Some(lane) = self.lanes.get_mut(&LaneKey::MetadataLeader)
        {
            lane.silent_since = None;
        }
        if let Some(RequestKind::MetadataWrite(write)) =
            self.pending.get(&head).map(|p| &p.facts.kind)
        {
            let write = write.clone();
            self.own_write_at = Some(now);
            self.learn_own_write(now, &write, served);
        }
        let deadline = self.deadline_of(head);
        if matches!(served, Served::Absent | Served::Stranger)
            && *place == Place::Coordinator
            && let Some(wait) = self.doubt_wait(now, deadline)
        {
            // The caller's own read of what it may just have created, or a sync of the
            // group it may just have joined, answered by a node that may not have applied
            // it yet: ask again, paced.
            debug!(request = %head, ?served, "absent shortly after our own metadata write; reading again");
            self.timers.insert((now + wait, TimerKey::Retry(head)));
            return;
        }
        self.complete_frame(now, frame, place, &Ok(()));
    }

    /// Completes every request of a frame with the same outcome, in frame order, then moves
    /// the lane on once.
    pub(super) fn complete_frame(
        &mut self,
        now: Instant,
        frame: &[RequestId],
        place: &Place,
        outcome: &Result<(), RequestError>,
    ) {
        for &id in frame {
            let _ = self.settle(id, outcome.clone());
        }
        if let Place::Lane(key) = place {
            self.pump_lane(now, key);
        }
    }

    /// A node admitted a request of this partition: under discovery that is how the route
    /// is learned; under lookups it confirms the route.
    fn admitted(&mut self, key: &LaneKey, partition: &PartitionKey, node: NodeId) {
        let watermark = self.watermark;
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        lane.tried.clear();
        lane.backoff_streak = 0;
        lane.recheck_node = None;
        lane.silent_since = None;
        let known = lane.route.map(|r| r.node) == Some(node);
        // An admission confirms the route under today's watermark: a route first learned
        // before a metadata write stays fresh for as long as its node keeps admitting,
        // instead of being rediscovered (or looked up) before every send.
        lane.route = Some(Route { node, watermark });
        if !known {
            lane.generation += 1;
            self.decisions
                .push_back(Decision::Event(Event::RouteLearned {
                    partition: partition.clone(),
                    node,
                }));
        }
    }

    /// The frame was not admitted at `target`: drop the route that led there and act on
    /// it at once (the node the refusal `named`, a lookup, or the next candidate), never a
    /// replay on the same node. Its requests go back to the head of their lane in their
    /// order.
    fn retry_elsewhere(
        &mut self,
        now: Instant,
        frame: &[RequestId],
        place: &Place,
        target: Target,
        named: Option<NodeId>,
    ) {
        match (place, node_of(target)) {
            (Place::Lane(key), Some(node)) => {
                // A read whose link failed says nothing of the primary either: the route
                // stays, and the read skips its node for this round (`tried`).
                let read = self
                    .pending
                    .get(&frame[0])
                    .is_some_and(|p| self.served_by_any_replica(&p.facts));
                if let Some(lane) = self.lanes.get_mut(key) {
                    if !read && lane.route.is_some_and(|r| r.node == node) {
                        lane.route = None;
                    }
                    // Every node that did not admit since the last piece of route news is
                    // remembered, in both modes: if lookups give way to discovery, the nodes
                    // that refused under the lookup's route count as tried already.
                    if !lane.tried.contains(&node) {
                        lane.tried.push(node);
                    }
                    let generation = lane.generation;
                    for &id in frame.iter().rev() {
                        lane.queue.push_front(id);
                        if let Some(pending) = self.pending.get_mut(&id) {
                            pending.refused_by = Some((node, generation));
                        }
                    }
                }
                debug!(request = %frame[0], %node, "not admitted; rerouting");
                if !read && let Some(named) = named {
                    self.follow_refusal_view(key, node, named);
                }
                self.pump_lane(now, key);
            }
            // A lane request always goes to a node; were it ever reported from elsewhere,
            // it goes back to the head of its lane and asks again.
            (Place::Lane(_), None) => self.requeue(now, frame, place),
            (Place::Coordinator, _) => {
                // A read the coordinator's node could not serve yet (for example its
                // metadata floor): ask again after a short jittered wait.
                for &id in frame {
                    let wait = self.backoff_for(0);
                    self.timers.insert((now + wait, TimerKey::Retry(id)));
                }
            }
            (Place::Topic(_), _) => {}
        }
    }

    /// A backup refused a write of this partition and named `named` as its primary: the
    /// lane writes there next, unless that node refused already in this round (views can
    /// lag; the usual lookup or discovery then decides). Where the cluster has the routing
    /// commands, a lookup confirms the route in parallel.
    fn follow_refusal_view(&mut self, key: &LaneKey, refused_by: NodeId, named: NodeId) {
        if !self.config.follow_refusal_view
            || !matches!(key, LaneKey::Partition(_))
            || named == refused_by
            || !self.roster.nodes().contains(&named)
        {
            return;
        }
        let watermark = self.watermark;
        let supported = self.routing_commands == RoutingCommands::Supported;
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        if lane.tried.contains(&named) {
            return;
        }
        lane.route = Some(Route {
            node: named,
            watermark,
        });
        self.stats.refusal_views_followed += 1;
        debug!(%refused_by, %named, "the refusal named the primary; writing there");
        if supported
            && lane.lookup == Lookup::Idle
            && let LaneKey::Partition(partition) = key
        {
            lane.lookup = Lookup::InFlight;
            self.stats.lookups += 1;
            self.decisions.push_back(Decision::FetchRoute {
                partition: partition.clone(),
            });
        }
    }

    /// Whether an offset write's "past the end" from `target` may come from a copy that
    /// lags the primary's: some other node of the roster has not answered the write in this
    /// round. Even the partition's known primary may have lost the role (a primary that
    /// moved away keeps serving, from a copy that then lags), so only every node saying it,
    /// or one node saying it twice with routing sending the write back to it in between,
    /// makes it the answer.
    fn copy_may_lag(&self, place: &Place, request: RequestId, target: Target) -> bool {
        let (Place::Lane(key @ LaneKey::Partition(_)), Some(node)) = (place, node_of(target))
        else {
            return false;
        };
        let store = self
            .pending
            .get(&request)
            .is_some_and(|p| matches!(p.facts.kind, RequestKind::StoreOffset));
        let Some(lane) = self.lanes.get(key) else {
            return false;
        };
        // The same node said it on the write's last try too, and routing, told of it, sent
        // the write back there (a lookup named it again): it is the primary, and its answer
        // is the answer. Without this, each lookup naming it clears the round, and the
        // write went round until its deadline and ended unknown.
        let said_it_before = self
            .pending
            .get(&request)
            .is_some_and(|p| p.past_end_from == Some(node));
        if said_it_before {
            return false;
        }
        store
            && self
                .roster
                .nodes()
                .iter()
                .any(|other| *other != node && !lane.tried.contains(other))
    }

    /// Writes a frame again after `wait`: first in its lane, which waits that long (a
    /// request of the coordinator waits alone).
    fn retry_after(&mut self, now: Instant, frame: &[RequestId], place: &Place, wait: Duration) {
        match place {
            Place::Lane(key) => {
                if let Some(lane) = self.lanes.get_mut(key) {
                    for &id in frame.iter().rev() {
                        lane.queue.push_front(id);
                    }
                }
                self.set_lane_backoff(now, key, wait);
            }
            Place::Coordinator => {
                for &id in frame {
                    self.timers.insert((now + wait, TimerKey::Retry(id)));
                }
            }
            Place::Topic(_) => self.requeue(now, frame, place),
        }
    }

    fn requeue(&mut self, now: Instant, frame: &[RequestId], place: &Place) {
        match place {
            Place::Lane(key) => {
                if let Some(lane) = self.lanes.get_mut(key) {
                    for &id in frame.iter().rev() {
                        lane.queue.push_front(id);
                    }
                }
                self.pump_lane(now, key);
            }
            Place::Coordinator => {
                for &id in frame {
                    self.decisions.push_back(Decision::Write {
                        request: id,
                        coalesced: Vec::new(),
                        target: Target::Coordinator,
                        partition: None,
                    });
                }
            }
            Place::Topic(_) => {}
        }
    }

    pub(super) fn retry_coordinator(&mut self, request: RequestId) {
        if self.live(request).is_some() {
            self.decisions.push_back(Decision::Write {
                request,
                coalesced: Vec::new(),
                target: Target::Coordinator,
                partition: None,
            });
        }
    }

    pub(super) fn topic_of(&self, request: RequestId) -> Option<crate::ids::TopicKey> {
        self.pending.get(&request)?.facts.topic.clone()
    }
}

/// The requests one reported attempt settles: almost always one (kept without allocating),
/// or a send and the sends merged into its frame.
enum FrameMembers {
    One([RequestId; 1]),
    Many(Vec<RequestId>),
}

impl FrameMembers {
    fn as_slice(&self) -> &[RequestId] {
        match self {
            Self::One(one) => one,
            Self::Many(many) => many,
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(RequestId) -> bool) {
        match self {
            Self::One([id]) => {
                if !keep(*id) {
                    *self = Self::Many(Vec::new());
                }
            }
            Self::Many(many) => many.retain(|&id| keep(id)),
        }
    }
}

pub(super) fn node_of(target: Target) -> Option<NodeId> {
    match target {
        Target::Node(node) => Some(node),
        // The coordinator's node is the link layer's to know.
        Target::Coordinator => None,
    }
}
