//! The lag of followers and backups ([`super::state::Lag`]), as a real cluster showed it: a
//! follower answers metadata reads from a copy up to 200 ms old, a backup serves polls
//! from a copy up to 250 ms old, and the leader and the primary answer from the commit.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::wire::{
    CreatePartitionsRequest, CreateStreamRequest, GetStreamRequest, GetTopicRequest, Identifier,
    Name, Operation, PollMessagesReply, StreamDetails, TopicDetails, code,
};

use super::state::{ClusterConfig, ClusterState, Lag};
use super::testkit::{Client, encode, poll_body, send_body};

const MS: u64 = 1_000;

/// A 3-node cluster with the real cluster's lag, its clock at 10 s.
fn lagging() -> ClusterState {
    let mut state = ClusterState::new(&ClusterConfig::new(3));
    assert_eq!(state.lag(), Lag::REAL_CLUSTER);
    state.set_now_micros(10_000 * MS);
    state
}

fn get_stream(name: &str) -> Bytes {
    let request = GetStreamRequest {
        stream: Identifier::Named(Name::new(name).unwrap()),
    };
    encode(|out| request.encode(out))
}

fn get_topic(stream: u32, topic: u32) -> Bytes {
    let request = GetTopicRequest {
        stream: Identifier::Numeric(stream),
        topic: Identifier::Numeric(topic),
    };
    encode(|out| request.encode(out))
}

#[test]
fn a_follower_reads_a_stream_created_on_the_leader_as_absent_until_its_copy_catches_up() {
    let mut state = lagging();
    let mut leader = Client::signed_in(&mut state, 0, 1);
    let mut follower = Client::signed_in(&mut state, 1, 2);
    let create = CreateStreamRequest {
        name: Name::new("orders").unwrap(),
    };
    let created = leader.write(
        &mut state,
        Operation::CreateStream,
        encode(|out| create.encode(out)),
    );
    let commit = created.header().commit;
    state.set_now_micros(10_001 * MS);
    let early = follower.read(&mut state, code::GET_STREAM, get_stream("orders"));
    assert_eq!(early.status(), 0);
    assert!(
        early.body().is_empty(),
        "absent on the follower, 1 ms after"
    );
    assert!(
        early.header().commit < commit,
        "and its commit is from before the write"
    );
    let fresh = leader.read(&mut state, code::GET_STREAM, get_stream("orders"));
    assert!(
        StreamDetails::decode(&fresh.body()).is_ok(),
        "the leader has it"
    );
    state.set_now_micros(10_201 * MS);
    let later = follower.read(&mut state, code::GET_STREAM, get_stream("orders"));
    assert!(StreamDetails::decode(&later.body()).is_ok());
    assert_eq!(later.header().commit, state.commit());
}

#[test]
fn a_follower_reads_the_old_partition_count_for_a_while_after_partitions_are_added() {
    let mut state = lagging();
    let (stream, topic) = super::testkit::seed_topic(&mut state, 1);
    let mut leader = Client::signed_in(&mut state, 0, 1);
    let mut follower = Client::signed_in(&mut state, 2, 2);
    let add = CreatePartitionsRequest {
        stream: Identifier::Numeric(stream),
        topic: Identifier::Numeric(topic),
        partitions_count: 2,
    };
    leader.write(
        &mut state,
        Operation::CreatePartitions,
        encode(|out| add.encode(out)),
    );
    let count = |client: &mut Client, state: &mut ClusterState| {
        let body = client
            .read(state, code::GET_TOPIC, get_topic(stream, topic))
            .body();
        let topic = TopicDetails::decode(&body).unwrap();
        assert_eq!(
            topic.partitions.len() as u32,
            topic.summary.partitions_count
        );
        topic.summary.partitions_count
    };
    state.set_now_micros(10_100 * MS);
    assert_eq!(count(&mut follower, &mut state), 1);
    assert_eq!(count(&mut leader, &mut state), 3);
    state.set_now_micros(10_300 * MS);
    assert_eq!(count(&mut follower, &mut state), 3);
}

#[test]
fn a_backup_serves_a_poll_without_the_messages_of_the_last_250_ms_the_primary_with_them() {
    let mut state = lagging();
    let (stream, topic) = super::testkit::seed_topic(&mut state, 1);
    let mut writer = Client::signed_in(&mut state, 0, 1);
    writer.write(
        &mut state,
        Operation::SendMessages,
        send_body(stream, topic, 0, &["early"]),
    );
    state.set_now_micros(10_400 * MS);
    writer.write(
        &mut state,
        Operation::SendMessages,
        send_body(stream, topic, 0, &["late"]),
    );
    state.set_now_micros(10_500 * MS);
    let offsets = |client: &mut Client, state: &mut ClusterState| {
        let body = client
            .read(
                state,
                code::POLL_MESSAGES,
                poll_body(stream, topic, 0, false),
            )
            .body();
        let reply = PollMessagesReply::decode(&body).unwrap();
        let offsets: Vec<u64> = reply.messages.iter().map(|m| m.offset).collect();
        (offsets, reply.current_offset)
    };
    let mut backup = Client::signed_in(&mut state, 1, 2);
    assert_eq!(offsets(&mut backup, &mut state), (vec![0], 0));
    assert_eq!(offsets(&mut writer, &mut state), (vec![0, 1], 1));
    state.set_now_micros(10_650 * MS);
    assert_eq!(offsets(&mut backup, &mut state), (vec![0, 1], 1));
}

