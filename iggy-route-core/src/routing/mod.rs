//! The routing layer: every decision about where a request goes, in typed values.
//!
//! No bytes and no connections here. Inputs say what was learned (a request, a refusal, a
//! lookup answer, a roster, the passage of time); outputs ([`Decision`]) say what to do next
//! (write request R to node N, look partition P up, read the roster, complete R). The link
//! layer above owns the requests and their payloads: it hands this layer a request's
//! [`RequestFacts`] and an answer's [`Served`], turns decisions into frames and frames back
//! into inputs, so the rules below can be tested and model-checked without a wire. Nothing
//! here calls up into the link layer.
//!
//! # The rules
//! - A partition's requests wait in its lane and are released one at a time to the lane's
//!   route: the partition's primary, learned from a lookup and stamped with the metadata
//!   watermark it was learned under. A route below the current watermark is stale.
//! - At most one lookup per lane is in flight; the lane's requests wait while it runs.
//! - A refusal drops the route and starts a lookup at once; the refused request goes back
//!   to the head of its lane and is written to whatever node the answer names. Only when
//!   the answer names the node that just refused (an election in progress) does the lane
//!   back off, with jitter, from a few milliseconds, doubling, capped well under a second.
//! - Where the cluster has no routing commands, the lane tries the roster's nodes in turn
//!   (discovery by refusal) and keeps the node that admits.
//! - Every request has a deadline; every queue has a bound.

// Without `internals` the module is the router's alone: its `pub` items are then reached
// only from inside the crate, and the inspection methods only the tests call go unused.
#![cfg_attr(not(feature = "internals"), allow(unreachable_pub, dead_code))]

mod answers;
mod choose;
mod decide;
mod facts;
mod inputs;
pub(crate) mod lane;
mod queries;
mod roster;
mod settle;
mod topics;
mod values;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use tracing::trace;

use crate::config::{Config, PollFrom};
use crate::event::Stats;
use crate::ids::{NodeId, PartitionKey, RequestId, TopicKey};
use crate::request::{RequestError, SubmitError};
use crate::rng::Rng;

// Tests build request facts of their own sizes.
#[cfg(feature = "internals")]
pub use facts::BatchSize;
pub use facts::{OwnWrite, PartitionChoice, RequestFacts, RequestKind, Served};
use lane::Lane;
pub use lane::LaneKey;
pub(crate) use roster::Roster;
use topics::TopicState;
pub use values::{
    Attempt, Decision, RouteAnswer, RoutingCommands, RoutingTimer, Target, TopicAnswer,
};

/// One request from submit to completion.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) facts: RequestFacts,
    pub(crate) submitted_at: Instant,
    pub(crate) deadline: Instant,
    pub(crate) place: Place,
    /// The partition chosen for it, once its topic's partition count was known.
    pub(crate) partition: Option<u32>,
    /// The last node that refused it, and the lane generation of the route it had then.
    pub(crate) refused_by: Option<(NodeId, u64)>,
    /// The node whose copy last answered this offset write "past the end".
    pub(crate) past_end_from: Option<NodeId>,
    /// Completed by its deadline while in flight: kept only to hold the lane.
    pub(crate) completed: bool,
    /// The answer it ends with at its deadline while it waits to read its topic again.
    pub(crate) doubted: Option<RequestError>,
    /// Where an attempt of it may have taken effect (lost in flight, answered 57 and then
    /// not admitted, a group offset's commit poll served): whatever follows, it may be
    /// stored.
    pub(crate) maybe_applied_at: Option<Target>,
}

/// Whether accepting a request checks the bounds, or it takes the room of the request it
/// continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    Checked,
    Continuation,
}

/// Where a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// Waiting for its topic's partition count.
    Topic(TopicKey),
    /// In a lane (waiting, or released when it is the lane's active request).
    Lane(LaneKey),
    /// Released to the coordinator.
    Coordinator,
}

/// A deadline of the routing layer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    Request(RequestId),
    /// A coordinator read to ask again.
    Retry(RequestId),
    Lane(LaneKey),
    /// Look a backing-off lane's route up again (see [`Lane::recheck_node`]).
    Recheck(LaneKey),
    Topic(TopicKey),
    /// A lane's first send has waited `Config::linger` for company.
    Linger(LaneKey),
}

