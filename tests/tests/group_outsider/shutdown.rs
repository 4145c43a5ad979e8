//! A shutdown while a node is down; a member dropped while its join is out; joins against a
//! dead leader (sections 5 and 5b).

use std::time::{Duration, Instant};

use iggy_route_tokio::ClientError;

use crate::support::{
    Adapter, Env, Mio, REQUEST_TIMEOUT, SYNC_INTERVAL, Spec, Tokio, Watch, finish,
};

// ---- 5. shutdown while a node is down ----------------------------------------------------

/// A and B share four partitions (primaries `p % 3`, metadata leader node 1). A node is
/// stopped: a partition primary (node 2) or the metadata leader itself (node 1, and the
/// leadership moves to node 0). A shuts down with a commit: it must return within the
/// request timeout and a little, `Ok` or a typed error; its membership must be gone; and
/// once the node is back B must read everything else, nothing A committed twice.
/// The fault of [`shutdown_while_node_down`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Node 2 (primary of partition 2) stopped.
    PrimaryStopped,
    /// The metadata leader (node 1) stopped; the leadership moves to node 0.
    LeaderStoppedAndMoved,
    /// The metadata leader (node 1) stopped; no other node leads until it is back.
    LeaderStopped,
    /// The metadata leader (node 1) answers 10 s late.
    LeaderSilent,
}

