//! Consumer-group members through both adapters' consumer API on the real server: a slow
//! member that comes back after another member read and committed partitions it held, and
//! members that join one after another. Each message is handed out once across the group,
//! and the group's stored offsets end at each partition's last message.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::ConsumerStats;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, Name};
use iggy_route_tests::real_cluster::{RealCluster, unique_name};
use iggy_route_tests::scripted::clients::Adapter;

use super::{DAY_RUNTIME, serial};

/// A member on either adapter, read until it has been idle for a while.
enum Member {
    Tokio(iggy_route_tokio::TopicConsumer, iggy_route_tokio::Client),
    Mio(iggy_route_mio::TopicConsumer, iggy_route_mio::Client),
}

impl Member {
    fn new(cluster: &RealCluster, adapter: Adapter, node: usize, place: &Place) -> Member {
        let config = cluster.config(node);
        match adapter {
            Adapter::Tokio => {
                let client = DAY_RUNTIME
                    .block_on(iggy_route_tokio::Client::connect(config))
                    .unwrap();
                let consumer = client
                    .consumer(place.stream.as_str(), place.topic)
                    .unwrap()
                    .group(place.group.as_str())
                    .unwrap()
                    .batch_length(10)
                    .poll_interval(Duration::from_millis(20))
                    .build()
                    .unwrap();
                Member::Tokio(consumer, client)
            }
            Adapter::Mio => {
                let client = iggy_route_mio::Client::connect(config).unwrap();
                let consumer = client
                    .consumer(place.stream.as_str(), place.topic)
                    .unwrap()
                    .group(place.group.as_str())
                    .unwrap()
                    .batch_length(10)
                    .poll_interval(Duration::from_millis(20))
                    .build()
                    .unwrap();
                Member::Mio(consumer, client)
            }
        }
    }

    fn join(&mut self) {
        match self {
            Member::Tokio(consumer, _) => DAY_RUNTIME.block_on(consumer.join()).unwrap(),
            Member::Mio(consumer, _) => consumer.join().unwrap(),
        }
    }

    /// The next message's (partition, offset), or `None` after `idle` without one.
    fn next(&mut self, idle: Duration) -> Option<Result<(u32, u64), ClientError>> {
        let received = match self {
            Member::Tokio(consumer, _) => DAY_RUNTIME
                .block_on(async { tokio::time::timeout(idle, consumer.next()).await.ok()? }),
            Member::Mio(consumer, _) => consumer.next_before(Instant::now() + idle),
        }?;
        Some(received.map(|r| (r.partition_id, r.message.offset)))
    }

    /// Up to `most` messages, stopping after `idle` without one; no error expected.
    fn read(&mut self, most: usize, idle: Duration, seen: &mut Handouts) -> usize {
        let mut read = 0;
        while read < most {
            match self.next(idle) {
                Some(Ok(message)) => {
                    seen.record(message);
                    read += 1;
                }
                Some(Err(error)) => panic!("a member's next: {error}"),
                None => break,
            }
        }
        read
    }

    fn commit(&mut self) {
        match self {
            Member::Tokio(consumer, _) => DAY_RUNTIME.block_on(consumer.commit()).unwrap(),
            Member::Mio(consumer, _) => consumer.commit().unwrap(),
        }
    }

    fn stats(&self) -> ConsumerStats {
        match self {
            Member::Tokio(consumer, _) => consumer.stats(),
            Member::Mio(consumer, _) => consumer.stats(),
        }
    }

    fn session_moves(&self) -> u64 {
        match self {
            Member::Tokio(_, client) => client.stats().session_moves,
            Member::Mio(_, client) => client.stats().session_moves,
        }
    }

    /// Commits, leaves the group and shuts the client down.
    fn shutdown(self) {
        match self {
            Member::Tokio(consumer, client) => DAY_RUNTIME.block_on(async {
                consumer.shutdown(true).await.unwrap();
                client.shutdown().await;
            }),
            Member::Mio(consumer, client) => {
                consumer.shutdown(true).unwrap();
                client.shutdown();
            }
        }
    }

