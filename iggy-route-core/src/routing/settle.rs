//! A request's end: its deadline, its completion exactly once, whether it may have taken
//! effect, and the timing rules the answers it gets are read by (whether a reply proves a primary, whether an "absent" may
//! predate our own write, the backoff between lookups).

use std::time::{Duration, Instant};

use tracing::{debug, trace};

use super::{
    Decision, LaneKey, Place, RequestFacts, RequestKind, Routing, RoutingCommands, Target, TimerKey,
};
use crate::config::DeliveryGuarantee;
use crate::ids::RequestId;
use crate::request::RequestError;

impl Routing {
    pub(super) fn expire(&mut self, now: Instant, id: RequestId) {
        let Some(pending) = self.pending.get(&id) else {
            return;
        };
        if pending.completed || pending.deadline > now {
            return;
        }
        if let (Place::Topic(_), Some(error)) = (&pending.place, &pending.doubted) {
            // Never written, and the cluster's last word was an answer that would have
            // ended it but for the doubt: that answer, not "timed out" (which says that
            // a write may have been stored).
            let error = error.clone();
            self.complete(now, id, Err(error));
            return;
        }
        let after = now.saturating_duration_since(pending.submitted_at);
        let in_doubt = self.may_have_taken_effect(id);
        self.stats.timeouts += 1;
        self.complete(now, id, Err(RequestError::TimedOut { after, in_doubt }));
    }

    /// Whether a request that ends now may have taken effect: a write in flight (or
    /// released to the coordinator, which may have written it), or one an earlier attempt
    /// of which was lost in flight. One waiting for its topic or in its lane's queue was
    /// refused, or never written, on every attempt.
    /// Fails every pending request with `error` (for example when sign-in is refused); a
    /// write that may have taken effect (on the wire on another link) ends
    /// `OutcomeUnknown` instead.
    pub fn fail_all(&mut self, now: Instant, error: RequestError) {
        let now = self.clock(now);
        let ids: Vec<RequestId> = self.pending.keys().copied().collect();
        for id in ids {
            let error = if self.may_have_taken_effect(id) {
                RequestError::OutcomeUnknown { node: None }
            } else {
                error.clone()
            };
            self.complete(now, id, Err(error));
        }
    }

    /// An attempt of `id` at `target` may have taken effect although it is not reported
    /// as such (a group offset's commit poll was served): however it ends, it ends in doubt.
    /// The sends merged into `id`'s frame, in flight with it, are marked with it.
    pub fn may_have_applied(&mut self, id: RequestId, target: Target) {
        let mut frame = vec![id];
        if let Some(Place::Lane(key)) = self.pending.get(&id).map(|p| &p.place)
            && let Some(lane) = self.lanes.get(key)
            && lane.active == Some(id)
        {
            frame.extend(lane.riders.iter().copied());
        }
        for id in frame {
            if let Some(pending) = self.pending.get_mut(&id) {
                pending.maybe_applied_at.get_or_insert(target);
            }
        }
    }

    /// Whether a request of `kind` whose earlier copy may have taken effect may be written
    /// again: a send under at-least-once, an offset write (storing the same offset twice
    /// leaves the same state), and anything that only reads.
    pub(super) fn may_write_again(&self, kind: &RequestKind) -> bool {
        match kind {
            RequestKind::Send => self.delivery() == DeliveryGuarantee::AtLeastOnce,
            RequestKind::StoreOffset => true,
            kind @ (RequestKind::Poll { .. }
            | RequestKind::MetadataRead
            | RequestKind::SessionRead
            | RequestKind::PartitionCommand { .. }
            | RequestKind::MetadataWrite(_)) => !kind.is_write(),
        }
    }

    pub(super) fn may_have_taken_effect(&self, id: RequestId) -> bool {
        let Some(pending) = self.pending.get(&id) else {
            return false;
        };
        let on_the_wire = match &pending.place {
            Place::Topic(_) => false,
            Place::Lane(key) => self.lanes.get(key).is_some_and(|lane| lane.in_flight(id)),
            Place::Coordinator => true,
        };
        pending.facts.kind.is_write() && (on_the_wire || pending.maybe_applied_at.is_some())
    }

