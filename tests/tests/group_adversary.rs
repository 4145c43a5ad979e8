//! Adversarial tests of the consumer-group promise, on both adapters, against the loopback
//! cluster without the routing commands (as the real server is):
//!
//! > every message of a topic is handed out once to the group's members, in order per
//! > partition; committed offsets are stored on the primaries; a stored group offset never
//! > decreases; no join costs more than a handful of requests per partition; every wait is
//! > bounded.
//!
//! Each scenario is written once over [`support::Adapter`] and run by one `#[test]` per
//! adapter. The tests look at the consumer from outside only: what `next()` hands out and
//! returns, and what the cluster stored and counted.

#![allow(clippy::unwrap_used)]

#[path = "group_adversary/support.rs"]
mod support;

#[path = "group_adversary/edges.rs"]
mod edges;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use iggy_route_core::RequestError;
use iggy_route_core::wire::ErrorCode;
use iggy_route_tests::cluster::Lag;
use iggy_route_tokio::{AutoCommit, ClientError};
use support::{
    Adapter, Env, GROUP, Ledger, Mio, OffsetWatch, REQUEST_TIMEOUT, STREAM, SYNC_INTERVAL, Spec,
    TOPIC, Tokio, drain, message, requests_between,
};

// ---- 1. a slow member re-delivers ------------------------------------------------------

