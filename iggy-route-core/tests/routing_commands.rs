//! Scenario tests of the routing layer for commands carried as they are: where
//! each plane goes, what a read right after our own metadata write is served by, and what
//! an unknown outcome does to a write and to a read.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::client::{Call, ClientError};
use iggy_route_core::routing::{Attempt, Routing, Served, Target};
use iggy_route_core::wire::{Identifier, WireError, code};
use iggy_route_core::{CommandRequest, NodeId, Plane, Reply, ReplyPayload, Request, RequestError};
use support::*;

fn command(code: u32, plane: Plane) -> Request {
    Request::Command(CommandRequest {
        code,
        body: Bytes::from_static(b"body"),
        plane,
    })
}

fn on_partition(partition: u32, write: bool) -> Plane {
    Plane::Partition {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partition,
        write,
    }
}

/// A routing layer whose roster names node 2 as the metadata leader.
fn with_leader(t0: std::time::Instant) -> Routing {
    let mut routing = warmed(t0, 3, &[(0, 1), (1, 0)]);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(2)));
    drain(&mut routing);
    routing
}

/// The decisions after a request for the metadata leader's lane: the lane reads the roster
/// when it is first used, and is answered here as before.
fn leader_decisions(routing: &mut Routing, t0: std::time::Instant) -> Vec<String> {
    let decisions = drain(routing);
    if decisions != ["fetch roster"] {
        return decisions;
    }
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(2)));
    drain(routing)
}

fn payload() -> Attempt {
    Attempt::Done(Served::from(Reply::Payload(ReplyPayload(Bytes::new()))))
}

