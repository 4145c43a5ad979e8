//! The `router_ops` fuzz target: arbitrary sequences of transport events, requests, replies,
//! garbage and time driven through the [`Router`] against the fake cluster, with the
//! router's promises checked after every step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::fake_cluster::{FakeCluster, addr};
use crate::config::{Config, Credentials};
use crate::ids::{LinkId, RequestId};
use crate::partitioning::Partitioning;
use crate::request::{Request, SendRequest};
use crate::router::{CloseReason, ConnectError, Output, Router};
use crate::wire::{Identifier, Message};

/// Ops the input can ask for, one byte of kind and one of argument each.
const OPS_MAX: usize = 2_000;
/// Frames the router may write at one instant of the settle before it counts as a storm
/// (far above what the ops can have queued: every pending request and its lookups).
const STORM_AT_ONE_INSTANT: usize = 50_000;

#[derive(Debug, Default)]
struct Net {
    /// Links the router asked for and the node each leads to.
    nodes: BTreeMap<LinkId, usize>,
    /// Links asked for but not yet answered by the "transport".
    connecting: Vec<LinkId>,
    connected: BTreeSet<LinkId>,
    /// Request frames written and not yet answered, per link.
    written: BTreeMap<LinkId, VecDeque<Bytes>>,
    submitted: BTreeSet<RequestId>,
    completed: BTreeSet<RequestId>,
    succeeded: usize,
}

/// What one run did, so tests can tell a run that reached the routing paths from one that
/// never got past the login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpsSummary {
    /// Requests accepted.
    pub submitted: usize,
    /// Requests that completed with success.
    pub succeeded: usize,
}

/// Drives a router with the operations encoded in `data`, starting at `now`. Panics when
/// the router breaks one of its promises (that is what the fuzzer looks for).
pub fn router_ops(now: Instant, data: &[u8]) -> OpsSummary {
    let Some((&setup, ops)) = data.split_first() else {
        return OpsSummary {
            submitted: 0,
            succeeded: 0,
        };
    };
    let primaries = vec![
        usize::from(setup % 3),
        usize::from((setup >> 2) % 3),
        usize::from((setup >> 4) % 3),
    ];
    let mut cluster = FakeCluster::new(3, primaries);
    cluster.routing_commands = setup & 0x40 == 0;
    let Ok(credentials) = Credentials::user("iggy", "iggy") else {
        return OpsSummary {
            submitted: 0,
            succeeded: 0,
        };
    };
    let mut config = Config::new((0..3).map(addr).collect(), credentials);
    if setup & 0x80 != 0 {
        // Little room, so that calls wait for it and the line fills.
        config.max_pending_requests = 4;
        config.max_pending_per_lane = 2;
    }
    let mut router = Router::new(config, u64::from(setup), now);
    let mut net = Net::default();
    let mut now = now;
    drain(&mut router, &mut net, now);
    for pair in ops.chunks(2).take(OPS_MAX) {
        let (kind, arg) = (pair[0], pair.get(1).copied().unwrap_or(0));
        step(&mut router, &mut cluster, &mut net, &mut now, kind, arg);
        drain(&mut router, &mut net, now);
    }
    // Settle: connect and answer everything, in small steps of time, until every deadline
    // has passed. Every request must then have completed.
    for _ in 0..400 {
        let links: Vec<LinkId> = net.connecting.drain(..).collect();
        for link in links {
            router.handle_connected(now, link);
            net.connected.insert(link);
            drain(&mut router, &mut net, now);
        }
        // At one instant the router writes a bounded number of frames: one that answers
        // every write with another at the same `now` is a storm, not a slow settle.
        let mut answered = 0;
        while net.written.values().any(|q| !q.is_empty()) {
            answered += 1;
            assert!(
                answered <= STORM_AT_ONE_INSTANT,
                "a storm: over {STORM_AT_ONE_INSTANT} frames written at one instant"
            );
            answer_one(&mut router, &mut cluster, &mut net, now, 0);
            drain(&mut router, &mut net, now);
        }
        now += Duration::from_millis(100);
        router.handle_timeout(now);
        drain(&mut router, &mut net, now);
    }
    let missing: Vec<_> = net.submitted.difference(&net.completed).collect();
    assert!(missing.is_empty(), "requests never completed: {missing:?}");
    OpsSummary {
        submitted: net.submitted.len(),
        succeeded: net.succeeded,
    }
}

