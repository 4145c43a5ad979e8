//! Turning routing decisions into work on links: the coordinator's queue, the per-node
//! ready queues, and opening data links as the pool allows.

use std::time::Instant;

use std::collections::VecDeque;

use tracing::debug;

use super::group_commit::{self, CommitStep};
use super::groups::Detour;
use super::link::{Attachment, InFlight, Job, Link, LinkState, Sealed};
use super::{CoordJob, Output, Router, encode};
use crate::event::LinkRole;
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::{CommandRequest, Plane, PollRequest, Request};
use crate::routing::{Attempt, Decision, Target};
use crate::wire::{ConsumerKind, ConsumerSession, Operation, code};

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

    /// Writes a request on a link, attaching the consumer session first where the request
    /// is a routed poll or offset write.
    pub(super) fn write_request(
        &mut self,
        now: Instant,
        mut link_id: LinkId,
        request: RequestId,
        target: Target,
    ) {
        if !self.requests.contains_key(&request) {
            // Completed meanwhile (its deadline): release whatever it still holds.
            self.unsent.push((request, target));
            return;
        }
        match self.group_detour(request, target) {
            None => {}
            Some(Detour::Link(member_link)) => link_id = member_link,
            Some(Detour::Waiting) => return,
            Some(Detour::Close(member_link)) => {
                debug!(link = %member_link, "a leave found its member link busy; closing it");
                self.close_by_choice(now, member_link);
                self.serve_member_waiting(now);
                return;
            }
        }
        let Some(entry) = self.requests.get(&request) else {
            return;
        };
        // A consumer group's sync and polls carry the member's id (see `membership`); so
        // does the commit poll of a group's offset write (see `group_commit`).
        let (mut commit_poll, mut in_steps, mut membership_write, mut speak_for) =
            (None, false, None, None);
        if let Some(role) = &entry.group {
            commit_poll = match entry.group_commit.map(|commit| commit.step) {
                Some(CommitStep::PollOn(_)) => group_commit::commit_poll(&entry.request),
                Some(CommitStep::OnLeader) | None => None,
            };
            in_steps = entry.group_commit.is_some();
            membership_write = role.is_membership_write().then(|| role.clone());
            speak_for = match commit_poll {
                // The commit poll speaks for the member of the group whose offset it writes.
                Some(_) => self.groups.get(role.key()).map(|m| m.member),
                None => self.groups.speaks_for(role),
            };
        }
        // The routed forms (an auto-commit poll as 104, an offset write after an attach) on
        // data links of clusters with routing commands; a plain poll is a plain 100 anywhere,
        // and so is a member's group poll (the attachment would make it the session's).
        let routed = matches!(target, Target::Node(_))
            && speak_for.is_none()
            && !in_steps
            && self.routing_supported()
            && !matches!(&entry.request, Request::Poll(poll) if !poll.auto_commit);
        let needs_attach = routed
            && matches!(
                &entry.request,
                Request::Poll(_)
                    | Request::StoreOffset(_)
                    | Request::Command(CommandRequest {
                        plane: Plane::Partition { .. },
                        ..
                    })
            );
        if needs_attach {
            let Some((client_id, session)) = self.coordinator.identity else {
                self.unsent.push((request, target));
                return;
            };
            let wanted = Attachment {
                client_id,
                session,
                watermark: self.routing.watermark(),
            };
            let attached = self.links.get(&link_id).and_then(|l| l.attached);
            let current = attached.is_some_and(|a| {
                a.client_id == wanted.client_id
                    && a.session == wanted.session
                    && a.watermark >= wanted.watermark
            });
            if !current {
                let body = ConsumerSession {
                    client_id,
                    session,
                    metadata_watermark: wanted.watermark,
                };
                let mut out = bytes::BytesMut::new();
                body.encode(&mut out);
                self.transmit(
                    now,
                    link_id,
                    Job::Attach(request),
                    Operation::NonReplicated,
                    code::ATTACH_CONSUMER_SESSION,
                    &out,
                );
                return;
            }
        }
        // A plain consumer's auto-commit poll in the plain form (100) is committed by the
        // node that serves it, and a backup keeps such a commit to itself: the primary, and
        // so the consumer's durable offset, never hears of it (seen on the real cluster).
        // So the poll goes without its commit, and the offset it read up to is stored on
        // the primary before the caller gets the messages (see `Router::commit_polled`).
        let commit_after = entry.group_auto_commit
            || (!routed
                && matches!(
                    &entry.request,
                    Request::Poll(poll)
                        if poll.auto_commit && poll.consumer.kind == ConsumerKind::Consumer
                ));
        let (encoded, batch) = if let Some(poll) = &commit_poll {
            (encode::encode(poll, entry.partition, false), Vec::new())
        } else if let (true, Request::Poll(poll)) = (commit_after, &entry.request) {
            let uncommitted = Request::Poll(PollRequest {
                auto_commit: false,
                ..poll.clone()
            });
            (
                encode::encode(&uncommitted, entry.partition, routed),
                Vec::new(),
            )
        } else if entry.riders.is_empty() {
            (
                encode::encode(&entry.request, entry.partition, routed),
                Vec::new(),
            )
        } else {
            self.encode_merged(request)
        };
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.commit_after = commit_after;
        }
        for id in std::iter::once(request).chain(batch.iter().skip(1).map(|(id, _)| *id)) {
            if let Some(entry) = self.requests.get_mut(&id) {
                // A reply kept from an earlier attempt (a read asked again) is not this one's.
                entry.reply = None;
                entry.link = Some(link_id);
            }
        }
        if let Some(link) = self.links.get_mut(&link_id) {
            link.last_used = now;
        }
        self.transmit_frame(
            now,
            link_id,
            Job::Request(request, target),
            (encoded.operation, encoded.code),
            encoded.frame,
            speak_for,
        );
        if let Some(link) = self.links.get_mut(&link_id) {
            link.membership_write = membership_write.map(|role| (request, target, role));
            if let Some(in_flight) = link.in_flight.as_mut() {
                in_flight.batch = batch;
            }
        }
    }

    /// One `SEND_MESSAGES` frame for a send and the sends coalesced behind it, and each
    /// one's message count in frame order (the reply's base offset is the first message's;
    /// each caller's offsets follow from the counts before it). A rider completed by its
    /// deadline meanwhile is left out: it was never written.
    fn encode_merged(&self, head: RequestId) -> (encode::Encoded, Vec<(RequestId, u32)>) {
        let Some(entry) = self.requests.get(&head) else {
            return (encode::Encoded::empty(), Vec::new());
        };
        let members: Vec<(RequestId, &Request)> = std::iter::once((head, &entry.request))
            .chain(
                entry
                    .riders
                    .iter()
                    .filter_map(|id| self.requests.get(id).map(|rider| (*id, &rider.request))),
            )
            .collect();
        let encoded =
            encode::encode_sends(members.iter().map(|(_, request)| *request), entry.partition);
        let batch = members
            .iter()
            .map(|(id, request)| (*id, encode::message_count(request)))
            .collect();
        (encoded, batch)
    }

    /// Frames and writes one exchange on a link.
    pub(super) fn transmit(
        &mut self,
        now: Instant,
        link_id: LinkId,
        job: Job,
        operation: Operation,
        code: u32,
        body: &[u8],
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let (frame, sealed) = link.frame(operation, code, body);
        self.write_exchange(now, link_id, job, frame, sealed);
    }

    /// [`Router::transmit`] for a frame encoded behind a header placeholder.
    fn transmit_frame(
        &mut self,
        now: Instant,
        link_id: LinkId,
        job: Job,
        (operation, code): (Operation, u32),
        frame: bytes::BytesMut,
        speak_for: Option<u128>,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let (frame, sealed) = link.seal_as(operation, code, frame, speak_for);
        self.write_exchange(now, link_id, job, frame, sealed);
    }

    fn write_exchange(
        &mut self,
        now: Instant,
        link_id: LinkId,
        job: Job,
        frame: bytes::Bytes,
        sent: Sealed,
    ) {
        let attempt_timeout = self.config.attempt_timeout;
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        link.last_sent = now;
        link.in_flight = Some(InFlight {
            job,
            deadline: now + attempt_timeout,
            frame: frame.clone(),
            sent,
            replay_at: None,
            replays: 0,
            batch: Vec::new(),
        });
        self.outputs.push_back(Output::Transmit {
            link: link_id,
            bytes: frame,
        });
    }
}
