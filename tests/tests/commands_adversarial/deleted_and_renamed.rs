//! Shared scenarios (loopback and real cluster): what was deleted, purged or renamed a moment
//! ago.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Every command on a stream deleted a moment ago answers a typed "not there" (or an empty
/// read), never a hang or a stale success; then a stream and topic made again under the same
/// names, with fewer partitions, are what sends by name reach.
pub(super) fn deleted_a_moment_ago(place: &Place, adapter: Adapter) {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("gone");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    place.spread(s, t, 3);
    for p in 0..3 {
        call!(
            client,
            send(
                name.as_str(),
                "t",
                Partitioning::partition_id(p),
                messages("old", 3)
            )
        )
        .unwrap();
        call!(client, store_offset(consumer(1), s, t, p, 1)).unwrap();
    }
    call!(client, delete_stream(s)).unwrap();

    assert!(call!(client, get_stream(s)).unwrap().is_none());
    assert!(call!(client, get_stream(name.as_str())).unwrap().is_none());
    let listed = call!(client, get_streams()).unwrap();
    assert!(!listed.iter().any(|l| l.id == s), "{listed:?}");
    assert!(call!(client, get_topics(s)).unwrap().is_empty());
    assert!(call!(client, get_topic(s, t)).unwrap().is_none());
    let offset = call!(client, get_consumer_offset(consumer(1), s, t, Some(1)));
    assert!(
        matches!(offset, Ok(None)) || typed_not_found(&offset),
        "get_consumer_offset of a deleted stream: {offset:?}"
    );
    let mut failures = Vec::new();
    macro_rules! not_found {
        ($what:expr, $result:expr) => {{
            let result = $result;
            if !typed_not_found(&result) {
                failures.push(format!("{}: {}", $what, outcome(&result)));
            }
        }};
    }
    not_found!(
        "send by id",
        call!(
            client,
            send(s, t, Partitioning::partition_id(1), messages("late", 1))
        )
    );
    not_found!(
        "send by name",
        call!(
            client,
            send(
                name.as_str(),
                "t",
                Partitioning::partition_id(2),
                messages("late", 1)
            )
        )
    );
    not_found!(
        "send balanced",
        call!(
            client,
            send(s, t, Partitioning::Balanced, messages("late", 1))
        )
    );
    not_found!(
        "poll",
        call!(
            client,
            poll(s, t, Some(0), consumer(1), PollingStrategy::Offset(0), 10)
        )
    );
    not_found!(
        "store_offset",
        call!(client, store_offset(consumer(1), s, t, 0, 0))
    );
    not_found!(
        "delete_consumer_offset",
        call!(client, delete_consumer_offset(consumer(1), s, t, Some(0)))
    );
    not_found!(
        "update_stream",
        call!(client, update_stream(s, "x-renamed"))
    );
    not_found!("purge_stream", call!(client, purge_stream(s)));
    not_found!("delete_stream", call!(client, delete_stream(s)));
    not_found!("create_topic", call!(client, create_topic(s, "t2", 1)));
    not_found!(
        "update_topic",
        call!(
            client,
            update_topic(s, t, "t3", TopicUpdateOptions::default())
        )
    );
    not_found!("purge_topic", call!(client, purge_topic(s, t)));
    not_found!("delete_topic", call!(client, delete_topic(s, t)));
    not_found!(
        "create_partitions",
        call!(client, create_partitions(s, t, 1))
    );
    not_found!(
        "delete_partitions",
        call!(client, delete_partitions(s, t, 1))
    );
    not_found!(
        "delete_segments",
        call!(client, delete_segments(s, t, 0, 1))
    );
    not_found!("flush", call!(client, flush_unsaved_buffer(s, t, 0, false)));
    assert!(failures.is_empty(), "not a typed not-found: {failures:#?}");

    // Made again under the same names, with one partition: a send by name to partition 2
    // must not reach anything, and partition 0 is the new topic's.
    let again = call!(client, create_stream(&name)).unwrap().id;
    let t2 = call!(client, create_topic(name.as_str(), "t", 1))
        .unwrap()
        .summary
        .id;
    place.spread(again, t2, 1);
    let stale = call!(
        client,
        send(
            name.as_str(),
            "t",
            Partitioning::partition_id(2),
            messages("stale", 1)
        )
    );
    assert!(
        typed_not_found(&stale),
        "a send to partition 2 of the new one-partition topic: {stale:?}"
    );
    let receipt = call!(
        client,
        send(
            name.as_str(),
            "t",
            Partitioning::partition_id(0),
            messages("fresh", 1)
        )
    )
    .unwrap();
    assert_eq!(
        (receipt.partition_id, receipt.base_offset),
        (0, Some(0)),
        "the first message of the new topic"
    );
    for _ in 0..5 {
        let receipt = call!(
            client,
            send(
                name.as_str(),
                "t",
                Partitioning::Balanced,
                messages("bal", 1)
            )
        )
        .unwrap();
        assert_eq!(receipt.partition_id, 0, "balanced over one partition");
    }
    let polled = call!(
        client,
        poll(
            again,
            t2,
            Some(0),
            consumer(1),
            PollingStrategy::Offset(0),
            100
        )
    )
    .unwrap();
    let read = payloads(&polled);
    assert_eq!(read.len(), 6, "{read:?}");
    assert_eq!(read[0], "fresh-0");
    let offset = call!(client, get_consumer_offset(consumer(1), again, t2, Some(0))).unwrap();
    assert_eq!(offset, None, "an offset inherited from the deleted stream");
    call!(client, delete_stream(again)).unwrap();
}