/// Member A joins alone, is handed 40 messages, commits them and stops asking. Member D
/// joins (taking some of A's partitions), reads everything it is given and leaves with a
/// commit. A resumes. A committed all it was handed before D joined, so nothing may be
/// handed out twice; all 400 messages must be; every stored offset ends at 99 and is never
/// seen to go down.
fn slow_member_re_delivers<A: Adapter>() {
    const PARTITIONS: u32 = 4;
    const PER_PARTITION: u64 = 100;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, PER_PARTITION);
    let mut ledger = Ledger::default();
    let mut watch = OffsetWatch::new(GROUP, PARTITIONS);
    let client_a = A::connect(&env, env.config());
    let client_d = A::connect(&env, env.config());

    // A batch of 15 leaves some of what A polled unread when it stops at 40.
    let mut a = A::member(
        &client_a,
        Spec {
            batch: 15,
            auto_commit: AutoCommit::Never,
            ..Spec::default()
        },
    );
    A::join(&env, &mut a).unwrap();
    while ledger.handed_to("A").len() < 40 {
        match A::next_within(&env, &mut a, Duration::from_secs(3)) {
            Some(Ok(received)) => ledger.record("A", &received),
            Some(Err(error)) => panic!("{}: A's read failed: {error}", A::NAME),
            None => panic!("{}: A stalled: {}", A::NAME, ledger.summary()),
        }
        watch.sample(&env, "A reads");
    }
    A::commit(&env, &mut a).unwrap();
    watch.sample(&env, "A committed");
    let after_a_commit = watch.now(&env);

    let mut d = A::member(
        &client_d,
        Spec {
            batch: 15,
            ..Spec::default()
        },
    );
    let d_errors = drain::<A>(
        &env,
        &mut d,
        "D",
        Duration::from_secs(1),
        Duration::from_secs(10),
        &mut ledger,
        &mut watch,
    );
    let members_with_d = env.members(GROUP);
    let d_stats = A::stats(&d);
    let d_shutdown = A::shutdown(&env, d, true);
    watch.sample(&env, "D left");
    let after_d = watch.now(&env);

    // A resumes; a member may learn of its new partitions only at its next sync.
    let a_errors = drain::<A>(
        &env,
        &mut a,
        "A",
        SYNC_INTERVAL + Duration::from_secs(2),
        Duration::from_secs(15),
        &mut ledger,
        &mut watch,
    );
    let a_commit = A::commit(&env, &mut a);
    watch.sample(&env, "A's last commit");
    let a_stats = A::stats(&a);
    let a_shutdown = A::shutdown(&env, a, true);
    watch.sample(&env, "A left");
    let end = watch.now(&env);

    let duplicates = ledger.duplicates();
    println!(
        "[{}] handed out {} ({} distinct); duplicates {} (first {:?}); missing {:?}; \
         out of order {:?}; stored after A's commit {after_a_commit:?}, after D {after_d:?}, \
         at the end {end:?}; decreases {:?}; history {:?}; members while D read \
         {members_with_d:?}; A {a_stats:?} D {d_stats:?}; errors A {a_errors:?} D {d_errors:?}; \
         A commit {a_commit:?} shutdown {a_shutdown:?}, D shutdown {d_shutdown:?}; {}",
        A::NAME,
        ledger.total(),
        ledger.distinct(),
        duplicates.len(),
        duplicates.iter().take(5).collect::<Vec<_>>(),
        ledger.missing(PARTITIONS, PER_PARTITION),
        ledger.out_of_order(),
        watch.decreases,
        watch.history,
        ledger.summary(),
    );
    assert!(
        ledger.wrong_payloads.is_empty(),
        "{:?}",
        ledger.wrong_payloads
    );
    assert!(
        duplicates.is_empty(),
        "{}: {} messages handed out twice though A committed all it was handed: {:?}",
        A::NAME,
        duplicates.len(),
        duplicates.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(
        ledger.distinct(),
        (PER_PARTITION * u64::from(PARTITIONS)) as usize,
        "{}: missing {:?}",
        A::NAME,
        ledger.missing(PARTITIONS, PER_PARTITION)
    );
    assert!(
        ledger.out_of_order().is_empty(),
        "{:?}",
        ledger.out_of_order()
    );
    assert!(
        watch.decreases.is_empty(),
        "{}: stored offsets went down: {:?}",
        A::NAME,
        watch.decreases
    );
    assert_eq!(
        end,
        vec![Some(PER_PARTITION - 1); PARTITIONS as usize],
        "{}",
        A::NAME
    );
    assert!(
        a_errors.is_empty() && d_errors.is_empty(),
        "A {a_errors:?} D {d_errors:?}"
    );
    a_commit.unwrap();
    a_shutdown.unwrap();
    d_shutdown.unwrap();
    A::close(&env, client_a);
    A::close(&env, client_d);
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn slow_member_re_delivers_tokio() {
    slow_member_re_delivers::<Tokio>();
}

#[test]
fn slow_member_re_delivers_mio() {
    slow_member_re_delivers::<Mio>();
}

// ---- 1b. commit() stores what was handed out, not what was polled ----------------------

/// Beyond the eight items: test 1 showed A's `commit()` storing offset 14 of a partition of
/// which it had been handed 0..=9 (a batch of 15 polled). `commit()` "stores the offsets
/// handed out": a member that commits and then dies must not have skipped the rest.
fn commit_stores_what_was_handed_out<A: Adapter>() {
    let env = Env::start(3, 1, 1);
    env.fill(1, 100);
    let client = A::connect(&env, env.config());
    let mut member = A::member(
        &client,
        Spec {
            batch: 15,
            auto_commit: AutoCommit::Never,
            ..Spec::default()
        },
    );
    let mut last = None;
    for _ in 0..10 {
        match A::next_within(&env, &mut member, Duration::from_secs(3)) {
            Some(Ok(received)) => last = Some(received.message.offset),
            other => panic!("{}: {other:?}", A::NAME),
        }
    }
    // AutoCommit::Never: nothing may be stored before commit() (not by the poll either).
    let before_commit = env.stored(GROUP, 0);
    A::commit(&env, &mut member).unwrap();
    let stored = env.stored(GROUP, 0);
    println!(
        "[{}] handed out up to {last:?}; stored before commit() {before_commit:?}, after \
         {stored:?}",
        A::NAME
    );
    assert_eq!(before_commit, None, "{}: stored before commit()", A::NAME);
    assert_eq!(
        stored,
        last,
        "{}: commit() stored past what was handed out",
        A::NAME
    );
    A::shutdown(&env, member, false).unwrap();
    A::close(&env, client);
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn commit_stores_what_was_handed_out_tokio() {
    commit_stores_what_was_handed_out::<Tokio>();
}

#[test]
fn commit_stores_what_was_handed_out_mio() {
    commit_stores_what_was_handed_out::<Mio>();
}

// ---- 2. join storm ---------------------------------------------------------------------

/// Three members on three clients join in turn (no reads); then the second one's first
/// `next()` must hand out a message and cost the cluster fewer than 20 requests per
/// partition (every request any node received meanwhile counts, heartbeats included), and
/// so must the first one's.
fn join_storm<A: Adapter>() {
    const PARTITIONS: u32 = 6;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, 20);
    let clients: Vec<A::Client> = (0..3).map(|_| A::connect(&env, env.config())).collect();
    let mut members = Vec::new();
    let mut join_costs = Vec::new();
    for client in &clients {
        let mut member = A::member(client, Spec::default());
        let before = env.requests();
        A::join(&env, &mut member).unwrap();
        join_costs.push(requests_between(&before, &env.requests()));
        members.push(member);
    }
    let before = env.requests();
    let started = Instant::now();
    let first = A::next_within(&env, &mut members[1], Duration::from_secs(5));
    let took = started.elapsed();
    let cost = requests_between(&before, &env.requests());
    let total: u64 = cost.values().sum();
    println!(
        "[{}] first next() of the second member: {total} requests by code {cost:?} in {took:?}, \
         answered {:?}; joins cost {join_costs:?}; members {:?}; stats {:?}",
        A::NAME,
        first
            .as_ref()
            .map(|r| r.as_ref().map(|m| (m.partition_id, m.message.offset))),
        env.members(GROUP),
        A::stats(&members[1]),
    );
    assert!(
        total < 20 * u64::from(PARTITIONS),
        "{}: the first next() after a join storm cost {total} requests ({cost:?})",
        A::NAME
    );
    assert!(
        matches!(first, Some(Ok(_))),
        "{}: the first next() answered {first:?}",
        A::NAME
    );
    // The first member's assignment shrank twice since it last synced: its first next()
    // is held to the same bound.
    let before = env.requests();
    let oldest = A::next_within(&env, &mut members[0], Duration::from_secs(5));
    let cost = requests_between(&before, &env.requests());
    let total: u64 = cost.values().sum();
    println!(
        "[{}] first next() of the first member: {total} requests by code {cost:?}, answered {:?}",
        A::NAME,
        oldest
            .as_ref()
            .map(|r| r.as_ref().map(|m| (m.partition_id, m.message.offset))),
    );
    assert!(
        total < 20 * u64::from(PARTITIONS) && matches!(oldest, Some(Ok(_))),
        "{}: the first member's first next() cost {total} requests ({cost:?}): {oldest:?}",
        A::NAME
    );
    for member in members {
        A::shutdown(&env, member, false).unwrap();
    }
    for client in clients {
        A::close(&env, client);
    }
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn join_storm_first_next_is_cheap_tokio() {
    join_storm::<Tokio>();
}

#[test]
fn join_storm_first_next_is_cheap_mio() {
    join_storm::<Mio>();
}

// ---- 2b. after a join storm, a stable group reads everything once ----------------------

/// Beyond the eight items (one build of the work in progress handed a member its own
/// partition's first batch again in test 5, though the partition never changed hands).
/// Three members join in turn, then all read, round robin, until everything is handed out
/// and a sync interval more: no partition changes hands after the storm, so nothing may
/// come twice and each member's offsets of a partition must only go up.
fn join_storm_then_read_everything_once<A: Adapter>() {
    const PARTITIONS: u32 = 6;
    const PER_PARTITION: u64 = 20;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, PER_PARTITION);
    let clients: Vec<A::Client> = (0..3).map(|_| A::connect(&env, env.config())).collect();
    let spec = Spec {
        batch: 5,
        ..Spec::default()
    };
    let mut members = Vec::new();
    for client in &clients {
        let mut member = A::member(client, spec);
        A::join(&env, &mut member).unwrap();
        members.push(member);
    }
    let names = ["m1", "m2", "m3"];
    let mut ledger = Ledger::default();
    let mut errors = Vec::new();
    let total = (PER_PARTITION * u64::from(PARTITIONS)) as usize;
    let give_up = Instant::now() + Duration::from_secs(10);
    let mut complete: Option<Instant> = None;
    while Instant::now() < give_up
        && complete.is_none_or(|at| at.elapsed() < SYNC_INTERVAL + Duration::from_millis(500))
    {
        for (name, member) in names.iter().zip(members.iter_mut()) {
            match A::next_within(&env, member, Duration::from_millis(100)) {
                Some(Ok(received)) => ledger.record(name, &received),
                Some(Err(error)) => errors.push(format!("{name}: {error:?}")),
                None => {}
            }
        }
        if complete.is_none() && ledger.distinct() == total {
            complete = Some(Instant::now());
        }
    }
    let duplicates = ledger.duplicates();
    println!(
        "[{}] {} distinct of {total}, {} handed out; duplicates {:?}; out of order {:?}; errors \
         {errors:?}; members {:?}; {}",
        A::NAME,
        ledger.distinct(),
        ledger.total(),
        duplicates.iter().take(10).collect::<Vec<_>>(),
        ledger.out_of_order(),
        env.members(GROUP),
        ledger.summary(),
    );
    assert_eq!(ledger.distinct(), total, "{}", A::NAME);
    assert!(
        duplicates.is_empty() && ledger.out_of_order().is_empty(),
        "{}: handed out again: {duplicates:?}; out of order {:?}",
        A::NAME,
        ledger.out_of_order()
    );
    assert!(errors.is_empty(), "{}: {errors:?}", A::NAME);
    for member in members {
        A::shutdown(&env, member, true).unwrap();
    }
    for client in clients {
        A::close(&env, client);
    }
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn join_storm_then_read_everything_once_tokio() {
    join_storm_then_read_everything_once::<Tokio>();
}

#[test]
fn join_storm_then_read_everything_once_mio() {
    join_storm_then_read_everything_once::<Mio>();
}

// ---- 3. one client, one consumer per group ---------------------------------------------

// The library will refuse a second consumer of one group on one client with
// `ClientError::GroupConsumerExists` from `build()`, which then answers a `Result`.

#[test]
fn one_client_builds_one_consumer_per_group_tokio() {
    let env = Env::start(1, 2, 0);
    let client = Tokio::connect(&env, env.config());
    let other = Tokio::connect(&env, env.config());
    let of = |client: &iggy_route_tokio::Client, group: &str| {
        client
            .consumer(STREAM, TOPIC)
            .unwrap()
            .group(group)
            .unwrap()
    };
    let first = of(&client, GROUP).build().unwrap();
    let second = of(&client, GROUP).build();
    assert!(
        matches!(second, Err(ClientError::GroupConsumerExists { .. })),
        "a second consumer of one group on one client: {second:?}"
    );
    drop(first);
    let mut again = of(&client, GROUP).build().unwrap();
    env.block_on(again.join()).unwrap();
    env.block_on(again.shutdown(false)).unwrap();
    let mut third = of(&client, GROUP).build().unwrap();
    env.block_on(third.join()).unwrap();
    // The same group on another client is another member.
    let mut elsewhere = of(&other, GROUP).build().unwrap();
    env.block_on(elsewhere.join()).unwrap();
    // Two groups on one client.
    let mut one = of(&client, "first-of-two").build().unwrap();
    let mut two = of(&client, "second-of-two").build().unwrap();
    env.block_on(one.join()).unwrap();
    env.block_on(two.join()).unwrap();
    assert_eq!(env.members(GROUP).len(), 2);
    for consumer in [third, elsewhere, one, two] {
        env.block_on(consumer.shutdown(false)).unwrap();
    }
    env.block_on(client.shutdown());
    env.block_on(other.shutdown());
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn one_client_builds_one_consumer_per_group_mio() {
    let env = Env::start(1, 2, 0);
    let client = Mio::connect(&env, env.config());
    let other = Mio::connect(&env, env.config());
    let of = |client: &iggy_route_mio::Client, group: &str| {
        client
            .consumer(STREAM, TOPIC)
            .unwrap()
            .group(group)
            .unwrap()
    };
    let first = of(&client, GROUP).build().unwrap();
    let second = of(&client, GROUP).build();
    assert!(
        matches!(second, Err(ClientError::GroupConsumerExists { .. })),
        "a second consumer of one group on one client: {second:?}"
    );
    drop(first);
    let mut again = of(&client, GROUP).build().unwrap();
    again.join().unwrap();
    again.shutdown(false).unwrap();
    let mut third = of(&client, GROUP).build().unwrap();
    third.join().unwrap();
    let mut elsewhere = of(&other, GROUP).build().unwrap();
    elsewhere.join().unwrap();
    let mut one = of(&client, "first-of-two").build().unwrap();
    let mut two = of(&client, "second-of-two").build().unwrap();
    one.join().unwrap();
    two.join().unwrap();
    assert_eq!(env.members(GROUP).len(), 2);
    for consumer in [third, elsewhere, one, two] {
        consumer.shutdown(false).unwrap();
    }
    client.shutdown();
    other.shutdown();
    iggy_route_tests::error_events::assert_none();
}

// ---- 4. a member dropped without shutdown ----------------------------------------------

/// A and B (two clients) read a 4-partition topic; B is dropped, not shut down, while its
/// client lives on. Within `sync_interval` plus 2 s A must have been handed every message
/// of the topic not handed to B, and nothing twice except from B's last, uncommitted
/// batch of a partition.
fn dropped_member_hands_over<A: Adapter>() {
    const PARTITIONS: u32 = 4;
    const PER_PARTITION: u64 = 100;
    const BATCH: u32 = 10;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, PER_PARTITION);
    let mut ledger = Ledger::default();
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let spec = Spec {
        batch: BATCH,
        ..Spec::default()
    };
    let mut a = A::member(&client_a, spec);
    let mut b = A::member(&client_b, spec);
    A::join(&env, &mut a).unwrap();
    A::join(&env, &mut b).unwrap();
    let mut errors = Vec::new();
    for (member, consumer) in [("B", &mut b), ("A", &mut a)] {
        while ledger.handed_to(member).len() < 30 {
            match A::next_within(&env, consumer, Duration::from_secs(3)) {
                Some(Ok(received)) => ledger.record(member, &received),
                Some(Err(error)) => errors.push(format!("{member}: {error:?}")),
                None => panic!("{}: {member} stalled: {}", A::NAME, ledger.summary()),
            }
        }
    }
    let members_before = env.members(GROUP);
    let stored_at_drop: Vec<Option<u64>> = (0..PARTITIONS).map(|p| env.stored(GROUP, p)).collect();
    drop(b);
    let dropped = Instant::now();
    let bound = SYNC_INTERVAL + Duration::from_secs(2);
    let total = (PER_PARTITION * u64::from(PARTITIONS)) as usize;
    let mut complete_after = None;
    while dropped.elapsed() < bound {
        let wait = bound
            .saturating_sub(dropped.elapsed())
            .min(Duration::from_millis(300));
        match A::next_within(&env, &mut a, wait) {
            Some(Ok(received)) => ledger.record("A", &received),
            Some(Err(error)) => errors.push(format!("A: {error:?}")),
            None => {}
        }
        if complete_after.is_none() && ledger.distinct() == total {
            complete_after = Some(dropped.elapsed());
        }
    }
    // B's last batch of a partition may come again (it was handed out, perhaps not
    // stored); nothing else may.
    let last_of_b = |partition: u32| {
        ledger
            .handed_to("B")
            .iter()
            .filter(|(p, _)| *p == partition)
            .map(|(_, offset)| *offset)
            .max()
    };
    let duplicates = ledger.duplicates();
    let beyond: Vec<_> = duplicates
        .iter()
        .filter(|((partition, offset), _)| {
            let uncommitted = stored_at_drop[*partition as usize].is_none_or(|s| *offset > s);
            let last_batch =
                last_of_b(*partition).is_some_and(|last| *offset + u64::from(BATCH) > last);
            !(uncommitted || last_batch)
        })
        .collect();
    println!(
        "[{}] after B was dropped: {} of {total} handed out within {bound:?} (all after {:?}); \
         missing {:?}; duplicates {} ({} beyond B's last batch: {:?}); members before the \
         drop {members_before:?}, at the end {:?}; stored at the drop {stored_at_drop:?}; \
         errors {errors:?}; {}; A {:?}",
        A::NAME,
        ledger.distinct(),
        complete_after,
        ledger.missing(PARTITIONS, PER_PARTITION),
        duplicates.len(),
        beyond.len(),
        beyond.iter().take(5).collect::<Vec<_>>(),
        env.members(GROUP),
        ledger.summary(),
        A::stats(&a),
    );
    assert_eq!(
        ledger.distinct(),
        total,
        "{}: not every message was handed out within {bound:?} of B's drop; missing {:?}",
        A::NAME,
        ledger.missing(PARTITIONS, PER_PARTITION)
    );
    assert!(
        beyond.is_empty(),
        "{}: handed out twice: {beyond:?}",
        A::NAME
    );
    assert!(
        ledger.out_of_order().is_empty(),
        "{:?}",
        ledger.out_of_order()
    );
    assert!(
        ledger.wrong_payloads.is_empty(),
        "{:?}",
        ledger.wrong_payloads
    );
    A::shutdown(&env, a, true).unwrap();
    A::close(&env, client_a);
    A::close(&env, client_b);
    iggy_route_tests::error_events::assert_none();
}

#[test]
fn dropped_member_hands_its_partitions_over_tokio() {
    dropped_member_hands_over::<Tokio>();
}

#[test]
fn dropped_member_hands_its_partitions_over_mio() {
    dropped_member_hands_over::<Mio>();
}
