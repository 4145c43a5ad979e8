//! The mio background producer's `send_tagged` and `DeliveryQueue` against the loopback
//! cluster: one queue hears of every call of several producers once, with the call's own
//! receipt; a slow partition's call does not hide the calls to the others; failures come
//! with their messages; a call refused at the door goes to no queue; and a wait on the
//! queue never outlasts its calls.

#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "mio_support/mod.rs"]
mod mio_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::{RequestError, SendReceipt};
use iggy_route_mio::producer::{Background, Delivered, DeliveryQueue};
use iggy_route_mio::{
    BackgroundConfig, Backpressure, Client, Message, Partitioning, Producer, ProducerError,
};
use mio_support::{Harness, STREAM, TOPIC, numbered, sequences_of};

/// Long enough that no batch goes for want of its linger while a test looks.
const NEVER_LINGERS: Duration = Duration::from_secs(60);

/// A bound on waits that should end at once; a test fails rather than hang past it.
const BOUND: Duration = Duration::from_secs(30);

fn producer(
    client: &Client,
    topic: impl TryInto<iggy_route_mio::Identifier, Error: Into<ClientError>>,
    partitioning: Partitioning,
    configure: impl FnOnce(&mut BackgroundConfig),
) -> Producer<Background> {
    let mut config = BackgroundConfig::default();
    configure(&mut config);
    client
        .producer(STREAM, topic)
        .unwrap()
        .partitioning(partitioning)
        .batch_length(10)
        .linger_time(Duration::from_millis(2))
        .background(config)
        .build()
        .unwrap()
}

/// Every outcome the queue still expects, each within [`BOUND`].
fn drain(queue: &mut DeliveryQueue) -> Vec<Delivered> {
    let mut delivered = Vec::new();
    while queue.pending() > 0 {
        let next = queue
            .recv_timeout(BOUND)
            .expect("a pending call settled within the bound");
        delivered.push(next);
    }
    delivered
}

/// Nothing was left in the queue beyond the calls it counted (a late duplicate would be
/// heard of before it): one more call, and it is the next one heard of.
fn assert_no_surplus(producer: &Producer<Background>, queue: &mut DeliveryQueue) {
    let to = queue.sender();
    producer
        .send_tagged(vec![numbered("probe", 0)], u64::MAX, &to)
        .unwrap();
    producer.flush().ok();
    let next = queue.recv_timeout(BOUND).expect("the probe settled");
    assert_eq!(next.tag, u64::MAX, "a surplus outcome came first: {next:?}");
    assert_eq!(queue.pending(), 0);
}

