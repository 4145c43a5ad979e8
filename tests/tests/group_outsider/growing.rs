//! Partitions added mid-read (section 7).

use std::time::{Duration, Instant};

use crate::support::{Adapter, Env, Mio, STREAM, Spec, TOPIC, Tokio, Watch, finish};

// ---- 7. partitions added mid-read --------------------------------------------------------

/// Two members read three partitions; once 60 are read the topic grows to six partitions
/// (the group re-stripes) and the new ones are filled. Every message of all six is handed
/// out, with only the documented window, within a few seconds.
fn partitions_added<A: Adapter>() {
    const GROUP: &str = "growing";
    const LEN: u64 = 40;
    let env = Env::start(3, 3, 1);
    env.fill(3, LEN);
    let watch = Watch::new(GROUP, 3, 5);
    let spec = Spec {
        batch: 5,
        ..Spec::new(GROUP)
    };
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let mut a = A::member(&client_a, spec);
    let mut b = A::member(&client_b, spec);
    A::join(&env, &mut a).unwrap();
    A::join(&env, &mut b).unwrap();
    while watch.distinct() < 60 {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(200));
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(200));
    }
    let admin = env.admin();
    env.block_on(admin.create_partitions(STREAM, TOPIC, 3))
        .unwrap();
    for partition in 3..6 {
        env.cluster
            .set_primary(STREAM, TOPIC, partition, partition as usize % 3);
    }
    watch.set_partitions(6);
    for partition in 3..6 {
        env.fill_range(&admin, partition, 0, LEN);
    }
    let grown = Instant::now();
    let give_up = Instant::now() + Duration::from_secs(8);
    while watch.distinct() < (6 * LEN) as usize && Instant::now() < give_up {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(10));
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(10));
    }
    let took = grown.elapsed();
    for _ in 0..4 {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(150));
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(150));
    }
    println!(
        "[{}] six partitions read {took:?} after the growth; members {:?}; A {:?} B {:?}",
        A::NAME,
        env.members(GROUP),
        A::stats(&a),
        A::stats(&b)
    );
    watch.assert_clean(A::NAME, &[LEN; 6], false);
    A::shutdown(&env, a, true).unwrap();
    A::shutdown(&env, b, true).unwrap();
    env.block_on(admin.shutdown());
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn partitions_added_mid_read_tokio() {
    partitions_added::<Tokio>();
}

#[test]
fn partitions_added_mid_read_mio() {
    partitions_added::<Mio>();
}
