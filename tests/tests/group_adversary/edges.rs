//! The group adversary's second half: a member joining a reading group, bounded waits, a
//! deleted group and a partition just added (see the parent file).

use super::*;

// ---- 5. a fourth member joins a reading group ------------------------------------------

/// Three members read (committing after each poll, each message taking a millisecond to
/// process); a fourth joins once 300 messages are read. Whatever the rebalance does to an
/// old owner's commit of a partition it lost, no `next()` returns an error.
fn fourth_member_joins_readers<A: Adapter>() {
    const PARTITIONS: u32 = 6;
    const PER_PARTITION: u64 = 200;
    const TOTAL: usize = (PER_PARTITION * PARTITIONS as u64) as usize;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, PER_PARTITION);
    let spec = Spec {
        batch: 5,
        ..Spec::default()
    };
    let clients: Vec<A::Client> = (0..4).map(|_| A::connect(&env, env.config())).collect();
    let mut first_three = Vec::new();
    for client in &clients[..3] {
        let mut member = A::member(client, spec);
        A::join(&env, &mut member).unwrap();
        first_three.push(member);
    }
    let ledger = Mutex::new(Ledger::default());
    let errors = Mutex::new(Vec::<String>::new());
    let give_up = Instant::now() + Duration::from_secs(20);
    let read = |name: &'static str, mut member: A::Consumer| {
        while ledger.lock().unwrap().distinct() < TOTAL && Instant::now() < give_up {
            match A::next_within(&env, &mut member, Duration::from_millis(300)) {
                Some(Ok(received)) => {
                    ledger.lock().unwrap().record(name, &received);
                    std::thread::sleep(Duration::from_millis(1));
                }
                Some(Err(error)) => errors.lock().unwrap().push(format!("{name}: {error:?}")),
                None => {}
            }
        }
        let stats = A::stats(&member);
        let shutdown = A::shutdown(&env, member, true);
        (name, stats, shutdown.map_err(|error| format!("{error:?}")))
    };
    let (outcomes, joined_at) = std::thread::scope(|scope| {
        let mut readers = Vec::new();
        for (name, member) in ["m1", "m2", "m3"].into_iter().zip(first_three) {
            readers.push(scope.spawn(move || read(name, member)));
        }
        while ledger.lock().unwrap().distinct() < 300 {
            assert!(Instant::now() < give_up, "{}: the three stalled", A::NAME);
            std::thread::sleep(Duration::from_millis(2));
        }
        let joined_at = ledger.lock().unwrap().distinct();
        let fourth = A::member(&clients[3], spec);
        readers.push(scope.spawn(move || read("m4", fourth)));
        let outcomes: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        (outcomes, joined_at)
    });
    let ledger = ledger.into_inner().unwrap();
    let errors = errors.into_inner().unwrap();
    println!(
        "[{}] the fourth joined at {joined_at} read; {} distinct of {TOTAL} ({} handed out, {} \
         duplicates); handed out again to the same member out of order (reported, not \
         asserted here): {:?}; errors {}: {:?}; members {:?}; {}; outcomes {outcomes:?}",
        A::NAME,
        ledger.distinct(),
        ledger.total(),
        ledger.duplicates().len(),
        ledger.out_of_order(),
        errors.len(),
        errors.iter().take(8).collect::<Vec<_>>(),
        env.members(GROUP),
        ledger.summary(),
    );
    assert!(
        errors.is_empty(),
        "{}: next() returned {} errors around the fourth member's join: {:?}",
        A::NAME,
        errors.len(),
        errors.iter().take(8).collect::<Vec<_>>()
    );
    assert_eq!(
        ledger.distinct(),
        TOTAL,
        "{}: missing {:?}",
        A::NAME,
        ledger.missing(PARTITIONS, PER_PARTITION)
    );
    for client in clients {
        A::close(&env, client);
    }
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn fourth_member_joining_readers_causes_no_errors_tokio() {
    fourth_member_joins_readers::<Tokio>();
}

#[test]
fn fourth_member_joining_readers_causes_no_errors_mio() {
    fourth_member_joins_readers::<Mio>();
}

// ---- 6. next_before is bounded (mio) ---------------------------------------------------

