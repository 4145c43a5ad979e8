//! Transcript tests of the outer face: frames in and out at exact instants, against a tiny
//! in-memory cluster, each output recorded as a short line.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::fuzzing::fake_cluster::{FakeCluster, Links, addr};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{
    CloseReason, Config, ConnectError, Credentials, Event, LinkId, Output, Request, RequestId,
    Router, SendRequest,
};

/// A send of one small message to partition `partition` of topic 1/1.
fn send_request(partition: u32) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message {
            payload: Bytes::from_static(b"hello"),
            ..Message::default()
        }],
    })
}

/// A router wired to a fake cluster: every transmit is answered at once.
struct Harness {
    router: Router,
    cluster: FakeCluster,
    links: Links,
    now: Instant,
    transcript: Vec<String>,
}

impl Harness {
    fn new(cluster: FakeCluster) -> Self {
        let now = Instant::now();
        let seeds = (0..cluster.nodes).map(addr).collect();
        let config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
        let router = Router::new(config, 42, now);
        let mut harness = Self {
            router,
            cluster,
            links: Links::new(),
            now,
            transcript: Vec::new(),
        };
        harness.run();
        harness
    }

    /// Drains outputs, connecting and answering, until the router is quiet.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let Some(output) = self.router.poll_output() else {
                return;
            };
            match output {
                Output::Connect { link, node, addr } => {
                    let index = (9000..9000 + self.cluster.nodes)
                        .position(|port| addr.ends_with(&port.to_string()))
                        .unwrap();
                    self.links.insert(link, index);
                    self.transcript.push(format!("connect {link} {node}"));
                    self.router.handle_connected(self.now, link);
                }
                Output::Transmit { link, bytes } => {
                    let node = self.links[&link];
                    let (name, reply) = self.cluster.answer(node, &bytes);
                    self.transcript.push(format!("{link} {name}"));
                    self.router.handle_read(self.now, link, &reply);
                }
                Output::Close { link } => self.transcript.push(format!("close {link}")),
                Output::Completed { id, outcome } => {
                    let verdict = match outcome {
                        Ok(_) => "ok".to_owned(),
                        Err(error) => format!("err {error}"),
                    };
                    self.transcript.push(format!("completed {id} {verdict}"));
                }
                Output::Event(Event::SessionMoved { from, to }) => {
                    self.transcript
                        .push(format!("session moved {from} -> {to}"));
                }
                Output::Event(_) => {}
            }
        }
        panic!("router never went quiet");
    }

    fn send(&mut self, partition: u32) -> RequestId {
        let id = self
            .router
            .submit(self.now, send_request(partition))
            .unwrap();
        self.run();
        id
    }

    fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.transcript)
    }
}

#[test]
fn start_connects_the_coordinator_signs_in_and_reads_the_roster() {
    let mut h = Harness::new(FakeCluster::new(3, vec![0]));
    assert_eq!(
        h.take(),
        ["connect link1 node0", "link1 LOGIN", "link1 ROSTER"]
    );
    assert_eq!(
        h.router.poll_timeout(),
        Some(h.now + Duration::from_secs(5)),
        "next: the heartbeat"
    );
}

#[test]
fn bug_report_scenario_alternating_sends_are_one_frame_each_on_the_primarys_data_link() {
    // Partition 0's primary is node 0, partition 1's is node 2; the session is on node 0.
    let mut h = Harness::new(FakeCluster::new(3, vec![0, 2]));
    h.take();
    let first = h.send(0);
    assert_eq!(
        h.take(),
        [
            "link1 GET_TOPIC".to_owned(),
            "link1 ROUTE? p0 -> node0".to_owned(),
            "connect link2 node0".to_owned(),
            "link2 LOGIN".to_owned(),
            "link2 SEND p0".to_owned(),
            format!("completed {first} ok"),
        ]
    );
    let second = h.send(1);
    assert_eq!(
        h.take(),
        [
            "link1 ROUTE? p1 -> node2".to_owned(),
            "connect link3 node2".to_owned(),
            "link3 LOGIN".to_owned(),
            "link3 SEND p1".to_owned(),
            format!("completed {second} ok"),
        ]
    );
    let logins = h.cluster.logins;
    for round in 0..4u32 {
        let p = round % 2;
        let id = h.send(p);
        let link = if p == 0 { "link2" } else { "link3" };
        assert_eq!(
            h.take(),
            [format!("{link} SEND p{p}"), format!("completed {id} ok")]
        );
    }
    assert_eq!(h.cluster.logins, logins, "no new session after warm-up");
    assert_eq!(h.cluster.refusals, 0);
    let stats = h.router.stats();
    assert_eq!(
        (stats.session_moves, stats.refusals, stats.sends),
        (0, 0, 6)
    );
    assert_eq!(
        stats.reconnects, 0,
        "opening data links is not reconnecting"
    );
}

