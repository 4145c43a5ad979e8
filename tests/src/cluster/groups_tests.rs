//! The consumer-group family on the wire, as the real server answers it (its source; see
//! `handlers_groups`): ids, not-found shapes, the leader-only writes, membership bound to
//! the joining session and ended with it, and what a sync answers each member.
#![allow(clippy::unwrap_used)]

use iggy_route_core::wire::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupInfo, ConsumerGroupRef,
    CreateConsumerGroupRequest, CreatePartitionsRequest, ErrorCode, GetConsumerGroupsRequest,
    Identifier, Name, Operation, code,
};

use super::state::ClusterState;
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
    use iggy_route_core::wire::{
        Consumer, ConsumerKind, PollMessagesReply, PollMessagesRequest, PollingStrategy,
    };
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
        let request = PollMessagesRequest {
            consumer: Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: Identifier::Numeric(0),
            },
            stream: 0.into(),
            topic: 0.into(),
            partition_id: Some(partition),
            strategy: PollingStrategy::Offset(0),
            count: 10,
            auto_commit: false,
        };
        let answer = client.read(state, code::POLL_MESSAGES, encode(|o| request.encode(o)));
        assert_eq!(answer.status(), 0);
        let reply = PollMessagesReply::decode(&answer.body()).unwrap();
        (reply.partition_id, reply.messages.len())
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
