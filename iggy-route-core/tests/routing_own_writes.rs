//! Scenario tests of the routing layer: what our own metadata writes teach it. The real
//! cluster's followers answer reads with the state from before a write for up to half a
//! second (a topic just created reads as absent, partitions just added are missing), so
//! the answer of the write itself is trusted over a later read.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]

mod support;

use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::routing::{Attempt, Routing, Served, Target, TopicAnswer};
use iggy_route_core::wire::{Identifier, Message, Name, TopicDetails, TopicSummary};
use iggy_route_core::{AdminRequest, NodeId, Reply, Request, SendRequest};
use support::*;

fn named(name: &str) -> Identifier {
    Identifier::Named(Name::new(name).unwrap())
}

fn send_to(stream: Identifier, topic: Identifier, partition: u32) -> Request {
    Request::Send(SendRequest {
        stream,
        topic,
        partitioning: Partitioning::PartitionId(partition),
        messages: vec![Message::default()],
    })
}

/// A routing layer whose roster names node 0 as the metadata leader.
fn with_leader() -> (std::time::Instant, Routing) {
    let t0 = origin();
    let mut routing = Routing::new(config(), 5, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    drain(&mut routing);
    (t0, routing)
}

/// Runs one metadata write through the leader lane and answers it with `reply`, the way
/// the link layer does: the reply's commit moves the watermark first.
fn write(routing: &mut Routing, t0: std::time::Instant, admin: AdminRequest, reply: Reply) {
    let id = routing.admit(t0, Request::Admin(admin)).unwrap();
    let mut decisions = drain(routing);
    if decisions == ["fetch roster"] {
        // The metadata leader's lane reads the roster when it is first used.
        routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
        decisions = drain(routing);
    }
    assert_eq!(decisions, [format!("write {id} -> node0")]);
    let watermark = routing.watermark() + 10;
    routing.handle_watermark(t0, watermark);
    routing.handle_result(
        t0,
        id,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(reply)),
    );
}

fn primary(node: u32) -> iggy_route_core::routing::RouteAnswer {
    iggy_route_core::routing::RouteAnswer::Primary {
        node: NodeId(node),
        watermark: 0,
    }
}

fn created_topic(id: u32, name: &str, partitions_count: u32) -> Reply {
    Reply::Topic(Some(TopicDetails {
        summary: TopicSummary {
            id,
            created_at: 1,
            partitions_count,
            message_expiry: 0,
            compression: 1,
            max_topic_size: 0,
            size_bytes: 0,
            messages_count: 0,
            name: Name::new(name).unwrap(),
        },
        partitions: Vec::new(),
    }))
}

#[test]
fn a_topic_we_created_is_sent_to_without_a_read_that_a_follower_could_answer_absent() {
    let (t0, mut routing) = with_leader();
    let create = AdminRequest::CreateTopic {
        stream: named("orders"),
        name: Name::new("events").unwrap(),
        partitions_count: 3,
    };
    write(&mut routing, t0, create, created_topic(4, "events", 3));
    drain(&mut routing);
    for topic in [named("events"), Identifier::Numeric(4)] {
        let id = routing
            .admit(t0, send_to(named("orders"), topic.clone(), 2))
            .unwrap();
        assert_eq!(
            drain(&mut routing),
            ["lookup 2"],
            "{id}: no topic read after our own create"
        );
        let key = iggy_route_core::PartitionKey {
            topic: iggy_route_core::TopicKey {
                stream: named("orders"),
                topic,
            },
            partition: 2,
        };
        routing.handle_route(t0, &key, primary(1));
        drain(&mut routing);
    }
}

#[test]
fn a_read_in_flight_during_our_create_cannot_unlearn_the_topic() {
    let (t0, mut routing) = with_leader();
    routing
        .admit(t0, send_to(named("orders"), named("events"), 1))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let create = AdminRequest::CreateTopic {
        stream: named("orders"),
        name: Name::new("events").unwrap(),
        partitions_count: 2,
    };
    write(&mut routing, t0, create, created_topic(1, "events", 2));
    let decisions = drain(&mut routing);
    assert!(decisions.contains(&"lookup 1".to_owned()), "{decisions:?}");
    // The read sent before the create is answered by a lagging node: "absent".
    let key = iggy_route_core::TopicKey {
        stream: named("orders"),
        topic: named("events"),
    };
    routing.handle_topic(t0, &key, TopicAnswer::NotFound);
    assert!(drain(&mut routing).is_empty());
    assert_eq!(routing.partition_count(&key), Some(2));
}