pub(super) fn commands_on_a_stream_deleted_a_moment_ago(adapter: Adapter) {
    let _dog = watchdog("deleted_a_moment_ago", Duration::from_secs(180));
    let world = world();
    for session in [0, 2] {
        deleted_a_moment_ago(&world.place(session, &format!("n{session}")), adapter);
    }
}
both_adapters!(commands_on_a_stream_deleted_a_moment_ago);

/// Partitions deleted while the client knows the old count: a send to a removed partition is
/// a typed error, never a success; balanced sends use only what is left.
pub(super) fn deleted_partitions(place: &Place, adapter: Adapter) {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("shrink");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let t = call!(client, create_topic(s, "t", 4)).unwrap().summary.id;
    place.spread(s, t, 4);
    for p in 0..4 {
        call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("before", 2))
        )
        .unwrap();
    }
    for _ in 0..4 {
        call!(client, send(s, t, Partitioning::Balanced, messages("b", 1))).unwrap();
    }
    call!(client, delete_partitions(s, t, 2)).unwrap();
    for p in [2, 3] {
        let sent = call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("removed", 1))
        );
        assert!(
            typed_not_found(&sent),
            "a send to removed partition {p}: {sent:?}"
        );
        let polled = call!(
            client,
            poll(s, t, Some(p), consumer(1), PollingStrategy::Offset(0), 1)
        );
        assert!(
            typed_not_found(&polled),
            "a poll of removed partition {p}: {polled:?}"
        );
        let stored = call!(client, store_offset(consumer(1), s, t, p, 0));
        assert!(
            typed_not_found(&stored),
            "store_offset on removed {p}: {stored:?}"
        );
    }
    for i in 0..12 {
        let receipt = call!(
            client,
            send(s, t, Partitioning::Balanced, messages("after", 1))
        );
        let receipt = receipt.unwrap_or_else(|error| panic!("balanced send {i}: {error:?}"));
        assert!(receipt.partition_id < 2, "balanced send {i}: {receipt:?}");
    }
    let key = Partitioning::messages_key(b"a-key".to_vec()).unwrap();
    let receipt = call!(client, send(s, t, key, messages("keyed", 1))).unwrap();
    assert!(receipt.partition_id < 2, "keyed send: {receipt:?}");
    // Added back: sent to at once.
    call!(client, create_partitions(s, t, 2)).unwrap();
    place.spread(s, t, 4);
    let receipt = call!(
        client,
        send(s, t, Partitioning::partition_id(3), messages("back", 1))
    )
    .unwrap();
    assert_eq!(
        receipt.base_offset,
        Some(0),
        "a partition added back starts empty"
    );
    call!(client, delete_stream(s)).unwrap();
}

