//! What the router waits for, and why: the reasons of the next wake-up, and each link's
//! next deadline.

use std::collections::BTreeMap;
use std::time::Instant;

use super::Router;
use super::link::{Link, LinkState};
use super::requests::Entry;
use crate::config::Config;
use crate::event::LinkRole;
use crate::ids::RequestId;
use crate::routing::RoutingTimer;

/// Why the router wants [`super::Router::handle_timeout`] called.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKind {
    /// Outputs are queued: drain them now.
    Output,
    /// A connection attempt runs out of time.
    Connect,
    /// The reply to the exchange in flight on a link is due.
    Reply,
    /// A request answered "not committed yet" (57) is to be written again, or given up
    /// because it is over.
    Replay,
    /// A quiet link is owed a heartbeat (`PING`).
    Heartbeat,
    /// An unused data link is to be closed.
    Idle,
    /// The coordinator's node may be dialled again.
    CoordinatorReconnect,
    /// A node that requests wait for, and whose pool a backoff kept from growing, may be
    /// dialled again.
    NodeRetry,
    /// One of the routing layer's timers.
    Routing(RoutingTimer),
    /// A call waiting for room (see `Router::submit_waiting`) waits no longer.
    RoomWait,
}

impl Router {
    /// When `handle_timeout` is next due; `Some(now)` while outputs are queued, `None` when
    /// nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(at, _)| at)
    }

    /// When `handle_timeout` is next due and what for: the earliest of the routing
    /// layer's timers, the links' deadlines (read from their index, not by a scan), the
    /// coordinator's redial, the end of the backoff of a node that requests wait for, and
    /// the first deadline of a call waiting for room. An earlier instant wins; at the same instant, the reason listed first in
    /// [`TimerKind`].
    #[must_use]
    pub fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        if !self.outputs.is_empty() {
            return Some((self.last_now, TimerKind::Output));
        }
        debug_assert!(
            self.links.is_filed(),
            "link deadlines are filed after every input"
        );
        let routing = self
            .routing
            .next_timer()
            .map(|(at, timer)| (at, TimerKind::Routing(timer)));
        let now = self.last_now;
        let limit = self.sign_in_limit();
        let redial = (self.coordinator.link.is_none() && !self.closed)
            .then(|| {
                self.node(self.coordinator.node)
                    .and_then(|n| n.ready_at(now, limit))
            })
            .flatten()
            .map(|at| (at, TimerKind::CoordinatorReconnect));
        // A node's pool grows only past its backoff (see `grow_pool`): requests waiting
        // for it are served sooner when the backoff ends. One entry per node at most.
        let pool_retry = self
            .ready
            .iter()
            .filter(|(_, waiting)| !waiting.is_empty())
            .filter_map(|(node, _)| self.node(*node).and_then(|n| n.ready_at(now, limit)))
            .filter(|at| *at > now)
            .min()
            .map(|at| (at, TimerKind::NodeRetry));
        let room_wait = self
            .waiting
            .next_deadline()
            .map(|at| (at, TimerKind::RoomWait));
        [routing, self.links.next(), redial, pool_retry, room_wait]
            .into_iter()
            .flatten()
            .min_by_key(|(at, kind)| (*at, *kind))
    }
}

/// When a link next needs attention, and for what.
pub(super) fn link_deadline(
    link: &Link,
    config: &Config,
    requests: &BTreeMap<RequestId, Entry>,
    last_now: Instant,
) -> Option<(Instant, TimerKind)> {
    match link.state {
        LinkState::Connecting => {
            Some((link.opened_at + config.connect_timeout, TimerKind::Connect))
        }
        LinkState::SigningIn | LinkState::Ready => {
            if let Some(in_flight) = &link.in_flight {
                let Some(replay_at) = in_flight.replay_at else {
                    return Some((in_flight.deadline, TimerKind::Reply));
                };
                // Waiting to replay a 57: nothing is on the wire, so no attempt timeout
                // runs; the wait ends at the replay or when the request is over (at once
                // when it is over already).
                let request_over = if in_flight.request().is_some() {
                    // A merged frame is wanted while any of its callers waits for it.
                    in_flight
                        .carried()
                        .filter_map(|id| requests.get(&id).map(|entry| entry.deadline))
                        .max()
                        .unwrap_or(last_now)
                } else {
                    replay_at
                };
                return Some((replay_at.min(request_over), TimerKind::Replay));
            }
            let heartbeat = link.last_sent + config.heartbeat_interval;
            match link.role {
                LinkRole::Coordinator => Some((heartbeat, TimerKind::Heartbeat)),
                // A member link lives as long as its membership.
                LinkRole::Data if link.member_of.is_some() => {
                    Some((heartbeat, TimerKind::Heartbeat))
                }
                LinkRole::Data => {
                    let idle = link.last_used + config.data_link_idle_timeout;
                    if idle < heartbeat {
                        Some((idle, TimerKind::Idle))
                    } else {
                        Some((heartbeat, TimerKind::Heartbeat))
                    }
                }
            }
        }
    }
}
