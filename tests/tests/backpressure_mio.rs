//! Backpressure in the mio client: a call the router has no room
//! for waits for room, in arrival order, for up to `request_timeout`; a `try_` call is
//! refused at once instead. Against the loopback cluster, with small bounds and replies
//! held back so that the router stays full.

#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "mio_support/mod.rs"]
mod mio_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use iggy_route_core::RequestError;
use iggy_route_core::client::ClientError;
use iggy_route_mio::Partitioning;
use mio_support::{Harness, STREAM, TOPIC, message, numbered, sequences_of};

/// How long a test waits for the cluster to show what it set up, before failing.
const SETUP_BOUND: Duration = Duration::from_secs(20);

/// Waits until `partition` holds `count` messages (a send the cluster handled, whose reply
/// it may still hold back).
fn wait_for_stored(harness: &Harness, partition: u32, count: u64) {
    let until = Instant::now() + SETUP_BOUND;
    while harness.cluster.partition_len(STREAM, TOPIC, partition) < count {
        assert!(
            Instant::now() < until,
            "the cluster never stored send {count}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_send_waits_for_room_while_a_try_send_is_refused() {
    const PARTITIONS: u32 = 3;
    // 4 in the router and up to 4 parked: 7 senders and the prober never exceed that, so
    // no send may be refused, while the prober finds the router full or others waiting.
    const SENDERS: usize = 7;
    const SENDS_EACH: usize = 40;
    let harness = Harness::start(3, PARTITIONS);
    let client = harness.client(harness.config_with_room(4));
    for partition in 0..PARTITIONS {
        let warm_up = vec![message("warm-up")];
        client
            .send(
                STREAM,
                TOPIC,
                Partitioning::partition_id(partition),
                warm_up,
            )
            .unwrap();
    }
    // Replies held back keep requests pending, so the router stays at its bound.
    harness.delay_replies(Duration::from_millis(2));

    let senders_done = Arc::new(AtomicBool::new(false));
    let prober = {
        let client = client.clone();
        let senders_done = Arc::clone(&senders_done);
        thread::spawn(move || {
            let (mut refused, mut taken) = (0u32, 0u32);
            while !senders_done.load(Ordering::SeqCst) {
                let probe = vec![message("probe")];
                match client.try_send(STREAM, TOPIC, Partitioning::partition_id(0), probe) {
                    Ok(_) => taken += 1,
                    Err(ClientError::QueueFull { limit: 4 }) => refused += 1,
                    Err(other) => panic!("try_send failed otherwise: {other:?}"),
                }
                thread::yield_now();
            }
            (refused, taken)
        })
    };
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let client = client.clone();
            thread::spawn(move || {
                let partition = sender as u32 % PARTITIONS;
                for sequence in 0..SENDS_EACH {
                    let messages = vec![numbered(&format!("s{sender}"), sequence)];
                    let sent = client.send(
                        STREAM,
                        TOPIC,
                        Partitioning::partition_id(partition),
                        messages,
                    );
                    if let Err(error) = sent {
                        panic!("send {sequence} of sender {sender} failed: {error:?}");
                    }
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    senders_done.store(true, Ordering::SeqCst);
    let (refused, taken) = prober.join().unwrap();
    assert!(
        refused > 0,
        "try_send was never refused ({taken} taken) while {SENDERS} senders kept the router full"
    );

    // Every acknowledged send is stored, once, in its sender's order.
    for sender in 0..SENDERS {
        let partition = sender as u32 % PARTITIONS;
        let stored = sequences_of(&harness.payloads(partition), &format!("s{sender}"));
        assert_eq!(
            stored,
            (0..SENDS_EACH).collect::<Vec<_>>(),
            "sender {sender}"
        );
    }
    assert_eq!(
        client.stats().sends,
        u64::from(PARTITIONS) + (SENDERS * SENDS_EACH) as u64 + u64::from(taken)
    );
    client.shutdown();
}

#[test]
fn a_try_send_with_room_is_sent() {
    let harness = Harness::start(1, 1);
    let client = harness.client(harness.config_with_room(4));
    let receipt = client
        .try_send(
            STREAM,
            TOPIC,
            Partitioning::partition_id(0),
            vec![message("alone")],
        )
        .unwrap();
    assert_eq!(receipt.base_offset, Some(0));
    assert_eq!(harness.payloads(0), ["alone"]);
    client.shutdown();
}

#[test]
fn a_send_still_waiting_for_room_at_its_deadline_gets_queue_full() {
    let harness = Harness::start(1, 1);
    let mut config = harness.config_with_room(1);
    // A short life, and replies held far longer: nothing sent now is answered in time.
    config.request_timeout = Duration::from_secs(1);
    let client = harness.client(config);
    client
        .send(
            STREAM,
            TOPIC,
            Partitioning::partition_id(0),
            vec![message("warm-up")],
        )
        .unwrap();
    harness.delay_replies(Duration::from_secs(4));

    let send = |tag: &'static str| {
        let client = client.clone();
        thread::spawn(move || {
            client.send(
                STREAM,
                TOPIC,
                Partitioning::partition_id(0),
                vec![message(tag)],
            )
        })
    };
    // The first takes the router's only room (the cluster stores it; the answer is late).
    let first = send("first");
    wait_for_stored(&harness, 0, 2);
    // The second waits for room. The first times out, but a write that times out in
    // flight keeps its room until its link answers or gives up (whether it was stored is
    // unknown until then), which is after the second's wait is over.
    let second = send("second");
    let first = first.join().unwrap();
    assert!(
        matches!(
            first,
            Err(ClientError::Request(RequestError::TimedOut { .. }))
        ),
        "{first:?}"
    );
    let second = second.join().unwrap();
    assert!(
        matches!(second, Err(ClientError::QueueFull { limit: 1 })),
        "{second:?}"
    );
    assert_eq!(
        harness.cluster.partition_len(STREAM, TOPIC, 0),
        2,
        "the second send never left the client"
    );
    client.shutdown();
}

#[test]
fn a_send_beyond_the_waiting_room_is_refused_at_once() {
    let harness = Harness::start(1, 2);
    let client = harness.client(harness.config_with_room(1));
    client
        .send(
            STREAM,
            TOPIC,
            Partitioning::partition_id(0),
            vec![message("warm-up")],
        )
        .unwrap();
    // No answer comes within the test.
    harness.delay_replies(Duration::from_secs(30));
    let first = {
        let client = client.clone();
        thread::spawn(move || {
            client.send(
                STREAM,
                TOPIC,
                Partitioning::partition_id(0),
                vec![message("first")],
            )
        })
    };
    wait_for_stored(&harness, 0, 2);
    // One call holds the router's room and one may wait for it: of two more calls, the
    // one that arrives second is refused at once, while the other keeps waiting.
    let (outcomes, outcome) = mpsc::channel();
    for _ in 0..2 {
        let (client, outcomes) = (client.clone(), outcomes.clone());
        thread::spawn(move || {
            let messages = vec![message("more")];
            let sent = client.send(STREAM, TOPIC, Partitioning::partition_id(1), messages);
            outcomes.send(sent).unwrap();
        });
    }
    let refused = outcome.recv_timeout(SETUP_BOUND).unwrap();
    assert!(
        matches!(refused, Err(ClientError::QueueFull { limit: 1 })),
        "{refused:?}"
    );
    client.shutdown();
    let waited = outcome.recv_timeout(SETUP_BOUND).unwrap();
    assert!(matches!(waited, Err(ClientError::Closed)), "{waited:?}");
    // Stored, its answer held back: it may have been admitted, so not `Shutdown`.
    let first = first.join().unwrap();
    assert!(
        matches!(
            first,
            Err(ClientError::Request(RequestError::OutcomeUnknown { .. }))
        ),
        "{first:?}"
    );
}

#[test]
fn sends_keep_their_order_per_partition_when_nodes_answer_slowly() {
    const PARTITIONS: u32 = 3;
    const SENDERS: usize = 6;
    const SENDS_EACH: usize = 30;
    let harness = Harness::start(3, PARTITIONS);
    // Each partition's primary on its own node, each node slower than the last.
    for partition in 0..PARTITIONS {
        assert!(
            harness
                .cluster
                .set_primary(STREAM, TOPIC, partition, partition as usize)
        );
    }
    // 3 in the router and up to 3 parked: as many as there are senders.
    let client = harness.client(harness.config_with_room(3));
    for (node, delay_ms) in [(0, 0), (1, 2), (2, 6)] {
        harness
            .cluster
            .set_reply_delay(node, Duration::from_millis(delay_ms));
    }
    // Two senders per partition, each sending batches of three numbered messages.
    let start = Arc::new(Barrier::new(SENDERS));
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let client = client.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let partition = sender as u32 % PARTITIONS;
                let tag = format!("s{sender}");
                for batch in 0..SENDS_EACH {
                    let messages = (0..3).map(|i| numbered(&tag, batch * 3 + i)).collect();
                    client
                        .send(
                            STREAM,
                            TOPIC,
                            Partitioning::partition_id(partition),
                            messages,
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    for sender in 0..SENDERS {
        let partition = sender as u32 % PARTITIONS;
        let stored = sequences_of(&harness.payloads(partition), &format!("s{sender}"));
        assert_eq!(
            stored,
            (0..SENDS_EACH * 3).collect::<Vec<_>>(),
            "sender {sender}"
        );
    }
    client.shutdown();
}

#[test]
fn shutdown_ends_the_calls_waiting_for_room() {
    let harness = Harness::start(2, 2);
    // Each partition on its own node: the two held sends need a data link each, and the
    // warm-up opens one to each node (a new one could not sign in while replies are held).
    assert!(harness.cluster.set_primary(STREAM, TOPIC, 1, 1));
    let client = harness.client(harness.config_with_room(2));
    for partition in 0..2 {
        let warm_up = vec![message("warm-up")];
        client
            .send(
                STREAM,
                TOPIC,
                Partitioning::partition_id(partition),
                warm_up,
            )
            .unwrap();
    }
    // No answer comes within the test: two sends hold the router's room until shutdown.
    harness.delay_replies(Duration::from_secs(30));
    let send = |partition: u32| {
        let client = client.clone();
        thread::spawn(move || {
            let messages = vec![message("held")];
            client.send(
                STREAM,
                TOPIC,
                Partitioning::partition_id(partition),
                messages,
            )
        })
    };
    let holding = [send(0), send(1)];
    wait_for_stored(&harness, 0, 2);
    wait_for_stored(&harness, 1, 2);
    let waiting = [send(0), send(1)];
    // Give the two calls a moment to reach the I/O thread and park. Whether they did or
    // not, shutdown must end them: parked ones with `Closed`, unread ones likewise.
    thread::sleep(Duration::from_millis(100));
    client.shutdown();
    // Stored, their answers held back: they may have been admitted, so not `Shutdown`.
    for holding in holding {
        let outcome = holding.join().unwrap();
        assert!(
            matches!(
                outcome,
                Err(ClientError::Request(RequestError::OutcomeUnknown { .. }))
            ),
            "{outcome:?}"
        );
    }
    for waiting in waiting {
        let outcome = waiting.join().unwrap();
        assert!(matches!(outcome, Err(ClientError::Closed)), "{outcome:?}");
    }
    // Only the sends that had room reached the cluster.
    for partition in 0..2 {
        assert_eq!(harness.cluster.partition_len(STREAM, TOPIC, partition), 2);
    }
    // A call after shutdown fails at once, with or without waiting.
    let after = client.send(
        STREAM,
        TOPIC,
        Partitioning::partition_id(0),
        vec![message("late")],
    );
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
    let after = client.try_send(
        STREAM,
        TOPIC,
        Partitioning::partition_id(0),
        vec![message("late")],
    );
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
}
