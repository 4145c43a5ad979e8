//! Frames from nodes: each one is the reply to the exchange in flight on its link, and
//! becomes an input of the routing layer.

use std::time::Instant;

use bytes::Bytes;
use tracing::{debug, warn};

use super::link::{Attachment, InFlight, Job};
use super::membership::{self, GroupRole};
use super::{CoordJob, Output, Router};
use crate::event::{Event, LinkRole, ProtocolViolation};
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::{AdminRequest, Reply, ReplyPayload, Request, RequestError, SendReceipt};
use crate::routing::{Attempt, RouteAnswer, Target, TopicAnswer};
use crate::wire::LoginRegisterReply;
use crate::wire::{
    ClusterMetadata, ErrorCode, Frame, NodeRole, NodeStatus, Operation, PollMessagesReply,
    PollRouting, ReplyError, ReplyHeader, SendMessagesReply, StreamDetails, TopicDetails,
    reply_payload,
};

impl Router {
    pub(super) fn read(&mut self, now: Instant, link_id: LinkId, mut bytes: &[u8]) {
        // Each round consumes at least one byte or ends; the bound is the input's length.
        for _ in 0..=bytes.len() {
            let Some(link) = self.links.get_mut(&link_id) else {
                return;
            };
            match link.decoder.decode(&mut bytes) {
                Ok(Some(frame)) => self.frame(now, link_id, frame),
                Ok(None) => {
                    // The start of a frame while nothing is in flight: the node wrote more
                    // than the reply it owed (a duplicate, a stray). Caught now, before the
                    // link's next request could take it for its own reply.
                    let unsolicited = link.in_flight.is_none() && link.decoder.buffered() > 0;
                    if unsolicited {
                        self.violation(now, link_id, ProtocolViolation::Unsolicited);
                    }
                    return;
                }
                Err(error) => {
                    self.violation(now, link_id, ProtocolViolation::Undecodable(error));
                    return;
                }
            }
            if bytes.is_empty() {
                // A frame may be complete with nothing left over; one more round would
                // only return `None`.
                return;
            }
        }
    }

