//! A backup's refusal names its view of the partition's group: the refused
//! write goes to the named node at once, a lookup confirms it in parallel, and a wrong
//! name costs one refusal more, never a ping-pong between nodes whose views lag.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, RouteAnswer, Routing, Target};
use iggy_route_core::{NodeId, RequestId};
use support::*;

/// Partition 0 led by node 0, the roster nodes 0-2, a send to partition 0 in flight to
/// node 0.
fn in_flight_to_node0(follow: bool) -> (std::time::Instant, Routing, RequestId) {
    let t0 = origin();
    let config = {
        let mut config = config();
        config.follow_refusal_view = follow;
        config
    };
    let mut routing = warmed_with(config, t0, 1, &[(0, 0)]);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    drain(&mut routing);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    (t0, routing, id)
}

#[test]
fn a_refusal_naming_the_primary_writes_there_at_once_and_looks_up_in_parallel() {
    let (t0, mut routing, id) = in_flight_to_node0(true);
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::RefusedNaming(NodeId(2)),
    );
    assert_eq!(
        drain(&mut routing),
        [
            format!("refused {id} node0"),
            "lookup 0".to_owned(),
            format!("write {id} -> node2"),
        ],
        "no round trip for the lookup before the resend"
    );
    // The lookup agrees while the write is in flight: nothing more to do.
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(2),
            watermark: 0,
        },
    );
    assert_eq!(drain(&mut routing), ["learned 0 node2"]);
    routing.handle_result(t0, id, Target::Node(NodeId(2)), sent(2));
    assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    assert_eq!(routing.stats().refusal_views_followed, 1);
    assert_eq!(routing.stats().refusals, 1);
}

#[test]
fn a_wrong_name_costs_one_refusal_then_the_lookup_decides() {
    let (t0, mut routing, id) = in_flight_to_node0(true);
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::RefusedNaming(NodeId(1)),
    );
    assert_eq!(
        drain(&mut routing).last().unwrap(),
        &format!("write {id} -> node1")
    );
    // Node 1's view lags: it names node 0 back, which already refused this round.
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(1)),
        Attempt::RefusedNaming(NodeId(0)),
    );
    let decisions = drain(&mut routing);
    assert_eq!(
        decisions,
        [format!("refused {id} node1")],
        "no write back to node 0"
    );
    // The lookup sent with the first refusal answers: node 2.
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(2),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node2".to_owned(), format!("write {id} -> node2")]
    );
    assert_eq!(routing.stats().refusal_views_followed, 1);
}

#[test]
fn a_name_outside_the_roster_or_the_refuser_itself_is_not_followed() {
    for named in [NodeId(9), NodeId(0)] {
        let (t0, mut routing, id) = in_flight_to_node0(true);
        routing.handle_result(
            t0,
            id,
            Target::Node(NodeId(0)),
            Attempt::RefusedNaming(named),
        );
        assert_eq!(
            drain(&mut routing),
            [format!("refused {id} node0"), "lookup 0".to_owned()],
            "named {named}: the usual lookup, nothing written"
        );
        assert_eq!(routing.stats().refusal_views_followed, 0);
    }
}

#[test]
fn with_the_view_ignored_a_refusal_waits_for_the_lookup_as_before() {
    let (t0, mut routing, id) = in_flight_to_node0(false);
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::RefusedNaming(NodeId(2)),
    );
    assert_eq!(
        drain(&mut routing),
        [format!("refused {id} node0"), "lookup 0".to_owned()]
    );
    assert_eq!(routing.stats().refusal_views_followed, 0);
}

#[test]
fn without_routing_commands_the_named_node_goes_before_the_roster_order() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_topic(
        t0,
        &topic(),
        iggy_route_core::routing::TopicAnswer::Found {
            partitions_count: 1,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 0"]);
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    assert_eq!(
        drain(&mut routing),
        [
            "DiscoveryByRefusal".to_owned(),
            format!("write {id} -> node0")
        ]
    );
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::RefusedNaming(NodeId(2)),
    );
    assert_eq!(
        drain(&mut routing),
        [
            format!("refused {id} node0"),
            format!("write {id} -> node2")
        ],
        "node 1, next in the roster, is skipped; no lookup without the commands"
    );
    routing.handle_result(t0, id, Target::Node(NodeId(2)), sent(2));
    let decisions = drain(&mut routing);
    assert!(
        decisions.contains(&format!("completed {id} ok")),
        "{decisions:?}"
    );
}
