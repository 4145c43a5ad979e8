//! The load through the published SDK `iggy 0.11.0`, the baseline: one `IggyClient` per
//! producer task, as an application with N independent producers would hold them, each
//! sending keyed batches with `Partitioning::messages_key`.

use std::sync::Arc;
use std::time::Instant;

use iggy::prelude::{
    Client as _, Identifier, IggyClient, IggyError, IggyMessage, MessageClient as _, Partitioning,
};

use super::Load;
use super::load::{Measurement, ProducerTally, Progress, RunClock, batch_key, payload};

/// Connects and signs in `count` clients through the node of `connection_string` (the
/// 0.11.0 SDK takes one address).
pub async fn connect(connection_string: &str, count: usize) -> Result<Vec<IggyClient>, IggyError> {
    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let client = IggyClient::from_connection_string(connection_string)?;
        client.connect().await?;
        clients.push(client);
    }
    Ok(clients)
}

/// Runs `load` with one producer task per client until its deadline, then waits for the
/// sends in flight (cut off at `clock.cut_off`).
pub async fn produce(
    clients: Vec<IggyClient>,
    stream: u32,
    topic: u32,
    load: &Load,
    progress: Arc<Progress>,
) -> Result<Measurement, IggyError> {
    let clock = RunClock::start(load);
    let payload = payload(load);
    let (stream, topic) = (Identifier::numeric(stream)?, Identifier::numeric(topic)?);
    let producers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(producer, client)| {
            let (stream, topic) = (stream.clone(), topic.clone());
            let (payload, progress, load) = (payload.clone(), Arc::clone(&progress), *load);
            tokio::spawn(async move {
                let mut tally = ProducerTally::default();
                for batch in 0u64.. {
                    if Instant::now() >= clock.deadline {
                        break;
                    }
                    let built: Result<Vec<IggyMessage>, IggyError> = (0..load.batch_messages)
                        .map(|_| IggyMessage::builder().payload(payload.clone()).build())
                        .collect();
                    let mut messages = match built {
                        Ok(messages) => messages,
                        Err(error) => {
                            tally.record(&clock, Instant::now(), Err(error.to_string()), &progress);
                            break;
                        }
                    };
                    let key = Partitioning::messages_key_u64(batch_key(producer, batch));
                    let count = messages.len() as u64;
                    let started = Instant::now();
                    let send = client.send_messages(&stream, &topic, &key, &mut messages);
                    let cut_off = tokio::time::Instant::from_std(clock.cut_off);
                    match tokio::time::timeout_at(cut_off, send).await {
                        Ok(outcome) => {
                            let outcome = outcome.map(|_| count).map_err(|e| e.to_string());
                            tally.record(&clock, started, outcome, &progress);
                        }
                        Err(_elapsed) => {
                            tally.record_cut_off(&clock);
                            break;
                        }
                    }
                }
                let _ = client.shutdown().await;
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
    Ok(Measurement::merge(&clock, tallies))
}