/// The routing layer. See the module documentation for its rules.
#[derive(Debug)]
pub struct Routing {
    config: Config,
    last_now: Instant,
    rng: Rng,
    next_request: u64,
    pending: BTreeMap<RequestId, Pending>,
    lanes: BTreeMap<LaneKey, Lane>,
    topics: BTreeMap<TopicKey, TopicState>,
    timers: BTreeSet<(Instant, TimerKey)>,
    decisions: VecDeque<Decision>,
    /// The roster as last read: the replicas' order, and the nodes discovery tries in
    /// that order. The router reads it too (see [`Routing::roster`]).
    roster: Roster,
    leader: Option<NodeId>,
    roster_fetch_in_flight: bool,
    routing_commands: RoutingCommands,
    /// The lane whose lookup asks, for the whole client, whether the routing commands
    /// exist (while `routing_commands` is `Unknown`).
    probe: Option<LaneKey>,
    watermark: u64,
    /// When our last metadata write succeeded: until `Config::own_write_settle` after it,
    /// a read that finds a stream or topic absent may predate the write.
    own_write_at: Option<Instant>,
    stats: Stats,
    closed: bool,
}

impl Routing {
    /// A routing layer with no knowledge yet. `seed` drives the backoff jitter.
    pub fn new(config: Config, seed: u64, now: Instant) -> Self {
        Self {
            config,
            last_now: now,
            rng: Rng::new(seed),
            next_request: 1,
            pending: BTreeMap::new(),
            lanes: BTreeMap::new(),
            topics: BTreeMap::new(),
            timers: BTreeSet::new(),
            decisions: VecDeque::new(),
            roster: Roster::default(),
            leader: None,
            roster_fetch_in_flight: false,
            routing_commands: RoutingCommands::Unknown,
            probe: None,
            watermark: 0,
            own_write_at: None,
            stats: Stats::default(),
            closed: false,
        }
    }

    /// Accepts a request (the link layer has checked its shape), or refuses it at once
    /// because a bound is reached or the layer is shut down.
    pub fn admit(
        &mut self,
        now: Instant,
        facts: impl Into<RequestFacts>,
    ) -> Result<RequestId, SubmitError> {
        // Time that seems to go backwards is taken as the last instant seen, for the
        // deadline too.
        let now = self.clock(now);
        let deadline = now + self.config.request_timeout;
        self.admit_by(now, facts, deadline)
    }

    /// [`Routing::admit`] for a request that must be over by `deadline` (a step of a
    /// caller's request, which may not outlive it) instead of a full `request_timeout` from
    /// now.
    pub fn admit_by(
        &mut self,
        now: Instant,
        facts: impl Into<RequestFacts>,
        deadline: Instant,
    ) -> Result<RequestId, SubmitError> {
        self.enter(now, facts.into(), deadline, Room::Checked)
    }

