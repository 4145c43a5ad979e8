//! Backpressure in the tokio client: a request the router has no room
//! for waits, in call order, for room; `try_send` and `try_request` refuse at once instead.
//!
//! The clients run with tiny bounds (`max_pending_requests` of 1 to 8), and some nodes
//! hold their replies (`TestCluster::set_reply_delay`) so that the router stays full while
//! a test looks. Where a test needs requests to reach the client in a known order, it
//! starts each call's future with one poll ([`start`]): that hands the request to the
//! driver, and the driver takes requests in the order they were handed over.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{Config, RequestError, SendReceipt};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::{Client, ClientError};

/// The ids a fresh test cluster gives its first stream and topic.
const STREAM: u32 = 0;
const TOPIC: u32 = 0;

/// Long enough that a held reply is still held when the test has looked; the tests never
/// wait for it (a client shutdown or the end of the test ends the wait).
const HELD: Duration = Duration::from_secs(5);

type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Polls a future once, so that its request reaches the driver now and in this order; the
/// caller awaits it later (a first `Ready` is kept).
fn start<T: 'static>(future: impl Future<Output = T> + Send + 'static) -> Started<T> {
    let mut future: Pending<T> = Box::pin(future);
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(value) => Started::Ready(Some(value)),
        Poll::Pending => Started::Pending(future),
    }
}

enum Started<T> {
    Ready(Option<T>),
    Pending(Pending<T>),
}

impl<T> Started<T> {
    async fn finish(self) -> T {
        match self {
            Started::Ready(value) => value.unwrap(),
            Started::Pending(future) => future.await,
        }
    }
}

struct Setup {
    cluster: TestCluster,
    client: Client,
}

/// A 3-node cluster with a topic of `partitions` partitions, partition `p`'s primary on node
/// `1 + p % 2` (the session stays on node 0, whose replies are never held), and a client
/// with the bounds `configure` sets; one warm-up send per partition learns the routes and
/// opens the data links.
async fn setup(partitions: u32, configure: impl FnOnce(&mut Config)) -> Setup {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let ids = cluster.create_stream_and_topic("orders", "events", partitions);
    assert_eq!(ids, (STREAM, TOPIC));
    for partition in 0..partitions {
        let node = 1 + usize::try_from(partition % 2).unwrap();
        assert!(cluster.set_primary(STREAM, TOPIC, partition, node));
    }
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(10);
    configure(&mut config);
    let client = Client::connect(config).await.unwrap();
    for partition in 0..partitions {
        send(&client, partition, format!("warm-up {partition}"))
            .await
            .unwrap();
    }
    Setup { cluster, client }
}

impl Setup {
    fn hold_replies(&self, node: usize) {
        self.cluster.set_reply_delay(node, HELD);
    }

    /// The payloads stored in a partition after the warm-up, in offset order.
    fn payloads(&self, partition: u32) -> Vec<String> {
        self.cluster
            .partition_log(STREAM, TOPIC, partition)
            .into_iter()
            .skip(1)
            .map(|message| String::from_utf8(message.payload.to_vec()).unwrap())
            .collect()
    }

    async fn finish(self) {
        self.client.shutdown().await;
        self.cluster.shutdown().await;
        iggy_route_tests::error_events::assert_none();
    }
}

fn message(payload: String) -> Vec<Message> {
    vec![Message {
        payload: Bytes::from(payload),
        ..Message::default()
    }]
}

fn send(
    client: &Client,
    partition: u32,
    payload: String,
) -> impl Future<Output = Result<SendReceipt, ClientError>> + Send + 'static {
    let client = client.clone();
    async move {
        let partitioning = Partitioning::PartitionId(partition);
        client
            .send(STREAM, TOPIC, partitioning, message(payload))
            .await
    }
}

fn try_send(
    client: &Client,
    partition: u32,
    payload: String,
) -> impl Future<Output = Result<SendReceipt, ClientError>> + Send + 'static {
    let client = client.clone();
    async move {
        let partitioning = Partitioning::PartitionId(partition);
        client
            .try_send(STREAM, TOPIC, partitioning, message(payload))
            .await
    }
}

