//! The suite against a real Iggy cluster: see `iggy_route_tests::real_cluster` for the
//! environment it reads. Without `IGGY_ROUTE_REAL_CLUSTER` every test prints that it was
//! skipped and passes; without `IGGY_ROUTE_REAL_CLUSTER_CTL` the tests that stop nodes (and
//! the split of the primaries) are skipped.
//!
//! The tests share the cluster, so they run one at a time; the topic with split primaries
//! is made once and made again after a test has killed a node.

#![allow(clippy::unwrap_used)]

#[macro_use]
#[path = "sdk_day/mod.rs"]
mod sdk_day;

// Raw commands a user can get wrong, with this file's helpers. Under a directory of its own
// so that Cargo does not take it for a test target of its own.
#[path = "real_cluster/raw_commands.rs"]
mod raw_commands;

// Consumer-group members through the adapters' consumer API.
#[path = "real_cluster/groups.rs"]
mod groups;

#[path = "real_cluster/sdk_interop.rs"]
mod sdk_interop;

// A program written against the SDK's traits, on the SDK's client and on iggy-route.
#[path = "real_cluster/sdk_drop_in.rs"]
mod sdk_drop_in;

// A group named by name in one call and by number in the next.
#[path = "group_names/program.rs"]
mod group_names_program;

#[path = "real_cluster/group_names.rs"]
mod group_names;

// Own password and name changes, and run-time logins as another user. Named to run after
// the day tests: it makes the split topic, whose node bounces leave some partitions of the
// real server unable to commit for a while ("needs state transfer" in its log), and a day
// test's segment delete then timed out.
#[path = "real_cluster/user_accounts.rs"]
mod user_accounts;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use iggy_route_core::client::{Call, ClientError};
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy};
use iggy_route_core::{PollRequest, Reply, Request};
use iggy_route_tests::real_cluster::{
    ELECTION_WAIT, REJOIN_WAIT, RealCluster, admin, admitted_by, create_partitions, create_stream,
    create_topic, poll, read_all, send, unique_name,
};
use iggy_route_tests::scripted::clients::{Adapter, TestClient};

const ADAPTERS: [Adapter; 2] = [Adapter::Tokio, Adapter::Mio];

/// A topic whose primaries sit on different nodes.
#[derive(Debug, Clone)]
struct Split {
    stream: String,
    topic: String,
    partitions: u32,
}

static SERIAL: Mutex<Option<Split>> = Mutex::new(None);

fn serial() -> MutexGuard<'static, Option<Split>> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The split topic, made now if there is none: split by bouncing nodes when there is a
/// control command, else a topic of six partitions wherever the cluster puts them.
fn split(cluster: &RealCluster, fixture: &mut Option<Split>) -> Split {
    if let Some(split) = fixture {
        return split.clone();
    }
    let stream = unique_name("route-split");
    let topic = "events".to_owned();
    let coordinator = cluster.nodes.len() - 1;
    let client = cluster.client(Adapter::Tokio, coordinator);
    let partitions = if cluster.has_ctl() {
        cluster.split_primaries(&client, &stream, &topic)
    } else {
        admin(&client, create_stream(&stream));
        admin(&client, create_topic(&stream, &topic, 6));
        6
    };
    client.shutdown();
    let made = Split {
        stream,
        topic,
        partitions,
    };
    *fixture = Some(made.clone());
    made
}

fn fresh_id() -> u128 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let run = u128::from(std::process::id()) << 64;
    run | u128::from(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        | (u128::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs()),
        ) << 96)
}

