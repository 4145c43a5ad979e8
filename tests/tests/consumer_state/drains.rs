//! A partition handed over: drained by its owner and stored, or given up.

use super::*;

/// A member handed 3 of a batch of partition 0, whose sync then shows partition 0 gone
/// (generation 2).
fn given_up_mid_batch(auto_commit: AutoCommit) -> (ConsumerState, Instant) {
    let now = Instant::now();
    let mut state = member(now, auto_commit, 1, &[0, 1]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    state.answer(now, messages(0, 0..10)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0, 1])).unwrap();
    for _ in 0..3 {
        state.next_message(now).unwrap();
    }
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(2, &[1])).unwrap();
    (state, later)
}

#[test]
fn a_partition_pending_hand_over_is_drained_then_stored_to_its_last_polled_offset() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    // Is partition 0 still ours? The member owning our partition 1 owns it too: pending.
    assert_eq!(step(&mut state, now), Asks::Listing);
    assert!(
        state.next_message(now).is_none(),
        "handed out before the check"
    );
    state.answer(now, listing(&[&[1, 0], &[]])).unwrap();
    // A sync after the listing shows nothing changed since partition 0 was given up.
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(2, &[1])).unwrap();
    let rest: Vec<u64> = std::iter::from_fn(|| state.next_message(now))
        .map(|m| m.message.offset)
        .collect();
    assert_eq!(rest, (3..10).collect::<Vec<_>>());
    // Everything polled is taken: once a read shows nobody stored past us, storing the
    // last of it hands the partition over.
    assert_eq!(step(&mut state, now), Asks::StoredOffset);
    state.answer(now, stored(None)).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 9));
    state.answer(now, done()).unwrap();
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
    assert!(state.uncommitted().is_empty());
}

#[test]
fn a_partition_moved_at_once_is_not_drained() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[1], &[0]])).unwrap();
    assert!(
        state.next_message(now).is_none(),
        "its next owner reads them"
    );
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
    assert!(state.uncommitted().is_empty(), "nothing of it is stored");
}

#[test]
fn a_partition_whose_owner_cannot_be_told_is_not_drained() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    state.answer(now, messages(0, 0..10)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    // Nothing left to us: no member can be told to be us in the listing.
    state.answer(now, assignment(2, &[])).unwrap();
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[0], &[]])).unwrap();
    assert!(state.next_message(now).is_none());
}

#[test]
fn a_never_committing_member_drains_and_stores_at_the_callers_word() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::Never);
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[0, 1]])).unwrap();
    // A sync after the listing shows nothing changed since partition 0 was given up.
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(2, &[1])).unwrap();
    assert_eq!(std::iter::from_fn(|| state.next_message(now)).count(), 7);
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
    state.answer(now, messages(1, 0..0)).unwrap();
    state.request_commit();
    assert_eq!(step(&mut state, now), Asks::StoredOffset);
    state.answer(now, stored(None)).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 9));
    state.answer(now, done()).unwrap();
    assert_eq!(step(&mut state, now), Asks::Wait);
    assert!(!state.commit_requested());
}

#[test]
fn a_drained_partition_someone_stored_past_is_not_stored_back() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[1, 0], &[]])).unwrap();
    // A sync after the listing shows nothing changed since partition 0 was given up.
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(2, &[1])).unwrap();
    assert_eq!(std::iter::from_fn(|| state.next_message(now)).count(), 7);
    // The caller went away; by the time it is back (after the read) a re-stripe moved the
    // partition and its next owner stored past: the write is not made on an old read.
    assert_eq!(step(&mut state, now), Asks::StoredOffset);
    state.answer(now, stored(None)).unwrap();
    let later = now + Duration::from_millis(300);
    assert_eq!(step(&mut state, later), Asks::StoredOffset);
    state.answer(later, stored(Some(20))).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(1, PollingStrategy::Next)
    );
    assert!(state.uncommitted().is_empty());
}

#[test]
fn a_partition_listed_again_while_it_drains_is_read_from_the_stored_offset() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[1, 0], &[]])).unwrap();
    // A sync after the listing shows nothing changed since partition 0 was given up.
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(2, &[1])).unwrap();
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(4, &[0, 1])).unwrap();
    assert!(
        state.next_message(later).is_none(),
        "its batch is read again"
    );
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Next)
    );
}

#[test]
fn a_partition_that_moved_away_and_back_under_a_pending_listing_is_not_drained() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    assert_eq!(step(&mut state, now), Asks::Listing);
    // Listed as ours, but the generation moved on: it may have gone to another member,
    // been read and stored, and come back (as pending again).
    state.answer(now, listing(&[&[1, 0], &[]])).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(3, &[1])).unwrap();
    assert!(state.next_message(now).is_none(), "not on that listing");
    assert_eq!(step(&mut state, now), Asks::Listing, "checked again");
    state.answer(now, listing(&[&[1], &[0]])).unwrap();
    assert!(state.next_message(now).is_none());
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
}

#[test]
fn a_commit_goes_out_only_after_a_read_shows_nobody_stored_past_the_member() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    assert_eq!(
        handed(&mut state, now, messages(0, 0..10), Some((1, &[0]))),
        10
    );
    assert_eq!(step(&mut state, now), Asks::Sync, "a sync after the takes");
    state.answer(now, assignment(1, &[0])).unwrap();
    // The partition went to another member, which stored 14, and came back meanwhile:
    // a write of 9 would move the stored offset back.
    assert_eq!(step(&mut state, now), Asks::StoredOffset);
    state.answer(now, stored(Some(14))).unwrap();
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    assert!(state.uncommitted().is_empty());
}

#[test]
fn a_drain_sees_more_than_one_change_and_gives_the_partition_up() {
    let (mut state, now) = given_up_mid_batch(AutoCommit::AfterPoll);
    assert_eq!(step(&mut state, now), Asks::Listing);
    state.answer(now, listing(&[&[1, 0], &[]])).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(4, &[1])).unwrap();
    assert!(state.next_message(now).is_none());
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
}
