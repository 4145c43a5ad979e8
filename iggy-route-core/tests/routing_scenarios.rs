//! Scenario tests of the routing layer, part 1: submitting (topic reads, partition choice,
//! bounds) and refusals (lookups, backoff, discovery by refusal). Typed inputs at exact
//! instants, exact decisions out.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, Decision, RouteAnswer, Routing, Target, TopicAnswer};
use iggy_route_core::wire::{Identifier, Message, WireError};
use iggy_route_core::{
    NodeId, PollRequest, Request, RequestError, RequestId, SendRequest, SubmitError,
};
use support::*;

// --- submit -----------------------------------------------------------------------------

#[test]
fn first_send_reads_the_topic_then_looks_the_route_up_then_writes() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(1)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 2,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 1"]);
    routing.handle_route(
        t0,
        &partition(1),
        RouteAnswer::Primary {
            node: NodeId(2),
            watermark: 5,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 1 node2", "write req1 -> node2"]
    );
    routing.handle_result(t0, id, Target::Node(NodeId(2)), sent(2));
    assert_eq!(drain(&mut routing), ["completed req1 ok"]);
    assert_eq!(
        routing.poll_timeout(),
        None,
        "nothing pending, nothing scheduled"
    );
}

#[test]
fn bug_report_scenario_alternating_sends_write_once_each_with_no_lookup() {
    let t0 = origin();
    let mut routing = warmed(t0, 2, &[(0, 0), (1, 2)]);
    let lookups = routing.stats().lookups;
    for round in 0..4u32 {
        let p = round % 2;
        let node = if p == 0 { 0 } else { 2 };
        let now = t0 + Duration::from_millis(u64::from(round));
        let id = routing
            .admit(now, send(Partitioning::PartitionId(p)))
            .unwrap();
        assert_eq!(drain(&mut routing), [format!("write {id} -> node{node}")]);
        routing.handle_result(now, id, Target::Node(NodeId(node)), sent(node));
        assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    }
    assert_eq!(routing.stats().lookups, lookups, "no lookup after warm-up");
    assert_eq!(routing.stats().refusals, 0);
}

#[test]
fn sends_of_one_partition_are_released_one_at_a_time_in_order() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 1)]);
    let a = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    let b = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {a} -> node1")]);
    routing.handle_result(t0, a, Target::Node(NodeId(1)), sent(1));
    assert_eq!(
        drain(&mut routing),
        [format!("completed {a} ok"), format!("write {b} -> node1")]
    );
}

#[test]
fn partition_out_of_range_fails_before_anything_is_written() {
    let t0 = origin();
    let mut routing = warmed(t0, 2, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    // The cached count may be out of date (another client may have added partitions), so
    // the topic is read again before the request is refused.
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 2,
        },
    );
    // A count read for it and still short may come from a node that has not applied
    // another client's `CREATE_PARTITIONS`: read again, paced, for up to
    // `own_write_settle` from the submit, nothing written meanwhile.
    let decisions = loop {
        let decisions: Vec<Decision> = std::iter::from_fn(|| routing.poll_decision()).collect();
        if !decisions.is_empty() {
            break decisions;
        }
        let now = routing.poll_timeout().expect("a read again is timed");
        assert!(now.duration_since(t0) < std::time::Duration::from_secs(2));
        routing.handle_timeout(now);
        assert_eq!(drain(&mut routing), ["fetch topic"]);
        routing.handle_topic(
            now,
            &topic(),
            TopicAnswer::Found {
                partitions_count: 2,
            },
        );
    };
    assert!(matches!(
        &decisions[..],
        [Decision::Completed { request, outcome: Err(RequestError::PartitionOutOfRange { partition: 2, count: 2 }) }] if *request == id
    ));
}

