//! The tokio adapter's producer against the loopback cluster: direct
//! and background mode, order per partition, one receipt per call, flush, failures, the
//! backpressure modes and shutdown.
//!
//! Messages are numbered in their payloads and read back through the client's `poll`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, Message, PollingStrategy};
use iggy_route_core::{Config, ConfigError, RequestError, SendReceipt, SubmitError};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::{
    BackgroundConfig, Backpressure, Client, ClientError, ProducerError, SendFailure,
};

/// The ids a fresh test cluster gives its first stream and topic.
const STREAM: u32 = 0;
const TOPIC: u32 = 0;
const PARTITIONS: u32 = 3;

/// Long enough that nothing lingers out during a test that wants the buffer to hold.
const LONG_LINGER: Duration = Duration::from_secs(5);

struct Setup {
    cluster: TestCluster,
    client: Client,
}

/// A 3-node cluster with topic "orders"/"events" of three partitions, partition `p`'s
/// primary on node `p` (split primaries), and a connected client.
async fn setup(configure: impl FnOnce(&mut Config)) -> Setup {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let ids = cluster.create_stream_and_topic("orders", "events", PARTITIONS);
    assert_eq!(ids, (STREAM, TOPIC));
    for partition in 0..PARTITIONS {
        let node = usize::try_from(partition).unwrap();
        assert!(cluster.set_primary(STREAM, TOPIC, partition, node));
    }
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(10);
    configure(&mut config);
    let client = Client::connect(config).await.unwrap();
    Setup { cluster, client }
}

impl Setup {
    /// Every message of a partition, read back through the client, in offset order.
    async fn read_back(&self, partition: u32) -> Vec<(u64, String)> {
        let consumer = Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        };
        let mut read = Vec::new();
        loop {
            let next = read.last().map_or(0, |(offset, _)| offset + 1);
            let strategy = PollingStrategy::Offset(next);
            let reply = self
                .client
                .poll(
                    STREAM,
                    TOPIC,
                    Some(partition),
                    consumer.clone(),
                    strategy,
                    1000,
                )
                .await
                .unwrap();
            if reply.messages.is_empty() {
                return read;
            }
            read.extend(
                reply
                    .messages
                    .into_iter()
                    .map(|m| (m.offset, String::from_utf8(m.payload.to_vec()).unwrap())),
            );
        }
    }

    /// The payload stored at one offset, read back through the client.
    async fn payload_at(&self, partition: u32, offset: u64) -> String {
        let consumer = Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        };
        let strategy = PollingStrategy::Offset(offset);
        let reply = self
            .client
            .poll(STREAM, TOPIC, Some(partition), consumer, strategy, 1)
            .await
            .unwrap();
        let message = reply.messages.first().unwrap();
        assert_eq!(message.offset, offset);
        String::from_utf8(message.payload.to_vec()).unwrap()
    }

    fn stored(&self) -> u64 {
        (0..PARTITIONS)
            .map(|partition| self.cluster.partition_len(STREAM, TOPIC, partition))
            .sum()
    }

    async fn finish(self) {
        self.client.shutdown().await;
        self.cluster.shutdown().await;
        iggy_route_tests::error_events::assert_none();
    }
}

fn message(payload: String) -> Message {
    Message {
        payload: Bytes::from(payload),
        ..Message::default()
    }
}

fn numbered(prefix: &str, range: std::ops::Range<u32>) -> Vec<Message> {
    range.map(|n| message(format!("{prefix}{n}"))).collect()
}

/// The numbers of the payloads that start with `prefix`, in the order read.
fn numbers_of(read: &[(u64, String)], prefix: &str) -> Vec<u32> {
    read.iter()
        .filter_map(|(_, payload)| payload.strip_prefix(prefix))
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Balanced batches spread each task's calls over the partitions; within each partition
/// every task's messages are in the order it sent them, and none is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_sends_keep_each_partitions_order() {
    let setup = setup(|_| {}).await;
    keeps_each_partitions_order(setup).await;
}

