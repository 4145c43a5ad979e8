//! A member stopped mid-batch (or after a whole batch) resumes after its partition was taken and
//! committed meanwhile (section 1).

use std::time::Duration;

use iggy_route_tokio::AutoCommit;

use crate::support::{Adapter, Env, Mio, SYNC_INTERVAL, Spec, Tokio, Watch, finish};

// ---- 1. a member stopped mid-batch resumes after its partition was taken and committed ---

/// How member B ends in [`mid_batch_resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    ShutdownCommit,
    ShutdownNoCommit,
    Drop,
}

/// A alone on two partitions, batch 10, is handed three messages of partition 1 and stops
/// (seven more of that batch polled, not handed). B joins and takes partition 1
/// (cooperative join: the tail of A's list). Either A resumes at once, right after the
/// rebalance (`a_first`), or B reads 25 of partition 1 and commits them first; A then calls
/// `commit()` while B owns partition 1; B ends by `exit`, partition 1 comes back to A, and
/// A reads everything. Nothing B committed may be handed out by A (A's seven buffered
/// messages were committed by B), no stored offset may go down (A's late commit), and
/// everything is handed out.
fn mid_batch_resume<A: Adapter>(
    auto_commit: AutoCommit,
    a_first: bool,
    exit: Exit,
    a_commits_meanwhile: bool,
    idle: Duration,
) {
    resume::<A>(
        auto_commit,
        a_first,
        exit,
        a_commits_meanwhile,
        idle,
        3,
        false,
    );
}

/// [`mid_batch_resume`] with A stopping once handed `a_on_p1` messages of partition 1
/// (10, a whole batch: handed out, not yet committed, as `AfterPoll` commits it only
/// before the partition's next poll).
fn resume<A: Adapter>(
    auto_commit: AutoCommit,
    a_first: bool,
    exit: Exit,
    a_commits_meanwhile: bool,
    idle: Duration,
    a_on_p1: usize,
    then_p0: bool,
) {
    const GROUP: &str = "mid-batch";
    const LEN: u64 = 60;
    let env = Env::start(3, 2, 1);
    env.fill(2, LEN);
    let watch = Watch::new(GROUP, 2, 10);
    watch.policy("A", auto_commit);
    watch.policy("B", auto_commit);
    // The polls are not served by the metadata leader's node here (no routing commands:
    // the router does not know the primaries), so the server sees nothing in flight and
    // B's join moves partition 1 at once: A is in the documented idle window.
    watch.idle_window("A");
    let client_a = A::connect(&env, env.config());
    let client_b = A::connect(&env, env.config());
    let spec = Spec {
        batch: 10,
        auto_commit,
        ..Spec::new(GROUP)
    };
    let mut a = A::member(&client_a, spec);
    A::join(&env, &mut a).unwrap();
    assert!(
        watch.read_until::<A>(&env, "A", &mut a, Duration::from_secs(3), |w| {
            w.handed_to("A").iter().filter(|(p, _)| *p == 1).count() >= a_on_p1
        }),
        "{}: A was never handed partition 1: {}",
        A::NAME,
        watch.summary()
    );
    if then_p0 {
        // A reads on into partition 0's next batch: the sync of that round showed
        // partition 1 still A's, and its batch is not committed until partition 1 is
        // polled again.
        assert!(
            watch.read_until::<A>(&env, "A", &mut a, Duration::from_secs(3), |w| {
                w.max_of("A", 0).is_some_and(|max| max >= 10)
            }),
            "{}: {}",
            A::NAME,
            watch.summary()
        );
    }
    let a_on_p1 = watch.handed_to("A").iter().filter(|(p, _)| *p == 1).count();
    let a_p1_stored_then = env.stored(GROUP, 1);
    let mut b = A::member(&client_b, spec);
    A::join(&env, &mut b).unwrap();
    let members = env.members(GROUP);
    if a_first {
        // A resumes right after the rebalance, before it synced.
        for _ in 0..12 {
            let _ = watch.next::<A>(&env, "A", &mut a, Duration::from_millis(200));
        }
    }
    assert!(
        watch.read_until::<A>(&env, "B", &mut b, Duration::from_secs(4), |w| {
            w.max_of("B", 1).is_some_and(|max| max >= 24)
        }),
        "{}: B never read 25 of partition 1: members {members:?}; {}",
        A::NAME,
        watch.summary()
    );
    A::commit(&env, &mut b).unwrap();
    watch.sample(&env, "B committed");
    let stored_by_b = env.stored(GROUP, 1);
    // A commits while partition 1 is B's (or does not, and stays unsynced).
    let a_commit = if a_commits_meanwhile {
        A::commit(&env, &mut a)
    } else {
        Ok(())
    };
    watch.sample(&env, "A committed while B owns p1");
    let after_a_commit = env.stored(GROUP, 1);
    match exit {
        Exit::ShutdownCommit => A::shutdown(&env, b, true).unwrap(),
        Exit::ShutdownNoCommit => A::shutdown(&env, b, false).unwrap(),
        Exit::Drop => drop(b),
    }
    watch.sample(&env, "B gone");
    // A stays idle this long more (past a sync interval: its next call is due a sync).
    std::thread::sleep(idle);
    watch.drain::<A>(
        &env,
        "A",
        &mut a,
        SYNC_INTERVAL + Duration::from_millis(700),
        Duration::from_secs(8),
    );
    A::commit(&env, &mut a).unwrap();
    watch.sample(&env, "A's last commit");
    let a_stats = A::stats(&a);
    A::shutdown(&env, a, true).unwrap();
    watch.sample(&env, "A left");
    println!(
        "[{}] {auto_commit:?} a_first={a_first} {exit:?} a_commits={a_commits_meanwhile} idle={idle:?}: A had {a_on_p1} of p1 when B joined (stored {a_p1_stored_then:?}); \
         members then {members:?}; stored p1 after B's commit {stored_by_b:?}, after A's \
         commit {after_a_commit:?} ({a_commit:?}); A {a_stats:?}",
        A::NAME
    );
    watch.assert_clean(A::NAME, &[LEN, LEN], false);
    a_commit.unwrap();
    assert_eq!(
        watch.stored_now(&env),
        vec![Some(LEN - 1); 2],
        "{}",
        A::NAME
    );
    A::close(&env, client_a);
    A::close(&env, client_b);
    finish::<A>(&env);
}

