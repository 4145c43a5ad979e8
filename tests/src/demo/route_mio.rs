//! The load through iggy-route on mio: one blocking `Client` shared by every producer
//! thread.

use std::sync::Arc;
use std::time::Instant;

use iggy_route_mio::{Client, Identifier, Message, Partitioning};

use super::Load;
use super::load::{Measurement, ProducerTally, Progress, RunClock, batch_key, payload};

/// Runs `load` on one OS thread per producer until its deadline, then waits for the sends
/// in flight. A blocking send cannot be abandoned from outside; the client's own request
/// timeout bounds it, and a send that returns after `clock.cut_off` is still counted.
pub fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: &Arc<Progress>,
) -> Measurement {
    let clock = RunClock::start(load);
    let payload = payload(load);
    let tallies = std::thread::scope(|scope| {
        let producers: Vec<_> = (0..load.producers)
            .map(|producer| {
                let payload = payload.clone();
                scope.spawn(move || {
                    let mut tally = ProducerTally::default();
                    for batch in 0u64.. {
                        if Instant::now() >= clock.deadline {
                            break;
                        }
                        let messages = (0..load.batch_messages)
                            .map(|_| Message {
                                payload: payload.clone(),
                                ..Message::default()
                            })
                            .collect();
                        let key = Partitioning::messages_key_u64(batch_key(producer, batch));
                        let started = Instant::now();
                        let outcome = client
                            .send(stream.clone(), topic.clone(), key, messages)
                            .map(|receipt| u64::from(receipt.messages))
                            .map_err(|error| error.to_string());
                        tally.record(&clock, started, outcome, progress);
                    }
                    tally
                })
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
