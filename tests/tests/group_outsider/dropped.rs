//! Calls given up and members dropped with a request out: a tokio `next()` future dropped
//! mid-request, its blocking twin, and a member dropped while a poll is out (sections 3 and 4).

use std::time::{Duration, Instant};

use crate::support::{Adapter, Env, Mio, Rng, SYNC_INTERVAL, Spec, Tokio, Watch, finish};

// ---- 3. a tokio next() future dropped mid-request ----------------------------------------

/// Every node answers 10 ms late; a lone member's `next()` (and `join()`) futures are
/// dropped after 0-40 ms, over and over, so most are dropped with a request out. A member
/// alone in its group must still be handed every message exactly once, in order, and store
/// no more than it handed out.
#[test]
fn next_futures_dropped_mid_request_lose_and_repeat_nothing_tokio() {
    const GROUP: &str = "cancelled";
    const LEN: u64 = 20;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 5);
    let client = Tokio::connect(&env, env.config());
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::from_millis(10));
    }
    let mut member = Tokio::member(
        &client,
        Spec {
            batch: 5,
            ..Spec::new(GROUP)
        },
    );
    // join() cancelled a few times first.
    for wait in [1, 3, 8, 20] {
        let _ = env.block_on(async {
            tokio::time::timeout(Duration::from_millis(wait), member.join()).await
        });
    }
    let mut rng = Rng::new(3);
    let mut cancelled = 0;
    let give_up = Instant::now() + Duration::from_secs(12);
    while watch.distinct() < (2 * LEN) as usize && Instant::now() < give_up {
        let wait = Duration::from_millis(rng.below(41));
        if watch.next::<Tokio>(&env, "M", &mut member, wait).is_none() {
            cancelled += 1;
        }
    }
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::ZERO);
    }
    // Nothing more may come.
    watch.drain::<Tokio>(
        &env,
        "M",
        &mut member,
        Duration::from_millis(600),
        Duration::from_secs(2),
    );
    let stats = Tokio::stats(&member);
    Tokio::commit(&env, &mut member).unwrap();
    watch.sample(&env, "committed");
    let last: Vec<Option<u64>> = (0..2).map(|p| watch.max_of("M", p)).collect();
    let stored = watch.stored_now(&env);
    println!("[tokio] {cancelled} next() futures dropped; {stats:?}; stored {stored:?}");
    watch.assert_clean("tokio", &[LEN, LEN], true);
    let duplicates = watch.duplicates();
    assert!(
        duplicates.is_empty(),
        "tokio: a lone member handed out twice after dropped futures: {duplicates:?}"
    );
    assert_eq!(
        stored, last,
        "tokio: commit() did not store what was handed out"
    );
    Tokio::shutdown(&env, member, false).unwrap();
    Tokio::close(&env, client);
    finish::<Tokio>(&env);
}

/// The blocking twin: `next_before` with deadlines of 0-25 ms while every node answers
/// 15 ms late, so most calls give up with a request out.
#[test]
fn next_before_giving_up_mid_request_loses_and_repeats_nothing_mio() {
    const GROUP: &str = "cancelled";
    const LEN: u64 = 40;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 5);
    let client = Mio::connect(&env, env.config());
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::from_millis(15));
    }
    let mut member = Mio::member(
        &client,
        Spec {
            batch: 5,
            ..Spec::new(GROUP)
        },
    );
    let mut rng = Rng::new(3);
    let mut gave_up = 0;
    let give_up = Instant::now() + Duration::from_secs(12);
    while watch.distinct() < (2 * LEN) as usize && Instant::now() < give_up {
        let wait = Duration::from_millis(rng.below(26));
        if watch.next::<Mio>(&env, "M", &mut member, wait).is_none() {
            gave_up += 1;
        }
    }
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::ZERO);
    }
    watch.drain::<Mio>(
        &env,
        "M",
        &mut member,
        Duration::from_millis(600),
        Duration::from_secs(2),
    );
    let stats = Mio::stats(&member);
    Mio::commit(&env, &mut member).unwrap();
    watch.sample(&env, "committed");
    let last: Vec<Option<u64>> = (0..2).map(|p| watch.max_of("M", p)).collect();
    let stored = watch.stored_now(&env);
    println!("[mio] {gave_up} next_before gave up; {stats:?}; stored {stored:?}");
    watch.assert_clean("mio", &[LEN, LEN], true);
    let duplicates = watch.duplicates();
    assert!(
        duplicates.is_empty(),
        "mio: a lone member handed out twice after calls gave up: {duplicates:?}"
    );
    assert_eq!(
        stored, last,
        "mio: commit() did not store what was handed out"
    );
    Mio::shutdown(&env, member, false).unwrap();
    Mio::close(&env, client);
    finish::<Mio>(&env);
}

// ---- 4. a member dropped while a poll is out ---------------------------------------------

/// A and B share four partitions; every node answers 30 ms late; B's `next()` gives up
/// after 5 ms (a request out), and B is dropped at once. Within a sync interval (plus
/// half a second of slack) A must own all four partitions, and then read everything; only
/// B's last batches may come twice.
fn dropped_mid_poll<A: Adapter>() {
    const GROUP: &str = "dropped";
    const LEN: u64 = 50;
    let env = Env::start(3, 4, 1);
    env.fill(4, LEN);
    let watch = Watch::new(GROUP, 4, 10);
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let spec = Spec {
        batch: 10,
        ..Spec::new(GROUP)
    };
    let mut a = A::member(&client_a, spec);
    let mut b = A::member(&client_b, spec);
    A::join(&env, &mut a).unwrap();
    A::join(&env, &mut b).unwrap();
    for _ in 0..15 {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(500));
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(500));
    }
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::from_millis(30));
    }
    // B asks until a call gives up with nothing (a request out), then is dropped.
    let mut tries = 0;
    while watch
        .next::<A>(&env, "B", &mut b, Duration::from_millis(5))
        .is_some()
    {
        tries += 1;
        assert!(tries < 200, "{}: B's next() never gave up", A::NAME);
    }
    drop(b);
    let dropped = Instant::now();
    for node in 0..3 {
        env.cluster.set_reply_delay(node, Duration::ZERO);
    }
    let mut owned_all_after = None;
    while dropped.elapsed() < SYNC_INTERVAL + Duration::from_millis(500) {
        let members = env.members(GROUP);
        if members.len() == 1 && members[0].1.len() == 4 {
            owned_all_after = Some(dropped.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let handover = watch.read_until::<A>(&env, "A", &mut a, Duration::from_secs(5), |w| {
        w.distinct() == (4 * LEN) as usize
    });
    let took = dropped.elapsed();
    watch.drain::<A>(
        &env,
        "A",
        &mut a,
        Duration::from_millis(400),
        Duration::from_secs(2),
    );
    println!(
        "[{}] B dropped after {tries} more; the group was A's alone after {owned_all_after:?}; \
         A read everything by {took:?}; members {:?}",
        A::NAME,
        env.members(GROUP)
    );
    assert!(
        owned_all_after.is_some(),
        "{}: B's membership outlived its drop by a sync interval: {:?}",
        A::NAME,
        env.members(GROUP)
    );
    assert!(handover, "{}: A never read everything", A::NAME);
    watch.assert_clean(A::NAME, &[LEN; 4], false);
    A::shutdown(&env, a, true).unwrap();
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn member_dropped_mid_poll_hands_over_tokio() {
    dropped_mid_poll::<Tokio>();
}

#[test]
fn member_dropped_mid_poll_hands_over_mio() {
    dropped_mid_poll::<Mio>();
}
