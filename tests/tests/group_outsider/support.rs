//! What the outsider's group tests share: a loopback cluster on a runtime of its own (so
//! that blocking and async members are driven alike from plain threads), one trait over
//! both adapters, and a [`Watch`]: a ledger of every (partition, offset) each member is
//! handed, checked as it is handed against the group's stored offsets, plus a sampler of
//! the stored offsets that keeps every decrease. The watch lives in `support/watch.rs`,
//! whose documentation lists what it flags.
//!
//! Under a directory of its own so that Cargo does not take it for a test target.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, RequestError, Stats};
use iggy_route_tests::cluster::{Lookup, OffsetOwner, TestCluster};
use iggy_route_tokio::{AutoCommit, ClientError, ConsumerStats, ReceivedMessage};

#[path = "support/watch.rs"]
mod watch;

pub(crate) use watch::{Sampler, Watch};

pub(crate) const STREAM: u32 = 0;
pub(crate) const TOPIC: u32 = 0;
/// Every request of these tests fails within this long (the default is 30 s).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The consumer's default `sync_interval`.
pub(crate) const SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// How late a blocking `next_before(deadline)` may return (scheduling noise only).
pub(crate) const DEADLINE_SLACK: Duration = Duration::from_millis(60);

/// A loopback cluster served by a runtime of its own: the test threads only block on it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) cluster: TestCluster,
    runtime: tokio::runtime::Runtime,
    /// Every blocking `next_before` that returned later than its deadline plus
    /// [`DEADLINE_SLACK`]: (how late, what it answered).
    pub(crate) late: Mutex<Vec<(Duration, String)>>,
}

