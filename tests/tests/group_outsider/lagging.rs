//! A join against a lagging follower and a far leader (section 14).

use std::time::{Duration, Instant};

use iggy_route_tests::cluster::Lag;

use crate::support::{Adapter, Env, Mio, Spec, Tokio, Watch, finish, requests_between};

// ---- 14. a join against a lagging follower and a far leader --------------------------------

/// Follower metadata half a second late, the leader on node 2 (the session's node is 0),
/// eight partitions: a join must cost a handful of requests per partition at most, and
/// the first `next()` must hand a message out.
fn join_against_lag<A: Adapter>() {
    const GROUP: &str = "lagging";
    let env = Env::start(3, 8, 2);
    env.fill(8, 5);
    env.cluster.with_state(|state| {
        state.set_lag(Lag {
            follower_metadata: Duration::from_millis(500),
            ..state.lag()
        });
    });
    let client = A::connect(&env, env.config());
    let mut member = A::member(&client, Spec::new(GROUP));
    let before = env.requests();
    let started = Instant::now();
    let joined = A::join(&env, &mut member);
    let took = started.elapsed();
    let cost = requests_between(&before, &env.requests());
    let total: u64 = cost.values().sum();
    let watch = Watch::new(GROUP, 8, 10);
    let first = watch.next::<A>(&env, "M", &mut member, Duration::from_secs(3));
    println!(
        "[{}] join {joined:?} in {took:?} for {total} requests {cost:?}; first {:?}",
        A::NAME,
        first
            .as_ref()
            .map(|r| r.as_ref().map(|m| (m.partition_id, m.message.offset)))
    );
    joined.unwrap();
    assert!(total <= 5 * 8, "{}: a join cost {total}: {cost:?}", A::NAME);
    assert!(matches!(first, Some(Ok(_))), "{}: {first:?}", A::NAME);
    A::shutdown(&env, member, false).unwrap();
    A::close(&env, client);
    finish::<A>(&env);
}

#[test]
fn join_against_a_lagging_follower_is_cheap_tokio() {
    join_against_lag::<Tokio>();
}

#[test]
fn join_against_a_lagging_follower_is_cheap_mio() {
    join_against_lag::<Mio>();
}
