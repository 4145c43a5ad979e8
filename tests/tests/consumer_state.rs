//! The consumer state machine of the core, step by step with scripted answers: what a
//! group member asks, and what it makes of the answers, where ownership changes hands.
//! Each test pins one rule of the module documentation of `client::consumer`.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, GroupClaims, Step,
};
use iggy_route_core::wire::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupMember,
    ErrorCode, Identifier, Name, PollMessagesReply, PolledMessage, PollingStrategy, code,
};
use iggy_route_core::{AdminRequest, Reply, ReplyPayload, Request, RequestError};

const POLL_INTERVAL: Duration = Duration::from_millis(100);

fn config(auto_commit: AutoCommit) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(
        Identifier::Numeric(1),
        Identifier::Numeric(1),
        ConsumerIdentity::Group(Identifier::try_from("readers").unwrap()),
    );
    config.batch_length = 10;
    config.poll_interval = POLL_INTERVAL;
    config.auto_commit = auto_commit;
    config.create_group = false;
    config
}

/// What a step asks, in a word.
#[derive(Debug, PartialEq, Eq)]
enum Asks {
    Join,
    Sync,
    Poll(u32, PollingStrategy),
    Commit(u32, u64),
    StoredOffset,
    Listing,
    ResolveStream,
    Wait,
}

fn step(state: &mut ConsumerState, now: Instant) -> Asks {
    match state.next_step(now) {
        Step::Wait(_) => Asks::Wait,
        Step::Submit(Request::Poll(poll)) => Asks::Poll(poll.partition_id.unwrap(), poll.strategy),
        Step::Submit(Request::StoreOffset(store)) => Asks::Commit(store.partition_id, store.offset),
        Step::Submit(Request::Command(command)) => match command.code {
            code::JOIN_CONSUMER_GROUP => Asks::Join,
            code::SYNC_CONSUMER_GROUP => Asks::Sync,
            code::GET_CONSUMER_OFFSET => Asks::StoredOffset,
            code::GET_CONSUMER_GROUP => Asks::Listing,
            other => panic!("unexpected command {other}"),
        },
        Step::Submit(Request::Admin(AdminRequest::GetStream { .. })) => Asks::ResolveStream,
        Step::Submit(other) => panic!("unexpected request {other:?}"),
    }
}

/// The next step after the read of the group's stored offset that precedes a commit,
/// answered as nobody else having stored anything.
fn past_read(state: &mut ConsumerState, now: Instant) -> Asks {
    let next = step(state, now);
    if next != Asks::StoredOffset {
        return next;
    }
    state.answer(now, stored(None)).unwrap();
    step(state, now)
}

fn done() -> Result<Reply, ClientError> {
    Ok(Reply::Payload(ReplyPayload(Bytes::new())))
}

fn assignment(generation: u64, partitions: &[u32]) -> Result<Reply, ClientError> {
    let mut out = BytesMut::new();
    ConsumerGroupAssignment {
        generation,
        partitions: partitions.to_vec(),
    }
    .encode(&mut out);
    Ok(Reply::Payload(ReplyPayload(out.freeze())))
}

fn messages(partition: u32, offsets: std::ops::Range<u64>) -> Result<Reply, ClientError> {
    Ok(Reply::Polled(PollMessagesReply {
        partition_id: partition,
        current_offset: offsets.end,
        messages: offsets
            .map(|offset| PolledMessage {
                offset,
                id: u128::from(offset) + 1,
                timestamp: 0,
                origin_timestamp: 0,
                payload: Bytes::from_static(b"m"),
                user_headers: Bytes::new(),
            })
            .collect(),
    }))
}

/// Answers the poll out and takes every message it brought: how many. With `view`, the
/// poll brought messages a group member hands out only after a sync confirms them: the
/// next step is that sync, answered with `view` (generation, partitions).
fn handed(
    state: &mut ConsumerState,
    now: Instant,
    reply: Result<Reply, ClientError>,
    view: Option<(u64, &[u32])>,
) -> usize {
    state.answer(now, reply).unwrap();
    if let Some((generation, partitions)) = view {
        assert!(state.next_message(now).is_none(), "handed out unconfirmed");
        assert_eq!(step(state, now), Asks::Sync, "a sync confirms the poll");
        state
            .answer(now, assignment(generation, partitions))
            .unwrap();
    }
    std::iter::from_fn(|| state.next_message(now)).count()
}

