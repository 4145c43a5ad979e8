//! Scenario tests of the routing layer against servers without the routing commands (the
//! real cluster of `tests/real-cluster`, see docs/real-cluster.md): the commands are probed once per client, and
//! a primary found by refusal stays known across metadata writes.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, RouteAnswer, Routing, Target, TopicAnswer};
use iggy_route_core::{Event, NodeId};
use support::*;

/// A routing layer that knows the roster (nodes 0, 1, 2) and that topic 1/1 has three
/// partitions, with nothing learned about the routing commands yet.
fn fresh() -> (std::time::Instant, Routing) {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    found(t0, &mut routing);
    (t0, routing)
}

fn found(t0: std::time::Instant, routing: &mut Routing) {
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
}

#[test]
fn the_routing_commands_are_probed_by_one_lookup_not_one_per_partition() {
    let (t0, mut routing) = fresh();
    for p in 1..3 {
        routing
            .admit(t0, send(Partitioning::PartitionId(p)))
            .unwrap();
    }
    assert_eq!(
        drain(&mut routing),
        ["lookup 0"],
        "one probe; partitions 1 and 2 wait for its answer"
    );
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    let decisions = drain(&mut routing);
    assert!(
        decisions.iter().all(|d| !d.starts_with("lookup")),
        "{decisions:?}"
    );
    assert_eq!(
        decisions.iter().filter(|d| d.starts_with("write")).count(),
        3,
        "every partition goes on by discovery at once: {decisions:?}"
    );
    assert!(decisions.contains(&format!("{:?}", Event::DiscoveryByRefusal)));
}

#[test]
fn when_the_probe_finds_the_commands_every_partition_looks_its_route_up() {
    let (t0, mut routing) = fresh();
    routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["lookup 0"]);
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(2),
            watermark: 0,
        },
    );
    let decisions = drain(&mut routing);
    assert!(decisions.contains(&"lookup 1".to_owned()), "{decisions:?}");
    assert!(
        decisions.iter().any(|d| d.ends_with("-> node2")),
        "{decisions:?}"
    );
}

#[test]
fn a_primary_found_by_refusal_stays_known_after_a_metadata_write() {
    let (t0, mut routing) = fresh();
    drain(&mut routing);
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    drain(&mut routing);
    // Partition 0's first send (the first request, `fresh`'s): node 0 refuses, node 1
    // admits.
    let first = iggy_route_core::RequestId(1);
    routing.handle_result(t0, first, Target::Node(NodeId(0)), Attempt::Refused);
    assert_eq!(drain(&mut routing)[1], format!("write {first} -> node1"));
    routing.handle_result(t0, first, Target::Node(NodeId(1)), sent(1));
    drain(&mut routing);
    // Our own metadata write moves the watermark: every learned route is stale now.
    routing.handle_watermark(t0, 7);
    for round in 0..3 {
        let id = routing
            .admit(t0, send(Partitioning::PartitionId(0)))
            .unwrap();
        if round == 0 {
            // The partition count is stale too, and read again (a read, not a refusal).
            assert_eq!(drain(&mut routing), ["fetch topic"]);
            found(t0, &mut routing);
        }
        assert_eq!(
            drain(&mut routing),
            [format!("write {id} -> node1")],
            "the node that admitted last is tried first, and its admission makes the route \
             fresh again: no refusal after the write"
        );
        routing.handle_result(t0, id, Target::Node(NodeId(1)), sent(1));
        assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    }
    assert_eq!(routing.stats().refusals, 1);
}