fn step(
    router: &mut Router,
    cluster: &mut FakeCluster,
    net: &mut Net,
    now: &mut Instant,
    kind: u8,
    arg: u8,
) {
    match kind % 8 {
        0 => {
            let request = Request::Send(SendRequest {
                stream: Identifier::Numeric(1),
                topic: Identifier::Numeric(1),
                partitioning: match arg % 3 {
                    0 => Partitioning::PartitionId(u32::from(arg >> 2) % 4),
                    1 => Partitioning::Balanced,
                    _ => Partitioning::MessagesKey(Bytes::copy_from_slice(&[arg])),
                },
                messages: vec![Message {
                    id: u128::from(arg) + 1,
                    payload: Bytes::copy_from_slice(&[arg; 3]),
                    ..Message::default()
                }],
            });
            // The high bit of the kind makes the call one that may wait for room, for up
            // to `arg` times 20 ms (none at all for 0: refused at once when full).
            let submitted = if kind & 0x80 == 0 {
                router.submit(*now, request)
            } else {
                let deadline = *now + Duration::from_millis(u64::from(arg) * 20);
                router.submit_waiting(*now, request, deadline)
            };
            if let Ok(id) = submitted {
                net.submitted.insert(id);
            }
        }
        1 => {
            if !net.connecting.is_empty() {
                let link = net
                    .connecting
                    .remove(usize::from(arg) % net.connecting.len());
                if arg & 0x80 == 0 {
                    net.connected.insert(link);
                    router.handle_connected(*now, link);
                } else {
                    forget(net, link);
                    router.handle_connect_failed(*now, link, ConnectError::Unreachable);
                }
            }
        }
        2 => answer_one(router, cluster, net, *now, arg),
        3 => {
            if let Some(&link) = nth(&net.connected, arg) {
                forget(net, link);
                router.handle_closed(*now, link, CloseReason::Peer);
            }
        }
        4 => {
            *now += Duration::from_millis(u64::from(arg) * 20);
            router.handle_timeout(*now);
        }
        5 => {
            let partition = usize::from(arg % 3);
            if let Some(primary) = cluster.primaries.get_mut(partition) {
                *primary = usize::from(arg >> 2) % 3;
            }
        }
        6 => {
            if let Some(&link) = nth(&net.connected, arg) {
                let garbage = [arg; 300];
                router.handle_read(*now, link, &garbage[..usize::from(arg) + 1]);
            }
        }
        _ if kind & 0x80 != 0 => {
            // A caller gives up on one of its requests (waiting for room or not).
            let open: Vec<RequestId> = net.submitted.difference(&net.completed).copied().collect();
            if !open.is_empty() {
                router.withdraw(*now, open[usize::from(arg) % open.len()]);
            }
        }
        // A login as another user (or back): every link retires, nothing may be lost.
        _ if arg & 0x40 != 0 => {
            let username = if arg & 1 == 0 { "iggy" } else { "other" };
            if let Ok(credentials) = Credentials::user(username, "iggy") {
                router.sign_in_as(*now, credentials);
            }
        }
        _ => cluster.routing_commands = !cluster.routing_commands,
    }
}

/// Answers the oldest unanswered frame of one link, delivering the reply split in two.
fn answer_one(
    router: &mut Router,
    cluster: &mut FakeCluster,
    net: &mut Net,
    now: Instant,
    arg: u8,
) {
    let links: Vec<LinkId> = net
        .written
        .iter()
        .filter(|(_, q)| !q.is_empty())
        .map(|(l, _)| *l)
        .collect();
    if links.is_empty() {
        return;
    }
    let link = links[usize::from(arg) % links.len()];
    let Some(frame) = net.written.get_mut(&link).and_then(VecDeque::pop_front) else {
        return;
    };
    let node = net.nodes.get(&link).copied().unwrap_or(0);
    let (_, reply) = cluster.answer(node, &frame);
    let split = usize::from(arg).min(reply.len());
    router.handle_read(now, link, &reply[..split]);
    router.handle_read(now, link, &reply[split..]);
}

fn forget(net: &mut Net, link: LinkId) {
    net.connected.remove(&link);
    net.written.remove(&link);
    net.connecting.retain(|l| *l != link);
}

fn nth(set: &BTreeSet<LinkId>, arg: u8) -> Option<&LinkId> {
    if set.is_empty() {
        return None;
    }
    set.iter().nth(usize::from(arg) % set.len())
}

/// Drains every output, checking the promises the router makes about them.
fn drain(router: &mut Router, net: &mut Net, now: Instant) {
    for _ in 0..100_000 {
        let Some(output) = router.poll_output() else {
            break;
        };
        match output {
            Output::Connect { link, node, .. } => {
                assert!(!net.nodes.contains_key(&link), "{link} reused");
                net.nodes.insert(link, node.0 as usize);
                net.connecting.push(link);
            }
            Output::Transmit { link, bytes } => {
                assert!(
                    net.connected.contains(&link),
                    "transmit on {link}, which is not connected"
                );
                let queue = net.written.entry(link).or_default();
                assert!(
                    queue.is_empty(),
                    "a second frame on {link} before the reply to the first (lockstep)"
                );
                queue.push_back(bytes);
            }
            Output::Close { link } => forget(net, link),
            Output::Completed { id, outcome } => {
                assert!(
                    net.submitted.contains(&id),
                    "{id} completed but never submitted"
                );
                assert!(net.completed.insert(id), "{id} completed twice");
                net.succeeded += usize::from(outcome.is_ok());
            }
            Output::Event(_) => {}
        }
    }
    if let Some(deadline) = router.poll_timeout() {
        assert!(deadline >= now, "deadline before now");
    }
}