/// The group's listing: each member's partitions (pending hand-overs included).
fn listing(members: &[&[u32]]) -> Result<Reply, ClientError> {
    let details = ConsumerGroupDetails {
        info: ConsumerGroupInfo {
            id: 0,
            partitions_count: 2,
            members_count: u32::try_from(members.len()).unwrap(),
            name: Name::new("readers").unwrap(),
        },
        members: members
            .iter()
            .enumerate()
            .map(|(slot, partitions)| ConsumerGroupMember {
                id: u32::try_from(slot).unwrap(),
                partitions: partitions.to_vec(),
            })
            .collect(),
    };
    let mut out = BytesMut::new();
    details.encode(&mut out);
    Ok(Reply::Payload(ReplyPayload(out.freeze())))
}

fn refused(code: ErrorCode) -> Result<Reply, ClientError> {
    Err(ClientError::Request(RequestError::Server { code }))
}

/// A member that joined and synced `partitions` at `generation`.
fn member(
    now: Instant,
    auto_commit: AutoCommit,
    generation: u64,
    partitions: &[u32],
) -> ConsumerState {
    let mut state = ConsumerState::new(config(auto_commit));
    assert_eq!(step(&mut state, now), Asks::Join);
    state.answer(now, done()).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state
        .answer(now, assignment(generation, partitions))
        .unwrap();
    state
}

#[test]
fn a_partition_back_after_a_generation_jump_is_read_from_the_stored_offset() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[3]);
    assert_eq!(step(&mut state, now), Asks::Poll(3, PollingStrategy::Next));
    assert_eq!(
        handed(&mut state, now, messages(3, 0..10), Some((1, &[3]))),
        10
    );
    assert_eq!(
        step(&mut state, now),
        Asks::Poll(3, PollingStrategy::Offset(10))
    );
    handed(&mut state, now, messages(3, 10..10), None);
    // The member stops reading; meanwhile others join, read and commit partition 3, and
    // leave: the generation moved by three.
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(4, &[3])).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(3, PollingStrategy::Next),
        "not from its own old position"
    );
    // Another member stored 99, the last offset: nothing after it.
    assert_eq!(handed(&mut state, later, messages(3, 100..100), None), 0);
    assert!(state.uncommitted().is_empty());
    let after_idle = later + POLL_INTERVAL;
    assert_eq!(
        step(&mut state, after_idle),
        Asks::Poll(3, PollingStrategy::Next)
    );
    let brought = handed(
        &mut state,
        after_idle,
        messages(3, 100..103),
        Some((4, &[3])),
    );
    assert_eq!(brought, 3);
}

#[test]
fn a_partition_listed_again_that_nobody_stored_meanwhile_goes_on_from_its_position() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0, 1, 2]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    let brought = handed(&mut state, now, messages(0, 0..10), Some((1, &[0, 1, 2])));
    assert_eq!(brought, 10);
    // Two members joined meanwhile and took partitions 1 and 2; 0 stayed, unseen.
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(3, &[0])).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Next)
    );
    // Nothing stored: the poll starts at 0, at or before the position.
    let again = handed(&mut state, later, messages(0, 0..10), None);
    assert_eq!(again, 0, "handed out twice");
    assert_eq!(past_read(&mut state, later), Asks::Commit(0, 9));
    state.answer(later, Ok(Reply::OffsetStored)).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Offset(10))
    );
}

#[test]
fn a_partition_listed_again_that_someone_stored_past_goes_on_from_there() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    handed(&mut state, now, messages(0, 0..10), Some((1, &[0])));
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(4, &[0])).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Next)
    );
    // Another member stored 29.
    let brought = handed(&mut state, later, messages(0, 30..40), Some((4, &[0])));
    assert_eq!(brought, 10);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(4, &[0])).unwrap();
    assert_eq!(past_read(&mut state, later), Asks::Commit(0, 39));
}

