//! Balanced sends pass over a stalled partition (the crash seen in a run: a producer's sends to
//! the healthy partitions must not queue behind a failover), and come back to it once it
//! admits or its queue drains; a full partition queue is passed over rather than refusing
//! the send; keyed and explicit sends are never moved; with the option off, strict
//! round-robin.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::Instant;

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, RouteAnswer, Routing, Target};
use iggy_route_core::{Config, NodeId, RequestId, SubmitError};
use support::*;

/// Three partitions, partition `p` led by node `p`, every lane idle.
fn three_partitions(config: Config) -> (Instant, Routing) {
    let t0 = origin();
    let routing = warmed_with(config, t0, 3, &[(0, 0), (1, 1), (2, 2)]);
    (t0, routing)
}

/// Admits a balanced send and says which partition it went to.
fn balanced(routing: &mut Routing, now: Instant) -> (RequestId, u32) {
    let id = routing.admit(now, send(Partitioning::Balanced)).unwrap();
    let partition = routing.partition_of(id).expect("the count is known");
    (id, partition)
}

/// Admits `sends` explicit sends to `partition` (the first goes in flight, the rest wait).
fn queue_explicit(routing: &mut Routing, now: Instant, partition: u32, sends: usize) {
    for _ in 0..sends {
        routing
            .admit(now, send(Partitioning::PartitionId(partition)))
            .unwrap();
    }
}

/// Balanced sends until one lands on partition 1, each answered at once; then partition
/// 1's node fails the link (not sent), which stalls its lane with that send waiting and a
/// lookup in flight. Returns the stalled send.
fn stall_partition_1(routing: &mut Routing, t0: Instant) -> RequestId {
    loop {
        let (id, partition) = balanced(routing, t0);
        drain(routing);
        if partition == 1 {
            routing.handle_result(t0, id, Target::Node(NodeId(1)), Attempt::NotSent);
            let decisions = drain(routing);
            assert!(
                decisions.contains(&"lookup 1".to_owned()),
                "the lane looks its route up again: {decisions:?}"
            );
            return id;
        }
        routing.handle_result(t0, id, Target::Node(NodeId(partition)), sent(partition));
        drain(routing);
    }
}

#[test]
fn balanced_sends_pass_over_a_stalled_partition_and_come_back_once_it_admits() {
    let (t0, mut routing) = three_partitions(config());
    let stalled = stall_partition_1(&mut routing, t0);
    // While partition 1 waits for its primary, balanced sends go to 0 and 2 only, still
    // in turn.
    let mut chosen = Vec::new();
    for _ in 0..8 {
        let (id, partition) = balanced(&mut routing, t0);
        drain(&mut routing);
        routing.handle_result(t0, id, Target::Node(NodeId(partition)), sent(partition));
        drain(&mut routing);
        chosen.push(partition);
    }
    assert!(!chosen.contains(&1), "{chosen:?}");
    assert_eq!(chosen.iter().filter(|&&p| p == 0).count(), 4, "{chosen:?}");
    // The partition moved to node 0: the waiting send goes there and is admitted.
    routing.handle_route(
        t0,
        &partition(1),
        RouteAnswer::Primary {
            node: NodeId(0),
            watermark: 0,
        },
    );
    let decisions = drain(&mut routing);
    assert!(
        decisions.contains(&format!("write {stalled} -> node0")),
        "{decisions:?}"
    );
    routing.handle_result(t0, stalled, Target::Node(NodeId(0)), sent(0));
    drain(&mut routing);
    // Healthy again: it gets its turn.
    let turns: Vec<u32> = (0..3)
        .map(|_| {
            let (id, partition) = balanced(&mut routing, t0);
            drain(&mut routing);
            let node = if partition == 1 { 0 } else { partition };
            routing.handle_result(t0, id, Target::Node(NodeId(node)), sent(node));
            drain(&mut routing);
            partition
        })
        .collect();
    assert!(turns.contains(&1), "{turns:?}");
}

#[test]
fn a_stalled_partition_whose_queue_drained_is_balanced_to_again() {
    let mut config = config();
    config.request_timeout = std::time::Duration::from_secs(1);
    let (t0, mut routing) = three_partitions(config);
    let stalled = stall_partition_1(&mut routing, t0);
    // The node never comes back within the deadline: the waiting send fails, and the
    // empty lane is no longer passed over (the next balanced send to it finds out).
    let later = t0 + std::time::Duration::from_secs(2);
    routing.handle_timeout(later);
    let decisions = drain(&mut routing);
    assert!(
        decisions.contains(&format!("completed {stalled} err")),
        "{decisions:?}"
    );
    let chosen: Vec<u32> = (0..3).map(|_| balanced(&mut routing, later).1).collect();
    assert!(chosen.contains(&1), "{chosen:?}");
}

