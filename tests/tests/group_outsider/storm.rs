//! No retry storm: an idle group, a missing group (section 13).

use std::time::{Duration, Instant};

use crate::support::{
    Adapter, Env, Mio, Spec, Tokio, Watch, finish, requests_between, server_code,
};

// ---- 13. no retry storm ------------------------------------------------------------------

/// Four members on two partitions, everything read: two members have no partition. Over
/// two seconds the whole group costs polls at `poll_interval` for the two partitions,
/// a sync a second per member and little else.
fn idle_cost<A: Adapter>() {
    const GROUP: &str = "idle";
    let env = Env::start(3, 2, 1);
    env.fill(2, 10);
    let watch = Watch::new(GROUP, 2, 10);
    let clients: Vec<A::Client> = (0..4).map(|_| A::connect(&env, env.config())).collect();
    let spec = Spec {
        poll_interval: Duration::from_millis(50),
        ..Spec::new(GROUP)
    };
    let mut members: Vec<A::Consumer> = clients.iter().map(|c| A::member(c, spec)).collect();
    for member in &mut members {
        A::join(&env, member).unwrap();
    }
    let names = ["m0", "m1", "m2", "m3"];
    let give_up = Instant::now() + Duration::from_secs(3);
    while watch.distinct() < 20 && Instant::now() < give_up {
        for (name, member) in names.iter().zip(members.iter_mut()) {
            let _ = watch.next::<A>(&env, name, member, Duration::from_millis(50));
        }
    }
    let before = env.requests();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        for (name, member) in names.iter().zip(members.iter_mut()) {
            let _ = watch.next::<A>(&env, name, member, Duration::from_millis(25));
        }
    }
    let cost = requests_between(&before, &env.requests());
    let total: u64 = cost.values().sum();
    println!("[{}] idle for 2 s: {total} requests {cost:?}", A::NAME);
    watch.assert_clean(A::NAME, &[10, 10], false);
    // Polls: 2 partitions x 20/s x 2 s = 80; syncs: 4 members x 2; heartbeats and commits:
    // a few. Three times that is a storm.
    assert!(
        total <= 3 * (80 + 8 + 20),
        "{}: idle group cost {total}: {cost:?}",
        A::NAME
    );
    for member in members {
        A::shutdown(&env, member, false).unwrap();
    }
    for client in clients {
        A::close(&env, client);
    }
    finish::<A>(&env);
}

#[test]
fn an_idle_group_costs_few_requests_tokio() {
    idle_cost::<Tokio>();
}

#[test]
fn an_idle_group_costs_few_requests_mio() {
    idle_cost::<Mio>();
}

/// A member of a group that does not exist, which it may not create: `join()` fails
/// typed, and so does `next()`, a bounded number of times a second.
fn missing_group<A: Adapter>() {
    let env = Env::start(3, 2, 1);
    let client = A::connect(&env, env.config());
    let mut member = A::member(
        &client,
        Spec {
            create_group: false,
            poll_interval: Duration::from_millis(20),
            ..Spec::new("nobody")
        },
    );
    let joined = A::join(&env, &mut member);
    let before = env.request_total();
    let started = Instant::now();
    let mut errors = Vec::new();
    while started.elapsed() < Duration::from_secs(1) {
        if let Some(Err(error)) = A::next_within(&env, &mut member, Duration::from_millis(100)) {
            errors.push(server_code(&error));
        }
    }
    let cost = env.request_total() - before;
    println!(
        "[{}] join {joined:?}; next() errors {errors:?}; {cost} requests in 1 s",
        A::NAME
    );
    assert!(
        matches!(joined.as_ref().map_err(server_code), Err(Some(5000 | 5003)))
            || matches!(&joined, Err(e) if format!("{e:?}").contains("ConsumerGroupNameNotFound")),
        "{}: join() of a missing group: {joined:?}",
        A::NAME
    );
    assert!(cost <= 60, "{}: {cost} requests in a second", A::NAME);
    drop(member);
    A::close(&env, client);
    finish::<A>(&env);
}

#[test]
fn a_missing_group_fails_typed_and_paced_tokio() {
    missing_group::<Tokio>();
}

#[test]
fn a_missing_group_fails_typed_and_paced_mio() {
    missing_group::<Mio>();
}