/// Seven tasks send without pause; with the test's own `try_send` that is at most eight
/// calls at once, twice `max_pending_requests` (the router's room plus the line's), so
/// every send waits for room instead of failing. Meanwhile `try_send`, which never waits,
/// is refused.
///
/// (With a smaller `max_pending_per_lane`, a request at the head of the line may wait for
/// its partition while the router holds only that partition's requests: the line then
/// stands behind it, and fewer calls fit. `max_pending_per_lane + max_pending_requests`
/// calls always do.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_send_waits_for_room_while_try_send_under_the_same_load_is_refused() {
    const TASKS: u32 = 7;
    const SENDS: u32 = 25;
    let setup = setup(3, |config| {
        config.max_pending_requests = 4;
        config.max_pending_per_lane = 4;
    })
    .await;
    // Slow nodes keep the router full.
    for node in [1, 2] {
        setup
            .cluster
            .set_reply_delay(node, Duration::from_millis(2));
    }
    let mut senders = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let client = setup.client.clone();
        senders.spawn(async move {
            for seq in 0..SENDS {
                send(&client, task % 3, format!("t{task}-{seq}")).await?;
            }
            Ok::<_, ClientError>(())
        });
    }
    let mut refused = 0;
    let mut tries = 0;
    while !senders.is_empty() && refused == 0 {
        tries += 1;
        match try_send(&setup.client, 0, format!("x{tries}")).await {
            Ok(_) => {}
            Err(ClientError::QueueFull { .. }) => refused += 1,
            Err(other) => panic!("try_send failed otherwise: {other}"),
        }
        // Reap finished senders so the loop ends with the load.
        while let Some(done) = senders.try_join_next() {
            done.unwrap().unwrap();
        }
    }
    while let Some(done) = senders.join_next().await {
        done.unwrap().expect("a waiting send never fails for room");
    }
    assert!(refused > 0, "try_send was never refused in {tries} tries");

    // Each task's sends are stored once, in the order it made them.
    for partition in 0..3 {
        let stored: Vec<String> = setup
            .payloads(partition)
            .into_iter()
            .filter(|payload| payload.starts_with('t'))
            .collect();
        for task in (0..TASKS).filter(|task| task % 3 == partition) {
            let prefix = format!("t{task}-");
            let mine: Vec<&String> = stored.iter().filter(|p| p.starts_with(&prefix)).collect();
            let expected: Vec<String> = (0..SENDS).map(|seq| format!("{prefix}{seq}")).collect();
            assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "task {task}");
        }
    }
    setup.finish().await;
}

/// With room for two requests in the router, two more wait in line; a fifth finds the
/// line full too (it holds `max_pending_requests` requests) and is refused instead of
/// waiting. When the slow replies come, the waiting sends go out in their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_is_bounded_and_drains_in_call_order() {
    let setup = setup(1, |config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    })
    .await;
    setup.cluster.set_reply_delay(1, Duration::from_millis(200));
    // s0 and s1 are in the router; s2 and s3 wait.
    let calls: Vec<_> = (0..4)
        .map(|seq| start(send(&setup.client, 0, format!("s{seq}"))))
        .collect();
    let fifth = start(send(&setup.client, 0, "s4".to_owned()));
    assert!(matches!(
        fifth.finish().await,
        Err(ClientError::QueueFull { limit: 2 })
    ));
    for call in calls {
        call.finish().await.unwrap();
    }
    assert_eq!(setup.payloads(0), ["s0", "s1", "s2", "s3"]);
    setup.finish().await;
}

/// A request that waits for room longer than `request_timeout` gets `QueueFull`. The
/// router's one place is taken by a send whose reply the node holds: past its deadline it
/// times out, but keeps its room until its attempt ends (so that its partition's next
/// write cannot overtake it on the wire), so the waiting send finds no room until its own
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_past_its_deadline_gets_queue_full() {
    let setup = setup(1, |config| {
        config.max_pending_requests = 1;
        config.max_pending_per_lane = 1;
        config.request_timeout = Duration::from_millis(500);
        // The held reply must outlast both deadlines without the link giving up first.
        config.attempt_timeout = Duration::from_secs(30);
        config.heartbeat_interval = Duration::from_secs(30);
    })
    .await;
    setup.hold_replies(1);
    let held = start(send(&setup.client, 0, "held".to_owned()));
    let waiting = start(send(&setup.client, 0, "waiting".to_owned()));
    match waiting.finish().await {
        Err(ClientError::QueueFull { limit: 1 }) => {}
        other => panic!("expected QueueFull after waiting, got {other:?}"),
    }
    match held.finish().await {
        Err(ClientError::Request(
            RequestError::TimedOut { .. } | RequestError::OutcomeUnknown { .. },
        )) => {}
        other => panic!("the held send ends by its deadline, got {other:?}"),
    }
    setup.finish().await;
}

