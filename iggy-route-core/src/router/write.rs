//! Writing on links: a request framed in the form its link and target call for (the
//! consumer session attached first where a routed request needs it, a group's member id
//! in the header, sends merged into one frame), and the exchange left in flight.

use std::time::Instant;

use tracing::debug;

use super::group_commit::{self, CommitStep};
use super::groups::Detour;
use super::link::{Attachment, InFlight, Job, Sealed};
use super::{Output, Router, encode};
use crate::ids::{LinkId, RequestId};
use crate::request::{CommandRequest, Plane, PollRequest, Request};
use crate::routing::Target;
use crate::wire::{ConsumerKind, ConsumerSession, Operation, code};

impl Router {
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
        if self.join_on_attached_link(request, link_id) {
            // An attached link acts for the session in a group's offset writes (the server
            // checks the attachment's parent before the link's own identity), so a
            // membership made on it could never commit: the idle link is closed and the
            // join goes back to routing, to be written on a new one.
            debug!(link = %link_id, request = %request, "a join found an attached link; closing it");
            self.close_by_choice(now, link_id);
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
