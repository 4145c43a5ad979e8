//! Frame-level observation of each router's links, for the refusal rule:
//! **a send refused by node N (status 58) is not written to N again without new
//! information.** New information is a routing reply (`GET_POLL_ROUTING`, 103, status 0)
//! received by that router after the refusal; or, while the router finds primaries by
//! refusal (no routing commands), a write of the same batch to another node, or a wait of
//! at least the smallest route backoff.
//!
//! The tap decodes what the router writes (requests) and what it reads (replies) with the
//! core's own `wire` codec. The protocol is lockstep, so a reply answers the request last
//! written on its link.

use std::collections::BTreeMap;
use std::time::Duration;

use iggy_route_core::LinkId;
use iggy_route_core::wire::{
    DEFAULT_MAX_FRAME_SIZE, ErrorCode, Frame, FrameDecoder, Operation, SendMessagesRequest, code,
};

use super::workload::MessageTag;

/// What a link's request in flight was, as far as the rule cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Login,
    Send { batch: u32 },
    RouteLookup,
    Other,
}

#[derive(Debug)]
struct TapLink {
    node: usize,
    from_router: FrameDecoder,
    to_router: FrameDecoder,
    asked: Option<Asked>,
    /// The request number of the frame `asked` describes: a reply that echoes another
    /// number answers nothing in flight (the router closes the link for it) and is no
    /// refusal or success of anything.
    asked_request: u64,
    /// A login on this link was answered with success.
    signed_in: bool,
}

/// The last refusal of one batch.
#[derive(Debug, Clone, Copy)]
struct Refusal {
    node: usize,
    at: Duration,
    /// The router's routing-reply count when the refusal arrived.
    routing_replies: u64,
    /// The batch was written to another node since.
    elsewhere: bool,
}

#[derive(Debug, Default)]
struct RouterTap {
    links: BTreeMap<LinkId, TapLink>,
    routing_replies: u64,
    refusals: BTreeMap<u32, Refusal>,
}

/// See the module doc.
#[derive(Debug)]
pub struct Wiretap {
    routers: Vec<RouterTap>,
    /// The shortest wait a discovery round may end with (half the initial route backoff,
    /// the least the router's jitter allows).
    backoff_min: Duration,
    /// Refusals observed, in all.
    pub refusals: u64,
    /// Refused batches written to the refusing node again, with news (the rule's
    /// allowed case), in all: shows the rule was exercised.
    pub returns: u64,
}

impl Wiretap {
    /// A tap on `routers` routers.
    pub fn new(routers: usize, route_backoff_initial: Duration) -> Self {
        Self {
            routers: (0..routers).map(|_| RouterTap::default()).collect(),
            backoff_min: route_backoff_initial / 2,
            refusals: 0,
            returns: 0,
        }
    }

