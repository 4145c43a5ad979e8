//! What the group adversary tests share: a loopback cluster on its own tokio runtime (so
//! that blocking members and async members are driven the same way from plain threads),
//! one trait over both adapters, a ledger of every message handed out and a watcher of the
//! group's stored offsets. Under a directory of its own so that Cargo does not take it for
//! a test target.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, SendReceipt, Stats};
use iggy_route_tests::cluster::{Lookup, OffsetOwner, TestCluster};
use iggy_route_tokio::{AutoCommit, ClientError, ConsumerStats, ReceivedMessage};

pub(crate) const STREAM: u32 = 0;
pub(crate) const TOPIC: u32 = 0;
pub(crate) const GROUP: &str = "adversaries";
/// Every request of these tests fails within this long (the default is 30 s).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The consumer's default `sync_interval` (the promise of the dropped-member test).
pub(crate) const SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// A loopback cluster served by a runtime of its own: the test threads only block on it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
}

impl Env {
    /// `nodes` nodes without the routing commands (as the real server is), stream 0 with
    /// topic 0 of `partitions` partitions whose primaries are `partition % nodes`, and the
    /// metadata leader on `leader`.
    pub(crate) fn start(nodes: usize, partitions: u32, leader: usize) -> Env {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the cluster");
        let cluster = runtime.block_on(TestCluster::start(nodes));
        cluster.set_routing_commands(false);
        assert_eq!(
            cluster.create_stream_and_topic("orders", "events", partitions),
            (STREAM, TOPIC)
        );
        for partition in 0..partitions {
            assert!(cluster.set_primary(STREAM, TOPIC, partition, partition as usize % nodes));
        }
        cluster.set_metadata_leader(leader);
        Env { cluster, runtime }
    }