/// The same while the producer's batches wait for room in the client (two requests in
/// the router, slow nodes, four batches in flight): a batch that waits is never overtaken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_batches_waiting_for_room_keep_each_partitions_order() {
    let setup = setup(|config| {
        config.max_pending_requests = 2;
        config.max_pending_per_lane = 2;
    })
    .await;
    for node in 0..3 {
        setup
            .cluster
            .set_reply_delay(node, Duration::from_millis(2));
    }
    keeps_each_partitions_order(setup).await;
}

async fn keeps_each_partitions_order(setup: Setup) {
    const TASKS: u32 = 3;
    const CALLS: u32 = 200;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .batch_length(7)
        .background(BackgroundConfig {
            max_in_flight: 4,
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let producer = producer.clone();
        tasks.spawn(async move {
            for call in 0..CALLS {
                // Calls of one to three messages, numbered across calls.
                let first = call * 3;
                let count = 1 + call % 3;
                let messages = numbered(&format!("t{task}-"), first..first + count);
                producer.send(messages).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    producer.flush().await.unwrap();

    let mut sent_per_task: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut partitions_used = 0;
    for partition in 0..PARTITIONS {
        let read = setup.read_back(partition).await;
        partitions_used += usize::from(!read.is_empty());
        for task in 0..TASKS {
            let numbers = numbers_of(&read, &format!("t{task}-"));
            assert!(
                numbers.windows(2).all(|pair| pair[0] < pair[1]),
                "task {task} out of order in partition {partition}: {numbers:?}"
            );
            sent_per_task.entry(task).or_default().extend(numbers);
        }
    }
    assert_eq!(partitions_used, 3, "balanced batches reach every partition");
    for (task, mut numbers) in sent_per_task {
        numbers.sort_unstable();
        let expected: Vec<u32> = (0..CALLS)
            .flat_map(|call| call * 3..call * 3 + 1 + call % 3)
            .collect();
        assert_eq!(numbers, expected, "task {task}: each message once");
    }
    let stats = producer.stats();
    assert_eq!(stats.sent_messages, setup.stored());
    assert_eq!((stats.failed_messages, stats.buffered_messages), (0, 0));
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// Each background call's handle resolves to its own receipt: its partition, its message
/// count, and the offset where its own first message is stored, though calls share batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_background_call_gets_its_own_receipt() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer(STREAM, TOPIC)
        .unwrap()
        .partitioning(Partitioning::PartitionId(1))
        .batch_length(10)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for call in 0..30u32 {
        let count = 1 + call % 4;
        let messages = numbered(&format!("c{call}-"), 0..count);
        handles.push((call, count, producer.send(messages).await.unwrap()));
    }
    let mut offsets = Vec::new();
    for (call, count, handle) in handles {
        let receipt: SendReceipt = handle.await.unwrap();
        assert_eq!(receipt.partition_id, 1);
        assert_eq!(receipt.messages, count);
        let offset = receipt.base_offset.unwrap();
        assert_eq!(
            setup.payload_at(1, offset).await,
            format!("c{call}-0"),
            "call {call}'s first message is at its receipt's offset"
        );
        offsets.push((offset, count));
    }
    // The calls follow each other in the partition, none overlapping.
    for pair in offsets.windows(2) {
        assert_eq!(pair[0].0 + u64::from(pair[0].1), pair[1].0);
    }
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// Direct mode: a call larger than `batch_length` goes as consecutive chunks, one receipt
/// each, in order; `send_one` returns the message's receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_sends_return_one_receipt_per_chunk() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .partitioning(Partitioning::PartitionId(2))
        .batch_length(100)
        .direct()
        .build()
        .unwrap();
    let receipts = producer.send(numbered("d", 0..250)).await.unwrap();
    let counts: Vec<u32> = receipts.iter().map(|r| r.messages).collect();
    assert_eq!(counts, [100, 100, 50]);
    for (chunk, receipt) in receipts.iter().enumerate() {
        let offset = receipt.base_offset.unwrap();
        assert_eq!(offset, 100 * chunk as u64, "chunks follow each other");
        assert_eq!(
            setup.payload_at(2, offset).await,
            format!("d{}", 100 * chunk)
        );
    }
    let one = producer.send_one(message("d250".to_owned())).await.unwrap();
    assert_eq!(one.base_offset, Some(250));
    assert!(matches!(
        producer.send(Vec::new()).await,
        Err(ClientError::Submit(SubmitError::EmptyBatch))
    ));
    let stats = producer.stats();
    assert_eq!((stats.sent_messages, stats.failed_messages), (251, 0));
    producer.flush().await.unwrap();
    producer.shutdown().await.unwrap();
    assert!(matches!(
        producer.send_one(message("late".to_owned())).await,
        Err(ClientError::Closed)
    ));
    setup.finish().await;
}

/// A flush sends what lingers at once and returns only when all of it is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_returns_once_every_buffered_message_is_acknowledged() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    for call in 0..20 {
        producer
            .send(numbered(&format!("f{call}-"), 0..5))
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();
    let stats = producer.stats();
    assert_eq!(stats.sent_messages, 100);
    assert_eq!((stats.buffered_messages, stats.in_flight), (0, 0));
    assert_eq!(setup.stored(), 100, "acknowledged means stored");
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// Sends to a topic that does not exist fail; with no callback, each call's handle and
/// the next flush say so (and count every message); a flush after that starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_reach_the_delivery_handles_and_the_next_flush() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "no-such-topic")
        .unwrap()
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for call in 0..4 {
        handles.push(
            producer
                .send(numbered(&format!("m{call}-"), 0..3))
                .await
                .unwrap(),
        );
    }
    for (call, handle) in handles.into_iter().enumerate() {
        let failure = handle.await.unwrap_err();
        assert!(matches!(
            failure.error,
            ClientError::Request(RequestError::TopicNotFound { .. })
        ));
        let payloads: Vec<_> = failure.messages.iter().map(|m| m.payload.clone()).collect();
        let expected: Vec<_> = numbered(&format!("m{call}-"), 0..3)
            .into_iter()
            .map(|m| m.payload)
            .collect();
        assert_eq!(payloads, expected, "the call's own messages come back");
    }
    match producer.flush().await {
        Err(ProducerError::SendsFailed {
            messages,
            last_error,
        }) => {
            assert_eq!(messages, 12);
            assert!(matches!(
                last_error,
                ClientError::Request(RequestError::TopicNotFound { .. })
            ));
        }
        other => panic!("expected the failures, got {other:?}"),
    }
    assert_eq!(producer.stats().failed_messages, 12);
    producer.flush().await.unwrap();
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// With an `on_error` callback, failed calls come back to it with their messages, and
/// flush no longer reports them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_reach_on_error_with_their_messages() {
    let setup = setup(|_| {}).await;
    let failures: Arc<Mutex<Vec<SendFailure>>> = Arc::default();
    let sink = Arc::clone(&failures);
    let producer = setup
        .client
        .producer("orders", "no-such-topic")
        .unwrap()
        .background(BackgroundConfig {
            on_error: Some(Arc::new(move |failure| sink.lock().unwrap().push(failure))),
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    for call in 0..3 {
        producer
            .send(numbered(&format!("e{call}-"), 0..2))
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();
    {
        let failures = failures.lock().unwrap();
        let mut payloads: Vec<String> = failures
            .iter()
            .flat_map(|failure| failure.messages.iter())
            .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
            .collect();
        payloads.sort();
        assert_eq!(payloads, ["e0-0", "e0-1", "e1-0", "e1-1", "e2-0", "e2-1"]);
        assert!(failures.iter().all(|failure| matches!(
            failure.error,
            ClientError::Request(RequestError::TopicNotFound { .. })
        )));
    }
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// An `on_error` callback that panics stops the producer; the next flush says so
/// instead of reporting success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_on_error_stops_the_producer_and_flush_says_so() {
    let setup = setup(|_| {}).await;
    // Many times over: the flush and the task's end race (see the mio test).
    for round in 0..200 {
        let producer = setup
            .client
            .producer("orders", "no-such-topic")
            .unwrap()
            .background(BackgroundConfig {
                on_error: Some(Arc::new(|_| panic!("on_error panics (on purpose)"))),
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap();
        let handle = producer.send(numbered("p", 0..2)).await.unwrap();
        assert!(handle.await.is_err());
        let flushed = producer.flush().await;
        assert!(
            matches!(flushed, Err(ProducerError::Stopped)),
            "round {round}: {flushed:?}"
        );
        let after = producer.send(numbered("p", 2..3)).await;
        assert!(
            matches!(after, Err(ClientError::Closed)),
            "round {round}: {after:?}"
        );
    }
    setup.finish().await;
}

/// A cluster that stops mid-run: what was acknowledged before is stored, and the sends
/// after it fail (by their deadline), reaching their handles and the flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_stopped_mid_run_fails_the_sends_that_follow() {
    let setup = setup(|config| config.request_timeout = Duration::from_secs(1)).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    producer.send(numbered("before", 0..10)).await.unwrap();
    producer.flush().await.unwrap();
    assert_eq!(setup.stored(), 10);
    for node in 0..3 {
        setup.cluster.stop_node(node).await;
    }
    let handle = producer.send(numbered("after", 0..5)).await.unwrap();
    assert!(handle.await.is_err(), "nothing can admit it");
    match producer.flush().await {
        Err(ProducerError::SendsFailed { messages: 5, .. }) => {}
        other => panic!("expected 5 failed messages, got {other:?}"),
    }
    assert_eq!(setup.stored(), 10);
    producer.shutdown().await.unwrap();
    setup.client.shutdown().await;
    iggy_route_tests::error_events::assert_none();
}

/// Polls a future once, so that what it hands to the producer's task is handed over now,
/// before anything this task does next; the caller awaits it later.
fn start_now<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> Pin<Box<dyn Future<Output = T> + Send>> {
    let mut future: Pin<Box<dyn Future<Output = T> + Send>> = Box::pin(future);
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(value) => Box::pin(std::future::ready(value)),
        Poll::Pending => future,
    }
}

fn small_buffer(backpressure: Backpressure) -> BackgroundConfig {
    BackgroundConfig {
        max_buffered_messages: 10,
        backpressure,
        ..BackgroundConfig::default()
    }
}

/// `FailImmediately`: once the buffer holds its ten messages (lingering), the next call is
/// refused at once; the ten are still sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_immediately_refuses_a_call_when_the_buffer_is_full() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(small_buffer(Backpressure::FailImmediately))
        .build()
        .unwrap();
    producer.send(numbered("b", 0..10)).await.unwrap();
    assert!(matches!(
        producer.send_one(message("b10".to_owned())).await,
        Err(ClientError::QueueFull { limit: 10 })
    ));
    // A call that could never fit is told so, whatever the mode.
    assert!(matches!(
        producer.send(numbered("x", 0..11)).await,
        Err(ClientError::Invalid(_))
    ));
    producer.flush().await.unwrap();
    assert_eq!(setup.stored(), 10);
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// `BlockWithTimeout`: a call that finds the buffer full waits, and gives up with
/// `QueueFull` when no room came within its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_with_timeout_gives_up_when_no_room_comes() {
    let setup = setup(|_| {}).await;
    let timeout = Duration::from_millis(200);
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(small_buffer(Backpressure::BlockWithTimeout(timeout)))
        .build()
        .unwrap();
    producer.send(numbered("b", 0..10)).await.unwrap();
    assert!(matches!(
        producer.send_one(message("b10".to_owned())).await,
        Err(ClientError::QueueFull { limit: 10 })
    ));
    producer.shutdown().await.unwrap();
    assert_eq!(setup.stored(), 10, "the buffered ten were sent");
    setup.finish().await;
}

/// `Block`: a call that finds the buffer full waits until room comes (here: a flush sends
/// the buffer), then is buffered and sent in its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_waits_for_room_and_keeps_the_calls_order() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .partitioning(Partitioning::PartitionId(0))
        .linger_time(LONG_LINGER)
        .background(small_buffer(Backpressure::Block))
        .build()
        .unwrap();
    producer.send(numbered("b", 0..10)).await.unwrap();
    // Handed to the producer's task now, ahead of the flush: it finds the buffer full.
    let blocked = start_now({
        let producer = producer.clone();
        async move { producer.send(numbered("b", 10..15)).await }
    });
    producer.flush().await.unwrap();
    let handle = blocked.await.unwrap();
    assert_eq!(handle.await.unwrap().base_offset, Some(10));
    let read = setup.read_back(0).await;
    assert_eq!(numbers_of(&read, "b"), (0..15).collect::<Vec<_>>());
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// A call cancelled while it waits for room is never buffered, so never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_waiting_for_room_is_not_sent() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(small_buffer(Backpressure::Block))
        .build()
        .unwrap();
    producer.send(numbered("b", 0..10)).await.unwrap();
    let cancelled = start_now({
        let producer = producer.clone();
        async move { producer.send(numbered("cancelled", 0..5)).await }
    });
    drop(cancelled);
    producer.flush().await.unwrap();
    producer
        .send_one(message("after".to_owned()))
        .await
        .unwrap();
    producer.flush().await.unwrap();
    assert_eq!(setup.stored(), 11, "the ten, then the one after");
    assert_eq!(producer.stats().sent_messages, 11);
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// Shutdown flushes what is buffered (a long linger would otherwise hold it) and then
/// refuses sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_what_is_buffered_then_refuses_sends() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let handle = producer.send(numbered("s", 0..25)).await.unwrap();
    producer.shutdown().await.unwrap();
    assert_eq!(handle.await.unwrap().messages, 25);
    assert_eq!(setup.stored(), 25);
    assert!(matches!(
        producer.send_one(message("late".to_owned())).await,
        Err(ClientError::Closed)
    ));
    producer.flush().await.unwrap();
    producer.shutdown().await.unwrap();
    setup.finish().await;
}

/// Dropping every handle of a background producer still sends what it buffered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_producer_still_sends_what_it_buffered() {
    let setup = setup(|_| {}).await;
    let producer = setup
        .client
        .producer("orders", "events")
        .unwrap()
        .linger_time(LONG_LINGER)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let handle = producer.send(numbered("g", 0..8)).await.unwrap();
    drop(producer);
    assert_eq!(handle.await.unwrap().messages, 8);
    assert_eq!(setup.stored(), 8);
    setup.finish().await;
}

/// Bad settings are typed errors at `build`, before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_are_refused_at_build() {
    let setup = setup(|_| {}).await;
    let builder = || setup.client.producer("orders", "events").unwrap();
    assert!(matches!(
        builder().batch_length(0).build(),
        Err(ClientError::Config(ConfigError::Zero {
            field: "batch_length"
        }))
    ));
    assert!(matches!(
        builder().batch_size(0).direct().build(),
        Err(ClientError::Config(ConfigError::Zero {
            field: "batch_size"
        }))
    ));
    let no_flight = BackgroundConfig {
        max_in_flight: 0,
        ..BackgroundConfig::default()
    };
    assert!(matches!(
        builder().background(no_flight).build(),
        Err(ClientError::Config(ConfigError::Zero {
            field: "max_in_flight"
        }))
    ));
    // A linger is bounded by a day, as on the blocking producer, not by the request
    // timeout (the batch's request timeout starts once its linger is over).
    assert!(matches!(
        builder()
            .linger_time(Duration::from_secs(2 * 24 * 60 * 60))
            .background(BackgroundConfig::default())
            .build(),
        Err(ClientError::Config(ConfigError::TooLong {
            field: "linger_time"
        }))
    ));
    let forever = small_buffer(Backpressure::BlockWithTimeout(Duration::MAX));
    assert!(matches!(
        builder().background(forever).build(),
        Err(ClientError::Config(ConfigError::TooLong { .. }))
    ));
    assert!(matches!(
        setup.client.producer("", "events"),
        Err(ClientError::Invalid(_))
    ));
    setup.finish().await;
}