#[test]
fn a_partition_added_by_another_client_is_found_by_reading_the_topic_again() {
    let t0 = origin();
    let mut routing = warmed(t0, 2, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    // The count read for it moved: that is announced, even though the cached one was
    // forgotten for the read.
    assert_eq!(
        drain(&mut routing),
        [
            "PartitionsChanged { topic: TopicKey { stream: Numeric(1), topic: Numeric(1) }, \
             from: 2, to: 3 }",
            "lookup 2"
        ]
    );
    routing.handle_route(
        t0,
        &partition(2),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 2 node1".to_owned(), format!("write {id} -> node1")]
    );
}

#[test]
fn a_topic_read_that_predates_our_own_metadata_write_is_read_again() {
    // Found by the simulation (seed 824): a GET_TOPIC answer sent before our own
    // CreatePartitions committed arrived after it, and was taken as current.
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_watermark(t0, 5); // our create-partitions reply
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 2,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["fetch topic"],
        "the stale answer is not used"
    );
    routing.handle_topic(
        t0,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 2"]);
    assert_eq!(routing.partition_of(id), Some(2));
}

#[test]
fn unknown_topic_fails_every_waiting_request_with_topic_not_found() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 1, t0);
    routing.admit(t0, send(Partitioning::Balanced)).unwrap();
    routing.admit(t0, send(Partitioning::Balanced)).unwrap();
    assert_eq!(
        drain(&mut routing),
        ["fetch topic"],
        "one read for both (single flight)"
    );
    routing.handle_topic(t0, &topic(), TopicAnswer::NotFound);
    assert_eq!(
        drain(&mut routing),
        ["completed req1 err", "completed req2 err"]
    );
}

#[test]
fn messages_key_and_balanced_resolve_as_the_sdk_does() {
    let t0 = origin();
    let mut routing = warmed(t0, 3, &[(0, 0), (1, 0), (2, 0)]);
    let key = Partitioning::MessagesKey(Bytes::from_static(b"order-1"));
    let id = routing.admit(t0, send(key)).unwrap();
    drain(&mut routing);
    // xxhash32("order-1") = 0xc209e3e8; 0xc209e3e8 % 3 = 1.
    assert_eq!(routing.partition_of(id), Some(0xc209_e3e8 % 3));
    let ids: Vec<RequestId> = (0..3)
        .map(|_| routing.admit(t0, send(Partitioning::Balanced)).unwrap())
        .collect();
    let chosen: Vec<Option<u32>> = ids.iter().map(|id| routing.partition_of(*id)).collect();
    assert_eq!(chosen, [Some(0), Some(1), Some(2)]);
}

#[test]
fn queue_full_is_reported_at_submit() {
    let t0 = origin();
    let mut config = config();
    config.max_pending_per_lane = 2;
    let mut routing = Routing::new(config, 1, t0);
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(
        routing
            .admit(t0, send(Partitioning::PartitionId(0)))
            .unwrap_err(),
        SubmitError::QueueFull { limit: 2 }
    );
}

#[test]
fn empty_batch_is_refused_at_submit() {
    let t0 = origin();
    let mut router = iggy_route_core::Router::new(config(), 1, t0);
    let request = Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitioning: Partitioning::Balanced,
        messages: Vec::new(),
    });
    assert_eq!(
        router.submit(t0, request).unwrap_err(),
        SubmitError::EmptyBatch
    );
}

/// A poll of no messages was sent and answered with an empty poll; the SDK refuses it.
#[test]
fn a_poll_of_no_messages_is_refused_at_submit() {
    let t0 = origin();
    let mut router = iggy_route_core::Router::new(config(), 1, t0);
    let poll = |count| match poll(Some(0), false) {
        Request::Poll(poll) => Request::Poll(PollRequest { count, ..poll }),
        other => other,
    };
    assert_eq!(
        router.submit(t0, poll(0)).unwrap_err(),
        SubmitError::EmptyPoll
    );
    assert!(router.submit(t0, poll(1)).is_ok());
}

