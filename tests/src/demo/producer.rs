//! The producer loop every client shares, and the one thing that differs between clients:
//! how a producer hands a batch to its client (its send path).
//!
//! Each client's module implements [`AsyncSendPath`] or [`BlockingSendPath`] for a small
//! type holding what one producer needs. A client with another send API is measured by
//! writing another such type: the deadline, the timing, the cut-off and the tally stay the
//! same, so its rows compare with the others'.

use std::sync::Arc;
use std::time::Instant;

use super::Load;
use super::load::{Acked, Measurement, ProducerTally, Progress, RunClock};

/// One producer's send path on an async client.
pub trait AsyncSendPath: Send + 'static {
    /// What one send carries (its messages and key).
    type Batch: Send;

    /// Builds send number `send` of this producer. It runs before the send's latency
    /// clock starts, so building the messages is not counted as sending them.
    fn prepare(&mut self, send: u64) -> Result<Self::Batch, String>;

    /// Sends one batch: `Ok` says what the cluster acknowledged.
    fn send(&mut self, batch: Self::Batch) -> impl Future<Output = Result<Acked, String>> + Send;

    /// Runs once after the producer's last send (the SDK signs its client out here).
    fn finish(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// One producer's send path on a blocking client.
pub trait BlockingSendPath: Send {
    /// What one send carries (its messages and key).
    type Batch;

    /// Builds send number `send` of this producer, before its latency clock starts.
    fn prepare(&mut self, send: u64) -> Result<Self::Batch, String>;

    /// Sends one batch: `Ok` says what the cluster acknowledged.
    fn send(&mut self, batch: Self::Batch) -> Result<Acked, String>;
}

/// Runs one task per path until the load's deadline, then waits for the sends in flight
/// (cut off at the drain limit) and merges the tallies.
pub async fn produce_async<P: AsyncSendPath>(
    paths: Vec<P>,
    load: &Load,
    progress: Arc<Progress>,
) -> Measurement {
    let clock = RunClock::start(load);
    clock.start_reached().await;
    let producers: Vec<_> = paths
        .into_iter()
        .enumerate()
        .map(|(producer, mut path)| {
            let progress = Arc::clone(&progress);
            tokio::spawn(async move {
                let tally = run_async(producer, &mut path, &clock, &progress).await;
                path.finish().await;
                tally
            })
        })
        .collect();
    let mut tallies = Vec::with_capacity(producers.len());
    for producer in producers {
        // A producer task only panics on a bug in the demo; losing its tally would hide it.
        tallies.push(
            producer
                .await
                .unwrap_or_else(|error| panic!("producer task failed: {error}")),
        );
    }
    Measurement::merge(&clock, tallies)
}

/// Runs one OS thread per path until the load's deadline, then waits for the sends in
/// flight. A blocking send cannot be abandoned from outside; the client's own request
/// timeout bounds it, and a send that returns after the drain limit is still counted.
pub fn produce_blocking<P: BlockingSendPath>(
    paths: Vec<P>,
    load: &Load,
    progress: &Progress,
) -> Measurement {
    let clock = RunClock::start(load);
    clock.wait_for_start();
    let tallies = std::thread::scope(|scope| {
        let producers: Vec<_> = paths
            .into_iter()
            .enumerate()
            .map(|(producer, mut path)| {
                scope.spawn(move || run_blocking(producer, &mut path, &clock, progress))
            })
            .collect();
        producers
            .into_iter()
            // A producer thread only panics on a bug in the demo; losing its tally would
            // hide it.
            .map(|producer| {
                producer
                    .join()
                    .unwrap_or_else(|_| panic!("producer thread panicked"))
            })
            .collect()
    });
    Measurement::merge(&clock, tallies)
}

async fn run_async<P: AsyncSendPath>(
    producer: usize,
    path: &mut P,
    clock: &RunClock,
    progress: &Progress,
) -> ProducerTally {
    let mut tally = ProducerTally::default();
    for send in 0u64.. {
        let due = clock.due(producer, send);
        if !clock.may_start(due) {
            break;
        }
        let batch = match path.prepare(send) {
            Ok(batch) => batch,
            Err(error) => {
                // Building fails the same way every time: one failure says it.
                tally.record(clock, Instant::now(), Err(error), progress);
                break;
            }
        };
        let started = RunClock::wait_until_due(due).await;
        let cut_off = tokio::time::Instant::from_std(clock.cut_off);
        match tokio::time::timeout_at(cut_off, path.send(batch)).await {
            Ok(outcome) => tally.record(clock, started, outcome, progress),
            Err(_elapsed) => {
                tally.record_cut_off(clock);
                break;
            }
        }
    }
    tally
}

fn run_blocking<P: BlockingSendPath>(
    producer: usize,
    path: &mut P,
    clock: &RunClock,
    progress: &Progress,
) -> ProducerTally {
    let mut tally = ProducerTally::default();
    for send in 0u64.. {
        let due = clock.due(producer, send);
        if !clock.may_start(due) {
            break;
        }
        let batch = match path.prepare(send) {
            Ok(batch) => batch,
            Err(error) => {
                tally.record(clock, Instant::now(), Err(error), progress);
                break;
            }
        };
        let started = RunClock::block_until_due(due);
        let outcome = path.send(batch);
        tally.record(clock, started, outcome, progress);
    }
    tally
}