#[test]
fn keyed_and_explicit_sends_are_never_moved_off_a_stalled_partition() {
    let (t0, mut routing) = three_partitions(config());
    stall_partition_1(&mut routing, t0);
    let explicit = routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    assert_eq!(routing.partition_of(explicit), Some(1));
    // A key whose hash lands on partition 1.
    let key = (0..64)
        .map(|i| bytes::Bytes::from(format!("key-{i}")))
        .find(|key| iggy_route_core::partitioning::resolve_partition(key, 3) == Some(1))
        .unwrap();
    let keyed = routing
        .admit(t0, send(Partitioning::MessagesKey(key)))
        .unwrap();
    assert_eq!(routing.partition_of(keyed), Some(1));
}

#[test]
fn a_full_partition_queue_is_passed_over_instead_of_refusing_a_balanced_send() {
    for skips in [true, false] {
        let config = {
            let mut config = config();
            config.max_pending_per_lane = 2;
            config.balanced_skips_stalled = skips;
            config
        };
        let (t0, mut routing) = three_partitions(config);
        // Partition 0 holds two sends (one in flight, one waiting): full.
        queue_explicit(&mut routing, t0, 0, 2);
        drain(&mut routing);
        let outcomes: Vec<Result<u32, SubmitError>> = (0..3)
            .map(|_| {
                routing
                    .admit(t0, send(Partitioning::Balanced))
                    .map(|id| routing.partition_of(id).unwrap())
            })
            .collect();
        if skips {
            assert!(
                outcomes.iter().all(|o| matches!(o, Ok(p) if *p != 0)),
                "{outcomes:?}"
            );
        } else {
            assert!(
                outcomes
                    .iter()
                    .any(|o| matches!(o, Err(SubmitError::QueueFull { .. }))),
                "strict round-robin meets the full queue: {outcomes:?}"
            );
        }
    }
}

#[test]
fn a_long_partition_queue_is_passed_over_for_a_shorter_one() {
    let (t0, mut routing) = three_partitions(config());
    // Partition 0's node is slow (commits waiting on a retransmit): one send in flight
    // and five waiting behind it.
    queue_explicit(&mut routing, t0, 0, 6);
    drain(&mut routing);
    let chosen: Vec<u32> = (0..4)
        .map(|_| {
            let (id, partition) = balanced(&mut routing, t0);
            drain(&mut routing);
            routing.handle_result(t0, id, Target::Node(NodeId(partition)), sent(partition));
            drain(&mut routing);
            partition
        })
        .collect();
    assert_eq!(
        chosen,
        [1, 2, 1, 2],
        "partition 0 passed over while its queue is long"
    );
}

#[test]
fn when_every_queue_is_long_the_shortest_takes_the_send() {
    let (t0, mut routing) = three_partitions(config());
    for (partition, queued) in [(0, 9), (1, 5), (2, 7)] {
        queue_explicit(&mut routing, t0, partition, queued);
    }
    drain(&mut routing);
    let chosen: Vec<u32> = (0..3).map(|_| balanced(&mut routing, t0).1).collect();
    // 5 -> 6 -> 7: partition 1 until it is as long as partition 2, then partition 2's
    // turn comes first from the cursor.
    assert_eq!(chosen[0], 1, "{chosen:?}");
    assert!(!chosen.contains(&0), "the longest never: {chosen:?}");
}

#[test]
fn when_every_partition_is_stalled_the_turn_is_kept() {
    let (t0, mut routing) = three_partitions(config());
    // Every node fails its link: every lane stalls with a send waiting.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let (id, partition) = balanced(&mut routing, t0);
        drain(&mut routing);
        routing.handle_result(t0, id, Target::Node(NodeId(partition)), Attempt::NotSent);
        drain(&mut routing);
        stalled.push(partition);
    }
    stalled.sort_unstable();
    assert_eq!(stalled, [0, 1, 2]);
    let chosen: Vec<u32> = (0..6).map(|_| balanced(&mut routing, t0).1).collect();
    assert_eq!(
        chosen,
        [0, 1, 2, 0, 1, 2],
        "plain round-robin, nothing refused"
    );
}

#[test]
fn with_the_option_off_balanced_sends_keep_strict_turns() {
    let config = {
        let mut config = config();
        config.balanced_skips_stalled = false;
        config
    };
    let (t0, mut routing) = three_partitions(config);
    stall_partition_1(&mut routing, t0);
    let chosen: Vec<u32> = (0..6).map(|_| balanced(&mut routing, t0).1).collect();
    assert_eq!(chosen.iter().filter(|&&p| p == 1).count(), 2, "{chosen:?}");
}

#[test]
fn a_full_turn_with_every_other_partition_stalled_goes_to_a_stalled_one_with_room() {
    let config = {
        let mut config = config();
        config.max_pending_per_lane = 3;
        config
    };
    let (t0, mut routing) = three_partitions(config);
    // Partition 0 (the cursor's turn) is full: one send in flight, two waiting.
    queue_explicit(&mut routing, t0, 0, 3);
    // Partitions 1 and 2 wait for their primary: their nodes failed the links.
    for p in [1, 2] {
        let id = routing
            .admit(t0, send(Partitioning::PartitionId(p)))
            .unwrap();
        drain(&mut routing);
        routing.handle_result(t0, id, Target::Node(NodeId(p)), Attempt::NotSent);
    }
    drain(&mut routing);
    // A stalled queue with room holds the send until its primary is known again; the
    // full one would refuse it.
    let id = routing.admit(t0, send(Partitioning::Balanced));
    let partition = id.map(|id| routing.partition_of(id).unwrap());
    assert_eq!(partition, Ok(1));
}

