//! Links coming and going: connecting, signing in, failing, timing out, and the
//! coordinator's one reason to move (its node is unreachable).

use std::time::Instant;

use bytes::BytesMut;
use tracing::{debug, info};

use super::link::{Job, Link, LinkState};
use super::{CoordJob, Output, Router};
use crate::config::Credentials;
use crate::event::{Event, LinkRole};
use crate::ids::{LinkId, NodeId};
use crate::routing::{Attempt, Target};
use crate::wire::{LoginRegisterRequest, LoginRegisterWithPatRequest, PROTOCOL_VERSION};

/// Sign-ins a node may answer with "not now" in a row before the session leaves it: with
/// the default reconnect backoff (50 ms doubling to 2 s, jittered) about 10 to 16 s, the
/// length of an election on the real cluster (a 5 s heartbeat timeout, then view changes).
pub(super) const DEFERRED_SIGN_INS_MAX: u32 = 12;
use crate::wire::{Name, Operation, code};

impl Router {
    pub(super) fn open_link(
        &mut self,
        now: Instant,
        node: NodeId,
        role: LinkRole,
    ) -> Option<LinkId> {
        let addr = self.node(node)?.addr.clone();
        let id = LinkId(self.next_link);
        self.next_link += 1;
        let client_id = self.rng.client_id();
        let limit = self.sign_in_limit();
        if let Some(entry) = self.node_mut(node) {
            entry.record_open(now, limit);
        }
        let link = Link::new(id, node, role, client_id, self.config.max_frame_size, now);
        self.links.insert(id, link);
        if let Some(entry) = self.node_mut(node)
            && std::mem::take(&mut entry.lost_link)
        {
            self.stats.reconnects += 1;
        }
        debug!(link = %id, %node, ?role, "opening link");
        self.outputs.push_back(Output::Connect {
            link: id,
            node,
            addr,
        });
        Some(id)
    }

    /// Opens the coordinator link on its node, unless that node is backing off.
    pub(super) fn connect_coordinator(&mut self, now: Instant) -> bool {
        let node = self.coordinator.node;
        let limit = self.sign_in_limit();
        let Some(entry) = self.node(node) else {
            return false;
        };
        if entry.ready_at(now, limit).is_some() {
            return false;
        }
        self.coordinator.link = self.open_link(now, node, LinkRole::Coordinator);
        self.coordinator.link.is_some()
    }

