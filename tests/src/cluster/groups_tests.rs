//! The consumer-group family on the wire, as the real server answers it (its source; see
//! `handlers_groups`): ids, not-found shapes, the leader-only writes, membership bound to
//! the joining session and ended with it, what a sync answers each member, and the
//! cooperative handover of a partition the group has in flight (`revocations`).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use iggy_route_core::wire::{
    Consumer, ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupRef,
    ConsumerKind, ConsumerOffsetKey, CreateConsumerGroupRequest, CreatePartitionsRequest,
    ErrorCode, GetConsumerGroupsRequest, Identifier, Name, Operation, PollMessagesReply,
    PollMessagesRequest, PollingStrategy, StoreConsumerOffsetRequest, code,
};

use super::revocations::{REBALANCING_TIMEOUT, REVOCATION_TICK};
use super::state::{ClusterConfig, ClusterState, Lag};
use super::testkit::{Client, cluster, encode, seed_topic, send_body};

fn group(stream: u32, topic: u32, group: Identifier) -> ConsumerGroupRef {
    ConsumerGroupRef {
        stream: stream.into(),
        topic: topic.into(),
        group,
    }
}

fn create(client: &mut Client, state: &mut ClusterState, name: &str) -> super::testkit::Answer {
    let request = CreateConsumerGroupRequest {
        stream: Identifier::Numeric(0),
        topic: Identifier::Numeric(0),
        name: Name::new(name).unwrap(),
    };
    client.write(
        state,
        Operation::CreateConsumerGroup,
        encode(|o| request.encode(o)),
    )
}

fn member_write(
    client: &mut Client,
    state: &mut ClusterState,
    operation: Operation,
    id: u32,
) -> super::testkit::Answer {
    let request = group(0, 0, Identifier::Numeric(id));
    client.write(state, operation, encode(|o| request.encode(o)))
}

fn sync(client: &mut Client, state: &mut ClusterState) -> Option<ConsumerGroupAssignment> {
    let request = group(0, 0, Identifier::Numeric(0));
    let answer = client.read(
        state,
        code::SYNC_CONSUMER_GROUP,
        encode(|o| request.encode(o)),
    );
    assert_eq!(answer.status(), 0);
    ConsumerGroupAssignment::decode(&answer.body()).unwrap()
}

fn state() -> ClusterState {
    let mut state = cluster(3);
    let (stream, topic) = seed_topic(&mut state, 3);
    assert_eq!((stream, topic), (0, 0), "the real cluster's ids start at 0");
    state
}

/// A group poll of group 0 from offset 0: the reply's partition and how many messages.
fn group_poll(
    client: &mut Client,
    state: &mut ClusterState,
    partition: u32,
    auto_commit: bool,
) -> (u32, usize) {
    let request = PollMessagesRequest {
        consumer: group_consumer(),
        stream: 0.into(),
        topic: 0.into(),
        partition_id: Some(partition),
        strategy: PollingStrategy::Offset(0),
        count: 10,
        auto_commit,
    };
    let answer = client.read(state, code::POLL_MESSAGES, encode(|o| request.encode(o)));
    assert_eq!(answer.status(), 0);
    let reply = PollMessagesReply::decode(&answer.body()).unwrap();
    (reply.partition_id, reply.messages.len())
}

fn group_consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::Numeric(0),
    }
}

