//! Scenario tests of the routing layer: where a poll of one partition is read. A backup
//! serves a plain poll from its own copy, which on a real cluster lags the primary by up
//! to half a second, so a poll that follows our own acknowledged send must be read on the
//! node that admitted it (read your writes), and an auto-commit poll must reach the
//! primary, the only node whose commit lasts.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, RouteAnswer, Routing, Served, Target, TopicAnswer};
use iggy_route_core::wire::PollMessagesReply;
use iggy_route_core::{NodeId, PollFrom, Reply};
use support::*;

fn polled() -> Attempt {
    Attempt::Done(Served::from(Reply::Polled(PollMessagesReply {
        partition_id: 0,
        current_offset: 0,
        messages: Vec::new(),
    })))
}

/// A routing layer on a cluster without routing commands (the real cluster), roster nodes
/// 0, 1, 2, topic 1/1 of three partitions, whose partition 1's primary (node 2) was found
/// by a send that node 0 and node 1 refused.
fn after_a_send_admitted_by_node_2(
    routing_config: iggy_route_core::Config,
) -> (std::time::Instant, Routing) {
    let t0 = origin();
    let mut routing = Routing::new(routing_config, 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let first = routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 1"]);
    routing.handle_route(t0, &partition(1), RouteAnswer::Unsupported);
    drain(&mut routing);
    routing.handle_result(t0, first, Target::Node(NodeId(0)), Attempt::Refused);
    drain(&mut routing);
    routing.handle_result(t0, first, Target::Node(NodeId(1)), Attempt::Refused);
    drain(&mut routing);
    routing.handle_result(t0, first, Target::Node(NodeId(2)), sent(2));
    drain(&mut routing);
    assert_eq!(routing.route(&partition(1)), Some(NodeId(2)));
    (t0, routing)
}

#[test]
fn a_poll_after_our_acknowledged_send_is_read_on_the_node_that_admitted_it() {
    let (t0, mut routing) = after_a_send_admitted_by_node_2(config());
    for auto_commit in [false, true] {
        let id = routing.admit(t0, poll(Some(1), auto_commit)).unwrap();
        assert_eq!(
            drain(&mut routing),
            [format!("write {id} -> node2")],
            "auto_commit {auto_commit}: not the coordinator, a backup whose copy may lag"
        );
        routing.handle_result(t0, id, Target::Node(NodeId(2)), polled());
        assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    }
}

#[test]
fn a_poll_waits_behind_the_sends_submitted_before_it() {
    let (t0, mut routing) = after_a_send_admitted_by_node_2(config());
    let sending = routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    let reading = routing.admit(t0, poll(Some(1), false)).unwrap();
    assert_eq!(drain(&mut routing), [format!("write {sending} -> node2")]);
    routing.handle_result(t0, sending, Target::Node(NodeId(2)), sent(2));
    assert_eq!(
        drain(&mut routing),
        [
            format!("completed {sending} ok"),
            format!("write {reading} -> node2")
        ]
    );
}

#[test]
fn a_poll_answered_by_a_backup_does_not_teach_a_route() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let id = routing.admit(t0, poll(Some(2), false)).unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 2"]);
    routing.handle_route(t0, &partition(2), RouteAnswer::Unsupported);
    // No write of ours has found the primary: the roster's first node serves the poll.
    assert_eq!(drain(&mut routing)[1..], [format!("write {id} -> node0")]);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), polled());
    assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    assert_eq!(
        routing.route(&partition(2)),
        None,
        "node 0 served a poll; that does not make it the primary"
    );
    // So the next send still finds the primary by refusal, from the roster's start.
    let next = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {next} -> node0")]);
}

#[test]
fn a_poll_whose_node_is_unreachable_moves_on_and_then_backs_off_keeping_the_route() {
    let (t0, mut routing) = after_a_send_admitted_by_node_2(config());
    let id = routing.admit(t0, poll(Some(1), false)).unwrap();
    let mut expected = 2;
    for _ in 0..3 {
        assert_eq!(
            drain(&mut routing),
            [format!("write {id} -> node{expected}")]
        );
        routing.handle_result(t0, id, Target::Node(NodeId(expected)), Attempt::NotSent);
        expected = (expected + 1) % 3;
    }
    // Every node failed in this round: the lane waits before the next.
    assert_eq!(drain(&mut routing), Vec::<String>::new());
    let wake = routing.poll_timeout().unwrap();
    assert!(wake > t0);
    routing.handle_timeout(wake);
    // A failed link says nothing of the primary: the route learned by our send stays.
    assert_eq!(routing.route(&partition(1)), Some(NodeId(2)));
    assert_eq!(drain(&mut routing), [format!("write {id} -> node2")]);
    routing.handle_result(wake, id, Target::Node(NodeId(2)), polled());
    drain(&mut routing);
    // The served poll ended the round: the next send goes straight to the primary.
    let next = routing
        .admit(wake, send(Partitioning::PartitionId(1)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {next} -> node2")]);
}

#[test]
fn with_routing_commands_a_poll_is_looked_up_and_read_on_the_primary() {
    let t0 = origin();
    let mut routing = warmed(t0, 3, &[(1, 1)]);
    drain(&mut routing);
    let plain = routing.admit(t0, poll(Some(2), false)).unwrap();
    assert_eq!(drain(&mut routing), ["lookup 2"]);
    routing.handle_route(
        t0,
        &partition(2),
        RouteAnswer::Primary {
            node: NodeId(2),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        [
            "learned 2 node2".to_owned(),
            format!("write {plain} -> node2")
        ]
    );
    routing.handle_result(t0, plain, Target::Node(NodeId(2)), polled());
    drain(&mut routing);
    // The auto-commit form (104) is refused by a backup: acted on like a send's refusal.
    let committing = routing.admit(t0, poll(Some(1), true)).unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {committing} -> node1")]
    );
    routing.handle_result(t0, committing, Target::Node(NodeId(1)), Attempt::Refused);
    assert_eq!(
        drain(&mut routing),
        [format!("refused {committing} node1"), "lookup 1".to_owned()]
    );
}

#[test]
fn any_replica_reads_a_plain_poll_on_the_coordinator_but_never_an_auto_commit_one() {
    let mut spread = config();
    spread.poll_from = PollFrom::AnyReplica;
    let (t0, mut routing) = after_a_send_admitted_by_node_2(spread);
    let plain = routing.admit(t0, poll(Some(1), false)).unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {plain} -> coordinator")]
    );
    let committing = routing.admit(t0, poll(Some(1), true)).unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {committing} -> node2")]
    );
}

#[test]
fn a_poll_without_a_partition_is_read_on_the_coordinator() {
    let (t0, mut routing) = after_a_send_admitted_by_node_2(config());
    let id = routing.admit(t0, poll(None, false)).unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> coordinator")]);
}