/// A frame holds its origin timestamp as a 32-bit delta from the batch's smallest: a batch
/// spanning more (replayed old messages beside new ones) was once sent with the deltas
/// clamped, and acknowledged, so other times than those given were stored.
#[test]
fn a_batch_whose_origin_timestamps_span_more_than_a_delta_holds_is_refused() {
    let t0 = origin();
    let mut router = iggy_route_core::Router::new(config(), 1, t0);
    let batch = |stamps: &[u64]| {
        Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::Balanced,
            messages: stamps
                .iter()
                .map(|&origin_timestamp| Message {
                    origin_timestamp,
                    ..Message::new("m")
                })
                .collect(),
        })
    };
    let widest = u64::from(u32::MAX);
    for stamps in [[1, widest + 2], [5, u64::MAX]] {
        assert_eq!(
            router.submit(t0, batch(&stamps)).unwrap_err(),
            SubmitError::Invalid(WireError::InvalidValue {
                field: iggy_route_core::ORIGIN_TIMESTAMP_SPAN,
                value: stamps[1] - stamps[0],
            })
        );
    }
    assert!(router.submit(t0, batch(&[1, widest + 1])).is_ok());
}

/// A user-header block that is no list of headers (sealed by an encryptor, or the
/// program's own bytes) was refused at submit; the server stores any block unread, and the
/// SDK's encryption sends exactly such blocks. A block over 100,000 bytes (the SDK message
/// builder's limit, which its `send_messages` does not check again, nor does the server)
/// was refused too; only the frame bounds it.
#[test]
fn a_header_block_is_sent_as_given_and_only_its_frame_bounds_it() {
    let t0 = origin();
    let mut router = iggy_route_core::Router::new(config(), 1, t0);
    let with_headers = |block: Vec<u8>| {
        Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::Balanced,
            messages: vec![Message {
                user_headers: block.into(),
                ..Message::new("m")
            }],
        })
    };
    for block in [
        vec![0xff, 0, 1, 2],
        vec![1, 2, 3],
        vec![0; 100_000],
        vec![0; 100_001],
        vec![0; 200_000],
    ] {
        assert!(router.submit(t0, with_headers(block)).is_ok());
    }
    let max = config().max_frame_size as usize;
    assert!(matches!(
        router.submit(t0, with_headers(vec![0; max])).unwrap_err(),
        SubmitError::FrameTooLarge { .. }
    ));
}

/// A messages key is hashed to a partition and never sent, so its length is no limit at
/// submit: the SDK's `send_messages` hashes an empty key, or one longer than its own
/// constructor allows, to a partition and sends it. Both were refused here.
#[test]
fn a_messages_key_of_any_length_is_accepted_and_only_hashed() {
    let t0 = origin();
    let mut router = iggy_route_core::Router::new(config(), 1, t0);
    for key in [Vec::new(), vec![7; 300], vec![1; 70_000]] {
        let request = Request::Send(SendRequest {
            stream: Identifier::Numeric(1),
            topic: Identifier::Numeric(1),
            partitioning: Partitioning::MessagesKey(key.into()),
            messages: vec![Message::new("m")],
        });
        assert!(router.submit(t0, request).is_ok());
    }
    assert_eq!(
        iggy_route_core::partitioning::resolve_partition(&[], 3),
        Some(0x02cc_5d05 % 3),
        "the empty key's hash, as the SDK's"
    );
}

// --- refusal ----------------------------------------------------------------------------

#[test]
fn refusal_drops_the_route_and_looks_up_at_once_never_replaying_on_the_refuser() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    assert_eq!(
        drain(&mut routing),
        [format!("refused {id} node0"), "lookup 0".to_owned()]
    );
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node1".to_owned(), format!("write {id} -> node1")]
    );
    assert_eq!(routing.stats().refusals, 1);
}

#[test]
fn lookup_naming_the_refuser_backs_off_with_jitter_then_writes_there() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    drain(&mut routing);
    routing.handle_route(
        t0,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(0),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node0"],
        "no write during the backoff"
    );
    let wake = routing.poll_timeout().unwrap();
    let wait = wake - t0;
    assert!(
        wait >= Duration::from_micros(2500) && wait <= Duration::from_millis(5),
        "{wait:?}"
    );
    routing.handle_timeout(wake - Duration::from_micros(1));
    assert!(
        drain(&mut routing).is_empty(),
        "not before the backoff ends"
    );
    routing.handle_timeout(wake);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
}

