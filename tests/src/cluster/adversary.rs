//! The adversarial part of the node model: behaviours a real cluster (or a broken one)
//! shows and an honest model never would. The simulation's fault schedule and the loopback
//! driver's control API switch each on for a node for a while, and each is counted, so
//! that a long run proves it met every one:
//! - **not committed**: the node answers sends to the partitions it leads with 57
//!   (`TransientNotCommitted`) and stores nothing, as during a quorum loss; as the metadata
//!   leader it answers metadata writes `[1][0][57]` in their result section and applies
//!   nothing, as the real leader answers writes still in flight;
//! - **duplicated replies**: the node writes each reply twice, back to back;
//! - **lying routes**: the node answers route lookups (103) naming a backup, so the named
//!   node refuses (a stale primary kept for a while);
//! - **garbage**: the node accepts connections and answers every frame with bytes that
//!   do not frame (a node that accepts and then misbehaves);
//! - **stray replies** (struck by the simulation's engine): a reply frame to a request
//!   never sent.
//!
//! Time is whatever the caller counts from (simulated time, or time since the loopback
//! cluster started): a behaviour is on while `now` is before its end.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ErrorCode, Frame, Operation, PollRouting, ReplyHeader, RequestHeader, SendMessagesRequest,
    code, decode_one,
};

use std::net::SocketAddr;

/// A behaviour the schedule can switch on for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Sends to the node's partitions, and metadata writes on the leader, are answered 57
    /// and not applied.
    NotCommitted,
    /// Every reply is written twice.
    DuplicateReplies,
    /// Route lookups name a backup, and refusals of sends carry a view naming the node
    /// after the true primary (a backup whose view lags).
    LyingRoutes,
    /// Every frame is answered with garbage.
    Garbage,
    /// Every reply is preceded by a reply to a request never sent (the loopback driver's
    /// form of the simulation's stray replies).
    StrayReplies,
}

/// How many behaviours there are (the slots of each node's table).
const BEHAVIOURS: usize = 5;

/// How often each adversarial behaviour acted, over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdversaryCounts {
    /// Sends answered 57.
    pub not_committed: u64,
    /// Replies written twice.
    pub duplicated: u64,
    /// Route lookups answered with a backup.
    pub lies: u64,
    /// Frames answered with garbage.
    pub garbage: u64,
    /// Replies to requests never sent.
    pub strays: u64,
}

/// Per node, until when each behaviour lasts.
#[derive(Debug)]
pub struct Adversary {
    until: Vec<[Duration; BEHAVIOURS]>,
    /// What acted so far.
    pub counts: AdversaryCounts,
}

/// What the adversary does with one request a node received.
#[derive(Debug)]
pub enum Verdict {
    /// Answer with these bytes instead of handing the request to the model.
    Instead(Bytes),
    /// Hand it to the model and pass its reply through [`Adversary::reply`].
    Model,
}