#[test]
fn groups_are_created_listed_read_and_deleted_with_the_server_s_answers() {
    let mut state = state();
    let mut leader = Client::signed_in(&mut state, 0, 1);
    let created = create(&mut leader, &mut state, "billing");
    assert_eq!(created.result_code(), 0);
    let details = ConsumerGroupDetails::decode(&created.result_payload())
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            details.info.id,
            details.info.partitions_count,
            details.members.len()
        ),
        (0, 3, 0)
    );
    assert_eq!(
        create(&mut leader, &mut state, "billing").result_code(),
        5004
    );
    assert_eq!(create(&mut leader, &mut state, "audit").result_code(), 0);
    let list = GetConsumerGroupsRequest {
        stream: 0.into(),
        topic: 0.into(),
    };
    let listed = leader.read(
        &mut state,
        code::GET_CONSUMER_GROUPS,
        encode(|o| list.encode(o)),
    );
    let names: Vec<(u32, String)> = ConsumerGroupInfo::decode_list(&listed.body())
        .unwrap()
        .into_iter()
        .map(|g| (g.id, g.name.as_str().to_owned()))
        .collect();
    assert_eq!(
        names,
        vec![(0, "billing".to_owned()), (1, "audit".to_owned())]
    );
    let by_name = group(0, 0, Identifier::try_from("audit").unwrap());
    let read = leader.read(
        &mut state,
        code::GET_CONSUMER_GROUP,
        encode(|o| by_name.encode(o)),
    );
    assert_eq!(
        ConsumerGroupDetails::decode(&read.body())
            .unwrap()
            .unwrap()
            .info
            .id,
        1
    );
    let deleted = member_write(&mut leader, &mut state, Operation::DeleteConsumerGroup, 0);
    assert_eq!(deleted.result_code(), 0);
    let again = member_write(&mut leader, &mut state, Operation::DeleteConsumerGroup, 0);
    assert_eq!(again.result_code(), 5000, "ConsumerGroupIdNotFound");
    // A missing group reads as an empty body; a missing topic on the status channel.
    let missing = group(0, 0, Identifier::Numeric(0));
    let read = leader.read(
        &mut state,
        code::GET_CONSUMER_GROUP,
        encode(|o| missing.encode(o)),
    );
    assert_eq!((read.status(), read.body().len()), (0, 0));
    let no_topic = group(0, 9, Identifier::Numeric(0));
    let read = leader.read(
        &mut state,
        code::GET_CONSUMER_GROUP,
        encode(|o| no_topic.encode(o)),
    );
    assert_eq!(read.status(), ErrorCode::TopicIdNotFound.as_u32());
    // Ids are never reused.
    assert_eq!(
        ConsumerGroupDetails::decode(&create(&mut leader, &mut state, "new").result_payload())
            .unwrap()
            .unwrap()
            .info
            .id,
        2
    );
}