    /// Accepts a request; a continuation of an accepted request takes that one's room.
    fn enter(
        &mut self,
        now: Instant,
        facts: RequestFacts,
        deadline: Instant,
        room: Room,
    ) -> Result<RequestId, SubmitError> {
        let now = self.clock(now);
        if self.closed {
            return Err(SubmitError::Closed);
        }
        if room == Room::Checked && self.pending.len() >= self.config.max_pending_requests {
            return Err(SubmitError::QueueFull {
                limit: self.config.max_pending_requests,
            });
        }
        let place = match (&facts.kind, &facts.topic) {
            (RequestKind::Send | RequestKind::StoreOffset, Some(topic)) => {
                Place::Topic(topic.clone())
            }
            // A poll of one partition is read where its sends were admitted (read your
            // writes), and an auto-commit poll always is: a backup serves it but drops
            // the commit (protocol §5.1).
            (RequestKind::Poll { auto_commit }, Some(topic))
                if matches!(facts.choice, PartitionChoice::Explicit(_))
                    && (*auto_commit || self.config.poll_from == PollFrom::Primary) =>
            {
                Place::Topic(topic.clone())
            }
            (RequestKind::PartitionCommand { .. }, Some(topic)) => Place::Topic(topic.clone()),
            // A metadata read goes where the writes commit: a follower applies a write (ours
            // or another client's) up to half a second after the leader, and a list read
            // cannot tell it is stale. The SDK's session reads there too. While the leader
            // cannot be reached, the session's node answers.
            (RequestKind::MetadataRead, _) if self.leader_silent() => Place::Coordinator,
            (RequestKind::MetadataWrite(_) | RequestKind::MetadataRead, _) => {
                Place::Lane(LaneKey::MetadataLeader)
            }
            (
                RequestKind::Send | RequestKind::StoreOffset | RequestKind::PartitionCommand { .. },
                None,
            )
            | (RequestKind::Poll { .. } | RequestKind::SessionRead, _) => Place::Coordinator,
        };
        if room == Room::Checked {
            self.check_room(now, &place, &facts)?;
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.timers.insert((deadline, TimerKey::Request(id)));
        self.pending.insert(
            id,
            Pending {
                facts,
                submitted_at: now,
                deadline,
                place: place.clone(),
                partition: None,
                refused_by: None,
                past_end_from: None,
                completed: false,
                doubted: None,
                maybe_applied_at: None,
            },
        );
        trace!(request = %id, ?place, "submitted");
        match place {
            Place::Topic(topic) => self.enqueue_for_topic(now, id, topic),
            Place::Lane(lane) => {
                self.lanes
                    .entry(lane.clone())
                    .or_insert_with(Lane::new)
                    .queue
                    .push_back(id);
                self.pump_lane(now, &lane);
            }
            Place::Coordinator => self.decisions.push_back(Decision::Write {
                request: id,
                coalesced: Vec::new(),
                target: Target::Coordinator,
                partition: None,
            }),
        }
        Ok(id)
    }

    fn check_room(
        &self,
        now: Instant,
        place: &Place,
        facts: &RequestFacts,
    ) -> Result<(), SubmitError> {
        let limit = self.config.max_pending_per_lane;
        let queued = match place {
            Place::Topic(topic) => {
                let state = self.topics.get(topic);
                let waiting = state.map_or(0, |t| t.waiting.len());
                // With a partition count read before, the request's own partition queue is
                // known already (as far as that count still holds): check that one too. The
                // last count read counts even while it is cleared for a read again: a call
                // that waited for room, was let in, and found its partition's queue full
                // once the count came must not be let in again until that queue has room
                // (else it goes round the line and the topic read at one instant).
                let lane = state
                    .and_then(|t| t.last_count.map(|count| (count, t.balanced_cursor)))
                    .and_then(|(count, cursor)| {
                        self.choose(now, topic, facts.choice, count, cursor)
                            .partition
                    })
                    .map(|partition| {
                        LaneKey::Partition(PartitionKey {
                            topic: topic.clone(),
                            partition,
                        })
                    })
                    .and_then(|lane| self.lanes.get(&lane))
                    .map_or(0, Lane::len);
                waiting.max(lane)
            }
            Place::Lane(lane) => self.lanes.get(lane).map_or(0, Lane::len),
            Place::Coordinator => 0,
        };
        if queued >= limit {
            return Err(SubmitError::QueueFull { limit });
        }
        Ok(())
    }

    /// Accepts a request that continues `after`, a request now active in its lane, and puts
    /// it first in that lane, so that it is released next, before anything queued behind
    /// `after` (the offset write of an auto-commit poll: the poll queued behind must read
    /// the offset it leaves). It is due by `deadline`, and takes the room of `after`, which
    /// completes right after it is accepted (at most one continuation per request): no bound
    /// refuses it. When `after` is in no lane (a poll of no particular partition), it is
    /// placed as [`Routing::admit_by`] places a request.
    pub fn admit_next(
        &mut self,
        now: Instant,
        facts: impl Into<RequestFacts>,
        deadline: Instant,
        after: RequestId,
    ) -> Result<RequestId, SubmitError> {
        let now = self.clock(now);
        let Some((Place::Lane(lane), partition)) = self
            .pending
            .get(&after)
            .map(|pending| (pending.place.clone(), pending.partition))
        else {
            return self.enter(now, facts.into(), deadline, Room::Continuation);
        };
        if self.closed {
            return Err(SubmitError::Closed);
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.timers.insert((deadline, TimerKey::Request(id)));
        self.pending.insert(
            id,
            Pending {
                facts: facts.into(),
                submitted_at: now,
                deadline,
                place: Place::Lane(lane.clone()),
                partition,
                refused_by: None,
                past_end_from: None,
                completed: false,
                doubted: None,
                maybe_applied_at: None,
            },
        );
        trace!(request = %id, continues = %after, "submitted first in its lane");
        self.lanes
            .entry(lane)
            .or_insert_with(Lane::new)
            .queue
            .push_front(id);
        Ok(id)
    }

    /// Time passed: deadlines expire, backoffs end. Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock(now);
        while let Some((at, _)) = self.timers.first() {
            if *at > now {
                break;
            }
            let Some((_, key)) = self.timers.pop_first() else {
                break;
            };
            match key {
                TimerKey::Request(id) => self.expire(now, id),
                TimerKey::Lane(lane) => {
                    if let Some(state) = self.lanes.get_mut(&lane)
                        && state.backoff_until.is_some_and(|until| until <= now)
                    {
                        state.backoff_until = None;
                    }
                    self.pump_lane(now, &lane);
                }
                TimerKey::Recheck(lane) => self.recheck_route(&lane, now),
                TimerKey::Linger(lane) => self.pump_lane(now, &lane),
                TimerKey::Topic(topic) => self.retry_topic(now, topic),
                TimerKey::Retry(id) => self.retry_coordinator(id),
            }
        }
    }

    /// The next decision, or `None` when there is nothing to do.
    #[must_use]
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// Whether decisions are queued.
    #[must_use]
    pub fn has_decisions(&self) -> bool {
        !self.decisions.is_empty()
    }

    /// When `handle_timeout` is next due: `None` when nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(at, _)| at)
    }

