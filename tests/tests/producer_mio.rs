//! The mio adapter's producer against the loopback cluster: order
//! per partition, one receipt per call naming that call's own offsets, flush, failures
//! through every channel (`on_error`, flush, `Delivery`), the three backpressure modes,
//! shutdown and the direct mode.

#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "mio_support/mod.rs"]
mod mio_support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::wire::{Consumer, ConsumerKind, Identifier, PollingStrategy};
use iggy_route_core::{ConfigError, RequestError, SubmitError};
use iggy_route_mio::producer::{Background, Delivery};
use iggy_route_mio::{
    BackgroundConfig, Backpressure, Client, Partitioning, Producer, ProducerError, SendFailure,
};
use mio_support::{Harness, STREAM, TOPIC, message, numbered, sequences_of};

/// Long enough that no batch goes for want of its linger while a test looks: batches go
/// when full, flushed or shut down.
const NEVER_LINGERS: Duration = Duration::from_secs(60);

/// A bound on waits that should end at once; a test fails rather than hang past it.
const BOUND: Duration = Duration::from_secs(30);

/// Every message of a partition, read back through the client.
fn poll_all(client: &Client, partition: u32) -> Vec<(u64, String)> {
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(1),
    };
    let mut read = Vec::new();
    loop {
        let strategy = PollingStrategy::Offset(read.len() as u64);
        let polled = client
            .poll(
                STREAM,
                TOPIC,
                Some(partition),
                consumer.clone(),
                strategy,
                100,
            )
            .unwrap();
        if polled.messages.is_empty() {
            return read;
        }
        for message in polled.messages {
            let payload = String::from_utf8(message.payload.to_vec()).unwrap();
            read.push((message.offset, payload));
        }
    }
}

fn payloads_of(read: &[(u64, String)]) -> Vec<String> {
    read.iter().map(|(_, payload)| payload.clone()).collect()
}

fn background(
    client: &Client,
    configure: impl FnOnce(&mut BackgroundConfig),
) -> Producer<Background> {
    let mut config = BackgroundConfig::default();
    configure(&mut config);
    client
        .producer(STREAM, TOPIC)
        .unwrap()
        .batch_length(10)
        .background(config)
        .build()
        .unwrap()
}

/// The outcome of a delivery that must be known by now (after a flush).
fn settled(delivery: &mut Delivery) -> Result<iggy_route_core::SendReceipt, SendFailure> {
    delivery
        .try_wait()
        .expect("a flush returned before this call was settled")
}

#[test]
fn batches_keep_their_order_per_partition_while_waiting_for_room() {
    const PARTITIONS: u32 = 3;
    const CALLS: usize = 200;
    let harness = Harness::start(3, PARTITIONS);
    for partition in 0..PARTITIONS {
        assert!(
            harness
                .cluster
                .set_primary(STREAM, TOPIC, partition, partition as usize)
        );
    }
    // Three producers, one per partition, share a client with room for 3 requests (and 3
    // waiting for room): 6 batches in flight at most, so batches keep waiting for room,
    // and one that waits must not be overtaken by a later one to its partition.
    let client = harness.client(harness.config_with_room(3));
    harness.cluster.set_reply_delay(1, Duration::from_millis(2));
    harness.cluster.set_reply_delay(2, Duration::from_millis(5));
    let producers: Vec<_> = (0..PARTITIONS)
        .map(|partition| {
            let producer = client
                .producer(STREAM, TOPIC)
                .unwrap()
                .partitioning(Partitioning::partition_id(partition))
                .batch_length(3)
                .linger_time(Duration::from_millis(1))
                .background(BackgroundConfig {
                    max_in_flight: 2,
                    ..BackgroundConfig::default()
                })
                .build()
                .unwrap();
            thread::spawn(move || {
                let tag = format!("p{partition}");
                let deliveries: Vec<Delivery> = (0..CALLS)
                    .map(|sequence| producer.send_one(numbered(&tag, sequence)).unwrap())
                    .collect();
                producer.flush().unwrap();
                for mut delivery in deliveries {
                    assert!(settled(&mut delivery).is_ok());
                }
                let stats = producer.stats();
                producer.shutdown().unwrap();
                stats
            })
        })
        .collect();
    for producer in producers {
        let stats = producer.join().unwrap();
        assert_eq!(
            (
                stats.sent_messages,
                stats.failed_messages,
                stats.buffered_messages,
                stats.in_flight
            ),
            (CALLS as u64, 0, 0, 0)
        );
    }
    for partition in 0..PARTITIONS {
        let stored = payloads_of(&poll_all(&client, partition));
        let tag = format!("p{partition}");
        assert_eq!(
            sequences_of(&stored, &tag),
            (0..CALLS).collect::<Vec<_>>(),
            "partition {partition}: every message once, in order"
        );
        assert_eq!(stored.len(), CALLS);
    }
    client.shutdown();
}

