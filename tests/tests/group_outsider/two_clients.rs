//! Two clients, each a member of one group, one also of another; consumers rebuilt at once
//! after a drop (section 9).

use std::time::{Duration, Instant};

use iggy_route_tokio::ClientError;

use crate::support::{Adapter, Env, Mio, SYNC_INTERVAL, Spec, Tokio, Watch, finish};

// ---- 9. two clients, each a member of one group, one also of another ----------------------

/// What client 1 does right after dropping its G1 member in [`two_clients_two_groups`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    /// Nothing.
    No,
    /// Builds another G1 consumer at once and drops it unused (a restart loop that gives
    /// up, a builder probed for `GroupConsumerExists`).
    DropAtOnce,
    /// Builds another G1 consumer at once and reads with it.
    Read,
}

/// Client 1 holds a member of G1 and (with `second_group`) the only member of G2; client 2
/// a member of G1. A second G1 consumer is refused on either client while theirs lives.
/// Client 1's G1 member is dropped mid-read, and client 1 may build a G1 consumer again at
/// once (`rebuild`). Within a sync interval (plus half a second) the dropped membership
/// must be gone: client 2's member holds every partition, or (`Rebuild::Read`) shares them
/// with the new one. G2's membership on the same client is untouched. Both groups hand out
/// every message, G2 exactly once.
fn two_clients_two_groups<A: Adapter>(rebuild: Rebuild, second_group: bool) {
    const G1: &str = "first-group";
    const G2: &str = "second-group";
    const LEN: u64 = 40;
    let env = Env::start(3, 4, 1);
    env.fill(4, LEN);
    let w1 = Watch::new(G1, 4, 5);
    let w2 = Watch::new(G2, 4, 5);
    let client_1 = A::connect(&env, env.config());
    let client_2 = A::connect(&env, env.config());
    let client_3 = A::connect(&env, env.config());
    let spec1 = Spec {
        batch: 5,
        ..Spec::new(G1)
    };
    let spec2 = Spec {
        batch: 5,
        ..Spec::new(G2)
    };
    let mut c1g1 = A::member(&client_1, spec1);
    let mut c1g2 = A::member(if second_group { &client_1 } else { &client_3 }, spec2);
    let mut c2g1 = A::member(&client_2, spec1);
    let refused_1 = A::build(&client_1, spec1).err();
    let refused_2 = A::build(&client_2, spec1).err();
    A::join(&env, &mut c1g1).unwrap();
    A::join(&env, &mut c2g1).unwrap();
    A::join(&env, &mut c1g2).unwrap();
    for _ in 0..25 {
        let _ = w1.next::<A>(&env, "c1g1", &mut c1g1, Duration::from_millis(300));
        let _ = w2.next::<A>(&env, "c1g2", &mut c1g2, Duration::from_millis(300));
        let _ = w1.next::<A>(&env, "c2g1", &mut c2g1, Duration::from_millis(300));
    }
    let g2_before = env.members(G2);
    let g1_before = env.members(G1);
    drop(c1g1);
    let dropped = Instant::now();
    let mut again = None;
    let rebuilt = match rebuild {
        Rebuild::No => Ok(()),
        Rebuild::DropAtOnce => A::build(&client_1, spec1)
            .map(drop)
            .map_err(|e| format!("{e:?}")),
        Rebuild::Read => A::build(&client_1, spec1)
            .map(|consumer| again = Some(consumer))
            .map_err(|e| format!("{e:?}")),
    };
    // The dropped membership is gone once client 2's member holds every partition, or
    // shares them with the new consumer: either way no member holds partitions nobody
    // reads. Sampled every 5 ms for 3 s to see how long it outlives the drop.
    let members_done = |members: &[(u32, Vec<u32>)]| match rebuild {
        Rebuild::Read => members.len() == 2 && members.iter().all(|(_, ps)| ps.len() == 2),
        Rebuild::No | Rebuild::DropAtOnce => members.len() == 1 && members[0].1.len() == 4,
    };
    let mut alone_after = None;
    let give_up = Instant::now() + Duration::from_secs(3);
    while (w1.distinct() < (4 * LEN) as usize || w2.distinct() < (4 * LEN) as usize)
        && Instant::now() < give_up
    {
        if alone_after.is_none() && members_done(&env.members(G1)) {
            alone_after = Some(dropped.elapsed());
        }
        let _ = w2.next::<A>(&env, "c1g2", &mut c1g2, Duration::from_millis(5));
        let _ = w1.next::<A>(&env, "c2g1", &mut c2g1, Duration::from_millis(5));
        if let Some(consumer) = again.as_mut() {
            let _ = w1.next::<A>(&env, "c1g1-again", consumer, Duration::from_millis(5));
        }
    }
    if alone_after.is_none() && members_done(&env.members(G1)) {
        alone_after = Some(dropped.elapsed());
    }
    let g2_after = env.members(G2);
    let c1g2_stats = A::stats(&c1g2);
    let router_1 = A::router_stats(&client_1);
    println!(
        "[{}] {rebuild:?} second_group={second_group}: refused {refused_1:?} / {refused_2:?}; \
         rebuilt at once: {rebuilt:?}; G1 members before the drop {g1_before:?}; the dropped \
         membership was gone after {alone_after:?} (G1 now {:?}); G2 members {g2_before:?} -> \
         {g2_after:?}; c1g2 {c1g2_stats:?}; client 1 {router_1:?}",
        A::NAME,
        env.members(G1)
    );
    assert!(
        matches!(refused_1, Some(ClientError::GroupConsumerExists { .. }))
            && matches!(refused_2, Some(ClientError::GroupConsumerExists { .. })),
        "{}: a second G1 consumer: {refused_1:?} {refused_2:?}",
        A::NAME
    );
    assert!(rebuilt.is_ok(), "{}: {rebuilt:?}", A::NAME);
    assert!(
        alone_after.is_some_and(|after| after <= SYNC_INTERVAL + Duration::from_millis(500)),
        "{}: {rebuild:?}: the dropped member's membership outlived its drop: gone after \
         {alone_after:?}; G1 members {:?}",
        A::NAME,
        env.members(G1)
    );
    assert_eq!(
        g2_after.len(),
        1,
        "{}: G2 lost its member: {g2_after:?}",
        A::NAME
    );
    assert_eq!(c1g2_stats.joins, 1, "{}: G2's member joined again", A::NAME);
    assert_eq!(router_1.memberships_lost, 0, "{}", A::NAME);
    w1.assert_clean(A::NAME, &[LEN; 4], false);
    w2.assert_clean(A::NAME, &[LEN; 4], false);
    assert!(
        w2.duplicates().is_empty(),
        "{}: G2's lone member handed out twice: {:?}",
        A::NAME,
        w2.duplicates()
    );
    if let Some(consumer) = again {
        A::shutdown(&env, consumer, true).unwrap();
    }
    A::shutdown(&env, c1g2, true).unwrap();
    A::shutdown(&env, c2g1, true).unwrap();
    A::close(&env, client_1);
    A::close(&env, client_2);
    A::close(&env, client_3);
    finish::<A>(&env);
}

