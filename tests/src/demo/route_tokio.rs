//! The load through iggy-route on tokio: one `Client` shared by every producer task.

use std::sync::Arc;
use std::time::Instant;

use iggy_route_core::Config;
use iggy_route_tokio::{Client, ClientError, Identifier, Message, Partitioning};

use super::Load;
use super::load::{Measurement, ProducerTally, Progress, RunClock, batch_key, payload};

/// Runs `load` against `stream`/`topic` until its deadline, then waits for the sends in
/// flight (cut off at `clock.cut_off`).
pub async fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: Arc<Progress>,
) -> Measurement {
    let clock = RunClock::start(load);
    let payload = payload(load);
    let producers: Vec<_> = (0..load.producers)
        .map(|producer| {
            let (client, stream, topic) = (client.clone(), stream.clone(), topic.clone());
            let (payload, progress, load) = (payload.clone(), Arc::clone(&progress), *load);
            tokio::spawn(async move {
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
                    let send = client.send(stream.clone(), topic.clone(), key, messages);
                    let cut_off = tokio::time::Instant::from_std(clock.cut_off);
                    match tokio::time::timeout_at(cut_off, send).await {
                        Ok(outcome) => {
                            let outcome = outcome
                                .map(|receipt| u64::from(receipt.messages))
                                .map_err(|error| error.to_string());
                            tally.record(&clock, started, outcome, &progress);
                        }
                        Err(_elapsed) => {
                            tally.record_cut_off(&clock);
                            break;
                        }
                    }
                }
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

/// Finds the demo topic on a real cluster, creating the stream and the topic (with
/// `partitions` partitions) when absent. Returns their numeric ids.
pub async fn ensure_topic(
    client: &Client,
    stream_name: &str,
    topic_name: &str,
    partitions: u32,
) -> Result<(u32, u32), ClientError> {
    let stream = match client.get_stream(stream_name).await? {
        Some(found) => found.id,
        None => client.create_stream(stream_name).await?.id,
    };
    let topic = match client.get_topic(stream, topic_name).await? {
        Some(found) => found.summary.id,
        None => {
            client
                .create_topic(stream, topic_name, partitions)
                .await?
                .summary
                .id
        }
    };
    Ok((stream, topic))
}

/// Messages in every partition of the topic, counted where they were admitted: each node
/// of `config.seeds` is asked on a session of its own, and each partition counts with the
/// largest count any node reports. A real cluster's backups (and so a coordinator that
/// leads nothing) learn of a commit up to half a second late, so one node's answer right
/// after a run can fall short of what its primaries stored. `None` when no node answered.
pub async fn stored_messages(config: &Config, stream: u32, topic: u32) -> Option<u64> {
    let mut most: Vec<u64> = Vec::new();
    let mut answered = false;
    for seed in &config.seeds {
        let mut one = config.clone();
        one.seeds = vec![seed.clone()];
        let Ok(client) = Client::connect(one).await else {
            continue;
        };
        if let Ok(Some(details)) = client.get_topic(stream, topic).await {
            answered = true;
            for (index, partition) in details.partitions.iter().enumerate() {
                if most.len() <= index {
                    most.resize(index + 1, 0);
                }
                most[index] = most[index].max(partition.messages_count);
            }
        }
        client.shutdown().await;
    }
    answered.then(|| most.iter().sum())
}
