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

#[path = "consumer_state/commits.rs"]
mod commits;
#[path = "consumer_state/drains.rs"]
mod drains;
#[path = "consumer_state/ownership.rs"]
mod ownership;