#[test]
fn a_partition_kept_through_one_rebalance_keeps_its_position() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[0, 1]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    handed(&mut state, now, messages(0, 0..5), Some((1, &[0, 1])));
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state.answer(later, assignment(2, &[0])).unwrap();
    assert_eq!(
        step(&mut state, later),
        Asks::Poll(0, PollingStrategy::Offset(5))
    );
}

#[test]
fn a_polls_messages_are_handed_out_and_stored_only_after_syncs_sent_after_them() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    state.answer(now, messages(0, 0..10)).unwrap();
    assert!(state.next_message(now).is_none(), "not before the sync");
    assert_eq!(
        step(&mut state, now),
        Asks::Sync,
        "the view is confirmed first"
    );
    state.answer(now, assignment(1, &[0])).unwrap();
    assert_eq!(std::iter::from_fn(|| state.next_message(now)).count(), 10);
    // The caller comes back for more: what it took is stored once a sync sent since
    // shows the partition still its own (it may have been slow).
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0])).unwrap();
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 9));
    state.answer(now, Ok(Reply::OffsetStored)).unwrap();
    assert_eq!(
        step(&mut state, now),
        Asks::Poll(0, PollingStrategy::Offset(10))
    );
}

#[test]
fn a_poll_answered_after_its_partition_changed_hands_is_never_handed_out() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    // A slow answer: partition 0 was another member's in between and is back.
    state.answer(now, messages(0, 0..10)).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(3, &[0])).unwrap();
    assert!(state.next_message(now).is_none(), "dropped");
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    assert!(state.uncommitted().is_empty());
}

#[test]
fn a_fenced_commit_syncs_again_and_is_no_error() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0, 1]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    handed(&mut state, now, messages(0, 0..10), Some((1, &[0, 1])));
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
    handed(&mut state, now, messages(1, 0..10), Some((1, &[0, 1])));
    assert_eq!(past_read(&mut state, now), Asks::Commit(0, 9));
    // Partition 0 went to a newcomer since.
    let answered = state.answer(now, refused(ErrorCode::ResourceNotFound));
    assert!(answered.is_ok(), "not an error for the caller");
    assert_eq!(state.stats().commits_fenced, 1);
    assert_eq!(step(&mut state, now), Asks::Sync);
}

/// The next step past a sync due (answered with the same view of partitions 0 and 1) and
/// the read of the stored offset before a commit.
fn settled(state: &mut ConsumerState, now: Instant) -> Asks {
    loop {
        match step(state, now) {
            Asks::Sync => state.answer(now, assignment(1, &[0, 1])).unwrap(),
            Asks::StoredOffset => state.answer(now, stored(None)).unwrap(),
            other @ (Asks::Join
            | Asks::Poll(..)
            | Asks::Commit(..)
            | Asks::Listing
            | Asks::ResolveStream
            | Asks::Wait) => return other,
        }
    }
}