#[test]
fn repeated_elections_double_the_backoff_up_to_its_cap() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    let mut now = t0;
    let mut waits = Vec::new();
    for _ in 0..10 {
        routing.handle_result(now, id, Target::Node(NodeId(0)), Attempt::Refused);
        drain(&mut routing);
        routing.handle_route(
            now,
            &partition(0),
            RouteAnswer::Primary {
                node: NodeId(0),
                watermark: 0,
            },
        );
        drain(&mut routing);
        let refused_at = now;
        // While the writes back off, the route is asked for again every 5 ms; the same
        // stale answer does not extend the backoff.
        let mut rechecks = 0u32;
        loop {
            now = routing.poll_timeout().unwrap();
            routing.handle_timeout(now);
            let decisions = drain(&mut routing);
            if decisions == ["lookup 0"] {
                rechecks += 1;
                routing.handle_route(
                    now,
                    &partition(0),
                    RouteAnswer::Primary {
                        node: NodeId(0),
                        watermark: 0,
                    },
                );
                assert_eq!(drain(&mut routing), ["learned 0 node0"]);
                continue;
            }
            assert_eq!(decisions, [format!("write {id} -> node0")]);
            break;
        }
        let wait = now - refused_at;
        let most = u32::try_from(wait.as_millis() / 5).unwrap();
        assert!(rechecks <= most, "{rechecks} rechecks in {wait:?}");
        waits.push(wait);
    }
    for (k, wait) in waits.iter().enumerate() {
        let nominal =
            (Duration::from_millis(5) * 2u32.pow(k as u32)).min(Duration::from_millis(500));
        assert!(
            *wait >= nominal / 2 && *wait <= nominal,
            "wait {k} of {waits:?}"
        );
    }
}

#[test]
fn unreachable_primary_is_treated_like_a_refusal_without_counting_one() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 2)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(2)), Attempt::NotSent);
    assert_eq!(drain(&mut routing), ["lookup 0"]);
    assert_eq!(routing.stats().refusals, 0);
}

// --- discovery by refusal ---------------------------------------------------------------

#[test]
fn without_routing_commands_nodes_are_tried_in_roster_order_and_the_admitting_one_kept() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
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
    assert_eq!(drain(&mut routing), ["fetch topic", "lookup 0"]);
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    assert_eq!(drain(&mut routing), ["DiscoveryByRefusal", "fetch roster"]);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    assert_eq!(
        drain(&mut routing),
        [
            format!("refused {id} node0"),
            format!("write {id} -> node1")
        ]
    );
    routing.handle_result(t0, id, Target::Node(NodeId(1)), sent(1));
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node1".to_owned(), format!("completed {id} ok")]
    );
    let next = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {next} -> node1")],
        "the admitting node is kept"
    );
}

#[test]
fn discovery_round_where_every_node_refuses_backs_off_then_starts_over() {
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
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
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1)], Some(NodeId(0)));
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    routing.handle_result(t0, id, Target::Node(NodeId(1)), Attempt::Refused);
    let decisions = drain(&mut routing);
    assert_eq!(
        decisions.iter().filter(|d| d.starts_with("write")).count(),
        1,
        "{decisions:?}"
    );
    let wake = routing.poll_timeout().unwrap();
    assert!(wake > t0 && wake <= t0 + Duration::from_millis(5));
    routing.handle_timeout(wake);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node0")]);
}

#[test]
fn a_refusal_before_discovery_began_still_bars_that_node_after_another_fails() {
    // Found by the simulation (seeds 13448, 25287, 36527): node 0 refuses under a looked-up
    // route, the next lookup says the cluster has no routing commands, and the first
    // discovery candidate cannot be reached. The refusal by node 0 must still count.
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, id, Target::Node(NodeId(0)), Attempt::Refused);
    routing.handle_route(t0, &partition(0), RouteAnswer::Unsupported);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    let decisions = drain(&mut routing);
    assert_eq!(
        decisions.last().unwrap(),
        &format!("write {id} -> node1"),
        "{decisions:?}"
    );
    routing.handle_result(t0, id, Target::Node(NodeId(1)), Attempt::NotSent);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node2")]);
}