#[test]
fn balanced_batches_spread_over_the_partitions_each_in_order() {
    const PARTITIONS: u32 = 3;
    const CALLS: usize = 120;
    let harness = Harness::start(1, PARTITIONS);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .batch_length(4)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    for sequence in 0..CALLS {
        producer.send_one(numbered("b", sequence)).unwrap();
    }
    producer.flush().unwrap();
    let mut seen = Vec::new();
    for partition in 0..PARTITIONS {
        let stored = sequences_of(&payloads_of(&poll_all(&client, partition)), "b");
        assert!(!stored.is_empty(), "partition {partition} got no batch");
        assert!(
            stored.windows(2).all(|pair| pair[0] < pair[1]),
            "partition {partition} out of order: {stored:?}"
        );
        seen.extend(stored);
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..CALLS).collect::<Vec<_>>(),
        "each message stored once"
    );
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn each_call_gets_its_own_receipt_naming_its_own_offsets() {
    let harness = Harness::start(1, 2);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .partitioning(Partitioning::partition_id(1))
        .batch_length(10)
        .linger_time(NEVER_LINGERS)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    // Calls of 1 to 4 messages, several to a batch (never split between batches).
    let calls: Vec<Vec<String>> = (0..40)
        .map(|call| (0..=call % 4).map(|i| format!("c{call}m{i}")).collect())
        .collect();
    let deliveries: Vec<Delivery> = calls
        .iter()
        .map(|payloads| {
            let messages = payloads.iter().map(|p| message(p.as_str())).collect();
            producer.send(messages).unwrap()
        })
        .collect();
    producer.flush().unwrap();
    let stored = poll_all(&client, 1);
    for (payloads, delivery) in calls.iter().zip(deliveries) {
        let receipt = delivery.wait().unwrap();
        assert_eq!(receipt.partition_id, 1);
        assert_eq!(receipt.messages as usize, payloads.len());
        let base = receipt.base_offset.unwrap();
        for (index, payload) in payloads.iter().enumerate() {
            let offset = base + index as u64;
            // The partition holds offsets 0, 1, 2...: the message at `offset` is at that index.
            let found = &stored[usize::try_from(offset).unwrap()];
            assert_eq!(
                found,
                &(offset, payload.clone()),
                "the call's messages at its offsets"
            );
        }
    }
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn flush_returns_once_every_call_before_it_is_acknowledged() {
    let harness = Harness::start(3, 3);
    let client = harness.client(harness.config());
    // Slow answers: without the flush's wait, calls would still be in flight.
    harness.delay_replies(Duration::from_millis(20));
    let producer = background(&client, |config| config.max_in_flight = 2);
    let mut deliveries: Vec<Delivery> = (0..57)
        .map(|sequence| producer.send_one(numbered("f", sequence)).unwrap())
        .collect();
    producer.flush().unwrap();
    for delivery in &mut deliveries {
        assert!(settled(delivery).is_ok());
    }
    let stats = producer.stats();
    assert_eq!(
        (
            stats.sent_messages,
            stats.buffered_messages,
            stats.in_flight
        ),
        (57, 0, 0)
    );
    let stored: usize = (0..3)
        .map(|p| harness.cluster.partition_len(STREAM, TOPIC, p))
        .sum::<u64>() as usize;
    assert_eq!(stored, 57);
    // A flush with nothing buffered returns at once, with nothing to report.
    producer.flush().unwrap();
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn failures_reach_the_delivery_and_the_next_flush_without_a_callback() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, "no-such-topic")
        .unwrap()
        .batch_length(3)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let mut deliveries: Vec<Delivery> = (0..7)
        .map(|sequence| producer.send_one(numbered("lost", sequence)).unwrap())
        .collect();
    let flushed = producer.flush();
    let Err(ProducerError::SendsFailed {
        messages,
        last_error,
    }) = flushed
    else {
        panic!("the flush did not report the failures: {flushed:?}");
    };
    assert_eq!(messages, 7);
    assert!(
        matches!(
            last_error,
            ClientError::Request(RequestError::TopicNotFound { .. })
        ),
        "{last_error:?}"
    );
    for (sequence, delivery) in deliveries.iter_mut().enumerate() {
        let failure = settled(delivery).unwrap_err();
        assert!(matches!(
            failure.error,
            ClientError::Request(RequestError::TopicNotFound { .. })
        ));
        let payloads: Vec<_> = failure.messages.iter().map(|m| m.payload.clone()).collect();
        assert_eq!(
            payloads,
            [numbered("lost", sequence).payload],
            "the call's messages back"
        );
    }
    assert_eq!(producer.stats().failed_messages, 7);
    // Reported once: the next flush has nothing new to say.
    producer.flush().unwrap();
    // Shutdown reports like a flush.
    producer.send_one(message("lost too")).unwrap();
    assert!(matches!(
        producer.shutdown(),
        Err(ProducerError::SendsFailed { messages: 1, .. })
    ));
    client.shutdown();
}