/// A blocking member that has read everything keeps polling; `fault` then makes the nodes
/// that served those polls stop answering. Each `next_before` with a 300 ms deadline must
/// return within 300 ms + 400 ms.
fn next_before_is_bounded(fault: &str) {
    let env = Env::start(3, 2, 0);
    for partition in 0..2 {
        assert!(env.cluster.set_primary(STREAM, TOPIC, partition, 2));
    }
    env.fill(2, 10);
    let client = Mio::connect(&env, env.config());
    let mut member = Mio::member(&client, Spec::default());
    for _ in 0..20 {
        let next = Mio::next_within(&env, &mut member, Duration::from_secs(3));
        assert!(matches!(next, Some(Ok(_))), "{next:?}");
    }
    // Which nodes serve this member's polls now that it waits for more.
    let before = env.requests_per_node(iggy_route_core::wire::code::POLL_MESSAGES);
    assert!(Mio::next_within(&env, &mut member, Duration::from_millis(300)).is_none());
    let after = env.requests_per_node(iggy_route_core::wire::code::POLL_MESSAGES);
    let serving: Vec<usize> = (0..3).filter(|n| after[*n] > before[*n]).collect();
    assert!(
        !serving.is_empty(),
        "no node served a poll: {before:?} {after:?}"
    );
    for node in &serving {
        match fault {
            "silent" => env.cluster.set_reply_delay(*node, Duration::from_secs(2)),
            _ => env.block_on(env.cluster.stop_node(*node)),
        }
    }
    let mut timings = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let next = member.next_before(started + Duration::from_millis(300));
        timings.push((
            started.elapsed(),
            next.map(|r| r.map(|m| m.message.offset).map_err(|e| format!("{e:?}"))),
        ));
    }
    println!("[mio, {fault} node(s) {serving:?}] next_before(300 ms) took {timings:?}");
    for node in serving {
        env.cluster.set_reply_delay(node, Duration::ZERO);
        env.block_on(env.cluster.restart_node(node));
    }
    for (took, _) in &timings {
        assert!(
            *took <= Duration::from_millis(700),
            "next_before(300 ms) with {fault} node(s) returned after {took:?}: {timings:?}"
        );
    }
    drop(member);
    client.shutdown();
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn next_before_is_bounded_while_the_serving_node_is_silent_mio() {
    next_before_is_bounded("silent");
}

#[test]
fn next_before_is_bounded_while_the_serving_node_is_stopped_mio() {
    next_before_is_bounded("stopped");
}

// ---- 7. the group is deleted under a reading member ------------------------------------

/// A member (which may not create the group) reads; the group is deleted. The error the
/// member sees names the group-not-found code, never `ErrorCode::Other(5000)`.
fn deleted_group_error_is_named<A: Adapter>() {
    const PARTITIONS: u32 = 4;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, 100);
    let admin = env.admin();
    env.block_on(admin.create_consumer_group(STREAM, TOPIC, GROUP))
        .unwrap();
    let client = A::connect(&env, env.config());
    let mut member = A::member(
        &client,
        Spec {
            batch: 5,
            create_group: false,
            ..Spec::default()
        },
    );
    let mut read = 0;
    while read < 20 {
        match A::next_within(&env, &mut member, Duration::from_secs(3)) {
            Some(Ok(_)) => read += 1,
            other => panic!("{}: before the delete: {other:?}", A::NAME),
        }
    }
    env.block_on(admin.delete_consumer_group(STREAM, TOPIC, GROUP))
        .unwrap();
    let deleted = Instant::now();
    let server_code = |error: &ClientError| {
        if let ClientError::Request(RequestError::Server { code }) = error {
            Some(*code)
        } else {
            None
        }
    };
    // Errors until the first that carries the group-not-found code (or four of them).
    let mut seen = Vec::new();
    let mut after = 0;
    while deleted.elapsed() < SYNC_INTERVAL + Duration::from_secs(3) && seen.len() < 4 {
        match A::next_within(&env, &mut member, Duration::from_millis(500)) {
            Some(Ok(_)) => after += 1,
            Some(Err(error)) => {
                let group_gone =
                    server_code(&error).is_some_and(|code| matches!(code.as_u32(), 5000 | 5003));
                seen.push(error);
                if group_gone {
                    break;
                }
            }
            None => {}
        }
    }
    println!(
        "[{}] after the delete: {after} more messages, then {seen:?} after {:?}",
        A::NAME,
        deleted.elapsed()
    );
    let first = seen.first().unwrap_or_else(|| {
        panic!(
            "{}: no error within {:?} of the group's deletion",
            A::NAME,
            deleted.elapsed()
        )
    });
    for error in &seen {
        let code = server_code(error);
        assert!(
            code != Some(ErrorCode::Other(5000)) && code != Some(ErrorCode::Other(5003)),
            "{}: an unnamed group code: {seen:?}",
            A::NAME
        );
    }
    assert!(
        matches!(
            server_code(first),
            Some(ErrorCode::ConsumerGroupIdNotFound | ErrorCode::ConsumerGroupNameNotFound)
        ),
        "{}: the first error the member saw after the delete: {first:?} (all: {seen:?})",
        A::NAME
    );
    drop(member);
    A::close(&env, client);
    env.block_on(admin.shutdown());
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn deleted_group_error_names_the_code_tokio() {
    deleted_group_error_is_named::<Tokio>();
}