#[test]
fn mid_batch_resume_never_b_commits_first_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::Never,
        false,
        Exit::ShutdownCommit,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_never_b_commits_first_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::Never,
        false,
        Exit::ShutdownCommit,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_after_poll_b_dropped_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::AfterPoll,
        false,
        Exit::Drop,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_after_poll_b_dropped_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::AfterPoll,
        false,
        Exit::Drop,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_right_after_rebalance_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::AfterPoll,
        true,
        Exit::ShutdownNoCommit,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_right_after_rebalance_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::AfterPoll,
        true,
        Exit::ShutdownNoCommit,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_interval_right_after_rebalance_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::Interval(Duration::from_millis(5)),
        true,
        Exit::Drop,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_interval_right_after_rebalance_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::Interval(Duration::from_millis(5)),
        true,
        Exit::Drop,
        true,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_after_poll_unsynced_b_commits_and_leaves_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_after_poll_unsynced_b_commits_and_leaves_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        Duration::ZERO,
    );
}

#[test]
fn mid_batch_resume_never_unsynced_b_dropped_tokio() {
    mid_batch_resume::<Tokio>(AutoCommit::Never, false, Exit::Drop, false, Duration::ZERO);
}

#[test]
fn mid_batch_resume_never_unsynced_b_dropped_mio() {
    mid_batch_resume::<Mio>(AutoCommit::Never, false, Exit::Drop, false, Duration::ZERO);
}

#[test]
fn mid_batch_resume_after_poll_idle_past_a_sync_interval_tokio() {
    mid_batch_resume::<Tokio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        SYNC_INTERVAL + Duration::from_millis(200),
    );
}

#[test]
fn mid_batch_resume_after_poll_idle_past_a_sync_interval_mio() {
    mid_batch_resume::<Mio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        SYNC_INTERVAL + Duration::from_millis(200),
    );
}

/// A (AfterPoll) is handed the whole first batch of partition 1 (0..=9, not committed
/// yet) and stops; B takes partition 1, reads 25 of it, commits (24) and leaves; A
/// resumes. A must neither store its old batch (9) over B's 24 nor hand out 10..=24.
#[test]
fn whole_batch_resume_after_poll_unsynced_b_commits_and_leaves_tokio() {
    resume::<Tokio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        Duration::ZERO,
        10,
        false,
    );
}

#[test]
fn whole_batch_resume_after_poll_unsynced_b_commits_and_leaves_mio() {
    resume::<Mio>(
        AutoCommit::AfterPoll,
        false,
        Exit::ShutdownCommit,
        false,
        Duration::ZERO,
        10,
        false,
    );
}

#[test]
fn whole_batch_resume_after_poll_unsynced_b_dropped_tokio() {
    resume::<Tokio>(
        AutoCommit::AfterPoll,
        false,
        Exit::Drop,
        false,
        Duration::ZERO,
        10,
        false,
    );
}

#[test]
fn whole_batch_resume_after_poll_unsynced_b_dropped_mio() {
    resume::<Mio>(
        AutoCommit::AfterPoll,
        false,
        Exit::Drop,
        false,
        Duration::ZERO,
        10,
        false,
    );
}

/// As above, A having read on into partition 0's next batch first (so a sync of its
/// round showed partition 1 still its own after its batch 0..=9 was handed out).
fn whole_batch_then_p0<A: Adapter>(exit: Exit) {
    resume::<A>(
        AutoCommit::AfterPoll,
        false,
        exit,
        false,
        Duration::ZERO,
        10,
        true,
    );
}

#[test]
fn whole_batch_confirmed_then_b_commits_and_leaves_tokio() {
    whole_batch_then_p0::<Tokio>(Exit::ShutdownCommit);
}

#[test]
fn whole_batch_confirmed_then_b_commits_and_leaves_mio() {
    whole_batch_then_p0::<Mio>(Exit::ShutdownCommit);
}

#[test]
fn whole_batch_confirmed_then_b_dropped_tokio() {
    whole_batch_then_p0::<Tokio>(Exit::Drop);
}

#[test]
fn whole_batch_confirmed_then_b_dropped_mio() {
    whole_batch_then_p0::<Mio>(Exit::Drop);
}