/// `try_send` never jumps the line: while a send waits for its partition's queue, a
/// `try_send` to another partition, which the router would take, is refused; a `send` to
/// that partition waits behind the waiting one and succeeds once room frees up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_send_is_refused_while_sends_wait_even_when_the_router_has_room() {
    let setup = setup(2, |config| {
        config.max_pending_requests = 4;
        config.max_pending_per_lane = 1;
    })
    .await;
    // Partition 0's primary (node 1) is slow; partition 1's (node 2) is not.
    setup.cluster.set_reply_delay(1, Duration::from_millis(200));
    let first = start(send(&setup.client, 0, "first".to_owned()));
    // Partition 0's queue is full: it waits.
    let blocked = start(send(&setup.client, 0, "blocked".to_owned()));
    let tried = start(try_send(&setup.client, 1, "tried".to_owned()));
    assert!(matches!(
        tried.finish().await,
        Err(ClientError::QueueFull { limit: 1 })
    ));
    let behind = start(send(&setup.client, 1, "behind".to_owned()));
    first.finish().await.unwrap();
    blocked.finish().await.unwrap();
    behind.finish().await.unwrap();
    assert_eq!(setup.payloads(0), ["first", "blocked"]);
    assert_eq!(setup.payloads(1), ["behind"]);
    // With nothing waiting and room in the router, a try goes through.
    try_send(&setup.client, 1, "later".to_owned())
        .await
        .unwrap();
    setup.finish().await;
}

/// Shutdown is not held up by waiting requests: each gets `Closed`, and the one in the
/// router ends as the router's others do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_waiting_requests_with_closed() {
    let setup = setup(1, |config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 1;
    })
    .await;
    setup.hold_replies(1);
    let held = start(send(&setup.client, 0, "held".to_owned()));
    let waiting: Vec<_> = (0..2)
        .map(|seq| start(send(&setup.client, 0, format!("w{seq}"))))
        .collect();
    setup.client.shutdown().await;
    for call in waiting {
        assert!(matches!(call.finish().await, Err(ClientError::Closed)));
    }
    // Written, unanswered: it may have been admitted (unknown); not yet written, nothing
    // was stored (shut down, or closed before the router took it).
    assert!(matches!(
        held.finish().await,
        Err(
            ClientError::Request(RequestError::OutcomeUnknown { .. } | RequestError::Shutdown)
                | ClientError::Closed
        )
    ));
    assert!(matches!(
        send(&setup.client, 0, "after".to_owned()).await,
        Err(ClientError::Closed)
    ));
    setup.finish().await;
}

/// A slow cluster with many callers and little room keeps each partition's order: sends
/// started in order (several at once per partition) are stored in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cluster_keeps_the_order_of_each_partition() {
    const WAVES: u32 = 10;
    const PER_PARTITION: u32 = 4;
    let setup = setup(3, |config| {
        config.max_pending_requests = 8;
        config.max_pending_per_lane = 2;
    })
    .await;
    for node in [1, 2] {
        setup
            .cluster
            .set_reply_delay(node, Duration::from_millis(10));
    }
    for wave in 0..WAVES {
        // Twelve sends started at once, four per partition, interleaved: at most eight fit
        // in the router, two per partition; the rest wait.
        let mut calls = Vec::new();
        for seq in 0..PER_PARTITION {
            for partition in 0..3 {
                let payload = format!("w{wave}-{seq}");
                calls.push(start(send(&setup.client, partition, payload)));
            }
        }
        for call in calls {
            call.finish().await.unwrap();
        }
    }
    for partition in 0..3 {
        let expected: Vec<String> = (0..WAVES)
            .flat_map(|wave| (0..PER_PARTITION).map(move |seq| format!("w{wave}-{seq}")))
            .collect();
        assert_eq!(setup.payloads(partition), expected, "partition {partition}");
    }
    setup.finish().await;
}