impl Adversary {
    /// No misbehaviour on any of `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        Self {
            until: vec![[Duration::ZERO; BEHAVIOURS]; nodes],
            counts: AdversaryCounts::default(),
        }
    }

    /// Switch `behaviour` on for `node` until `until` (`Duration::ZERO`: off).
    pub fn set(&mut self, node: usize, behaviour: Misbehaviour, until: Duration) {
        if let Some(slots) = self.until.get_mut(node) {
            slots[behaviour as usize] = until;
        }
    }

    fn active(&self, node: usize, behaviour: Misbehaviour, now: Duration) -> bool {
        self.until
            .get(node)
            .is_some_and(|slots| now < slots[behaviour as usize])
    }

    /// Before the model sees a request: garbage, or a 57 for a send that `node` would
    /// admit (`leads` says whether it leads the send's stream, topic and partition), or for
    /// a metadata write when `node` is the metadata `leader` (in the result section, as the
    /// real leader answers a write still in flight).
    pub fn before(
        &mut self,
        node: usize,
        now: Duration,
        (header, body): (&RequestHeader, &[u8]),
        leader: bool,
        leads: impl FnOnce(&SendMessagesRequest, u32) -> bool,
    ) -> Verdict {
        if self.active(node, Misbehaviour::Garbage, now) {
            self.counts.garbage += 1;
            return Verdict::Instead(Bytes::from(vec![0xA5; 300]));
        }
        let metadata_write = header.operation.is_metadata() && header.operation.is_result_framed();
        if metadata_write && leader && self.active(node, Misbehaviour::NotCommitted, now) {
            self.counts.not_committed += 1;
            let mut rejection = BytesMut::new();
            iggy_route_core::wire::put_result_rejection(
                iggy_route_core::wire::ErrorCode::TransientNotCommitted.as_u32(),
                &mut rejection,
            );
            return Verdict::Instead(reply_frame(
                ReplyHeader::for_request(header, 0, 0, 0),
                &rejection,
            ));
        }
        let is_send = header.operation == Operation::SendMessages;
        if is_send && self.active(node, Misbehaviour::NotCommitted, now) {
            let admitted = SendMessagesRequest::decode(body)
                .ok()
                .is_some_and(|request| match request.partitioning {
                    Partitioning::PartitionId(p) => leads(&request, p),
                    // The router resolves every partition itself.
                    Partitioning::Balanced | Partitioning::MessagesKey(_) => false,
                });
            if admitted {
                self.counts.not_committed += 1;
                let not_committed =
                    iggy_route_core::wire::ErrorCode::TransientNotCommitted.as_u32();
                return Verdict::Instead(reply_frame(
                    ReplyHeader::for_request(header, not_committed, 0, 0),
                    &[],
                ));
            }
        }
        Verdict::Model
    }

    /// The model's reply to a request, as the adversary passes it on.
    pub fn reply(
        &mut self,
        node: usize,
        addrs: &[SocketAddr],
        now: Duration,
        header: &RequestHeader,
        reply: Bytes,
    ) -> Bytes {
        let lookup =
            header.operation == Operation::NonReplicated && header.code == code::GET_POLL_ROUTING;
        let lying = self.active(node, Misbehaviour::LyingRoutes, now);
        let reply = if lookup && lying {
            match name_a_backup(&reply, addrs) {
                Some(lie) => {
                    self.counts.lies += 1;
                    lie
                }
                None => reply,
            }
        } else if lying && header.operation == Operation::SendMessages {
            match stale_view(&reply) {
                Some(lie) => {
                    self.counts.lies += 1;
                    lie
                }
                None => reply,
            }
        } else {
            reply
        };
        let reply = if self.active(node, Misbehaviour::StrayReplies, now) {
            let stray = self.stray_reply(header.request);
            let mut both = BytesMut::with_capacity(stray.len() + reply.len());
            both.extend_from_slice(&stray);
            both.extend_from_slice(&reply);
            both.freeze()
        } else {
            reply
        };
        if self.active(node, Misbehaviour::DuplicateReplies, now) {
            self.counts.duplicated += 1;
            let mut twice = BytesMut::with_capacity(reply.len() * 2);
            twice.extend_from_slice(&reply);
            twice.extend_from_slice(&reply);
            return twice.freeze();
        }
        reply
    }

    /// A reply that answers no request ever sent: a success to a send, under a request
    /// number no router has used.
    pub fn stray_reply(&mut self, pick: u64) -> Bytes {
        self.counts.strays += 1;
        let header = ReplyHeader {
            request: (1 << 40) | (pick & 0xFFFF),
            operation: Operation::SendMessages,
            ..ReplyHeader::default()
        };
        reply_frame(header, &[])
    }
}

/// A whole reply frame of `header` (its size set) and `body`.
fn reply_frame(mut header: ReplyHeader, body: &[u8]) -> Bytes {
    header.size = u32::try_from(iggy_route_core::wire::HEADER_SIZE + body.len()).unwrap_or(0);
    let mut out = BytesMut::new();
    header.encode(&mut out);
    out.extend_from_slice(body);
    out.freeze()
}

/// The same refusal (58), its view one past the true one: it names the node after the
/// primary.
fn stale_view(reply: &Bytes) -> Option<Bytes> {
    let Ok(Frame::Reply { mut header, body }) = decode_one(reply) else {
        return None;
    };
    if header.status != ErrorCode::TransientNotAccepted.as_u32() {
        return None;
    }
    header.view = header.view.wrapping_add(1);
    Some(reply_frame(header, &body))
}

/// The same routing reply, naming the node after the true primary.
fn name_a_backup(reply: &Bytes, addrs: &[SocketAddr]) -> Option<Bytes> {
    let Ok(Frame::Reply { header, body }) = decode_one(reply) else {
        return None;
    };
    if header.status != 0 {
        return None;
    }
    let mut routing = PollRouting::decode(&body).ok()?;
    let named = routing.primary.tcp_address();
    let primary = addrs.iter().position(|addr| addr.to_string() == named)?;
    let backup = addrs[(primary + 1) % addrs.len()];
    routing.primary.ip = backup.ip().to_string();
    routing.primary.tcp_port = backup.port();
    let mut lie = BytesMut::new();
    routing.encode(&mut lie);
    Some(reply_frame(header, &lie))
}
