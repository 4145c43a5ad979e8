//! Frames from nodes: the read loop, and the dispatch of each frame to the exchange in
//! flight on its link. The router's own exchanges (sign-in, roster, route and topic
//! lookups) are answered here; a caller's request is answered in `replies`. What a reply
//! says is read by the pure functions of `classify`.

use std::time::Instant;

use bytes::Bytes;
use tracing::{debug, warn};

use super::classify::{self, mismatch, not_committed, session_lost};
use super::link::Job;
use super::{CoordJob, Output, Router};
use crate::event::{Event, LinkRole, ProtocolViolation};
use crate::ids::LinkId;
use crate::request::RequestError;
use crate::routing::{Roster, RouteAnswer, TopicAnswer};
use crate::wire::{
    ClusterMetadata, ErrorCode, Frame, LoginRegisterReply, NodeRole, NodeStatus, PollRouting,
    ReplyError, ReplyHeader, reply_payload,
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
        if let Some(mismatch) = mismatch(in_flight.sent, &header) {
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
                let mut answer = classify::topic_answer(&header, body);
                // Only the metadata leader's "absent" is sure: a follower may not have
                // applied another client's create yet.
                if answer == TopicAnswer::NotFound && self.routing.leader() != Some(node) {
                    answer = TopicAnswer::AbsentOnFollower;
                }
                // A metadata read's reply carries the answering node's metadata commit: one
                // below the watermark has not applied our own latest metadata write.
                if let TopicAnswer::Found { partitions_count } = answer
                    && header.commit < self.routing.watermark()
                {
                    answer = TopicAnswer::Behind { partitions_count };
                }
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
                self.coordinator.user_id = Some(reply.user_id);
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
        if self.links.get(&link_id).is_some_and(|link| link.retiring) {
            // Offered credentials the router no longer uses: the refusal says nothing of
            // the current ones, and must not fail what waits for them.
            self.drop_retired_sign_in(link_id);
            return;
        }
        if self.credentials_settling(now, link_id, code) {
            self.session_to_the_leader(link_id);
            self.sign_in_deferred(now, link_id);
            return;
        }
        warn!(link = %link_id, %code, "sign-in refused");
        let fatal = code.is_fatal_to_sign_in();
        if fatal {
            // A final refusal settles a change of the credentials: no node is waited for.
            self.coordinator.credentials_changed_at = None;
        }
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
        let mut leader = None;
        let mut replica_order = Vec::with_capacity(roster.nodes.len());
        for entry in &roster.nodes {
            let node = if entry.tcp_port == 0 {
                None
            } else {
                self.node_for_addr(&entry.tcp_address())
            };
            replica_order.push(node);
            let Some(node) = node else {
                continue;
            };
            // The SDK's rule: the first node that is Leader and Healthy (protocol §3.5).
            if leader.is_none()
                && entry.role == NodeRole::Leader
                && entry.status == NodeStatus::Healthy
            {
                leader = Some(node);
            }
        }
        let roster = Roster::from_replica_order(replica_order);
        self.routing.handle_roster_read(now, roster, leader);
    }

    /// `None` when the coordinator's own session is in doubt (status 40 / 30).
    fn route_answer(&mut self, header: &ReplyHeader, body: Bytes) -> Option<RouteAnswer> {
        let payload = match reply_payload(header, body) {
            Ok(payload) => payload,
            Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                return classify::route_refusal(code);
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
}

impl Router {
    /// A node broke the protocol: say so, and close its link. What is in flight on it is
    /// settled by the rules of a lost link.
    fn violation(&mut self, now: Instant, link_id: LinkId, violation: ProtocolViolation) {
        self.report_violation(link_id, violation);
        self.close_link(now, link_id);
    }

    /// [`Router::violation`] for a link whose exchange the caller settles itself.
    pub(super) fn violation_settled(
        &mut self,
        now: Instant,
        link_id: LinkId,
        violation: ProtocolViolation,
    ) {
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