/// A topic another client has just created: a follower answers "absent" until it applies
/// the create (up to half a second on the real cluster). The send waits for it, and a
/// topic that stays absent fails once the request is `own_write_settle` old.
#[test]
fn a_topic_a_follower_says_is_absent_is_read_again_before_a_send_fails() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let fresh = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(t0, &topic(), TopicAnswer::AbsentOnFollower);
    assert!(
        drain(&mut routing).is_empty(),
        "not failed: read again later"
    );
    let again = routing.poll_timeout().unwrap();
    assert!(again > t0 && again < t0 + config().own_write_settle);
    routing.handle_timeout(again);
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    found(again, &mut routing);
    let decisions = drain(&mut routing);
    assert!(
        decisions
            .iter()
            .all(|d| !d.contains(&format!("completed {fresh}"))),
        "the send goes on once the topic is found: {decisions:?}"
    );

    // A topic that is not there: the follower keeps saying so, and the send fails (the
    // topic is not found) once it is as old as the settle window, well inside its deadline.
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let missing = routing.admit(t0, send(Partitioning::Balanced)).unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let mut now = t0;
    let outcome = loop {
        routing.handle_topic(now, &topic(), TopicAnswer::AbsentOnFollower);
        let decisions = drain(&mut routing);
        if let Some(done) = decisions.iter().find(|d| d.starts_with("completed")) {
            break done.clone();
        }
        now = routing.poll_timeout().unwrap();
        assert!(
            now < t0 + config().request_timeout,
            "bounded by the settle window"
        );
        routing.handle_timeout(now);
        assert_eq!(drain(&mut routing), ["fetch topic"]);
    };
    assert!(
        outcome.starts_with(&format!("completed {missing} err")),
        "{outcome}"
    );
    assert!(
        now >= t0 + config().own_write_settle / 2,
        "asked again for a while first"
    );

    // The metadata leader's "absent" is final at once.
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let missing = routing.admit(t0, send(Partitioning::Balanced)).unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(t0, &topic(), TopicAnswer::NotFound);
    let decisions = drain(&mut routing);
    assert!(
        decisions[0].starts_with(&format!("completed {missing} err")),
        "{decisions:?}"
    );
}

/// A send whose deadline comes before the settle window is over: the follower says the
/// topic is absent, the read again is still unanswered at the deadline. The send was never
/// written, so it ends with the absence the cluster reported, not `TimedOut` (which says
/// that a write may have been stored). Likewise a partition beyond the count read.
#[test]
fn a_send_never_written_ends_at_its_deadline_with_the_answer_it_waited_to_doubt() {
    use iggy_route_core::RequestError;
    use iggy_route_core::routing::Decision;

    let t0 = origin();
    let mut short = config();
    short.request_timeout = short.own_write_settle / 4;
    for (partitioning, answer) in [
        (Partitioning::Balanced, TopicAnswer::AbsentOnFollower),
        (
            Partitioning::PartitionId(7),
            TopicAnswer::Found {
                partitions_count: 3,
            },
        ),
    ] {
        let mut routing = Routing::new(short.clone(), 3, t0);
        routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
        let id = routing.admit(t0, send(partitioning.clone())).unwrap();
        assert_eq!(drain(&mut routing), ["fetch topic"]);
        routing.handle_topic(t0, &topic(), answer);
        assert!(drain(&mut routing).is_empty(), "read again first");
        let (now, outcome) = loop {
            let now = routing.poll_timeout().unwrap();
            assert!(now <= t0 + short.request_timeout, "bounded by the deadline");
            routing.handle_timeout(now);
            // The read again goes out and is never answered.
            let mut completed = None;
            while let Some(decision) = routing.poll_decision() {
                if let Decision::Completed { request, outcome } = decision {
                    assert_eq!(request, id);
                    completed = Some(outcome);
                }
            }
            if let Some(outcome) = completed {
                break (now, outcome);
            }
        };
        assert_eq!(now, t0 + short.request_timeout, "at its deadline");
        match (partitioning, outcome) {
            (Partitioning::Balanced, Err(RequestError::TopicNotFound { .. })) => {}
            (
                Partitioning::PartitionId(7),
                Err(RequestError::PartitionOutOfRange {
                    partition: 7,
                    count: 3,
                }),
            ) => {}
            (partitioning, outcome) => panic!("{partitioning:?}: {outcome:?}"),
        }
    }
}