#[test]
fn each_plane_goes_to_the_node_that_serves_it() {
    let t0 = origin();
    let mut routing = with_leader(t0);
    // A metadata read goes where writes commit: a follower may not have applied another
    // client's write yet, and a list read cannot tell.
    let read = routing
        .admit(t0, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(
        leader_decisions(&mut routing, t0),
        [format!("write {read} -> node2")]
    );
    routing.handle_result(t0, read, Target::Node(NodeId(2)), payload());
    assert_eq!(drain(&mut routing), [format!("completed {read} ok")]);
    let me = routing
        .admit(t0, command(code::GET_ME, Plane::Session))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {me} -> coordinator")]);
    let write = routing
        .admit(t0, command(code::DELETE_STREAM, Plane::MetadataWrite))
        .unwrap();
    assert_eq!(
        leader_decisions(&mut routing, t0),
        [format!("write {write} -> node2")]
    );
    let flush = routing
        .admit(
            t0,
            command(code::FLUSH_UNSAVED_BUFFER, on_partition(0, false)),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {flush} -> node1")]);
    let delete = routing
        .admit(
            t0,
            command(code::DELETE_CONSUMER_OFFSET, on_partition(1, true)),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {delete} -> node0")]);
}

#[test]
fn a_metadata_read_is_served_by_the_leader_right_after_our_own_write_and_later() {
    let t0 = origin();
    let mut routing = with_leader(t0);
    let write = routing
        .admit(t0, command(code::UPDATE_STREAM, Plane::MetadataWrite))
        .unwrap();
    leader_decisions(&mut routing, t0);
    routing.handle_result(t0, write, Target::Node(NodeId(2)), payload());
    assert_eq!(drain(&mut routing), [format!("completed {write} ok")]);

    // A follower may not have applied the update; a list read cannot tell.
    let soon = t0 + Duration::from_millis(100);
    let read = routing
        .admit(soon, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {read} -> node2")]);
    routing.handle_result(soon, read, Target::Node(NodeId(2)), payload());
    drain(&mut routing);

    // Session reads stay on the coordinator: they are about the session, not metadata.
    let me = routing
        .admit(soon, command(code::GET_ME, Plane::Session))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {me} -> coordinator")]);
    routing.handle_result(soon, me, Target::Coordinator, payload());
    drain(&mut routing);

    // Once our write has settled the leader still answers: another client's write may
    // not have reached a follower.
    let settled = t0 + config().own_write_settle;
    let later = routing
        .admit(settled, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {later} -> node2")]);
}

/// A leader that is down and not yet replaced must not hold metadata reads to their
/// deadline: the session's node answers them (perhaps a little behind), until the leader
/// answers again. A write still goes only to the leader.
#[test]
fn a_metadata_read_whose_leader_cannot_be_reached_is_answered_by_the_session() {
    let t0 = origin();
    let mut routing = with_leader(t0);
    let read = routing
        .admit(t0, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(
        leader_decisions(&mut routing, t0),
        [format!("write {read} -> node2")]
    );
    routing.handle_result(t0, read, Target::Node(NodeId(2)), Attempt::NotSent);
    assert_eq!(
        drain(&mut routing),
        [format!("write {read} -> coordinator")]
    );
    routing.handle_result(t0, read, Target::Coordinator, payload());
    assert_eq!(drain(&mut routing), [format!("completed {read} ok")]);

    // Meanwhile the next read goes to the session at once; a write waits for the leader.
    let next = routing
        .admit(t0, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(
        drain(&mut routing),
        [format!("write {next} -> coordinator")]
    );
    routing.handle_result(t0, next, Target::Coordinator, payload());
    drain(&mut routing);
    let write = routing
        .admit(t0, command(code::UPDATE_STREAM, Plane::MetadataWrite))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {write} -> node2")]);
    routing.handle_result(t0, write, Target::Node(NodeId(2)), payload());
    drain(&mut routing);

    // The leader answered: reads go back to it. So does a read lost in flight, once more.
    let back = routing
        .admit(t0, command(code::GET_STREAMS, Plane::MetadataRead))
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {back} -> node2")]);
    routing.handle_result(t0, back, Target::Node(NodeId(2)), Attempt::Unknown);
    assert_eq!(
        drain(&mut routing),
        [format!("write {back} -> coordinator")]
    );
}

#[test]
fn a_partition_write_lost_in_flight_is_not_written_again_but_a_read_is() {
    let t0 = origin();
    let mut routing = with_leader(t0);
    let delete = routing
        .admit(
            t0,
            command(code::DELETE_CONSUMER_OFFSET, on_partition(0, true)),
        )
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, delete, Target::Node(NodeId(1)), Attempt::Unknown);
    let decisions = drain(&mut routing);
    assert!(
        decisions.contains(&format!("completed {delete} err")),
        "{decisions:?}"
    );
    assert!(
        !decisions.iter().any(|d| d.starts_with("write")),
        "{decisions:?}"
    );

    let read = routing
        .admit(
            t0,
            command(code::GET_CONSUMER_OFFSET, on_partition(0, false)),
        )
        .unwrap();
    drain(&mut routing);
    routing.handle_result(t0, read, Target::Node(NodeId(1)), Attempt::Unknown);
    let decisions = drain(&mut routing);
    assert!(
        !decisions.contains(&format!("completed {read} err")),
        "a read is asked again: {decisions:?}"
    );
}

#[test]
fn a_partition_command_beyond_the_partition_count_fails_typed_with_nothing_sent() {
    let t0 = origin();
    let mut routing = with_leader(t0);
    let id = routing
        .admit(
            t0,
            command(code::FLUSH_UNSAVED_BUFFER, on_partition(7, false)),
        )
        .unwrap();
    let decisions = drain(&mut routing);
    // The cached count (3) may be old: it is read again before the request fails.
    assert_eq!(decisions, ["fetch topic"]);
    // A count read for it and still short may come from a node that has not applied
    // another client's `CREATE_PARTITIONS`: it is read again, paced, for up to
    // `own_write_settle` from the submit, and only then does the request fail.
    let mut now = t0;
    let mut reads = 1;
    let ended = loop {
        routing.handle_topic(
            now,
            &topic(),
            iggy_route_core::routing::TopicAnswer::Found {
                partitions_count: 3,
            },
        );
        let decisions = drain(&mut routing);
        if decisions.contains(&format!("completed {id} err")) {
            assert_eq!(decisions, [format!("completed {id} err")]);
            break now;
        }
        assert!(decisions.is_empty(), "nothing sent: {decisions:?}");
        now = routing.poll_timeout().expect("a read again is timed");
        routing.handle_timeout(now);
        assert_eq!(drain(&mut routing), ["fetch topic"]);
        reads += 1;
        assert!(reads < 50, "read again without end");
    };
    assert!(ended.duration_since(t0) >= std::time::Duration::from_millis(500));
    assert!(ended.duration_since(t0) <= std::time::Duration::from_secs(2));
}

#[test]
fn a_command_body_and_its_reply_payload_stay_out_of_debug_output() {
    let secret = Bytes::from_static(b"hunter2-password");
    let request = Request::Command(CommandRequest {
        code: code::CREATE_USER,
        body: secret.clone(),
        plane: Plane::MetadataWrite,
    });
    let shown = format!("{request:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("body_len: 16"), "{shown}");
    let reply = Reply::Payload(ReplyPayload(secret));
    let shown = format!("{reply:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

fn decode_u32(payload: &[u8]) -> Result<u32, WireError> {
    let bytes: [u8; 4] = payload.try_into().map_err(|_| WireError::InvalidLength {
        field: "test value",
        len: payload.len(),
    })?;
    Ok(u32::from_le_bytes(bytes))
}

#[test]
fn a_call_decodes_its_payload_and_types_a_payload_that_does_not_decode() {
    let call = || {
        Call::command(
            "test",
            code::GET_STATS,
            Bytes::new(),
            Plane::MetadataRead,
            decode_u32,
        )
    };
    let good = Reply::Payload(ReplyPayload(Bytes::from_static(&[7, 0, 0, 0])));
    assert_eq!(call().reply.extract(good).unwrap(), 7);
    let short = Reply::Payload(ReplyPayload(Bytes::from_static(&[7])));
    assert!(matches!(
        call().reply.extract(short),
        Err(ClientError::Request(RequestError::Malformed(_)))
    ));
    assert!(matches!(
        call().reply.extract(Reply::OffsetStored),
        Err(ClientError::UnexpectedReply { operation: "test" })
    ));
}

#[test]
fn a_topic_the_user_may_not_read_is_still_sent_to_by_partition_id() {
    use iggy_route_core::partitioning::Partitioning;
    use iggy_route_core::routing::TopicAnswer;
    use iggy_route_core::wire::ErrorCode;
    let t0 = origin();
    let mut routing = Routing::new(config(), 3, t0);
    let by_id = routing
        .admit(t0, send(Partitioning::PartitionId(2)))
        .unwrap();
    let balanced = routing.admit(t0, send(Partitioning::Balanced)).unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    // A 0.11.0 server answers GET_TOPIC with 41 to a user who may send but not read.
    let denied = TopicAnswer::Denied {
        code: ErrorCode::Unauthorized,
    };
    routing.handle_topic(t0, &topic(), denied.clone());
    // The send naming its partition goes on, and the server checks the id; the one that
    // needs the count fails with the server's word instead of asking again until its
    // deadline.
    let decisions = drain(&mut routing);
    assert!(decisions.contains(&"lookup 2".to_owned()), "{decisions:?}");
    assert!(
        decisions.contains(&format!("completed {balanced} err")),
        "{decisions:?}"
    );
    assert!(!decisions.contains(&format!("completed {by_id} err")));
    assert!(
        !decisions.contains(&"fetch topic".to_owned()),
        "not asked again"
    );
    // Nothing is cached: the next request asks again (permissions change).
    routing
        .admit(
            t0,
            send(Partitioning::MessagesKey(Bytes::from_static(b"k"))),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(t0, &topic(), denied);
    let decisions = drain(&mut routing);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(decisions[0].ends_with("err"), "{decisions:?}");
}