#[test]
fn a_lane_whose_backoff_ended_is_balanced_to_while_its_stale_answer_is_rechecked() {
    let (t0, mut routing) = three_partitions(config());
    // Node 1 refuses a send to partition 1, and the lookup names node 1 again (an
    // election in progress): the lane backs off and remembers the stale answer.
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(1)), Attempt::Refused);
    drain(&mut routing);
    routing.handle_route(
        t0,
        &partition(1),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 0,
        },
    );
    drain(&mut routing);
    // The backoff ends and the send is written again, in flight: the lane counts as
    // healthy now, although the remembered answer lasts until a write is admitted. This is
    // a trade-off: were the remembered answer counted, a lane whose consumer polls keep it
    // busy (a served poll does not clear it) would be passed over for good; counted as
    // healthy, a few balanced sends may queue behind a retry that is refused again.
    let later = t0 + std::time::Duration::from_secs(1);
    routing.handle_timeout(later);
    let decisions = drain(&mut routing);
    assert!(
        decisions.contains(&format!("write {id} -> node1")),
        "{decisions:?}"
    );
    let chosen: Vec<u32> = (0..3)
        .map(|_| {
            let (sent_id, partition) = balanced(&mut routing, later);
            drain(&mut routing);
            if partition != 1 {
                routing.handle_result(
                    later,
                    sent_id,
                    Target::Node(NodeId(partition)),
                    sent(partition),
                );
                drain(&mut routing);
            }
            partition
        })
        .collect();
    assert!(chosen.contains(&1), "partition 1 gets its turn: {chosen:?}");
}

#[test]
fn the_stats_tell_a_stalled_partition_passed_over_from_a_long_queue() {
    let (t0, mut routing) = three_partitions(config());
    // A long queue on partition 0 only: passed over, nothing stalled.
    queue_explicit(&mut routing, t0, 0, 6);
    drain(&mut routing);
    balanced(&mut routing, t0);
    drain(&mut routing);
    let stats = routing.stats();
    assert_eq!(
        (stats.balanced_passed_over, stats.balanced_passed_stalled),
        (1, 0)
    );
    // Partition 2 (the next turn after 1) stalls: the next send that reaches its turn
    // passes it over and says so.
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(2)), Attempt::NotSent);
    drain(&mut routing);
    let (_, partition) = balanced(&mut routing, t0);
    assert_ne!(partition, 2);
    let stats = routing.stats();
    assert_eq!(stats.balanced_passed_stalled, 1, "{stats:?}");
}

/// A send of one message to `partition` of topic 1/`topic`.
fn send_to_topic(topic: u32, partition: u32) -> iggy_route_core::Request {
    let mut request = send(Partitioning::PartitionId(partition));
    if let iggy_route_core::Request::Send(send) = &mut request {
        send.topic = iggy_route_core::wire::Identifier::Numeric(topic);
    }
    request
}

#[test]
fn another_topics_stalled_lanes_do_not_steer_a_balanced_send() {
    // Topic 1/1 has a lane for partition 0 only: its partitions 1 and 2 have none.
    let t0 = origin();
    let mut routing = warmed_with(config(), t0, 3, &[(0, 0)]);
    // Topic 1/2, whose lanes follow topic 1/1's in key order: its partitions 1 and 2 stall
    // with a send waiting each (their nodes failed the links).
    let other = iggy_route_core::TopicKey {
        stream: iggy_route_core::wire::Identifier::Numeric(1),
        topic: iggy_route_core::wire::Identifier::Numeric(2),
    };
    let stalled: Vec<RequestId> = [1, 2]
        .iter()
        .map(|&p| routing.admit(t0, send_to_topic(2, p)).unwrap())
        .collect();
    routing.handle_topic(
        t0,
        &other,
        iggy_route_core::routing::TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    for (&id, p) in stalled.iter().zip([1u32, 2]) {
        let key = iggy_route_core::PartitionKey {
            topic: other.clone(),
            partition: p,
        };
        routing.handle_route(
            t0,
            &key,
            RouteAnswer::Primary {
                node: NodeId(p),
                watermark: 0,
            },
        );
        drain(&mut routing);
        routing.handle_result(t0, id, Target::Node(NodeId(p)), Attempt::NotSent);
    }
    drain(&mut routing);
    // Topic 1/1: partition 0 (the turn) has a long queue; 1 and 2 have no lane (idle).
    queue_explicit(&mut routing, t0, 0, 6);
    drain(&mut routing);
    let (_, partition) = balanced(&mut routing, t0);
    assert_eq!(partition, 1, "the next partition of its own topic, idle");
    assert_eq!(routing.stats().balanced_passed_stalled, 0);
}