#[test]
fn partitions_we_added_are_sent_to_without_a_read_that_a_follower_could_answer_short() {
    let (t0, mut routing) = with_leader();
    let key = topic();
    routing
        .admit(t0, send(Partitioning::PartitionId(0)))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &key,
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    assert_eq!(drain(&mut routing), ["lookup 0"]);
    routing.handle_route(t0, &partition(0), primary(1));
    drain(&mut routing);
    let add = AdminRequest::CreatePartitions {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitions_count: 2,
    };
    write(&mut routing, t0, add, Reply::PartitionsCreated);
    drain(&mut routing);
    let id = routing
        .admit(t0, send(Partitioning::PartitionId(4)))
        .unwrap();
    // The watermark moved, so the count is read again; a lagging node still says 3.
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        t0,
        &key,
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    assert_eq!(
        drain(&mut routing),
        ["lookup 4"],
        "{id}: a partition we added is not out of range because a read lags"
    );
}

fn created_stream(id: u32, name: &str) -> Reply {
    Reply::Stream(Some(iggy_route_core::wire::StreamDetails {
        id,
        created_at: 1,
        topics_count: 0,
        size_bytes: 0,
        messages_count: 0,
        name: Name::new(name).unwrap(),
        topics: Vec::new(),
    }))
}

#[test]
fn a_topic_read_as_absent_soon_after_our_write_is_read_again_and_believed_only_later() {
    let (t0, mut routing) = with_leader();
    let create = AdminRequest::CreateStream {
        name: Name::new("orders").unwrap(),
    };
    write(&mut routing, t0, create, created_stream(3, "orders"));
    drain(&mut routing);
    // A send that names the topic another way than our write did (here: a topic someone
    // else made in our new stream) needs a read, and the follower answers "absent".
    let id = routing
        .admit(t0, send_to(named("orders"), named("events"), 0))
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let key = iggy_route_core::TopicKey {
        stream: named("orders"),
        topic: named("events"),
    };
    routing.handle_topic(t0, &key, TopicAnswer::NotFound);
    assert_eq!(
        drain(&mut routing),
        Vec::<String>::new(),
        "{id} not failed yet"
    );
    let again = routing.poll_timeout().unwrap();
    assert!(again <= t0 + std::time::Duration::from_millis(10));
    routing.handle_timeout(again);
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    // A second later the answer is believed.
    let later = t0 + std::time::Duration::from_millis(1_001);
    routing.handle_topic(later, &key, TopicAnswer::NotFound);
    assert_eq!(drain(&mut routing), [format!("completed {id} err")]);
}

#[test]
fn the_callers_own_read_after_its_create_is_served_by_the_leader_that_committed_it() {
    let (t0, mut routing) = with_leader();
    let create = AdminRequest::CreateStream {
        name: Name::new("orders").unwrap(),
    };
    write(&mut routing, t0, create, created_stream(3, "orders"));
    drain(&mut routing);
    let read = routing
        .admit(
            t0,
            Request::Admin(AdminRequest::GetStream {
                stream: named("orders"),
            }),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {read} -> node0")]);
    // The leader applied the write before answering it: its "absent" is believed.
    routing.handle_result(
        t0,
        read,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(Reply::Stream(None))),
    );
    assert_eq!(drain(&mut routing), [format!("completed {read} ok")]);
    // Without a write of ours in the last second the leader answers too (another client's
    // write may not have reached a follower), and its "absent" is final at once.
    let later = t0 + std::time::Duration::from_secs(2);
    let read = routing
        .admit(
            later,
            Request::Admin(AdminRequest::GetStream {
                stream: named("nothing"),
            }),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), [format!("write {read} -> node0")]);
    routing.handle_result(
        later,
        read,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(Reply::Stream(None))),
    );
    assert_eq!(drain(&mut routing), [format!("completed {read} ok")]);
}

#[test]
fn a_read_sent_while_our_create_is_in_flight_waits_for_it_on_the_leader() {
    let (t0, mut routing) = with_leader();
    let create = routing
        .admit(
            t0,
            Request::Admin(AdminRequest::CreateStream {
                name: Name::new("orders").unwrap(),
            }),
        )
        .unwrap();
    let mut decisions = drain(&mut routing);
    if decisions == ["fetch roster"] {
        routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
        decisions = drain(&mut routing);
    }
    assert_eq!(decisions, [format!("write {create} -> node0")]);
    // Submitted before the create succeeded: it goes to the leader, after the create.
    let read = routing
        .admit(
            t0,
            Request::Admin(AdminRequest::GetStream {
                stream: named("orders"),
            }),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), Vec::<String>::new());
    routing.handle_result(
        t0,
        create,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(created_stream(3, "orders"))),
    );
    assert_eq!(
        drain(&mut routing),
        [
            format!("completed {create} ok"),
            format!("write {read} -> node0")
        ]
    );
    routing.handle_result(
        t0,
        read,
        Target::Node(NodeId(0)),
        Attempt::Done(Served::from(created_stream(3, "orders"))),
    );
    assert_eq!(drain(&mut routing), [format!("completed {read} ok")]);
}