    fn frame(&mut self, now: Instant, link_id: LinkId, frame: Frame) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let Some(in_flight) = link.in_flight.take() else {
            self.violation(now, link_id, ProtocolViolation::Unsolicited);
            return;
        };
        let node = link.node;
        // A frame of this exchange was answered "not committed yet" (57): it may commit,
        // so no later answer can make it "not sent".
        let maybe_applied = in_flight.replays > 0 || in_flight.replay_at.is_some();
        let (header, body) = match frame {
            Frame::Reply { header, body } => (header, body),
            Frame::Eviction(eviction) => {
                link.in_flight = Some(in_flight);
                self.evicted(now, link_id, &eviction, maybe_applied);
                return;
            }
            Frame::Request { .. } => {
                link.in_flight = Some(in_flight);
                self.violation(now, link_id, ProtocolViolation::RequestFrame);
                return;
            }
        };
        if let Some(mismatch) = mismatch(&in_flight, &header) {
            // Not the answer to what is in flight (a stray, a duplicate, another client's):
            // nothing on this link can be trusted any more. What is in flight is settled by
            // the rules of a lost link, so a write becomes unknown, never a success.
            link.in_flight = Some(in_flight);
            self.violation(now, link_id, mismatch);
            return;
        }
        if not_committed(&header, &body) && matches!(in_flight.job, Job::Request(..)) {
            // Outcome unknown: only a replay of the same bytes on the same link is safe
            // (protocol §6, 57), and only while the request lives and replays remain.
            link.in_flight = Some(in_flight);
            self.schedule_replay(now, link_id);
            return;
        }
        if !matches!(in_flight.job, Job::Login) && !session_lost(&header) {
            self.link_proven(link_id);
            if let Job::Request(request, _) = in_flight.job {
                self.session_answered(request);
            }
        }
        match in_flight.job {
            Job::Login => self.login_reply(now, link_id, &header, body),
            Job::Ping => {}
            Job::Roster if session_lost(&header) => {
                self.sign_in_again_for(now, link_id, CoordJob::Roster);
            }
            Job::Roster => self.roster_reply(now, &header, body),
            Job::Route(partition) => {
                let answer = self.route_answer(&header, body);
                if let Some(answer) = answer {
                    self.routing.handle_route(now, &partition, answer);
                } else {
                    self.sign_in_again_for(now, link_id, CoordJob::Route(partition));
                }
            }
            Job::Topic(topic) if session_lost(&header) => {
                self.sign_in_again_for(now, link_id, CoordJob::Topic(topic));
            }
            Job::Topic(topic) => {
                let answer = topic_answer(&header, body);
                self.routing.handle_topic(now, &topic, answer);
            }
            Job::Attach(request) => self.attach_reply(now, link_id, node, request, &header),
            Job::Request(request, target) if in_flight.batch.len() > 1 => self.merged_reply(
                now,
                link_id,
                (request, target),
                &in_flight.batch,
                maybe_applied,
                (&header, body),
            ),
            Job::Request(request, target) => self.request_reply(
                now,
                link_id,
                (request, target),
                maybe_applied,
                &header,
                body,
            ),
        }
    }

    /// The coordinator's session is in doubt (a logout, an eviction the node answered
    /// with a status): the job was not processed under a live session, so sign in again
    /// and ask again rather than taking the refusal for an answer.
    fn sign_in_again_for(&mut self, now: Instant, link_id: LinkId, job: CoordJob) {
        debug!(link = %link_id, "session lost on the coordinator: signing in again");
        self.coordinator.queue.push_front(job);
        self.close_link(now, link_id);
    }

    fn login_reply(&mut self, now: Instant, link_id: LinkId, header: &ReplyHeader, body: Bytes) {
        let payload = match reply_payload(header, body) {
            Ok(payload) => payload,
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) if code.is_transient() => {
                // The login never left the node, which is reachable but cannot register a
                // session now (its metadata plane is electing): sign in there again after
                // a backoff, without moving the session for it.
                self.sign_in_deferred(now, link_id);
                return;
            }
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                self.sign_in_failed(now, link_id, code);
                return;
            }
            Err(ReplyError::Malformed(error)) => {
                warn!(link = %link_id, %error, "malformed login reply");
                self.close_link(now, link_id);
                return;
            }
        };
        match LoginRegisterReply::decode(&payload) {
            Ok(reply) if reply.session > 0 => {
                let coordinator = self
                    .links
                    .get(&link_id)
                    .is_some_and(|l| l.role == LinkRole::Coordinator);
                if coordinator {
                    self.routing.handle_watermark(now, header.commit);
                }
                self.signed_in(link_id, reply.session);
            }
            Ok(_) | Err(_) => {
                warn!(link = %link_id, "login reply without a usable session");
                self.close_link(now, link_id);
            }
        }
    }

    /// The credentials (or the protocol version) were refused: every request waiting for a
    /// session fails with the server's reason, and the node backs off before the next try.
    pub(super) fn sign_in_failed(&mut self, now: Instant, link_id: LinkId, code: ErrorCode) {
        warn!(link = %link_id, %code, "sign-in refused");
        let fatal = code.is_fatal_to_sign_in();
        if let Some(link) = self.links.get(&link_id) {
            let node = link.node;
            let event = crate::event::Event::SignInRefused { node, code, fatal };
            self.outputs.push_back(super::Output::Event(event));
        }
        // Closing a link that never signed in counts as a failure of its node: it backs
        // off, and a coordinator moves on (see `link_gone`).
        self.close_link(now, link_id);
        if fatal {
            // Nothing can succeed with these credentials: say so now rather than at each
            // request's deadline. Queued work stays queued and is released as not sent.
            self.routing.fail_all(now, RequestError::SignIn { code });
        }
    }

    fn roster_reply(&mut self, now: Instant, header: &ReplyHeader, body: Bytes) {
        let roster = match reply_payload(header, body) {
            Ok(payload) => ClusterMetadata::decode(&payload),
            Err(error) => {
                debug!(%error, "roster unavailable");
                self.routing.roster_unavailable(now);
                return;
            }
        };
        let Ok(roster) = roster else {
            warn!("undecodable roster");
            self.routing.roster_unavailable(now);
            return;
        };
        let mut nodes = Vec::new();
        let mut leader = None;
        self.replica_order.clear();
        for entry in &roster.nodes {
            let node = if entry.tcp_port == 0 {
                None
            } else {
                self.node_for_addr(&entry.tcp_address())
            };
            self.replica_order.push(node);
            let Some(node) = node else {
                continue;
            };
            if !nodes.contains(&node) {
                nodes.push(node);
            }
            // The SDK's rule: the first node that is Leader and Healthy (protocol §3.5).
            if leader.is_none()
                && entry.role == NodeRole::Leader
                && entry.status == NodeStatus::Healthy
            {
                leader = Some(node);
            }
        }
        self.routing.handle_roster(now, nodes, leader);
    }

    /// `None` when the coordinator's own session is in doubt (status 40 / 30).
    fn route_answer(&mut self, header: &ReplyHeader, body: Bytes) -> Option<RouteAnswer> {
        let payload = match reply_payload(header, body) {
            Ok(payload) => payload,
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                return if code.is_unsupported() {
                    Some(RouteAnswer::Unsupported)
                } else if code.is_session_lost() {
                    None
                } else if code.is_not_found() {
                    Some(RouteAnswer::Failed(RequestError::Server { code }))
                } else {
                    // 58 (no primary yet, metadata floor), or anything else: ask again later.
                    Some(RouteAnswer::Unavailable)
                };
            }
            Err(ReplyError::Malformed(_)) => return Some(RouteAnswer::Unavailable),
        };
        let Ok(routing) = PollRouting::decode(&payload) else {
            warn!("undecodable routing reply");
            return Some(RouteAnswer::Unavailable);
        };
        if routing.primary.tcp_port == 0 {
            return Some(RouteAnswer::Unsupported);
        }
        let node = self.node_for_addr(&routing.primary.tcp_address())?;
        Some(RouteAnswer::Primary {
            node,
            watermark: routing.consumer_session.metadata_watermark,
        })
    }

    fn attach_reply(
        &mut self,
        now: Instant,
        link_id: LinkId,
        node: NodeId,
        request: RequestId,
        header: &ReplyHeader,
    ) {
        if header.status != 0 {
            debug!(link = %link_id, status = header.status, "attach refused");
            self.routing
                .handle_result(now, request, Target::Node(node), Attempt::NotSent);
            return;
        }
        if let (Some(link), Some((client_id, session))) =
            (self.links.get_mut(&link_id), self.coordinator.identity)
        {
            link.attached = Some(Attachment {
                client_id,
                session,
                watermark: self.routing.watermark(),
            });
        }
        self.write_request(now, link_id, request, Target::Node(node));
        self.report_unsent(now);
    }

    fn request_reply(
        &mut self,
        now: Instant,
        link_id: LinkId,
        (request, target): (RequestId, Target),
        maybe_applied: bool,
        header: &ReplyHeader,
        body: Bytes,
    ) {
        let Some(node) = self.links.get(&link_id).map(|l| l.node) else {
            return;
        };
        let admitted_by = (node, self.replica_of(node));
        let Some(entry) = self.requests.get_mut(&request) else {
            // Completed by its deadline meanwhile: release what it holds, and make a join or
            // leave it carried match what its caller was told.
            let admitted = reply_payload(header, body).is_ok();
            self.late_group_answer(now, link_id, admitted);
            self.routing
                .handle_result(now, request, target, Attempt::NotSent);
            return;
        };
        let metadata_op = header.operation.is_metadata();
        let group_role = membership::group_role(&entry.request);
        if entry.group_commit.is_some() {
            self.group_commit_reply(now, link_id, request, header, body);
            return;
        }
        let attempt = match reply_payload(header, body) {
            Ok(payload) => {
                match decode_reply(&entry.request, entry.partition, admitted_by, payload) {
                    Ok(reply) if entry.commit_after => {
                        // Its offset is stored before routing hears it was served, so that
                        // the write goes first in its lane (see `Router::commit_polled`).
                        let served = reply.served();
                        match self.commit_polled(now, request, reply) {
                            Ok(reply) => {
                                if let Some(entry) = self.requests.get_mut(&request) {
                                    entry.reply = reply;
                                }
                                Attempt::Done(served)
                            }
                            Err(error) => Attempt::Failed(error),
                        }
                    }
                    Ok(reply) => {
                        let served = if self.answered_as_stranger(group_role.as_ref(), &reply) {
                            crate::routing::Served::Stranger
                        } else {
                            reply.served()
                        };
                        if let Some(entry) = self.requests.get_mut(&request) {
                            entry.reply = Some(reply);
                        }
                        Attempt::Done(served)
                    }
                    Err(error) => {
                        // The node said yes in a body we cannot read: a write may well have
                        // been applied, so its outcome is unknown (never a success); a read
                        // fails typed. Nothing else on this link can be trusted.
                        let attempt = if entry.request.facts().kind.is_write() {
                            Attempt::Unknown
                        } else {
                            Attempt::Failed(RequestError::Malformed(error.clone()))
                        };
                        self.violation_settled(
                            now,
                            link_id,
                            ProtocolViolation::MalformedReply(error),
                        );
                        attempt
                    }
                }
            }
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                let attempt = self.status_attempt(now, (link_id, request), code, maybe_applied);
                self.named_by_refusal(attempt, node, header)
            }
            Err(ReplyError::Malformed(error)) => Attempt::Failed(RequestError::Malformed(error)),
        };
        if metadata_op && matches!(attempt, Attempt::Done(_)) {
            self.routing.handle_watermark(now, header.commit);
        }
        if let Some(link) = self.links.get_mut(&link_id) {
            link.membership_write = None;
        }
        if let (Attempt::Done(crate::routing::Served::Stranger), Some(GroupRole::AsMember(key))) =
            (&attempt, &group_role)
            && self.is_sync(request)
            && !self.routing.own_write_unsettled(now)
        {
            self.membership_ended(now, key);
        }
        let attempt = self
            .group_answered(now, link_id, (request, group_role), &attempt)
            .unwrap_or(attempt);
        self.routing.handle_result(now, request, target, attempt);
    }

    /// The reply to a frame that carried several sends: each caller gets its own receipt,
    /// its offsets following those of the sends before it in the frame; anything else the
    /// reply says applies to every one of them (routing settles the frame as one).
    fn merged_reply(
        &mut self,
        now: Instant,
        link_id: LinkId,
        (request, target): (RequestId, Target),
        batch: &[(RequestId, u32)],
        maybe_applied: bool,
        (header, body): (&ReplyHeader, Bytes),
    ) {
        let Some(node) = self.links.get(&link_id).map(|l| l.node) else {
            return;
        };
        if !batch.iter().any(|(id, _)| self.requests.contains_key(id)) {
            // Every caller's deadline completed it meanwhile: release what it holds.
            self.routing
                .handle_result(now, request, target, Attempt::NotSent);
            return;
        }
        let confirmation = match reply_payload(header, body) {
            Ok(payload) if payload.is_empty() => Ok(None),
            Ok(payload) => SendMessagesReply::decode(&payload)
                .map(|reply| reply.confirmations.first().copied()),
            Err(ReplyError::Malformed(error)) => Err(error),
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                // The same for every send in the frame as for one.
                let attempt = self.status_attempt(now, (link_id, request), code, maybe_applied);
                let attempt = self.named_by_refusal(attempt, node, header);
                self.routing.handle_result(now, request, target, attempt);
                return;
            }
        };
        let replica = self.replica_of(node);
        let attempt = match confirmation {
            Ok(confirmation) => {
                let mut offset = confirmation.map(|c| c.base_offset);
                for &(id, messages) in batch {
                    if let Some(entry) = self.requests.get_mut(&id) {
                        entry.reply = Some(Reply::Sent(SendReceipt {
                            partition_id: confirmation
                                .map_or(entry.partition.unwrap_or(0), |c| c.partition_id),
                            base_offset: offset,
                            messages,
                            node,
                            replica,
                        }));
                    }
                    offset = offset.map(|base| base.saturating_add(u64::from(messages)));
                }
                Attempt::Done(crate::routing::Served::Plain)
            }
            Err(error) => {
                // Admitted in a body we cannot read: every send's outcome is unknown.
                self.violation_settled(now, link_id, ProtocolViolation::MalformedReply(error));
                Attempt::Unknown
            }
        };
        self.routing.handle_result(now, request, target, attempt);
    }

    /// A refusal from `node` whose header names another replica as the group's primary
    /// becomes [`Attempt::RefusedNaming`]. The real server stamps a partition replica's
    /// refusal with its group's `view` and its own `replica` index; a refusal stamped
    /// otherwise (a `replica` that is not `node`'s place in the roster: the server echoes
    /// the request's fields where it holds no group) names nothing.
    pub(super) fn named_by_refusal(
        &self,
        attempt: Attempt,
        node: NodeId,
        header: &ReplyHeader,
    ) -> Attempt {
        if !matches!(attempt, Attempt::Refused) {
            return attempt;
        }
        let replicas = self.replica_order.len();
        let stamped_by_node = self
            .replica_order
            .get(usize::from(header.replica))
            .copied()
            .flatten()
            == Some(node);
        if replicas == 0 || !stamped_by_node {
            return attempt;
        }
        let primary = usize::try_from(header.view).unwrap_or(usize::MAX) % replicas;
        match self.replica_order.get(primary).copied().flatten() {
            Some(named) if named != node => Attempt::RefusedNaming(named),
            Some(_) | None => attempt,
        }
    }

    /// What an error status makes of the attempt in flight.
    pub(super) fn status_attempt(
        &mut self,
        now: Instant,
        (link_id, request): (LinkId, RequestId),
        code: ErrorCode,
        maybe_applied: bool,
    ) -> Attempt {
        if code.is_refusal() {
            Attempt::Refused
        } else if code.is_session_lost() {
            // This frame was never processed under a live session: sign in again and send
            // anew, unless an earlier copy was answered 57 and may commit, or this is the
            // second session in a row it found gone.
            self.close_link_quietly(now, link_id);
            if maybe_applied {
                Attempt::Unknown
            } else if self.session_lost_under(request) {
                Attempt::Failed(RequestError::Server { code })
            } else {
                Attempt::NotSent
            }
        } else {
            Attempt::Failed(RequestError::Server { code })
        }
    }

    /// Closes a link whose exchange is already settled, so nothing is reported twice.
    fn close_link_quietly(&mut self, now: Instant, link_id: LinkId) {
        if let Some(link) = self.links.get_mut(&link_id) {
            link.in_flight = None;
        }
        self.close_link(now, link_id);
    }

    /// The request in flight on a link that lost its session was not processed.
    pub(super) fn unsend_in_flight(&mut self, now: Instant, link_id: LinkId) {
        let job = self
            .links
            .get_mut(&link_id)
            .and_then(|l| l.in_flight.take())
            .map(|f| f.job);
        let Some(node) = self.links.get(&link_id).map(|l| l.node) else {
            return;
        };
        self.close_link(now, link_id);
        match job {
            Some(Job::Request(request, target)) => {
                self.routing
                    .handle_result(now, request, target, Attempt::NotSent)
            }
            Some(Job::Attach(request)) => {
                self.routing
                    .handle_result(now, request, Target::Node(node), Attempt::NotSent);
            }
            Some(Job::Roster) => self.coordinator.queue.push_front(CoordJob::Roster),
            Some(Job::Route(partition)) => self
                .coordinator
                .queue
                .push_front(CoordJob::Route(partition)),
            Some(Job::Topic(topic)) => self.coordinator.queue.push_front(CoordJob::Topic(topic)),
            Some(Job::Login | Job::Ping) | None => {}
        }
    }
}