/// A lookup that keeps naming a node that cannot be reached (silent: paused, or cut off
/// with nobody elected) was asked again every 5 ms for as long as it lasted: dozens of
/// lookups a second per partition. The wait now grows with the silence, up to
/// `route_backoff_max`.
#[test]
fn rechecks_of_the_same_stale_answer_slow_down_to_the_backoff_cap() {
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    let stale = RouteAnswer::Primary {
        node: NodeId(0),
        watermark: 0,
    };
    let mut now = t0;
    let mut lookups = 0u32;
    let mut gaps = Vec::new();
    let mut last_lookup = t0;
    while now < t0 + Duration::from_secs(10) {
        routing.handle_result(now, id, Target::Node(NodeId(0)), Attempt::NotSent);
        drain(&mut routing);
        routing.handle_route(now, &partition(0), stale_answer(&stale));
        drain(&mut routing);
        loop {
            now = routing.poll_timeout().unwrap();
            routing.handle_timeout(now);
            let decisions = drain(&mut routing);
            if decisions == ["lookup 0"] {
                lookups += 1;
                gaps.push(now - last_lookup);
                last_lookup = now;
                routing.handle_route(now, &partition(0), stale_answer(&stale));
                drain(&mut routing);
                continue;
            }
            assert_eq!(decisions, [format!("write {id} -> node0")]);
            break;
        }
    }
    assert!(lookups <= 40, "{lookups} rechecks in 10 s: {gaps:?}");
    assert!(
        gaps.iter()
            .rev()
            .take(5)
            .all(|gap| *gap >= Duration::from_millis(100)),
        "the latest rechecks still come fast: {gaps:?}"
    );
}

#[test]
fn a_new_primary_named_while_the_lane_backs_off_from_a_stale_one_is_written_to_at_once() {
    // The lookup keeps naming node 0, which keeps refusing (a stale answer for a while);
    // then the answer becomes node 1. The send goes to node 1 with the answer that names
    // it, not when the (by then long) backoff ends.
    let t0 = origin();
    let mut routing = warmed(t0, 1, &[(0, 0)]);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    drain(&mut routing);
    let stale = RouteAnswer::Primary {
        node: NodeId(0),
        watermark: 0,
    };
    let mut now = t0;
    let mut lookups = 0u32;
    // Five refusals in a row grow the backoff to 40-80 ms.
    for _ in 0..5 {
        routing.handle_result(now, id, Target::Node(NodeId(0)), Attempt::Refused);
        drain(&mut routing);
        routing.handle_route(now, &partition(0), stale_answer(&stale));
        drain(&mut routing);
        loop {
            now = routing.poll_timeout().unwrap();
            routing.handle_timeout(now);
            let decisions = drain(&mut routing);
            if decisions == ["lookup 0"] {
                lookups += 1;
                routing.handle_route(now, &partition(0), stale_answer(&stale));
                drain(&mut routing);
                continue;
            }
            assert_eq!(decisions, [format!("write {id} -> node0")]);
            break;
        }
    }
    routing.handle_result(now, id, Target::Node(NodeId(0)), Attempt::Refused);
    drain(&mut routing);
    routing.handle_route(now, &partition(0), stale_answer(&stale));
    drain(&mut routing);
    let backoff_from = now;
    // Within the backoff, a recheck comes after 5 ms (a refusing node is in an election,
    // not silent); this time the answer is the truth.
    now = routing.poll_timeout().unwrap();
    assert_eq!(now - backoff_from, Duration::from_millis(5));
    routing.handle_timeout(now);
    assert_eq!(drain(&mut routing), ["lookup 0"]);
    routing.handle_route(
        now,
        &partition(0),
        RouteAnswer::Primary {
            node: NodeId(1),
            watermark: 0,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["learned 0 node1".to_owned(), format!("write {id} -> node1")],
        "written with the answer that names the new primary"
    );
    routing.handle_result(now, id, Target::Node(NodeId(1)), sent(1));
    assert_eq!(drain(&mut routing), [format!("completed {id} ok")]);
    assert!(lookups > 0, "rechecks ran during the longer backoffs");
}

fn stale_answer(answer: &RouteAnswer) -> RouteAnswer {
    match answer {
        RouteAnswer::Primary { node, watermark } => RouteAnswer::Primary {
            node: *node,
            watermark: *watermark,
        },
        _ => unreachable!("only primaries are replayed here"),
    }
}
