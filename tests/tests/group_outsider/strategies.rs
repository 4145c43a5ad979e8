//! Polling strategies other than `Next` (section 11).

use std::time::Duration;

use iggy_route_core::wire::PollingStrategy;

use crate::support::{Adapter, Env, Mio, Spec, Tokio, Watch, finish};

// ---- 11. polling strategies other than Next -----------------------------------------------

/// A (strategy Next) alone reads and commits 30 of each of two partitions and keeps
/// reading nothing; B joins with `strategy` and takes partition 1. B must not hand out
/// what A committed, partition 1's stored offset must not go down, and B, reading
/// partition 1 to its end, must hand out everything past A's commit.
fn late_joiner_with_strategy<A: Adapter>(strategy: PollingStrategy) {
    const GROUP: &str = "strategies";
    const LEN: u64 = 60;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 10);
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let mut a = A::member(&client_a, Spec::new(GROUP));
    A::join(&env, &mut a).unwrap();
    assert!(
        watch.read_until::<A>(&env, "A", &mut a, Duration::from_secs(3), |w| {
            w.max_of("A", 0) >= Some(29) && w.max_of("A", 1) >= Some(29)
        })
    );
    A::commit(&env, &mut a).unwrap();
    watch.sample(&env, "A committed");
    let committed = watch.stored_now(&env);
    let mut b = A::member(
        &client_b,
        Spec {
            strategy,
            ..Spec::new(GROUP)
        },
    );
    A::join(&env, &mut b).unwrap();
    for _ in 0..15 {
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(200));
    }
    A::commit(&env, &mut b).unwrap();
    watch.sample(&env, "B committed");
    let after_b = watch.stored_now(&env);
    // B reads partition 1 to its end: what the group never read of it (past A's commit)
    // must all be handed out.
    watch.drain::<A>(
        &env,
        "B",
        &mut b,
        Duration::from_millis(400),
        Duration::from_secs(3),
    );
    let skipped: Vec<u64> = watch
        .missing(&[0, LEN])
        .remove(&1)
        .unwrap_or_default()
        .into_iter()
        .filter(|offset| *offset >= 30)
        .collect();
    println!(
        "[{}] {strategy:?}: A committed {committed:?}; members {:?}; B handed {:?}; stored after \
         B's commit {after_b:?}; never handed of p1 past A's commit: {skipped:?}",
        A::NAME,
        env.members(GROUP),
        watch.handed_to("B")
    );
    let breaches = watch.breaches();
    assert!(
        !breaches.contains_key("committed_again") && !breaches.contains_key("decreases"),
        "{}: a late joiner with {strategy:?}: {breaches:#?}",
        A::NAME
    );
    assert!(
        skipped.is_empty(),
        "{}: a late joiner with {strategy:?} skipped what the group never read: {skipped:?}",
        A::NAME
    );
    A::shutdown(&env, a, false).unwrap();
    A::shutdown(&env, b, false).unwrap();
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn late_joiner_polling_first_tokio() {
    late_joiner_with_strategy::<Tokio>(PollingStrategy::First);
}

#[test]
fn late_joiner_polling_first_mio() {
    late_joiner_with_strategy::<Mio>(PollingStrategy::First);
}

#[test]
fn late_joiner_polling_from_offset_zero_tokio() {
    late_joiner_with_strategy::<Tokio>(PollingStrategy::Offset(0));
}

#[test]
fn late_joiner_polling_from_offset_zero_mio() {
    late_joiner_with_strategy::<Mio>(PollingStrategy::Offset(0));
}

#[test]
fn late_joiner_polling_last_tokio() {
    late_joiner_with_strategy::<Tokio>(PollingStrategy::Last);
}

#[test]
fn late_joiner_polling_last_mio() {
    late_joiner_with_strategy::<Mio>(PollingStrategy::Last);
}

/// A group whose members all poll `First` (one config, as deployed): m1 reads and commits
/// half of both partitions and stays; m2 joins. Either m2 re-reads its first assignment
/// from the start (what `First` says for a member's first assignment) and so hands out
/// what m1 committed, or it goes on from the stored offset.
fn all_members_first<A: Adapter>() {
    late_joiner_with_strategy_both::<A>(PollingStrategy::First);
}

fn late_joiner_with_strategy_both<A: Adapter>(strategy: PollingStrategy) {
    const GROUP: &str = "all-first";
    const LEN: u64 = 60;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 10);
    let client_1 = A::connect(&env, env.config());
    let client_2 = A::connect(&env, env.config());
    let spec = Spec {
        strategy,
        ..Spec::new(GROUP)
    };
    let mut m1 = A::member(&client_1, spec);
    A::join(&env, &mut m1).unwrap();
    assert!(
        watch.read_until::<A>(&env, "m1", &mut m1, Duration::from_secs(3), |w| {
            w.max_of("m1", 0) >= Some(29) && w.max_of("m1", 1) >= Some(29)
        })
    );
    A::commit(&env, &mut m1).unwrap();
    let committed = watch.stored_now(&env);
    let mut m2 = A::member(&client_2, spec);
    A::join(&env, &mut m2).unwrap();
    for _ in 0..15 {
        let _ = watch.next::<A>(&env, "m2", &mut m2, Duration::from_millis(200));
    }
    A::commit(&env, &mut m2).unwrap();
    watch.sample(&env, "m2 committed");
    println!(
        "[{}] all {strategy:?}: m1 committed {committed:?}; members {:?}; m2 handed {:?}; stored \
         {:?}",
        A::NAME,
        env.members(GROUP),
        watch.handed_to("m2"),
        watch.stored_now(&env)
    );
    let breaches = watch.breaches();
    assert!(
        !breaches.contains_key("committed_again") && !breaches.contains_key("decreases"),
        "{}: members all polling {strategy:?}: {breaches:#?}",
        A::NAME
    );
    A::shutdown(&env, m1, false).unwrap();
    A::shutdown(&env, m2, false).unwrap();
    A::close(&env, client_1);
    A::close(&env, client_2);
    finish::<A>(&env);
}

#[test]
fn members_all_polling_first_tokio() {
    all_members_first::<Tokio>();
}

#[test]
fn members_all_polling_first_mio() {
    all_members_first::<Mio>();
}
