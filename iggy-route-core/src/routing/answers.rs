//! What the link layer learned about the cluster: a route lookup's answer, the roster and
//! the metadata watermark.

use std::time::Instant;

use tracing::debug;

use super::lane::{Lookup, Route};
use super::{Decision, LaneKey, Roster, RouteAnswer, Routing, RoutingCommands};
use crate::event::Event;
use crate::ids::{NodeId, PartitionKey, RequestId};
use crate::request::RequestError;

impl Routing {
    /// The answer to a `FetchRoute`.
    pub fn handle_route(&mut self, now: Instant, partition: &PartitionKey, answer: RouteAnswer) {
        let now = self.clock(now);
        let key = LaneKey::Partition(partition.clone());
        let was_probe = self.probe.as_ref() == Some(&key);
        if was_probe {
            self.probe = None;
        }
        self.route_answered(now, key, partition, answer);
        if was_probe {
            // The lanes that waited for the probe go on: with the routing commands known,
            // or with one of them asking next.
            let keys: Vec<LaneKey> = self.lanes.keys().cloned().collect();
            for key in keys {
                self.pump_lane(now, &key);
            }
        }
    }

    fn route_answered(
        &mut self,
        now: Instant,
        key: LaneKey,
        partition: &PartitionKey,
        answer: RouteAnswer,
    ) {
        let Some(lane) = self.lanes.get_mut(&key) else {
            return;
        };
        lane.lookup = Lookup::Idle;
        match answer {
            RouteAnswer::Primary { node, watermark } => {
                if self.routing_commands == RoutingCommands::Unknown {
                    self.routing_commands = RoutingCommands::Supported;
                }
                // A node that has not applied our latest metadata write may answer with an
                // older watermark; the primary it names is still news, and taking it as
                // stale would only ask again.
                let watermark = watermark.max(self.watermark);
                self.decisions
                    .push_back(Decision::Event(Event::RouteLearned {
                        partition: partition.clone(),
                        node,
                    }));
                self.learn_route(now, &key, Route { node, watermark });
            }
            RouteAnswer::Unsupported => {
                if self.routing_commands != RoutingCommands::Unsupported {
                    self.routing_commands = RoutingCommands::Unsupported;
                    self.decisions
                        .push_back(Decision::Event(Event::DiscoveryByRefusal));
                }
                let keys: Vec<LaneKey> = self.lanes.keys().cloned().collect();
                for key in keys {
                    if let Some(lane) = self.lanes.get_mut(&key) {
                        lane.lookup = Lookup::Idle;
                    }
                    self.pump_lane(now, &key);
                }
            }
            RouteAnswer::Unavailable => {
                let streak = lane.backoff_streak;
                lane.backoff_streak = streak.saturating_add(1);
                let wait = self.backoff_for(streak);
                self.set_lane_backoff(now, &key, wait);
            }
            RouteAnswer::Failed(error) => {
                let waiting: Vec<RequestId> = lane.queue.iter().copied().collect();
                let not_found =
                    matches!(error, RequestError::Server { code } if code.is_not_found());
                if not_found && let Some(wait) = self.doubt_wait(now, None) {
                    // Shortly after our own metadata write the coordinator may not know the
                    // partition yet: look it up again after a wait. Requests that would
                    // outlive their deadline meanwhile end with the answer.
                    debug!(%partition, "route lookup found nothing soon after our write; asking again");
                    for id in waiting {
                        if self.deadline_of(id).is_some_and(|d| now + wait >= d) {
                            self.complete(now, id, Err(error.clone()));
                        }
                    }
                    self.set_lane_backoff(now, &key, wait);
                    return;
                }
                if not_found {
                    self.invalidate_topic(&partition.topic);
                }
                for id in waiting {
                    self.complete(now, id, Err(error.clone()));
                }
            }
        }
    }

    /// A roster was read: the nodes in roster order and the metadata leader, if it names one.
    pub fn handle_roster(&mut self, now: Instant, nodes: Vec<NodeId>, leader: Option<NodeId>) {
        let roster = Roster::from_replica_order(nodes.into_iter().map(Some).collect());
        self.handle_roster_read(now, roster, leader);
    }

    /// A roster was read, entry by entry (see [`Roster`]), and the metadata leader, if it
    /// names one.
    pub(crate) fn handle_roster_read(
        &mut self,
        now: Instant,
        roster: Roster,
        leader: Option<NodeId>,
    ) {
        let now = self.clock(now);
        self.roster_fetch_in_flight = false;
        self.roster = roster;
        self.leader = leader;
        let key = LaneKey::MetadataLeader;
        match leader {
            Some(node) if self.lanes.contains_key(&key) => {
                self.learn_route(now, &key, Route { node, watermark: 0 });
            }
            Some(_) => {}
            None => self.roster_unavailable(now),
        }
        if self.routing_commands == RoutingCommands::Unsupported {
            let keys: Vec<LaneKey> = self.lanes.keys().cloned().collect();
            for key in keys {
                self.pump_lane(now, &key);
            }
        }
    }

    /// A roster read failed: wait, then read it again if anything still needs it.
    pub fn roster_unavailable(&mut self, now: Instant) {
        let now = self.clock(now);
        self.roster_fetch_in_flight = false;
        let key = LaneKey::MetadataLeader;
        if let Some(lane) = self.lanes.get_mut(&key) {
            let streak = lane.backoff_streak;
            lane.backoff_streak = streak.saturating_add(1);
            let wait = self.backoff_for(streak);
            self.set_lane_backoff(now, &key, wait);
        }
    }

    /// A metadata-plane reply carried this commit: routes and partition counts learned
    /// under a lower watermark are stale from now on.
    pub fn handle_watermark(&mut self, now: Instant, watermark: u64) {
        self.clock(now);
        if watermark > self.watermark {
            debug!(watermark, "metadata watermark moved");
            self.watermark = watermark;
        }
    }
}
