//! Turning routing decisions into work on links: the coordinator's queue, the per-node
//! ready queues, and opening data links as the pool allows.

use std::time::Instant;

use tracing::warn;

use super::link::{Attachment, InFlight, Job, Link, LinkState, Sealed};
use super::{CoordJob, Output, Router, encode};
use crate::event::LinkRole;
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::Request;
use crate::routing::{Attempt, Decision, Target};
use crate::wire::{ConsumerSession, Operation, code};

/// Rounds of "apply decisions, then serve links" per input. Each round either makes
/// progress or ends the loop; the bound only guards against a bug turning into a spin.
const DRIVE_ROUNDS_MAX: usize = 10_000;

impl Router {
    /// Applies every routing decision and gives every idle link its next job, until
    /// nothing changes.
    pub(super) fn drive(&mut self, now: Instant) {
        for _ in 0..DRIVE_ROUNDS_MAX {
            let applied = self.apply_decisions(now);
            let served = self.serve_coordinator(now) | self.serve_nodes(now);
            if !applied && !served {
                return;
            }
        }
        warn!("drive loop bound reached");
    }

    fn apply_decisions(&mut self, _now: Instant) -> bool {
        let mut any = false;
        while let Some(decision) = self.routing.poll_decision() {
            any = true;
            match decision {
                Decision::Write {
                    request,
                    target,
                    partition,
                } => {
                    if let Some(entry) = self.requests.get_mut(&request) {
                        entry.partition = partition;
                    }
                    match target {
                        Target::Node(node) => {
                            self.ready.entry(node).or_default().push_back(request);
                        }
                        Target::Coordinator => {
                            self.coordinator.queue.push_back(CoordJob::Request(request));
                        }
                    }
                }
                Decision::FetchRoute { partition } => {
                    self.coordinator.queue.push_back(CoordJob::Route(partition));
                }
                Decision::FetchTopic { topic } => {
                    self.coordinator.queue.push_back(CoordJob::Topic(topic));
                }
                Decision::FetchRoster => {
                    if !self.coordinator.queue.contains(&CoordJob::Roster) {
                        self.coordinator.queue.push_back(CoordJob::Roster);
                    }
                }
                Decision::Completed { request, outcome } => self.finish_request(request, outcome),
                Decision::Event(event) => self.outputs.push_back(Output::Event(event)),
            }
        }
        any
    }

    /// Connects the coordinator if it has no link, and writes its next job if it is idle.
    fn serve_coordinator(&mut self, now: Instant) -> bool {
        if self.closed {
            return false;
        }
        let Some(link_id) = self.coordinator.link else {
            return self.connect_coordinator(now);
        };
        let idle = self.links.get(&link_id).is_some_and(Link::is_idle);
        if !idle {
            return false;
        }
        let Some(job) = self.coordinator.queue.pop_front() else {
            return false;
        };
        match job {
            CoordJob::Roster => {
                self.transmit(
                    now,
                    link_id,
                    Job::Roster,
                    Operation::NonReplicated,
                    code::GET_CLUSTER_METADATA,
                    &[],
                );
            }
            CoordJob::Route(partition) => {
                let body = encode::route_lookup_body(
                    &partition.topic.stream,
                    &partition.topic.topic,
                    partition.partition,
                );
                self.transmit(
                    now,
                    link_id,
                    Job::Route(partition),
                    Operation::NonReplicated,
                    code::GET_POLL_ROUTING,
                    &body,
                );
            }
            CoordJob::Topic(topic) => {
                let body = encode::get_topic_body(&topic.stream, &topic.topic);
                self.transmit(
                    now,
                    link_id,
                    Job::Topic(topic),
                    Operation::NonReplicated,
                    code::GET_TOPIC,
                    &body,
                );
            }
            CoordJob::Request(request) => {
                self.write_request(now, link_id, request, Target::Coordinator)
            }
        }
        true
    }