#[test]
fn one_queue_hears_of_every_call_of_several_producers_once_with_its_own_receipt() {
    let harness = Harness::start(2, 4);
    for partition in 0..4 {
        harness
            .cluster
            .set_primary(STREAM, TOPIC, partition, partition as usize % 2);
    }
    let client = harness.client(harness.config());
    let producers: Vec<_> = (0..2)
        .map(|_| producer(&client, TOPIC, Partitioning::Balanced, |_| {}))
        .collect();
    let mut queue = DeliveryQueue::new();
    let to = queue.sender();
    // Call `c` of producer `p` is tagged `1000 * p + c` and holds `1 + c % 3` messages,
    // `p<p>/<n>` numbered across the producer's calls.
    // Each producer's calls are made on a thread of its own, with a sender of the one
    // queue this thread reads.
    let sent: BTreeMap<u64, Vec<usize>> = std::thread::scope(|scope| {
        let threads: Vec<_> = producers
            .iter()
            .enumerate()
            .map(|(index, producer)| {
                let to = to.clone();
                scope.spawn(move || {
                    let mut sent = BTreeMap::new();
                    let mut next = 0;
                    for call in 0..60u64 {
                        let length = 1 + (call % 3) as usize;
                        let numbers: Vec<usize> = (next..next + length).collect();
                        next += length;
                        let messages: Vec<Message> = numbers
                            .iter()
                            .map(|&n| numbered(&format!("p{index}"), n))
                            .collect();
                        let tag = 1000 * index as u64 + call;
                        producer.send_tagged(messages, tag, &to).unwrap();
                        sent.insert(tag, numbers);
                    }
                    sent
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().unwrap())
            .collect()
    });
    assert_eq!(queue.pending(), 120);
    let delivered = drain(&mut queue);
    let mut receipts: BTreeMap<u64, SendReceipt> = BTreeMap::new();
    for Delivered { tag, outcome } in delivered {
        let receipt = outcome.unwrap();
        assert!(receipts.insert(tag, receipt).is_none(), "tag {tag} twice");
    }
    assert_eq!(
        receipts.keys().collect::<Vec<_>>(),
        sent.keys().collect::<Vec<_>>(),
        "every call heard of once"
    );
    // Each receipt names where that call's own messages are stored.
    for (tag, receipt) in &receipts {
        let numbers = &sent[tag];
        assert_eq!(receipt.messages as usize, numbers.len(), "tag {tag}");
        let stored = harness.payloads(receipt.partition_id);
        let base = receipt.base_offset.unwrap() as usize;
        let at: Vec<String> = stored[base..base + numbers.len()].to_vec();
        let producer = tag / 1000;
        assert_eq!(
            sequences_of(&at, &format!("p{producer}")),
            *numbers,
            "tag {tag}: its messages at its offsets"
        );
    }
    assert_no_surplus(&producers[0], &mut queue);
    for producer in producers {
        producer.shutdown().unwrap();
    }
    client.shutdown();
}

#[test]
fn a_slow_partitions_call_does_not_hide_the_calls_to_the_others() {
    let harness = Harness::start(2, 2);
    harness.cluster.set_primary(STREAM, TOPIC, 1, 1);
    let client = harness.client(harness.config());
    let fast = producer(&client, TOPIC, Partitioning::PartitionId(0), |_| {});
    let slow = producer(&client, TOPIC, Partitioning::PartitionId(1), |_| {});
    // Partition 1's node answers everything 3 s late (the request itself is handled).
    harness.cluster.set_reply_delay(1, Duration::from_secs(3));
    let mut queue = DeliveryQueue::new();
    let to = queue.sender();
    let started = Instant::now();
    slow.send_tagged(vec![numbered("slow", 0)], 0, &to).unwrap();
    for call in 1..=20 {
        fast.send_tagged(vec![numbered("fast", call)], call as u64, &to)
            .unwrap();
    }
    let delivered = drain(&mut queue);
    let order: Vec<u64> = delivered.iter().map(|d| d.tag).collect();
    assert_eq!(
        order.last(),
        Some(&0),
        "the slow call is heard of last, the others as they came: {order:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "the slow call waited for its node"
    );
    assert!(delivered.iter().all(|d| d.outcome.is_ok()));
    harness.cluster.set_reply_delay(1, Duration::ZERO);
    assert_no_surplus(&fast, &mut queue);
    fast.shutdown().unwrap();
    slow.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn failures_reach_the_queue_with_their_messages_and_the_next_flush() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = producer(&client, "no-such-topic", Partitioning::Balanced, |_| {});
    let mut queue = DeliveryQueue::new();
    let to = queue.sender();
    for call in 0..7 {
        producer
            .send_tagged(vec![numbered("lost", call)], call as u64, &to)
            .unwrap();
    }
    let flushed = producer.flush();
    assert!(
        matches!(flushed, Err(ProducerError::SendsFailed { messages: 7, .. })),
        "{flushed:?}"
    );
    // The flush waited for every call: each is in the queue already.
    let mut tags = Vec::new();
    while let Some(Delivered { tag, outcome }) = queue.try_recv() {
        let failure = outcome.unwrap_err();
        assert!(
            matches!(
                failure.error,
                ClientError::Request(RequestError::TopicNotFound { .. })
            ),
            "{:?}",
            failure.error
        );
        let payloads: Vec<_> = failure.messages.iter().map(|m| m.payload.clone()).collect();
        assert_eq!(payloads, [numbered("lost", tag as usize).payload]);
        tags.push(tag);
    }
    tags.sort_unstable();
    assert_eq!(tags, (0..7).collect::<Vec<u64>>());
    assert_eq!(queue.pending(), 0);
    producer.shutdown().unwrap();
    client.shutdown();
}

#[test]
fn a_call_refused_at_the_door_goes_to_no_queue() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config());
    let producer = client
        .producer(STREAM, TOPIC)
        .unwrap()
        .batch_length(10)
        .linger_time(NEVER_LINGERS)
        .background(BackgroundConfig {
            max_buffered_messages: 4,
            backpressure: Backpressure::FailImmediately,
            ..BackgroundConfig::default()
        })
        .build()
        .unwrap();
    let mut queue = DeliveryQueue::new();
    let to = queue.sender();
    for call in 0..4 {
        producer
            .send_tagged(vec![numbered("held", call)], call as u64, &to)
            .unwrap();
    }
    let refused = producer.send_tagged(vec![numbered("held", 4)], 4, &to);
    assert!(
        matches!(refused, Err(ClientError::QueueFull { limit: 4 })),
        "{refused:?}"
    );
    let empty = producer.send_tagged(Vec::new(), 5, &to);
    assert!(empty.is_err(), "an empty call is refused");
    assert_eq!(queue.pending(), 4, "only the buffered calls are expected");
    producer.shutdown().unwrap();
    let after = producer.send_tagged(vec![numbered("held", 6)], 6, &to);
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
    let mut tags: Vec<u64> = drain(&mut queue).into_iter().map(|d| d.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, [0, 1, 2, 3], "shutdown flushed the buffered calls");
    assert_eq!(sequences_of(&harness.payloads(0), "held"), [0, 1, 2, 3]);
    client.shutdown();
}

#[test]
fn calls_cut_off_by_a_stopped_cluster_still_reach_the_queue() {
    let harness = Harness::start(1, 1);
    let mut config = harness.config();
    // Failures within seconds once the cluster is gone.
    config.request_timeout = Duration::from_secs(2);
    config.attempt_timeout = Duration::from_secs(1);
    let client = harness.client(config);
    let producer = producer(&client, TOPIC, Partitioning::Balanced, |_| {});
    let mut queue = DeliveryQueue::new();
    let to = queue.sender();
    harness.stop_every_node();
    for call in 0..15 {
        producer
            .send_tagged(vec![numbered("late", call)], call as u64, &to)
            .unwrap();
    }
    // Dropping the producer's last handle flushes and stops it; every call is settled.
    drop(producer);
    let delivered = drain(&mut queue);
    assert_eq!(delivered.len(), 15);
    assert!(delivered.iter().all(|d| d.outcome.is_err()));
    client.shutdown();
}