pub(super) fn sends_to_partitions_deleted_a_moment_ago(adapter: Adapter) {
    let _dog = watchdog("deleted_partitions", Duration::from_secs(120));
    let world = world();
    deleted_partitions(&world.place(2, "p"), adapter);
}
both_adapters!(sends_to_partitions_deleted_a_moment_ago);

/// How long an acknowledged purge takes at most to wipe its partitions: the server (and the
/// loopback cluster) acknowledges a purge when it commits and wipes each partition a
/// reconciler pass later; until then a poll still returns the old messages.
pub(super) const PURGED_WITHIN: Duration = Duration::from_secs(5);

/// Purge, then at once read the topic (our own write: its counts read zero), wait for the
/// wipe, then send and poll: the new messages start at offset 0, nothing old is read, and
/// the consumer offsets are gone.
pub(super) fn purge_send_poll(place: &Place, adapter: Adapter) {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let name = place.name("purge");
    let s = call!(client, create_stream(&name)).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    place.spread(s, t, 3);
    for round in 0..4 {
        for p in 0..3 {
            call!(
                client,
                send(s, t, Partitioning::partition_id(p), messages("old", 5))
            )
            .unwrap();
            call!(client, store_offset(consumer(2), s, t, p, 3)).unwrap();
        }
        if round % 2 == 0 {
            call!(client, purge_topic(s, t)).unwrap();
        } else {
            call!(client, purge_stream(s)).unwrap();
        }
        let topic = call!(client, get_topic(s, t)).unwrap().unwrap();
        assert_eq!(
            (topic.summary.partitions_count, topic.summary.messages_count),
            (3, 0),
            "round {round}: the topic read right after our purge"
        );
        let acknowledged = Instant::now();
        for p in 0..3 {
            loop {
                let polled = call!(
                    client,
                    poll(s, t, Some(p), consumer(2), PollingStrategy::Offset(0), 100)
                )
                .unwrap();
                let offset =
                    call!(client, get_consumer_offset(consumer(2), s, t, Some(p))).unwrap();
                if polled.messages.is_empty() && offset.is_none() {
                    break;
                }
                assert!(
                    acknowledged.elapsed() < PURGED_WITHIN,
                    "round {round}: partition {p} still holds {} messages and offset {offset:?}",
                    polled.messages.len()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for p in 0..3 {
            let fresh = format!("new{round}");
            let receipt = call!(
                client,
                send(s, t, Partitioning::partition_id(p), messages(&fresh, 1))
            )
            .unwrap();
            assert_eq!(
                receipt.base_offset,
                Some(0),
                "round {round}: the first send after the purge on {p}"
            );
            let polled = call!(
                client,
                poll(s, t, Some(p), consumer(2), PollingStrategy::Offset(0), 100)
            )
            .unwrap();
            assert_eq!(
                payloads(&polled),
                [format!("{fresh}-0")],
                "round {round}: partition {p} after the purge"
            );
        }
        // Leave the partitions empty for the next round's offsets to mean the same.
        call!(client, purge_topic(s, t)).unwrap();
        let acknowledged = Instant::now();
        for p in 0..3 {
            while !call!(
                client,
                poll(s, t, Some(p), consumer(2), PollingStrategy::Offset(0), 1)
            )
            .unwrap()
            .messages
            .is_empty()
            {
                assert!(acknowledged.elapsed() < PURGED_WITHIN);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    call!(client, delete_stream(s)).unwrap();
}

pub(super) fn purge_then_send_then_poll(adapter: Adapter) {
    let _dog = watchdog("purge", Duration::from_secs(120));
    let world = world();
    purge_send_poll(&world.place(2, "p"), adapter);
}
both_adapters!(purge_then_send_then_poll);

/// Renames to a name another stream, topic or user holds are refused with the server's
/// status and change nothing; a rename then a send by the new names goes at once; and a new
/// topic under an old name is a new topic to sends by name.
pub(super) fn renames(place: &Place, adapter: Adapter) -> String {
    let client = Cl::connect(adapter, place.root.clone()).unwrap();
    let (n1, n2, n3) = (place.name("a"), place.name("b"), place.name("c"));
    let a = call!(client, create_stream(&n1)).unwrap().id;
    let b = call!(client, create_stream(&n2)).unwrap().id;
    assert_eq!(
        server_code(call!(client, update_stream(a, &n2))),
        ErrorCode::StreamNameAlreadyExists
    );
    assert_eq!(
        call!(client, get_stream(n1.as_str()))
            .unwrap()
            .map(|d| d.id),
        Some(a)
    );
    assert_eq!(
        call!(client, get_stream(n2.as_str()))
            .unwrap()
            .map(|d| d.id),
        Some(b)
    );
    let x = call!(client, create_topic(a, "x", 1)).unwrap().summary.id;
    let y = call!(client, create_topic(a, "y", 1)).unwrap().summary.id;
    place.spread(a, x, 1);
    place.spread(a, y, 1);
    assert_eq!(
        server_code(call!(
            client,
            update_topic(a, x, "y", TopicUpdateOptions::default())
        )),
        ErrorCode::TopicNameAlreadyExists
    );
    assert_eq!(
        call!(client, get_topic(a, "x"))
            .unwrap()
            .map(|d| d.summary.id),
        Some(x)
    );
    assert_eq!(
        call!(client, get_topic(a, "y"))
            .unwrap()
            .map(|d| d.summary.id),
        Some(y)
    );
    let (u1, u2) = (place.name("u1"), place.name("u2"));
    let first = call!(client, create_user(&u1, "pw-one", UserStatus::Active, None))
        .unwrap()
        .id;
    let second = call!(client, create_user(&u2, "pw-two", UserStatus::Active, None))
        .unwrap()
        .id;
    assert_eq!(
        server_code(call!(client, update_user(first, Some(u2.as_str()), None))),
        ErrorCode::UserAlreadyExists
    );
    assert_eq!(
        call!(client, get_user(u2.as_str())).unwrap().map(|u| u.id),
        Some(second)
    );
    // A rename to its own name: whatever the server says, typed, and nothing changes.
    let own = call!(client, update_stream(a, &n1));
    let own_outcome = outcome(&own);
    assert!(own.is_ok() || server_code(own) != ErrorCode::Error);
    assert_eq!(
        call!(client, get_stream(n1.as_str()))
            .unwrap()
            .map(|d| d.id),
        Some(a)
    );

    // Rename, then send by the new names at once.
    call!(client, update_stream(a, &n3)).unwrap();
    call!(
        client,
        update_topic(a, x, "z", TopicUpdateOptions::default())
    )
    .unwrap();
    let receipt = call!(
        client,
        send(
            n3.as_str(),
            "z",
            Partitioning::partition_id(0),
            messages("to-z", 1)
        )
    )
    .unwrap();
    assert_eq!(receipt.base_offset, Some(0));
    // A new topic under the old name "x": a send by name reaches it, not the renamed one.
    let x2 = call!(client, create_topic(a, "x", 1)).unwrap().summary.id;
    place.spread(a, x2, 1);
    assert_ne!(x2, x);
    call!(
        client,
        send(
            n3.as_str(),
            "x",
            Partitioning::partition_id(0),
            messages("to-new-x", 1)
        )
    )
    .unwrap();
    let in_new = call!(
        client,
        poll(a, x2, Some(0), consumer(1), PollingStrategy::Offset(0), 10)
    )
    .unwrap();
    assert_eq!(payloads(&in_new), ["to-new-x-0"], "the new topic x");
    let in_renamed = call!(
        client,
        poll(a, x, Some(0), consumer(1), PollingStrategy::Offset(0), 10)
    )
    .unwrap();
    assert_eq!(payloads(&in_renamed), ["to-z-0"], "the renamed topic z");
    call!(client, delete_stream(a)).unwrap();
    call!(client, delete_stream(b)).unwrap();
    call!(client, delete_user(first)).unwrap();
    call!(client, delete_user(second)).unwrap();
    own_outcome
}

pub(super) fn renames_to_taken_names_change_nothing(adapter: Adapter) {
    let _dog = watchdog("renames", Duration::from_secs(120));
    let world = world();
    let own = renames(&world.place(1, "r"), adapter);
    println!("loopback: a stream renamed to its own name: {own}");
}
both_adapters!(renames_to_taken_names_change_nothing);