    /// The group's stored offset of each partition, as this member's client reads it.
    fn stored(&self, place: &Place) -> BTreeMap<u32, Option<u64>> {
        let consumer = Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: Identifier::Named(Name::new(&place.group).unwrap()),
        };
        (0..place.partitions)
            .map(|partition| {
                let (stream, topic) = (place.stream.as_str(), place.topic);
                let offset = match self {
                    Member::Tokio(_, client) => DAY_RUNTIME.block_on(client.get_consumer_offset(
                        consumer.clone(),
                        stream,
                        topic,
                        Some(partition),
                    )),
                    Member::Mio(_, client) => {
                        client.get_consumer_offset(consumer.clone(), stream, topic, Some(partition))
                    }
                };
                (partition, offset.unwrap().map(|o| o.stored_offset))
            })
            .collect()
    }
}

/// Every (partition, offset) handed out, with how often.
#[derive(Default)]
struct Handouts(BTreeMap<(u32, u64), u32>);

impl Handouts {
    fn record(&mut self, message: (u32, u64)) {
        *self.0.entry(message).or_default() += 1;
    }

    fn twice(&self) -> Vec<(u32, u64)> {
        self.0
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(m, _)| *m)
            .collect()
    }
}

/// A fresh stream with a topic of `partitions` partitions of `per_partition` messages each,
/// and the name of a group of it.
struct Place {
    stream: String,
    topic: &'static str,
    group: String,
    partitions: u32,
}

fn place(cluster: &RealCluster, partitions: u32, per_partition: u64) -> Place {
    let place = Place {
        stream: unique_name("route-group"),
        topic: "events",
        group: unique_name("readers"),
        partitions,
    };
    let client = DAY_RUNTIME
        .block_on(iggy_route_tokio::Client::connect(cluster.config(0)))
        .unwrap();
    DAY_RUNTIME.block_on(async {
        // Created by the client that sends: its own writes settle for it even where a
        // node lags (after a restart), which another client's would not.
        client.create_stream(&place.stream).await.unwrap();
        client
            .create_topic(place.stream.as_str(), place.topic, partitions)
            .await
            .unwrap();
        for partition in 0..partitions {
            let messages = (0..per_partition)
                .map(|i| Message {
                    payload: Bytes::from(format!("p{partition}-{i}")),
                    ..Message::default()
                })
                .collect();
            client
                .send(
                    place.stream.as_str(),
                    place.topic,
                    Partitioning::PartitionId(partition),
                    messages,
                )
                .await
                .unwrap();
        }
        client.shutdown().await;
    });
    place
}

/// A member reads 40 messages, commits and stops reading; a second member joins, reads its
/// partitions to the end and leaves; the first comes back. It hands out nothing the second
/// one committed, every message is handed out once, and the stored offsets end at 99.
#[test]
fn a_slow_member_hands_out_nothing_another_member_committed() {
    let Some(cluster) = RealCluster::from_env("a_slow_member") else {
        return;
    };
    let _serial = serial();
    for (slow, other) in [
        (Adapter::Tokio, Adapter::Mio),
        (Adapter::Mio, Adapter::Tokio),
    ] {
        let place = place(&cluster, 4, 100);
        let mut seen = Handouts::default();
        let mut slow_member = Member::new(&cluster, slow, 0, &place);
        slow_member.join();
        assert_eq!(slow_member.read(40, Duration::from_secs(5), &mut seen), 40);
        slow_member.commit();

        let mut newcomer = Member::new(&cluster, other, 1, &place);
        newcomer.join();
        let newcomers = newcomer.read(400, Duration::from_secs(2), &mut seen);
        let stored_by_newcomer = newcomer.stored(&place);
        assert_eq!(newcomer.session_moves(), 0);
        newcomer.shutdown();

        let slows = slow_member.read(400, Duration::from_secs(3), &mut seen);
        slow_member.commit();
        let stored = slow_member.stored(&place);
        println!(
            "{slow:?} slow, {other:?} newcomer: newcomer read {newcomers} (stored {stored_by_newcomer:?}), \
             slow member {slows} more; stored at the end {stored:?}; slow member {:?}",
            slow_member.stats()
        );
        assert_eq!(seen.twice(), Vec::<(u32, u64)>::new(), "handed out twice");
        assert_eq!(seen.0.len(), 400, "every message handed out");
        for (partition, offset) in &stored {
            assert_eq!(*offset, Some(99), "partition {partition}");
        }
        for (partition, offset) in &stored_by_newcomer {
            assert!(
                offset <= stored.get(partition).unwrap(),
                "partition {partition}: the stored offset went back"
            );
        }
        assert_eq!(slow_member.session_moves(), 0);
        slow_member.shutdown();
    }
}