/// Seed 166 of the simulation: partitions added while the topic's count was not cached
/// leave no floor, and a follower's count read 100 ms later is short. Within the settle
/// window after our write that is read again; after it, out of range is final.
#[test]
fn a_partition_beyond_a_count_read_soon_after_our_write_is_read_again() {
    let (t0, mut routing) = with_leader();
    let add = AdminRequest::CreatePartitions {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitions_count: 1,
    };
    write(&mut routing, t0, add, Reply::PartitionsCreated);
    drain(&mut routing);
    let soon = t0 + std::time::Duration::from_millis(100);
    let id = routing
        .admit(
            soon,
            send_to(Identifier::Numeric(1), Identifier::Numeric(1), 4),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let short = TopicAnswer::Found {
        partitions_count: 4,
    };
    routing.handle_topic(soon, &topic(), short);
    assert_eq!(drain(&mut routing), Vec::<String>::new(), "{id} waits");
    let again = routing.poll_timeout().unwrap();
    routing.handle_timeout(again);
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let late = t0 + std::time::Duration::from_millis(1_100);
    let still_short = TopicAnswer::Found {
        partitions_count: 4,
    };
    routing.handle_topic(late, &topic(), still_short);
    assert_eq!(drain(&mut routing), [format!("completed {id} err")]);
}

/// Seen on the real cluster: right after our `CREATE_PARTITIONS`, a node whose partition
/// plane has not applied it answers a send to the new partition with `ResourceNotFound`.
/// Nothing was admitted, so within the settle window the next node is tried; after it, the
/// answer is final.
#[test]
fn a_new_partition_unknown_to_a_node_soon_after_our_write_is_tried_elsewhere() {
    let (t0, mut routing) = with_leader();
    let add = AdminRequest::CreatePartitions {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitions_count: 2,
    };
    write(&mut routing, t0, add, Reply::PartitionsCreated);
    drain(&mut routing);
    let id = routing
        .admit(
            t0,
            send_to(Identifier::Numeric(1), Identifier::Numeric(1), 3),
        )
        .unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    let found = TopicAnswer::Found {
        partitions_count: 5,
    };
    routing.handle_topic(t0, &topic(), found);
    assert_eq!(drain(&mut routing), ["lookup 3"]);
    let key = iggy_route_core::PartitionKey {
        topic: topic(),
        partition: 3,
    };
    routing.handle_route(t0, &key, iggy_route_core::routing::RouteAnswer::Unsupported);
    assert_eq!(drain(&mut routing)[1..], [format!("write {id} -> node0")]);
    let unknown = Attempt::Failed(iggy_route_core::RequestError::Server {
        code: iggy_route_core::wire::ErrorCode::ResourceNotFound,
    });
    routing.handle_result(t0, id, Target::Node(NodeId(0)), unknown);
    assert_eq!(drain(&mut routing), [format!("write {id} -> node1")]);
    routing.handle_result(t0, id, Target::Node(NodeId(1)), sent_by(1));
    assert_eq!(drain(&mut routing)[1..], [format!("completed {id} ok")]);
    // Past the settle window the same answer is final.
    let late = t0 + std::time::Duration::from_secs(2);
    let other = routing
        .admit(
            late,
            send_to(Identifier::Numeric(1), Identifier::Numeric(1), 4),
        )
        .unwrap();
    let written = drain(&mut routing);
    let node = if written.last() == Some(&format!("write {other} -> node0")) {
        0
    } else {
        1
    };
    let unknown = Attempt::Failed(iggy_route_core::RequestError::Server {
        code: iggy_route_core::wire::ErrorCode::ResourceNotFound,
    });
    routing.handle_result(late, other, Target::Node(NodeId(node)), unknown);
    assert_eq!(drain(&mut routing), [format!("completed {other} err")]);
}

fn sent_by(node: u32) -> Attempt {
    Attempt::Done(Served::from(Reply::Sent(iggy_route_core::SendReceipt {
        partition_id: 3,
        base_offset: Some(0),
        messages: 1,
        node: NodeId(node),
        replica: None,
    })))
}

fn balanced_send(topic: Identifier) -> Request {
    Request::Send(SendRequest {
        stream: Identifier::Numeric(1),
        topic,
        partitioning: Partitioning::Balanced,
        messages: vec![Message::default()],
    })
}

/// Our `CREATE_PARTITIONS` (1 to 3) is answered at `t0`; 100 ms later a balanced send
/// reads the topic, and a node that has not applied the write answers the old count of 1.
/// Returns when that was, and the send.
fn behind_after_our_create_partitions(
    routing: &mut Routing,
    t0: std::time::Instant,
) -> (std::time::Instant, iggy_route_core::RequestId) {
    let add = AdminRequest::CreatePartitions {
        stream: Identifier::Numeric(1),
        topic: Identifier::Numeric(1),
        partitions_count: 2,
    };
    write(routing, t0, add, Reply::PartitionsCreated);
    drain(routing);
    let soon = t0 + std::time::Duration::from_millis(100);
    let id = routing
        .admit(soon, balanced_send(Identifier::Numeric(1)))
        .unwrap();
    assert_eq!(drain(routing), ["fetch topic"]);
    let behind = TopicAnswer::Behind {
        partitions_count: 1,
    };
    routing.handle_topic(soon, &topic(), behind);
    (soon, id)
}

/// Seen on the loopback cluster with the real cluster's lag, and read in the server's
/// source: a metadata read's reply carries the answering node's metadata commit. A count
/// from a node whose commit is below the one our `CREATE_PARTITIONS` moved us to is read
/// again while the write is young, so a balanced send right after it is not resolved
/// against the old count; once the write is settled the node's count is taken as it is.
#[test]
fn a_count_from_a_node_behind_our_own_write_is_read_again_while_the_write_is_young() {
    let (t0, mut routing) = with_leader();
    let (soon, id) = behind_after_our_create_partitions(&mut routing, t0);
    assert_eq!(drain(&mut routing), Vec::<String>::new(), "{id} waits");
    let again = routing.poll_timeout().unwrap();
    assert!(again > soon, "read again after a wait, not at once");
    routing.handle_timeout(again);
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        again,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 3,
        },
    );
    let decisions = drain(&mut routing);
    assert!(
        decisions.iter().any(|d| d.starts_with("lookup")),
        "{id} goes on with the count of 3: {decisions:?}"
    );

    // Past the settle window a node still behind is believed: nothing waits for it. (The
    // topic named by name is another key, whose count is not known yet.)
    let late = t0 + std::time::Duration::from_secs(2);
    let by_name = iggy_route_core::TopicKey {
        stream: Identifier::Numeric(1),
        topic: named("events"),
    };
    let next = routing.admit(late, balanced_send(named("events"))).unwrap();
    assert_eq!(drain(&mut routing), ["fetch topic"]);
    routing.handle_topic(
        late,
        &by_name,
        TopicAnswer::Behind {
            partitions_count: 3,
        },
    );
    drain(&mut routing);
    // The count was taken: a further send resolves against it without another read.
    let after = routing.admit(late, balanced_send(named("events"))).unwrap();
    let decisions = drain(&mut routing);
    assert!(
        !decisions.iter().any(|d| d == "fetch topic"),
        "{next} and {after} resolved against the late count: {decisions:?}"
    );
}

/// Found by an outsider: a request that cannot wait for a node behind our own write goes
/// on with that node's count, but the count is not kept, or every send after it would use
/// the old count until it is a second old.
#[test]
fn a_behind_count_taken_for_a_request_that_cannot_wait_is_not_kept() {
    let t0 = origin();
    let mut short = config();
    short.request_timeout = std::time::Duration::from_millis(20);
    let mut routing = Routing::new(short, 5, t0);
    routing.handle_roster(t0, vec![NodeId(0), NodeId(1), NodeId(2)], Some(NodeId(0)));
    drain(&mut routing);
    let (soon, id) = behind_after_our_create_partitions(&mut routing, t0);
    let decisions = drain(&mut routing);
    assert!(
        !decisions.is_empty() && !decisions.iter().any(|d| d == "fetch topic"),
        "{id} goes on with the count it has: {decisions:?}"
    );
    let next = routing
        .admit(soon, balanced_send(Identifier::Numeric(1)))
        .unwrap();
    assert_eq!(
        drain(&mut routing),
        ["fetch topic"],
        "{next} reads the topic again"
    );
}
