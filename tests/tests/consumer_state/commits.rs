//! What a caller's commit stores, and how a member joins, starts and ends.

use super::*;

#[test]
fn a_callers_commit_stores_every_partition_handed_out() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[0, 1]);
    for partition in [0, 1] {
        assert_eq!(
            step(&mut state, now),
            Asks::Poll(partition, PollingStrategy::Next)
        );
        handed(
            &mut state,
            now,
            messages(partition, 0..4),
            Some((1, &[0, 1])),
        );
    }
    state.request_commit();
    // Partition 0's messages were taken before the sync that confirmed partition 1's
    // poll; partition 1's after it.
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 3));
    state.answer(now, Ok(Reply::OffsetStored)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0, 1])).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(1, 3));
    state.answer(now, Ok(Reply::OffsetStored)).unwrap();
    assert!(state.commit_requested());
    assert_eq!(step(&mut state, now), Asks::Wait);
    assert!(!state.commit_requested(), "done");
}

#[test]
fn a_callers_commit_stores_what_was_taken_not_what_was_polled() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    state.answer(now, messages(0, 0..15)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0])).unwrap();
    for _ in 0..10 {
        state.next_message(now).unwrap();
    }
    state.request_commit();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0])).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 9), "not 14");
    state.answer(now, Ok(Reply::OffsetStored)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Wait);
    assert_eq!(state.next_message(now).unwrap().message.offset, 10);
}

#[test]
fn messages_polled_before_a_caller_went_away_are_not_handed_out_unconfirmed() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[2]);
    assert_eq!(step(&mut state, now), Asks::Poll(2, PollingStrategy::Next));
    state.answer(now, messages(2, 0..15)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[2])).unwrap();
    for _ in 0..10 {
        state.next_message(now).unwrap();
    }
    // The caller comes back after a sync interval: the five left wait for a sync.
    let later = now + Duration::from_secs(2);
    assert!(state.next_message(later).is_none());
    assert_eq!(step(&mut state, later), Asks::Sync);
    // Another member read partition 2 to 99 and stored it meanwhile.
    state.answer(later, assignment(4, &[2])).unwrap();
    assert!(state.next_message(later).is_none(), "10..14 dropped");
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(2, PollingStrategy::Next)
    );
    assert_eq!(
        handed(&mut state, later, messages(2, 100..105), Some((4, &[2]))),
        5
    );
}

#[test]
fn an_old_hand_out_behind_what_another_member_stored_is_never_committed() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    assert_eq!(
        handed(&mut state, now, messages(0, 0..10), Some((1, &[0]))),
        10
    );
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(4, &[0])).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Next)
    );
    // Another member stored 19; the caller takes nothing more and commits.
    state.answer(later, messages(0, 20..25)).unwrap();
    state.request_commit();
    let next = step(&mut state, later);
    assert!(
        matches!(next, Asks::Sync | Asks::Wait),
        "9 is not stored over 19: {next:?}"
    );
}

#[test]
fn a_partition_given_up_and_back_is_read_from_the_stored_offset() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0, 1]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    let brought = handed(&mut state, now, messages(0, 0..10), Some((1, &[0, 1])));
    assert_eq!(brought, 10);
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(2, &[1])).unwrap();
    // The caller went away; partition 0 went to another member and came back meanwhile.
    let much_later = later + Duration::from_secs(2);
    assert_eq!(step(&mut state, much_later), Asks::Sync);
    state.answer(much_later, assignment(5, &[0, 1])).unwrap();
    let next = step(&mut state, much_later);
    assert!(
        matches!(next, Asks::Poll(0 | 1, PollingStrategy::Next)),
        "nothing of partition 0 stored: {next:?}"
    );
}

#[test]
fn an_interval_member_with_nothing_to_commit_waits_for_its_partitions() {
    let now = Instant::now();
    let every = AutoCommit::Interval(Duration::from_millis(10));
    let mut state = member(now, every, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    assert_eq!(
        handed(&mut state, now, messages(0, 0..3), Some((1, &[0]))),
        3
    );
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0])).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 2));
    state.answer(now, Ok(Reply::OffsetStored)).unwrap();
    assert_eq!(
        step(&mut state, now),
        Asks::Poll(0, PollingStrategy::Offset(3))
    );
    state.answer(now, messages(0, 3..3)).unwrap();
    let soon = now + Duration::from_millis(50);
    match state.next_step(soon) {
        Step::Wait(until) => assert!(until > soon, "a wait that ends at once: a spin"),
        Step::Submit(request) => panic!("asks {request:?} with nothing due"),
    }
}

#[test]
fn a_second_consumer_of_a_group_on_one_client_is_refused() {
    let claims = GroupClaims::new(|| {});
    let first = ConsumerState::claiming(config(AutoCommit::Never), &claims).unwrap();
    let second = ConsumerState::claiming(config(AutoCommit::Never), &claims);
    assert!(matches!(
        second,
        Err(ClientError::GroupConsumerExists { .. })
    ));
    drop(first);
    assert!(ConsumerState::claiming(config(AutoCommit::Never), &claims).is_ok());
}

#[test]
fn a_member_dropped_without_leaving_asks_its_client_to_end_the_membership() {
    let now = Instant::now();
    let claims = GroupClaims::new(|| {});
    let mut state = ConsumerState::claiming(config(AutoCommit::Never), &claims).unwrap();
    // No such stream to resolve the names with: the join will say what is wrong.
    assert_eq!(step(&mut state, now), Asks::ResolveStream);
    state.answer(now, Ok(Reply::Stream(None))).unwrap();
    assert_eq!(step(&mut state, now), Asks::Join);
    state.answer(now, done()).unwrap();
    drop(state);
    assert_eq!(claims.take_leaving().len(), 1);

    // One that left, or never joined, leaves nothing to end.
    let mut left = ConsumerState::claiming(config(AutoCommit::Never), &claims).unwrap();
    assert_eq!(step(&mut left, now), Asks::ResolveStream);
    left.answer(now, Ok(Reply::Stream(None))).unwrap();
    assert_eq!(step(&mut left, now), Asks::Join);
    left.answer(now, done()).unwrap();
    assert!(left.leave_call().is_some());
    left.left();
    drop(left);
    drop(ConsumerState::claiming(config(AutoCommit::Never), &claims).unwrap());
    assert!(claims.take_leaving().is_empty());
}

#[test]
fn a_member_starts_where_the_group_left_off_whatever_its_strategy() {
    let now = Instant::now();
    // `First` and `Next` both read after the group's stored offset, from the start when
    // nothing is stored.
    for strategy in [PollingStrategy::First, PollingStrategy::Next] {
        let mut state = member_with(now, strategy);
        assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    }
    // Any other strategy applies only where the group stored nothing.
    for strategy in [PollingStrategy::Last, PollingStrategy::Offset(0)] {
        let mut state = member_with(now, strategy);
        assert_eq!(step(&mut state, now), Asks::StoredOffset);
        state.answer(now, stored(Some(41))).unwrap();
        assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
        let mut fresh = member_with(now, strategy);
        assert_eq!(step(&mut fresh, now), Asks::StoredOffset);
        fresh.answer(now, stored(None)).unwrap();
        assert_eq!(step(&mut fresh, now), Asks::Poll(0, strategy));
    }
}
