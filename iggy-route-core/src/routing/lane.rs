//! A lane: the queue of requests bound for one target (a partition's primary, or the
//! metadata leader), with what is known of where that target is.
//!
//! A lane releases one request at a time, so the requests of one partition reach the wire
//! in the order they were submitted, and a refused request goes back to the head.

use std::collections::VecDeque;
use std::time::Instant;

use crate::ids::{NodeId, PartitionKey, RequestId};

/// What a lane leads to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LaneKey {
    /// The primary of one partition.
    Partition(PartitionKey),
    /// The metadata leader (the roster's node with role Leader): metadata commands.
    MetadataLeader,
}

/// Where a lane's requests go, and under which knowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) node: NodeId,
    /// Metadata watermark the route was learned under; below the client's, it is stale.
    pub(crate) watermark: u64,
}

/// The single-flight state of a lane's lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    Idle,
    InFlight,
}

#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) queue: VecDeque<RequestId>,
    /// The request released to a node and not yet answered. It stays here even if its
    /// deadline completes it, until the link reports the attempt over, so that the next
    /// request of the partition cannot overtake it on the wire.
    pub(crate) active: Option<RequestId>,
    /// The sends merged into the active request's frame, in frame order: in flight with it,
    /// and settled with it.
    pub(crate) riders: Vec<RequestId>,
    pub(crate) route: Option<Route>,
    pub(crate) lookup: Lookup,
    /// Bumped by every new piece of route knowledge (a lookup answer, a discovery round).
    pub(crate) generation: u64,
    /// Nothing is released or looked up before this instant.
    pub(crate) backoff_until: Option<Instant>,
    /// Consecutive lookups that named the node that had just refused.
    pub(crate) backoff_streak: u32,
    /// The node a lookup named although it had just refused the head request: while the
    /// lane's writes back off from it, its route is looked up again, first after
    /// `Config::route_recheck_interval`, so that a new primary is acted on at once.
    pub(crate) recheck_node: Option<NodeId>,
    /// Since when the lane's writes have found no way to their node (not sent: the node
    /// could not be reached), while lookups keep naming it: the wait between rechecks grows
    /// to a quarter of that time (up to `Config::route_backoff_max`), so that a node silent
    /// for long (paused, or cut off with no election) is not asked about dozens of times a
    /// second. A refusal clears it: a node that answers is in an election, whose new
    /// primary is seen within `Config::route_recheck_interval`.
    pub(crate) silent_since: Option<Instant>,
    /// Discovery by refusal: nodes that refused in the current round.
    pub(crate) tried: Vec<NodeId>,
}

impl Lane {
    pub(crate) fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            active: None,
            riders: Vec::new(),
            route: None,
            lookup: Lookup::Idle,
            generation: 0,
            backoff_until: None,
            backoff_streak: 0,
            recheck_node: None,
            silent_since: None,
            tried: Vec::new(),
        }
    }

    /// Requests waiting plus those in flight: what the per-lane bound counts.
    pub(crate) fn len(&self) -> usize {
        self.queue.len() + usize::from(self.active.is_some()) + self.riders.len()
    }

    /// Whether the request is in the frame in flight (the active one or a rider).
    pub(crate) fn in_flight(&self, id: RequestId) -> bool {
        self.active == Some(id) || self.riders.contains(&id)
    }

    pub(crate) fn in_backoff(&self, now: Instant) -> bool {
        self.backoff_until.is_some_and(|until| until > now)
    }

    /// Whether requests wait in this lane because its last attempt found no primary (a
    /// node did not admit since the last route news, or the lane backs off): a balanced
    /// send passes it over. An idle lane never waits, so a partition passed over is
    /// balanced to again once its queue has drained.
    ///
    /// `recheck_node` is not asked: it outlives its backoff until a write is admitted (a
    /// served read does not clear it), so a lane whose reads are served would be passed
    /// over for good. Its backoff, which `in_backoff` sees, is what holds the writes.
    pub(crate) fn waits_for_primary(&self, now: Instant) -> bool {
        let troubled = !self.tried.is_empty() || self.in_backoff(now);
        self.len() > 0 && troubled
    }

    /// Removes a waiting request (its deadline passed); the active one is left alone.
    pub(crate) fn remove_waiting(&mut self, id: RequestId) -> bool {
        match self.queue.iter().position(|&queued| queued == id) {
            Some(index) => {
                self.queue.remove(index);
                true
            }
            None => false,
        }
    }
}
