//! The load through iggy-route's background producer on tokio: one `Producer` per producer
//! task, on one shared `Client`. `send` returns once the messages are buffered; each call's
//! `Delivery` goes to the task's collector, which waits for all of them at once and counts
//! each call the moment it is acknowledged, so the latency of a call is from `send` to its
//! own acknowledgement. A producer keeps at most `--producer-window` messages' worth of
//! calls unacknowledged: past it, it waits for one, as an application that bounds what it
//! holds does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use iggy_route_tokio::producer::{Background, Delivery};
use iggy_route_tokio::{BackgroundConfig, Client, Identifier, Message, Partitioning, Producer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::Load;
use super::load::{Acked, Measurement, ProducerTally, Progress, RunClock, payload};

/// Runs `load` with one task per producer until its deadline, then flushes each producer
/// and waits for every acknowledgement (cut off at the drain limit).
pub async fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: Arc<Progress>,
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
    clock.start_reached().await;
    let payload = payload(load);
    let tasks: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(index, producer)| {
            let (payload, progress, load) = (payload.clone(), Arc::clone(&progress), *load);
            tokio::spawn(async move { run(index, producer, load, payload, clock, progress).await })
        })
        .collect();
    let mut tallies = Vec::with_capacity(tasks.len());
    for task in tasks {
        // A producer task only panics on a bug in the demo; losing its tally would hide it.
        tallies.push(
            task.await
                .unwrap_or_else(|error| panic!("producer task failed: {error}")),
        );
    }
    Ok(Measurement::merge(&clock, tallies))
}

/// One call handed from the producer's loop to its collector.
struct Pending {
    started: Instant,
    messages: u64,
    delivery: Delivery,
    /// The call's place in the window: given back when its outcome is known.
    slot: OwnedSemaphorePermit,
}

/// A call's outcome and the instant it was known (`None`: cut off at the drain limit).
type Settled = (Instant, u64, Option<Result<Acked, String>>, Instant);

async fn run(
    index: usize,
    producer: Producer<Background>,
    load: Load,
    payload: Bytes,
    clock: RunClock,
    progress: Arc<Progress>,
) -> ProducerTally {
    let calls = (load.producer_window() / load.messages_per_send()).max(1);
    let window = Arc::new(Semaphore::new(calls));
    let (pending, handed) = mpsc::unbounded_channel::<Pending>();
    let collector = tokio::spawn(collect(handed, clock, Arc::clone(&progress)));
    let mut failed = None;
    for send in 0u64.. {
        let due = clock.due(index, send);
        if !clock.may_start(due) {
            break;
        }
        // An application bounds what it holds, and so what each acknowledgement waits
        // behind: past the window it waits for any one of its calls to be acknowledged.
        let deadline = tokio::time::Instant::from_std(clock.deadline);
        let Ok(Ok(slot)) =
            tokio::time::timeout_at(deadline, Arc::clone(&window).acquire_owned()).await
        else {
            break;
        };
        // The wait for room may have outlasted the run: no send starts after it.
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
        let started = RunClock::wait_until_due(due).await;
        match producer.send(messages).await {
            Ok(delivery) => {
                let call = Pending {
                    started,
                    messages: count,
                    delivery,
                    slot,
                };
                if pending.send(call).is_err() {
                    break;
                }
            }
            Err(error) => {
                failed = Some((started, error.to_string()));
                break;
            }
        }
    }
    drop(pending);
    // Whatever is buffered goes now; the collector counts each call as it is acknowledged.
    let _ = tokio::time::timeout(Duration::from_secs(60), producer.flush()).await;
    let mut tally = collector
        .await
        .unwrap_or_else(|error| panic!("collector task failed: {error}"));
    if let Some((started, error)) = failed {
        tally.record(&clock, started, Err(error), &progress);
    }
    let _ = producer.shutdown().await;
    tally
}

/// Counts each call at the instant its outcome is known, whatever the order: calls to a
/// slow partition do not hold back the count of later calls to a fast one.
async fn collect(
    mut handed: mpsc::UnboundedReceiver<Pending>,
    clock: RunClock,
    progress: Arc<Progress>,
) -> ProducerTally {
    let cut_off = tokio::time::Instant::from_std(clock.cut_off);
    let mut tally = ProducerTally::default();
    let mut waiting = FuturesUnordered::new();
    let mut open = true;
    while open || !waiting.is_empty() {
        tokio::select! {
            biased;
            Some((started, messages, outcome, known)) = waiting.next(), if !waiting.is_empty() => {
                let settled: Settled = (started, messages, outcome, known);
                record(&mut tally, &clock, settled, &progress);
            }
            call = handed.recv(), if open => match call {
                Some(call) => waiting.push(settle(call, cut_off)),
                None => open = false,
            },
        }
    }
    tally
}

/// Waits for one call's outcome until `cut_off`, and gives its window slot back.
async fn settle(call: Pending, cut_off: tokio::time::Instant) -> Settled {
    let Pending {
        started,
        messages,
        delivery,
        slot,
    } = call;
    let outcome = tokio::time::timeout_at(cut_off, delivery)
        .await
        .ok()
        .map(|outcome| {
            outcome
                .map(|receipt| acked(messages, &receipt))
                .map_err(|failure| failure.error.to_string())
        });
    drop(slot);
    (started, messages, outcome, Instant::now())
}

fn record(tally: &mut ProducerTally, clock: &RunClock, settled: Settled, progress: &Progress) {
    match settled {
        (started, _, Some(outcome), known) => {
            tally.record_at(clock, started, known, outcome, progress)
        }
        (_, _, None, _) => tally.record_cut_off(clock),
    }
}

/// A call's acknowledgement as the tally counts it.
fn acked(messages: u64, receipt: &iggy_route_core::SendReceipt) -> Acked {
    Acked {
        messages,
        partition: Some(receipt.partition_id),
    }
}
