//! Releasing a lane's head request: to its route, to a lookup, or (without routing
//! commands) to the next node of the roster that has not refused it yet.

use std::time::{Duration, Instant};

use tracing::debug;

use super::lane::{Lookup, Route};
use super::{Decision, LaneKey, Routing, RoutingCommands, Target, TimerKey};
use crate::ids::{NodeId, RequestId};

impl Routing {
    /// Moves a lane forward as far as its knowledge allows. Called after every change to
    /// the lane; it queues at most one write or one lookup.
    pub(super) fn pump_lane(&mut self, now: Instant, key: &LaneKey) {
        let watermark = self.watermark;
        let Some(lane) = self.lanes.get(key) else {
            return;
        };
        if lane.active.is_some() || lane.in_backoff(now) {
            return;
        }
        let Some(&head) = lane.queue.front() else {
            return;
        };
        // Without routing commands nothing finds a poll's primary but our own writes.
        if matches!(key, LaneKey::Partition(_))
            && self.routing_commands == RoutingCommands::Unsupported
            && self
                .pending
                .get(&head)
                .is_some_and(|p| self.served_by_any_replica(&p.facts))
        {
            self.release_read(now, key);
            return;
        }
        let refused_by = self.pending.get(&head).and_then(|p| p.refused_by);
        let usable = lane.route.filter(|route| {
            let fresh = matches!(key, LaneKey::MetadataLeader) || route.watermark >= watermark;
            // Never write again to the node that refused, unless the route was learned
            // after the refusal (a newer generation).
            let news = refused_by.is_none_or(|(node, generation)| {
                node != route.node || lane.generation > generation
            });
            fresh && news
        });
        if let Some(route) = usable {
            if let Some(until) = self.lingers_until(now, key, head) {
                self.timers.insert((until, TimerKey::Linger(key.clone())));
                return;
            }
            self.release(key, route.node);
            return;
        }
        match key {
            LaneKey::MetadataLeader => self.fetch_roster(),
            LaneKey::Partition(partition) => match self.routing_commands {
                RoutingCommands::Unknown | RoutingCommands::Supported => {
                    // Until one lookup has said whether the cluster has the routing commands,
                    // only one is in flight at a time: a server without them answers each
                    // with `InvalidCommand` and a WARN line, so it is asked once, not once
                    // per partition.
                    let probing = self.routing_commands == RoutingCommands::Unknown;
                    if probing && self.probe.is_some() {
                        return;
                    }
                    let Some(lane) = self.lanes.get_mut(key) else {
                        return;
                    };
                    if lane.lookup == Lookup::Idle {
                        if probing {
                            self.probe = Some(key.clone());
                        }
                        lane.lookup = Lookup::InFlight;
                        self.stats.lookups += 1;
                        debug!(%partition, "route lookup");
                        self.decisions.push_back(Decision::FetchRoute {
                            partition: partition.clone(),
                        });
                    }
                }
                RoutingCommands::Unsupported => self.discover(now, key),
            },
        }
    }

    /// Writes the lane's head request to `node`, with the sends queued behind it that fit
    /// in the same frame.
    fn release(&mut self, key: &LaneKey, node: NodeId) {
        let Some(lane) = self.lanes.get(key) else {
            return;
        };
        let Some(&head) = lane.queue.front() else {
            return;
        };
        let (riders, _) = self.mergeable(key, node);
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        lane.queue.drain(..=riders.len());
        lane.active = Some(head);
        lane.riders.clone_from(&riders);
        self.stats.coalesced += riders.len() as u64;
        let partition = self.pending.get(&head).and_then(|p| p.partition);
        self.decisions.push_back(Decision::Write {
            request: head,
            coalesced: riders,
            target: Target::Node(node),
            partition,
        });
    }