#[test]
fn a_send_commits_slowly_only_while_the_next_replica_of_its_chain_is_stopped() {
    let mut state = lagging();
    let (stream, topic) = super::testkit::seed_topic(&mut state, 1);
    let mut writer = Client::signed_in(&mut state, 0, 1);
    let mut send = |state: &mut ClusterState| {
        writer.write(
            state,
            Operation::SendMessages,
            send_body(stream, topic, 0, &["m"]),
        );
        state.take_reply_commit_delay()
    };
    assert_eq!(send(&mut state), std::time::Duration::ZERO);
    // Node 2 is after node 1 in the chain of a partition led by node 0: no wait.
    state.set_node_running(2, false);
    assert_eq!(send(&mut state), std::time::Duration::ZERO);
    // Node 1 is next after the primary: every commit waits for the prepare retransmit.
    state.set_node_running(1, false);
    assert_eq!(
        send(&mut state),
        Lag::REAL_CLUSTER.commit_with_next_replica_down
    );
    state.set_node_running(1, true);
    assert_eq!(send(&mut state), std::time::Duration::ZERO);
}

#[test]
fn a_slow_commit_holds_every_admitted_send_and_only_those() {
    let slow = std::time::Duration::from_millis(40);
    let mut state = ClusterState::new(&ClusterConfig {
        lag: Lag {
            partition_commit: slow,
            ..Lag::REAL_CLUSTER
        },
        ..ClusterConfig::new(3)
    });
    state.set_now_micros(10_000 * MS);
    let (stream, topic) = super::testkit::seed_topic(&mut state, 1);
    let mut writer = Client::signed_in(&mut state, 0, 1);
    let mut backup = Client::signed_in(&mut state, 1, 2);
    let send = |client: &mut Client, state: &mut ClusterState| {
        let answer = client.write(
            state,
            Operation::SendMessages,
            send_body(stream, topic, 0, &["m"]),
        );
        (answer.status(), state.take_reply_commit_delay())
    };
    assert_eq!(
        send(&mut writer, &mut state),
        (0, slow),
        "every commit waits"
    );
    assert_eq!(send(&mut writer, &mut state), (0, slow));
    // A refusal commits nothing, and a read is no commit: their replies are not held.
    assert_eq!(
        send(&mut backup, &mut state),
        (58, std::time::Duration::ZERO)
    );
    writer.read(
        &mut state,
        code::POLL_MESSAGES,
        poll_body(stream, topic, 0, false),
    );
    assert_eq!(state.take_reply_commit_delay(), std::time::Duration::ZERO);
    // With the next replica down too, the slower of the two waits decides.
    state.set_node_running(1, false);
    assert_eq!(
        send(&mut writer, &mut state),
        (0, Lag::REAL_CLUSTER.commit_with_next_replica_down)
    );
    let slower = Lag::REAL_CLUSTER.commit_with_next_replica_down * 2;
    state.set_lag(Lag {
        partition_commit: slower,
        ..Lag::REAL_CLUSTER
    });
    assert_eq!(send(&mut writer, &mut state), (0, slower));
}

/// Whether `password` signs `user` in on a fresh connection to `node`.
fn signs_in(state: &mut ClusterState, node: usize, user: &str, password: &str) -> bool {
    let mut client = Client::open(state, node, 77);
    matches!(
        client.login(state, user, password),
        super::testkit::Answer::Reply { .. }
    )
}

#[test]
fn a_follower_signs_in_with_the_old_password_or_name_until_its_copy_catches_up() {
    let mut state = lagging();
    state.add_user("owner", "first-pw");
    let mut leader = Client::signed_in(&mut state, 0, 1);
    let change = iggy_route_core::wire::ChangePasswordRequest::new(
        Identifier::Named(Name::new("owner").unwrap()),
        "first-pw",
        "second-pw",
    )
    .unwrap();
    let changed = leader.write(
        &mut state,
        Operation::ChangePassword,
        encode(|out| change.encode(out)),
    );
    assert_eq!(changed.status(), 0);
    state.set_now_micros(10_001 * MS);
    assert!(
        signs_in(&mut state, 0, "owner", "second-pw"),
        "the leader knows it at once"
    );
    assert!(!signs_in(&mut state, 0, "owner", "first-pw"));
    assert!(
        !signs_in(&mut state, 1, "owner", "second-pw"),
        "a follower, 1 ms after: not yet"
    );
    assert!(
        signs_in(&mut state, 1, "owner", "first-pw"),
        "it still knows the old one"
    );
    state.set_now_micros(10_201 * MS);
    assert!(signs_in(&mut state, 1, "owner", "second-pw"));
    assert!(!signs_in(&mut state, 1, "owner", "first-pw"));

    let rename = iggy_route_core::wire::UpdateUserRequest {
        user: Identifier::Named(Name::new("owner").unwrap()),
        username: Some(Name::new("renamed").unwrap()),
        status: None,
    };
    let renamed = leader.write(
        &mut state,
        Operation::UpdateUser,
        encode(|out| rename.encode(out)),
    );
    assert_eq!(renamed.status(), 0);
    state.set_now_micros(10_202 * MS);
    assert!(signs_in(&mut state, 0, "renamed", "second-pw"));
    assert!(
        !signs_in(&mut state, 2, "renamed", "second-pw"),
        "a follower: not yet"
    );
    assert!(signs_in(&mut state, 2, "owner", "second-pw"));
    state.set_now_micros(10_402 * MS);
    assert!(signs_in(&mut state, 2, "renamed", "second-pw"));
}