impl Router {
    /// A node broke the protocol: say so, and close its link. What is in flight on it is
    /// settled by the rules of a lost link.
    fn violation(&mut self, now: Instant, link_id: LinkId, violation: ProtocolViolation) {
        self.report_violation(link_id, violation);
        self.close_link(now, link_id);
    }

    /// [`Router::violation`] for a link whose exchange the caller settles itself.
    fn violation_settled(&mut self, now: Instant, link_id: LinkId, violation: ProtocolViolation) {
        self.report_violation(link_id, violation);
        self.close_link_quietly(now, link_id);
    }

    fn report_violation(&mut self, link_id: LinkId, violation: ProtocolViolation) {
        let Some(node) = self.links.get(&link_id).map(|l| l.node) else {
            return;
        };
        warn!(link = %link_id, %node, %violation, "protocol violation; closing the link");
        self.stats.protocol_violations += 1;
        self.outputs
            .push_back(Output::Event(Event::ProtocolViolation {
                link: link_id,
                node,
                violation,
            }));
    }
}

/// "Not committed yet" (57): on the status channel, or, for a result-framed operation (a
/// metadata write in flight or not caught up on the leader), in the result section. Either
/// way the outcome is unknown and only a replay of the same bytes is safe.
fn not_committed(header: &ReplyHeader, body: &[u8]) -> bool {
    let code = ErrorCode::TransientNotCommitted;
    if header.status != 0 {
        return header.status == code.as_u32();
    }
    header.operation.is_result_framed()
        && matches!(crate::wire::split_result(body), Ok(Err(found)) if found == code)
}

