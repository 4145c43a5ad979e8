//! A node that answers a sign-in with "not now" (58 or 57: its metadata plane cannot
//! register a session, as during an election after the coordinator's node died) is
//! reachable: the session does not move again for it, but signs in there once it can.
//! The real-cluster suite found the session moving twice on a single node kill.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, addr};
use iggy_route_core::wire::{Frame, Operation, ReplyHeader, decode_one};
use iggy_route_core::{
    CloseReason, Config, ConnectError, Credentials, Event, LinkId, NodeId, Output, Router,
};

/// Drives a router over three fake nodes: node 0 becomes unreachable once the session is
/// up, and node 1 answers its first `refusals` sign-ins with status 58.
struct Election {
    router: Router,
    cluster: FakeCluster,
    now: Instant,
    links: Vec<(LinkId, usize)>,
    node0_down: bool,
    refusals: usize,
    connects: Vec<usize>,
    moves: Vec<(NodeId, NodeId)>,
}

impl Election {
    fn node_of(addr_text: &str) -> usize {
        (0..3).find(|&n| addr(n) == addr_text).unwrap()
    }

    fn step(&mut self) {
        while let Some(output) = self.router.poll_output() {
            match output {
                Output::Connect { link, addr, .. } => {
                    let node = Self::node_of(&addr);
                    self.connects.push(node);
                    if node == 0 && self.node0_down {
                        self.router.handle_connect_failed(
                            self.now,
                            link,
                            ConnectError::Unreachable,
                        );
                    } else {
                        self.links.push((link, node));
                        self.router.handle_connected(self.now, link);
                    }
                }
                Output::Transmit { link, bytes } => {
                    let node = self.links.iter().find(|(l, _)| *l == link).unwrap().1;
                    let reply = self.answer(node, &bytes);
                    self.router.handle_read(self.now, link, &reply);
                }
                Output::Event(Event::SessionMoved { from, to }) => self.moves.push((from, to)),
                _ => {}
            }
        }
    }

    fn answer(&mut self, node: usize, frame: &[u8]) -> Bytes {
        let Ok(Frame::Request { header, .. }) = decode_one(frame) else {
            panic!("not a request frame");
        };
        if header.operation == Operation::Register && node == 1 && self.refusals > 0 {
            self.refusals -= 1;
            let mut out = BytesMut::new();
            ReplyHeader::for_request(&header, 58, 0, 0).encode(&mut out);
            return out.freeze();
        }
        self.cluster.answer(node, frame).1
    }

    fn advance(&mut self) {
        if let Some(at) = self.router.poll_timeout() {
            self.now = self.now.max(at);
        }
        self.router.handle_timeout(self.now);
        self.step();
    }
}

#[test]
fn a_sign_in_answered_not_now_is_tried_again_on_the_same_node_not_moved_on() {
    let seeds = (0..3).map(addr).collect();
    let config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
    let now = Instant::now();
    let mut election = Election {
        router: Router::new(config, 3, now),
        cluster: FakeCluster::new(3, vec![0]),
        now,
        links: Vec::new(),
        node0_down: false,
        refusals: 4,
        connects: Vec::new(),
        moves: Vec::new(),
    };
    election.step();
    assert_eq!(
        election.connects,
        [0],
        "the session starts on the first seed"
    );
    // Node 0 dies: its link closes and it can no longer be reached.
    election.node0_down = true;
    let (coordinator, _) = election.links[0];
    election
        .router
        .handle_closed(election.now, coordinator, CloseReason::Peer);
    election.step();
    let deadline = now + Duration::from_secs(60);
    while election.refusals > 0 || election.router.stats().session_moves == 0 {
        assert!(election.now < deadline, "{:?}", election.connects);
        election.advance();
    }
    for _ in 0..20 {
        election.advance();
    }
    assert_eq!(
        election.moves,
        [(NodeId(0), NodeId(1))],
        "one move, away from the dead node; node 1's 'not now' is waited out"
    );
    let after_move = election.connects.iter().skip_while(|&&n| n != 1).copied();
    assert!(
        after_move.clone().all(|n| n == 1),
        "after the move only node 1 is dialled: {:?}",
        election.connects
    );
    assert_eq!(
        after_move.count(),
        5,
        "four sign-ins refused, the fifth signs in"
    );
}