impl Env {
    /// `nodes` nodes without the routing commands (as the real server is), stream 0 with
    /// topic 0 of `partitions` partitions whose primaries are `partition % nodes`, and the
    /// metadata leader on `leader`.
    pub(crate) fn start(nodes: usize, partitions: u32, leader: usize) -> Env {
        iggy_route_tests::error_events::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
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
        Env {
            cluster,
            runtime,
            late: Mutex::new(Vec::new()),
        }
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

    /// An async client for setting up and tearing down.
    pub(crate) fn admin(&self) -> iggy_route_tokio::Client {
        self.block_on(iggy_route_tokio::Client::connect(self.config()))
            .expect("the admin client connects")
    }

    /// Messages `from..to` of `partition`, payload `p{partition}-{offset}`.
    pub(crate) fn fill_range(
        &self,
        admin: &iggy_route_tokio::Client,
        partition: u32,
        from: u64,
        to: u64,
    ) {
        let mut next = from;
        while next < to {
            let end = (next + 50).min(to);
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
        assert_eq!(self.cluster.partition_len(STREAM, TOPIC, partition), to);
    }

    /// `per_partition` messages in each of `partitions`; then waits out the backups' lag.
    pub(crate) fn fill(&self, partitions: u32, per_partition: u64) {
        let admin = self.admin();
        for partition in 0..partitions {
            self.fill_range(&admin, partition, 0, per_partition);
        }
        self.block_on(admin.shutdown());
        std::thread::sleep(Duration::from_millis(300));
    }

    /// The group's stored offset of `partition` (by name or by id, the larger).
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

    /// The group's id, if it exists.
    pub(crate) fn group_id(&self, group: &str) -> Option<u32> {
        self.cluster.with_state(|state| {
            state
                .catalog
                .topic(Lookup::Id(STREAM), Lookup::Id(TOPIC))
                .ok()
                .and_then(|topic| topic.groups.find(Lookup::Name(group)).map(|g| g.id))
        })
    }

    /// Requests received by every node together.
    pub(crate) fn request_total(&self) -> u64 {
        (0..self.cluster.node_count())
            .map(|node| {
                self.cluster
                    .stats(node)
                    .requests_by_code
                    .values()
                    .sum::<u64>()
            })
            .sum()
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

    /// Requests of `code` over every node.
    #[expect(dead_code, reason = "kept for ad hoc checks; no test calls it now")]
    pub(crate) fn requests_of(&self, code: u32) -> u64 {
        (0..self.cluster.node_count())
            .map(|node| self.cluster.stats(node).requests(code))
            .sum()
    }
}

/// What `after` holds beyond `before`, by code.
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

/// The server code of an error, if the server refused.
pub(crate) fn server_code(error: &ClientError) -> Option<u32> {
    if let ClientError::Request(RequestError::Server { code }) = error {
        Some(code.as_u32())
    } else {
        None
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
    pub(crate) strategy: PollingStrategy,
}

impl Spec {
    pub(crate) fn new(group: &'static str) -> Self {
        Spec {
            group,
            batch: 10,
            poll_interval: Duration::from_millis(10),
            auto_commit: AutoCommit::AfterPoll,
            create_group: true,
            strategy: PollingStrategy::Next,
        }
    }
}

/// One adapter, driven from plain threads.
pub(crate) trait Adapter {
    const NAME: &'static str;
    type Client: Send + Sync;
    type Consumer: Send;

    fn connect(env: &Env, config: Config) -> Self::Client;
    fn build(client: &Self::Client, spec: Spec) -> Result<Self::Consumer, ClientError>;
    fn member(client: &Self::Client, spec: Spec) -> Self::Consumer {
        Self::build(client, spec).expect("the first consumer of a group on a client builds")
    }
    /// A member with the defaults, naming the stream, topic and group as given.
    fn build_with(
        client: &Self::Client,
        stream: Identifier,
        topic: Identifier,
        group: Identifier,
    ) -> Result<Self::Consumer, ClientError>;
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

    fn build(client: &Self::Client, spec: Spec) -> Result<Self::Consumer, ClientError> {
        client
            .consumer(STREAM, TOPIC)?
            .group(spec.group)?
            .batch_length(spec.batch)
            .poll_interval(spec.poll_interval)
            .auto_commit(spec.auto_commit)
            .create_group(spec.create_group)
            .polling_strategy(spec.strategy)
            .build()
    }

    fn build_with(
        client: &Self::Client,
        stream: Identifier,
        topic: Identifier,
        group: Identifier,
    ) -> Result<Self::Consumer, ClientError> {
        client.consumer(stream, topic)?.group(group)?.build()
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

    fn build(client: &Self::Client, spec: Spec) -> Result<Self::Consumer, ClientError> {
        client
            .consumer(STREAM, TOPIC)?
            .group(spec.group)?
            .batch_length(spec.batch)
            .poll_interval(spec.poll_interval)
            .auto_commit(spec.auto_commit)
            .create_group(spec.create_group)
            .polling_strategy(spec.strategy)
            .build()
    }

    fn build_with(
        client: &Self::Client,
        stream: Identifier,
        topic: Identifier,
        group: Identifier,
    ) -> Result<Self::Consumer, ClientError> {
        client.consumer(stream, topic)?.group(group)?.build()
    }

    fn join(_env: &Env, consumer: &mut Self::Consumer) -> Result<(), ClientError> {
        consumer.join()
    }

    /// Also checks the deadline: a return later than `wait` plus [`DEADLINE_SLACK`] is
    /// kept in [`Env::late`].
    fn next_within(
        env: &Env,
        consumer: &mut Self::Consumer,
        wait: Duration,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        let started = Instant::now();
        let deadline = started + wait;
        let next = consumer.next_before(deadline);
        let now = Instant::now();
        if now > deadline + DEADLINE_SLACK {
            env.late.lock().unwrap().push((
                now - deadline,
                format!(
                    "{:?}",
                    next.as_ref()
                        .map(|r| r.as_ref().map(|m| (m.partition_id, m.message.offset)))
                ),
            ));
        }
        next
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

    fn router_stats(client: &Self::Client) -> Stats {
        client.stats()
    }

    fn close(_env: &Env, client: Self::Client) {
        client.shutdown();
    }
}

/// Asserts no blocking `next_before` came back late.
pub(crate) fn assert_deadlines_kept(env: &Env, adapter: &str) {
    let late = env.late.lock().unwrap();
    assert!(
        late.is_empty(),
        "{adapter}: next_before returned past its deadline (+{DEADLINE_SLACK:?}): {late:?}"
    );
}

/// A tiny deterministic generator, so that a failing run can be replayed.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// What every test checks last: no blocking `next_before` came back late (mio) and no
/// error event was logged.
pub(crate) fn finish<A: Adapter>(env: &Env) {
    if A::NAME == "mio" {
        assert_deadlines_kept(env, A::NAME);
    }
    iggy_route_tests::error_events::assert_none();
}