#[test]
fn a_moved_primary_is_refused_once_then_rerouted_at_once() {
    let mut h = Harness::new(FakeCluster::new(3, vec![0]));
    h.send(0);
    h.take();
    h.cluster.primaries[0] = 1;
    let id = h.send(0);
    assert_eq!(
        h.take(),
        [
            "link2 SEND p0 REFUSED".to_owned(),
            "link1 ROUTE? p0 -> node1".to_owned(),
            "connect link3 node1".to_owned(),
            "link3 LOGIN".to_owned(),
            "link3 SEND p0".to_owned(),
            format!("completed {id} ok"),
        ]
    );
    assert_eq!(h.router.stats().refusals, 1);
    assert_eq!(h.router.coordinator_node().0, 0, "the session stays");
}

#[test]
fn without_routing_commands_the_primary_is_found_by_refusal_and_kept() {
    let mut cluster = FakeCluster::new(3, vec![2]);
    cluster.routing_commands = false;
    let mut h = Harness::new(cluster);
    h.take();
    let id = h.send(0);
    let transcript = h.take();
    assert_eq!(
        transcript,
        [
            "link1 GET_TOPIC".to_owned(),
            "link1 ROUTE? unsupported".to_owned(),
            "connect link2 node0".to_owned(),
            "link2 LOGIN".to_owned(),
            "link2 SEND p0 REFUSED".to_owned(),
            "connect link3 node1".to_owned(),
            "link3 LOGIN".to_owned(),
            "link3 SEND p0 REFUSED".to_owned(),
            "connect link4 node2".to_owned(),
            "link4 LOGIN".to_owned(),
            "link4 SEND p0".to_owned(),
            format!("completed {id} ok"),
        ]
    );
    let id = h.send(0);
    assert_eq!(
        h.take(),
        ["link4 SEND p0".to_owned(), format!("completed {id} ok")]
    );
}

#[test]
fn a_silent_node_costs_one_attempt_timeout_and_the_write_completes_outcome_unknown() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]));
    h.send(0);
    h.take();
    let request = send_request(0);
    let id = h.router.submit(h.now, request).unwrap();
    let Some(Output::Transmit { link, .. }) = h.router.poll_output() else {
        panic!("expected the send to be written");
    };
    assert!(h.router.poll_output().is_none());
    let deadline = h.router.poll_timeout().unwrap();
    assert_eq!(
        deadline,
        h.now + Duration::from_secs(5),
        "the attempt timeout"
    );
    h.now = deadline;
    h.router.handle_timeout(h.now);
    h.run();
    let transcript = h.take();
    assert!(
        transcript.contains(&format!("close {link}")),
        "{transcript:?}"
    );
    assert!(
        transcript.contains(&format!(
            "completed {id} err outcome unknown: node0 lost it in flight"
        )),
        "{transcript:?}"
    );
}

#[test]
fn the_session_moves_only_when_its_node_is_unreachable() {
    let mut h = Harness::new(FakeCluster::new(3, vec![0]));
    h.take();
    // The coordinator's link drops: it reconnects to the same node, no move.
    h.router.handle_closed(h.now, LinkId(1), CloseReason::Peer);
    h.run();
    assert_eq!(
        h.take(),
        ["connect link2 node0", "link2 LOGIN", "link2 ROSTER"]
    );
    assert_eq!(h.router.stats().session_moves, 0);
    assert_eq!(h.router.stats().reconnects, 1);
    // Its node stops answering connects: now the session moves.
    h.router.handle_closed(h.now, LinkId(2), CloseReason::Peer);
    let link = std::iter::from_fn(|| h.router.poll_output())
        .find_map(|output| match output {
            Output::Connect { link, .. } => Some(link),
            _ => None,
        })
        .expect("a reconnect to the same node");
    h.router
        .handle_connect_failed(h.now, link, ConnectError::Unreachable);
    h.run();
    let transcript = h.take();
    assert_eq!(transcript[0], "session moved node0 -> node1");
    assert_eq!(h.router.stats().session_moves, 1);
    assert_eq!(h.router.coordinator_node().0, 1);
}

