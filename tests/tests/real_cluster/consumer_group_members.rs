//! The members of a consumer group, each on its own node and adapter, read their own
//! partitions of the split topic from the partitions' primaries and backups.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use iggy_route_core::client::Call;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy};
use iggy_route_core::{PollRequest, Reply, Request};
use iggy_route_tests::real_cluster::{RealCluster, admin, send, unique_name};
use iggy_route_tests::scripted::clients::{Adapter, TestClient};

use super::{call, fresh_id, serial, split};

/// Three members of a consumer group (both adapters, sessions on every node) join on the
/// metadata leader, each is assigned its own partitions of the split topic, and each reads
/// them from their primaries and backups as itself (the group's polls name the member in
/// their header): every message sent once is read once across the group; each member's
/// offset write of each of its partitions is stored where the partition's primary serves
/// it (the member link's write names the primary, a poll there commits, the leader
/// confirms); a member's leave starts a new generation. No session moves, no membership is
/// lost.
#[test]
fn read_their_own_partitions_of_split_primaries() {
    let Some(cluster) = RealCluster::from_env("consumer_group_members") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    let (stream, topic) = (split.stream.as_str(), split.topic.as_str());
    let producer = cluster.client(Adapter::Tokio, cluster.nodes.len() - 1);
    let mut sent = BTreeSet::new();
    for partition in 0..split.partitions {
        for _ in 0..2 {
            let id = fresh_id();
            admin(&producer, send(stream, topic, partition, id, "group"));
            sent.insert(id);
        }
    }
    let group = unique_name("members");
    call(
        &producer,
        Call::create_consumer_group(stream, topic, &group).unwrap(),
    )
    .unwrap();
    producer.shutdown();

    let members: Vec<TestClient> = [Adapter::Tokio, Adapter::Mio, Adapter::Tokio]
        .into_iter()
        .enumerate()
        .map(|(node, adapter)| cluster.client(adapter, node))
        .collect();
    for member in &members {
        call(
            member,
            Call::join_consumer_group(stream, topic, group.as_str()).unwrap(),
        )
        .unwrap();
    }
    let sync = |member: &TestClient| {
        call(
            member,
            Call::sync_consumer_group(stream, topic, group.as_str()).unwrap(),
        )
        .unwrap()
        .expect("a member")
    };
    let mut owners = BTreeMap::new();
    let mut read = Vec::new();
    for (index, member) in members.iter().enumerate() {
        let assignment = sync(member);
        assert_eq!(
            assignment.partitions.len(),
            2,
            "member {index}: {assignment:?}"
        );
        for &partition in &assignment.partitions {
            assert!(
                owners.insert(partition, index).is_none(),
                "{partition} twice"
            );
            let (ours, end) = read_as_member(member, (stream, topic, &group), partition, &sent);
            read.extend(ours);
            // The member's commit reaches the partition's primary, wherever it leads.
            let consumer = Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: Identifier::Named(Name::new(&group).unwrap()),
            };
            let store = Call::store_offset(consumer.clone(), stream, topic, partition, end);
            call(member, store.unwrap()).unwrap();
            let stored = Call::get_consumer_offset(consumer, stream, topic, Some(partition));
            let stored = call(member, stored.unwrap()).unwrap();
            assert_eq!(
                stored.map(|s| s.stored_offset),
                Some(end),
                "partition {partition}"
            );
        }
    }
    assert_eq!(owners.len(), split.partitions as usize);
    read.sort_unstable();
    assert_eq!(
        read,
        sent.iter().copied().collect::<Vec<_>>(),
        "each message once"
    );

    let before = sync(&members[1]).generation;
    call(
        &members[0],
        Call::leave_consumer_group(stream, topic, group.as_str()).unwrap(),
    )
    .unwrap();
    let left = call(
        &members[0],
        Call::sync_consumer_group(stream, topic, group.as_str()).unwrap(),
    );
    assert_eq!(left.unwrap(), None, "no longer a member");
    // A sync may be answered by a node that has not applied the leave yet (the server's
    // followers trail its leader by up to 250 ms; seen once under load): the new generation
    // shows within a few seconds.
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut generation = sync(&members[1]).generation;
    while generation <= before && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
        generation = sync(&members[1]).generation;
    }
    assert!(generation > before, "the leave started a new generation");
    for (index, member) in members.iter().enumerate() {
        let stats = member.stats();
        assert_eq!(stats.session_moves, 0, "member {index}");
        assert_eq!(stats.memberships_lost, 0, "member {index}");
        member.shutdown();
    }
}

/// The messages of `sent` in `partition`, read by `member` as a member of `group` from
/// offset 0 until all of them have been seen (a backup's copy may lag: up to 10 s), and the
/// offset of the last message read.
fn read_as_member(
    member: &TestClient,
    (stream, topic, group): (&str, &str, &str),
    partition: u32,
    sent: &BTreeSet<u128>,
) -> (Vec<u128>, u64) {
    let started = Instant::now();
    loop {
        let mut ours = Vec::new();
        let mut from = 0;
        loop {
            let reply = member.request(Request::Poll(PollRequest {
                consumer: Consumer {
                    kind: ConsumerKind::ConsumerGroup,
                    id: Identifier::Named(Name::new(group).unwrap()),
                },
                stream: Identifier::Named(Name::new(stream).unwrap()),
                topic: Identifier::Named(Name::new(topic).unwrap()),
                partition_id: Some(partition),
                strategy: PollingStrategy::Offset(from),
                count: 1000,
                auto_commit: false,
            }));
            let Ok(Reply::Polled(polled)) = reply else {
                panic!("group poll of {partition}: {reply:?}");
            };
            assert_eq!(polled.partition_id, partition, "answered as the member");
            let Some(last) = polled.messages.last() else {
                break;
            };
            from = last.offset + 1;
            ours.extend(
                polled
                    .messages
                    .iter()
                    .map(|m| m.id)
                    .filter(|id| sent.contains(id)),
            );
        }
        if ours.len() == 2 || started.elapsed() > Duration::from_secs(10) {
            assert_eq!(ours.len(), 2, "partition {partition}: {ours:?}");
            return (ours, from.saturating_sub(1));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