#[test]
fn deleted_group_error_names_the_code_mio() {
    deleted_group_error_is_named::<Mio>();
}

// ---- 8. a send to a partition just added, with a lagging follower ----------------------

/// One client raises a topic's partition count from 3 to 6 on the metadata leader (node
/// 1); at once a fresh client, whose session sits on node 0, a follower that sees metadata
/// half a second late, sends to partition 3. The count it reads first is the old one: it
/// reads again (for up to `own_write_settle`) and the send succeeds. A partition that does
/// not exist fails typed, `PartitionOutOfRange`, once that while is over.
fn send_to_a_partition_just_added<A: Adapter>() {
    let env = Env::start(3, 3, 1);
    env.cluster.with_state(|state| {
        state.set_lag(Lag {
            follower_metadata: Duration::from_millis(500),
            ..state.lag()
        });
    });
    let admin = env.admin();
    env.block_on(admin.create_partitions(STREAM, TOPIC, 3))
        .unwrap();
    let connecting = Instant::now();
    let fresh = A::connect(&env, env.config());
    let connected_in = connecting.elapsed();
    let sending = Instant::now();
    let sent = A::send(&env, &fresh, 3, vec![message(3, 0)]);
    let took = sending.elapsed();
    let stored = env.cluster.partition_len(STREAM, TOPIC, 3);
    println!(
        "[{}] connect {connected_in:?}; send to partition 3 took {took:?}: {sent:?}; partition 3 \
         holds {stored}; router {:?}",
        A::NAME,
        A::router_stats(&fresh)
    );
    assert!(
        took <= REQUEST_TIMEOUT + Duration::from_secs(1),
        "{}: the send took {took:?}",
        A::NAME
    );
    match &sent {
        Ok(receipt) => {
            assert_eq!(receipt.partition_id, 3);
            assert_eq!(stored, 1, "acknowledged but not stored");
        }
        Err(other) => panic!(
            "{}: the send to a partition just added failed: {other:?}",
            A::NAME
        ),
    }
    let sending = Instant::now();
    let beyond = A::send(&env, &fresh, 9, vec![message(9, 0)]);
    let took = sending.elapsed();
    assert!(
        matches!(
            beyond,
            Err(ClientError::Request(RequestError::PartitionOutOfRange {
                partition: 9,
                ..
            }))
        ),
        "{}: {beyond:?}",
        A::NAME
    );
    assert!(
        took <= Duration::from_secs(3),
        "{}: a partition that does not exist took {took:?} to fail",
        A::NAME
    );
    A::close(&env, fresh);
    env.block_on(admin.shutdown());
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn send_to_a_partition_just_added_while_a_follower_lags_tokio() {
    send_to_a_partition_just_added::<Tokio>();
}

#[test]
fn send_to_a_partition_just_added_while_a_follower_lags_mio() {
    send_to_a_partition_just_added::<Mio>();
}