#[test]
fn failures_go_to_on_error_with_their_messages_and_not_to_the_flush() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let failed: Arc<Mutex<Vec<SendFailure>>> = Arc::default();
    let on_error = {
        let failed = Arc::clone(&failed);
        Arc::new(move |failure: SendFailure| failed.lock().unwrap().push(failure))
    };
    let producer = client
        .producer(STREAM, "no-such-topic")
        .unwrap()
        .background(BackgroundConfig {
            on_error: Some(on_error),
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    let mut deliveries: Vec<Delivery> = (0..5)
        .map(|sequence| {
            let messages = vec![numbered("x", 2 * sequence), numbered("x", 2 * sequence + 1)];
            producer.send(messages).unwrap()
        })
        .collect();
    // The callback took them: the flush has nothing to report.
    producer.flush().unwrap();
    let failed = failed.lock().unwrap();
    assert_eq!(failed.len(), 5, "one failure per call");
    let mut returned: Vec<String> = failed
        .iter()
        .flat_map(|failure| failure.messages.iter())
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect();
    returned.sort_unstable();
    let mut expected: Vec<String> = (0..10).map(|i| format!("x/{i}")).collect();
    expected.sort_unstable();
    assert_eq!(returned, expected, "every message back, once");
    // The deliveries say so too.
    for delivery in &mut deliveries {
        assert!(settled(delivery).is_err());
    }
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn sends_to_a_stopped_cluster_fail_and_are_reported() {
    let harness = Harness::start(1, 1);
    let mut config = harness.config();
    // Failures within seconds once the cluster is gone.
    config.request_timeout = Duration::from_secs(2);
    config.attempt_timeout = Duration::from_secs(1);
    let client = harness.client(config);
    let producer = background(&client, |_| {});
    let before: Vec<Delivery> = (0..20)
        .map(|sequence| producer.send_one(numbered("ok", sequence)).unwrap())
        .collect();
    producer.flush().unwrap();
    harness.stop_every_node();
    let mut after: Vec<Delivery> = (0..15)
        .map(|sequence| producer.send_one(numbered("late", sequence)).unwrap())
        .collect();
    let flushed = producer.flush();
    assert!(
        matches!(
            flushed,
            Err(ProducerError::SendsFailed { messages: 15, .. })
        ),
        "{flushed:?}"
    );
    for delivery in before {
        assert!(delivery.wait().is_ok());
    }
    for delivery in &mut after {
        assert!(settled(delivery).is_err());
    }
    let stats = producer.stats();
    assert_eq!((stats.sent_messages, stats.failed_messages), (20, 15));
    producer.shutdown().unwrap();
    client.shutdown();
}

/// A background producer whose buffer holds 4 messages and whose batches go only when
/// flushed (never full: a batch is 10 messages; never lingered long enough).
fn small_buffer(client: &Client, backpressure: Backpressure) -> Producer<Background> {
    client
        .producer(STREAM, TOPIC)
        .unwrap()
        .batch_length(10)
        .linger_time(NEVER_LINGERS)
        .background(BackgroundConfig {
            max_buffered_messages: 4,
            backpressure,
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap()
}

#[test]
fn fail_immediately_refuses_a_send_while_the_buffer_is_full() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = small_buffer(&client, Backpressure::FailImmediately);
    let held: Vec<Delivery> = (0..4)
        .map(|sequence| producer.send_one(numbered("held", sequence)).unwrap())
        .collect();
    let refused = producer.send_one(message("one too many"));
    assert!(
        matches!(refused, Err(ClientError::QueueFull { limit: 4 })),
        "{refused:?}"
    );
    // A call larger than the whole buffer never fits, in any mode: it is invalid, not a
    // full queue to retry later (as on the async producer).
    let too_large = producer.send((0..5).map(|i| numbered("big", i)).collect());
    assert!(
        matches!(too_large, Err(ClientError::Invalid(_))),
        "{too_large:?}"
    );
    let empty = producer.send(Vec::new());
    assert!(
        matches!(empty, Err(ClientError::Submit(SubmitError::EmptyBatch))),
        "{empty:?}"
    );
    // The flush sends what was held, and then there is room again.
    producer.flush().unwrap();
    for delivery in held {
        assert!(delivery.wait().is_ok());
    }
    producer.send_one(message("fits now")).unwrap();
    producer.shutdown().unwrap();
    assert_eq!(
        sequences_of(&harness.payloads(0), "held"),
        [0, 1, 2, 3],
        "the refused calls were never sent"
    );
    assert_eq!(harness.payloads(0).len(), 5);
    client.shutdown();
}

#[test]
fn block_with_timeout_gives_up_after_its_timeout() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let patience = Duration::from_millis(200);
    let producer = small_buffer(&client, Backpressure::BlockWithTimeout(patience));
    for sequence in 0..4 {
        producer.send_one(numbered("held", sequence)).unwrap();
    }
    let started = Instant::now();
    let refused = producer.send_one(message("one too many"));
    assert!(
        matches!(refused, Err(ClientError::QueueFull { limit: 4 })),
        "{refused:?}"
    );
    assert!(started.elapsed() >= patience, "it gave up without waiting");
    producer.shutdown().unwrap();
    assert_eq!(harness.payloads(0).len(), 4);
    client.shutdown();
}

#[test]
fn block_waits_for_room_and_shutdown_ends_the_wait() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = small_buffer(&client, Backpressure::Block);
    for sequence in 0..4 {
        producer.send_one(numbered("b", sequence)).unwrap();
    }
    // The fifth call waits for room; the flush sends the four held, which makes room.
    let blocked = {
        let producer = producer.clone();
        thread::spawn(move || producer.send_one(numbered("b", 4)))
    };
    producer.flush().unwrap();
    let fifth = blocked.join().unwrap().unwrap();
    producer.flush().unwrap();
    assert!(fifth.wait().is_ok());
    assert_eq!(sequences_of(&harness.payloads(0), "b"), [0, 1, 2, 3, 4]);

    // Full again: a call waiting for room when the producer shuts down fails with Closed,
    // and the shutdown still sends what was buffered.
    for sequence in 5..9 {
        producer.send_one(numbered("b", sequence)).unwrap();
    }
    // The call is made (and will find no room) before the shutdown, or after it: either
    // way it fails with Closed and is never sent.
    let (announce, announced) = std::sync::mpsc::channel();
    let blocked = {
        let producer = producer.clone();
        thread::spawn(move || {
            announce.send(()).unwrap();
            producer.send_one(numbered("b", 9))
        })
    };
    announced.recv_timeout(BOUND).unwrap();
    producer.shutdown().unwrap();
    let outcome = blocked.join().unwrap();
    assert!(matches!(outcome, Err(ClientError::Closed)), "{outcome:?}");
    assert_eq!(
        sequences_of(&harness.payloads(0), "b"),
        (0..9).collect::<Vec<_>>()
    );
    client.shutdown();
}

#[test]
fn shutdown_flushes_what_is_buffered_and_then_refuses_sends() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .linger_time(NEVER_LINGERS)
        .background(BackgroundConfig::default())
        .build()
        .unwrap();
    let deliveries: Vec<Delivery> = (0..25)
        .map(|sequence| producer.send_one(numbered("s", sequence)).unwrap())
        .collect();
    assert_eq!(
        producer.stats().buffered_messages,
        25,
        "held for the linger"
    );
    producer.shutdown().unwrap();
    for delivery in deliveries {
        assert!(delivery.wait().is_ok());
    }
    assert_eq!(
        sequences_of(&harness.payloads(0), "s"),
        (0..25).collect::<Vec<_>>()
    );
    let after = producer.send_one(message("late"));
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
    // Shutting down twice is harmless.
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn dropping_the_last_handle_flushes_too() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = small_buffer(&client, Backpressure::Block);
    let clone = producer.clone();
    let deliveries: Vec<Delivery> = (0..3)
        .map(|sequence| clone.send_one(numbered("d", sequence)).unwrap())
        .collect();
    drop(producer);
    assert_eq!(
        clone.stats().buffered_messages,
        3,
        "one handle left: still running"
    );
    drop(clone);
    for delivery in deliveries {
        assert!(delivery.wait().is_ok());
    }
    assert_eq!(sequences_of(&harness.payloads(0), "d"), [0, 1, 2]);
    client.shutdown();
}