    /// Runs a future on the cluster's runtime from a plain thread.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.handle().block_on(future)
    }

    /// A client configuration for this cluster, every node a seed (node 0 first).
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::from_connection_string(&self.cluster.connection_string())
            .expect("the cluster's connection string");
        config.request_timeout = REQUEST_TIMEOUT;
        config
    }

    /// An async client for setting up and tearing down (both adapters' tests use it).
    pub(crate) fn admin(&self) -> iggy_route_tokio::Client {
        self.block_on(iggy_route_tokio::Client::connect(self.config()))
            .expect("the admin client connects")
    }

    /// `per_partition` messages in each partition, payload `p{partition}-{offset}`; then
    /// waits out the backups' lag, so that every node serves them all.
    pub(crate) fn fill(&self, partitions: u32, per_partition: u64) {
        let admin = self.admin();
        for partition in 0..partitions {
            let mut next = 0;
            while next < per_partition {
                let end = (next + 50).min(per_partition);
                let messages = (next..end).map(|i| message(partition, i)).collect();
                self.block_on(admin.send(
                    STREAM,
                    TOPIC,
                    Partitioning::PartitionId(partition),
                    messages,
                ))
                .expect("fill a partition");
                next = end;
            }
            assert_eq!(
                self.cluster.partition_len(STREAM, TOPIC, partition),
                per_partition
            );
        }
        self.block_on(admin.shutdown());
        std::thread::sleep(Duration::from_millis(400));
    }

    /// The group's stored offset of `partition`, as the cluster holds it (by name, or by
    /// the group's id should a client store it so).
    pub(crate) fn stored(&self, group: &str, partition: u32) -> Option<u64> {
        self.cluster.with_state(|state| {
            let topic = state
                .catalog
                .topic(Lookup::Id(STREAM), Lookup::Id(TOPIC))
                .ok()?;
            let id = topic.groups.find(Lookup::Name(group)).map(|found| found.id);
            let found = topic.partition(partition)?;
            let by_name = found
                .offsets
                .get(&OffsetOwner::GroupName(group.to_owned()))
                .copied();
            let by_id = id.and_then(|id| found.offsets.get(&OffsetOwner::GroupId(id)).copied());
            by_name.max(by_id)
        })
    }

    /// The members of the group the cluster holds, as (slot, partitions).
    pub(crate) fn members(&self, group: &str) -> Vec<(u32, Vec<u32>)> {
        self.cluster.with_state(|state| {
            state
                .catalog
                .topic(Lookup::Id(STREAM), Lookup::Id(TOPIC))
                .ok()
                .and_then(|topic| topic.groups.find(Lookup::Name(group)))
                .map(|found| {
                    found
                        .members
                        .iter()
                        .map(|member| (member.slot, member.partitions.clone()))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Requests received by every node together, by command code.
    pub(crate) fn requests(&self) -> BTreeMap<u32, u64> {
        let mut all = BTreeMap::new();
        for node in 0..self.cluster.node_count() {
            for (code, count) in self.cluster.stats(node).requests_by_code {
                *all.entry(code).or_insert(0) += count;
            }
        }
        all
    }

    /// Requests of `code` each node received.
    pub(crate) fn requests_per_node(&self, code: u32) -> Vec<u64> {
        (0..self.cluster.node_count())
            .map(|node| self.cluster.stats(node).requests(code))
            .collect()
    }
}

/// What `after` holds beyond `before`, by code (codes that did not change are left out).
pub(crate) fn requests_between(
    before: &BTreeMap<u32, u64>,
    after: &BTreeMap<u32, u64>,
) -> BTreeMap<u32, u64> {
    after
        .iter()
        .filter_map(|(code, count)| {
            let grew = count - before.get(code).copied().unwrap_or(0);
            (grew > 0).then_some((*code, grew))
        })
        .collect()
}

/// The message stored at `offset` of `partition` by [`Env::fill`].
pub(crate) fn message(partition: u32, offset: u64) -> Message {
    Message {
        payload: Bytes::from(format!("p{partition}-{offset}")),
        ..Message::default()
    }
}

/// How a member is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) group: &'static str,
    pub(crate) batch: u32,
    pub(crate) poll_interval: Duration,
    pub(crate) auto_commit: AutoCommit,
    pub(crate) create_group: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            group: GROUP,
            batch: 100,
            poll_interval: Duration::from_millis(20),
            auto_commit: AutoCommit::AfterPoll,
            create_group: true,
        }
    }
}

/// One adapter, driven from plain threads: the async one through the cluster's runtime
/// (a wait for a message is `tokio::time::timeout` around `next()`), the blocking one
/// directly (`next_before`).
pub(crate) trait Adapter {
    const NAME: &'static str;
    type Client: Send + Sync;
    type Consumer: Send;

    fn connect(env: &Env, config: Config) -> Self::Client;
    fn member(client: &Self::Client, spec: Spec) -> Self::Consumer;
    fn join(env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError>;
    /// The next message, an error, or `None` when nothing came within `wait`.
    fn next_within(
        env: &Env,
        consumer: &mut Self::Consumer,
        wait: Duration,
    ) -> Option<Result<ReceivedMessage, ClientError>>;
    fn commit(env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError>;
    fn shutdown(env: &Env, consumer: Self::Consumer, commit: bool) -> Result<(), ClientError>;
    fn stats(consumer: &Self::Consumer) -> ConsumerStats;
    fn send(
        env: &Env,
        client: &Self::Client,
        partition: u32,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError>;
    fn router_stats(client: &Self::Client) -> Stats;
    fn close(env: &Env, client: Self::Client);
}

/// The async adapter.
#[derive(Debug)]
pub(crate) struct Tokio;

/// The blocking adapter.
#[derive(Debug)]
pub(crate) struct Mio;

impl Adapter for Tokio {
    const NAME: &'static str = "tokio";
    type Client = iggy_route_tokio::Client;
    type Consumer = iggy_route_tokio::TopicConsumer;

    fn connect(env: &Env, config: Config) -> Self::Client {
        env.block_on(iggy_route_tokio::Client::connect(config))
            .expect("the tokio client connects")
    }

    fn member(client: &Self::Client, spec: Spec) -> Self::Consumer {
        client
            .consumer(STREAM, TOPIC)
            .unwrap()
            .group(spec.group)
            .unwrap()
            .batch_length(spec.batch)
            .poll_interval(spec.poll_interval)
            .auto_commit(spec.auto_commit)
            .create_group(spec.create_group)
            .build()
            .expect("the first consumer of a group on a client builds")
    }

    fn join(env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError> {
        env.block_on(consumer.join())
    }

    fn next_within(
        env: &Env,
        consumer: &mut Self::Consumer,
        wait: Duration,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        env.block_on(async { tokio::time::timeout(wait, consumer.next()).await.ok()? })
    }

    fn commit(env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError> {
        env.block_on(consumer.commit())
    }

    fn shutdown(env: &Env, consumer: Self::Consumer, commit: bool) -> Result<(), ClientError> {
        env.block_on(consumer.shutdown(commit))
    }

    fn stats(consumer: &Self::Consumer) -> ConsumerStats {
        consumer.stats()
    }

    fn send(
        env: &Env,
        client: &Self::Client,
        partition: u32,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        env.block_on(client.send(
            STREAM,
            TOPIC,
            Partitioning::PartitionId(partition),
            messages,
        ))
    }

    fn router_stats(client: &Self::Client) -> Stats {
        client.stats()
    }

    fn close(env: &Env, client: Self::Client) {
        env.block_on(client.shutdown());
    }
}

impl Adapter for Mio {
    const NAME: &'static str = "mio";
    type Client = iggy_route_mio::Client;
    type Consumer = iggy_route_mio::TopicConsumer;

    fn connect(_env: &Env, config: Config) -> Self::Client {
        iggy_route_mio::Client::connect(config).expect("the mio client connects")
    }

    fn member(client: &Self::Client, spec: Spec) -> Self::Consumer {
        client
            .consumer(STREAM, TOPIC)
            .unwrap()
            .group(spec.group)
            .unwrap()
            .batch_length(spec.batch)
            .poll_interval(spec.poll_interval)
            .auto_commit(spec.auto_commit)
            .create_group(spec.create_group)
            .build()
            .expect("the first consumer of a group on a client builds")
    }

    fn join(_env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError> {
        consumer.join()
    }

    fn next_within(
        _env: &Env,
        consumer: &mut Self::Consumer,
        wait: Duration,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        consumer.next_before(Instant::now() + wait)
    }

    fn commit(_env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError> {
        consumer.commit()
    }

    fn shutdown(_env: &Env, consumer: Self::Consumer, commit: bool) -> Result<(), ClientError> {
        consumer.shutdown(commit)
    }

    fn stats(consumer: &Self::Consumer) -> ConsumerStats {
        consumer.stats()
    }

    fn send(
        _env: &Env,
        client: &Self::Client,
        partition: u32,
        messages: Vec<Message>,
    ) -> Result<SendReceipt, ClientError> {
        client.send(
            STREAM,
            TOPIC,
            Partitioning::PartitionId(partition),
            messages,
        )
    }

    fn router_stats(client: &Self::Client) -> Stats {
        client.stats()
    }

    fn close(_env: &Env, client: Self::Client) {
        client.shutdown();
    }
}

/// Every message handed out, by whom and in which order.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// How often each (partition, offset) was handed out.
    counts: BTreeMap<(u32, u64), u32>,
    /// Per member, what it was handed, in order.
    by_member: BTreeMap<&'static str, Vec<(u32, u64)>>,
    /// Messages whose payload is not the one stored at their (partition, offset).
    pub(crate) wrong_payloads: Vec<(u32, u64, String)>,
}

impl Ledger {
    pub(crate) fn record(&mut self, member: &'static str, received: &ReceivedMessage) {
        let key = (received.partition_id, received.message.offset);
        let payload = String::from_utf8_lossy(&received.message.payload).into_owned();
        if payload != format!("p{}-{}", key.0, key.1) {
            self.wrong_payloads.push((key.0, key.1, payload));
        }
        *self.counts.entry(key).or_insert(0) += 1;
        self.by_member.entry(member).or_default().push(key);
    }

    /// Distinct messages handed out.
    pub(crate) fn distinct(&self) -> usize {
        self.counts.len()
    }

    /// Messages handed out, with repeats.
    pub(crate) fn total(&self) -> usize {
        self.by_member.values().map(Vec::len).sum()
    }

    pub(crate) fn handed_to(&self, member: &str) -> &[(u32, u64)] {
        self.by_member.get(member).map_or(&[], Vec::as_slice)
    }

    /// Each (partition, offset) handed out more than once, with the members it went to.
    pub(crate) fn duplicates(&self) -> Vec<((u32, u64), Vec<&'static str>)> {
        self.counts
            .iter()
            .filter(|(_, count)| **count > 1)
            .map(|(key, _)| {
                let to = self
                    .by_member
                    .iter()
                    .flat_map(|(member, keys)| keys.iter().filter(|k| *k == key).map(|_| *member))
                    .collect();
                (*key, to)
            })
            .collect()
    }

    /// The offsets of each partition that nobody was handed, below `per_partition`.
    pub(crate) fn missing(&self, partitions: u32, per_partition: u64) -> BTreeMap<u32, u64> {
        (0..partitions)
            .filter_map(|partition| {
                let missing = (0..per_partition)
                    .filter(|offset| !self.counts.contains_key(&(partition, *offset)))
                    .count() as u64;
                (missing > 0).then_some((partition, missing))
            })
            .collect()
    }

    /// Places where a member was handed a partition's offsets out of order.
    pub(crate) fn out_of_order(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (member, keys) in &self.by_member {
            let mut last: BTreeMap<u32, u64> = BTreeMap::new();
            for (partition, offset) in keys {
                if let Some(previous) = last.insert(*partition, *offset)
                    && previous >= *offset
                {
                    found.push(format!("{member}: p{partition} {previous} then {offset}"));
                }
            }
        }
        found
    }

    /// Per member, per partition: how many messages and the offset range.
    pub(crate) fn summary(&self) -> String {
        let mut out = Vec::new();
        for (member, keys) in &self.by_member {
            let mut ranges: BTreeMap<u32, (u64, u64, usize)> = BTreeMap::new();
            for (partition, offset) in keys {
                let range = ranges.entry(*partition).or_insert((*offset, *offset, 0));
                range.0 = range.0.min(*offset);
                range.1 = range.1.max(*offset);
                range.2 += 1;
            }
            let parts: Vec<String> = ranges
                .iter()
                .map(|(p, (lo, hi, n))| format!("p{p}:{n}@{lo}..={hi}"))
                .collect();
            out.push(format!("{member}[{}]", parts.join(" ")));
        }
        out.join(" ")
    }
}

/// Samples the group's stored offsets and keeps every decrease seen.
#[derive(Debug)]
pub(crate) struct OffsetWatch {
    group: &'static str,
    partitions: u32,
    last: BTreeMap<u32, u64>,
    /// (partition, before, after, when)
    pub(crate) decreases: Vec<(u32, u64, u64, String)>,
    /// Also kept: each partition's offsets in the order they were seen to change.
    pub(crate) history: BTreeMap<u32, Vec<u64>>,
}

impl OffsetWatch {
    pub(crate) fn new(group: &'static str, partitions: u32) -> Self {
        Self {
            group,
            partitions,
            last: BTreeMap::new(),
            decreases: Vec::new(),
            history: BTreeMap::new(),
        }
    }

    pub(crate) fn sample(&mut self, env: &Env, when: &str) {
        for partition in 0..self.partitions {
            let Some(now) = env.stored(self.group, partition) else {
                continue;
            };
            let before = self.last.insert(partition, now);
            if before != Some(now) {
                self.history.entry(partition).or_default().push(now);
            }
            if let Some(before) = before
                && now < before
            {
                self.decreases
                    .push((partition, before, now, when.to_owned()));
            }
        }
    }

    pub(crate) fn now(&self, env: &Env) -> Vec<Option<u64>> {
        (0..self.partitions)
            .map(|partition| env.stored(self.group, partition))
            .collect()
    }
}

/// Reads `consumer` until nothing came for `idle` (or `cap` passed), recording what it is
/// handed; answers the errors it returned.
pub(crate) fn drain<A: Adapter>(
    env: &Env,
    consumer: &mut A::Consumer,
    member: &'static str,
    idle: Duration,
    cap: Duration,
    ledger: &mut Ledger,
    watch: &mut OffsetWatch,
) -> Vec<String> {
    let give_up = Instant::now() + cap;
    let mut errors = Vec::new();
    while Instant::now() < give_up {
        match A::next_within(env, consumer, idle) {
            Some(Ok(received)) => ledger.record(member, &received),
            Some(Err(error)) => errors.push(format!("{error:?}")),
            None => break,
        }
        watch.sample(env, member);
    }
    errors
}

/// The distinct members' partition sets, for the report.
pub(crate) fn owned(members: &[(u32, Vec<u32>)]) -> BTreeSet<u32> {
    members
        .iter()
        .flat_map(|(_, partitions)| partitions.iter().copied())
        .collect()
}