#[test]
fn two_clients_one_with_a_second_group_tokio() {
    two_clients_two_groups::<Tokio>(Rebuild::No, true);
}

#[test]
fn two_clients_one_with_a_second_group_mio() {
    two_clients_two_groups::<Mio>(Rebuild::No, true);
}

#[test]
fn consumer_rebuilt_and_dropped_at_once_after_a_drop_tokio() {
    two_clients_two_groups::<Tokio>(Rebuild::DropAtOnce, true);
}

#[test]
fn consumer_rebuilt_and_dropped_at_once_after_a_drop_mio() {
    two_clients_two_groups::<Mio>(Rebuild::DropAtOnce, true);
}

#[test]
fn consumer_rebuilt_and_dropped_at_once_one_group_per_client_tokio() {
    two_clients_two_groups::<Tokio>(Rebuild::DropAtOnce, false);
}

#[test]
fn consumer_rebuilt_and_dropped_at_once_one_group_per_client_mio() {
    two_clients_two_groups::<Mio>(Rebuild::DropAtOnce, false);
}

#[test]
fn consumer_rebuilt_at_once_after_a_drop_reads_tokio() {
    two_clients_two_groups::<Tokio>(Rebuild::Read, true);
}

#[test]
fn consumer_rebuilt_at_once_after_a_drop_reads_mio() {
    two_clients_two_groups::<Mio>(Rebuild::Read, true);
}
