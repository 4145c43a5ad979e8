//! Coalescing through the router's outer face: sends queued behind a partition's write in
//! flight ride the next frame, and each caller gets its own receipt with its own offsets.
//! Frames are held and answered one at a time, so what queues behind what is exact.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, Links, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message, SendMessagesRequest};
use iggy_route_core::{
    Config, Credentials, LinkId, Output, Reply, Request, RequestError, RequestId, Router,
    SendReceipt, SendRequest,
};

/// A send of `count` messages to `partition` of topic 1/1, payloads tagged `tag.index`.
fn send_of(partition: u32, tag: u32, count: u32) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: (0..count)
            .map(|index| Message {
                payload: Bytes::from(format!("{tag}.{index}")),
                ..Message::default()
            })
            .collect(),
    })
}

/// A router on a fake cluster whose send frames are held until the test answers them.
struct Held {
    router: Router,
    cluster: FakeCluster,
    links: Links,
    now: Instant,
    /// Send frames written and not yet answered, oldest first.
    held: VecDeque<(LinkId, Bytes)>,
    completed: Vec<(RequestId, Result<Reply, RequestError>)>,
}

impl Held {
    fn new(config: impl FnOnce(&mut Config)) -> Self {
        let now = Instant::now();
        let cluster = FakeCluster::new(3, vec![1, 2]);
        let seeds = (0..cluster.nodes).map(addr).collect();
        let mut settings = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        config(&mut settings);
        let mut held = Self {
            router: Router::new(settings, 42, now),
            cluster,
            links: Links::new(),
            now,
            held: VecDeque::new(),
            completed: Vec::new(),
        };
        held.run();
        held
    }

    /// Drains outputs: connects, answers everything but sends, holds sends.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let Some(output) = self.router.poll_output() else {
                return;
            };
            match output {
                Output::Connect { link, addr, .. } => {
                    let index = (9000..9000 + self.cluster.nodes)
                        .position(|port| addr.ends_with(&port.to_string()))
                        .unwrap();
                    self.links.insert(link, index);
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    let is_send = SendMessagesRequest::decode(&bytes[256..]).is_ok();
                    if is_send {
                        self.held.push_back((link, bytes));
                    } else {
                        let node = self.links[&link];
                        let (_, reply) = self.cluster.answer(node, &bytes);
                        self.router.handle_read(self.now, link, &reply);
                    }
                }
                Output::Completed { id, outcome } => self.completed.push((id, outcome)),
                Output::Close { .. } | Output::Event(_) => {}
            }
        }
        panic!("router never went quiet");
    }

    fn submit(&mut self, request: Request) -> RequestId {
        let id = self.router.submit(self.now, request).unwrap();
        self.run();
        id
    }

    /// The payload tags of the oldest held frame, without answering it.
    fn peek(&self) -> Vec<String> {
        let (_, bytes) = self.held.front().unwrap();
        SendMessagesRequest::decode(&bytes[256..])
            .unwrap()
            .messages
            .iter()
            .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
            .collect()
    }

    /// Answers the oldest held frame as the fake cluster would.
    fn answer(&mut self) -> String {
        let (link, bytes) = self.held.pop_front().unwrap();
        let node = self.links[&link];
        let (name, reply) = self.cluster.answer(node, &bytes);
        self.router.handle_read(self.now, link, &reply);
        self.run();
        name
    }

    /// The receipt of a completed send.
    fn receipt(&self, id: RequestId) -> SendReceipt {
        match self.completed.iter().find(|(done, _)| *done == id) {
            Some((_, Ok(Reply::Sent(receipt)))) => *receipt,
            other => panic!("{id}: {other:?}"),
        }
    }

    fn error(&self, id: RequestId) -> RequestError {
        match self.completed.iter().find(|(done, _)| *done == id) {
            Some((_, Err(error))) => error.clone(),
            other => panic!("{id}: {other:?}"),
        }
    }
}

