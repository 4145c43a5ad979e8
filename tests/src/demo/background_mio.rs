//! The load through iggy-route's background producer on mio: one `Producer` per producer
//! thread, on one shared `Client`. `send` returns once the messages are buffered; the
//! thread keeps each call's `Delivery` and counts the call when it is acknowledged, so the
//! latency of a call is from `send` to its acknowledgement, observed in call order (an
//! upper bound when a later call's partition answered first). Looking at every held call
//! each millisecond instead, as the tokio loop in effect does, cut this loop's
//! single-message rate from about 505,000 to 290,000-375,000 msg/s (measured: each look
//! checks up to 500 calls' channels), so it stays in order.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use iggy_route_mio::producer::{Background, Delivery};
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
    let mut tally = ProducerTally::default();
    let mut window: VecDeque<(Instant, u64, Delivery)> = VecDeque::new();
    for send in 0u64.. {
        let due = clock.due(index, send);
        if !clock.may_start(due) {
            break;
        }
        let messages: Vec<Message> = (0..load.messages_per_send())
            .map(|_| Message {
                payload: payload.clone(),
                ..Message::default()
            })
            .collect();
        let count = messages.len() as u64;
        // A paced producer counts what is acknowledged while it waits for the next send's
        // turn, so a call is not seen only after the next one went.
        if let Some(due) = due {
            count_oldest(&mut window, Some(due), &mut tally, clock, progress);
        }
        let started = RunClock::block_until_due(due);
        match producer.send(messages) {
            Ok(delivery) => window.push_back((started, count, delivery)),
            Err(error) => {
                tally.record(clock, started, Err(error.to_string()), progress);
                break;
            }
        }
        count_oldest(&mut window, None, &mut tally, clock, progress);
        // An application bounds what it holds, and so what each acknowledgement waits
        // behind: past the window it waits for its oldest call.
        if window.len() * load.messages_per_send() >= load.producer_window()
            && let Some((started, count, delivery)) = window.pop_front()
        {
            let outcome = delivery
                .wait()
                .map(|receipt| acked(count, &receipt))
                .map_err(|f| f.error.to_string());
            tally.record(clock, started, outcome, progress);
        }
    }
    // Whatever is buffered goes now; each call is counted when its acknowledgement comes,
    // or cut off at the drain limit.
    let _ = producer.flush();
    for (started, count, mut delivery) in window {
        let left = clock.cut_off.saturating_duration_since(Instant::now());
        match delivery.wait_timeout(left.max(Duration::from_millis(1))) {
            Some(outcome) => {
                let outcome = outcome
                    .map(|receipt| acked(count, &receipt))
                    .map_err(|f| f.error.to_string());
                tally.record(clock, started, outcome, progress);
            }
            None => tally.record_cut_off(clock),
        }
    }
    let _ = producer.shutdown();
    tally
}

/// Counts the oldest calls, in call order, whose outcome is known now or, with `until`,
/// comes before it.
fn count_oldest(
    window: &mut VecDeque<(Instant, u64, Delivery)>,
    until: Option<Instant>,
    tally: &mut ProducerTally,
    clock: &RunClock,
    progress: &Progress,
) {
    while let Some((started, count, delivery)) = window.front_mut() {
        let left = until.and_then(|until| until.checked_duration_since(Instant::now()));
        let outcome = match left {
            Some(left) => delivery.wait_timeout(left),
            None => delivery.try_wait(),
        };
        let Some(outcome) = outcome else {
            break;
        };
        let outcome = outcome
            .map(|receipt| acked(*count, &receipt))
            .map_err(|f| f.error.to_string());
        tally.record(clock, *started, outcome, progress);
        window.pop_front();
    }
}

/// A call's acknowledgement as the tally counts it.
fn acked(messages: u64, receipt: &iggy_route_core::SendReceipt) -> Acked {
    Acked {
        messages,
        partition: Some(receipt.partition_id),
    }
}
