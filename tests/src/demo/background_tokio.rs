//! The load through iggy-route's background producer on tokio: one `Producer` per producer
//! task, on one shared `Client`. `send` returns once the messages are buffered; each call's
//! `Delivery` goes to the task's collector, which counts the call when it is acknowledged,
//! in call order (as `background_mio` does), so the latency of a call is from `send` to its
//! acknowledgement. The collector's queue holds `--producer-window` messages' worth of
//! calls: past it, `send` waits, as an application that bounds what it holds does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_tokio::producer::{Background, Delivery};
use iggy_route_tokio::{BackgroundConfig, Client, Identifier, Message, Partitioning, Producer};
use tokio::sync::mpsc;

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
        .map(|producer| {
            let (payload, progress, load) = (payload.clone(), Arc::clone(&progress), *load);
            tokio::spawn(async move { run(producer, load, payload, clock, progress).await })
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

async fn run(
    producer: Producer<Background>,
    load: Load,
    payload: Bytes,
    clock: RunClock,
    progress: Arc<Progress>,
) -> ProducerTally {
    let calls = (load.producer_window() / load.messages_per_send()).max(1);
    let (pending, mut acknowledged) = mpsc::channel::<(Instant, u64, Delivery)>(calls);
    let collector = {
        let progress = Arc::clone(&progress);
        tokio::spawn(async move {
            let mut tally = ProducerTally::default();
            let cut_off = tokio::time::Instant::from_std(clock.cut_off);
            while let Some((started, count, delivery)) = acknowledged.recv().await {
                match tokio::time::timeout_at(cut_off, delivery).await {
                    Ok(outcome) => {
                        let outcome = outcome
                            .map(|receipt| acked(count, &receipt))
                            .map_err(|f| f.error.to_string());
                        tally.record(&clock, started, outcome, &progress);
                    }
                    Err(_elapsed) => tally.record_cut_off(&clock),
                }
            }
            tally
        })
    };
    let mut failed = None;
    while Instant::now() < clock.deadline {
        let messages: Vec<Message> = (0..load.messages_per_send())
            .map(|_| Message {
                payload: payload.clone(),
                ..Message::default()
            })
            .collect();
        let count = messages.len() as u64;
        let started = Instant::now();
        match producer.send(messages).await {
            Ok(delivery) => {
                if pending.send((started, count, delivery)).await.is_err() {
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

/// A call's acknowledgement as the tally counts it.
fn acked(messages: u64, receipt: &iggy_route_core::SendReceipt) -> Acked {
    Acked {
        messages,
        partition: Some(receipt.partition_id),
    }
}