fn shutdown_while_node_down<A: Adapter>(fault: Fault) {
    let stopped = if fault == Fault::PrimaryStopped { 2 } else { 1 };
    const GROUP: &str = "node-down";
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
    for _ in 0..25 {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(500));
        let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(500));
    }
    let before = env.members(GROUP);
    match fault {
        Fault::LeaderSilent => env
            .cluster
            .set_reply_delay(stopped, Duration::from_secs(10)),
        Fault::PrimaryStopped | Fault::LeaderStoppedAndMoved | Fault::LeaderStopped => {
            env.block_on(env.cluster.stop_node(stopped))
        }
    }
    if fault == Fault::LeaderStoppedAndMoved {
        env.cluster.set_metadata_leader(0);
    }
    let started = Instant::now();
    let shutdown = A::shutdown(&env, a, true);
    let took = started.elapsed();
    watch.sample(&env, "A shut down");
    let stored_after_a: Vec<Option<u64>> = watch.stored_now(&env);
    let a_handed: Vec<Option<u64>> = (0..4).map(|p| watch.max_of("A", p)).collect();
    // A's membership ends with its shutdown, whatever the fault (a silent leader still
    // applies the leave at once, only its answer is late; a stopped one ended it with the
    // connection). Watched for 3 s to see how long it outlives the shutdown.
    let returned = Instant::now();
    let mut members_at_shutdown = env.members(GROUP);
    let mut lingered = None;
    // A silent node reads the member link's close once it has answered what it holds.
    let watched = if fault == Fault::LeaderSilent {
        Duration::from_secs(11)
    } else {
        Duration::from_secs(3)
    };
    while returned.elapsed() < watched {
        let now = env.members(GROUP);
        if returned.elapsed() <= Duration::from_millis(300) {
            members_at_shutdown = now.clone();
        }
        if now.len() <= 1 {
            lingered = Some(returned.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The node comes back after a little while; B reads on.
    let _ = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(300));
    env.cluster.set_reply_delay(stopped, Duration::ZERO);
    env.block_on(env.cluster.restart_node(stopped));
    let done = watch.read_until::<A>(&env, "B", &mut b, Duration::from_secs(8), |w| {
        w.distinct() == (4 * LEN) as usize
    });
    let members_after = env.members(GROUP);
    println!(
        "[{}] {fault:?}: A's shutdown(true) took {took:?}: {shutdown:?}; members \
         before {before:?}, 300 ms after A's shutdown {members_at_shutdown:?} (A's \
         membership gone {lingered:?} after the shutdown returned), at the end \
         {members_after:?}; A handed up to {a_handed:?}, stored \
         after A left {stored_after_a:?}; B {:?}",
        A::NAME,
        A::stats(&b)
    );
    assert!(
        took <= 2 * REQUEST_TIMEOUT + Duration::from_millis(1000),
        "{}: shutdown(true) with {fault:?} took {took:?}",
        A::NAME
    );
    // A node that answers late reads the next frame of a connection (or its close) only
    // once it has answered the one before: a membership whose member link waits for such
    // a node's answer ends when that node reads on (here: when it is restarted), as it
    // would on a real server that is slow to answer. The shutdown still returns by its
    // bound.
    assert!(
        members_at_shutdown.len() <= 1
            || (fault == Fault::LeaderSilent && lingered.is_some_and(|after| after < watched)),
        "{}: {fault:?}: A's membership outlived its shutdown ({shutdown:?}) by more than \
         300 ms (gone after {lingered:?}): {members_at_shutdown:?}",
        A::NAME
    );
    if let Err(error) = &shutdown {
        assert!(
            !matches!(error, ClientError::UnexpectedReply { .. }),
            "{}: an untyped shutdown error: {error:?}",
            A::NAME
        );
    }
    assert!(done, "{}: B never read everything", A::NAME);
    assert_eq!(members_after.len(), 1, "{}: {members_after:?}", A::NAME);
    // With only a primary down, A's membership (on the leader) lives through its
    // shutdown: an `Ok` shutdown(true) stored exactly what A was handed of each partition
    // whose primary stayed up (sampled before B read on). With the leader gone, the
    // membership ended with its link and the commit is fenced (documented as no error).
    for partition in 0..4u32 {
        let primary_down = partition as usize % 3 == stopped;
        if shutdown.is_ok()
            && fault == Fault::PrimaryStopped
            && !primary_down
            && a_handed[partition as usize].is_some()
        {
            assert_eq!(
                stored_after_a[partition as usize],
                a_handed[partition as usize],
                "{}: A's shutdown(true) did not store what A was handed of p{partition}",
                A::NAME
            );
        }
    }
    watch.assert_clean(A::NAME, &[LEN; 4], true);
    A::shutdown(&env, b, true).unwrap();
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn shutdown_while_a_primary_is_down_tokio() {
    shutdown_while_node_down::<Tokio>(Fault::PrimaryStopped);
}

#[test]
fn shutdown_while_a_primary_is_down_mio() {
    shutdown_while_node_down::<Mio>(Fault::PrimaryStopped);
}

#[test]
fn shutdown_while_the_metadata_leader_is_down_tokio() {
    shutdown_while_node_down::<Tokio>(Fault::LeaderStoppedAndMoved);
}

#[test]
fn shutdown_while_the_metadata_leader_is_down_mio() {
    shutdown_while_node_down::<Mio>(Fault::LeaderStoppedAndMoved);
}

#[test]
fn shutdown_while_the_metadata_leader_is_down_and_not_replaced_tokio() {
    shutdown_while_node_down::<Tokio>(Fault::LeaderStopped);
}

#[test]
fn shutdown_while_the_metadata_leader_is_down_and_not_replaced_mio() {
    shutdown_while_node_down::<Mio>(Fault::LeaderStopped);
}

#[test]
fn shutdown_while_the_metadata_leader_is_silent_tokio() {
    shutdown_while_node_down::<Tokio>(Fault::LeaderSilent);
}

#[test]
fn shutdown_while_the_metadata_leader_is_silent_mio() {
    shutdown_while_node_down::<Mio>(Fault::LeaderSilent);
}

// ---- 5b. a member dropped while its join is out; joins against a dead leader -------------

/// A reads alone. B's first `next()` (which joins) gives up after 5 ms while the metadata
/// leader answers 40 ms late, and B is dropped at once. Its join, admitted after it was
/// dropped, must not leave a membership behind: within a sync interval (and half a
/// second) A holds every partition, and still does a second later; everything is read.
fn dropped_mid_join<A: Adapter>() {
    const GROUP: &str = "half-joined";
    const LEN: u64 = 30;
    let env = Env::start(3, 4, 1);
    env.fill(4, LEN);
    let watch = Watch::new(GROUP, 4, 10);
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let mut a = A::member(&client_a, Spec::new(GROUP));
    A::join(&env, &mut a).unwrap();
    for _ in 0..20 {
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(300));
    }
    env.cluster.set_reply_delay(1, Duration::from_millis(40));
    let mut b = A::member(&client_b, Spec::new(GROUP));
    let first = watch.next::<A>(&env, "B", &mut b, Duration::from_millis(5));
    drop(b);
    let dropped = Instant::now();
    let mut seen = Vec::new();
    let mut alone_after = None;
    while dropped.elapsed() < SYNC_INTERVAL + Duration::from_millis(1500) {
        let members = env.members(GROUP);
        if seen.last() != Some(&members) {
            seen.push(members.clone());
        }
        if members.len() == 1 && members[0].1.len() == 4 {
            alone_after.get_or_insert(dropped.elapsed());
        } else {
            alone_after = None;
        }
        let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(20));
    }
    env.cluster.set_reply_delay(1, Duration::ZERO);
    watch.drain::<A>(
        &env,
        "A",
        &mut a,
        Duration::from_millis(300),
        Duration::from_secs(3),
    );
    println!(
        "[{}] B's first next() {:?}; the group's members since the drop {seen:?}; A alone (for \
         good) after {alone_after:?}",
        A::NAME,
        first
            .as_ref()
            .map(|r| r.as_ref().map(|m| (m.partition_id, m.message.offset)))
    );
    assert!(
        first.is_none(),
        "{}: B's next() did not give up: {first:?}",
        A::NAME
    );
    assert!(
        alone_after.is_some_and(|after| after <= SYNC_INTERVAL + Duration::from_millis(500)),
        "{}: a consumer dropped while joining left a membership behind: {seen:?}",
        A::NAME
    );
    watch.assert_clean(A::NAME, &[LEN; 4], false);
    A::shutdown(&env, a, true).unwrap();
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn member_dropped_while_its_join_is_out_leaves_no_membership_tokio() {
    dropped_mid_join::<Tokio>();
}

#[test]
fn member_dropped_while_its_join_is_out_leaves_no_membership_mio() {
    dropped_mid_join::<Mio>();
}

/// The metadata leader (node 1) is stopped and nobody leads: `join()` must fail typed
/// within the request timeout (and a second), and a blocking member's `next_before` must
/// return by each deadline. Once the leader is back, the member reads.
fn join_against_a_dead_leader<A: Adapter>() {
    const GROUP: &str = "leaderless";
    let env = Env::start(3, 2, 1);
    env.fill(2, 10);
    let client = A::connect(&env, env.config());
    env.block_on(env.cluster.stop_node(1));
    let mut member = A::member(&client, Spec::new(GROUP));
    let started = Instant::now();
    let joined = A::join(&env, &mut member);
    let join_took = started.elapsed();
    let mut calls = Vec::new();
    for _ in 0..4 {
        let started = Instant::now();
        let next = A::next_within(&env, &mut member, Duration::from_millis(200));
        calls.push((
            started.elapsed(),
            next.map(|r| r.map(|m| m.message.offset).map_err(|e| format!("{e:?}"))),
        ));
    }
    env.block_on(env.cluster.restart_node(1));
    let watch = Watch::new(GROUP, 2, 10);
    let back = watch.read_until::<A>(&env, "M", &mut member, Duration::from_secs(5), |w| {
        w.distinct() == 20
    });
    println!(
        "[{}] join() with the leader down: {joined:?} after {join_took:?}; next() calls {calls:?}; \
         read everything once it was back: {back}",
        A::NAME
    );
    assert!(
        join_took <= REQUEST_TIMEOUT + Duration::from_secs(1),
        "{}: join() with the leader down took {join_took:?}",
        A::NAME
    );
    match &joined {
        Err(ClientError::UnexpectedReply { .. }) => panic!("{}: {joined:?}", A::NAME),
        Err(_) => {}
        Ok(()) => panic!("{}: join() succeeded with no leader", A::NAME),
    }
    assert!(back, "{}: never read once the leader was back", A::NAME);
    watch.assert_clean(A::NAME, &[10, 10], false);
    A::shutdown(&env, member, false).unwrap();
    A::close(&env, client);
    finish::<A>(&env);
}

#[test]
fn join_against_a_dead_leader_fails_typed_and_in_time_tokio() {
    join_against_a_dead_leader::<Tokio>();
}

#[test]
fn join_against_a_dead_leader_fails_typed_and_in_time_mio() {
    join_against_a_dead_leader::<Mio>();
}