    /// `id` waits for its topic to be read again after `error`, which would have ended it
    /// but that the answering node may not know yet what it asked for. Should its deadline
    /// come first, it ends with `error` (see [`Routing::expire`]).
    pub(super) fn doubted(&mut self, id: RequestId, error: RequestError) {
        if let Some(pending) = self.pending.get_mut(&id) {
            pending.doubted = Some(error);
        }
    }

    /// Completes a request exactly once. A request still in flight in its lane stays there
    /// as a marker (see [`Lane::active`]) until its attempt is reported over.
    pub(crate) fn complete(
        &mut self,
        now: Instant,
        id: RequestId,
        outcome: Result<(), RequestError>,
    ) {
        if let Some(Place::Lane(key)) = self.settle(id, outcome) {
            self.pump_lane(now, &key);
        }
    }

    /// [`Routing::complete`] without moving the lane on: the caller pumps it once after
    /// settling a whole frame. The request's place, when it was completed now.
    pub(super) fn settle(
        &mut self,
        id: RequestId,
        outcome: Result<(), RequestError>,
    ) -> Option<Place> {
        let pending = self.pending.get_mut(&id)?;
        if pending.completed {
            return None;
        }
        // A write an earlier attempt of which was lost in flight (and written again under
        // at-least-once) may be stored, whatever ends its later attempts: a caller told
        // otherwise (a refused sign-in, a shutdown, a refusal of the copy written again)
        // would take it for not stored.
        let outcome = match (outcome, pending.maybe_applied_at) {
            (Err(error), Some(target)) if pending.facts.kind.is_write() && !error.in_doubt() => {
                Err(RequestError::OutcomeUnknown {
                    node: super::inputs::node_of(target),
                })
            }
            (outcome, _) => outcome,
        };
        let place = pending.place.clone();
        let deadline = pending.deadline;
        let send = pending.facts.kind == RequestKind::Send;
        self.timers.remove(&(deadline, TimerKey::Request(id)));
        let mut keep_marker = false;
        match &place {
            Place::Topic(topic) => {
                if let Some(state) = self.topics.get_mut(topic) {
                    state.waiting.retain(|&w| w != id);
                }
            }
            Place::Lane(key) => {
                if let Some(lane) = self.lanes.get_mut(key) {
                    if lane.in_flight(id) {
                        keep_marker = true;
                    } else {
                        lane.remove_waiting(id);
                    }
                }
            }
            // A coordinator request is answered by the coordinator link; a late answer for
            // a completed one is ignored there.
            Place::Coordinator => {}
        }
        if keep_marker {
            if let Some(pending) = self.pending.get_mut(&id) {
                pending.completed = true;
            }
        } else {
            self.pending.remove(&id);
        }
        self.stats.completed += 1;
        if send && outcome.is_ok() {
            self.stats.sends += 1;
        }
        trace!(request = %id, ok = outcome.is_ok(), "completed");
        self.decisions.push_back(Decision::Completed {
            request: id,
            outcome,
        });
        Some(place)
    }

    /// Whether a backup would serve `request` without refusing it, so that its admission
    /// says nothing about where the partition's primary is: a poll in the plain form
    /// (`POLL_MESSAGES`, 100), which is every plain poll, and every poll on a cluster
    /// without the primary-gated form (104).
    pub(super) fn served_by_any_replica(&self, facts: &RequestFacts) -> bool {
        match facts.kind {
            RequestKind::Poll { auto_commit } => {
                !auto_commit || self.routing_commands == RoutingCommands::Unsupported
            }
            // A backup answers a read of the partition without refusing it.
            RequestKind::PartitionCommand { write } => !write,
            RequestKind::Send
            | RequestKind::StoreOffset
            | RequestKind::MetadataRead
            | RequestKind::SessionRead
            | RequestKind::MetadataWrite(_) => false,
        }
    }

    /// Whether `request` is a metadata read on the metadata leader's lane, which the
    /// session's node can answer instead when the leader cannot be reached.
    pub(super) fn read_of_the_leader(&self, place: &Place, request: RequestId) -> bool {
        *place == Place::Lane(LaneKey::MetadataLeader)
            && self
                .pending
                .get(&request)
                .is_some_and(|p| p.facts.kind == RequestKind::MetadataRead)
    }