    /// The sends behind a lane's head send that its frame to `node` can carry, in queue
    /// order, and whether the frame is full (a bound reached, or a request that cannot ride
    /// next in line). Only sends ride, only behind a send, and only those that may go to
    /// `node` (not refused there under the route the lane has now).
    fn mergeable(&self, key: &LaneKey, node: NodeId) -> (Vec<RequestId>, bool) {
        let mut riders = Vec::new();
        let Some(lane) = self.lanes.get(key) else {
            return (riders, true);
        };
        let mut queued = lane.queue.iter();
        let Some(head) = queued.next().and_then(|id| self.pending.get(id)) else {
            return (riders, true);
        };
        let (LaneKey::Partition(_), Some(size)) = (key, head.facts.batch) else {
            return (riders, true);
        };
        let max_messages = self.config.coalesce_max_messages;
        let max_bytes = self.frame_allowance();
        let (mut messages, mut bytes) = (size.messages, size.bytes);
        for &id in queued {
            let Some(pending) = self.pending.get(&id) else {
                return (riders, true);
            };
            let Some(size) = pending.facts.batch else {
                return (riders, true);
            };
            let barred = pending
                .refused_by
                .is_some_and(|(by, generation)| by == node && lane.generation <= generation);
            let (total_messages, total_bytes) = (
                messages.saturating_add(size.messages),
                bytes.saturating_add(size.bytes),
            );
            if barred || total_messages > max_messages || total_bytes > max_bytes {
                return (riders, true);
            }
            (messages, bytes) = (total_messages, total_bytes);
            riders.push(id);
        }
        let full = messages >= max_messages || bytes >= max_bytes;
        (riders, full)
    }

    /// The message bytes a merged frame may carry: `coalesce_max_bytes`, and never more
    /// than a frame of `max_frame_size` holds around its header, metadata and batch header.
    fn frame_allowance(&self) -> usize {
        // Header, metadata section (at most 4 + 2 * 257 + 6 + 4) and batch header.
        const OVERHEAD: usize = crate::wire::HEADER_SIZE + 528 + crate::wire::BATCH_HEADER_SIZE;
        let frame = (self.config.max_frame_size as usize).saturating_sub(OVERHEAD);
        (self.config.coalesce_max_bytes as usize).min(frame)
    }

    /// When a lane's head send lingers (see `Config::linger`): until `linger` after it was
    /// submitted, unless the frame is full already or the head is being retried.
    fn lingers_until(&self, now: Instant, key: &LaneKey, head: RequestId) -> Option<Instant> {
        if self.config.linger.is_zero() {
            return None;
        }
        let pending = self.pending.get(&head)?;
        if pending.facts.batch.is_none() || pending.refused_by.is_some() {
            return None;
        }
        let until = pending.submitted_at + self.config.linger;
        if until <= now {
            return None;
        }
        let node = self.lanes.get(key)?.route?.node;
        let (_, full) = self.mergeable(key, node);
        (!full).then_some(until)
    }

    /// A plain poll on a cluster without routing commands: a backup serves it from its own
    /// copy and never refuses, so discovery cannot find the primary with it. It is read from
    /// the node that admitted this client's last write to the partition (a route gone stale
    /// by a metadata write is still the best guess), else from the roster's nodes in order,
    /// skipping nodes whose links failed this round.
    fn release_read(&mut self, now: Instant, key: &LaneKey) {
        let Some(lane) = self.lanes.get(key) else {
            return;
        };
        let next = lane
            .route
            .map(|route| route.node)
            .into_iter()
            .chain(self.roster.nodes().iter().copied())
            .find(|node| !lane.tried.contains(node));
        match next {
            Some(node) => self.release(key, node),
            None if self.roster.nodes().is_empty() => self.fetch_roster(),
            None => {
                // Every node failed this round: wait before the next, as discovery does.
                let Some(lane) = self.lanes.get_mut(key) else {
                    return;
                };
                lane.tried.clear();
                let streak = lane.backoff_streak;
                lane.backoff_streak = streak.saturating_add(1);
                let wait = self.backoff_for(streak);
                self.set_lane_backoff(now, key, wait);
            }
        }
    }

