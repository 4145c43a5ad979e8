//! Scenario tests of the settle window after our own metadata write (`own_write_settle`),
//! from an adversarial review: a route lookup that finds nothing is asked again, the waits
//! between asks grow, and a request near its deadline ends with the answer, not a timeout.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::{Duration, Instant};

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, RouteAnswer, Routing, Served, Target, TopicAnswer};
use iggy_route_core::wire::{ErrorCode, Name};
use iggy_route_core::{AdminRequest, NodeId, Reply, Request, RequestError};
use support::*;

/// A routing layer (with routing commands) that has just created a stream through node 0.
fn after_our_write(request_timeout: Duration) -> (Instant, Routing) {
    let t0 = origin();
    let mut settings = config();
    settings.request_timeout = request_timeout;
    let mut routing = Routing::new(settings, 11, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let create = AdminRequest::CreateStream {
        name: Name::new("other").unwrap(),
    };
    let id = routing.admit(t0, Request::Admin(create)).unwrap();
    if drain(&mut routing) == ["fetch roster"] {
        // The metadata leader's lane reads the roster when it is first used.
        routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    }
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(Reply::Stream(None))),
    );
    drain(&mut routing);
    (t0, routing)
}

fn not_found() -> RequestError {
    RequestError::Server {
        code: ErrorCode::PartitionNotFound,
    }
}

#[test]
fn a_lookup_that_finds_no_partition_soon_after_our_write_is_asked_again() {
    let (t0, mut routing) = after_our_write(Duration::from_secs(30));
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(3)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let found = TopicAnswer::Found {
        partitions_count: 5,
    };
    routing.handle_topic(t0, &topic(), found);
    assert_eq!(drain(&mut routing), ["lookup 3"]);
    routing.handle_route(t0, &partition(3), RouteAnswer::Failed(not_found()));
    assert_eq!(drain(&mut routing), Vec::<String>::new(), "{id} waits");
    let again = routing.poll_timeout().unwrap();
    routing.handle_timeout(again);
    assert_eq!(drain(&mut routing), ["lookup 3"]);
    routing.handle_route(
        again,
        &partition(3),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 0,
        },
    );
    assert_eq!(drain(&mut routing)[1..], [format!("write {id} -> node1")]);
}

#[test]
fn the_asks_in_doubt_come_further_and_further_apart() {
    let (t0, mut routing) = after_our_write(Duration::from_secs(30));
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(7)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let mut now = t0;
    let mut waits = Vec::new();
    let mut reads = 0;
    loop {
        let short = TopicAnswer::Found {
            partitions_count: 5,
        };
        routing.handle_topic(now, &topic(), short);
        reads += 1;
        if drain(&mut routing) == [format!("completed {id} err")] {
            break;
        }
        let next = routing.poll_timeout().unwrap();
        waits.push(next - now);
        now = next;
        routing.handle_timeout(now);
        assert_eq!(drain(&mut routing), ["fetch topic"]);
        assert!(reads < 100, "unbounded re-reads: {waits:?}");
    }
    assert!(
        now >= t0 + Duration::from_secs(1),
        "believed after the window"
    );
    assert!(reads <= 25, "{reads} reads in the window: {waits:?}");
    assert!(waits.last() > waits.first(), "{waits:?}");
}

#[test]
fn a_request_whose_deadline_comes_first_ends_with_the_answer_not_a_timeout() {
    let (t0, mut routing) = after_our_write(Duration::from_millis(150));
    let later = t0 + Duration::from_millis(140);
    let id = routing
        .admit(later, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    // 280 ms after the write the next ask would come 70-140 ms later, past the deadline
    // (290 ms).
    routing.handle_topic(
        t0 + Duration::from_millis(280),
        &topic(),
        TopicAnswer::NotFound,
    );
    let decisions = drain(&mut routing);
    assert_eq!(decisions, [format!("completed {id} err")]);
    assert_eq!(routing.stats().timeouts, 0, "TopicNotFound, not TimedOut");
}