    /// Gives idle data links the requests waiting for their node, and opens links where
    /// requests wait and the pool has room.
    fn serve_nodes(&mut self, now: Instant) -> bool {
        let mut progress = false;
        let nodes: Vec<NodeId> = self
            .ready
            .iter()
            .filter(|(_, queue)| !queue.is_empty())
            .map(|(node, _)| *node)
            .collect();
        for node in nodes {
            progress |= self.serve_node(now, node);
        }
        progress
    }

    fn serve_node(&mut self, now: Instant, node: NodeId) -> bool {
        let mut progress = false;
        let idle: Vec<LinkId> = self
            .links
            .values()
            .filter(|l| l.node == node && l.role == LinkRole::Data && l.is_idle())
            .map(|l| l.id)
            .collect();
        for link in idle {
            let Some(request) = self.ready.get_mut(&node).and_then(|q| q.pop_front()) else {
                break;
            };
            self.write_request(now, link, request, Target::Node(node));
            progress = true;
        }
        let waiting = self.ready.get(&node).map_or(0, |q| q.len());
        if waiting == 0 {
            return progress;
        }
        let (open, starting) = self
            .links
            .values()
            .filter(|l| l.node == node && l.role == LinkRole::Data)
            .fold((0usize, 0usize), |(open, starting), l| {
                (
                    open + 1,
                    starting + usize::from(l.state != LinkState::Ready),
                )
            });
        // One link being opened at a time per waiting request, up to the pool size.
        if open < self.config.data_links_per_node.max(1) && starting < waiting {
            let in_backoff = self
                .node(node)
                .and_then(|n| n.retry_at)
                .is_some_and(|at| at > now);
            if self.node(node).is_none() || (in_backoff && open == 0) {
                // Unknown node, or one that just failed: the requests are not sent; the
                // routing layer looks elsewhere at once.
                self.unsend_all(now, node);
                return true;
            }
            if !in_backoff {
                self.open_link(now, node, LinkRole::Data);
                return true;
            }
        }
        progress
    }

    /// Every request waiting for `node` goes back to the routing layer as not sent.
    pub(super) fn unsend_all(&mut self, now: Instant, node: NodeId) {
        let waiting: Vec<RequestId> = self.ready.remove(&node).map(Vec::from).unwrap_or_default();
        for request in waiting {
            self.routing
                .handle_result(now, request, Target::Node(node), Attempt::NotSent);
        }
    }

    /// Writes a request on a link, attaching the consumer session first where the request
    /// is a routed poll or offset write.
    pub(super) fn write_request(
        &mut self,
        now: Instant,
        link_id: LinkId,
        request: RequestId,
        target: Target,
    ) {
        let Some(entry) = self.requests.get(&request) else {
            // Completed meanwhile (its deadline): release whatever it still holds.
            self.routing
                .handle_result(now, request, target, Attempt::NotSent);
            return;
        };
        // The routed forms (an auto-commit poll as 104, an offset write after an attach) on
        // data links of clusters with routing commands; a plain poll is a plain 100 anywhere.
        let routed = matches!(target, Target::Node(_))
            && self.routing_supported()
            && !matches!(&entry.request, Request::Poll(poll) if !poll.auto_commit);
        let needs_attach =
            routed && matches!(entry.request, Request::Poll(_) | Request::StoreOffset(_));
        if needs_attach {
            let Some((client_id, session)) = self.coordinator.identity else {
                self.routing
                    .handle_result(now, request, target, Attempt::NotSent);
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
        let encoded = encode::encode(&entry.request, entry.partition, routed);
        if let Some(entry) = self.requests.get_mut(&request) {
            // A reply kept from an earlier attempt (a read asked again) is not this one's.
            entry.reply = None;
        }
        if let Some(link) = self.links.get_mut(&link_id) {
            link.last_used = now;
        }
        self.transmit_frame(
            now,
            link_id,
            Job::Request(request, target),
            encoded.operation,
            encoded.code,
            encoded.frame,
        );
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
        operation: Operation,
        code: u32,
        frame: bytes::BytesMut,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let (frame, sealed) = link.seal(operation, code, frame);
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
        });
        self.outputs.push_back(Output::Transmit {
            link: link_id,
            bytes: frame,
        });
    }
}
