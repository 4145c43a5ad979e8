//! The load through iggy-route's background producer on mio: one `Producer` per producer
//! thread, on one shared `Client`. `send_tagged` returns once the messages are buffered;
//! every call's outcome goes to the thread's one `DeliveryQueue`, which the thread reads
//! between sends and while it waits (for its turn, or for room in its window), so each
//! call is counted when its own acknowledgement comes, whatever its partition: the
//! latency of a call is from its send to its acknowledgement. A producer keeps at most
//! `--producer-window` messages' worth of calls unacknowledged, as the tokio loop does.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iggy_route_mio::producer::{Background, Delivered, DeliveryQueue, DeliverySender};
use iggy_route_mio::{BackgroundConfig, Client, Identifier, Message, Partitioning, Producer};

use super::Load;
use super::load::{Acked, Measurement, ProducerTally, Progress, RunClock, payload};

/// Runs `load` on one OS thread per producer until its deadline, then flushes each
/// producer and waits for every acknowledgement (cut off at the drain limit).
pub fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: &Progress,
) -> Result<Measurement, String> {
    let producers = (0..load.producers)
        .map(|_| {
            client
                .producer(stream.clone(), topic.clone())
                .map_err(|error| format!("producer: {error}"))?
                .partitioning(Partitioning::Balanced)
                .background(BackgroundConfig::default())
                .build()
                .map_err(|error| format!("producer: {error}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let clock = RunClock::start(load);
    clock.wait_for_start();
    let payload = payload(load);
    let tallies = std::thread::scope(|scope| {
        let threads: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(index, producer)| {
                let payload = payload.clone();
                scope.spawn(move || run(index, &producer, load, &payload, &clock, progress))
            })
            .collect();
        threads
            .into_iter()
            // A producer thread only panics on a bug in the demo; losing its tally would
            // hide it.
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|_| panic!("producer thread panicked"))
            })
            .collect()
    });
    Ok(Measurement::merge(&clock, tallies))
}

fn run(
    index: usize,
    producer: &Producer<Background>,
    load: &Load,
    payload: &bytes::Bytes,
    clock: &RunClock,
    progress: &Progress,
) -> ProducerTally {
    let queue = DeliveryQueue::new();
    let mut held = Held {
        to: queue.sender(),
        queue,
        calls: HashMap::new(),
        tally: ProducerTally::default(),
    };
    let window = (load.producer_window() / load.messages_per_send()).max(1);
    for send in 0u64.. {
        let due = clock.due(index, send);
        if !clock.may_start(due) {
            break;
        }
        // A paced producer counts what is acknowledged while it waits for its turn.
        if let Some(due) = due {
            held.count_until(due, clock, progress);
        }
        // An application bounds what it holds, and so what each acknowledgement waits
        // behind: past the window it waits for any one of its calls to be acknowledged,
        // but starts no send after the run.
        while held.queue.pending() >= window && Instant::now() < clock.deadline {
            let until = clock.deadline.min(Instant::now() + WAKE);
            held.count_one_until(until, clock, progress);
        }
        if !clock.may_start(due) || held.queue.pending() >= window {
            break;
        }
        let messages: Vec<Message> = (0..load.messages_per_send())
            .map(|_| Message {
                payload: payload.clone(),
                ..Message::default()
            })
            .collect();
        let count = messages.len() as u64;
        let started = RunClock::block_until_due(due);
        match producer.send_tagged(messages, send, &held.to) {
            Ok(()) => {
                held.calls.insert(send, (started, count));
            }
            Err(error) => {
                held.tally
                    .record(clock, started, Err(error.to_string()), progress);
                break;
            }
        }
        held.count_ready(clock, progress);
    }
    // Whatever is buffered goes now; each call is counted when its acknowledgement comes,
    // or cut off at the drain limit.
    let _ = producer.flush();
    held.count_until(clock.cut_off, clock, progress);
    for _ in 0..held.calls.len() {
        held.tally.record_cut_off(clock);
    }
    let _ = producer.shutdown();
    held.tally
}

/// How long a producer waiting for room sleeps at most between looks at the clock.
const WAKE: Duration = Duration::from_millis(100);

/// A producer thread's calls not yet counted, and its tally.
struct Held {
    /// Every call's outcome, whatever its partition, as soon as it is settled.
    queue: DeliveryQueue,
    to: DeliverySender,
    /// Each call not yet counted, by its tag (the send's number): when it started and how
    /// many messages it holds.
    calls: HashMap<u64, (Instant, u64)>,
    tally: ProducerTally,
}

impl Held {
    /// Counts every call settled by now.
    fn count_ready(&mut self, clock: &RunClock, progress: &Progress) {
        while let Some(delivered) = self.queue.try_recv() {
            self.count(delivered, clock, progress);
        }
    }

    /// Counts every call settled before `until` (or until none is pending), each the
    /// moment it is.
    fn count_until(&mut self, until: Instant, clock: &RunClock, progress: &Progress) {
        while self.queue.pending() > 0 && self.count_one_until(until, clock, progress) {}
    }

    /// Counts the next call settled before `until`, and any settled with it; false when
    /// none was.
    fn count_one_until(&mut self, until: Instant, clock: &RunClock, progress: &Progress) -> bool {
        let left = until.saturating_duration_since(Instant::now());
        let Some(delivered) = self.queue.recv_timeout(left) else {
            return false;
        };
        self.count(delivered, clock, progress);
        self.count_ready(clock, progress);
        true
    }

    fn count(&mut self, delivered: Delivered, clock: &RunClock, progress: &Progress) {
        // Every tag is a call this thread made, settled once: a demo bug otherwise.
        let Some((started, messages)) = self.calls.remove(&delivered.tag) else {
            panic!("call {} settled twice or was never made", delivered.tag);
        };
        let outcome = delivered
            .outcome
            .map(|receipt| acked(messages, &receipt))
            .map_err(|failure| failure.error.to_string());
        self.tally.record(clock, started, outcome, progress);
    }
}

/// A call's acknowledgement as the tally counts it.
fn acked(messages: u64, receipt: &iggy_route_core::SendReceipt) -> Acked {
    Acked {
        messages,
        partition: Some(receipt.partition_id),
    }
}