    /// Router `router` opened `link` to `node`.
    pub fn connect(&mut self, router: usize, link: LinkId, node: usize) {
        if let Some(tap) = self.routers.get_mut(router) {
            tap.links.insert(
                link,
                TapLink {
                    node,
                    from_router: FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE),
                    to_router: FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE),
                    asked: None,
                    asked_request: 0,
                    signed_in: false,
                },
            );
        }
    }

    /// The node of `link` if the link never got a successful login reply: a link that ends
    /// in that state is, for the router, a failed attempt to reach its node.
    pub fn unsigned_node(&self, router: usize, link: LinkId) -> Option<usize> {
        let tapped = self.routers.get(router)?.links.get(&link)?;
        (!tapped.signed_in).then_some(tapped.node)
    }

    /// The link is gone for the router.
    pub fn gone(&mut self, router: usize, link: LinkId) {
        if let Some(tap) = self.routers.get_mut(router) {
            tap.links.remove(&link);
        }
    }

    /// Router `router` writes `bytes` on `link` at `now`; `discovering` says whether it
    /// finds primaries by refusal right now.
    pub fn write(
        &mut self,
        router: usize,
        link: LinkId,
        mut bytes: &[u8],
        now: Duration,
        discovering: bool,
    ) -> Result<(), String> {
        let backoff_min = self.backoff_min;
        let Some(tap) = self.routers.get_mut(router) else {
            return Ok(());
        };
        let Some(tapped) = tap.links.get_mut(&link) else {
            return Err(format!(
                "router {router} wrote on {link}, which it never opened"
            ));
        };
        let node = tapped.node;
        for _ in 0..=bytes.len() {
            let frame = match tapped.from_router.decode(&mut bytes) {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(error) => {
                    return Err(format!(
                        "router {router} wrote an undecodable frame: {error}"
                    ));
                }
            };
            let Frame::Request { header, body } = frame else {
                return Err(format!(
                    "router {router} wrote a non-request frame on {link}"
                ));
            };
            let asked = if header.operation == Operation::SendMessages {
                let request = SendMessagesRequest::decode(&body)
                    .map_err(|error| format!("router {router} wrote a bad send: {error}"))?;
                let tag = request
                    .messages
                    .first()
                    .and_then(|message| MessageTag::parse(&message.payload))
                    .ok_or_else(|| format!("router {router} wrote a send without our tag"))?;
                Asked::Send { batch: tag.batch }
            } else if header.operation == Operation::Register {
                Asked::Login
            } else if header.operation == Operation::NonReplicated
                && header.code == code::GET_POLL_ROUTING
            {
                Asked::RouteLookup
            } else {
                Asked::Other
            };
            tapped.asked = Some(asked);
            tapped.asked_request = header.request;
            if let Asked::Send { batch } = asked
                && let Some(refusal) = tap.refusals.get_mut(&batch)
            {
                if refusal.node != node {
                    refusal.elsewhere = true;
                } else {
                    let routed = tap.routing_replies > refusal.routing_replies;
                    let waited = now.saturating_sub(refusal.at) >= backoff_min;
                    let discovered = discovering && (refusal.elsewhere || waited);
                    if !routed && !discovered {
                        return Err(format!(
                            "router {router} wrote batch {batch} to node {node} again after it refused \
                             at {:?}, with no routing reply since (discovering: {discovering}, \
                             tried elsewhere: {})",
                            refusal.at, refusal.elsewhere
                        ));
                    }
                    self.returns += 1;
                }
            }
            if bytes.is_empty() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// `bytes` arrive for router `router` on `link` at `now` (before the router sees them).
    pub fn read(&mut self, router: usize, link: LinkId, mut bytes: &[u8], now: Duration) {
        let Some(tap) = self.routers.get_mut(router) else {
            return;
        };
        let Some(tapped) = tap.links.get_mut(&link) else {
            return;
        };
        for _ in 0..=bytes.len() {
            let Ok(Some(frame)) = tapped.to_router.decode(&mut bytes) else {
                return;
            };
            let status = match frame {
                Frame::Reply { header, .. } if header.request != tapped.asked_request => {
                    if bytes.is_empty() {
                        return;
                    }
                    continue;
                }
                Frame::Reply { header, .. } => header.status,
                Frame::Eviction(_) | Frame::Request { .. } => u32::MAX,
            };
            match tapped.asked.take() {
                Some(Asked::Login) if status == 0 => tapped.signed_in = true,
                Some(Asked::RouteLookup) if status == 0 => tap.routing_replies += 1,
                Some(Asked::Send { batch })
                    if status == ErrorCode::TransientNotAccepted.as_u32() =>
                {
                    self.refusals += 1;
                    let refusal = Refusal {
                        node: tapped.node,
                        at: now,
                        routing_replies: tap.routing_replies,
                        elsewhere: false,
                    };
                    tap.refusals.insert(batch, refusal);
                }
                Some(Asked::Send { batch }) if status == 0 => {
                    tap.refusals.remove(&batch);
                }
                Some(_) | None => {}
            }
            if bytes.is_empty() {
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use iggy_route_core::partitioning::Partitioning;
    use iggy_route_core::wire::{Identifier, Message, ReplyHeader, RequestHeader, encode_request};

    use super::*;

    const CODE_SEND: u32 = 101;

    fn request(operation: Operation, code: u32, body: &[u8]) -> (RequestHeader, Bytes) {
        let header = RequestHeader::new(operation, code, 7, 1, 1, body.len());
        let mut out = BytesMut::new();
        encode_request(&header, body, &mut out);
        (header, out.freeze())
    }

    fn send(batch: u32) -> (RequestHeader, Bytes) {
        let tag = MessageTag {
            router: 0,
            batch,
            index: 0,
        };
        let body = SendMessagesRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::partition_id(0),
            messages: vec![Message {
                id: 1,
                origin_timestamp: 0,
                payload: tag.payload(0),
                user_headers: Bytes::new(),
            }],
        };
        let mut out = BytesMut::new();
        body.encode(&mut out);
        request(Operation::SendMessages, CODE_SEND, &out)
    }

    fn reply(to: &RequestHeader, status: u32) -> Bytes {
        let mut out = BytesMut::new();
        ReplyHeader::for_request(to, status, 1, 0).encode(&mut out);
        out.freeze()
    }

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    /// A tap with a coordinator link (1) to node 0 and a data link (2) to node 1, where
    /// node 1 has just refused batch 5 at 10 ms.
    fn refused_on_node1() -> Wiretap {
        let mut tap = Wiretap::new(1, ms(5));
        tap.connect(0, LinkId(1), 0);
        tap.connect(0, LinkId(2), 1);
        let (header, frame) = send(5);
        tap.write(0, LinkId(2), &frame, ms(0), false).unwrap();
        tap.read(0, LinkId(2), &reply(&header, 58), ms(10));
        assert_eq!(tap.refusals, 1);
        tap
    }

    #[test]
    fn writing_a_refused_batch_to_the_same_node_without_news_is_caught() {
        let mut tap = refused_on_node1();
        let (_, frame) = send(5);
        let error = tap.write(0, LinkId(2), &frame, ms(11), false).unwrap_err();
        assert!(error.contains("batch 5 to node 1 again"), "{error}");
    }

    #[test]
    fn a_routing_reply_since_the_refusal_is_news() {
        let mut tap = refused_on_node1();
        let (lookup, frame) = request(Operation::NonReplicated, code::GET_POLL_ROUTING, &[]);
        tap.write(0, LinkId(1), &frame, ms(11), false).unwrap();
        tap.read(0, LinkId(1), &reply(&lookup, 0), ms(12));
        let (_, frame) = send(5);
        tap.write(0, LinkId(2), &frame, ms(13), false).unwrap();
    }

    #[test]
    fn discovery_may_return_after_trying_elsewhere_or_backing_off() {
        let mut tap = refused_on_node1();
        let (_, frame) = send(5);
        assert!(tap.write(0, LinkId(2), &frame, ms(11), true).is_err());
        tap.write(0, LinkId(2), &frame, ms(13), true).unwrap();

        let mut tap = refused_on_node1();
        tap.connect(0, LinkId(3), 2);
        tap.write(0, LinkId(3), &frame, ms(11), true).unwrap();
        tap.write(0, LinkId(2), &frame, ms(11), true).unwrap();
    }

    #[test]
    fn another_batch_is_not_held_back() {
        let mut tap = refused_on_node1();
        let (_, frame) = send(6);
        tap.write(0, LinkId(2), &frame, ms(11), false).unwrap();
    }
}