    /// When `handle_timeout` is next due, and for what.
    #[must_use]
    pub fn next_timer(&self) -> Option<(Instant, RoutingTimer)> {
        if !self.decisions.is_empty() {
            return Some((self.last_now, RoutingTimer::Decisions));
        }
        let (at, key) = self.timers.first()?;
        let reason = match key {
            TimerKey::Request(_) => RoutingTimer::RequestDeadline,
            TimerKey::Retry(_) => RoutingTimer::ReadRetry,
            TimerKey::Lane(_) => RoutingTimer::LaneBackoff,
            TimerKey::Recheck(_) => RoutingTimer::RouteRecheck,
            TimerKey::Topic(_) => RoutingTimer::TopicRetry,
            TimerKey::Linger(_) => RoutingTimer::Linger,
        };
        Some((*at, reason))
    }

    /// Stops taking requests and fails every pending one with `Shutdown`.
    pub fn shutdown(&mut self, now: Instant) {
        self.shutdown_with_unknown(now, &BTreeMap::new());
    }

    /// As [`Routing::shutdown`], but the writes in `on_the_wire` (written to the node named,
    /// no answer yet) fail with `OutcomeUnknown`: they may have been admitted, and
    /// `Shutdown` tells a caller that nothing was stored.
    pub fn shutdown_with_unknown(
        &mut self,
        now: Instant,
        on_the_wire: &BTreeMap<RequestId, NodeId>,
    ) {
        let now = self.clock(now);
        self.closed = true;
        let ids: Vec<RequestId> = self.pending.keys().copied().collect();
        for id in ids {
            let error = match on_the_wire.get(&id) {
                Some(&node) => RequestError::OutcomeUnknown { node: Some(node) },
                None => RequestError::Shutdown,
            };
            self.complete(now, id, Err(error));
        }
        self.lanes.clear();
        self.topics.clear();
        self.timers.clear();
    }

    fn clock(&mut self, now: Instant) -> Instant {
        // Time never goes backwards inside the core (docs/design.md, "The drive contract"):
        // an instant earlier than one already seen is taken as that one.
        if now > self.last_now {
            self.last_now = now;
        }
        self.last_now
    }
}

/// The topic key of a stream and topic identifier pair.
fn topic_key(stream: &crate::wire::Identifier, topic: &crate::wire::Identifier) -> TopicKey {
    TopicKey {
        stream: stream.clone(),
        topic: topic.clone(),
    }
}
