//! A hostile network: late and duplicated replies, dropped connections, silent nodes, a node
//! that breaks the protocol after its sign-in.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The leader answers every metadata write late, past the attempt timeout: each write is
/// written once, and answered with success or an unknown outcome, never with the server's
/// refusal of a second copy ("already exists", "not found", a doubled partition count).
pub(super) fn late_metadata_replies_are_never_written_twice(adapter: Adapter) {
    let _dog = watchdog("late_replies", Duration::from_secs(180));
    let world = world();
    let mut config = world.config(2);
    config.attempt_timeout = Duration::from_millis(400);
    config.connect_timeout = Duration::from_secs(3);
    config.request_timeout = Duration::from_secs(6);
    let client = Cl::connect(adapter, config).unwrap();
    let s = call!(client, create_stream("late")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 1)).unwrap().summary.id;
    let doomed = call!(client, create_stream("doomed")).unwrap().id;
    let victim = call!(
        client,
        create_user("victim", "victim-pw", UserStatus::Active, None)
    )
    .unwrap()
    .id;
    std::thread::sleep(Duration::from_millis(1_200));
    let counted = |command| world.requests(LEADER, command);
    let before: BTreeMap<u32, u64> = [
        code::CREATE_STREAM,
        code::CREATE_PARTITIONS,
        code::DELETE_PARTITIONS,
        code::CREATE_USER,
        code::UPDATE_STREAM,
        code::DELETE_STREAM,
        code::CHANGE_PASSWORD,
        code::DELETE_USER,
    ]
    .into_iter()
    .map(|command| (command, counted(command)))
    .collect();

    world
        .cluster
        .set_reply_delay(LEADER, Duration::from_millis(1_000));
    let results = vec![
        (
            "create_stream",
            code::CREATE_STREAM,
            outcome_and_unknown(&call!(client, create_stream("late-2"))),
        ),
        (
            "create_partitions",
            code::CREATE_PARTITIONS,
            outcome_and_unknown(&call!(client, create_partitions(s, t, 3))),
        ),
        (
            "delete_partitions",
            code::DELETE_PARTITIONS,
            outcome_and_unknown(&call!(client, delete_partitions(s, t, 1))),
        ),
        (
            "create_user",
            code::CREATE_USER,
            outcome_and_unknown(&call!(
                client,
                create_user("late-user", "late-pw", UserStatus::Active, None)
            )),
        ),
        (
            "update_stream",
            code::UPDATE_STREAM,
            outcome_and_unknown(&call!(client, update_stream(s, "late-renamed"))),
        ),
        (
            "delete_stream",
            code::DELETE_STREAM,
            outcome_and_unknown(&call!(client, delete_stream(doomed))),
        ),
        (
            "change_password",
            code::CHANGE_PASSWORD,
            outcome_and_unknown(&call!(
                client,
                change_password(victim, "victim-pw", "victim-pw2")
            )),
        ),
        (
            "delete_user",
            code::DELETE_USER,
            outcome_and_unknown(&call!(client, delete_user(victim))),
        ),
    ];
    world.cluster.set_reply_delay(LEADER, Duration::ZERO);

    let mut failures = Vec::new();
    for (what, command, (shown, ok, unknown)) in &results {
        let written = counted(*command) - before[command];
        if written > 1 || !(*ok || *unknown) || (*ok && written != 1) {
            failures.push(format!("{what}: {shown}, written {written} times"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // What was written once shows once.
    let partitions = call!(client, get_topic(s, t))
        .unwrap()
        .unwrap()
        .summary
        .partitions_count;
    let added = counted(code::CREATE_PARTITIONS) - before[&code::CREATE_PARTITIONS];
    let removed = counted(code::DELETE_PARTITIONS) - before[&code::DELETE_PARTITIONS];
    assert_eq!(u64::from(partitions), 1 + 3 * added - removed);
    // And the client is still of use.
    call!(client, ping()).unwrap();
    call!(client, create_stream("after-late")).unwrap();
}

pub(super) fn outcome_and_unknown<T>(result: &Result<T, ClientError>) -> (String, bool, bool) {
    (outcome(result), result.is_ok(), unknown_outcome(result))
}
both_adapters!(late_metadata_replies_are_never_written_twice);

/// The leader's connections are dropped while a metadata write's reply is on its way: the
/// write is never written again (a second `delete_stream` would answer "not found", a second
/// `create_partitions` would add twice), and the client goes on.
pub(super) fn connections_dropped_during_metadata_writes(adapter: Adapter) {
    let _dog = watchdog("dropped_during_writes", Duration::from_secs(180));
    let world = world();
    let client = Arc::new(world.connect(adapter, 2));
    let s = call!(client, create_stream("drops")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 1)).unwrap().summary.id;
    let doomed = call!(client, create_stream("doomed")).unwrap().id;
    let doomed_topic = call!(client, create_topic(s, "doomed-topic", 1))
        .unwrap()
        .summary
        .id;
    let victim = call!(
        client,
        create_user("victim", "victim-pw", UserStatus::Active, None)
    )
    .unwrap()
    .id;
    type Op = Box<dyn FnOnce(&Cl) -> Result<(), ClientError> + Send>;
    let ops: Vec<(&str, u32, Op)> = vec![
        (
            "delete_stream",
            code::DELETE_STREAM,
            Box::new(move |c: &Cl| call!(c, delete_stream(doomed))) as Op,
        ),
        (
            "delete_topic",
            code::DELETE_TOPIC,
            Box::new(move |c: &Cl| call!(c, delete_topic(s, doomed_topic))) as Op,
        ),
        (
            "create_partitions",
            code::CREATE_PARTITIONS,
            Box::new(move |c: &Cl| call!(c, create_partitions(s, t, 2))) as Op,
        ),
        (
            "update_stream",
            code::UPDATE_STREAM,
            Box::new(move |c: &Cl| call!(c, update_stream(s, "drops-renamed"))) as Op,
        ),
        (
            "change_password",
            code::CHANGE_PASSWORD,
            Box::new(move |c: &Cl| call!(c, change_password(victim, "victim-pw", "victim-pw2")))
                as Op,
        ),
        (
            "delete_user",
            code::DELETE_USER,
            Box::new(move |c: &Cl| call!(c, delete_user(victim))) as Op,
        ),
        (
            "create_stream",
            code::CREATE_STREAM,
            Box::new(move |c: &Cl| call!(c, create_stream("drops-new")).map(|_| ())) as Op,
        ),
    ];
    let mut failures = Vec::new();
    for (what, command, op) in ops {
        let before = world.requests(LEADER, command);
        world
            .cluster
            .set_reply_delay(LEADER, Duration::from_millis(600));
        let worker = {
            let client = Arc::clone(&client);
            std::thread::spawn(move || op(&client))
        };
        std::thread::sleep(Duration::from_millis(250));
        world.cluster.drop_connections(LEADER);
        world.cluster.set_reply_delay(LEADER, Duration::ZERO);
        let result = worker.join().unwrap();
        let written = world.requests(LEADER, command) - before;
        let fine = written <= 1
            && (unknown_outcome(&result) || result.is_ok())
            && (result.is_err() || written == 1);
        if !fine {
            failures.push(format!(
                "{what}: {}, written {written} times",
                outcome(&result)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // By name: the loopback cluster gives a freed id to the next stream it creates.
    assert!(call!(client, get_stream("doomed")).unwrap().is_none());
    assert!(
        call!(client, get_topic(s, "doomed-topic"))
            .unwrap()
            .is_none()
    );
    let added = call!(client, get_topic(s, t))
        .unwrap()
        .unwrap()
        .summary
        .partitions_count;
    assert!(added == 1 || added == 3, "partitions: {added}");
    call!(client, ping()).unwrap();
    call!(client, create_stream("after-drops")).unwrap();
}
both_adapters!(connections_dropped_during_metadata_writes);

/// The leader writes every reply twice, a while at a time: no answer goes to the wrong call,
/// no write is written twice, and the calls made during the window end typed (most succeed
/// once it is over, within their deadline).
pub(super) fn duplicated_replies_from_the_leader(adapter: Adapter) {
    use iggy_route_tests::cluster::adversary::Misbehaviour;
    let _dog = watchdog("duplicated_replies", Duration::from_secs(180));
    let world = world();
    let client = world.connect(adapter, 2);
    let s = call!(client, create_stream("dups")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 1)).unwrap().summary.id;
    std::thread::sleep(Duration::from_millis(1_200));
    let before = world.requests(LEADER, code::CREATE_PARTITIONS);
    let streams_before = world.requests(LEADER, code::CREATE_STREAM);
    let rounds = 3u64;
    let mut oks = 0u64;
    let mut failures = Vec::new();
    for i in 0..rounds {
        // Short windows: each link to the leader closes right after its sign-in while it
        // lasts, and the client redials at once (see `redial_storm`).
        world.cluster.misbehave(
            LEADER,
            Misbehaviour::DuplicateReplies,
            Duration::from_millis(300),
        );
        let added = call!(client, create_partitions(s, t, 1));
        if added.is_ok() {
            oks += 1;
        } else if !unknown_outcome(&added) {
            failures.push(format!("create_partitions {i}: {}", outcome(&added)));
        }
        let wanted = format!("dup-{i}");
        let created = call!(client, create_stream(&wanted));
        let good = matches!(&created, Ok(details) if details.name.as_str() == wanted)
            || unknown_outcome(&created);
        if !good {
            failures.push(format!("create_stream {i}: {created:?}"));
        }
        let topic = call!(client, get_topic(s, t));
        let good = matches!(
            &topic,
            Ok(Some(details)) if details.summary.id == t && details.summary.name.as_str() == "t"
        ) || unknown_outcome(&topic);
        if !good {
            failures.push(format!("get_topic {i}: {topic:?}"));
        }
        let listed = call!(client, get_topics(s));
        let good = matches!(&listed, Ok(list) if list.len() == 1 && list[0].id == t)
            || unknown_outcome(&listed);
        if !good {
            failures.push(format!("get_topics {i}: {listed:?}"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let written = world.requests(LEADER, code::CREATE_PARTITIONS) - before;
    assert!(
        written <= rounds && written >= oks,
        "create_partitions written {written} times, {oks} ok"
    );
    let streams = world.requests(LEADER, code::CREATE_STREAM) - streams_before;
    assert!(
        streams <= rounds,
        "create_stream written {streams} times for {rounds} calls"
    );
    let partitions = call!(client, get_topic(s, t))
        .unwrap()
        .unwrap()
        .summary
        .partitions_count;
    assert_eq!(u64::from(partitions), 1 + written);
}
both_adapters!(duplicated_replies_from_the_leader);

/// A node that signs a link in and then breaks the protocol on it (here: every reply written
/// twice) must not be redialled in a loop: the backoff that protects a node failing its
/// sign-ins must protect it too.
pub(super) fn redial_storm(adapter: Adapter) {
    use iggy_route_tests::cluster::adversary::Misbehaviour;
    let _dog = watchdog("redial_storm", Duration::from_secs(60));
    let world = world();
    let mut config = world.config(2);
    config.request_timeout = Duration::from_millis(1_500);
    let client = Cl::connect(adapter, config).unwrap();
    call!(client, create_stream("storm")).unwrap();
    let window = Duration::from_millis(500);
    let logins = world.cluster.stats(LEADER).logins;
    world
        .cluster
        .misbehave(LEADER, Misbehaviour::DuplicateReplies, window);
    // The first write's reply comes twice and closes its link; the second waits for a link
    // to the leader for the rest of the window.
    let first = call!(client, create_stream("storm-2"));
    let during = call!(client, create_stream("storm-3"));
    assert!(
        (first.is_ok() || unknown_outcome(&first)) && (during.is_ok() || unknown_outcome(&during)),
        "{first:?} {during:?}"
    );
    std::thread::sleep(window);
    let signed_in = world.cluster.stats(LEADER).logins - logins;
    let violations = client.stats().protocol_violations;
    assert!(
        signed_in <= 50,
        "{signed_in} sign-ins on the leader (and {violations} links closed for a protocol \
         violation) in {window:?}; the write: {}",
        outcome(&during)
    );
}
both_adapters!(redial_storm);

/// Each reconnect of the blocking client must not nest its link's span in the previous
/// link's span: the chain grows by one per reconnect for the client's whole life, every log
/// line carries all of it, and a subscriber that closes spans recursively (the common
/// `tracing_subscriber::fmt()`) overflows the I/O thread's stack when the chain is dropped,
/// aborting the process (seen after ~7,600 reconnects).
pub(super) fn link_spans_do_not_nest_across_reconnects(adapter: Adapter) {
    let _dog = watchdog("span_nesting", Duration::from_secs(120));
    let world = world();
    let capturing = capture();
    let client = world.connect(adapter, 0);
    for _ in 0..30 {
        world.cluster.drop_connections(0);
        let by = Instant::now() + Duration::from_secs(5);
        while call!(client, ping()).is_err() {
            assert!(Instant::now() < by, "no ping after a dropped connection");
        }
    }
    let reconnects = client.stats().reconnects;
    drop(client);
    drop(capturing);
    let ports: Vec<String> = world
        .cluster
        .addrs()
        .iter()
        .map(|addr| format!("addr={addr}"))
        .collect();
    let ours: Vec<usize> = lock(&LINK_SPANS)
        .iter()
        .filter(|(text, _)| ports.iter().any(|port| text.contains(port.as_str())))
        .map(|(_, depth)| *depth)
        .collect();
    assert!(!ours.is_empty(), "no link span seen");
    let deepest = ours.iter().copied().max().unwrap_or(0);
    assert!(
        deepest <= 3,
        "after {reconnects} reconnects a link span sits {deepest} spans deep"
    );
}

mod link_spans_do_not_nest_across_reconnects {
    #[test]
    fn tokio() {
        super::link_spans_do_not_nest_across_reconnects(super::Adapter::Tokio);
    }

    #[test]
    fn mio() {
        super::link_spans_do_not_nest_across_reconnects(super::Adapter::Mio);
    }
}

/// A node that falls silent costs a call at most its request timeout, for every plane; and
/// the client is of use again once it answers.
pub(super) fn silent_nodes_cost_at_most_the_request_timeout(adapter: Adapter) {
    let _dog = watchdog("silent_nodes", Duration::from_secs(180));
    let world = world();
    let mut config = world.config(1);
    config.request_timeout = Duration::from_secs(2);
    config.attempt_timeout = Duration::from_millis(1_500);
    config.connect_timeout = Duration::from_millis(500);
    let client = Cl::connect(adapter, config).unwrap();
    let s = call!(client, create_stream("silent")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 3)).unwrap().summary.id;
    for p in 0..3 {
        assert!(world.cluster.set_primary(s, t, p, p as usize));
        call!(
            client,
            send(s, t, Partitioning::partition_id(p), messages("x", 1))
        )
        .unwrap();
    }
    let bound = Duration::from_secs(2) + Duration::from_millis(1_500);
    let mut failures = Vec::new();
    let mut timed = |what: &str, run: &mut dyn FnMut() -> String| {
        let started = Instant::now();
        let shown = run();
        let took = started.elapsed();
        if took > bound {
            failures.push(format!("{what}: {shown} after {took:?}"));
        }
    };
    // The session's node.
    world.cluster.set_reply_delay(1, Duration::from_secs(30));
    timed("ping", &mut || outcome(&call!(client, ping())));
    timed("get_me", &mut || outcome(&call!(client, get_me())));
    timed("get_clients", &mut || {
        outcome(&call!(client, get_clients()))
    });
    timed("get_streams", &mut || {
        outcome(&call!(client, get_streams()))
    });
    world.cluster.set_reply_delay(1, Duration::ZERO);
    // The metadata leader.
    world
        .cluster
        .set_reply_delay(LEADER, Duration::from_secs(30));
    timed("create_stream", &mut || {
        outcome(&call!(client, create_stream("silent-2")))
    });
    timed("update_topic", &mut || {
        outcome(&call!(
            client,
            update_topic(s, t, "t2", TopicUpdateOptions::default())
        ))
    });
    timed("create_user", &mut || {
        outcome(&call!(
            client,
            create_user("silent-user", "silent-pw", UserStatus::Active, None)
        ))
    });
    world.cluster.set_reply_delay(LEADER, Duration::ZERO);
    // Partition 2's primary.
    world.cluster.set_reply_delay(2, Duration::from_secs(30));
    timed("get_consumer_offset", &mut || {
        outcome(&call!(
            client,
            get_consumer_offset(consumer(1), s, t, Some(2))
        ))
    });
    timed("store_offset", &mut || {
        outcome(&call!(client, store_offset(consumer(1), s, t, 2, 0)))
    });
    timed("flush", &mut || {
        outcome(&call!(client, flush_unsaved_buffer(s, t, 2, false)))
    });
    world.cluster.set_reply_delay(2, Duration::ZERO);
    assert!(
        failures.is_empty(),
        "past the request timeout: {failures:#?}"
    );
    // Answering again, the client is of use again.
    let by = Instant::now() + Duration::from_secs(15);
    loop {
        let pinged = call!(client, ping());
        let stored = call!(client, store_offset(consumer(1), s, t, 2, 0));
        if pinged.is_ok() && stored.is_ok() {
            break;
        }
        assert!(
            Instant::now() < by,
            "never recovered: {pinged:?} {stored:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
both_adapters!(silent_nodes_cost_at_most_the_request_timeout);

/// The session's node stops: every kind of command is answered, typed, within its bound, and
/// works again on another node.
pub(super) fn session_node_stops(adapter: Adapter) {
    let _dog = watchdog("session_node_stops", Duration::from_secs(180));
    let world = world();
    let client = world.connect(adapter, 2);
    let s = call!(client, create_stream("stop")).unwrap().id;
    let t = call!(client, create_topic(s, "t", 2)).unwrap().summary.id;
    assert!(world.cluster.set_primary(s, t, 0, 0));
    assert!(world.cluster.set_primary(s, t, 1, 1));
    let before = call!(client, get_me()).unwrap();
    world.rt.block_on(world.cluster.stop_node(2));
    let by = Instant::now() + Duration::from_secs(30);
    let mut last = Vec::new();
    loop {
        let results = vec![
            outcome(&call!(client, get_me())),
            outcome(&call!(client, ping())),
            outcome(&call!(client, get_clients())),
            outcome(&call!(client, get_streams())),
            outcome(&call!(
                client,
                create_topic(s, &format!("t{}", last.len()), 1)
            )),
            outcome(&call!(
                client,
                get_consumer_offset(consumer(1), s, t, Some(1))
            )),
            outcome(&call!(
                client,
                send(s, t, Partitioning::partition_id(0), messages("x", 1))
            )),
        ];
        if results.iter().all(|r| r == "ok") {
            break;
        }
        last.push(results);
        assert!(Instant::now() < by, "never recovered: {last:#?}");
    }
    let after = call!(client, get_me()).unwrap();
    assert_ne!(after.client.client_id, before.client.client_id);
    assert!(client.stats().session_moves >= 1);
    world.rt.block_on(world.cluster.restart_node(2));
}
both_adapters!(session_node_stops);

/// The metadata leader answers writes still in flight "not committed yet" (57) in their
/// result section (seen on the real cluster under concurrent writes: `create_topic` failed
/// with `TransientNotCommitted`). The outcome is unknown, so the client writes the same bytes
/// again on the same link until it is answered: the write succeeds once, with no duplicate.
pub(super) fn metadata_writes_answered_57_are_replayed(adapter: Adapter) {
    use iggy_route_tests::cluster::adversary::Misbehaviour;
    let _dog = watchdog("metadata_57", Duration::from_secs(60));
    let world = world();
    let client = world.connect(adapter, 2);
    let name = format!("in-flight-{adapter:?}");
    let window = Duration::from_millis(300);
    world
        .cluster
        .misbehave(LEADER, Misbehaviour::NotCommitted, window);
    let created = call!(client, create_stream(&name)).unwrap();
    let topic = call!(client, create_topic(created.id, "t", 2)).unwrap();
    assert_eq!(topic.summary.partitions_count, 2);
    let streams = call!(client, get_streams()).unwrap();
    assert_eq!(
        streams
            .iter()
            .filter(|s| s.name.as_str() == name.as_str())
            .count(),
        1
    );
    let stats = client.stats();
    assert!(stats.replays >= 1, "the 57s were replayed: {stats:?}");
    assert_eq!(stats.session_moves, 0);
}
both_adapters!(metadata_writes_answered_57_are_replayed);