/// A reply whose status says the session is gone (see [`ErrorCode::is_session_lost`]).
fn session_lost(header: &ReplyHeader) -> bool {
    header.status != 0 && ErrorCode::from_u32(header.status).is_session_lost()
}

fn topic_answer(header: &ReplyHeader, body: Bytes) -> TopicAnswer {
    match reply_payload(header, body) {
        Ok(payload) if payload.is_empty() => TopicAnswer::NotFound,
        Ok(payload) => match TopicDetails::decode(&payload) {
            Ok(details) => TopicAnswer::Found {
                partitions_count: details.summary.partitions_count,
            },
            Err(_) => TopicAnswer::Unavailable,
        },
        Err(ReplyError::Status(code) | ReplyError::Rejected(code)) if code.is_not_found() => {
            TopicAnswer::NotFound
        }
        Err(ReplyError::Status(code)) if code == ErrorCode::Unauthorized => {
            TopicAnswer::Denied { code }
        }
        Err(_) => TopicAnswer::Unavailable,
    }
}

/// The successful payload of a request, as the caller's typed reply.
fn decode_reply(
    request: &Request,
    partition: Option<u32>,
    (node, replica): (NodeId, Option<u32>),
    payload: Bytes,
) -> Result<Reply, crate::wire::WireError> {
    let reply = match request {
        Request::Send(send) => {
            // An empty body is a send the server admitted without confirmations (the SDK
            // reports it as a success, protocol §4.2); a body that does not decode is no
            // confirmation of anything.
            let confirmation = if payload.is_empty() {
                None
            } else {
                SendMessagesReply::decode(&payload)?
                    .confirmations
                    .first()
                    .copied()
            };
            Reply::Sent(SendReceipt {
                partition_id: confirmation.map_or(partition.unwrap_or(0), |c| c.partition_id),
                base_offset: confirmation.map(|c| c.base_offset),
                messages: u32::try_from(send.messages.len()).unwrap_or(u32::MAX),
                node,
                replica,
            })
        }
        Request::Poll(_) => Reply::Polled(PollMessagesReply::decode(&payload)?),
        Request::StoreOffset(_) => Reply::OffsetStored,
        Request::Admin(admin) => match admin {
            AdminRequest::CreateStream { .. } | AdminRequest::GetStream { .. } => {
                if payload.is_empty() {
                    Reply::Stream(None)
                } else {
                    Reply::Stream(Some(StreamDetails::decode(&payload)?))
                }
            }
            AdminRequest::CreateTopic { .. } | AdminRequest::GetTopic { .. } => {
                if payload.is_empty() {
                    Reply::Topic(None)
                } else {
                    Reply::Topic(Some(TopicDetails::decode(&payload)?))
                }
            }
            AdminRequest::CreatePartitions { .. } => Reply::PartitionsCreated,
        },
        // Decoded by the caller, who knows the command's reply type.
        Request::Command(_) => Reply::Payload(ReplyPayload(payload)),
    };
    Ok(reply)
}

/// Why a reply does not answer the exchange in flight, if it does not. The request number
/// is always echoed. The operation is not, to the letter: the real server answers a
/// `CreateTopic` with the `CreateTopicWithAssignments` it turned it into, and a
/// `DeleteSegments` with the `TruncatePartition` it commits (which has a result section
/// where the request's operation has none). What a success's operation decides is how its
/// body is read, so that is what must agree, but for the one rewrite that changes it.
fn mismatch(in_flight: &InFlight, header: &ReplyHeader) -> Option<ProtocolViolation> {
    let sent = in_flight.sent;
    let rewritten = sent.operation == Operation::DeleteSegments
        && header.operation == Operation::TruncatePartition;
    let operation_differs = header.status == 0
        && !rewritten
        && header.operation.is_result_framed() != sent.operation.is_result_framed();
    (header.request != sent.request || operation_differs).then_some(
        ProtocolViolation::MismatchedReply {
            expected_request: sent.request,
            expected_operation: sent.operation,
            got_request: header.request,
            got_operation: header.operation,
        },
    )
}