#[test]
fn split_primaries_are_sent_to_without_session_moves_and_refused_only_while_learned() {
    let Some(cluster) = RealCluster::from_env("split_primaries") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let mut nodes = BTreeSet::new();
        let mut away_from_node0 = 0;
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, 0, "learn");
            let node = admitted_by(client.request(request)).unwrap();
            away_from_node0 += u64::from(node != 0);
            nodes.insert(node);
        }
        let learned = client.stats();
        println!(
            "{adapter:?}: learning: {} refusals, {} of them named the primary and were followed",
            learned.refusals, learned.refusal_views_followed
        );
        // Discovery tries node 0 first; its refusal names the primary (`view % 3`, roster
        // order), so each partition led elsewhere costs exactly one refusal.
        assert_eq!(
            learned.refusals, away_from_node0,
            "one refusal per partition led away from node 0"
        );
        assert_eq!(
            learned.refusal_views_followed, learned.refusals,
            "every refusal named the primary"
        );
        let started = Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "steady");
                admitted_by(client.request(request)).unwrap();
            }
        }
        let per_send = started.elapsed() / (rounds * split.partitions);
        let stats = client.stats();
        println!(
            "{adapter:?}: primaries on nodes {nodes:?}; {} refusals while learning, {} after; \
             {per_send:?} per send; {} session moves",
            learned.refusals,
            stats.refusals - learned.refusals,
            stats.session_moves
        );
        if cluster.has_ctl() {
            assert_eq!(
                nodes.len(),
                cluster.nodes.len(),
                "one primary node per node"
            );
        }
        assert_eq!(stats.refusals, learned.refusals, "no refusal once learned");
        assert_eq!(stats.session_moves, 0);
        client.shutdown();
    }
}

#[test]
fn no_refusal_after_our_own_metadata_writes() {
    let Some(cluster) = RealCluster::from_env("no_refusal_after_our_own_metadata_writes") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 1);
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, 0, "learn");
            admitted_by(client.request(request)).unwrap();
        }
        let learned = client.stats().refusals;
        for round in 0..12 {
            if round % 4 == 0 {
                admin(&client, create_stream(&unique_name("route-other")));
            }
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "after");
                admitted_by(client.request(request)).unwrap();
            }
        }
        assert_eq!(client.stats().refusals, learned, "{adapter:?}");
        assert_eq!(client.stats().session_moves, 0);
        client.shutdown();
    }
}

#[test]
fn what_we_create_through_any_coordinator_is_sent_to_at_once() {
    let Some(cluster) = RealCluster::from_env("create_then_send") else {
        return;
    };
    let _serial = serial();
    for adapter in ADAPTERS {
        for coordinator in 0..cluster.nodes.len() {
            let client = cluster.client(adapter, coordinator);
            let stream = unique_name("route-fresh");
            admin(&client, create_stream(&stream));
            admin(&client, create_topic(&stream, "events", 2));
            let first = client.request(send(&stream, "events", 1, 0, "first"));
            assert!(
                admitted_by(first).is_ok(),
                "{adapter:?} via node {coordinator}: create-then-send"
            );
            admin(&client, create_partitions(&stream, "events", 2));
            for partition in [3, 2] {
                let sent = client.request(send(&stream, "events", partition, 0, "added"));
                let sent = admitted_by(sent);
                assert!(
                    sent.is_ok(),
                    "{adapter:?} via node {coordinator}: add-then-send to {partition}: {sent:?}"
                );
            }
            client.shutdown();
        }
    }
}

/// What another client creates is sent to at once, whichever node the sender's session is
/// on: a session on the metadata leader reads the new topic at once, before the nodes of its
/// partitions' primaries may have applied it.
#[test]
fn what_another_client_creates_is_sent_to_at_once_from_any_coordinator() {
    let Some(cluster) = RealCluster::from_env("other_creates_then_send") else {
        return;
    };
    let _serial = serial();
    let creator = cluster.client(ADAPTERS[0], 0);
    for adapter in ADAPTERS {
        for coordinator in 0..cluster.nodes.len() {
            let sender = cluster.client(adapter, coordinator);
            let stream = unique_name("route-theirs");
            admin(&creator, create_stream(&stream));
            admin(&creator, create_topic(&stream, "events", 3));
            for partition in [2, 0, 1] {
                let sent = admitted_by(sender.request(send(&stream, "events", partition, 0, "x")));
                assert!(
                    sent.is_ok(),
                    "{adapter:?} via node {coordinator}: send to {partition} of another's topic: {sent:?}"
                );
            }
            sender.shutdown();
        }
    }
    creator.shutdown();
}