#[test]
fn sends_queued_behind_a_write_ride_the_next_frame_each_with_its_own_offsets() {
    let mut h = Held::new(|_| {});
    let first = h.submit(send_of(0, 1, 2));
    assert_eq!(h.peek(), ["1.0", "1.1"]);
    let b = h.submit(send_of(0, 2, 3));
    let c = h.submit(send_of(0, 3, 1));
    let d = h.submit(send_of(0, 4, 2));
    let other = h.submit(send_of(1, 9, 1));
    assert_eq!(h.held.len(), 2, "partition 1 has its own frame in flight");
    assert_eq!(h.answer(), "SEND p0 x2");
    assert_eq!(h.receipt(first).base_offset, Some(0));
    // Partition 1's frame is next in the held queue; partition 0's merged frame after it.
    assert_eq!(h.answer(), "SEND p1");
    assert_eq!(h.receipt(other).base_offset, Some(0));
    assert_eq!(h.peek(), ["2.0", "2.1", "2.2", "3.0", "4.0", "4.1"]);
    assert_eq!(h.answer(), "SEND p0 x6");
    let receipts: Vec<(Option<u64>, u32)> = [b, c, d]
        .iter()
        .map(|&id| {
            let receipt = h.receipt(id);
            assert_eq!(receipt.partition_id, 0);
            (receipt.base_offset, receipt.messages)
        })
        .collect();
    assert_eq!(receipts, [(Some(2), 3), (Some(5), 1), (Some(6), 2)]);
    let order: Vec<RequestId> = h.completed.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        order,
        [first, other, b, c, d],
        "callers complete in frame order"
    );
    assert_eq!(h.router.stats().coalesced, 2);
    assert_eq!(h.router.stats().sends, 5);
}

#[test]
fn a_merged_frame_is_bounded_in_messages_and_the_rest_waits_its_turn() {
    let mut h = Held::new(|config| config.coalesce_max_messages = 4);
    h.submit(send_of(0, 1, 1));
    let queued: Vec<RequestId> = (2..=6).map(|tag| h.submit(send_of(0, tag, 2))).collect();
    h.answer();
    assert_eq!(h.peek(), ["2.0", "2.1", "3.0", "3.1"], "4 messages at most");
    h.answer();
    assert_eq!(h.peek(), ["4.0", "4.1", "5.0", "5.1"]);
    h.answer();
    assert_eq!(h.peek(), ["6.0", "6.1"]);
    h.answer();
    let offsets: Vec<Option<u64>> = queued.iter().map(|&id| h.receipt(id).base_offset).collect();
    assert_eq!(offsets, [Some(1), Some(3), Some(5), Some(7), Some(9)]);
}

#[test]
fn a_send_above_the_byte_bound_still_goes_alone() {
    let mut h = Held::new(|config| config.coalesce_max_bytes = 100);
    h.submit(send_of(0, 1, 1));
    let big = h.submit(send_of(0, 2, 3));
    let small = h.submit(send_of(0, 3, 1));
    h.answer();
    assert_eq!(
        h.peek(),
        ["2.0", "2.1", "2.2"],
        "alone: its bytes fill the frame"
    );
    h.answer();
    assert_eq!(h.peek(), ["3.0"]);
    h.answer();
    assert_eq!(h.receipt(big).base_offset, Some(1));
    assert_eq!(h.receipt(small).base_offset, Some(4));
}

#[test]
fn a_refused_merged_frame_goes_whole_and_in_order_to_the_new_primary() {
    let mut h = Held::new(|_| {});
    h.submit(send_of(0, 1, 1));
    let b = h.submit(send_of(0, 2, 1));
    let c = h.submit(send_of(0, 3, 1));
    h.answer();
    // The primary moves while the merged frame is on its way.
    h.cluster.primaries[0] = 2;
    assert_eq!(h.answer(), "SEND p0 REFUSED");
    assert_eq!(h.router.stats().refusals, 1, "one frame, one refusal");
    assert_eq!(
        h.peek(),
        ["2.0", "3.0"],
        "the same sends, in the same order"
    );
    assert_eq!(h.answer(), "SEND p0 x2");
    assert_eq!(h.receipt(b).node.0, 2);
    // The fake cluster keeps one log per partition, whichever node leads it.
    assert_eq!(h.receipt(b).base_offset, Some(1));
    assert_eq!(h.receipt(c).base_offset, Some(2));
}

#[test]
fn a_merged_frame_lost_in_flight_leaves_every_caller_outcome_unknown() {
    let mut h = Held::new(|_| {});
    h.submit(send_of(0, 1, 1));
    let b = h.submit(send_of(0, 2, 1));
    let c = h.submit(send_of(0, 3, 1));
    h.answer();
    let (link, _) = h.held.pop_front().unwrap();
    h.router
        .handle_closed(h.now, link, iggy_route_core::CloseReason::Peer);
    h.run();
    for id in [b, c] {
        assert!(
            matches!(h.error(id), RequestError::OutcomeUnknown { .. }),
            "{id}: {:?}",
            h.error(id)
        );
    }
    let next = h.submit(send_of(0, 4, 1));
    assert_eq!(
        h.peek(),
        ["4.0"],
        "nothing of the lost frame is written again"
    );
    h.answer();
    assert_eq!(h.receipt(next).base_offset, Some(1));
}