    /// Discovery by refusal: the next roster node that has not refused in this round; when
    /// every node has refused, the round ends with a jittered backoff and starts again.
    fn discover(&mut self, now: Instant, key: &LaneKey) {
        if self.roster.nodes().is_empty() {
            self.fetch_roster();
            return;
        }
        let nodes = self.roster.nodes().to_vec();
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        if lane.tried.is_empty() {
            self.stats.lookups += 1;
        }
        // The node that admitted last (a route gone stale when the watermark moved) is the
        // best guess, so it goes first; then the roster's nodes in order.
        let remembered = lane
            .route
            .map(|route| route.node)
            .filter(|node| nodes.contains(node));
        let next = remembered
            .into_iter()
            .chain(nodes.iter().copied())
            .find(|node| !lane.tried.contains(node));
        match next {
            Some(node) => self.release(key, node),
            None => {
                lane.tried.clear();
                lane.generation += 1;
                let streak = lane.backoff_streak;
                lane.backoff_streak = streak.saturating_add(1);
                let wait = self.backoff_for(streak);
                self.set_lane_backoff(now, key, wait);
            }
        }
    }

    pub(super) fn set_lane_backoff(
        &mut self,
        now: Instant,
        key: &LaneKey,
        wait: std::time::Duration,
    ) {
        if let Some(lane) = self.lanes.get_mut(key) {
            let until = now + wait;
            lane.backoff_until = Some(until);
            self.timers.insert((until, TimerKey::Lane(key.clone())));
            debug!(lane = ?key, ?wait, "lane backs off");
        }
    }

    pub(super) fn fetch_roster(&mut self) {
        if !self.roster_fetch_in_flight {
            self.roster_fetch_in_flight = true;
            self.decisions.push_back(Decision::FetchRoster);
        }
    }

    /// Sets a lane's route from new knowledge, and backs off when that knowledge names the
    /// node that has just refused the lane's head request (an election in progress).
    pub(super) fn learn_route(&mut self, now: Instant, key: &LaneKey, route: Route) {
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        lane.generation += 1;
        lane.route = Some(route);
        // News: earlier refusals no longer bar a node.
        lane.tried.clear();
        let head_refused_by = lane
            .queue
            .front()
            .and_then(|head| self.pending.get(head))
            .and_then(|p| p.refused_by)
            .map(|(node, _)| node);
        if head_refused_by == Some(route.node) {
            let same_stale_answer = lane.recheck_node == Some(route.node) && lane.in_backoff(now);
            lane.recheck_node = Some(route.node);
            if !same_stale_answer {
                let streak = lane.backoff_streak;
                lane.backoff_streak = streak.saturating_add(1);
                let wait = self.backoff_for(streak);
                self.set_lane_backoff(now, key, wait);
            }
            // The writes wait out the backoff; the route is asked for again meanwhile.
            self.schedule_recheck(now, key);
        } else {
            lane.backoff_streak = 0;
            lane.silent_since = None;
            if lane.recheck_node.take().is_some() {
                // The answer changed while the lane backed off from a stale one: the new
                // primary is acted on now, not when the backoff ends.
                lane.backoff_until = None;
            }
        }
        self.pump_lane(now, key);
    }

    /// Asks for a backing-off lane's route again after `route_recheck_interval`, or, while
    /// its node cannot be reached, a quarter of the time it has not been (up to
    /// `route_backoff_max`), unless the backoff ends first (its end releases the lane).
    fn schedule_recheck(&mut self, now: Instant, key: &LaneKey) {
        let Some(lane) = self.lanes.get(key) else {
            return;
        };
        let stale_for = lane
            .silent_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let interval = (stale_for / 4)
            .min(self.config.route_backoff_max)
            .max(self.config.route_recheck_interval);
        let at = now + interval;
        let before_backoff_ends = lane.backoff_until.is_some_and(|until| at < until);
        if before_backoff_ends && self.routing_commands != RoutingCommands::Unsupported {
            self.timers.insert((at, TimerKey::Recheck(key.clone())));
        }
    }

    /// A recheck is due: one lookup, if the lane still backs off from a stale answer and no
    /// lookup is in flight (single-flight bounds the rate further).
    pub(super) fn recheck_route(&mut self, key: &LaneKey, now: Instant) {
        let LaneKey::Partition(partition) = key else {
            return;
        };
        if self.routing_commands == RoutingCommands::Unsupported {
            return;
        }
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        if lane.recheck_node.is_none() || !lane.in_backoff(now) || lane.lookup != Lookup::Idle {
            return;
        }
        lane.lookup = Lookup::InFlight;
        self.stats.lookups += 1;
        debug!(%partition, "route recheck");
        self.decisions.push_back(Decision::FetchRoute {
            partition: partition.clone(),
        });
    }
}