#[test]
fn every_partition_reads_its_own_writes_and_stored_equals_acknowledged() {
    let Some(cluster) = RealCluster::from_env("read_your_writes") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let mut acknowledged: Vec<BTreeSet<u128>> =
            vec![BTreeSet::new(); split.partitions as usize];
        for round in 0..5 {
            for partition in 0..split.partitions {
                let id = fresh_id();
                let sent = client.request(send(&split.stream, &split.topic, partition, id, "ryw"));
                let Ok(Reply::Sent(receipt)) = sent else {
                    panic!("{adapter:?} send to {partition}: {sent:?}");
                };
                acknowledged[partition as usize].insert(id);
                let offset = receipt.base_offset.unwrap();
                let read = client.request(poll(&split.stream, &split.topic, partition, offset, 1));
                let Ok(Reply::Polled(polled)) = read else {
                    panic!("{adapter:?} poll of {partition}: {read:?}");
                };
                assert_eq!(
                    polled.messages.first().map(|m| m.id),
                    Some(id),
                    "{adapter:?} round {round}: partition {partition} at {offset} right after \
                     its acknowledgement"
                );
            }
        }
        for partition in 0..split.partitions {
            let stored = read_all(&client, &split.stream, &split.topic, partition);
            let unique: BTreeSet<u128> = stored.iter().copied().collect();
            assert_eq!(unique.len(), stored.len(), "no message stored twice");
            let missing: Vec<&u128> = acknowledged[partition as usize]
                .difference(&unique)
                .collect();
            assert!(
                missing.is_empty(),
                "{adapter:?} {partition}: lost {missing:?}"
            );
        }
        client.shutdown();
    }
}

/// A consumer that never sent does not know where a partition's primary is; the real server
/// keeps an auto-commit served by a backup on that backup alone. Its commits must reach the
/// primary all the same: once the consumer learns the primary (here by sending), its next
/// auto-commit poll goes on from where the last one ended, not from the start.
#[test]
fn auto_commit_polls_of_a_consumer_that_never_sent_are_committed_on_the_primary() {
    let Some(cluster) = RealCluster::from_env("durable_auto_commit") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    // Partition 0's primary is not node 0, where the consumer's session sits (with a split
    // by bounces; without one, wherever the cluster put it).
    let partition = 0;
    for adapter in ADAPTERS {
        let producer = cluster.client(adapter, cluster.nodes.len() - 1);
        for _ in 0..4 {
            admin(
                &producer,
                send(&split.stream, &split.topic, partition, fresh_id(), "ac"),
            );
        }
        producer.shutdown();
        let consumer_id = u32::try_from(fresh_id() & 0x7fff_ffff).unwrap();
        let auto_commit_poll = || {
            Request::Poll(PollRequest {
                consumer: Consumer {
                    kind: ConsumerKind::Consumer,
                    id: Identifier::Numeric(consumer_id),
                },
                stream: Identifier::Named(Name::new(&split.stream).unwrap()),
                topic: Identifier::Named(Name::new(&split.topic).unwrap()),
                partition_id: Some(partition),
                strategy: PollingStrategy::Next,
                count: 2,
                auto_commit: true,
            })
        };
        let offsets = |reply: Result<Reply, ClientError>| -> Vec<u64> {
            let Ok(Reply::Polled(polled)) = reply else {
                panic!("{adapter:?} auto-commit poll: {reply:?}");
            };
            polled.messages.iter().map(|m| m.offset).collect()
        };
        let consumer = cluster.client(adapter, 0);
        // A backup serves what replication has brought it so far.
        let started = Instant::now();
        let first = loop {
            let first = offsets(consumer.request(auto_commit_poll()));
            if !first.is_empty() || started.elapsed() > Duration::from_secs(10) {
                break first;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(first, [0, 1], "{adapter:?}: a new consumer starts at 0");
        admin(
            &consumer,
            send(&split.stream, &split.topic, partition, fresh_id(), "learn"),
        );
        let next = offsets(consumer.request(auto_commit_poll()));
        assert_eq!(
            next,
            [2, 3],
            "{adapter:?}: the poll on the primary goes on from the commit"
        );
        assert_eq!(consumer.stats().session_moves, 0);
        consumer.shutdown();
    }
}

/// A call through a test client: its request, its reply read as the call reads it.
fn call<T>(client: &TestClient, call: Call<T>) -> Result<T, ClientError> {
    let Call { request, reply } = call;
    reply.extract(client.request(request)?)
}

/// Three members of a consumer group (both adapters, sessions on every node) join on the
/// metadata leader, each is assigned its own partitions of the split topic, and each reads
/// them from their primaries and backups as itself (the group's polls name the member in
/// their header): every message sent once is read once across the group; each member's
/// offset write of each of its partitions is stored where the partition's primary serves
/// it (the member link's write names the primary, a poll there commits, the leader
/// confirms); a member's leave starts a new generation. No session moves, no membership is
/// lost.
#[test]
fn consumer_group_members_read_their_own_partitions_of_split_primaries() {
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

/// Eight threads send one message at a time to one partition, so sends queue behind the
/// write in flight and ride merged frames: the real server must take a merged batch, and
/// each caller's receipt must name the offset of its own message.
#[test]
fn merged_frames_give_each_caller_its_own_offset_on_the_real_server() {
    let Some(cluster) = RealCluster::from_env("merged_frames") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    for adapter in ADAPTERS {
        let client = cluster.client(adapter, 0);
        let receipts = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let (client, split, receipts) = (&client, &split, &receipts);
                scope.spawn(move || {
                    for _ in 0..40 {
                        let id = fresh_id();
                        let sent = client.request(send(&split.stream, &split.topic, 0, id, "m"));
                        let Ok(Reply::Sent(receipt)) = sent else {
                            panic!("{adapter:?}: {sent:?}");
                        };
                        receipts
                            .lock()
                            .unwrap()
                            .push((receipt.base_offset.unwrap(), id));
                    }
                });
            }
        });
        let coalesced = client.stats().coalesced;
        let receipts = receipts.into_inner().unwrap();
        let first = receipts.iter().map(|(offset, _)| *offset).min().unwrap();
        let count = u32::try_from(receipts.len()).unwrap();
        let read = client.request(poll(&split.stream, &split.topic, 0, first, count));
        let Ok(Reply::Polled(polled)) = read else {
            panic!("{adapter:?}: {read:?}");
        };
        for (offset, id) in &receipts {
            let stored = polled
                .messages
                .get(usize::try_from(offset - first).unwrap())
                .map(|m| m.id);
            assert_eq!(
                stored,
                Some(*id),
                "{adapter:?}: the receipt's offset {offset}"
            );
        }
        println!(
            "{adapter:?}: {} sends, {coalesced} of them merged behind another",
            receipts.len()
        );
        assert!(
            coalesced > 0,
            "{adapter:?}: nothing was merged, nothing was tested"
        );
        client.shutdown();
    }
}