#[test]
fn group_writes_are_admitted_by_the_leader_only() {
    let mut state = state();
    let mut follower = Client::signed_in(&mut state, 1, 1);
    let refused = create(&mut follower, &mut state, "g");
    assert_eq!(
        refused.result_code(),
        ErrorCode::TransientNotAccepted.as_u32()
    );
    let mut leader = Client::signed_in(&mut state, 0, 2);
    assert_eq!(create(&mut leader, &mut state, "g").result_code(), 0);
    let join = member_write(&mut follower, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(join.result_code(), ErrorCode::TransientNotAccepted.as_u32());
}

#[test]
fn members_sync_their_own_partitions_and_a_session_s_end_rebalances() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    assert_eq!(create(&mut first, &mut state, "g").result_code(), 0);
    assert_eq!(sync(&mut first, &mut state), None, "not a member yet");
    let joined = member_write(&mut first, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(joined.result_code(), 0);
    let alone = sync(&mut first, &mut state).unwrap();
    assert_eq!(alone.partitions, vec![0, 1, 2]);
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    let (a, b) = (
        sync(&mut first, &mut state).unwrap(),
        sync(&mut second, &mut state).unwrap(),
    );
    assert_eq!((a.partitions, b.partitions), (vec![0, 1], vec![2]));
    assert!(a.generation > alone.generation);
    // More partitions: the group re-stripes.
    let more = CreatePartitionsRequest {
        stream: 0.into(),
        topic: 0.into(),
        partitions_count: 1,
    };
    let answer = first.write(
        &mut state,
        Operation::CreatePartitions,
        encode(|o| more.encode(o)),
    );
    assert_eq!(answer.result_code(), 0);
    assert_eq!(sync(&mut first, &mut state).unwrap().partitions, vec![0, 2]);
    // The first member's connection closes: its membership ends with its session.
    first.connection.close(&mut state);
    assert_eq!(
        sync(&mut second, &mut state).unwrap().partitions,
        vec![0, 1, 2, 3]
    );
    let left = member_write(&mut second, &mut state, Operation::LeaveConsumerGroup, 0);
    assert_eq!(left.result_code(), 0);
    let again = member_write(&mut second, &mut state, Operation::LeaveConsumerGroup, 0);
    assert_eq!(again.result_code(), 5006, "ConsumerGroupMemberNotFound");
    assert_eq!(sync(&mut second, &mut state), None);
}

/// The poll fence, as the real server's `resolve_poll_request` makes it: a group poll reads
/// only a partition the member (the header's client id) owns now; anything else is the
/// empty poll whose partition is `u32::MAX`, the SDK's signal to re-sync.
#[test]
fn a_group_poll_of_a_partition_the_member_does_not_own_says_re_sync() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    let mut outsider = Client::signed_in(&mut state, 0, 33);
    assert_eq!(create(&mut first, &mut state, "g").result_code(), 0);
    member_write(&mut first, &mut state, Operation::JoinConsumerGroup, 0);
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    for partition in 0..3 {
        let sent = first.write(
            &mut state,
            Operation::SendMessages,
            send_body(0, 0, partition, &["m"]),
        );
        assert_eq!(sent.status(), 0);
    }
    let poll = |client: &mut Client, state: &mut ClusterState, partition: u32| {
        group_poll(client, state, partition, false)
    };
    assert_eq!(poll(&mut first, &mut state, 0), (0, 1));
    assert_eq!(
        poll(&mut first, &mut state, 2),
        (u32::MAX, 0),
        "the second's partition"
    );
    assert_eq!(poll(&mut second, &mut state, 2), (2, 1));
    assert_eq!(
        poll(&mut outsider, &mut state, 0),
        (u32::MAX, 0),
        "not a member"
    );
}

// ---- the cooperative handover (`revocations`) ------------------------------------------

/// The partitions each member is listed with by `GET_CONSUMER_GROUP`, in slot order.
fn listed(client: &mut Client, state: &mut ClusterState) -> Vec<Vec<u32>> {
    let request = group(0, 0, Identifier::Numeric(0));
    let read = client.read(
        state,
        code::GET_CONSUMER_GROUP,
        encode(|o| request.encode(o)),
    );
    ConsumerGroupDetails::decode(&read.body())
        .unwrap()
        .unwrap()
        .members
        .into_iter()
        .map(|member| member.partitions)
        .collect()
}

/// The result code of group 0's offset commit of `offset` on `partition`.
fn commit(client: &mut Client, state: &mut ClusterState, partition: u32, offset: u64) -> u32 {
    let request = StoreConsumerOffsetRequest {
        key: ConsumerOffsetKey {
            consumer: group_consumer(),
            stream: 0.into(),
            topic: 0.into(),
            partition_id: Some(partition),
        },
        offset,
    };
    let answer = client.write(
        state,
        Operation::StoreConsumerOffset,
        encode(|o| request.encode(o)),
    );
    assert_eq!(answer.status(), 0, "the commit was admitted");
    answer.result_code()
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap()
}

/// Group 0 created; `first` (client 11) joined alone and holds every partition, each of
/// which holds two messages; `first` polled partition 2 (the one a second member's join
/// takes) without committing. Returns the generation then.
fn first_in_flight_on_2(state: &mut ClusterState, first: &mut Client) -> u64 {
    assert_eq!(create(first, state, "g").result_code(), 0);
    member_write(first, state, Operation::JoinConsumerGroup, 0);
    for partition in 0..3 {
        let sent = first.write(
            state,
            Operation::SendMessages,
            send_body(0, 0, partition, &["a", "b"]),
        );
        assert_eq!(sent.status(), 0);
    }
    assert_eq!(group_poll(first, state, 2, false), (2, 2));
    sync(first, state).unwrap().generation
}