/// A partition whose primary cannot store its offset once held up every other: with
/// `AfterPoll` the commit comes before the partition's next poll, and after a failure the
/// next step was the same write, again and again (seen on the real cluster while a node was
/// down, every request timeout another `TimedOut` for one partition's offset while the
/// others took sends). The failing partition now waits, longer after each failure, while
/// the others are committed and read; its offset is stored once it is due again.
#[test]
fn a_partition_whose_offset_cannot_be_stored_does_not_hold_up_the_others() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::AfterPoll, 1, &[0, 1]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    handed(&mut state, now, messages(0, 0..10), Some((1, &[0, 1])));
    assert_eq!(step(&mut state, now), Asks::Poll(1, PollingStrategy::Next));
    handed(&mut state, now, messages(1, 0..10), Some((1, &[0, 1])));
    assert_eq!(settled(&mut state, now), Asks::Commit(0, 9));
    let timed_out = Err(ClientError::Request(RequestError::TimedOut {
        after: Duration::from_secs(3),
    }));
    assert!(state.answer(now, timed_out.clone()).is_err());
    // After the error's pause the other partition goes on.
    let later = now + POLL_INTERVAL;
    assert_eq!(settled(&mut state, later), Asks::Commit(1, 9));
    state.answer(later, done()).unwrap();
    assert_eq!(
        settled(&mut state, later),
        Asks::Poll(1, PollingStrategy::Offset(10))
    );
    handed(&mut state, later, messages(1, 10..20), Some((1, &[0, 1])));
    // Partition 0's offset is stored when it is due again; failing again, it waits twice
    // as long, and partition 1 is read on meanwhile.
    let due = now + 3 * POLL_INTERVAL;
    let mut retried = false;
    for _ in 0..6 {
        match settled(&mut state, due) {
            Asks::Commit(0, 9) => {
                retried = true;
                break;
            }
            Asks::Commit(1, _) => state.answer(due, done()).unwrap(),
            Asks::Poll(1, _) => {
                handed(&mut state, due, messages(1, 20..20), None);
            }
            other @ (Asks::Join
            | Asks::Sync
            | Asks::Poll(..)
            | Asks::Commit(..)
            | Asks::StoredOffset
            | Asks::Listing
            | Asks::ResolveStream
            | Asks::Wait) => panic!("partition 0 due, and asked {other:?}"),
        }
    }
    assert!(
        retried,
        "partition 0's offset is stored again once it is due"
    );
    assert!(state.answer(due, timed_out).is_err());
    let after = due + POLL_INTERVAL;
    assert!(
        matches!(
            settled(&mut state, after),
            Asks::Poll(1, _) | Asks::Commit(1, _)
        ),
        "partition 1 goes on"
    );
    assert_eq!(state.stats().commit_failures, 2);
}

#[test]
fn a_fenced_poll_syncs_and_the_partition_waits_a_poll_interval() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[0]);
    assert_eq!(step(&mut state, now), Asks::Poll(0, PollingStrategy::Next));
    let fenced = Ok(Reply::Polled(PollMessagesReply {
        partition_id: u32::MAX,
        current_offset: 0,
        messages: Vec::new(),
    }));
    state.answer(now, fenced).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    // A node that had not applied the join: the sync says the partition is ours.
    state.answer(now, assignment(1, &[0])).unwrap();
    assert_eq!(step(&mut state, now), Asks::Wait, "no poll at once");
    assert_eq!(
        step(&mut state, now + POLL_INTERVAL),
        Asks::Poll(0, PollingStrategy::Next)
    );
}

#[test]
fn a_sync_answered_not_a_member_joins_again_after_a_poll_interval() {
    let now = Instant::now();
    let mut state = member(now, AutoCommit::Never, 1, &[0]);
    let later = now + Duration::from_secs(2);
    assert_eq!(step(&mut state, later), Asks::Sync);
    state
        .answer(later, Ok(Reply::Payload(ReplyPayload(Bytes::new()))))
        .unwrap();
    assert_eq!(step(&mut state, later), Asks::Wait);
    assert_eq!(step(&mut state, later + POLL_INTERVAL), Asks::Join);
}

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

/// A member configured to start each partition where `strategy` says, that joined and
/// synced partition 0.
fn member_with(now: Instant, strategy: PollingStrategy) -> ConsumerState {
    let mut config = config(AutoCommit::AfterPoll);
    config.strategy = strategy;
    let mut state = ConsumerState::new(config);
    assert_eq!(step(&mut state, now), Asks::Join);
    state.answer(now, done()).unwrap();
    assert_eq!(step(&mut state, now), Asks::Sync);
    state.answer(now, assignment(1, &[0])).unwrap();
    state
}

fn stored(offset: Option<u64>) -> Result<Reply, ClientError> {
    let mut out = BytesMut::new();
    if let Some(offset) = offset {
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&100u64.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    Ok(Reply::Payload(ReplyPayload(out.freeze())))
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
