//! The load through iggy-route on tokio: one `Client` shared by every producer task.

use std::sync::Arc;

use bytes::Bytes;
use iggy_route_core::Config;
use iggy_route_tokio::{Client, ClientError, Identifier, Message, Partitioning};

use super::Load;
use super::load::{Acked, Measurement, Progress, batch_key, payload};
use super::producer::{AsyncSendPath, produce_async};

/// Runs `load` against `stream`/`topic` until its deadline, then waits for the sends in
/// flight (cut off at the drain limit).
pub async fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: Arc<Progress>,
) -> Measurement {
    let payload = payload(load);
    let paths = (0..load.producers)
        .map(|producer| TokioSend {
            client: client.clone(),
            stream: stream.clone(),
            topic: topic.clone(),
            producer,
            payload: payload.clone(),
            messages: load.messages_per_send(),
        })
        .collect();
    produce_async(paths, load, progress).await
}

/// One producer task's send path: `Client::send` of its clone of the shared client, with
/// a messages key of its own per batch.
struct TokioSend {
    client: Client,
    stream: Identifier,
    topic: Identifier,
    producer: usize,
    payload: Bytes,
    messages: usize,
}

impl AsyncSendPath for TokioSend {
    type Batch = (Partitioning, Vec<Message>);

    fn prepare(&mut self, send: u64) -> Result<Self::Batch, String> {
        let messages = (0..self.messages)
            .map(|_| Message {
                payload: self.payload.clone(),
                ..Message::default()
            })
            .collect();
        let key = Partitioning::messages_key_u64(batch_key(self.producer, send));
        Ok((key, messages))
    }

    async fn send(&mut self, (key, messages): Self::Batch) -> Result<Acked, String> {
        let (stream, topic) = (self.stream.clone(), self.topic.clone());
        self.client
            .send(stream, topic, key, messages)
            .await
            .map(|receipt| Acked {
                messages: u64::from(receipt.messages),
                partition: Some(receipt.partition_id),
            })
            .map_err(|error| error.to_string())
    }
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

/// Messages in every partition of the topic, as the metadata leader counts them once its
/// copies have caught up. The leader is a backup of every partition led elsewhere, and a
/// real cluster's backups learn of a commit up to half a second late, so a count taken at
/// once after a run can fall short of what the primaries stored: the count is read again
/// until it has not moved for longer than that (a handful of reads at most). `None` when
/// no count could be read.
pub async fn stored_messages(config: &Config, stream: u32, topic: u32) -> Option<u64> {
    const CAUGHT_UP: std::time::Duration = std::time::Duration::from_millis(600);
    const MOST_READS: usize = 10;
    let client = Client::connect(config.clone()).await.ok()?;
    let mut last = None;
    for _ in 0..MOST_READS {
        let count = match client.get_topic(stream, topic).await {
            Ok(Some(details)) => Some(
                details
                    .partitions
                    .iter()
                    .map(|partition| partition.messages_count)
                    .sum::<u64>(),
            ),
            _ => None,
        };
        if count.is_some() && count == last {
            break;
        }
        last = count.or(last);
        tokio::time::sleep(CAUGHT_UP).await;
    }
    client.shutdown().await;
    last
}