#[test]
fn a_partition_in_flight_stays_with_its_source_until_it_commits_what_it_polled() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    let before = first_in_flight_on_2(&mut state, &mut first);
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    // Still the source's in listings; it may no longer poll it, and nobody else may yet.
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    let (a, b) = (
        sync(&mut first, &mut state).unwrap(),
        sync(&mut second, &mut state).unwrap(),
    );
    assert_eq!((a.partitions, b.partitions), (vec![0, 1], vec![]));
    assert_eq!(a.generation, before + 1, "the join bumped it");
    assert_eq!(group_poll(&mut first, &mut state, 2, false), (u32::MAX, 0));
    assert_eq!(group_poll(&mut second, &mut state, 2, false), (u32::MAX, 0));
    assert_eq!(group_poll(&mut first, &mut state, 0, false), (0, 2));
    // Ticks pass: nothing was committed, so nothing moves.
    state.set_now_micros(micros(REVOCATION_TICK) * 5);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    // A commit short of what was polled is accepted, and is not enough.
    assert_eq!(commit(&mut first, &mut state, 2, 0), 0);
    state.set_now_micros(micros(REVOCATION_TICK) * 6);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    // The commit of the last polled offset drains it; the reconciler's next tick hands it
    // over, not earlier.
    assert_eq!(commit(&mut first, &mut state, 2, 1), 0);
    state.set_now_micros(micros(REVOCATION_TICK) * 6 + 5_000);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    let commit_before = state.commit();
    state.set_now_micros(micros(REVOCATION_TICK) * 7);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1], vec![2]]);
    assert_eq!(state.commit(), commit_before + 1, "a committed metadata op");
    let (a, b) = (
        sync(&mut first, &mut state).unwrap(),
        sync(&mut second, &mut state).unwrap(),
    );
    assert_eq!((a.partitions, b.partitions), (vec![0, 1], vec![2]));
    assert_eq!(b.generation, before + 2, "the handover bumped it");
    assert_eq!(group_poll(&mut second, &mut state, 2, false), (2, 2));
    // The old owner's commit is fenced now.
    let request = StoreConsumerOffsetRequest {
        key: ConsumerOffsetKey {
            consumer: group_consumer(),
            stream: 0.into(),
            topic: 0.into(),
            partition_id: Some(2),
        },
        offset: 1,
    };
    let fenced = first.write(
        &mut state,
        Operation::StoreConsumerOffset,
        encode(|o| request.encode(o)),
    );
    assert_eq!(fenced.status(), ErrorCode::ResourceNotFound.as_u32());
}

#[test]
fn a_pending_revocation_times_out_after_the_rebalancing_timeout() {
    assert_eq!(
        ClusterConfig::new(3).rebalancing_timeout,
        REBALANCING_TIMEOUT
    );
    assert_eq!(
        REBALANCING_TIMEOUT,
        Duration::from_secs(30),
        "the server's default"
    );
    let timeout = Duration::from_secs(2);
    let mut state = ClusterState::new(&ClusterConfig {
        lag: Lag::NONE,
        rebalancing_timeout: timeout,
        ..ClusterConfig::new(3)
    });
    seed_topic(&mut state, 3);
    let start = 1_000_000_000;
    state.set_now_micros(start);
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    first_in_flight_on_2(&mut state, &mut first);
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    state.set_now_micros(start + micros(timeout) - 1);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    // Nobody committed anything: the timeout hands it over at the first tick at or past it.
    state.set_now_micros(start + micros(timeout));
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1], vec![2]]);
    assert_eq!(sync(&mut second, &mut state).unwrap().partitions, vec![2]);
}

