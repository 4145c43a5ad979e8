//! A session that ends under a request: an eviction in answer to it, a status saying the
//! session is gone, or its link lost while it was in flight. The link's session is signed
//! in again for everyone else; the request itself is written again only while that is
//! safe, the server did not blame it, and it has not seen two sessions end under it in a
//! row. So one request the server answers by ending the session ends that request, at
//! once, and never the client.

use std::time::Instant;

use tracing::{debug, warn};

use super::Router;
use super::link::Job;
use crate::ids::{LinkId, RequestId};
use crate::request::RequestError;
use crate::routing::{Attempt, Target};
use crate::wire::EvictionHeader;

/// Sessions that may end under one request, one after the other, before it is given up.
const SESSIONS_LOST_MAX: u8 = 2;

impl Router {
    /// Withdraws a request whose caller is gone, if nothing of it has been written yet: it
    /// completes at once with [`RequestError::Withdrawn`] and is never sent (also one still
    /// waiting for room). A request on the wire (or a served poll whose offset is being
    /// stored) is not withdrawn: it completes by the usual rules. Whether it was withdrawn.
    pub fn withdraw(&mut self, now: Instant, id: RequestId) -> bool {
        let now = self.clock(now);
        if self.withdraw_waiting(now, id) {
            return true;
        }
        let id = self.waiting.routing_id(id);
        let Some(entry) = self.requests.get(&id) else {
            return false;
        };
        let on_the_wire = self
            .links
            .values()
            .filter_map(|link| link.in_flight.as_ref())
            .any(|in_flight| in_flight.carried().any(|carried| carried == id));
        if on_the_wire || entry.committing || entry.commit_for.is_some() {
            return false;
        }
        debug!(request = %id, "withdrawn by its caller");
        self.routing.complete(now, id, Err(RequestError::Withdrawn));
        self.settle(now);
        true
    }

    /// An eviction answered the exchange in flight on `link_id`. `maybe_applied`: an earlier
    /// copy of the frame was answered 57 and may still commit.
    pub(super) fn evicted(
        &mut self,
        now: Instant,
        link_id: LinkId,
        eviction: &EvictionHeader,
        maybe_applied: bool,
    ) {
        let (reason, code) = (eviction.reason, eviction.error_code());
        let job = self
            .links
            .get(&link_id)
            .and_then(|link| link.in_flight.as_ref())
            .map(|in_flight| in_flight.job.clone());
        debug!(link = %link_id, ?reason, %code, "evicted");
        let (request, target) = match job {
            Some(Job::Login) => return self.sign_in_failed(now, link_id, code),
            Some(Job::Request(request, target)) => (request, target),
            // Our own exchanges (roster, routes, topics, attachments, pings) are asked
            // again on the next session; the sign-in budget bounds how often.
            Some(_) | None => return self.unsend_in_flight(now, link_id),
        };
        if maybe_applied {
            // Settled by the rules of a lost link: the write's outcome is unknown.
            self.close_link(now, link_id);
            return;
        }
        // The server blames the request itself, or it has now ended two sessions in a row:
        // writing it again would only end another. Only the second question counts a loss.
        if reason.blames_request() || self.session_lost_under(request) {
            warn!(link = %link_id, request = %request, ?reason, %code, "the server ended the session for this request; it fails and is not written again");
            self.settle_in_flight(
                now,
                link_id,
                (request, target),
                Attempt::Failed(RequestError::Evicted { reason, code }),
            );
        } else {
            // The session is gone; the request was not processed under it.
            self.unsend_in_flight(now, link_id);
        }
    }

    /// The link of `request` was lost with it in flight: what becomes of it. The first
    /// loss settles it by the rules of a lost link (a read is asked again, a write's outcome
    /// is unknown); a second one in a row ends it.
    pub(super) fn lost_in_flight(&mut self, request: RequestId, target: Target) -> Attempt {
        if !self.session_lost_under(request) {
            return Attempt::Unknown;
        }
        let node = match target {
            Target::Node(node) => Some(node),
            Target::Coordinator => None,
        };
        let write = self
            .requests
            .get(&request)
            .is_some_and(|entry| entry.request.facts().kind.is_write());
        debug!(request = %request, ?node, "second link lost with the request in flight; not written again");
        Attempt::Failed(if write {
            RequestError::OutcomeUnknown { node }
        } else {
            RequestError::ConnectionLost { node }
        })
    }

    /// Counts one session ended with `request` in flight; whether that makes
    /// [`SESSIONS_LOST_MAX`] in a row.
    pub(super) fn session_lost_under(&mut self, request: RequestId) -> bool {
        let Some(entry) = self.requests.get_mut(&request) else {
            return false;
        };
        entry.sessions_lost = entry.sessions_lost.saturating_add(1);
        entry.sessions_lost >= SESSIONS_LOST_MAX
    }

    /// A live session answered `request`: the losses before no longer count as in a row.
    pub(super) fn session_answered(&mut self, request: RequestId) {
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.sessions_lost = 0;
        }
    }

    /// Takes the exchange off the link, closes the link (the session is over), then
    /// reports the request's attempt, so the loss of the link settles nothing twice.
    fn settle_in_flight(
        &mut self,
        now: Instant,
        link_id: LinkId,
        (request, target): (RequestId, Target),
        attempt: Attempt,
    ) {
        if let Some(link) = self.links.get_mut(&link_id) {
            link.in_flight = None;
        }
        self.close_link(now, link_id);
        self.routing.handle_result(now, request, target, attempt);
    }
}