#[test]
fn garbage_from_a_node_closes_its_link_and_nothing_panics() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]));
    h.take();
    h.router.handle_read(h.now, LinkId(1), &[0xff; 300]);
    h.run();
    let transcript = h.take();
    assert!(
        transcript.contains(&"close link1".to_owned()),
        "{transcript:?}"
    );
}

#[test]
fn credentials_never_appear_in_debug_output() {
    let now = Instant::now();
    let secret = "Sup3r-Secret-pw";
    let config = Config::new(vec![addr(0)], Credentials::user("iggy", secret).unwrap());
    let mut router = Router::new(config, 1, now);
    let mut shown = Vec::new();
    while let Some(output) = router.poll_output() {
        if let Output::Connect { link, .. } = &output {
            router.handle_connected(now, *link);
        }
        shown.push(format!("{output:?}"));
    }
    shown.push(format!("{router:?}"));
    assert!(
        shown.iter().any(|s| s.starts_with("Transmit")),
        "the login was written: {shown:?}"
    );
    for text in shown {
        assert!(!text.contains(secret), "secret in {text}");
    }
}

#[test]
fn malformed_replies_close_the_link_and_the_request_is_retried_elsewhere_or_failed_by_the_rules() {
    // A reply to nothing, a frame with an unknown command byte, and a size under 256 each
    // close the link; a send in flight then completes outcome unknown, never twice.
    let bad_frames: Vec<Vec<u8>> = vec![
        {
            let mut frame = vec![0u8; 256];
            frame[48..52].copy_from_slice(&256u32.to_le_bytes());
            frame[60] = 77; // unknown command byte
            frame
        },
        {
            let mut frame = vec![0u8; 256];
            frame[48..52].copy_from_slice(&10u32.to_le_bytes()); // size below the header
            frame[60] = 8;
            frame
        },
    ];
    for bad in bad_frames {
        let mut h = Harness::new(FakeCluster::new(1, vec![0]));
        h.send(0);
        h.take();
        let request = send_request(0);
        let id = h.router.submit(h.now, request).unwrap();
        let Some(Output::Transmit { link, .. }) = h.router.poll_output() else {
            panic!("the send is written");
        };
        h.router.handle_read(h.now, link, &bad);
        h.run();
        let transcript = h.take();
        assert!(
            transcript.contains(&format!("close {link}")),
            "{transcript:?}"
        );
        let completions = transcript
            .iter()
            .filter(|l| l.starts_with(&format!("completed {id}")))
            .count();
        assert_eq!(completions, 1, "{transcript:?}");
    }
    // A frame when nothing is in flight: the coordinator is idle after start-up.
    let mut h = Harness::new(FakeCluster::new(1, vec![0]));
    h.take();
    let (_, reply) = h.cluster.answer(0, &{
        let header = iggy_route_core::wire::RequestHeader::new(
            iggy_route_core::wire::Operation::NonReplicated,
            1,
            5,
            1,
            1,
            0,
        );
        let mut out = bytes::BytesMut::new();
        iggy_route_core::wire::encode_request(&header, &[], &mut out);
        out
    });
    h.router.handle_read(h.now, LinkId(1), &reply);
    h.run();
    assert!(h.take().contains(&"close link1".to_owned()));
}

#[test]
fn refused_credentials_fail_pending_requests_and_every_redial_waits_for_its_backoff() {
    let mut cluster = FakeCluster::new(2, vec![0]);
    cluster.refuse_logins = true;
    let mut h = Harness::new(cluster);
    let start = h.take();
    assert_eq!(
        start[..3],
        ["connect link1 node0", "link1 LOGIN EVICTED", "close link1"]
    );
    let request = send_request(0);
    let id = h.router.submit(h.now, request).unwrap();
    let mut dials: Vec<(Instant, String)> = Vec::new();
    let mut failed = false;
    for _ in 0..30 {
        h.run();
        for line in h.take() {
            if line.starts_with("connect") {
                dials.push((h.now, line.rsplit(' ').next().unwrap().to_owned()));
            }
            failed |= line == format!("completed {id} err sign-in failed: InvalidCredentials (42)");
        }
        let next = h.router.poll_timeout().unwrap();
        assert!(next > h.now, "the router waits before dialling again");
        h.now = next;
        h.router.handle_timeout(h.now);
    }
    assert!(failed, "the pending send fails with the server's reason");
    for node in ["node0", "node1"] {
        let times: Vec<Instant> = dials
            .iter()
            .filter(|(_, n)| n == node)
            .map(|(t, _)| *t)
            .collect();
        assert!(times.len() >= 3, "{node} was retried: {times:?}");
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|g| *g >= Duration::from_millis(25)),
            "{node}: {gaps:?}"
        );
        assert!(
            gaps.last() > gaps.first(),
            "{node}: the backoff grows: {gaps:?}"
        );
    }
}