#[test]
fn direct_sends_in_chunks_and_waits_for_every_acknowledgement() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .partitioning(Partitioning::partition_id(0))
        .batch_length(4)
        .direct()
        .build()
        .unwrap();
    let receipts = producer
        .send((0..10).map(|sequence| numbered("d", sequence)).collect())
        .unwrap();
    let shape: Vec<(Option<u64>, u32)> = receipts
        .iter()
        .map(|receipt| (receipt.base_offset, receipt.messages))
        .collect();
    assert_eq!(shape, [(Some(0), 4), (Some(4), 4), (Some(8), 2)]);
    let one = producer.send_one(numbered("d", 10)).unwrap();
    assert_eq!(one.base_offset, Some(10));
    assert_eq!(
        sequences_of(&payloads_of(&poll_all(&client, 0)), "d"),
        (0..11).collect::<Vec<_>>()
    );
    let stats = producer.stats();
    assert_eq!((stats.sent_messages, stats.failed_messages), (11, 0));
    let empty = producer.send(Vec::new());
    assert!(
        matches!(empty, Err(ClientError::Submit(SubmitError::EmptyBatch))),
        "{empty:?}"
    );
    producer.flush().unwrap();
    producer.shutdown().unwrap();
    let after = producer.send_one(message("late"));
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
    client.shutdown();
}

