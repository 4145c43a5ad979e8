//! A caller's request answered: its typed reply, a merged send's receipts, or what an
//! error status makes of the attempt; and the attachment of a consumer session that goes
//! ahead of a routed request. Each answer becomes one result for the routing layer.

use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use super::classify::{self, StatusClass, decode_reply};
use super::link::{Attachment, Job};
use super::{CoordJob, Router};
use crate::event::ProtocolViolation;
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::{Reply, RequestError};
use crate::routing::{Attempt, Target};
use crate::wire::{ErrorCode, ReplyError, ReplyHeader, SendMessagesReply, reply_payload};

impl Router {
    pub(super) fn attach_reply(
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

    pub(super) fn request_reply(
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
        // Kept from its acceptance: a request of no group (a plain send) passes no group
        // step below.
        let group_role = entry.group.clone();
        if group_role.is_some() && entry.group_commit.is_some() {
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
                        let stranger = group_role
                            .as_ref()
                            .is_some_and(|role| self.answered_as_stranger(role, &reply));
                        let served = if stranger {
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
            self.follow_own_account_change(request);
        }
        if let Some(link) = self.links.get_mut(&link_id) {
            link.membership_write = None;
        }
        let attempt = match group_role {
            None => attempt,
            Some(role) => self.group_replied(now, link_id, (request, role), attempt),
        };
        self.routing.handle_result(now, request, target, attempt);
    }

    /// The reply to a frame that carried several sends: each caller gets its own receipt,
    /// its offsets following those of the sends before it in the frame; anything else the
    /// reply says applies to every one of them (routing settles the frame as one).
    pub(super) fn merged_reply(
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
        let admitted_by = (node, self.replica_of(node));
        let attempt = match confirmation {
            Ok(confirmation) => {
                let base = confirmation.map(|c| c.base_offset);
                for (id, messages, base_offset) in classify::merged_offsets(batch, base) {
                    if let Some(entry) = self.requests.get_mut(&id) {
                        entry.reply = Some(Reply::Sent(classify::send_receipt(
                            confirmation,
                            entry.partition,
                            base_offset,
                            messages,
                            admitted_by,
                        )));
                    }
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
    /// (see `Roster::named_by_refusal`, the roster routing reads) becomes
    /// [`Attempt::RefusedNaming`].
    pub(super) fn named_by_refusal(
        &self,
        attempt: Attempt,
        node: NodeId,
        header: &ReplyHeader,
    ) -> Attempt {
        if !matches!(attempt, Attempt::Refused) {
            return attempt;
        }
        let roster = self.routing.roster();
        match roster.named_by_refusal(node, header.view, header.replica) {
            Some(named) => Attempt::RefusedNaming(named),
            None => attempt,
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
        let class = classify::status_class(code);
        if maybe_applied
            && matches!(class, StatusClass::Refused | StatusClass::Failed)
            && let Some(node) = self.links.get(&link_id).map(|link| link.node)
        {
            // Answered 57 before: the copy in flight then may still commit (in the view it
            // was prepared in), whatever this answer to a copy written again says.
            self.routing.may_have_applied(request, Target::Node(node));
        }
        match class {
            StatusClass::Refused => Attempt::Refused,
            StatusClass::SessionLost => {
                // This frame was never processed under a live session: sign in again and
                // send anew, unless an earlier copy was answered 57 and may commit, or this
                // is the second session in a row it found gone.
                self.close_link_quietly(now, link_id);
                if maybe_applied {
                    Attempt::Unknown
                } else if self.session_lost_under(request) {
                    Attempt::Failed(RequestError::Server { code })
                } else {
                    Attempt::NotSent
                }
            }
            StatusClass::Failed => Attempt::Failed(RequestError::Server { code }),
        }
    }

    /// Closes a link whose exchange is already settled, so nothing is reported twice.
    pub(super) fn close_link_quietly(&mut self, now: Instant, link_id: LinkId) {
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