    pub(super) fn connected(&mut self, now: Instant, link_id: LinkId) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        if link.state != LinkState::Connecting {
            return;
        }
        link.state = LinkState::SigningIn;
        let body = self.login_body();
        self.transmit(
            now,
            link_id,
            Job::Login,
            Operation::Register,
            code::LOGIN_REGISTER,
            &body,
        );
    }

    fn login_body(&self) -> BytesMut {
        let mut out = BytesMut::new();
        let name = Name::new(self.config.client_name.clone()).unwrap_or_else(|_| fallback_name());
        let version =
            Name::new(self.config.client_version.clone()).unwrap_or_else(|_| fallback_name());
        match &self.config.credentials {
            Credentials::UserPassword { username, password } => {
                // An unusable username is sent as given would fail the login anyway; an
                // empty name makes the server answer with its own typed eviction.
                let username = Name::new(username.clone()).unwrap_or_else(|_| fallback_name());
                LoginRegisterRequest {
                    protocol_version: PROTOCOL_VERSION,
                    sdk_name: name,
                    sdk_version: version,
                    username,
                    password: password.clone(),
                    context: bytes::Bytes::new(),
                }
                .encode(&mut out);
            }
            Credentials::PersonalAccessToken(token) => {
                LoginRegisterWithPatRequest {
                    protocol_version: PROTOCOL_VERSION,
                    sdk_name: name,
                    sdk_version: version,
                    token: token.clone(),
                    context: bytes::Bytes::new(),
                }
                .encode(&mut out);
            }
        }
        out
    }

    /// A link signed in.
    pub(super) fn signed_in(&mut self, link_id: LinkId, session: u64) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        link.session = session;
        link.state = LinkState::Ready;
        let (node, role, client_id) = (link.node, link.role, link.client_id);
        // A sign-in alone does not prove the node healthy (see `link_proven`): a node that
        // signs links in and then breaks the protocol keeps backing off.
        if let Some(entry) = self.node_mut(node) {
            entry.retry_at = None;
        }
        if role == LinkRole::Coordinator {
            self.coordinator.identity = Some((client_id, session));
            self.coordinator.signed_in_once = true;
            // A (new) session reads the roster first: the node list and the leader.
            if !self.coordinator.queue.contains(&CoordJob::Roster) {
                self.coordinator.queue.push_front(CoordJob::Roster);
            }
            info!(%node, "session signed in");
        }
        self.outputs.push_back(Output::Event(Event::LinkUp {
            link: link_id,
            node,
            role,
        }));
    }

    /// A connection attempt failed (reported by the transport, or timed out).
    pub(super) fn connect_failed(&mut self, now: Instant, link_id: LinkId) {
        self.link_failed(now, link_id, true);
    }

    /// A node answered a sign-in with "not now" (57 or 58): it is reachable, so the link
    /// closes and the node is dialled again after its backoff, and a coordinator stays
    /// there (a session move is for an unreachable node). Only after
    /// [`DEFERRED_SIGN_INS_MAX`] such answers in a row, a node that may be cut off from its
    /// quorum, does the session move on.
    pub(super) fn sign_in_deferred(&mut self, now: Instant, link_id: LinkId) {
        let Some(node) = self.links.get(&link_id).map(|link| link.node) else {
            return;
        };
        self.outputs.push_back(Output::Close { link: link_id });
        let deferrals = self.node(node).map_or(0, |n| n.failures).saturating_add(1);
        debug!(%node, deferrals, "sign-in deferred by the node");
        self.link_failed(now, link_id, deferrals >= DEFERRED_SIGN_INS_MAX);
    }

    /// A link failed before it signed in: its node backs off, a coordinator link moves the
    /// session on when `move_session` says so, and a node's last data link hands what
    /// waited for it back to the routing layer as not sent.
    fn link_failed(&mut self, now: Instant, link_id: LinkId, move_session: bool) {
        let Some(link) = self.links.remove(&link_id) else {
            return;
        };
        let node = link.node;
        self.mark_node_failed(now, node);
        self.mark_link_lost(node);
        match link.role {
            LinkRole::Coordinator => {
                self.coordinator.link = None;
                self.coordinator.identity = None;
                if move_session {
                    self.move_coordinator(now);
                }
            }
            LinkRole::Data => {
                let others = self.links.values().any(|l| l.node == node && l.in_pool());
                if !others {
                    self.unsend_all(node);
                    self.report_unsent(now);
                }
            }
        }
    }

    /// The node answered an exchange of ours on `link_id` after its sign-in: only now is
    /// it known to be healthy, and its backoff starts again from the shortest wait.
    pub(super) fn link_proven(&mut self, link_id: LinkId) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        if link.proven {
            return;
        }
        link.proven = true;
        let node = link.node;
        if let Some(entry) = self.node_mut(node) {
            entry.failures = 0;
        }
    }

    /// Remembers that a link to `node` was lost, so the next link opened to it counts as
    /// a reconnect.
    fn mark_link_lost(&mut self, node: NodeId) {
        if let Some(entry) = self.node_mut(node) {
            entry.lost_link = true;
        }
    }

    fn mark_node_failed(&mut self, now: Instant, node: NodeId) {
        let (initial, max) = (
            self.config.reconnect_backoff_initial,
            self.config.reconnect_backoff_max,
        );
        let failures = self.node(node).map_or(0, |n| n.failures);
        let wait = self.rng.jitter(crate::rng::backoff(initial, max, failures));
        if let Some(entry) = self.node_mut(node) {
            entry.failures = failures.saturating_add(1);
            entry.retry_at = Some(now + wait);
        }
    }

    /// The coordinator's node could not be reached: carry the session to the next node.
    fn move_coordinator(&mut self, now: Instant) {
        let count = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX).max(1);
        let from = self.coordinator.node;
        // The next node in table order that is not backing off, else simply the next one.
        let candidates = (1..=count).map(|step| NodeId((from.0 + step) % count));
        let ready = candidates.clone().find(|&n| {
            self.node(n)
                .is_some_and(|e| e.retry_at.is_none_or(|at| at <= now))
        });
        let to = ready.or_else(|| candidates.clone().next()).unwrap_or(from);
        if to != from {
            self.coordinator.node = to;
            if self.coordinator.signed_in_once {
                self.stats.session_moves += 1;
                info!(%from, %to, "session moved: its node is unreachable");
                self.outputs
                    .push_back(Output::Event(Event::SessionMoved { from, to }));
            }
        }
    }

    /// A link is gone (closed by the peer, by an error, or by us). Its exchange in flight
    /// ends: reads are asked again, a write's outcome is unknown.
    pub(super) fn link_gone(&mut self, now: Instant, link_id: LinkId) {
        let Some(link) = self.links.remove(&link_id) else {
            return;
        };
        if link.state != LinkState::Ready {
            // Gone before it signed in (refused, evicted, or closed by the peer at once): a
            // failure of its node, with backoff, exactly like a failed connect. Otherwise a
            // node that accepts and drops every connection would be redialled in a loop.
            self.links.insert(link_id, link);
            self.connect_failed(now, link_id);
            return;
        }
        let (node, role) = (link.node, link.role);
        let leaving = self.memberships_gone(now, &link);
        if !link.proven {
            // Signed in, then lost before a single exchange was answered: without a
            // backoff a node that does this to every link would be redialled in a loop.
            self.mark_node_failed(now, node);
        }
        self.mark_link_lost(node);
        self.outputs.push_back(Output::Event(Event::LinkDown {
            link: link_id,
            node,
            role,
        }));
        if role == LinkRole::Coordinator {
            self.coordinator.link = None;
            self.coordinator.identity = None;
            // Reconnect to the same node at once; only a failed connect moves the session.
        }
        let Some(in_flight) = link.in_flight else {
            return;
        };
        match in_flight.job {
            Job::Login | Job::Ping => {}
            Job::Roster => self.coordinator.queue.push_front(CoordJob::Roster),
            Job::Route(partition) => self
                .coordinator
                .queue
                .push_front(CoordJob::Route(partition)),
            Job::Topic(topic) => self.coordinator.queue.push_front(CoordJob::Topic(topic)),
            Job::Attach(request) => {
                self.routing
                    .handle_result(now, request, Target::Node(node), Attempt::NotSent);
            }
            // A leave in flight on its member link: done, as the membership ended with the
            // link (answered by `memberships_gone`).
            Job::Request(_, _) if leaving => {}
            Job::Request(request, target) => {
                let attempt = self.lost_in_flight(request, target);
                self.routing.handle_result(now, request, target, attempt);
            }
        }
    }

    /// Closes a healthy link because we chose to (idle, or a membership to end): not a
    /// loss, so the next link to its node is no reconnect, and its node did nothing to
    /// back off for.
    pub(super) fn close_by_choice(&mut self, now: Instant, link_id: LinkId) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        link.proven = true;
        let node = link.node;
        self.close_link(now, link_id);
        if let Some(entry) = self.node_mut(node) {
            entry.lost_link = false;
        }
    }

    /// Closes a link on the router's own decision (silence, a protocol violation, idleness).
    pub(super) fn close_link(&mut self, now: Instant, link_id: LinkId) {
        if self.links.contains_key(&link_id) {
            self.outputs.push_back(Output::Close { link: link_id });
            self.link_gone(now, link_id);
        }
    }

    /// A request on `link_id` was answered `TransientNotCommitted` (57): the same bytes are
    /// written again on the same link after a jittered, doubling wait, up to
    /// `Config::max_replays` times; then the link is closed and the outcome is unknown.
    pub(super) fn schedule_replay(&mut self, now: Instant, link_id: LinkId) {
        let Some(replays) = self
            .links
            .get(&link_id)
            .and_then(|l| l.in_flight.as_ref())
            .map(|f| f.replays)
        else {
            return;
        };
        if replays >= self.config.max_replays {
            self.give_up_replay(now, link_id);
            return;
        }
        let nominal = crate::rng::backoff(
            self.config.replay_interval,
            self.config.replay_interval_max,
            replays,
        );
        let wait = self.rng.jitter(nominal);
        if let Some(in_flight) = self
            .links
            .get_mut(&link_id)
            .and_then(|l| l.in_flight.as_mut())
        {
            in_flight.replay_at = Some(now + wait);
        }
    }

    /// Stops replaying a 57 (replays ran out, or the request is over): the link is closed,
    /// which leaves the write's outcome unknown and releases its partition's lane.
    fn give_up_replay(&mut self, now: Instant, link_id: LinkId) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        if let Some(in_flight) = &link.in_flight
            && let Some(request) = in_flight.request()
        {
            let event = Event::ReplaysExhausted {
                request,
                node: link.node,
                replays: in_flight.replays,
            };
            self.outputs.push_back(Output::Event(event));
        }
        self.close_link(now, link_id);
    }

    /// Connect timeouts, silent nodes, replays of 57, heartbeats and idle data links.
    /// Only links whose filed deadline has come are looked at, in link id order.
    pub(super) fn link_timers(&mut self, now: Instant) {
        let ids = self.links.due_by(now);
        for id in ids {
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            match link.state {
                LinkState::Connecting => {
                    if now >= link.opened_at + self.config.connect_timeout {
                        self.outputs.push_back(Output::Close { link: id });
                        self.connect_failed(now, id);
                    }
                }
                LinkState::SigningIn | LinkState::Ready => {
                    if let Some(in_flight) = &mut link.in_flight {
                        match in_flight.replay_at {
                            Some(at) => {
                                // A replay is written only for a request still wanted: past
                                // its deadline nothing more is written for it.
                                let wanted = in_flight.request().is_none()
                                    || in_flight.carried().any(|request| {
                                        self.requests
                                            .get(&request)
                                            .is_some_and(|e| e.deadline > now)
                                    });
                                if !wanted {
                                    self.give_up_replay(now, id);
                                } else if at <= now {
                                    in_flight.replay_at = None;
                                    in_flight.replays += 1;
                                    in_flight.deadline = now + self.config.attempt_timeout;
                                    let bytes = in_flight.frame.clone();
                                    link.last_sent = now;
                                    self.stats.replays += 1;
                                    self.outputs.push_back(Output::Transmit { link: id, bytes });
                                }
                            }
                            None if now >= in_flight.deadline => {
                                debug!(link = %id, "no reply within the attempt timeout; closing");
                                self.close_link(now, id);
                            }
                            None => {}
                        }
                        continue;
                    }
                    let idle_data = link.in_pool()
                        && now >= link.last_used + self.config.data_link_idle_timeout
                        && self.ready.get(&link.node).is_none_or(|q| q.is_empty());
                    if idle_data {
                        self.close_by_choice(now, id);
                    } else if link.state == LinkState::Ready
                        && now >= link.last_sent + self.config.heartbeat_interval
                    {
                        self.transmit(
                            now,
                            id,
                            Job::Ping,
                            Operation::NonReplicated,
                            code::PING,
                            &[],
                        );
                    }
                }
            }
        }
    }
}

fn fallback_name() -> Name {
    // "-" is a valid 1-byte name; it only stands in for a configured name the wire rejects.
    #[allow(clippy::unwrap_used)] // a one-byte ASCII name is always within 1..=255 bytes
    Name::new("-").unwrap()
}