#[test]
fn a_direct_send_to_a_missing_topic_fails_typed() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, "no-such-topic")
        .unwrap()
        .build()
        .unwrap();
    let sent = producer.send(vec![message("lost")]);
    assert!(
        matches!(
            sent,
            Err(ClientError::Request(RequestError::TopicNotFound { .. }))
        ),
        "{sent:?}"
    );
    assert_eq!(producer.stats().failed_messages, 1);
    client.shutdown();
}

#[test]
fn a_zero_bound_is_refused_by_the_builder() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let zero_length = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .batch_length(0)
        .build();
    assert!(matches!(
        zero_length,
        Err(ClientError::Config(ConfigError::Zero {
            field: "batch_length"
        }))
    ));
    let zero_in_flight = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .background(BackgroundConfig {
            max_in_flight: 0,
            ..BackgroundConfig::default()
        })
        .build();
    assert!(matches!(
        zero_in_flight,
        Err(ClientError::Config(ConfigError::Zero {
            field: "max_in_flight"
        }))
    ));
    let bad_name = client.producer(STREAM, "");
    assert!(
        matches!(bad_name, Err(ClientError::Invalid(_))),
        "{bad_name:?}"
    );
    client.shutdown();
}

/// A flush (or a send waiting for room) from inside `on_error` runs on the producer's own
/// thread, which would wait for itself: it returns `OwnThread` at once, and the producer and
/// a flush from outside carry on. (Before, the outside flush hung for good.)
#[test]
fn a_flush_from_inside_on_error_returns_at_once_and_the_producer_goes_on() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let slot: Arc<Mutex<Option<Producer<Background>>>> = Arc::default();
    let seen: Arc<Mutex<Vec<Result<(), ProducerError>>>> = Arc::default();
    let on_error = {
        let (slot, seen) = (Arc::clone(&slot), Arc::clone(&seen));
        Arc::new(move |_failure: SendFailure| {
            let producer = slot.lock().unwrap().clone();
            if let Some(producer) = producer {
                seen.lock().unwrap().push(producer.flush());
            }
        })
    };
    let producer = client
        .producer(STREAM, "no-such-topic")
        .unwrap()
        .background(BackgroundConfig {
            on_error: Some(on_error),
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    *slot.lock().unwrap() = Some(producer.clone());
    producer.send_one(message("lost")).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let outside = producer.clone();
    thread::spawn(move || {
        let _ = done.send(outside.flush());
    });
    let flushed = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the outside flush hung");
    assert!(
        flushed.is_ok(),
        "the callback took the failure: {flushed:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert!(
        matches!(seen.as_slice(), [Err(ProducerError::OwnThread)]),
        "{seen:?}"
    );
    slot.lock().unwrap().take();
    producer.shutdown().unwrap();
    client.shutdown();
}

/// A panicking `on_error` stops the producer, as the callback's contract says and as the
/// async producer does: the next flush reports `Stopped`, and later sends fail `Closed`.
/// Many times over, because the flush and the thread's end race: a flush that heard
/// `Stopped` while the producer still took sends once let a send through.
#[test]
fn a_panicking_on_error_stops_the_producer() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    for round in 0..PANIC_ROUNDS {
        let on_error = Arc::new(|_failure: SendFailure| panic!("the application's callback"));
        let producer = client
            .producer(STREAM, "no-such-topic")
            .unwrap()
            .background(BackgroundConfig {
                on_error: Some(on_error),
                ..BackgroundConfig::default()
            })
            .build()
            .unwrap();
        producer.send_one(message("lost")).unwrap();
        assert!(
            matches!(producer.flush(), Err(ProducerError::Stopped)),
            "round {round}: a panicking callback stops the producer"
        );
        let after = producer.send_one(message("after"));
        assert!(
            matches!(after, Err(ClientError::Closed)),
            "round {round}: {after:?}"
        );
    }
    client.shutdown();
}

/// How many producers the panicking-callback test stops, one after another.
const PANIC_ROUNDS: usize = 200;
