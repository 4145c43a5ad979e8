//! Scenario tests of the routing layer, part 2: deadlines, unknown outcomes, the metadata
//! watermark, metadata commands, shutdown and time. Typed inputs at exact instants, exact
//! decisions out.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, Decision, RouteAnswer, Routing, Target, TopicAnswer};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{
    DeliveryGuarantee, NodeId, Output, Request, RequestError, Router, SendRequest, SubmitError,
};
use support::*;

// --- deadlines and unknown outcomes -----------------------------------------------------

#[test]
fn deadline_completes_a_waiting_request_with_timed_out() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    assert_eq!(routing.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    routing.handle_timeout(t0 + Duration::from_secs(30));
    let decisions: Vec<Decision> = std::iter::from_fn(|| routing.poll_decision()).collect();
    assert!(matches!(
        &decisions[..],
        [Decision::Completed { request, outcome: Err(RequestError::TimedOut { .. }) }] if *request == id
    ));
    assert_eq!(routing.pending_count(), 0);
}

#[test]
fn a_timed_out_request_in_flight_holds_its_lane_until_the_attempt_ends() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let a = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    let deadline = t0 + Duration::from_secs(30);
    let b = routing
        .admit(
            deadline - Duration::from_secs(1),
            send(Partitioning::PartitionId(0)),
        )
        .unwrap();
    drain(&mut routing);
    routing.handle_timeout(deadline);
    assert_eq!(
        drain(&mut routing),
        [format!("completed {a} err")],
        "b must not overtake a"
    );
    routing.handle_result(deadline, a, Target::Node(NodeId(0)), sent(0));
    assert_eq!(
        drain(&mut routing),
        [format!("write {b} -> node0")],
        "a's late answer is not reported twice"
    );
}

#[test]
fn link_lost_with_a_send_in_flight_completes_outcome_unknown() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Unknown);
    let decisions: Vec<Decision> = std::iter::from_fn(|| routing.poll_decision()).collect();
    assert!(matches!(
        &decisions[..],
        [Decision::Completed {
            outcome: Err(RequestError::OutcomeUnknown {
                node: Some(NodeId(0))
            }),
            ..
        }]
    ));
}

#[test]
fn at_least_once_writes_a_send_again_after_its_link_was_lost() {
    let t0 = origin();
    let mut config = config();
    config.delivery = DeliveryGuarantee::AtLeastOnce;
    let mut routing = Routing::new(config, 7, t0);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 1,
        },
    );
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(0),
            watermark: 0,
        },
    );
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Unknown);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
}

// --- watermark ---------------------------------------------------------------------------

#[test]
fn a_moved_watermark_makes_routes_and_partition_counts_stale() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    routing.handle_watermark(t0, 10);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 2,
        },
    );
    assert_eq!(
        drain(&mut routing),
        [
            "PartitionsChanged { topic: TopicKey { stream: Numeric(1), topic: Numeric(1) }, \
             from: 1, to: 2 }",
            "lookup 0"
        ]
    );
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 10,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node1".to_owned(), format!("write {id} -> node1")]
    );
}

/// A partition's node answers "not found" for a topic read over `own_write_settle` ago: the
/// answer stands, and the count is read again for the next request.
#[test]
fn partition_not_found_from_the_server_invalidates_the_partition_count() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    let error = RequestError::Server {
        code: iggy_route_core::wire::ErrorCode::PartitionNotFound,
    };
    let later = t0 + Duration::from_millis(1_500);
    routing.handle_result(later, id, Target::Node(NodeId(0)), Attempt::Failed(error));
    drain(&mut routing);
    routing
        .admit(later, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
}

/// The same answer moments after the topic was read (another client's new topic, which
/// that node has not applied yet): nothing was admitted, and the same node is asked again
/// after a paced wait instead of the request failing.
#[test]
fn partition_not_found_moments_after_the_topic_was_read_is_asked_again() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    let error = RequestError::Server {
        code: iggy_route_core::wire::ErrorCode::ResourceNotFound,
    };
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Failed(error));
    assert!(
        drain(&mut routing).is_empty(),
        "nothing completes, nothing is read"
    );
    let retry = routing.poll_timeout().expect("a paced retry");
    routing.handle_timeout(retry);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
}

// --- admin -------------------------------------------------------------------------------

#[test]
fn metadata_commands_go_to_the_roster_leader_and_follow_it_after_a_refusal() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    let create = Request::Admin(iggy_route_core::AdminRequest::CreateStream {
        name: iggy_route_core::wire::Name::new("s").unwrap(),
    });
    let id = routing.admit(t0, create).unwrap();
    assert_eq!(drain(&mut routing), ["fetch roster"]);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1)], Some(NodeId(0)));
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    assert_eq!(
        drain(&mut routing),
        [format!("refused {id} node0"), "fetch roster".to_owned()]
    );
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1)], Some(NodeId(1)));
    assert_eq!(drain(&mut routing), [format!("write {id} -> node1")]);
}

#[test]
fn shutdown_fails_everything_pending_and_refuses_new_requests() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.shutdown(t0);
    assert_eq!(drain(&mut routing), ["completed req1 err"]);
    assert_eq!(
        routing
            .admit(t0, send(Partitioning::PartitionId(0)))
            .unwrap_err(),
        SubmitError::Closed
    );
    assert_eq!(routing.poll_timeout(), None);
}

#[test]
fn time_going_backwards_is_taken_as_the_last_instant() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0 + Duration::from_secs(5));
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    assert_eq!(routing.poll_timeout(), Some(t0 + Duration::from_secs(35)));
}

/// The shape of a request is checked where the request is taken, by the router: the
/// routing layer only ever sees the facts of an accepted one.
#[test]
fn oversized_messages_and_frames_are_refused_before_anything_is_sent() {
    let t0 = origin();
    let mut config = config();
    config.max_frame_size = 4096;
    let mut router = Router::new(config, 1, t0);
    let big = |len: usize| {
        Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::Balanced,
            messages: vec![Message {
                payload: Bytes::from(vec![7u8; len]),
                ..Message::default()
            }],
        })
    };
    assert!(matches!(
        router.submit(t0, big(8192)).unwrap_err(),
        SubmitError::FrameTooLarge { max: 4096, .. }
    ));
    let mut roomy = Router::new(
        {
            let mut config = self::config();
            config.max_frame_size = u32::MAX;
            config
        },
        1,
        t0,
    );
    assert!(matches!(
        roomy.submit(t0, big(64_000_001)).unwrap_err(),
        SubmitError::Invalid(iggy_route_core::wire::WireError::InvalidLength {
            field: "payload",
            ..
        })
    ));
    // A header block is sent as given (the server never reads it), bounded only by the
    // frame that carries it.
    let headers_of = |len: usize| {
        Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::Balanced,
            messages: vec![Message {
                user_headers: Bytes::from(vec![9; len]),
                ..Message::default()
            }],
        })
    };
    assert!(matches!(
        router.submit(t0, headers_of(8192)).unwrap_err(),
        SubmitError::FrameTooLarge { max: 4096, .. }
    ));
    assert_eq!(router.pending_count() + roomy.pending_count(), 0);
    let transmits = std::iter::from_fn(|| router.poll_output())
        .chain(std::iter::from_fn(|| roomy.poll_output()))
        .filter(|output| matches!(output, Output::Transmit { .. }))
        .count();
    assert_eq!(transmits, 0, "nothing was sent");
}