#[test]
fn outcome_unknown_57_is_replayed_byte_for_byte_on_the_same_link_only() {
    let mut h = Harness::new(FakeCluster::new(2, vec![1]));
    h.send(0);
    h.take();
    h.cluster.not_committed = 1;
    let request = send_request(0);
    let id = h.router.submit(h.now, request).unwrap();
    let Some(Output::Transmit { link, bytes: first }) = h.router.poll_output() else {
        panic!("the send is written");
    };
    let (name, reply) = h.cluster.answer(1, &first);
    assert_eq!(name, "SEND 57");
    h.router.handle_read(h.now, link, &reply);
    assert!(
        h.router.poll_output().is_none(),
        "nothing until the replay interval"
    );
    let replay_at = h.router.poll_timeout().unwrap();
    assert!(
        replay_at >= h.now + Duration::from_millis(10)
            && replay_at <= h.now + Duration::from_millis(20),
        "the first replay waits the replay interval, jittered down to half of it"
    );
    h.now = replay_at;
    h.router.handle_timeout(h.now);
    let Some(Output::Transmit {
        link: again,
        bytes: replayed,
    }) = h.router.poll_output()
    else {
        panic!("the same frame is written again");
    };
    assert_eq!(
        (again, &replayed),
        (link, &first),
        "same link, same bytes (same request id)"
    );
    let (name, reply) = h.cluster.answer(1, &replayed);
    assert_eq!(name, "SEND p0");
    h.router.handle_read(h.now, link, &reply);
    h.run();
    assert_eq!(h.take(), [format!("completed {id} ok")]);
    assert_eq!(h.router.stats().refusals, 0);
}

#[test]
fn idle_links_send_heartbeats_and_idle_data_links_are_closed() {
    let mut h = Harness::new(FakeCluster::new(1, vec![0]));
    h.send(0);
    h.take();
    let start = h.now;
    let mut pings = 0;
    let mut closed = Vec::new();
    // Walk time forward deadline by deadline, for a little over the idle timeout (60 s).
    for _ in 0..100 {
        let next = h.router.poll_timeout().unwrap();
        if next > start + Duration::from_secs(70) {
            break;
        }
        h.now = next;
        h.router.handle_timeout(h.now);
        h.run();
        for line in h.take() {
            if line.ends_with("PING") {
                pings += 1;
            } else if line.starts_with("close") {
                closed.push((line, h.now - start));
            }
        }
    }
    // Both links ping every 5 s while idle; the data link (link2) closes at 60 s idle, the
    // coordinator (link1) never does.
    assert!(pings >= 20, "{pings} pings");
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].0, "close link2");
    assert_eq!(closed[0].1, Duration::from_secs(60));
    assert_eq!(h.router.link_count(), (1, 1), "the coordinator stays");
}

#[test]
fn every_frame_written_is_byte_for_byte_what_encode_request_makes_of_its_header_and_body() {
    // The link layer writes each header in place over a placeholder; this holds it to the
    // codec's own `encode_request` (checksum, size, code placement) for every frame of the
    // bug-report scenario: logins, reads, lookups and sends.
    let now = Instant::now();
    let config = Config::new(
        (0..3).map(addr).collect(),
        Credentials::user("iggy", "iggy").unwrap(),
    );
    let mut router = Router::new(config, 9, now);
    let mut cluster = FakeCluster::new(3, vec![0, 2]);
    let mut links = Links::new();
    let mut seen = 0;
    for p in 0..2 {
        let request = send_request(p);
        router.submit(now, request).unwrap();
    }
    for _ in 0..1000 {
        let Some(output) = router.poll_output() else {
            break;
        };
        match output {
            Output::Connect { link, node, .. } => {
                links.insert(link, node.0 as usize);
                router.handle_connected(now, link);
            }
            Output::Transmit { link, bytes } => {
                let header = iggy_route_core::wire::RequestHeader::decode(&bytes).unwrap();
                let mut expected = bytes::BytesMut::new();
                iggy_route_core::wire::encode_request(&header, &bytes[256..], &mut expected);
                assert_eq!(bytes, expected.freeze(), "{header:?}");
                seen += 1;
                let (_, reply) = cluster.answer(links[&link], &bytes);
                router.handle_read(now, link, &reply);
            }
            _ => {}
        }
    }
    assert!(
        seen >= 8,
        "login, roster, topic, 2 lookups, 2 data logins, 2 sends: {seen}"
    );
}