#[test]
fn a_leave_or_a_session_s_end_drops_the_pending_revocation() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    let mut third = Client::signed_in(&mut state, 0, 33);
    first_in_flight_on_2(&mut state, &mut first);
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(sync(&mut first, &mut state).unwrap().partitions, vec![0, 1]);
    // The target leaves: a re-stripe, and the source may poll all of its own again.
    member_write(&mut second, &mut state, Operation::LeaveConsumerGroup, 0);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2]]);
    assert_eq!(
        sync(&mut first, &mut state).unwrap().partitions,
        vec![0, 1, 2]
    );
    assert_eq!(group_poll(&mut first, &mut state, 2, false), (2, 2));
    // Revoked again by the next join; then the source's session ends: everything moves.
    member_write(&mut third, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1, 2], vec![]]);
    first.connection.close(&mut state);
    assert_eq!(listed(&mut third, &mut state), vec![vec![0, 1, 2]]);
    let resynced = sync(&mut third, &mut state).unwrap();
    assert_eq!(resynced.partitions, vec![0, 1, 2]);
    // Nothing is left pending: the ticks change nothing.
    state.set_now_micros(micros(REBALANCING_TIMEOUT) * 2);
    assert_eq!(
        sync(&mut third, &mut state).unwrap().generation,
        resynced.generation
    );
}

#[test]
fn a_partition_never_polled_or_already_committed_moves_at_once() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    let mut third = Client::signed_in(&mut state, 0, 33);
    assert_eq!(create(&mut first, &mut state, "g").result_code(), 0);
    member_write(&mut first, &mut state, Operation::JoinConsumerGroup, 0);
    for partition in 0..3 {
        first.write(
            &mut state,
            Operation::SendMessages,
            send_body(0, 0, partition, &["a"]),
        );
    }
    // Partition 0 is in flight, but stays with its member anyway; 2 was never polled.
    assert_eq!(group_poll(&mut first, &mut state, 0, false), (0, 1));
    let before = sync(&mut first, &mut state).unwrap().generation;
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(listed(&mut first, &mut state), vec![vec![0, 1], vec![2]]);
    assert_eq!(sync(&mut second, &mut state).unwrap().partitions, vec![2]);
    assert_eq!(sync(&mut first, &mut state).unwrap().generation, before + 1);
    // Partition 1 was polled with an auto-commit: drained, it moves at once too.
    assert_eq!(group_poll(&mut first, &mut state, 1, true), (1, 1));
    member_write(&mut third, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(
        listed(&mut first, &mut state),
        vec![vec![0], vec![2], vec![1]]
    );
    assert_eq!(sync(&mut first, &mut state).unwrap().generation, before + 2);
}

/// The mark is the serving replica's: a poll another node served leaves none on the
/// metadata leader, which alone classifies a join, so the partition moves at once.
#[test]
fn only_the_metadata_leader_s_own_polls_make_a_partition_in_flight() {
    let mut state = state();
    let mut first = Client::signed_in(&mut state, 0, 11);
    let mut second = Client::signed_in(&mut state, 0, 22);
    assert_eq!(create(&mut first, &mut state, "g").result_code(), 0);
    member_write(&mut first, &mut state, Operation::JoinConsumerGroup, 0);
    let sent = first.write(
        &mut state,
        Operation::SendMessages,
        send_body(0, 0, 2, &["a"]),
    );
    assert_eq!(sent.status(), 0);
    // The member's plain poll, served by a follower (a plain poll names its member by the
    // header's client id).
    let mut on_follower = Client::signed_in(&mut state, 1, 11);
    assert_eq!(group_poll(&mut on_follower, &mut state, 2, false), (2, 1));
    member_write(&mut second, &mut state, Operation::JoinConsumerGroup, 0);
    assert_eq!(listed(&mut second, &mut state), vec![vec![0, 1], vec![2]]);
}
