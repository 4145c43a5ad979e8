//! `commit()` after a rebalance took the partition; `Interval` commits (section 12).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iggy_route_tokio::AutoCommit;

use crate::support::{Adapter, Env, Mio, SYNC_INTERVAL, Sampler, Spec, Tokio, Watch, finish};

// ---- 12. commit() after a rebalance took the partition; Interval commits -------------------

/// A (Interval 5 ms) alone reads both partitions; B (Never) joins and takes partition 1,
/// reads 20 of it and commits; A, which has not synced since, reads on and commits;
/// B then reads 5 more and commits, and leaves without a commit after 3 more. Nothing
/// stored may go down or past what was handed out, nothing committed handed out again.
fn interval_and_never<A: Adapter>() {
    const GROUP: &str = "interval";
    const LEN: u64 = 60;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 5);
    watch.exempt("A");
    watch.exempt("B");
    // B's join moves partition 1 at once (see `resume`).
    watch.idle_window("A");
    let sampler_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _sampler = Sampler::spawn(scope, &env, &watch, &sampler_stop);
        let client_a = A::connect(&env, env.config());
        let client_b = A::connect(&env, env.config());
        let mut a = A::member(
            &client_a,
            Spec {
                batch: 5,
                auto_commit: AutoCommit::Interval(Duration::from_millis(5)),
                ..Spec::new(GROUP)
            },
        );
        A::join(&env, &mut a).unwrap();
        assert!(
            watch.read_until::<A>(&env, "A", &mut a, Duration::from_secs(3), |w| {
                w.max_of("A", 1) >= Some(7)
            })
        );
        let mut b = A::member(
            &client_b,
            Spec {
                batch: 5,
                auto_commit: AutoCommit::Never,
                ..Spec::new(GROUP)
            },
        );
        A::join(&env, &mut b).unwrap();
        assert!(
            watch.read_until::<A>(&env, "B", &mut b, Duration::from_secs(3), |w| {
                w.max_of("B", 1) >= Some(19)
            })
        );
        A::commit(&env, &mut b).unwrap();
        for _ in 0..10 {
            let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(100));
        }
        let a_commit = A::commit(&env, &mut a);
        watch.sample(&env, "A's commit");
        for _ in 0..5 {
            let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(200));
        }
        A::commit(&env, &mut b).unwrap();
        for _ in 0..3 {
            let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(200));
        }
        A::shutdown(&env, b, false).unwrap();
        watch.drain::<A>(
            &env,
            "A",
            &mut a,
            SYNC_INTERVAL + Duration::from_millis(500),
            Duration::from_secs(6),
        );
        println!(
            "[{}] A's commit {a_commit:?}; A {:?}",
            A::NAME,
            A::stats(&a)
        );
        A::shutdown(&env, a, true).unwrap();
        watch.sample(&env, "end");
        a_commit.unwrap();
        A::close(&env, client_a);
        A::close(&env, client_b);
    });
    watch.assert_clean(A::NAME, &[LEN, LEN], false);
    assert_eq!(
        watch.stored_now(&env),
        vec![Some(LEN - 1); 2],
        "{}",
        A::NAME
    );
    finish::<A>(&env);
}

#[test]
fn interval_member_and_never_member_share_a_partition_tokio() {
    interval_and_never::<Tokio>();
}

#[test]
fn interval_member_and_never_member_share_a_partition_mio() {
    interval_and_never::<Mio>();
}