    /// Whether the metadata leader's link failed since it last answered: metadata reads go
    /// to the session's node meanwhile.
    pub(super) fn leader_silent(&self) -> bool {
        self.lanes
            .get(&LaneKey::MetadataLeader)
            .is_some_and(|lane| lane.silent_since.is_some())
    }

    /// A metadata read whose link to the leader failed: the session's node answers it now
    /// (perhaps a little behind the leader; the doubt after our own writes applies there),
    /// rather than the read waiting out its deadline while the leader is down and not yet
    /// replaced. Later reads go there too until the leader answers again.
    pub(super) fn read_at_the_session(&mut self, now: Instant, request: RequestId) {
        if let Some(lane) = self.lanes.get_mut(&LaneKey::MetadataLeader) {
            lane.silent_since.get_or_insert(now);
        }
        debug!(%request, "metadata leader unreachable; reading at the session's node");
        if let Some(pending) = self.pending.get_mut(&request) {
            pending.place = Place::Coordinator;
        }
        self.retry_coordinator(request);
        self.pump_lane(now, &LaneKey::MetadataLeader);
    }

    /// Whether one of our own metadata writes succeeded less than `own_write_settle` ago.
    pub(crate) fn own_write_unsettled(&self, now: Instant) -> bool {
        self.own_write_at
            .and_then(|at| at.checked_add(self.config.own_write_settle))
            .is_some_and(|settled| now < settled)
    }

    /// Whether an answer of "absent" at `now` may predate one of our own metadata writes
    /// (within `own_write_settle` of it), and if so how long to wait before asking again:
    /// half the time since the write, from `route_backoff_initial` up to
    /// `route_backoff_max`, jittered, so that a settle window of a second asks about
    /// fifteen times. `None` when the answer is to be believed, also when the next ask would
    /// come at or after `deadline`: a request ends with the answer, not with a timeout.
    pub(super) fn doubt_wait(
        &mut self,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Option<Duration> {
        let at = self.own_write_at?;
        let settled = at.checked_add(self.config.own_write_settle)?;
        if now >= settled {
            return None;
        }
        let since = now.saturating_duration_since(at);
        let base = (since / 2)
            .max(self.config.route_backoff_initial)
            .min(self.config.route_backoff_max);
        let wait = self.rng.jitter(base);
        if deadline.is_some_and(|deadline| now + wait >= deadline) {
            return None;
        }
        Some(wait)
    }

    /// How long to wait before sending again a request that its partition's node answered
    /// "not found", when that may only mean the node lags: the request's topic was read
    /// less than `own_write_settle` ago (by the session's node or the leader, which knew
    /// it), and the request is young enough to wait (`lag_wait`). A node's partition plane
    /// knows only what its metadata copy holds, which lags the leader's for a while after
    /// another client creates a topic. `None` when the answer is to be believed.
    pub(super) fn unknown_yet_wait(&mut self, now: Instant, id: RequestId) -> Option<Duration> {
        let topic = self.topic_of(id)?;
        let read_at = self.topics.get(&topic)?.read_at?;
        if now.saturating_duration_since(read_at) >= self.config.own_write_settle {
            return None;
        }
        self.lag_wait(now, id)
    }

    /// Ends a frame with `error`. A "not found" also forgets what is known of the topic:
    /// the next request reads it again.
    pub(super) fn fail_frame(
        &mut self,
        now: Instant,
        frame: &[RequestId],
        place: &Place,
        error: RequestError,
    ) {
        if let RequestError::Server { code } = &error
            && code.is_not_found()
            && let Some(topic) = self.topic_of(frame[0])
        {
            self.invalidate_topic(&topic);
        }
        self.complete_frame(now, frame, place, &Err(error));
    }

    /// The deadline of a pending request.
    pub(super) fn deadline_of(&self, id: RequestId) -> Option<Instant> {
        self.pending.get(&id).map(|p| p.deadline)
    }

    pub(super) fn delivery(&self) -> DeliveryGuarantee {
        self.config.delivery
    }

    pub(super) fn backoff_for(&mut self, streak: u32) -> Duration {
        let base = crate::rng::backoff(
            self.config.route_backoff_initial,
            self.config.route_backoff_max,
            streak,
        );
        self.rng.jitter(base)
    }
}