/// The coordinator's node (node 0) is killed while three threads send: the session moves
/// once, sends resume once the cluster has elected, and nothing acknowledged is lost. Each
/// adapter gets a topic split afresh, so that the node it kills leads partitions under its
/// load (the receipts say so, by the server's replica id), as the first adapter's does.
#[test]
fn the_coordinators_node_killed_under_load() {
    let Some(cluster) = RealCluster::with_ctl_from_env("coordinator_killed_under_load") else {
        return;
    };
    let mut fixture = serial();
    for adapter in ADAPTERS {
        // Node 0's death moves primaries: a split made before it no longer has any there.
        *fixture = None;
        let split = split(&cluster, &mut fixture);
        let client = cluster.client(adapter, 0);
        let mut on_the_victim = 0;
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, fresh_id(), "before");
            if let Ok(Reply::Sent(receipt)) = client.request(request) {
                on_the_victim += u32::from(receipt.replica == Some(0));
            }
        }
        assert!(
            on_the_victim > 0,
            "{adapter:?}: the node to kill leads no partition"
        );
        let load_for = Duration::from_secs(2) + ELECTION_WAIT + Duration::from_secs(10);
        let outcomes = Mutex::new(Outcomes::default());
        std::thread::scope(|scope| {
            for worker in 0..3u32 {
                let (client, split, outcomes) = (&client, &split, &outcomes);
                scope.spawn(move || {
                    let started = Instant::now();
                    let mut partition = worker;
                    while started.elapsed() < load_for {
                        partition = (partition + 1) % split.partitions;
                        let id = fresh_id();
                        let request = send(&split.stream, &split.topic, partition, id, "load");
                        let result = admitted_by(client.request(request));
                        let at = started.elapsed();
                        outcomes.lock().unwrap().record(partition, id, at, result);
                    }
                });
            }
            std::thread::sleep(Duration::from_secs(2));
            cluster.ctl("kill", 0);
        });
        cluster.ctl("start", 0);
        let stats = client.stats();
        let outcomes = outcomes.into_inner().unwrap();
        println!(
            "{adapter:?}: {} acknowledged, {} unknown, {} failed; last failure at {:?}; \
             {} session moves, {} refusals",
            outcomes.acknowledged.len(),
            outcomes.unknown,
            outcomes.failed,
            outcomes.last_failure,
            stats.session_moves,
            stats.refusals
        );
        assert_eq!(stats.session_moves, 1, "{adapter:?}");
        assert!(
            outcomes.last_ok > outcomes.last_failure.unwrap_or_default(),
            "{adapter:?}: sends resumed after the election"
        );
        client.shutdown();
        std::thread::sleep(REJOIN_WAIT);
        println!("{adapter:?}: {on_the_victim} partitions were led by the killed node");
        let reader = cluster.client(Adapter::Tokio, 2);
        for partition in 0..split.partitions {
            let stored: BTreeSet<u128> = read_all(&reader, &split.stream, &split.topic, partition)
                .into_iter()
                .collect();
            let lost: Vec<u128> = outcomes
                .acknowledged
                .iter()
                .filter(|(p, id)| *p == partition && !stored.contains(id))
                .map(|(_, id)| *id)
                .collect();
            assert!(
                lost.is_empty(),
                "{adapter:?} partition {partition} lost {lost:?}"
            );
        }
        reader.shutdown();
    }
    *fixture = None;
}