/// Three members on three clients join one after another before any of them reads, then
/// read: each message once across the group, and each member's first message after a
/// handful of requests per partition, not a retry storm.
#[test]
fn members_that_join_in_turn_read_every_message_once_without_a_storm() {
    let Some(cluster) = RealCluster::from_env("members_join_in_turn") else {
        return;
    };
    let _serial = serial();
    let place = place(&cluster, 6, 20);
    let mut seen = Handouts::default();
    let mut members: Vec<Member> = [Adapter::Tokio, Adapter::Mio, Adapter::Tokio]
        .into_iter()
        .enumerate()
        .map(|(node, adapter)| Member::new(&cluster, adapter, node, &place))
        .collect();
    for member in &mut members {
        member.join();
    }
    for (index, member) in members.iter_mut().enumerate() {
        let first = member.read(1, Duration::from_secs(5), &mut seen);
        let stats = member.stats();
        println!("member {index}: first message after {stats:?}");
        assert_eq!(first, 1, "member {index} read nothing");
        assert!(
            stats.polls + stats.syncs + stats.joins <= 20 * u64::from(place.partitions),
            "member {index}: {stats:?}"
        );
    }
    for member in &mut members {
        member.read(200, Duration::from_secs(2), &mut seen);
    }
    assert_eq!(seen.twice(), Vec::<(u32, u64)>::new(), "handed out twice");
    assert_eq!(seen.0.len(), 120, "every message handed out");
    for member in members {
        assert_eq!(member.session_moves(), 0);
        member.shutdown();
    }
}

/// A member reads 5 messages of its first batch (10 polled) and stops; a second member
/// joins. Where the server saw that batch in flight it keeps the partition with the first
/// member until the first member drains it (hands out the rest, stores the last): the
/// partition then goes to the newcomer at once, not after the server's 30 s rebalancing
/// timeout. Everything is handed out, the stored offsets end at each partition's last
/// message, and a message is handed out twice only inside the documented window (the
/// first member's batch, when the server moved the partition at once).
#[test]
fn a_partition_in_flight_is_drained_by_its_owner_then_handed_over() {
    let Some(cluster) = RealCluster::from_env("a_partition_in_flight") else {
        return;
    };
    let _serial = serial();
    for (first, second) in [
        (Adapter::Tokio, Adapter::Mio),
        (Adapter::Mio, Adapter::Tokio),
    ] {
        let place = place(&cluster, 4, 30);
        let mut seen = Handouts::default();
        let started = Instant::now();
        let mut owner = Member::new(&cluster, first, 0, &place);
        owner.join();
        assert_eq!(owner.read(5, Duration::from_secs(5), &mut seen), 5);
        let mut newcomer = Member::new(&cluster, second, 1, &place);
        newcomer.join();
        for _ in 0..3 {
            owner.read(200, Duration::from_secs(1), &mut seen);
            newcomer.read(200, Duration::from_secs(1), &mut seen);
        }
        let took = started.elapsed();
        let stored = owner.stored(&place);
        let twice = seen.twice();
        println!(
            "{first:?} owner, {second:?} newcomer: all read in {took:?}; handed out twice \
             {twice:?}; stored {stored:?}; owner {:?}; newcomer {:?}",
            owner.stats(),
            newcomer.stats()
        );
        assert_eq!(
            seen.0.len(),
            120,
            "every message handed out, none held back"
        );
        assert!(
            twice.len() <= 10,
            "beyond one batch handed out twice: {twice:?}"
        );
        assert!(
            took < Duration::from_secs(20),
            "the hand-over waited for the server's timeout"
        );
        assert_eq!(owner.session_moves(), 0);
        assert_eq!(newcomer.session_moves(), 0);
        owner.shutdown();
        newcomer.shutdown();
        for (partition, offset) in &stored {
            assert_eq!(*offset, Some(29), "partition {partition}");
        }
    }
}