#[test]
fn a_rider_whose_deadline_passes_in_flight_times_out_and_the_others_still_get_receipts() {
    let mut h = Held::new(|config| config.request_timeout = Duration::from_secs(2));
    h.submit(send_of(0, 1, 1));
    let early = h.submit(send_of(0, 2, 1));
    h.now += Duration::from_millis(1_500);
    let late = h.submit(send_of(0, 3, 1));
    h.answer();
    assert_eq!(h.peek(), ["2.0", "3.0"]);
    h.now += Duration::from_millis(600);
    h.router.handle_timeout(h.now);
    h.run();
    assert!(matches!(h.error(early), RequestError::TimedOut { .. }));
    assert!(
        h.held.len() == 1,
        "the lane is held by the frame in flight: nothing else is written"
    );
    h.answer();
    assert_eq!(h.receipt(late).base_offset, Some(2));
}

#[test]
fn linger_waits_for_company_and_goes_at_once_when_the_frame_is_full() {
    let linger = Duration::from_millis(5);
    let mut h = Held::new(|config| {
        config.linger = linger;
        config.coalesce_max_messages = 3;
    });
    // Warm the route (the first send lingers too: its route is known only after it).
    let warm = h.submit(send_of(0, 0, 1));
    h.now += linger;
    h.router.handle_timeout(h.now);
    h.run();
    h.answer();
    h.receipt(warm);
    let a = h.submit(send_of(0, 1, 1));
    assert!(h.held.is_empty(), "the first send lingers");
    let (at, _) = h.router.next_timer().unwrap();
    assert_eq!(at, h.now + linger);
    h.now += Duration::from_millis(2);
    let b = h.submit(send_of(0, 2, 1));
    assert!(h.held.is_empty());
    h.now += Duration::from_millis(3);
    h.router.handle_timeout(h.now);
    h.run();
    assert_eq!(h.peek(), ["1.0", "2.0"], "released when the linger ran out");
    h.answer();
    assert_eq!(h.receipt(a).base_offset, Some(1));
    assert_eq!(h.receipt(b).base_offset, Some(2));
    // Three messages fill the frame: no waiting.
    h.submit(send_of(0, 3, 1));
    h.submit(send_of(0, 4, 2));
    assert_eq!(h.peek(), ["3.0", "4.0", "4.1"], "a full frame goes at once");
}

#[test]
fn at_least_once_writes_a_lost_merged_frame_again_whole_and_in_order() {
    let mut h =
        Held::new(|config| config.delivery = iggy_route_core::DeliveryGuarantee::AtLeastOnce);
    h.submit(send_of(0, 1, 1));
    let b = h.submit(send_of(0, 2, 1));
    let c = h.submit(send_of(0, 3, 2));
    h.answer();
    let (link, _) = h.held.pop_front().unwrap();
    h.router
        .handle_closed(h.now, link, iggy_route_core::CloseReason::Peer);
    h.run();
    let d = h.submit(send_of(0, 4, 1));
    assert_eq!(
        h.peek(),
        ["2.0", "3.0", "3.1"],
        "written again at once, whole"
    );
    h.answer();
    assert_eq!(h.peek(), ["4.0"], "then the newcomer");
    h.answer();
    let offsets: Vec<Option<u64>> = [b, c, d]
        .iter()
        .map(|&id| h.receipt(id).base_offset)
        .collect();
    assert_eq!(offsets, [Some(1), Some(2), Some(4)]);
}

#[test]
fn the_head_timing_out_in_flight_leaves_its_riders_their_receipts() {
    let mut h = Held::new(|config| config.request_timeout = Duration::from_secs(2));
    h.submit(send_of(0, 1, 1));
    let head = h.submit(send_of(0, 2, 3));
    h.now += Duration::from_millis(1_500);
    let rider = h.submit(send_of(0, 3, 1));
    h.answer();
    assert_eq!(h.peek(), ["2.0", "2.1", "2.2", "3.0"]);
    h.now += Duration::from_millis(600);
    h.router.handle_timeout(h.now);
    h.run();
    assert!(matches!(h.error(head), RequestError::TimedOut { .. }));
    h.answer();
    assert_eq!(
        h.receipt(rider).base_offset,
        Some(4),
        "its offset counts the head's messages, which were written"
    );
}