#[derive(Debug, Default)]
struct Outcomes {
    acknowledged: Vec<(u32, u128)>,
    unknown: u64,
    failed: u64,
    last_ok: Duration,
    last_failure: Option<Duration>,
}

impl Outcomes {
    fn record(&mut self, partition: u32, id: u128, at: Duration, result: Result<u32, ClientError>) {
        match result {
            Ok(_) => {
                self.acknowledged.push((partition, id));
                self.last_ok = self.last_ok.max(at);
            }
            Err(error) => {
                if matches!(
                    error,
                    ClientError::Request(iggy_route_core::RequestError::OutcomeUnknown { .. })
                ) {
                    self.unknown += 1;
                } else {
                    self.failed += 1;
                }
                self.last_failure = Some(self.last_failure.unwrap_or_default().max(at));
            }
        }
    }
}

/// The runtime the async client's calls of the SDK user's day are made on.
static DAY_RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

macro_rules! on_tokio {
    ($call:expr) => {
        DAY_RUNTIME.block_on($call)
    };
}

macro_rules! blocking {
    ($call:expr) => {
        $call
    };
}

macro_rules! connect_tokio {
    ($config:expr) => {
        DAY_RUNTIME.block_on(iggy_route_tokio::Client::connect($config))
    };
}

macro_rules! connect_mio {
    ($config:expr) => {
        iggy_route_mio::Client::connect($config)
    };
}

/// The day's place on the real cluster: the session on the last node, fresh names, and
/// primaries wherever the cluster put them.
fn day_place(cluster: &RealCluster, adapter: &str) -> sdk_day::Place {
    sdk_day::Place {
        root: sdk_day::quick(cluster.config(cluster.nodes.len() - 1)),
        prefix: unique_name(&format!("day-{adapter}")),
        spread: None,
        nodes: cluster.nodes.len(),
    }
}

/// An SDK user's day through the async client: messaging, streams and topics,
/// the system reads, users with limited permissions, tokens, logout.
#[test]
fn an_sdk_users_day_through_the_async_client() {
    let Some(cluster) = RealCluster::from_env("sdk_day_tokio") else {
        return;
    };
    let _serial = serial();
    let place = day_place(&cluster, "tokio");
    let client = connect_tokio!(place.root.clone()).unwrap();
    messaging_day!(client, place, on_tokio);
    metadata_day!(client, place, on_tokio);
    system_day!(client, place, on_tokio);
    users_day!(client, place, on_tokio, connect_tokio);
    logout_day!(client, on_tokio);
    on_tokio!(client.shutdown());
}

/// The same day through the blocking client.
#[test]
fn an_sdk_users_day_through_the_blocking_client() {
    let Some(cluster) = RealCluster::from_env("sdk_day_mio") else {
        return;
    };
    let _serial = serial();
    let place = day_place(&cluster, "mio");
    let client = connect_mio!(place.root.clone()).unwrap();
    messaging_day!(client, place, blocking);
    metadata_day!(client, place, blocking);
    system_day!(client, place, blocking);
    users_day!(client, place, blocking, connect_mio);
    logout_day!(client, blocking);
    client.shutdown();
}
