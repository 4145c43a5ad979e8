//! Joins and leaves in quick succession while a member reads (section 2).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iggy_route_tokio::AutoCommit;

use crate::support::{
    Adapter, Env, Mio, Rng, SYNC_INTERVAL, Sampler, Spec, Tokio, Watch, finish, requests_between,
};

// ---- 2. joins and leaves in quick succession while a member reads -------------------------

/// S reads on its own thread throughout; the main thread makes ten short-lived members on
/// three clients, each reading a few messages and ending one of several ways (shutdown with
/// or without commit, dropped, dropped right after joining, commit then drop), with short
/// random pauses. Then S reads the rest. `seed` fixes the choices.
fn churn<A: Adapter>(seed: u64, batch: u32, poll_interval: Duration, rounds: usize) {
    const GROUP: &str = "churn";
    const PARTITIONS: u32 = 4;
    const LEN: u64 = 80;
    let env = Env::start(3, PARTITIONS, 1);
    env.fill(PARTITIONS, LEN);
    let watch = Watch::new(GROUP, PARTITIONS, batch);
    // A join moves at once a partition whose primary is not the metadata leader (the leader
    // holds no poll mark of it, so it sees nothing in flight): S may still hand out the rest
    // of a batch it polled and had confirmed before the join, after the joiner read and
    // stored it. That is the documented window, bounded by the watch.
    watch.idle_window("S");
    let spec = Spec {
        batch,
        poll_interval,
        ..Spec::new(GROUP)
    };
    let stable_client = A::connect(&env, env.config());
    let pool: Vec<A::Client> = (0..3).map(|_| A::connect(&env, env.config())).collect();
    let stop = AtomicBool::new(false);
    let sampler_stop = AtomicBool::new(false);
    let total = (LEN * u64::from(PARTITIONS)) as usize;
    let mut rng = Rng::new(seed);
    let mut plan = Vec::new();
    let join_costs = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let _sampler = Sampler::spawn(scope, &env, &watch, &sampler_stop);
        let reader = scope.spawn(|| {
            let mut s = A::member(&stable_client, spec);
            A::join(&env, &mut s).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let _ = watch.next::<A>(&env, "S", &mut s, Duration::from_millis(100));
                std::thread::sleep(Duration::from_micros(300));
            }
            let give_up = Instant::now() + Duration::from_secs(6);
            while watch.distinct() < total && Instant::now() < give_up {
                let _ = watch.next::<A>(&env, "S", &mut s, Duration::from_millis(200));
            }
            // A sync interval more: nothing else may come.
            watch.drain::<A>(
                &env,
                "S",
                &mut s,
                SYNC_INTERVAL + Duration::from_millis(300),
                Duration::from_secs(3),
            );
            let stats = A::stats(&s);
            A::shutdown(&env, s, true).unwrap();
            stats
        });
        for round in 0..rounds {
            let client = &pool[round % pool.len()];
            let name = format!("c{round}");
            let auto_commit = match rng.below(3) {
                0 => AutoCommit::AfterPoll,
                1 => AutoCommit::Never,
                _ => AutoCommit::Interval(Duration::from_millis(3)),
            };
            watch.policy(&name, auto_commit);
            let mut member = A::member(
                client,
                Spec {
                    auto_commit,
                    ..spec
                },
            );
            if rng.below(2) == 0 {
                // The cluster's count includes what S sends meanwhile (it polls every
                // millisecond in one case); the joiner's own client counts the join alone.
                let before = (env.requests(), own_requests::<A>(client));
                A::join(&env, &mut member).unwrap();
                let own = own_requests::<A>(client) - before.1;
                join_costs
                    .lock()
                    .unwrap()
                    .push((own, requests_between(&before.0, &env.requests())));
            }
            let reads = rng.below(3 * u64::from(batch) + 2);
            for _ in 0..reads {
                if watch
                    .next::<A>(&env, &name, &mut member, Duration::from_millis(100))
                    .is_none()
                {
                    break;
                }
            }
            // Only an AfterPoll member may leave its last batch uncommitted.
            let exit = match (auto_commit, rng.below(4)) {
                (AutoCommit::AfterPoll, 0) => "drop",
                (AutoCommit::AfterPoll, 1) => "shutdown(false)",
                (_, 2) => "commit+drop",
                _ => "shutdown(true)",
            };
            match exit {
                "drop" => drop(member),
                "shutdown(false)" => A::shutdown(&env, member, false).unwrap(),
                "commit+drop" => {
                    A::commit(&env, &mut member).unwrap();
                    drop(member);
                }
                _ => A::shutdown(&env, member, true).unwrap(),
            }
            watch.sample(&env, &format!("{name} {exit}"));
            plan.push(format!("{name}:{auto_commit:?}:{reads}:{exit}"));
            std::thread::sleep(Duration::from_millis(rng.below(120)));
        }
        stop.store(true, Ordering::SeqCst);
        let stats = reader.join().unwrap();
        println!("[{}] seed {seed}: S {stats:?}; plan {plan:?}", A::NAME);
    });
    println!(
        "[{}] join costs {:?}; members at the end {:?}",
        A::NAME,
        join_costs.lock().unwrap(),
        env.members(GROUP)
    );
    watch.assert_clean(A::NAME, &[LEN; PARTITIONS as usize], false);
    for (requests, cluster_wide) in join_costs.lock().unwrap().iter() {
        assert!(
            *requests <= 10 + 5 * u64::from(PARTITIONS),
            "{}: a join() cost {requests} requests (the cluster saw {cluster_wide:?})",
            A::NAME
        );
    }
    A::close(&env, stable_client);
    for client in pool {
        A::close(&env, client);
    }
    finish::<A>(&env);
}

/// Requests `client` made so far: those completed for its callers and its route lookups.
fn own_requests<A: Adapter>(client: &A::Client) -> u64 {
    let stats = A::router_stats(client);
    stats.completed + stats.lookups
}

#[test]
fn churn_of_short_lived_members_tokio() {
    churn::<Tokio>(7, 10, Duration::from_millis(10), 10);
}

#[test]
fn churn_of_short_lived_members_mio() {
    churn::<Mio>(7, 10, Duration::from_millis(10), 10);
}

#[test]
fn churn_batch_of_one_and_one_ms_polls_tokio() {
    churn::<Tokio>(11, 1, Duration::from_millis(1), 12);
}

#[test]
fn churn_batch_of_one_and_one_ms_polls_mio() {
    churn::<Mio>(11, 1, Duration::from_millis(1), 12);
}
